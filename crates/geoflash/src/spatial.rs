//! [`SpatialIndex`]: what every spatial structure of the library answers,
//! whatever its family — the R-tree family ([`RTree`]: R-tree, R*-tree,
//! Hilbert R-tree), the FOR-tree ([`Fortree`], behind a lock), the
//! xBR+-tree of points ([`XbrTree`]), the grid files of points
//! ([`crate::grid::GridIndex`]) — and an open [`Index`](crate::Index),
//! which forwards to the structure it holds and times each call.
//!
//! The trait is object safe: an index holds its structure as a
//! `Box<dyn SpatialIndex>`, and the workbench drives any family through
//! `&mut dyn SpatialIndex`, measuring from outside (device and store
//! counters before and after). Nothing here measures: the counters the
//! trait gives ([`SpatialIndex::store_stats`], [`SpatialIndex::tree_counters`])
//! are the structure's own.
//!
//! Families that index **points** (the xBR+-tree, the grid files) take an
//! object as a degenerate rectangle (`min = max`) and refuse a box. Their
//! range queries answer every predicate on points: `intersects` and
//! `contains` select the points in the (closed) window, `within` only a
//! point equal to a degenerate window.
//!
//! A family's own operations (the xBR+-tree's bulk load, the FOR-tree's
//! overflow table, the R-tree's checks and traversals) stay on its type;
//! [`dyn SpatialIndex`](SpatialIndex) reaches them with
//! [`rtree`](trait.SpatialIndex.html#method.rtree),
//! [`xbr`](trait.SpatialIndex.html#method.xbr) and
//! [`fortree`](trait.SpatialIndex.html#method.fortree).
use std::any::Any;
use std::sync::{Mutex, MutexGuard};

use crate::geom::{Point, Rect};
use crate::index::fortree::Fortree;
use crate::index::query::{
    BatchKeys, BatchResult, Hit, KeyResult, KnnResult, Neighbor, Predicate, QueryResult, QueryStats,
};
use crate::index::xbr::XbrTree;
use crate::index::{RTree, ReadMode, TreeCounters};
use crate::store::log::Durability;
use crate::store::{NodeStore, OpId, StoreStats};
use crate::{Error, Result};

/// The side of a structure only the crate reaches: the store's part of a
/// front end's frames in its log ([`crate::store::NodeStore::client_log`];
/// `None` for structures without such a store). A supertrait of
/// [`SpatialIndex`], so that the index directory reaches it through
/// `dyn SpatialIndex`, and crate-private, so that the log's types stay out
/// of the public API (a sealed supertrait, which also keeps
/// [`SpatialIndex`] from being implemented outside the crate).
pub(crate) trait StoreLink {
    /// The store's client log, if it keeps one.
    fn client_log(&mut self) -> Option<&mut crate::store::log::ClientLog> {
        None
    }

    /// [`client_log`](Self::client_log) for reading.
    fn client_log_ref(&self) -> Option<&crate::store::log::ClientLog> {
        None
    }
}

/// What [`SpatialIndex::update_within`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sought {
    /// No record of the id intersects the rectangle given: nothing
    /// changed.
    Absent,
    /// The record was moved; the hint for its next update, if the
    /// structure keeps one.
    Moved(Option<u64>),
}

/// A spatial index of objects (an id and a rectangle each); see the module
/// documentation. Implemented by the crate's structures only (its
/// supertrait `StoreLink` is the crate's own).
#[allow(private_bounds)]
pub trait SpatialIndex: StoreLink + Any + Send + Sync {
    /// The family in messages, with its article (`"an R-tree-family
    /// tree"`, `"a FOR-tree"`, `"an xBR+-tree"`, `"a grid file"`).
    fn family(&self) -> &'static str;

    /// Number of records; `None` when they cannot be counted (LB-Grid,
    /// whose blind updates do not say whether a point was there, counts its
    /// points with a query over its whole domain, `None` if that fails).
    fn len(&self) -> Option<u64>;

