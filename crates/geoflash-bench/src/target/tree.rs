//! The R-tree family as a [`Target`]: a [`geoflash::Index`] with any store.
use std::sync::Arc;

use geoflash::geom::{Point, Rect};
use geoflash::index::query::Predicate;
use geoflash::index::TreeCounters;
use geoflash::metrics::{PhaseTimes, Stats};
use geoflash::storage::PageDevice;
use geoflash::store::StoreStats;
use geoflash::{Index, Result};

use super::{Answer, Target};

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

    fn counters(&self) -> StoreStats {
        self.index.structure().store_stats()
    }

    fn index_counters(&self) -> (TreeCounters, PhaseTimes) {
        (
            self.index.structure().tree_counters(),
            self.index.phase_times(),
        )
    }

    fn index_bytes(&self) -> u64 {
        let st = self.counters();
        st.nodes_created
            .saturating_sub(st.nodes_deleted)
            .saturating_mul(self.index.manifest().page_size as u64)
    }

    fn insert(&mut self, id: u64, r: Rect) -> Result<()> {
        self.index.insert(id, r)
    }

    fn delete(&mut self, id: u64, r: Rect) -> Result<()> {
        self.index.delete(id, r)
    }

    fn query(&mut self, window: Rect, predicate: Predicate) -> Result<Answer> {
        let r = self.index.query(window, predicate)?;
        Ok(Answer {
            candidates: r.stats.candidates,
            results: r.hits.len() as u64,
        })
    }

    fn knn(&mut self, p: Point, k: usize) -> Result<Answer> {
        let r = self.index.nearest(p, k, false)?;
        Ok(Answer {
            candidates: r.stats.candidates,
            results: r.neighbors.len() as u64,
        })
    }

    /// The xBR+-tree answers a group with its batch point-location
    /// algorithm (one batched read per level); the other trees have no
    /// group lookup: one point window per point.
    fn point_group(&mut self, points: &[Point]) -> Result<Answer> {
        if let Some(x) = self.index.structure().xbr() {
            let (found, _) = x.point_batch(points, 1024)?;
            let n = found.iter().filter(|f| f.is_some()).count() as u64;
            return Ok(Answer {
                candidates: n,
                results: n,
            });
        }
        let mut a = Answer::default();
        for p in points {
            let w = Rect::new(p.x, p.y, p.x, p.y)?;
            let r = self.index.query(w, Predicate::Intersects)?;
            a.candidates += r.stats.candidates;
            a.results += r.hits.len() as u64;
        }
        Ok(a)
    }

    fn checkpoint(&mut self) -> Result<()> {
        self.index.checkpoint()
    }

    fn as_index(&self) -> Option<&Index> {
        Some(&self.index)
    }

    fn into_index(self: Box<Self>) -> Option<Index> {
        Some(self.index)
    }
}
