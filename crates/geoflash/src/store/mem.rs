//! `MemStore`: a [`NodeStore`] keeping decoded nodes in memory, with no
//! device behind it (issue 47, item 4).
//!
//! Two uses, one store:
//! - **the store of an index in memory** (`store = "memory"`, the default
//!   of Python's `Index()` without a path; [`StoreSpec::Memory`]): each
//!   node lives once, as the `Arc<Node>` readers get, the way rstar and
//!   geo-index keep theirs. No page is encoded, checksummed or copied to a
//!   device, and no cache sits between the tree and its nodes. The `mem:`
//!   device of such an index holds nothing;
//! - **the reference store of the index tests**: every other store must
//!   build the same trees from the same operation sequences.
//!
//! It refuses what breaks the contract, at the cost of a comparison each:
//! changes outside an operation, a level that does not match the node, a
//! missing page, a second `begin_op` before `commit_op`, two entries of one
//! key in a new node; made [`for pages`](MemStore::for_pages), also a node
//! larger than a page (M comes from the page size, as on a device) and a
//! payload in a store that keeps none.
//!
//! Nodes sit in a vector indexed by page id (page ids are dense: the
//! allocator hands out the smallest free id, else the next one). Page
//! allocation: the smallest free page id, else the next id after the
//! highest ever used (page 0 is reserved for a header, as on devices).
//! Pages of deleted nodes become reusable when the deleting operation
//! commits.
//!
//! Counters ([`StoreStats`]): `node_gets` (every get, answered from memory,
//! so `buffer_hits` equals it), `nodes_created`, `nodes_deleted`,
//! `ops_committed`, and `peak_buffer_bytes`, the peak of the decoded nodes
//! held, charged by [`accounting::node_bytes`](super::accounting::node_bytes)
//! as every store charges its buffer. Device reads, writes, flushes and
//! misses stay 0: there is no device.
//!
//! [`StoreSpec::Memory`]: crate::config::StoreSpec::Memory
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::accounting::node_bytes_for;
use super::bulk::{self, BulkBuild, BulkSink};
use super::checks;
use super::{EntryChange, NodeStore, OpId, StoreStats, TreeMeta};
use crate::page::{self, Entry, Node};
use crate::storage::PageId;
use crate::{Error, Result};

/// The page a store made [`for pages`](MemStore::for_pages) stands for: its
/// nodes hold at most as many entries as such a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PageLimits {
    page_size: usize,
    with_payload: bool,
    max_entries: usize,
}

/// A node store in memory (see the module documentation).
#[derive(Debug, Default)]
pub struct MemStore {
    /// Node of each page id (`None`: page 0, free or never used).
    nodes: Vec<Option<Arc<Node>>>,
    /// Live nodes.
    live: usize,
    /// Free page ids, smallest first.
    free: BinaryHeap<Reverse<PageId>>,
    /// Pages deleted by the running operation (free once it commits).
    freed_in_op: Vec<PageId>,
    meta: TreeMeta,
    open_op: Option<OpId>,
    next_op: OpId,
    limits: Option<PageLimits>,
    /// Bytes of the nodes held (the shared accounting function).
    bytes: usize,
    gets: AtomicU64,
    stats: StoreStats,
}

impl MemStore {
    /// An empty store with no page size: nodes of any length, entries with
    /// any payload (the index tests' reference store).
    pub fn new() -> Self {
        MemStore::default()
    }

    /// An empty store whose nodes hold at most what a `page_size`-byte page
    /// holds (with entry payloads when `with_payload`), as the node stores
    /// on a device: the store of an index in memory.
    pub fn for_pages(page_size: usize, with_payload: bool) -> Result<Self> {
        crate::units::check_page_size(page_size)?;
        Ok(MemStore {
            limits: Some(PageLimits {
                page_size,
                with_payload,
                max_entries: page::max_entries(page_size, with_payload),
            }),
            ..MemStore::default()
        })
    }

    /// Number of live nodes.
    #[cfg(test)]
    pub fn node_count(&self) -> usize {
        self.live
    }

