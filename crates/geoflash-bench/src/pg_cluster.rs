//! A throw-away PostgreSQL server for tests: `initdb` into a temporary
//! directory, `pg_ctl start` on a free loopback port, one database per
//! test (with PostGIS where asked), stopped and removed when the process
//! that started it ends.
//!
//! The server binaries (`initdb`, `pg_ctl`, `postgres`) are looked for in
//! `$GEOFLASH_PG_BIN`, on `PATH`, then in Debian's
//! `/usr/lib/postgresql/<version>/bin` (newest first). When none are found,
//! the missing prerequisite goes through [`geoflash::testenv`]: outside CI
//! [`TempCluster::shared`] prints why on standard error and returns `None`,
//! and the tests that need a server are skipped; under CI (`CI=true`, as
//! `.ci/run` sets) it fails the test instead (`scripts/setup.sh` installs
//! the Debian packages `postgresql` and `postgis` so that `make test` runs
//! them). `initdb` refuses to run as root: as root, the cluster
//! belongs to the user `postgres` (Debian's package creates it) and the
//! server commands run through `runuser`.
//!
//! The server runs with `fsync=off` (its data is thrown away). A watchdog
//! shell process stops it and removes its directory once the test process
//! has exited, however it exits (even killed), so a shared cluster needs
//! no destructor.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use geoflash::{Error, Result};

/// The superuser of a test cluster (trust authentication on loopback).
pub const SUPERUSER: &str = "geoflash";

/// A running throw-away PostgreSQL server.
#[derive(Debug)]
pub struct TempCluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    /// The account the server runs as when this process is root.
    run_as: Option<String>,
}

