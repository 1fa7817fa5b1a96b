//! Queries: one traversal path through [`NodeStore::get`] driven by a
//! [`Selection`] (as rstar's `SelectionFunction`), used by the intersection,
//! containment, within and point queries and by batched range queries; and
//! kNN by best-first search (Hjaltason and Samet), as an iterator and as a
//! k-bounded call that can return every item tied at the k-th distance.
//!
//! Every query reports its candidates (records that passed the MBR filter)
//! and results. The index holds MBRs only, so without a refinement step on
//! exact geometry (the `objects` layer) results equal candidates.
//!
//! Predicates read as shapely's `predicate(window, object)`:
//! [`Predicate::Contains`] finds objects inside the window,
//! [`Predicate::Within`] objects that contain the window. Rectangles are
//! closed: touching counts as intersecting.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::ops::{contains, intersects};
use super::{checked, RTree, ReadMode};
use crate::geom::{Point, Rect};
use crate::page::{self, Entry, Node};
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::{Error, Result};

pub(crate) mod knn;

/// The spatial predicate of a range query, as `predicate(window, object)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Predicate {
    /// Objects whose MBR shares a point with the window.
    Intersects,
    /// Objects whose MBR lies inside the window (boundary included).
    Contains,
    /// Objects whose MBR contains the window.
    Within,
}

impl Predicate {
    /// Every predicate, in declaration order.
    pub const ALL: [Predicate; 3] = [Predicate::Intersects, Predicate::Contains, Predicate::Within];
}

/// Decides which subtrees a traversal enters and which records it reports.
pub trait Selection {
    /// Enter the subtree whose MBR is `rect`?
    fn descend(&self, rect: &Rect) -> bool;
    /// Report the record whose MBR is `rect`?
    fn select(&self, rect: &Rect) -> bool;
}

#[cfg(any(test, feature = "internals"))]
/// Records within `radius` of `center`, boundary included: a subtree is
/// entered when its MBR comes that close, a record is reported when its
/// MBR does (for a point, its distance to the centre).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WithinDistance {
    /// Centre.
    pub center: Point,
    /// Radius.
    pub radius: f64,
}

#[cfg(any(test, feature = "internals"))]
impl Selection for WithinDistance {
    fn descend(&self, rect: &Rect) -> bool {
        rect.min_dist_point(&self.center) <= self.radius
    }
    fn select(&self, rect: &Rect) -> bool {
        rect.min_dist_point(&self.center) <= self.radius
    }
}

/// A range query: a window and a predicate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// The query window.
    pub rect: Rect,
    /// The predicate.
    pub predicate: Predicate,
}

impl Selection for Window {
    fn descend(&self, rect: &Rect) -> bool {
        match self.predicate {
            Predicate::Intersects | Predicate::Contains => intersects(rect, &self.rect),
            Predicate::Within => contains(rect, &self.rect),
        }
    }

    fn select(&self, rect: &Rect) -> bool {
        match self.predicate {
            Predicate::Intersects => intersects(rect, &self.rect),
            Predicate::Contains => contains(&self.rect, rect),
            Predicate::Within => contains(rect, &self.rect),
        }
    }
}

/// The windows of a batch that enter a subtree: one alone (the common case
/// below the top levels, kept without an allocation) or several.
#[derive(Debug, Clone)]
enum Active {
    /// One window.
    One(usize),
    /// Several windows, in ascending order of their `min_x` (see
    /// [`BatchWindows`]).
    Many(Vec<usize>),
}

impl Active {
    /// The windows.
    fn as_slice(&self) -> &[usize] {
        match self {
            Active::One(w) => std::slice::from_ref(w),
            Active::Many(ws) => ws,
        }
    }
}

/// Up to this many windows entering a node, each is tested against the
/// node's children in a loop of its own; more, and each child looks up the
/// windows that can reach it (see [`BatchWindows::entering`]). Below a
/// few dozen windows the loops cost less than a child's two binary
/// searches: 16 took 12–20 % off 100 windows of 0.001 % and 0.01 % at
/// 200,000 boxes against 8, and left 1,000,000 unchanged
/// (`docs/benchmarks.md`, "A batch call's fixed cost").
const FEW_WINDOWS: usize = 16;

/// Calls `hit` with the position and the entry of every entry of `entries`
/// whose subtree `sel` enters, in order, with the predicate chosen once.
#[inline]
fn entered_by(sel: &Window, entries: &[Entry], mut hit: impl FnMut(usize, &Entry)) {
    let win = &sel.rect;
    match sel.predicate {
        Predicate::Intersects | Predicate::Contains => {
            for (i, e) in entries.iter().enumerate() {
                if intersects(&e.rect, win) {
                    hit(i, e);
                }
            }
        }
        Predicate::Within => {
            for (i, e) in entries.iter().enumerate() {
                if contains(&e.rect, win) {
                    hit(i, e);
                }
            }
        }
    }
}

/// The windows of a batch, and what lets a node's visit skip most of them
/// when many enter it (the top levels): the windows of an [`Active::Many`]
/// are kept in ascending order of `min_x`, so those that can reach a child
/// are one run of them, found by binary search; only that run is tested.
struct BatchWindows {
    /// The windows, by position in the batch.
    sels: Vec<Window>,
    /// At least the widest window's width (exactly: the rounded width's
    /// next float up), so that `min_x + reach` is never below a window's
    /// `max_x`.
    reach: f64,
}

impl BatchWindows {
    fn new(sels: Vec<Window>) -> BatchWindows {
        let widest = sels
            .iter()
            .map(|s| s.rect.max_x() - s.rect.min_x())
            .fold(0.0, f64::max);
        BatchWindows {
            sels,
            reach: widest.next_up(),
        }
    }

    /// Every window, in ascending order of `min_x` (ties by position).
    fn all(&self) -> Active {
        let mut ws: Vec<usize> = (0..self.sels.len()).collect();
        ws.sort_by(|&a, &b| self.min_x(a).total_cmp(&self.min_x(b)));
        match *ws.as_slice() {
            [w] => Active::One(w),
            _ => Active::Many(ws),
        }
    }

    fn min_x(&self, w: usize) -> f64 {
        self.sels.get(w).map_or(f64::INFINITY, |s| s.rect.min_x())
    }

    fn descends(&self, w: usize, rect: &Rect) -> bool {
        self.sels.get(w).is_some_and(|s| s.descend(rect))
    }