    /// Page ids of every live node, ascending.
    #[cfg(test)]
    pub fn page_ids(&self) -> Vec<PageId> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.is_some())
            .map(|(id, _)| id as PageId)
            .collect()
    }

    fn in_op(&self, what: &str) -> Result<()> {
        if self.open_op.is_none() {
            return Err(Error::invalid(format!(
                "MemStore: {what} outside an operation (call begin_op first)"
            )));
        }
        Ok(())
    }

    /// The slot of page `id`, when it holds a node.
    fn slot(&mut self, id: PageId) -> Option<&mut Arc<Node>> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.nodes.get_mut(i))
            .and_then(Option::as_mut)
    }

    /// The smallest free page id, else the next one.
    fn alloc(&mut self) -> PageId {
        if let Some(Reverse(id)) = self.free.pop() {
            return id;
        }
        self.nodes.len().max(1) as PageId
    }

    /// Puts `node` in page `id` (from [`alloc`](Self::alloc)).
    fn put(&mut self, id: PageId, node: Node) {
        self.bytes += node_bytes_for(node.entries.len());
        self.stats.peak_buffer_bytes = self.stats.peak_buffer_bytes.max(self.bytes as u64);
        let i = id as usize;
        if self.nodes.len() <= i {
            self.nodes.resize(i + 1, None);
        }
        if let Some(slot) = self.nodes.get_mut(i) {
            *slot = Some(Arc::new(node));
        }
        self.live += 1;
        self.stats.nodes_created += 1;
    }

    /// Refuses `n` entries in a node when they do not fit the store's page.
    fn check_len(&self, n: usize) -> Result<()> {
        match self.limits {
            Some(l) => checks::check_len(n, l.max_entries, l.page_size, l.with_payload),
            None => Ok(()),
        }
    }

    /// Refuses an entry with a payload in a store for pages without payloads.
    fn check_payload(&self, e: &Entry) -> Result<()> {
        match self.limits {
            Some(l) => checks::check_payload(e, l.with_payload),
            None => Ok(()),
        }
    }

    /// Checks a new node's entries (sorted by key) and stores it on a fresh page.
    fn store_new(&mut self, level: u16, entries: Vec<Entry>) -> Result<PageId> {
        self.check_len(entries.len())?;
        if let Some([a, _]) = entries
            .windows(2)
            .find(|w| matches!(w, [a, b] if a.key == b.key))
        {
            return Err(Error::invalid(format!(
                "MemStore: a new node with two entries of key {}",
                a.key
            )));
        }
        for e in &entries {
            self.check_payload(e)?;
        }
        let id = self.alloc();
        self.put(id, Node { level, entries });
        Ok(id)
    }

    /// Removes the node of page `id` (an error if there is none).
    fn take(&mut self, id: PageId) -> Result<Arc<Node>> {
        let node = usize::try_from(id)
            .ok()
            .and_then(|i| self.nodes.get_mut(i))
            .and_then(Option::take)
            .ok_or_else(|| Error::corrupt(Some(id), "MemStore: delete of a missing node"))?;
        self.live -= 1;
        self.bytes -= node_bytes_for(node.entries.len());
        Ok(node)
    }
}

/// `entries` with `changes` applied ([`apply_changes`]), in a new vector
/// sized for the result: one allocation and one copy, as a store that keeps
/// shared `Arc<Node>`s needs when it changes a node readers may hold.
pub(crate) fn with_changes(entries: &[Entry], changes: &[EntryChange]) -> Vec<Entry> {
    let mut v = Vec::with_capacity(entries.len() + changes.len());
    v.extend_from_slice(entries);
    apply_changes(&mut v, changes);
    v
}

/// Change lists at least this long whose keys strictly ascend are merged
/// with the entries in one pass ([`merge_changes`]).
const MERGE_AT: usize = 8;

/// The key an entry-level change addresses.
fn change_key(c: &EntryChange) -> u64 {
    match c {
        EntryChange::Upsert(e) => e.key,
        EntryChange::Remove(k) => *k,
    }
}

/// Applies entry-level changes to a key-sorted entry list, keeping it sorted.
pub(crate) fn apply_changes(entries: &mut Vec<Entry>, changes: &[EntryChange]) {
    // What `index::diff` makes of a split or a forced reinsertion: half a
    // node's entries removed, in key order. One at a time, each removal
    // would shift the rest of the vector (a quadratic copy; 2.5 % of a
    // build by insertion in `perf`).
    if changes.len() >= MERGE_AT
        && changes
            .windows(2)
            .all(|w| matches!(w, [a, b] if change_key(a) < change_key(b)))
    {
        merge_changes(entries, changes);
        return;
    }
    for change in changes {
        match change {
            // A key above every key is appended without a search (see
            // `page::holds_key`: new keys usually are).
            EntryChange::Upsert(e) if entries.last().is_none_or(|l| l.key < e.key) => {
                entries.push(*e);
            }
            EntryChange::Upsert(e) => match entries.binary_search_by_key(&e.key, |x| x.key) {
                Ok(i) => {
                    if let Some(slot) = entries.get_mut(i) {
                        *slot = *e;
                    }
                }
                Err(i) => entries.insert(i, *e),
            },
            EntryChange::Remove(k) => {
                if let Ok(i) = entries.binary_search_by_key(k, |x| x.key) {
                    entries.remove(i);
                }
            }
        }
    }
}

