//! Node stores: how index nodes reach a device.
//!
//! The index algorithms (insert, split, reinsert, delete, condense, search)
//! are written once against [`NodeStore`] and run unchanged on every store.
//! Stores never know which index uses them.
//!
//! Contract (see `docs/architecture.md`):
//! - [`NodeStore::get`] returns the newest version of a node with entries in
//!   ascending key order, whatever the store;
//! - everything between [`NodeStore::begin_op`] and [`NodeStore::commit_op`]
//!   is one atomic operation; a store flushes only between operations;
//! - changes are entry-level ([`EntryChange`]), addressed by key;
//! - a bulk load ([`NodeStore::bulk_load`], [`bulk`]) writes a whole new
//!   tree to fresh pages outside operations and publishes it atomically.
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::metrics::{PhaseTimes, TemporalControlCounts};
use crate::page::{Entry, Node};
use crate::storage::PageId;
use crate::Result;

mod absorb;
pub mod accounting;
pub mod alloc;
#[cfg(test)]
mod batch_tests;
pub mod bulk;
#[cfg(test)]
mod bulk_tests;
pub(crate) mod checks;
#[cfg(test)]
mod clean_checkpoint_tests;
#[cfg(test)]
pub(crate) mod crash_harness;
pub mod efind;
pub mod fast;
pub(crate) mod header;
pub mod log;
#[cfg(test)]
mod log_placement_tests;
pub mod logged;
pub mod mem;
pub mod placement;
#[cfg(test)]
mod placement_review_tests;
pub mod plain;
pub(crate) mod overlap;
pub(crate) mod stored;

pub use bulk::BulkBuild;
internal! {
    pub use bulk::BulkSink;
}
#[cfg(feature = "internals")]
pub use fast::{FastConfig, FastStore};
pub use logged::{LoggedStore, StoreOpen};
#[cfg(feature = "internals")]
pub use plain::{PlainConfig, PlainStore};

/// Most flushing units one batched flush of a logged store writes behind
/// one log sync (first-image and compact formats with a durable mode; the
/// papers' per-change format flushes one unit at a time): bounds a batch's
/// work.
pub const FLUSH_BATCH_UNITS: u64 = 64;

/// Share of the write budget a batched flush brings the buffer down to, in
/// eighths: a batch frees a quarter of the budget, so the log is synced
/// once per quarter of the budget flushed, not once per flushing unit.
/// (Seven eighths until session 24; six halves the syncs, and with them
/// the padding of the log's last page at every sync, and at 512 KiB wrote
/// 4 % fewer bytes in all: docs/benchmarks.md, "Entry references".)
pub const FLUSH_BATCH_LOW_WATER: usize = 6;

/// Identifier of one user operation (insert, delete, update) inside a store.
pub type OpId = u64;

internal! {
    /// One entry-level change of a node.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub enum EntryChange {
        /// Insert the entry, or replace the entry with the same key.
        Upsert(Entry),
        /// Remove the entry with this key (no-op if absent).
        Remove(u64),
    }
}

internal! {
    /// Tree metadata kept by the store and made durable like a node.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct TreeMeta {
        /// Page id of the root node (`None` for an empty tree that has no root yet).
        pub root: Option<PageId>,
        /// Number of levels (0 for an empty tree, 1 when the root is a leaf).
        pub height: u16,
        /// Number of records (leaf entries) in the tree.
        pub records: u64,
    }
}

impl TreeMeta {
    /// Refuses a store that already holds a tree (creating a tree on it
    /// would lose the one there); `what` names the tree being created.
    pub fn check_no_tree(&self, what: &str) -> Result<()> {
        if self.root.is_some() || self.records > 0 {
            return Err(crate::Error::invalid(format!(
                "the store already holds a tree; open it instead of creating {what}"
            )));
        }
        Ok(())
    }
}