    /// The children among `entries` that the windows of `active` enter,
    /// each with the windows that enter it. With one window (below the top
    /// levels, nearly every node) its predicate is chosen once for the
    /// node.
    fn enter(&self, active: &Active, entries: &[Entry], out: &mut Entered<Active>) {
        match active {
            Active::One(w) => {
                if let Some(sel) = self.sels.get(*w) {
                    entered_by(sel, entries, |_, e| out.push(e.key, Active::One(*w)));
                }
            }
            Active::Many(ws) if ws.len() <= FEW_WINDOWS => {
                // Each window over the children as one window does; the
                // (child position, child key, window) found, grouped by
                // child (a stable sort keeps each child's windows in the
                // order of `ws`).
                let mut pairs: Vec<(usize, PageId, usize)> = Vec::new();
                for &w in ws {
                    if let Some(sel) = self.sels.get(w) {
                        entered_by(sel, entries, |i, e| pairs.push((i, e.key, w)));
                    }
                }
                pairs.sort_by_key(|&(i, _, _)| i);
                for group in pairs.chunk_by(|a, b| a.0 == b.0) {
                    let Some(&(_, key, first)) = group.first() else {
                        continue;
                    };
                    let state = match group {
                        [_] => Active::One(first),
                        _ => Active::Many(group.iter().map(|&(_, _, w)| w).collect()),
                    };
                    out.push(key, state);
                }
            }
            Active::Many(ws) => {
                for e in entries {
                    if let Some(a) = self.entering(ws, &e.rect) {
                        out.push(e.key, a);
                    }
                }
            }
        }
    }

    /// The windows among `ws` (in ascending order of `min_x`) that enter
    /// the child whose MBR is `rect`, `None` if none.
    ///
    /// Every predicate enters only children its window intersects, so a
    /// window that enters has `min_x <= rect.max_x` and `max_x >=
    /// rect.min_x`; the latter implies `min_x + reach >= rect.min_x`
    /// (rounding is monotone and `min_x + reach` is at least `max_x`
    /// exactly). Both bounds are monotone in `min_x`, so the candidates
    /// are a run of the sorted windows.
    fn entering(&self, ws: &[usize], rect: &Rect) -> Option<Active> {
        let end = ws.partition_point(|&w| self.min_x(w) <= rect.max_x());
        let run = ws.get(..end).unwrap_or_default();
        let start = run.partition_point(|&w| self.min_x(w) + self.reach < rect.min_x());
        let run = run.get(start..).unwrap_or_default();
        let mut it = run.iter().copied().filter(|&w| self.descends(w, rect));
        let first = it.next()?;
        match it.next() {
            None => Some(Active::One(first)),
            Some(second) => {
                let mut ws = vec![first, second];
                ws.extend(it);
                Some(Active::Many(ws))
            }
        }
    }
}

/// Where a batch of range queries puts the records one window selects:
/// hits with their rectangles ([`QueryResult`]) or their keys alone
/// ([`KeyResult`], for callers that need no rectangle: nothing but the
/// 8-byte keys is copied).
pub(crate) trait WindowAnswer: Default + Clone {
    /// Appends the records `found` (selected already).
    fn extend_entries<'a>(&mut self, found: impl Iterator<Item = &'a Entry>);
    /// Appends the records of `entries` that `keep` selects, in order.
    fn extend_where(&mut self, entries: &[Entry], keep: impl Fn(&Entry) -> bool) {
        self.extend_entries(entries.iter().filter(|e| keep(e)));
    }
    /// Records held.
    fn found(&self) -> usize;
    /// What the query did.
    fn stats_mut(&mut self) -> &mut QueryStats;
}

impl WindowAnswer for QueryResult {
    fn extend_entries<'a>(&mut self, found: impl Iterator<Item = &'a Entry>) {
        self.hits.extend(found.map(|e| Hit {
            id: e.key,
            rect: e.rect,
        }));
    }

    fn found(&self) -> usize {
        self.hits.len()
    }

    fn stats_mut(&mut self) -> &mut QueryStats {
        &mut self.stats
    }
}

/// Answer of a range query as record keys alone (see `WindowAnswer`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyResult {
    /// Keys (object ids) of the records found, in traversal order.
    pub keys: Vec<u64>,
    /// What the query did.
    pub stats: QueryStats,
}

impl WindowAnswer for KeyResult {
    fn extend_entries<'a>(&mut self, found: impl Iterator<Item = &'a Entry>) {
        self.keys.extend(found.map(|e| e.key));
    }

    /// Without a branch per record: every key is written to the next free
    /// slot and the slot advances by one only when `keep` selects it. A
    /// leaf scan keeps about half its records, the worst case for a branch
    /// predictor (measured: a fifth faster on windows of 0.1 %).
    fn extend_where(&mut self, entries: &[Entry], keep: impl Fn(&Entry) -> bool) {
        let start = self.keys.len();
        self.keys.resize(start + entries.len(), 0);
        let mut kept = 0;
        if let Some(slots) = self.keys.get_mut(start..) {
            for e in entries {
                if let Some(slot) = slots.get_mut(kept) {
                    *slot = e.key;
                }
                kept += usize::from(keep(e));
            }
        }
        self.keys.truncate(start + kept);
    }

    fn found(&self) -> usize {
        self.keys.len()
    }

    fn stats_mut(&mut self) -> &mut QueryStats {
        &mut self.stats
    }
}

impl From<QueryResult> for KeyResult {
    fn from(r: QueryResult) -> KeyResult {
        KeyResult {
            keys: r.hits.iter().map(|h| h.id).collect(),
            stats: r.stats,
        }
    }
}

/// The answers of a batch of range queries as one flat list of record
/// keys (`RTree::query_batch_flat`): window `i`'s at
/// `keys[offsets[i]..offsets[i + 1]]`, in the order its own query gives.
/// One vector for all windows, where [`KeyResult`]s grow one each (with
/// thousands of windows, their growth in turns was a third of a batch's
/// time in the allocator).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchKeys {
    /// `windows + 1` non-decreasing positions in `keys`, from 0.
    pub offsets: Vec<usize>,
    /// The keys of every window's records, window after window.
    pub keys: Vec<u64>,
}

/// Where the traversal of a batch of range queries puts what it finds
/// for each window (by position in the batch).
trait BatchSink {
    /// Window `w` entered a node.
    fn visited(&mut self, w: usize);
    /// The records of the leaf `entries` that `sel` (window `w`) selects.
    fn leaf(&mut self, w: usize, sel: &Window, entries: &[Entry]);
}

