//! `FastStore`: the FAST and FAST* frameworks (seed `fast-framework.txt`,
//! reading guide `NOTES-fast.md`; Sarwat, Mokbel, Zhou and Nath,
//! GeoInformatica 2013) as a node store, so that the R-tree, the R*-tree and
//! the Hilbert R-tree become flash-aware without changing their algorithms.
//!
//! - **Tree modifications table** ([`table`]): `node id -> NEW (the whole
//!   node) | MOD (the list of (timestamp, change) in arrival order) | DEL`.
//!   Its size, by the shared accounting ([`crate::store::accounting`]), is
//!   the store's memory; FAST keeps no node cache (the paper's memory holds
//!   modifications only).
//! - **RetrieveNode** (Alg. 3): the table is checked before the device: NEW
//!   answers from memory, DEL is an error, MOD reads the stored node and
//!   applies the list in order, no row reads the device. Pages read from the
//!   device have their checksum verified.
//! - **Flushing** (Alg. 4, [`heap`]): at `commit_op` (between operations:
//!   no-steal), while the table exceeds `buffer_bytes`, the [`FastPolicy`]
//!   chooses a flushing unit (a group of `flush_unit` consecutive page ids,
//!   fixed at node creation); its buffered nodes are built by RetrieveNode
//!   and written as one device batch, then leave the table. In the
//!   first-image and compact log formats with a durable mode, units are
//!   chosen one after the other until the table is at 3/4 of its budget ([`crate::store::FLUSH_BATCH_LOW_WATER`])
//!   and written as one flush behind one log sync (`flush_batch`); the
//!   papers' per-change format flushes one unit at a time.
//! - **Log** ([`crate::store::log`]): each operation's changes are kept in
//!   memory while it runs and appended at `commit_op` as NEW/MOD/DEL
//!   records coalesced per page (module `staging`: a node created in the
//!   operation is one NEW with its final content, a modified node one MOD
//!   with the last change of each key), then META and COMMIT; the
//!   [`Durability`] mode decides when the COMMIT is durable
//!   ([`NodeStore::durable_op`]). In the compact format (the default) the
//!   staging is kept across operations and a *group* of them is logged at
//!   once, with its newest operation's id and COMMIT (`log_group`: when
//!   the mode wants it durable, before a page it touched is flushed,
//!   before a checkpoint or a sync, when the log needs room), as the eFIND
//!   store does (see [`crate::store::log::LogFormat::Compact`]).
//!
//! # Where things live
//!
//! Page 0 of the node device is the store's identity page, written once at
//! creation and never again (so no crash can tear it): the header format
//! shared with the other stores (magic `GFFAST\0\0`) whose user blob holds
//! the index id (random, 128 bits; the log's superblock repeats it) and the
//! log's page range. The log lives in a page range of the same device (its
//! last pages; node pages are allocated below them) or of a separate device
//! (`log.dat` next to `pages.dat`), see [`LogPlacement`] (the placement API
//! the eFIND store shares). Everything that
//! changes (tree metadata, next page, free list, last operation) is in the
//! log: META records per operation, CHECKPOINT records at checkpoints.
//!
//! With a [`Placement`] ([`FastStore::with_placement`]) every batch of
//! nodes the store writes (a flush, the chunks of a checkpoint, a bulk load)
//! is hinted to the device first, each node by the level its row keeps. The
//! log is never hinted: on a hybrid device it stays on the slow tier, as in
//! the eFIND store (see there). Pages restored from their images at
//! restart keep the tier the device's map gives them until their next flush.
//!
//! # Durability and crash safety
//!
//! - **Flushes are protected against torn writes** by full page images in
//!   the log: PAGE_IMAGE of each page, log synced (the log is then durable
//!   beyond every change the pages contain, whose LSN they carry), pages
//!   written as one batch, device synced, FLUSH record. A crash that tears a
//!   page before the FLUSH is durable leaves its image, which restart writes
//!   back. The cost: each flushed page is written twice (once to the log,
//!   sequentially) and each flush syncs twice. With durability `none` (the
//!   papers' mode) there are no images and no syncs, as in the eFIND store:
//!   the log's buffered records are written (not synced) before the pages,
//!   and a crash can tear a page. DEL rows write nothing: their
//!   DEL records stay in the log until the next checkpoint, which makes the
//!   page reusable.
//! - **Compaction** (FAST's log compaction = Alg. 5 without reinsertion):
//!   after an operation, when the log is more than 75% full or has less
//!   room than twice the largest operation so far; if the survivors still
//!   fill more than half of it (or leave less than that room), an
//!   **emergency flush** writes everything (a checkpoint) and the log is
//!   compacted again. A commit keeps room for one protected flush after
//!   its records (so buffered nodes can always be flushed and their records
//!   dropped); when its records do not fit a compacted log, the nodes the
//!   operation did not change are flushed (their rows hold committed,
//!   logged changes only) and the log is compacted again. An operation
//!   whose records do not fit even then is an error (the log is too small
//!   for the workload).
//! - **Checkpoint**: every buffered node flushed (protected, in chunks that
//!   fit the log), then a CHECKPOINT record with the metadata and the free
//!   list (deleted pages included), synced: restart needs nothing older.
//! - **Restart** at [`FastStore::open`] (Alg. 5): the log's restart keeps
//!   the survivors (committed operations only; records older than a FLUSH
//!   of their page dropped); surviving page images are written back and
//!   synced; the newest CHECKPOINT gives the state; the later records are
//!   replayed into the table. The allocation state comes from the newest
//!   META, which carries the pages taken from the free list since the
//!   checkpoint. Restart ends as a commit does (flushes while the table is
//!   over budget, compaction and emergency flush when the log is too full,
//!   the largest surviving operation sizing the room kept for the next), so
//!   the first operation after it has the same room as any other. A crash
//!   during restart leaves a log that recovers the same.
//! - **Sticky failure**: after an error of the device or the log, the store
//!   refuses every further change until reopened (which runs restart).
//!
//! Deviations from the paper, decided here: entries are addressed by key
//! (contract); flushes rewrite only the buffered nodes of a unit; Algorithm
//! 1's missing cases (a change to a node with a DEL entry, the DEL of a NEW
//! node) are: the first is an error (a deleted page is not reused before a
//! checkpoint), the second drops the row; the log holds an operation's
//! changes coalesced per page, the table the paper's arrival-ordered lists.
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::alloc::PageAllocator;
use super::bulk::{self, BulkBuild, PageFormat};
use super::checks;
use super::header::{Format, Header};
use super::log::{
    needs_replay, record::RECORD_HEADER, ClientLog, Durability, Log, LogConfig, LogFormat, LogLayout,
    LogPlacement, LogReader, LogSize, LsnHorizon, MetaState, PayloadCodec, RecoveryMode, RestartReport,
    PAYLOAD_CODEC_VERSION,
};
use super::placement::Placement;
use super::overlap::read_decoded_timed;
use super::stored::{decode_stored, open_log};
use super::{EntryChange, NodeStore, OpBracket, OpId, StoreStats, TreeMeta};
use crate::page::{self, Entry, Node};
use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

