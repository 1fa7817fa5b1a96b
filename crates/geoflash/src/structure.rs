//! [`Structure`]: the spatial structure an [`Index`](crate::Index) holds —
//! a tree of the R-tree family, the FOR-tree, which changes the tree
//! structure and so is an index of its own (`index::fortree`), or the
//! xBR+-tree of points (`index::xbr`) — with the operations the index
//! forwards to each. All keep their nodes in a [`NodeStore`] and never know
//! which one.
//!
//! The xBR+-tree indexes points: objects given to it as rectangles must be
//! degenerate (a point); a box is an error. Its range queries answer every
//! predicate on points (`intersects` and `contains`: the points in the
//! window; `within`: a point equal to a degenerate window), batched range
//! queries use its level-by-level batch algorithm, and an update is a
//! deletion then an insertion.
//!
//! The FOR-tree counts accesses in its overflow node table even when it
//! answers a query, so its queries take `&mut self`; the index keeps it
//! behind a mutex so that its queries, like an R-tree's, take `&self`.
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::geom::{Point, Rect};
use crate::index::fortree::{Fortree, FortreeConfig};
use crate::index::query::{BatchResult, Hit, KnnResult, Predicate, QueryResult, QueryStats};
use crate::index::xbr::{BulkOptions, XbrTree};
use crate::index::{RTree, ReadMode, TreeCounters};
use crate::store::log::Durability;
use crate::store::{NodeStore, OpId, StoreStats};
use crate::{Error, Result};

/// The FOR-tree's own parameters in [`IndexOptions`](crate::IndexOptions)
/// (`--kind fortree`); M, m and the buffer come from the index options
/// (page size or `max_entries`, `min_entries`, the store's budget).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FortreeOptions {
    /// `C_w / C_r` in the merge-back threshold (default 10, the seeds' chip).
    pub write_read_ratio: f64,
    /// Reproduce the original root counter (the seeds' failure); default off.
    pub original_root_counter: bool,
    /// Pages per flushing unit of its buffer (default 5).
    pub flush_unit: usize,
}

impl Default for FortreeOptions {
    fn default() -> Self {
        let d = FortreeConfig::new(4);
        FortreeOptions {
            write_read_ratio: d.write_read_ratio,
            original_root_counter: d.original_root_counter,
            flush_unit: d.flush_unit,
        }
    }
}

/// What an index holds.
pub enum Structure {
    /// An R-tree, R*-tree or Hilbert R-tree.
    RTree(RTree<Box<dyn NodeStore>>),
    /// A FOR-tree (behind a lock: its queries update access counters;
    /// boxed, it is the larger of the two).
    Fortree(Box<Mutex<Fortree<Box<dyn NodeStore>>>>),
    /// An xBR+-tree of points.
    Xbr(Box<XbrTree<Box<dyn NodeStore>>>),
}

impl std::fmt::Debug for Structure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Structure::RTree(_) => "RTree",
            Structure::Fortree(_) => "Fortree",
            Structure::Xbr(_) => "Xbr",
        };
        f.debug_struct("Structure")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

impl Structure {
    /// Sets how the R-tree family's range and kNN queries read nodes ([`ReadMode`]);
    /// the FOR-tree and the xBR+-tree keep their own traversals.
    pub fn set_read_mode(&mut self, mode: ReadMode) {
        if let Structure::RTree(t) = self {
            t.set_read_mode(mode);
        }
    }

    /// How the R-tree family's range and kNN queries read nodes (the default for
    /// the other structures).
    pub fn read_mode(&self) -> ReadMode {
        match self {
            Structure::RTree(t) => t.read_mode(),
            _ => ReadMode::default(),
        }
    }

    /// The R-tree-family tree; an error naming `what` for a FOR-tree.
    pub fn rtree(&self, what: &str) -> Result<&RTree<Box<dyn NodeStore>>> {
        match self {
            Structure::RTree(t) => Ok(t),
            Structure::Fortree(_) => Err(Error::invalid(format!(
                "{what} is not available for a FOR-tree index (it works on R-tree-family indexes)"
            ))),
            Structure::Xbr(_) => Err(Error::invalid(format!(
                "{what} is not available for an xBR+-tree index (it works on R-tree-family indexes)"
            ))),
        }
    }

    /// The xBR+-tree (`None` for the other structures).
    pub fn xbr(&self) -> Option<&XbrTree<Box<dyn NodeStore>>> {
        match self {
            Structure::Xbr(t) => Some(t),
            _ => None,
        }
    }