/// [`apply_changes`] for `changes` whose keys strictly ascend: each
/// addresses a different key, so their order does not matter. Removals and
/// replacements are applied in one pass that compacts the vector in place
/// (no allocation: the node stays in the cache lines it was in); the
/// upserts of keys not yet in it, usually none or one, are inserted after.
fn merge_changes(entries: &mut Vec<Entry>, changes: &[EntryChange]) {
    let mut pending = changes.iter().peekable();
    let mut added: Vec<Entry> = Vec::new();
    entries.retain_mut(|e| {
        while let Some(c) = pending.next_if(|c| change_key(c) < e.key) {
            if let EntryChange::Upsert(x) = c {
                added.push(*x);
            }
        }
        match pending.next_if(|c| change_key(c) == e.key) {
            Some(EntryChange::Remove(_)) => false,
            Some(EntryChange::Upsert(x)) => {
                *e = *x;
                true
            }
            None => true,
        }
    });
    added.extend(pending.filter_map(|c| match c {
        EntryChange::Upsert(x) => Some(*x),
        EntryChange::Remove(_) => None,
    }));
    if added.len() <= MERGE_AT / 2 {
        for x in added {
            let at = entries.partition_point(|e| e.key < x.key);
            entries.insert(at, x);
        }
    } else {
        entries.extend(added);
        entries.sort_unstable_by_key(|e| e.key);
    }
}

/// The [`BulkSink`] of a [`MemStore`]: each node straight into its page.
struct MemSink<'s> {
    store: &'s mut MemStore,
    /// Pages the load filled, in order (emptied again if it fails).
    pages: Vec<PageId>,
}

impl BulkSink for MemSink<'_> {
    fn node(&mut self, level: u16, entries: &[Entry]) -> Result<PageId> {
        let mut entries = entries.to_vec();
        if !entries.windows(2).all(|w| matches!(w, [a, b] if a.key < b.key)) {
            entries.sort_unstable_by_key(|e| e.key);
        }
        let id = self.store.store_new(level, entries)?;
        self.pages.push(id);
        Ok(id)
    }
}