/// Counters every store keeps (a part of [`crate::metrics`]' record).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoreStats {
    /// Nodes requested through `get`.
    pub node_gets: u64,
    /// `get` calls answered from memory (buffer hit).
    pub buffer_hits: u64,
    /// `get` calls that read the device.
    pub buffer_misses: u64,
    /// Node pages read from the device.
    pub node_reads: u64,
    /// Node pages written to the device.
    pub node_writes: u64,
    /// Nodes created.
    pub nodes_created: u64,
    /// Nodes deleted.
    pub nodes_deleted: u64,
    /// Flush events.
    pub flushes: u64,
    /// Nodes written by flushes.
    pub flushed_nodes: u64,
    /// Operations committed.
    pub ops_committed: u64,
    /// Peak bytes of memory used by buffers (per the shared accounting function).
    pub peak_buffer_bytes: u64,
    /// Log records appended (stores with a log).
    #[serde(default)]
    pub log_records: u64,
    /// Bytes of log records appended, framing included.
    #[serde(default)]
    pub log_bytes: u64,
    /// Log pages written (appends and compactions).
    #[serde(default)]
    pub log_pages_written: u64,
    /// Log compactions (restart at open excluded).
    #[serde(default)]
    pub compactions: u64,
    /// Log syncs (stores with a log).
    #[serde(default)]
    pub log_syncs: u64,
    /// Full page images logged before in-place writes (torn-write protection).
    #[serde(default)]
    pub page_images: u64,
    /// Bytes of those page images in the log, framing included.
    #[serde(default)]
    pub page_image_bytes: u64,
    /// Flushes forced by the log (its compaction could not free enough).
    #[serde(default)]
    pub forced_flushes: u64,
    /// eFIND temporal control (zero for other stores).
    #[serde(flatten)]
    pub temporal_control: TemporalControlCounts,
    /// Node pages read from the device, by node level (index 0 = leaves).
    #[serde(default)]
    pub node_reads_by_level: Vec<u64>,
    /// Node pages written to the device, by node level (index 0 = leaves).
    #[serde(default)]
    pub node_writes_by_level: Vec<u64>,
    /// Time by phase in the store: node reads and writes, flushes, log
    /// appends and syncs, log compaction, recovery at open.
    #[serde(default)]
    pub times: PhaseTimes,
}

impl StoreStats {
    /// Counts a node page read from the device at `level`.
    pub fn record_node_read(&mut self, level: u16) {
        self.node_reads += 1;
        crate::metrics::bump_level(&mut self.node_reads_by_level, level);
    }

    /// Counts node pages written to the device at `levels` (one per page).
    pub fn record_node_writes(&mut self, levels: impl IntoIterator<Item = u16>) {
        for level in levels {
            self.node_writes += 1;
            crate::metrics::bump_level(&mut self.node_writes_by_level, level);
        }
    }

    /// The counters of `self` minus those of `before` (an earlier snapshot
    /// of the same store): every counter and time is differenced, the
    /// buffer peak stays `self`'s: the peak since the store was opened, or
    /// since its last `NodeStore::restart_buffer_peak` (which a measured
    /// step calls at its start, so that the peak is the step's own).
    pub fn since(&self, before: &StoreStats) -> StoreStats {
        let levels = |a: &[u64], b: &[u64]| -> Vec<u64> {
            a.iter()
                .enumerate()
                .map(|(i, v)| v.saturating_sub(b.get(i).copied().unwrap_or(0)))
                .collect()
        };
        let d = |a: u64, b: u64| a.saturating_sub(b);
        StoreStats {
            node_gets: d(self.node_gets, before.node_gets),
            buffer_hits: d(self.buffer_hits, before.buffer_hits),
            buffer_misses: d(self.buffer_misses, before.buffer_misses),
            node_reads: d(self.node_reads, before.node_reads),
            node_writes: d(self.node_writes, before.node_writes),
            nodes_created: d(self.nodes_created, before.nodes_created),
            nodes_deleted: d(self.nodes_deleted, before.nodes_deleted),
            flushes: d(self.flushes, before.flushes),
            flushed_nodes: d(self.flushed_nodes, before.flushed_nodes),
            ops_committed: d(self.ops_committed, before.ops_committed),
            peak_buffer_bytes: self.peak_buffer_bytes,
            log_records: d(self.log_records, before.log_records),
            log_bytes: d(self.log_bytes, before.log_bytes),
            log_pages_written: d(self.log_pages_written, before.log_pages_written),
            compactions: d(self.compactions, before.compactions),
            log_syncs: d(self.log_syncs, before.log_syncs),
            page_images: d(self.page_images, before.page_images),
            page_image_bytes: d(self.page_image_bytes, before.page_image_bytes),
            forced_flushes: d(self.forced_flushes, before.forced_flushes),
            temporal_control: self.temporal_control.since(&before.temporal_control),
            node_reads_by_level: levels(&self.node_reads_by_level, &before.node_reads_by_level),
            node_writes_by_level: levels(&self.node_writes_by_level, &before.node_writes_by_level),
            times: self.times.since(&before.times),
        }
    }
}

