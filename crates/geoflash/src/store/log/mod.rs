//! The sequential modification log shared by the eFIND and FAST stores.
//!
//! The log records the entry-level changes a store buffers in memory (NEW,
//! MOD, DEL, META), the end of every operation (COMMIT), the pages a flush
//! made durable (FLUSH), full page images protecting in-place flushes against
//! torn writes (PAGE_IMAGE) and checkpoints (CHECKPOINT). Record payloads are
//! opaque bytes to the log, except what recovery must understand: the
//! operation a record belongs to and the pages a FLUSH covers (see
//! [`record`]).
//!
//! Modules, after fjall's journal:
//! - [`record`]: the framed record format and the log-page format;
//! - [`writer`]: [`Log`], appends, group commit, `flush`/`sync`, capacity,
//!   compaction;
//! - [`reader`]: [`LogReader`], scans oldest-first and newest-first; a torn
//!   tail is normal and ignored, damage before the tail is an error naming the
//!   position;
//! - [`recovery`]: the restart/compaction algorithm shared by eFIND
//!   (Algorithm 7) and FAST (Algorithm 5): the rules; `survival` and
//!   `passes` apply them in forward passes whose memory does not grow with
//!   the log (a live region above 16 MiB of decoded records is read again
//!   by each pass, except in the papers' per-change format);
//! - [`horizon`]: [`LsnHorizon`], the node-page LSNs that prove a
//!   recovered log lost durable records (damage taken for a torn tail);
//! - [`placement`]: [`LogPlacement`], where a store's log lives (the one
//!   placement API of both stores) and how it is sized.
//!
//! # Layout on the device
//!
//! The log occupies a page range `first_page .. first_page + pages` of a
//! [`PageDevice`]: the whole of `log.dat` next to `pages.dat` on real devices,
//! or a region of the same simulated device. All its I/O goes through the
//! device, so the device counters include it; [`LogStats`] counts it apart.
//!
//! | pages of the range | content |
//! |---|---|
//! | 0, 1 | superblock slots (double-buffered, see below) |
//! | 2 .. 2 + R | log region 0 |
//! | 2 + R .. 2 + 2R | log region 1 |
//!
//! with `R = (pages − 2) / 2` ([`LogLayout::region_pages`]). One region is
//! *live*; the other receives the next compaction.
//!
//! **Interleaved regions** (superblock versions 10 and 11). The table above
//! is the layout of logs created before them. A compact log created now
//! lays its two regions out in alternating *chunks* of `C` pages (a power
//! of two, at most 1 MiB and at most an eighth of a region, recorded in the
//! superblock): positions `kC .. (k+1)C` of region 0, then the same
//! positions of region 1, then the next chunk of each; the last, partial
//! chunks of the two regions follow each other at the end
//! ([`LogLayout::region_page`]). Both regions' positions 0, 1, 2, … stay
//! near the start of the range, so a log's file (`log.dat`, which grows as
//! pages are written) is about twice the largest position either region
//! reached rather than the whole of both regions: with the contiguous
//! layout, the first restart into region 1 made `log.dat` of a 300-object
//! index 4.3 GB long (sparse, but copied whole by tools that do not keep
//! holes).
//!
//! **Superblock.** Written with a CRC-32C, in slot `seq % 2`, so a write
//! never overwrites the newest valid copy; at open the valid slot with the
//! higher sequence number wins and a torn slot is ignored. It names the index
//! (a 128-bit id: a log from another index is refused), a random log id
//! (stale pages of an earlier log on the same device are refused), the live
//! region and its epoch, and the highest epoch ever reserved.
//!
//! **Log pages.** A region is a byte stream cut into pages; each page carries
//! a header (magic, CRC-32C, log id, epoch, position, durable position, data
//! length, see [`record`]) and up to `page_size − 40` bytes of the stream.
//! Records may span pages. A page is valid when its checksum is right and it
//! names this log, the live epoch and its own position; the stream ends at
//! the first invalid page.
//!
//! **No rewrite in place.** A log page that holds acknowledged records is
//! never written again: `flush` pads the last, partial page and the next flush
//! starts at the next page position (the "next page" choice rather than
//! ping-pong). A torn write can therefore only damage pages that held nothing
//! acknowledged. The price is one page per forced flush even when it carries
//! a few bytes; group commit amortises it, and flushes that need no
//! durability (the buffer filling up) write whole pages only and keep the
//! remainder in memory.
//!
//! **Epochs.** Each time a region is (re)written, by compaction or by restart,
//! it gets a fresh epoch, first *reserved* in the superblock (one superblock
//! write and sync) before any page of it is written, so that pages left over
//! by an interrupted compaction can never be taken for pages of a later one.
//!
//! **Compaction and restart switch atomically.** [`Log::compact`] (and
//! [`Log::open`], which runs restart) syncs the live log, scans it, keeps the
//! records that survive ([`recovery`]), writes them to the other region, syncs,
//! and then writes the superblock naming the other region: the switch is one
//! superblock write. A crash before that write is durable leaves the old log
//! live and whole; after it, the new one. This replaces the design's "write
//! new file, sync, rename, sync directory" with the same guarantee and works
//! on a region of a simulated device as well as on `log.dat`.
//!
//! **Detecting damage before the tail.** Each page records how many pages of
//! its region were durable when it was written. If the first invalid page is
//! followed (within [`LOOKAHEAD_PAGES`] pages) by a valid page saying that the
//! invalid one had been made durable, the damage is not a torn tail but
//! corruption, and opening fails with an error naming the page. The
//! look-ahead ends at the first page not written in the live epoch; a page
//! whose magic is damaged but whose header still names this log and epoch
//! does not end it. Damage to the last synced batch is indistinguishable from a torn
//! tail in the log pages themselves, as in every write-ahead log without an external
//! end marker: compact logs of this build therefore end each synced batch
//! with a seal page, the batch's parity, from which one damaged page is
//! rebuilt ([`seal`]; logs without seals, of older builds or of the other
//! formats, are read as before); the node pages hold further evidence when
//! they were written after it, and the stores check them ([`horizon`]).
//!
//! # How a store uses the log
//!
//! - Each operation: `append` its NEW / MOD / DEL / META records with its
//!   operation id, then [`Log::commit`]; the durability mode decides when the
//!   commit is durable ([`Log::durable_op`] tells which operations are
//!   acknowledged).
//! - Each flush (between operations): for pages written in place, `append`
//!   a PAGE_IMAGE of each (full new content, torn-write protection), then
//!   [`Log::sync_to`] the newest LSN the pages contain (the log is durable
//!   before the page), write the pages, sync the page device, then `append`
//!   FLUSH of the pages. After a crash before the FLUSH, the images restore
//!   pages that tore; after it, images and older records are obsolete.
//! - When [`Log::fill_ratio`] passes the store's threshold, or `append`
//!   returns [`Error::DeviceFull`]: [`Log::compact`] between operations; if
//!   the [`CompactReport`] shows too little freed, flush pages (FLUSH records
//!   make their records obsolete) and compact again.
//! - A checkpoint: flush everything, sync the pages, then
//!   [`Log::checkpoint`] with the store's state as payload: the log is synced
//!   and switches to a fresh, empty epoch whose superblock keeps the
//!   CHECKPOINT record (and the newest COMMIT) as its *base* (one superblock
//!   write and sync; a payload too large for the superblock is written as
//!   the first records of the new region instead). The next open reads the
//!   two superblock slots and the new region's first page (plus one probe
//!   past it) and replays nothing; after a crash it reads only what was
//!   appended since the checkpoint.
//! - At open: [`Log::open`] returns the survivors in their original order
//!   ([`Recovered::records`]); replay them into the buffer. Operation ids of
//!   new operations start above [`Recovered::max_op`]. A read-only open uses
//!   [`LogReader`] and [`LogReader::recover`], which write nothing.
//!
//! Restart always moves to a fresh epoch of the other region (even when
//! there are no survivors): that is what lets the log never continue a
//! region whose tail a crash left in an unknown state. Its cost is one scan,
//! the survivors' pages, two superblock writes and three syncs; when the
//! survivors are only a base (a CHECKPOINT and the newest COMMIT: the log
//! of a cleanly closed index), one superblock write and one sync.
//!
//! # Log formats
//!
//! [`LogFormat`], kept in the superblock's version (an opened log keeps its
//! own): *per-change* (the papers': a page image and two syncs at every
//! protected flush), *first-image* (an image only at a page's first flush
//! in an epoch, flushes batched behind one log sync) and *compact* (the
//! default: the first-image protocol, and stores may log a group of
//! operations as one set of net page changes ending in one COMMIT, with
//! [`Log::defer_commit`] counting the held operations toward the group
//! commit and [`Log::commit_deferred`] making them durable together, and
//! its records framed with varints and no per-record checksum
//! ([`record::Framing`]). The page format is the same in all three.
//!
//! # Durability modes
//!
//! [`Durability::Sync`] syncs at every commit; [`Durability::Group`] syncs
//! every `ops` commits or when the oldest unsynced commit is `millis` old
//! (checked at each commit and by [`Log::maybe_sync`]: there is no background
//! thread); [`Durability::None`] never syncs on its own, as in the papers.
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::storage::{PageDevice, PageId};
use crate::units::check_page_size;
use crate::{Error, Result};

