//! An open [`Index`] as a [`SpatialIndex`]: each call forwards to the
//! structure the index holds through the index's own methods, so it is
//! timed as a front-end phase, refused on a read-only index where it
//! writes, and its errors name the page file.
use std::any::Any;

use super::Index;
use crate::geom::{Point, Rect};
use crate::index::query::{BatchKeys, BatchResult, KeyResult, KnnResult, Predicate, QueryResult};
use crate::index::{ReadMode, TreeCounters};
use crate::spatial::{forward_to_inherent, point_windows, SpatialIndex, Sought};
use crate::store::log::Durability;
use crate::store::{OpId, StoreStats};
use crate::Result;

/// No client log of its own: the index reaches its structure's.
impl crate::spatial::StoreLink for Index {}

impl SpatialIndex for Index {
    forward_to_inherent!(Index);

    fn family(&self) -> &'static str {
        self.tree.family()
    }

    fn len(&self) -> Option<u64> {
        self.tree.len()
    }

    fn height(&self) -> u16 {
        self.tree.height()
    }

    fn visit_located(&self, visit: &mut dyn FnMut(u64, Rect, Option<u64>)) -> Result<()> {
        self.ask(|t| t.visit_located(visit))
    }

    fn update_within(&mut self, id: u64, within: Rect, new: Rect, near: Option<u64>) -> Result<Sought> {
        Index::update_within(self, id, within, new, near)
    }

    fn count(&self, window: Rect, predicate: Predicate) -> Result<u64> {
        Index::count(self, window, predicate)
    }

    fn query_keys(&self, window: Rect, predicate: Predicate) -> Result<KeyResult> {
        Index::query_keys(self, window, predicate)
    }

    /// The xBR+-tree's group algorithm (timed as one filter step); for the
    /// other families one point window per point, each an
    /// [`Index::query`].
    fn point_group(&self, points: &[Point]) -> Result<BatchResult> {
        super::operations::check_all(points, |p| crate::index::query::checked_point(*p))?;
        if self.tree.xbr().is_none() {
            return point_windows(self, points);
        }
        self.ask(|t| t.point_group(points))
    }

    fn checkpoint(&mut self) -> Result<()> {
        Index::checkpoint(self)
    }

    fn store_stats(&self) -> StoreStats {
        self.tree.store_stats()
    }

    fn restart_buffer_peak(&mut self) {
        self.tree.restart_buffer_peak()
    }

    fn pages_in_use(&self) -> u64 {
        self.tree.pages_in_use()
    }

    fn warm_pages(&self, pages: &[u64]) {
        self.tree.warm_pages(pages)
    }

    fn tree_counters(&self) -> TreeCounters {
        self.tree.tree_counters()
    }

    fn durability(&self) -> Option<Durability> {
        self.tree.durability()
    }

    fn set_durability(&mut self, durability: Durability) -> Result<()> {
        self.writable()?;
        self.tree.set_durability(durability)
    }

    fn sync_committed(&mut self) -> Result<bool> {
        self.writable()?;
        self.refuse_if_failed()?;
        let synced = self.tree.sync_committed();
        self.noting_failure(synced)
    }

    fn last_committed_op(&self) -> Option<OpId> {
        Index::last_committed_op(self)
    }

    fn durable_op(&self) -> Option<OpId> {
        Index::durable_op(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
