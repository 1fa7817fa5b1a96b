//! Reading the live region one page and one record at a time.
//!
//! [`PageSource`] hands out the live region's valid pages in order, reading
//! them in batches and rebuilding a damaged page of a sealed log from its
//! batch's seal; [`RecordCursor`] decodes the records of those pages as
//! they come, holding only the pages of the record being decoded. A scan
//! that keeps every record ([`super::reader`]) and the recovery passes that
//! keep only what survives ([`super::survival`]) read through them, so a
//! log is judged by the same checks whether it is held whole or streamed:
//! the stream ends at the first page that is not of the live epoch at its
//! position, a record cut short there is the torn tail, and damage before
//! the tail is an error naming the region, page and offset.
use std::collections::VecDeque;

use crate::storage::PageId;
use crate::{Error, Result};

use super::entry_refs::Resolver;
use super::reader::{damage_after, damaged, sealed_page, Damage, Sealed};
use super::record::{check_page, decode_framed, Decoded, Framing, HeaderDeltas, PageCheck, Record};
use super::seal::BatchXor;
use super::superblock::Superblock;
use super::{LogLayout, Lsn, PayloadCodec, RecordKind, SharedDevice};

/// Pages read per device batch while scanning.
const SCAN_BATCH: u64 = 64;

/// Bytes of consumed records a cursor keeps before dropping them from its
/// buffer.
const DRAIN_BYTES: usize = 1 << 16;

/// The live region's valid pages in order, up to the first page that is
/// not of the live epoch at its position (rebuilt from its batch's seal
/// when the log is sealed and it can be). Batches grow from one page, so
/// that a short log (an empty epoch after a clean checkpoint) costs few
/// reads.
pub(super) struct PageSource<'a> {
    dev: &'a SharedDevice,
    layout: &'a LogLayout,
    sb: &'a Superblock,
    /// The batch read last, and the region position of its first page.
    buf: Vec<u8>,
    buf_first: u64,
    buf_pages: u64,
    /// The next region position to hand out.
    next: u64,
    /// Pages the next batch reads.
    read_batch: u64,
    /// Sealed logs: the first position of the batch being read and the
    /// XOR of its pages so far.
    batch_first: u64,
    batch: BatchXor,
    /// Pages read from the device (seals and the pages they needed too).
    pub pages_read: u64,
    /// Pages rebuilt from seals.
    pub rebuilt: u64,
    /// Region position of the first page that ended the stream, if any.
    pub end: Option<u64>,
    done: bool,
}

impl<'a> PageSource<'a> {
    /// The pages of region `sb.live` of `layout` on `dev`.
    pub fn new(dev: &'a SharedDevice, layout: &'a LogLayout, sb: &'a Superblock) -> Self {
        PageSource {
            dev,
            layout,
            sb,
            buf: Vec::new(),
            buf_first: 0,
            buf_pages: 0,
            next: 0,
            read_batch: 1,
            batch_first: 0,
            batch: BatchXor::default(),
            pages_read: 0,
            rebuilt: 0,
            end: None,
            done: false,
        }
    }

    /// Valid pages handed out so far; after the end, the region's next
    /// free position.
    pub fn valid_pages(&self) -> u64 {
        self.end.unwrap_or(self.next)
    }

    /// Appends the data of the next valid page (after its header) to
    /// `out` and returns its region position; `None` at the end.
    pub fn next_into(&mut self, out: &mut Vec<u8>) -> Result<Option<u64>> {
        let ps = self.layout.page_size;
        let region_pages = self.layout.region_pages();
        if self.done || self.next >= region_pages {
            self.done = true;
            return Ok(None);
        }
        if self.next >= self.buf_first + self.buf_pages {
            let n = self.read_batch.min(region_pages - self.next);
            self.read_batch = (self.read_batch * 2).min(SCAN_BATCH);
            let ids: Vec<PageId> = (self.next..self.next + n)
                .map(|p| self.layout.region_page(self.sb.live, p))
                .collect();
            self.buf.resize(n as usize * ps, 0);
            self.dev.read_batch(&ids, &mut self.buf)?;
            self.pages_read += n;
            self.buf_first = self.next;
            self.buf_pages = n;
        }
        let here = self.next;
        let at = (here - self.buf_first) as usize * ps;
        let page = self
            .buf
            .get(at..at + ps)
            .ok_or_else(|| Error::invalid("scan buffer too small"))?;
        let sb = self.sb;
        match check_page(page) {
            PageCheck::Valid(h, data)
                if h.log_id == sb.log_id && h.epoch == sb.epoch && h.position == here =>
            {
                out.extend_from_slice(data);
                if sb.sealed {
                    // A batch's pages all carry its first position.
                    if u64::from(h.durable_pos) != self.batch_first {
                        self.batch_first = u64::from(h.durable_pos);
                        self.batch.clear();
                    }
                    self.batch.add(page);
                }
            }
            _ if sb.sealed => match sealed_page(
                self.dev,
                self.layout,
                sb,
                here,
                page,
                self.batch_first,
                &self.batch,
            )? {
                Sealed::Rebuilt(page, first, read) => {
                    self.pages_read += read;
                    self.rebuilt += 1;
                    if let PageCheck::Valid(_, data) = check_page(&page) {
                        out.extend_from_slice(data);
                    }
                    if first != self.batch_first {
                        self.batch_first = first;
                        self.batch.clear();
                    }
                    self.batch.add(&page);
                }
                Sealed::End(read) => {
                    self.pages_read += read;
                    return Ok(self.stop(here));
                }
            },
            _ => return Ok(self.stop(here)),
        }
        self.next += 1;
        Ok(Some(here))
    }