pub mod client;
mod cursor;
pub mod entry_refs;
pub mod horizon;
pub mod kept;
pub mod payload;
pub(crate) mod passes;
pub mod placement;
pub mod reader;
pub mod record;
pub mod recovery;
pub mod report;
mod seal;
mod superblock;
mod survival;
pub mod writer;

#[cfg(test)]
mod recovery_mode_tests;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use superblock::rewrite_as_codec_0;

internal! {
    pub use client::{ClientLog, RecoveredClient};
}
pub use entry_refs::EntryMemo;
pub use horizon::LsnHorizon;
pub use payload::{CheckpointState, MetaState, PayloadCodec, PayloadEncoding};
pub use placement::{LogPlacement, LogSize};
pub use reader::{repair_corrupt_tail, LogReader, TailRepair};
internal! {
    pub use record::{Record, RecordKind};
}
internal! {
    pub use kept::KeptRecords;
}
pub use recovery::{FlushRule, Recovered};
#[cfg(test)]
pub use recovery::recover_log;
#[cfg(test)]
pub use recovery::{recover, recover_with};
pub use report::{needs_replay, RestartReport};
pub use writer::Log;

/// Log sequence number: 1 for the first record ever appended, strictly
/// increasing; 0 means "no record".
pub type Lsn = u64;

