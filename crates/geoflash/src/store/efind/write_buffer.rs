//! The eFIND write buffer table: `page_id -> (h, mod_count, timestamp,
//! status, body)`. The body of a NEW page is its node, kept once, decoded
//! (a read shares it, a change updates it in place); a MOD page's is the
//! sorted [`Changes`] `entry_key -> latest entry or removal` to apply to
//! the stored page; a DEL page has none.
//!
//! Size: the bytes of buffered modifications, per [`changes_bytes`]: a
//! fixed charge per buffered page plus one per element (a NEW node's entry,
//! a MOD page's changed key), the papers' model, which decides when the
//! buffer flushes (the seed workloads' counters depend on it). The buffer is
//! "full" when this exceeds the write share of the total buffer. The memory
//! is below the charge: 48 bytes per entry of a NEW node and 64 per change
//! of a MOD page (with the vectors' room) against the 80 charged. Until
//! issue 47 a NEW page was held three times: an ordered map of its entries
//! (about 1.3× the charge), a decoded view beside it and, once views were
//! dropped for room, a new copy made from the map at every read.
//!
//! Beside the table, the buffer keeps the decoded newest version (a *view*)
//! of recently changed MOD pages, so that reading one does not merge its
//! changes with the stored page again on every access. Views are a CPU cache: they
//! change no I/O and no flushing decision of the papers' algorithms. Their
//! memory is counted ([`WriteBuffer::view_bytes`]: [`view_bytes`], entries
//! counted by the room their vector holds, which a node that grew by
//! insertions has doubled) and lives in what the write budget leaves: the oldest
//! views are dropped while views and buffered modifications together
//! exceed the budget the store gives ([`WriteBuffer::with_view_budget`]),
//! leaves first, down to a floor in bytes (the internal nodes every
//! insertion reads): [`VIEW_FLOOR_BYTES`] or the store's read-buffer
//! share, whichever is less. The floor is the only memory views take
//! beyond the room, so views never exceed `max(room, floor)`. Before issue
//! 47 the views had a budget of their own, as large as the write budget,
//! which the accounting left out; until the workbench review the floor was
//! the whole write budget and at least 64 views were kept whatever their
//! bytes, which took a 64 KiB budget's peak to about 206 KB (3.2 times it).
use std::collections::VecDeque;

use crate::page_id::{IdMap, IdSet};
use std::sync::Arc;

use super::flush_index::{FlushIndex, FlushIndexConfig};
use crate::geom::Rect;
use crate::page::{Entry, Node};
use crate::storage::PageId;
use crate::store::accounting::{changes_bytes, node_bytes_for};
use crate::store::EntryChange;

/// Status of a buffered page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Created since it was last flushed: the row holds the whole node.
    New,
    /// Modified: the row holds changes to apply to the stored page.
    Mod,
    /// Deleted: nothing to write.
    Del,
}

/// The entry-level changes of a MOD page, sorted by key: `key -> Some(latest
/// entry)` or `None` (removed). Two vectors in key order, the keys apart
/// from their changes, each grown by half its length at a time: a page
/// with a few changes (most of them, once a build's buffer is full) takes
/// 64 bytes per change, where an ordered map took a node of eleven (about
/// 730 bytes) for the first. The search for a key reads the keys alone, 8
/// bytes each: 13 cache lines for 100 changes, where the pairs of key and
/// change it searched before took 100 (a restart replaying a log, which
/// changes its pages in random order, spent a third of its time in the
/// misses of that search: `docs/benchmarks.md`, "Replaying the log").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    /// The changed keys, ascending.
    keys: Vec<u64>,
    /// The change of each key of `keys`, at the same position.
    versions: Vec<Option<Entry>>,
}

impl Changes {
    /// Number of changed keys.
    pub fn keys(&self) -> usize {
        self.keys.len()
    }