internal! {
    /// How nodes reach the device. See the module documentation for the contract.
    pub trait NodeStore: Send + Sync {
        /// The newest version of node `id`; many readers at once.
        fn get(&self, id: PageId) -> Result<Arc<Node>>;
        /// The newest versions of nodes `ids` (in that order): what
        /// [`get`](Self::get) returns for each, with the device pages that are
        /// not in memory read as one batch where the store can (Fevgas' thesis:
        /// an SSD reaches its speed only with many reads in flight). The default
        /// calls `get` once per id; stores that read pages in place override it.
        fn get_batch(&self, ids: &[PageId]) -> Result<Vec<Arc<Node>>> {
            ids.iter().map(|&id| self.get(id)).collect()
        }
        /// A hint that nodes `ids` are about to be read and changed (a batch
        /// of updates): the store may load what it holds of them in memory
        /// into the processor's caches now, one node after the other, so
        /// that their memory latencies overlap instead of stalling each
        /// update in turn. Nothing is read from the device, and no answer,
        /// counter or buffer order changes. By default nothing.
        fn warm(&self, ids: &[PageId]) {
            let _ = ids;
        }
        /// Starts one user operation.
        fn begin_op(&mut self) -> Result<OpId>;
        /// Creates a node and returns its page id (from the free list, else the end of the device).
        fn create(&mut self, level: u16, entries: Vec<Entry>) -> Result<PageId>;
        /// Applies entry-level changes to node `id` (at `level`).
        fn modify(&mut self, id: PageId, level: u16, changes: &[EntryChange]) -> Result<()>;
        /// Deletes node `id`; its page returns to the free list once the deletion is durable.
        fn delete(&mut self, id: PageId) -> Result<()>;
        /// Replaces the tree metadata.
        fn set_meta(&mut self, meta: TreeMeta) -> Result<()>;
        /// Ends operation `op`; acknowledged per the durability mode.
        fn commit_op(&mut self, op: OpId) -> Result<()>;
        /// The current tree metadata.
        fn meta(&self) -> TreeMeta;
        /// Flushes everything and syncs: the index needs no recovery after it.
        fn checkpoint(&mut self) -> Result<()>;
        /// Bulk load (see [`bulk`]): on a store holding no tree, between
        /// operations, runs `build`, which stores the nodes of a new tree
        /// through the [`BulkSink`] it is given and returns the tree's metadata;
        /// then publishes that tree atomically and durably (a crash leaves the
        /// empty tree or the whole new one). When `build` fails nothing is
        /// published and the store is as before. The default stores each node
        /// as an operation ([`bulk::through_operations`]); stores with a device
        /// write fresh pages in large batches with no log record and two syncs.
        fn bulk_load(&mut self, build: BulkBuild<'_>) -> Result<()> {
            bulk::through_operations(self, build)
        }
        /// Counters since the store was opened (the buffer peak: since
        /// the last [`restart_buffer_peak`](Self::restart_buffer_peak)).
        fn stats(&self) -> StoreStats;
        /// Restarts the buffer peak ([`StoreStats::peak_buffer_bytes`]) at
        /// the bytes the store's buffers hold now, so that
        /// [`stats`](Self::stats) reports the peak since this call (what one
        /// measured step used) instead of since the store was opened. No
        /// other counter changes. By default nothing (a store without
        /// buffers, or a test double).
        fn restart_buffer_peak(&mut self) {}
        /// Pages holding nodes now (allocated and not freed, whatever was
        /// done since the store was opened), from the store's page allocator
        /// without reading a node; `None` for a store without pages (the
        /// memory store).
        fn nodes_in_use(&self) -> Option<u64> {
            None
        }
        /// The newest committed operation, for stores that log their operations
        /// (`None` for the others).
        fn last_committed_op(&self) -> Option<OpId> {
            None
        }
        /// The newest operation whose commit is durable: it and every earlier
        /// operation survive a crash. `None` for stores without a log, whose
        /// operations are durable only after [`checkpoint`](Self::checkpoint).
        fn durable_op(&self) -> Option<OpId> {
            None
        }
        /// When operations become durable, for stores that log them (`None` for
        /// the others, whose operations are durable only at checkpoints).
        fn durability(&self) -> Option<log::Durability> {
            None
        }
        /// Changes when operations become durable, from the next one on (not
        /// persisted: a reopened store takes its configured mode). Stores
        /// without a log ignore it.
        fn set_durability(&mut self, _durability: log::Durability) -> Result<()> {
            Ok(())
        }
        /// Makes every committed operation durable the cheapest way the store
        /// has: a store with a log syncs it (the held group included) and
        /// returns `true`, leaving dirty nodes to its flushing policy; a store
        /// without one does nothing and returns `false` (the caller
        /// checkpoints instead).
        fn sync_committed(&mut self) -> Result<bool> {
            Ok(false)
        }
        /// Stops logging operations until the next
        /// [`checkpoint`](Self::checkpoint), which becomes their only
        /// durability point: nodes are written when they leave memory and at
        /// the checkpoint, with no record per operation, and a crash before
        /// the checkpoint returns the store to the previous one (as a build
        /// that publishes at its end wants; see the eFIND store's
        /// implementation). Returns whether the store entered the mode: `false`
        /// for stores that have no such mode, or cannot enter it now (eFIND:
        /// changes since the last checkpoint, the papers' per-change log or
        /// durability `none`). Only between operations.
        fn begin_unlogged(&mut self) -> Result<bool> {
            Ok(false)
        }
        /// The store's side of a front end's frames in its log (see
        /// [`log::client`]): stage frames for the next operation, name the
        /// front end's generation at the next checkpoint, take what restart
        /// found. `None` for stores whose log holds no such frames (the plain
        /// store, logs of superblock versions before 8).
        fn client_log(&mut self) -> Option<&mut log::ClientLog> {
            None
        }
        /// [`client_log`](Self::client_log) for reading.
        fn client_log_ref(&self) -> Option<&log::ClientLog> {
            None
        }
    }
}

