//! The incremental flush index of the eFIND write buffer (issue 15): the
//! choice of Alg. 3's flushing unit without a pass over the whole buffer.
//!
//! Alg. 3 takes the `p`% oldest buffered pages (by the write buffer's tick,
//! ties by page id), optionally narrows them by temporal control (Alg. 4),
//! sorts them by page id, cuts the sorted list into consecutive groups of
//! `s` pages (the last one may be shorter) and flushes the first group of
//! the highest degree. The index keeps, updated on every create, modify,
//! delete and removal of a buffered page:
//!
//! - the **age order**: two ordered sets of `(tick, page)`, the candidates
//!   (the oldest `⌈N·p/100⌉` of the `N` pages) and the rest, rebalanced
//!   after each change (O(log N) per moved page, at most a few per change);
//! - the **candidates by page id** in a treap whose nodes summarise their
//!   subtree's id-sorted sequence for every phase `φ < s` (how many elements
//!   precede the subsequence, modulo `s`): the best complete group, and the
//!   first and last `s − 1` pages. Two summaries join in O(s²). A change
//!   restructures the treap in O(log N) and marks the summaries on its path
//!   stale; a choice recomputes the stale ones first (O(s² · log N) per
//!   change since the previous choice, at most O(s² · N)), then finds the
//!   best group of the whole candidate list, or of any union of id ranges
//!   of it, in O(s² · log N) per range.
//!
//! Temporal control narrows the candidates to pages near (Seq), far from
//! (Str) or not in between (Seq ∪ Str) the pages of WQ: each is a union of
//! at most `|WQ| + 1` id ranges, so a flush with temporal control costs
//! O(|WQ| · s² · log N).
//!
//! Degrees are compared by [`unit_rank`], shared with the scan of the
//! oracle: each group's rank is computed from its pages in id order by the
//! same function, so both choose the same group, to the bit. FP_mhao's
//! overlap term depends on every pair of candidates and is not kept
//! incrementally: that policy (and FP_mha while no buffered page has a
//! modified area, and units over [`MAX_INDEXED_UNIT`]) takes the candidates
//! from the age order (O(c) for `c` candidates, no sort of the buffer) and
//! ranks them as the scan does, the overlap in O(c²).
use std::collections::{BTreeSet, VecDeque};

use crate::page_id::{IdMap, IdSet};

use super::flush::{unit_rank, FlushPolicy, PageInfo, TcChoice};
use super::write_buffer::WbEntry;
use crate::storage::PageId;

/// Largest flushing unit the treap keeps summaries for; larger units are
/// chosen by ranking the candidates of the age order (see the module docs).
pub const MAX_INDEXED_UNIT: usize = 8;

const NIL: u32 = u32::MAX;

/// What the index is maintained for: the flushing parameters of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushIndexConfig {
    /// Flushing policy.
    pub policy: FlushPolicy,
    /// p: percentage of the oldest buffered pages that are candidates.
    pub percent: u8,
    /// s: pages per flushing unit.
    pub unit: usize,
}

impl FlushIndexConfig {
    fn indexed(&self) -> bool {
        self.unit <= MAX_INDEXED_UNIT && !self.policy.uses_overlap()
    }
}

/// What a buffered page contributes to a degree.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Item {
    id: PageId,
    height: u16,
    mod_count: u64,
    area: f64,
}

impl Item {
    fn info(&self) -> PageInfo {
        PageInfo {
            id: self.id,
            height: self.height,
            mod_count: self.mod_count,
            area: self.area,
            overlap: 0.0,
        }
    }
}

/// Up to `s − 1` pages at one end of a sequence.
#[derive(Debug, Clone, Copy, Default)]
struct Edge {
    len: usize,
    items: [Item; MAX_INDEXED_UNIT - 1],
}

impl Edge {
    fn as_slice(&self) -> &[Item] {
        &self.items[..self.len]
    }

    fn from_slice(items: &[Item]) -> Edge {
        let mut e = Edge {
            len: items.len(),
            ..Edge::default()
        };
        e.items[..items.len()].copy_from_slice(items);
        e
    }
}

/// The summary of an id-sorted sequence of candidates (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
struct Summary {
    cnt: usize,
    head: Edge,
    tail: Edge,
    /// Per phase: (rank, first page) of the first best complete group.
    best: [Option<(f64, PageId)>; MAX_INDEXED_UNIT],
}

fn better(cur: Option<(f64, PageId)>, cand: Option<(f64, PageId)>) -> Option<(f64, PageId)> {
    match (cur, cand) {
        (None, c) => c,
        (Some(c), Some(n)) if n.0 > c.0 => Some(n),
        (c, _) => c,
    }
}