    /// True when the index holds no record (`None` when [`len`](Self::len)
    /// is not known).
    fn is_empty(&self) -> Option<bool> {
        self.len().map(|n| n == 0)
    }

    /// Number of levels of a tree (0 when empty; 2 for a grid file: its
    /// directory above its buckets).
    fn height(&self) -> u16;

    /// Inserts object `id` with rectangle `rect`.
    fn insert(&mut self, id: u64, rect: Rect) -> Result<()>;

    /// Deletes object `id` with rectangle `rect`; an error if it is absent.
    fn delete(&mut self, id: u64, rect: Rect) -> Result<()>;

    /// Moves object `id` from `old` to `new` (by default a deletion, then
    /// an insertion).
    fn update(&mut self, id: u64, old: Rect, new: Rect) -> Result<()> {
        self.delete(id, old)?;
        self.insert(id, new)
    }

    /// Every record as `(id, rectangle, hint)`, the hint (where the
    /// structure keeps one: the R-tree family's leaf) what
    /// [`update_near`](Self::update_near) takes as `near`. By default a
    /// query over the whole plane, without hints.
    fn located_records(&self) -> Result<Vec<(u64, Rect, Option<u64>)>> {
        let all = self.query(Rect::world(), Predicate::Intersects)?;
        Ok(all.hits.into_iter().map(|h| (h.id, h.rect, None)).collect())
    }

    /// [`located_records`](Self::located_records) given to `visit` one
    /// record at a time (by default from that list; the R-tree family
    /// walks its leaves without collecting them).
    fn visit_located(&self, visit: &mut dyn FnMut(u64, Rect, Option<u64>)) -> Result<()> {
        for (id, rect, near) in self.located_records()? {
            visit(id, rect, near);
        }
        Ok(())
    }

    /// [`update`](Self::update) with a hint of where the record is: `near`,
    /// a page this structure returned from an earlier `update_near` of the
    /// same record (the R-tree family: the leaf it was rewritten in; a
    /// stale hint costs a search, never a wrong answer). Returns the hint
    /// for the next update of the record, `None` when there is none (by
    /// default: this is `update`).
    fn update_near(
        &mut self,
        id: u64,
        old: Rect,
        new: Rect,
        near: Option<u64>,
    ) -> Result<Option<u64>> {
        let _ = near;
        self.update(id, old, new).map(|()| None)
    }

    /// [`update_near`](Self::update_near) of a record whose rectangle is
    /// not known exactly: record `id`, which intersects `within` (a
    /// rectangle known to contain it, such as the id locator's, rounded
    /// outward; keys are unique in a structure, so the record found there
    /// is the one), moved to `new`. [`Sought::Absent`], nothing changed,
    /// when the structure finds no record `id` (in the page `near` names,
    /// where it keeps hints, nor intersecting `within`); else the hint for
    /// the record's next update. By default a query of `within` finds the
    /// exact rectangle, then `update_near`; the R-tree family reads the
    /// hinted leaf once for both.
    fn update_within(
        &mut self,
        id: u64,
        within: Rect,
        new: Rect,
        near: Option<u64>,
    ) -> Result<Sought> {
        let found = self.query(within, Predicate::Intersects)?;
        match found.hits.iter().find(|h| h.id == id) {
            Some(h) => self.update_near(id, h.rect, new, near).map(Sought::Moved),
            None => Ok(Sought::Absent),
        }
    }

    /// A hint that the pages `pages` (hints this structure gave with
    /// [`located_records`](Self::located_records) or
    /// [`update_near`](Self::update_near)) are about to be updated: the
    /// store loads what it holds of them into the processor's caches
    /// (the node store's `warm`, `docs/architecture.md`); nothing else
    /// changes. By default nothing.
    fn warm_pages(&self, pages: &[u64]) {
        let _ = pages;
    }

    /// The objects whose rectangle satisfies `predicate` against `window`.
    fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult>;

