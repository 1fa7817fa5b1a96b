//! What the runner drives: a [`geoflash::Index`] of any family (the
//! R-tree family, the FOR-tree, the xBR+-tree, the grid files; every
//! store, the sHR-tree among them: an R*-tree whose store hints its
//! internal nodes to the fast tier of a hybrid device) as a
//! [`geoflash::SpatialIndex`] (the operations every step runs), with the
//! measurement around it that [`Target`] adds, so that every step (build,
//! range, kNN, point groups, mixed, delete, checkpoint) is measured the same
//! way whatever the index is.
//!
//! A new index family implements [`geoflash::SpatialIndex`] in the library
//! and comes through the library's `IndexSpec`, whose key table a
//! workload's `[[index]]` entry is read through: the workbench names no
//! kind.
use std::sync::Arc;

use geoflash::engine::device::PageDevice;
use geoflash::engine::{BatchResult, KnnResult, QueryResult};
use geoflash::metrics::{PhaseTimes, Stats};
use geoflash::{Index, SpatialIndex};

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
pub struct Target {
    index: Index,
}

impl Target {
    /// Wraps `index`.
    pub fn new(index: Index) -> Self {
        Target { index }
    }

    /// The index.
    pub fn index(&self) -> &dyn SpatialIndex {
        &self.index
    }

    /// The index, for a step's operations.
    pub fn index_mut(&mut self) -> &mut dyn SpatialIndex {
        &mut self.index
    }

    /// The device the index lives on.
    pub fn device(&self) -> &Arc<dyn PageDevice> {
        self.index.device()
    }

    /// Resets the counters of every device the index uses.
    pub fn reset_device_stats(&self) {
        self.index.device().reset_stats();
        if let Some(log) = self.index.log_device() {
            log.reset_stats();
        }
    }

    /// Copies the device counters (a separate log's I/O added, as
    /// [`Index::stats`] adds it) into `s`.
    pub fn device_stats_into(&self, s: &mut Stats) {
        let full = self.index.stats(&s.label);
        s.io = full.io;
        s.sim = full.sim;
        s.device_simulated = full.device_simulated;
    }

    /// The time of the index front end's phases (index, filter,
    /// refinement, recovery), differenced per step.
    pub fn phase_times(&self) -> PhaseTimes {
        self.index.phase_times()
    }

    /// Bytes the index occupies on its device now.
    pub fn index_bytes(&self) -> u64 {
        self.index
            .structure()
            .pages_in_use()
            .saturating_mul(self.index.manifest().page_size as u64)
    }

    /// The index behind the target (crash and recover needs its directory).
    pub fn as_index(&self) -> &Index {
        &self.index
    }

    /// The index behind the target, for the operations only an
    /// [`Index`] has (batches).
    pub fn as_index_mut(&mut self) -> &mut Index {
        &mut self.index
    }

    /// Gives back the index behind the target.
    pub fn into_index(self) -> Index {
        self.index
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
