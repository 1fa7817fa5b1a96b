//! Committing, flushing (Alg. 4) with torn-write protection, checkpoints,
//! log compaction and emergency flushes. See the [module docs](super).
use super::table::Row;
use super::{FastStore, COMPACT_AT, EMERGENCY_AT};

/// Log bytes counted per staged entry change when bounding a held group
/// (an eighth of the log), as the eFIND store bounds its groups.
const HELD_BYTES_PER_CHANGE: u64 = 64;

/// Bytes of encoded pages a flush holds at a time (formats with first
/// images; the papers' per-change format writes a flush in one batch).
/// Tests write chunks of a few pages, so that their crash campaigns crash
/// between the chunks of one flush.
#[cfg(not(test))]
const FLUSH_CHUNK_BYTES: usize = 4 << 20;
#[cfg(test)]
const FLUSH_CHUNK_BYTES: usize = 4 * 4096;
use crate::metrics::{Phase, Stopwatch};
use crate::page;
use crate::storage::PageId;
use crate::store::log::record::RECORD_HEADER;
use crate::store::log::{CheckpointState, ClientLog, Durability, MetaState, Record, RecordKind, NO_OP};
use crate::store::{OpId, FLUSH_BATCH_LOW_WATER, FLUSH_BATCH_UNITS};
use crate::{Error, Result};

impl FastStore {
    /// At the commit of `op`: appends its records, its META if the
    /// metadata or the allocation changed, and its COMMIT (durability per
    /// the mode). In the compact format `op` joins the held group instead,
    /// which is logged when it is due (see [`Self::log_group`]).
    pub(super) fn commit_records(&mut self, op: OpId) -> Result<()> {
        if !self.groups_operations() {
            return self.append_staged(op, false);
        }
        self.held_last = Some(op);
        self.log.defer_commit();
        let held_limit = usize::try_from(self.log.capacity_bytes() / 8 / HELD_BYTES_PER_CHANGE)
            .unwrap_or(usize::MAX)
            .max(1);
        let due = self.log.commit_due()
            || self.table.bytes() > self.config.buffer_bytes
            || self.log.fill_ratio() >= COMPACT_AT
            || self.log.free_bytes() < self.reserve()
            || self.staged.changes() > held_limit
            || self.client.as_ref().is_some_and(ClientLog::group_due);
        if due {
            self.log_group()?;
        }
        Ok(())
    }

    /// Whether operations are logged in groups (a compact log): the net
    /// changes of the pages a group of operations touched, one COMMIT.
    pub(super) fn groups_operations(&self) -> bool {
        self.log.format().groups_operations()
    }

    /// Compact format: logs the held group (its pages' coalesced records
    /// with the id of its newest operation, META, that operation's COMMIT,
    /// which the durability mode syncs or not); the group is then empty.
    /// The group is logged when the durability mode wants it durable, when
    /// a flush follows (a page never reaches the device before the group
    /// that changed it is logged), when the log needs room, and when it
    /// holds changes for an eighth of the log; also before any page it
    /// touched is written and before a checkpoint.
    pub(super) fn log_group(&mut self) -> Result<()> {
        match self.held_last.take() {
            Some(op) => self.append_staged(op, true),
            // Only changes of a failed operation: the next completed
            // operation's group (or a checkpoint) covers them.
            None => Ok(()),
        }
    }