/// One answer per window, with its counters.
impl<R: WindowAnswer> BatchSink for Vec<R> {
    fn visited(&mut self, w: usize) {
        if let Some(r) = self.get_mut(w) {
            r.stats_mut().nodes_visited += 1;
        }
    }

    fn leaf(&mut self, w: usize, sel: &Window, entries: &[Entry]) {
        if let Some(r) = self.get_mut(w) {
            select_leaf(sel, entries, r);
        }
    }

}

/// (window, key) pairs in the order found, grouped by window at the end
/// ([`FlatSink::finish`]).
#[derive(Default)]
struct FlatSink {
    /// The window of each key of `found`.
    windows: Vec<usize>,
    /// Every key found, in the order found (its counters are not used).
    found: KeyResult,
}

impl FlatSink {
    /// The pairs grouped by window (a stable counting sort: each window's
    /// keys keep the order they were found in).
    fn finish(self, n_windows: usize) -> BatchKeys {
        let mut offsets = vec![0usize; n_windows + 1];
        for &w in &self.windows {
            if let Some(c) = offsets.get_mut(w + 1) {
                *c += 1;
            }
        }
        for i in 1..offsets.len() {
            offsets[i] += offsets[i - 1];
        }
        let mut next = offsets.clone();
        let mut keys = vec![0u64; self.found.keys.len()];
        for (&w, &k) in self.windows.iter().zip(&self.found.keys) {
            if let Some(at) = next.get_mut(w) {
                if let Some(slot) = keys.get_mut(*at) {
                    *slot = k;
                }
                *at += 1;
            }
        }
        BatchKeys { offsets, keys }
    }
}

impl BatchSink for FlatSink {
    fn visited(&mut self, _: usize) {}

    fn leaf(&mut self, w: usize, sel: &Window, entries: &[Entry]) {
        select_leaf(sel, entries, &mut self.found);
        self.windows.resize(self.found.keys.len(), w);
    }
}

/// Appends the entries of a leaf that `window` selects to `r`, counting
/// them, with the predicate chosen once for the leaf.
fn select_leaf<R: WindowAnswer>(window: &Window, entries: &[Entry], r: &mut R) {
    let before = r.found();
    let w = &window.rect;
    match window.predicate {
        Predicate::Intersects => r.extend_where(entries, |e| intersects(&e.rect, w)),
        Predicate::Contains => r.extend_where(entries, |e| contains(w, &e.rect)),
        Predicate::Within => r.extend_where(entries, |e| contains(&e.rect, w)),
    }
    let found = (r.found() - before) as u64;
    let stats = r.stats_mut();
    stats.candidates += found;
    stats.results += found;
}

#[cfg(test)]
/// A point query: objects whose MBR contains the point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointSelection(pub Point);

#[cfg(test)]
impl Selection for PointSelection {
    fn descend(&self, rect: &Rect) -> bool {
        rect.contains_point(&self.0)
    }

    fn select(&self, rect: &Rect) -> bool {
        rect.contains_point(&self.0)
    }
}

/// A record found by a query.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// Object id.
    pub id: u64,
    /// Its MBR.
    pub rect: Rect,
}

/// What a query did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryStats {
    /// Nodes the query visited (read through the store and used). The same
    /// in both [`ReadMode`]s.
    pub nodes_visited: u64,
    /// kNN with batched reads: nodes read ahead in a batch that the search
    /// then did not visit (pruned by a bound that tightened after the read,
    /// or still queued when it stopped). Always 0 for single reads and for
    /// range queries, which read only what they visit.
    #[serde(default)]
    pub nodes_read_unused: u64,
    /// Records that passed the filter step on MBRs (kNN: records whose
    /// distance was computed).
    pub candidates: u64,
    /// Records returned.
    pub results: u64,
}

/// Answer of a range or point query.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryResult {
    /// Records found, in traversal order.
    pub hits: Vec<Hit>,
    /// What the query did.
    pub stats: QueryStats,
}

impl QueryResult {
    /// The answer of a walk `select` that reports each selected record to
    /// the visitor it is given and returns what it did.
    pub(crate) fn gather(
        select: impl FnOnce(&mut dyn FnMut(&Entry)) -> Result<QueryStats>,
    ) -> Result<Self> {
        let mut hits = Vec::new();
        let stats = select(&mut |e: &Entry| {
            hits.push(Hit {
                id: e.key,
                rect: e.rect,
            })
        })?;
        Ok(QueryResult { hits, stats })
    }

    /// The ids of the records found, ascending (for comparing answers
    /// whatever the traversal order).
    pub fn sorted_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.hits.iter().map(|h| h.id).collect();
        ids.sort_unstable();
        ids
    }
}

/// A neighbour found by a kNN query.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Neighbor {
    /// Object id.
    pub id: u64,
    /// Its MBR.
    pub rect: Rect,
    /// Euclidean distance from the query point to the MBR (0 inside), in the
    /// units of the coordinates.
    pub distance: f64,
}

/// Answer of a kNN query: neighbours by ascending distance (ties by id).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KnnResult {
    /// The neighbours.
    pub neighbors: Vec<Neighbor>,
    /// What the query did.
    pub stats: QueryStats,
}

/// Answers of a batch of range queries run in one traversal.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchResult {
    /// One answer per window, in the order given (`nodes_visited` counts
    /// the nodes each window needed).
    pub results: Vec<QueryResult>,
    /// Nodes the shared traversal read (each at most once).
    pub nodes_visited: u64,
}

/// The point, refused as [`Point::new`] refuses it: a coordinate that is
/// not finite or beyond [`crate::geom::MAX_COORD`] in magnitude (a query
/// point is built with its public fields as often as with `Point::new`;
/// beyond `MAX_COORD` squared distances overflow to infinity and every
/// record would tie).
pub(crate) fn checked_point(p: Point) -> Result<Point> {
    Point::new(p.x, p.y)
}

/// A node on the stack of [`RTree::walk`]: its page, or the node itself
/// when it was read in a batch with its siblings, with the state its
/// parent's visit gave it.
enum Pending<T> {
    Page(PageId, T),
    Read(PageId, Arc<Node>, T),
}

/// Bytes of pages [`ReadAhead`] holds at most (16 MiB: 4,096 pages of 4 KiB
/// full of 40-byte entries), counted as [`page::ENTRY_SIZE`] per entry slot
/// of a node: the cap in nodes follows the tree's M.
const READ_AHEAD_BYTES: usize = 16 << 20;

