//! `EfindStore`: the eFIND framework (seed `efind-framework.txt`, reading
//! guide `NOTES-efind.md`) as a node store, so that the R-tree, the R*-tree
//! and the Hilbert R-tree become flash-aware without changing their
//! algorithms, made crash-safe with the shared [log](crate::store::log).
//!
//! - **Write buffer** ([`write_buffer`]): entry-level modifications per page
//!   (NEW/MOD/DEL), sized in bytes of modifications; its budget is the total
//!   buffer minus the read-buffer share.
//! - **Read buffer**: `read_buffer_percent` of the total buffer, pages as
//!   stored on the device, managed by a [`crate::cache`] policy. With
//!   FESTIval's S2Q ([`PolicyKind::S2qFestival`]) RQ is the policy's `A1`:
//!   a page is cached at its second read while its id is in RQ, and a
//!   flushed page in RQ is pre-cached as Alg. 5 says.
//! - **RetrievePage** (Alg. 2, `retrieve.rs`) answers every `get`; a page read
//!   from the device has its checksum verified (a torn page is an error).
//! - **Flushing** (Alg. 3, [`flush`]): at `commit_op`, while the write buffer
//!   is over budget, one flushing unit of `flush_unit` pages chosen among the
//!   `flush_percent`% oldest buffered pages by the [`FlushPolicy`] is written
//!   as one device batch. Never inside an operation.
//! - **Temporal control** (Algs. 4–5): optional RQ/WQ FIFO queues.
//! - **Log** ([`durability`](self#durability), `logging.rs`, `restart.rs`).
//!
//! # Where things live
//!
//! Page 0 is the store's identity page, written once at creation: the
//! header format shared with [`PlainStore`](super::PlainStore) (magic
//! `GFEFINDL`) whose user blob names the index (a random 128-bit id, which
//! the log's superblock repeats: a log of another index is refused) and the
//! log's place: pages `first .. first + pages` either of the same device
//! (the last pages of its capacity; node pages are allocated below them) or
//! of a separate log device (`log.dat` next to `pages.dat`), given as a
//! [`LogPlacement`] (the placement API the FAST store shares; sized by
//! [`EfindConfig::log_placement`]) and checked against page 0 at open. Page 0 is never
//! rewritten, so no crash can tear it. Everything that changes — tree
//! metadata, next page id, free list, newest operation — is in the log:
//! META records per operation and a CHECKPOINT record at each checkpoint.
//!
//! # Tier placement
//!
//! With a [`Placement`] ([`EfindStore::with_placement`]) every batch of
//! nodes the store writes — a flushing unit, the chunks of a checkpoint, a
//! bulk load — is hinted to the device first, each node by its level (the
//! write buffer keeps the level of every buffered page). The log's pages
//! are never hinted: on a hybrid device they stay on the slow tier (or in
//! its fast range), so the fast tier holds nodes only — the log is written
//! sequentially and read only at restart, where the fast tier gains little.
//! Pages restored from their images at restart are written unhinted and
//! keep the tier the device's map gives them until their next flush.
//!
//! # Durability
//!
//! - **Operations.** The NEW/MOD/DEL/META records of an operation are kept
//!   in memory while it runs and appended with its id at `commit_op`,
//!   followed by its COMMIT; the [`Durability`] mode decides when the COMMIT
//!   is durable ([`EfindStore::durable_op`]). A failed operation leaves
//!   nothing in the log. With the compact format (the default) operations
//!   are logged in groups instead (`group.rs`): the net NEW/MOD/DEL of
//!   every page the group changed, one META and the COMMIT of its last
//!   operation, when the durability mode wants the group durable and
//!   before any page write (see `docs/architecture.md`, "Log formats").
//! - **Flushes** (between operations). With `sync` and `group` durability
//!   every page written in place is protected by a full **page image** in
//!   the log: PAGE_IMAGE records of the unit, log synced (so the log is
//!   durable beyond every change the pages contain, whose LSN they carry),
//!   the unit written as one batch, the device synced, then a FLUSH record.
//!   A crash that tears a page before the FLUSH is durable leaves its image,
//!   which restart writes back. With `none` (the papers' mode) there are no
//!   images and no syncs: the log's buffered records are written (not
//!   synced) before the pages, which protects against a killed process but
//!   not against power loss.
//! - **Compaction** (Alg. 7 without reinsertion, [`crate::store::log`]):
//!   after an operation, when the log is more than 75% full; if the
//!   survivors still fill more than half of it, half of the buffered pages
//!   are flushed (forced flushes: their FLUSH records make their changes
//!   obsolete) and the log is compacted again.
//! - **Checkpoint**: every buffered page flushed (protected, in chunks that
//!   fit the log), then a CHECKPOINT record carrying the metadata and the
//!   free list, synced: restart needs nothing older, and deleted pages
//!   become reusable.
//! - **Restart** at open ([`EfindStore::open`]): the log's restart keeps the
//!   survivors; surviving page images are written back (restoring torn
//!   pages) and synced; the newest CHECKPOINT gives the state, the later
//!   records are replayed into the write buffer (operation ids continue
//!   above the largest in the log); when anything was replayed, the
//!   allocator is rebuilt from the pages reachable from the root (every
//!   other page below the end is free). [`EfindStore::restart_report`] tells
//!   what was done. A crash during restart leaves the same log to recover.
//! - **Sticky failure**: after an error of the device or the log, the store
//!   refuses every further change with an error saying so, until reopened
//!   (which runs restart).
//!
//! Deleted pages: a NEW page deleted before its first flush simply leaves
//! the write buffer; any other becomes a DEL row (nothing is written for it).
//! The page returns to the free list after the checkpoint that records the
//! deletion, or at the next restart if it is unreachable then.
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::accounting::node_bytes;
use super::alloc::PageAllocator;
use super::bulk::{self, BulkBuild, PageFormat};
use super::checks;
use super::header::{Format, Header};
use super::placement::Placement;
use super::{EntryChange, NodeStore, OpBracket, OpId, StoreStats, TreeMeta};
use crate::cache::{Cache, EntryMeta, PolicyKind};
use crate::page::{self, Entry, Node};
use crate::storage::{PageDevice, PageId};
use crate::store::log::{
    ClientLog, Durability, EntryMemo, Log, LogFormat, LogLayout, LogPlacement, LogSize, LogStats, LsnHorizon, Record,
    RecordKind, RecoveryMode,
};
use crate::metrics::TemporalControlCounts;
use crate::{Error, Result};

