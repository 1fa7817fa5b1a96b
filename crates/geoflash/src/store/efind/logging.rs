//! The store's side of the log: committing an operation's records, keeping
//! room in the log (compaction and forced flushes), the protected flush of a
//! unit and the checkpoint. See the [module docs](super) ("Durability").
use crate::metrics::{Phase, Stopwatch};
use std::sync::Arc;

use super::flush::{BatchTarget, KeepFlushed};
use super::group::{HeldGroup, PageRecord};
use super::records::{CheckpointState, MetaState};
use super::EfindStore;
use crate::page::Node;
use crate::storage::PageId;
use crate::store::log::{ClientLog, Durability, PayloadCodec, Record, RecordKind, NO_OP};
use crate::store::OpId;
use crate::store::FLUSH_BATCH_LOW_WATER;
use crate::{Error, Result};

/// Entry changes above which a group is logged without the memo of logged
/// entries (entry references): entries are named by key when they were
/// logged by an earlier group, which pays when groups are many (a budget
/// smaller than the index flushes every few hundred or thousand
/// operations, and a moved entry was logged a few groups before: at 8 MiB
/// a group holds about 20,000 changes), not when a group is a large part
/// of a build (the default budget logs a million insertions in a handful
/// of groups of 100,000 and more, whose entries would fill the memo for
/// 7 % fewer log pages and 4–10 % more build time, docs/benchmarks.md
/// "Entry references").
pub(super) const MEMO_GROUP_CHANGES: usize = 131_072;
/// Compact after an operation when the log is fuller than this.
const COMPACT_AT: f64 = 0.75;
/// After a compaction the survivors should fill at most this share, else forced flushes.
const AFTER_COMPACT_MAX: f64 = 0.5;
/// Log bytes one held entry change is assumed to take (compact format:
/// a group is logged before its changes could fill an eighth of the log).
const HELD_BYTES_PER_CHANGE: u64 = 64;

/// Bytes of pages a checkpoint (or a forced flush) writes with one batch
/// at most: a sixteenth of the memory budget, between 4 and 8 MiB (16 MiB
/// parts put the final checkpoint of a 16 M-object build 22 MB above
/// budget + 64 MB; 8 MiB parts, 8.6 MB below it: docs/benchmarks.md). A
/// part's pages are merged and encoded together, so a checkpoint of a
/// large write buffer in one part (the automatic log of a 256 MiB budget is
/// 1 GiB, a quarter of which held every buffered page) kept every page
/// encoded at once beside its decoded version: 56 MB above the build's
/// peak at 1,000,000 rectangles with 256 MiB, 30 MB with 2 MiB (4,000
/// buffered pages of a few changes each; issue 47, item 5). 4 MiB is more
/// than the papers' 10 MiB log lets a part hold (a quarter of it), so their
/// settings write the same parts as before.
pub(super) fn chunk_bytes(buffer_bytes: usize) -> usize {
    (buffer_bytes / 16).clamp(4 << 20, 8 << 20)
}

impl EfindStore {
    fn meta_state(&self) -> MetaState {
        MetaState {
            meta: self.meta.clone(),
            next_page: self.alloc.next_page(),
        }
    }

    /// Bytes of log room a batch of records needs: the records, and one page
    /// for the padding of each sync they may cause.
    fn room_for(&self, record_bytes: u64) -> u64 {
        let dpp = crate::store::log::record::data_per_page(self.page_size) as u64;
        record_bytes.saturating_add(2 * dpp)
    }

    /// The META record of operation `op` (the current metadata and next page).
    fn meta_record(&self, op: OpId) -> Record {
        Record::new(
            RecordKind::Meta,
            op,
            0,
            self.codec().encode_meta(&self.meta_state()),
        )
    }

    /// Makes sure the log can take `recs` and the COMMIT of `op` (see
    /// [`Self::ensure_room`]).
    fn ensure_room_for(&mut self, recs: &[Record], op: OpId) -> Result<()> {
        let bytes: u64 = recs.iter().map(|r| r.encoded_len() as u64).sum::<u64>()
            + Record::commit(op).encoded_len() as u64;
        self.ensure_room(bytes)
    }

