//! The log of the record map (`pyrecords.log`): the changes made to the map
//! since its last snapshot (`pyrecords.dat`), so that a commit writes what
//! changed instead of the whole map. Indexes whose store has a log of its
//! own that takes them (eFIND and FAST, superblock versions 8 to 11) keep
//! these changes there instead, as frames ([`add_frame`], [`remove_frame`])
//! committed with their operations (`index_dir/records.rs`); this file's
//! log serves the other stores and the indexes written before.
//!
//! # Protocol
//!
//! - **Write-ahead of the tree for new keys.** The ADD of a record is
//!   written (one `write`, no sync) *before* the engine inserts its entry,
//!   and the REMOVE *after* the engine deleted it. So after a kill (which
//!   keeps what reached the kernel) every key the tree holds is known to
//!   the map, and the map never believes a key deleted that the tree still
//!   holds, except for the one window below.
//! - **Commits.** The end of a batch syncs this log, then the engine's own
//!   log ([`Index::commit`](geoflash_engine::engine::Index::commit)); outside a
//!   batch this log is synced whenever the engine's log made more
//!   operations durable. Only a power loss between the two syncs can leave
//!   them apart, and only in operations not yet acknowledged.
//! - **Checkpoints** (`flush()`, `close()`, or when this log outgrows the
//!   snapshot): this log is synced, the engine checkpoints, then the
//!   snapshot of generation `g + 1` is written atomically and this log
//!   starts over empty with generation `g + 1`. A log whose generation is
//!   older than the snapshot's is already in it and is ignored. In this
//!   order a snapshot never holds a change the tree may not have: a crash
//!   or a failure before the snapshot leaves this log with every change
//!   since the previous one (a deletion with its object), which the next
//!   open replays and reconciles with the tree.
//! - **After a crash** the tree is the authority on which keys are live
//!   (see `crate::stale`): the map, replayed from snapshot and log, knows
//!   the id and object of every key allocated, and the open reconciles the
//!   two whenever the log holds changes (a clean close leaves it empty) or
//!   the store's restart replayed operations. An open for writing by
//!   another caller (the command line's `recover`, which then checkpoints
//!   the tree) that replayed operations first appends a mark to this log
//!   ([`mark_tree_recovered`]), so the front end still reconciles after it.
//!
//! # File format
//!
//! A 32-byte header: magic `GFPYRLG\0`, format version (`u16` LE: 2, or
//! 1 for logs written before seals), six zero bytes, the generation (`u64`
//! LE), four zero bytes and the CRC-32C of the 28 bytes before it. Then
//! frames:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | payload length `l` (`u32` LE) |
//! | 4 | CRC-32C of the payload |
//! | 4 | CRC-32C of the 8 bytes above |
//! | l | payload: kind (1 = ADD, 2 = REMOVE, 3 = SEAL), key (`u64` LE), then for ADD the id (`i64` LE), 1 if an object follows, and the object; for SEAL see [`seal`] |
//!
//! The header checksum makes the lengths trustworthy. Format 2 ends every
//! sync's frames with a seal frame ([`seal`]): their parity, written before
//! the sync's one `fsync`. A frame that fails its checks is judged by the
//! first seal after it: none, a crash's torn append (cut off by a writable
//! open); one covering it, damage rebuilt from the seal when it lies in one
//! aligned 4 KiB block (or, in the last batch, a crash that tore more than
//! one block before the sync returned); anything else, [`Error::Corrupt`]
//! naming the file and the offset. So damage to the last commit's frames
//! is read exactly or refused, never read as a torn tail. Format 1 (no
//! seals) is read and appended to as before: a last frame cut by the end
//! of the file or zeros to it is a torn append, other damage an error.
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::manifest::write_atomic;
use crate::parity::Parity;
use crate::{Error, Result};

mod seal;

/// File name of the record map's log inside an index directory.
pub const LOG_FILE: &str = "pyrecords.log";

