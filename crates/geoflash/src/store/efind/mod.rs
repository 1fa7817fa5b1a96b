//! `EfindStore`: the eFIND framework (seed `efind-framework.txt`, reading
//! guide `NOTES-efind.md`) as a node store, so that the R-tree, the R*-tree
//! and the Hilbert R-tree become flash-aware without changing their
//! algorithms.
//!
//! - **Write buffer** ([`write_buffer`]): entry-level modifications per page
//!   (NEW/MOD/DEL), sized in bytes of modifications; its budget is the total
//!   buffer minus the read-buffer share.
//! - **Read buffer**: `read_buffer_percent` of the total buffer, pages as
//!   stored on the device, managed by a [`crate::cache`] policy.
//! - **RetrievePage** (Alg. 2, `retrieve.rs`) answers every `get`.
//! - **Flushing** (Alg. 3, [`flush`]): at `commit_op`, while the write buffer
//!   is over budget, one flushing unit of `flush_unit` pages chosen among the
//!   `flush_percent`% oldest buffered pages by the [`FlushPolicy`] is written
//!   as one device batch. Never inside an operation.
//! - **Temporal control** (Algs. 4–5): optional RQ/WQ FIFO queues.
//! - `checkpoint` writes every buffered page (one batch), then the header
//!   page, then syncs.
//!
//! Page 0 is the header page (as in [`PlainStore`](super::PlainStore)): tree
//! metadata, next page id, LSN and the free list, continued in a chain of
//! free pages when it does not fit page 0.
//!
//! Durability: none beyond `checkpoint` yet (the log comes later): a crash
//! loses the write buffer.
//!
//! Errors: a failed flush batch leaves the write buffer untouched (rows are
//! removed only after their batch was written), so the error surfaces from
//! `commit_op`/`checkpoint` and a later flush retries the same pages.
//!
//! Deleted pages: a NEW page deleted before its first flush simply leaves
//! the write buffer; any other becomes a DEL row (nothing is written for it;
//! its height is the buffered row's, else 0). The page returns to the free
//! list only after the checkpoint that records the deletion.
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::accounting::node_bytes;
use super::alloc::PageAllocator;
use super::header::{Format, Header};
use super::{EntryChange, NodeStore, OpBracket, OpId, StoreStats, TreeMeta};
use crate::cache::{Cache, EntryMeta, PolicyKind};
use crate::page::{self, Entry, Node};
use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

pub mod flush;
mod retrieve;
#[cfg(test)]
mod tests;
pub mod write_buffer;

pub use flush::FlushPolicy;
use write_buffer::WriteBuffer;

/// Temporal control parameters (Algs. 4–5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemporalControl {
    /// Capacity of RQ (ids of the last pages read from the device).
    pub rq_capacity: usize,
    /// Capacity of WQ (ids of the last pages written).
    pub wq_capacity: usize,
    /// A page within this distance of a WQ page is sequential (paper: ≤ 10).
    pub seq_distance: u64,
    /// A page farther than this from every WQ page is stride (paper: > 100).
    pub stride_distance: u64,
}

impl Default for TemporalControl {
    /// RQ and WQ of 64 ids, thresholds 10 and 100.
    fn default() -> Self {
        TemporalControl {
            rq_capacity: 64,
            wq_capacity: 64,
            seq_distance: 10,
            stride_distance: 100,
        }
    }
}

/// Configuration of an [`EfindStore`]; defaults are the paper's final configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EfindConfig {
    /// Total buffer bytes (write buffer + read buffer).
    pub buffer_bytes: usize,
    /// Share of the buffer given to the read buffer, in percent (< 100).
    pub read_buffer_percent: u8,
    /// Replacement policy of the read buffer.
    pub read_policy: PolicyKind,
    /// p: the percentage of oldest buffered pages considered by a flush (1..=100).
    pub flush_percent: u8,
    /// s: pages per flushing unit (≥ 1).
    pub flush_unit: usize,
    /// Flushing policy.
    pub policy: FlushPolicy,
    /// Temporal control (`None` = off).
    pub temporal_control: Option<TemporalControl>,
    /// Whether node pages carry the entries' payloads (the Hilbert R-tree needs them).
    pub with_payload: bool,
}

