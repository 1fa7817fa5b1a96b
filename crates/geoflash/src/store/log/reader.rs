//! Reading a log: the live region's pages in order, then its records.
//!
//! The stream ends at the first page that is not a valid page of the live
//! region (checksum, log id, epoch, position). A record cut short by that end
//! is the torn tail, normal after a crash, and ignored (mode
//! `TolerateCorruptTail` of fjall and RocksDB). A record that fails its own
//! checksum inside valid pages, LSNs out of order, or an invalid page that a
//! later page proves had been durable ([`LOOKAHEAD_PAGES`]) is corruption
//! before the tail: an error naming the region, page and offset
//! ([`RecoveryMode::AbsoluteConsistency`], the default). Under
//! [`RecoveryMode::TolerateCorruptTail`], [`repair_corrupt_tail`] makes the
//! first damaged page the end of the log instead and reports what it
//! dropped.
use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

use super::cursor::RecordCursor;
use super::passes::{first_pass, recover_region, FirstPass, held_bytes};
use super::record::{
    check_page, decode_framed, header_ids, Decoded, Framing, HeaderDeltas, PageCheck, Record,
};
use super::seal::{check_seal, BatchXor};
use super::superblock::Superblock;
use super::{LogLayout, Lsn, RecoveryMode, SharedDevice, LOOKAHEAD_PAGES};
use serde::{Deserialize, Serialize};

/// Scans region `sb.live` of the log; damage before the tail is an error
/// ([`RecoveryMode::AbsoluteConsistency`]).
#[cfg(test)]
pub(crate) fn scan(dev: &SharedDevice, layout: &LogLayout, sb: &Superblock) -> Result<Vec<Record>> {
    scan_mode(dev, layout, sb, RecoveryMode::AbsoluteConsistency).map(|(s, _)| s)
}

/// Damage before the tail that a [`RecoveryMode::TolerateCorruptTail`] scan
/// took as the end of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Damage {
    /// Region position of the first damaged page (the new end of the log).
    pub first: u64,
    /// One past the last position written in the live epoch (valid or torn)
    /// that the scan saw after it.
    pub end: u64,
    /// Whole records of the stream at or after the first damaged page.
    pub records: u64,
}

/// What [`lookahead`] finds after `end`, the first page the stream could
/// not read (`None`: the stream read to the region's end): the pages it
/// read, and the damage when a later page of the live epoch proves it.
pub(super) fn damage_after(
    dev: &SharedDevice,
    layout: &LogLayout,
    sb: &Superblock,
    end: Option<u64>,
    tolerate: bool,
) -> Result<(u64, Option<Damage>)> {
    let Some(bad) = end else {
        return Ok((0, None));
    };
    let (read, proof) = lookahead(dev, layout, sb, bad, tolerate)?;
    let damage = proof.map(|seen| Damage {
        first: bad,
        end: seen + 1,
        records: 0,
    });
    Ok((read, damage))
}

/// [`scan`] under `mode`: with [`RecoveryMode::TolerateCorruptTail`] the
/// first damaged page ends the stream and the damage is returned (the
/// records are then only counted: entry references are not resolved).
pub(crate) fn scan_mode(
    dev: &SharedDevice,
    layout: &LogLayout,
    sb: &Superblock,
    mode: RecoveryMode,
) -> Result<(Vec<Record>, Option<Damage>)> {
    let tolerate = mode == RecoveryMode::TolerateCorruptTail;
    // The superblock decides where the regions' pages are.
    let layout = &layout.with_chunk(sb.chunk_pages);
    let mut cursor = RecordCursor::new(dev, layout, sb, tolerate);
    let base = sb.base_records().len();
    let mut records = Vec::new();
    // The region position of the page holding each region record's last byte.
    let mut ends: Vec<u64> = Vec::new();
    while let Some(rec) = cursor.next_record()? {
        if records.len() >= base {
            ends.push(cursor.end_page());
        }
        records.push(rec);
    }
    let valid_pages = cursor.valid_pages();
    let mut damage = cursor.damage;
    if let Some(first) = cursor.cut {
        // The first damaged page ends the log: it and every later page go,
        // with the records that end in them.
        let keep = base + ends.iter().take_while(|&&e| e < first).count();
        let seen_end = damage.map_or(valid_pages, |d| d.end);
        damage = Some(Damage {
            first,
            end: seen_end.max(valid_pages),
            records: (records.len() - keep) as u64,
        });
        records.truncate(keep);
    }
    if cursor.rebuilt() > 0 {
        let (region, rebuilt) = (sb.live, cursor.rebuilt());
        tracing::warn!(
            "log region {region}: {rebuilt} damaged page(s) rebuilt from their batch's seal page"
        );
    }
    Ok((records, damage))
}

