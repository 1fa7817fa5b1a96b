//! The grid files as a [`Target`]: `grid` (the two-level Grid File with an
//! LRU buffer writing each dirty page on its own), `gffm`, `lbgrid` and
//! `hgrid` (GFFM with H-Grid's hot-region placement on a hybrid device).
//!
//! Grid files index **points**: every object must be a degenerate box (a
//! workload with a box dataset is refused when it is parsed; a dataset file
//! holding boxes fails its configuration with a clear error at the first
//! one). Queries run plain or batched (Algorithms 6–8: batched range
//! queries, kNN with prefetching, group point queries) as the
//! configuration's `grid.queries` says.
use std::sync::Arc;

use geoflash::geom::{Point, Rect};
use geoflash::grid::{BucketLayer, DeleteOutcome, GridFile, GridOptions};
use geoflash::index::query::Predicate;
use geoflash::metrics::Stats;
use geoflash::storage::PageDevice;
use geoflash::store::StoreStats;
use geoflash::{Error, Result};

use super::{Answer, Target};

/// A grid file driven by the runner.
pub struct GridTarget<L: BucketLayer> {
    grid: GridFile<L>,
    kind: String,
    batched: bool,
}

impl<L: BucketLayer> GridTarget<L> {
    /// Creates a grid file of kind `kind` (its name in messages) on `dev`;
    /// `batched` picks the batched query algorithms.
    pub fn create(
        kind: &str,
        dev: Arc<dyn PageDevice>,
        opts: GridOptions,
        batched: bool,
    ) -> Result<Self> {
        Ok(GridTarget {
            grid: GridFile::create(dev, opts)?,
            kind: kind.to_string(),
            batched,
        })
    }

    /// The grid file.
    pub fn grid(&self) -> &GridFile<L> {
        &self.grid
    }

    fn point_of(&self, id: u64, r: &Rect) -> Result<(f64, f64)> {
        if !r.is_point() {
            return Err(Error::invalid(format!(
                "index kind {} indexes points, but object {id} is a box ({}, {}, {}, {}): \
                 use a point dataset (geometry = \"point\")",
                self.kind,
                r.min_x(),
                r.min_y(),
                r.max_x(),
                r.max_y()
            )));
        }
        Ok((r.min_x(), r.min_y()))
    }
}

impl<L: BucketLayer> Target for GridTarget<L> {
    fn device(&self) -> &Arc<dyn PageDevice> {
        self.grid.device()
    }

    fn reset_device_stats(&self) {
        self.grid.device().reset_stats();
    }

    fn device_stats_into(&self, s: &mut Stats) {
        s.set_device(&self.grid.device().stats());
    }

    fn counters(&self) -> StoreStats {
        let g = self.grid.stats();
        let (d, b) = (g.dir_buffer, g.bucket_buffer);
        StoreStats {
            node_gets: d.hits + d.misses + b.hits + b.misses,
            buffer_hits: d.hits + b.hits,
            buffer_misses: d.misses + b.misses,
            node_reads: d.misses + b.misses,
            node_writes: d.pages_written + b.pages_written,
            flushes: d.write_batches + b.write_batches,
            flushed_nodes: d.pages_written + b.pages_written,
            ..StoreStats::default()
        }
    }

    fn index_bytes(&self) -> u64 {
        self.grid
            .pages_in_use()
            .saturating_mul(self.grid.device().page_size() as u64)
    }

    fn insert(&mut self, id: u64, r: Rect) -> Result<()> {
        let (x, y) = self.point_of(id, &r)?;
        self.grid.insert(x, y, id)
    }

    fn delete(&mut self, id: u64, r: Rect) -> Result<()> {
        let (x, y) = self.point_of(id, &r)?;
        match self.grid.delete(x, y)? {
            DeleteOutcome::NotFound => Err(Error::invalid(format!(
                "object {id} at ({x}, {y}) is not in the {} grid file",
                self.kind
            ))),
            DeleteOutcome::Removed | DeleteOutcome::Logged => Ok(()),
        }
    }

    /// Points satisfy `intersects` and `contains` when they lie in the
    /// (closed) window; a point is `within`-matched (contains the window)
    /// only by a window that is that very point.
    fn query(&mut self, window: Rect, predicate: Predicate) -> Result<Answer> {
        if predicate == Predicate::Within {
            let found = if window.is_point() {
                u64::from(self.grid.get(window.min_x(), window.min_y())?.is_some())
            } else {
                0
            };
            return Ok(Answer {
                candidates: found,
                results: found,
            });
        }
        let pts = if self.batched {
            self.grid.range_batched(&window)?
        } else {
            self.grid.range(&window)?
        };
        let n = pts.len() as u64;
        Ok(Answer {
            candidates: n,
            results: n,
        })
    }

    fn knn(&mut self, p: Point, k: usize) -> Result<Answer> {
        let r = if self.batched {
            self.grid.knn_prefetch(p.x, p.y, k)?
        } else {
            self.grid.knn(p.x, p.y, k)?
        };
        let n = r.len() as u64;
        Ok(Answer {
            candidates: n,
            results: n,
        })
    }

    fn point_group(&mut self, points: &[Point]) -> Result<Answer> {
        let pts: Vec<(f64, f64)> = points.iter().map(|p| (p.x, p.y)).collect();
        let found = if self.batched {
            self.grid.group_get(&pts)?
        } else {
            self.grid.group_get_plain(&pts)?
        };
        let n = found.iter().filter(|f| f.is_some()).count() as u64;
        Ok(Answer {
            candidates: n,
            results: n,
        })
    }

    fn checkpoint(&mut self) -> Result<()> {
        self.grid.checkpoint()
    }
}