    /// The change of `key`: `Some(Some(entry))` (newest version),
    /// `Some(None)` (removed) or `None` (unchanged).
    pub fn get(&self, key: u64) -> Option<&Option<Entry>> {
        let i = self.keys.binary_search(&key).ok()?;
        self.versions.get(i)
    }

    /// Records `change` for `key`, replacing an earlier one.
    pub fn set(&mut self, key: u64, change: Option<Entry>) {
        match self.keys.binary_search(&key) {
            Ok(i) => {
                if let Some(slot) = self.versions.get_mut(i) {
                    *slot = change;
                }
            }
            Err(i) => {
                if self.keys.len() == self.keys.capacity() {
                    let more = (self.keys.len() / 2).max(1);
                    self.keys.reserve_exact(more);
                    self.versions.reserve_exact(more);
                }
                self.keys.insert(i, key);
                self.versions.insert(i, change);
            }
        }
    }

    /// Records `change` for `key` at the end, out of key order, for a
    /// restart's replay (see [`WriteBuffer::begin_replay`]): no search, and
    /// no move of the later changes. Until [`Self::settle`], the keys may be
    /// out of order and repeated, and only `push_unsettled` may be called.
    /// Before the vectors would grow, the changes are settled, and they
    /// grow only when that leaves less than a third of their room: they hold
    /// at most about twice what the page's changed keys need, however many
    /// times the log changed each.
    pub fn push_unsettled(&mut self, key: u64, change: Option<Entry>) {
        if self.keys.len() == self.keys.capacity() {
            self.settle();
            if 3 * self.keys.len() >= 2 * self.keys.capacity() {
                let more = (self.keys.len() / 2).max(1);
                self.keys.reserve_exact(more);
                self.versions.reserve_exact(more);
            }
        }
        self.keys.push(key);
        self.versions.push(change);
    }

    /// Puts changes recorded by [`Self::push_unsettled`] in key order,
    /// keeping the last change of each key (what [`Self::set`] would have
    /// kept, one after the other).
    pub fn settle(&mut self) {
        if self.keys.windows(2).all(|w| matches!(w, [a, b] if a < b)) {
            return;
        }
        let room = self.keys.capacity();
        let mut pairs: Vec<(u64, Option<Entry>)> =
            self.keys.drain(..).zip(self.versions.drain(..)).collect();
        // Stable: of two equal keys the later stays last, and is kept.
        pairs.sort_by_key(|p| p.0);
        pairs.reverse();
        pairs.dedup_by_key(|p| p.0);
        pairs.reverse();
        for (k, v) in pairs {
            self.keys.push(k);
            self.versions.push(v);
        }
        debug_assert!(self.keys.capacity() == room);
    }

    /// Changes the vectors have room for (tests of the replay's memory).
    #[cfg(test)]
    pub fn room(&self) -> usize {
        self.keys.capacity().max(self.versions.capacity())
    }

    /// The changes in ascending key order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, Option<&Entry>)> {
        self.keys
            .iter()
            .copied()
            .zip(self.versions.iter().map(Option::as_ref))
    }
}

impl FromIterator<(u64, Option<Entry>)> for Changes {
    /// Collects changes in any order; the last change of a key wins.
    fn from_iter<I: IntoIterator<Item = (u64, Option<Entry>)>>(iter: I) -> Self {
        let mut c = Changes::default();
        for (k, v) in iter {
            c.set(k, v);
        }
        c
    }
}

/// What a row holds besides its counters.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// A NEW page: the node itself, kept once (the row is its only decoded
    /// copy, which reads share and changes update in place).
    New(Arc<Node>),
    /// A MOD page: the changes to apply to the stored page.
    Mod(Changes),
    /// A DEL page: nothing.
    Del,
}

/// One row of the write buffer table.
#[derive(Debug, Clone, PartialEq)]
pub struct WbEntry {
    /// Node height (level; 0 for leaves).
    pub height: u16,
    /// Number of entry-level modifications since the page was last flushed.
    pub mod_count: u64,
    /// Logical time of the last modification.
    pub timestamp: u64,
    /// The node (NEW), the changes (MOD) or nothing (DEL).
    pub body: Body,
}

