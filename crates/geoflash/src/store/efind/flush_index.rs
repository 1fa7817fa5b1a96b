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
//! - the **age order** ([`AgeOrder`]): a queue of `(tick, page)`, the
//!   candidates (the oldest `⌈N·p/100⌉` of the `N` pages) before a split
//!   and the rest after it, rebalanced after each change (O(1) per moved
//!   page, at most a few per change, amortised over the stale keys skipped);
//! - the **candidates by page id** in blocks of [`BLOCK`] consecutive ids
//!   (each a vector of its candidates, sorted), under a segment tree whose
//!   nodes summarise their blocks' id-sorted sequence for every phase
//!   `φ < s` (how many elements precede the subsequence, modulo `s`): the
//!   best complete group, and the first and last `s − 1` pages. Two
//!   summaries join in O(s²). A change inserts or removes a page in its
//!   block (O([`BLOCK`])) and marks the block and its ancestors stale,
//!   stopping at the first already stale; a choice recomputes the stale
//!   blocks (O([`BLOCK`] · s) each, by one pass over their groups) and tree
//!   nodes first, then finds the best group of the whole candidate list, or
//!   of any union of id ranges of it, in O(s² · log(N / [`BLOCK`])) per
//!   range plus one pass over the candidates of the blocks at its ends.
//!
//! Until issue 47 the candidates were a treap of one node per candidate
//! (about 740 bytes each, with its summary), restructured at every change:
//! at 4,000,000 rectangles with the default 256 MiB budget the index took a
//! fifth of the build's CPU time and tens of MB. The tree over blocks takes
//! one summary per block and tree node, and 32 bytes per candidate.
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
use std::collections::VecDeque;

use crate::page_id::{IdMap, IdSet};

use super::age_order::{AgeOrder, Key};
use super::flush::{unit_rank, FlushPolicy, PageInfo, TcChoice};
use super::write_buffer::WbEntry;
use crate::storage::PageId;

/// Largest flushing unit the tree keeps summaries for; larger units are
/// chosen by ranking the candidates of the age order (see the module docs).
pub const MAX_INDEXED_UNIT: usize = 8;

/// Page ids per block of candidates (see the module docs): a change moves
/// at most this many candidates in its block, a stale block is summarised
/// by one pass over at most this many.
pub const BLOCK: u64 = 64;

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