    /// Makes sure the log can take `bytes` more (compacting if needed;
    /// never flushes pages, so it is safe while the write buffer holds an
    /// operation that is not logged yet).
    pub(super) fn ensure_room(&mut self, bytes: u64) -> Result<()> {
        let need = self.room_for(bytes);
        if self.log_mut()?.free_bytes() >= need {
            return Ok(());
        }
        self.compact_log()?;
        let log = self.log_mut()?;
        if log.free_bytes() >= need {
            return Ok(());
        }
        Err(Error::DeviceFull(format!(
            "the log cannot take {bytes} more bytes even after compaction ({} of {} bytes used): raise the log capacity",
            log.used_bytes(),
            log.capacity_bytes()
        )))
    }

    /// Whether flushes follow the first-image protocol: a first-image or
    /// compact log and a durability that protects flushes (not `none`).
    pub(super) fn first_image(&self) -> bool {
        self.config.durability != Durability::None
            && self.log.as_ref().is_some_and(|l| l.format().first_image())
    }

    /// Whether operations are logged in groups (a compact log).
    pub(super) fn groups_operations(&self) -> bool {
        self.log
            .as_ref()
            .is_some_and(|l| l.format().groups_operations())
    }

    /// Logs a node change `(op, node, kind)`: nothing while unlogged
    /// (`unlogged.rs`); in a compact log, `hold` notes it in the held group
    /// of operations; otherwise a record of `kind` with the payload
    /// `encode` gives waits in the operation's pending records.
    pub(super) fn log_change(
        &mut self,
        (op, id, kind): (OpId, PageId, RecordKind),
        hold: impl FnOnce(&mut HeldGroup),
        encode: impl FnOnce(&PayloadCodec) -> Vec<u8>,
    ) {
        if self.is_unlogged() {
            return;
        }
        if self.groups_operations() {
            hold(&mut self.held);
        } else {
            let payload = encode(&self.codec());
            self.pending.push(Record::new(kind, op, id, payload));
        }
    }

    /// Compact format, after operation `op`: adds it to the held group and
    /// logs the group when the durability mode wants it durable, before the
    /// write buffer flushes pages or the log is compacted (a page never
    /// reaches the device before the group that changed it is logged), or
    /// when the group has grown to an eighth of the log.
    fn commit_grouped(&mut self, op: OpId) -> Result<()> {
        let meta = std::mem::take(&mut self.meta_dirty);
        self.held.completed(op, meta);
        let budget = self.write_budget;
        let over_budget = self.wb.bytes() > budget;
        let log = self.log_mut()?;
        log.defer_commit();
        let held_limit = usize::try_from(log.capacity_bytes() / 8 / HELD_BYTES_PER_CHANGE)
            .unwrap_or(usize::MAX)
            .max(1);
        let due = log.commit_due()
            || over_budget
            || log.fill_ratio() > COMPACT_AT
            || self.held.changes() > held_limit
            || self.client.as_ref().is_some_and(ClientLog::group_due);
        if due {
            self.log_group()?;
        }
        Ok(())
    }

    /// Compact format: appends the held group's records (the net NEW, MOD
    /// or DEL of every page it changed, in page order, then META if it
    /// changed) with the id of its last operation, then that operation's
    /// COMMIT, which the durability mode syncs or not; the group is then
    /// empty. Nothing to do for an empty group.
    pub(super) fn log_group(&mut self) -> Result<()> {
        let Some(op) = self.held.last_op else {
            // Only changes of a failed operation: the next completed
            // operation's group (or a checkpoint) covers them.
            return Ok(());
        };
        let watch = Stopwatch::start(self.device.sim_clock_ns());
        let pages = self
            .held
            .records(&self.wb)
            .map_err(|why| Error::corrupt(None, format!("internal: {why}")))?;
        let appended = self.append_group(op, &pages);
        if appended.is_err() {
            // Records noted in the memo may not have reached the log.
            self.memo.clear();
        }
        let created = appended?;
        let log = self.log_mut()?;
        log.commit_deferred(op)?;
        if self.first_image() {
            self.imaged_now()?.extend(created);
        }
        self.held.clear();
        watch.stop(
            Phase::Log,
            self.device.sim_clock_ns(),
            &mut self.lock().stats.times,
        );
        Ok(())
    }

