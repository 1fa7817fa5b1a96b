//! The R-tree family written once against [`NodeStore`]: Guttman's R-tree
//! (linear, quadratic and exponential split), the R*-tree (ChooseSubtree with
//! overlap enlargement, the R* split, forced reinsertion), deletion with
//! CondenseTree, updates, and queries (range, containment, within, point,
//! kNN, batched range queries).
//!
//! The algorithms never know which store they run on: they read nodes with
//! [`NodeStore::get`] and change them with entry-level
//! [`NodeStore::modify`] calls, one user operation between
//! [`NodeStore::begin_op`] and [`NodeStore::commit_op`].
//!
//! # Records and object ids
//! Leaf entries are records: `key` is the object id, `rect` its MBR. Object
//! ids must be unique in a tree: inserting an id the tree already holds,
//! anywhere, is an [`Error::InvalidInput`] and leaves the tree unchanged. The
//! tree keeps the set of its ids in memory for this check (see [`ids`]: about
//! 20 bytes per record, outside the store's node budget, built by one walk of
//! the tree at the first insertion after an open or a bulk load). Front ends
//! that must accept duplicate user ids, as the `rtree` package does, map them
//! to unique record keys.
//!
//! Deleting is by `(id, rect)` as in the `rtree` package: the exact rectangle
//! the object was inserted with. Deleting an absent pair is an error and leaves
//! the tree unchanged. [`RTree::update`] rewrites the record in its leaf
//! when the leaf's rectangle contains the new one (bottom-up, one entry
//! change), and is otherwise a delete and an insert in one operation.
//!
//! # Levels
//! Leaves are level 0; the root is level `height - 1`. The R*-tree's forced
//! reinsertion happens at most once per level during one insertion (the first
//! overflow of a level that is not the root's), removing
//! [`TreeParams::reinsert_count`] entries farthest from the node's centre and
//! reinserting them nearest first ("close reinsert").
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;

use crate::geom::Rect;
use crate::page::{holds_key, Entry, Node};
use crate::page_id::PageId;
use crate::spatial::Sought;
use crate::store::{EntryChange, NodeStore, TreeMeta};
use crate::{Error, Result};
use ops::mbr;

/// The accessors every tree over a [`NodeStore`] shares: `store`,
/// `store_mut`, `into_store` and, with `counts`, `len`, `is_empty` and
/// `height` read from the store's [`TreeMeta`] (`$what` names what a record is).
macro_rules! store_accessors {
    () => {
        /// The store.
        pub fn store(&self) -> &S {
            &self.store
        }

        /// The store, mutably (e.g. to checkpoint it or change its durability).
        pub fn store_mut(&mut self) -> &mut S {
            &mut self.store
        }

#[cfg(test)]
        /// Gives the store back (checkpoint first to keep the tree).
        pub fn into_store(self) -> S {
            self.store
        }
    };
    (counts $what:literal) => {
        store_accessors!();

        #[doc = concat!("Number of ", $what, "s.")]
        pub fn len(&self) -> u64 {
            self.store.meta().records
        }

#[cfg(any(test, feature = "internals"))]
        #[doc = concat!("True when the tree holds no ", $what, ".")]
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// Number of levels (0 for an empty tree, 1 when the root is a leaf).
        pub fn height(&self) -> u16 {
            self.store.meta().height
        }
    };
}

#[cfg(test)]
mod batch_review_tests;
pub mod bulk;
mod check;
#[cfg(feature = "internals")]
pub use check::TreeReport;
mod counters;
mod delete;
pub mod external;
mod external_str;
pub mod fortree;
mod hilbert;
#[cfg(test)]
pub(crate) mod hilbert_review_tests;
mod ids;
mod insert;
pub mod inspect;
#[cfg(test)]
mod knn_tests;
pub(crate) mod object_ids;
mod ops;
pub mod params;
pub mod query;
#[cfg(test)]
mod recording_tests;
#[cfg(test)]
mod read_ahead_tests;
pub mod refine;
mod rstar;
mod spatial;
mod split;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod update_tests;
pub mod xbr;

pub use bulk::BulkMethod;
pub use counters::TreeCounters;
pub use external::{ExternalBulkConfig, ExternalBulkReport, MIN_MEMORY_BUDGET};
pub use params::{IndexKind, SplitKind, TreeParams};
pub use query::{Leaf, Neighbor};
#[cfg(test)]
pub use query::{BatchKeys, Hit, KeyResult, KnnResult, Predicate, QueryResult};