/// What a page of a sealed log that is not a valid log page of its
/// position is.
pub(super) enum Sealed {
    /// A damaged page rebuilt from its batch's seal: the page, its batch's
    /// first position, and the pages read to rebuild it.
    Rebuilt(Vec<u8>, u64, u64),
    /// The end of the log (the last batch's seal, a page never written in
    /// this epoch, or damage the seal cannot repair, which the look-ahead
    /// then judges), and the pages read.
    End(u64),
}

/// Judges `page`, at region position `here` of a sealed log, which is not
/// a valid log page of that position; `batch` holds the pages before it of
/// the batch starting at `batch_first` ([`super::seal`]). A damaged page
/// is the next page of that batch or the first of the next one (its first
/// position is then `here`); the pages after it up to the batch's seal
/// must all be intact and the rebuilt page must pass its own checksum.
pub(super) fn sealed_page(
    dev: &SharedDevice,
    layout: &LogLayout,
    sb: &Superblock,
    here: u64,
    page: &[u8],
    batch_first: u64,
    batch: &BatchXor,
) -> Result<Sealed> {
    let ours = |log_id: u64, epoch: u64| log_id == sb.log_id && epoch == sb.epoch;
    // Written whole but not here in this epoch (a seal ends the log; a
    // page of another epoch or log was never written in this one), or
    // never written: the end, as in a log without seals.
    let whole = matches!(check_page(page), PageCheck::Valid(..)) || check_seal(page).is_some();
    if whole || page.iter().all(|&b| b == 0) {
        return Ok(Sealed::End(0));
    }
    let ps = layout.page_size;
    let mut later = BatchXor::default();
    let mut first: Option<u64> = None;
    let mut buf = vec![0u8; ps];
    let mut read = 0u64;
    for pos in here + 1..layout.region_pages() {
        dev.read(layout.region_page(sb.live, pos), &mut buf)?;
        read += 1;
        if let PageCheck::Valid(h, _) = check_page(&buf) {
            let d = u64::from(h.durable_pos);
            if !ours(h.log_id, h.epoch) || h.position != pos || first.is_some_and(|f| f != d) {
                break;
            }
            first = Some(d);
            later.add(&buf);
            continue;
        }
        let Some(h) = check_seal(&buf) else { break };
        if !ours(h.log_id, h.epoch) || h.position != pos || first.is_some_and(|f| f != h.first) {
            break;
        }
        // The batch's other pages: those before the damaged one (its own
        // batch continues) or none (it starts a batch), and those after it.
        let mut others = later;
        if h.first == batch_first && h.first < here {
            others.merge(batch);
        } else if h.first != here {
            break;
        }
        if let Some(p) = others.rebuild(&buf, &h, here, h.first) {
            if matches!(check_page(&p), PageCheck::Valid(v, _) if ours(v.log_id, v.epoch) && v.position == here)
            {
                return Ok(Sealed::Rebuilt(p, h.first, read));
            }
        }
        break;
    }
    Ok(Sealed::End(read))
}

/// Whether the record at the start of `rest` is damage before the tail: a
/// checksum failure inside valid pages, or an LSN not above `last_lsn`.
pub(super) fn damaged(rest: &[u8], framing: Framing, last_lsn: Lsn, deltas: Option<HeaderDeltas>) -> bool {
    match decode_framed(rest, framing) {
        Decoded::Record(mut r, _) => {
            if let Some(mut d) = deltas {
                d.decode_next(&mut r);
            }
            r.lsn <= last_lsn
        }
        Decoded::Corrupt(_) => true,
        Decoded::Incomplete => false,
    }
}