    /// [`SpatialIndex::query`] answering with record keys alone (8 bytes
    /// a record found, not a hit's 40): by default the query's answer with
    /// the rectangles dropped; the R-tree family collects the keys alone.
    fn query_keys(&self, window: Rect, predicate: Predicate) -> Result<KeyResult> {
        self.query(window, predicate).map(KeyResult::from)
    }

    /// How many objects `query` would return, without collecting them (by
    /// default the query's answer counted; the R-tree family counts as it
    /// walks).
    fn count(&self, window: Rect, predicate: Predicate) -> Result<u64> {
        Ok(self.query(window, predicate)?.hits.len() as u64)
    }

    /// The rectangle covering every object, `None` when there is none (by
    /// default from a query over the whole plane; the R-tree family reads
    /// its root).
    fn bounds(&self) -> Result<Option<Rect>> {
        let all = self.query(Rect::world(), Predicate::Intersects)?;
        Ok(Rect::union_all(all.hits.iter().map(|h| &h.rect)))
    }

    /// Range queries, one answer per window in the order given (by default
    /// one query after the other; the R-tree family shares one traversal,
    /// the xBR+-tree reads level by level).
    fn query_batch(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchResult> {
        let results = windows
            .iter()
            .map(|w| self.query(*w, predicate))
            .collect::<Result<Vec<_>>>()?;
        let nodes_visited = results.iter().map(|r| r.stats.nodes_visited).sum();
        Ok(BatchResult {
            results,
            nodes_visited,
        })
    }

    /// [`SpatialIndex::query_batch`] answering with record keys alone (by
    /// default its answers with the rectangles dropped; the R-tree family
    /// collects the keys alone in its one traversal).
    fn query_batch_keys(&self, windows: &[Rect], predicate: Predicate) -> Result<Vec<KeyResult>> {
        Ok(self
            .query_batch(windows, predicate)?
            .results
            .into_iter()
            .map(KeyResult::from)
            .collect())
    }

    /// [`SpatialIndex::query_batch_keys`] as one flat list ([`BatchKeys`]:
    /// the same keys in the same order, no counters); by default gathered
    /// from its answers, the R-tree family fills it in its one traversal.
    fn query_batch_flat(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchKeys> {
        let mut out = BatchKeys {
            offsets: vec![0],
            keys: Vec::new(),
        };
        for r in self.query_batch_keys(windows, predicate)? {
            out.keys.extend(r.keys);
            out.offsets.push(out.keys.len());
        }
        Ok(out)
    }

    /// The `k` nearest objects to `point` by ascending distance (ties by
    /// id), and every object tied with the k-th when `ties`.
    fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult>;

    /// [`SpatialIndex::nearest`] of each point of `points`: one answer per
    /// point, in order, each as `nearest` gives it. By default one search
    /// after the other; the R-tree family runs them together, reading the
    /// nodes they need next as one store batch (batched reads).
    fn nearest_batch(&self, points: &[Point], k: usize, ties: bool) -> Result<Vec<KnnResult>> {
        points.iter().map(|p| self.nearest(*p, k, ties)).collect()
    }

    /// Exact point lookups as one group: one answer per point, the objects
    /// whose rectangle contains it (by default one degenerate window per
    /// point; the xBR+-tree and the grid files have group algorithms).
    fn point_group(&self, points: &[Point]) -> Result<BatchResult> {
        point_windows(self, points)
    }

    /// Writes what is buffered and makes it durable.
    fn checkpoint(&mut self) -> Result<()>;

    /// The counters of the store (or buffers) under the index.
    fn store_stats(&self) -> StoreStats;

    /// Restarts the buffer peak of [`store_stats`](Self::store_stats)
    /// (`peak_buffer_bytes`) at the bytes the buffers hold now, so that it
    /// reports the peak since this call (one measured step's) instead of
    /// since the index was opened; see
    /// `crate::store::NodeStore::restart_buffer_peak`. By default nothing
    /// (structures that report no peak: the grid files).
    fn restart_buffer_peak(&mut self) {}

    /// The pages the index occupies on its device, without reading them:
    /// the pages holding nodes (`crate::store::NodeStore::nodes_in_use`;
    /// by default, and on the memory store, the nodes created and not
    /// deleted since the store was opened), a grid file's directory, bucket
    /// and metadata pages.
    fn pages_in_use(&self) -> u64 {
        let st = self.store_stats();
        st.nodes_created.saturating_sub(st.nodes_deleted)
    }

    /// What the index algorithms counted: splits, reinsertions, merges.
    fn tree_counters(&self) -> TreeCounters {
        TreeCounters::default()
    }

    /// When operations become durable (`None` without a log).
    fn durability(&self) -> Option<Durability> {
        None
    }

    /// Changes when operations become durable, from the next one on
    /// (ignored without a log).
    fn set_durability(&mut self, _durability: Durability) -> Result<()> {
        Ok(())
    }

    /// Makes every committed operation durable by syncing the store's log
    /// (`true`), leaving dirty nodes to the store's flushing policy;
    /// `false`, having done nothing, without a log (the caller
    /// checkpoints instead). See `crate::store::NodeStore::sync_committed`.
    fn sync_committed(&mut self) -> Result<bool> {
        Ok(false)
    }

    /// Asks the store to stop logging operations until the next checkpoint
    /// (see `crate::store::NodeStore::begin_unlogged`); whether it did.
    /// `false`, having done nothing, for structures without such a store.
    fn begin_unlogged(&mut self) -> Result<bool> {
        Ok(false)
    }

    /// The newest committed operation of a store with a log.
    fn last_committed_op(&self) -> Option<OpId> {
        None
    }

    /// The newest operation whose commit is durable (stores with a log).
    fn durable_op(&self) -> Option<OpId> {
        None
    }

    /// How range and kNN queries read nodes (the R-tree family's setting;
    /// the default for the others, which keep their own traversals).
    fn read_mode(&self) -> ReadMode {
        ReadMode::default()
    }

    /// Sets how range and kNN queries read nodes (ignored by families with
    /// their own traversals).
    fn set_read_mode(&mut self, _mode: ReadMode) {}

    /// The structure as [`Any`], to reach a family's own operations.
    fn as_any(&self) -> &dyn Any;

    /// The structure as mutable [`Any`].
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// The tree type of an index's R-tree family (its store chosen at run time).
pub(crate) type DynRTree = RTree<Box<dyn NodeStore>>;
/// The FOR-tree of an index (its store chosen at run time).
pub(crate) type IndexFortree = Fortree<Box<dyn NodeStore>>;
/// The FOR-tree of an index, behind the lock its counting queries need.
pub(crate) type DynFortree = Mutex<IndexFortree>;
/// The xBR+-tree of an index.
pub(crate) type DynXbr = XbrTree<Box<dyn NodeStore>>;

impl dyn SpatialIndex {
    /// The R-tree-family tree; an error naming `what` for another family.
    pub(crate) fn rtree(&self, what: &str) -> Result<&DynRTree> {
        self.as_any().downcast_ref::<DynRTree>().ok_or_else(|| {
            Error::invalid(format!(
                "{what} is not available for {} index (it works on R-tree-family indexes)",
                self.family()
            ))
        })
    }

    /// For a grid file, its structural check (`crate::grid::GridFile::verify`:
    /// root and sub-directory regions, every point in its bucket's region,
    /// bucket sizes) with the number of points it found; `None` for the
    /// other families.
    pub fn verify_grid(&self) -> Option<Result<u64>> {
        use crate::grid::{gffm::InPlaceBuckets, lbgrid::LogBuckets, GridIndex};
        let any = self.as_any();
        if let Some(g) = any.downcast_ref::<GridIndex<InPlaceBuckets>>() {
            return Some(g.grid().verify());
        }
        any.downcast_ref::<GridIndex<LogBuckets>>()
            .map(|g| g.grid().verify())
    }

    /// The xBR+-tree (`None` for the other families).
    pub(crate) fn xbr(&self) -> Option<&DynXbr> {
        self.as_any().downcast_ref::<DynXbr>()
    }

    /// The xBR+-tree, mutably (`None` for the other families).
    pub(crate) fn xbr_mut(&mut self) -> Option<&mut DynXbr> {
        self.as_any_mut().downcast_mut::<DynXbr>()
    }

    /// The FOR-tree, locked (`None` for the other families).
    pub(crate) fn fortree(&self) -> Option<MutexGuard<'_, Fortree<Box<dyn NodeStore>>>> {
        self.as_any().downcast_ref::<DynFortree>().map(lock)
    }
}

/// Point lookups as one degenerate window each (the default group lookup).
pub fn point_windows<I: SpatialIndex + ?Sized>(index: &I, points: &[Point]) -> Result<BatchResult> {
    let mut out = BatchResult::default();
    for p in points {
        let r = index.query(Rect::from_point(*p), Predicate::Intersects)?;
        out.nodes_visited += r.stats.nodes_visited;
        out.results.push(r);
    }
    Ok(out)
}

/// The point of object `id` given as a rectangle; a box is an error (the
/// xBR+-tree indexes points).
pub(crate) fn as_point(id: u64, r: &Rect) -> Result<Point> {
    if !r.is_point() {
        return Err(Error::invalid(format!(
            "object {id} is a box ({}, {}, {}, {}): the xBR+-tree indexes points (give min = max)",
            r.min_x(),
            r.min_y(),
            r.max_x(),
            r.max_y()
        )));
    }
    Ok(Point {
        x: r.min_x(),
        y: r.min_y(),
    })
}

/// A range answer on points for `predicate` (`contains` and `intersects`
/// select the same points; `within` only a point equal to the window),
/// with `nodes_visited` nodes read.
pub(crate) fn point_answer(
    found: impl IntoIterator<Item = (u64, Point)>,
    window: &Rect,
    predicate: Predicate,
    nodes_visited: u64,
) -> QueryResult {
    let mut candidates = 0;
    let hits: Vec<Hit> = found
        .into_iter()
        .inspect(|_| candidates += 1)
        .map(|(id, p)| Hit {
            id,
            rect: Rect::from_point(p),
        })
        .filter(|h| predicate != Predicate::Within || h.rect.contains(window))
        .collect();
    QueryResult {
        stats: QueryStats {
            nodes_visited,
            candidates,
            results: hits.len() as u64,
            nodes_read_unused: 0,
        },
        hits,
    }
}

/// A kNN answer from neighbours found by a structure that counts no nodes
/// (every neighbour a candidate and a result).
pub(crate) fn knn_answer(neighbors: Vec<Neighbor>) -> KnnResult {
    let n = neighbors.len() as u64;
    KnnResult {
        neighbors,
        stats: QueryStats {
            nodes_visited: 0,
            candidates: n,
            results: n,
            nodes_read_unused: 0,
        },
    }
}

/// The [`SpatialIndex`] methods that an implementor `$t` has as inherent
/// methods of the same name and arguments (updates, window and batch
/// queries, kNN, the read mode), each forwarded to `$t::name`: the R-tree
/// family and the [`crate::Index`] front end. The caller has the types of
/// the signatures in scope (`Rect`, `Point`, `Result`, `ReadMode` and the
/// query results).
macro_rules! forward_to_inherent {
    ($t:ident) => {
        fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
            $t::insert(self, id, rect)
        }

        fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
            $t::delete(self, id, rect)
        }

        fn update(&mut self, id: u64, old: Rect, new: Rect) -> Result<()> {
            $t::update(self, id, old, new)
        }

        fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
            $t::query(self, window, predicate)
        }