/// Euclidean distance from a point to the nearest point of a rectangle (0
/// inside): the distance kNN queries report, in the units of the coordinates.
#[cfg(test)]
pub fn min_dist(p: &crate::geom::Point, r: &Rect) -> f64 {
    ops::min_dist(p, r)
}

/// The entry of node `id` holding `entries` in its parent, in a tree of
/// `kind`: their MBR and, in a Hilbert R-tree, their largest Hilbert value.
pub(crate) fn entry_of(kind: IndexKind, id: PageId, entries: &[Entry]) -> Result<Entry> {
    let rect = mbr(entries).ok_or_else(|| Error::corrupt(Some(id), "node left without entries"))?;
    let payload = match kind {
        IndexKind::Hilbert => entries.iter().map(|e| e.payload).max().unwrap_or(0),
        _ => 0,
    };
    Ok(Entry {
        key: id,
        rect,
        payload,
    })
}

/// An R-tree (any member of the family) over a node store.
#[derive(Debug)]
pub struct RTree<S: NodeStore> {
    store: S,
    params: TreeParams,
    /// The object ids of the records, for the duplicate check of insertions.
    ids: ids::IdSet,
    /// Splits, reinsertions and merges since the tree was created or opened.
    counters: TreeCounters,
    /// How range and kNN queries read the nodes they visit ([`ReadMode`]).
    reads: ReadMode,
}

/// How a range or kNN query reads the nodes it visits. Either way it
/// visits the same nodes in the same order (depth-first in key order for
/// range queries, best-first for kNN) and returns the same records in the
/// same order; only the device requests differ, and batched kNN may read a
/// few nodes it then does not visit (`QueryStats::nodes_read_unused`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadMode {
    /// The children of a node that the query enters are read together, as
    /// one `NodeStore::get_batch` (one device batch for the pages not in
    /// memory: many reads in flight, the level-by-level batching of Fevgas'
    /// thesis applied to ordinary queries). kNN reads a node that is not in
    /// hand together with the queued nodes it will likely visit next (see
    /// `query::NearestIter`). The default.
    #[default]
    Batched,
    /// One `NodeStore::get` per node, when the traversal reaches it (kNN:
    /// when it leaves the queue): the papers' one-page-at-a-time reads,
    /// pinned by the seed workloads.
    Single,
}

impl std::str::FromStr for ReadMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<ReadMode> {
        match s {
            "batched" => Ok(ReadMode::Batched),
            "single" => Ok(ReadMode::Single),
            other => Err(Error::invalid(format!(
                "unknown read mode {other:?}: use batched or single"
            ))),
        }
    }
}

impl std::fmt::Display for ReadMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReadMode::Batched => "batched",
            ReadMode::Single => "single",
        })
    }
}

/// One node on a root-to-node path.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) id: PageId,
    pub(crate) node: Arc<Node>,
}

impl Step {
    /// Drops this step's reference to its node (keeping the id) before the
    /// node is changed through the store, so that a store that keeps the
    /// decoded node can change it in place instead of copying it. The step's
    /// `node` is then an empty placeholder and must not be read again.
    pub(crate) fn release(&mut self) {
        static EMPTY: std::sync::OnceLock<Arc<Node>> = std::sync::OnceLock::new();
        let empty = EMPTY.get_or_init(|| {
            Arc::new(Node {
                level: 0,
                entries: Vec::new(),
            })
        });
        self.node = Arc::clone(empty);
    }
}

impl<S: NodeStore> RTree<S> {
    /// A new, empty tree on `store`; the parameters are verified. The store
    /// must not hold a tree yet.
    pub fn create(store: S, params: TreeParams) -> Result<Self> {
        params.verify()?;
        store.meta().check_no_tree("one")?;
        Ok(RTree {
            store,
            params,
            ids: ids::IdSet::empty(),
            counters: TreeCounters::default(),
            reads: ReadMode::default(),
        })
    }

    /// The tree already kept by `store`, built with `params`.
    pub fn open(store: S, params: TreeParams) -> Result<Self> {
        params.verify()?;
        Ok(RTree {
            store,
            params,
            ids: ids::IdSet::unknown(),
            counters: TreeCounters::default(),
            reads: ReadMode::default(),
        })
    }

#[cfg(test)]
    /// The tree's parameters.
    pub fn params(&self) -> &TreeParams {
        &self.params
    }