const MAGIC: &[u8; 8] = b"GFPYRLG\0";
/// The format written: 2, with seals (1: without, still read and
/// appended to).
const VERSION: u16 = 2;
/// The first format version with seals.
const SEALED: u16 = 2;
const HEADER: usize = 32;
const FRAME_HEADER: usize = 12;
const KIND_ADD: u8 = 1;
const KIND_REMOVE: u8 = 2;
/// A seal frame (format version 2, [`seal`]).
const KIND_SEAL: u8 = 3;
/// Largest payload of a frame (a pickled object of up to 1 GiB).
const MAX_FRAME: u32 = (1 << 30) + 32;

/// One change of the record map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Key `key` allocated for user id `id`, with its pickled object.
    Add {
        /// The record key (the engine's leaf key).
        key: u64,
        /// The user's id.
        id: i64,
        /// The pickled object, if any.
        obj: Option<Vec<u8>>,
    },
    /// Key `key` deleted.
    Remove {
        /// The record key.
        key: u64,
    },
}

/// The payload of an ADD of `key` for `id` with `obj`.
fn add_payload(key: u64, id: i64, obj: Option<&[u8]>) -> Vec<u8> {
    let o = obj.unwrap_or(&[]);
    let mut p = Vec::with_capacity(18 + o.len());
    p.push(KIND_ADD);
    p.extend_from_slice(&key.to_le_bytes());
    p.extend_from_slice(&id.to_le_bytes());
    p.push(u8::from(obj.is_some()));
    p.extend_from_slice(o);
    p
}

/// The payload of a REMOVE of `key`.
fn remove_payload(key: u64) -> Vec<u8> {
    let mut p = Vec::with_capacity(9);
    p.push(KIND_REMOVE);
    p.extend_from_slice(&key.to_le_bytes());
    p
}

/// A change as a frame of the store's log (a CLIENT frame, see
/// [`crate::store::log::client`]): the payload of an ADD of `key` for `id`
/// with its pickled object, as in this file.
pub fn add_frame(key: u64, id: i64, obj: Option<&[u8]>) -> Vec<u8> {
    add_payload(key, id, obj)
}

/// The frame of a REMOVE of `key` (see [`add_frame`]).
pub fn remove_frame(key: u64) -> Vec<u8> {
    remove_payload(key)
}

/// The change a frame of [`add_frame`] or [`remove_frame`] holds (`None`
/// for anything else).
pub fn decode_frame(frame: &[u8]) -> Option<Change> {
    Change::decode(frame)
}

impl Change {
    fn decode(p: &[u8]) -> Option<Change> {
        let u64_at = |at: usize| -> Option<u64> {
            let b: [u8; 8] = p.get(at..at + 8)?.try_into().ok()?;
            Some(u64::from_le_bytes(b))
        };
        match *p.first()? {
            KIND_ADD => {
                let key = u64_at(1)?;
                let id = u64_at(9)? as i64;
                let obj = match *p.get(17)? {
                    0 if p.len() == 18 => None,
                    1 => Some(p.get(18..)?.to_vec()),
                    _ => return None,
                };
                Some(Change::Add { key, id, obj })
            }
            KIND_REMOVE if p.len() == 9 => Some(Change::Remove { key: u64_at(1)? }),
            _ => None,
        }
    }
}