#[cfg(test)]
mod crash_tests;
mod flush;
pub mod heap;
mod recovery;
mod staging;
pub mod table;
#[cfg(test)]
pub(crate) mod tests;

pub use heap::FastPolicy;
use heap::FlushHeap;
use staging::Staging;
use table::{ModTable, Row};

/// Log fill ratio after an operation that triggers a compaction.
pub const COMPACT_AT: f64 = 0.75;
/// Fill ratio after a compaction that triggers an emergency flush.
pub const EMERGENCY_AT: f64 = 0.5;

/// Configuration of a `FastStore`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FastConfig {
    /// Memory for the tree modifications table, in bytes (shared accounting).
    pub buffer_bytes: usize,
    /// Pages per flushing unit (≥ 1): the eFIND paper's comparison uses 5;
    /// the FAST paper's 16 KB on SSDs is `16 KiB / page size`.
    pub flush_unit: usize,
    /// Flushing policy.
    pub policy: FastPolicy,
    /// When commits become durable.
    pub durability: Durability,
    /// Bytes of log records one log region holds (the paper's log file
    /// size), or 0 for `auto_log_capacity`
    /// of the format and the buffer; used by [`FastConfig::log_pages`] and
    /// `FastConfig::log_placement` to size the log's page range (give the
    /// same value at open: FAST opens only the range recorded at creation).
    pub log_capacity: u64,
    /// Format of the log at creation (an opened store keeps its own).
    /// Configurations written before the field existed describe per-change logs.
    #[serde(default = "LogFormat::per_change")]
    pub log_format: LogFormat,
    /// Whether node pages carry the entries' payloads (the Hilbert R-tree needs them).
    pub with_payload: bool,
    /// Seed of the random policy.
    pub seed: u64,
    /// What `FastStore::open` does with damage before the log's tail
    /// (written to a manifest only when not the default).
    #[serde(default, skip_serializing_if = "RecoveryMode::is_default")]
    pub recovery: RecoveryMode,
}

impl Default for FastConfig {
    /// 512 KiB, units of 5 pages, FAST*, group commit, a first-image log of
    /// the automatic capacity.
    fn default() -> Self {
        FastConfig {
            buffer_bytes: 512 * 1024,
            flush_unit: 5,
            policy: FastPolicy::FastStar,
            durability: Durability::default(),
            log_capacity: 0,
            log_format: LogFormat::default(),
            with_payload: false,
            seed: 0x5EED,
            recovery: RecoveryMode::AbsoluteConsistency,
        }
    }
}