    /// The records of a logged group: the net NEW, MOD or DEL of every
    /// page of `pages`, then META if the group changed it. With entry
    /// references the entries are noted in the memo of the live epoch,
    /// except in a group of more than [`MEMO_GROUP_CHANGES`] entry changes:
    /// there the memo is emptied and the entries written in full (see the
    /// constant).
    fn group_records(
        &mut self,
        op: OpId,
        pages: &[(PageId, PageRecord)],
        client: Option<Record>,
    ) -> Result<Vec<Record>> {
        let codec = self.codec();
        let refs = self.log.as_ref().is_some_and(|l| l.entry_refs());
        let epoch = self.log_mut()?.epoch();
        let mut memo = Some(self.memo.for_epoch(epoch));
        if self.held.changes() > self.memo_group_changes {
            // An entry written in full must not leave an older content of
            // its key in the memo: without noting, the memo goes.
            self.memo.clear();
            memo = None;
        }
        let mut recs = Vec::with_capacity(pages.len() + 1);
        for (id, rec) in pages {
            let (kind, payload) = match rec {
                PageRecord::New(level, entries) if refs => (
                    RecordKind::New,
                    codec.encode_new_refs(*level, entries, memo.as_deref_mut()),
                ),
                PageRecord::New(level, entries) => (RecordKind::New, codec.encode_new(*level, entries)),
                PageRecord::Mod(level, changes) if refs => (
                    RecordKind::Mod,
                    codec.encode_mod_refs(*level, changes, memo.as_deref_mut()),
                ),
                PageRecord::Mod(level, changes) => (RecordKind::Mod, codec.encode_mod(*level, changes)),
                PageRecord::Del(level) => (RecordKind::Del, codec.encode_del(*level)),
            };
            recs.push(Record::new(kind, op, *id, payload));
        }
        recs.extend(client);
        if self.held.meta {
            recs.push(self.meta_record(op));
        }
        Ok(recs)
    }

    /// Appends the records of the held group (see [`Self::group_records`])
    /// after making room for them, and returns the pages it created. A
    /// compaction while making room starts a new epoch, whose memo is
    /// empty: the records are encoded again, naming only entries of the
    /// group itself (which precede them in the new epoch).
    fn append_group(&mut self, op: OpId, pages: &[(PageId, PageRecord)]) -> Result<Vec<PageId>> {
        let epoch = self.log_mut()?.epoch();
        // The group's client frames, one CLIENT record before its META.
        let client = self.client.as_mut().and_then(|c| c.take_record(op));
        let mut recs = self.group_records(op, pages, client.clone())?;
        self.ensure_room_for(&recs, op)?;
        if self.log_mut()?.epoch() != epoch {
            self.memo.clear();
            recs = self.group_records(op, pages, client)?;
            self.ensure_room_for(&recs, op)?;
        }
        self.append_records(recs)
    }

    /// Appends `recs` to the log in order and returns the pages their NEW
    /// records create.
    fn append_records(&mut self, recs: Vec<Record>) -> Result<Vec<PageId>> {
        let created = recs
            .iter()
            .filter(|r| r.kind == RecordKind::New)
            .map(|r| r.page)
            .collect();
        let log = self.log_mut()?;
        for r in recs {
            log.append(r)?;
        }
        Ok(created)
    }

    /// The FLUSH record of `flushed`: its page list as varints in a log
    /// that reads them (version 5).
    fn flush_record(&self, flushed: &[PageId]) -> Result<Record> {
        if self.log.as_ref().is_some_and(|l| l.entry_refs()) {
            Ok(Record::flush_varint(flushed))
        } else {
            Record::flush(flushed)
        }
    }

    /// Lowers the group size above which the memo of logged entries is
    /// not used (tests: both paths within one run).
    #[cfg(test)]
    pub(crate) fn set_memo_group_changes(&mut self, changes: usize) {
        self.memo_group_changes = changes;
    }

    /// The imaged set, emptied when the log moved to another epoch (its
    /// images were dropped by a compaction, a checkpoint or a restart).
    fn imaged_now(&mut self) -> Result<&mut crate::page_id::IdSet> {
        let epoch = self.log_mut()?.epoch();
        if self.imaged_epoch != epoch {
            self.imaged.clear();
            self.imaged_epoch = epoch;
        }
        Ok(&mut self.imaged)
    }

    /// Syncs the page device if pages were written since its last sync
    /// (first-image format: before a compaction drops the records their
    /// FLUSH records cover, and before a checkpoint).
    pub(super) fn sync_pages(&mut self) -> Result<()> {
        if std::mem::take(&mut self.pages_unsynced) {
            self.device.sync()?;
        }
        Ok(())
    }