/// Operation id used by records that belong to no operation (FLUSH,
/// PAGE_IMAGE, CHECKPOINT, or changes made outside an operation).
pub const NO_OP: crate::store::OpId = 0;

/// Version of the stores' payload codec ([`payload`]) this build writes,
/// kept in every superblock (byte 13; 0 in logs of builds before it).
pub const PAYLOAD_CODEC_VERSION: u8 = 1;

/// The payload codec version ([`PAYLOAD_CODEC_VERSION`], or 0 for a log
/// written before it existed) of the log in the `pages` pages from
/// `first_page` of `dev`, read from its newest superblock (two page reads;
/// the log is not opened, nothing is written).
pub fn payload_codec_version(
    dev: SharedDevice,
    first_page: PageId,
    pages: u64,
    index_id: u128,
) -> Result<u8> {
    let layout = LogLayout::on_device(dev.as_ref(), first_page, pages)?;
    let mut read = 0;
    superblock::Superblock::read_with_codec(&dev, &layout, index_id, &mut read).map(|(_, c)| c)
}

/// Pages examined past the first invalid page to tell a torn tail from
/// corruption before the tail.
pub const LOOKAHEAD_PAGES: u64 = 64;

/// What opening a log does with damage before its tail (after fjall's
/// `RecoveryMode`). A torn tail, the normal end after a crash, is ignored in
/// both modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum RecoveryMode {
    /// Damage that a later durable page proves, or a bad record inside
    /// valid pages, is an error naming the page: nothing is dropped.
    #[default]
    #[serde(rename = "absolute-consistency")]
    AbsoluteConsistency,
    /// The first damaged page is taken as the end of the log
    /// (`repair_corrupt_tail`): it, the later pages and the operations
    /// they held are dropped, and the restart report says how many pages
    /// and records. Pages the dropped operations had already written in
    /// place stay as they are: check the index afterwards.
    #[serde(rename = "tolerate-corrupt-tail")]
    TolerateCorruptTail,
}

