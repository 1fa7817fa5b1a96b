//! Updates and queries of an [`Index`]: insertion, deletion and update of
//! records, range queries (one window or a batch in one traversal) and
//! nearest neighbours, each timed as a front-end phase, its errors naming
//! the page file.
use super::Index;
use crate::geom::{Point, Rect};
use crate::index::query::{BatchResult, KnnResult, Predicate, QueryResult};
use crate::metrics::Phase;
use crate::Result;

impl Index {
    /// Inserts object `id` with MBR `rect` (one atomic operation).
    pub fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
        self.writable()?;
        let watch = self.watch();
        let done = self.tree.insert(id, rect).map_err(|e| self.locate(e));
        self.note(watch, Phase::Index);
        done
    }

    /// Deletes object `id` with MBR `rect`; an error if it is absent.
    pub fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        self.writable()?;
        let watch = self.watch();
        let done = self.tree.delete(id, rect).map_err(|e| self.locate(e));
        self.note(watch, Phase::Index);
        done
    }

    /// Moves object `id` from `old` to `new`.
    pub fn update(&mut self, id: u64, old: Rect, new: Rect) -> Result<()> {
        self.writable()?;
        let watch = self.watch();
        let done = self.tree.update(id, old, new).map_err(|e| self.locate(e));
        self.note(watch, Phase::Index);
        done
    }

    /// Range query.
    pub fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        let watch = self.watch();
        let r = self
            .tree
            .query(window, predicate)
            .map_err(|e| self.locate(e));
        self.note(watch, Phase::Filter);
        r
    }

    /// How many objects [`query`](Self::query) would return, without
    /// collecting them.
    pub fn count(&self, window: Rect, predicate: Predicate) -> Result<u64> {
        let watch = self.watch();
        let r = self
            .tree
            .count(window, predicate)
            .map_err(|e| self.locate(e));
        self.note(watch, Phase::Filter);
        r
    }

    /// The rectangle covering every object, `None` for an empty index
    /// (one node read for the R-tree family, a query over everything for
    /// the other structures).
    pub fn bounds(&self) -> Result<Option<Rect>> {
        self.tree.bounds().map_err(|e| self.locate(e))
    }

    /// Batched range queries in one traversal.
    pub fn query_batch(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchResult> {
        let watch = self.watch();
        let r = self
            .tree
            .query_batch(windows, predicate)
            .map_err(|e| self.locate(e));
        self.note(watch, Phase::Filter);
        r
    }

    /// The `k` nearest objects to `point` (and every object tied with the k-th when `ties`).
    pub fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        let watch = self.watch();
        let r = self
            .tree
            .nearest(point, k, ties)
            .map_err(|e| self.locate(e));
        self.note(watch, Phase::Filter);
        r
    }
}
