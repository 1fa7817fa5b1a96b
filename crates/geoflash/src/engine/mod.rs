//! The front door: what the command line, the workbench and the Python
//! package go through to describe an index, so that a setting means the
//! same, and is refused with the same message, wherever it is given.
//!
//! [`IndexSpec`] takes an index's settings as `key = value` text (a flag, a
//! workload key, a keyword argument), checks every combination in one
//! place and lowers them to the [`IndexOptions`] an
//! [`Index`] is created from.
//!
//! Beside the spec, this module re-exports what a front end works with
//! (the index and its options, queries and their answers, batches, the
//! object geometries, durability and recovery, the directory's access and
//! files, sizes, the product defaults, and in [`device`] the devices a
//! workbench measures and traces), so that a front end — the command line,
//! the workbench, the Python package — imports `engine`, `geom` and
//! `metrics` and none of the layers beneath.
pub mod reserve;
mod settings;
mod spec;
#[cfg(test)]
mod spec_tests;

pub use settings::Setting;
pub use spec::{IndexSpec, KeyStyle, SpecError};

pub use crate::cache::PolicyKind;
pub use crate::config::{
    EfindSpec, FastSpec, FortreeSpec, MemorySpec, PlainSpec, StoreKind, StoreSpec, StructureConfig,
    StructureSpec, TreeSpec, XbrSpec, KIND_NAMES,
};
pub use crate::defaults;
pub use crate::error::{Error, ErrorKind, Result};
pub use crate::grid::hot::HybridOptions;
pub use crate::grid::GridKind;
pub use crate::grid::{GridConfig, GridOptions, GridSettings};
pub use crate::index::fortree::{FortreeConfig, FortreeReport};
pub use crate::index::inspect::{InspectReport, LevelReport, FILL_BUCKETS};
pub use crate::index::query::{
    BatchKeys, BatchResult, Hit, KeyResult, KnnResult, Neighbor, Predicate, QueryResult,
    QueryStats, Selection, Window,
};
pub use crate::index::refine::satisfies;
pub use crate::index::xbr::{Domain, Quadrant};
pub use crate::index::xbr::{XbrConfig, XbrReport};
pub use crate::index::{
    BulkMethod, ExternalBulkConfig, ExternalBulkReport, IndexKind, Leaf, ReadMode,
    MIN_MEMORY_BUDGET,
};
pub use crate::index::{SplitKind, TreeCounters, TreeParams};
pub use crate::index_dir::{
    BatchDurability, Index, IndexOptions, Inspection, OpenBatch, Verified, WARM_BATCH,
};
pub use crate::manifest::{write_atomic, Access, DirLock, MANIFEST_FILE};
pub use crate::manifest::{Crs, Manifest};
pub use crate::objects::geometry::{bounding_rect, from_wkb, to_wkb, window_geometry};
pub use crate::objects::CompactReport;
pub use crate::objects::{Committed, Geometry, Heap, Prepared};
pub use crate::page::max_entries;
pub use crate::spatial::SpatialIndex;
pub use crate::staging::{
    adopt_interrupted, discard_empty_interrupted, remove_abandoned, request_stop, stop_requested,
};
pub use crate::store::efind::{
    EfindConfig, FlushPolicy, ReadBufferMode, RestartReport, TemporalControl,
};
pub use crate::store::fast::{FastConfig, FastPolicy};
pub use crate::store::log::{Durability, LogFormat, RecoveryMode, TailRepair};
pub use crate::store::placement::Placement;
pub use crate::store::{OpId, StoreStats};
pub use crate::units::parse_size;

/// The record map of a front end whose ids are not the engine's keys (the
/// Python package: any `i64`, duplicates allowed, pickled objects), with
/// its snapshot (`pyrecords.dat`) and its log of changes (`pyrecords.log`).
pub mod records {
    pub use crate::records::log::{Change, RecordLog, Replay, LOG_FILE};
    pub use crate::records::{Records, RECORDS_FILE};
}

/// The devices an index lives on, as a workbench measures them: the
/// parsed device spec and what it opens, the page I/O trait, its extension
/// (counters, tiers, simulated clock) and the counters, the in-memory
/// device, and I/O traces (recording one of a device, replaying one on
/// another).
pub mod device {
    pub use crate::storage::counted::Counted;
    pub use crate::storage::file::{FileDeviceOptions, IoEngine};
    pub use crate::storage::flashsim::{FlashSimConfig, FtlMode, GcPolicy};
    pub use crate::storage::hddsim::HddSimConfig;
    pub use crate::storage::mem::{MemDevice, MemIo};
    pub use crate::storage::spec::DeviceSpec;
    pub use crate::storage::trace::{
        replay_with_progress, ReplaySummary, Trace, TraceDevice, TraceOp,
    };
    pub use crate::storage::{
        DeviceExt, DeviceGeometry, DeviceStats, IoCounters, PageDevice, PageId, SimCounters, Tier,
        TierReport,
    };
}
