//! [`Log`]: appending records, group commit, flush and sync, capacity,
//! compaction and restart. See the [module docs](super) for the layout.
use std::borrow::Cow;
use std::cell::Cell;
use std::time::Instant;

use crate::storage::PageId;
use crate::store::OpId;
use crate::{Error, Result};

use super::kept;
use super::passes::{first_pass, recover_region, RegionEncoder, RegionFormat, held_bytes};
use super::reader::in_device_file;
use super::seal::BatchXor;
use super::record::{data_per_page, encode_page, HeaderDeltas, PageHeader, Record, RecordKind};
use super::recovery::{FlushRule, Recovered};
use super::superblock::Superblock;
use super::{
    Durability, LogConfig, LogLayout, LogStats, Lsn, LsnHorizon, SharedDevice, NO_OP,
    SUPERBLOCK_PAGES,
};

/// Full pages gathered in the tail buffer before they are written without a
/// sync being asked for (bounds the buffer's memory).
const WRITE_BATCH_PAGES: usize = 16;

/// The least room [`Log::reserve_ahead`] keeps reserved past the write
/// position: 1 MiB of pages.
const RESERVE_AHEAD_BYTES: u64 = 1 << 20;

/// The survivors a rewrite writes, oldest first (an iterator it may ask
/// for twice).
type Survivors<'a> = Box<dyn Iterator<Item = Result<Cow<'a, Record>>> + 'a>;

/// Records held in memory as a rewrite's survivors.
fn held(records: &[Record]) -> Survivors<'_> {
    Box::new(records.iter().map(|r| Ok(Cow::Borrowed(r))))
}

/// What a compaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Records in the log before.
    pub records_before: u64,
    /// Records written to the new log.
    pub records_after: u64,
    /// Record bytes before (framing included).
    pub bytes_before: u64,
    /// Record bytes after.
    pub bytes_after: u64,
    /// Pages of the new live region in use.
    pub pages_after: u64,
}

/// A log open for appending. See the [module docs](super).
///
/// ```
/// use std::sync::Arc;
/// use geoflash::storage::mem::MemDevice;
/// use geoflash::store::log::{Durability, Log, LogConfig, Record, RecordKind};
///
/// let dev = Arc::new(MemDevice::new(4096, 64)?);
/// let config = LogConfig::new(7).with_durability(Durability::Sync);
/// let mut log = Log::create(dev.clone(), 0, 64, config)?;
/// log.append(Record::new(RecordKind::Mod, 1, 42, b"change".to_vec()))?;
/// log.commit(1)?; // durable when it returns (Durability::Sync)
/// drop(log);
/// let (_log, recovered) = Log::open(dev, 0, 64, config)?;
/// assert_eq!(recovered.records.count(), 2); // the MOD and its COMMIT
/// assert_eq!(recovered.committed_ops, vec![1]);
/// # Ok::<(), geoflash::Error>(())
/// ```
pub struct Log {
    dev: SharedDevice,
    layout: LogLayout,
    config: LogConfig,
    sb: Superblock,
    /// Next position of the live region to write.
    next_pos: u64,
    /// Positions known durable.
    durable_pos: u64,
    /// Record bytes not yet written; starts at a page boundary.
    buf: Vec<u8>,
    /// Pages named by records appended since the last [`Log::flush`] (a
    /// superset of the pages with a record in `buf`), for
    /// [`Log::flush_for`].
    unwritten_pages: crate::page_id::IdSet,
    /// LSN of the next record.
    next_lsn: Lsn,
    /// Every record up to this LSN is durable.
    durable_lsn: Lsn,
    /// LSN of the newest record appended.
    last_lsn: Lsn,
    /// Every record up to this LSN has reached the device (maybe unsynced):
    /// `last_lsn` when `buf` was last emptied ([`Log::page_lsn`]).
    written_lsn: Lsn,
    /// Newest COMMIT appended: (LSN, op).
    last_commit: Option<(Lsn, OpId)>,
    /// Newest operation whose COMMIT is durable.
    durable_op: Option<OpId>,
    /// An operation with records appended and no COMMIT yet.
    open_op: Option<OpId>,
    /// Commits since the last sync, and when the oldest of them was appended.
    unsynced_commits: u32,
    oldest_unsynced: Option<Instant>,
    /// Operations completed with their records held back by the store
    /// ([`Log::defer_commit`]), and when the oldest of them completed; a
    /// sync does not make them durable, their later COMMIT does.
    deferred: u32,
    oldest_deferred: Option<Instant>,
    /// Record bytes in the live region (written or buffered).
    record_bytes: u64,
    records_live: u64,
    stats: LogStats,
    /// Sticky failure: after an I/O error the log accepts nothing more.
    failed: Option<String>,
    /// The horizon of the epoch restart recovered (none for a created log).
    horizon: LsnHorizon,
    /// Version 5: the header fields of the region's last record written,
    /// which the next record's are written against ([`HeaderDeltas`]).
    deltas: HeaderDeltas,
    /// Sealed logs: the XOR of the pages written since the last sync, the
    /// next seal page ([`super::seal`]).
    batch: BatchXor,
    /// Positions of the live region below this one have their space on the
    /// medium reserved ([`Log::reserve_ahead`]).
    reserved_pos: u64,
    /// `next_pos` at the previous [`Log::reserve_ahead`], and the most
    /// pages written between two of its calls.
    reserve_mark: u64,
    reserve_stride: u64,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("layout", &self.layout)
            .field("live_region", &self.sb.live)
            .field("epoch", &self.sb.epoch)
            .field("next_pos", &self.next_pos)
            .field("next_lsn", &self.next_lsn)
            .field("durable_lsn", &self.durable_lsn)
            .finish_non_exhaustive()
    }
}

