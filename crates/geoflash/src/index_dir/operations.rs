//! Updates and queries of an [`Index`]: insertion, deletion and update of
//! records, range queries (one window or a batch in one traversal) and
//! nearest neighbours, each timed as a front-end phase, its errors naming
//! the page file.
use super::Index;
use crate::geom::{Point, Rect};
use crate::index::query::{BatchResult, KeyResult, KnnResult, Predicate, QueryResult};
use crate::metrics::Phase;
use crate::spatial::SpatialIndex;
use crate::Result;

impl Index {
    /// Runs the update `f` on the structure as a timed index phase, its
    /// errors naming the page file; refused on a read-only index.
    fn change(&mut self, f: impl FnOnce(&mut dyn SpatialIndex) -> Result<()>) -> Result<()> {
        self.writable()?;
        let watch = self.watch();
        let done = f(&mut *self.tree).map_err(|e| self.locate(e));
        self.note(watch, Phase::Index);
        done
    }

    /// Runs the query `f` on the structure as a timed filter phase, its
    /// errors naming the page file.
    pub(super) fn ask<T>(&self, f: impl FnOnce(&dyn SpatialIndex) -> Result<T>) -> Result<T> {
        let watch = self.watch();
        let r = f(&*self.tree).map_err(|e| self.locate(e));
        self.note(watch, Phase::Filter);
        r
    }

    /// Inserts object `id` with MBR `rect` (one atomic operation).
    pub fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
        self.change(|t| t.insert(id, rect))
    }

    /// Deletes object `id` with MBR `rect`; an error if it is absent.
    pub fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        self.change(|t| t.delete(id, rect))
    }

    /// Moves object `id` from `old` to `new`.
    pub fn update(&mut self, id: u64, old: Rect, new: Rect) -> Result<()> {
        self.change(|t| t.update(id, old, new))
    }

    /// Range query.
    pub fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        self.ask(|t| t.query(window, predicate))
    }

    /// How many objects [`query`](Self::query) would return, without
    /// collecting them.
    pub fn count(&self, window: Rect, predicate: Predicate) -> Result<u64> {
        self.ask(|t| t.count(window, predicate))
    }

    /// The rectangle covering every object, `None` for an empty index
    /// (one node read for the R-tree family, a query over everything for
    /// the other structures).
    pub fn bounds(&self) -> Result<Option<Rect>> {
        self.ask(|t| t.bounds())
    }

    /// Batched range queries in one traversal.
    pub fn query_batch(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchResult> {
        self.ask(|t| t.query_batch(windows, predicate))
    }

    /// Batched range queries in one traversal, answering with record keys
    /// alone (no rectangle copied per record).
    pub fn query_batch_keys(
        &self,
        windows: &[Rect],
        predicate: Predicate,
    ) -> Result<Vec<KeyResult>> {
        self.ask(|t| t.query_batch_keys(windows, predicate))
    }

    /// The `k` nearest objects to `point` (and every object tied with the k-th when `ties`).
    pub fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        self.ask(|t| t.nearest(point, k, ties))
    }
}