    /// How range and kNN queries read nodes (default [`ReadMode::Batched`]).
    pub fn read_mode(&self) -> ReadMode {
        self.reads
    }

    /// Sets how range and kNN queries read nodes; answers do not change.
    pub fn set_read_mode(&mut self, reads: ReadMode) {
        self.reads = reads;
    }

    /// Splits, reinsertions and merges since the tree was created or opened.
    pub fn counters(&self) -> TreeCounters {
        self.counters
    }

    store_accessors!(counts "record");

    /// Inserts object `id` with MBR `rect`, as one store operation.
    pub fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
        let rect = checked(rect)?;
        let mut meta = self.store.meta();
        let entry = self.record(id, rect)?;
        // Validate before the operation starts, so an error changes nothing.
        if self.holds_id(id)? {
            return Err(duplicate_id(id));
        }
        let path = match meta.root {
            Some(root) => Some(self.leaf_path_for_insert(root, &entry)?),
            None => None,
        };
        let done = (|| {
            let op = self.store.begin_op()?;
            self.insert_record_in_op(entry, path, &mut meta)?;
            self.store.set_meta(meta)?;
            self.store.commit_op(op)
        })();
        self.track_ids(&done, |ids| ids.added(id));
        done
    }

    /// Keeps the id set in step with a finished operation: `apply` on
    /// success, forgetting the set on failure (the next insertion rebuilds it).
    fn track_ids(&mut self, outcome: &Result<()>, apply: impl FnOnce(&mut ids::IdSet)) {
        match outcome {
            Ok(()) => apply(&mut self.ids),
            Err(_) => self.ids.invalidate(),
        }
    }

    /// Deletes object `id` whose MBR is `rect` (the rectangle it was inserted
    /// with), as one store operation. An absent pair is an error and the tree
    /// is unchanged.
    pub fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        let rect = checked(rect)?;
        let path = self.find_record(id, &rect)?;
        let mut meta = self.store.meta();
        let done = (|| {
            let op = self.store.begin_op()?;
            self.delete_in_op(id, path, &mut meta)?;
            self.store.set_meta(meta)?;
            self.store.commit_op(op)
        })();
        self.track_ids(&done, |ids| ids.removed(id));
        done
    }

    /// Moves object `id` from `old` to `new`, as one store operation. An
    /// absent `(id, old)` is an error and the tree is unchanged.
    ///
    /// Bottom-up first (Lee et al., "Supporting Frequent Updates in
    /// R-Trees: A Bottom-Up Approach"): when the rectangle of the leaf
    /// holding the record (its entry in the parent; a root leaf always)
    /// contains `new`, the record is rewritten in place: one
    /// [`NodeStore::modify`] of that leaf, no deletion or reinsertion, the
    /// metadata unchanged (counted in [`TreeCounters::updates_in_place`]).
    /// The paper's extended-MBR case is taken too: when `new` lies within
    /// the leaf's rectangle grown by [`IN_PLACE_MARGIN`] of its width and
    /// height on each side, and the leaf's rectangle grown to hold `new`
    /// stays inside its parent's rectangle (the parent's entry in the
    /// grandparent; no bound for a parent that is the root), the record is
    /// rewritten in place as well and the leaf's entry in its parent grows
    /// (one more `modify`; nothing above the parent changes). A small move
    /// across its leaf's border then costs what a move inside it costs,
    /// instead of a deletion and an R*-tree insertion (forced reinsertions
    /// and splits in full leaves). Rectangles stay exact: when the record
    /// was on the border of its leaf and the leaf's rectangle shrinks, the
    /// entries above shrink with it (one more `modify` per ancestor whose
    /// entry changes). Otherwise, and
    /// always in a Hilbert R-tree (whose leaves are ordered by the records'
    /// Hilbert values, which a new rectangle changes), a delete and an
    /// insert in one operation.
    pub fn update(&mut self, id: u64, old: Rect, new: Rect) -> Result<()> {
        self.update_near(id, old, new, None).map(|_| ())
    }

    /// [`update`](Self::update) told that the record was last seen in leaf
    /// `leaf` (a hint, e.g. from an id → leaf locator): the search for it
    /// reads that leaf only, unless the record is not there any more
    /// ([`RTree::find_record_near`]). Returns the leaf the record is in
    /// afterwards when it was rewritten in place, `None` when it moved
    /// (deleted and inserted: its new leaf is not tracked).
    pub fn update_near(
        &mut self,
        id: u64,
        old: Rect,
        new: Rect,
        leaf: Option<PageId>,
    ) -> Result<Option<PageId>> {
        let old = checked(old)?;
        let new = checked(new)?;
        if let Some(leaf) = leaf {
            if self.update_inside_leaf(leaf, id, Some(&old), new)? == InLeaf::Updated {
                return Ok(Some(leaf));
            }
        }
        let path = self.find_record_near(id, &old, leaf)?;
        self.update_on_path(id, path, new)
    }

    /// [`update_near`](Self::update_near) of a record whose rectangle is
    /// not known exactly: the record `id` that intersects `within` (the id
    /// locator's rectangle, rounded outward; keys are unique in the tree).
    /// With a hint, its leaf gives the exact rectangle, and the update in
    /// that leaf alone is tried first, as `update_near` tries it (one read
    /// of the leaf for both); without one, or when the leaf does not hold
    /// the record, the search from the root finds it within `within` (it
    /// descends where an entry's rectangle intersects `within`, and takes
    /// the leaf entry with key `id`). [`Sought::Absent`], nothing changed,
    /// when neither finds record `id`.
    pub fn update_within(
        &mut self,
        id: u64,
        within: Rect,
        new: Rect,
        leaf: Option<PageId>,
    ) -> Result<Sought> {
        let within = checked(within)?;
        let new = checked(new)?;
        let in_leaf = match leaf {
            Some(page) => self.update_inside_leaf(page, id, None, new)?,
            None => InLeaf::Unknown,
        };
        let path = match in_leaf {
            InLeaf::Updated => return Ok(Sought::Moved(leaf)),
            InLeaf::Holds(old) => self.find_record_near(id, &old, leaf)?,
            InLeaf::Unknown => match self.find_record_within(id, &within)? {
                Some(path) => path,
                None => return Ok(Sought::Absent),
            },
        };
        self.update_on_path(id, path, new).map(Sought::Moved)
    }

    /// The update of record `id` to `new`, `path` the nodes from the root
    /// to its leaf: in place when [`fits_in_place`](Self::fits_in_place),
    /// else a deletion and an insertion in one operation. Returns the
    /// record's leaf when it was rewritten in place.
    fn update_on_path(&mut self, id: u64, path: Vec<Step>, new: Rect) -> Result<Option<PageId>> {
        if self.fits_in_place(&path, &new)? {
            let at = path.last().map(|s| s.id);
            return self.update_in_place(path, id, new).map(|()| at);
        }
        let mut meta = self.store.meta();
        let done = (|| {
            let op = self.store.begin_op()?;
            self.delete_in_op(id, path, &mut meta)?;
            let entry = self.record(id, new)?;
            let path = match meta.root {
                Some(root) => Some(self.leaf_path_for_insert(root, &entry)?),
                None => None,
            };
            self.insert_record_in_op(entry, path, &mut meta)?;
            self.store.set_meta(meta)?;
            self.store.commit_op(op)
        })();
        self.track_ids(&done, |_| {});
        done.map(|()| None)
    }

    /// The update of record `id` to `new` in `leaf` (the locator's hint)
    /// alone, without a path from the root, when that node is a live leaf
    /// holding the record (at `old`, when given) and the rectangle of its
    /// entries stays the same: the record's rectangle lies strictly inside
    /// it on every side (other entries make its edges) and `new` inside it.
    /// No ancestor's entry then changes, whatever its own rectangle.
    /// Returns [`InLeaf::Updated`] when it updated; else nothing is done
    /// and the caller takes the path from the root, told the record's
    /// rectangle when the leaf holds the record ([`InLeaf::Holds`]; also in
    /// a Hilbert R-tree, whose order follows the rectangles, so that it is
    /// never updated here), [`InLeaf::Unknown`] for a hint that is stale or
    /// names no live node.
    fn update_inside_leaf(
        &mut self,
        leaf: PageId,
        id: u64,
        old: Option<&Rect>,
        new: Rect,
    ) -> Result<InLeaf> {
        if self.params.kind == IndexKind::Hilbert && old.is_some() {
            // Never updated here, and the rectangle is known: no read.
            return Ok(InLeaf::Unknown);
        }
        // A page that holds no live node is an error of the store's `get`;
        // the search from the root settles what the hint could not.
        let Ok(node) = self.store.get(leaf) else {
            return Ok(InLeaf::Unknown);
        };
        if node.level != 0 {
            return Ok(InLeaf::Unknown);
        }
        // The record (keys are unique in the tree) and the rectangle of
        // the leaf's entries.
        let found = node.entries.iter().find(|e| e.key == id).map(|e| e.rect);
        let Some(rect) = found.filter(|f| old.is_none_or(|o| o == f)) else {
            return Ok(InLeaf::Unknown);
        };
        if self.params.kind == IndexKind::Hilbert {
            return Ok(InLeaf::Holds(rect));
        }
        let Some(bounds) = Rect::union_all(node.entries.iter().map(|e| &e.rect)) else {
            return Ok(InLeaf::Holds(rect));
        };
        if !(strictly_inside(&rect, &bounds) && ops::contains(&bounds, &new)) {
            return Ok(InLeaf::Holds(rect));
        }
        // The tree's copy goes before the change, so the store can change
        // its node in place.
        drop(node);
        let entry = self.record(id, new)?;
        let done = (|| {
            let op = self.store.begin_op()?;
            self.store.modify(leaf, 0, &[EntryChange::Upsert(entry)])?;
            self.store.commit_op(op)
        })();
        if done.is_ok() {
            self.counters.updates_in_place += 1;
        }
        self.track_ids(&done, |_| {});
        done.map(|()| InLeaf::Updated)
    }

    /// True when the record at the end of `path` can take rectangle `new`
    /// in place (see [`RTree::update`]): the tree is not a Hilbert R-tree,
    /// and the leaf is the root, or its rectangle in its parent contains
    /// `new`, or contains it once grown by [`IN_PLACE_MARGIN`] with the
    /// grown rectangle inside the parent's own rectangle.
    fn fits_in_place(&self, path: &[Step], new: &Rect) -> Result<bool> {
        if self.params.kind == IndexKind::Hilbert {
            return Ok(false);
        }
        let Some(leaf) = path.last() else {
            return Ok(false);
        };
        let Some(at) = path.len().checked_sub(2) else {
            return Ok(true);
        };
        let leaf_rect = child_rect(&path[at], leaf.id)?;
        if ops::contains(&leaf_rect, new) {
            return Ok(true);
        }
        let (mx, my) = (
            leaf_rect.width() * IN_PLACE_MARGIN,
            leaf_rect.height() * IN_PLACE_MARGIN,
        );
        let near = new.min_x() >= leaf_rect.min_x() - mx
            && new.max_x() <= leaf_rect.max_x() + mx
            && new.min_y() >= leaf_rect.min_y() - my
            && new.max_y() <= leaf_rect.max_y() + my;
        if !near {
            return Ok(false);
        }
        match at.checked_sub(1) {
            Some(g) => Ok(ops::contains(
                &child_rect(&path[g], path[at].id)?,
                &leaf_rect.union(new),
            )),
            None => Ok(true),
        }
    }

    /// Rewrites record `id` in the leaf at the end of `path` with rectangle
    /// `new` (inside the leaf's rectangle): one operation, the metadata
    /// unchanged. When the leaf's rectangle shrinks (the record was on its
    /// border) the ancestors' entries shrink with it, bottom-up, so every
    /// parent rectangle stays the union of its child's entries.
    fn update_in_place(&mut self, mut path: Vec<Step>, id: u64, new: Rect) -> Result<()> {
        let entry = self.record(id, new)?;
        let done = (|| {
            let op = self.store.begin_op()?;
            let mut change = Some(entry);
            for i in (0..path.len()).rev() {
                let Some(u) = change.take() else { break };
                let step = &path[i];
                let level = step.node.level;
                if keeps_node_rect(&path, i, &u) {
                    // Nothing above changes: rewrite the entry, stop.
                    path[i].release();
                    self.store
                        .modify(path[i].id, level, &[EntryChange::Upsert(u)])?;
                    break;
                }
                let mut entries = step.node.entries.clone();
                match entries.iter_mut().find(|e| e.key == u.key) {
                    Some(slot) => *slot = u,
                    None => {
                        return Err(Error::corrupt(Some(step.id), "entry missing from its node"))
                    }
                }
                change = self.changed_parent_entry(&path, i, &entries)?;
                path[i].release();
                self.store
                    .modify(path[i].id, level, &[EntryChange::Upsert(u)])?;
            }
            self.store.commit_op(op)
        })();
        if done.is_ok() {
            self.counters.updates_in_place += 1;
        }
        self.track_ids(&done, |_| {});
        done
    }

    /// Path to the leaf a new record goes to, refusing an id already there.
    fn leaf_path_for_insert(&self, root: PageId, entry: &Entry) -> Result<Vec<Step>> {
        let path = self.choose_path(root, entry, 0)?;
        if let Some(leaf) = path.last() {
            if holds_key(&leaf.node.entries, entry.key) {
                return Err(duplicate_id(entry.key));
            }
        }
        Ok(path)
    }

    /// Inserts a record inside an open operation; `path` leads to its leaf
    /// (`None` for an empty tree).
    fn insert_record_in_op(
        &mut self,
        entry: Entry,
        path: Option<Vec<Step>>,
        meta: &mut TreeMeta,
    ) -> Result<()> {
        match path {
            None => {
                let root = self.store.create(0, vec![entry])?;
                meta.root = Some(root);
                meta.height = 1;
            }
            Some(path) => {
                let mut reinserted = Vec::new();
                self.insert_with_reinsertions(path, entry, meta, &mut reinserted)?;
            }
        }
        meta.records += 1;
        Ok(())
    }

    /// Inserts `entry` along `path`, then every entry a forced reinsertion
    /// removed on the way (all sharing `reinserted`, the levels already
    /// treated during this insertion).
    fn insert_with_reinsertions(
        &mut self,
        path: Vec<Step>,
        entry: Entry,
        meta: &mut TreeMeta,
        reinserted: &mut Vec<u16>,
    ) -> Result<()> {
        if self.params.kind == IndexKind::Hilbert {
            return self.hilbert_insert_along(path, entry, meta);
        }
        let mut pending: VecDeque<(u16, Entry)> = VecDeque::new();
        self.insert_along(path, entry, meta, reinserted, &mut pending)?;
        while let Some((level, e)) = pending.pop_front() {
            let root = meta
                .root
                .ok_or_else(|| Error::corrupt(None, "tree lost its root during an insertion"))?;
            let path = self.choose_path(root, &e, level)?;
            self.insert_along(path, e, meta, reinserted, &mut pending)?;
        }
        Ok(())
    }

    /// Inserts an entry of level `level` (a record at 0, a child entry above)
    /// inside an open operation; used to reinsert orphans.
    fn reinsert_entry(&mut self, level: u16, entry: Entry, meta: &mut TreeMeta) -> Result<()> {
        let root = meta
            .root
            .ok_or_else(|| Error::corrupt(None, "reinsertion into a tree without root"))?;
        let path = self.choose_path(root, &entry, level)?;
        let mut reinserted = Vec::new();
        self.insert_with_reinsertions(path, entry, meta, &mut reinserted)
    }
}

