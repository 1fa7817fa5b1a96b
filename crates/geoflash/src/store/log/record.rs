//! The framed record format and the log-page format (little-endian throughout).
//!
//! # Records
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | total length of the record in bytes (header + payload, `u32`) |
//! | 4 | 4 | CRC-32C of the record with these 4 bytes taken as zero |
//! | 8 | 8 | LSN (`u64`, ≥ 1, strictly increasing along the log) |
//! | 16 | 1 | kind ([`RecordKind`]; unknown values are corrupt) |
//! | 17 | 8 | operation id (`u64`, [`NO_OP`](super::NO_OP) = none) |
//! | 25 | 8 | page id (`u64`; 0 where the kind concerns no page) |
//! | 33 | … | payload |
//!
//! Logs of the [compact](super::LogFormat::Compact) format frame records
//! with varints instead ([`Framing::Compact`]):
//!
//! | size | field |
//! |---:|---|
//! | 1 | kind |
//! | 1–10 | LSN (unsigned LEB128 varint) |
//! | 1–10 | operation id (varint) |
//! | 1–10 | page id (varint) |
//! | 1–5 | payload length (varint) |
//! | … | payload |
//!
//! with no record checksum: every log page carries a CRC-32C of all its
//! bytes and the stream ends at the first page that fails it, so a record
//! is either in checked pages or cut by the end of the stream (a torn
//! tail, [`Decoded::Incomplete`]); the per-record checksum of the fixed
//! framing repeats that check.
//!
//! The payload is opaque to the log except for FLUSH: a `u32` count followed
//! by that many page ids (`u64`), built by [`Record::flush`] and read by
//! [`Record::flushed_pages`]; in logs of superblock version 5 the count
//! may be [`FLUSH_VARINT`], followed by the list as varints
//! ([`Record::flush_varint`]).
//!
//! # Log pages
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | magic [`PAGE_MAGIC`] = `b"GFLG"` |
//! | 4 | 4 | CRC-32C of the whole page with these 4 bytes taken as zero |
//! | 8 | 8 | log id (random, chosen when the log was created) |
//! | 16 | 8 | epoch of the region incarnation |
//! | 24 | 8 | position of the page in its region |
//! | 32 | 4 | durable position: pages of the region known durable when this page was written |
//! | 36 | 4 | bytes of record stream in this page |
//! | 40 | … | record stream; zeros after it |
use integer_encoding::VarInt;

use crate::storage::PageId;
use crate::store::OpId;
use crate::{Error, Result};

use super::Lsn;

/// Bytes of a record header.
pub const RECORD_HEADER: usize = 33;
/// Largest payload a record may carry (16 MiB).
pub const MAX_PAYLOAD: usize = 16 << 20;
/// The count field of a FLUSH payload whose page list is written as
/// varints ([`Record::flush_varint`]); a fixed list of this many pages
/// would exceed [`MAX_PAYLOAD`], so the two never clash.
pub const FLUSH_VARINT: u32 = u32::MAX;
/// Bytes of a log-page header.
pub const PAGE_HEADER: usize = 40;
/// Magic number of a log page.
pub const PAGE_MAGIC: [u8; 4] = *b"GFLG";

/// Bytes of record stream one log page of `page_size` bytes carries.
pub fn data_per_page(page_size: usize) -> usize {
    page_size.saturating_sub(PAGE_HEADER)
}

internal! {
    /// How records are framed in a log's byte stream (see the [module docs](self)).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Framing {
        /// A 33-byte header with the record's length and CRC-32C.
        Fixed,
        /// A kind byte and varints (about 8 bytes), no record checksum.
        Compact,
    }
}

impl Framing {
    /// The fewest bytes a record takes in a stream of this framing: the
    /// fixed header, or a kind byte and four one-byte varints.
    pub fn min_record_len(self) -> usize {
        match self {
            Framing::Fixed => RECORD_HEADER,
            Framing::Compact => 5,
        }
    }
}

/// Largest bytes of a compact header: kind, three `u64` varints and a `u32` one.
const COMPACT_HEADER_MAX: usize = 1 + 3 * 10 + 5;

