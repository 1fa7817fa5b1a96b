//! `PlainStore`: the **disk-based baseline** of the seeds' experiments.
//!
//! Nodes are written in place, one node per page, as a classic disk-based
//! R-tree does (the configurations the papers call "R-tree" and "R*-tree",
//! against which FAST and eFIND are measured). An optional in-memory node
//! buffer of a size in bytes (charged by
//! [`accounting::node_bytes`](super::accounting::node_bytes)) with a
//! replacement policy from [`crate::cache`] keeps nodes between uses:
//! - buffer 0: no buffer. Every `get` reads the device; nodes changed by an
//!   operation are held until [`commit_op`](NodeStore::commit_op) and written
//!   through there;
//! - buffer > 0: a write-back buffer. Dirty nodes are written when they are
//!   evicted and at [`checkpoint`](NodeStore::checkpoint).
//!
//! Writes happen only between operations (no-steal): inside an operation the
//! buffer may overshoot its size; `commit_op` evicts back to it.
//!
//! **Page 0** is the header page ([`PageKind::Header`](crate::page::PageKind::Header)): format version, page
//! size, payload flag, [`TreeMeta`], an opaque user blob (the index layer's
//! parameters, [`PlainStore::set_user_meta`]), the LSN, the next page id and
//! the free list. A free list longer than what page 0 holds continues in a
//! chain of [`PageKind::Free`](crate::page::PageKind::Free) pages, which are themselves free pages (a free
//! page holds nothing else, so it can hold the list; on open the chain pages
//! return to the free list). The header is written at `checkpoint` (and
//! at `create`).
//!
//! Durability: none beyond `checkpoint`. As in the papers' baseline there is
//! no log: on its own, a crash loses everything since the last checkpoint
//! and a crash during a checkpoint (or after a write-back eviction) can
//! leave the pages inconsistent with the header. An index directory on a
//! file wraps the store's device in a rollback journal
//! ([`crate::storage::journal`]) committed after each checkpoint, which
//! returns the pages to the last checkpoint after any crash; the papers'
//! in-place mode (`journal = off`) does not. Deleted pages are reused only
//! after the checkpoint that records their deletion ([`PageAllocator`]).
//!
//! Errors: the first failed device write or sync (an I/O error, a full
//! device) is sticky: the store refuses every later change with an error
//! naming the first failure, keeps answering `get` from its buffer (the
//! nodes that could not be written stay there), and can be reopened from its
//! last checkpoint.
//!
//! Concurrency: `get(&self)` is safe from many threads. The buffer sits
//! behind one mutex; device reads on a miss happen outside it, and write-back
//! of dirty victims happens under it (so no reader can see a stale page).
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::accounting::node_bytes;
use super::alloc::PageAllocator;
use super::bulk::{self, BulkBuild, PageFormat};
use super::checks;
use super::header::{Format, Header};
use super::overlap::read_decoded_timed;
use super::placement::Placement;
use super::{EntryChange, NodeStore, OpBracket, OpId, StoreStats, TreeMeta};
use crate::cache::{Cache, EntryMeta, PolicyKind};
use crate::geom::Rect;
use crate::metrics::{Phase, PhaseTimes, Stopwatch};
use crate::page::{self, Entry, Node};
use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

/// Configuration of a [`PlainStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlainConfig {
    /// Node buffer size in bytes (0 = no buffer: write-through at commit).
    pub buffer_bytes: usize,
    /// Replacement policy of the buffer.
    pub policy: PolicyKind,
    /// Whether node pages carry the entries' payloads (the Hilbert R-tree needs them).
    pub with_payload: bool,
}

impl Default for PlainConfig {
    /// 512 KiB, simplified 2Q, no payloads.
    fn default() -> Self {
        PlainConfig {
            buffer_bytes: 512 * 1024,
            policy: PolicyKind::S2q,
            with_payload: false,
        }
    }
}