impl FastConfig {
    /// Refuses contradictory parameters.
    pub fn verify(&self) -> Result<()> {
        if self.flush_unit == 0 {
            return Err(Error::invalid(
                "flushing unit size 0: a unit holds at least one page",
            ));
        }
        self.durability.validate()
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

    /// Pages of the log's range for the log capacity with `page_size`-byte pages.
    pub fn log_pages(&self, page_size: usize) -> Result<u64> {
        LogLayout::pages_for_capacity(self.resolved_log_capacity(), page_size)
    }

    internal! {
        /// The log of a store on `device` sized by this configuration, as
        /// [`EfindConfig::log_placement`](crate::store::efind::EfindConfig::log_placement)
        /// places eFIND's ([`LogPlacement::for_capacity`]): the first pages of
        /// `log_device` when given, else the last pages of `device` (an
        /// automatic capacity taking at most a quarter of it). Give the same
        /// placement at open.
        pub fn log_placement(
            &self,
            device: &Arc<dyn PageDevice>,
            log_device: Option<Arc<dyn PageDevice>>,
        ) -> Result<LogPlacement> {
            LogPlacement::for_capacity(device, log_device, self.log_size())
        }
    }
}

/// FAST-specific counters (beside [`StoreStats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FastStats {
    /// Log compactions (restart at open excluded).
    pub compactions: u64,
    /// Emergency flushes (compaction freed too little).
    pub emergency_flushes: u64,
    /// Page images written to the log (torn-write protection).
    pub page_images: u64,
    /// Records replayed into the table at open.
    pub replayed_records: u64,
    /// Page images written back to the device at open.
    pub restored_pages: u64,
    /// Peak bytes of the modifications table.
    pub peak_table_bytes: u64,
    /// Buffered updates flushed (the sum of the flushed units' update counts).
    pub flushed_updates: u64,
}

#[derive(Debug, Default)]
struct Inner {
    stats: StoreStats,
}

/// The FAST node store. See the module documentation.
pub struct FastStore {
    device: Arc<dyn PageDevice>,
    log: Log,
    placement: LogPlacement,
    /// Tier hints for the nodes it writes.
    node_placement: Placement,
    config: FastConfig,
    page_size: usize,
    max_entries: usize,
    alloc: PageAllocator,
    meta: TreeMeta,
    /// Pages taken from the durable free list since the last checkpoint.
    reused: BTreeSet<PageId>,
    /// (meta, next page, reused count) as last logged.
    logged: (TreeMeta, PageId, usize),
    ops: OpBracket,
    last_op: OpId,
    /// Operations up to this one are durable (checkpoint or restart).
    durable_floor: OpId,
    /// The store was created before the shared payload codec: its log's META
    /// and CHECKPOINT records may have FAST's earlier layout.
    legacy_payloads: bool,
    /// Node-page LSNs that prove the recovered log lost durable records
    /// (checked on every node read; none after a tolerated corrupt tail).
    horizon: LsnHorizon,
    table: ModTable,
    heap: FlushHeap,
    clock: u64,
    rng: u64,
    /// The running operation's changes, logged (coalesced) at its commit;
    /// in the compact format, the changes of the held group of operations.
    staged: Staging,
    /// Compact format: the newest operation of the held group (its records
    /// are logged with this id and its COMMIT).
    held_last: Option<OpId>,
    /// Log bytes of the largest operation so far (headroom kept for the next).
    max_op_bytes: u64,
    /// Sticky failure: why the store refuses changes.
    failed: Option<String>,
    /// The flushes and log upkeep owed by the newest commit
    /// ([`Self::after_commit`]), done when the next operation begins: an
    /// error there (a full file system) fails that operation, which has
    /// changed nothing yet, never the one whose COMMIT is logged.
    upkeep_due: bool,
    /// Opened by [`FastStore::open_read_only`]: every change is refused.
    read_only: bool,
    /// First-image format: pages imaged in the log epoch `imaged_epoch`.
    imaged: crate::page_id::IdSet,
    /// The log epoch `imaged` describes.
    imaged_epoch: u64,
    /// First-image format: pages written since the page device's last sync.
    pages_unsynced: bool,
    /// What restart did at open.
    restart: Option<RestartReport>,
    fstats: FastStats,
    /// The log's last LSN right after the newest checkpoint or bulk load
    /// (`None` before the first): while it is still the last and the table
    /// is empty, a checkpoint has nothing to do.
    clean_lsn: Option<super::log::Lsn>,
    /// A front end's frames, on a log that holds them (superblock
    /// versions 8 to 11; see [`crate::store::log::client`]).
    client: Option<ClientLog>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for FastStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastStore")
            .field("device", &self.device)
            .field("log", &self.placement)
            .field("config", &self.config)
            .field("meta", &self.meta)
            .field("buffered_nodes", &self.table.len())
            .finish_non_exhaustive()
    }
}

/// The identity page of a FAST store.
const FORMAT: Format = Format {
    magic: *b"GFFAST\0\0",
    user_meta: true,
    blank: "page 0 is blank: the device holds no FAST store",
    bad_magic: "page 0 is not a FAST store header (bad magic)",
};

/// Bytes of the identity blob of stores created before the shared payload
/// codec: index id, log first page, log pages.
const IDENTITY_BYTES: usize = 16 + 8 + 8;

/// The identity blob: index id, log first page, log pages, and the payload
/// codec version the store was created with (a byte, absent in stores
/// created before it: their log may hold records of FAST's earlier codec,
/// see [`FastStore::check_payload_codec`]; builds before it refuse the
/// longer blob as malformed, so they never misread this build's records).
fn identity_blob(index_id: u128, log: &LogPlacement) -> Vec<u8> {
    let mut b = Vec::with_capacity(IDENTITY_BYTES + 1);
    b.extend_from_slice(&index_id.to_le_bytes());
    b.extend_from_slice(&log.first_page.to_le_bytes());
    b.extend_from_slice(&log.pages.to_le_bytes());
    b.push(PAYLOAD_CODEC_VERSION);
    b
}