impl RecoveryMode {
    /// True for [`RecoveryMode::AbsoluteConsistency`] (the default).
    pub fn is_default(&self) -> bool {
        *self == RecoveryMode::AbsoluteConsistency
    }
}

/// When commits become durable. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Durability {
    /// Every commit is durable when `Log::commit` returns.
    Sync,
    /// Durable every `ops` commits or when the oldest unsynced commit is `millis` old.
    Group {
        /// Commits per sync (at least 1).
        ops: u32,
        /// Longest wait of a commit for its sync, in milliseconds.
        millis: u32,
    },
    /// Nothing is forced: durable only at explicit syncs, compactions and checkpoints.
    None,
}

impl Default for Durability {
    /// `group`: durable within 10 ms, and at least every 1,024 commits.
    /// The time bound is what a user relies on; the count only bounds the
    /// work a crash can take back when commits come faster than 100 000 a
    /// second. (The papers' experiments used 64 commits or 10 ms; the seed
    /// workloads pin `group:64,10`.)
    fn default() -> Self {
        Durability::Group {
            ops: 1024,
            millis: 10,
        }
    }
}

impl Durability {
    /// Parses `sync`, `none`, `group` (defaults) or `group:N,T` (N commits, T milliseconds).
    pub fn parse(s: &str) -> Result<Durability> {
        let t = s.trim();
        match t {
            "sync" => Ok(Durability::Sync),
            "none" => Ok(Durability::None),
            "group" => Ok(Durability::default()),
            _ => {
                let rest = t.strip_prefix("group:").ok_or_else(|| {
                    Error::invalid(format!(
                        "durability {s:?}: expected sync, group, group:N,T or none"
                    ))
                })?;
                let (n, ms) = rest.split_once(',').ok_or_else(|| {
                    Error::invalid(format!(
                        "group commit {rest:?}: expected N,T (commits, milliseconds)"
                    ))
                })?;
                let ops: u32 = n.trim().parse().map_err(|_| {
                    Error::invalid(format!("group commit count {n:?} is not a number"))
                })?;
                let millis: u32 = ms.trim().parse().map_err(|_| {
                    Error::invalid(format!(
                        "group commit time {ms:?} is not a number of milliseconds"
                    ))
                })?;
                let d = Durability::Group { ops, millis };
                d.validate()?;
                Ok(d)
            }
        }
    }

    /// A group commit that never syncs by itself: the operations become
    /// durable at the next explicit sync or checkpoint, while flushes stay
    /// protected against torn writes. What a batch of operations uses when
    /// only its end must be durable (a build, like one SQL transaction).
    pub const UNBOUNDED_GROUP: Durability = Durability::Group {
        ops: u32::MAX,
        millis: u32::MAX,
    };

    /// Whether flushes are protected against torn writes (page images in
    /// the log): every mode but `none`, the papers' mode.
    pub fn protects_flushes(self) -> bool {
        self != Durability::None
    }

    /// Checks that an open store may switch from this mode to `to`: any
    /// change that keeps flushes protected (or unprotected). Switching
    /// between `none` and a protecting mode is refused, as it changes how
    /// the pages already flushed in this log epoch were written.
    pub fn check_switch(self, to: Durability) -> Result<()> {
        to.validate()?;
        if self.protects_flushes() != to.protects_flushes() {
            return Err(Error::invalid(format!(
                "cannot switch an open store from durability {self} to {to}: \
                 `none` protects no flush, so choose it when the index is created"
            )));
        }
        Ok(())
    }