        fn bounds(&self) -> Result<Option<Rect>> {
            $t::bounds(self)
        }

        fn query_batch(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchResult> {
            $t::query_batch(self, windows, predicate)
        }

        fn query_batch_keys(
            &self,
            windows: &[Rect],
            predicate: Predicate,
        ) -> Result<Vec<KeyResult>> {
            $t::query_batch_keys(self, windows, predicate)
        }

        fn query_batch_flat(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchKeys> {
            $t::query_batch_flat(self, windows, predicate)
        }

        fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
            $t::nearest(self, point, k, ties)
        }

        fn nearest_batch(&self, points: &[Point], k: usize, ties: bool) -> Result<Vec<KnnResult>> {
            $t::nearest_batch(self, points, k, ties)
        }

        fn read_mode(&self) -> ReadMode {
            $t::read_mode(self)
        }

        fn set_read_mode(&mut self, mode: ReadMode) {
            $t::set_read_mode(self, mode)
        }
    };
}
pub(crate) use forward_to_inherent;

/// The counters and durability of a structure that keeps its nodes in one
/// node store (`self.store()`, `self.store_mut()`), forwarded to the
/// store: the [`SpatialIndex`] methods of the R-tree family and the
/// xBR+-tree.
macro_rules! forward_to_store {
    () => {
        fn store_stats(&self) -> $crate::store::StoreStats {
            self.store().stats()
        }

        fn restart_buffer_peak(&mut self) {
            self.store_mut().restart_buffer_peak()
        }

        fn tree_counters(&self) -> $crate::index::TreeCounters {
            self.counters()
        }

        fn warm_pages(&self, pages: &[u64]) {
            self.store().warm(pages)
        }

        fn pages_in_use(&self) -> u64 {
            self.store().nodes_in_use().unwrap_or_else(|| {
                let st = self.store().stats();
                st.nodes_created.saturating_sub(st.nodes_deleted)
            })
        }

        fn durability(&self) -> Option<$crate::store::log::Durability> {
            self.store().durability()
        }

        fn set_durability(
            &mut self,
            durability: $crate::store::log::Durability,
        ) -> $crate::Result<()> {
            self.store_mut().set_durability(durability)
        }

        fn sync_committed(&mut self) -> $crate::Result<bool> {
            self.store_mut().sync_committed()
        }

        fn begin_unlogged(&mut self) -> $crate::Result<bool> {
            self.store_mut().begin_unlogged()
        }

        fn last_committed_op(&self) -> Option<$crate::store::OpId> {
            self.store().last_committed_op()
        }

        fn durable_op(&self) -> Option<$crate::store::OpId> {
            self.store().durable_op()
        }

        fn as_any(&self) -> &dyn std::any::Any {
            self
        }

        fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
            self
        }
    };
}
pub(crate) use forward_to_store;