/// Index id, log range and creation payload codec version (0 for a 32-byte blob).
fn parse_identity(blob: &[u8]) -> Result<(u128, PageId, u64, u8)> {
    let bad = || Error::corrupt(Some(0), "the FAST identity blob of page 0 is malformed");
    let codec = match blob.len() {
        IDENTITY_BYTES => 0,
        n if n == IDENTITY_BYTES + 1 => blob.get(IDENTITY_BYTES).copied().unwrap_or(0),
        _ => return Err(bad()),
    };
    let id = blob
        .get(0..16)
        .and_then(|b| b.try_into().ok())
        .map(u128::from_le_bytes)
        .ok_or_else(bad)?;
    let first = blob
        .get(16..24)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(bad)?;
    let pages = blob
        .get(24..32)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(bad)?;
    Ok((id, first, pages, codec))
}

impl FastStore {
    /// Formats `device` as an empty store with its log at `log` (page 0 and
    /// a fresh log, both synced).
    pub fn create(
        device: Arc<dyn PageDevice>,
        log: LogPlacement,
        config: FastConfig,
    ) -> Result<Self> {
        config.verify()?;
        let node_capacity = Self::node_capacity(&device, &log)?;
        let index_id: u128 = loop {
            let id: u128 = rand::random();
            if id != 0 {
                break id;
            }
        };
        let page_size = device.page_size();
        crate::units::check_page_size(page_size)?;
        FORMAT.check_page_size(page_size)?;
        Header {
            page_size,
            with_payload: config.with_payload,
            meta: TreeMeta::default(),
            next_page: 1,
            lsn: 0,
            user_meta: identity_blob(index_id, &log),
            free: Vec::new(),
        }
        .write(&FORMAT, device.as_ref())?;
        device.sync()?;
        let lc = LogConfig::new(index_id)
            .with_durability(config.durability)
            .with_format(config.log_format);
        let l = Log::create(Arc::clone(&log.device), log.first_page, log.pages, lc)?;
        let alloc = PageAllocator::new(1, node_capacity)?;
        let room = l.capacity_bytes() / 4;
        let client = l
            .client_frames()
            .then(|| ClientLog::default().with_room(room));
        let mut store = Self::assemble(device, l, log, config, alloc)?;
        store.client = client;
        Ok(store)
    }

    /// Checks `config` and the identity page of an existing store; its node
    /// capacity in pages, its index id and the payload codec version it was
    /// created with (0: before the shared codec).
    fn check_existing(
        device: &Arc<dyn PageDevice>,
        log: &LogPlacement,
        config: &FastConfig,
    ) -> Result<(u64, u128, u8)> {
        config.verify()?;
        let node_capacity = Self::node_capacity(device, log)?;
        let (index_id, hdr) = Self::identity(device.as_ref(), log, config)?;
        let created_codec = parse_identity(&hdr.user_meta)?.3;
        Ok((node_capacity, index_id, created_codec))
    }

    /// Opens a store made by [`create`](Self::create) and runs restart (see
    /// the module documentation). `log` must name the range given at creation.
    #[cfg(test)]
    pub fn open(
        device: Arc<dyn PageDevice>,
        log: LogPlacement,
        config: FastConfig,
    ) -> Result<Self> {
        Self::open_with_placement(device, log, config, Placement::None)
    }

    /// [`open`](Self::open) with `placement` in force during restart: the
    /// page images restart writes back, the nodes it flushes and every node
    /// written from then on are hinted to the tier `placement` gives their
    /// level ([`crate::store::placement`]), as
    /// [`with_placement`](Self::with_placement) does for a store already open.
    pub fn open_with_placement(
        device: Arc<dyn PageDevice>,
        log: LogPlacement,
        config: FastConfig,
        placement: Placement,
    ) -> Result<Self> {
        let (node_capacity, index_id, created_codec) =
            Self::check_existing(&device, &log, &config)?;
        if created_codec == 0 {
            Self::check_payload_codec(&log, index_id)?;
        }
        let lc = LogConfig::new(index_id).with_durability(config.durability);
        let opened = open_log(device.as_ref(), node_capacity, &log, lc, config.recovery)?;
        let (l, rec, repair) = (opened.log, opened.rec, opened.repair);
        let alloc = PageAllocator::new(1, node_capacity)?;
        let mut store = Self::assemble(device, l, log, config, alloc)?;
        store.node_placement = placement;
        store.horizon = opened.horizon;
        let mut report = RestartReport::from_recovered(&rec);
        report.add_tail_repair(&repair);
        store.legacy_payloads = created_codec == 0;
        store.restart(&rec)?;
        store.log.note_pages_read(rec.records.pages_read());
        if store.log.client_frames() {
            let room = store.log.capacity_bytes() / 4;
            let client = store.client.take().unwrap_or_default();
            store.client = Some(client.with_room(room));
        }
        store.restart = Some(store.complete_report(report));
        // Restart ends between operations: the table within its budget
        // and the log with room for the next operation, as after a commit.
        store.guard(|s| s.after_commit())?;
        Ok(store)
    }

