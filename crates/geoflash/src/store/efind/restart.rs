//! Opening a store: restart (Alg. 7 with page images and the allocator
//! rebuilt), or a read-only open that refuses a log needing recovery. See
//! the [module docs](super) ("Durability").
use std::sync::Arc;

use super::records::{CheckpointState, MetaState};
use super::{parse_identity, EfindConfig, EfindStore, FORMAT};
use crate::storage::overlay::ImageOverlay;
use crate::storage::{PageDevice, PageId};
use crate::store::alloc::PageAllocator;
use crate::store::header::Header;
use crate::store::log::{
    needs_replay, ClientLog, Log, LogConfig, LogPlacement, LogReader, Record, RecordKind, RecoveredClient,
    TailRepair,
};
use crate::store::placement::Placement;
use crate::store::stored::open_log;
use crate::store::TreeMeta;
use crate::{Error, Result};

pub use crate::store::log::RestartReport;

/// The log placement of the store on `device` whose identity blob names
/// the range `first_page .. first_page + pages` (`separate`: of a separate
/// log device), on the device of `log`, once `log` is checked against it:
/// the log on the same kind of device (separate or not) and the same range,
/// or the range [`EfindConfig::log_placement`] gives for an automatic
/// capacity (which depends on the buffer and the release: the store keeps
/// the size it was created with).
pub(super) fn recorded_log(
    device: &Arc<dyn PageDevice>,
    log: &LogPlacement,
    config: &EfindConfig,
    (first_page, pages, separate): (PageId, u64, bool),
) -> Result<LogPlacement> {
    match (separate, log.same_device(device)) {
        (true, true) => {
            return Err(Error::invalid(
                "the eFIND store keeps its log on a separate device (log.dat): open it with that device",
            ))
        }
        (false, false) => {
            return Err(Error::invalid(
                "the eFIND store keeps its log on its own device, but a separate log device was given",
            ))
        }
        _ => {}
    }
    if let Err(e) = log.check_recorded(first_page, pages) {
        if !resolves_automatically(device, log, config) {
            return Err(e);
        }
    }
    Ok(LogPlacement {
        device: Arc::clone(&log.device),
        first_page,
        pages,
    })
}

/// Whether `log` is the placement `config` gives with an automatic capacity.
fn resolves_automatically(
    device: &Arc<dyn PageDevice>,
    log: &LogPlacement,
    config: &EfindConfig,
) -> bool {
    let log_device = (!log.same_device(device)).then(|| Arc::clone(&log.device));
    config.log_capacity == 0
        && config
            .log_placement(device, log_device)
            .is_ok_and(|p| (p.first_page, p.pages) == (log.first_page, log.pages))
}

/// Writes the page images among `records` back to `device` (each to the
/// tier of its level, as a flush puts it) and syncs: the number of pages
/// restored. An image that does not fit a store of `cap` pages is
/// corruption.
fn restore_images(
    device: &dyn PageDevice,
    records: &[Record],
    cap: u64,
    placement: &Placement,
) -> Result<u64> {
    let ps = device.page_size();
    let images: Vec<&Record> = records
        .iter()
        .filter(|r| r.kind == RecordKind::PageImage)
        .collect();
    if images.is_empty() {
        return Ok(0);
    }
    let mut ids = Vec::with_capacity(images.len());
    let mut data = Vec::with_capacity(images.len() * ps);
    for r in &images {
        if r.payload.len() != ps || r.page == 0 || r.page >= cap {
            return Err(Error::corrupt(
                Some(r.page),
                format!(
                    "log record {}: a page image of {} bytes for page {} does not fit this store",
                    r.lsn,
                    r.payload.len(),
                    r.page
                ),
            ));
        }
        ids.push(r.page);
        data.extend_from_slice(&r.payload);
    }
    placement.hint_images(device, ids.iter().copied().zip(data.chunks_exact(ps)))?;
    device.write_batch(&ids, &data)?;
    device.sync()?;
    Ok(ids.len() as u64)
}

/// A front end's frames since the checkpoint (of client generation
/// `generation`) among `records`, on a log that holds them (read-only,
/// `log` is `None`: one whose checkpoint names a generation or that holds
/// CLIENT records).
fn restored_client(
    log: Option<&Log>,
    generation: Option<u64>,
    records: &[Record],
) -> Result<Option<ClientLog>> {
    let client = match log {
        Some(l) => l.client_frames(),
        None => generation.is_some() || records.iter().any(|r| r.kind == RecordKind::Client),
    };
    if !client {
        return Ok(None);
    }
    let found = RecoveredClient::collect(generation, records)?;
    let room = log.map_or(0, |l| l.capacity_bytes() / 4);
    Ok(Some(ClientLog::restarted(found).with_room(room)))
}

impl EfindStore {
    /// The allocator after a restart, pages `1 .. next_page` in use or
    /// free: from the checkpoint's free list `free` when nothing was
    /// `replayed`, else from the pages reachable from the root (buffered
    /// deletions of unreachable pages are settled: nothing refers to them).
    fn restore_allocator(
        &mut self,
        replayed: bool,
        next_page: PageId,
        free: &[PageId],
        cap: u64,
    ) -> Result<()> {
        if replayed {
            self.alloc = PageAllocator::restore(1, next_page, std::iter::empty(), cap)?;
            let reachable = self.reachable_pages()?;
            let free: Vec<PageId> = (1..next_page).filter(|p| !reachable.contains(p)).collect();
            self.alloc = PageAllocator::restore(1, next_page, free, cap)?;
        } else {
            self.alloc = PageAllocator::restore(1, next_page, free.iter().copied(), cap)
                .map_err(|e| Error::corrupt(None, format!("checkpoint free list: {e}")))?;
        }
        Ok(())
    }