    /// Appends the staged records with `op`'s id, META if the metadata or
    /// the allocation changed, and `op`'s COMMIT (of the deferred group
    /// when `group`), then empties the staging.
    fn append_staged(&mut self, op: OpId, group: bool) -> Result<()> {
        let (m, reused) = self.meta_record();
        let state = (m.meta.clone(), m.next_page, reused.len());
        let codec = self.codec();
        let mut records = self.staged.records(op, codec);
        records.extend(self.client.as_mut().and_then(|c| c.take_record(op)));
        if state != self.logged {
            let payload = codec.encode_meta_reused(&m, &reused);
            records.push(Record::new(RecordKind::Meta, op, 0, payload));
        }
        let need = self.op_room(
            records.iter().map(|r| r.encoded_len() as u64).sum::<u64>() + RECORD_HEADER as u64,
        );
        if self.log.free_bytes() < need {
            self.compact_log()?;
            if self.log.free_bytes() < need {
                self.flush_untouched()?;
            }
            if self.log.free_bytes() < need {
                return Err(Error::DeviceFull(format!(
                    "the log cannot hold one operation's {need} bytes of records ({} of {} bytes free after compaction): give the store a larger log",
                    self.log.free_bytes(),
                    self.log.capacity_bytes()
                )));
            }
        }
        self.max_op_bytes = self.max_op_bytes.max(need);
        self.staged.clear();
        // Only a commit that writes or syncs log pages is log time; one that
        // appends to the in-memory tail stays index work.
        let watch = self
            .log
            .commit_may_do_io(&records)
            .then(|| Stopwatch::start(self.device.sim_clock_ns()));
        let created: Vec<PageId> = records
            .iter()
            .filter(|r| r.kind == RecordKind::New)
            .map(|r| r.page)
            .collect();
        for rec in records {
            self.log.append(rec)?;
        }
        if group {
            self.log.commit_deferred(op)?;
        } else {
            self.log.commit(op)?;
        }
        if self.first_image() {
            // A NEW record holds the whole page: it protects the page's
            // flushes in this epoch as an image would (restart rebuilds the
            // page from it and every later record, see `FlushRule`).
            for id in created {
                self.needs_image(id);
            }
        }
        if let Some(watch) = watch {
            watch.stop(
                Phase::Log,
                self.device.sim_clock_ns(),
                &mut self.lock().stats.times,
            );
        }
        self.logged = state;
        Ok(())
    }

    /// At a commit whose records do not fit the compacted log: flushes the
    /// buffered nodes the running operation did not change and compacts
    /// again, which drops their records. Their rows hold committed changes
    /// only, all in the log already, so this keeps the operation atomic (its
    /// own nodes stay buffered: nothing of it reaches the device before its
    /// records and COMMIT are logged).
    fn flush_untouched(&mut self) -> Result<()> {
        let ids: Vec<PageId> = self
            .table
            .ids()
            .into_iter()
            .filter(|&id| !self.staged.touches(id))
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        self.fstats.emergency_flushes += 1;
        self.flush_pages(&ids, 1)?;
        self.compact_log()
    }

    /// Between operations: flush while the table is over budget, then keep
    /// the log below its thresholds.
    pub(super) fn after_commit(&mut self) -> Result<()> {
        if self.first_image() && self.table.bytes() > self.config.buffer_bytes {
            self.flush_batch()?;
        }
        while self.table.bytes() > self.config.buffer_bytes && !self.table.is_empty() {
            self.flush_once()?;
        }
        if self.log.fill_ratio() >= COMPACT_AT || self.log.free_bytes() < self.reserve() {
            self.compact_log()?;
            self.relieve_compacted_log()?;
        }
        Ok(())
    }

    /// Right after a compaction (or restart, which compacts): when the
    /// survivors still fill too much of the log, an emergency flush (a
    /// checkpoint) and another compaction. With a front end's frames in the
    /// log since the last checkpoint, every buffered page is written
    /// instead of a checkpoint: a CHECKPOINT would make the frames obsolete
    /// before the front end's snapshot holds them (only its checkpoint,
    /// which names that snapshot, may), and the written pages make their
    /// records obsolete as well.
    fn relieve_compacted_log(&mut self) -> Result<()> {
        if self.log.fill_ratio() >= EMERGENCY_AT || self.log.free_bytes() < self.reserve() {
            self.fstats.emergency_flushes += 1;
            if self.client.as_ref().is_some_and(ClientLog::holds_logged_frames) {
                let ids = self.table.ids();
                self.flush_pages(&ids, 1)?;
            } else {
                self.checkpoint_inner()?;
            }
            self.compact_log()?;
        }
        Ok(())
    }

