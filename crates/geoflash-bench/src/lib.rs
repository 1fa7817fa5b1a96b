//! The geoflash workbench: datasets (files, PostGIS, generators), query
//! windows, workload files, the runner, the results store (SQLite or
//! PostgreSQL), reports, and the device benchmark behind `geoflash devbench`.
#![deny(missing_docs)]
#![deny(unsafe_code)]
#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

/// `FromStr` for an enum of unit variants from their spellings:
/// `from_names!(Scale, "scale", "smoke" => Smoke, "small" => Small)`. An
/// unknown spelling is an error that names `what` and lists the spellings
/// ("unknown scale \"x\": use smoke or small").
macro_rules! from_names {
    ($t:ident, $what:literal, $($name:literal => $v:ident),+ $(,)?) => {
        impl std::str::FromStr for $t {
            type Err = geoflash::Error;
            fn from_str(s: &str) -> geoflash::Result<Self> {
                match s {
                    $($name => Ok($t::$v),)+
                    _ => Err(geoflash::Error::invalid(format!(
                        "unknown {} {s:?}: use {}",
                        $what,
                        $crate::or_list(&[$($name),+])
                    ))),
                }
            }
        }
    };
}

/// `a`, `a or b`, `a, b or c`: the spellings an error offers.
fn or_list(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

pub mod devbench;
pub mod formats;
pub mod generate;
pub mod import;
pub mod pg;
// Test support: with the `test-support` feature only.
#[cfg(feature = "test-support")]
pub mod pg_cluster;
pub mod postgis;
pub mod progress;
pub mod read_ahead;
pub mod report;
pub mod results;
pub mod runner;
pub mod target;
pub mod windows;
pub mod workload;