/// The header of a log of format `version` and generation `generation`.
fn header(version: u16, generation: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..8].copy_from_slice(MAGIC);
    h[8..10].copy_from_slice(&version.to_le_bytes());
    h[16..24].copy_from_slice(&generation.to_le_bytes());
    let crc = crc32c::crc32c(&h[..28]);
    h[28..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// What `read` found in a log file.
#[derive(Debug, Default)]
pub struct Replay {
    /// The log's generation.
    pub generation: u64,
    /// The changes, oldest first.
    pub changes: Vec<Change>,
    /// Bytes of intact frames after the header (where the next append goes).
    pub end: u64,
    /// Bytes after `end` (a torn append), 0 for an intact file.
    pub torn: u64,
    /// The log's format version.
    pub version: u16,
    /// Bytes after the header up to the end of the last seal read (where
    /// the frames the next seal covers start); 0 without seals.
    pub sealed: u64,
    /// Damaged bytes rebuilt from seals (the file is left as it is).
    pub rebuilt: u64,
}

/// The key of the REMOVE that [`mark_tree_recovered`] appends: beyond any
/// key a map allocates, so that replaying it changes nothing (in every
/// build that reads this log: a REMOVE of a key the map does not hold live
/// is ignored), while the log then holds a change.
pub const RECOVERY_MARK: u64 = u64::MAX;

/// Marks the map's log in `dir` as one the front end must reconcile with
/// the tree: appends a REMOVE of [`RECOVERY_MARK`] and syncs it. An open
/// for writing calls it when restart replayed operations (or the rollback
/// journal undid pages) of an index whose map keeps this log and no front
/// end has claimed it yet: that open may checkpoint the tree (the command
/// line's `recover` does), after which the next open's restart replays
/// nothing, so the front end's open would no longer learn that the tree
/// moved past what the map logged (a power loss between the store's group
/// commit and this log's sync loses the frames of operations the tree
/// kept: after a move, a delete and an insert, even the counts agree). The
/// mark is a change in the log, which makes the front end's open reconcile
/// the two (issue 43's repair pass); its next checkpoint starts a new log
/// without it. The log continues the snapshot (a torn tail cut first, as a
/// writable open of the front end cuts it); a log older than the snapshot,
/// or none, is replaced by one of the snapshot's generation holding the
/// mark. Returns whether it marked: nothing without a snapshot (no front
/// end's map). An unreadable snapshot or log is an error naming the file.
pub fn mark_tree_recovered(dir: &Path) -> Result<bool> {
    let (map, replay) = super::Records::load(dir).map_err(|e| e.in_file(dir.join(LOG_FILE)))?;
    if map.is_identity() {
        return Ok(false);
    }
    let mut log = match replay {
        Some(r) => RecordLog::append_to(dir, &r)?,
        None => RecordLog::create(dir, map.generation())?,
    };
    log.append_remove(RECOVERY_MARK)?;
    log.sync()?;
    Ok(true)
}

/// Reads the log at `path`; `None` when there is no such file.
pub fn read(path: &Path) -> Result<Option<Replay>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(Error::Io {
                path: path.to_path_buf(),
                page: None,
                source,
            })
        }
    };
    let bad = |at: usize, why: &str| {
        Error::corrupt(None, format!("{}: {why} at byte {at}", path.display()))
    };
    let head = bytes
        .get(..HEADER)
        .ok_or_else(|| bad(0, "file shorter than its header"))?;
    if &head[..8] != MAGIC {
        return Err(bad(0, "not a record-map log (bad magic)"));
    }
    if crc32c::crc32c(&head[..28]).to_le_bytes() != head[28..32] {
        return Err(bad(0, "header checksum mismatch"));
    }
    let version = u16::from_le_bytes([head[8], head[9]]);
    Error::check_version("record-map log", version, 1, VERSION).map_err(|e| e.in_file(path))?;
    let mut g = [0u8; 8];
    g.copy_from_slice(&head[16..24]);
    let generation = u64::from_le_bytes(g);
    let mut replay = Replay {
        generation,
        version,
        ..Replay::default()
    };
    let mut bytes = bytes;
    let mut at = HEADER;
    // Sealed logs: where the frames the next seal covers start.
    let mut sealed = HEADER;
    while at < bytes.len() {
        let failure = match frame_at(&bytes, at, version, generation) {
            Ok(Frame::Change(change, next)) => {
                replay.changes.push(change);
                at = next;
                continue;
            }
            Ok(Frame::Seal(seal)) => {
                if seal.first != sealed {
                    return Err(bad(at, "seal of frames other than those before it"));
                }
                (at, sealed) = (seal.end, seal.end);
                continue;
            }
            Err(failure) => failure,
        };
        if version < SEALED {
            // Without seals a damaged last frame cannot be told from a
            // torn append: the tail is accepted as torn when it is cut by
            // the end of the file or zeros to it, from the frame's start or
            // from a sector boundary inside it (format version 1).
            match failure {
                Failure::Cut | Failure::Zeros => break,
                Failure::Payload(end, _) if torn_in_sectors(&bytes, at, end) => break,
                Failure::Header(why) | Failure::Payload(_, why) => return Err(bad(at, why)),
            }
        }
        match sealed_failure(&mut bytes, at, sealed, &failure, generation) {
            Judged::Skip(next) => (at, sealed) = (next, next),
            Judged::Rebuilt(n) => replay.rebuilt += n as u64,
            Judged::Torn => break,
            Judged::Damaged(why) => return Err(bad(at, why)),
        }
    }
    replay.end = (at - HEADER) as u64;
    replay.sealed = (sealed - HEADER) as u64;
    replay.torn = (bytes.len() - at) as u64;
    Ok(Some(replay))
}