    fn stop(&mut self, here: u64) -> Option<u64> {
        self.end = Some(here);
        self.done = true;
        None
    }
}

/// The records of the live region of `sb` read again, oldest first, as a
/// later pass of a restart reads a region too long to hold: the log pages
/// each record took are given to `note` as it is read.
pub(super) fn reread<'a>(
    dev: &'a SharedDevice,
    layout: &'a LogLayout,
    sb: &'a Superblock,
    mut note: impl FnMut(u64) + 'a,
) -> impl Iterator<Item = Result<Record>> + 'a {
    let mut cursor = RecordCursor::new(dev, layout, sb, false);
    std::iter::from_fn(move || {
        let before = cursor.pages_read();
        let next = cursor.next_record().transpose();
        note(cursor.pages_read() - before);
        next
    })
}

/// The records of the live region in stream order, decoded as their pages
/// are read: first the superblock's base (see
/// [`Superblock::base_records`]), then the region's. Entry references are
/// resolved (logs with them) unless the cursor tolerates damage, which
/// only counts records. See the [module docs](self).
pub(super) struct RecordCursor<'a> {
    pages: PageSource<'a>,
    base: std::vec::IntoIter<Record>,
    /// Undecoded stream bytes from absolute offset `consumed`.
    data: Vec<u8>,
    consumed: usize,
    /// Absolute offset of the next record.
    off: usize,
    /// (absolute offset where a page's data starts, its region position),
    /// from the page holding `consumed` on.
    starts: VecDeque<(usize, u64)>,
    framing: Framing,
    /// Version 5 writes header fields as differences to the previous record's.
    deltas: Option<HeaderDeltas>,
    resolver: Option<(Resolver, PayloadCodec)>,
    tolerate: bool,
    last_lsn: Lsn,
    /// The region position of the page holding the last byte of the record
    /// handed out last.
    end_page: u64,
    /// A record was cut short at the end of the stream.
    pub torn_tail: bool,
    /// Tolerating damage: the region position of the page whose record is
    /// damage before the tail (the stream ended before it).
    pub cut: Option<u64>,
    /// Damage a later page proves ([`RecoveryMode::TolerateCorruptTail`](super::RecoveryMode)).
    pub damage: Option<Damage>,
    finished: bool,
}

impl<'a> RecordCursor<'a> {
    /// The records of region `sb.live`; with `tolerate`, damage before the
    /// tail ends the stream ([`RecordCursor::cut`], [`RecordCursor::damage`])
    /// instead of being an error.
    pub fn new(
        dev: &'a SharedDevice,
        layout: &'a LogLayout,
        sb: &'a Superblock,
        tolerate: bool,
    ) -> Self {
        let base = sb.base_records();
        let last_lsn = base.iter().map(|r| r.lsn).max().unwrap_or(0);
        RecordCursor {
            pages: PageSource::new(dev, layout, sb),
            base: base.into_iter(),
            data: Vec::new(),
            consumed: 0,
            off: 0,
            starts: VecDeque::new(),
            framing: sb.format.framing(),
            deltas: sb.entry_refs.then(HeaderDeltas::default),
            resolver: (sb.entry_refs && !tolerate)
                .then(|| (Resolver::default(), sb.format.payload_codec())),
            tolerate,
            last_lsn,
            end_page: 0,
            torn_tail: false,
            cut: None,
            damage: None,
            finished: false,
        }
    }

    /// Pages read so far.
    pub fn pages_read(&self) -> u64 {
        self.pages.pages_read
    }

    /// Pages rebuilt from seals so far.
    pub fn rebuilt(&self) -> u64 {
        self.pages.rebuilt
    }

    /// Valid pages of the region (after the end: its next free position).
    pub fn valid_pages(&self) -> u64 {
        self.pages.valid_pages()
    }