internal! {
    /// What a record says. Kinds other than FLUSH, COMMIT and CHECKPOINT concern
    /// one page (`Record::page`) or the tree metadata (META).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum RecordKind {
        /// A node was created; the payload is its complete content (it supersedes older records of the page).
        New,
        /// Entry-level changes of a node.
        Mod,
        /// A node was deleted.
        Del,
        /// Pages made durable on the device; earlier records of these pages are
        /// obsolete. For a deleted page it means the deletion is durable (for
        /// example the free list holding the page has been written).
        Flush,
        /// The operation `Record::op` is complete.
        Commit,
        /// Tree metadata; the newest committed META supersedes older ones.
        Meta,
        /// The complete content of a page about to be written in place (torn-write
        /// protection); it supersedes older records of the page until a FLUSH covers it.
        PageImage,
        /// Everything older is durable on the device: recovery needs nothing before it.
        Checkpoint,
        /// Frames of a front end's own state (the record map of user ids and
        /// objects), opaque to the log and to the stores, logged with the
        /// operation they belong to (`Record::op`): restart keeps them exactly
        /// when it keeps that operation, and only a CHECKPOINT makes them
        /// obsolete (logs of superblock versions 8 to 11).
        Client,
    }
}

impl RecordKind {
    /// Every kind, for tests and tools.
    pub const ALL: [RecordKind; 9] = [
        RecordKind::New,
        RecordKind::Mod,
        RecordKind::Del,
        RecordKind::Flush,
        RecordKind::Commit,
        RecordKind::Meta,
        RecordKind::PageImage,
        RecordKind::Checkpoint,
        RecordKind::Client,
    ];

    /// The on-device code.
    pub fn as_u8(self) -> u8 {
        match self {
            RecordKind::New => 1,
            RecordKind::Mod => 2,
            RecordKind::Del => 3,
            RecordKind::Flush => 4,
            RecordKind::Commit => 5,
            RecordKind::Meta => 6,
            RecordKind::PageImage => 7,
            RecordKind::Checkpoint => 8,
            RecordKind::Client => 9,
        }
    }

    /// The kind of an on-device code.
    pub fn from_u8(b: u8) -> Option<RecordKind> {
        RecordKind::ALL.into_iter().find(|k| k.as_u8() == b)
    }

    /// True for kinds that change one page (NEW, MOD, DEL, PAGE_IMAGE).
    pub fn is_page_change(self) -> bool {
        matches!(
            self,
            RecordKind::New | RecordKind::Mod | RecordKind::Del | RecordKind::PageImage
        )
    }
}

internal! {
    /// One log record.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Record {
        /// Sequence number (assigned by the log at append).
        pub lsn: Lsn,
        /// What the record says.
        pub kind: RecordKind,
        /// Operation the record belongs to ([`NO_OP`](super::NO_OP) for none).
        pub op: OpId,
        /// Page concerned (0 where the kind concerns no page).
        pub page: PageId,
        /// Opaque bytes (FLUSH: the page list, see the module docs).
        pub payload: Vec<u8>,
    }
}

impl Record {
    /// A record of `kind` before it has an LSN (the log assigns it).
    pub fn new(kind: RecordKind, op: OpId, page: PageId, payload: Vec<u8>) -> Record {
        Record::at(0, kind, op, page, payload)
    }

    /// A record with its LSN (as decoded from the log).
    pub fn at(lsn: Lsn, kind: RecordKind, op: OpId, page: PageId, payload: Vec<u8>) -> Record {
        Record {
            lsn,
            kind,
            op,
            page,
            payload,
        }
    }

    /// A FLUSH record covering `pages`.
    pub fn flush(pages: &[PageId]) -> Result<Record> {
        let count = u32::try_from(pages.len())
            .map_err(|_| Error::invalid("a FLUSH record covers at most 2^32 - 1 pages"))?;
        let mut payload = Vec::with_capacity(4 + 8 * pages.len());
        payload.extend_from_slice(&count.to_le_bytes());
        for p in pages {
            payload.extend_from_slice(&p.to_le_bytes());
        }
        Ok(Record::new(RecordKind::Flush, super::NO_OP, 0, payload))
    }