impl Log {
    /// Creates an empty log in pages `first_page .. first_page + pages` of `dev`
    /// (whatever they held before is ignored from now on) and makes it durable.
    pub fn create(
        dev: SharedDevice,
        first_page: PageId,
        pages: u64,
        config: LogConfig,
    ) -> Result<Log> {
        config.durability.validate()?;
        let mut layout = LogLayout::on_device(dev.as_ref(), first_page, pages)?;
        let log_id = loop {
            let id: u64 = rand::random();
            if id != 0 {
                break id;
            }
        };
        let client = config.client && config.sealed && config.format == super::LogFormat::Compact;
        if client && config.interleaved {
            layout = layout.with_chunk(layout.chunk_pages_for());
        }
        let sb = Superblock {
            seq: 1,
            index_id: config.index_id,
            log_id,
            region_pages: layout.region_pages(),
            live: 0,
            epoch: 1,
            epoch_high: 1,
            lsn_floor: 0,
            base: None,
            format: config.format,
            entry_refs: config.entry_refs && config.format == super::LogFormat::Compact,
            mirrored: true,
            sealed: config.sealed && config.format == super::LogFormat::Compact,
            client,
            chunk_pages: layout.chunk_pages,
        };
        let mut log = Log::new_state(dev, layout, config, sb);
        // Both slots: no older superblock on these pages can win.
        log.write_superblock()?;
        log.sb.seq = 2;
        log.write_superblock()?;
        log.device_sync()?;
        Ok(log)
    }

    /// Opens the log in pages `first_page .. first_page + pages` of `dev` and
    /// runs restart: scans it, computes the survivors ([`super::recovery`]), writes them
    /// to the other region and switches to it. Returns the log, ready to append,
    /// and what was recovered (to replay into the store's buffer).
    ///
    /// A crash during restart leaves the old log live: opening again recovers the same.
    ///
    /// Numbering resumes above every LSN the recovered epoch could hold
    /// ([`LsnHorizon::resume`], [`Log::horizon`]), so node pages written
    /// from now on are never taken for pages of lost records.
    #[cfg(any(test, feature = "internals"))]
    pub fn open(
        dev: SharedDevice,
        first_page: PageId,
        pages: u64,
        config: LogConfig,
    ) -> Result<(Log, Recovered)> {
        Self::open_checked(dev, first_page, pages, config, |_, _| Ok(()))
    }

    /// [`Log::open`] that first gives what was recovered and its horizon to
    /// `check`, before anything is written: an error from `check` is
    /// returned and leaves the log as it was, so opening again finds the
    /// same evidence. A store checks there the node pages the records name
    /// against the horizon ([`LsnHorizon::check`]).
    pub fn open_checked(
        dev: SharedDevice,
        first_page: PageId,
        pages: u64,
        config: LogConfig,
        check: impl FnOnce(&Recovered, &LsnHorizon) -> Result<()>,
    ) -> Result<(Log, Recovered)> {
        config.durability.validate()?;
        let layout = LogLayout::on_device(dev.as_ref(), first_page, pages)?;
        let mut pages_read = 0;
        let sb = Superblock::read(&dev, &layout, config.index_id, &mut pages_read)
            .map_err(|e| in_device_file(&dev, e))?;
        let layout = layout.with_chunk(sb.chunk_pages);
        let mut log = Log::new_state(dev, layout, config, sb);
        log.stats.pages_read += pages_read;
        let rule = log.sb.format.restart_rule();
        let (dev, layout, sb) = (log.dev.clone(), log.layout, log.sb.clone());
        let read = Cell::new(0);
        let first = first_pass(&dev, &layout, &sb, rule, held_bytes(sb.format))
            .map_err(|e| in_device_file(&dev, e))?;
        let valid_pages = first.pages;
        log.stats.pages_read += first.pages_read;
        // Restart counts the bytes of the region it writes as it judges.
        let mut count = RegionEncoder::new(log.region_format());
        let mut rec = recover_region(first, &dev, &layout, &sb, &read, Some(&mut count))
            .map_err(|e| in_device_file(&dev, e))?;
        log.stats.pages_read += read.get();
        rec.format = log.sb.format;
        let horizon = LsnHorizon::of_epoch(
            log.sb.lsn_floor,
            rec.last_lsn,
            log.capacity_bytes(),
            log.sb.format.framing(),
        );
        check(&rec, &horizon)?;
        log.horizon = horizon;
        log.next_lsn = horizon.resume() + 1;
        log.last_lsn = log.next_lsn - 1;
        log.durable_lsn = log.last_lsn;
        log.last_commit = rec.last_committed_op.map(|op| (0, op));
        log.durable_op = rec.last_committed_op;
        // The old region's valid pages are trimmed after the switch.
        log.next_pos = valid_pages;
        log.rewrite_counted(count, rec.records.iter())?;
        // Streamed survivors are read from where they now are.
        let region = kept::Region {
            dev: log.dev.clone(),
            layout: log.layout,
            sb: log.sb.clone(),
        };
        rec.records = std::mem::take(&mut rec.records).rewritten_to(region, rec.last_lsn);
        Ok((log, rec))
    }