impl WbEntry {
    /// NEW, MOD or DEL.
    pub fn status(&self) -> Status {
        match self.body {
            Body::New(_) => Status::New,
            Body::Mod(_) => Status::Mod,
            Body::Del => Status::Del,
        }
    }

    /// The buffered elements the row is charged for ([`changes_bytes`]):
    /// a NEW node's entries, a MOD page's changed keys, none for DEL.
    pub fn elements(&self) -> usize {
        match &self.body {
            Body::New(node) => node.entries.len(),
            Body::Mod(changes) => changes.keys(),
            Body::Del => 0,
        }
    }

    /// The MBR of the buffered entry versions (the page's "modified area"),
    /// if any: a NEW node's entries, a MOD page's newest versions.
    pub fn modified_mbr(&self) -> Option<Rect> {
        let union = |a: Rect, b: Rect| a.union(&b);
        match &self.body {
            Body::New(node) => node.entries.iter().map(|e| e.rect).reduce(union),
            Body::Mod(changes) => changes
                .iter()
                .filter_map(|(_, e)| e.map(|e| e.rect))
                .reduce(union),
            Body::Del => None,
        }
    }
}

/// The write buffer table.
#[derive(Debug, Default, Clone)]
pub struct WriteBuffer {
    map: IdMap<WbEntry>,
    elements: usize,
    clock: u64,
    views: Views,
    /// Bytes that buffered modifications and views may take together
    /// before views are dropped (the store's write budget).
    view_budget: usize,
    /// The incremental choice of flushing units (idle until configured).
    flush: FlushIndex,
    /// A restart's replay is running ([`Self::begin_replay`]).
    replaying: bool,
}

/// Bytes of a view: [`node_bytes_for`] the entries its vector has room for.
pub fn view_bytes(node: &Node) -> usize {
    node_bytes_for(node.entries.capacity())
}

/// Stale elements of the views' order tolerated beyond twice the views
/// before the order is compacted.
const STALE_ORDER_SLACK: usize = 64;

/// Bytes of views kept even when the buffered modifications leave no room
/// (see the [module docs](self)), unless the floor the store gives
/// ([`WriteBuffer::with_view_budget`]) is smaller: 16 MiB, enough for the internal nodes of
/// a tree of 4 KiB pages up to about 10,000,000 rectangles, which every
/// insertion reads (leaves' views go first). Without it a build whose write
/// buffer is full merged the mod tree of every buffered node on its path
/// again at each read: 83 s of CPU instead of 44 s at 4,000,000 rectangles.
pub const VIEW_FLOOR_BYTES: usize = 16 << 20;

/// Decoded newest versions of recently changed buffered pages, evicted in
/// first-in first-out order (of their last change), leaves first, while
/// their bytes exceed both the room they are given and their floor.
#[derive(Debug, Default, Clone)]
struct Views {
    /// Page -> (view, sequence number of the change that set it).
    map: IdMap<(Arc<Node>, u64)>,
    /// (page, sequence number) in the order views were set, for leaves
    /// (`[0]`) and internal nodes (`[1]`); an element whose number is not
    /// the page's current one is stale and skipped.
    order: [VecDeque<(PageId, u64)>; 2],
    /// Whether views are kept at all.
    enabled: bool,
    /// Bytes of views kept whatever the room: at most [`VIEW_FLOOR_BYTES`].
    floor: usize,
    /// [`view_bytes`] of the views.
    bytes: usize,
    seq: u64,
}

impl Views {
    fn get(&self, id: PageId) -> Option<&Arc<Node>> {
        self.map.get(&id).map(|(n, _)| n)
    }