/// A frame read intact.
enum Frame {
    /// A change, and the file offset after its frame.
    Change(Change, usize),
    /// A seal (format version 2).
    Seal(seal::Seal),
}

/// Why no intact frame starts at an offset.
enum Failure {
    /// The frame is cut by the end of the file.
    Cut,
    /// Zeros from the frame's start to the end of the file.
    Zeros,
    /// The frame's header is damaged.
    Header(&'static str),
    /// The header is intact (its frame ends at the offset given), the
    /// payload is not.
    Payload(usize, &'static str),
}

/// The frame at file offset `at` of a log of `version` and `generation`.
fn frame_at(bytes: &[u8], at: usize, version: u16, generation: u64) -> Result<Frame, Failure> {
    let Some(fh) = bytes.get(at..at + FRAME_HEADER) else {
        return Err(Failure::Cut);
    };
    let word = |i: usize| u32::from_le_bytes([fh[i], fh[i + 1], fh[i + 2], fh[i + 3]]);
    if crc32c::crc32c(&fh[..8]) != word(8) {
        // Zeros to the end are an append the file's size got ahead of.
        if bytes[at..].iter().all(|&b| b == 0) {
            return Err(Failure::Zeros);
        }
        return Err(Failure::Header("frame header checksum mismatch"));
    }
    let len = word(0);
    if len > MAX_FRAME {
        return Err(Failure::Header("frame longer than any record"));
    }
    let next = at + FRAME_HEADER + len as usize;
    let Some(payload) = bytes.get(at + FRAME_HEADER..next) else {
        return Err(Failure::Cut);
    };
    if crc32c::crc32c(payload) != word(4) {
        return Err(Failure::Payload(next, "frame checksum mismatch"));
    }
    if version >= SEALED && payload.first() == Some(&KIND_SEAL) {
        return match seal::seal_at(bytes, seal::inner_at(at), generation) {
            Some(s) if s.frame == at && s.end == next => Ok(Frame::Seal(s)),
            _ => Err(Failure::Payload(next, "malformed seal")),
        };
    }
    match Change::decode(payload) {
        Some(change) => Ok(Frame::Change(change, next)),
        None => Err(Failure::Payload(next, "malformed change")),
    }
}

/// The sectors a torn write loses (an append torn by a crash keeps whole
/// sectors of it).
const SECTOR: usize = 512;

/// Whether the frame from file offset `at` to `end`, whose header is
/// intact and whose payload is not, is an append a crash tore after its
/// first sectors: zeros from a sector boundary inside it to the end of
/// the file.
fn torn_in_sectors(bytes: &[u8], at: usize, end: usize) -> bool {
    let zeros_from = bytes
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |last| last + 1);
    let boundary = zeros_from.div_ceil(SECTOR) * SECTOR;
    end <= bytes.len() && at + FRAME_HEADER <= boundary && boundary < end
}

/// What a sealed log's reader makes of a frame that is not intact.
enum Judged {
    /// The frame is the seal of frames read whole; go on at this offset.
    Skip(usize),
    /// The damage was rebuilt from the seal (this many bytes); read on.
    Rebuilt(usize),
    /// A crash's torn append: the log ends here.
    Torn,
    /// Damage to frames a later seal proves were made durable.
    Damaged(&'static str),
}

/// Judges the failed frame at file offset `at` of a sealed log whose last
/// seal read ends at `sealed` ([`seal`]): the first seal after it tells
/// whether the frame was made durable. No seal after it: a torn append
/// (every sync ends in a seal, one block never damages both a frame and
/// the seal after it). The frame's own seal (its header or padding
/// damaged, the frames it covers read whole): skipped. A seal covering
/// it: rebuilt from the seal if one block holds the damage; otherwise a
/// torn last batch (a crash may have torn more than one block of it, the
/// seal reaching the file first) or, with a later seal after it, damage.
/// A seal of frames after it: the failed frame is the previous seal when
/// its header says it ends where the seal's frames start, damage otherwise.
fn sealed_failure(
    bytes: &mut [u8],
    at: usize,
    sealed: usize,
    failure: &Failure,
    generation: u64,
) -> Judged {
    let Some(s) = seal::find(bytes, at + FRAME_HEADER + 1, generation) else {
        return Judged::Torn;
    };
    if s.frame == at {
        return if s.first == sealed {
            Judged::Skip(s.end)
        } else {
            Judged::Damaged("seal of frames other than those before it")
        };
    }
    let frame_end = match failure {
        Failure::Payload(end, _) => Some(*end),
        _ => None,
    };
    if s.first <= at {
        if s.first != sealed {
            return Judged::Damaged("seal of frames other than those before it");
        }
        let span_end = frame_end.unwrap_or(at + FRAME_HEADER);
        let frame = s.frame;
        let intact = |b: &[u8]| frames_end_at(b, at, frame, generation);
        if let Some(n) = seal::rebuild(bytes, &s, at, span_end, intact) {
            return Judged::Rebuilt(n);
        }
        return if seal::find(bytes, s.end, generation).is_some() {
            Judged::Damaged("damaged frames a later seal proves durable, beyond what their seal rebuilds")
        } else {
            Judged::Torn
        };
    }
    if frame_end == Some(s.first) && at >= sealed {
        // The previous seal (damaged) of frames read whole.
        return Judged::Skip(s.first);
    }
    Judged::Damaged("damaged frames before a later seal")
}

/// Whether the frames from file offset `at` are intact changes that end
/// exactly at `end`.
fn frames_end_at(bytes: &[u8], mut at: usize, end: usize, generation: u64) -> bool {
    while at < end {
        match frame_at(bytes, at, SEALED, generation) {
            Ok(Frame::Change(_, next)) if next <= end => at = next,
            _ => return false,
        }
    }
    at == end
}

/// The log of a writable index, open for appending.
#[derive(Debug)]
pub struct RecordLog {
    path: PathBuf,
    file: File,
    generation: u64,
    /// Bytes of frames after the header.
    bytes: u64,
    /// Frames written since the last sync.
    unsynced: bool,
    /// A write failed: the file may end inside a frame, so nothing more is
    /// appended (the next open truncates the torn frame).
    failed: bool,
    /// The format version (seals from [`SEALED`] on).
    version: u16,
    /// File offset of the first byte the next seal covers.
    cover: u64,
    /// The parity of the bytes from `cover` on.
    parity: Parity,
}

impl RecordLog {
    /// A new, empty log of `generation` in `dir`, replacing any there
    /// (atomically: the old one stays until the new one is in place).
    pub fn create(dir: &Path, generation: u64) -> Result<RecordLog> {
        RecordLog::create_version(dir, generation, VERSION)
    }