    fn new_state(dev: SharedDevice, layout: LogLayout, config: LogConfig, sb: Superblock) -> Log {
        let lsn_floor = sb.lsn_floor;
        Log {
            dev,
            layout,
            config,
            sb,
            next_pos: 0,
            durable_pos: 0,
            buf: Vec::new(),
            unwritten_pages: Default::default(),
            next_lsn: lsn_floor + 1,
            durable_lsn: lsn_floor,
            last_lsn: lsn_floor,
            written_lsn: lsn_floor,
            last_commit: None,
            durable_op: None,
            open_op: None,
            unsynced_commits: 0,
            oldest_unsynced: None,
            deferred: 0,
            oldest_deferred: None,
            horizon: LsnHorizon::none(),
            deltas: HeaderDeltas::default(),
            record_bytes: 0,
            records_live: 0,
            stats: LogStats::default(),
            failed: None,
            batch: BatchXor::default(),
            reserved_pos: 0,
            reserve_mark: 0,
            reserve_stride: 0,
        }
    }

    /// Between operations: makes sure the medium has room for the log's
    /// next writes, so that a full file system is an error here, before an
    /// operation has changed anything, rather than during its commit.
    /// Reserves (`PageDevice::reserve`) twice the larger of 1 MiB and the
    /// most pages written between two calls whenever less than that is
    /// left; nothing on devices without a file system beneath. Every batch
    /// written also reserves its own pages and the seal after them first
    /// ([`Log::reserve_through`]), so that no page of a COMMIT's batch
    /// reaches the file unless the whole batch has its room.
    pub fn reserve_ahead(&mut self) -> Result<()> {
        self.check_alive()?;
        let stride = self.next_pos.saturating_sub(self.reserve_mark);
        self.reserve_mark = self.next_pos;
        self.reserve_stride = self.reserve_stride.max(stride);
        self.reserve_through(self.next_pos + self.ahead_pages() + self.seal_room())
    }

    /// The look-ahead of [`Log::reserve_ahead`], in pages.
    fn ahead_pages(&self) -> u64 {
        (RESERVE_AHEAD_BYTES / self.layout.page_size as u64)
            .max(self.reserve_stride)
            .max(1)
    }

    /// Reserves the live region's positions below `end` that are not yet,
    /// with the look-ahead (up to twice [`Log::ahead_pages`] past the write
    /// position), capped at the region's end.
    fn reserve_through(&mut self, end: u64) -> Result<()> {
        let region = self.layout.region_pages();
        if end <= self.reserved_pos || self.reserved_pos >= region {
            return Ok(());
        }
        let from = self.next_pos.max(self.reserved_pos);
        let to = end
            .max(self.next_pos + 2 * self.ahead_pages())
            .min(region);
        for run in self.layout.region_runs(self.sb.live, from..to) {
            self.dev.reserve(run)?;
        }
        self.reserved_pos = to;
        Ok(())
    }

    fn check_alive(&self) -> Result<()> {
        crate::error::refuse_after_failure(
            &self.failed,
            "the log failed earlier and accepts nothing more",
        )
    }

    /// Runs `f`, making any error but bad input sticky: after a failed device
    /// call the log's view of what reached the device is uncertain.
    fn guard<T>(&mut self, f: impl FnOnce(&mut Log) -> Result<T>) -> Result<T> {
        self.check_alive()?;
        let r = f(self);
        crate::error::keep_failure(&mut self.failed, r)
    }

    fn data_per_page(&self) -> usize {
        data_per_page(self.layout.page_size)
    }

    /// Pages the live region would use with `extra` more buffered bytes
    /// (the room of the next seal page included).
    fn pages_needed(&self, extra: usize) -> u64 {
        let bytes = self.buf.len().saturating_add(extra);
        self.next_pos + (bytes.div_ceil(self.data_per_page()) as u64) + self.seal_room()
    }

    /// Pages a sealed log keeps free for the seal of the batch being
    /// written (1), or 0.
    fn seal_room(&self) -> u64 {
        u64::from(self.sb.sealed)
    }

    /// Sealed logs: writes the seal of the pages written since the last
    /// sync, if any, at the position after them (before the sync that
    /// makes them durable). The next batch starts at that position: a seal
    /// holds no record, and only the last batch's is needed (damage to an
    /// earlier batch is proven by the later pages' durable positions).
    fn write_seal(&mut self) -> Result<()> {
        if !self.sb.sealed || self.batch.pages() == 0 {
            return Ok(());
        }
        let page = self.batch.seal(
            self.sb.log_id,
            self.sb.epoch,
            self.next_pos,
            self.durable_pos,
            self.layout.page_size,
        );
        if self.next_pos >= self.layout.region_pages() {
            return Err(Error::DeviceFull("log region full".into()));
        }
        self.dev
            .write(self.layout.region_page(self.sb.live, self.next_pos), &page)?;
        self.stats.pages_written += 1;
        self.batch.clear();
        Ok(())
    }

