//! What the runner drives: an index of any family behind one trait, so that
//! every step (build, range, kNN, point groups, mixed, delete, checkpoint)
//! is measured the same way whatever the index is.
//!
//! - [`tree`]: the R-tree family through [`geoflash::Index`] (every store,
//!   the sHR-tree among them: an R*-tree whose store hints its internal
//!   nodes to the fast tier of a hybrid device);
//! - [`grid`]: the grid files of [`geoflash::grid`] (`grid`, `gffm`,
//!   `lbgrid`, `hgrid`), which index **points**.
//!
//! A new index family implements [`Target`] in a module of its own and adds
//! its kinds to [`crate::workload::IndexFamily`].
use std::sync::Arc;

use geoflash::geom::{Point, Rect};
use geoflash::index::query::Predicate;
use geoflash::index::TreeCounters;
use geoflash::metrics::{PhaseTimes, Stats};
use geoflash::storage::PageDevice;
use geoflash::store::StoreStats;
use geoflash::{Index, Result};

pub mod grid;
pub mod tree;

/// What a query did: candidates of the filter step and results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Answer {
    /// Candidates (filter step).
    pub candidates: u64,
    /// Results.
    pub results: u64,
}

/// An index the runner measures (see the module docs). Counters are read
/// before and after each step; the runner differences them.
pub trait Target {
    /// The device the index lives on.
    fn device(&self) -> &Arc<dyn PageDevice>;
    /// Resets the counters of every device the index uses.
    fn reset_device_stats(&self);
    /// Copies the device counters (and a separate log's) into `s`.
    fn device_stats_into(&self, s: &mut Stats);
    /// The index's own counters, as store counters (differenced per step).
    fn counters(&self) -> StoreStats;
    /// What the index algorithms and the index front end measured
    /// (splits, reinsertions, merges; index, filter, refinement and
    /// recovery times), differenced per step; zeros by default.
    fn index_counters(&self) -> (TreeCounters, PhaseTimes) {
        Default::default()
    }
    /// Bytes the index occupies on its device now.
    fn index_bytes(&self) -> u64;
    /// Inserts object `id` with box `r`.
    fn insert(&mut self, id: u64, r: Rect) -> Result<()>;
    /// Deletes object `id` with box `r`.
    fn delete(&mut self, id: u64, r: Rect) -> Result<()>;
    /// A range query.
    fn query(&mut self, window: Rect, predicate: Predicate) -> Result<Answer>;
    /// The `k` nearest objects to `p`.
    fn knn(&mut self, p: Point, k: usize) -> Result<Answer>;
    /// Looks up a group of points at once (exact point queries); results
    /// count the objects found.
    fn point_group(&mut self, points: &[Point]) -> Result<Answer>;
    /// Flushes and syncs.
    fn checkpoint(&mut self) -> Result<()>;
    /// The tree index behind the target, if it is one (crash and recover
    /// needs its log and directory).
    fn as_index(&self) -> Option<&Index> {
        None
    }
    /// Gives back the tree index behind the target, if it is one.
    fn into_index(self: Box<Self>) -> Option<Index> {
        None
    }
}

/// The note of a two-tier device's counters: reads and writes per tier,
/// pages on the fast tier and fallbacks (empty for a device of one tier).
pub fn tier_note(dev: &dyn PageDevice) -> String {
    let Some(t) = dev.tiers() else {
        return String::new();
    };
    format!(
        "fast: {} pages read in {} batches, {} written; slow: {} read in {} batches, {} written; \
         pages on fast tier {} of {}; fallbacks {}",
        t.fast.io.pages_read,
        t.fast.io.read_batches,
        t.fast.io.pages_written,
        t.slow.io.pages_read,
        t.slow.io.read_batches,
        t.slow.io.pages_written,
        t.fast_pages,
        t.fast_limit,
        t.fallbacks
    )
}
