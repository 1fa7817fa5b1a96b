//! The geoflash workbench: device benchmarks now; datasets, workloads and the results store later.
#![deny(missing_docs)]