    /// Opens a store made by [`create`](Self::create) for reading only:
    /// nothing is written to the device or the log and changes are
    /// refused. A log holding changes to replay (the store was not
    /// checkpointed before it closed) is replayed in memory: page images
    /// through an [`ImageOverlay`](crate::storage::overlay::ImageOverlay),
    /// changes into the modifications table. The store's own log object
    /// lives on a scratch in-memory device.
    pub fn open_read_only(
        device: Arc<dyn PageDevice>,
        log: LogPlacement,
        config: FastConfig,
    ) -> Result<Self> {
        let (node_capacity, index_id, created_codec) =
            Self::check_existing(&device, &log, &config)?;
        let reader = LogReader::open(Arc::clone(&log.device), log.first_page, log.pages, index_id)?;
        let horizon = reader.horizon();
        let rec = reader.recover()?;
        // Changes to replay are replayed as a writer would, through a view
        // that keeps the page images in memory: the files stay as they are.
        let device: Arc<dyn PageDevice> = if rec.records.any(needs_replay)? {
            Arc::new(crate::storage::overlay::ImageOverlay::new(device))
        } else {
            device
        };
        let scratch: Arc<dyn PageDevice> = Arc::new(crate::storage::mem::MemDevice::new(
            device.page_size(),
            log.pages,
        )?);
        let lc = LogConfig::new(index_id).with_durability(Durability::None);
        let l = Log::create(scratch, 0, log.pages, lc)?;
        let alloc = PageAllocator::new(1, node_capacity)?;
        let mut store = Self::assemble(device, l, log, config, alloc)?;
        store.horizon = horizon;
        let report = RestartReport::from_recovered(&rec);
        store.legacy_payloads = created_codec == 0;
        store.restart(&rec)?;
        store.restart = Some(store.complete_report(report));
        store.read_only = true;
        Ok(store)
    }

    /// `report` with what replay left behind.
    fn complete_report(&self, mut report: RestartReport) -> RestartReport {
        report.changes_replayed = self.fstats.replayed_records;
        report.pages_restored = self.fstats.restored_pages;
        report.buffered_pages = self.table.len() as u64;
        report.free_pages = self.alloc.free_pages().count() as u64;
        report.records_in_tree = self.meta.records;
        report
    }

    /// What restart did when the store was opened (`None` for a new store).
    pub fn restart_report(&self) -> Option<&RestartReport> {
        self.restart.as_ref()
    }

    /// An empty store on a fresh in-memory device of `page_size`-byte pages,
    /// its log in the device's last pages ([`FastConfig::log_placement`]).
    #[cfg(test)]
    pub fn create_in_memory(page_size: usize, config: FastConfig) -> Result<Self> {
        let device: Arc<dyn PageDevice> = Arc::new(crate::storage::mem::MemDevice::new(
            page_size,
            crate::storage::mem::MemDevice::DEFAULT_CAPACITY,
        )?);
        let log = config.log_placement(&device, None)?;
        Self::create(device, log, config)
    }

    /// Reads page 0: the index id and header, checked against `log` and `config`.
    fn identity(
        device: &dyn PageDevice,
        log: &LogPlacement,
        config: &FastConfig,
    ) -> Result<(u128, Header)> {
        let hdr = Header::read(&FORMAT, device)?;
        if hdr.with_payload != config.with_payload {
            return Err(Error::invalid(
                "the store was created with another entry-payload setting",
            ));
        }
        let (index_id, first, pages, _) = parse_identity(&hdr.user_meta)?;
        log.check_recorded(first, pages)?;
        Ok((index_id, hdr))
    }

    fn node_capacity(device: &Arc<dyn PageDevice>, log: &LogPlacement) -> Result<u64> {
        let node_capacity = log.node_capacity(device)?;
        let layout = LogLayout::on_device(log.device.as_ref(), log.first_page, log.pages)?;
        // The log must hold a few page images beside an operation's records.
        let need = 4 * (RECORD_HEADER + device.page_size()) as u64;
        if layout.capacity_bytes() < need {
            return Err(Error::invalid(format!(
                "a log of {} pages holds {} bytes of records: too small for the page images of a flush (at least {need} bytes)",
                log.pages,
                layout.capacity_bytes()
            )));
        }
        Ok(node_capacity)
    }

    fn assemble(
        device: Arc<dyn PageDevice>,
        log: Log,
        placement: LogPlacement,
        config: FastConfig,
        alloc: PageAllocator,
    ) -> Result<Self> {
        let page_size = device.page_size();
        crate::units::check_page_size(page_size)?;
        let next = alloc.next_page();
        Ok(FastStore {
            max_entries: page::max_entries(page_size, config.with_payload),
            device,
            log,
            placement,
            node_placement: Placement::None,
            config,
            page_size,
            alloc,
            meta: TreeMeta::default(),
            reused: BTreeSet::new(),
            logged: (TreeMeta::default(), next, 0),
            ops: OpBracket {
                current: None,
                next: 1,
            },
            last_op: 0,
            durable_floor: 0,
            legacy_payloads: false,
            horizon: LsnHorizon::none(),
            table: ModTable::new(),
            heap: FlushHeap::new(config.flush_unit),
            clock: 0,
            rng: config.seed,
            staged: Staging::default(),
            held_last: None,
            max_op_bytes: 0,
            failed: None,
            upkeep_due: false,
            read_only: false,
            imaged: Default::default(),
            imaged_epoch: 0,
            pages_unsynced: false,
            restart: None,
            fstats: FastStats::default(),
            clean_lsn: None,
            client: None,
            inner: Mutex::new(Inner::default()),
        })
    }