    /// Appends a record (its `lsn` is assigned here) and returns its LSN. The
    /// record is durable after the next sync. [`Error::DeviceFull`] when the
    /// live region has no room: compact (or flush pages, then compact).
    pub fn append(&mut self, mut rec: Record) -> Result<Lsn> {
        self.check_alive()?;
        rec.lsn = self.next_lsn;
        let framing = self.sb.format.framing();
        let mut deltas = self.deltas;
        let wire = self.sb.entry_refs.then(|| deltas.encode_next(&rec));
        let len = wire.map_or_else(|| rec.framed_len(framing), |w| rec.compact_len_as(w));
        if self.pages_needed(len) > self.layout.region_pages() {
            return Err(Error::DeviceFull(format!(
                "log full: a {len}-byte record does not fit ({} of {} bytes used); compact the log or flush pages",
                self.used_bytes(),
                self.capacity_bytes()
            )));
        }
        self.guard(|log| {
            match wire {
                Some(w) => rec.encode_compact_as(w, &mut log.buf)?,
                None => rec.encode_framed(framing, &mut log.buf)?,
            }
            log.deltas = deltas;
            if rec.page != 0 {
                log.unwritten_pages.insert(rec.page);
            }
            log.next_lsn += 1;
            log.last_lsn = rec.lsn;
            log.stats.records += 1;
            log.stats.bytes += len as u64;
            log.record_bytes += len as u64;
            log.records_live += 1;
            match rec.kind {
                RecordKind::Commit => {
                    log.last_commit = Some((rec.lsn, rec.op));
                    if log.open_op == Some(rec.op) {
                        log.open_op = None;
                    }
                }
                _ if rec.op != NO_OP => log.open_op = Some(rec.op),
                _ => {}
            }
            if log.buf.len() >= WRITE_BATCH_PAGES * log.data_per_page() {
                log.write_full_pages()?;
            }
            Ok(rec.lsn)
        })
    }

    /// Appends the COMMIT of `op` and applies the durability mode: with
    /// [`Durability::Sync`] the operation is durable when this returns; with
    /// [`Durability::Group`] when its group is synced. Returns the COMMIT's LSN.
    pub fn commit(&mut self, op: OpId) -> Result<Lsn> {
        let lsn = self.append(Record::commit(op))?;
        self.unsynced_commits = self.unsynced_commits.saturating_add(1);
        if self.oldest_unsynced.is_none() {
            self.oldest_unsynced = Some(Instant::now());
        }
        self.apply_durability()?;
        Ok(lsn)
    }

    /// After a COMMIT: syncs as the durability mode says.
    fn apply_durability(&mut self) -> Result<()> {
        match self.config.durability {
            Durability::Sync => self.sync(),
            Durability::Group { .. } => self.maybe_sync(),
            Durability::None => Ok(()),
        }
    }

    /// Whether appending `records` and then a COMMIT may write log pages or
    /// sync (the durability mode's decision, taken as [`Self::commit`] would
    /// take it now). `false` means the commit only appends to the in-memory
    /// tail, so the stores skip timing it as log work (reading a thread's CPU
    /// clock costs a system call).
    pub fn commit_may_do_io(&self, records: &[Record]) -> bool {
        let after = self.buf.len() as u64
            + records
                .iter()
                .map(|r| r.max_framed_len() as u64)
                .sum::<u64>()
            + Record::commit(NO_OP).max_framed_len() as u64;
        if after >= (WRITE_BATCH_PAGES * self.data_per_page()) as u64 {
            return true;
        }
        match self.config.durability {
            Durability::Sync => true,
            Durability::None => false,
            Durability::Group { ops, millis } => {
                self.unsynced_commits.saturating_add(1) >= ops
                    || millis == 0
                    || self
                        .oldest_unsynced
                        .is_some_and(|t| t.elapsed().as_millis() + 1 >= u128::from(millis))
            }
        }
    }

    /// Counts an operation that completed without records of its own in
    /// the log yet: the store holds its changes back and logs them, with a
    /// later operation's id, before [`Self::commit_deferred`] (the compact
    /// format's groups). It counts toward the group commit (see
    /// [`Self::commit_due`]) but is durable only with that COMMIT.
    pub fn defer_commit(&mut self) {
        self.deferred = self.deferred.saturating_add(1);
        if self.oldest_deferred.is_none() {
            self.oldest_deferred = Some(Instant::now());
        }
    }

    /// Appends the COMMIT of `op`, the newest of the deferred operations
    /// (whose records the store has just appended with `op`'s id), and
    /// applies the durability mode to all of them as [`Self::commit`] does
    /// to one operation.
    pub fn commit_deferred(&mut self, op: OpId) -> Result<Lsn> {
        let lsn = self.append(Record::commit(op))?;
        self.unsynced_commits = self.unsynced_commits.saturating_add(self.deferred.max(1));
        let oldest = self.oldest_deferred.take().unwrap_or_else(Instant::now);
        self.oldest_unsynced = Some(self.oldest_unsynced.map_or(oldest, |t| t.min(oldest)));
        self.deferred = 0;
        self.apply_durability()?;
        Ok(lsn)
    }