/// The operation bracket shared by the stores: which operation is running
/// and which id comes next, with the errors for misnested calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OpBracket {
    /// The running operation, if any.
    pub(crate) current: Option<OpId>,
    /// The id the next operation gets.
    pub(crate) next: OpId,
}

/// Refuses `what` while operation `running` runs (see
/// [`OpBracket::check_idle`]).
pub(crate) fn check_idle(running: Option<OpId>, what: &str) -> Result<()> {
    match running {
        Some(op) => Err(crate::Error::invalid(format!(
            "{what} while operation {op} is running: commit it first"
        ))),
        None => Ok(()),
    }
}

impl OpBracket {
    /// Starts an operation; an error while another one runs.
    pub(crate) fn begin(&mut self) -> Result<OpId> {
        if let Some(op) = self.current {
            return Err(crate::Error::invalid(format!(
                "operation {op} is still running: commit it before beginning another"
            )));
        }
        let op = self.next;
        self.next = self.next.saturating_add(1);
        self.current = Some(op);
        Ok(op)
    }

    /// Refuses `what` (a checkpoint, a bulk load, ...) while an operation
    /// runs: what it would make durable must not hold half an operation.
    pub(crate) fn check_idle(&self, what: &str) -> Result<()> {
        check_idle(self.current, what)
    }