    /// Pages of one write whose page images fit a quarter of the log, and
    /// at most [`chunk_bytes`] of pages.
    pub(super) fn image_chunk_pages(&mut self) -> Result<usize> {
        let cap = self.log_mut()?.capacity_bytes();
        let per_page = (self.page_size + records_header()) as u64;
        let by_log = usize::try_from((cap / 4 / per_page).max(1)).unwrap_or(usize::MAX);
        let by_memory = chunk_bytes(self.config.buffer_bytes) / self.page_size;
        Ok(by_log.min(by_memory.max(1)))
    }

    fn compact_log(&mut self) -> Result<()> {
        let watch = Stopwatch::start(self.device.sim_clock_ns());
        // The compaction starts a new epoch, which the memo would forget
        // at its next use (`EntryMemo::for_epoch`): forgotten now, its
        // memory is not held beside the compaction's own.
        self.memo.clear();
        self.sync_pages()?;
        self.log_mut()?.compact()?;
        watch.stop(
            Phase::Compaction,
            self.device.sim_clock_ns(),
            &mut self.lock().stats.times,
        );
        self.lock().estats.compactions += 1;
        Ok(())
    }

    /// After an operation: appends its records and COMMIT, flushes while the
    /// write buffer is over budget, and keeps the log below its threshold.
    pub(super) fn commit_logged(&mut self, op: OpId) -> Result<()> {
        if self.is_unlogged() {
            // Nothing to log (`unlogged.rs`): the checkpoint is the
            // operation's durability point.
            if let Some(c) = self.client.as_mut() {
                c.committed_unlogged();
            }
            self.meta_dirty = false;
            self.last_op = Some(op);
            self.lock().stats.ops_committed += 1;
            self.upkeep_due = true;
            return Ok(());
        }
        if let Some(c) = self.client.as_mut() {
            c.committed();
        }
        if self.groups_operations() {
            self.commit_grouped(op)?;
            self.last_op = Some(op);
            self.lock().stats.ops_committed += 1;
            self.upkeep_due = true;
            return Ok(());
        }
        let mut recs = std::mem::take(&mut self.pending);
        recs.extend(self.client.as_mut().and_then(|c| c.take_record(op)));
        if std::mem::take(&mut self.meta_dirty) {
            recs.push(self.meta_record(op));
        }
        self.ensure_room_for(&recs, op)?;
        // Only a commit that writes or syncs log pages is log time; one that
        // appends to the in-memory tail stays index work.
        let watch = self
            .log_mut()?
            .commit_may_do_io(&recs)
            .then(|| Stopwatch::start(self.device.sim_clock_ns()));
        let created = self.append_records(recs)?;
        self.log_mut()?.commit(op)?;
        if self.first_image() {
            // A NEW record holds the whole page: it protects the page's
            // flushes in this epoch as an image would.
            self.imaged_now()?.extend(created);
        }
        if let Some(watch) = watch {
            watch.stop(
                Phase::Log,
                self.device.sim_clock_ns(),
                &mut self.lock().stats.times,
            );
        }
        self.last_op = Some(op);
        self.lock().stats.ops_committed += 1;
        self.upkeep_due = true;
        Ok(())
    }

    /// Between operations (when the next one begins, see `upkeep_due`):
    /// flushes while the write buffer is over budget and keeps the log below
    /// its threshold.
    pub(super) fn flush_and_keep_room(&mut self) -> Result<()> {
        if self.first_image() {
            if self.wb.bytes() > self.write_budget {
                let low = self.write_budget / 8 * FLUSH_BATCH_LOW_WATER;
                self.flush_batch(BatchTarget::Bytes(low))?;
            }
        } else {
            while self.wb.bytes() > self.write_budget {
                if self.flush_once()? == 0 {
                    break;
                }
            }
        }
        self.keep_log_room()
    }

    /// Compacts when the log passes [`COMPACT_AT`]; when the survivors still
    /// fill more than [`AFTER_COMPACT_MAX`], flushes half of the buffered
    /// pages and compacts again (between operations only).
    pub(super) fn keep_log_room(&mut self) -> Result<()> {
        if self.log_mut()?.fill_ratio() <= COMPACT_AT {
            return Ok(());
        }
        self.compact_log()?;
        while self.log_mut()?.fill_ratio() > AFTER_COMPACT_MAX && !self.wb.is_empty() {
            let target = self.wb.len() / 2;
            if self.first_image() {
                let units = self.flush_batch(BatchTarget::Pages(target))?;
                self.lock().estats.forced_flushes += units;
            } else {
                while self.wb.len() > target {
                    if self.flush_once()? == 0 {
                        break;
                    }
                    self.lock().estats.forced_flushes += 1;
                }
            }
            self.compact_log()?;
        }
        Ok(())
    }

