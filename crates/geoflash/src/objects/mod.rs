//! The object heap (`objects.dat`): exact geometries (WKB) and per-object
//! payloads by object id, used by the refinement step of queries
//! ([`crate::index::refine`]) and written by dataset import.
//!
//! # File format (version 2)
//!
//! An append-only file: a 16-byte header (magic `GFOBJHP\0`, format version
//! as `u16` little-endian, six zero bytes) and then records, each
//!
//! | bytes | field |
//! |---|---|
//! | 4 | record magic `OBJR` |
//! | 1 | kind: 1 = object, 2 = tombstone (delete), 3 = mark (a checkpoint) |
//! | 3 | zero |
//! | 8 | object id (`u64` LE); in a mark, its generation |
//! | 4 | payload length `p` (`u32` LE; 0 in a tombstone and a mark) |
//! | 4 | WKB length `w` (`u32` LE; 0 in a tombstone and a mark) |
//! | 4 | CRC-32C of the payload and the WKB |
//! | 4 | CRC-32C of the 28 header bytes above |
//! | p | payload |
//! | w | geometry as ISO WKB, two dimensions, little-endian |
//!
//! A newer record of an id replaces the older one; a tombstone deletes it.
//!
//! # Commits: the heap at the index's checkpoints
//!
//! The heap changes with the index's operations but is written only at
//! the index's checkpoints ([`Heap::commit`]): between two, the changes
//! are *pending* in memory (reads see them), and what makes them survive
//! a crash is the index's own protocol: the store's log, where each change
//! is a frame logged with its operation ([`frame`]; eFIND and FAST), or
//! the checkpoint itself (stores that write in place under a rollback
//! journal). A commit appends the pending records and a *mark* naming the
//! checkpoint's generation, in one write, and syncs; the index's
//! checkpoint then names that generation (the store's CHECKPOINT record,
//! or the rollback journal's header), so the heap and the tree change
//! together:
//!
//! - opening the heap with the generation the index's newest checkpoint
//!   names ([`Committed::Through`]) keeps the records up to that mark,
//!   exactly; what follows it was written by a checkpoint that did not
//!   finish, and is dropped (truncated by a writable open, ignored by a
//!   read-only one), whatever a crash left there (torn records, zeros).
//!   Generations are told apart by equality only: each checkpoint names
//!   one never named before;
//! - every heap begins with the mark of the generation it was created
//!   under, so that mark is always found: a heap without the mark its index
//!   names, or damaged before it, is an [`Error::Corrupt`] naming the file,
//!   and so is one without any mark (cut inside its first record, or a
//!   compacted heap cut before its only mark), whatever the index names:
//!   a creation, as a compaction, writes the whole file under a temporary
//!   name and renames it (a crash leaves no heap, or all of it);
//! - the changes of the operations after that checkpoint come back from
//!   the store's log ([`Heap::apply_frame`]) and are pending again.
//!
//! A file of version 1 (written before marks) has none: every complete
//! record in it is committed, as its writer made them; its first commit
//! writes and syncs the mark of the generation the index holds after the
//! old records, alone, then its own records and mark, then the header's
//! version 2. What a crash leaves of that mark's write (zeros, some of its
//! bytes) after the old records, with zeros after it, is dropped as a cut
//! commit is, and so are zeros alone (a file a crash extended without its
//! data): the index never named the new generation. Any other bytes there
//! are damage.
//!
//! An index whose checkpoints name no generation (the plain store's
//! `journal = off`) opens its heap up to the last mark; its manifest
//! records the generation of the heap's last commit, which that mark must
//! reach ([`Committed::NotBefore`]).
//!
//! # Index of ids
//!
//! The id → offset map is **rebuilt by scanning the file at open** (no
//! separate index file to keep consistent): every record's framing and
//! checksums are verified on the way, so an open file is known to be intact.
//! A record with a bad magic, kind or header checksum, or a complete record
//! with a bad body checksum, before the committed mark is an
//! [`Error::Corrupt`] naming the file and the record's offset. Records are
//! checked again (checksum and WKB) when [`Heap::get`] reads them. A
//! failed write makes the heap refuse further writes (sticky error) so it
//! never appends after a partial record. [`Heap::compact`] rewrites the
//! live records into a new file and renames it over the old one (write,
//! sync, rename, sync the directory); it refuses after a checkpoint of the
//! heap's index failed, until the heap is opened again (see there).
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::geom::Rect;
use crate::{Error, Result};

