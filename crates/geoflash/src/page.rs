//! The on-device page format: node pages of the R-tree family and generic
//! ("raw") pages for everything else that lives in fixed-size pages (the
//! header page, tree metadata, grid-file buckets and directories).
//!
//! # Byte layout (format version 1, little-endian throughout)
//!
//! Every page starts with a 32-byte header:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | magic, [`MAGIC`] = `b"GFPG"` |
//! | 4 | 2 | format version (`u16`), [`FORMAT_VERSION`] |
//! | 6 | 1 | page kind (`u8`), see [`PageKind`]; unknown values are corrupt |
//! | 7 | 1 | flags: bit 0 ([`FLAG_PAYLOAD`]) = entries carry an 8-byte payload; other bits must be 0 |
//! | 8 | 2 | level (`u16`): 0 for leaves; must be 0 on raw pages |
//! | 10 | 1 | log2 of the page size (9 ..= 16); catches a page read with the wrong page size |
//! | 11 | 1 | reserved, must be 0 |
//! | 12 | 4 | entry count (`u32`); 0 on raw pages |
//! | 16 | 4 | body length in bytes (`u32`): count × entry size on node pages |
//! | 20 | 4 | checksum: CRC-32C of the whole page with these 4 bytes set to zero |
//! | 24 | 8 | LSN (`u64`): sequence number of the last change the page contains |
//! | 32 | … | body |
//!
//! A node page's body is `count` entries of 40 bytes — key (`u64`), `min_x`,
//! `min_y`, `max_x`, `max_y` (`f64`) — or of 48 bytes when the payload flag is
//! set: the same followed by the payload (`u64`, the Hilbert R-tree's largest
//! Hilbert value). Everything after the body is zero. Because the checksum
//! covers the whole page and the tail must be zero, a page that decodes is
//! exactly the page [`encode_node`] / [`encode_raw`] write again: the encoding
//! is canonical.
//!
//! A page of all zeros has never been written ([`is_blank`]); it is not a valid
//! page and decodes to an error.
//!
//! # Node capacity
//!
//! `M = floor((page_size − 32) / entry_size)` ([`max_entries`]) and by default
//! `m = ceil(M / 2)` ([`default_min_entries`]).
//!
//! | page size | M (40-byte entries) | m | M (48-byte entries, Hilbert) | m | seeds' M (36-byte entries) | seeds' m |
//! |---:|---:|---:|---:|---:|---:|---:|
//! | 2 KiB | 50 | 25 | 42 | 21 | 56 | 28 |
//! | 4 KiB | 101 | 51 | 84 | 42 | 113 | 57 |
//! | 8 KiB | 204 | 102 | 170 | 85 | 227 | 114 |
//! | 16 KiB | 408 | 204 | 340 | 170 | 455 | 228 |
//! | 32 KiB | 818 | 409 | 682 | 341 | 910 | 455 |
//! | 64 KiB | 1637 | 819 | 1364 | 682 | 1,820 | 910 |
//!
//! The seeds (FESTIval, Table III of the HDD-vs-SSD paper) store 36-byte
//! entries — four doubles and a 4-byte pointer — with no page header, so
//! `M = floor(page / 36)`, 113 at 4 KiB. Our entries are 40 bytes because keys
//! and page ids are 64-bit, and the page carries a 32-byte header with a
//! checksum and an LSN, so M is 101 at 4 KiB (about 11% fewer entries, and a
//! slightly taller tree for the same data). The seeds' fan-out cannot be
//! reached at the same page size; experiments that reproduce the seeds compare
//! at equal page size and report this difference (a smaller M can always be
//! chosen with `--max-entries`, a larger one cannot). The seeds' Table III uses
//! `m = ceil(M/2)` (57 for 113, 114 for 227, 28 for 56), which is also our
//! default: it is the largest m for which a split of M + 1 entries into two
//! nodes of at least m entries always exists (2·ceil(M/2) ≤ M + 1).
//!
//! # Validation
//!
//! [`decode_node`], [`decode_raw`] and [`decode_header`] check the buffer
//! length, magic, version (newer → [`Error::UnsupportedVersion`]), the
//! checksum, the kind, the flags and reserved bytes, that the body fits the
//! page, that the tail is zero, and for nodes that kind and level agree, keys
//! are strictly ascending and every rectangle is finite and not inverted. They
//! never panic, whatever the bytes.
use serde::{Deserialize, Serialize};

use crate::geom::Rect;
use crate::units::check_page_size;
use crate::{Error, Result};

internal! {
    /// An entry of a node: a key and its rectangle, plus a small fixed payload.
    ///
    /// In internal nodes `key` is a child page id; in leaves it is a record key.
    /// Keys are unique within a node. `payload` is 0 unless an index needs it
    /// (the Hilbert R-tree stores the largest Hilbert value of an internal entry).
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct Entry {
        /// Child page id (internal node) or record key (leaf).
        pub key: u64,
        /// Minimum bounding rectangle.
        pub rect: Rect,
        /// Index-specific payload, 0 when unused.
        pub payload: u64,
    }
}

internal! {
    /// A decoded node: its level (leaves are level 0) and its entries in
    /// ascending key order (the canonical order every store returns).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Node {
        /// Height of the node: 0 for leaves.
        pub level: u16,
        /// Entries, sorted by ascending key.
        pub entries: Vec<Entry>,
    }
}

impl Node {
    /// The entry of key `key`, found by binary search (the entries ascend
    /// by key): a few cache lines of the node read, not all of them.
    pub fn entry(&self, key: u64) -> Option<&Entry> {
        self.entries
            .binary_search_by_key(&key, |e| e.key)
            .ok()
            .and_then(|i| self.entries.get(i))
    }
}