    /// Hints every node written from now on (flushes, checkpoints, bulk
    /// loads) to the tier `placement` gives its level
    /// ([`crate::store::placement`]); the log's pages are never hinted.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.node_placement = placement;
        self
    }

    /// M: the most entries a node of this store holds.
    #[cfg(test)]
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// The page allocator.
    #[cfg(test)]
    pub fn allocator(&self) -> &PageAllocator {
        &self.alloc
    }

    /// Bytes of the modifications table (shared accounting).
    #[cfg(test)]
    pub fn table_bytes(&self) -> usize {
        self.table.bytes()
    }

    /// Nodes with a row in the table.
    #[cfg(test)]
    pub fn buffered_nodes(&self) -> usize {
        self.table.len()
    }

    /// The log's counters.
    #[cfg(test)]
    pub fn log_stats(&self) -> super::log::LogStats {
        self.log.stats()
    }

    /// FAST-specific counters.
    #[cfg(test)]
    pub fn fast_stats(&self) -> FastStats {
        self.fstats
    }

    /// Makes every committed operation durable now (whatever the mode),
    /// the held group of the compact format included.
    pub fn sync_log(&mut self) -> Result<()> {
        self.guard(|s| {
            s.log_group()?;
            s.log.sync()
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means another thread panicked; the state is consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_alive(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::invalid(
                "the FAST store is open read-only: it accepts no change",
            ));
        }
        crate::error::refuse_after_failure(
            &self.failed,
            "the FAST store failed earlier and accepts no change until reopened",
        )
    }

    /// Runs `f`; an error other than bad input makes the store fail (sticky).
    fn guard<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.check_alive()?;
        let r = f(self);
        crate::error::keep_failure(&mut self.failed, r)
    }

    fn check_node_page(&self, id: PageId) -> Result<()> {
        checks::check_node_page(&self.alloc, id)
    }

    fn check_entries(&self, entries: impl IntoIterator<Item = Entry>) -> Result<()> {
        entries
            .into_iter()
            .try_for_each(|e| checks::check_payload(&e, self.config.with_payload))
    }

    fn check_len(&self, n: usize) -> Result<()> {
        checks::check_len(
            n,
            self.max_entries,
            self.page_size,
            self.config.with_payload,
        )
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn note_peak(&mut self) {
        let b = self.table.bytes() as u64;
        self.fstats.peak_table_bytes = self.fstats.peak_table_bytes.max(b);
        let mut inner = self.lock();
        inner.stats.peak_buffer_bytes = inner.stats.peak_buffer_bytes.max(b);
    }

    /// The node as stored on the device (checksum verified).
    fn stored(&self, id: PageId) -> Result<Node> {
        self.stored_batch(&[id])?
            .pop()
            .ok_or_else(|| Error::corrupt(Some(id), "node missing from a read"))
    }

    /// The stored versions of nodes `ids` (sorted, distinct), read as one
    /// device batch and counted as node reads.
    fn stored_batch(&self, ids: &[PageId]) -> Result<Vec<Node>> {
        if ids.is_empty() {
            // Every node asked for was in memory: no device request.
            return Ok(Vec::new());
        }
        let (nodes, times) =
            read_decoded_timed(&*self.device, ids, |page, id| {
                decode_stored(page, id, &self.horizon)
            })?;
        let mut inner = self.lock();
        inner.stats.times.add(&times);
        for node in &nodes {
            inner.stats.record_node_read(node.level);
        }
        Ok(nodes)
    }

    /// RetrieveNode for many nodes (what [`Self::retrieve`] returns for
    /// each, in order), the stored versions needed read as one device batch.
    fn retrieve_batch(&self, ids: &[PageId]) -> Result<Vec<Node>> {
        let mut wanted: Vec<PageId> = ids
            .iter()
            .copied()
            .filter(|id| {
                !matches!(
                    self.table.get(*id).map(|r| &r.row),
                    Some(Row::New(_) | Row::Del { .. })
                )
            })
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let stored: HashMap<PageId, Node> = wanted
            .iter()
            .copied()
            .zip(self.stored_batch(&wanted)?)
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let row = self.table.get(id).map(|r| &r.row);
            let node = match row {
                Some(Row::New(n)) => {
                    self.lock().stats.buffer_hits += 1;
                    n.clone()
                }
                Some(Row::Del { .. }) => {
                    return Err(Error::invalid(format!(
                        "no node at page {id}: the node was deleted"
                    )))
                }
                Some(Row::Mod { .. }) | None => {
                    self.lock().stats.buffer_misses += 1;
                    // A page asked for twice is read once.
                    let mut n = stored.get(&id).cloned().ok_or_else(|| {
                        Error::corrupt(Some(id), "node missing from a batch read")
                    })?;
                    if let Some(Row::Mod { mods, sorted, .. }) = row {
                        table::apply_mods(&mut n, mods, *sorted);
                    }
                    n
                }
            };
            out.push(node);
        }
        Ok(out)
    }

    /// RetrieveNode (Alg. 3): the newest version of node `id`, the table
    /// checked before the device. `count`: a `get` (hit/miss counted).
    fn retrieve(&self, id: PageId, count: bool) -> Result<Node> {
        match self.table.get(id).map(|r| &r.row) {
            Some(Row::New(n)) => {
                if count {
                    self.lock().stats.buffer_hits += 1;
                }
                Ok(n.clone())
            }
            Some(Row::Del { .. }) => Err(Error::invalid(format!(
                "no node at page {id}: the node was deleted"
            ))),
            Some(Row::Mod { mods, sorted, .. }) => {
                if count {
                    self.lock().stats.buffer_misses += 1;
                }
                let mut n = self.stored(id)?;
                table::apply_mods(&mut n, mods, *sorted);
                Ok(n)
            }
            None => {
                if count {
                    self.lock().stats.buffer_misses += 1;
                }
                self.stored(id)
            }
        }
    }

    /// Allocates a page; a page from the durable free list is remembered
    /// (logged with META) until the next checkpoint.
    fn allocate(&mut self) -> Result<PageId> {
        let end = self.alloc.next_page();
        let id = self.alloc.allocate()?;
        if id < end {
            self.reused.insert(id);
        }
        Ok(id)
    }

    /// The common META part and the pages reused since the last checkpoint.
    fn meta_record(&self) -> (MetaState, Vec<PageId>) {
        let m = MetaState {
            meta: self.meta.clone(),
            next_page: self.alloc.next_page(),
        };
        (m, self.reused.iter().copied().collect())
    }

    /// The payload codec of the store's log.
    fn codec(&self) -> PayloadCodec {
        self.log.format().payload_codec()
    }

    /// The running operation (an error outside one).
    fn current_op(&self) -> Result<OpId> {
        self.ops
            .current
            .ok_or_else(|| Error::invalid("a change outside an operation: call begin_op first"))
    }
}