/// Nodes read ahead of [`RTree::walk`] in a batched traversal.
///
/// When the walk has read a group of sibling nodes (the children a node's
/// visit enters), the nodes below them that the walk will enter (`enter`,
/// the walk's own choice, so nothing is read that the walk does not visit)
/// are read level by level, each level as one batch, down to the leaves or
/// until [`READ_AHEAD_BYTES`] of nodes are held. A small batch of windows
/// over a large tree is then read in about one device batch per level,
/// instead of a batch per group of siblings: more reads in flight on a
/// cold index.
struct ReadAhead {
    /// Nodes read and not visited yet.
    nodes: crate::page_id::IdMap<Arc<Node>>,
    /// Nodes (read ahead or not) whose entered children are all in `nodes`
    /// or were visited: their visit's group needs no look again. An id
    /// leaves the set when its group is looked at.
    expanded: crate::page_id::IdSet,
    /// Most nodes held in `nodes`.
    cap: usize,
}

impl ReadAhead {
    /// Nothing read ahead, for a tree of `max_entries` per node.
    fn new(max_entries: usize) -> Self {
        let cap = (READ_AHEAD_BYTES / (max_entries.max(1) * page::ENTRY_SIZE)).max(1);
        #[cfg(test)]
        let cap = super::read_ahead_tests::CAP.with(|c| c.get()).unwrap_or(cap);
        ReadAhead {
            nodes: Default::default(),
            expanded: Default::default(),
            cap,
        }
    }

    /// The nodes `ids`, in order: those read ahead taken from here, the
    /// others read as one batch.
    fn take<S: NodeStore + ?Sized>(&mut self, store: &S, ids: &[PageId]) -> Result<Vec<Arc<Node>>> {
        if self.nodes.is_empty() {
            return store.get_batch(ids);
        }
        let missing: Vec<PageId> = ids
            .iter()
            .copied()
            .filter(|id| !self.nodes.contains_key(id))
            .collect();
        let mut read = store.get_batch(&missing)?.into_iter();
        ids.iter()
            .map(|id| match self.nodes.remove(id) {
                Some(node) => Ok(node),
                None => read
                    .next()
                    .ok_or_else(|| Error::corrupt(Some(*id), "node missing from a batch read")),
            })
            .collect()
    }

    /// Reads ahead below the group `ids` (nodes `nodes`, which the walk
    /// will visit with `states`), as the type documentation says.
    fn below<S: NodeStore + ?Sized, T>(
        &mut self,
        store: &S,
        ids: &[PageId],
        nodes: &[Arc<Node>],
        states: &[T],
        enter: &impl Fn(&T, &[Entry], &mut Entered<T>),
    ) -> Result<()> {
        // The group's nodes that were expanded already leave the set now:
        // this is the only time the walk asks about them.
        let group: Vec<usize> = (0..ids.len())
            .filter(|&i| nodes[i].level > 0 && !self.expanded.remove(&ids[i]))
            .collect();
        let mut level = self.level_below(store, group.iter().map(|&i| (ids[i], &nodes[i], &states[i])), enter)?;
        while let Some((ids, nodes, states)) = level.take() {
            let parents: Vec<usize> = (0..ids.len())
                .filter(|&i| nodes[i].level > 0 && !self.expanded.contains(&ids[i]))
                .collect();
            let parents = parents.iter().map(|&i| (ids[i], &nodes[i], &states[i]));
            level = self.level_below(store, parents, enter)?;
        }
        Ok(())
    }

    /// One level of [`below`](Self::below): the children `parents` enter,
    /// those not held read as one batch (the first ones, in the walk's
    /// order, while the cap allows); each parent whose children are all
    /// held is marked expanded. Returns the children held, with their
    /// states, to look below next; `None` when there is nothing more to
    /// read (no parent, leaves, or the cap reached).
    #[allow(clippy::type_complexity)]
    fn level_below<'a, S: NodeStore + ?Sized, T: 'a>(
        &mut self,
        store: &S,
        parents: impl Iterator<Item = (PageId, &'a Arc<Node>, &'a T)>,
        enter: &impl Fn(&T, &[Entry], &mut Entered<T>),
    ) -> Result<Option<(Vec<PageId>, Vec<Arc<Node>>, Vec<T>)>> {
        let mut entered = Entered {
            ids: Vec::new(),
            states: Vec::new(),
        };
        // Each parent with the end of its children in `entered`.
        let mut ends = Vec::new();
        for (id, node, state) in parents {
            enter(state, &node.entries, &mut entered);
            ends.push((id, entered.ids.len()));
        }
        let room = self.cap.saturating_sub(self.nodes.len());
        if ends.is_empty() || room == 0 {
            return Ok(None);
        }
        let mut missing = Vec::new();
        // Children up to `held` (exclusive) are held once the batch is read.
        let mut held = entered.ids.len();
        for (i, id) in entered.ids.iter().enumerate() {
            if !self.nodes.contains_key(id) {
                if missing.len() == room {
                    held = i;
                    break;
                }
                missing.push(*id);
            }
        }
        let read = store.get_batch(&missing)?;
        self.nodes.extend(missing.into_iter().zip(read));
        for &(id, end) in &ends {
            if end <= held {
                self.expanded.insert(id);
            }
        }
        if held < entered.ids.len() {
            return Ok(None);
        }
        let nodes = entered
            .ids
            .iter()
            .map(|id| Arc::clone(&self.nodes[id]))
            .collect();
        Ok(Some((entered.ids, nodes, entered.states)))
    }
}

/// The children a node's visit enters in [`RTree::walk`], in key order,
/// each with the state it carries.
struct Entered<T> {
    ids: Vec<PageId>,
    states: Vec<T>,
}

impl<T> Entered<T> {
    /// Enters child `id` with `state`.
    #[inline]
    fn push(&mut self, id: PageId, state: T) {
        self.ids.push(id);
        self.states.push(state);
    }
}

/// Every subtree and every record: the selection of a whole-tree walk
/// (the leaves, the bounds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg(test)]
pub struct Everything;

#[cfg(test)]
impl Selection for Everything {
    fn descend(&self, _rect: &Rect) -> bool {
        true
    }

    fn select(&self, _rect: &Rect) -> bool {
        true
    }
}

/// One leaf of a tree: its page id, the record keys of its entries and its
/// MBR (the union of its entries' rectangles).
pub type Leaf = (PageId, Vec<u64>, Rect);