#[cfg(test)]
mod crash_tests;
pub mod flush;
mod age_order;
pub mod flush_index;
mod group;
mod logging;
pub mod records;
mod restart;
mod retrieve;
#[cfg(test)]
mod s2q_festival_tests;
#[cfg(test)]
pub(crate) mod tests;
mod unlogged;
#[cfg(test)]
mod unlogged_tests;
pub mod write_buffer;

pub use flush::FlushPolicy;
use write_buffer::WriteBuffer;

pub use restart::RestartReport;

/// The papers' log capacity: 10 MiB of records (the capacity of a
/// per-change log when none is given; see [`EfindConfig::log_capacity`]).
pub const DEFAULT_LOG_CAPACITY: u64 = crate::store::log::PAPERS_LOG_CAPACITY;

/// The memory the dictionary of logged entries may take at least (see
/// [`crate::store::log::entry_refs`]); above it, a quarter of the buffer.
/// Beside the buffer's budget: a constant of the memory a store takes
/// beyond it (a smaller dictionary would log more bytes per update at
/// small budgets: 19 % more for 1,000,000 moves of 200,000 boxes at
/// 16 MiB with a quarter of the buffer).
const MEMO_MIN_BYTES: usize = 16 << 20;

fn default_log_capacity() -> u64 {
    DEFAULT_LOG_CAPACITY
}

/// How eFIND's read buffer is sized, and whether the write buffer's
/// decoded views answer reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadBufferMode {
    /// The paper's: the read buffer holds its share of the budget
    /// ([`EfindConfig::read_buffer_percent`]), and a page with buffered
    /// modifications is read from the read buffer or the device and merged
    /// with them (Alg. 2), also when the write buffer keeps the merge
    /// decoded (the views change no I/O counter).
    #[default]
    Fixed,
    /// The product's: the read buffer takes the part of the budget the
    /// write buffer and its views leave (never less than its share), so a
    /// budget larger than the index holds the whole index, and a page whose
    /// merge the write buffer keeps decoded is answered from it without
    /// reading its stored version.
    Adaptive,
}

impl ReadBufferMode {
    /// The name of the key's value: `fixed` or `adaptive`.
    pub fn name(self) -> &'static str {
        match self {
            ReadBufferMode::Fixed => "fixed",
            ReadBufferMode::Adaptive => "adaptive",
        }
    }

    /// True for [`ReadBufferMode::Fixed`] (the paper's, the default of
    /// [`EfindConfig`]).
    pub fn is_fixed(&self) -> bool {
        *self == ReadBufferMode::Fixed
    }
}

impl std::str::FromStr for ReadBufferMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fixed" => Ok(ReadBufferMode::Fixed),
            "adaptive" => Ok(ReadBufferMode::Adaptive),
            _ => Err(Error::invalid(format!(
                "unknown read buffer mode {s:?}: expected fixed (the paper's share) or adaptive"
            ))),
        }
    }
}

/// Temporal control parameters (Algs. 4–5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemporalControl {
    /// Capacity of RQ (ids of the last pages read from the device; with
    /// the read buffer policy [`PolicyKind::S2qFestival`], RQ is that
    /// policy's `A1`: the ids of pages read once and not cached).
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

/// Configuration of an `EfindStore`; defaults are the paper's final configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EfindConfig {
    /// Total buffer bytes (write buffer + read buffer).
    pub buffer_bytes: usize,
    /// Share of the buffer given to the read buffer, in percent (< 100).
    pub read_buffer_percent: u8,
    /// Replacement policy of the read buffer.
    pub read_policy: PolicyKind,
    /// How the read buffer is sized (written to a manifest only when not
    /// the paper's).
    #[serde(default, skip_serializing_if = "ReadBufferMode::is_fixed")]
    pub read_buffer_mode: ReadBufferMode,
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
    /// Bytes of records the log holds before it must be compacted (one
    /// region; the log takes two regions and two superblock pages), or 0
    /// for `auto_log_capacity` of
    /// the format and the buffer. Sizes the log at creation
    /// (`EfindConfig::log_placement`); an opened store keeps the size it
    /// was created with (an automatic placement stands for it at open).
    #[serde(default = "default_log_capacity")]
    pub log_capacity: u64,
    /// When committed operations become durable.
    #[serde(default)]
    pub durability: Durability,
    /// Format of the log at creation (an opened store keeps its own).
    /// Configurations written before the field existed describe per-change logs.
    #[serde(default = "LogFormat::per_change")]
    pub log_format: LogFormat,
    /// What `EfindStore::open` does with damage before the log's tail
    /// (written to a manifest only when not the default).
    #[serde(default, skip_serializing_if = "RecoveryMode::is_default")]
    pub recovery: RecoveryMode,
}