impl<S: NodeStore> RTree<S> {
    /// The leaf entry of a record (its Hilbert value as payload in a Hilbert R-tree).
    fn record(&self, id: u64, rect: Rect) -> Result<Entry> {
        let payload = match self.params.kind {
            IndexKind::Hilbert => hilbert::record_value(&self.domain()?, &rect, id),
            _ => 0,
        };
        Ok(Entry {
            key: id,
            rect,
            payload,
        })
    }

    /// The entry of node `id` holding `entries` in its parent: their MBR and,
    /// in a Hilbert R-tree, their largest Hilbert value.
    pub(crate) fn entry_for(&self, id: PageId, entries: &[Entry]) -> Result<Entry> {
        entry_of(self.params.kind, id, entries)
    }

    /// The new entry of `path[i]` (now holding `entries`) in its parent when
    /// it changed; `None` at the root or when the parent's entry is right.
    pub(crate) fn changed_parent_entry(
        &self,
        path: &[Step],
        i: usize,
        entries: &[Entry],
    ) -> Result<Option<Entry>> {
        let (Some(step), Some(parent)) = (path.get(i), i.checked_sub(1).and_then(|p| path.get(p)))
        else {
            return Ok(None);
        };
        let new = self.entry_for(step.id, entries)?;
        let current = child_entry(parent, step.id)?;
        Ok(if *current == new { None } else { Some(new) })
    }
}