impl<S: NodeStore> RTree<S> {
    /// The one traversal every range query uses: depth-first in key order,
    /// entering subtrees `sel` descends into and calling `visit` for each
    /// record it selects. The nodes are read per the tree's [`ReadMode`]:
    /// the children a node's visit enters as one [`NodeStore::get_batch`]
    /// (batched), or one [`NodeStore::get`] each when the walk reaches them.
    pub fn select<F: Selection + ?Sized>(
        &self,
        sel: &F,
        mut visit: impl FnMut(&Entry),
    ) -> Result<QueryStats> {
        let mut stats = QueryStats::default();
        stats.nodes_visited = self.walk(
            (),
            |_, entries, out| {
                for e in entries.iter().filter(|e| sel.descend(&e.rect)) {
                    out.push(e.key, ());
                }
            },
            |_, node, _| {
                if node.level != 0 {
                    return;
                }
                for e in node.entries.iter().filter(|e| sel.select(&e.rect)) {
                    stats.candidates += 1;
                    stats.results += 1;
                    visit(e);
                }
            },
        )?;
        Ok(stats)
    }

    /// The traversal under [`RTree::select`], [`RTree::query_batch`] and
    /// [`RTree::leaves`]: depth-first in key order from the root, which
    /// carries `root`; `enter`, given a node's state and its entries, puts
    /// the children to enter with their states in an [`Entered`] (once per
    /// node, so that a selection can hoist what is the same for all its
    /// children). `visit` sees every node entered (page id, node, state).
    /// Returns the nodes visited.
    fn walk<T>(
        &self,
        root: T,
        enter: impl Fn(&T, &[Entry], &mut Entered<T>),
        mut visit: impl FnMut(PageId, &Node, &T),
    ) -> Result<u64> {
        let Some(root_id) = self.store.meta().root else {
            return Ok(0);
        };
        let batched = self.reads == ReadMode::Batched;
        let mut visited = 0;
        // Nodes still to visit, the next on top: read already (batched) or
        // to be read when popped (single).
        let mut stack: Vec<Pending<T>> = vec![Pending::Page(root_id, root)];
        // The children a node's visit enters, reused from node to node.
        let mut entered = Entered {
            ids: Vec::new(),
            states: Vec::new(),
        };
        // Batched: nodes read ahead of the walk, taken when their parent's
        // visit enters them.
        let mut ahead = ReadAhead::new(self.params.max_entries);
        while let Some(next) = stack.pop() {
            let (id, node, state) = match next {
                Pending::Page(id, state) => (id, self.store.get(id)?, state),
                Pending::Read(id, node, state) => (id, node, state),
            };
            visited += 1;
            visit(id, &node, &state);
            if node.level == 0 {
                continue;
            }
            entered.ids.clear();
            entered.states.clear();
            enter(&state, &node.entries, &mut entered);
            let Entered { ids, states } = &mut entered;
            // Pushed in reverse so children are visited in key order.
            if batched {
                let nodes = ahead.take(&self.store, ids)?;
                ahead.below(&self.store, ids, &nodes, states, &enter)?;
                stack.extend(
                    ids.iter()
                        .zip(nodes)
                        .zip(states.drain(..))
                        .rev()
                        .map(|((&id, n), s)| Pending::Read(id, n, s)),
                );
            } else {
                stack.extend(
                    ids.iter()
                        .zip(states.drain(..))
                        .rev()
                        .map(|(&id, s)| Pending::Page(id, s)),
                );
            }
        }
        Ok(visited)
    }

    /// Every leaf, left to right (as `rtree`'s `Index.leaves()` lists
    /// them), through the one traversal: each node read once, per the
    /// tree's [`ReadMode`]. An empty leaf (an empty root) has no MBR and is
    /// left out; an empty tree has no leaf.
    pub fn leaves(&self) -> Result<Vec<Leaf>> {
        let mut out = Vec::new();
        self.walk(
            (),
            |_, entries, out| {
                for e in entries {
                    out.push(e.key, ());
                }
            },
            |id, node, _| {
                if node.level != 0 {
                    return;
                }
                if let Some(mbr) = Rect::union_all(node.entries.iter().map(|e| &e.rect)) {
                    out.push((id, node.entries.iter().map(|e| e.key).collect(), mbr));
                }
            },
        )?;
        Ok(out)
    }

    /// Every record with the leaf holding it (`(id, rectangle, leaf)`),
    /// through the one traversal (each node read once, per the tree's
    /// [`ReadMode`]): what an id → leaf locator is built from.
    pub fn records_by_leaf(&self) -> Result<Vec<(u64, Rect, PageId)>> {
        let mut out = Vec::with_capacity(usize::try_from(self.len()).unwrap_or(0));
        self.visit_records_by_leaf(|id, rect, leaf| out.push((id, rect, leaf)))?;
        Ok(out)
    }

    /// [`records_by_leaf`](Self::records_by_leaf) given to `visit` one
    /// record at a time, in the same order, without collecting them.
    pub fn visit_records_by_leaf(&self, mut visit: impl FnMut(u64, Rect, PageId)) -> Result<()> {
        self.walk(
            (),
            |_, entries, out| {
                for e in entries {
                    out.push(e.key, ());
                }
            },
            |id, node, _| {
                if node.level == 0 {
                    for e in &node.entries {
                        visit(e.key, e.rect, id);
                    }
                }
            },
        )?;
        Ok(())
    }

    /// The MBR of every record (the union of the root's entries; one node
    /// read), or `None` for an empty tree.
    pub fn bounds(&self) -> Result<Option<Rect>> {
        let Some(root) = self.store.meta().root else {
            return Ok(None);
        };
        let node = self.store.get(root)?;
        Ok(Rect::union_all(node.entries.iter().map(|e| &e.rect)))
    }

    fn collect<F: Selection + ?Sized>(&self, sel: &F) -> Result<QueryResult> {
        QueryResult::gather(|visit| self.select(sel, visit))
    }

    /// Records related to `window` by `predicate`.
    pub fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        let rect = checked(window)?;
        self.collect(&Window { rect, predicate })
    }