    /// A FLUSH record covering `pages` with the page list as varints (logs
    /// of superblock version 5 only, whose readers know it): the count
    /// field [`FLUSH_VARINT`], the number of pages, then each page as the
    /// zigzag varint of its difference to the previous one (the first's to
    /// 0). Pages flushed in ascending order take about a byte each instead
    /// of eight.
    pub fn flush_varint(pages: &[PageId]) -> Record {
        let mut payload = Vec::with_capacity(6 + 2 * pages.len());
        payload.extend_from_slice(&FLUSH_VARINT.to_le_bytes());
        let mut b = [0u8; 10];
        let mut put = |payload: &mut Vec<u8>, v: u64| {
            let n = v.encode_var(&mut b);
            payload.extend_from_slice(b.get(..n).unwrap_or(&[]));
        };
        put(&mut payload, pages.len() as u64);
        let mut prev = 0u64;
        for &p in pages {
            put(&mut payload, zigzag(p.wrapping_sub(prev)));
            prev = p;
        }
        Record::new(RecordKind::Flush, super::NO_OP, 0, payload)
    }

    /// A COMMIT record of operation `op`.
    pub fn commit(op: OpId) -> Record {
        Record::new(RecordKind::Commit, op, 0, Vec::new())
    }

    /// The pages a FLUSH record covers (an error for other kinds or a bad payload).
    pub fn flushed_pages(&self) -> Result<Vec<PageId>> {
        if self.kind != RecordKind::Flush {
            return Err(Error::invalid(format!(
                "record {} is a {:?}, not a FLUSH",
                self.lsn, self.kind
            )));
        }
        let bad = || {
            Error::corrupt(
                None,
                format!("FLUSH record {} has a malformed page list", self.lsn),
            )
        };
        let count = get_u32(&self.payload, 0).ok_or_else(bad)?;
        let body = self.payload.get(4..).ok_or_else(bad)?;
        if count == FLUSH_VARINT {
            let mut off = 0usize;
            let mut next = || -> Result<u64> {
                let (v, n) = u64::decode_var(body.get(off..).unwrap_or(&[])).ok_or_else(bad)?;
                off += n;
                Ok(v)
            };
            let n = next()?;
            // Every page takes at least a byte.
            if n > body.len() as u64 {
                return Err(bad());
            }
            let mut pages = Vec::with_capacity(n as usize);
            let mut prev = 0u64;
            for _ in 0..n {
                prev = prev.wrapping_add(unzigzag(next()?));
                pages.push(prev);
            }
            if off != body.len() {
                return Err(bad());
            }
            return Ok(pages);
        }
        let count = count as usize;
        if body.len() != count.checked_mul(8).ok_or_else(bad)? {
            return Err(bad());
        }
        Ok(body
            .chunks_exact(8)
            .filter_map(|c| c.try_into().ok().map(u64::from_le_bytes))
            .collect())
    }

    /// Bytes the record takes in the log.
    pub fn encoded_len(&self) -> usize {
        RECORD_HEADER + self.payload.len()
    }

