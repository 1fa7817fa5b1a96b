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

use super::record::{
    check_page, decode_framed, header_ids, Decoded, Framing, HeaderDeltas, PageCheck, Record,
};
use super::seal::{check_seal, BatchXor};
use super::superblock::Superblock;
use super::{LogLayout, Lsn, RecoveryMode, SharedDevice, LOOKAHEAD_PAGES};
use serde::{Deserialize, Serialize};

/// Pages read per device batch while scanning.
const SCAN_BATCH: u64 = 64;

/// What a scan of the live region found.
#[derive(Debug, Clone)]
pub(crate) struct Scan {
    /// Whole records, oldest first: the superblock's base (see
    /// [`Superblock::base_records`]), then the live region's.
    pub records: Vec<Record>,
    /// Valid pages (the next free position of the region).
    pub pages: u64,
    /// A record was cut short at the end of the stream (ignored).
    pub torn_tail: bool,
    /// Pages read by the scan.
    pub pages_read: u64,
}

/// Scans region `sb.live` of the log; damage before the tail is an error
/// ([`RecoveryMode::AbsoluteConsistency`]).
pub(crate) fn scan(dev: &SharedDevice, layout: &LogLayout, sb: &Superblock) -> Result<Scan> {
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

/// The pages of the live region read in order, up to the first page that
/// is not of the live epoch at its position (rebuilt from its batch's
/// seal when the log is sealed and it can be).
struct Stream {
    /// The pages' data (after their headers), concatenated.
    data: Vec<u8>,
    /// (offset in `data` where a page's data starts, its region position).
    starts: Vec<(usize, u64)>,
    /// Pages read from the device (seals and the pages they needed too).
    pages_read: u64,
    /// Region position of the first page that ended the stream, if any.
    end: Option<u64>,
    /// Pages rebuilt from seals.
    rebuilt: u64,
}

impl Stream {
    /// (data offset, region position) of the page holding data offset
    /// `off` ((0, 0) for an empty stream).
    fn page_holding(&self, off: usize) -> (usize, u64) {
        let idx = self
            .starts
            .partition_point(|&(s, _)| s <= off)
            .saturating_sub(1);
        self.starts.get(idx).copied().unwrap_or((0, 0))
    }

    /// Data offset where the page at region position `p` starts (the end
    /// of the data when no page of the stream is there).
    fn page_start(&self, p: u64) -> usize {
        self.starts
            .iter()
            .find(|&&(_, q)| q == p)
            .map_or(self.data.len(), |&(s, _)| s)
    }
}

/// Reads the live region of `sb` into a [`Stream`], in batches that grow
/// from one page so that a short log (an empty epoch after a clean
/// checkpoint) costs few reads.
fn read_stream(dev: &SharedDevice, layout: &LogLayout, sb: &Superblock) -> Result<Stream> {
    let ps = layout.page_size;
    let region_pages = layout.region_pages();
    let region = sb.live;
    let mut stream: Vec<u8> = Vec::new();
    // (stream offset where the page's data starts, position) for error messages.
    let mut starts: Vec<(usize, u64)> = Vec::new();
    let mut pages_read = 0u64;
    let mut buf = vec![0u8; SCAN_BATCH as usize * ps];
    let mut pos = 0u64;
    let mut end: Option<u64> = None;
    // Sealed logs: the batch being read (its first position and the XOR
    // of its pages so far) and the pages rebuilt from seals.
    let mut batch_first = 0u64;
    let mut batch = BatchXor::default();
    let mut rebuilt = 0u64;
    // Batches grow from 1 page so that a short log (an empty epoch after a
    // clean checkpoint) costs few reads.
    let mut read_batch = 1u64;
    'outer: while pos < region_pages {
        let n = read_batch.min(region_pages - pos);
        read_batch = (read_batch * 2).min(SCAN_BATCH);
        let ids: Vec<PageId> = (pos..pos + n)
            .map(|p| layout.region_page(region, p))
            .collect();
        let chunk = buf
            .get_mut(..n as usize * ps)
            .ok_or_else(|| Error::invalid("scan buffer too small"))?;
        dev.read_batch(&ids, chunk)?;
        pages_read += n;
        for (i, page) in chunk.chunks_exact(ps).enumerate() {
            let here = pos + i as u64;
            match check_page(page) {
                PageCheck::Valid(h, data)
                    if h.log_id == sb.log_id && h.epoch == sb.epoch && h.position == here =>
                {
                    starts.push((stream.len(), here));
                    stream.extend_from_slice(data);
                    if sb.sealed {
                        // A batch's pages all carry its first position.
                        if u64::from(h.durable_pos) != batch_first {
                            batch_first = u64::from(h.durable_pos);
                            batch.clear();
                        }
                        batch.add(page);
                    }
                }
                _ if sb.sealed => match sealed_page(dev, layout, sb, here, page, batch_first, &batch)? {
                    Sealed::Rebuilt(page, first, read) => {
                        pages_read += read;
                        rebuilt += 1;
                        if let PageCheck::Valid(_, data) = check_page(&page) {
                            starts.push((stream.len(), here));
                            stream.extend_from_slice(data);
                        }
                        if first != batch_first {
                            batch_first = first;
                            batch.clear();
                        }
                        batch.add(&page);
                    }
                    Sealed::End(read) => {
                        pages_read += read;
                        end = Some(here);
                        break 'outer;
                    }
                },
                _ => {
                    end = Some(here);
                    break 'outer;
                }
            }
        }
        pos += n;
    }
    Ok(Stream {
        data: stream,
        starts,
        pages_read,
        end,
        rebuilt,
    })
}