    /// Bulk loads `points` into an empty xBR+-tree with its SSD algorithm
    /// (default batch sizes); an error for the other structures.
    pub fn xbr_load(&mut self, points: &[(u64, Point)]) -> Result<()> {
        match self {
            Structure::Xbr(t) => t.load(points, BulkOptions::default()),
            _ => Err(Error::invalid("only an xBR+-tree takes points this way")),
        }
    }

    /// The FOR-tree, locked (`None` for an R-tree).
    pub fn fortree(&self) -> Option<MutexGuard<'_, Fortree<Box<dyn NodeStore>>>> {
        match self {
            Structure::RTree(_) | Structure::Xbr(_) => None,
            Structure::Fortree(f) => Some(lock(f)),
        }
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        match self {
            Structure::RTree(t) => t.len(),
            Structure::Fortree(f) => lock(f).len(),
            Structure::Xbr(t) => t.len(),
        }
    }

    /// Number of levels (0 when empty).
    pub fn height(&self) -> u16 {
        match self {
            Structure::RTree(t) => t.height(),
            Structure::Fortree(f) => lock(f).height(),
            Structure::Xbr(t) => t.height(),
        }
    }

    /// True when the structure holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts object `id` with MBR `rect`.
    pub fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
        match self {
            Structure::RTree(t) => t.insert(id, rect),
            Structure::Fortree(f) => get(f).insert(id, rect),
            Structure::Xbr(t) => t.insert(id, as_point(id, &rect)?),
        }
    }

    /// Deletes object `id` with MBR `rect`; an error if it is absent.
    pub fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        match self {
            Structure::RTree(t) => t.delete(id, rect),
            Structure::Fortree(f) => get(f).delete(id, rect),
            Structure::Xbr(t) => t.delete(id, as_point(id, &rect)?),
        }
    }

    /// Moves object `id` from `old` to `new` (the FOR-tree: a deletion,
    /// then an insertion).
    pub fn update(&mut self, id: u64, old: Rect, new: Rect) -> Result<()> {
        match self {
            Structure::RTree(t) => t.update(id, old, new),
            Structure::Fortree(f) => {
                let f = get(f);
                f.delete(id, old)?;
                f.insert(id, new)
            }
            Structure::Xbr(t) => {
                let new = as_point(id, &new)?;
                t.delete(id, as_point(id, &old)?)?;
                t.insert(id, new)
            }
        }
    }

    /// Range query.
    pub fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        match self {
            Structure::RTree(t) => t.query(window, predicate),
            Structure::Fortree(f) => lock(f).query(window, predicate),
            Structure::Xbr(t) => {
                let found = t.range(&window)?;
                Ok(point_answer(found, &window, predicate))
            }
        }
    }

    /// Range queries: one shared traversal for an R-tree, one query after
    /// the other for the FOR-tree.
    pub fn query_batch(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchResult> {
        match self {
            Structure::RTree(t) => t.query_batch(windows, predicate),
            Structure::Fortree(f) => {
                let mut f = lock(f);
                let results = windows
                    .iter()
                    .map(|w| f.query(*w, predicate))
                    .collect::<Result<Vec<_>>>()?;
                let nodes_visited = results.iter().map(|r| r.stats.nodes_visited).sum();
                Ok(BatchResult {
                    results,
                    nodes_visited,
                })
            }
            Structure::Xbr(t) => {
                let (found, stats) = t.range_batch(windows, XBR_READ_BATCH)?;
                let results = found
                    .into_iter()
                    .zip(windows)
                    .map(|(f, w)| point_answer(f, w, predicate))
                    .collect();
                Ok(BatchResult {
                    results,
                    nodes_visited: stats.nodes_read,
                })
            }
        }
    }

    /// The `k` nearest objects to `point` (and every object tied with the
    /// k-th when `ties`).
    pub fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        match self {
            Structure::RTree(t) => t.nearest(point, k, ties),
            Structure::Fortree(f) => lock(f).nearest(point, k, ties),
            Structure::Xbr(t) => {
                // With ties, ask for more until the k-th distance is passed.
                let mut m = k;
                loop {
                    let mut neighbors = t.nearest(&point, m)?;
                    let kth = neighbors.get(k.wrapping_sub(1)).map(|n| n.distance);
                    let more =
                        ties && neighbors.len() == m && kth == neighbors.last().map(|n| n.distance);
                    if more && k > 0 {
                        m = m.saturating_mul(2);
                        continue;
                    }
                    if let Some(d) = kth.filter(|_| ties) {
                        neighbors.retain(|n| n.distance <= d);
                    } else {
                        neighbors.truncate(k);
                    }
                    let n = neighbors.len() as u64;
                    return Ok(KnnResult {
                        neighbors,
                        stats: QueryStats {
                            nodes_visited: 0,
                            candidates: n,
                            results: n,
                            nodes_read_unused: 0,
                        },
                    });
                }
            }
        }
    }

    /// Writes what is buffered (the FOR-tree's buffer and head page) and
    /// checkpoints the store.
    pub fn checkpoint(&mut self) -> Result<()> {
        match self {
            Structure::RTree(t) => t.store_mut().checkpoint(),
            Structure::Fortree(f) => get(f).checkpoint(),
            Structure::Xbr(t) => t.checkpoint(),
        }
    }

    /// The store's durability mode (`None` for a store without a log).
    pub fn durability(&self) -> Option<Durability> {
        match self {
            Structure::RTree(t) => t.store().durability(),
            Structure::Fortree(f) => lock(f).store().durability(),
            Structure::Xbr(t) => t.store().durability(),
        }
    }

    /// Changes the store's durability mode from the next operation on
    /// ([`NodeStore::set_durability`]).
    pub fn set_durability(&mut self, durability: Durability) -> Result<()> {
        match self {
            Structure::RTree(t) => t.store_mut().set_durability(durability),
            Structure::Fortree(f) => get(f).store_mut().set_durability(durability),
            Structure::Xbr(t) => t.store_mut().set_durability(durability),
        }
    }

    /// The store's counters; for a FOR-tree the buffer and flush counters
    /// are its own buffer's (its store runs without one).
    pub fn store_stats(&self) -> StoreStats {
        match self {
            Structure::RTree(t) => t.store().stats(),
            Structure::Xbr(t) => t.store().stats(),
            Structure::Fortree(f) => {
                let f = lock(f);
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
        }
    }

    /// What the index algorithms counted: splits, reinsertions, merges (a
    /// FOR-tree's merges are its merge-backs).
    pub fn tree_counters(&self) -> TreeCounters {
        match self {
            Structure::RTree(t) => t.counters(),
            Structure::Xbr(t) => t.counters(),
            Structure::Fortree(f) => TreeCounters {
                merges: lock(f).stats().merge_backs,
                ..TreeCounters::default()
            },
        }
    }

    /// The newest committed operation of a store with a log.
    pub fn last_committed_op(&self) -> Option<OpId> {
        match self {
            Structure::RTree(t) => t.store().last_committed_op(),
            Structure::Fortree(f) => lock(f).store().last_committed_op(),
            Structure::Xbr(t) => t.store().last_committed_op(),
        }
    }

    /// The newest operation whose commit is durable (stores with a log).
    pub fn durable_op(&self) -> Option<OpId> {
        match self {
            Structure::RTree(t) => t.store().durable_op(),
            Structure::Fortree(f) => lock(f).store().durable_op(),
            Structure::Xbr(t) => t.store().durable_op(),
        }
    }
}