    /// Appends the framed record to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<()> {
        if self.payload.len() > MAX_PAYLOAD {
            return Err(Error::invalid(format!(
                "log record payload of {} bytes exceeds the limit of {MAX_PAYLOAD} bytes",
                self.payload.len()
            )));
        }
        let len = self.encoded_len() as u32;
        let start = out.len();
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&[0u8; 4]);
        out.extend_from_slice(&self.lsn.to_le_bytes());
        out.push(self.kind.as_u8());
        out.extend_from_slice(&self.op.to_le_bytes());
        out.extend_from_slice(&self.page.to_le_bytes());
        out.extend_from_slice(&self.payload);
        let crc = out.get(start..).map(record_crc).unwrap_or(0);
        if let Some(dst) = out.get_mut(start + 4..start + 8) {
            dst.copy_from_slice(&crc.to_le_bytes());
        }
        Ok(())
    }

    /// Bytes the record takes in a stream of `framing`.
    pub fn framed_len(&self, framing: Framing) -> usize {
        match framing {
            Framing::Fixed => self.encoded_len(),
            Framing::Compact => self.compact_len_as([self.lsn, self.op, self.page]),
        }
    }

    /// Bytes the record takes in the compact framing with `fields` (LSN,
    /// operation, page) written in place of its own.
    pub fn compact_len_as(&self, fields: [u64; 3]) -> usize {
        1 + fields.iter().map(|v| v.required_space()).sum::<usize>()
            + (self.payload.len() as u64).required_space()
            + self.payload.len()
    }

    /// Most bytes the record can take in a stream of either framing.
    pub fn max_framed_len(&self) -> usize {
        self.payload.len() + RECORD_HEADER.max(COMPACT_HEADER_MAX)
    }

    /// Appends the record to `out` in `framing`.
    pub fn encode_framed(&self, framing: Framing, out: &mut Vec<u8>) -> Result<()> {
        match framing {
            Framing::Fixed => self.encode_into(out),
            Framing::Compact => self.encode_compact_as([self.lsn, self.op, self.page], out),
        }
    }

    /// Appends the record in the compact framing with `fields` (LSN,
    /// operation, page) written in place of its own (see [`HeaderDeltas`]).
    pub fn encode_compact_as(&self, fields: [u64; 3], out: &mut Vec<u8>) -> Result<()> {
        if self.payload.len() > MAX_PAYLOAD {
            return Err(Error::invalid(format!(
                "log record payload of {} bytes exceeds the limit of {MAX_PAYLOAD} bytes",
                self.payload.len()
            )));
        }
        let mut head = [0u8; COMPACT_HEADER_MAX];
        let mut n = 0;
        if let Some(k) = head.get_mut(0) {
            *k = self.kind.as_u8();
            n = 1;
        }
        let [lsn, op, page] = fields;
        for v in [lsn, op, page, self.payload.len() as u64] {
            n += head.get_mut(n..).map_or(0, |rest| v.encode_var(rest));
        }
        out.extend_from_slice(head.get(..n).unwrap_or(&[]));
        out.extend_from_slice(&self.payload);
        Ok(())
    }

    #[cfg(test)]
    /// The framed record as bytes.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out)?;
        Ok(out)
    }
}

/// The header fields of a log of superblock version 5 as written: each
/// record's LSN, operation and page as differences to the previous
/// record's in the region's stream (the first record's to 0). The LSN's
/// is at least 1 (LSNs ascend), the others are zigzag-encoded (a group's
/// records share the operation and ascend in page), so the three usually
/// take a byte each instead of about eight together. The writer and every
/// scan keep one from the start of the region.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HeaderDeltas {
    lsn: Lsn,
    op: OpId,
    page: PageId,
}

/// A wrapping difference of two `u64` (`b.wrapping_sub(a)`) as a number
/// that is small when the difference is small either way (zigzag), for a
/// varint; the log's difference encodings share it.
pub(crate) fn zigzag(d: u64) -> u64 {
    let d = d as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

/// The inverse of [`zigzag`]: the difference to add with `wrapping_add`.
pub(crate) fn unzigzag(z: u64) -> u64 {
    (((z >> 1) as i64) ^ -((z & 1) as i64)) as u64
}

impl HeaderDeltas {
    /// The fields to write for `rec`, the record that follows.
    pub fn encode_next(&mut self, rec: &Record) -> [u64; 3] {
        let wire = [
            rec.lsn.wrapping_sub(self.lsn),
            zigzag(rec.op.wrapping_sub(self.op)),
            zigzag(rec.page.wrapping_sub(self.page)),
        ];
        *self = HeaderDeltas {
            lsn: rec.lsn,
            op: rec.op,
            page: rec.page,
        };
        wire
    }

    /// Restores the fields of `rec`, decoded from the stream with the
    /// written ones, the record that follows.
    pub fn decode_next(&mut self, rec: &mut Record) {
        rec.lsn = self.lsn.wrapping_add(rec.lsn);
        rec.op = self.op.wrapping_add(unzigzag(rec.op));
        rec.page = self.page.wrapping_add(unzigzag(rec.page));
        *self = HeaderDeltas {
            lsn: rec.lsn,
            op: rec.op,
            page: rec.page,
        };
    }
}

/// Result of decoding one record from the front of a byte stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A whole, valid record and the bytes it took.
    Record(Record, usize),
    /// The stream ends inside a record (a torn tail if nothing follows).
    Incomplete,
    /// The bytes are not a valid record.
    Corrupt(String),
}