/// How far outside its leaf's rectangle a record may move and still be
/// rewritten in place by [`RTree::update`], as a fraction of the leaf's
/// width (in x) and height (in y) on each side: Lee et al.'s extended
/// leaf MBR (its ε), bounded as theirs by the parent's rectangle, so a
/// leaf never grows beyond the region its parent already covers.
pub const IN_PLACE_MARGIN: f64 = 0.1;

/// True when rewriting entry `u` in the node of `path[i]` leaves the
/// node's rectangle as its parent holds it, without reading the node's
/// other entries: the node is the root, or `u`'s rectangle lies inside the
/// node's rectangle and the entry's current one touches none of its sides
/// (so the other entries reach every side). False also when the entry or
/// the node's entry in its parent is missing (the caller reports it).
fn keeps_node_rect(path: &[Step], i: usize, u: &Entry) -> bool {
    let Some(step) = path.get(i) else {
        return false;
    };
    let Some(parent) = i.checked_sub(1).and_then(|p| path.get(p)) else {
        return step.node.entry(u.key).is_some();
    };
    let (Some(old), Some(node)) = (step.node.entry(u.key), parent.node.entry(step.id)) else {
        return false;
    };
    u.payload == old.payload && ops::contains(&node.rect, &u.rect) && strictly_inside(&old.rect, &node.rect)
}

