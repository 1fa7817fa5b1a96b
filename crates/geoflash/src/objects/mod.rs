//! The object heap (`objects.dat`): exact geometries (WKB) and per-object
//! payloads by object id, used by the refinement step of queries
//! ([`crate::index::refine`]) and written by dataset import.
//!
//! # File format
//!
//! An append-only file: a 16-byte header (magic `GFOBJHP\0`, format version
//! as `u16` little-endian, six zero bytes) and then records, each
//!
//! | bytes | field |
//! |---|---|
//! | 4 | record magic `OBJR` |
//! | 1 | kind: 1 = object, 2 = tombstone (delete) |
//! | 3 | zero |
//! | 8 | object id (`u64` LE) |
//! | 4 | payload length `p` (`u32` LE; 0 in a tombstone) |
//! | 4 | WKB length `w` (`u32` LE; 0 in a tombstone) |
//! | 4 | CRC-32C of the payload and the WKB |
//! | 4 | CRC-32C of the 28 header bytes above |
//! | p | payload |
//! | w | geometry as ISO WKB, two dimensions, little-endian |
//!
//! A newer record of an id replaces the older one; a tombstone deletes it.
//!
//! # Index of ids
//!
//! The id → offset map is **rebuilt by scanning the file at open** (no
//! separate index file to keep consistent): every record's framing and
//! checksums are verified on the way, so an open file is known to be intact.
//! A record with a bad magic, kind or header checksum, or a complete record
//! with a bad body checksum, is an [`Error::Corrupt`] naming the file and
//! the record's offset. The header checksum makes the lengths trustworthy,
//! so the only damage tolerated is an *incomplete* last record (the file
//! ends inside it): a torn append from a crash. A writable open truncates it, a
//! read-only open ignores it; both log a warning. Records are checked again
//! (checksum and WKB) when [`Heap::get`] reads them.
//!
//! Writes go to the end of the file; [`Heap::sync`] makes them durable (the
//! index's checkpoint calls it). A failed write makes the heap refuse
//! further writes (sticky error) so it never appends after a partial record.
//! [`Heap::compact`] rewrites the live records into a new file and renames
//! it over the old one (write, sync, rename, sync the directory).
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::geom::Rect;
use crate::{Error, Result};

pub mod geometry;

/// An exact geometry (`geo` crate, `f64` coordinates).
pub type Geometry = geo::Geometry<f64>;

/// File name of the heap inside an index directory.
pub const OBJECTS_FILE: &str = "objects.dat";

/// Newest heap format version this code reads and writes.
pub const HEAP_FORMAT_VERSION: u16 = 1;

const FILE_MAGIC: &[u8; 8] = b"GFOBJHP\0";
const FILE_HEADER: u64 = 16;
const RECORD_MAGIC: &[u8; 4] = b"OBJR";
const RECORD_HEADER: usize = 32;
const KIND_OBJECT: u8 = 1;
const KIND_TOMBSTONE: u8 = 2;
/// Largest payload or WKB of one record (1 GiB).
pub const MAX_PART: u32 = 1 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    offset: u64,
    payload_len: u32,
    wkb_len: u32,
}

impl Slot {
    fn bytes(&self) -> u64 {
        RECORD_HEADER as u64 + u64::from(self.payload_len) + u64::from(self.wkb_len)
    }
}

/// A decoded record header.
#[derive(Debug, Clone, Copy)]
struct Header {
    kind: u8,
    id: u64,
    payload_len: u32,
    wkb_len: u32,
    body_crc: u32,
}

fn encode_header(kind: u8, id: u64, payload_len: u32, wkb_len: u32) -> [u8; RECORD_HEADER] {
    let mut h = [0u8; RECORD_HEADER];
    h[0..4].copy_from_slice(RECORD_MAGIC);
    h[4] = kind;
    h[8..16].copy_from_slice(&id.to_le_bytes());
    h[16..20].copy_from_slice(&payload_len.to_le_bytes());
    h[20..24].copy_from_slice(&wkb_len.to_le_bytes());
    h
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

/// Validates a record header (everything but the checksum of the body).
fn decode_header(h: &[u8; RECORD_HEADER]) -> std::result::Result<Header, String> {
    if &h[0..4] != RECORD_MAGIC {
        return Err(format!("bad record magic {:02x?}", &h[0..4]));
    }
    let kind = h[4];
    if kind != KIND_OBJECT && kind != KIND_TOMBSTONE {
        return Err(format!("unknown record kind {kind}"));
    }
    if crc32c::crc32c(&h[..28]) != le_u32(h, 28) {
        return Err("header checksum mismatch".into());
    }
    if h[5..8] != [0, 0, 0] {
        return Err("reserved header bytes are not zero".into());
    }
    let hd = Header {
        kind,
        id: le_u64(h, 8),
        payload_len: le_u32(h, 16),
        wkb_len: le_u32(h, 20),
        body_crc: le_u32(h, 24),
    };
    if hd.payload_len > MAX_PART || hd.wkb_len > MAX_PART {
        return Err(format!(
            "record lengths {} + {} exceed the limit of {MAX_PART} bytes",
            hd.payload_len, hd.wkb_len
        ));
    }
    if kind == KIND_TOMBSTONE && (hd.payload_len != 0 || hd.wkb_len != 0) {
        return Err("tombstone with a body".into());
    }
    if kind == KIND_OBJECT && hd.wkb_len == 0 {
        return Err("object record without geometry".into());
    }
    Ok(hd)
}

/// What [`Heap::compact`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// File size before.
    pub bytes_before: u64,
    /// File size after.
    pub bytes_after: u64,
    /// Live objects kept.
    pub objects: u64,
}