/// Looks past the first invalid page `bad` for a valid page of this epoch that
/// says `bad` had been made durable: an error, or with `tolerate` the last
/// position of this epoch seen in the window. Returns the pages read.
fn lookahead(
    dev: &SharedDevice,
    layout: &LogLayout,
    sb: &Superblock,
    bad: u64,
    tolerate: bool,
) -> Result<(u64, Option<u64>)> {
    let ps = layout.page_size;
    let mut buf = vec![0u8; ps];
    let mut read = 0;
    let mut proven = false;
    let mut seen = bad;
    let last = layout
        .region_pages()
        .min(bad.saturating_add(1 + LOOKAHEAD_PAGES));
    for pos in bad + 1..last {
        let page = layout.region_page(sb.live, pos);
        dev.read(page, &mut buf)?;
        read += 1;
        match check_page(&buf) {
            PageCheck::Valid(h, _) if h.log_id == sb.log_id && h.epoch == sb.epoch => {
                seen = pos;
                if h.position == pos && u64::from(h.durable_pos) > bad {
                    proven = true;
                    if tolerate {
                        continue;
                    }
                    return Err(Error::corrupt(
                        Some(layout.region_page(sb.live, bad)),
                        format!(
                            "log region {} page {bad} (device page {}) is damaged, but page {pos} shows it had been made durable: the log is damaged before its tail",
                            sb.live,
                            layout.region_page(sb.live, bad)
                        ),
                    ));
                }
            }
            // A torn page of this epoch: keep looking.
            PageCheck::Damaged(Some((log, epoch))) if log == sb.log_id && epoch == sb.epoch => {
                seen = pos;
            }
            // A page of this epoch whose magic was damaged: keep looking.
            PageCheck::Foreign if header_ids(&buf) == Some((sb.log_id, sb.epoch)) => {
                seen = pos;
            }
            // Never written in this epoch: nothing further was either.
            _ => break,
        }
    }
    Ok((read, proven.then_some(seen)))
}

/// What `repair_corrupt_tail` dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TailRepair {
    /// Device page of the first damaged page (the log now ends before it), if any.
    pub first_damaged_page: Option<PageId>,
    /// Log pages dropped: the damaged page and the later pages of its epoch.
    pub pages_dropped: u64,
    /// Whole records known to be dropped (those that could be read in order
    /// before the damage; the content of the later pages is counted in pages).
    pub records_dropped: u64,
}

/// The explicit recovery of [`RecoveryMode::TolerateCorruptTail`]: when the
/// live region of the log in the `pages` pages from `first_page` of `dev`
/// is damaged before its tail, the first damaged page becomes the end of
/// the log: it and the later pages of the live epoch are overwritten with
/// zeros and synced, so the next [`Log::open`](super::Log::open) takes the
/// damage as a torn tail (operations whose COMMIT was dropped are then
/// dropped as incomplete). Nothing is written when the log is not damaged
/// before its tail. Idempotent: a crash during it leaves a log that it
/// repairs the same way again.
pub fn repair_corrupt_tail(
    dev: SharedDevice,
    first_page: PageId,
    pages: u64,
    index_id: u128,
) -> Result<TailRepair> {
    let layout = LogLayout::on_device(dev.as_ref(), first_page, pages)?;
    let mut read = 0;
    let (sb, _, damaged_slot) = Superblock::read_slots(&dev, &layout, index_id, &mut read, true)?;
    let layout = layout.with_chunk(sb.chunk_pages);
    let mut slot_repair = TailRepair::default();
    if let Some(page) = damaged_slot.filter(|_| !sb.mirrored) {
        // The older state is accepted: both slots get it (mirrored), so a
        // later open does not refuse the damaged slot again.
        sb.write(&dev, &layout)?;
        dev.sync()?;
        sb.write_mirror(&dev, &layout)?;
        dev.sync()?;
        slot_repair.first_damaged_page = Some(page);
        slot_repair.pages_dropped = 1;
    }
    let (_, damage) = scan_mode(&dev, &layout, &sb, RecoveryMode::TolerateCorruptTail)?;
    let Some(d) = damage else {
        return Ok(slot_repair);
    };
    let ids: Vec<PageId> = (d.first..d.end.max(d.first + 1))
        .map(|p| layout.region_page(sb.live, p))
        .collect();
    let zeros = vec![0u8; ids.len() * layout.page_size];
    dev.write_batch(&ids, &zeros)?;
    dev.sync()?;
    Ok(TailRepair {
        first_damaged_page: slot_repair
            .first_damaged_page
            .or(Some(layout.region_page(sb.live, d.first))),
        pages_dropped: slot_repair.pages_dropped + ids.len() as u64,
        records_dropped: d.records,
    })
}

