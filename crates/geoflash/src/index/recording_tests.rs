//! A [`MemStore`] that records what a tree asks of it: the reads (for the
//! kNN tests' read modes) and the changes (for the bottom-up update tests).
use std::sync::{Arc, Mutex};

use super::*;
use crate::store::mem::MemStore;
use crate::store::{OpId, StoreStats};

/// One read the tree asked its store for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Call {
    Get(PageId),
    Batch(Vec<PageId>),
}

/// One change the tree asked its store for.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Write {
    Create(u16),
    Modify(PageId, u16, Vec<EntryChange>),
    Delete(PageId),
    SetMeta,
}

/// A [`MemStore`] that records every read and every change asked of it.
#[derive(Debug, Default)]
pub(super) struct Recording {
    /// The store the calls go to (read directly: nothing recorded).
    pub(super) inner: MemStore,
    calls: Mutex<Vec<Call>>,
    writes: Mutex<Vec<Write>>,
}

impl Recording {
    /// The reads since the last call, oldest first.
    pub(super) fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    /// The pages read since the last call (or [`Self::take`]), in order, a
    /// batch's one by one.
    pub(super) fn take_reads(&self) -> Vec<PageId> {
        self.take()
            .into_iter()
            .flat_map(|c| match c {
                Call::Get(id) => vec![id],
                Call::Batch(ids) => ids,
            })
            .collect()
    }

    /// The changes since the last call, oldest first.
    pub(super) fn take_writes(&self) -> Vec<Write> {
        std::mem::take(&mut *self.writes.lock().unwrap())
    }

    fn note(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }

    fn note_write(&self, w: Write) {
        self.writes.lock().unwrap().push(w);
    }
}

impl NodeStore for Recording {
    fn get(&self, id: PageId) -> Result<Arc<Node>> {
        self.note(Call::Get(id));
        self.inner.get(id)
    }
    fn get_batch(&self, ids: &[PageId]) -> Result<Vec<Arc<Node>>> {
        self.note(Call::Batch(ids.to_vec()));
        ids.iter().map(|&id| self.inner.get(id)).collect()
    }
    fn begin_op(&mut self) -> Result<OpId> {
        self.inner.begin_op()
    }
    fn create(&mut self, level: u16, entries: Vec<Entry>) -> Result<PageId> {
        self.note_write(Write::Create(level));
        self.inner.create(level, entries)
    }
    fn modify(&mut self, id: PageId, level: u16, changes: &[EntryChange]) -> Result<()> {
        self.note_write(Write::Modify(id, level, changes.to_vec()));
        self.inner.modify(id, level, changes)
    }
    fn delete(&mut self, id: PageId) -> Result<()> {
        self.note_write(Write::Delete(id));
        self.inner.delete(id)
    }
    fn set_meta(&mut self, meta: TreeMeta) -> Result<()> {
        self.note_write(Write::SetMeta);
        self.inner.set_meta(meta)
    }
    fn commit_op(&mut self, op: OpId) -> Result<()> {
        self.inner.commit_op(op)
    }
    fn meta(&self) -> TreeMeta {
        self.inner.meta()
    }
    fn checkpoint(&mut self) -> Result<()> {
        self.inner.checkpoint()
    }
    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }
}