/// What [`RTree::update_inside_leaf`] found in the hinted leaf.
#[derive(Debug, Clone, Copy, PartialEq)]
enum InLeaf {
    /// The record was rewritten there.
    Updated,
    /// The leaf holds the record, at this rectangle, but it was not
    /// rewritten there.
    Holds(Rect),
    /// The page is not a live leaf holding the record (at the rectangle
    /// given).
    Unknown,
}

/// Whether `inner` lies inside `outer` touching none of its sides: the
/// rectangle of a set of entries holding `inner` is then made by the others.
fn strictly_inside(inner: &Rect, outer: &Rect) -> bool {
    inner.min_x() > outer.min_x()
        && inner.min_y() > outer.min_y()
        && inner.max_x() < outer.max_x()
        && inner.max_y() < outer.max_y()
}

/// The entry of child `child` in `step`'s node, found by key; a
/// corruption error naming the node when it is missing.
pub(crate) fn child_entry(step: &Step, child: PageId) -> Result<&Entry> {
    step.node
        .entry(child)
        .ok_or_else(|| Error::corrupt(Some(step.id), "child entry missing from its parent"))
}

/// The rectangle of child `child` in `step`'s node (its entry there).
fn child_rect(step: &Step, child: PageId) -> Result<Rect> {
    child_entry(step, child).map(|e| e.rect)
}