impl Default for EfindConfig {
    /// 512 KiB, 20% read buffer with S2Q, p = 60%, s = 5, FP_mh, temporal control on.
    fn default() -> Self {
        EfindConfig {
            buffer_bytes: 512 * 1024,
            read_buffer_percent: 20,
            read_policy: PolicyKind::S2q,
            read_buffer_mode: ReadBufferMode::Fixed,
            flush_percent: 60,
            flush_unit: 5,
            policy: FlushPolicy::Mh,
            temporal_control: Some(TemporalControl::default()),
            with_payload: false,
            log_capacity: 0,
            durability: Durability::default(),
            log_format: LogFormat::default(),
            recovery: RecoveryMode::AbsoluteConsistency,
        }
    }
}

impl EfindConfig {
    /// Refuses contradictory parameters that do not depend on the page size
    /// ([`EfindConfig::verify_for_page`] checks the rest).
    pub fn verify(&self) -> Result<()> {
        self.durability.validate()?;
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
        if self.read_policy.keeps_read_queue() && self.temporal_control.is_none() {
            return Err(Error::invalid(format!(
                "read buffer policy {}: its A1 is temporal control's read queue RQ (as in \
                 FESTIval, which refuses S2Q without it): it needs temporal control on",
                self.read_policy
            )));
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

    /// The smallest log capacity for `page_size`-byte pages: the log must
    /// always have room for a flushing unit's page images and an operation
    /// after a compaction, so it holds at least `8 × (flush_unit + 2)` pages.
    pub fn min_log_capacity(&self, page_size: usize) -> u64 {
        (self.flush_unit as u64)
            .saturating_add(2)
            .saturating_mul(8)
            .saturating_mul(page_size as u64)
    }

    /// The log capacity in bytes: [`log_capacity`](Self::log_capacity),
    /// or the automatic one when that is 0.
    pub fn resolved_log_capacity(&self) -> u64 {
        self.log_size().bytes
    }

    /// The log's size as this configuration gives it.
    fn log_size(&self) -> LogSize {
        LogSize::of(self.log_capacity, self.log_format, self.buffer_bytes)
    }

    /// [`verify`](Self::verify), and the log capacity against the page size.
    pub fn verify_for_page(&self, page_size: usize) -> Result<()> {
        self.verify()?;
        crate::units::check_page_size(page_size)?;
        let cap = self.resolved_log_capacity();
        if cap < page_size as u64 {
            return Err(Error::invalid(format!(
                "log capacity of {cap} bytes is smaller than one page ({page_size} bytes)"
            )));
        }
        let min = self.min_log_capacity(page_size);
        if cap < min {
            return Err(Error::invalid(format!(
                "log capacity of {cap} bytes is too small for {page_size}-byte pages and flushing units of {} pages: at least {min} bytes (8 x (unit + 2) pages)",
                self.flush_unit
            )));
        }
        Ok(())
    }

    internal! {
        /// The log of a store on `device` sized by this configuration
        /// ([`LogPlacement::for_capacity`], as
        /// [`FastConfig::log_placement`](crate::store::fast::FastConfig::log_placement)
        /// places FAST's): the first pages of `log_device` when given (for
        /// example `log.dat` next to `pages.dat`), else the last pages of
        /// `device`, an automatic capacity ([`log_capacity`](Self::log_capacity)
        /// 0) taking at most a quarter of it. The capacity is checked against
        /// the page size first ([`verify_for_page`](Self::verify_for_page)).
        pub fn log_placement(
            &self,
            device: &Arc<dyn PageDevice>,
            log_device: Option<Arc<dyn PageDevice>>,
        ) -> Result<LogPlacement> {
            self.verify_for_page(device.page_size())?;
            LogPlacement::for_capacity(device, log_device, self.log_size())
        }
    }
}

/// eFIND-specific counters (beside [`StoreStats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EfindStats {
    /// What temporal control did.
    #[serde(flatten)]
    pub temporal_control: TemporalControlCounts,
    /// Peak bytes of the write buffer.
    pub peak_write_buffer_bytes: u64,
    /// Flushes forced by the log (compaction could not free enough).
    pub forced_flushes: u64,
    /// Log compactions run by the store (restart excluded).
    pub compactions: u64,
    /// PAGE_IMAGE records appended (torn-write protection).
    pub page_images: u64,
    /// Bytes of PAGE_IMAGE records appended.
    pub page_image_bytes: u64,
    /// Checkpoints.
    pub checkpoints: u64,
}

#[derive(Debug)]
struct Inner {
    rb: Cache<Arc<Node>>,
    rq: VecDeque<PageId>,
    wq: VecDeque<PageId>,
    stats: StoreStats,
    estats: EfindStats,
    /// The newest pages the read buffer declined (FESTIval's S2Q), as
    /// stored: see [`retrieve::Declined`].
    declined: retrieve::Declined,
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
    ops: OpBracket,
    wb: WriteBuffer,
    inner: Mutex<Inner>,
    index_id: u128,
    /// Where the log lives.
    log_place: LogPlacement,
    /// The log (`None` when opened read-only).
    log: Option<Log>,
    /// Records of the running operation, appended at its commit.
    pending: Vec<Record>,
    /// Whether the running operation changed the metadata.
    meta_dirty: bool,
    /// Compact log format: the operations completed since the last logged
    /// group (logged together, as the net changes of their pages).
    held: group::HeldGroup,
    /// Newest committed operation.
    last_op: Option<OpId>,
    /// Sticky failure: why the store refuses changes.
    failed: Option<String>,
    /// The flushes and log upkeep owed by the newest commit
    /// ([`Self::flush_and_keep_room`]), done when the next operation begins:
    /// after a commit is in the log its operation has succeeded, so an error
    /// of that upkeep (a full file system) must fail the next operation,
    /// which has changed nothing yet, never the acknowledged one.
    upkeep_due: bool,
    /// What restart did when the store was opened.
    restart: Option<RestartReport>,
    /// First-image format: pages with a complete record (PAGE_IMAGE or NEW)
    /// in the log epoch `imaged_epoch` (their flushes need no image).
    imaged: crate::page_id::IdSet,
    /// The log epoch `imaged` describes.
    imaged_epoch: u64,
    /// Compact log with entry references: the entries logged in the live
    /// epoch (see [`crate::store::log::entry_refs`]).
    memo: EntryMemo,
    /// Groups of more entry changes are logged without the memo
    /// ([`logging::MEMO_GROUP_CHANGES`]; tests lower it).
    memo_group_changes: usize,
    /// First-image format: pages were written since the page device was
    /// last synced (it must be before a compaction).
    pages_unsynced: bool,
    /// The log's last LSN right after the newest checkpoint or bulk load
    /// (`None` before the first): while it is still the last and the write
    /// buffer is empty, a checkpoint has nothing to do.
    clean_lsn: Option<crate::store::log::Lsn>,
    /// Tier hints for the nodes it writes ([`Placement`]).
    placement: Placement,
    /// Node-page LSNs that prove the recovered log lost durable records
    /// (checked on every node read; none after a tolerated corrupt tail).
    horizon: LsnHorizon,
    /// The unlogged mode, until the next checkpoint (`unlogged.rs`).
    unlogged: Option<unlogged::Unlogged>,
    /// A front end's frames, on a log that holds them (superblock
    /// versions 8 to 11; see [`crate::store::log::client`]).
    client: Option<ClientLog>,
}

impl std::fmt::Debug for EfindStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EfindStore")
            .field("device", &self.device)
            .field("config", &self.config)
            .field("meta", &self.meta)
            .field("buffered_pages", &self.wb.len())
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

/// The identity page of an eFIND store (user blob: index id and log place).
const FORMAT: Format = Format {
    magic: *b"GFEFINDL",
    user_meta: true,
    blank: "page 0 is blank: the device holds no eFIND store",
    bad_magic: "page 0 is not an eFIND store header (bad magic, or a store of an older format)",
};

/// Bytes of the user blob of page 0.
const BLOB_LEN: usize = 16 + 8 + 8 + 1;

/// The read buffer of a store of `config` whose share is `read_budget`
/// bytes: its policy's read queue, when it keeps eFIND's RQ (FESTIval's
/// S2Q), as long as RQ.
fn read_buffer(config: &EfindConfig, read_budget: usize) -> Cache<Arc<Node>> {
    let budget = match config.read_buffer_mode {
        ReadBufferMode::Fixed => read_budget,
        ReadBufferMode::Adaptive => config.buffer_bytes,
    };
    let rq = config.temporal_control.unwrap_or_default().rq_capacity;
    Cache::with_policy(config.read_policy.build_with_read_queue(budget, rq), budget)
}

pub(crate) fn meta_of(node: &Node) -> EntryMeta {
    EntryMeta {
        height: node.level,
        size: node_bytes(node),
    }
}

impl EfindStore {
    /// Formats `device` as an empty store with its log at `log` (the last
    /// pages of `device`, node pages allocated below them, or pages of a
    /// separate log device; [`EfindConfig::log_placement`] sizes it from
    /// the configuration). Everything is synced when this returns.
    pub fn create(
        device: Arc<dyn PageDevice>,
        log: LogPlacement,
        config: EfindConfig,
    ) -> Result<Self> {
        let ps = device.page_size();
        let mut config = config;
        config.verify()?;
        crate::units::check_page_size(ps)?;
        let node_capacity = log.node_capacity(&device)?;
        let capacity =
            LogLayout::on_device(log.device.as_ref(), log.first_page, log.pages)?.capacity_bytes();
        let min = config.min_log_capacity(ps);
        if capacity < min {
            return Err(Error::invalid(format!(
                "a log of {} pages holds {capacity} bytes of records: too small for {ps}-byte pages and flushing units of {} pages (at least {min} bytes, 8 x (unit + 2) pages)",
                log.pages, config.flush_unit
            )));
        }
        // The store reports the capacity its log has.
        config.log_capacity = capacity;
        let index_id = loop {
            let id: u128 = rand::random();
            if id != 0 {
                break id;
            }
        };
        let alloc = PageAllocator::new(1, node_capacity)?;
        let mut store = Self::assemble(device, config, alloc, TreeMeta::default(), log, index_id)?;
        store.write_identity()?;
        store.device.sync()?;
        let log = Log::create(
            store.log_place.device.clone(),
            store.log_place.first_page,
            store.log_place.pages,
            store.log_config(),
        )?;
        let room = log.capacity_bytes() / 4;
        store.client = log
            .client_frames()
            .then(|| ClientLog::default().with_room(room));
        store.log = Some(log);
        store.append_checkpoint()?;
        Ok(store)
    }