    /// Ends operation `op`; an error if it is not the running one.
    pub(crate) fn end(&mut self, op: OpId) -> Result<()> {
        match self.current {
            Some(cur) if cur == op => {
                self.current = None;
                Ok(())
            }
            Some(cur) => Err(crate::Error::invalid(format!(
                "commit of operation {op} while operation {cur} is running"
            ))),
            None => Err(crate::Error::invalid(format!(
                "commit of operation {op} but no operation is running"
            ))),
        }
    }
}

/// Reads one word of every entry of `nodes` (the keys: one per entry, so
/// every cache line of the entries is loaded), for [`NodeStore::warm`];
/// returns their xor so that the reads are not optimised away.
pub(crate) fn touch_entries<'a>(nodes: impl Iterator<Item = &'a Node>) -> u64 {
    let mut seen = 0u64;
    for node in nodes {
        seen ^= node.entries.iter().fold(0u64, |acc, e| acc ^ e.key);
    }
    std::hint::black_box(seen)
}

/// A boxed store is a store: the index front end holds whichever store the
/// manifest names as `Box<dyn NodeStore>`.
impl NodeStore for Box<dyn NodeStore> {
    fn get(&self, id: PageId) -> Result<Arc<Node>> {
        (**self).get(id)
    }
    fn get_batch(&self, ids: &[PageId]) -> Result<Vec<Arc<Node>>> {
        (**self).get_batch(ids)
    }
    fn warm(&self, ids: &[PageId]) {
        (**self).warm(ids)
    }
    fn begin_op(&mut self) -> Result<OpId> {
        (**self).begin_op()
    }
    fn create(&mut self, level: u16, entries: Vec<Entry>) -> Result<PageId> {
        (**self).create(level, entries)
    }
    fn modify(&mut self, id: PageId, level: u16, changes: &[EntryChange]) -> Result<()> {
        (**self).modify(id, level, changes)
    }
    fn delete(&mut self, id: PageId) -> Result<()> {
        (**self).delete(id)
    }
    fn set_meta(&mut self, meta: TreeMeta) -> Result<()> {
        (**self).set_meta(meta)
    }
    fn commit_op(&mut self, op: OpId) -> Result<()> {
        (**self).commit_op(op)
    }
    fn meta(&self) -> TreeMeta {
        (**self).meta()
    }
    fn checkpoint(&mut self) -> Result<()> {
        (**self).checkpoint()
    }
    fn bulk_load(&mut self, build: BulkBuild<'_>) -> Result<()> {
        (**self).bulk_load(build)
    }
    fn stats(&self) -> StoreStats {
        (**self).stats()
    }
    fn restart_buffer_peak(&mut self) {
        (**self).restart_buffer_peak()
    }
    fn nodes_in_use(&self) -> Option<u64> {
        (**self).nodes_in_use()
    }
    fn last_committed_op(&self) -> Option<OpId> {
        (**self).last_committed_op()
    }
    fn durable_op(&self) -> Option<OpId> {
        (**self).durable_op()
    }
    fn durability(&self) -> Option<log::Durability> {
        (**self).durability()
    }
    fn set_durability(&mut self, durability: log::Durability) -> Result<()> {
        (**self).set_durability(durability)
    }
    fn sync_committed(&mut self) -> Result<bool> {
        (**self).sync_committed()
    }
    fn begin_unlogged(&mut self) -> Result<bool> {
        (**self).begin_unlogged()
    }
    fn client_log(&mut self) -> Option<&mut log::ClientLog> {
        (**self).client_log()
    }
    fn client_log_ref(&self) -> Option<&log::ClientLog> {
        (**self).client_log_ref()
    }
}