    /// Log bytes kept free between operations for the next one: twice the
    /// largest operation seen, at least 4 pages.
    fn reserve(&self) -> u64 {
        self.max_op_bytes
            .saturating_mul(2)
            .max(4 * self.page_size as u64)
            .min(self.log.capacity_bytes() / 2)
    }

    /// Compacts the log (FAST's log compaction).
    pub(super) fn compact_log(&mut self) -> Result<()> {
        let watch = Stopwatch::start(self.device.sim_clock_ns());
        self.sync_pages()?;
        self.log.compact()?;
        watch.stop(
            Phase::Compaction,
            self.device.sim_clock_ns(),
            &mut self.lock().stats.times,
        );
        self.fstats.compactions += 1;
        Ok(())
    }

    /// One flush (Alg. 4): the unit the policy chooses, as one device batch.
    pub(super) fn flush_once(&mut self) -> Result<()> {
        let ids = self
            .heap
            .choose(self.config.policy, self.clock, &mut self.rng);
        if ids.is_empty() {
            return Ok(());
        }
        self.flush_pages(&ids, 1)
    }

    /// A batched flush (first-image and compact formats with a durable
    /// mode): flushing units chosen one after the other as
    /// [`flush_once`](Self::flush_once) would choose them (each among the
    /// units not chosen yet), until the table without them holds at most
    /// [`FLUSH_BATCH_LOW_WATER`] eighths of the budget or
    /// [`FLUSH_BATCH_UNITS`] units are chosen, then written as one flush:
    /// their first images and records behind one log sync, one device
    /// batch (in chunks only when the log cannot hold the images). The
    /// papers' per-change format flushes one unit at a time.
    fn flush_batch(&mut self) -> Result<()> {
        let low = self.config.buffer_bytes / 8 * FLUSH_BATCH_LOW_WATER;
        // The choices are made on a copy of the heap from which each chosen
        // unit's pages are taken; the store's heap loses them when written.
        let mut heap = self.heap.clone();
        let mut left = self.table.bytes();
        let mut ids = Vec::new();
        let mut units = 0u64;
        while left > low && units < FLUSH_BATCH_UNITS {
            let unit = heap.choose(self.config.policy, self.clock, &mut self.rng);
            if unit.is_empty() {
                break;
            }
            for &id in &unit {
                let row = self.table.get(id);
                left = left.saturating_sub(row.map_or(0, |r| r.bytes()));
                heap.touch(id, row.map_or(0, |r| r.updates), 0, None);
            }
            units += 1;
            ids.extend(unit);
        }
        if ids.is_empty() {
            return Ok(());
        }
        self.flush_pages(&ids, units)
    }

