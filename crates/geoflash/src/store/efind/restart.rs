//! Opening a store: restart (Alg. 7 with page images and the allocator
//! rebuilt), or a read-only open that refuses a log needing recovery. See
//! the [module docs](super) ("Durability").
use std::sync::Arc;

use super::records::{CheckpointState, MetaState};
use super::{parse_identity, EfindConfig, EfindStore, FORMAT};
use crate::storage::overlay::ImageOverlay;
use crate::storage::{PageDevice, PageId};
use crate::store::log::Recovered;
use crate::store::alloc::PageAllocator;
use crate::store::header::Header;
use crate::store::log::{
    needs_replay, ClientLog, Log, LogConfig, LogPlacement, LogReader, RecordKind, RecoveredClient,
    TailRepair,
};
use crate::store::placement::Placement;
use crate::store::stored::{open_log, ImageRestore};
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

/// A front end's client log after a restart that found `found` (the
/// frames since the checkpoint of client generation `found.generation`;
/// `saw_client`: CLIENT records among the survivors), on a log that
/// holds them (read-only, `log` is `None`: one whose checkpoint names a
/// generation or that holds CLIENT records).
fn restored_client(
    log: Option<&Log>,
    found: RecoveredClient,
    saw_client: bool,
) -> Option<ClientLog> {
    let client = match log {
        Some(l) => l.client_frames(),
        None => found.generation.is_some() || saw_client,
    };
    let room = log.map_or(0, |l| l.capacity_bytes() / 4);
    client.then(|| ClientLog::restarted(found).with_room(room))
}

/// What restart's walk of the survivors found ([`EfindStore::replay`]).
struct Walk {
    /// The newest checkpoint's state (the header's when none survived).
    checkpoint: CheckpointState,
    /// The newest META record's state.
    meta: Option<MetaState>,
    /// Above every page a NEW record created.
    next_page: PageId,
    /// Some record needed replay.
    replayed: bool,
    /// Changes replayed into the write buffer.
    changes: u64,
    /// Page images written back.
    pages_restored: u64,
    /// A front end's frames, and whether any CLIENT record survived.
    client: RecoveredClient,
    saw_client: bool,
}

impl EfindStore {
    /// Restart's one walk of the survivors of `rec`, oldest first: the
    /// newest checkpoint's state (from `checkpoint`, the header's, on),
    /// the changes since replayed into the write buffer, the page images
    /// written back to `device` (torn-write repair; a store of `cap`
    /// pages) and a front end's frames collected.
    fn replay(
        &mut self,
        rec: &Recovered,
        checkpoint: CheckpointState,
        device: &dyn PageDevice,
        cap: u64,
    ) -> Result<Walk> {
        let mut walk = Walk {
            checkpoint,
            meta: None,
            next_page: 1,
            replayed: false,
            changes: 0,
            pages_restored: 0,
            client: RecoveredClient::default(),
            saw_client: false,
        };
        let mut images = ImageRestore::new(device, self.placement, cap);
        let codec = rec.payload_codec();
        self.wb.begin_replay();
        for r in rec.records.iter() {
            let r = r?;
            walk.replayed |= needs_replay(&r);
            match r.kind {
                RecordKind::Checkpoint => walk.checkpoint = codec.decode_checkpoint(&r)?,
                RecordKind::New => {
                    let (level, entries) = codec.decode_new(&r)?;
                    self.wb.create(r.page, level, &entries);
                    walk.next_page = walk.next_page.max(r.page.saturating_add(1));
                }
                RecordKind::Mod => {
                    let (level, changes) = codec.decode_mod(&r)?;
                    self.wb.modify(r.page, level, &changes);
                }
                RecordKind::Del => {
                    let level = codec.decode_del(&r)?;
                    self.wb.delete(r.page, level);
                }
                RecordKind::Meta => walk.meta = Some(codec.decode_meta(&r)?),
                RecordKind::PageImage => {
                    images.offer(&r)?;
                    self.wb.remove(r.page);
                }
                RecordKind::Client => walk.saw_client |= walk.client.add(&r)?,
                RecordKind::Commit | RecordKind::Flush => {}
            }
            if needs_replay(&r) && r.kind != RecordKind::PageImage {
                walk.changes += 1;
            }
        }
        self.wb.finish_replay();
        walk.pages_restored = images.finish()?;
        Ok(walk)
    }

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
        let (mut log, rec, horizon) = if read_only {
            let reader = LogReader::open(place.device.clone(), first_page, pages, index_id)?;
            let horizon = reader.horizon();
            let rec = reader.recover()?;
            if rec.records.any(needs_replay)? {
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
        // 1. The state of the newest checkpoint, then the later records,
        //    in one walk of the survivors that also writes their page
        //    images back (torn-write repair) and collects a front end's
        //    frames.
        let ck = CheckpointState {
            last_op: hdr.lsn,
            meta: MetaState {
                meta: hdr.meta.clone(),
                next_page: hdr.next_page,
            },
            free: hdr.free.clone(),
            client_generation: None,
        };
        let mut store = Self::assemble(
            Arc::clone(&device),
            config,
            PageAllocator::new(1, cap)?,
            TreeMeta::default(),
            place,
            index_id,
        )?;
        store.placement = placement;
        store.horizon = horizon;
        let walk = store.replay(&rec, ck, device.as_ref(), cap)?;
        let (ck, meta, replayed, mut client) = (walk.checkpoint, walk.meta, walk.replayed, walk.client);
        let mut next_page = walk.next_page;
        report.changes_replayed = walk.changes;
        report.pages_restored = walk.pages_restored;
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
        client.generation = ck.client_generation;
        store.client = restored_client(log.as_ref(), client, walk.saw_client);
        if let Some(log) = log.as_mut() {
            log.note_pages_read(rec.records.pages_read());
        }
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