#[derive(Debug, Clone)]
struct Node {
    item: Item,
    prio: u64,
    left: u32,
    right: u32,
    min: PageId,
    max: PageId,
    sum: Summary,
    /// Whether `min`, `max` and `sum` are stale (the subtree changed since
    /// they were computed; see [`FlushIndex::refresh`]).
    dirty: bool,
}

/// The incremental flush index (see the module docs). It is idle (every
/// hook does nothing) until [`configure`](Self::configure)d.
#[derive(Debug, Clone, Default)]
pub struct FlushIndex {
    config: Option<FlushIndexConfig>,
    /// Every buffered page: (tick, item).
    pages: IdMap<(u64, Item)>,
    /// The oldest ⌈N·p/100⌉ pages not excluded, by (tick, id).
    cand: BTreeSet<(u64, PageId)>,
    /// The other pages not excluded.
    rest: BTreeSet<(u64, PageId)>,
    /// Pages set aside by [`exclude`](Self::exclude).
    excluded: IdSet,
    /// Buffered pages with a positive modified area.
    positive_area: usize,
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
}

/// The choice of a flushing unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The pages of the unit, by id.
    pub unit: Vec<PageId>,
    /// Temporal control's outcome, if it is on.
    pub tc: Option<TcChoice>,
}

/// Temporal control's parameters as the choice needs them.
#[derive(Debug, Clone, Copy)]
pub struct TcParams<'a> {
    /// WQ: the last pages written.
    pub wq: &'a VecDeque<PageId>,
    /// Seq threshold (a page within it of a WQ page is sequential).
    pub seq: u64,
    /// Stride threshold (a page farther from every WQ page is stride).
    pub stride: u64,
}