/// Page format version written by this build; newer versions are refused.
pub const FORMAT_VERSION: u16 = 1;
/// The first four bytes of every page.
pub const MAGIC: [u8; 4] = *b"GFPG";
/// Size of the page header in bytes.
pub const HEADER_SIZE: usize = 32;
/// Size of an entry without payload: key + 4 coordinates.
pub const ENTRY_SIZE: usize = 40;
/// Size of the optional per-entry payload.
pub const PAYLOAD_SIZE: usize = 8;
/// Header flag: the entries of this node page carry an 8-byte payload.
pub const FLAG_PAYLOAD: u8 = 1;

const OFF_VERSION: usize = 4;
const OFF_KIND: usize = 6;
const OFF_FLAGS: usize = 7;
const OFF_LEVEL: usize = 8;
const OFF_SHIFT: usize = 10;
const OFF_RESERVED: usize = 11;
const OFF_COUNT: usize = 12;
const OFF_BODY_LEN: usize = 16;
const OFF_CHECKSUM: usize = 20;
const OFF_LSN: usize = 24;

/// What a page holds. Stored as one byte; values not listed here are corrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum PageKind {
    /// A leaf node (level 0) of a tree index.
    Leaf = 1,
    /// An internal node (level ≥ 1) of a tree index.
    Internal = 2,
    /// The header page of a pages file (page 0).
    Header = 3,
    /// Tree or index metadata (root, height, counts, free list).
    Meta = 4,
    /// A bucket of a grid file.
    Bucket = 5,
    /// A directory page of a grid file.
    Directory = 6,
    /// The continuation of a record that does not fit one page.
    Overflow = 7,
    /// A page on the free list.
    Free = 8,
}

impl PageKind {
    /// Every kind, in on-disk order.
    pub const ALL: [PageKind; 8] = [
        PageKind::Leaf,
        PageKind::Internal,
        PageKind::Header,
        PageKind::Meta,
        PageKind::Bucket,
        PageKind::Directory,
        PageKind::Overflow,
        PageKind::Free,
    ];

    /// The on-disk byte.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// The kind of an on-disk byte, `None` when unknown.
    pub fn from_u8(b: u8) -> Option<PageKind> {
        PageKind::ALL.into_iter().find(|k| k.as_u8() == b)
    }

    /// True for the kinds that hold tree nodes ([`PageKind::Leaf`], [`PageKind::Internal`]).
    pub fn is_node(self) -> bool {
        matches!(self, PageKind::Leaf | PageKind::Internal)
    }
}

/// The decoded header of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageHeader {
    /// Format version of the page.
    pub version: u16,
    /// What the page holds.
    pub kind: PageKind,
    /// True when node entries carry an 8-byte payload.
    pub has_payload: bool,
    /// Node level (0 for leaves and for raw pages).
    pub level: u16,
    /// Number of entries (0 for raw pages).
    pub count: u32,
    /// Length of the body in bytes.
    pub body_len: u32,
    /// Sequence number of the last change the page contains.
    pub lsn: u64,
    /// The stored CRC-32C.
    pub checksum: u32,
}

/// Bytes per entry: 40, or 48 with a payload.
pub fn entry_size(with_payload: bool) -> usize {
    if with_payload {
        ENTRY_SIZE + PAYLOAD_SIZE
    } else {
        ENTRY_SIZE
    }
}

/// M: the most entries a node page of `page_size` bytes holds. See the module
/// documentation for the values and the comparison with the seeds (101 at
/// 4 KiB without payload, 84 with; the seeds' 113). 0 for sizes smaller than
/// the header.
pub fn max_entries(page_size: usize, with_payload: bool) -> usize {
    page_size.saturating_sub(HEADER_SIZE) / entry_size(with_payload)
}

/// The default m for a given M: `ceil(M / 2)`, as in the seeds' Table III
/// (57 for M = 113). It is the largest m for which every overflowing node
/// (M + 1 entries) can be split into two nodes of at least m entries.
pub fn default_min_entries(max: usize) -> usize {
    max.div_ceil(2)
}

/// The largest body a raw page of `page_size` bytes holds.
pub fn max_raw_body(page_size: usize) -> usize {
    page_size.saturating_sub(HEADER_SIZE)
}

/// True for a page of all zeros: a page that was never written (or was trimmed).
///
/// Checked 64 bytes at a time (an OR of the block, which the compiler turns
/// into vector instructions, then one early exit per block): every node read
/// checks the bytes after the body (a third of the page in a node 70 % full),
/// and a byte-at-a-time loop with an exit per byte was 5 % of the first
/// query batch on an index built by insertion.
pub fn is_blank(buf: &[u8]) -> bool {
    let mut blocks = buf.chunks_exact(64);
    let all_zero = blocks.by_ref().all(|b| b.iter().fold(0u8, |acc, &x| acc | x) == 0);
    all_zero && blocks.remainder().iter().all(|&b| b == 0)
}

// ---------------------------------------------------------------------------
// Byte helpers that cannot panic.

fn get_array<const N: usize>(buf: &[u8], off: usize) -> Option<[u8; N]> {
    buf.get(off..off.checked_add(N)?)?.try_into().ok()
}

fn get_u16(buf: &[u8], off: usize) -> Option<u16> {
    get_array(buf, off).map(u16::from_le_bytes)
}

fn get_u32(buf: &[u8], off: usize) -> Option<u32> {
    get_array(buf, off).map(u32::from_le_bytes)
}

fn get_u64(buf: &[u8], off: usize) -> Option<u64> {
    get_array(buf, off).map(u64::from_le_bytes)
}

fn get_f64(buf: &[u8], off: usize) -> Option<f64> {
    get_array(buf, off).map(f64::from_le_bytes)
}