    /// Opens a store made by [`create`](Self::create) and runs restart (see
    /// the [module docs](self)). `log` must name the range recorded at
    /// creation; with an automatic capacity ([`EfindConfig::log_capacity`]
    /// 0) the placement [`EfindConfig::log_placement`] gives stands for it,
    /// so the log keeps the size it was created with (see
    /// [`open_with_placement`](Self::open_with_placement)).
    #[cfg(test)]
    pub fn open(
        device: Arc<dyn PageDevice>,
        log: LogPlacement,
        config: EfindConfig,
    ) -> Result<Self> {
        Self::open_inner(device, log, config, false, Placement::None)
    }

    /// [`open`](Self::open) with `placement` in force during restart: the
    /// page images restart writes back and every node written from then on
    /// (flushes, bulk loads) are hinted to the tier `placement` gives
    /// their level ([`crate::store::placement`]), as
    /// [`with_placement`](Self::with_placement) does for a store already open.
    ///
    /// The store refuses a `log` on a separate device when its log is on
    /// `device` and the reverse, and a range other than the one recorded at
    /// creation (an error naming both), except the one
    /// [`EfindConfig::log_placement`] gives with an automatic capacity:
    /// that capacity depends on the buffer size (and its formula on the
    /// release), so the recorded range is used.
    pub fn open_with_placement(
        device: Arc<dyn PageDevice>,
        log: LogPlacement,
        config: EfindConfig,
        placement: Placement,
    ) -> Result<Self> {
        Self::open_inner(device, log, config, false, placement)
    }