/// The header page of a plain store.
const FORMAT: Format = Format {
    magic: *b"GFPLAIN\0",
    user_meta: true,
    blank: "page 0 is blank: the device holds no plain store (create one first)",
    bad_magic: "page 0 is not a plain-store header (bad magic)",
};

/// A buffered node.
#[derive(Debug, Clone)]
struct Slot {
    node: Arc<Node>,
    dirty: bool,
}

#[derive(Debug)]
struct Inner {
    cache: Cache<Slot>,
    in_op: bool,
    stats: StoreStats,
    /// The first failed device write or sync: the store takes no more changes.
    failure: Option<Failure>,
}

/// Why the store stopped taking changes (sticky, as redb's `CheckedBackend`).
#[derive(Debug, Clone)]
enum Failure {
    /// The device was full.
    Full(String),
    /// Any other write or sync failure.
    Io(String),
}

/// The disk-based node store (nodes in place, optional buffer). See the module documentation.
pub struct PlainStore {
    device: Arc<dyn PageDevice>,
    config: PlainConfig,
    page_size: usize,
    max_entries: usize,
    alloc: PageAllocator,
    meta: TreeMeta,
    user_meta: Vec<u8>,
    lsn: u64,
    ops: OpBracket,
    placement: Placement,
    /// The header as last made durable (`None`: unknown, after an open):
    /// a checkpoint that would write it again unchanged, with no dirty
    /// node, has nothing to do.
    durable_header: Option<Header>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for PlainStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainStore")
            .field("device", &self.device)
            .field("config", &self.config)
            .field("meta", &self.meta)
            .field("next_page", &self.alloc.next_page())
            .finish_non_exhaustive()
    }
}

impl PlainStore {
    /// Formats `device` as an empty store (writes and syncs page 0),
    /// overwriting whatever the device held.
    pub fn create(device: Arc<dyn PageDevice>, config: PlainConfig) -> Result<Self> {
        let alloc = PageAllocator::new(1, device.capacity())?;
        let mut store = Self::assemble(device, config, alloc, TreeMeta::default(), Vec::new(), 0)?;
        store.write_header()?;
        store.device.sync()?;
        store.durable_header = Some(store.header());
        Ok(store)
    }

    /// An empty store on a fresh [`MemDevice`](crate::storage::mem::MemDevice)
    /// of `page_size`-byte pages (for tests and `mem:` indexes).
    #[cfg(feature = "internals")]
    pub fn create_in_memory(page_size: usize, config: PlainConfig) -> Result<Self> {
        let device = crate::storage::mem::MemDevice::new(
            page_size,
            crate::storage::mem::MemDevice::DEFAULT_CAPACITY,
        )?;
        Self::create(Arc::new(device), config)
    }

    /// Opens a store formatted by [`create`](Self::create): reads page 0 and
    /// the free-list chain. A blank or corrupt header, another page size or
    /// another payload setting is an error.
    pub fn open(device: Arc<dyn PageDevice>, config: PlainConfig) -> Result<Self> {
        let hdr = Header::read(&FORMAT, device.as_ref())?;
        if hdr.with_payload != config.with_payload {
            return Err(Error::invalid(format!(
                "the store was created {} entry payloads but opened {} them",
                if hdr.with_payload { "with" } else { "without" },
                if config.with_payload {
                    "with"
                } else {
                    "without"
                },
            )));
        }
        let alloc = PageAllocator::restore(1, hdr.next_page, hdr.free, device.capacity())
            .map_err(|e| Error::corrupt(Some(0), format!("free list: {e}")))?;
        Self::assemble(device, config, alloc, hdr.meta, hdr.user_meta, hdr.lsn)
    }