#[cfg(test)]
    /// Records whose MBR contains the point.
    pub fn query_point(&self, point: Point) -> Result<QueryResult> {
        let p = checked_point(point)?;
        self.collect(&PointSelection(p))
    }

    /// Range queries of many windows with one predicate in one traversal
    /// (the walk of [`RTree::select`], each subtree carrying the windows
    /// that enter it): each node is read once for all windows that need
    /// it, per the tree's [`ReadMode`] (batched: the children a node's
    /// windows enter as one [`NodeStore::get_batch`]).
    pub fn query_batch(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchResult> {
        let mut results = vec![QueryResult::default(); windows.len()];
        let nodes_visited = self.batch_into(windows, predicate, &mut results)?;
        Ok(BatchResult {
            results,
            nodes_visited,
        })
    }

    /// [`RTree::query_batch`] answering with record keys alone.
    pub fn query_batch_keys(&self, windows: &[Rect], predicate: Predicate) -> Result<Vec<KeyResult>> {
        let mut results = vec![KeyResult::default(); windows.len()];
        self.batch_into(windows, predicate, &mut results)?;
        Ok(results)
    }

    /// [`RTree::query_batch_keys`] as one flat list ([`BatchKeys`]): the
    /// same keys in the same order, without counters.
    pub fn query_batch_flat(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchKeys> {
        let mut sink = FlatSink::default();
        self.batch_into(windows, predicate, &mut sink)?;
        Ok(sink.finish(windows.len()))
    }

    /// The traversal of [`RTree::query_batch`], what each window finds put
    /// in `out`; returns the nodes the traversal read.
    fn batch_into(&self, windows: &[Rect], predicate: Predicate, out: &mut impl BatchSink) -> Result<u64> {
        let sels: Vec<Window> = windows
            .iter()
            .map(|w| checked(*w).map(|rect| Window { rect, predicate }))
            .collect::<Result<_>>()?;
        if sels.is_empty() {
            return Ok(0);
        }
        let batch = BatchWindows::new(sels);
        let sels = &batch.sels;
        // Each subtree carries the windows that enter it.
        self.walk(
            batch.all(),
            |active, entries, out| batch.enter(active, entries, out),
            |_, node, active| {
                let active = active.as_slice();
                for &w in active {
                    out.visited(w);
                }
                if node.level != 0 {
                    return;
                }
                // Each window scans the leaf on its own, its predicate
                // chosen once: a tight loop over the entries (where a test
                // of every window at each entry took twice as long when
                // many windows share leaves); each window's records still
                // come in the leaf's order.
                for &w in active {
                    if let Some(sel) = sels.get(w) {
                        out.leaf(w, sel, &node.entries);
                    }
                }
            },
        )
    }

#[cfg(test)]
    /// Neighbours of `point` by ascending distance, lazily (best-first search).
    /// The search visits nodes in the same order in both [`ReadMode`]s; with
    /// batched reads a node that must be read brings along the queued nodes
    /// at its own distance (see [`NearestIter`]).
    pub fn nearest_iter(&self, point: Point) -> Result<NearestIter<'_, S>> {
        self.nearest_iter_to(Rect::from_point(checked_point(point)?))
    }

    /// Neighbours of the rectangle `query` by ascending distance between the
    /// nearest points of the two rectangles (0 where they intersect), as
    /// [`RTree::nearest_iter`] is for a point (a point is the rectangle of
    /// no extent, and gives the same distances to the bit).
    pub fn nearest_iter_to(&self, query: Rect) -> Result<NearestIter<'_, S>> {
        // Room for a few nodes' entries from the start, so that the queues
        // do not grow from nothing (reallocating and copying at each
        // doubling): about 5 % of a small kNN query in memory.
        self.nearest_iter_with_room(query, self.params.max_entries.saturating_mul(4))
    }

    /// [`RTree::nearest_iter_to`] with queues made with room for `room`
    /// items (at most 4,096).
    fn nearest_iter_with_room(&self, query: Rect, room: usize) -> Result<NearestIter<'_, S>> {
        // A query rectangle built from a point with public fields skipped
        // `Rect::new`'s checks: NaN would be at distance 0 from everything.
        let query = checked(query)?;
        let meta = self.store.meta();
        let room = room.min(4096);
        let mut nodes = BinaryHeap::with_capacity(room);
        let mut guesses = Vec::with_capacity(room);
        if let Some(root) = meta.root {
            nodes.push(Reverse(Item {
                dist: 0.0,
                key: root,
                slot: NODE,
            }));
            guesses.push(Guess {
                records: meta.records as f64,
                area: f64::INFINITY,
            });
        }
        Ok(NearestIter {
            tree: self,
            query,
            from: Point {
                x: query.min_x(),
                y: query.min_y(),
            },
            nodes,
            records: BinaryHeap::with_capacity(room),
            stats: QueryStats::default(),
            failed: false,
            bound: None,
            rects: Vec::with_capacity(room),
            guesses,
            ahead: HashMap::new(),
            read: 0,
        })
    }
}

/// A queued node or record, small so that heap moves are cheap: a record's
/// rectangle and a node's [`Guess`] wait in [`NearestIter`]'s side tables
/// at `slot`.
#[derive(Debug, Clone, Copy)]
struct Item {
    dist: f64,
    key: u64,
    /// Index of the record's rectangle; for a node, [`NODE`] plus the index
    /// of its guess.
    slot: usize,
}

/// The bit of `Item::slot` that marks a node (no side table comes near it).
const NODE: usize = 1 << (usize::BITS - 1);

impl Item {
    #[inline]
    fn is_node(&self) -> bool {
        self.slot & NODE != 0
    }
}

/// What batched kNN guesses of a queued node before reading it, to read
/// ahead during the first descent: about how many records its subtree holds
/// (the tree's records for the root, a parent's share per child below) and
/// the area of its MBR.
#[derive(Debug, Clone, Copy)]
struct Guess {
    records: f64,
    area: f64,
}

impl Guess {
    /// The radius of a disc holding `k` records at the node's density: the
    /// guessed distance of the k-th nearest record to a point in the node
    /// (0 when there is nothing to go by: a node of no area, or the root,
    /// whose area is not known).
    fn radius(&self, k: usize) -> f64 {
        let density = self.records / self.area;
        if density.is_finite() && density > 0.0 {
            (k as f64 / (std::f64::consts::PI * density)).sqrt()
        } else {
            0.0
        }
    }
}

// By distance, nodes before records at equal distance, then by key (then
// by slot: a total order, so the queue's order never depends on how it is
// stored). Nodes first: a record at distance d leaves the queue only once
// every node at most d away was opened, so every record at d is queued by
// then and they leave by id (ties by id, as documented and as the FOR-tree
// and the xBR+-tree give them; records first gave a record at d before a
// smaller id at d in a node at d not opened yet).
ordered_by!(Item, |a, b| a
    .dist
    .total_cmp(&b.dist)
    .then(b.is_node().cmp(&a.is_node()))
    .then(a.key.cmp(&b.key))
    .then(a.slot.cmp(&b.slot)));

