//! What the runner drives: an index of any family as a
//! [`geoflash::SpatialIndex`] (the operations every step runs), with the
//! measurement around it that this trait adds, so that every step (build,
//! range, kNN, point groups, mixed, delete, checkpoint) is measured the same
//! way whatever the index is.
//!
//! - [`tree`]: the R-tree family, the FOR-tree and the xBR+-tree through
//!   [`geoflash::Index`] (every store, the sHR-tree among them: an R*-tree
//!   whose store hints its internal nodes to the fast tier of a hybrid
//!   device);
//! - [`grid`]: the grid files of [`geoflash::grid`] (`grid`, `gffm`,
//!   `lbgrid`, `hgrid`) through [`geoflash::grid::GridIndex`], which index
//!   **points**.
//!
//! A new index family implements [`geoflash::SpatialIndex`] in the library,
//! [`Target`] here, and adds its kinds to [`crate::workload::IndexFamily`].
use std::sync::Arc;

use geoflash::index::query::{BatchResult, KnnResult, QueryResult};
use geoflash::metrics::{PhaseTimes, Stats};
use geoflash::storage::PageDevice;
use geoflash::{Index, SpatialIndex};

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

impl Answer {
    /// Adds the answer to a step's query counters.
    pub fn add_to(self, s: &mut Stats) {
        s.query_candidates += self.candidates;
        s.query_results += self.results;
    }
}

impl From<&QueryResult> for Answer {
    fn from(r: &QueryResult) -> Self {
        Answer {
            candidates: r.stats.candidates,
            results: r.hits.len() as u64,
        }
    }
}

impl From<&KnnResult> for Answer {
    fn from(r: &KnnResult) -> Self {
        Answer {
            candidates: r.stats.candidates,
            results: r.neighbors.len() as u64,
        }
    }
}

/// A group's answers summed.
impl From<&BatchResult> for Answer {
    fn from(r: &BatchResult) -> Self {
        r.results.iter().fold(Answer::default(), |a, q| {
            let b = Answer::from(q);
            Answer {
                candidates: a.candidates + b.candidates,
                results: a.results + b.results,
            }
        })
    }
}

/// An index the runner measures (see the module docs): the index itself,
/// and its devices and sizes. Counters are read before and after each step;
/// the runner differences them.
pub trait Target {
    /// The index.
    fn index(&self) -> &dyn SpatialIndex;
    /// The index, for a step's operations.
    fn index_mut(&mut self) -> &mut dyn SpatialIndex;
    /// The device the index lives on.
    fn device(&self) -> &Arc<dyn PageDevice>;
    /// Resets the counters of every device the index uses.
    fn reset_device_stats(&self);
    /// Copies the device counters (and a separate log's) into `s`.
    fn device_stats_into(&self, s: &mut Stats);
    /// The time of the index front end's phases (index, filter,
    /// refinement, recovery), differenced per step; zeros by default.
    fn phase_times(&self) -> PhaseTimes {
        PhaseTimes::default()
    }
    /// Bytes the index occupies on its device now.
    fn index_bytes(&self) -> u64;
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