/// A read-only view of a log's records, for recovery, inspection and tools.
/// Opening it writes nothing. It holds what decides which records survive
/// and, when they fit [`HELD_BYTES`](super::passes::HELD_BYTES), the
/// records themselves ([`super::passes`]): a longer log is read again by
/// [`LogReader::recover`].
pub struct LogReader {
    first: FirstPass,
    dev: SharedDevice,
    layout: LogLayout,
    sb: Superblock,
    #[cfg(test)]
    records: Vec<Record>,
    region_bytes: u64,
}

impl std::fmt::Debug for LogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("live_region", &self.sb.live)
            .field("pages", &self.first.pages)
            .field("torn_tail", &self.first.torn_tail)
            .finish_non_exhaustive()
    }
}

/// `e` naming the file of `dev` when it is one (`log.dat`): the log's
/// corruption errors know their page but not their file.
pub(super) fn in_device_file(dev: &SharedDevice, e: Error) -> Error {
    match dev.path() {
        Some(path) => e.in_file(path),
        None => e,
    }
}

impl LogReader {
    /// Reads the log in pages `first_page .. first_page + pages` of `dev`,
    /// which must belong to index `index_id`.
    pub fn open(dev: SharedDevice, first_page: PageId, pages: u64, index_id: u128) -> Result<Self> {
        let layout = LogLayout::on_device(dev.as_ref(), first_page, pages)?;
        let mut pages_read = 0;
        let sb = Superblock::read(&dev, &layout, index_id, &mut pages_read)
            .map_err(|e| in_device_file(&dev, e))?;
        let layout = layout.with_chunk(sb.chunk_pages);
        let first = first_pass(&dev, &layout, &sb, sb.format.restart_rule(), held_bytes(sb.format))
            .map_err(|e| in_device_file(&dev, e))?;
        // Tests look at the records: those held, or the region read again.
        #[cfg(test)]
        let records = match &first.region {
            super::passes::Region::Held(records) => records.clone(),
            super::passes::Region::Streamed => scan(&dev, &layout, &sb)?,
        };
        Ok(LogReader {
            first,
            dev,
            layout,
            sb,
            #[cfg(test)]
            records,
            region_bytes: layout.capacity_bytes(),
        })
    }

    /// Where the log's pages are, as its superblock lays them out (tests
    /// that damage a given position).
    #[cfg(test)]
    pub(crate) fn layout(&self) -> LogLayout {
        self.layout
    }

    /// Records oldest first.
    #[cfg(test)]
    pub fn oldest_first(&self) -> impl Iterator<Item = &Record> {
        self.records.iter()
    }

    /// Records newest first (the order of the restart scan).
    #[cfg(test)]
    pub fn newest_first(&self) -> impl Iterator<Item = &Record> {
        self.records.iter().rev()
    }

    /// The records, oldest first.
    #[cfg(test)]
    pub fn into_records(self) -> Vec<Record> {
        self.records
    }

    /// What restart would recover from this log (nothing is written).
    pub fn recover(self) -> Result<super::Recovered> {
        let read = std::cell::Cell::new(0);
        let (dev, layout, sb) = (&self.dev, &self.layout, &self.sb);
        let mut r = recover_region(self.first, dev, layout, sb, &read, None)
            .map_err(|e| in_device_file(dev, e))?;
        r.format = sb.format;
        Ok(r)
    }

    /// Number of whole records.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    /// True when a record cut short by a crash was found (and ignored) at the end.
    #[cfg(test)]
    pub fn torn_tail(&self) -> bool {
        self.first.torn_tail
    }

    /// The live region (0 or 1).
    #[cfg(test)]
    pub fn live_region(&self) -> u8 {
        self.sb.live
    }

    /// Valid pages in the live region.
    #[cfg(test)]
    pub fn pages(&self) -> u64 {
        self.first.pages
    }

    /// The horizon of the live epoch, as [`Log::open`](super::Log::open)
    /// would compute it: node pages must not carry LSNs in it.
    pub fn horizon(&self) -> super::LsnHorizon {
        super::LsnHorizon::of_epoch(
            self.sb.lsn_floor,
            self.first.survival.last_lsn(),
            self.region_bytes,
            self.sb.format.framing(),
        )
    }

    /// The log's format.
    #[cfg(test)]
    pub fn format(&self) -> super::LogFormat {
        self.sb.format
    }

}