/// The incremental flush index (see the module docs). It is idle (every
/// hook does nothing) until [`configure`](Self::configure)d.
#[derive(Debug, Clone, Default)]
pub struct FlushIndex {
    config: Option<FlushIndexConfig>,
    /// Every buffered page: (tick, item).
    pages: IdMap<(u64, Item)>,
    /// The pages by (tick, id): the oldest ⌈N·p/100⌉ not excluded are the
    /// candidates.
    age: AgeOrder,
    /// Pages set aside by [`exclude`](Self::exclude).
    excluded: IdSet,
    /// Pages the last rebalance moved into (`true`) or out of the
    /// candidates (kept for its room).
    moved: Vec<(PageId, bool)>,
    /// Buffered pages with a positive modified area.
    positive_area: usize,
    /// The candidates of block `b` (ids `b·BLOCK .. (b+1)·BLOCK`), by id
    /// (kept only when the configuration is indexed).
    blocks: Vec<Vec<Item>>,
    /// The segment tree over the blocks: node 1 the root, node `i` the
    /// parent of `2i` and `2i + 1`, node `leaves + b` block `b`.
    tree: Vec<Summary>,
    /// Whether a tree node's summary is stale (a stale node's ancestors
    /// are all stale; see [`FlushIndex::refresh`]).
    stale: Vec<bool>,
    /// Leaves of the tree: a power of two, at least the number of blocks.
    leaves: usize,
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
            ..FlushIndex::default()
        };
        // Oldest first, so that each key joins the age order at its end.
        let mut rows: Vec<(PageId, &WbEntry)> = rows.collect();
        rows.sort_unstable_by_key(|&(id, row)| (row.timestamp, id));
        for (id, row) in rows {
            self.touch(id, row);
        }
    }

    /// Hook: page `id` was created or changed and its row is now `row`.
    pub fn touch(&mut self, id: PageId, row: &WbEntry) {
        let Some(cfg) = self.config else { return };
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
        // One lookup of the page: its new key in, the old one out.
        if let Some(old) = self.pages.insert(id, (row.timestamp, item)) {
            self.detached(id, old);
        }
        let key = (row.timestamp, id);
        if self.age.insert(key, !self.excluded.contains(&id)) {
            self.block_insert(id);
        }
        self.rebalance();
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
                if self.age.rejoin((ts, id)) {
                    self.block_insert(id);
                }
            }
        }
        self.rebalance();
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
        self.age.active()
    }

    /// Whether some buffered page has a positive modified area (the
    /// denominator of α is positive); counted for FP_mha and FP_mhao only.
    pub fn any_area(&self) -> bool {
        self.positive_area > 0
    }

    /// The candidates (the oldest p% of the pages not set aside), oldest first.
    pub fn candidates(&self) -> impl Iterator<Item = PageId> + '_ {
        self.age
            .iter_candidates(|key| self.is_active(key))
            .map(|(_, id)| id)
    }

    /// Whether `key` is the current key of a page not set aside.
    fn is_active(&self, (ts, id): Key) -> bool {
        self.pages.get(&id).is_some_and(|&(t, _)| t == ts) && !self.excluded.contains(&id)
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
            .map(|&(lo, hi)| self.count(lo, hi))
            .sum();
        let within: usize = mid
            .iter()
            .map(|&(lo, hi)| self.count(lo, hi))
            .sum();
        let t = self.age.candidates() - within;
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
            self.range_summary(lo, hi, &mut acc);
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
            self.collect(lo.max(first), hi, s, &mut out);
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

    /// Whether the blocks and the tree summarise the candidates (this
    /// configuration is ranked by them).
    fn summarised(&self) -> bool {
        self.config.is_some_and(|c| c.indexed())
    }

    fn detach(&mut self, id: PageId) {
        if let Some(old) = self.pages.remove(&id) {
            self.detached(id, old);
        }
    }

    /// Page `id`'s entry `(ts, item)` was taken out of `pages`: its key
    /// leaves the candidates or the rest.
    fn detached(&mut self, id: PageId, (ts, item): (u64, Item)) {
        if item.area > 0.0 {
            self.positive_area -= 1;
        }
        if !self.excluded.contains(&id) {
            self.leave((ts, id));
        }
    }

    /// An active page's key stops being active (and its page leaves its
    /// block if a candidate).
    fn leave(&mut self, key: Key) {
        if self.age.leave(key) {
            self.block_remove(key.1);
        }
    }

    /// Restores the candidates to ⌈N·p/100⌉ of the N active pages (at
    /// least 1 when N > 0), and drops stale keys from the age order once
    /// they outnumber the pages (plus a constant: [`AgeOrder::compact`]).
    fn rebalance(&mut self) {
        let n = self.active();
        let percent = usize::from(self.config.map_or(100, |c| c.percent));
        let want = if n == 0 {
            0
        } else {
            (n * percent).div_ceil(100).max(1)
        };
        let mut moved = std::mem::take(&mut self.moved);
        let (pages, excluded) = (&self.pages, &self.excluded);
        let active = |(ts, id): Key| {
            pages.get(&id).is_some_and(|&(t, _)| t == ts) && !excluded.contains(&id)
        };
        self.age.rebalance(want, active, |id, joined| moved.push((id, joined)));
        self.age.compact(pages.len(), |(ts, id)| {
            pages.get(&id).is_some_and(|&(t, _)| t == ts)
        });
        for (id, joined) in moved.drain(..) {
            if joined {
                self.block_insert(id);
            } else {
                self.block_remove(id);
            }
        }
        self.moved = moved;
    }

    // ---- the candidates by id: blocks under a segment tree ----

    /// The summary of `items` (id-sorted candidates) by one pass over their
    /// complete groups: the group starting at position `j` counts for the
    /// phase `φ` with `(φ + j) mod s = 0`, the first of the highest rank
    /// for each (as [`join`](Self::join) of the items one by one gives).
    fn summarize(&self, items: &[Item]) -> Summary {
        let s = self.unit();
        let n = items.len();
        let mut sum = Summary {
            cnt: n,
            ..Summary::default()
        };
        if n == 0 {
            return sum;
        }
        let edge = (s - 1).min(n);
        sum.head = Edge::from_slice(&items[..edge]);
        sum.tail = Edge::from_slice(&items[n - edge..]);
        for (j, group) in items.windows(s).enumerate() {
            let phi = (s - j % s) % s;
            sum.best[phi] = better(sum.best[phi], Some((self.rank(group), group[0].id)));
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

    /// Makes room for block `b`: the tree grows to the next power of two
    /// of leaves, every node stale.
    fn reserve_block(&mut self, b: usize) {
        if b < self.leaves {
            return;
        }
        self.leaves = (b + 1).next_power_of_two();
        self.blocks.resize_with(self.leaves, Vec::new);
        self.tree = vec![Summary::default(); 2 * self.leaves];
        self.stale = vec![true; 2 * self.leaves];
    }

    /// Marks block `b` and its ancestors stale, up to the first already
    /// stale (whose ancestors are). Summaries are computed when a choice
    /// needs them, once for all the changes since the previous choice.
    fn mark_stale(&mut self, b: usize) {
        let mut i = self.leaves + b;
        while i >= 1 && !self.stale[i] {
            self.stale[i] = true;
            i /= 2;
        }
    }

    /// Recomputes the stale summaries (before a choice).
    pub fn refresh(&mut self) {
        if self.leaves > 0 {
            self.refresh_node(1);
        }
    }

    fn refresh_node(&mut self, i: usize) {
        if !self.stale[i] {
            return;
        }
        let sum = if i >= self.leaves {
            self.summarize(&self.blocks[i - self.leaves])
        } else {
            self.refresh_node(2 * i);
            self.refresh_node(2 * i + 1);
            self.join(&self.tree[2 * i], &self.tree[2 * i + 1])
        };
        self.tree[i] = sum;
        self.stale[i] = false;
    }

    fn block_of(id: PageId) -> usize {
        usize::try_from(id / BLOCK).unwrap_or(usize::MAX)
    }

    /// Adds candidate `id` to its block.
    fn block_insert(&mut self, id: PageId) {
        if !self.summarised() {
            return;
        }
        let Some(&(_, item)) = self.pages.get(&id) else {
            return;
        };
        let b = Self::block_of(id);
        self.reserve_block(b);
        let block = &mut self.blocks[b];
        let at = block.partition_point(|x| x.id < id);
        block.insert(at, item);
        self.mark_stale(b);
    }

    /// Removes candidate `id` from its block.
    fn block_remove(&mut self, id: PageId) {
        if !self.summarised() {
            return;
        }
        let b = Self::block_of(id);
        let Some(block) = self.blocks.get_mut(b) else {
            return;
        };
        if let Ok(at) = block.binary_search_by_key(&id, |x| x.id) {
            block.remove(at);
            self.mark_stale(b);
        }
    }

    /// The inclusive id range tree node `i` covers.
    fn node_ids(&self, i: usize) -> (PageId, PageId) {
        // Node i sits at depth ⌊log2 i⌋ and covers leaves/2^depth blocks.
        let depth = i.ilog2();
        let width = (self.leaves >> depth) as u64;
        let first = (i as u64 - (1u64 << depth)) * width;
        let lo = first.saturating_mul(BLOCK);
        let hi = (first + width).saturating_mul(BLOCK).saturating_sub(1);
        (lo, hi)
    }

    /// Visits, in id order, the tree nodes wholly inside `[lo, hi]` and
    /// the blocks that straddle it (with the slice of their candidates
    /// inside), skipping empty subtrees; `visit` returns false to stop.
    fn visit_range(
        &self,
        i: usize,
        lo: PageId,
        hi: PageId,
        visit: &mut dyn FnMut(Span<'_>) -> bool,
    ) -> bool {
        let sum = &self.tree[i];
        debug_assert!(!self.stale[i], "flush index queried before refresh");
        if sum.cnt == 0 {
            return true;
        }
        let (nlo, nhi) = self.node_ids(i);
        if nhi < lo || nlo > hi {
            return true;
        }
        if lo <= nlo && nhi <= hi {
            return visit(Span::Node(i));
        }
        if i >= self.leaves {
            let block = &self.blocks[i - self.leaves];
            let a = block.partition_point(|x| x.id < lo);
            let b = block.partition_point(|x| x.id <= hi);
            return visit(Span::Items(&block[a..b]));
        }
        self.visit_range(2 * i, lo, hi, visit) && self.visit_range(2 * i + 1, lo, hi, visit)
    }

    /// Candidates with ids in `[lo, hi]`.
    fn count(&self, lo: PageId, hi: PageId) -> usize {
        if !self.summarised() {
            return self
                .candidates()
                .filter(|id| (lo..=hi).contains(id))
                .count();
        }
        if self.leaves == 0 {
            return 0;
        }
        let mut n = 0;
        self.visit_range(1, lo, hi, &mut |span| {
            n += match span {
                Span::Node(i) => self.tree[i].cnt,
                Span::Items(items) => items.len(),
            };
            true
        });
        n
    }

    /// Appends the summary of the candidates with ids in `[lo, hi]` to `acc`.
    fn range_summary(&self, lo: PageId, hi: PageId, acc: &mut Summary) {
        if self.leaves == 0 {
            return;
        }
        self.visit_range(1, lo, hi, &mut |span| {
            *acc = match span {
                Span::Node(i) => self.join(acc, &self.tree[i]),
                Span::Items(items) => self.join(acc, &self.summarize(items)),
            };
            true
        });
    }

    /// Appends the candidates with ids in `[lo, hi]`, in id order, until `out` holds `limit`.
    fn collect(&self, lo: PageId, hi: PageId, limit: usize, out: &mut Vec<PageId>) {
        if self.leaves > 0 {
            self.collect_node(1, lo, hi, limit, out);
        }
    }

    fn collect_node(&self, i: usize, lo: PageId, hi: PageId, limit: usize, out: &mut Vec<PageId>) {
        if out.len() >= limit || self.tree[i].cnt == 0 {
            return;
        }
        let (nlo, nhi) = self.node_ids(i);
        if nhi < lo || nlo > hi {
            return;
        }
        if i < self.leaves {
            self.collect_node(2 * i, lo, hi, limit, out);
            self.collect_node(2 * i + 1, lo, hi, limit, out);
            return;
        }
        let block = &self.blocks[i - self.leaves];
        let from = block.partition_point(|x| x.id < lo);
        for x in block[from..].iter().take_while(|x| x.id <= hi) {
            if out.len() >= limit {
                return;
            }
            out.push(x.id);
        }
    }
}

/// What [`FlushIndex::visit_range`] visits: a tree node wholly inside the
/// range, or the candidates of a block inside it.
enum Span<'a> {
    Node(usize),
    Items(&'a [Item]),
}

#[cfg(test)]
#[path = "flush_index_tests.rs"]
mod tests;
