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
use super::{EntryChange, NodeStore, OpId, StoreStats, TreeMeta};
use crate::cache::{Cache, EntryMeta, PolicyKind};
use crate::page::{self, Entry, Node, PageKind};
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
    next_op: OpId,
    current_op: Option<OpId>,
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

/// Header page magic.
const HEADER_MAGIC: [u8; 8] = *b"GFEFIND\0";
/// Version of the header page body.
const HEADER_VERSION: u16 = 1;
/// Bytes of the fixed part of the header body.
const HEADER_FIXED: usize = 8 + 2 + 1 + 1 + 4 + 8 + 2 + 8 + 8 + 8 + 8 + 4 + 8;
/// Bytes of the fixed part of a free-list chain page body.
const CHAIN_FIXED: usize = 8 + 4;
/// Encoding of "no root".
const NO_ROOT: u64 = u64::MAX;

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
        let ps = device.page_size();
        let mut buf = vec![0u8; ps];
        device.read(0, &mut buf)?;
        if page::is_blank(&buf) {
            return Err(Error::corrupt(
                Some(0),
                "page 0 is blank: the device holds no eFIND store",
            ));
        }
        let (h, body) = page::decode_raw(&buf, Some(0))?;
        if h.kind != PageKind::Header {
            return Err(Error::corrupt(
                Some(0),
                format!("page 0 is a {:?} page, not a store header", h.kind),
            ));
        }
        let mut r = Reader::new(body, 0);
        if r.bytes(8)? != HEADER_MAGIC {
            return Err(Error::corrupt(
                Some(0),
                "page 0 is not an eFIND store header (bad magic)",
            ));
        }
        let version = r.u16()?;
        if version > HEADER_VERSION {
            return Err(Error::UnsupportedVersion {
                found: version,
                supported: HEADER_VERSION,
            });
        }
        let with_payload = r.u8()? == 1;
        r.u8()?;
        let page_size = r.u32()? as usize;
        let root = r.u64()?;
        let height = r.u16()?;
        let records = r.u64()?;
        let next_page = r.u64()?;
        let lsn = r.u64()?;
        let free_total = r.u64()?;
        let free_here = r.u32()?;
        let chain_head = r.u64()?;
        if page_size != ps {
            return Err(Error::corrupt(Some(0), format!(
                "the store was created with {page_size}-byte pages but the device has {ps}-byte pages"
            )));
        }
        if with_payload != config.with_payload {
            return Err(Error::invalid(
                "the store was created with another entry-payload setting",
            ));
        }
        let mut free = Vec::new();
        for _ in 0..free_here {
            free.push(r.u64()?);
        }
        let mut chain = chain_head;
        let mut seen = HashSet::new();
        while chain != 0 {
            if !seen.insert(chain) || chain >= next_page {
                return Err(Error::corrupt(
                    Some(chain),
                    "free-list chain loops or points outside the allocated pages",
                ));
            }
            device.read(chain, &mut buf)?;
            let (h, body) = page::decode_raw(&buf, Some(chain))?;
            if h.kind != PageKind::Free {
                return Err(Error::corrupt(
                    Some(chain),
                    format!("expected a free-list page, found a {:?} page", h.kind),
                ));
            }
            let mut r = Reader::new(body, chain);
            let next = r.u64()?;
            let n = r.u32()?;
            for _ in 0..n {
                free.push(r.u64()?);
            }
            chain = next;
        }
        if free.len() as u64 != free_total {
            return Err(Error::corrupt(
                Some(0),
                format!(
                    "the header announces {free_total} free pages but the free list holds {}",
                    free.len()
                ),
            ));
        }
        let alloc = PageAllocator::restore(1, next_page, free, device.capacity())
            .map_err(|e| Error::corrupt(Some(0), format!("free list: {e}")))?;
        let meta = TreeMeta {
            root: (root != NO_ROOT).then_some(root),
            height,
            records,
        };
        Self::assemble(device, config, alloc, meta, lsn)
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
        if HEADER_FIXED + 8 > page::max_raw_body(page_size) {
            return Err(Error::invalid(format!(
                "{page_size}-byte pages are too small for the store header"
            )));
        }
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
            next_op: lsn.saturating_add(1),
            current_op: None,
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
        let ps = self.page_size;
        let free = self.alloc.free_after_durable();
        let room = page::max_raw_body(ps);
        let header_slots = room.saturating_sub(HEADER_FIXED) / 8;
        let chain_slots = room.saturating_sub(CHAIN_FIXED) / 8;
        let (in_header, rest) = free.split_at(free.len().min(header_slots));
        let chunks: Vec<&[u64]> = rest.chunks(chain_slots.max(1)).collect();
        let chain_pages: Vec<PageId> = free.iter().rev().take(chunks.len()).copied().collect();
        let mut b = Vec::with_capacity(HEADER_FIXED + 8 * in_header.len());
        b.extend_from_slice(&HEADER_MAGIC);
        b.extend_from_slice(&HEADER_VERSION.to_le_bytes());
        b.push(u8::from(self.config.with_payload));
        b.push(0);
        b.extend_from_slice(&(ps as u32).to_le_bytes());
        b.extend_from_slice(&self.meta.root.unwrap_or(NO_ROOT).to_le_bytes());
        b.extend_from_slice(&self.meta.height.to_le_bytes());
        b.extend_from_slice(&self.meta.records.to_le_bytes());
        b.extend_from_slice(&self.alloc.next_page().to_le_bytes());
        b.extend_from_slice(&self.lsn.to_le_bytes());
        b.extend_from_slice(&(free.len() as u64).to_le_bytes());
        b.extend_from_slice(&(in_header.len() as u32).to_le_bytes());
        b.extend_from_slice(&chain_pages.first().copied().unwrap_or(0).to_le_bytes());
        for id in in_header {
            b.extend_from_slice(&id.to_le_bytes());
        }
        let mut pages = vec![0u64];
        let mut data = vec![0u8; ps * (1 + chunks.len())];
        let (first, tail) = data.split_at_mut(ps);
        page::encode_raw(PageKind::Header, self.lsn, &b, first)?;
        for (i, (ids, chunk)) in chunks.iter().zip(tail.chunks_exact_mut(ps)).enumerate() {
            let next = chain_pages.get(i + 1).copied().unwrap_or(0);
            let mut c = Vec::with_capacity(CHAIN_FIXED + ids.len() * 8);
            c.extend_from_slice(&next.to_le_bytes());
            c.extend_from_slice(&(ids.len() as u32).to_le_bytes());
            for id in *ids {
                c.extend_from_slice(&id.to_le_bytes());
            }
            page::encode_raw(PageKind::Free, self.lsn, &c, chunk)?;
            pages.push(chain_pages.get(i).copied().unwrap_or(0));
        }
        self.device.write_batch(&pages, &data)
    }
}

