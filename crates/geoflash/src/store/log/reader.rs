//! Reading a log: the live region's pages in order, then its records.
//!
//! The stream ends at the first page that is not a valid page of the live
//! region (checksum, log id, epoch, position). A record cut short by that end
//! is the torn tail, normal after a crash, and ignored (mode
//! `TolerateCorruptTail` of fjall and RocksDB). A record that fails its own
//! checksum inside valid pages, LSNs out of order, or an invalid page that a
//! later page proves had been durable ([`LOOKAHEAD_PAGES`]) is corruption
//! before the tail: an error naming the region, page and offset.
use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

use super::record::{check_page, decode, Decoded, PageCheck, Record};
use super::superblock::Superblock;
use super::{LogLayout, Lsn, SharedDevice, LOOKAHEAD_PAGES};

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

/// Scans region `sb.live` of the log.
pub(crate) fn scan(dev: &SharedDevice, layout: &LogLayout, sb: &Superblock) -> Result<Scan> {
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
    // Batches grow from 1 page so that a short log (an empty epoch after a
    // clean checkpoint) costs few reads.
    let mut batch = 1u64;
    'outer: while pos < region_pages {
        let n = batch.min(region_pages - pos);
        batch = (batch * 2).min(SCAN_BATCH);
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
                }
                _ => {
                    end = Some(here);
                    break 'outer;
                }
            }
        }
        pos += n;
    }
    let valid_pages = end.unwrap_or(region_pages);
    if let Some(bad) = end {
        pages_read += lookahead(dev, layout, sb, bad)?;
    }

    let locate = |off: usize| -> String {
        let idx = starts.partition_point(|&(s, _)| s <= off).saturating_sub(1);
        let (s, p) = starts.get(idx).copied().unwrap_or((0, 0));
        format!(
            "log region {region} page {p} (device page {}) offset {}",
            layout.region_page(region, p),
            off - s + super::record::PAGE_HEADER
        )
    };
    let device_page = |off: usize| -> PageId {
        let idx = starts.partition_point(|&(s, _)| s <= off).saturating_sub(1);
        let p = starts.get(idx).map(|&(_, p)| p).unwrap_or(0);
        layout.region_page(region, p)
    };

    // The base a clean checkpoint left in the superblock comes first.
    let mut records = sb.base_records();
    let mut off = 0usize;
    let mut torn_tail = false;
    let mut last_lsn: Lsn = records.iter().map(|r| r.lsn).max().unwrap_or(0);
    while off < stream.len() {
        let rest = stream.get(off..).unwrap_or(&[]);
        match decode(rest) {
            Decoded::Record(rec, len) => {
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
    Ok(Scan {
        records,
        pages: valid_pages,
        torn_tail,
        pages_read,
    })
}

/// Looks past the first invalid page `bad` for a valid page of this epoch that
/// says `bad` had been made durable. Returns the pages read.
fn lookahead(dev: &SharedDevice, layout: &LogLayout, sb: &Superblock, bad: u64) -> Result<u64> {
    let ps = layout.page_size;
    let mut buf = vec![0u8; ps];
    let mut read = 0;
    let last = layout
        .region_pages()
        .min(bad.saturating_add(1 + LOOKAHEAD_PAGES));
    for pos in bad + 1..last {
        let page = layout.region_page(sb.live, pos);
        dev.read(page, &mut buf)?;
        read += 1;
        match check_page(&buf) {
            PageCheck::Valid(h, _) if h.log_id == sb.log_id && h.epoch == sb.epoch => {
                if h.position == pos && u64::from(h.durable_pos) > bad {
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
            PageCheck::Damaged(Some((log, epoch))) if log == sb.log_id && epoch == sb.epoch => {}
            // Never written in this epoch: nothing further was either.
            _ => break,
        }
    }
    Ok(read)
}

/// A read-only view of a log's records, for recovery, inspection and tools.
/// Opening it writes nothing.
#[derive(Debug, Clone)]
pub struct LogReader {
    records: Vec<Record>,
    torn_tail: bool,
    live_region: u8,
    pages: u64,
    lsn_floor: Lsn,
    pages_read: u64,
    format: super::LogFormat,
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
        let s = scan(&dev, &layout, &sb).map_err(|e| in_device_file(&dev, e))?;
        Ok(LogReader {
            records: s.records,
            torn_tail: s.torn_tail,
            live_region: sb.live,
            pages: s.pages,
            lsn_floor: sb.lsn_floor,
            pages_read: pages_read + s.pages_read,
            format: sb.format,
        })
    }

    /// Records oldest first.
    pub fn oldest_first(&self) -> impl Iterator<Item = &Record> {
        self.records.iter()
    }

    /// Records newest first (the order of the restart scan).
    pub fn newest_first(&self) -> impl Iterator<Item = &Record> {
        self.records.iter().rev()
    }

    /// The records, oldest first.
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
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when the log holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// True when a record cut short by a crash was found (and ignored) at the end.
    pub fn torn_tail(&self) -> bool {
        self.torn_tail
    }

    /// The live region (0 or 1).
    pub fn live_region(&self) -> u8 {
        self.live_region
    }

    /// Valid pages in the live region.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Largest LSN assigned before the live region was written.
    pub fn lsn_floor(&self) -> Lsn {
        self.lsn_floor
    }

    /// The log's format.
    pub fn format(&self) -> super::LogFormat {
        self.format
    }

    /// Pages read to open the reader.
    pub fn pages_read(&self) -> u64 {
        self.pages_read
    }
}