/// The rectangle after the checks of [`Rect::new`]. Every `Rect` passes them
/// (its fields are private); the check stays as a defence in depth.
pub(crate) fn checked(r: Rect) -> Result<Rect> {
    Rect::new(r.min_x(), r.min_y(), r.max_x(), r.max_y())
}

fn duplicate_id(id: u64) -> Error {
    Error::invalid(format!(
        "object id {id} is already in the index (object ids must be unique)"
    ))
}

/// The entry-level changes that turn `old` (sorted by key) into `new` (any order).
pub(crate) fn diff(old: &[Entry], new: &[Entry]) -> Vec<EntryChange> {
    let mut new_sorted: Vec<Entry> = new.to_vec();
    if !new_sorted.is_sorted_by_key(|e| e.key) {
        new_sorted.sort_unstable_by_key(|e| e.key);
    }
    let mut changes = Vec::new();
    let (mut i, mut j) = (0, 0);
    loop {
        match (old.get(i), new_sorted.get(j)) {
            (None, None) => break,
            (Some(o), None) => {
                changes.push(EntryChange::Remove(o.key));
                i += 1;
            }
            (None, Some(n)) => {
                changes.push(EntryChange::Upsert(*n));
                j += 1;
            }
            (Some(o), Some(n)) => {
                if o.key < n.key {
                    changes.push(EntryChange::Remove(o.key));
                    i += 1;
                } else if n.key < o.key {
                    changes.push(EntryChange::Upsert(*n));
                    j += 1;
                } else {
                    if o != n {
                        changes.push(EntryChange::Upsert(*n));
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
    }
    changes
}