    /// Whether the durability mode wants the operations completed so far
    /// (committed or deferred) durable now: always with
    /// [`Durability::Sync`], never with [`Durability::None`], and with
    /// [`Durability::Group`] when the group is complete or its oldest
    /// operation has waited long enough.
    pub fn commit_due(&self) -> bool {
        match self.config.durability {
            Durability::Sync => true,
            Durability::None => false,
            Durability::Group { ops, millis } => {
                let waited = |t: Option<Instant>| {
                    t.is_some_and(|t| t.elapsed().as_millis() >= u128::from(millis))
                };
                self.unsynced_commits.saturating_add(self.deferred) >= ops
                    || waited(self.oldest_unsynced)
                    || waited(self.oldest_deferred)
            }
        }
    }

    /// Forgets that operation `op` is open (after a failed operation). Its
    /// records stay in the log without a COMMIT and are dropped by the next
    /// compaction or restart; `op` must not be committed later.
    #[cfg(test)]
    pub fn abandon_op(&mut self, op: OpId) {
        if self.open_op == Some(op) {
            self.open_op = None;
        }
    }

    /// With group commit, syncs if the group is complete or its oldest commit
    /// has waited long enough; otherwise nothing. Stores call it between
    /// operations so that a quiet period still makes commits durable.
    pub fn maybe_sync(&mut self) -> Result<()> {
        if matches!(self.config.durability, Durability::Group { .. }) && self.commit_due() {
            self.sync()?;
        }
        Ok(())
    }