fn put(buf: &mut [u8], off: usize, bytes: &[u8]) -> Result<()> {
    let end = off
        .checked_add(bytes.len())
        .ok_or_else(|| Error::invalid("page write offset overflows"))?;
    let len = buf.len();
    let dst = buf.get_mut(off..end).ok_or_else(|| {
        Error::invalid(format!(
            "page write of bytes {off}..{end} is outside a {len}-byte page"
        ))
    })?;
    dst.copy_from_slice(bytes);
    Ok(())
}

/// CRC-32C of `buf` with the checksum field taken as zero.
fn compute_checksum(buf: &[u8]) -> u32 {
    let head = buf.get(..OFF_CHECKSUM).unwrap_or(buf);
    let tail = buf.get(OFF_CHECKSUM + 4..).unwrap_or(&[]);
    let crc = crc32c::crc32c(head);
    let crc = crc32c::crc32c_append(crc, &[0u8; 4]);
    crc32c::crc32c_append(crc, tail)
}

/// Recomputes and stores the checksum of an encoded page (for tools and tests
/// that patch a page in place). An error when `buf` is not a valid page size.
pub fn update_checksum(buf: &mut [u8]) -> Result<()> {
    check_buf_len(buf.len())?;
    let crc = compute_checksum(buf);
    put(buf, OFF_CHECKSUM, &crc.to_le_bytes())
}

fn check_buf_len(len: usize) -> Result<()> {
    check_page_size(len).map_err(|_| {
        Error::invalid(format!(
            "page buffer of {len} bytes: a page is a power of two from 512 to 65536 bytes"
        ))
    })
}

fn page_shift(len: usize) -> u8 {
    // `len` is a checked power of two ≤ 65536, so this fits a byte.
    len.trailing_zeros() as u8
}

// ---------------------------------------------------------------------------
// Encoding.

fn write_header(
    buf: &mut [u8],
    kind: PageKind,
    flags: u8,
    level: u16,
    count: u32,
    body_len: u32,
    lsn: u64,
) -> Result<()> {
    let shift = page_shift(buf.len());
    put(buf, 0, &MAGIC)?;
    put(buf, OFF_VERSION, &FORMAT_VERSION.to_le_bytes())?;
    put(buf, OFF_KIND, &[kind.as_u8()])?;
    put(buf, OFF_FLAGS, &[flags])?;
    put(buf, OFF_LEVEL, &level.to_le_bytes())?;
    put(buf, OFF_SHIFT, &[shift])?;
    put(buf, OFF_RESERVED, &[0])?;
    put(buf, OFF_COUNT, &count.to_le_bytes())?;
    put(buf, OFF_BODY_LEN, &body_len.to_le_bytes())?;
    put(buf, OFF_CHECKSUM, &[0; 4])?;
    put(buf, OFF_LSN, &lsn.to_le_bytes())
}

/// Encodes `node` into the page `buf` (whose length is the page size), with
/// `lsn` as the sequence number of its last change. With `with_payload` the
/// entries' payloads are stored; without it every payload must be 0.
///
/// Errors (all [`Error::InvalidInput`]): `buf` is not a valid page size; the
/// node has more than [`max_entries`] entries; keys are not strictly
/// ascending; a rectangle is non-finite or inverted; a payload would be lost.
pub fn encode_node(node: &Node, lsn: u64, with_payload: bool, buf: &mut [u8]) -> Result<()> {
    encode_entries(node.level, &node.entries, lsn, with_payload, buf)
}

/// [`encode_node`] of the node of `level` holding `entries`, borrowed (a
/// bulk load encodes its nodes from one reused buffer). Same checks and
/// errors.
pub fn encode_entries(
    level: u16,
    entries: &[Entry],
    lsn: u64,
    with_payload: bool,
    buf: &mut [u8],
) -> Result<()> {
    check_buf_len(buf.len())?;
    let max = max_entries(buf.len(), with_payload);
    let count = entries.len();
    if count > max {
        return Err(Error::invalid(format!(
            "node with {count} entries does not fit a {}-byte page (at most {max} entries{})",
            buf.len(),
            if with_payload { " with payload" } else { "" }
        )));
    }
    let mut prev: Option<u64> = None;
    for (i, e) in entries.iter().enumerate() {
        if let Some(p) = prev {
            if e.key <= p {
                return Err(Error::invalid(format!(
                    "node entries must have strictly ascending keys: entry {i} has key {} after key {p}",
                    e.key
                )));
            }
        }
        prev = Some(e.key);
        let r = e.rect;
        Rect::new(r.min_x(), r.min_y(), r.max_x(), r.max_y()).map_err(|err| {
            Error::invalid(format!("entry {i} (key {}) of the node: {err}", e.key))
        })?;
        if !with_payload && e.payload != 0 {
            return Err(Error::invalid(format!(
                "entry {i} (key {}) has payload {} but the page is encoded without payloads",
                e.key, e.payload
            )));
        }
    }
    let esize = entry_size(with_payload);
    let body_len = count * esize;
    let kind = if level == 0 {
        PageKind::Leaf
    } else {
        PageKind::Internal
    };
    buf.fill(0);
    write_header(
        buf,
        kind,
        if with_payload { FLAG_PAYLOAD } else { 0 },
        level,
        u32::try_from(count).map_err(|_| Error::invalid("entry count exceeds u32"))?,
        u32::try_from(body_len).map_err(|_| Error::invalid("body length exceeds u32"))?,
        lsn,
    )?;
    let mut off = HEADER_SIZE;
    for e in entries {
        put(buf, off, &e.key.to_le_bytes())?;
        put(buf, off + 8, &e.rect.min_x().to_le_bytes())?;
        put(buf, off + 16, &e.rect.min_y().to_le_bytes())?;
        put(buf, off + 24, &e.rect.max_x().to_le_bytes())?;
        put(buf, off + 32, &e.rect.max_y().to_le_bytes())?;
        if with_payload {
            put(buf, off + 40, &e.payload.to_le_bytes())?;
        }
        off += esize;
    }
    update_checksum(buf)
}

