//! PostgreSQL connection URLs, shared by the results store
//! (`--results postgresql://…`) and PostGIS datasets: recognising them,
//! writing them without their password, and connecting (cargo feature
//! `postgres`).
//!
//! URLs follow libpq's form, `postgresql://user[:password]@host[:port]/dbname[?key=value&…]`
//! (`postgres://` also). The password may also come from the environment
//! variable `PGPASSWORD` when the URL has none (the `postgres` crate reads
//! neither `PGPASSWORD` nor `~/.pgpass` itself). Connections are not
//! encrypted (no TLS); a URL asking for `sslmode=require` fails to connect
//! with an error saying so. Without a `connect_timeout` in the URL, giving
//! up on a server that does not answer takes 10 seconds.

/// True when `s` is a PostgreSQL connection URL (`postgresql://` or `postgres://`).
pub fn is_url(s: &str) -> bool {
    let lower = s.trim_start().to_ascii_lowercase();
    lower.starts_with("postgresql://") || lower.starts_with("postgres://")
}

/// `url` without its password (in the user information or a `password=`
/// parameter), for messages and for what is recorded in results stores.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{user}@{host}")
        }
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let kept: Vec<&str> = query
                .split('&')
                .filter(|kv| !kv.to_ascii_lowercase().starts_with("password="))
                .collect();
            if kept.is_empty() {
                path.to_string()
            } else {
                format!("{path}?{}", kept.join("&"))
            }
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// The error for a PostgreSQL URL in a build without the `postgres` feature.
#[cfg(not(feature = "postgres"))]
pub fn unsupported(url: &str) -> geoflash::Error {
    geoflash::Error::invalid(format!(
        "{}: this geoflash was built without PostgreSQL support (cargo feature `postgres`)",
        redact(url)
    ))
}

#[cfg(feature = "postgres")]
pub use client::{connect, message};

#[cfg(feature = "postgres")]
mod client {
    use std::time::Duration;

    use geoflash::{Error, Result};

    use super::redact;

    /// The text of a `postgres` error: the server's message (with its detail
    /// and hint) for database errors, else the error and its causes.
    pub fn message(e: &postgres::Error) -> String {
        if let Some(db) = e.as_db_error() {
            let mut m = db.message().to_string();
            if let Some(d) = db.detail() {
                m.push_str(&format!(" ({d})"));
            }
            if let Some(h) = db.hint() {
                m.push_str(&format!("; hint: {h}"));
            }
            return m;
        }
        let mut m = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            m.push_str(&format!(": {s}"));
            source = s.source();
        }
        m
    }

    /// Connects to the server of `url` (see the module's documentation).
    /// A malformed URL is invalid input; a server that cannot be reached is
    /// an I/O error naming the URL without its password.
    pub fn connect(url: &str) -> Result<postgres::Client> {
        let shown = redact(url);
        let mut cfg: postgres::Config = url.trim().parse().map_err(|e: postgres::Error| {
            Error::invalid(format!(
                "{shown}: not a PostgreSQL connection URL: {}",
                message(&e)
            ))
        })?;
        if cfg.get_password().is_none() {
            if let Ok(p) = std::env::var("PGPASSWORD") {
                cfg.password(p);
            }
        }
        if cfg.get_connect_timeout().is_none() {
            cfg.connect_timeout(Duration::from_secs(10));
        }
        if cfg.get_application_name().is_none() {
            cfg.application_name("geoflash");
        }
        cfg.connect(postgres::NoTls).map_err(|e| Error::Io {
            path: shown.into(),
            page: None,
            source: std::io::Error::other(format!("cannot connect to PostgreSQL: {}", message(&e))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_passwords() {
        assert!(is_url("postgresql://u@h/db"));
        assert!(is_url("POSTGRES://h"));
        assert!(!is_url("results.sqlite"));
        assert!(!is_url("postgresql.sqlite"));
        assert_eq!(
            redact("postgresql://alice:s3cret@db.example:5433/bench?sslmode=disable&password=x"),
            "postgresql://alice@db.example:5433/bench?sslmode=disable"
        );
        assert_eq!(redact("postgres://h/db?password=x"), "postgres://h/db");
        assert_eq!(redact("postgresql://bob@h"), "postgresql://bob@h");
        assert_eq!(redact("postgresql://:pw@h/d"), "postgresql://@h/d");
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn unreachable_and_malformed() {
        // Port 1 on loopback: nothing listens there, the connection is refused at once.
        let e = connect("postgresql://geoflash:hunter2@127.0.0.1:1/db")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("postgresql://geoflash@127.0.0.1:1/db"), "{e}");
        assert!(e.contains("cannot connect"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        let e = connect("postgresql://u:pw@h:notaport/db").err().unwrap();
        assert!(e.is_user_error(), "{e}");
        assert!(!e.to_string().contains("pw@"), "{e}");
    }
}