    /// Writes the full pages of the tail buffer (no padding, no sync).
    fn write_full_pages(&mut self) -> Result<()> {
        let dpp = self.data_per_page();
        let bytes = (self.buf.len() / dpp) * dpp;
        if bytes == 0 {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let res = self.write_pages(buf.get(..bytes).unwrap_or(&[]));
        self.buf = buf;
        res?;
        self.buf.drain(..bytes);
        Ok(())
    }

    /// Writes `data` as pages from `next_pos` (the last one padded if
    /// partial), as one batch.
    fn write_pages(&mut self, data: &[u8]) -> Result<()> {
        let dpp = self.data_per_page();
        let ps = self.layout.page_size;
        let n = data.len().div_ceil(dpp);
        if self.next_pos + n as u64 + self.seal_room() > self.layout.region_pages() {
            return Err(Error::DeviceFull("log region full".into()));
        }
        let mut out = vec![0u8; n * ps];
        let mut ids = Vec::with_capacity(n);
        let durable = u32::try_from(self.durable_pos).unwrap_or(u32::MAX);
        for (i, (chunk, page)) in data.chunks(dpp).zip(out.chunks_exact_mut(ps)).enumerate() {
            let pos = self.next_pos + i as u64;
            let h = PageHeader {
                log_id: self.sb.log_id,
                epoch: self.sb.epoch,
                position: pos,
                durable_pos: durable,
                data_len: chunk.len() as u32,
            };
            encode_page(&h, chunk, page)?;
            if self.sb.sealed {
                self.batch.add(page);
            }
            ids.push(self.layout.region_page(self.sb.live, pos));
        }
        // The batch's room (and its seal's) before any of it is written.
        self.reserve_through(self.next_pos + n as u64 + self.seal_room())?;
        self.dev.write_batch(&ids, &out)?;
        self.next_pos += n as u64;
        self.stats.pages_written += n as u64;
        Ok(())
    }

    /// Writes everything buffered to the device (the last page padded; the next
    /// write starts at the next page). Not durable until [`Log::sync`].
    pub fn flush(&mut self) -> Result<()> {
        self.guard(|log| {
            if log.buf.is_empty() {
                return Ok(());
            }
            let buf = std::mem::take(&mut log.buf);
            let res = log.write_pages(&buf);
            log.buf = buf;
            res?;
            log.buf.clear();
            log.unwritten_pages.clear();
            log.written_lsn = log.last_lsn;
            Ok(())
        })
    }

    /// Write-ahead for pages written in place without a sync (durability
    /// `none`): writes the buffered tail (as [`Log::flush`]) only when a
    /// record appended since the last flush names one of `pages`, so that
    /// a page never reaches the device before the records of its changes,
    /// without padding a log page for every flush of pages whose records
    /// are written already. A page not named since the last flush has its
    /// records, and the COMMITs of their operations, on the device: the
    /// stores append an operation's records and its COMMIT together at its
    /// commit, with no [`Log::flush`] in between, and write pages between
    /// operations only.
    pub fn flush_for(&mut self, pages: &[PageId]) -> Result<()> {
        if pages.iter().any(|p| self.unwritten_pages.contains(p)) {
            self.flush()?;
        }
        Ok(())
    }

    fn device_sync(&mut self) -> Result<()> {
        self.dev.sync()?;
        self.stats.syncs += 1;
        Ok(())
    }

    /// Flushes and syncs: every record appended so far is durable when this returns.
    pub fn sync(&mut self) -> Result<()> {
        if self.durable_lsn == self.last_lsn && self.buf.is_empty() {
            self.unsynced_commits = 0;
            self.oldest_unsynced = None;
            return self.check_alive();
        }
        self.flush()?;
        self.guard(|log| {
            log.write_seal()?;
            log.device_sync()?;
            log.durable_pos = log.next_pos;
            log.durable_lsn = log.last_lsn;
            log.durable_op = log.last_commit.map(|(_, op)| op).or(log.durable_op);
            log.unsynced_commits = 0;
            log.oldest_unsynced = None;
            Ok(())
        })
    }

    /// Makes the log durable at least up to `lsn` (a store calls this before
    /// writing a page whose LSN is `lsn`).
    pub fn sync_to(&mut self, lsn: Lsn) -> Result<()> {
        if lsn > self.durable_lsn {
            self.sync()?;
        }
        Ok(())
    }

    /// Every record up to this LSN is durable.
    #[cfg(test)]
    pub fn durable_lsn(&self) -> Lsn {
        self.durable_lsn
    }

    /// LSN of the newest record appended (0 if none ever).
    pub fn last_lsn(&self) -> Lsn {
        self.last_lsn
    }

    /// The LSN to stamp on a node page encoded now (the [`LsnHorizon`]
    /// evidence). With `sync` and `group` the stores sync the log to its
    /// newest record before writing a page, so that is the stamp. With
    /// `none` nothing is synced and a killed process loses the records
    /// still in the log's memory buffer while the pages it wrote stay: the
    /// stamp is then the newest record already written to the device (the
    /// page's own records are written before it by [`Log::flush_for`]), so
    /// a kill never leaves a page stamped above what the log kept (issue
    /// 44, item 7).
    pub fn page_lsn(&self) -> Lsn {
        if self.config.durability != Durability::None || self.buf.is_empty() {
            self.last_lsn
        } else {
            self.written_lsn
        }
    }

    /// The horizon of the epoch [`Log::open`] recovered: node pages must not
    /// carry LSNs in it ([`LsnHorizon::none`] for a created log).
    pub fn horizon(&self) -> LsnHorizon {
        self.horizon
    }

    /// The LSN the next record will get.
    #[cfg(test)]
    pub fn next_lsn(&self) -> Lsn {
        self.next_lsn
    }

    /// The newest operation whose COMMIT is durable (acknowledged).
    pub fn durable_op(&self) -> Option<OpId> {
        self.durable_op
    }

    /// The log's format (from its superblock: an opened log keeps the
    /// format it was created with, whatever the configuration says).
    pub fn format(&self) -> super::LogFormat {
        self.sb.format
    }

    /// Whether NEW and MOD records may name entries already logged by key
    /// (from the superblock: version 5, see [`super::entry_refs`]).
    pub fn entry_refs(&self) -> bool {
        self.sb.entry_refs
    }

    /// Whether the log may hold a front end's CLIENT frames and name its
    /// generation at checkpoints (from the superblock: versions 8 to 11,
    /// see [`super::client`]).
    pub fn client_frames(&self) -> bool {
        self.sb.client
    }

    /// The epoch of the live region: it changes at every compaction,
    /// checkpoint and restart, when the records of the previous epoch that
    /// a FLUSH made obsolete (page images included) are dropped.
    pub fn epoch(&self) -> u64 {
        self.sb.epoch
    }

    /// Changes the durability mode from the next commit on. Not persisted:
    /// a reopened log takes the mode of its configuration. Commits made
    /// before stay as durable as they are (switching to [`Durability::None`]
    /// keeps the pending group pending until an explicit sync or checkpoint).
    pub fn set_durability(&mut self, durability: Durability) -> Result<()> {
        durability.validate()?;
        self.config.durability = durability;
        Ok(())
    }

    /// Bytes of one region available to records (the log's capacity).
    pub fn capacity_bytes(&self) -> u64 {
        self.layout.capacity_bytes()
    }

    /// Bytes of the live region used: written pages (padding included),
    /// the room kept for the next seal page and the tail buffer.
    pub fn used_bytes(&self) -> u64 {
        (self.next_pos + self.seal_room()) * self.data_per_page() as u64 + self.buf.len() as u64
    }

    /// Bytes still free in the live region.
    pub fn free_bytes(&self) -> u64 {
        self.capacity_bytes().saturating_sub(self.used_bytes())
    }

    /// Used share of the live region, 0.0 ..= 1.0.
    pub fn fill_ratio(&self) -> f64 {
        let cap = self.capacity_bytes();
        if cap == 0 {
            1.0
        } else {
            self.used_bytes() as f64 / cap as f64
        }
    }

    /// Records in the live region.
    #[cfg(test)]
    pub fn records(&self) -> u64 {
        self.records_live
    }

    /// The live region (0 or 1).
    #[cfg(test)]
    pub fn live_region(&self) -> u8 {
        self.sb.live
    }

    /// Counts `pages` of the log read outside it: the walks of restart's
    /// streamed survivors ([`super::KeptRecords`]).
    pub(crate) fn note_pages_read(&mut self, pages: u64) {
        self.stats.pages_read += pages;
    }

    /// Counters since the log was opened.
    pub fn stats(&self) -> LogStats {
        self.stats
    }

    /// A clean checkpoint: makes everything appended so far durable, then
    /// starts a fresh, empty epoch whose base is a CHECKPOINT record with
    /// `payload` (and the COMMIT of the newest operation), kept in the
    /// superblock when it fits there (one superblock write and sync),
    /// otherwise written as the first records of the new region (as a
    /// compaction). Restart then reads the superblock and the empty region's
    /// first page, and replays nothing. The store must have written and synced
    /// every page the log's records describe first: records older than the
    /// checkpoint are gone afterwards (restart would have dropped them
    /// anyway). Between operations only. Returns the CHECKPOINT's LSN.
    pub fn checkpoint(&mut self, payload: Vec<u8>) -> Result<Lsn> {
        self.checkpoint_including(payload, None)
    }

    /// [`checkpoint`](Self::checkpoint) of a state that also holds
    /// operations up to `unlogged` which were never logged (a store's
    /// unlogged mode, whose durability point is this checkpoint): the new
    /// epoch's COMMIT names the newer of `unlogged` and the newest logged
    /// commit, which is [`durable_op`](Self::durable_op) once this returns.
    pub fn checkpoint_including(
        &mut self,
        payload: Vec<u8>,
        unlogged: Option<OpId>,
    ) -> Result<Lsn> {
        if let Some(op) = self.open_op {
            return Err(Error::invalid(format!(
                "log checkpoint while operation {op} is open: checkpoint between operations"
            )));
        }
        self.sync()?;
        let mut ck = Record::new(RecordKind::Checkpoint, NO_OP, 0, payload);
        let lsn = self.next_lsn;
        ck.lsn = lsn;
        let mut records = vec![ck];
        let committed = self.last_commit.map(|(_, op)| op).or(self.durable_op);
        let newest = committed.max(unlogged);
        if let Some(op) = newest {
            let mut c = Record::commit(op);
            c.lsn = lsn + 1;
            records.push(c);
        }
        for r in &records {
            self.stats.records += 1;
            self.stats.bytes += r.framed_len(self.sb.format.framing()) as u64;
        }
        self.next_lsn = lsn + records.len() as u64;
        self.last_lsn = self.next_lsn - 1;
        self.rewrite(|| held(&records))?;
        if let (Some(op), true) = (newest, newest != committed) {
            // The unlogged operations are durable with the new epoch.
            self.last_commit = Some((lsn + 1, op));
            self.durable_op = Some(op);
        }
        Ok(lsn)
    }

    /// Compaction (Algorithm 7 without reinsertion, FAST's log compaction):
    /// syncs, scans the live region, keeps the survivors ([`super::recovery`]), writes
    /// them to the other region and switches with one superblock write. Runs
    /// between operations only: an [`Error::InvalidInput`] while an operation
    /// is open. [`Error::DeviceFull`] (the log unchanged) when the survivors do
    /// not fit a region: flush pages, then compact again.
    pub fn compact(&mut self) -> Result<CompactReport> {
        if let Some(op) = self.open_op {
            return Err(Error::invalid(format!(
                "log compaction while operation {op} is open: compact between operations"
            )));
        }
        self.sync()?;
        let (records_before, bytes_before) = (self.records_live, self.record_bytes);
        let (dev, layout, sb) = (self.dev.clone(), self.layout, self.sb.clone());
        let first = self.guard(|log| {
            let first = first_pass(&dev, &layout, &sb, FlushRule::Obsolete, held_bytes(sb.format))?;
            log.stats.pages_read += first.pages_read;
            Ok(first)
        })?;
        let read = Cell::new(0);
        let result = self.rewrite(|| {
            let mut keep = first.survival.survivors();
            Box::new(
                first
                    .records(&dev, &layout, &sb, &read)
                    .filter(move |r| r.as_ref().map_or(true, |r| keep.keep(r))),
            )
        });
        self.stats.pages_read += read.get();
        result?;
        Ok(CompactReport {
            records_before,
            records_after: self.records_live,
            bytes_before,
            bytes_after: self.record_bytes,
            pages_after: self.next_pos,
        })
    }

    fn write_superblock(&mut self) -> Result<()> {
        self.sb.write(&self.dev, &self.layout)?;
        self.stats.superblock_writes += 1;
        Ok(())
    }

    /// Writes the records `survivors` gives (with their LSNs, oldest first)
    /// as the content of the other region and switches to it; `survivors`
    /// is called twice, to count the region's bytes before anything is
    /// written and to write them ([`RegionEncoder`]). Everything appended
    /// before must be durable. A leading CHECKPOINT that fits the
    /// superblock (and a lone COMMIT after it) becomes the new superblock's
    /// base; when nothing else is left, the switch is a single superblock
    /// write of a fresh epoch.
    fn rewrite<'a>(&mut self, mut survivors: impl FnMut() -> Survivors<'a>) -> Result<()> {
        let mut count = RegionEncoder::new(self.region_format());
        let mut sink = Vec::new();
        for rec in survivors() {
            count.push(&*rec?, &mut sink)?;
            sink.clear();
        }
        self.rewrite_counted(count, survivors())
    }