impl Default for EfindConfig {
    /// 512 KiB, 20% read buffer with S2Q, p = 60%, s = 5, FP_mh, temporal control on.
    fn default() -> Self {
        EfindConfig {
            buffer_bytes: 512 * 1024,
            read_buffer_percent: 20,
            read_policy: PolicyKind::S2q,
            flush_percent: 60,
            flush_unit: 5,
            policy: FlushPolicy::Mh,
            temporal_control: Some(TemporalControl::default()),
            with_payload: false,
        }
    }
}

impl EfindConfig {
    /// Refuses contradictory parameters.
    pub fn verify(&self) -> Result<()> {
        if self.read_buffer_percent >= 100 {
            return Err(Error::invalid(format!(
                "read buffer share {}% leaves no write buffer (must be below 100%)",
                self.read_buffer_percent
            )));
        }
        if self.flush_percent == 0 || self.flush_percent > 100 {
            return Err(Error::invalid(format!(
                "flush percent {} is outside 1..=100",
                self.flush_percent
            )));
        }
        if self.flush_unit == 0 {
            return Err(Error::invalid(
                "flushing unit size 0: a unit holds at least one page",
            ));
        }
        if let Some(tc) = self.temporal_control {
            if tc.rq_capacity == 0 || tc.wq_capacity == 0 {
                return Err(Error::invalid(
                    "temporal control queues need a capacity of at least 1",
                ));
            }
            if tc.seq_distance >= tc.stride_distance {
                return Err(Error::invalid(format!(
                    "temporal control: sequential distance {} must be below the stride distance {}",
                    tc.seq_distance, tc.stride_distance
                )));
            }
        }
        Ok(())
    }
}

/// eFIND-specific counters (beside [`StoreStats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EfindStats {
    /// Temporal control on writes chose Seq.
    pub tc_seq: u64,
    /// Temporal control on writes chose Str.
    pub tc_str: u64,
    /// Temporal control on writes chose Seq ∪ Str.
    pub tc_both: u64,
    /// Temporal control on writes fell back to the input.
    pub tc_fallback: u64,
    /// Flushed pages pre-cached into the read buffer because they were in RQ.
    pub precached: u64,
    /// Peak bytes of the write buffer.
    pub peak_write_buffer_bytes: u64,
}

#[derive(Debug)]
struct Inner {
    rb: Cache<Arc<Node>>,
    rq: VecDeque<PageId>,
    wq: VecDeque<PageId>,
    stats: StoreStats,
    estats: EfindStats,
}

/// The eFIND node store. See the module documentation.
pub struct EfindStore {
    device: Arc<dyn PageDevice>,
    config: EfindConfig,
    page_size: usize,
    max_entries: usize,
    read_budget: usize,
    write_budget: usize,
    alloc: PageAllocator,
    meta: TreeMeta,
    lsn: u64,
    ops: OpBracket,
    wb: WriteBuffer,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for EfindStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EfindStore")
            .field("device", &self.device.describe())
            .field("config", &self.config)
            .field("meta", &self.meta)
            .field("buffered_pages", &self.wb.len())
            .finish_non_exhaustive()
    }
}

/// The header page of an eFIND store (no user blob).
const FORMAT: Format = Format {
    magic: *b"GFEFIND\0",
    user_meta: false,
    blank: "page 0 is blank: the device holds no eFIND store",
    bad_magic: "page 0 is not an eFIND store header (bad magic)",
};

pub(crate) fn meta_of(node: &Node) -> EntryMeta {
    EntryMeta {
        height: node.level,
        size: node_bytes(node),
    }
}

impl EfindStore {
    /// Formats `device` as an empty store (writes and syncs page 0).
    pub fn create(device: Arc<dyn PageDevice>, config: EfindConfig) -> Result<Self> {
        let alloc = PageAllocator::new(1, device.capacity())?;
        let store = Self::assemble(device, config, alloc, TreeMeta::default(), 0)?;
        store.write_header()?;
        store.device.sync()?;
        Ok(store)
    }