    /// Checks the parameters (a group of at least one commit).
    pub fn validate(&self) -> Result<()> {
        if let Durability::Group { ops: 0, .. } = self {
            return Err(Error::invalid(
                "group commit needs at least 1 operation per sync",
            ));
        }
        Ok(())
    }
}

/// Prints what [`Durability::parse`] reads back: `sync`, `none` or `group:N,T`.
impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Durability::Sync => f.write_str("sync"),
            Durability::None => f.write_str("none"),
            Durability::Group { ops, millis } => write!(f, "group:{ops},{millis}"),
        }
    }
}

/// How the stores use the log; kept in the superblock (its format version),
/// so an index keeps the format it was created with. See the module
/// docs ("Log formats").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum LogFormat {
    /// The papers' log (superblock version 2): one record per changed
    /// entry, a full page image at every protected flush, two syncs per
    /// flush. The seed workloads that reproduce the papers pin it.
    #[serde(rename = "per-change")]
    PerChange,
    /// Superblock version 3: a page image only at the first flush of a
    /// page in a log epoch, flushes batched behind one log sync, no
    /// page-device sync per flush; one set of records per operation.
    #[serde(rename = "first-image")]
    FirstImage,
    /// The default (superblock version 4): the first-image flush protocol,
    /// and both logged stores (eFIND and FAST) log a *group* of operations
    /// at once: the net changes of the pages the group touched (one NEW,
    /// MOD or DEL per page, a MOD carrying only the newest version of each
    /// changed entry), one META and one COMMIT of the group's last
    /// operation, written when the durability mode makes the group
    /// durable or before a page is written. eFIND's compact logs are of
    /// superblock version 5: entries already logged are named by key,
    /// record headers and FLUSH page lists are written as differences
    /// (`entry_refs`, `LogConfig::entry_refs`); FAST's stay version 4.
    /// See the module docs ("Log formats").
    #[default]
    #[serde(rename = "compact")]
    Compact,
}

impl LogFormat {
    /// Parses `per-change`, `first-image` or `compact`.
    pub fn parse(s: &str) -> Result<LogFormat> {
        match s.trim() {
            "per-change" => Ok(LogFormat::PerChange),
            "first-image" => Ok(LogFormat::FirstImage),
            "compact" => Ok(LogFormat::Compact),
            other => Err(Error::invalid(format!(
                "log format {other:?}: expected compact (the default), first-image or per-change (the papers')"
            ))),
        }
    }

    /// Whether flushes follow the first-image protocol (a page image only
    /// at the first flush of a page in a log epoch).
    pub fn first_image(self) -> bool {
        matches!(self, LogFormat::FirstImage | LogFormat::Compact)
    }

    /// Whether a store may log a group of operations as the net changes of
    /// its pages (one COMMIT for the group).
    pub fn groups_operations(self) -> bool {
        self == LogFormat::Compact
    }

    /// How records are framed in a log of this format.
    pub(crate) fn framing(self) -> record::Framing {
        match self {
            LogFormat::Compact => record::Framing::Compact,
            LogFormat::PerChange | LogFormat::FirstImage => record::Framing::Fixed,
        }
    }

    /// How restart treats FLUSH records in a log of this format.
    pub(crate) fn restart_rule(self) -> FlushRule {
        match self {
            LogFormat::PerChange => FlushRule::Obsolete,
            LogFormat::FirstImage | LogFormat::Compact => FlushRule::KeepFromImage,
        }
    }

    /// How the stores encode the integers of their record payloads in a
    /// log of this format (see [`payload`]).
    pub(crate) fn payload_encoding(self) -> PayloadEncoding {
        match self {
            LogFormat::PerChange | LogFormat::FirstImage => PayloadEncoding::Fixed,
            LogFormat::Compact => PayloadEncoding::Varint,
        }
    }

    /// The payload codec of a log of this format.
    pub(crate) fn payload_codec(self) -> PayloadCodec {
        PayloadCodec::new(self.payload_encoding())
    }

    /// The name [`LogFormat::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::PerChange => "per-change",
            LogFormat::FirstImage => "first-image",
            LogFormat::Compact => "compact",
        }
    }

    /// The serde default of configurations written before the format
    /// existed: they describe per-change logs.
    pub fn per_change() -> LogFormat {
        LogFormat::PerChange
    }
}