    /// Opens a store for reading only: nothing is written, changes are
    /// refused, and a store whose log holds anything to recover (it was not
    /// checkpointed before it closed) is an error saying so. `log` is
    /// checked as by [`open_with_placement`](Self::open_with_placement).
    pub fn open_read_only(
        device: Arc<dyn PageDevice>,
        log: LogPlacement,
        config: EfindConfig,
    ) -> Result<Self> {
        Self::open_inner(device, log, config, true, Placement::None)
    }

    /// An empty store on a fresh in-memory device of `page_size`-byte pages,
    /// its log in the device's last pages ([`EfindConfig::log_placement`]).
    #[cfg(test)]
    pub fn create_in_memory(page_size: usize, config: EfindConfig) -> Result<Self> {
        let device: Arc<dyn PageDevice> = Arc::new(crate::storage::mem::MemDevice::new(
            page_size,
            crate::storage::mem::MemDevice::DEFAULT_CAPACITY,
        )?);
        let log = config.log_placement(&device, None)?;
        Self::create(device, log, config)
    }

    fn log_config(&self) -> crate::store::log::LogConfig {
        crate::store::log::LogConfig::new(self.index_id)
            .with_durability(self.config.durability)
            .with_format(self.config.log_format)
            .with_entry_refs(true)
    }

    fn assemble(
        device: Arc<dyn PageDevice>,
        config: EfindConfig,
        alloc: PageAllocator,
        meta: TreeMeta,
        log_place: LogPlacement,
        index_id: u128,
    ) -> Result<Self> {
        config.verify()?;
        let page_size = device.page_size();
        crate::units::check_page_size(page_size)?;
        FORMAT.check_page_size(page_size)?;
        let read_budget = config.buffer_bytes / 100 * usize::from(config.read_buffer_percent)
            + config.buffer_bytes % 100 * usize::from(config.read_buffer_percent) / 100;
        let write_budget = config.buffer_bytes - read_budget;
        let max_entries = page::max_entries(page_size, config.with_payload);
        Ok(EfindStore {
            max_entries,
            device,
            config,
            page_size,
            read_budget,
            write_budget,
            alloc,
            meta,
            ops: OpBracket {
                current: None,
                next: 1,
            },
            wb: WriteBuffer::with_view_budget(write_budget, read_budget),
            inner: Mutex::new(Inner {
                rb: read_buffer(&config, read_budget),
                rq: VecDeque::new(),
                wq: VecDeque::new(),
                stats: StoreStats::default(),
                estats: EfindStats::default(),
                declined: Default::default(),
            }),
            index_id,
            log_place,
            log: None,
            pending: Vec::new(),
            meta_dirty: false,
            held: group::HeldGroup::default(),
            last_op: None,
            failed: None,
            // A restart's replayed write buffer may be over budget.
            upkeep_due: true,
            restart: None,
            imaged: Default::default(),
            imaged_epoch: 0,
            memo: EntryMemo::with_capacity_bytes((config.buffer_bytes / 4).max(MEMO_MIN_BYTES)),
            memo_group_changes: logging::MEMO_GROUP_CHANGES,
            pages_unsynced: false,
            clean_lsn: None,
            placement: Placement::None,
            horizon: LsnHorizon::none(),
            unlogged: None,
            client: None,
        })
    }

    /// Hints every node written from now on (flushes of the write buffer and
    /// bulk loads) to the tier `placement` gives its level
    /// ([`crate::store::placement`]); the log's pages are never hinted.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// The placement in force.
    #[cfg(test)]
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// The device holding the log (the store's device unless a separate one was given).
    #[cfg(test)]
    pub fn log_device(&self) -> &Arc<dyn PageDevice> {
        &self.log_place.device
    }

    /// The log's page range on its device: `(first_page, pages)`.
    #[cfg(test)]
    pub fn log_range(&self) -> (PageId, u64) {
        (self.log_place.first_page, self.log_place.pages)
    }