impl NodeStore for FastStore {
    fn get(&self, id: PageId) -> Result<Arc<Node>> {
        self.check_node_page(id)?;
        self.lock().stats.node_gets += 1;
        self.retrieve(id, true).map(Arc::new)
    }

    /// Nodes in the table from memory; the stored versions of the others
    /// read as one device batch, then brought up to date as `get` does.
    fn get_batch(&self, ids: &[PageId]) -> Result<Vec<Arc<Node>>> {
        for &id in ids {
            self.check_node_page(id)?;
        }
        self.lock().stats.node_gets += ids.len() as u64;
        Ok(self
            .retrieve_batch(ids)?
            .into_iter()
            .map(Arc::new)
            .collect())
    }

    fn begin_op(&mut self) -> Result<OpId> {
        self.check_alive()?;
        self.guard(|s| s.log.maybe_sync())?;
        // (Never in the middle of an operation: `begin` refuses that below.)
        if self.ops.current.is_none() {
            if self.upkeep_due {
                self.guard(Self::after_commit)?;
                self.upkeep_due = false;
            }
            // Room for the operation's log writes (see `Log::reserve_ahead`).
            self.log.reserve_ahead()?;
        }
        let op = self.ops.begin()?;
        if !self.groups_operations() {
            self.staged.clear();
        }
        Ok(op)
    }

    fn create(&mut self, level: u16, mut entries: Vec<Entry>) -> Result<PageId> {
        self.check_alive()?;
        entries.sort_unstable_by_key(|e| e.key);
        self.check_len(entries.len())?;
        self.check_entries(entries.iter().copied())?;
        if entries
            .windows(2)
            .any(|w| matches!(w, [a, b] if a.key == b.key))
        {
            return Err(Error::invalid("duplicate entry key in a created node"));
        }
        self.current_op()?;
        let id = self.allocate()?;
        let node = Node { level, entries };
        self.staged.create(id, &node);
        let ts = self.tick();
        let t = self.table.create(id, node, ts);
        self.heap.touch(id, t.before, t.after, Some(ts));
        self.lock().stats.nodes_created += 1;
        self.note_peak();
        Ok(id)
    }

    fn modify(&mut self, id: PageId, level: u16, changes: &[EntryChange]) -> Result<()> {
        self.check_alive()?;
        self.current_op()?;
        self.check_node_page(id)?;
        self.check_entries(changes.iter().filter_map(|c| match c {
            EntryChange::Upsert(e) => Some(*e),
            EntryChange::Remove(_) => None,
        }))?;
        // Validation against the buffered row only: FAST does not read a
        // node again to modify it (its descent already did).
        match self.table.get(id).map(|r| &r.row) {
            Some(Row::New(n)) => {
                if n.level != level {
                    return Err(Error::invalid(format!(
                        "node {id} is at level {} but was modified as a level-{level} node",
                        n.level
                    )));
                }
                let mut after = n.clone();
                table::apply(&mut after, changes.iter().copied());
                self.check_len(after.entries.len())?;
            }
            Some(Row::Mod { level: l, .. }) if *l != level => {
                return Err(Error::invalid(format!(
                    "node {id} is at level {l} but was modified as a level-{level} node"
                )));
            }
            _ => {}
        }
        let ts = self.tick();
        let t = self.table.modify(id, level, changes, ts)?;
        self.staged.modify(id, level, changes);
        self.heap.touch(id, t.before, t.after, Some(ts));
        self.note_peak();
        Ok(())
    }