impl std::fmt::Display for LogFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The log capacity a store gets when none is given (`log_capacity = 0`):
/// [`PAPERS_LOG_CAPACITY`] for the per-change format, and for the
/// first-image format the larger of that and [`LOG_CAPACITY_PER_BUFFER`]
/// times the memory budget, so that a large buffer is not held back by
/// compactions of a small log (a log's file grows with what it holds:
/// unused capacity costs no disk, see the module docs, "Interleaved
/// regions").
pub fn auto_log_capacity(format: LogFormat, buffer_bytes: usize) -> u64 {
    match format {
        LogFormat::PerChange => PAPERS_LOG_CAPACITY,
        LogFormat::FirstImage | LogFormat::Compact => {
            PAPERS_LOG_CAPACITY.max((buffer_bytes as u64).saturating_mul(LOG_CAPACITY_PER_BUFFER))
        }
    }
}

/// An automatic log capacity `capacity` for a log that shares the node
/// device of `device_bytes` bytes: its two regions take at most a quarter
/// of the device (never less than [`PAPERS_LOG_CAPACITY`] per region), so
/// a large memory budget on a small device leaves room for the nodes.
pub fn cap_to_shared_device(capacity: u64, device_bytes: u64) -> u64 {
    capacity.min((device_bytes / 8).max(PAPERS_LOG_CAPACITY))
}

/// The papers' log capacity: 10 MiB of records.
pub const PAPERS_LOG_CAPACITY: u64 = 10 * 1024 * 1024;

/// Log capacity per byte of memory budget of the first-image format (see
/// [`auto_log_capacity`]; with 4, a build of 200,000 rectangles by
/// insertion at 64 MiB needs no compaction: `docs/benchmarks.md`, "Log
/// formats").
pub const LOG_CAPACITY_PER_BUFFER: u64 = 4;

/// Parameters of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogConfig {
    /// Identity of the index the log belongs to; a log naming another index is refused.
    pub index_id: u128,
    /// When commits become durable.
    pub durability: Durability,
    /// Format of a log created with this configuration (an opened log keeps its own).
    #[serde(default = "LogFormat::per_change")]
    pub format: LogFormat,
    /// A compact log created with this configuration lets NEW and MOD
    /// records name entries already logged by key (superblock version 5,
    /// see [`entry_refs`]); ignored by the other formats. An opened log
    /// keeps what its superblock says.
    #[serde(default)]
    pub entry_refs: bool,
    /// A compact log created with this configuration ends every synced
    /// batch of pages with a seal page, their parity, so that one damaged
    /// page of the last batch is rebuilt instead of being read as a
    /// crash's torn tail (superblock versions 6 and 7, see the module docs,
    /// "Seal pages"); on by
    /// default, ignored by the other formats. An opened log keeps what its
    /// superblock says.
    #[serde(default = "sealed_by_default")]
    pub sealed: bool,
    /// A sealed compact log created with this configuration may hold a
    /// front end's CLIENT frames and name its generation at checkpoints
    /// (superblock versions 8 to 11, see [`client`]); on by default,
    /// ignored by the other formats and without seals. An opened log keeps
    /// what its superblock says.
    #[serde(default = "sealed_by_default")]
    pub client: bool,
    /// A log with CLIENT frames created with this configuration interleaves
    /// its two regions in chunks (superblock versions 10 and 11, see the
    /// module docs, "Interleaved regions"), so its file grows with what it
    /// holds; on by default, ignored by logs without CLIENT frames. An
    /// opened log keeps what its superblock says.
    #[serde(default = "sealed_by_default")]
    pub interleaved: bool,
}

fn sealed_by_default() -> bool {
    true
}

impl LogConfig {
    /// A configuration with the default durability (group commit) and the
    /// per-change format (the stores pass theirs with [`LogConfig::with_format`]).
    pub fn new(index_id: u128) -> Self {
        LogConfig {
            index_id,
            durability: Durability::default(),
            format: LogFormat::PerChange,
            entry_refs: false,
            sealed: true,
            client: true,
            interleaved: true,
        }
    }