    fn create_version(dir: &Path, generation: u64, version: u16) -> Result<RecordLog> {
        write_atomic(dir, LOG_FILE, &header(version, generation))?;
        let replay = Replay {
            generation,
            version,
            ..Replay::default()
        };
        RecordLog::append_to(dir, &replay)
    }

    /// The log in `dir` that `read` found as `replay`, opened for
    /// appending after its intact frames (`replay.end`); a torn tail after
    /// them is cut off. A log of format version 1 stays one (no seals).
    pub fn append_to(dir: &Path, replay: &Replay) -> Result<RecordLog> {
        let path = dir.join(LOG_FILE);
        let io = |source| Error::Io {
            path: path.clone(),
            page: None,
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        let len = HEADER as u64 + replay.end;
        if file.metadata().map_err(io)?.len() != len {
            file.set_len(len).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        use std::io::{Read, Seek, SeekFrom};
        let cover = HEADER as u64 + replay.sealed.min(replay.end);
        let mut parity = Parity::default();
        if replay.version >= SEALED && cover < len {
            // The frames after the last seal, which the next one covers.
            let mut tail = vec![0u8; (len - cover) as usize];
            file.seek(SeekFrom::Start(cover)).map_err(io)?;
            file.read_exact(&mut tail).map_err(io)?;
            parity.fold(seal::BLOCK, 0, &tail);
        }
        file.seek(SeekFrom::Start(len)).map_err(io)?;
        Ok(RecordLog {
            path,
            file,
            generation: replay.generation,
            bytes: replay.end,
            unsynced: false,
            failed: false,
            version: replay.version,
            cover,
            parity,
        })
    }

    fn io(&self, source: std::io::Error) -> Error {
        Error::Io {
            path: self.path.clone(),
            page: None,
            source,
        }
    }

    /// The generation (that of the snapshot it continues).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Bytes of frames written since the snapshot (seals included).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Appends the ADD of `key` for user id `id` with its pickled object
    /// (one `write`: in the kernel when this returns, durable at [`sync`](Self::sync)).
    pub fn append_add(&mut self, key: u64, id: i64, obj: Option<&[u8]>) -> Result<()> {
        self.append(&add_payload(key, id, obj))
    }

    /// Appends the REMOVE of `key` (as [`append_add`](Self::append_add)).
    pub fn append_remove(&mut self, key: u64) -> Result<()> {
        self.append(&remove_payload(key))
    }

    fn append(&mut self, payload: &[u8]) -> Result<()> {
        self.write_frame(payload)?;
        self.unsynced = true;
        Ok(())
    }

    /// Writes one frame of `payload` (one `write`).
    fn write_frame(&mut self, payload: &[u8]) -> Result<()> {
        if self.failed {
            return Err(self.failed_error());
        }
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|&l| l <= MAX_FRAME)
            .ok_or_else(|| Error::invalid("a pickled object is limited to 1 GiB"))?;
        let mut frame = Vec::with_capacity(FRAME_HEADER + payload.len());
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
        let crc = crc32c::crc32c(&frame[..8]);
        frame.extend_from_slice(&crc.to_le_bytes());
        frame.extend_from_slice(payload);
        if let Err(e) = self.file.write_all(&frame) {
            self.failed = true;
            return Err(self.io(e));
        }
        if self.version >= SEALED {
            let at = HEADER as u64 + self.bytes - self.cover;
            self.parity.fold(seal::BLOCK, at, &frame);
        }
        self.bytes += frame.len() as u64;
        Ok(())
    }

    /// Makes every change appended so far durable: in a sealed log, first
    /// writes the seal of the frames since the last one (`seal`; one
    /// more `write`, the same one `fsync`).
    pub fn sync(&mut self) -> Result<()> {
        // After a failed write or sync nothing is known durable (a failed
        // `fsync` may have dropped the dirty pages it did not write, and a
        // second one would report success): refused, as appends are.
        if self.failed {
            return Err(self.failed_error());
        }
        if !self.unsynced {
            return Ok(());
        }
        if self.version >= SEALED {
            let frame = HEADER as u64 + self.bytes;
            let payload = seal::payload(
                KIND_SEAL,
                self.generation,
                self.cover,
                frame,
                &self.parity,
            );
            self.write_frame(&payload)?;
            self.cover = HEADER as u64 + self.bytes;
            self.parity.clear();
        }
        self.file.sync_data().map_err(|e| {
            self.failed = true;
            self.io(e)
        })?;
        self.unsynced = false;
        Ok(())
    }

    /// The refusal of every write and sync after one failed.
    fn failed_error(&self) -> Error {
        Error::StoreFailed(format!(
            "{}: an earlier write failed; reopen the index",
            self.path.display()
        ))
    }
}

#[cfg(test)]
mod tests;