fn mix(mut x: u64) -> u64 {
    // splitmix64: deterministic treap priorities.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Merged inclusive id intervals within `d` of a page of `wq`.
fn zones(wq: &VecDeque<PageId>, d: u64) -> Vec<(PageId, PageId)> {
    let mut ws: Vec<PageId> = wq.iter().copied().collect();
    ws.sort_unstable();
    let mut out: Vec<(PageId, PageId)> = Vec::new();
    for w in ws {
        let (lo, hi) = (w.saturating_sub(d), w.saturating_add(d));
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// The id intervals outside merged, sorted `zones`.
fn complement(zones: &[(PageId, PageId)]) -> Vec<(PageId, PageId)> {
    let mut out = Vec::new();
    let mut next = 0u64;
    let mut open = true;
    for &(lo, hi) in zones {
        if lo > next {
            out.push((next, lo - 1));
        }
        if hi == u64::MAX {
            open = false;
            break;
        }
        next = hi + 1;
    }
    if open {
        out.push((next, u64::MAX));
    }
    out
}

impl FlushIndex {

    /// Rebuilds the index for `config` from the buffered `rows`, unless it
    /// is already kept for `config`.
    pub fn configure<'a>(
        &mut self,
        config: FlushIndexConfig,
        rows: impl Iterator<Item = (PageId, &'a WbEntry)>,
    ) {
        if self.config == Some(config) {
            return;
        }
        *self = FlushIndex {
            config: Some(config),
            root: NIL,
            ..FlushIndex::default()
        };
        for (id, row) in rows {
            self.touch(id, row);
        }
    }

    /// Hook: page `id` was created or changed and its row is now `row`.
    pub fn touch(&mut self, id: PageId, row: &WbEntry) {
        let Some(cfg) = self.config else { return };
        self.detach(id);
        let area = if cfg.policy.uses_area() {
            row.modified_mbr().map_or(0.0, |m| m.area())
        } else {
            0.0
        };
        let item = Item {
            id,
            height: row.height,
            mod_count: row.mod_count,
            area,
        };
        if area > 0.0 {
            self.positive_area += 1;
        }
        self.pages.insert(id, (row.timestamp, item));
        if !self.excluded.contains(&id) {
            self.enter((row.timestamp, id));
        }
    }

    /// Hook: page `id` left the write buffer.
    pub fn forget(&mut self, id: PageId) {
        if self.config.is_none() {
            return;
        }
        self.detach(id);
        self.excluded.remove(&id);
        self.rebalance();
    }

    /// Sets buffered page `id` aside: the next choices are made as if it
    /// were not buffered (a batch choosing among the pages not chosen yet).
    pub fn exclude(&mut self, id: PageId) {
        let Some(&(ts, _)) = self.pages.get(&id) else {
            return;
        };
        if self.excluded.insert(id) {
            self.leave((ts, id));
            self.rebalance();
        }
    }

    /// Takes back every page set aside by [`exclude`](Self::exclude).
    pub fn include_all(&mut self) {
        for id in std::mem::take(&mut self.excluded) {
            if let Some(&(ts, _)) = self.pages.get(&id) {
                self.enter((ts, id));
            }
        }
    }

    /// Whether [`best_unit`](Self::best_unit) ranks the current state (the
    /// configuration is indexed and, for FP_mha, α's total is positive).
    pub fn ranks(&self) -> bool {
        self.config
            .is_some_and(|c| c.indexed() && !(c.policy.uses_area() && self.positive_area == 0))
    }

    /// The pages set aside by [`exclude`](Self::exclude).
    #[cfg(test)]
    pub fn excluded(&self) -> &IdSet {
        &self.excluded
    }

    /// Number of buffered pages not set aside.
    pub fn active(&self) -> usize {
        self.cand.len() + self.rest.len()
    }

    /// Whether some buffered page has a positive modified area (the
    /// denominator of α is positive); counted for FP_mha and FP_mhao only.
    pub fn any_area(&self) -> bool {
        self.positive_area > 0
    }

    /// The candidates (the oldest p% of the pages not set aside), oldest first.
    pub fn candidates(&self) -> impl Iterator<Item = PageId> + '_ {
        self.cand.iter().map(|&(_, id)| id)
    }

    /// Temporal control's outcome (Alg. 4) over the candidates and the id
    /// ranges of the pages it keeps (after [`refresh`](Self::refresh)).
    pub fn temporal_ranges(
        &self,
        tc: Option<TcParams<'_>>,
    ) -> (Option<TcChoice>, Vec<(PageId, PageId)>) {
        let all = vec![(0, u64::MAX)];
        let Some(tc) = tc else {
            return (None, all);
        };
        if tc.wq.is_empty() {
            return (Some(TcChoice::Fallback), all);
        }
        let unit = self.config.map_or(1, |c| c.unit).max(1);
        let near = zones(tc.wq, tc.seq);
        let mid = zones(tc.wq, tc.stride);
        let s: usize = near
            .iter()
            .map(|&(lo, hi)| self.count(self.root, lo, hi))
            .sum();
        let within: usize = mid
            .iter()
            .map(|&(lo, hi)| self.count(self.root, lo, hi))
            .sum();
        let t = self.cand.len() - within;
        let far = complement(&mid);
        if s >= unit {
            (Some(TcChoice::Seq), near)
        } else if t >= unit {
            (Some(TcChoice::Str), far)
        } else if s + t >= unit {
            let mut both = near;
            both.extend(far);
            both.sort_unstable();
            (Some(TcChoice::Both), both)
        } else {
            (Some(TcChoice::Fallback), all)
        }
    }

    /// The unit Alg. 3 flushes among the candidates in `ranges` (sorted,
    /// disjoint, inclusive id ranges; after [`refresh`](Self::refresh)), or `None` when the index does not
    /// rank this configuration (see the module docs) or has no candidate.
    pub fn best_unit(&self, ranges: &[(PageId, PageId)]) -> Option<Vec<PageId>> {
        if !self.ranks() {
            return None;
        }
        let s = self.unit();
        let mut acc = Summary::default();
        for &(lo, hi) in ranges {
            self.range_summary(self.root, lo, hi, &mut acc);
        }
        let mut best = acc.best[0];
        let trailing = acc.cnt % s;
        if trailing > 0 {
            let tail = acc.tail.as_slice();
            let chunk = &tail[tail.len() - trailing..];
            best = better(best, Some((self.rank(chunk), chunk[0].id)));
        }
        let (_, first) = best?;
        let mut out = Vec::with_capacity(s);
        for &(lo, hi) in ranges {
            if hi < first {
                continue;
            }
            self.collect(self.root, lo.max(first), hi, s, &mut out);
            if out.len() == s {
                break;
            }
        }
        Some(out)
    }

    fn rank(&self, items: &[Item]) -> f64 {
        let policy = self.config.map_or(FlushPolicy::Mh, |c| c.policy);
        let mut infos = [PageInfo {
            id: 0,
            height: 0,
            mod_count: 0,
            area: 0.0,
            overlap: 0.0,
        }; MAX_INDEXED_UNIT];
        for (slot, it) in infos.iter_mut().zip(items) {
            *slot = it.info();
        }
        unit_rank(policy, &infos[..items.len()], true, false)
    }

    fn unit(&self) -> usize {
        self.config.map_or(1, |c| c.unit.max(1))
    }

    /// Whether the treap summarises (this configuration is ranked by it).
    fn treap_on(&self) -> bool {
        self.config.is_some_and(|c| c.indexed())
    }

    fn detach(&mut self, id: PageId) {
        if let Some((ts, item)) = self.pages.remove(&id) {
            if item.area > 0.0 {
                self.positive_area -= 1;
            }
            if !self.excluded.contains(&id) {
                self.leave((ts, id));
            }
        }
    }

    /// Puts an active page in the age order (and the treap if a candidate).
    fn enter(&mut self, key: (u64, PageId)) {
        if self.cand.last().is_some_and(|&last| key < last) {
            self.cand.insert(key);
            self.treap_insert(key.1);
        } else {
            self.rest.insert(key);
        }
        self.rebalance();
    }

    /// Takes an active page out of the age order (and the treap).
    fn leave(&mut self, key: (u64, PageId)) {
        if self.cand.remove(&key) {
            self.treap_remove(key.1);
        } else {
            self.rest.remove(&key);
        }
    }

    /// Restores |cand| = ⌈N·p/100⌉ (at least 1 when N > 0).
    fn rebalance(&mut self) {
        let n = self.active();
        let percent = usize::from(self.config.map_or(100, |c| c.percent));
        let want = if n == 0 {
            0
        } else {
            (n * percent).div_ceil(100).max(1)
        };
        while self.cand.len() > want {
            let Some(key) = self.cand.pop_last() else {
                break;
            };
            self.treap_remove(key.1);
            self.rest.insert(key);
        }
        while self.cand.len() < want {
            let Some(key) = self.rest.pop_first() else {
                break;
            };
            self.cand.insert(key);
            self.treap_insert(key.1);
        }
    }

    // ---- the treap of candidates by id ----

    fn leaf(&self, item: Item) -> Summary {
        let s = self.unit();
        let mut sum = Summary {
            cnt: 1,
            ..Summary::default()
        };
        if s == 1 {
            sum.best[0] = Some((self.rank(&[item]), item.id));
        } else {
            sum.head = Edge::from_slice(&[item]);
            sum.tail = sum.head;
        }
        sum
    }

    /// The summary of `a` followed by `b`.
    fn join(&self, a: &Summary, b: &Summary) -> Summary {
        if a.cnt == 0 {
            return *b;
        }
        if b.cnt == 0 {
            return *a;
        }
        let s = self.unit();
        let edge = s - 1;
        let mut out = Summary {
            cnt: a.cnt + b.cnt,
            ..Summary::default()
        };
        let mut buf = [Item::default(); 2 * (MAX_INDEXED_UNIT - 1)];
        let (ah, bh) = (a.head.as_slice(), b.head.as_slice());
        buf[..ah.len()].copy_from_slice(ah);
        buf[ah.len()..ah.len() + bh.len()].copy_from_slice(bh);
        out.head = Edge::from_slice(&buf[..(ah.len() + bh.len()).min(edge)]);
        let (at, bt) = (a.tail.as_slice(), b.tail.as_slice());
        buf[..at.len()].copy_from_slice(at);
        buf[at.len()..at.len() + bt.len()].copy_from_slice(bt);
        let n = at.len() + bt.len();
        out.tail = Edge::from_slice(&buf[n - n.min(edge)..n]);
        let mut chunk = [Item::default(); MAX_INDEXED_UNIT];
        for phi in 0..s {
            let mut best = a.best[phi];
            let pb = (phi + a.cnt) % s;
            if pb != 0 && a.cnt >= pb && b.cnt >= s - pb {
                chunk[..pb].copy_from_slice(&at[at.len() - pb..]);
                chunk[pb..s].copy_from_slice(&bh[..s - pb]);
                best = better(best, Some((self.rank(&chunk[..s]), chunk[0].id)));
            }
            out.best[phi] = better(best, b.best[pb]);
        }
        out
    }

    /// Marks `t`'s summary stale: summaries are computed when a choice
    /// needs them, once for all the changes since the previous choice.
    fn mark_stale(&mut self, t: u32) {
        self.nodes[t as usize].dirty = true;
    }

    /// Recomputes the stale summaries (before a choice).
    pub fn refresh(&mut self) {
        if self.root != NIL {
            self.refresh_node(self.root);
        }
    }

    fn refresh_node(&mut self, t: u32) {
        if !self.nodes[t as usize].dirty {
            return;
        }
        let (l, r) = (self.nodes[t as usize].left, self.nodes[t as usize].right);
        if l != NIL {
            self.refresh_node(l);
        }
        if r != NIL {
            self.refresh_node(r);
        }
        let n = &self.nodes[t as usize];
        let (l, r, item) = (n.left, n.right, n.item);
        let empty = Summary::default();
        let ls = if l == NIL {
            empty
        } else {
            self.nodes[l as usize].sum
        };
        let rs = if r == NIL {
            empty
        } else {
            self.nodes[r as usize].sum
        };
        let mid = self.join(&ls, &self.leaf(item));
        let sum = self.join(&mid, &rs);
        let min = if l == NIL {
            item.id
        } else {
            self.nodes[l as usize].min
        };
        let max = if r == NIL {
            item.id
        } else {
            self.nodes[r as usize].max
        };
        let n = &mut self.nodes[t as usize];
        n.sum = sum;
        n.min = min;
        n.max = max;
        n.dirty = false;
    }

    /// Splits `t` into (ids < id, ids ≥ id).
    fn split(&mut self, t: u32, id: PageId) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.nodes[t as usize].item.id < id {
            let (a, b) = self.split(self.nodes[t as usize].right, id);
            self.nodes[t as usize].right = a;
            self.mark_stale(t);
            (t, b)
        } else {
            let (a, b) = self.split(self.nodes[t as usize].left, id);
            self.nodes[t as usize].left = b;
            self.mark_stale(t);
            (a, t)
        }
    }

    /// Joins two treaps, every id of `a` below every id of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.merge(self.nodes[a as usize].right, b);
            self.nodes[a as usize].right = r;
            self.mark_stale(a);
            a
        } else {
            let l = self.merge(a, self.nodes[b as usize].left);
            self.nodes[b as usize].left = l;
            self.mark_stale(b);
            b
        }
    }

    fn treap_insert(&mut self, id: PageId) {
        if !self.treap_on() {
            return;
        }
        let item = self.pages[&id].1;
        let node = Node {
            item,
            prio: mix(id),
            left: NIL,
            right: NIL,
            min: id,
            max: id,
            sum: Summary::default(),
            dirty: true,
        };
        let t = match self.free.pop() {
            Some(t) => {
                self.nodes[t as usize] = node;
                t
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        let (a, b) = self.split(self.root, id);
        let a = self.merge(a, t);
        self.root = self.merge(a, b);
    }

    fn treap_remove(&mut self, id: PageId) {
        if !self.treap_on() {
            return;
        }
        let (a, b) = self.split(self.root, id);
        let (m, c) = self.split(b, id.saturating_add(1));
        if m != NIL {
            self.free.push(m);
        }
        self.root = self.merge(a, c);
    }

    /// Candidates with ids in `[lo, hi]` under `t`.
    fn count(&self, t: u32, lo: PageId, hi: PageId) -> usize {
        if !self.treap_on() {
            return self
                .cand
                .iter()
                .filter(|&&(_, id)| (lo..=hi).contains(&id))
                .count();
        }
        if t == NIL {
            return 0;
        }
        let n = &self.nodes[t as usize];
        debug_assert!(!n.dirty, "flush index queried before refresh");
        if n.max < lo || n.min > hi {
            return 0;
        }
        if lo <= n.min && n.max <= hi {
            return n.sum.cnt;
        }
        self.count(n.left, lo, hi)
            + usize::from((lo..=hi).contains(&n.item.id))
            + self.count(n.right, lo, hi)
    }

    /// Appends the summary of the candidates with ids in `[lo, hi]` under `t` to `acc`.
    fn range_summary(&self, t: u32, lo: PageId, hi: PageId, acc: &mut Summary) {
        if t == NIL {
            return;
        }
        let n = &self.nodes[t as usize];
        debug_assert!(!n.dirty, "flush index queried before refresh");
        if n.max < lo || n.min > hi {
            return;
        }
        if lo <= n.min && n.max <= hi {
            *acc = self.join(acc, &n.sum);
            return;
        }
        self.range_summary(n.left, lo, hi, acc);
        if (lo..=hi).contains(&n.item.id) {
            *acc = self.join(acc, &self.leaf(n.item));
        }
        self.range_summary(n.right, lo, hi, acc);
    }

    /// Appends the candidates with ids in `[lo, hi]` under `t`, in id order, until `out` holds `limit`.
    fn collect(&self, t: u32, lo: PageId, hi: PageId, limit: usize, out: &mut Vec<PageId>) {
        if t == NIL || out.len() >= limit {
            return;
        }
        let n = &self.nodes[t as usize];
        if n.max < lo || n.min > hi {
            return;
        }
        self.collect(n.left, lo, hi, limit, out);
        if out.len() < limit && (lo..=hi).contains(&n.item.id) {
            out.push(n.item.id);
        }
        self.collect(n.right, lo, hi, limit, out);
    }
}

#[cfg(test)]
#[path = "flush_index_tests.rs"]
mod tests;