    /// The same configuration with interleaved regions or not (for creation
    /// of a log with CLIENT frames, see [`LogConfig::interleaved`]; off
    /// writes the log of the builds before them, superblock versions 8 and
    /// 9).
    #[cfg(any(test, feature = "internals"))]
    pub fn with_interleaved_regions(mut self, on: bool) -> Self {
        self.interleaved = on;
        self
    }

    /// The same configuration with CLIENT frames allowed or not (for
    /// creation of a sealed compact log, see [`LogConfig::client`]; off
    /// writes the log of the builds before them, superblock versions 6
    /// and 7).
    #[cfg(any(test, feature = "internals"))]
    pub fn with_client_frames(mut self, on: bool) -> Self {
        self.client = on;
        self
    }

    /// The same configuration with seal pages on or off (for creation of
    /// a compact log, see [`LogConfig::sealed`]; off writes the log of the
    /// builds before them, superblock versions 4 and 5).
    #[cfg(any(test, feature = "internals"))]
    pub fn with_seals(mut self, on: bool) -> Self {
        self.sealed = on;
        self
    }

    /// The same configuration with entry references on or off (for
    /// creation of a compact log, see [`LogConfig::entry_refs`]).
    pub fn with_entry_refs(mut self, on: bool) -> Self {
        self.entry_refs = on;
        self
    }

    /// The same configuration with another format (for creation).
    pub fn with_format(mut self, format: LogFormat) -> Self {
        self.format = format;
        self
    }

    /// The same configuration with another durability mode.
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
}

/// Counters of one log since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogStats {
    /// Records appended.
    pub records: u64,
    /// Bytes of records appended (framing included).
    pub bytes: u64,
    /// Log pages written (appends and compactions; superblocks apart).
    pub pages_written: u64,
    /// Log pages read (scans at open and compaction; superblocks included).
    pub pages_read: u64,
    /// Device syncs issued by the log.
    pub syncs: u64,
    /// Compactions, restart included.
    pub compactions: u64,
    /// Superblock writes.
    pub superblock_writes: u64,
    /// Records written again by compactions.
    pub records_rewritten: u64,
    /// Log pages trimmed after compactions.
    pub pages_trimmed: u64,
}

/// Where a log lives: a page range of a device, split into two superblock
/// slots and two regions. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLayout {
    /// First page of the range on the device.
    pub first_page: PageId,
    /// Pages in the range.
    pub pages: u64,
    /// Page size of the device.
    pub page_size: usize,
    /// Pages of one chunk of interleaved regions (a power of two), or 0 for
    /// contiguous regions (the layout of superblock versions 1 to 9). Set
    /// from the superblock, see the module docs, "Interleaved regions".
    pub(crate) chunk_pages: u64,
}

/// Pages of the range before the regions (the two superblock slots).
pub(crate) const SUPERBLOCK_PAGES: u64 = 2;

/// Bytes of one chunk of a new log's interleaved regions, at most (see
/// [`LogLayout::chunk_pages_for`]).
pub(crate) const CHUNK_BYTES: u64 = 1 << 20;

impl LogLayout {
    /// A layout of `pages` pages from `first_page` on a device of `page_size`-byte pages.
    /// At least 4 pages (two superblocks and one page per region).
    pub fn new(first_page: PageId, pages: u64, page_size: usize) -> Result<Self> {
        check_page_size(page_size)?;
        if pages < SUPERBLOCK_PAGES + 2 {
            return Err(Error::invalid(format!(
                "a log needs at least 4 pages (two superblocks and two regions), got {pages}"
            )));
        }
        first_page
            .checked_add(pages)
            .ok_or_else(|| Error::invalid("log page range overflows the page numbering"))?;
        Ok(LogLayout {
            first_page,
            pages,
            page_size,
            chunk_pages: 0,
        })
    }

    /// This layout with chunks of `chunk_pages` pages (0: contiguous regions).
    pub(crate) fn with_chunk(mut self, chunk_pages: u64) -> Self {
        self.chunk_pages = chunk_pages;
        self
    }