/// Encodes a non-node page of `kind` (header page, metadata, grid-file bucket
/// …) whose body is `body`, into the page `buf`. The body's format belongs to
/// the caller; this adds the common header and checksum.
///
/// Errors ([`Error::InvalidInput`]): `buf` is not a valid page size, `kind`
/// is a node kind (use [`encode_node`]), or `body` is longer than
/// [`max_raw_body`].
pub fn encode_raw(kind: PageKind, lsn: u64, body: &[u8], buf: &mut [u8]) -> Result<()> {
    check_buf_len(buf.len())?;
    if kind.is_node() {
        return Err(Error::invalid(format!(
            "encode_raw cannot write a {kind:?} page; node pages go through encode_node"
        )));
    }
    let max = max_raw_body(buf.len());
    if body.len() > max {
        return Err(Error::invalid(format!(
            "page body of {} bytes does not fit a {}-byte page (at most {max} bytes)",
            body.len(),
            buf.len()
        )));
    }
    buf.fill(0);
    let body_len =
        u32::try_from(body.len()).map_err(|_| Error::invalid("body length exceeds u32"))?;
    write_header(buf, kind, 0, 0, 0, body_len, lsn)?;
    put(buf, HEADER_SIZE, body)?;
    update_checksum(buf)
}

// ---------------------------------------------------------------------------
// Decoding.

fn corrupt(page: Option<u64>, reason: impl Into<String>) -> Error {
    Error::corrupt(page, reason)
}

fn short(page: Option<u64>) -> Error {
    corrupt(page, "page shorter than its header")
}

/// Decodes and validates the header of any page: buffer length, magic,
/// version, checksum over the whole page, kind, flags, reserved bytes, the
/// body length against the page, and that the bytes after the body are zero.
/// The body itself is not interpreted.
pub fn decode_header(buf: &[u8], page: Option<u64>) -> Result<PageHeader> {
    if check_page_size(buf.len()).is_err() {
        return Err(corrupt(
            page,
            format!(
                "page buffer of {} bytes: a page is a power of two from 512 to 65536 bytes",
                buf.len()
            ),
        ));
    }
    let magic: [u8; 4] = get_array(buf, 0).ok_or_else(|| short(page))?;
    if magic != MAGIC {
        let what = if is_blank(buf) {
            "page was never written (all zeros)".to_string()
        } else {
            format!("bad magic {magic:02x?} (expected {MAGIC:02x?})")
        };
        return Err(corrupt(page, what));
    }
    let version = get_u16(buf, OFF_VERSION).ok_or_else(|| short(page))?;
    let stored = get_u32(buf, OFF_CHECKSUM).ok_or_else(|| short(page))?;
    let actual = compute_checksum(buf);
    if !(1..=FORMAT_VERSION).contains(&version) {
        // A newer build's page still carries this checksum over its bytes;
        // a damaged version field does not (issue 44: a flipped version
        // was reported as a newer format, naming no file).
        if stored != actual {
            return Err(corrupt(
                page,
                format!(
                    "format version {version} (this build reads {FORMAT_VERSION}) and checksum mismatch \
                     (stored {stored:#010x}, computed {actual:#010x}): the page is damaged"
                ),
            ));
        }
        return Err(Error::unsupported_version(
            "page",
            version,
            1u16,
            FORMAT_VERSION,
        ));
    }
    if stored != actual {
        return Err(corrupt(
            page,
            format!("checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"),
        ));
    }
    let kind_byte = *buf.get(OFF_KIND).ok_or_else(|| short(page))?;
    let kind = PageKind::from_u8(kind_byte)
        .ok_or_else(|| corrupt(page, format!("unknown page kind {kind_byte}")))?;
    let flags = *buf.get(OFF_FLAGS).ok_or_else(|| short(page))?;
    if flags & !FLAG_PAYLOAD != 0 {
        return Err(corrupt(page, format!("unknown page flags {flags:#04x}")));
    }
    let shift = *buf.get(OFF_SHIFT).ok_or_else(|| short(page))?;
    if shift != page_shift(buf.len()) {
        let claimed = 1u64.checked_shl(u32::from(shift)).unwrap_or(0);
        return Err(corrupt(
            page,
            format!(
                "page was written with page size 2^{shift} ({claimed} bytes) but read as {} bytes",
                buf.len()
            ),
        ));
    }
    let reserved = *buf.get(OFF_RESERVED).ok_or_else(|| short(page))?;
    if reserved != 0 {
        return Err(corrupt(page, format!("reserved header byte is {reserved}")));
    }
    let level = get_u16(buf, OFF_LEVEL).ok_or_else(|| short(page))?;
    let count = get_u32(buf, OFF_COUNT).ok_or_else(|| short(page))?;
    let body_len = get_u32(buf, OFF_BODY_LEN).ok_or_else(|| short(page))?;
    let lsn = get_u64(buf, OFF_LSN).ok_or_else(|| short(page))?;
    let max_body = max_raw_body(buf.len());
    let body_end = usize::try_from(body_len)
        .ok()
        .filter(|&l| l <= max_body)
        .map(|l| HEADER_SIZE + l)
        .ok_or_else(|| {
            corrupt(
                page,
                format!("body length {body_len} exceeds the page's {max_body} bytes"),
            )
        })?;
    if !is_blank(buf.get(body_end..).unwrap_or(&[])) {
        return Err(corrupt(page, "non-zero bytes after the page body"));
    }
    let has_payload = flags & FLAG_PAYLOAD != 0;
    if !kind.is_node() && (has_payload || level != 0 || count != 0) {
        return Err(corrupt(
            page,
            format!(
                "{kind:?} page has node fields set (payload flag {has_payload}, level {level}, count {count})"
            ),
        ));
    }
    Ok(PageHeader {
        version,
        kind,
        has_payload,
        level,
        count,
        body_len,
        lsn,
        checksum: stored,
    })
}