/// [`StoreLink`] of a structure that keeps its nodes in one node store
/// (`self.store()`, `self.store_mut()`): forwarded to the store.
macro_rules! store_link_to_store {
    ($($t:tt)+) => {
        impl<S: $crate::store::NodeStore + 'static> $crate::spatial::StoreLink for $($t)+ {
            fn client_log(&mut self) -> Option<&mut $crate::store::log::ClientLog> {
                self.store_mut().client_log()
            }

            fn client_log_ref(&self) -> Option<&$crate::store::log::ClientLog> {
                self.store().client_log_ref()
            }
        }
    };
}
pub(crate) use store_link_to_store;

/// The answer of a group point lookup from the id found at each point.
pub(crate) fn point_group_answer(points: &[Point], found: &[Option<u64>]) -> BatchResult {
    let results = points
        .iter()
        .zip(found)
        .map(|(p, f)| {
            point_answer(
                f.map(|id| (id, *p)),
                &Rect::from_point(*p),
                Predicate::Intersects,
                0,
            )
        })
        .collect();
    BatchResult {
        results,
        nodes_visited: 0,
    }
}

/// A lock's value (a panic while it was held left it as the panicking
/// operation did; the structure's own checks report any damage).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A lock's value, mutably, without locking (exclusive access).
pub(crate) fn get<T>(m: &mut Mutex<T>) -> &mut T {
    m.get_mut().unwrap_or_else(|e| e.into_inner())
}