    pub(super) fn open_inner(
        device: Arc<dyn PageDevice>,
        log: LogPlacement,
        config: EfindConfig,
        read_only: bool,
        placement: Placement,
    ) -> Result<Self> {
        config.verify()?;
        let hdr = Header::read(&FORMAT, device.as_ref())?;
        if hdr.with_payload != config.with_payload {
            return Err(Error::invalid(
                "the store was created with another entry-payload setting",
            ));
        }
        let (index_id, first_page, pages, separate) = parse_identity(&hdr.user_meta)?;
        let place = recorded_log(&device, &log, &config, (first_page, pages, separate))?;
        let cap = place.node_capacity(&device)?;
        let log_config = LogConfig::new(index_id).with_durability(config.durability);
        let mut repair = TailRepair::default();
        let mut device = device;
        let (log, rec, horizon) = if read_only {
            let reader = LogReader::open(place.device.clone(), first_page, pages, index_id)?;
            let horizon = reader.horizon();
            let rec = reader.recover()?;
            if rec.records.iter().any(needs_replay) {
                // Replayed as a writer would, through a view that keeps the
                // page images in memory: the files stay as they are.
                device = Arc::new(ImageOverlay::new(device));
            }
            (None, rec, horizon)
        } else {
            let opened = open_log(device.as_ref(), cap, &place, log_config, config.recovery)?;
            repair = opened.repair;
            (Some(opened.log), opened.rec, opened.horizon)
        };
        let mut report = RestartReport::from_recovered(&rec);
        report.add_tail_repair(&repair);
        // 1. Torn-write repair: write the surviving page images back.
        report.pages_restored = restore_images(device.as_ref(), &rec.records, cap, &placement)?;
        // 2. The state of the newest checkpoint, then the later records.
        let mut ck = CheckpointState {
            last_op: hdr.lsn,
            meta: MetaState {
                meta: hdr.meta.clone(),
                next_page: hdr.next_page,
            },
            free: hdr.free.clone(),
            client_generation: None,
        };
        let mut store = Self::assemble(
            device,
            config,
            PageAllocator::new(1, cap)?,
            TreeMeta::default(),
            place,
            index_id,
        )?;
        store.placement = placement;
        store.horizon = horizon;
        let mut meta: Option<MetaState> = None;
        let mut next_page: PageId = 1;
        store.wb.begin_replay();
        for r in &rec.records {
            match r.kind {
                RecordKind::Checkpoint => ck = rec.payload_codec().decode_checkpoint(r)?,
                RecordKind::New => {
                    let (level, entries) = rec.payload_codec().decode_new(r)?;
                    store.wb.create(r.page, level, &entries);
                    next_page = next_page.max(r.page.saturating_add(1));
                }
                RecordKind::Mod => {
                    let (level, changes) = rec.payload_codec().decode_mod(r)?;
                    store.wb.modify(r.page, level, &changes);
                }
                RecordKind::Del => {
                    let level = rec.payload_codec().decode_del(r)?;
                    store.wb.delete(r.page, level);
                }
                RecordKind::Meta => meta = Some(rec.payload_codec().decode_meta(r)?),
                RecordKind::PageImage => {
                    store.wb.remove(r.page);
                }
                RecordKind::Commit | RecordKind::Flush | RecordKind::Client => {}
            }
            if needs_replay(r) && r.kind != RecordKind::PageImage {
                report.changes_replayed += 1;
            }
        }
        store.wb.finish_replay();
        let replayed = rec.records.iter().any(needs_replay);
        let state = meta.unwrap_or_else(|| ck.meta.clone());
        next_page = next_page.max(state.next_page).max(ck.meta.next_page).max(1);
        if next_page > cap {
            return Err(Error::corrupt(
                None,
                format!("the log names page {next_page}, beyond the store's {cap} pages"),
            ));
        }
        store.meta = state.meta;
        let last_op = rec.last_committed_op.unwrap_or(0).max(ck.last_op);
        store.last_op = (last_op > 0).then_some(last_op);
        store.ops.next = rec.max_op.max(ck.last_op).max(hdr.lsn).saturating_add(1);
        // 3. The allocator.
        store.restore_allocator(replayed, next_page, &ck.free, cap)?;
        report.allocator_rebuilt = replayed;
        report.free_pages = store.alloc.free_pages().count() as u64;
        report.buffered_pages = store.wb.len() as u64;
        report.records_in_tree = store.meta.records;
        store.client = restored_client(log.as_ref(), ck.client_generation, &rec.records)?;
        let writable = log.is_some();
        store.log = log;
        store.restart = Some(report);
        if writable {
            // Between operations the log keeps room for the next one
            // (compaction, then flushes); a crash after an operation and
            // before that left it fuller, and restart's compaction frees
            // nothing the write buffer's pages still need.
            store.keep_log_room()?;
        }
        Ok(store)
    }
}