    /// Writes `pages` (encoded, in ascending id order, `data` holding them
    /// back to back) in place with the flush protocol, then appends FLUSH of
    /// `flushed` (the written pages and the buffered deletions).
    pub(super) fn write_protected(
        &mut self,
        pages: &[PageId],
        data: &[u8],
        flushed: &[PageId],
    ) -> Result<()> {
        if self.is_unlogged() {
            return self.write_unlogged(pages, data);
        }
        // Write-ahead: the changes the pages contain are logged first.
        self.log_group()?;
        if self.first_image() {
            return self.write_first_image(pages, data, flushed);
        }
        let ps = self.page_size;
        let protect = self.config.durability != Durability::None;
        let flush_rec = Record::flush(flushed)?;
        if !pages.is_empty() {
            if protect {
                let image_bytes = pages.len() as u64 * (ps + records_header()) as u64;
                self.ensure_room(image_bytes + flush_rec.encoded_len() as u64)?;
                let images: Vec<(PageId, &[u8])> =
                    pages.iter().copied().zip(data.chunks_exact(ps)).collect();
                self.log_images(&images)?;
            } else {
                self.ensure_room(flush_rec.encoded_len() as u64)?;
                // The records of the pages' changes reach the device before
                // the pages (no sync).
                self.log_mut()?.flush_for(pages)?;
            }
            let watch = Stopwatch::start(self.device.sim_clock_ns());
            self.device.write_batch(pages, data)?;
            if protect {
                self.device.sync()?;
            }
            watch.stop(
                Phase::Write,
                self.device.sim_clock_ns(),
                &mut self.lock().stats.times,
            );
        } else {
            self.ensure_room(flush_rec.encoded_len() as u64)?;
        }
        self.log_mut()?.append(flush_rec)?;
        Ok(())
    }

    /// Appends a PAGE_IMAGE record for each of `images`, syncs the log to
    /// its last record (the images and every record before them durable:
    /// write-ahead) and counts the images; the time is log time.
    pub(super) fn log_images(&mut self, images: &[(PageId, &[u8])]) -> Result<()> {
        let watch = Stopwatch::start(self.device.sim_clock_ns());
        let log = self.log_mut()?;
        for &(id, bytes) in images {
            log.append(Record::new(
                RecordKind::PageImage,
                NO_OP,
                id,
                bytes.to_vec(),
            ))?;
        }
        let last = log.last_lsn();
        log.sync_to(last)?;
        let per_image = (self.page_size + records_header()) as u64;
        let mut inner = self.lock();
        watch.stop(
            Phase::Log,
            self.device.sim_clock_ns(),
            &mut inner.stats.times,
        );
        let n = images.len() as u64;
        inner.estats.page_images += n;
        inner.estats.page_image_bytes += n * per_image;
        Ok(())
    }

    /// The first-image flush protocol (see the [module docs](super)):
    /// PAGE_IMAGE records of the pages not imaged in the log's epoch, one log
    /// sync (images, and every record the pages contain, durable before the
    /// pages; it also completes the group commit), the pages written as one
    /// batch without a device sync, then FLUSH. The page device is synced
    /// before the next compaction or checkpoint, which is when FLUSH records
    /// start to make records obsolete.
    fn write_first_image(
        &mut self,
        pages: &[PageId],
        data: &[u8],
        flushed: &[PageId],
    ) -> Result<()> {
        let ps = self.page_size;
        let flush_rec = self.flush_record(flushed)?;
        // Room for the worst case (every page imaged) before the imaged set
        // is read: a compaction here starts a new epoch.
        let image_bytes = pages.len() as u64 * (ps + records_header()) as u64;
        self.ensure_room(image_bytes + flush_rec.encoded_len() as u64)?;
        if !pages.is_empty() {
            let imaged = self.imaged_now()?;
            let need: Vec<(PageId, &[u8])> = pages
                .iter()
                .zip(data.chunks_exact(ps))
                .filter(|(id, _)| imaged.insert(**id))
                .map(|(&id, chunk)| (id, chunk))
                .collect();
            // With no image needed this still syncs the log: every record
            // the pages contain is durable before they are written.
            self.log_images(&need)?;
            let watch = Stopwatch::start(self.device.sim_clock_ns());
            self.pages_unsynced = true;
            self.device.write_batch(pages, data)?;
            watch.stop(
                Phase::Write,
                self.device.sim_clock_ns(),
                &mut self.lock().stats.times,
            );
        }
        self.log_mut()?.append(flush_rec)?;
        Ok(())
    }

