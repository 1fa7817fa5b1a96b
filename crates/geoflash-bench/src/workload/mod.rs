//! Workload files (TOML): datasets, index configurations, the cross product
//! of parameter lists, and the steps run on each configuration. The format
//! is documented in `docs/workbench.md`; [`Workload::parse`] checks
//! everything it can before anything runs, and every error names the file,
//! the line and the key.
//!
//! ```toml
//! name = "example"
//! [[dataset]]
//! name = "uniform"
//! generator = "uniform"
//! geometry = "box"
//! count = { smoke = 2000, small = 100000, full = 1000000 }
//! order = ["random", "hilbert"]          # a list: one configuration per value
//!
//! [[index]]
//! name = "efind"
//! store = "efind"
//! page_size = ["2KiB", "4KiB"]
//! device = "flashsim:preset=seed-tc58"
//! efind = { flush_policy = ["mh", "mhao"] }
//!
//! [[step]]
//! kind = "build"
//! [[step]]
//! kind = "range_queries"
//! selectivity = ["0.01%", "0.1%"]
//! count = 100
//! ```
//!
//! The module holds the model a workload is parsed into (`model`), the
//! parser with its located errors (`parse`, which reads an `[[index]]`
//! entry through the library's key table, `geoflash::IndexSpec`) and the
//! expansion of parameter lists into configurations (`expand`).
mod expand;
mod model;
mod parse;
#[cfg(test)]
mod tests;

pub(crate) use model::step_operations;
pub use model::{
    predicate_name, BuildMethod, Configuration, DatasetConfig, DatasetSource, IndexConfig,
    MixedQuery, Scale, Step, WindowSource, Workload, MAX_STEP_OPERATIONS, WORKBENCH_DEFAULTS,
};