    /// Keeps `node` as the view of `id`, then drops the oldest views while
    /// they take more than `room` bytes (see [`Views::shrink`]).
    fn set(&mut self, id: PageId, node: Arc<Node>, room: usize) {
        if !self.enabled {
            return;
        }
        self.seq += 1;
        self.bytes += view_bytes(&node);
        let class = usize::from(node.level > 0);
        if let Some((old, _)) = self.map.insert(id, (node, self.seq)) {
            self.bytes -= view_bytes(&old);
        }
        self.order[class].push_back((id, self.seq));
        self.shrink(room);
    }

    /// Drops the oldest views, leaves first, while they take more than
    /// both `room` bytes and the floor.
    fn shrink(&mut self, room: usize) {
        let limit = room.max(self.floor);
        while self.bytes > limit {
            let class = usize::from(self.order[0].is_empty());
            let Some((old, seq)) = self.order[class].pop_front() else {
                break;
            };
            if self.map.get(&old).is_some_and(|(_, s)| *s == seq) {
                self.remove(old);
            }
        }
        if self.order.iter().map(VecDeque::len).sum::<usize>()
            > 2 * self.map.len() + STALE_ORDER_SLACK
        {
            let map = &self.map;
            for order in &mut self.order {
                order.retain(|(id, seq)| map.get(id).is_some_and(|(_, s)| s == seq));
            }
        }
    }

    fn remove(&mut self, id: PageId) {
        if let Some((old, _)) = self.map.remove(&id) {
            self.bytes -= view_bytes(&old);
        }
    }
}

impl WriteBuffer {
    /// An empty buffer that keeps no views.
    #[cfg(test)]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty buffer that keeps views in the room its modifications
    /// leave of `budget` bytes, and `floor` bytes of them whatever the room
    /// (at most [`VIEW_FLOOR_BYTES`]; the store gives its read-buffer share,
    /// so that views beyond the room stay within what that share bounds).
    pub fn with_view_budget(budget: usize, floor: usize) -> Self {
        let mut wb = Self::default();
        wb.views.enabled = true;
        wb.views.floor = floor.min(VIEW_FLOOR_BYTES);
        wb.view_budget = budget;
        wb
    }

    /// Bytes of the views ([`view_bytes`] of each).
    pub fn view_bytes(&self) -> usize {
        self.views.bytes
    }

    /// The bytes views may take now: what the buffered modifications leave
    /// of the budget.
    fn view_room(&self) -> usize {
        self.view_budget.saturating_sub(self.bytes())
    }

    /// The decoded newest version of MOD page `id`, if the buffer keeps
    /// one. It always equals what [`merge`] makes of the stored page and
    /// the row. (A NEW page's row is its node: [`Self::node`].)
    pub fn view(&self, id: PageId) -> Option<&Arc<Node>> {
        self.views.get(id)
    }

    /// The node of NEW page `id` (the row's own, not a copy).
    pub fn node(&self, id: PageId) -> Option<&Arc<Node>> {
        match &self.map.get(&id)?.body {
            Body::New(node) => Some(node),
            _ => None,
        }
    }

    /// Forgets the view of page `id` (views are a cache of merges): a
    /// caller about to change the node drops the buffer's reference first,
    /// so that its copy is the only one and changes in place.
    pub fn forget_view(&mut self, id: PageId) {
        self.views.remove(id);
    }

    /// Records `node` as the newest version of page `id`, which must be
    /// buffered as MOD and be what merging its row gives (ignored for
    /// other pages).
    pub fn set_view(&mut self, id: PageId, node: Arc<Node>) {
        if matches!(self.map.get(&id), Some(r) if r.status() == Status::Mod) {
            let room = self.view_room();
            self.views.set(id, node, room);
        }
    }

    /// Bytes of buffered modifications.
    pub fn bytes(&self) -> usize {
        changes_bytes(self.map.len(), self.elements)
    }

    /// Bytes of buffered modifications once the pages `ids` are removed.
    pub fn bytes_without(&self, ids: &IdSet) -> usize {
        let (pages, elements) = ids
            .iter()
            .filter_map(|id| self.map.get(id))
            .fold((0, 0), |(p, e), r| (p + 1, e + r.elements()));
        changes_bytes(self.map.len() - pages, self.elements - elements)
    }

