//! The geoflash workbench: datasets (files, PostGIS, generators), query
//! windows, workload files, the runner, the results store (SQLite or
//! PostgreSQL), reports, and the device benchmark behind `geoflash devbench`.
#![deny(missing_docs)]
#![deny(unsafe_code)]
#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

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
pub mod report;
pub mod results;
pub mod runner;
pub mod target;
pub mod windows;
pub mod workload;
