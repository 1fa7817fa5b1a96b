//! Restart (FAST's Algorithm 5 on the shared log): the log's restart has
//! already kept the survivors and written them to a fresh region; here
//! surviving page images are written back, the state of the newest
//! CHECKPOINT and META is restored and the NEW/MOD/DEL records are replayed
//! into the modifications table in their original order.
use std::collections::{BTreeMap, BTreeSet};

use super::codec::{self, MetaRecord};
use super::FastStore;
use crate::storage::PageId;
use crate::store::alloc::PageAllocator;
use crate::store::log::{RecordKind, Recovered, NO_OP};
use crate::store::OpId;
use crate::{Error, Result};

impl FastStore {
    pub(super) fn restart(&mut self, rec: Recovered) -> Result<()> {
        // 1. Write back the surviving page images (pages a crash may have torn).
        let mut images: BTreeMap<PageId, &[u8]> = BTreeMap::new();
        for r in rec
            .records
            .iter()
            .filter(|r| r.kind == RecordKind::PageImage)
        {
            if r.payload.len() != self.page_size || r.page == 0 || r.page >= self.alloc.capacity() {
                return Err(Error::corrupt(
                    None,
                    format!(
                        "PAGE_IMAGE record {} for page {} holds {} bytes: not a node page image",
                        r.lsn,
                        r.page,
                        r.payload.len()
                    ),
                ));
            }
            images.insert(r.page, &r.payload);
        }
        if !images.is_empty() {
            let ids: Vec<PageId> = images.keys().copied().collect();
            let data: Vec<u8> = images.values().flat_map(|b| b.iter().copied()).collect();
            self.device.write_batch(&ids, &data)?;
            self.device.sync()?;
            self.fstats.restored_pages = ids.len() as u64;
        }

        // 2. The state: newest CHECKPOINT, then newest META.
        let mut last_op = 0;
        let mut state = MetaRecord {
            next_page: 1,
            ..MetaRecord::default()
        };
        let mut newest_meta: Option<MetaRecord> = None;
        let mut created: BTreeSet<PageId> = BTreeSet::new();
        for r in &rec.records {
            match r.kind {
                RecordKind::Checkpoint => {
                    let (op, st) = codec::decode_checkpoint(&r.payload)?;
                    last_op = op;
                    state = st;
                    newest_meta = None;
                }
                RecordKind::Meta => newest_meta = Some(codec::decode_meta(&r.payload)?),
                RecordKind::New => {
                    created.insert(r.page);
                }
                _ => {}
            }
        }
        let (meta, mut next, reused) = match newest_meta {
            Some(m) => (m.meta, state.next_page.max(m.next_page), m.pages),
            None => (state.meta, state.next_page, Vec::new()),
        };
        if let Some(&top) = created.last() {
            next = next.max(top.saturating_add(1));
        }
        let reused: BTreeSet<PageId> = reused.into_iter().collect();
        let free: Vec<PageId> = state
            .pages
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
        for r in &rec.records {
            if r.op != NO_OP {
                *op_bytes.entry(r.op).or_default() += r.encoded_len() as u64;
            }
            let ts = self.tick();
            let t = match r.kind {
                RecordKind::New => {
                    let node = codec::decode_node(&r.payload)?;
                    self.table.create(r.page, node, ts)
                }
                RecordKind::Mod => {
                    let (level, changes) = codec::decode_changes(&r.payload)?;
                    self.table
                        .modify(r.page, level, &changes, ts)
                        .map_err(|e| Error::corrupt(None, format!("log record {}: {e}", r.lsn)))?
                }
                RecordKind::Del => {
                    let level = codec::decode_level(&r.payload)?;
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