/// What [`lookahead`] finds after `end`, the first page the stream could
/// not read (`None`: the stream read to the region's end): the pages it
/// read, and the damage when a later page of the live epoch proves it.
fn damage_after(
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
/// first damaged page ends the stream and the damage is returned.
pub(crate) fn scan_mode(
    dev: &SharedDevice,
    layout: &LogLayout,
    sb: &Superblock,
    mode: RecoveryMode,
) -> Result<(Scan, Option<Damage>)> {
    let tolerate = mode == RecoveryMode::TolerateCorruptTail;
    // The superblock decides where the regions' pages are.
    let layout = &layout.with_chunk(sb.chunk_pages);
    let region = sb.live;
    let st = read_stream(dev, layout, sb)?;
    let (stream, end, mut pages_read) = (&st.data, st.end, st.pages_read);
    let mut valid_pages = end.unwrap_or(layout.region_pages());
    let (read, mut damage) = damage_after(dev, layout, sb, end, tolerate)?;
    pages_read += read;

    let locate = |off: usize| -> String {
        let (s, p) = st.page_holding(off);
        format!(
            "log region {region} page {p} (device page {}) offset {}",
            layout.region_page(region, p),
            off - s + super::record::PAGE_HEADER
        )
    };
    let device_page = |off: usize| layout.region_page(region, st.page_holding(off).1);

    // The base a clean checkpoint left in the superblock comes first.
    let mut records = sb.base_records();
    let mut off = 0usize;
    let mut torn_tail = false;
    let mut last_lsn: Lsn = records.iter().map(|r| r.lsn).max().unwrap_or(0);
    let base = records.len();
    // Record (start, end) offsets of the region's records.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let framing = sb.format.framing();
    let mut cut: Option<u64> = None;
    // Version 5 writes header fields as differences to the previous record's.
    let mut deltas = sb.entry_refs.then(HeaderDeltas::default);
    while off < stream.len() {
        let rest = stream.get(off..).unwrap_or(&[]);
        match decode_framed(rest, framing) {
            Decoded::Record(_, _) | Decoded::Corrupt(_)
                if tolerate && damaged(rest, framing, last_lsn, deltas) =>
            {
                cut = Some(st.page_holding(off).1);
                break;
            }
            Decoded::Record(mut rec, len) => {
                if let Some(d) = deltas.as_mut() {
                    d.decode_next(&mut rec);
                }
                if rec.lsn <= last_lsn {
                    return Err(Error::corrupt(
                        Some(device_page(off)),
                        format!(
                            "{}: LSN {} follows LSN {last_lsn}; the log is damaged before its tail",
                            locate(off),
                            rec.lsn
                        ),
                    ));
                }
                last_lsn = rec.lsn;
                records.push(rec);
                spans.push((off, off + len));
                off += len;
            }
            Decoded::Incomplete => {
                torn_tail = true;
                break;
            }
            Decoded::Corrupt(why) => {
                return Err(Error::corrupt(
                    Some(device_page(off)),
                    format!("{}: {why}; the log is damaged before its tail", locate(off)),
                ));
            }
        }
    }
    if let Some(first) = cut {
        // The first damaged page ends the log: it and every later page go,
        // with the records that end in them.
        let from = st.page_start(first);
        let keep = base + spans.iter().take_while(|&&(_, e)| e <= from).count();
        let seen_end = damage.map_or(valid_pages, |d| d.end);
        damage = Some(Damage {
            first,
            end: seen_end.max(valid_pages),
            records: (records.len() - keep) as u64,
        });
        records.truncate(keep);
        valid_pages = first;
        torn_tail = true;
    }
    if st.rebuilt > 0 {
        let rebuilt = st.rebuilt;
        tracing::warn!(
            "log region {region}: {rebuilt} damaged page(s) rebuilt from their batch's seal page"
        );
    }
    if sb.entry_refs {
        // Every later reader sees the records without references.
        super::entry_refs::resolve(&mut records, sb.format.payload_codec())?;
    }
    Ok((
        Scan {
            records,
            pages: valid_pages,
            torn_tail,
            pages_read,
        },
        damage,
    ))
}

/// What a page of a sealed log that is not a valid log page of its
/// position is.
enum Sealed {
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
fn sealed_page(
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
fn damaged(rest: &[u8], framing: Framing, last_lsn: Lsn, deltas: Option<HeaderDeltas>) -> bool {
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
/// Opening it writes nothing.
#[derive(Debug, Clone)]
pub struct LogReader {
    records: Vec<Record>,
    torn_tail: bool,
    #[cfg(test)]
    live_region: u8,
    #[cfg(test)]
    pages: u64,
    #[cfg(test)]
    layout: LogLayout,
    lsn_floor: Lsn,
    format: super::LogFormat,
    region_bytes: u64,
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
        let s = scan(&dev, &layout, &sb).map_err(|e| in_device_file(&dev, e))?;
        Ok(LogReader {
            records: s.records,
            torn_tail: s.torn_tail,
            #[cfg(test)]
            live_region: sb.live,
            #[cfg(test)]
            pages: s.pages,
            #[cfg(test)]
            layout,
            lsn_floor: sb.lsn_floor,
            format: sb.format,
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
    /// An index opened read-only refuses a log whose recovery has records to replay.
    pub fn recover(self) -> super::Recovered {
        let torn = self.torn_tail;
        let mut r = super::recover_log(self.records, self.format);
        r.torn_tail = torn;
        r
    }

    /// Number of whole records.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    /// True when a record cut short by a crash was found (and ignored) at the end.
    #[cfg(test)]
    pub fn torn_tail(&self) -> bool {
        self.torn_tail
    }

    /// The live region (0 or 1).
    #[cfg(test)]
    pub fn live_region(&self) -> u8 {
        self.live_region
    }

    /// Valid pages in the live region.
    #[cfg(test)]
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// The horizon of the live epoch, as [`Log::open`](super::Log::open)
    /// would compute it: node pages must not carry LSNs in it.
    pub fn horizon(&self) -> super::LsnHorizon {
        let last = self.records.iter().map(|r| r.lsn).max().unwrap_or(0);
        super::LsnHorizon::of_epoch(
            self.lsn_floor,
            last,
            self.region_bytes,
            self.format.framing(),
        )
    }

    /// The log's format.
    #[cfg(test)]
    pub fn format(&self) -> super::LogFormat {
        self.format
    }

}
