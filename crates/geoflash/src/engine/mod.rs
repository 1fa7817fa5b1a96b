//! The front door: what the command line, the workbench and the Python
//! package go through to describe an index, so that a setting means the
//! same, and is refused with the same message, wherever it is given.
//!
//! [`IndexSpec`] takes an index's settings as `key = value` text (a flag, a
//! workload key, a keyword argument), checks every combination in one
//! place and lowers them to the [`IndexOptions`](crate::IndexOptions) an
//! [`Index`](crate::Index) is created from.
//!
//! Beside the spec, this module re-exports what a front end works with
//! (the index and its options, queries and their answers, batches, the
//! object geometries, the directory's access and files, sizes and the
//! product defaults), so that a front end imports `engine`, `geom` and
//! `metrics` and none of the layers beneath. The Python package does; the
//! command line and the workbench still reach into `storage`, `store` and
//! `index` for their device benchmarks, traces and workloads.
mod spec;
#[cfg(test)]
mod spec_tests;

pub use spec::{IndexSpec, KeyStyle, SpecError};

pub use crate::defaults;
pub use crate::error::{Error, Result};
pub use crate::index::query::{
    BatchResult, Hit, KnnResult, Neighbor, Predicate, QueryResult, QueryStats, Selection, Window,
};
pub use crate::index::{BulkMethod, IndexKind, Leaf, ReadMode};
pub use crate::index_dir::{BatchDurability, Index, IndexOptions, OpenBatch};
pub use crate::manifest::{write_atomic, Access, DirLock, MANIFEST_FILE};
pub use crate::objects::geometry::from_wkb;
pub use crate::objects::Geometry;
pub use crate::page::max_entries;
pub use crate::spatial::SpatialIndex;
pub use crate::units::parse_size;