/// Most pages of one batched read of the xBR+-tree's batch queries.
const XBR_READ_BATCH: usize = 1024;

/// The point of object `id` given as a rectangle; a box is an error (the
/// xBR+-tree indexes points).
pub(crate) fn as_point(id: u64, r: &Rect) -> Result<Point> {
    if !r.is_point() {
        return Err(Error::invalid(format!(
            "object {id} is a box {r:?}: the xBR+-tree indexes points (give min = max)"
        )));
    }
    Ok(Point {
        x: r.min_x(),
        y: r.min_y(),
    })
}

/// A range answer on points for `predicate` (`contains` and `intersects`
/// select the same points; `within` only a point equal to the window).
fn point_answer(
    found: Vec<crate::index::xbr::query::Found>,
    window: &Rect,
    predicate: Predicate,
) -> QueryResult {
    let candidates = found.len() as u64;
    let hits: Vec<Hit> = found
        .into_iter()
        .map(|(id, p)| Hit {
            id,
            rect: Rect::from_point(p),
        })
        .filter(|h| predicate != Predicate::Within || h.rect.contains(window))
        .collect();
    QueryResult {
        stats: QueryStats {
            // Not counted by the xBR+-tree (the store's counters hold its reads).
            nodes_visited: 0,
            candidates,
            results: hits.len() as u64,
            nodes_read_unused: 0,
        },
        hits,
    }
}

/// The FOR-tree behind its lock (a panic while it was held left it as the
/// panicking operation did; the tree's own checks report any damage).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The FOR-tree, mutably, without locking (exclusive access).
fn get<T>(m: &mut Mutex<T>) -> &mut T {
    m.get_mut().unwrap_or_else(|e| e.into_inner())
}