/// The geometry heap: an append-only file of `(id, payload, WKB)` records
/// with an in-memory id → offset map. See the module documentation.
///
/// Reads take `&self` (positional reads), so many threads may read at once.
#[derive(Debug)]
pub struct Heap {
    path: PathBuf,
    file: File,
    read_only: bool,
    end: u64,
    index: BTreeMap<u64, Slot>,
    live_bytes: u64,
    torn_tail: u64,
    failed: Option<String>,
}

impl Heap {
    fn io(&self, source: std::io::Error) -> Error {
        io_err(&self.path, source)
    }

    fn corrupt_at(path: &Path, offset: u64, reason: impl std::fmt::Display) -> Error {
        Error::corrupt(
            None,
            format!(
                "object heap {}: record at offset {offset}: {reason}",
                path.display()
            ),
        )
    }

    /// Creates a new, empty heap file at `path` (an error if it exists).
    pub fn create(path: &Path) -> Result<Heap> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        let mut head = [0u8; FILE_HEADER as usize];
        head[0..8].copy_from_slice(FILE_MAGIC);
        head[8..10].copy_from_slice(&HEAP_FORMAT_VERSION.to_le_bytes());
        file.write_all_at(&head, 0).map_err(|e| io_err(path, e))?;
        file.sync_all().map_err(|e| io_err(path, e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::manifest::sync_dir(dir)?;
        }
        Ok(Heap {
            path: path.to_path_buf(),
            file,
            read_only: false,
            end: FILE_HEADER,
            index: BTreeMap::new(),
            live_bytes: 0,
            torn_tail: 0,
            failed: None,
        })
    }

    /// Opens the heap at `path`, scanning and verifying every record.
    pub fn open(path: &Path, read_only: bool) -> Result<Heap> {
        let file = OpenOptions::new()
            .read(true)
            .write(!read_only)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        let mut heap = Heap {
            path: path.to_path_buf(),
            file,
            read_only,
            end: FILE_HEADER,
            index: BTreeMap::new(),
            live_bytes: 0,
            torn_tail: 0,
            failed: None,
        };
        heap.scan()?;
        Ok(heap)
    }

    /// Opens the heap at `path` for writing, creating it when missing.
    pub fn open_or_create(path: &Path) -> Result<Heap> {
        if path.exists() {
            Heap::open(path, false)
        } else {
            Heap::create(path)
        }
    }