/// Decodes and validates a node page. `page` (the page id, if known) only
/// goes into error messages. Every problem is an [`Error::Corrupt`] (or
/// [`Error::UnsupportedVersion`]); nothing panics.
pub fn decode_node(buf: &[u8], page: Option<u64>) -> Result<(PageHeader, Node)> {
    let h = decode_header(buf, page)?;
    match (h.kind, h.level) {
        (PageKind::Leaf, 0) => {}
        (PageKind::Internal, l) if l > 0 => {}
        (PageKind::Leaf | PageKind::Internal, l) => {
            return Err(corrupt(page, format!("{:?} page has level {l}", h.kind)))
        }
        (k, _) => {
            return Err(corrupt(
                page,
                format!("expected a node page, found a page of kind {k:?}"),
            ))
        }
    }
    let esize = entry_size(h.has_payload);
    let count = usize::try_from(h.count)
        .map_err(|_| corrupt(page, format!("entry count {} too large", h.count)))?;
    let max = max_entries(buf.len(), h.has_payload);
    if count > max {
        return Err(corrupt(
            page,
            format!("entry count {count} exceeds the page's capacity of {max}"),
        ));
    }
    let body_len = count * esize;
    if usize::try_from(h.body_len).ok() != Some(body_len) {
        return Err(corrupt(
            page,
            format!(
                "body length {} does not match {count} entries of {esize} bytes",
                h.body_len
            ),
        ));
    }
    let body = buf
        .get(HEADER_SIZE..HEADER_SIZE + body_len)
        .ok_or_else(|| corrupt(page, "entries extend past the page"))?;
    let mut entries = Vec::with_capacity(count);
    let mut prev: Option<u64> = None;
    for (i, chunk) in body.chunks_exact(esize).enumerate() {
        let bad = || corrupt(page, format!("entry {i} is truncated"));
        let key = get_u64(chunk, 0).ok_or_else(bad)?;
        let min_x = get_f64(chunk, 8).ok_or_else(bad)?;
        let min_y = get_f64(chunk, 16).ok_or_else(bad)?;
        let max_x = get_f64(chunk, 24).ok_or_else(bad)?;
        let max_y = get_f64(chunk, 32).ok_or_else(bad)?;
        let payload = if h.has_payload {
            get_u64(chunk, 40).ok_or_else(bad)?
        } else {
            0
        };
        if let Some(p) = prev {
            if key <= p {
                return Err(corrupt(
                    page,
                    format!(
                        "entry {i} has key {key} after key {p}: keys must be strictly ascending"
                    ),
                ));
            }
        }
        prev = Some(key);
        let rect = Rect::new(min_x, min_y, max_x, max_y)
            .map_err(|e| corrupt(page, format!("entry {i} (key {key}): {e}")))?;
        entries.push(Entry { key, rect, payload });
    }
    Ok((
        h,
        Node {
            level: h.level,
            entries,
        },
    ))
}

/// Decodes and validates a non-node page written by [`encode_raw`] and
/// returns its header and body. A node page is an error here.
pub fn decode_raw(buf: &[u8], page: Option<u64>) -> Result<(PageHeader, &[u8])> {
    let h = decode_header(buf, page)?;
    if h.kind.is_node() {
        return Err(corrupt(
            page,
            format!(
                "expected a non-node page, found a page of kind {:?}",
                h.kind
            ),
        ));
    }
    let len = usize::try_from(h.body_len)
        .map_err(|_| corrupt(page, "body length does not fit memory"))?;
    let body = buf
        .get(HEADER_SIZE..HEADER_SIZE.saturating_add(len))
        .ok_or_else(|| corrupt(page, "body extends past the page"))?;
    Ok((h, body))
}