    fn assemble(
        device: Arc<dyn PageDevice>,
        config: PlainConfig,
        alloc: PageAllocator,
        meta: TreeMeta,
        user_meta: Vec<u8>,
        lsn: u64,
    ) -> Result<Self> {
        let page_size = device.page_size();
        crate::units::check_page_size(page_size)?;
        let max_entries = page::max_entries(page_size, config.with_payload);
        FORMAT.check_page_size(page_size)?;
        Ok(PlainStore {
            device,
            config,
            page_size,
            max_entries,
            alloc,
            meta,
            user_meta,
            lsn,
            ops: OpBracket {
                current: None,
                next: lsn + 1,
            },
            placement: Placement::None,
            durable_header: None,
            inner: Mutex::new(Inner {
                cache: Cache::new(config.policy, config.buffer_bytes),
                in_op: false,
                stats: StoreStats::default(),
                failure: None,
            }),
        })
    }

    /// The configuration.
    #[cfg(test)]
    pub fn config(&self) -> PlainConfig {
        self.config
    }

    /// Hints every node written from now on to the tier `placement` gives
    /// its level ([`crate::store::placement`]; the sHR-tree on a hybrid device).
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// The device.
    #[cfg(test)]
    pub fn device(&self) -> &Arc<dyn PageDevice> {
        &self.device
    }

    /// M: the most entries a node of this store holds.
    #[cfg(test)]
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The page allocator (free list, next page).
    #[cfg(test)]
    pub fn allocator(&self) -> &PageAllocator {
        &self.alloc
    }

    /// The opaque blob the index layer keeps in the header page.
    #[cfg(test)]
    pub fn user_meta(&self) -> &[u8] {
        &self.user_meta
    }

    /// The largest user blob the header page holds.
    #[cfg(test)]
    pub fn max_user_meta(&self) -> usize {
        FORMAT.max_user_meta(self.page_size)
    }

    /// Replaces the user blob; durable at the next checkpoint. Too large for
    /// the header page is an error.
    #[cfg(test)]
    pub fn set_user_meta(&mut self, blob: Vec<u8>) -> Result<()> {
        let max = self.max_user_meta();
        if blob.len() > max {
            return Err(Error::invalid(format!(
                "user metadata of {} bytes does not fit the {}-byte header page (at most {max} bytes)",
                blob.len(),
                self.page_size
            )));
        }
        self.user_meta = blob;
        Ok(())
    }

    /// Bytes the buffer holds now (per the shared accounting function).
    #[cfg(test)]
    pub fn buffered_bytes(&self) -> usize {
        self.lock().cache.used_bytes()
    }

    /// Number of buffered nodes that are not yet on the device.
    #[cfg(test)]
    pub fn dirty_nodes(&self) -> usize {
        self.lock().cache.iter().filter(|(_, s)| s.dirty).count()
    }