fn failed(what: &str, e: impl std::fmt::Display) -> Error {
    Error::invalid(format!("test PostgreSQL cluster: {what}: {e}"))
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`, if any.
pub fn find_binaries() -> Option<PathBuf> {
    let has_all = |d: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| d.join(b).is_file())
    };
    if let Some(d) = std::env::var_os("GEOFLASH_PG_BIN").map(PathBuf::from) {
        return has_all(&d).then_some(d);
    }
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(d) = std::env::split_paths(&path).find(|d| has_all(d)) {
            // resolve symbolic links (Debian's /usr/local/bin links) to the server's own directory
            let real = d
                .join("initdb")
                .canonicalize()
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf));
            return Some(real.filter(|r| has_all(r)).unwrap_or(d));
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| has_all(d))
        .collect();
    versions.sort();
    versions.pop().map(|(_, d)| d)
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// The uid and gid of account `user` (from `/etc/passwd`).
fn account(user: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&user))
            .then(|| Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?)))?
    })
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| failed("no free port", e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| failed("no free port", e))
}

static DATABASES: AtomicU32 = AtomicU32::new(0);

impl TempCluster {
    /// Starts a new cluster; when the server binaries cannot be found,
    /// `Ok(None)` (with a message on standard error) outside CI and an
    /// error under CI ([`geoflash::testenv::prerequisite_missing`]).
    pub fn start() -> Result<Option<TempCluster>> {
        let Some(bin) = find_binaries() else {
            geoflash::testenv::prerequisite_missing(
                "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in \
                 $GEOFLASH_PG_BIN, on PATH or in /usr/lib/postgresql/*/bin; \
                 install the Debian packages postgresql and postgis (scripts/setup.sh does)",
            )
            .map_err(|e| Error::invalid(e.to_string()))?;
            return Ok(None);
        };
        let run_as = is_root().then(|| "postgres".to_string());
        let dir = std::env::temp_dir().join(format!(
            "geoflash-pg-{}-{}",
            std::process::id(),
            DATABASES.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| failed(&dir.display().to_string(), e))?;
        if let Some(user) = &run_as {
            let (uid, gid) = account(user).ok_or_else(|| {
                failed(
                    "running as root",
                    format!(
                        "initdb refuses root and there is no account {user:?} to run the server as"
                    ),
                )
            })?;
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .map_err(|e| failed(&dir.display().to_string(), e))?;
        }
        let mut cluster = TempCluster {
            bin,
            dir,
            port: 0,
            run_as,
        };
        cluster.watchdog()?;
        let data = cluster.dir.join("data");
        cluster.run(
            "initdb",
            &[
                "-D",
                &data.display().to_string(),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--no-locale",
                "-E",
                "UTF8",
                "-N",
            ],
        )?;
        let mut last = None;
        for _ in 0..3 {
            cluster.port = free_port()?;
            let opts = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c synchronous_commit=off",
                cluster.port,
                cluster.dir.display()
            );
            match cluster.run(
                "pg_ctl",
                &[
                    "start",
                    "-w",
                    "-t",
                    "60",
                    "-D",
                    &data.display().to_string(),
                    "-l",
                    &cluster.dir.join("server.log").display().to_string(),
                    "-o",
                    &opts,
                ],
            ) {
                Ok(()) => return Ok(Some(cluster)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| failed("pg_ctl start", "failed")))
    }

    /// The cluster shared by the tests of this process, started by the
    /// first caller; `None` when the binaries cannot be found outside CI.
    /// Panics (a test failure) when they are found but the server does not
    /// start, or are missing under CI.
    pub fn shared() -> Option<&'static TempCluster> {
        static SHARED: OnceLock<Option<TempCluster>> = OnceLock::new();
        SHARED
            .get_or_init(|| match TempCluster::start() {
                Ok(c) => c,
                Err(e) => panic!("{e}"),
            })
            .as_ref()
    }

    /// Runs server command `cmd` (as the server's account when root).
    fn run(&self, cmd: &str, args: &[&str]) -> Result<()> {
        let exe = self.bin.join(cmd);
        let mut c = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        let out = c
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| failed(cmd, e))?;
        if !out.status.success() {
            let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            return Err(failed(
                cmd,
                format!(
                    "{}\n{}{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr),
                    log.lines().rev().take(10).collect::<Vec<_>>().join("\n")
                ),
            ));
        }
        Ok(())
    }

    /// Starts the watchdog: once this process has exited, the server is
    /// stopped and its directory removed.
    fn watchdog(&self) -> Result<()> {
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = match &self.run_as {
            Some(u) => format!("runuser -u {u} -- '{}'", pg_ctl.display()),
            None => format!("'{}'", pg_ctl.display()),
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             {stop} stop -D '{dir}/data' -m immediate >/dev/null 2>&1; rm -rf '{dir}'",
            pid = std::process::id(),
            dir = self.dir.display()
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| failed("watchdog", e))?;
        Ok(())
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgresql://{SUPERUSER}@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates a new, empty database (named after `prefix`, unique in the
    /// cluster), with the PostGIS extension when `postgis`; returns its URL.
    #[cfg(feature = "postgres")]
    pub fn create_database(&self, prefix: &str, postgis: bool) -> Result<String> {
        let name: String = format!("{prefix}_{}", DATABASES.fetch_add(1, Ordering::Relaxed))
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect();
        let mut admin = crate::pg::connect(&self.url("postgres"))?;
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .map_err(|e| failed("create database", crate::pg::message(&e)))?;
        let url = self.url(&name);
        if postgis {
            let mut c = crate::pg::connect(&url)?;
            c.batch_execute("CREATE EXTENSION postgis").map_err(|e| {
                failed(
                    "CREATE EXTENSION postgis (install the Debian package postgis, or postgresql-<version>-postgis-3)",
                    crate::pg::message(&e),
                )
            })?;
        }
        Ok(url)
    }

    /// Stops the server now (also done on drop and by the watchdog at exit).
    pub fn stop(&self) -> Result<()> {
        self.run(
            "pg_ctl",
            &[
                "stop",
                "-D",
                &self.dir.join("data").display().to_string(),
                "-m",
                "fast",
            ],
        )
    }
}

impl Drop for TempCluster {
    /// Stops the server and removes its directory (a cluster from
    /// [`TempCluster::shared`] is never dropped: its watchdog does this).
    fn drop(&mut self) {
        let _ = self.run(
            "pg_ctl",
            &[
                "stop",
                "-D",
                &self.dir.join("data").display().to_string(),
                "-m",
                "immediate",
            ],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