    fn delete(&mut self, id: PageId) -> Result<()> {
        self.check_alive()?;
        self.current_op()?;
        self.check_node_page(id)?;
        let level = self.table.get(id).map(|r| r.level()).unwrap_or(0);
        self.alloc.release(id)?;
        self.staged.delete(id, level);
        let ts = self.tick();
        let t = self.table.delete(id, level, ts);
        self.heap.touch(id, t.before, t.after, Some(ts));
        self.lock().stats.nodes_deleted += 1;
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
        self.check_alive()?;
        if self.ops.current != Some(op) {
            return self.ops.end(op);
        }
        if let Some(c) = self.client.as_mut() {
            c.committed();
        }
        self.guard(|s| s.commit_records(op))?;
        self.ops.end(op)?;
        self.last_op = op;
        self.lock().stats.ops_committed += 1;
        self.upkeep_due = true;
        Ok(())
    }

    fn meta(&self) -> TreeMeta {
        self.meta.clone()
    }

    fn checkpoint(&mut self) -> Result<()> {
        self.ops.check_idle("checkpoint")?;
        if self.table.is_empty()
            && self.clean_lsn == Some(self.log.last_lsn())
            && !self.client.as_ref().is_some_and(ClientLog::generation_pending)
        {
            // Nothing happened since the newest checkpoint or bulk load.
            return self.check_alive();
        }
        self.guard(|s| {
            s.checkpoint_inner()?;
            s.compact_log()
        })?;
        // Every buffered page is written and the log compacted.
        self.upkeep_due = false;
        self.clean_lsn = Some(self.log.last_lsn());
        Ok(())
    }

    /// Writes the nodes to fresh pages in batches, bypassing the
    /// modifications table and the log, syncs the device once, then
    /// publishes the tree with a clean log checkpoint (one superblock write
    /// and sync; see [`crate::store::bulk`]).
    fn bulk_load(&mut self, build: BulkBuild<'_>) -> Result<()> {
        self.check_alive()?;
        bulk::check_target(&self.meta, self.ops.current)?;
        let format = PageFormat {
            max_entries: self.max_entries,
            with_payload: self.config.with_payload,
            lsn: self.log.last_lsn(),
            placement: self.node_placement,
        };
        let written = bulk::write_tree(&*self.device, &mut self.alloc, format, build)
            .map_err(|f| f.record_in(&mut self.failed))?;
        written.count_in(&mut self.lock().stats);
        self.meta = written.meta;
        self.guard(|s| {
            // The new pages are durable before the superblock names them.
            s.device.sync()?;
            s.checkpoint_inner()
        })?;
        self.clean_lsn = Some(self.log.last_lsn());
        Ok(())
    }

    fn last_committed_op(&self) -> Option<OpId> {
        (self.last_op > 0).then_some(self.last_op)
    }

    /// The newest operation whose COMMIT is durable (acknowledged).
    fn durable_op(&self) -> Option<OpId> {
        let floor = (self.durable_floor > 0).then_some(self.durable_floor);
        self.log.durable_op().max(floor)
    }

    fn durability(&self) -> Option<Durability> {
        Some(self.config.durability)
    }

    /// Switches between modes that protect flushes alike
    /// ([`Durability::check_switch`]).
    fn set_durability(&mut self, durability: Durability) -> Result<()> {
        self.config.durability.check_switch(durability)?;
        self.log.set_durability(durability)?;
        self.config.durability = durability;
        Ok(())
    }

    /// [`FastStore::sync_log`]: the held group logged, the log synced.
    fn sync_committed(&mut self) -> Result<bool> {
        self.check_alive()?;
        self.sync_log()?;
        Ok(true)
    }

    fn client_log(&mut self) -> Option<&mut ClientLog> {
        self.client.as_mut()
    }

    fn client_log_ref(&self) -> Option<&ClientLog> {
        self.client.as_ref()
    }

    fn nodes_in_use(&self) -> Option<u64> {
        Some(self.alloc.allocated_count())
    }

    /// The peak restarts at the bytes the table holds now (FAST keeps no
    /// node cache; `peak_table_bytes` of [`FastStats`] stays the peak
    /// since the store was opened).
    fn restart_buffer_peak(&mut self) {
        let b = self.table.bytes() as u64;
        self.lock().stats.peak_buffer_bytes = b;
    }

    fn stats(&self) -> StoreStats {
        let mut s = self.lock().stats.clone();
        let l = self.log.stats();
        s.log_records = l.records;
        s.log_bytes = l.bytes;
        s.log_pages_written = l.pages_written;
        s.compactions = self.fstats.compactions;
        s.log_syncs = l.syncs;
        s.page_images = self.fstats.page_images;
        s.page_image_bytes = self
            .fstats
            .page_images
            .saturating_mul((RECORD_HEADER + self.page_size) as u64);
        s.forced_flushes = self.fstats.emergency_flushes;
        s
    }
}