    /// The chunk a new log in this range interleaves its regions by: the
    /// largest power of two of pages within [`CHUNK_BYTES`] and within an
    /// eighth of a region (at least one page).
    pub(crate) fn chunk_pages_for(&self) -> u64 {
        let cap = (CHUNK_BYTES / self.page_size as u64)
            .min(self.region_pages() / 8)
            .max(1);
        1 << cap.ilog2()
    }

    /// The layout of a log on `dev` from `first_page` for `pages` pages, checked against the device.
    pub fn on_device(dev: &dyn PageDevice, first_page: PageId, pages: u64) -> Result<Self> {
        let layout = LogLayout::new(first_page, pages, dev.page_size())?;
        let end = first_page.saturating_add(pages);
        if end > dev.capacity() {
            return Err(Error::invalid(format!(
                "log pages {first_page}..{end} extend beyond the device's {} pages",
                dev.capacity()
            )));
        }
        Ok(layout)
    }

    /// Pages needed for a log whose live region holds `capacity_bytes` of records
    /// (the `--log-capacity` of the stores): two superblocks and two regions.
    pub fn pages_for_capacity(capacity_bytes: u64, page_size: usize) -> Result<u64> {
        check_page_size(page_size)?;
        let per_page = record::data_per_page(page_size) as u64;
        if capacity_bytes < page_size as u64 {
            return Err(Error::invalid(format!(
                "log capacity of {capacity_bytes} bytes is smaller than one page ({page_size} bytes)"
            )));
        }
        let region = capacity_bytes.div_ceil(per_page);
        region
            .checked_mul(2)
            .and_then(|r| r.checked_add(SUPERBLOCK_PAGES))
            .ok_or_else(|| Error::invalid("log capacity too large"))
    }

    /// Pages of one region.
    pub fn region_pages(&self) -> u64 {
        (self.pages - SUPERBLOCK_PAGES) / 2
    }

    /// Bytes of records one region holds at most (page headers excluded).
    pub fn capacity_bytes(&self) -> u64 {
        self.region_pages() * record::data_per_page(self.page_size) as u64
    }

    /// Device page of superblock slot `slot` (0 or 1).
    pub(crate) fn superblock_page(&self, slot: u64) -> PageId {
        self.first_page + (slot & 1)
    }

    /// Device page of position `pos` of region `region` (0 or 1): region 0,
    /// then region 1, or with chunks their chunks in turn and then the two
    /// last, partial chunks (module docs, "Interleaved regions").
    pub(crate) fn region_page(&self, region: u8, pos: u64) -> PageId {
        let r = u64::from(region & 1);
        let base = self.first_page + SUPERBLOCK_PAGES;
        let c = self.chunk_pages;
        if c == 0 {
            return base + r * self.region_pages() + pos;
        }
        let whole = self.region_pages() / c * c;
        if pos < whole {
            return base + (2 * (pos / c) + r) * c + pos % c;
        }
        base + 2 * whole + r * (self.region_pages() - whole) + (pos - whole)
    }

    /// The device pages of positions `range` of region `region`, as runs of
    /// adjacent pages (one run for contiguous regions).
    pub(crate) fn region_runs(
        &self,
        region: u8,
        range: std::ops::Range<u64>,
    ) -> Vec<std::ops::Range<PageId>> {
        let mut runs: Vec<std::ops::Range<PageId>> = Vec::new();
        let mut pos = range.start;
        while pos < range.end {
            let c = self.chunk_pages;
            let whole = self.region_pages().checked_div(c).map_or(0, |n| n * c);
            // Positions up to the end of pos's chunk (or of the region) are adjacent.
            let stop = if c == 0 || pos >= whole {
                range.end
            } else {
                range.end.min((pos / c + 1) * c)
            };
            let first = self.region_page(region, pos);
            runs.push(first..first + (stop - pos));
            pos = stop;
        }
        runs
    }
}

/// A device handle shared by the log's parts.
pub(crate) type SharedDevice = Arc<dyn PageDevice>;