/// Decodes the record of `framing` at the front of `buf`. Never panics.
pub fn decode_framed(buf: &[u8], framing: Framing) -> Decoded {
    match framing {
        Framing::Fixed => decode(buf),
        Framing::Compact => decode_compact(buf),
    }
}

/// One varint at `buf[*off..]`: `Err(true)` when the buffer ends inside
/// it, `Err(false)` when it is malformed (too long).
fn varint_at(buf: &[u8], off: &mut usize) -> std::result::Result<u64, bool> {
    let rest = buf.get(*off..).unwrap_or(&[]);
    match u64::decode_var(rest) {
        Some((v, n)) => {
            *off += n;
            Ok(v)
        }
        // `decode_var` fails on a buffer that ends inside the varint and on
        // one longer than ten bytes; tell them apart by the continuation bits.
        None => Err(rest.iter().take(10).all(|b| b & 0x80 != 0) && rest.len() < 10),
    }
}

fn decode_compact(buf: &[u8]) -> Decoded {
    let Some(&code) = buf.first() else {
        return Decoded::Incomplete;
    };
    let Some(kind) = RecordKind::from_u8(code) else {
        return Decoded::Corrupt(format!("unknown record kind {code}"));
    };
    let mut off = 1;
    let mut fields = [0u64; 4];
    for f in &mut fields {
        match varint_at(buf, &mut off) {
            Ok(v) => *f = v,
            Err(true) => return Decoded::Incomplete,
            Err(false) => return Decoded::Corrupt("malformed varint in a record header".into()),
        }
    }
    let [lsn, op, page, len] = fields;
    if lsn == 0 {
        return Decoded::Corrupt("record with LSN 0".into());
    }
    let Ok(len) = usize::try_from(len) else {
        return Decoded::Corrupt(format!("record payload length {len} is impossible"));
    };
    if len > MAX_PAYLOAD {
        return Decoded::Corrupt(format!("record payload length {len} is impossible"));
    }
    let Some(payload) = buf.get(off..off + len) else {
        return Decoded::Incomplete;
    };
    Decoded::Record(Record::at(lsn, kind, op, page, payload.to_vec()), off + len)
}

/// Decodes the record at the front of `buf` (fixed framing). Never panics.
pub fn decode(buf: &[u8]) -> Decoded {
    let Some(len) = get_u32(buf, 0) else {
        return Decoded::Incomplete;
    };
    let len = len as usize;
    if !(RECORD_HEADER..=RECORD_HEADER + MAX_PAYLOAD).contains(&len) {
        return Decoded::Corrupt(format!("record length {len} is impossible"));
    }
    let Some(bytes) = buf.get(..len) else {
        return Decoded::Incomplete;
    };
    let stored = get_u32(bytes, 4).unwrap_or(0);
    if record_crc(bytes) != stored {
        return Decoded::Corrupt("record checksum mismatch".into());
    }
    let (Some(lsn), Some(kind), Some(op), Some(page)) = (
        get_u64(bytes, 8),
        bytes.get(16).copied(),
        get_u64(bytes, 17),
        get_u64(bytes, 25),
    ) else {
        return Decoded::Corrupt("record header truncated".into());
    };
    let Some(kind) = RecordKind::from_u8(kind) else {
        return Decoded::Corrupt(format!("unknown record kind {kind}"));
    };
    if lsn == 0 {
        return Decoded::Corrupt("record with LSN 0".into());
    }
    let payload = bytes.get(RECORD_HEADER..).unwrap_or(&[]).to_vec();
    Decoded::Record(Record::at(lsn, kind, op, page, payload), len)
}

fn record_crc(bytes: &[u8]) -> u32 {
    let head = bytes.get(..4).unwrap_or(bytes);
    let tail = bytes.get(8..).unwrap_or(&[]);
    let crc = crc32c::crc32c(head);
    let crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc32c::crc32c_append(crc, tail)
}

/// Header of a log page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    /// Log id.
    pub log_id: u64,
    /// Epoch of the region incarnation.
    pub epoch: u64,
    /// Position of the page in its region.
    pub position: u64,
    /// Pages of the region known durable when the page was written.
    pub durable_pos: u32,
    /// Bytes of record stream in the page.
    pub data_len: u32,
}