/// Neighbours by ascending distance (ties by id), produced by best-first
/// search; see [`RTree::nearest_iter`].
///
/// The queue is kept as two heaps, nodes and records, under one order
/// ([`Item`]'s): the search takes whichever top comes first, as from one
/// heap, and the nodes that may be read next are the top of the node heap.
///
/// Reads follow the tree's [`ReadMode`]. Single: the node leaving the queue
/// is read with one `get` (the papers' search). Batched: the search itself
/// is unchanged (the same nodes leave the queue in the same order, so the
/// answers are the same to the bit, ties included), but a node that has not
/// been read yet is read with one `get_batch` together with the queued
/// nodes the search is likely to visit next, up to [`KNN_BATCH`], nearest
/// first: those whose distance is at most
/// - the pruning bound (the k-th nearest record distance queued so far),
///   once `k` records are queued: a node beyond it would be pruned, one
///   within it is visited unless the bound tightens first;
/// - before that (the first descent), the node's distance plus the radius
///   of a disc that holds `k` records at the node's guessed density (its
///   share of the parent's records over its area, see [`Guess`]): the
///   nodes a search for `k` records around the point enters if the data
///   are locally even, so that the leaves near the point come in one batch
///   rather than the first alone;
/// - in the open-ended iterator (no `k`, no bound), the node's own distance
///   (ties only: anything farther may never be asked for).
///
/// A node read ahead that the search then does not visit is counted in
/// [`QueryStats::nodes_read_unused`].
#[derive(Debug)]
pub struct NearestIter<'a, S: NodeStore> {
    tree: &'a RTree<S>,
    /// The query rectangle (a point is one of no extent).
    query: Rect,
    /// A point of the query (its lower corner), from which
    /// [`Bound::tighten`] measures the farthest corners of subtrees: every
    /// record is at least as near to the query as to this point, in
    /// floating point too (the differences are monotone).
    from: Point,
    /// Queued nodes.
    nodes: BinaryHeap<Reverse<Item>>,
    /// Queued records.
    records: BinaryHeap<Reverse<Item>>,
    stats: QueryStats,
    failed: bool,
    /// Pruning for a k-bounded search (`None` for an open-ended iterator).
    bound: Option<Bound>,
    /// Rectangles of the queued records (see [`Item`]).
    rects: Vec<Rect>,
    /// Guesses about the queued nodes (see [`Item`]).
    guesses: Vec<Guess>,
    /// Queued nodes read ahead in a batch (batched reads only).
    ahead: HashMap<PageId, Arc<Node>>,
    /// Nodes read from the store so far.
    read: u64,
}

/// Most nodes one batched kNN read asks for: enough to keep an SSD's queue
/// full, few enough that a bound that tightens soon wastes little.
pub const KNN_BATCH: usize = 64;

/// The `k` smallest record distances queued so far (as bit patterns of
/// non-negative floats, which order like the floats): an item farther than
/// the largest of them cannot be among the `k` nearest or tied with the k-th.
///
/// Before `k` records are queued, `cap` bounds the k-th distance from above
/// by the subtrees seen: a subtree known to hold at least `k` records (a
/// node that is not the root holds at least m entries, so one of level `l`
/// at least m^(l+1) records) has them all within the farthest point of its
/// MBR, so no record farther than that is among the `k` nearest or tied
/// with the k-th. It prunes the first descent, which otherwise queues
/// every child of every node it opens.
#[derive(Debug)]
struct Bound {
    k: usize,
    best: BinaryHeap<u64>,
    cap: f64,
}

impl Bound {
    /// A bound for the `k` nearest records, with room for them.
    fn new(k: usize, room: usize) -> Bound {
        Bound {
            k,
            best: BinaryHeap::with_capacity(room),
            cap: f64::INFINITY,
        }
    }

    /// The pruning distance: the k-th queued record distance once `k` are
    /// known, and never more than `cap`.
    #[inline]
    fn limit(&self) -> f64 {
        self.records_limit().min(self.cap)
    }

    /// The k-th queued record distance, once `k` records are known.
    #[inline]
    fn records_limit(&self) -> f64 {
        match self.best.peek() {
            Some(&bits) if self.best.len() >= self.k => f64::from_bits(bits),
            _ => f64::INFINITY,
        }
    }

    /// Lowers `cap` by the children of `node` (an inner node that is not
    /// above the root, so its children are not the root) as seen from
    /// `from`, a point of the query: when each child subtree holds at least
    /// `k` records, the farthest corner of the nearest-reaching child's MBR
    /// bounds the k-th distance (widened against rounding).
    fn tighten(&mut self, node: &Node, min_entries: usize, from: &Point) {
        let Some(child_level) = node.level.checked_sub(1) else {
            return;
        };
        let records = (min_entries as u64).saturating_pow(u32::from(child_level) + 1);
        if records < self.k as u64 {
            return;
        }
        let far_sq = node
            .entries
            .iter()
            .map(|e| e.rect.max_dist_sq_point(from))
            .fold(f64::INFINITY, f64::min);
        let far = far_sq.sqrt() * (1.0 + 1e-9);
        if far < self.cap {
            self.cap = far;
        }
    }

    /// Notes a queued record distance.
    #[inline]
    fn note(&mut self, dist: f64) {
        let bits = dist.to_bits();
        if self.best.len() < self.k {
            self.best.push(bits);
        } else if self.best.peek().is_some_and(|&top| bits < top) {
            self.best.pop();
            self.best.push(bits);
        }
    }
}

/// A bound on squared distances above `(limit · (1 + 1e-9))²`: a squared
/// distance beyond it has a square root beyond `limit` despite rounding.
#[inline]
fn widen_sq(limit: f64) -> f64 {
    let l = limit * (1.0 + 1e-9);
    l * l
}