    /// How a new region of this log encodes its records.
    fn region_format(&self) -> RegionFormat {
        RegionFormat {
            framing: self.sb.format.framing(),
            entry_refs: self.sb.entry_refs.then(|| self.sb.format.payload_codec()),
            page_size: self.layout.page_size,
        }
    }

    /// [`Log::rewrite`] once `count` has been given every survivor
    /// `survivors` gives, in the same order.
    fn rewrite_counted(&mut self, mut count: RegionEncoder, survivors: Survivors<'_>) -> Result<()> {
        let format = self.region_format();
        let mut sink = Vec::new();
        count.finish(&mut sink)?;
        let bytes = count.bytes;
        // Only the count is needed: its entry memo goes before the write's.
        drop(count);
        let pages = bytes.div_ceil(self.data_per_page() as u64);
        if pages + self.seal_room() > self.layout.region_pages() {
            return Err(Error::DeviceFull(format!(
                "log compaction cannot free enough: {bytes} bytes of surviving records exceed the region's {} bytes; flush pages first",
                self.capacity_bytes()
            )));
        }
        self.guard(|log| {
            let old_region = log.sb.live;
            let old_pages = log.next_pos;
            if bytes == 0 {
                // 1'. An empty epoch: nothing is written to it before the switch,
                //     so reserving and switching are one superblock write.
                log.sb.epoch_high += 1;
                log.sb.epoch = log.sb.epoch_high;
            } else {
                // 1. Reserve a fresh epoch.
                log.sb.epoch_high += 1;
                log.sb.seq += 1;
                log.write_superblock()?;
                log.device_sync()?;
                log.sb.epoch = log.sb.epoch_high;
            }
            // 2. Write the survivors to the other region (sealed logs: and
            //    their seal).
            log.sb.live = 1 - old_region;
            log.next_pos = 0;
            // The new region's pages have no room yet: the survivors'
            // batches reserve theirs before they are written.
            log.reserved_pos = 0;
            log.durable_pos = 0;
            log.batch.clear();
            let batch = WRITE_BATCH_PAGES * log.data_per_page();
            let mut enc = RegionEncoder::new(format);
            let mut stream = Vec::new();
            for rec in survivors {
                enc.push(&*rec?, &mut stream)?;
                while stream.len() >= batch {
                    log.write_pages(stream.get(..batch).unwrap_or(&[]))?;
                    stream.drain(..batch);
                }
            }
            let base = enc.finish(&mut stream)?;
            for chunk in stream.chunks(batch) {
                log.write_pages(chunk)?;
            }
            if enc.bytes != bytes {
                return Err(Error::invalid(format!(
                    "log compaction: the survivors took {bytes} bytes when counted and {} when written",
                    enc.bytes
                )));
            }
            if bytes > 0 {
                log.write_seal()?;
                log.device_sync()?;
            }
            // 3. Switch: one superblock write.
            log.sb.lsn_floor = log.last_lsn;
            log.sb.base = base;
            log.sb.seq += 1;
            log.write_superblock()?;
            log.device_sync()?;
            // 3'. Mirror it to the other slot (no sync needed: the switch is
            //     durable in its own slot; see `superblock`'s module docs).
            log.sb.write_mirror(&log.dev, &log.layout)?;
            log.stats.superblock_writes += 1;
            log.durable_pos = log.next_pos;
            // The new region's written pages have their room; the rest is
            // reserved by the next `reserve_ahead`.
            log.reserved_pos = log.next_pos;
            log.reserve_mark = log.next_pos;
            log.durable_lsn = log.last_lsn;
            log.written_lsn = log.last_lsn;
            log.record_bytes = bytes;
            log.deltas = enc.deltas();
            log.records_live = enc.records;
            log.stats.compactions += 1;
            log.stats.records_rewritten += enc.given;
            // 4. Release the old region's pages (best effort: not needed
            //    for correctness), its last seal included.
            let old_pages = (old_pages + u64::from(log.sb.sealed && old_pages > 0))
                .min(log.layout.region_pages());
            if old_pages > 0 {
                let ids: Vec<PageId> = (0..old_pages)
                    .map(|p| log.layout.region_page(old_region, p))
                    .collect();
                log.dev.trim(&ids)?;
                log.stats.pages_trimmed += old_pages;
            }
            // 5. A log with a file of its own: the file after the live
            //    region's last page goes too.
            log.cut_file_after_live();
            Ok(())
        })
    }

    /// A log whose range starts at page 0 of its device (a device of its
    /// own, `log.dat`: a log sharing the node device lies in its last
    /// pages, above page 1) shortens the device's file after the last
    /// page the live region holds, its seal included
    /// (`PageDevice::shorten`), right after a switch: every page of
    /// either region past it was trimmed when its region was left, or
    /// never written, so what goes is holes and space reserved ahead, and
    /// the file's length follows what the log holds since the switch
    /// (with interleaved regions, about twice it) instead of the most it
    /// ever held. The switch is durable before, and a cut that does not
    /// reach the disk leaves holes; a failure is logged, not returned, so
    /// that a durable switch never reports an error.
    fn cut_file_after_live(&self) {
        if self.layout.first_page != 0 {
            return;
        }
        let used = self.next_pos + u64::from(self.sb.sealed && self.next_pos > 0);
        let keep = match used.checked_sub(1) {
            Some(last) => self.layout.region_page(self.sb.live, last) + 1,
            None => self.layout.first_page + SUPERBLOCK_PAGES,
        };
        if let Err(e) = self.dev.shorten(keep) {
            tracing::warn!("the log's file could not be cut after its page {keep}: {e}");
        }
    }
}
