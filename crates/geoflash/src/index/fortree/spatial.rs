//! The FOR-tree as a [`SpatialIndex`]: behind a lock, because its queries
//! count accesses in its overflow node table (`&mut self`) while a
//! [`SpatialIndex`]'s queries, like an R-tree's, take `&self`. An update
//! is a deletion, then an insertion.
use std::any::Any;
use std::sync::Mutex;

use super::Fortree;
use crate::geom::{Point, Rect};
use crate::index::query::{KnnResult, Predicate, QueryResult};
use crate::index::TreeCounters;
use crate::spatial::{get, lock, SpatialIndex};
use crate::store::log::Durability;
use crate::store::{NodeStore, OpId, StoreStats};
use crate::Result;

/// No client log: the FOR-tree's store is the plain store.
impl<S: NodeStore + 'static> crate::spatial::StoreLink for Mutex<Fortree<S>> {}

impl<S: NodeStore + 'static> SpatialIndex for Mutex<Fortree<S>> {
    fn family(&self) -> &'static str {
        "a FOR-tree"
    }

    fn len(&self) -> Option<u64> {
        Some(lock(self).len())
    }

    fn height(&self) -> u16 {
        lock(self).height()
    }

    fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
        get(self).insert(id, rect)
    }

    fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        get(self).delete(id, rect)
    }

    fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        lock(self).query(window, predicate)
    }

    fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        lock(self).nearest(point, k, ties)
    }

    /// Writes its buffer and head page and checkpoints the store.
    fn checkpoint(&mut self) -> Result<()> {
        get(self).checkpoint()
    }

    /// The store's counters, with the buffer and flush counters of the
    /// FOR-tree's own buffer (its store runs without one).
    fn store_stats(&self) -> StoreStats {
        let f = lock(self);
        let own = f.stats();
        StoreStats {
            buffer_hits: own.buffer_hits,
            buffer_misses: own.buffer_misses,
            flushes: own.flushes,
            flushed_nodes: own.flushed_nodes,
            peak_buffer_bytes: own.peak_buffer_bytes,
            ..f.store().stats()
        }
    }

    /// The peak of the FOR-tree's own buffer (the one `store_stats`
    /// reports) restarts, and its store's.
    fn restart_buffer_peak(&mut self) {
        get(self).restart_buffer_peak()
    }

    /// Its merge-backs count as merges.
    fn tree_counters(&self) -> TreeCounters {
        TreeCounters {
            merges: lock(self).stats().merge_backs,
            ..TreeCounters::default()
        }
    }

    fn durability(&self) -> Option<Durability> {
        lock(self).store().durability()
    }

    fn set_durability(&mut self, durability: Durability) -> Result<()> {
        get(self).store_mut().set_durability(durability)
    }

    fn sync_committed(&mut self) -> Result<bool> {
        get(self).store_mut().sync_committed()
    }

    fn last_committed_op(&self) -> Option<OpId> {
        lock(self).store().last_committed_op()
    }

    fn durable_op(&self) -> Option<OpId> {
        lock(self).store().durable_op()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
