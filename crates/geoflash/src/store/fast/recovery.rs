//! Restart (FAST's Algorithm 5 on the shared log): the log's restart has
//! already kept the survivors and written them to a fresh region; here
//! surviving page images are written back, the state of the newest
//! CHECKPOINT and META is restored and the NEW/MOD/DEL records are replayed
//! into the modifications table in their original order.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::FastStore;
use crate::page::Node;
use crate::storage::PageId;
use crate::store::alloc::PageAllocator;
use crate::store::log::LogPlacement;
use crate::store::log::{
    payload_codec_version, CheckpointState, ClientLog, LogReader, MetaState, RecordKind, Recovered, RecoveredClient, NO_OP,
    PAYLOAD_CODEC_VERSION,
};
use crate::store::OpId;
use crate::store::stored::ImageRestore;
use crate::{Error, Result};

impl FastStore {
    /// Refuses a log written before the shared payload codec (superblock
    /// payload codec version 0) that holds MOD records to replay: FAST wrote
    /// their change tags the other way round then, and a MOD record does not
    /// tell which way (its META and CHECKPOINT records do, and are read; see
    /// [`crate::store::log::payload`]). Runs before [`Log::open`], which
    /// rewrites the superblock. Reads the two superblock slots, and the whole
    /// log only when it is of version 0.
    pub(super) fn check_payload_codec(log: &LogPlacement, index_id: u128) -> Result<()> {
        let dev = Arc::clone(&log.device);
        if payload_codec_version(Arc::clone(&dev), log.first_page, log.pages, index_id)? != 0 {
            return Ok(());
        }
        let rec = LogReader::open(dev, log.first_page, log.pages, index_id)?.recover()?;
        let mut mods = 0u64;
        for r in rec.records.iter() {
            mods += u64::from(r?.kind == RecordKind::Mod);
        }
        if mods > 0 {
            return Err(Error::invalid(format!(
                "the index was written by a geoflash before log payload codec version {PAYLOAD_CODEC_VERSION} and not closed cleanly: its log holds {mods} MOD records to replay in the old FAST record format; recover it with the geoflash that wrote it (`geoflash recover`), then open it with this one"
            )));
        }
        Ok(())
    }

    /// Restart from the log's surviving records: page images written
    /// back, the allocator and meta of the newest CHECKPOINT and META, the
    /// records since replayed into the table, the front end's frames
    /// collected.
    pub(super) fn restart(&mut self, rec: &Recovered) -> Result<()> {
        let codec = rec
            .payload_codec()
            .reading_legacy_fast(self.legacy_payloads);
        // 1. A first walk of the survivors: their page images written back
        //    (pages a crash may have torn), the newest CHECKPOINT and META,
        //    the pages created, a front end's frames.
        let mut state = CheckpointState {
            meta: MetaState {
                next_page: 1,
                ..MetaState::default()
            },
            ..CheckpointState::default()
        };
        let mut newest_meta: Option<(MetaState, Vec<PageId>)> = None;
        let mut created: BTreeSet<PageId> = BTreeSet::new();
        let mut images = ImageRestore::new(
            self.device.as_ref(),
            self.node_placement,
            self.alloc.capacity(),
        );
        let mut client = RecoveredClient::default();
        let mut saw_client = false;
        for r in rec.records.iter() {
            let r = r?;
            match r.kind {
                RecordKind::Checkpoint => {
                    state = codec.decode_checkpoint(&r)?;
                    newest_meta = None;
                }
                RecordKind::Meta => newest_meta = Some(codec.decode_meta_reused(&r)?),
                RecordKind::New => {
                    created.insert(r.page);
                }
                RecordKind::PageImage => {
                    images.offer(&r)?;
                }
                RecordKind::Client => saw_client |= client.add(&r)?,
                _ => {}
            }
        }
        self.fstats.restored_pages = images.finish()?;
        let last_op = state.last_op;
        let (meta, mut next, reused) = match newest_meta {
            Some((m, reused)) => (m.meta, state.meta.next_page.max(m.next_page), reused),
            None => (state.meta.meta.clone(), state.meta.next_page, Vec::new()),
        };
        if let Some(&top) = created.last() {
            next = next.max(top.saturating_add(1));
        }
        let reused: BTreeSet<PageId> = reused.into_iter().collect();
        let free: Vec<PageId> = state
            .free
            .iter()
            .copied()
            .filter(|p| !reused.contains(p) && !created.contains(p))
            .collect();
        self.alloc = PageAllocator::restore(1, next, free, self.alloc.capacity())
            .map_err(|e| Error::corrupt(None, format!("log state: {e}")))?;

        // 3. Replay into the table, in the original order; the largest
        //    surviving operation sets the log room kept for the next one.
        let mut op_bytes: BTreeMap<OpId, u64> = BTreeMap::new();
        let mut replayed = 0u64;
        for r in rec.records.iter() {
            let r = r?;
            if r.op != NO_OP {
                *op_bytes.entry(r.op).or_default() += r.encoded_len() as u64;
            }
            let ts = self.tick();
            let t = match r.kind {
                RecordKind::New => {
                    let (level, entries) = codec.decode_new(&r)?;
                    self.table.create(r.page, Node { level, entries }, ts)
                }
                RecordKind::Mod => {
                    let (level, changes) = codec.decode_mod(&r)?;
                    self.table
                        .modify(r.page, level, &changes, ts)
                        .map_err(|e| Error::corrupt(None, format!("log record {}: {e}", r.lsn)))?
                }
                RecordKind::Del => {
                    let level = codec.decode_del(&r)?;
                    if self.alloc.is_allocated(r.page) {
                        self.alloc.release(r.page)?;
                    }
                    self.table.delete(r.page, level, ts)
                }
                _ => continue,
            };
            self.heap.touch(r.page, t.before, t.after, Some(ts));
            replayed += 1;
        }
        self.fstats.replayed_records = replayed;
        // A front end's frames since the checkpoint, when the log holds
        // them or the checkpoint names its generation (a writable open of
        // a log of version 8 or 9 gets a client log even without them).
        if state.client_generation.is_some() || saw_client {
            client.generation = state.client_generation;
            self.client = Some(ClientLog::restarted(client));
        }
        // Counted as `commit_records` counts an operation.
        self.max_op_bytes = op_bytes.values().max().map_or(0, |&b| self.op_room(b));
        self.meta = meta;
        self.reused = reused;
        self.logged = (self.meta.clone(), self.alloc.next_page(), self.reused.len());
        let last = last_op.max(rec.last_committed_op.unwrap_or(0));
        self.last_op = last;
        self.durable_floor = last;
        self.ops.next = last.max(rec.max_op).saturating_add(1);
        self.note_peak();
        Ok(())
    }
}