pub mod frame;
pub mod geometry;
mod scan;

/// An exact geometry (`geo` crate, `f64` coordinates).
pub type Geometry = geo::Geometry<f64>;

/// File name of the heap inside an index directory.
pub const OBJECTS_FILE: &str = "objects.dat";

/// Newest heap format version this code reads and writes (2: with marks).
pub const HEAP_FORMAT_VERSION: u16 = 2;
/// The first format version with marks.
const MARKED: u16 = 2;

const FILE_MAGIC: &[u8; 8] = b"GFOBJHP\0";
const FILE_HEADER: u64 = 16;
const RECORD_MAGIC: &[u8; 4] = b"OBJR";
const RECORD_HEADER: usize = 32;
const KIND_OBJECT: u8 = 1;
const KIND_TOMBSTONE: u8 = 2;
const KIND_MARK: u8 = 3;
/// Largest payload or WKB of one record (1 GiB).
pub const MAX_PART: u32 = 1 << 30;

/// Which records of the file an open takes as committed (see the module
/// docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// Those up to the mark of this generation: the one the index's newest
    /// checkpoint names.
    Through(u64),
    /// Those up to the last mark found: an index whose checkpoints name no
    /// generation (a structure written in place without a journal, whose
    /// crash promise is none, or an index read without its journal).
    LastMark,
    /// Those up to the last mark found, which must be of this generation
    /// or a later one: an index written in place without a journal whose
    /// manifest records the generation its last checkpoint committed
    /// (generations grow there), so a heap cut back to an earlier mark, or
    /// replaced by an older copy, is an [`Error::Corrupt`] naming the
    /// file rather than the older objects.
    NotBefore(u64),
}

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