    /// Opens a store formatted by [`create`](Self::create) and checkpointed.
    pub fn open(device: Arc<dyn PageDevice>, config: EfindConfig) -> Result<Self> {
        let hdr = Header::read(&FORMAT, device.as_ref())?;
        if hdr.with_payload != config.with_payload {
            return Err(Error::invalid(
                "the store was created with another entry-payload setting",
            ));
        }
        let alloc = PageAllocator::restore(1, hdr.next_page, hdr.free, device.capacity())
            .map_err(|e| Error::corrupt(Some(0), format!("free list: {e}")))?;
        Self::assemble(device, config, alloc, hdr.meta, hdr.lsn)
    }

    /// An empty store on a fresh in-memory device of `page_size`-byte pages.
    pub fn create_in_memory(page_size: usize, config: EfindConfig) -> Result<Self> {
        let device = crate::storage::mem::MemDevice::new(
            page_size,
            crate::storage::mem::MemDevice::DEFAULT_CAPACITY,
        )?;
        Self::create(Arc::new(device), config)
    }

    fn assemble(
        device: Arc<dyn PageDevice>,
        config: EfindConfig,
        alloc: PageAllocator,
        meta: TreeMeta,
        lsn: u64,
    ) -> Result<Self> {
        config.verify()?;
        let page_size = device.page_size();
        crate::units::check_page_size(page_size)?;
        FORMAT.check_page_size(page_size)?;
        let read_budget = config.buffer_bytes / 100 * usize::from(config.read_buffer_percent)
            + config.buffer_bytes % 100 * usize::from(config.read_buffer_percent) / 100;
        let write_budget = config.buffer_bytes - read_budget;
        Ok(EfindStore {
            max_entries: page::max_entries(page_size, config.with_payload),
            device,
            config,
            page_size,
            read_budget,
            write_budget,
            alloc,
            meta,
            lsn,
            ops: OpBracket {
                current: None,
                next: lsn.saturating_add(1),
            },
            wb: WriteBuffer::new(),
            inner: Mutex::new(Inner {
                rb: Cache::new(config.read_policy, read_budget),
                rq: VecDeque::new(),
                wq: VecDeque::new(),
                stats: StoreStats::default(),
                estats: EfindStats::default(),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> EfindConfig {
        self.config
    }

    /// M: the most entries a node of this store holds.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The device.
    pub fn device(&self) -> &Arc<dyn PageDevice> {
        &self.device
    }

    /// The page allocator.
    pub fn allocator(&self) -> &PageAllocator {
        &self.alloc
    }

    /// Bytes of buffered modifications (the write buffer's size).
    pub fn write_buffer_bytes(&self) -> usize {
        self.wb.bytes()
    }

    /// Pages with buffered modifications.
    pub fn buffered_pages(&self) -> usize {
        self.wb.len()
    }

    /// eFIND-specific counters.
    pub fn efind_stats(&self) -> EfindStats {
        self.lock().estats
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means another thread panicked; the state is consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_node_page(&self, id: PageId) -> Result<()> {
        if self.alloc.is_allocated(id) {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "no node at page {id}: {}",
            if id == 0 {
                "page 0 is the store header"
            } else {
                "no live node was created there"
            }
        )))
    }

    fn check_entries(&self, entries: &[Entry]) -> Result<()> {
        for e in entries {
            if !self.config.with_payload && e.payload != 0 {
                return Err(Error::invalid(format!(
                    "entry with key {} has payload {} but the store keeps no payloads",
                    e.key, e.payload
                )));
            }
        }
        Ok(())
    }

    fn check_len(&self, n: usize) -> Result<()> {
        if n > self.max_entries {
            return Err(Error::invalid(format!(
                "node with {n} entries does not fit a {}-byte page (at most {} entries)",
                self.page_size, self.max_entries
            )));
        }
        Ok(())
    }

    fn note_peak(&self) {
        let wb = self.wb.bytes() as u64;
        let mut inner = self.lock();
        let total = wb + inner.rb.used_bytes() as u64;
        inner.stats.peak_buffer_bytes = inner.stats.peak_buffer_bytes.max(total);
        inner.estats.peak_write_buffer_bytes = inner.estats.peak_write_buffer_bytes.max(wb);
    }

    fn write_header(&self) -> Result<()> {
        Header {
            page_size: self.page_size,
            with_payload: self.config.with_payload,
            meta: self.meta.clone(),
            next_page: self.alloc.next_page(),
            lsn: self.lsn,
            user_meta: Vec::new(),
            free: self.alloc.free_after_durable(),
        }
        .write(&FORMAT, self.device.as_ref())
    }
}

impl NodeStore for EfindStore {
    fn get(&self, id: PageId) -> Result<Arc<Node>> {
        self.check_node_page(id)?;
        self.lock().stats.node_gets += 1;
        self.retrieve(id, true)
    }

    fn begin_op(&mut self) -> Result<OpId> {
        let op = self.ops.begin()?;
        Ok(op)
    }

    fn create(&mut self, level: u16, mut entries: Vec<Entry>) -> Result<PageId> {
        entries.sort_unstable_by_key(|e| e.key);
        self.check_len(entries.len())?;
        self.check_entries(&entries)?;
        if entries
            .windows(2)
            .any(|w| matches!(w, [a, b] if a.key == b.key))
        {
            return Err(Error::invalid("duplicate entry key in a created node"));
        }
        let id = self.alloc.allocate()?;
        self.wb.create(id, level, &entries);
        self.lock().stats.nodes_created += 1;
        self.note_peak();
        Ok(id)
    }

    fn modify(&mut self, id: PageId, level: u16, changes: &[EntryChange]) -> Result<()> {
        self.check_node_page(id)?;
        let current = self.retrieve(id, false)?;
        if current.level != level {
            return Err(Error::invalid(format!(
                "node {id} is at level {} but was modified as a level-{level} node",
                current.level
            )));
        }
        let ups: Vec<Entry> = changes
            .iter()
            .filter_map(|c| match c {
                EntryChange::Upsert(e) => Some(*e),
                EntryChange::Remove(_) => None,
            })
            .collect();
        self.check_entries(&ups)?;
        let mut after: HashSet<u64> = current.entries.iter().map(|e| e.key).collect();
        for c in changes {
            match c {
                EntryChange::Upsert(e) => after.insert(e.key),
                EntryChange::Remove(k) => after.remove(k),
            };
        }
        self.check_len(after.len())?;
        self.wb.modify(id, level, changes);
        self.note_peak();
        Ok(())
    }

    fn delete(&mut self, id: PageId) -> Result<()> {
        self.check_node_page(id)?;
        let level = self.wb.get(id).map(|r| r.height).unwrap_or(0);
        self.alloc.release(id)?;
        self.wb.delete(id, level);
        let mut inner = self.lock();
        inner.rb.remove(id);
        inner.stats.nodes_deleted += 1;
        Ok(())
    }

    fn set_meta(&mut self, meta: TreeMeta) -> Result<()> {
        if let Some(root) = meta.root {
            self.check_node_page(root)
                .map_err(|e| Error::invalid(format!("tree root: {e}")))?;
        }
        self.meta = meta;
        Ok(())
    }

    fn commit_op(&mut self, op: OpId) -> Result<()> {
        self.ops.end(op)?;
        self.lsn = op;
        self.lock().stats.ops_committed += 1;
        while self.wb.bytes() > self.write_budget {
            if self.flush_once()? == 0 {
                break;
            }
        }
        Ok(())
    }

    fn meta(&self) -> TreeMeta {
        self.meta.clone()
    }

    fn checkpoint(&mut self) -> Result<()> {
        if let Some(op) = self.ops.current {
            return Err(Error::invalid(format!(
                "checkpoint while operation {op} is running: commit it first"
            )));
        }
        if !self.wb.is_empty() {
            let ids: Vec<PageId> = self.wb.iter().map(|(id, _)| id).collect();
            self.write_pages(&ids)?;
        }
        self.write_header()?;
        self.device.sync()?;
        self.alloc.make_durable();
        Ok(())
    }

    fn stats(&self) -> StoreStats {
        self.lock().stats
    }
}