    fn scan(&mut self) -> Result<()> {
        let file_len = self.file.metadata().map_err(|e| self.io(e))?.len();
        let mut head = [0u8; FILE_HEADER as usize];
        if file_len < FILE_HEADER {
            return Err(Error::corrupt(
                None,
                format!(
                    "object heap {}: file of {file_len} bytes is shorter than its {FILE_HEADER}-byte header",
                    self.path.display()
                ),
            ));
        }
        self.file
            .read_exact_at(&mut head, 0)
            .map_err(|e| self.io(e))?;
        if &head[0..8] != FILE_MAGIC {
            return Err(Error::corrupt(
                None,
                format!(
                    "{} is not an object heap (bad magic at offset 0)",
                    self.path.display()
                ),
            ));
        }
        let version = u16::from_le_bytes([head[8], head[9]]);
        Error::check_version("object heap", version, 1, HEAP_FORMAT_VERSION)
            .map_err(|e| e.in_file(&self.path))?;
        let mut rdr = BufReader::with_capacity(1 << 16, &self.file);
        let mut skip = [0u8; FILE_HEADER as usize];
        rdr.read_exact(&mut skip)
            .map_err(|e| io_err(&self.path, e))?;
        let mut off = FILE_HEADER;
        let mut body = Vec::new();
        while off < file_len {
            if file_len - off < RECORD_HEADER as u64 {
                break;
            }
            let mut h = [0u8; RECORD_HEADER];
            rdr.read_exact(&mut h).map_err(|e| io_err(&self.path, e))?;
            let hd = decode_header(&h).map_err(|r| Self::corrupt_at(&self.path, off, r))?;
            let len = u64::from(hd.payload_len) + u64::from(hd.wkb_len);
            if file_len - off - (RECORD_HEADER as u64) < len {
                break;
            }
            body.clear();
            body.resize(len as usize, 0);
            rdr.read_exact(&mut body)
                .map_err(|e| io_err(&self.path, e))?;
            if crc32c::crc32c(&body) != hd.body_crc {
                return Err(Self::corrupt_at(&self.path, off, "checksum mismatch"));
            }
            let slot = Slot {
                offset: off,
                payload_len: hd.payload_len,
                wkb_len: hd.wkb_len,
            };
            let old = if hd.kind == KIND_OBJECT {
                self.live_bytes += slot.bytes();
                self.index.insert(hd.id, slot)
            } else {
                self.index.remove(&hd.id)
            };
            if let Some(o) = old {
                self.live_bytes -= o.bytes();
            }
            off += slot.bytes();
        }
        self.end = off;
        if off < file_len {
            self.torn_tail = file_len - off;
            tracing::warn!(
                path = %self.path.display(),
                offset = off,
                bytes = self.torn_tail,
                "object heap ends in an incomplete record (torn append); {}",
                if self.read_only { "ignored" } else { "truncated" }
            );
            if !self.read_only {
                self.file.set_len(off).map_err(|e| self.io(e))?;
                self.file.sync_all().map_err(|e| self.io(e))?;
            }
        }
        Ok(())
    }

    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::invalid(format!(
                "object heap {} is open read-only",
                self.path.display()
            )));
        }
        if let Some(f) = &self.failed {
            return Err(Error::StoreFailed(format!(
                "object heap {}: an earlier write failed ({f}); reopen it",
                self.path.display()
            )));
        }
        Ok(())
    }

    fn append(&mut self, header: [u8; RECORD_HEADER], body: &[&[u8]]) -> Result<u64> {
        let mut buf =
            Vec::with_capacity(RECORD_HEADER + body.iter().map(|b| b.len()).sum::<usize>());
        buf.extend_from_slice(&header);
        for b in body {
            buf.extend_from_slice(b);
        }
        let body_crc = buf.get(RECORD_HEADER..).map_or(0, crc32c::crc32c);
        if let Some(c) = buf.get_mut(24..28) {
            c.copy_from_slice(&body_crc.to_le_bytes());
        }
        let head_crc = buf.get(..28).map_or(0, crc32c::crc32c);
        if let Some(c) = buf.get_mut(28..32) {
            c.copy_from_slice(&head_crc.to_le_bytes());
        }
        let at = self.end;
        if let Err(e) = self.file.write_all_at(&buf, at) {
            self.failed = Some(e.to_string());
            let _ = self.file.set_len(at);
            return Err(self.io(e));
        }
        self.end += buf.len() as u64;
        Ok(at)
    }

    /// Stores object `id` with its geometry and payload, replacing an older
    /// version of `id`. Returns the geometry's bounding rectangle. Geometries
    /// must be non-empty with finite coordinates of magnitude at most
    /// [`crate::geom::MAX_COORD`].
    pub fn put(&mut self, id: u64, payload: &[u8], geometry: &Geometry) -> Result<Rect> {
        self.writable()?;
        let rect = geometry::bounding_rect(geometry)?;
        let wkb = geometry::to_wkb(geometry)?;
        let too_big = |n: usize| u32::try_from(n).ok().filter(|&n| n <= MAX_PART).is_none();
        if too_big(payload.len()) || too_big(wkb.len()) {
            return Err(Error::invalid(format!(
                "object {id}: payload ({} bytes) or WKB ({} bytes) exceeds {MAX_PART} bytes",
                payload.len(),
                wkb.len()
            )));
        }
        let (p, w) = (payload.len() as u32, wkb.len() as u32);
        let offset = self.append(encode_header(KIND_OBJECT, id, p, w), &[payload, &wkb])?;
        let slot = Slot {
            offset,
            payload_len: p,
            wkb_len: w,
        };
        self.live_bytes += slot.bytes();
        if let Some(old) = self.index.insert(id, slot) {
            self.live_bytes -= old.bytes();
        }
        Ok(rect)
    }

    /// Deletes object `id` (appends a tombstone); an error if it is absent.
    pub fn delete(&mut self, id: u64) -> Result<()> {
        self.writable()?;
        if !self.index.contains_key(&id) {
            return Err(Error::invalid(format!(
                "object {id} is not in the object heap"
            )));
        }
        self.append(encode_header(KIND_TOMBSTONE, id, 0, 0), &[])?;
        if let Some(old) = self.index.remove(&id) {
            self.live_bytes -= old.bytes();
        }
        Ok(())
    }

    /// Reads and verifies the record of `slot`; returns `(payload, wkb)`.
    fn read_record(&self, id: u64, slot: Slot) -> Result<(Vec<u8>, Vec<u8>)> {
        let mut buf = vec![0u8; slot.bytes() as usize];
        self.file
            .read_exact_at(&mut buf, slot.offset)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    Self::corrupt_at(&self.path, slot.offset, "file ends inside the record")
                }
                _ => self.io(e),
            })?;
        let (h, body) = buf.split_at(RECORD_HEADER);
        let mut hh = [0u8; RECORD_HEADER];
        hh.copy_from_slice(h);
        let hd = decode_header(&hh).map_err(|r| Self::corrupt_at(&self.path, slot.offset, r))?;
        if hd.kind != KIND_OBJECT
            || hd.id != id
            || hd.payload_len != slot.payload_len
            || hd.wkb_len != slot.wkb_len
        {
            return Err(Self::corrupt_at(
                &self.path,
                slot.offset,
                format!("record changed on disk (expected object {id})"),
            ));
        }
        if crc32c::crc32c(body) != hd.body_crc {
            return Err(Self::corrupt_at(
                &self.path,
                slot.offset,
                "checksum mismatch",
            ));
        }
        let (p, w) = body.split_at(slot.payload_len as usize);
        Ok((p.to_vec(), w.to_vec()))
    }

    /// The geometry of object `id`, `None` if it is absent.
    pub fn get(&self, id: u64) -> Result<Option<Geometry>> {
        let Some(&slot) = self.index.get(&id) else {
            return Ok(None);
        };
        let (_, wkb) = self.read_record(id, slot)?;
        geometry::from_wkb(&wkb, "")
            .map(Some)
            .map_err(|e| Self::corrupt_at(&self.path, slot.offset, e))
    }

    /// The WKB bytes of object `id`, `None` if it is absent.
    pub fn get_wkb(&self, id: u64) -> Result<Option<Vec<u8>>> {
        let Some(&slot) = self.index.get(&id) else {
            return Ok(None);
        };
        Ok(Some(self.read_record(id, slot)?.1))
    }

    /// The payload of object `id`, `None` if it is absent.
    pub fn get_payload(&self, id: u64) -> Result<Option<Vec<u8>>> {
        let Some(&slot) = self.index.get(&id) else {
            return Ok(None);
        };
        Ok(Some(self.read_record(id, slot)?.0))
    }

    /// True when object `id` is stored.
    pub fn contains(&self, id: u64) -> bool {
        self.index.contains_key(&id)
    }

    /// Number of live objects.
    pub fn len(&self) -> u64 {
        self.index.len() as u64
    }

    /// True when no object is stored.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Ids of the live objects, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.index.keys().copied()
    }

    /// Size of the file in bytes (up to the last complete record).
    pub fn file_bytes(&self) -> u64 {
        self.end
    }

    /// Bytes of the records of live objects (the rest is reclaimed by [`Heap::compact`]).
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Bytes of an incomplete last record found at open (0 for a clean file).
    pub fn torn_tail_bytes(&self) -> u64 {
        self.torn_tail
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.file.sync_data().map_err(|e| self.io(e))
    }

    /// Rewrites the live records into a new file (verifying each), then
    /// atomically replaces the heap with it: write, sync, rename, sync the
    /// directory. Old versions and tombstones are dropped.
    pub fn compact(&mut self) -> Result<CompactReport> {
        self.writable()?;
        let before = self.end;
        let tmp = self.path.with_extension("dat.compact");
        if tmp.exists() {
            std::fs::remove_file(&tmp).map_err(|e| io_err(&tmp, e))?;
        }
        let mut fresh = Heap::create(&tmp)?;
        let slots: Vec<(u64, Slot)> = self.index.iter().map(|(&i, &s)| (i, s)).collect();
        for (id, slot) in slots {
            let (payload, wkb) = self.read_record(id, slot)?;
            let offset = fresh.append(
                encode_header(KIND_OBJECT, id, slot.payload_len, slot.wkb_len),
                &[&payload, &wkb],
            )?;
            fresh.index.insert(id, Slot { offset, ..slot });
            fresh.live_bytes += slot.bytes();
        }
        fresh.file.sync_all().map_err(|e| io_err(&tmp, e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| io_err(&self.path, e))?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::manifest::sync_dir(dir)?;
        }
        fresh.path = self.path.clone();
        *self = fresh;
        Ok(CompactReport {
            bytes_before: before,
            bytes_after: self.end,
            objects: self.len(),
        })
    }
}

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        page: None,
        source,
    }
}

#[cfg(test)]
mod tests;