    /// A clean log checkpoint with the current state (the log's next open
    /// replays nothing); the pending deletions become reusable.
    pub(super) fn append_checkpoint(&mut self) -> Result<()> {
        let state = CheckpointState {
            last_op: self
                .last_op
                .unwrap_or(0)
                .max(self.ops.next.saturating_sub(1)),
            meta: self.meta_state(),
            free: self.alloc.free_after_durable(),
            client_generation: self.client.as_ref().and_then(ClientLog::next_generation),
        };
        // A clean checkpoint: a fresh, empty log epoch whose superblock holds
        // the state (see `Log::checkpoint`); in the unlogged mode its COMMIT
        // names the newest operation, which no log record does.
        let unlogged = self.last_op.filter(|_| self.is_unlogged());
        self.log_mut()?
            .checkpoint_state_including(&state, unlogged)?;
        if let Some(c) = self.client.as_mut() {
            c.checkpointed();
        }
        self.alloc.make_durable();
        self.lock().estats.checkpoints += 1;
        Ok(())
    }

    /// Flushes every buffered page (in chunks whose images fit a quarter of
    /// the log), syncs, and appends a CHECKPOINT.
    pub(super) fn checkpoint_logged(&mut self) -> Result<()> {
        // The held group first: the pages written below contain its
        // changes, and a crash before the CHECKPOINT must find them logged.
        self.log_group()?;
        let chunk = self.image_chunk_pages()?;
        let mut ids: Vec<PageId> = self.wb.iter().map(|(id, _)| id).collect();
        ids.sort_unstable();
        // The checkpoint that ends the unlogged mode leaves the written
        // pages out of the read buffer (see KeepFlushed::Alg5).
        let keep = if self.unlogged.is_some() {
            KeepFlushed::Alg5
        } else {
            KeepFlushed::Decoded
        };
        for part in ids.chunks(chunk) {
            self.write_pages(part, 1, keep)?;
            self.keep_log_room()?;
        }
        self.pages_unsynced = false;
        self.device.sync()?;
        self.append_checkpoint()?;
        // Everything the unlogged mode did is durable now.
        self.leave_unlogged();
        if self.log_mut()?.fill_ratio() > AFTER_COMPACT_MAX {
            self.compact_log()?;
        }
        // Every buffered page is written and the log has its room.
        self.upkeep_due = false;
        Ok(())
    }

    /// Pages reachable from the root (internal nodes read through
    /// RetrievePage, leaves named by their parents), for restart's allocator.
    pub(super) fn reachable_pages(&self) -> Result<std::collections::BTreeSet<PageId>> {
        let mut seen = std::collections::BTreeSet::new();
        let Some(root) = self.meta.root else {
            return Ok(seen);
        };
        let limit = self.alloc.next_page();
        let mut stack: Vec<(PageId, Option<u16>)> = vec![(root, None)];
        while let Some((id, want_level)) = stack.pop() {
            if id == 0 || id >= limit || !seen.insert(id) {
                return Err(Error::corrupt(
                    Some(id),
                    "restart: the tree names a page twice, page 0, or a page beyond the allocated ones",
                ));
            }
            if want_level == Some(0) {
                continue;
            }
            let node: Arc<Node> = self.retrieve(id, false)?;
            if want_level.is_some_and(|l| l != node.level) {
                return Err(Error::corrupt(
                    Some(id),
                    format!(
                        "restart: node at level {} where its parent expects level {want_level:?}",
                        node.level
                    ),
                ));
            }
            if node.level > 0 {
                for e in &node.entries {
                    stack.push((e.key, Some(node.level - 1)));
                }
            }
        }
        Ok(seen)
    }
}

/// Framing bytes of one record.
fn records_header() -> usize {
    crate::store::log::record::RECORD_HEADER
}