    /// The page allocator.
    #[cfg(test)]
    pub fn allocator(&self) -> &PageAllocator {
        &self.alloc
    }

    /// Bytes of buffered modifications (the write buffer's size).
    #[cfg(test)]
    pub fn write_buffer_bytes(&self) -> usize {
        self.wb.bytes()
    }

    /// Pages with buffered modifications.
    #[cfg(test)]
    pub fn buffered_pages(&self) -> usize {
        self.wb.len()
    }

    /// eFIND-specific counters.
    #[cfg(test)]
    pub fn efind_stats(&self) -> EfindStats {
        self.lock().estats
    }

    /// Counters of the log since the store was opened (zero when read-only).
    pub fn log_stats(&self) -> LogStats {
        self.log.as_ref().map(Log::stats).unwrap_or_default()
    }

    /// What restart did when the store was opened (`None` for a created store).
    pub fn restart_report(&self) -> Option<&RestartReport> {
        self.restart.as_ref()
    }

    /// The newest committed operation (acknowledged or not).
    #[cfg(test)]
    pub fn last_op(&self) -> Option<OpId> {
        self.last_op
    }

    /// The newest operation whose commit is durable: it and every earlier
    /// operation survive any crash.
    pub fn durable_op(&self) -> Option<OpId> {
        self.log.as_ref().and_then(Log::durable_op)
    }

    /// Makes every committed operation durable now (a log sync).
    #[cfg(test)]
    pub fn sync(&mut self) -> Result<()> {
        self.check_writable()?;
        self.guard(|s| {
            s.log_group()?;
            s.log_mut()?.sync()
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means another thread panicked; the state is consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Nothing happened since the newest checkpoint (or bulk load).
    fn is_clean(&self) -> bool {
        self.unlogged.is_none()
            && self.wb.is_empty()
            && self.held.is_empty()
            && !self.client.as_ref().is_some_and(ClientLog::generation_pending)
            && self.clean_lsn.is_some()
            && self.clean_lsn == self.log.as_ref().map(Log::last_lsn)
    }

    /// Remembers that the store is clean now.
    fn note_clean(&mut self) {
        self.clean_lsn = self.log.as_ref().map(Log::last_lsn);
    }

    fn check_writable(&self) -> Result<()> {
        if let Some(why) = &self.failed {
            return Err(Error::StoreFailed(format!(
                "the eFIND store refuses changes after an earlier failure ({why}); reopen it to recover"
            )));
        }
        if self.log.is_none() {
            return Err(Error::invalid("the eFIND store is open read-only"));
        }
        Ok(())
    }

    /// Runs `f`; an error other than bad input makes the store refuse every later change.
    fn guard<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let r = f(self);
        if let Err(e) = &r {
            if !e.is_user_error() {
                self.failed = Some(e.to_string());
            }
        }
        r
    }

    fn log_mut(&mut self) -> Result<&mut Log> {
        self.log
            .as_mut()
            .ok_or_else(|| Error::invalid("the eFIND store is open read-only"))
    }

    fn check_node_page(&self, id: PageId) -> Result<()> {
        checks::check_node_page(&self.alloc, id)
    }

    fn check_entries<'a>(&self, entries: impl IntoIterator<Item = &'a Entry>) -> Result<()> {
        entries
            .into_iter()
            .try_for_each(|e| checks::check_payload(e, self.config.with_payload))
    }

    fn check_len(&self, n: usize) -> Result<()> {
        checks::check_len(
            n,
            self.max_entries,
            self.page_size,
            self.config.with_payload,
        )
    }

    fn check_in_op(&self, what: &str) -> Result<OpId> {
        self.ops.current.ok_or_else(|| {
            Error::invalid(format!("{what} outside an operation: call begin_op first"))
        })
    }

    /// After the write buffer grew: an adaptive read buffer gives back
    /// what the budget no longer leaves it, then the peak is noted.
    fn note_peak(&self) {
        let room = self.read_room();
        let wb = self.wb.bytes() as u64;
        let mut inner = self.lock();
        self.trim_read_buffer(&mut inner, room);
        let total = self.held_bytes(&inner);
        inner.stats.peak_buffer_bytes = inner.stats.peak_buffer_bytes.max(total);
        inner.estats.peak_write_buffer_bytes = inner.estats.peak_write_buffer_bytes.max(wb);
    }

    /// The bytes the buffers hold now (what `peak_buffer_bytes` is the peak
    /// of): buffered modifications, their decoded views, the read buffer.
    fn held_bytes(&self, inner: &Inner) -> u64 {
        (self.wb.bytes() + self.wb.view_bytes() + inner.rb.used_bytes()) as u64
    }

    /// Writes the identity page (page 0, never rewritten).
    fn write_identity(&self) -> Result<()> {
        let mut blob = Vec::with_capacity(BLOB_LEN);
        blob.extend_from_slice(&self.index_id.to_le_bytes());
        blob.extend_from_slice(&self.log_place.first_page.to_le_bytes());
        blob.extend_from_slice(&self.log_place.pages.to_le_bytes());
        blob.push(u8::from(!self.log_place.same_device(&self.device)));
        Header {
            page_size: self.page_size,
            with_payload: self.config.with_payload,
            meta: TreeMeta::default(),
            next_page: 1,
            lsn: 0,
            user_meta: blob,
            free: Vec::new(),
        }
        .write(&FORMAT, self.device.as_ref())
    }
}

/// Reads the identity blob of page 0: index id, log first page, log pages, separate.
fn parse_identity(blob: &[u8]) -> Result<(u128, PageId, u64, bool)> {
    let bad = || Error::corrupt(Some(0), "the eFIND identity page names no log (bad blob)");
    if blob.len() != BLOB_LEN {
        return Err(bad());
    }
    let id = u128::from_le_bytes(
        blob.get(0..16)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(bad)?,
    );
    let first = u64::from_le_bytes(
        blob.get(16..24)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(bad)?,
    );
    let pages = u64::from_le_bytes(
        blob.get(24..32)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(bad)?,
    );
    let separate = match blob.get(32) {
        Some(0) => false,
        Some(1) => true,
        _ => return Err(bad()),
    };
    Ok((id, first, pages, separate))
}

impl NodeStore for EfindStore {
    fn get(&self, id: PageId) -> Result<Arc<Node>> {
        self.check_node_page(id)?;
        self.lock().stats.node_gets += 1;
        self.retrieve(id, true)
    }

