//! `MemStore`: a trivial [`NodeStore`] keeping decoded nodes in a hash map,
//! with no device behind it.
//!
//! It is the reference store of the index tests: every other store must build
//! the same trees from the same operation sequences. It is strict about the
//! contract so that index bugs show up as errors: changes outside an
//! operation, a level that does not match the node, a missing page or a second
//! `begin_op` before `commit_op` are all refused.
//!
//! Page allocation: the smallest free page id, else the next id after the
//! highest ever used (page 0 is reserved for a header, as on devices). Pages
//! of deleted nodes become reusable when the deleting operation commits.
use std::collections::BTreeSet;

use crate::page_id::IdMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{EntryChange, NodeStore, OpId, StoreStats, TreeMeta};
use crate::page::{Entry, Node};
use crate::storage::PageId;
use crate::{Error, Result};

/// A node store in memory (see the module documentation).
#[derive(Debug, Default)]
pub struct MemStore {
    nodes: IdMap<Arc<Node>>,
    free: BTreeSet<PageId>,
    freed_in_op: Vec<PageId>,
    next_page: PageId,
    meta: TreeMeta,
    open_op: Option<OpId>,
    next_op: OpId,
    gets: AtomicU64,
    stats: StoreStats,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        MemStore {
            next_page: 1,
            ..MemStore::default()
        }
    }

    /// Number of live nodes.
    #[cfg(test)]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Page ids of every live node, ascending.
    #[cfg(test)]
    pub fn page_ids(&self) -> Vec<PageId> {
        let mut ids: Vec<PageId> = self.nodes.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    fn in_op(&self, what: &str) -> Result<()> {
        if self.open_op.is_none() {
            return Err(Error::invalid(format!(
                "MemStore: {what} outside an operation (call begin_op first)"
            )));
        }
        Ok(())
    }

    fn alloc(&mut self) -> PageId {
        if let Some(&id) = self.free.iter().next() {
            self.free.remove(&id);
            return id;
        }
        let id = self.next_page.max(1);
        self.next_page = id + 1;
        id
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

/// Applies entry-level changes to a key-sorted entry list, keeping it sorted.
pub(crate) fn apply_changes(entries: &mut Vec<Entry>, changes: &[EntryChange]) {
    for change in changes {
        match change {
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

impl NodeStore for MemStore {
    fn get(&self, id: PageId) -> Result<Arc<Node>> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.nodes
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::corrupt(Some(id), "MemStore: no node in this page"))
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
        entries.sort_by_key(|e| e.key);
        if entries
            .windows(2)
            .any(|w| matches!(w, [a, b] if a.key == b.key))
        {
            return Err(Error::invalid(
                "MemStore: create with two entries of the same key",
            ));
        }
        let id = self.alloc();
        self.nodes.insert(id, Arc::new(Node { level, entries }));
        self.stats.nodes_created += 1;
        Ok(id)
    }

    fn modify(&mut self, id: PageId, level: u16, changes: &[EntryChange]) -> Result<()> {
        self.in_op("modify")?;
        let node = self
            .nodes
            .get_mut(&id)
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
        apply_changes(&mut Arc::make_mut(node).entries, changes);
        Ok(())
    }

    fn delete(&mut self, id: PageId) -> Result<()> {
        self.in_op("delete")?;
        if self.nodes.remove(&id).is_none() {
            return Err(Error::corrupt(
                Some(id),
                "MemStore: delete of a missing node",
            ));
        }
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
        self.free.extend(self.freed_in_op.drain(..));
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

    fn stats(&self) -> StoreStats {
        let gets = self.gets.load(Ordering::Relaxed);
        StoreStats {
            node_gets: gets,
            buffer_hits: gets,
            ..self.stats.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geom::Rect;

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
}