    /// An error if an earlier write or sync failed: the store then takes no
    /// more changes (its buffer still answers `get`); reopen it from its last
    /// checkpoint.
    fn check_usable(&self) -> Result<()> {
        let failure = self.lock().failure.clone();
        match failure {
            None => Ok(()),
            Some(Failure::Full(msg)) => Err(Error::StoreFailed(format!(
                "the store takes no more changes after an earlier write failed (device full): {msg}"
            ))),
            Some(Failure::Io(msg)) => Err(Error::StoreFailed(format!(
                "the store takes no more changes after an earlier write or sync failed on {} \
                 (reopen it from its last checkpoint): {msg}",
                self.device.describe()
            ))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means another thread panicked; the state is consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_node_page(&self, id: PageId) -> Result<()> {
        if self.alloc.is_allocated(id) {
            return Ok(());
        }
        let why = if id == 0 {
            "page 0 is the store header".to_string()
        } else if self.alloc.is_pending(id) || self.alloc.free_pages().any(|p| p == id) {
            "the node was deleted".to_string()
        } else {
            format!(
                "no node was created there (nodes occupy pages 1..{})",
                self.alloc.next_page()
            )
        };
        Err(Error::invalid(format!("no node at page {id}: {why}")))
    }

    /// Checks that a node can be stored: fits a page, keys strictly
    /// ascending, rectangles valid, payloads allowed.
    fn check_node(&self, node: &Node) -> Result<()> {
        self.check_len(node.entries.len())?;
        let mut prev: Option<u64> = None;
        for e in &node.entries {
            if prev.is_some_and(|p| e.key <= p) {
                return Err(Error::invalid(format!(
                    "duplicate entry key {} in a node",
                    e.key
                )));
            }
            prev = Some(e.key);
            self.check_entry(e)?;
        }
        Ok(())
    }

    /// Checks one entry: rectangle valid (as [`Rect::new`] would accept it),
    /// payload allowed. The common valid case costs a few comparisons.
    #[inline]
    fn check_entry(&self, e: &Entry) -> Result<()> {
        let r = e.rect;
        let fine = |v: f64| v.is_finite() && v.abs() <= crate::geom::MAX_COORD;
        if !(fine(r.min_x())
            && fine(r.min_y())
            && fine(r.max_x())
            && fine(r.max_y())
            && r.min_x() <= r.max_x()
            && r.min_y() <= r.max_y())
        {
            // Rect::new names the problem.
            Rect::new(r.min_x(), r.min_y(), r.max_x(), r.max_y())
                .map_err(|err| Error::invalid(format!("entry with key {}: {err}", e.key)))?;
        }
        checks::check_payload(e, self.config.with_payload)
    }

    /// Checks that `n` entries fit a page.
    fn check_len(&self, n: usize) -> Result<()> {
        checks::check_len(
            n,
            self.max_entries,
            self.page_size,
            self.config.with_payload,
        )
    }

    /// Reads and decodes node `id` from the device (no buffer involved).
    /// Returns the time the read took (phase `read`), for the caller to
    /// count with the node's level ([`Self::note_read`]).
    fn read_node(&self, id: PageId) -> Result<(Node, PhaseTimes)> {
        let (node, t) = PhaseTimes::measure(Phase::Read, &*self.device, || {
            let mut buf = vec![0u8; self.page_size];
            self.device.read(id, &mut buf)?;
            decode_node_page(&buf, id)
        });
        Ok((node?, t))
    }

    /// Counts node pages read from the device at `levels`, which took `t`.
    fn note_read(stats: &mut StoreStats, levels: impl IntoIterator<Item = u16>, t: &PhaseTimes) {
        for level in levels {
            stats.record_node_read(level);
        }
        stats.times.add(t);
    }

    /// Node `id` from the buffer (counted as a get and a hit), or `None`
    /// (counted as a get and a miss).
    fn buffered(&self, id: PageId) -> Option<Arc<Node>> {
        let mut inner = self.lock();
        inner.stats.node_gets += 1;
        if let Some(slot) = inner.cache.get(id) {
            let node = Arc::clone(&slot.node);
            inner.stats.buffer_hits += 1;
            return Some(node);
        }
        inner.stats.buffer_misses += 1;
        None
    }

    /// Takes node `id` just read from the device into the buffer (when there
    /// is one) and returns the version readers see.
    /// `t`: the time of the read (counted with the node's level).
    fn adopt(&self, id: PageId, node: Node, t: &PhaseTimes) -> Arc<Node> {
        let node = Arc::new(node);
        let mut inner = self.lock();
        Self::note_read(&mut inner.stats, [node.level], t);
        if let Some(slot) = inner.cache.peek(id) {
            // Another reader buffered it meanwhile.
            return Arc::clone(&slot.node);
        }
        if self.config.buffer_bytes > 0 {
            let m = meta_of(&node);
            let slot = Slot {
                node: Arc::clone(&node),
                dirty: false,
            };
            inner.cache.insert_pinned(id, slot, m);
            note_peak(&mut inner);
            if !inner.in_op && inner.failure.is_none() {
                // A failed write-back is recorded (sticky) and reported by the
                // next change; the reader still gets its node.
                if let Err(e) = self.evict(&mut inner) {
                    tracing::warn!("plain store: write-back during a read failed: {e}");
                }
            }
        }
        node
    }

    /// Writes `nodes` (sorted by page id) in one batch and counts them as a flush.
    fn write_nodes(&self, inner: &mut Inner, mut nodes: Vec<(PageId, Arc<Node>)>) -> Result<()> {
        if nodes.is_empty() {
            return Ok(());
        }
        let flush = Stopwatch::start(self.device.sim_clock_ns());
        nodes.sort_by_key(|(id, _)| *id);
        let ids: Vec<PageId> = nodes.iter().map(|(id, _)| *id).collect();
        self.placement
            .hint(&*self.device, nodes.iter().map(|(id, n)| (*id, n.level)))
            .map_err(|e| note_failure(inner, e))?;
        let (written, t) = PhaseTimes::measure(Phase::Write, &*self.device, || {
            let ps = self.page_size;
            let mut data = vec![0u8; nodes.len() * ps];
            for ((_, node), chunk) in nodes.iter().zip(data.chunks_exact_mut(ps)) {
                page::encode_node(node, self.lsn, self.config.with_payload, chunk)?;
            }
            self.device.write_batch(&ids, &data)
        });
        written.map_err(|e| note_failure(inner, e))?;
        let n = nodes.len() as u64;
        inner
            .stats
            .record_node_writes(nodes.iter().map(|(_, node)| node.level));
        inner.stats.times.add(&t);
        flush.stop(
            Phase::Flush,
            self.device.sim_clock_ns(),
            &mut inner.stats.times,
        );
        inner.stats.flushes += 1;
        inner.stats.flushed_nodes += n;
        Ok(())
    }

    /// Evicts the buffer down to its budget, writing the dirty victims. On a
    /// write error the victims return to the buffer, still dirty.
    fn evict(&self, inner: &mut Inner) -> Result<()> {
        let victims = inner.cache.evict_to_budget();
        let dirty: Vec<(PageId, Arc<Node>)> = victims
            .iter()
            .filter(|(_, s)| s.dirty)
            .map(|(id, s)| (*id, Arc::clone(&s.node)))
            .collect();
        if let Err(e) = self.write_nodes(inner, dirty) {
            for (id, slot) in victims.into_iter().filter(|(_, s)| s.dirty) {
                let m = meta_of(&slot.node);
                inner.cache.insert_pinned(id, slot, m);
            }
            note_peak(inner);
            return Err(e);
        }
        Ok(())
    }

    /// The current version of node `id` for a change (buffer, else device).
    fn current(&self, inner: &mut Inner, id: PageId) -> Result<Arc<Node>> {
        if let Some(slot) = inner.cache.peek(id) {
            return Ok(Arc::clone(&slot.node));
        }
        let (node, t) = self.read_node(id)?;
        Self::note_read(&mut inner.stats, [node.level], &t);
        Ok(Arc::new(node))
    }

    /// Puts a changed node in the buffer (dirty, no eviction inside an operation).
    fn install(&self, inner: &mut Inner, id: PageId, node: Node) -> Result<()> {
        let m = meta_of(&node);
        inner.cache.insert_pinned(
            id,
            Slot {
                node: Arc::new(node),
                dirty: true,
            },
            m,
        );
        note_peak(inner);
        if !inner.in_op {
            self.evict(inner)?;
        }
        Ok(())
    }

    /// The header page's contents for the current state.
    fn header(&self) -> Header {
        Header {
            page_size: self.page_size,
            with_payload: self.config.with_payload,
            meta: self.meta.clone(),
            next_page: self.alloc.next_page(),
            lsn: self.lsn,
            user_meta: self.user_meta.clone(),
            free: self.alloc.free_after_durable(),
        }
    }

    fn write_header(&self) -> Result<()> {
        self.header().write(&FORMAT, self.device.as_ref())
    }
}

/// Decodes the node page `id` read from the device; a blank page is corrupt.
fn decode_node_page(buf: &[u8], id: PageId) -> Result<Node> {
    if page::is_blank(buf) {
        return Err(Error::corrupt(
            Some(id),
            "node page is blank (never written)",
        ));
    }
    let (_, node) = page::decode_node(buf, Some(id))?;
    Ok(node)
}

/// Records the first device write or sync failure and passes the error on.
fn note_failure(inner: &mut Inner, e: Error) -> Error {
    if inner.failure.is_none() {
        inner.failure = Some(match &e {
            Error::DeviceFull(_) => Failure::Full(e.to_string()),
            _ => Failure::Io(e.to_string()),
        });
    }
    e
}

fn meta_of(node: &Node) -> EntryMeta {
    EntryMeta {
        height: node.level,
        size: node_bytes(node),
    }
}

fn note_peak(inner: &mut Inner) {
    let used = inner.cache.used_bytes() as u64;
    if used > inner.stats.peak_buffer_bytes {
        inner.stats.peak_buffer_bytes = used;
    }
}

impl NodeStore for PlainStore {
    fn get(&self, id: PageId) -> Result<Arc<Node>> {
        self.check_node_page(id)?;
        if let Some(node) = self.buffered(id) {
            return Ok(node);
        }
        // Read outside the lock: a node absent from the buffer is current on the device.
        let (node, t) = self.read_node(id)?;
        Ok(self.adopt(id, node, &t))
    }

    /// The buffered nodes of `ids`, peeked (the buffer's order unchanged).
    fn warm(&self, ids: &[PageId]) {
        let inner = self.lock();
        let held = ids.iter().filter_map(|&id| inner.cache.peek(id));
        crate::store::touch_entries(held.map(|slot| &*slot.node));
    }

    /// Buffered nodes are served from memory; the others are read as one
    /// device batch (sorted page ids, each page once) and buffered like `get`.
    fn get_batch(&self, ids: &[PageId]) -> Result<Vec<Arc<Node>>> {
        let mut out: Vec<Option<Arc<Node>>> = Vec::with_capacity(ids.len());
        let mut missing: Vec<PageId> = Vec::new();
        for &id in ids {
            self.check_node_page(id)?;
            let node = self.buffered(id);
            if node.is_none() {
                missing.push(id);
            }
            out.push(node);
        }
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            let (nodes, t) = read_decoded_timed(&*self.device, &missing, decode_node_page)?;
            let mut read = std::collections::HashMap::with_capacity(missing.len());
            // The batch's time is counted once, with its first node.
            let mut time = Some(t);
            for (&id, node) in missing.iter().zip(nodes) {
                let t = time.take().unwrap_or_default();
                read.insert(id, self.adopt(id, node, &t));
            }
            for (slot, &id) in out.iter_mut().zip(ids) {
                if slot.is_none() {
                    *slot = read.get(&id).cloned();
                }
            }
        }
        out.into_iter()
            .zip(ids)
            .map(|(n, &id)| {
                n.ok_or_else(|| Error::corrupt(Some(id), "node missing from a batch read"))
            })
            .collect()
    }

    fn begin_op(&mut self) -> Result<OpId> {
        self.check_usable()?;
        let op = self.ops.begin()?;
        self.lock().in_op = true;
        Ok(op)
    }

    fn create(&mut self, level: u16, mut entries: Vec<Entry>) -> Result<PageId> {
        self.check_usable()?;
        // Duplicate keys are refused by `check_node`, so an unstable sort is exact.
        entries.sort_unstable_by_key(|e| e.key);
        let node = Node { level, entries };
        self.check_node(&node)?;
        let id = self.alloc.allocate()?;
        let inner = &mut *self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.stats.nodes_created += 1;
        self.install(inner, id, node)?;
        Ok(id)
    }

    fn modify(&mut self, id: PageId, level: u16, changes: &[EntryChange]) -> Result<()> {
        self.check_usable()?;
        self.check_node_page(id)?;
        let inner = &mut *self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.current(inner, id)?;
        if current.level != level {
            return Err(Error::invalid(format!(
                "node {id} is at level {} but was modified as a level-{level} node",
                current.level
            )));
        }
        // The current entries were checked when they were stored, and
        // `with_changes` keeps keys unique and ascending: only the new
        // entries and the length need checking.
        for c in changes {
            if let EntryChange::Upsert(e) = c {
                self.check_entry(e)?;
            }
        }
        let node = Node {
            level: current.level,
            entries: super::mem::with_changes(&current.entries, changes),
        };
        self.check_len(node.entries.len())?;
        self.install(inner, id, node)
    }

    fn delete(&mut self, id: PageId) -> Result<()> {
        self.check_usable()?;
        self.check_node_page(id)?;
        self.alloc.release(id)?;
        let mut inner = self.lock();
        inner.cache.remove(id);
        inner.stats.nodes_deleted += 1;
        Ok(())
    }

    fn set_meta(&mut self, meta: TreeMeta) -> Result<()> {
        self.check_usable()?;
        if let Some(root) = meta.root {
            self.check_node_page(root)
                .map_err(|e| Error::invalid(format!("tree root: {e}")))?;
        }
        self.meta = meta;
        Ok(())
    }

    fn commit_op(&mut self, op: OpId) -> Result<()> {
        self.ops.end(op)?;
        self.check_usable()?;
        self.lsn = op;
        let inner = &mut *self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.in_op = false;
        inner.stats.ops_committed += 1;
        self.evict(inner)
    }

    fn meta(&self) -> TreeMeta {
        self.meta.clone()
    }

    fn checkpoint(&mut self) -> Result<()> {
        self.check_usable()?;
        self.ops.check_idle("checkpoint")?;
        {
            let inner = &mut *self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let dirty: Vec<(PageId, Arc<Node>)> = inner
                .cache
                .iter()
                .filter(|(_, s)| s.dirty)
                .map(|(id, s)| (id, Arc::clone(&s.node)))
                .collect();
            if dirty.is_empty() && self.durable_header.as_ref() == Some(&self.header()) {
                // Nothing changed since the last checkpoint (after a bulk
                // load, say): everything is durable already.
                return Ok(());
            }
            self.write_nodes(inner, dirty)?;
            for (_, slot) in inner.cache.iter_mut() {
                slot.dirty = false;
            }
            self.evict(inner)?;
        }
        self.write_header()
            .and_then(|()| self.device.sync())
            .map_err(|e| note_failure(&mut self.lock(), e))?;
        self.alloc.make_durable();
        self.durable_header = Some(self.header());
        Ok(())
    }

    /// Writes the nodes to fresh pages in batches (no buffer), syncs, then
    /// publishes the tree with the checkpoint's header write and sync (see
    /// [`crate::store::bulk`]). Page 0 is rewritten in place: a crash that
    /// tears it leaves a store that opens with a corruption error naming
    /// page 0, never a mix of the two trees.
    fn bulk_load(&mut self, build: BulkBuild<'_>) -> Result<()> {
        self.check_usable()?;
        bulk::check_target(&self.meta, self.ops.current)?;
        let format = PageFormat {
            max_entries: self.max_entries,
            with_payload: self.config.with_payload,
            lsn: self.lsn,
            placement: self.placement,
        };
        let written = match bulk::write_tree(&*self.device, &mut self.alloc, format, build) {
            Ok(w) => w,
            Err(f) => {
                let inner = &mut *self.lock();
                return Err(if f.device {
                    note_failure(inner, f.error)
                } else {
                    f.error
                });
            }
        };
        {
            let inner = &mut *self.lock();
            written.count_in(&mut inner.stats);
            self.device.sync().map_err(|e| note_failure(inner, e))?;
        }
        self.meta = written.meta;
        self.checkpoint()
    }

    fn nodes_in_use(&self) -> Option<u64> {
        Some(self.alloc.allocated_count())
    }

    fn stats(&self) -> StoreStats {
        self.lock().stats.clone()
    }

    /// The peak restarts at the bytes the buffer holds now.
    fn restart_buffer_peak(&mut self) {
        let mut inner = self.lock();
        inner.stats.peak_buffer_bytes = inner.cache.used_bytes() as u64;
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod review_tests;