impl<S: NodeStore> NearestIter<'_, S> {
    /// What the search did so far (`results` counts neighbours produced;
    /// `nodes_read_unused` the nodes read ahead and not visited yet).
    pub fn stats(&self) -> QueryStats {
        QueryStats {
            nodes_read_unused: self.read.saturating_sub(self.stats.nodes_visited),
            ..self.stats
        }
    }

    /// The first queued item, nodes and records in one order.
    fn pop(&mut self) -> Option<Item> {
        let node_first = match (self.nodes.peek(), self.records.peek()) {
            (Some(Reverse(n)), Some(Reverse(r))) => n < r,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let heap = if node_first {
            &mut self.nodes
        } else {
            &mut self.records
        };
        heap.pop().map(|Reverse(item)| item)
    }

    /// The current pruning distance (infinite while fewer than `k` records
    /// are queued, and always for the open-ended iterator).
    fn limit(&self) -> f64 {
        self.bound.as_ref().map_or(f64::INFINITY, Bound::limit)
    }

    /// Node `item`, which the search visits now: from the nodes read ahead,
    /// else read per the read mode.
    fn read_node(&mut self, item: &Item) -> Result<Arc<Node>> {
        if let Some(node) = self.ahead.remove(&item.key) {
            return Ok(node);
        }
        if self.tree.reads == ReadMode::Single {
            let node = self.tree.store.get(item.key)?;
            self.read += 1;
            return Ok(node);
        }
        let ids = self.read_ahead_ids(item);
        let mut nodes = self.tree.store.get_batch(&ids)?.into_iter();
        self.read += ids.len() as u64;
        let node = nodes
            .next()
            .ok_or_else(|| Error::corrupt(Some(item.key), "the store returned no node"))?;
        self.ahead.extend(ids.iter().skip(1).copied().zip(nodes));
        Ok(node)
    }

    /// `item`'s page and those of the nearest queued nodes not read yet
    /// that the search is likely to visit (see [`NearestIter`]), nearest
    /// first, at most [`KNN_BATCH`].
    fn read_ahead_ids(&mut self, item: &Item) -> Vec<PageId> {
        // The records' bound, not the subtrees' cap: before `k` records are
        // queued the guess below reads ahead less than a loose cap would.
        let limit = self
            .bound
            .as_ref()
            .map_or(f64::INFINITY, Bound::records_limit);
        let reach = match &self.bound {
            _ if limit.is_finite() => limit,
            Some(b) => {
                let guess = self.guesses.get(item.slot & !NODE);
                item.dist + guess.map_or(0.0, |g| g.radius(b.k))
            }
            None => item.dist,
        };
        let mut ids = vec![item.key];
        let mut seen = Vec::new();
        while ids.len() < KNN_BATCH {
            match self.nodes.peek() {
                Some(Reverse(next)) if next.dist <= reach => {}
                _ => break,
            }
            let Some(Reverse(next)) = self.nodes.pop() else {
                break;
            };
            if !self.ahead.contains_key(&next.key) {
                ids.push(next.key);
            }
            seen.push(Reverse(next));
        }
        self.nodes.extend(seen);
        ids
    }
}

impl<S: NodeStore> Iterator for NearestIter<'_, S> {
    type Item = Result<Neighbor>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.step(true) {
            Ok(Step::Neighbor(n)) => Some(Ok(n)),
            Ok(Step::End) => None,
            Ok(Step::Read(_)) => {
                self.failed = true;
                Some(Err(Error::invalid(
                    "internal: a kNN search that may read stopped for a read",
                )))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// What one [`NearestIter::step`] of a search gave.
#[derive(Debug)]
pub(super) enum Step {
    /// The next neighbour.
    Neighbor(Neighbor),
    /// The search must visit a node that has not been read: these pages
    /// (the node's first, then those to read ahead with it), to be read by
    /// the caller and handed over with [`NearestIter::hand_over`].
    Read(Vec<PageId>),
    /// No neighbour is left.
    End,
}

impl<S: NodeStore> NearestIter<'_, S> {
    /// Runs the search to its next neighbour. With `may_read` the nodes it
    /// visits are read per the tree's [`ReadMode`]; without, it stops at the
    /// first node it must visit that has not been read and returns
    /// [`Step::Read`], and the next step resumes exactly there (so a search
    /// fed its reads visits the same nodes in the same order, whoever
    /// reads them: the batched kNN of many queries reads for all at once).
    pub(super) fn step(&mut self, may_read: bool) -> Result<Step> {
        while let Some(item) = self.pop() {
            if !item.is_node() {
                let rect = *self
                    .rects
                    .get(item.slot)
                    .ok_or_else(|| Error::invalid("internal: a queued record without its rectangle"))?;
                self.stats.results += 1;
                return Ok(Step::Neighbor(Neighbor {
                    id: item.key,
                    rect,
                    distance: item.dist,
                }));
            }
            if item.dist > self.limit() {
                // Queued before the bound tightened: nothing in it can answer.
                self.ahead.remove(&item.key);
                continue;
            }
            if !may_read && !self.ahead.contains_key(&item.key) {
                let ids = self.read_ahead_ids(&item);
                // Back on top: the least item of both queues, it leaves
                // first at the next step.
                self.nodes.push(Reverse(item));
                return Ok(Step::Read(ids));
            }
            let node = self.read_node(&item)?;
            self.stats.nodes_visited += 1;
            let leaf = node.level == 0;
            if leaf {
                self.stats.candidates += node.entries.len() as u64;
            }
            // Each child's share of this node's records, for read-ahead.
            let share = self
                .guesses
                .get(item.slot & !NODE)
                .map_or(0.0, |g| g.records / node.entries.len().max(1) as f64);
            if !leaf {
                if let Some(b) = self.bound.as_mut() {
                    b.tighten(&node, self.tree.params.min_entries, &self.from);
                }
            }
            let mut limit = self.limit();
            // Squared-distance prefilter, widened so that it never drops an
            // entry the exact test below would keep.
            let mut limit_sq = widen_sq(limit);
            for e in &node.entries {
                let dist_sq = e.rect.min_dist_sq_rect(&self.query);
                if dist_sq > limit_sq {
                    continue;
                }
                let dist = dist_sq.sqrt();
                if dist > limit {
                    continue;
                }
                if leaf {
                    if let Some(b) = self.bound.as_mut() {
                        b.note(dist);
                        limit = b.limit();
                        limit_sq = widen_sq(limit);
                    }
                    self.rects.push(e.rect);
                    self.records.push(Reverse(Item {
                        dist,
                        key: e.key,
                        slot: self.rects.len() - 1,
                    }));
                } else {
                    self.guesses.push(Guess {
                        records: share,
                        area: e.rect.area(),
                    });
                    self.nodes.push(Reverse(Item {
                        dist,
                        key: e.key,
                        slot: NODE | (self.guesses.len() - 1),
                    }));
                }
            }
        }
        Ok(Step::End)
    }

    /// Hands over the nodes of pages `ids` (a [`Step::Read`]'s, in its
    /// order), read by the caller; the next [`NearestIter::step`] visits
    /// them from memory.
    pub(super) fn hand_over(&mut self, ids: &[PageId], nodes: impl IntoIterator<Item = Arc<Node>>) {
        self.read += ids.len() as u64;
        self.ahead.extend(ids.iter().copied().zip(nodes));
    }
}
