//! The tree families as a [`Target`]: a [`geoflash::Index`] with any store.
use std::sync::Arc;

use geoflash::metrics::{PhaseTimes, Stats};
use geoflash::storage::PageDevice;
use geoflash::{Index, SpatialIndex};

use super::Target;

/// An [`Index`] driven by the runner.
pub struct TreeTarget {
    index: Index,
}

impl TreeTarget {
    /// Wraps `index`.
    pub fn new(index: Index) -> Self {
        TreeTarget { index }
    }
}

impl Target for TreeTarget {
    fn index(&self) -> &dyn SpatialIndex {
        &self.index
    }

    fn index_mut(&mut self) -> &mut dyn SpatialIndex {
        &mut self.index
    }

    fn device(&self) -> &Arc<dyn PageDevice> {
        self.index.device()
    }

    fn reset_device_stats(&self) {
        self.index.device().reset_stats();
        if let Some(log) = self.index.log_device() {
            log.reset_stats();
        }
    }

    fn device_stats_into(&self, s: &mut Stats) {
        // Index::stats adds a separate log file's I/O to the device counters.
        let full = self.index.stats(&s.label);
        s.io = full.io;
        s.sim = full.sim;
        s.device_simulated = full.device_simulated;
    }

    fn phase_times(&self) -> PhaseTimes {
        self.index.phase_times()
    }

    fn index_bytes(&self) -> u64 {
        let st = self.index.structure().store_stats();
        st.nodes_created
            .saturating_sub(st.nodes_deleted)
            .saturating_mul(self.index.manifest().page_size as u64)
    }

    fn as_index(&self) -> Option<&Index> {
        Some(&self.index)
    }

    fn into_index(self: Box<Self>) -> Option<Index> {
        Some(self.index)
    }
}