/// A whole record: its header (magic, kind, id, lengths, both checksums)
/// and its body.
fn encode_record(kind: u8, id: u64, payload: &[u8], wkb: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(RECORD_HEADER + payload.len() + wkb.len());
    buf.extend_from_slice(RECORD_MAGIC);
    buf.extend_from_slice(&[kind, 0, 0, 0]);
    buf.extend_from_slice(&id.to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&(wkb.len() as u32).to_le_bytes());
    let mut crc = crc32c::crc32c(payload);
    crc = crc32c::crc32c_append(crc, wkb);
    buf.extend_from_slice(&crc.to_le_bytes());
    let head_crc = crc32c::crc32c(&buf);
    buf.extend_from_slice(&head_crc.to_le_bytes());
    buf.extend_from_slice(payload);
    buf.extend_from_slice(wkb);
    buf
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
    if !matches!(kind, KIND_OBJECT | KIND_TOMBSTONE | KIND_MARK) {
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
    if kind != KIND_OBJECT && (hd.payload_len != 0 || hd.wkb_len != 0) {
        return Err("tombstone or mark with a body".into());
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

/// A change made since the last commit, held in memory until the next.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    /// The object's new version.
    Put { payload: Vec<u8>, wkb: Vec<u8> },
    /// The object deleted (it is in the file).
    Delete,
}

impl Pending {
    fn bytes(&self) -> u64 {
        RECORD_HEADER as u64
            + match self {
                Pending::Put { payload, wkb } => (payload.len() + wkb.len()) as u64,
                Pending::Delete => 0,
            }
    }
}

/// An object checked and encoded for the heap ([`Heap::prepare`]): its
/// bounding rectangle, payload and WKB.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    rect: Rect,
    payload: Vec<u8>,
    wkb: Vec<u8>,
}

impl Prepared {
    /// The geometry's bounding rectangle.
    pub fn rect(&self) -> Rect {
        self.rect
    }

    /// The frame of the store's log that puts this object as `id` (see
    /// the `frame` module).
    pub fn frame(&self, id: u64) -> Vec<u8> {
        frame::put(id, &self.payload, &self.wkb)
    }
}

/// The geometry heap: an append-only file of `(id, payload, WKB)` records
/// with an in-memory id → offset map and the changes pending until the
/// next [`Heap::commit`]. See the module documentation.
///
/// Reads take `&self` (positional reads), so many threads may read at once.
#[derive(Debug)]
pub struct Heap {
    path: PathBuf,
    file: File,
    read_only: bool,
    /// The file's format version (1 until its first commit marks it).
    version: u16,
    /// End of the committed records.
    end: u64,
    index: BTreeMap<u64, Slot>,
    pending: BTreeMap<u64, Pending>,
    /// Bytes the pending changes will take in the file.
    pending_bytes: u64,
    /// Changes were spilled to the file since the newest mark
    /// ([`Heap::spill`]): the next commit must mark them.
    spilled: bool,
    /// Live objects, pending changes included.
    count: u64,
    live_bytes: u64,
    /// Bytes past the committed records dropped at open.
    torn_tail: u64,
    /// The generation of the newest committed mark (`None`: a file of
    /// version 1 without marks).
    mark: Option<u64>,
    /// The generation the index held at open (the mark a version-1 file's
    /// first commit writes before its records).
    base: u64,
    failed: Option<String>,
    /// The generation of this heap's commit whose index's checkpoint then
    /// failed ([`Heap::checkpoint_failed`]): [`Heap::compact`] refuses
    /// until the heap is opened again.
    unsettled: Option<u64>,
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
        .in_file(path)
    }

    fn blank(path: &Path, file: File, read_only: bool) -> Heap {
        Heap {
            path: path.to_path_buf(),
            file,
            read_only,
            version: HEAP_FORMAT_VERSION,
            end: FILE_HEADER,
            index: BTreeMap::new(),
            pending: BTreeMap::new(),
            pending_bytes: 0,
            spilled: false,
            count: 0,
            live_bytes: 0,
            torn_tail: 0,
            mark: None,
            base: 0,
            failed: None,
            unsettled: None,
        }
    }

    /// Creates a new, empty heap file at `path` (an error if it exists),
    /// its first record the mark of `generation`: the generation the
    /// index's newest checkpoint names (0 when it names none).
    ///
    /// The file is written and synced under a temporary name
    /// (`objects.dat.tmp`, replaced if a crash left one), then renamed to
    /// `path` and the directory synced: a crash leaves no heap or this
    /// one. (Written in place, a crash could leave it empty or cut, which
    /// no open takes: the index did not open.)
    pub fn create(path: &Path, generation: u64) -> Result<Heap> {
        if path.symlink_metadata().is_ok() {
            let exists = std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the object heap exists already",
            );
            return Err(io_err(path, exists));
        }
        let mut head = vec![0u8; FILE_HEADER as usize];
        head[0..8].copy_from_slice(FILE_MAGIC);
        head[8..10].copy_from_slice(&HEAP_FORMAT_VERSION.to_le_bytes());
        head.extend_from_slice(&encode_record(KIND_MARK, generation, &[], &[]));
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = path.file_name().ok_or_else(|| {
            Error::invalid(format!("object heap {}: not a file name", path.display()))
        })?;
        let tmp = dir.join(format!("{}.tmp", name.to_string_lossy()));
        {
            let file = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
            write_new(&file, &head, &tmp)?;
            file.sync_all().map_err(|e| io_err(&tmp, e))?;
        }
        std::fs::rename(&tmp, path).map_err(|e| io_err(path, e))?;
        crate::manifest::sync_dir(dir)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        let mut heap = Heap::blank(path, file, false);
        heap.end = head.len() as u64;
        heap.mark = Some(generation);
        heap.base = generation;
        Ok(heap)
    }

    /// Opens the heap at `path`, scanning and verifying every committed
    /// record (see the module docs for `committed`).
    pub fn open(path: &Path, read_only: bool, committed: Committed) -> Result<Heap> {
        let file = OpenOptions::new()
            .read(true)
            .write(!read_only)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        let mut heap = Heap::blank(path, file, read_only);
        heap.scan(committed)?;
        Ok(heap)
    }

    /// An error unless the heap takes changes: open for writing, and no
    /// earlier write failed.
    pub fn check_writable(&self) -> Result<()> {
        self.writable()
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

    /// Checks and encodes object `id` for [`Heap::put_prepared`]. Geometries
    /// must be non-empty with finite coordinates of magnitude at most
    /// [`crate::geom::MAX_COORD`]; payload and WKB at most `MAX_PART`
    /// bytes each.
    pub fn prepare(id: u64, payload: &[u8], geometry: &Geometry) -> Result<Prepared> {
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
        Ok(Prepared {
            rect,
            payload: payload.to_vec(),
            wkb,
        })
    }

    /// Stores object `id` with its geometry and payload, replacing an older
    /// version of `id`, pending until the next [`Heap::commit`]. Returns the
    /// geometry's bounding rectangle (see [`Heap::prepare`] for what is
    /// refused).
    pub fn put(&mut self, id: u64, payload: &[u8], geometry: &Geometry) -> Result<Rect> {
        self.writable()?;
        let p = Heap::prepare(id, payload, geometry)?;
        self.stage(id, Some((p.payload, p.wkb)));
        Ok(p.rect)
    }

    /// [`Heap::put`] of an object [`Heap::prepare`] checked.
    pub fn put_prepared(&mut self, id: u64, object: Prepared) -> Result<()> {
        self.writable()?;
        self.stage(id, Some((object.payload, object.wkb)));
        Ok(())
    }

    /// Deletes object `id`, pending until the next [`Heap::commit`]; an
    /// error if it is absent.
    pub fn delete(&mut self, id: u64) -> Result<()> {
        self.writable()?;
        if !self.contains(id) {
            return Err(Error::invalid(format!(
                "object {id} is not in the object heap"
            )));
        }
        self.stage(id, None);
        Ok(())
    }

    /// Replays a frame of the store's log (the `frame` module) as a pending change:
    /// the changes of the operations after the index's newest checkpoint.
    /// Also on a read-only heap, whose reads then see them.
    pub fn apply_frame(&mut self, bytes: &[u8]) -> Result<()> {
        match frame::decode(bytes).map_err(|e| e.in_file(&self.path))? {
            frame::Change::Put { id, payload, wkb } => {
                geometry::from_wkb(&wkb, "").map_err(|e| {
                    Error::corrupt(None, format!("a logged object {id}: {e}")).in_file(&self.path)
                })?;
                self.stage(id, Some((payload, wkb)));
            }
            frame::Change::Delete { id } => self.stage(id, None),
        }
        Ok(())
    }

    /// Records a change of `id` as pending: its new version (payload and
    /// WKB), or (`None`) its deletion.
    fn stage(&mut self, id: u64, object: Option<(Vec<u8>, Vec<u8>)>) {
        let before = self.contains(id);
        let change = match object {
            Some((payload, wkb)) => Some(Pending::Put { payload, wkb }),
            None if self.index.contains_key(&id) => Some(Pending::Delete),
            None => None,
        };
        let old = match change {
            Some(c) => {
                self.pending_bytes += c.bytes();
                self.pending.insert(id, c)
            }
            None => self.pending.remove(&id),
        };
        if let Some(o) = old {
            self.pending_bytes -= o.bytes();
        }
        match (before, self.contains(id)) {
            (false, true) => self.count += 1,
            (true, false) => self.count -= 1,
            _ => {}
        }
    }

    /// Writes the pending changes and the mark of `generation` (one write,
    /// one sync; see the module docs): the index's checkpoint that follows
    /// names `generation`. A file of version 1 gets the mark of the
    /// generation it was opened under first, then version 2 in its header.
    /// Nothing is written when nothing is pending and the newest mark is
    /// `generation` already.
    pub fn commit(&mut self, generation: u64) -> Result<()> {
        if !self.has_pending() && self.mark == Some(generation) {
            return Ok(());
        }
        self.write_pending(Some(generation))?;
        self.mark = Some(generation);
        Ok(())
    }

    /// Writes the pending changes without a mark and without a sync,
    /// freeing their memory: they stay uncommitted (a crash drops them, and
    /// the index's protocol brings them back: the store's log replays their
    /// frames, or the structure returns to its checkpoint as well) until
    /// the next [`Heap::commit`] marks them.
    pub fn spill(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.write_pending(None)
    }

    /// Appends the pending changes (after the mark of the generation the
    /// file was opened under, in a file of version 1 without marks:
    /// [`Heap::mark_version_1`]) and the mark of `generation`, if any,
    /// which also syncs.
    fn write_pending(&mut self, generation: Option<u64>) -> Result<()> {
        self.writable()?;
        if self.mark.is_none() {
            self.mark_version_1()?;
        }
        let mut buf = Vec::with_capacity(self.pending_bytes as usize + RECORD_HEADER);
        let mut slots = Vec::with_capacity(self.pending.len());
        for (&id, change) in &self.pending {
            let offset = self.end + buf.len() as u64;
            match change {
                Pending::Put { payload, wkb } => {
                    buf.extend_from_slice(&encode_record(KIND_OBJECT, id, payload, wkb));
                    let slot = Slot {
                        offset,
                        payload_len: payload.len() as u32,
                        wkb_len: wkb.len() as u32,
                    };
                    slots.push((id, Some(slot)));
                }
                Pending::Delete => {
                    buf.extend_from_slice(&encode_record(KIND_TOMBSTONE, id, &[], &[]));
                    slots.push((id, None));
                }
            }
        }
        if let Some(g) = generation {
            buf.extend_from_slice(&encode_record(KIND_MARK, g, &[], &[]));
        }
        let at = self.end;
        let written = write_append(&self.file, &buf, at).and_then(|()| match generation {
            Some(_) => self.file.sync_data(),
            None => Ok(()),
        });
        if let Err(e) = written {
            self.failed = Some(e.to_string());
            let _ = self.file.set_len(at);
            return Err(self.io(e));
        }
        if generation.is_some() && self.version < MARKED {
            let upgraded = self
                .file
                .write_all_at(&HEAP_FORMAT_VERSION.to_le_bytes(), 8)
                .and_then(|()| self.file.sync_data());
            if let Err(e) = upgraded {
                self.failed = Some(e.to_string());
                return Err(self.io(e));
            }
            self.version = HEAP_FORMAT_VERSION;
        }
        for (id, slot) in slots {
            let old = match slot {
                Some(s) => {
                    self.live_bytes += s.bytes();
                    self.index.insert(id, s)
                }
                None => self.index.remove(&id),
            };
            if let Some(o) = old {
                self.live_bytes -= o.bytes();
            }
        }
        self.pending.clear();
        self.pending_bytes = 0;
        self.spilled = generation.is_none();
        self.end = at + buf.len() as u64;
        Ok(())
    }

    /// The first write to a file of version 1 (no marks): the mark of the
    /// generation it was opened under after its records, alone, written
    /// and synced before anything else is appended. From then on the file
    /// holds a mark ending its old records, so whatever a crash leaves
    /// after it (cut, zeros, a torn write) is dropped by an open naming
    /// that generation; and a crash inside this 32-byte write leaves at
    /// most the mark's own bytes and zeros, which an open takes for the
    /// unfinished upgrade it is (see `scan`). Written with the commit's
    /// records, a torn write could leave zeros over the mark and records
    /// after them: an error, although nothing acknowledged was lost.
    fn mark_version_1(&mut self) -> Result<()> {
        let mark = encode_record(KIND_MARK, self.base, &[], &[]);
        let at = self.end;
        let written = self
            .file
            .write_all_at(&mark, at)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            self.failed = Some(e.to_string());
            let _ = self.file.set_len(at);
            return Err(self.io(e));
        }
        self.end = at + mark.len() as u64;
        self.mark = Some(self.base);
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

    /// `(payload, wkb)` of object `id` (pending or committed), `None` if
    /// it is absent.
    fn record(&self, id: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match self.pending.get(&id) {
            Some(Pending::Put { payload, wkb }) => Ok(Some((payload.clone(), wkb.clone()))),
            Some(Pending::Delete) => Ok(None),
            None => match self.index.get(&id) {
                Some(&slot) => self.read_record(id, slot).map(Some),
                None => Ok(None),
            },
        }
    }

    /// The geometry of object `id`, `None` if it is absent.
    pub fn get(&self, id: u64) -> Result<Option<Geometry>> {
        let Some((_, wkb)) = self.record(id)? else {
            return Ok(None);
        };
        geometry::from_wkb(&wkb, "").map(Some).map_err(|e| {
            let at = self.index.get(&id).map_or(0, |s| s.offset);
            Self::corrupt_at(&self.path, at, e)
        })
    }

    /// The WKB bytes of object `id`, `None` if it is absent.
    pub fn get_wkb(&self, id: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.record(id)?.map(|(_, w)| w))
    }

    /// The payload of object `id`, `None` if it is absent.
    pub fn get_payload(&self, id: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.record(id)?.map(|(p, _)| p))
    }

    /// True when object `id` is stored (pending changes included).
    pub fn contains(&self, id: u64) -> bool {
        match self.pending.get(&id) {
            Some(Pending::Put { .. }) => true,
            Some(Pending::Delete) => false,
            None => self.index.contains_key(&id),
        }
    }

    /// Number of live objects.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// True when no object is stored.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Ids of the live objects, ascending.
    pub fn ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .index
            .keys()
            .copied()
            .filter(|id| !self.pending.contains_key(id))
            .chain(
                self.pending
                    .iter()
                    .filter(|(_, p)| matches!(p, Pending::Put { .. }))
                    .map(|(&id, _)| id),
            )
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Size of the committed file in bytes.
    pub fn file_bytes(&self) -> u64 {
        self.end
    }

    /// Bytes of the committed records of live objects (the rest is
    /// reclaimed by [`Heap::compact`]).
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Bytes the pending changes will take in the file at the next commit.
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    /// Whether changes wait for the next commit: in memory, or spilled to
    /// the file without a mark.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.spilled
    }

    /// The generation of the newest mark (`None` in a file of version 1
    /// never committed since).
    pub fn mark(&self) -> Option<u64> {
        self.mark
    }

    /// Bytes past the committed records found at open: what a crash left
    /// of a commit the index's checkpoint did not follow (0 for a clean
    /// file). A writable open truncated them, a read-only one ignored them.
    pub fn torn_tail_bytes(&self) -> u64 {
        self.torn_tail
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tells the heap its directory was renamed to `dir` (a build's
    /// staging directory published onto its target): the file is
    /// `dir/objects.dat` from now on, in its errors and [`Heap::path`]
    /// (the open file is the same).
    pub fn moved_to(&mut self, dir: &Path) {
        self.path = dir.join(OBJECTS_FILE);
    }

    /// Tells the heap that the checkpoint of its index naming
    /// `generation` failed after this heap's commit of it (its mark is in
    /// the file): the store's durable checkpoint may name `generation`
    /// (a failure after its switch was durable) or the generation before,
    /// and only a new open, which reads the store's durable checkpoint,
    /// can tell. [`Heap::compact`] refuses from then on.
    pub(crate) fn checkpoint_failed(&mut self, generation: u64) {
        self.unsettled = Some(generation);
    }

    /// Rewrites the committed live records into a new file (verifying
    /// each) ending with the mark of the newest generation, then
    /// atomically replaces the heap with it: write, sync, rename, sync the
    /// directory. Old versions and tombstones are dropped. An error while
    /// changes are pending (commit them first).
    ///
    /// Refused ([`Error::StoreFailed`], nothing written) after a checkpoint
    /// of the heap's index failed once the heap had committed its
    /// generation (the index tells its heap so), until the heap is opened
    /// again: the new file keeps the newest mark alone, and the store's
    /// durable checkpoint may name the generation before it, of which the
    /// file would then hold no mark (an open would find the heap
    /// corrupt). The same rule as the record map's
    /// [`crate::engine::records::Records::save_next`].
    pub fn compact(&mut self) -> Result<CompactReport> {
        self.writable()?;
        if let Some(g) = self.unsettled {
            return Err(Error::StoreFailed(format!(
                "object heap {}: a checkpoint of its index failed after the heap committed generation {g}, \
                 and the store's durable checkpoint may name that generation or the one before it; \
                 compacting keeps the mark of generation {g} alone, so the heap is not compacted until \
                 the index is reopened (its open takes the heap through the mark its durable checkpoint \
                 names)",
                self.path.display()
            )));
        }
        if self.has_pending() {
            return Err(Error::invalid(format!(
                "object heap {}: changes are pending; commit them before compacting",
                self.path.display()
            )));
        }
        let before = self.end;
        let generation = self.mark.unwrap_or(self.base);
        let mut buf = Vec::from(&FILE_MAGIC[..]);
        buf.extend_from_slice(&HEAP_FORMAT_VERSION.to_le_bytes());
        buf.resize(FILE_HEADER as usize, 0);
        let mut index = BTreeMap::new();
        for (&id, &slot) in &self.index {
            let (payload, wkb) = self.read_record(id, slot)?;
            let offset = buf.len() as u64;
            index.insert(id, Slot { offset, ..slot });
            buf.extend_from_slice(&encode_record(KIND_OBJECT, id, &payload, &wkb));
        }
        // No mark before the records: the only one names the generation,
        // so damage to any record is before it, an error.
        buf.extend_from_slice(&encode_record(KIND_MARK, generation, &[], &[]));
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty());
        let name = self.path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
            Error::invalid(format!("object heap {}: not a file name", self.path.display()))
        })?;
        crate::manifest::write_atomic(dir.unwrap_or(Path::new(".")), name, &buf)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(|e| io_err(&self.path, e))?;
        let mut fresh = Heap::blank(&self.path, file, false);
        fresh.end = buf.len() as u64;
        fresh.live_bytes = self.live_bytes;
        fresh.count = self.count;
        fresh.index = index;
        fresh.mark = Some(generation);
        fresh.base = generation;
        *self = fresh;
        Ok(CompactReport {
            bytes_before: before,
            bytes_after: self.end,
            objects: self.len(),
        })
    }
}