/// Whether `entries` (in key order) hold `key`. A key above every key of
/// the node, as an insertion's usually is (the record map and most inputs
/// number new objects upwards), is answered from the last entry alone: a
/// binary search over a leaf not yet in the CPU's cache waits on one cache
/// miss per probe, about a tenth of an insertion's time before this path.
pub(crate) fn holds_key(entries: &[Entry], key: u64) -> bool {
    match entries.last() {
        None => false,
        Some(last) if last.key <= key => last.key == key,
        Some(_) => entries.binary_search_by_key(&key, |e| e.key).is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn rect(a: f64, b: f64, w: f64, h: f64) -> Rect {
        Rect::new(a, b, a + w, b + h).unwrap()
    }

    fn sample_node(n: usize, level: u16, with_payload: bool) -> Node {
        Node {
            level,
            entries: (0..n as u64)
                .map(|i| Entry {
                    key: i * 7 + 3,
                    rect: rect(i as f64, -(i as f64) * 0.5, 1.5, 2.25),
                    payload: if with_payload { i * 1000 + 1 } else { 0 },
                })
                .collect(),
        }
    }

    #[test]
    fn capacity_values_documented() {
        assert_eq!(HEADER_SIZE + ENTRY_SIZE * 101, 4072);
        assert_eq!(max_entries(4096, false), 101);
        assert_eq!(max_entries(4096, true), 84);
        assert_eq!(default_min_entries(101), 51);
        assert_eq!(default_min_entries(84), 42);
        // The seeds' Table III: M = floor(page / 36), m = ceil(M / 2).
        for (page, m, big_m) in [
            (2048usize, 28usize, 56usize),
            (4096, 57, 113),
            (8192, 114, 227),
            (16384, 228, 455),
            (32768, 455, 910),
            (65536, 910, 1820),
        ] {
            assert_eq!(page / 36, big_m);
            assert_eq!(default_min_entries(big_m), m);
        }
        // The table in the module documentation.
        let rows = [
            (2048, 50, 42),
            (4096, 101, 84),
            (8192, 204, 170),
            (16384, 408, 340),
            (32768, 818, 682),
            (65536, 1637, 1364),
        ];
        for (page, plain, with) in rows {
            assert_eq!(max_entries(page, false), plain, "page {page}");
            assert_eq!(max_entries(page, true), with, "page {page}");
        }
        assert_eq!(max_entries(16, false), 0);
    }

    #[test]
    fn full_page_holds_exactly_m() {
        for page in [512usize, 4096, 65536] {
            for wp in [false, true] {
                let m = max_entries(page, wp);
                let mut buf = vec![0u8; page];
                let node = sample_node(m, 0, wp);
                encode_node(&node, 9, wp, &mut buf).unwrap();
                let (h, back) = decode_node(&buf, Some(1)).unwrap();
                assert_eq!(back, node);
                assert_eq!(h.count as usize, m);
                let over = sample_node(m + 1, 0, wp);
                assert!(encode_node(&over, 9, wp, &mut buf).is_err());
            }
        }
    }

    #[test]
    fn header_fields_round_trip() {
        let mut buf = vec![0u8; 4096];
        let node = sample_node(5, 3, true);
        encode_node(&node, 0xDEAD_BEEF_0123, true, &mut buf).unwrap();
        let (h, back) = decode_node(&buf, None).unwrap();
        assert_eq!(back, node);
        assert_eq!(h.kind, PageKind::Internal);
        assert_eq!(h.level, 3);
        assert_eq!(h.lsn, 0xDEAD_BEEF_0123);
        assert!(h.has_payload);
        assert_eq!(h.version, FORMAT_VERSION);
        assert_eq!(h.body_len as usize, 5 * 48);
        assert_eq!(&buf[..4], b"GFPG");
        assert_eq!(decode_header(&buf, None).unwrap(), h);
    }

    #[test]
    fn encode_rejects_bad_input() {
        let mut buf = vec![0u8; 4096];
        let mut node = sample_node(3, 0, false);
        node.entries.swap(0, 1);
        assert!(encode_node(&node, 0, false, &mut buf).is_err());
        let mut node = sample_node(3, 0, false);
        node.entries[2].key = node.entries[1].key;
        assert!(encode_node(&node, 0, false, &mut buf).is_err());
        let mut node = sample_node(3, 0, false);
        let r = node.entries[1].rect;
        node.entries[1].rect = Rect::invalid_for_tests(r.min_x(), r.min_y(), f64::NAN, r.max_y());
        assert!(encode_node(&node, 0, false, &mut buf).is_err());
        let mut node = sample_node(3, 0, false);
        let r = node.entries[1].rect;
        node.entries[1].rect = Rect::invalid_for_tests(r.min_x(), 1e9, r.max_x(), r.max_y());
        assert!(encode_node(&node, 0, false, &mut buf).is_err());
        let node = sample_node(3, 0, true);
        assert!(encode_node(&node, 0, false, &mut buf).is_err());
        let node = sample_node(3, 0, false);
        for len in [0usize, 100, 511, 4095, 4097, 131072] {
            let mut b = vec![0u8; len];
            assert!(encode_node(&node, 0, false, &mut b).is_err(), "len {len}");
            assert!(encode_raw(PageKind::Meta, 0, b"x", &mut b).is_err());
        }
        assert!(encode_raw(PageKind::Leaf, 0, b"x", &mut buf).is_err());
        assert!(encode_raw(PageKind::Meta, 0, &[1u8; 4065], &mut buf).is_err());
        encode_raw(PageKind::Meta, 0, &[1u8; 4064], &mut buf).unwrap();
    }

    #[test]
    fn raw_round_trip_and_kind_separation() {
        let mut buf = vec![0u8; 1024];
        encode_raw(PageKind::Header, 77, b"tree metadata", &mut buf).unwrap();
        let (h, body) = decode_raw(&buf, Some(0)).unwrap();
        assert_eq!(body, b"tree metadata");
        assert_eq!((h.kind, h.lsn), (PageKind::Header, 77));
        assert!(decode_node(&buf, Some(0)).is_err());
        encode_node(&sample_node(2, 0, false), 1, false, &mut buf).unwrap();
        assert!(decode_raw(&buf, Some(0)).is_err());
        encode_raw(PageKind::Bucket, 0, &[], &mut buf).unwrap();
        assert_eq!(decode_raw(&buf, None).unwrap().1, &[] as &[u8]);
    }

    #[test]
    fn is_blank_finds_one_non_zero_byte_anywhere() {
        for len in [0usize, 1, 63, 64, 65, 127, 128, 200, 4096] {
            let mut buf = vec![0u8; len];
            assert!(is_blank(&buf), "{len} zero bytes");
            for at in 0..len {
                buf[at] = 1 << (at % 8);
                assert!(!is_blank(&buf), "byte {at} of {len}");
                buf[at] = 0;
            }
        }
    }

    #[test]
    fn blank_and_wrong_size_pages() {
        let zero = vec![0u8; 4096];
        assert!(is_blank(&zero));
        let err = decode_node(&zero, Some(5)).unwrap_err().to_string();
        assert!(err.contains("never written"), "{err}");
        let mut buf = vec![0u8; 4096];
        encode_node(&sample_node(4, 0, false), 1, false, &mut buf).unwrap();
        assert!(!is_blank(&buf));
        // Truncated buffers, whatever the length, are errors.
        for len in [0usize, 1, 4, 31, 32, 100, 512, 2048, 4095] {
            assert!(decode_node(&buf[..len], None).is_err(), "len {len}");
            assert!(decode_raw(&buf[..len], None).is_err(), "len {len}");
        }
        // A page read with the wrong page size: the size byte says so.
        let mut small = vec![0u8; 512];
        encode_node(&sample_node(4, 0, false), 1, false, &mut small).unwrap();
        let mut big = small.clone();
        big.resize(1024, 0);
        let err = decode_node(&big, None).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
    }

    /// Builds a page byte by byte from the layout table of the module
    /// documentation: the documentation and the code agree.
    #[test]
    fn documented_layout_decodes() {
        let mut b = vec![0u8; 512];
        b[0..4].copy_from_slice(b"GFPG");
        b[4..6].copy_from_slice(&1u16.to_le_bytes());
        b[6] = 2; // internal
        b[7] = 1; // payload flag
        b[8..10].copy_from_slice(&3u16.to_le_bytes());
        b[10] = 9; // 2^9 = 512
        b[12..16].copy_from_slice(&1u32.to_le_bytes());
        b[16..20].copy_from_slice(&48u32.to_le_bytes());
        b[24..32].copy_from_slice(&99u64.to_le_bytes());
        b[32..40].copy_from_slice(&5u64.to_le_bytes());
        for (i, v) in [1.0f64, 2.0, 3.0, 4.0].iter().enumerate() {
            b[40 + 8 * i..48 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        b[72..80].copy_from_slice(&1234u64.to_le_bytes());
        let crc = {
            let mut z = b.clone();
            z[20..24].fill(0);
            crc32c::crc32c(&z)
        };
        b[20..24].copy_from_slice(&crc.to_le_bytes());
        let (h, node) = decode_node(&b, None).unwrap();
        assert_eq!(
            (h.kind, h.level, h.lsn, h.checksum),
            (PageKind::Internal, 3, 99, crc)
        );
        assert_eq!(
            node.entries,
            vec![Entry {
                key: 5,
                rect: Rect::new(1.0, 2.0, 3.0, 4.0).unwrap(),
                payload: 1234
            }]
        );
    }

    #[test]
    fn newer_version_refused() {
        let mut buf = vec![0u8; 512];
        encode_node(&sample_node(1, 0, false), 1, false, &mut buf).unwrap();
        buf[4..6].copy_from_slice(&2u16.to_le_bytes());
        update_checksum(&mut buf).unwrap();
        assert!(matches!(
            decode_node(&buf, None),
            Err(Error::UnsupportedVersion { found: 2, .. })
        ));
        buf[4..6].copy_from_slice(&0u16.to_le_bytes());
        update_checksum(&mut buf).unwrap();
        assert!(matches!(
            decode_node(&buf, None),
            Err(Error::UnsupportedVersion { found: 0, .. })
        ));
    }

    /// Patches header bytes and re-seals the checksum: structural validation
    /// must catch what the checksum no longer does.
    #[test]
    fn structural_checks_behind_valid_checksum() {
        let base = {
            let mut b = vec![0u8; 512];
            encode_node(&sample_node(3, 0, false), 1, false, &mut b).unwrap();
            b
        };
        let patch = |off: usize, bytes: &[u8]| {
            let mut b = base.clone();
            b[off..off + bytes.len()].copy_from_slice(bytes);
            update_checksum(&mut b).unwrap();
            decode_node(&b, Some(3))
        };
        assert!(patch(OFF_KIND, &[0]).is_err());
        assert!(patch(OFF_KIND, &[99]).is_err());
        assert!(patch(OFF_KIND, &[PageKind::Internal.as_u8()]).is_err()); // level 0
        assert!(patch(OFF_LEVEL, &[1, 0]).is_err()); // leaf with level 1
        assert!(patch(OFF_FLAGS, &[2]).is_err());
        assert!(patch(OFF_FLAGS, &[1]).is_err()); // body length no longer matches
        assert!(patch(OFF_SHIFT, &[12]).is_err());
        assert!(patch(OFF_RESERVED, &[1]).is_err());
        assert!(patch(OFF_COUNT, &4u32.to_le_bytes()).is_err());
        assert!(patch(OFF_COUNT, &u32::MAX.to_le_bytes()).is_err());
        assert!(patch(OFF_BODY_LEN, &u32::MAX.to_le_bytes()).is_err());
        assert!(patch(OFF_VERSION, &0u16.to_le_bytes()).is_err());
        assert!(patch(500, &[1]).is_err()); // tail not zero
        let e0 = HEADER_SIZE;
        assert!(patch(e0, &100u64.to_le_bytes()).is_err()); // keys out of order
        assert!(patch(e0 + 8, &f64::NAN.to_le_bytes()).is_err());
        assert!(patch(e0 + 8, &f64::INFINITY.to_le_bytes()).is_err());
        assert!(patch(e0 + 8, &1e300f64.to_le_bytes()).is_err()); // inverted
                                                                  // A patch that keeps the page valid still decodes.
        assert!(patch(OFF_LSN, &5u64.to_le_bytes()).is_ok());
    }

    #[test]
    fn every_single_byte_change_detected_exhaustively() {
        let mut buf = vec![0u8; 4096];
        encode_node(&sample_node(60, 2, true), 42, true, &mut buf).unwrap();
        for pos in 0..buf.len() {
            for delta in [1u8, 0x80, 0xFF] {
                let mut b = buf.clone();
                b[pos] ^= delta;
                assert!(decode_node(&b, None).is_err(), "pos {pos} xor {delta:#x}");
            }
        }
    }

    /// Decodes 20,000 seeded pseudo-random buffers: random bytes, random bytes
    /// behind a valid header prefix, and valid pages with random mutations
    /// (re-sealed or not). Nothing may panic; whatever decodes must re-encode
    /// to the same bytes.
    #[test]
    fn random_buffers_never_panic() {
        let mut rng = ChaCha8Rng::seed_from_u64(0x6765_6f66);
        let mut decoded = 0;
        for i in 0..20_000u32 {
            let size = [512usize, 1024, 4096][rng.gen_range(0..3)];
            let mut b = vec![0u8; size];
            match i % 4 {
                0 => rng.fill(&mut b[..]),
                1 => {
                    rng.fill(&mut b[..]);
                    b[..4].copy_from_slice(&MAGIC);
                    b[4..6].copy_from_slice(&1u16.to_le_bytes());
                    b[6] = rng.gen_range(0..10);
                    b[7] = rng.gen_range(0..3);
                    b[10] = size.trailing_zeros() as u8;
                    b[11] = 0;
                    let n: u32 = rng.gen_range(0..20);
                    b[12..16].copy_from_slice(&n.to_le_bytes());
                    let bl = n * [40, 48][rng.gen_range(0..2)];
                    b[16..20].copy_from_slice(&bl.to_le_bytes());
                    let end = (HEADER_SIZE + bl as usize).min(size);
                    b[end..].fill(0);
                    update_checksum(&mut b).unwrap();
                }
                _ => {
                    let n = rng.gen_range(0..=max_entries(size, true));
                    let wp = rng.gen_bool(0.5);
                    let node = sample_node(n, rng.gen_range(0..3), wp);
                    encode_node(&node, rng.gen(), wp, &mut b).unwrap();
                    for _ in 0..rng.gen_range(1..4) {
                        let pos = rng.gen_range(0..size);
                        b[pos] = rng.gen();
                    }
                    if i % 4 == 3 {
                        update_checksum(&mut b).unwrap();
                    }
                }
            }
            if let Ok((h, node)) = decode_node(&b, None) {
                decoded += 1;
                let mut again = vec![0u8; size];
                encode_node(&node, h.lsn, h.has_payload, &mut again).unwrap();
                assert_eq!(again, b);
            }
            if let Ok((h, body)) = decode_raw(&b, None) {
                let mut again = vec![0u8; size];
                encode_raw(h.kind, h.lsn, body, &mut again).unwrap();
                assert_eq!(again, b);
            }
        }
        // The generator must reach the success path too (re-sealed mutations
        // of coordinates and payloads keep pages valid).
        assert!(decoded > 0);
    }

    fn arb_node(max: usize, wp: bool) -> impl Strategy<Value = Node> {
        let coord = -1e6f64..1e6;
        let entry = (coord.clone(), coord, 0.0f64..1e3, 0.0f64..1e3, any::<u64>());
        (
            0u16..5,
            proptest::collection::btree_map(any::<u64>(), entry, 0..=max),
        )
            .prop_map(move |(level, m)| Node {
                level,
                entries: m
                    .into_iter()
                    .map(|(key, (x, y, w, h, p))| Entry {
                        key,
                        rect: Rect::new(x, y, x + w, y + h).unwrap(),
                        payload: if wp { p } else { 0 },
                    })
                    .collect(),
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        #[test]
        fn holds_key_agrees_with_a_scan(
            keys in prop::collection::btree_set(0u64..64, 0..20),
            key in 0u64..70,
        ) {
            let rect = Rect::new(0.0, 0.0, 1.0, 1.0).unwrap();
            let entries: Vec<Entry> = keys.iter().map(|&k| Entry { rect, key: k, payload: 0 }).collect();
            prop_assert_eq!(holds_key(&entries, key), entries.iter().any(|e| e.key == key));
        }

        #[test]
        fn prop_round_trip(wp in any::<bool>(), node in arb_node(84, true), lsn in any::<u64>()) {
            let node = Node {
                level: node.level,
                entries: node.entries.into_iter().map(|e| Entry { payload: if wp { e.payload } else { 0 }, ..e }).collect(),
            };
            let mut buf = vec![0xA5u8; 4096];
            encode_node(&node, lsn, wp, &mut buf).unwrap();
            let (h, back) = decode_node(&buf, Some(9)).unwrap();
            prop_assert_eq!(&back, &node);
            prop_assert_eq!(h.lsn, lsn);
            prop_assert_eq!(h.has_payload, wp);
            prop_assert_eq!(h.count as usize, node.entries.len());
        }

        #[test]
        fn prop_single_byte_corruption_detected(
            node in arb_node(20, false),
            pos in 0usize..1024,
            delta in 1u8..=255,
        ) {
            let mut buf = vec![0u8; 1024];
            encode_node(&node, 3, false, &mut buf).unwrap();
            buf[pos] ^= delta;
            prop_assert!(decode_node(&buf, None).is_err());
        }

        #[test]
        fn prop_raw_round_trip_and_corruption(
            body in proptest::collection::vec(any::<u8>(), 0..480),
            kind in 2usize..8,
            lsn in any::<u64>(),
            pos in 0usize..512,
            delta in 1u8..=255,
        ) {
            let kind = PageKind::ALL[kind];
            let mut buf = vec![0u8; 512];
            encode_raw(kind, lsn, &body, &mut buf).unwrap();
            let (h, got) = decode_raw(&buf, None).unwrap();
            prop_assert_eq!(got, &body[..]);
            prop_assert_eq!((h.kind, h.lsn), (kind, lsn));
            buf[pos] ^= delta;
            prop_assert!(decode_raw(&buf, None).is_err());
        }
    }
}