impl NodeStore for EfindStore {
    fn get(&self, id: PageId) -> Result<Arc<Node>> {
        self.check_node_page(id)?;
        self.lock().stats.node_gets += 1;
        self.retrieve(id, true)
    }

    fn begin_op(&mut self) -> Result<OpId> {
        if let Some(op) = self.current_op {
            return Err(Error::invalid(format!(
                "operation {op} is still running: commit it before beginning another"
            )));
        }
        let op = self.next_op;
        self.next_op = self.next_op.saturating_add(1);
        self.current_op = Some(op);
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
        match self.current_op {
            Some(cur) if cur == op => {}
            Some(cur) => {
                return Err(Error::invalid(format!(
                    "commit of operation {op} while operation {cur} is running"
                )))
            }
            None => {
                return Err(Error::invalid(format!(
                    "commit of operation {op} but no operation is running"
                )))
            }
        }
        self.current_op = None;
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
        if let Some(op) = self.current_op {
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

struct Reader<'a> {
    buf: &'a [u8],
    off: usize,
    page: PageId,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], page: PageId) -> Self {
        Reader { buf, off: 0, page }
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self
            .off
            .checked_add(n)
            .and_then(|e| self.buf.get(self.off..e))
            .ok_or_else(|| Error::corrupt(Some(self.page), "store metadata page is truncated"))?;
        self.off += n;
        Ok(s)
    }

    fn arr<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(u8::from_le_bytes(self.arr()?))
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.arr()?))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.arr()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
}