/// How a page looks to the reader.
#[derive(Debug, PartialEq, Eq)]
pub enum PageCheck<'a> {
    /// Checksum right: the header and the stream bytes.
    Valid(PageHeader, &'a [u8]),
    /// Magic right but checksum or layout wrong (a torn or damaged page); its
    /// header fields as far as they can be read.
    Damaged(Option<(u64, u64)>),
    /// Not a log page (never written, or something else).
    Foreign,
}

/// Encodes a log page: header and `data` (at most [`data_per_page`] bytes) into `buf`.
pub fn encode_page(h: &PageHeader, data: &[u8], buf: &mut [u8]) -> Result<()> {
    let cap = data_per_page(buf.len());
    if data.len() > cap || data.len() != h.data_len as usize {
        return Err(Error::invalid(format!(
            "log page data of {} bytes (header says {}) where a page holds {cap}",
            data.len(),
            h.data_len
        )));
    }
    buf.fill(0);
    let mut head = [0u8; PAGE_HEADER];
    head[0..4].copy_from_slice(&PAGE_MAGIC);
    head[8..16].copy_from_slice(&h.log_id.to_le_bytes());
    head[16..24].copy_from_slice(&h.epoch.to_le_bytes());
    head[24..32].copy_from_slice(&h.position.to_le_bytes());
    head[32..36].copy_from_slice(&h.durable_pos.to_le_bytes());
    head[36..40].copy_from_slice(&h.data_len.to_le_bytes());
    let dst_head = buf
        .get_mut(..PAGE_HEADER)
        .ok_or_else(|| Error::invalid("log page buffer too small"))?;
    dst_head.copy_from_slice(&head);
    buf.get_mut(PAGE_HEADER..PAGE_HEADER + data.len())
        .ok_or_else(|| Error::invalid("log page buffer too small"))?
        .copy_from_slice(data);
    let crc = page_crc(buf);
    buf.get_mut(4..8)
        .ok_or_else(|| Error::invalid("log page buffer too small"))?
        .copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Checks a log page. Never panics.
pub fn check_page(buf: &[u8]) -> PageCheck<'_> {
    if buf.get(0..4) != Some(&PAGE_MAGIC[..]) {
        return PageCheck::Foreign;
    }
    let ids = header_ids(buf);
    let stored = get_u32(buf, 4);
    if stored != Some(page_crc(buf)) {
        return PageCheck::Damaged(ids);
    }
    let (Some((log_id, epoch)), Some(position), Some(durable_pos), Some(data_len)) =
        (ids, get_u64(buf, 24), get_u32(buf, 32), get_u32(buf, 36))
    else {
        return PageCheck::Damaged(ids);
    };
    let Some(data) = buf.get(PAGE_HEADER..PAGE_HEADER.saturating_add(data_len as usize)) else {
        return PageCheck::Damaged(ids);
    };
    PageCheck::Valid(
        PageHeader {
            log_id,
            epoch,
            position,
            durable_pos,
            data_len,
        },
        data,
    )
}

/// The log id and epoch a log-page header names, whatever its magic and
/// checksum say (a page whose magic was damaged still names them).
pub(crate) fn header_ids(buf: &[u8]) -> Option<(u64, u64)> {
    get_u64(buf, 8).zip(get_u64(buf, 16))
}

/// CRC-32C of a log page (or seal page) with its bytes 4..8 taken as zero.
pub(crate) fn page_crc(buf: &[u8]) -> u32 {
    let head = buf.get(..4).unwrap_or(buf);
    let tail = buf.get(8..).unwrap_or(&[]);
    let crc = crc32c::crc32c(head);
    let crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc32c::crc32c_append(crc, tail)
}

fn get_array<const N: usize>(buf: &[u8], off: usize) -> Option<[u8; N]> {
    buf.get(off..off.checked_add(N)?)?.try_into().ok()
}

pub(crate) fn get_u32(buf: &[u8], off: usize) -> Option<u32> {
    get_array(buf, off).map(u32::from_le_bytes)
}

pub(crate) fn get_u64(buf: &[u8], off: usize) -> Option<u64> {
    get_array(buf, off).map(u64::from_le_bytes)
}

pub(crate) fn get_u128(buf: &[u8], off: usize) -> Option<u128> {
    get_array(buf, off).map(u128::from_le_bytes)
}