impl NodeStore for MemStore {
    fn get(&self, id: PageId) -> Result<Arc<Node>> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        usize::try_from(id)
            .ok()
            .and_then(|i| self.nodes.get(i))
            .and_then(Option::as_ref)
            .cloned()
            .ok_or_else(|| Error::corrupt(Some(id), "MemStore: no node in this page"))
    }

    fn get_batch(&self, ids: &[PageId]) -> Result<Vec<Arc<Node>>> {
        self.gets.fetch_add(ids.len() as u64, Ordering::Relaxed);
        ids.iter()
            .map(|&id| {
                usize::try_from(id)
                    .ok()
                    .and_then(|i| self.nodes.get(i))
                    .and_then(Option::as_ref)
                    .cloned()
                    .ok_or_else(|| Error::corrupt(Some(id), "MemStore: no node in this page"))
            })
            .collect()
    }

    fn begin_op(&mut self) -> Result<OpId> {
        if let Some(op) = self.open_op {
            return Err(Error::invalid(format!(
                "MemStore: begin_op while operation {op} is still open"
            )));
        }
        self.next_op += 1;
        self.open_op = Some(self.next_op);
        Ok(self.next_op)
    }

    fn create(&mut self, level: u16, mut entries: Vec<Entry>) -> Result<PageId> {
        self.in_op("create")?;
        entries.sort_unstable_by_key(|e| e.key);
        self.store_new(level, entries)
    }

    fn modify(&mut self, id: PageId, level: u16, changes: &[EntryChange]) -> Result<()> {
        self.in_op("modify")?;
        for c in changes {
            if let EntryChange::Upsert(e) = c {
                self.check_payload(e)?;
            }
        }
        let limits = self.limits;
        let node = self
            .slot(id)
            .ok_or_else(|| Error::corrupt(Some(id), "MemStore: modify of a missing node"))?;
        if node.level != level {
            return Err(Error::corrupt(
                Some(id),
                format!(
                    "MemStore: modify at level {level} of a node at level {}",
                    node.level
                ),
            ));
        }
        let before = node.entries.len();
        if let Some(l) = limits {
            if before + changes.len() > l.max_entries {
                let n = super::efind::write_buffer::len_after(&node.entries, changes);
                checks::check_len(n, l.max_entries, l.page_size, l.with_payload)?;
            }
        }
        match Arc::get_mut(node) {
            // No reader holds the node: change it in place.
            Some(n) => apply_changes(&mut n.entries, changes),
            // Readers keep the version they hold.
            None => {
                *node = Arc::new(Node {
                    level,
                    entries: with_changes(&node.entries, changes),
                })
            }
        }
        let after = node.entries.len();
        self.bytes = self.bytes + node_bytes_for(after) - node_bytes_for(before);
        self.stats.peak_buffer_bytes = self.stats.peak_buffer_bytes.max(self.bytes as u64);
        Ok(())
    }

    fn delete(&mut self, id: PageId) -> Result<()> {
        self.in_op("delete")?;
        self.take(id)?;
        self.freed_in_op.push(id);
        self.stats.nodes_deleted += 1;
        Ok(())
    }

    fn set_meta(&mut self, meta: TreeMeta) -> Result<()> {
        self.in_op("set_meta")?;
        self.meta = meta;
        Ok(())
    }

    fn commit_op(&mut self, op: OpId) -> Result<()> {
        if self.open_op != Some(op) {
            return Err(Error::invalid(format!(
                "MemStore: commit_op({op}) but the open operation is {:?}",
                self.open_op
            )));
        }
        self.open_op = None;
        self.free.extend(self.freed_in_op.drain(..).map(Reverse));
        self.stats.ops_committed += 1;
        Ok(())
    }

    fn meta(&self) -> TreeMeta {
        self.meta.clone()
    }

    fn checkpoint(&mut self) -> Result<()> {
        if let Some(op) = self.open_op {
            return Err(Error::invalid(format!(
                "MemStore: checkpoint while operation {op} is open"
            )));
        }
        Ok(())
    }

    /// Puts each node of the load straight into its page (no operation per
    /// node), then the metadata: the tree is there when this returns. A
    /// failed load takes its nodes out again and leaves the store as before.
    fn bulk_load(&mut self, build: BulkBuild<'_>) -> Result<()> {
        bulk::check_target(&self.meta, self.open_op)?;
        let (free, next, stats) = (self.free.clone(), self.nodes.len(), self.stats.clone());
        let mut sink = MemSink {
            store: self,
            pages: Vec::new(),
        };
        let built = build(&mut sink);
        let pages = std::mem::take(&mut sink.pages);
        let root_is_ours = |meta: &TreeMeta| match meta.root {
            Some(root) => pages.contains(&root),
            None => meta.records == 0 && meta.height == 0,
        };
        match built {
            Ok(meta) if root_is_ours(&meta) => {
                self.meta = meta;
                Ok(())
            }
            failed => {
                for &id in &pages {
                    self.take(id)?;
                }
                (self.free, self.stats) = (free, stats);
                self.nodes.truncate(next);
                Err(match failed {
                    Err(e) => e,
                    Ok(meta) => Error::invalid(format!(
                        "bulk load: the tree's root {:?} is not a node of the load",
                        meta.root
                    )),
                })
            }
        }
    }

    fn stats(&self) -> StoreStats {
        let gets = self.gets.load(Ordering::Relaxed);
        StoreStats {
            node_gets: gets,
            buffer_hits: gets,
            ..self.stats.clone()
        }
    }

    /// The peak restarts at the decoded nodes held now.
    fn restart_buffer_peak(&mut self) {
        self.stats.peak_buffer_bytes = self.bytes as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geom::Rect;
    use proptest::prelude::*;

    /// `changes` applied one at a time, each by a search of the vector: the
    /// oracle of [`apply_changes`].
    fn apply_one_by_one(entries: &mut Vec<Entry>, changes: &[EntryChange]) {
        for c in changes {
            let at = entries.binary_search_by_key(&change_key(c), |x| x.key);
            match (c, at) {
                (EntryChange::Upsert(x), Ok(i)) => entries[i] = *x,
                (EntryChange::Upsert(x), Err(i)) => entries.insert(i, *x),
                (EntryChange::Remove(_), Ok(i)) => {
                    entries.remove(i);
                }
                (EntryChange::Remove(_), Err(_)) => {}
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// Ascending change lists (merged when long enough) and arbitrary
        /// ones (applied in order, a key changed several times) give what
        /// the changes one by one give.
        #[test]
        fn changes_apply_as_one_by_one(
            keys in prop::collection::btree_set(0u64..200, 0..120),
            raw in prop::collection::vec((0u64..200, any::<bool>(), 1u8..9), 0..60),
            ascending in any::<bool>(),
        ) {
            let entries: Vec<Entry> = keys.iter().map(|&k| e(k)).collect();
            let mut changes: Vec<EntryChange> = raw
                .iter()
                .map(|&(k, upsert, w)| if upsert {
                    EntryChange::Upsert(Entry {
                        key: k,
                        rect: Rect::new(0.0, 0.0, f64::from(w), 2.0).unwrap(),
                        payload: u64::from(w),
                    })
                } else {
                    EntryChange::Remove(k)
                })
                .collect();
            if ascending {
                changes.sort_by_key(change_key);
                changes.dedup_by_key(|c| change_key(c));
            }
            let (mut merged, mut oracle) = (entries.clone(), entries);
            apply_changes(&mut merged, &changes);
            apply_one_by_one(&mut oracle, &changes);
            prop_assert_eq!(merged, oracle);
        }
    }

    fn e(key: u64) -> Entry {
        Entry {
            key,
            rect: Rect::new(0.0, 0.0, key as f64, 1.0).unwrap(),
            payload: 0,
        }
    }

    #[test]
    fn create_modify_delete_and_reuse_after_commit() {
        let mut s = MemStore::new();
        assert!(s.create(0, vec![e(1)]).is_err(), "outside an op");
        let op = s.begin_op().unwrap();
        assert!(s.begin_op().is_err());
        let a = s.create(0, vec![e(3), e(1)]).unwrap();
        assert_eq!(a, 1);
        s.modify(
            a,
            0,
            &[
                EntryChange::Upsert(e(2)),
                EntryChange::Remove(3),
                EntryChange::Remove(9),
            ],
        )
        .unwrap();
        let keys: Vec<u64> = s.get(a).unwrap().entries.iter().map(|x| x.key).collect();
        assert_eq!(keys, vec![1, 2]);
        assert!(s.modify(a, 1, &[]).is_err(), "level mismatch");
        s.delete(a).unwrap();
        assert!(s.delete(a).is_err());
        let b = s.create(0, vec![]).unwrap();
        assert_eq!(b, 2, "a page freed in the running op is not reused");
        s.commit_op(op).unwrap();
        let op = s.begin_op().unwrap();
        assert_eq!(s.create(0, vec![]).unwrap(), 1, "reused after commit");
        s.commit_op(op).unwrap();
        assert!(s.get(99).is_err());
        assert!(s.stats().node_gets >= 2);
    }

    #[test]
    fn the_smallest_free_page_comes_first() {
        let mut s = MemStore::new();
        let op = s.begin_op().unwrap();
        let ids: Vec<PageId> = (0..6).map(|_| s.create(0, vec![]).unwrap()).collect();
        assert_eq!(ids, vec![1, 2, 3, 4, 5, 6]);
        for id in [5, 2, 4] {
            s.delete(id).unwrap();
        }
        s.commit_op(op).unwrap();
        let op = s.begin_op().unwrap();
        let again: Vec<PageId> = (0..4).map(|_| s.create(0, vec![]).unwrap()).collect();
        assert_eq!(again, vec![2, 4, 5, 7]);
        s.commit_op(op).unwrap();
        assert_eq!(s.page_ids(), vec![1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(s.node_count(), 7);
    }

    #[test]
    fn a_store_for_pages_refuses_what_a_page_does_not_hold() {
        let max = page::max_entries(512, false);
        let mut s = MemStore::for_pages(512, false).unwrap();
        let op = s.begin_op().unwrap();
        let full = s.create(0, (0..max as u64).map(e).collect()).unwrap();
        let err = s.create(0, (0..=max as u64).map(e).collect()).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
        let err = s
            .modify(full, 0, &[EntryChange::Upsert(e(max as u64 + 5))])
            .unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
        // An upsert of a present key with a removal keeps the length.
        s.modify(
            full,
            0,
            &[
                EntryChange::Remove(0),
                EntryChange::Upsert(e(max as u64 + 5)),
                EntryChange::Upsert(e(3)),
            ],
        )
        .unwrap();
        assert_eq!(s.get(full).unwrap().entries.len(), max);
        let mut paid = e(1);
        paid.payload = 4;
        let err = s.create(0, vec![paid]).unwrap_err();
        assert!(err.to_string().contains("payload"), "{err}");
        let err = s.create(0, vec![e(1), e(1)]).unwrap_err();
        assert!(err.to_string().contains("two entries"), "{err}");
        s.commit_op(op).unwrap();
        assert!(MemStore::for_pages(100, false).is_err());
        let mut with = MemStore::for_pages(512, true).unwrap();
        let op = with.begin_op().unwrap();
        with.create(1, vec![paid]).unwrap();
        with.commit_op(op).unwrap();
    }

    #[test]
    fn a_node_a_reader_holds_is_copied_and_the_reader_keeps_its_version() {
        let mut s = MemStore::new();
        let op = s.begin_op().unwrap();
        let a = s.create(0, vec![e(1), e(2)]).unwrap();
        let held = s.get(a).unwrap();
        s.modify(a, 0, &[EntryChange::Remove(1)]).unwrap();
        assert_eq!(held.entries.len(), 2);
        assert_eq!(s.get(a).unwrap().entries, vec![e(2)]);
        drop(held);
        s.modify(a, 0, &[EntryChange::Upsert(e(7))]).unwrap();
        assert_eq!(s.get(a).unwrap().entries, vec![e(2), e(7)]);
        s.commit_op(op).unwrap();
    }

    #[test]
    fn node_bytes_and_their_peak_follow_the_nodes() {
        let mut s = MemStore::new();
        let op = s.begin_op().unwrap();
        let a = s.create(0, vec![e(1), e(2)]).unwrap();
        let b = s.create(0, vec![e(3)]).unwrap();
        assert_eq!(s.bytes, node_bytes_for(2) + node_bytes_for(1));
        s.modify(a, 0, &[EntryChange::Upsert(e(5))]).unwrap();
        s.delete(b).unwrap();
        s.commit_op(op).unwrap();
        assert_eq!(s.bytes, node_bytes_for(3));
        let st = s.stats();
        assert_eq!(
            st.peak_buffer_bytes as usize,
            node_bytes_for(3) + node_bytes_for(1)
        );
        assert_eq!((st.nodes_created, st.nodes_deleted, st.ops_committed), (2, 1, 1));
        assert_eq!((st.node_reads, st.node_writes, st.flushes), (0, 0, 0));
    }

    #[test]
    fn a_bulk_load_publishes_its_tree_or_leaves_the_store_as_it_was() {
        let mut s = MemStore::for_pages(512, false).unwrap();
        let failed = s.bulk_load(Box::new(|sink: &mut dyn BulkSink| {
            sink.node(0, &[e(2), e(1)])?;
            Err(Error::invalid("the loader's input ended badly"))
        }));
        assert!(failed.unwrap_err().to_string().contains("ended badly"));
        assert_eq!((s.node_count(), s.bytes, s.stats().nodes_created), (0, 0, 0));
        let stray = s.bulk_load(Box::new(|sink: &mut dyn BulkSink| {
            sink.node(0, &[e(1)])?;
            Ok(TreeMeta {
                root: Some(40),
                height: 1,
                records: 1,
            })
        }));
        assert!(stray.unwrap_err().to_string().contains("not a node of the load"));
        assert_eq!(s.node_count(), 0);
        s.bulk_load(Box::new(|sink: &mut dyn BulkSink| {
            let leaf = sink.node(0, &[e(2), e(1)])?;
            let mut up = e(leaf);
            up.key = leaf;
            let root = sink.node(1, &[up])?;
            Ok(TreeMeta {
                root: Some(root),
                height: 2,
                records: 2,
            })
        }))
        .unwrap();
        assert_eq!(s.page_ids(), vec![1, 2]);
        assert_eq!(s.get(1).unwrap().entries, vec![e(1), e(2)]);
        assert_eq!(s.meta().root, Some(2));
        assert_eq!(s.stats().ops_committed, 0, "no operation per node");
        assert!(s
            .bulk_load(Box::new(|_: &mut dyn BulkSink| Ok(TreeMeta::default())))
            .unwrap_err()
            .to_string()
            .contains("already holds"));
    }
}