    /// The region position of the page holding the last byte of the record
    /// handed out last.
    pub fn end_page(&self) -> u64 {
        self.end_page
    }

    /// The next record, `Ok(None)` at the end of the stream.
    pub fn next_record(&mut self) -> Result<Option<Record>> {
        if let Some(rec) = self.base.next() {
            return Ok(Some(rec));
        }
        if self.finished {
            return Ok(None);
        }
        let r = self.decode_next();
        if !matches!(r, Ok(Some(_))) {
            self.finished = true;
        }
        r
    }

    fn decode_next(&mut self) -> Result<Option<Record>> {
        loop {
            let rest = self.data.get(self.off - self.consumed..).unwrap_or(&[]);
            if rest.is_empty() && !self.fill()? {
                return Ok(None);
            }
            let rest = self.data.get(self.off - self.consumed..).unwrap_or(&[]);
            match decode_framed(rest, self.framing) {
                Decoded::Incomplete => {
                    if !self.fill()? {
                        self.torn_tail = true;
                        return Ok(None);
                    }
                }
                Decoded::Record(_, _) | Decoded::Corrupt(_)
                    if self.tolerate && damaged(rest, self.framing, self.last_lsn, self.deltas) =>
                {
                    self.cut = Some(self.page_holding(self.off).1);
                    // The damage ends the log; the pages after it are read
                    // to know where the live epoch ends.
                    let mut skipped = Vec::new();
                    while self.pages.next_into(&mut skipped)?.is_some() {
                        skipped.clear();
                    }
                    self.look_ahead()?;
                    return Ok(None);
                }
                Decoded::Record(mut rec, len) => {
                    if let Some(d) = self.deltas.as_mut() {
                        d.decode_next(&mut rec);
                    }
                    if rec.lsn <= self.last_lsn {
                        return Err(self.damage_error(format!(
                            "LSN {} follows LSN {}",
                            rec.lsn, self.last_lsn
                        )));
                    }
                    self.last_lsn = rec.lsn;
                    if let Some((resolver, codec)) = self.resolver.as_mut() {
                        if matches!(rec.kind, RecordKind::New | RecordKind::Mod) {
                            rec.payload = codec.resolve_refs(&rec, resolver)?;
                        }
                    }
                    self.end_page = self.page_holding(self.off + len - 1).1;
                    self.off += len;
                    self.drain();
                    return Ok(Some(rec));
                }
                Decoded::Corrupt(why) => return Err(self.damage_error(why)),
            }
        }
    }

    /// Reads the next page into the buffer; false at the end of the
    /// stream ([`RecordCursor::look_ahead`]).
    fn fill(&mut self) -> Result<bool> {
        let at = self.consumed + self.data.len();
        match self.pages.next_into(&mut self.data)? {
            Some(pos) => {
                self.starts.push_back((at, pos));
                Ok(true)
            }
            None => {
                self.look_ahead()?;
                Ok(false)
            }
        }
    }

    /// At the end of the stream: looks at the pages after it for proof of
    /// damage (an error, or with `tolerate` [`RecordCursor::damage`]).
    fn look_ahead(&mut self) -> Result<()> {
        let (read, damage) = damage_after(
            self.pages.dev,
            self.pages.layout,
            self.pages.sb,
            self.pages.end,
            self.tolerate,
        )?;
        self.pages.pages_read += read;
        self.damage = damage;
        Ok(())
    }

    /// Drops the bytes of records handed out, once there are enough of them.
    fn drain(&mut self) {
        let done = self.off - self.consumed;
        if done < DRAIN_BYTES || done * 2 < self.data.len() {
            return;
        }
        self.data.drain(..done);
        self.consumed = self.off;
        while self.starts.len() > 1 && self.starts.get(1).is_some_and(|&(s, _)| s <= self.off) {
            self.starts.pop_front();
        }
    }

    /// (absolute offset where its data starts, region position) of the
    /// page holding absolute offset `off` ((0, 0) for an empty stream).
    fn page_holding(&self, off: usize) -> (usize, u64) {
        let idx = self
            .starts
            .partition_point(|&(s, _)| s <= off)
            .saturating_sub(1);
        self.starts.get(idx).copied().unwrap_or((0, 0))
    }

    /// Damage before the tail at the next record: an error naming the
    /// region, page and offset.
    fn damage_error(&self, why: String) -> Error {
        let (s, p) = self.page_holding(self.off);
        let (layout, region) = (self.pages.layout, self.pages.sb.live);
        let device_page = layout.region_page(region, p);
        Error::corrupt(
            Some(device_page),
            format!(
                "log region {region} page {p} (device page {device_page}) offset {}: {why}; the log is damaged before its tail",
                self.off - s + super::record::PAGE_HEADER
            ),
        )
    }
}
