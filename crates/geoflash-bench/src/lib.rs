//! The geoflash workbench. Today: the device benchmark behind `geoflash devbench`.
//! Datasets, workload files, the runner and the results store follow.
#![deny(missing_docs)]
#![deny(unsafe_code)]
#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod devbench;
pub mod formats;
pub mod generate;
pub mod import;
pub mod report;
pub mod results;
pub mod runner;
pub mod windows;
pub mod workload;
