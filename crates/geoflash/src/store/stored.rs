//! Node pages as the device holds them, read by the logged stores (eFIND
//! and FAST): decoding with the checks both make, and restart's opening of
//! the log, which checks the pages a recovered log names against its
//! [`LsnHorizon`].
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::page::{self, Node};
use crate::storage::{PageDevice, PageId};
use crate::store::log::{
    repair_corrupt_tail, Log, LogConfig, LogPlacement, LsnHorizon, Record, RecordKind, Recovered,
    RecoveryMode, TailRepair,
};
use crate::store::placement::Placement;
use crate::{Error, Result};

/// Pages read per device batch by [`check_named_pages`].
const CHECK_BATCH: usize = 256;

/// Decodes node page `id` as read from the device: an error for a blank
/// page (never written), one that does not decode, or one stamped with an
/// LSN within `horizon` (it holds changes of records the log lost).
pub(crate) fn decode_stored(buf: &[u8], id: PageId, horizon: &LsnHorizon) -> Result<Node> {
    if page::is_blank(buf) {
        return Err(Error::corrupt(
            Some(id),
            "node page is blank (never written)",
        ));
    }
    let (header, node) = page::decode_node(buf, Some(id))?;
    horizon.check(id, header.lsn)?;
    Ok(node)
}

/// Restart's check, made before the log is rewritten: reads, in device
/// batches, the node pages below `capacity` that the surviving NEW, MOD,
/// DEL and PAGE_IMAGE records of `rec` name, and checks their LSNs against
/// `horizon`. A page that is blank or does not decode carries no LSN to
/// trust and passes: restart writes an image or a NEW record over it, or
/// reading it later fails.
fn check_named_pages(
    device: &dyn PageDevice,
    rec: &Recovered,
    horizon: &LsnHorizon,
    capacity: u64,
) -> Result<()> {
    if *horizon == LsnHorizon::none() {
        return Ok(());
    }
    let mut named = BTreeSet::new();
    for r in rec.records.iter() {
        let r = r?;
        if matches!(
            r.kind,
            RecordKind::New | RecordKind::Mod | RecordKind::Del | RecordKind::PageImage
        ) && r.page > 0
            && r.page < capacity
        {
            named.insert(r.page);
        }
    }
    let named: Vec<PageId> = named.into_iter().collect();
    let ps = device.page_size();
    let mut buf = vec![0u8; CHECK_BATCH.min(named.len()) * ps];
    for ids in named.chunks(CHECK_BATCH) {
        let buf = &mut buf[..ids.len() * ps];
        device.read_batch(ids, buf)?;
        for (&id, bytes) in ids.iter().zip(buf.chunks_exact(ps)) {
            if let Ok(header) = page::decode_header(bytes, Some(id)) {
                horizon.check(id, header.lsn)?;
            }
        }
    }
    Ok(())
}

/// Page images written back per device batch by [`ImageRestore`].
const RESTORE_BATCH: usize = 256;

/// Restart's first step in both logged stores: writes the page images
/// among the surviving records back to the device (pages a crash may
/// have torn), each to the tier of its level as a flush puts it, in
/// device batches as the survivors come, and syncs at the end. An image
/// that is not a page of the store is corruption.
pub(crate) struct ImageRestore<'a> {
    device: &'a dyn PageDevice,
    placement: Placement,
    capacity: u64,
    ids: Vec<PageId>,
    data: Vec<u8>,
    restored: u64,
}

impl<'a> ImageRestore<'a> {
    /// Restores to the node pages below `capacity` of `device`, placed by
    /// `placement`.
    pub fn new(device: &'a dyn PageDevice, placement: Placement, capacity: u64) -> Self {
        ImageRestore {
            device,
            placement,
            capacity,
            ids: Vec::new(),
            data: Vec::new(),
            restored: 0,
        }
    }

    /// Writes `rec` back when it is a PAGE_IMAGE record (true), or leaves it
    /// (false).
    pub fn offer(&mut self, rec: &Record) -> Result<bool> {
        if rec.kind != RecordKind::PageImage {
            return Ok(false);
        }
        let ps = self.device.page_size();
        if rec.payload.len() != ps || rec.page == 0 || rec.page >= self.capacity {
            return Err(Error::corrupt(
                Some(rec.page),
                format!(
                    "log record {}: a page image of {} bytes for page {} does not fit this store of {} pages",
                    rec.lsn,
                    rec.payload.len(),
                    rec.page,
                    self.capacity
                ),
            ));
        }
        self.ids.push(rec.page);
        self.data.extend_from_slice(&rec.payload);
        if self.ids.len() >= RESTORE_BATCH {
            self.write()?;
        }
        Ok(true)
    }

    fn write(&mut self) -> Result<()> {
        let ps = self.device.page_size();
        let images = self.ids.iter().copied().zip(self.data.chunks_exact(ps));
        self.placement.hint_images(self.device, images)?;
        self.device.write_batch(&self.ids, &self.data)?;
        self.restored += self.ids.len() as u64;
        self.ids.clear();
        self.data.clear();
        Ok(())
    }

    /// Writes the last batch and syncs (when anything was restored): the
    /// number of pages restored.
    pub fn finish(mut self) -> Result<u64> {
        if !self.ids.is_empty() {
            self.write()?;
        }
        if self.restored > 0 {
            self.device.sync()?;
        }
        Ok(self.restored)
    }
}

/// What restart opened for a logged store ([`open_log`]).
pub(crate) struct OpenedLog {
    /// The log, rewritten and ready to append.
    pub log: Log,
    /// What it recovered, to replay.
    pub rec: Recovered,
    /// The horizon the store checks every node read against (none after a
    /// tolerated corrupt tail).
    pub horizon: LsnHorizon,
    /// What a tolerated corrupt tail dropped.
    pub repair: TailRepair,
}

/// Restart's opening of the log at `place` (configured by `config`) of a
/// store whose nodes are the pages below `capacity` of `device`, under
/// `mode`. With [`RecoveryMode::AbsoluteConsistency`] the node pages that
/// the surviving records name are checked against the log's horizon
/// ([`check_named_pages`]) before the log is rewritten, and the horizon is
/// kept for node reads. With [`RecoveryMode::TolerateCorruptTail`] damage
/// before the tail is dropped first ([`repair_corrupt_tail`]) and no
/// horizon applies: the nodes may hold changes of dropped records.
pub(crate) fn open_log(
    device: &dyn PageDevice,
    capacity: u64,
    place: &LogPlacement,
    config: LogConfig,
    mode: RecoveryMode,
) -> Result<OpenedLog> {
    let strict = mode == RecoveryMode::AbsoluteConsistency;
    let dev = Arc::clone(&place.device);
    let repair = if strict {
        TailRepair::default()
    } else {
        repair_corrupt_tail(
            Arc::clone(&dev),
            place.first_page,
            place.pages,
            config.index_id,
        )?
    };
    let (log, rec) = Log::open_checked(dev, place.first_page, place.pages, config, |rec, h| {
        if strict {
            check_named_pages(device, rec, h, capacity)
        } else {
            Ok(())
        }
    })?;
    let horizon = if strict {
        log.horizon()
    } else {
        LsnHorizon::none()
    };
    Ok(OpenedLog {
        log,
        rec,
        horizon,
        repair,
    })
}