#[cfg(test)]
thread_local! {
    /// Tests: the next [`Heap::create`] on this thread writes only this
    /// many bytes of its new file, then fails as a crash would end it.
    static CREATE_CRASH_AFTER: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Writes `bytes` at the start of the new heap file `file` (at `path`).
fn write_new(file: &File, bytes: &[u8], path: &Path) -> Result<()> {
    #[cfg(test)]
    {
        if let Some(n) = CREATE_CRASH_AFTER.with(std::cell::Cell::take) {
            let part = &bytes[..n.min(bytes.len())];
            file.write_all_at(part, 0).map_err(|e| io_err(path, e))?;
            return Err(Error::Crashed(format!(
                "object heap {}: the creation crashed after {n} bytes (a test)",
                path.display()
            )));
        }
    }
    file.write_all_at(bytes, 0).map_err(|e| io_err(path, e))
}

#[cfg(test)]
thread_local! {
    /// Tests: the next append of pending changes on this thread
    /// ([`Heap::commit`], [`Heap::spill`]) writes nothing and fails, as a
    /// crash before it reached the disk would end it (the test then writes
    /// what the crash left).
    static APPEND_FAILS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Appends `bytes` at `at` of the heap's `file` (not synced).
fn write_append(file: &File, bytes: &[u8], at: u64) -> std::io::Result<()> {
    #[cfg(test)]
    {
        if APPEND_FAILS.with(|f| f.replace(false)) {
            return Err(std::io::Error::other("the append crashed (a test)"));
        }
    }
    file.write_all_at(bytes, at)
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
#[cfg(test)]
mod review_tests;
#[cfg(test)]
mod upgrade_tests;