    /// The nodes `get` would use from memory without a read: a NEW page,
    /// the write buffer's view of a MOD page and the read buffer's copy
    /// (peeked: its order is unchanged; the paper's read-buffer mode reads
    /// it under the view).
    fn warm(&self, ids: &[PageId]) {
        let inner = self.lock();
        let held = ids.iter().flat_map(|&id| match self.wb.get(id).map(|row| &row.body) {
            Some(write_buffer::Body::New(node)) => [Some(node), None],
            Some(write_buffer::Body::Del) => [None, None],
            Some(write_buffer::Body::Mod(_)) => [self.wb.view(id), inner.rb.peek(id)],
            None => [inner.rb.peek(id), None],
        });
        crate::store::touch_entries(held.flatten().map(|n| &**n));
    }

    /// Buffered nodes from memory; the stored versions of the others read
    /// as one device batch, then merged with the write buffer as `get` does.
    fn get_batch(&self, ids: &[PageId]) -> Result<Vec<Arc<Node>>> {
        for &id in ids {
            self.check_node_page(id)?;
        }
        self.lock().stats.node_gets += ids.len() as u64;
        self.retrieve_batch(ids)
    }

    fn begin_op(&mut self) -> Result<OpId> {
        self.check_writable()?;
        // (Never in the middle of an operation: `begin` refuses that below.)
        if self.ops.current.is_none() {
            if self.upkeep_due {
                self.guard(Self::flush_and_keep_room)?;
                self.upkeep_due = false;
            }
            // Room for the operation's log writes: a full file system fails
            // the operation here, before it changes anything (the store
            // stays usable once space is freed).
            self.log_mut()?.reserve_ahead()?;
        }
        let op = self.ops.begin()?;
        self.pending.clear();
        self.meta_dirty = false;
        Ok(op)
    }

    fn create(&mut self, level: u16, mut entries: Vec<Entry>) -> Result<PageId> {
        self.check_writable()?;
        let op = self.check_in_op("create")?;
        entries.sort_unstable_by_key(|e| e.key);
        self.check_len(entries.len())?;
        self.check_entries(&entries)?;
        if entries
            .windows(2)
            .any(|w| matches!(w, [a, b] if a.key == b.key))
        {
            return Err(Error::invalid("duplicate entry key in a created node"));
        }
        let id = self.guard(|s| s.alloc.allocate())?;
        self.log_change(
            (op, id, RecordKind::New),
            |held| held.created(id, entries.len()),
            |codec| codec.encode_new(level, &entries),
        );
        self.wb.create(id, level, &entries);
        self.lock().stats.nodes_created += 1;
        self.note_peak();
        Ok(id)
    }

    fn modify(&mut self, id: PageId, level: u16, changes: &[EntryChange]) -> Result<()> {
        self.check_writable()?;
        let op = self.check_in_op("modify")?;
        self.check_node_page(id)?;
        let current = self.guard(|s| s.retrieve(id, false))?;
        if current.level != level {
            return Err(Error::invalid(format!(
                "node {id} is at level {} but was modified as a level-{level} node",
                current.level
            )));
        }
        self.check_entries(changes.iter().filter_map(|c| match c {
            EntryChange::Upsert(e) => Some(e),
            EntryChange::Remove(_) => None,
        }))?;
        self.check_len(write_buffer::len_after(&current.entries, changes))?;
        // Without the buffer's reference (and the tree's, which drops its
        // copy of a node before changing it) the node changes in place: a
        // NEW page's in its row, a MOD page's newest version here, to
        // become its view.
        let after = if self.wb.node(id).is_some() {
            drop(current);
            None
        } else {
            let mut after = current;
            self.wb.forget_view(id);
            crate::store::mem::apply_changes(&mut Arc::make_mut(&mut after).entries, changes);
            Some(after)
        };
        self.log_change(
            (op, id, RecordKind::Mod),
            |held| held.modified(id, changes),
            |codec| codec.encode_mod(level, changes),
        );
        self.wb.modify(id, level, changes);
        if let Some(after) = after {
            self.wb.set_view(id, after);
        }
        self.note_peak();
        Ok(())
    }