    /// Number of buffered pages.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no page is buffered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The row of page `id`.
    pub fn get(&self, id: PageId) -> Option<&WbEntry> {
        self.map.get(&id)
    }

    /// Every row.
    pub fn iter(&self) -> impl Iterator<Item = (PageId, &WbEntry)> {
        self.map.iter().map(|(k, v)| (*k, v))
    }

    /// Keeps the [`FlushIndex`] for `config` (rebuilt from the rows if it was not).
    pub fn configure_flush_index(&mut self, config: FlushIndexConfig) {
        self.flush
            .configure(config, self.map.iter().map(|(k, v)| (*k, v)));
    }

    /// The flush index.
    pub fn flush_index(&self) -> &FlushIndex {
        &self.flush
    }

    /// The flush index, to set pages aside during a batch.
    pub fn flush_index_mut(&mut self) -> &mut FlushIndex {
        &mut self.flush
    }

    /// Starts a restart's replay of the log: until [`Self::finish_replay`],
    /// [`Self::modify`] appends a MOD page's changes out of key order
    /// ([`Changes::push_unsettled`]), and nothing but `create`, `modify`,
    /// `delete` and `remove` may be called. A log replays its pages'
    /// changes in random order, and the search for each key among its
    /// page's earlier changes was most of a replay's time (a cache miss per
    /// step): see `docs/benchmarks.md`, "Replaying the log".
    pub fn begin_replay(&mut self) {
        self.replaying = true;
    }