    /// Writes the buffered nodes `ids` (protected), `units` flushing units,
    /// and removes their rows. Write-ahead: a held group that touched one
    /// of them is logged first. Pages are encoded and written
    /// [`FLUSH_CHUNK_BYTES`] at a time (a checkpoint of a table of small
    /// MOD rows names many more pages than the budget holds), each chunk a
    /// protected write of its own; the papers' per-change format writes
    /// them all in one.
    pub(super) fn flush_pages(&mut self, ids: &[PageId], units: u64) -> Result<()> {
        if ids.iter().any(|&id| self.staged.touches(id)) {
            self.log_group()?;
        }
        let watch = Stopwatch::start(self.device.sim_clock_ns());
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let chunk_pages = if self.first_image() {
            (FLUSH_CHUNK_BYTES / self.page_size).max(1)
        } else {
            ids.len().max(1)
        };
        let lsn = self.log.page_lsn();
        let (mut written, mut flushed, mut levels) = (0u64, 0u64, Vec::new());
        for chunk in ids.chunks(chunk_pages) {
            let mut pages: Vec<(PageId, Vec<u8>)> = Vec::with_capacity(chunk.len());
            let first_level = levels.len();
            for &id in chunk {
                let Some(row) = self.table.get(id) else {
                    continue;
                };
                if matches!(row.row, Row::Del { .. }) {
                    continue;
                }
                let node = self.retrieve(id, false)?;
                let mut buf = vec![0u8; self.page_size];
                page::encode_node(&node, lsn, self.config.with_payload, &mut buf)?;
                pages.push((id, buf));
                levels.push(node.level);
            }
            // Tier hints for the nodes (the log's pages are never hinted).
            let chunk_levels = levels.get(first_level..).unwrap_or(&[]);
            self.node_placement.hint(
                &*self.device,
                pages.iter().map(|(id, _)| *id).zip(chunk_levels.iter().copied()),
            )?;
            written += self.write_protected(&pages)?;
            flushed += pages.len() as u64;
        }
        let mut updates = 0u64;
        for &id in &ids {
            if let Some(row) = self.table.remove(id) {
                updates += row.updates;
                self.heap.touch(id, row.updates, 0, None);
            }
        }
        self.fstats.flushed_updates += updates;
        let mut inner = self.lock();
        // A flush written in chunks counts each chunk.
        inner.stats.flushes += written.max(units).max(1);
        inner.stats.flushed_nodes += flushed;
        inner.stats.record_node_writes(levels);
        watch.stop(
            Phase::Flush,
            self.device.sim_clock_ns(),
            &mut inner.stats.times,
        );
        Ok(())
    }

    /// Log room an operation whose records (COMMIT included) take `bytes`
    /// needs: the records, the padding of the sync of its COMMIT, and room
    /// left for one protected flush after them (with less, the log could
    /// fill with records of buffered nodes that no flush could then make
    /// obsolete).
    pub(super) fn op_room(&self, bytes: u64) -> u64 {
        bytes + self.page_size as u64 + self.flush_room(1)
    }

    /// Whether flushes are protected by page images (every durability mode
    /// but `none`, the papers' mode, which writes no images and syncs
    /// nothing, as the eFIND store does).
    fn protect(&self) -> bool {
        self.config.durability != Durability::None
    }

    /// Log bytes a flush of `n` pages needs: with protection their images
    /// and the padding of the sync that follows them; always the FLUSH
    /// record.
    fn flush_room(&self, n: u64) -> u64 {
        let ps = self.page_size as u64;
        let header = RECORD_HEADER as u64;
        let flush_record = header + 4 + 8 * n;
        if self.protect() {
            n * (header + ps) + ps + flush_record
        } else {
            flush_record
        }
    }

    /// Whether flushes follow the first-image protocol (a first-image log and
    /// a durability that protects flushes): a page is imaged only at its first
    /// flush in a log epoch, and the page device is synced only before a
    /// compaction or a checkpoint (see [`crate::store::log::recovery`]).
    fn first_image(&self) -> bool {
        self.protect() && self.log.format().first_image()
    }

    /// Syncs the page device if pages were written since its last sync.
    pub(super) fn sync_pages(&mut self) -> Result<()> {
        if std::mem::take(&mut self.pages_unsynced) {
            self.device.sync()?;
        }
        Ok(())
    }

    /// Whether page `id` needs an image at this flush (first-image format:
    /// not imaged yet in the log's epoch); records it as imaged.
    fn needs_image(&mut self, id: PageId) -> bool {
        let epoch = self.log.epoch();
        if self.imaged_epoch != epoch {
            self.imaged.clear();
            self.imaged_epoch = epoch;
        }
        self.imaged.insert(id)
    }

    /// How many of `want` pages one protected flush can write with the log's
    /// free room.
    fn pages_fitting(&self, want: u64) -> u64 {
        let free = self.log.free_bytes();
        let mut n = want;
        while n > 0 && self.flush_room(n) > free {
            n -= 1;
        }
        n
    }

