//! The R-tree family (R-tree, R*-tree, Hilbert R-tree) as a
//! [`SpatialIndex`].
use super::query::{BatchKeys, BatchResult, KeyResult, KnnResult, Predicate, QueryResult};
use super::{RTree, ReadMode};
use crate::geom::{Point, Rect};
use crate::spatial::{forward_to_inherent, forward_to_store, SpatialIndex, Sought};
use crate::store::NodeStore;
use crate::Result;

crate::spatial::store_link_to_store!(RTree<S>);

impl<S: NodeStore + 'static> SpatialIndex for RTree<S> {
    forward_to_inherent!(RTree);

    forward_to_store!();

    fn family(&self) -> &'static str {
        "an R-tree-family tree"
    }

    fn len(&self) -> Option<u64> {
        Some(RTree::len(self))
    }

    fn height(&self) -> u16 {
        RTree::height(self)
    }

    fn located_records(&self) -> Result<Vec<(u64, Rect, Option<u64>)>> {
        Ok(RTree::records_by_leaf(self)?
            .into_iter()
            .map(|(id, rect, leaf)| (id, rect, Some(leaf)))
            .collect())
    }

    fn visit_located(&self, visit: &mut dyn FnMut(u64, Rect, Option<u64>)) -> Result<()> {
        RTree::visit_records_by_leaf(self, |id, rect, leaf| visit(id, rect, Some(leaf)))
    }

    fn update_within(&mut self, id: u64, within: Rect, new: Rect, near: Option<u64>) -> Result<Sought> {
        RTree::update_within(self, id, within, new, near)
    }

    fn update_near(&mut self, id: u64, old: Rect, new: Rect, near: Option<u64>) -> Result<Option<u64>> {
        RTree::update_near(self, id, old, new, near)
    }

    fn count(&self, window: Rect, predicate: Predicate) -> Result<u64> {
        let mut n = 0u64;
        let rect = super::checked(window)?;
        self.select(&super::query::Window { rect, predicate }, |_| n += 1)?;
        Ok(n)
    }

    fn query_keys(&self, window: Rect, predicate: Predicate) -> Result<KeyResult> {
        let mut keys = Vec::new();
        let rect = super::checked(window)?;
        let stats = self.select(&super::query::Window { rect, predicate }, |e| keys.push(e.key))?;
        Ok(KeyResult { keys, stats })
    }

    fn checkpoint(&mut self) -> Result<()> {
        self.store_mut().checkpoint()
    }
}
