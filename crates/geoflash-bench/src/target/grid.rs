//! The grid files as a [`Target`]: `grid` (the two-level Grid File with an
//! LRU buffer writing each dirty page on its own), `gffm`, `lbgrid` and
//! `hgrid` (GFFM with H-Grid's hot-region placement on a hybrid device),
//! each a [`GridIndex`] (which see for how points answer queries).
//!
//! A workload with a box dataset is refused when it is parsed; a dataset
//! file holding boxes fails its configuration with a clear error at the
//! first one.
use std::sync::Arc;

use geoflash::grid::{BucketLayer, GridIndex};
use geoflash::metrics::Stats;
use geoflash::storage::PageDevice;
use geoflash::SpatialIndex;

use super::Target;

/// A grid file driven by the runner.
pub struct GridTarget<L: BucketLayer> {
    grid: GridIndex<L>,
    device: Arc<dyn PageDevice>,
}

impl<L: BucketLayer + 'static> GridTarget<L> {
    /// Wraps `grid`.
    pub fn new(grid: GridIndex<L>) -> Self {
        GridTarget {
            device: grid.device(),
            grid,
        }
    }
}

impl<L: BucketLayer + 'static> Target for GridTarget<L> {
    fn index(&self) -> &dyn SpatialIndex {
        &self.grid
    }

    fn index_mut(&mut self) -> &mut dyn SpatialIndex {
        &mut self.grid
    }

    fn device(&self) -> &Arc<dyn PageDevice> {
        &self.device
    }

    fn reset_device_stats(&self) {
        self.device.reset_stats();
    }

    fn device_stats_into(&self, s: &mut Stats) {
        s.set_device(&self.device.stats());
    }

    fn index_bytes(&self) -> u64 {
        self.grid
            .grid()
            .pages_in_use()
            .saturating_mul(self.device.page_size() as u64)
    }
}