    /// Ends the replay: every MOD page's changes are put in key order, the
    /// last change of each key kept, and the buffer is what the same calls
    /// without the replay would have left.
    pub fn finish_replay(&mut self) {
        self.replaying = false;
        for row in self.map.values_mut() {
            if let Body::Mod(changes) = &mut row.body {
                changes.settle();
            }
        }
        self.elements = self.map.values().map(WbEntry::elements).sum();
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Buffers a created node (status NEW). `entries` may come in any
    /// order; of two with the same key the later is kept.
    pub fn create(&mut self, id: PageId, level: u16, entries: &[Entry]) {
        let ts = self.tick();
        self.remove(id);
        let mut sorted = Vec::with_capacity(entries.len());
        sorted.extend_from_slice(entries);
        if !sorted
            .windows(2)
            .all(|w| matches!(w, [a, b] if a.key < b.key))
        {
            // Stable: the later of two equal keys stays last, and is kept.
            sorted.sort_by_key(|e| e.key);
            sorted.reverse();
            sorted.dedup_by_key(|e| e.key);
            sorted.reverse();
        }
        self.elements += sorted.len();
        self.map.insert(
            id,
            WbEntry {
                height: level,
                mod_count: entries.len().max(1) as u64,
                timestamp: ts,
                body: Body::New(Arc::new(Node {
                    level,
                    entries: sorted,
                })),
            },
        );
        self.flush.touch(id, &self.map[&id]);
        let room = self.view_room();
        self.views.shrink(room);
    }

    /// Buffers entry-level changes of page `id`: a NEW page's node changes
    /// in place (without a copy when the caller holds no reference to it),
    /// any other page becomes or stays MOD and its view, if any, is dropped
    /// (see [`Self::set_view`]).
    pub fn modify(&mut self, id: PageId, level: u16, changes: &[EntryChange]) {
        let ts = self.tick();
        let replaying = self.replaying;
        self.views.remove(id);
        let row = self.map.entry(id).or_insert_with(|| WbEntry {
            height: level,
            mod_count: 0,
            timestamp: ts,
            body: Body::Mod(Changes::default()),
        });
        if row.body == Body::Del {
            // Resurrection cannot happen (deleted pages are not reused before
            // a checkpoint); treat it as a fresh modification.
            row.body = Body::Mod(Changes::default());
        }
        let before = row.elements();
        match &mut row.body {
            Body::New(node) => {
                let node = Arc::make_mut(node);
                node.level = level;
                crate::store::mem::apply_changes(&mut node.entries, changes);
            }
            Body::Mod(mods) => {
                for c in changes {
                    let (key, change) = match c {
                        EntryChange::Upsert(e) => (e.key, Some(*e)),
                        EntryChange::Remove(k) => (*k, None),
                    };
                    if replaying {
                        mods.push_unsettled(key, change);
                    } else {
                        mods.set(key, change);
                    }
                }
            }
            Body::Del => {}
        }
        let after = row.elements();
        row.mod_count += changes.len() as u64;
        row.timestamp = ts;
        row.height = level;
        self.flush.touch(id, row);
        self.elements = self.elements + after - before;
        let room = self.view_room();
        self.views.shrink(room);
    }

    /// Buffers the deletion of page `id`: a NEW page leaves the buffer, any
    /// other becomes DEL.
    pub fn delete(&mut self, id: PageId, level: u16) {
        let ts = self.tick();
        let was_new = self.map.get(&id).is_some_and(|r| r.status() == Status::New);
        self.remove(id);
        if !was_new {
            self.map.insert(
                id,
                WbEntry {
                    height: level,
                    mod_count: 1,
                    timestamp: ts,
                    body: Body::Del,
                },
            );
            self.flush.touch(id, &self.map[&id]);
        }
        let room = self.view_room();
        self.views.shrink(room);
    }

    /// Removes the row of page `id` (after it was flushed).
    pub fn remove(&mut self, id: PageId) -> Option<WbEntry> {
        self.views.remove(id);
        let row = self.map.remove(&id)?;
        self.flush.forget(id);
        self.elements -= row.elements();
        Some(row)
    }
}

/// The number of entries `entries` (sorted by key) has once `changes` are
/// applied in order ([`crate::store::mem::apply_changes`]'s result), without
/// applying them: a change is refused before anything is changed.
pub fn len_after(entries: &[Entry], changes: &[EntryChange]) -> usize {
    let present = |k: u64| crate::page::holds_key(entries, k);
    let delta = |k: u64, upsert: bool| match (present(k), upsert) {
        (false, true) => 1isize,
        (true, false) => -1,
        _ => 0,
    };
    let key_of = |c: &EntryChange| match c {
        EntryChange::Upsert(e) => (e.key, true),
        EntryChange::Remove(k) => (*k, false),
    };
    let change: isize = if let [one] = changes {
        let (k, upsert) = key_of(one);
        delta(k, upsert)
    } else {
        // The last change of each key decides whether it is there.
        let mut last: Vec<(u64, bool)> = changes.iter().rev().map(key_of).collect();
        last.sort_by_key(|&(k, _)| k);
        last.dedup_by_key(|&mut (k, _)| k);
        last.into_iter().map(|(k, upsert)| delta(k, upsert)).sum()
    };
    entries.len().saturating_add_signed(change)
}

/// Merges a stored node with a MOD row's changes (Alg. 2's merge, O(n + m)):
/// newer versions replace, new entries are added, removals drop.
pub fn merge(base: &Node, changes: &Changes) -> Node {
    let mut out = Vec::with_capacity(base.entries.len() + changes.keys());
    let mut a = base.entries.iter().peekable();
    let mut b = changes.iter().peekable();
    loop {
        match (a.peek(), b.peek()) {
            (Some(x), Some(&(k, v))) => {
                if x.key < k {
                    out.push(**x);
                    a.next();
                } else {
                    if x.key == k {
                        a.next();
                    }
                    if let Some(e) = v {
                        out.push(*e);
                    }
                    b.next();
                }
            }
            (Some(x), None) => {
                out.push(**x);
                a.next();
            }
            (None, Some(&(_, v))) => {
                if let Some(e) = v {
                    out.push(*e);
                }
                b.next();
            }
            (None, None) => break,
        }
    }
    Node {
        level: base.level,
        entries: out,
    }
}
