//! [`Structure`]: the spatial structure an [`Index`](crate::Index) holds —
//! a tree of the R-tree family, or the FOR-tree, which changes the tree
//! structure and so is an index of its own (`index::fortree`) — with the
//! operations the index forwards to either. Both keep their nodes in a
//! [`NodeStore`] and never know which one.
//!
//! The FOR-tree counts accesses in its overflow node table even when it
//! answers a query, so its queries take `&mut self`; the index keeps it
//! behind a mutex so that its queries, like an R-tree's, take `&self`.
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::geom::{Point, Rect};
use crate::index::fortree::{Fortree, FortreeConfig};
use crate::index::query::{BatchResult, KnnResult, Predicate, QueryResult};
use crate::index::RTree;
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
}

impl std::fmt::Debug for Structure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Structure::RTree(_) => "RTree",
            Structure::Fortree(_) => "Fortree",
        };
        f.debug_struct("Structure")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

impl Structure {
    /// The R-tree-family tree; an error naming `what` for a FOR-tree.
    pub fn rtree(&self, what: &str) -> Result<&RTree<Box<dyn NodeStore>>> {
        match self {
            Structure::RTree(t) => Ok(t),
            Structure::Fortree(_) => Err(Error::invalid(format!(
                "{what} is not available for a FOR-tree index (it works on R-tree-family indexes)"
            ))),
        }
    }

    /// The FOR-tree, locked (`None` for an R-tree).
    pub fn fortree(&self) -> Option<MutexGuard<'_, Fortree<Box<dyn NodeStore>>>> {
        match self {
            Structure::RTree(_) => None,
            Structure::Fortree(f) => Some(lock(f)),
        }
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        match self {
            Structure::RTree(t) => t.len(),
            Structure::Fortree(f) => lock(f).len(),
        }
    }

    /// Number of levels (0 when empty).
    pub fn height(&self) -> u16 {
        match self {
            Structure::RTree(t) => t.height(),
            Structure::Fortree(f) => lock(f).height(),
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
        }
    }

    /// Deletes object `id` with MBR `rect`; an error if it is absent.
    pub fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        match self {
            Structure::RTree(t) => t.delete(id, rect),
            Structure::Fortree(f) => get(f).delete(id, rect),
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
        }
    }

    /// Range query.
    pub fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        match self {
            Structure::RTree(t) => t.query(window, predicate),
            Structure::Fortree(f) => lock(f).query(window, predicate),
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
        }
    }

    /// The `k` nearest objects to `point` (and every object tied with the
    /// k-th when `ties`).
    pub fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        match self {
            Structure::RTree(t) => t.nearest(point, k, ties),
            Structure::Fortree(f) => lock(f).nearest(point, k, ties),
        }
    }

    /// Writes what is buffered (the FOR-tree's buffer and head page) and
    /// checkpoints the store.
    pub fn checkpoint(&mut self) -> Result<()> {
        match self {
            Structure::RTree(t) => t.store_mut().checkpoint(),
            Structure::Fortree(f) => get(f).checkpoint(),
        }
    }

    /// The store's counters; for a FOR-tree the buffer and flush counters
    /// are its own buffer's (its store runs without one) and `merges`
    /// counts merge-backs.
    pub fn store_stats(&self) -> StoreStats {
        match self {
            Structure::RTree(t) => t.store().stats(),
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

    /// The newest committed operation of a store with a log.
    pub fn last_committed_op(&self) -> Option<OpId> {
        match self {
            Structure::RTree(t) => t.store().last_committed_op(),
            Structure::Fortree(f) => lock(f).store().last_committed_op(),
        }
    }

    /// The newest operation whose commit is durable (stores with a log).
    pub fn durable_op(&self) -> Option<OpId> {
        match self {
            Structure::RTree(t) => t.store().durable_op(),
            Structure::Fortree(f) => lock(f).store().durable_op(),
        }
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