    fn delete(&mut self, id: PageId) -> Result<()> {
        self.check_writable()?;
        let op = self.check_in_op("delete")?;
        self.check_node_page(id)?;
        let level = match self.wb.get(id) {
            Some(r) => r.height,
            None => self.guard(|s| s.retrieve(id, false))?.level,
        };
        self.alloc.release(id)?;
        self.log_change(
            (op, id, RecordKind::Del),
            |held| held.deleted(id, level),
            |codec| codec.encode_del(level),
        );
        self.wb.delete(id, level);
        let mut inner = self.lock();
        inner.rb.remove(id);
        inner.declined.forget(id);
        inner.stats.nodes_deleted += 1;
        Ok(())
    }

    fn set_meta(&mut self, meta: TreeMeta) -> Result<()> {
        self.check_writable()?;
        self.check_in_op("set_meta")?;
        if let Some(root) = meta.root {
            self.check_node_page(root)
                .map_err(|e| Error::invalid(format!("tree root: {e}")))?;
        }
        self.meta = meta;
        self.meta_dirty = true;
        Ok(())
    }

    fn commit_op(&mut self, op: OpId) -> Result<()> {
        self.check_writable()?;
        self.ops.end(op)?;
        self.guard(|s| s.commit_logged(op))
    }

    fn meta(&self) -> TreeMeta {
        self.meta.clone()
    }

    fn checkpoint(&mut self) -> Result<()> {
        if self.log.is_none() && self.failed.is_none() {
            // Read-only: nothing to make durable.
            return Ok(());
        }
        self.check_writable()?;
        self.ops.check_idle("checkpoint")?;
        if self.is_clean() {
            return Ok(());
        }
        self.guard(Self::checkpoint_logged)?;
        self.note_clean();
        Ok(())
    }

    /// Writes the nodes to fresh pages in batches, bypassing the write
    /// buffer and the log, syncs the device once, then publishes the tree
    /// with a clean log checkpoint (one superblock write and sync; see
    /// [`crate::store::bulk`]).
    fn bulk_load(&mut self, build: BulkBuild<'_>) -> Result<()> {
        self.check_writable()?;
        bulk::check_target(&self.meta, self.ops.current)?;
        let format = PageFormat {
            max_entries: self.max_entries,
            with_payload: self.config.with_payload,
            lsn: self.log_mut()?.last_lsn(),
            placement: self.placement,
        };
        let written = bulk::write_tree(&*self.device, &mut self.alloc, format, build)
            .map_err(|f| f.record_in(&mut self.failed))?;
        self.lock().declined.clear();
        written.count_in(&mut self.lock().stats);
        self.meta = written.meta;
        // The checkpoint syncs the device (the new pages) before it switches
        // the log's superblock to the new state.
        self.guard(Self::checkpoint_logged)?;
        self.note_clean();
        Ok(())
    }

    fn nodes_in_use(&self) -> Option<u64> {
        Some(self.alloc.allocated_count())
    }

    /// The peak restarts at the bytes the buffers hold now
    /// (`peak_write_buffer_bytes` of [`EfindStats`] stays the peak since
    /// the store was opened).
    fn restart_buffer_peak(&mut self) {
        let mut inner = self.lock();
        inner.stats.peak_buffer_bytes = self.held_bytes(&inner);
    }

    fn stats(&self) -> StoreStats {
        let inner = self.lock();
        let (s, e) = (inner.stats.clone(), inner.estats);
        drop(inner);
        let l = self.log_stats();
        StoreStats {
            log_records: l.records,
            log_bytes: l.bytes,
            log_pages_written: l.pages_written,
            log_syncs: l.syncs,
            compactions: e.compactions,
            page_images: e.page_images,
            page_image_bytes: e.page_image_bytes,
            forced_flushes: e.forced_flushes,
            temporal_control: e.temporal_control,
            ..s
        }
    }

    fn last_committed_op(&self) -> Option<OpId> {
        self.last_op
    }

    fn durable_op(&self) -> Option<OpId> {
        EfindStore::durable_op(self)
    }

    fn durability(&self) -> Option<Durability> {
        Some(self.config.durability)
    }

    /// Switches between modes that protect flushes alike
    /// ([`Durability::check_switch`]); the held group and pending commits
    /// follow the new mode from the next operation on.
    fn set_durability(&mut self, durability: Durability) -> Result<()> {
        self.config.durability.check_switch(durability)?;
        if let Some(log) = self.log.as_mut() {
            log.set_durability(durability)?;
        }
        self.config.durability = durability;
        Ok(())
    }

    /// Logs the held group and syncs the log: every committed operation
    /// is durable; buffered nodes stay for the flushing policy. In the
    /// unlogged mode nothing is in the log to sync: `false` (the caller
    /// checkpoints, which ends the mode).
    fn sync_committed(&mut self) -> Result<bool> {
        self.check_writable()?;
        if self.is_unlogged() {
            return Ok(false);
        }
        if self.ops.current.is_some() {
            return Err(Error::invalid(
                "sync of committed operations while an operation is running: commit it first",
            ));
        }
        self.guard(|s| {
            s.log_group()?;
            s.log_mut()?.sync()
        })?;
        Ok(true)
    }

    /// Enters the unlogged mode (`unlogged.rs`) from a clean state with a
    /// log format and durability that protect flushes: operations are not
    /// logged, pages of the last checkpoint's state get a before-image
    /// before they are rewritten, and the next checkpoint ends the mode.
    fn begin_unlogged(&mut self) -> Result<bool> {
        self.enter_unlogged()
    }

    fn client_log(&mut self) -> Option<&mut ClientLog> {
        self.client.as_mut()
    }

    fn client_log_ref(&self) -> Option<&ClientLog> {
        self.client.as_ref()
    }
}