    /// The in-place write of `pages`. Protected (durability `sync` or
    /// `group`): PAGE_IMAGE records, log synced, one device batch, device
    /// synced, FLUSH record; pages go in chunks when the log cannot hold all
    /// their images (each chunk is one batch). With `none`: the log's
    /// buffered records written (not synced) before the pages, one batch,
    /// FLUSH record. Returns the number of batches.
    pub(super) fn write_protected(&mut self, pages: &[(PageId, Vec<u8>)]) -> Result<u64> {
        let mut rest = pages;
        let mut batches = 0;
        while !rest.is_empty() {
            let want = rest.len() as u64;
            let mut n = self.pages_fitting(want);
            if n < want {
                self.compact_log()?;
                n = self.pages_fitting(want);
            }
            if n == 0 {
                return Err(Error::DeviceFull(format!(
                    "the log ({} bytes, {} free after compaction) cannot hold one page image: give the store a larger log",
                    self.log.capacity_bytes(),
                    self.log.free_bytes()
                )));
            }
            let (chunk, tail) = rest.split_at((n as usize).min(rest.len()));
            rest = tail;
            let protect = self.protect();
            let first_image = self.first_image();
            if protect {
                let watch = Stopwatch::start(self.device.sim_clock_ns());
                let mut last = 0;
                for (id, bytes) in chunk {
                    if first_image && !self.needs_image(*id) {
                        continue;
                    }
                    last = self.log.append(Record::new(
                        RecordKind::PageImage,
                        NO_OP,
                        *id,
                        bytes.clone(),
                    ))?;
                    self.fstats.page_images += 1;
                }
                if first_image {
                    // Write-ahead: every record the pages contain is durable first.
                    last = self.log.last_lsn();
                }
                self.log.sync_to(last)?;
                watch.stop(
                    Phase::Log,
                    self.device.sim_clock_ns(),
                    &mut self.lock().stats.times,
                );
            }
            let ids: Vec<PageId> = chunk.iter().map(|(id, _)| *id).collect();
            if !protect {
                // The records of the pages' changes reach the device before
                // the pages (no sync).
                self.log.flush_for(&ids)?;
            }
            let data: Vec<u8> = chunk.iter().flat_map(|(_, b)| b.iter().copied()).collect();
            let watch = Stopwatch::start(self.device.sim_clock_ns());
            self.device.write_batch(&ids, &data)?;
            if first_image {
                self.pages_unsynced = true;
            } else if protect {
                self.device.sync()?;
            }
            watch.stop(
                Phase::Write,
                self.device.sim_clock_ns(),
                &mut self.lock().stats.times,
            );
            self.log.append(Record::flush(&ids)?)?;
            batches += 1;
        }
        Ok(batches)
    }

    /// Flushes every buffered node, then checkpoints the log with the state
    /// (the free list including this epoch's deletions): the log's next
    /// open replays nothing.
    pub(super) fn checkpoint_inner(&mut self) -> Result<()> {
        // The held group first: the pages written below contain its
        // changes, and a crash before the CHECKPOINT must find them logged.
        self.log_group()?;
        let ids = self.table.ids();
        if !ids.is_empty() {
            // The whole table goes as one flush, in chunks only when the
            // log is too small for all the images.
            self.flush_pages(&ids, 1)?;
        }
        self.table.clear();
        self.heap.clear();
        // The CHECKPOINT covers what a failed operation left staged.
        self.staged.clear();
        self.sync_pages()?;
        let state = CheckpointState {
            last_op: self.last_op,
            meta: MetaState {
                meta: self.meta.clone(),
                next_page: self.alloc.next_page(),
            },
            free: self.alloc.free_after_durable(),
            client_generation: self.client.as_ref().and_then(ClientLog::next_generation),
        };
        // A clean checkpoint: a fresh, empty log epoch whose superblock holds
        // the state (see `Log::checkpoint`).
        self.log.checkpoint_state(&state)?;
        if let Some(c) = self.client.as_mut() {
            c.checkpointed();
        }
        self.alloc.make_durable();
        self.reused.clear();
        self.logged = (self.meta.clone(), self.alloc.next_page(), 0);
        self.durable_floor = self.last_op;
        Ok(())
    }
}
