//! The log of the record map (`pyrecords.log`): the changes made to the map
//! since its last snapshot (`pyrecords.dat`), so that a commit writes what
//! changed instead of the whole map.
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
//!   snapshot): the snapshot of generation `g + 1` is written atomically,
//!   the engine checkpoints, and this log starts over empty with generation
//!   `g + 1`. A log whose generation is older than the snapshot's is
//!   already in it and is ignored.
//! - **After a crash** the tree is the authority on which keys are live
//!   (see `crate::stale`): the map, replayed from snapshot and log, knows
//!   the id and object of every key allocated, and the open reconciles the
//!   two whenever the log holds changes (a clean close leaves it empty).
//!
//! # File format
//!
//! A 32-byte header: magic `GFPYRLG\0`, format version (`u16` LE), six zero
//! bytes, the generation (`u64` LE), four zero bytes and the CRC-32C of the
//! 28 bytes before it. Then frames:
//!
//! | bytes | field |
//! |---|---|
//! | 4 | payload length `l` (`u32` LE) |
//! | 4 | CRC-32C of the payload |
//! | 4 | CRC-32C of the 8 bytes above |
//! | l | payload: kind (1 = ADD, 2 = REMOVE), key (`u64` LE), then for ADD the id (`i64` LE), 1 if an object follows, and the object |
//!
//! The header checksum makes the lengths trustworthy, so the only damage
//! accepted is a last frame cut by the end of the file (a torn append),
//! which a writable open truncates; anything else is [`Error::Corrupt`]
//! naming the file and the offset.
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::manifest::write_atomic;
use crate::{Error, Result};

/// File name of the record map's log inside an index directory.
pub const LOG_FILE: &str = "pyrecords.log";

const MAGIC: &[u8; 8] = b"GFPYRLG\0";
const VERSION: u16 = 1;
const HEADER: usize = 32;
const FRAME_HEADER: usize = 12;
const KIND_ADD: u8 = 1;
const KIND_REMOVE: u8 = 2;
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

/// The header of a log of generation `generation`.
fn header(generation: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..8].copy_from_slice(MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&generation.to_le_bytes());
    let crc = crc32c::crc32c(&h[..28]);
    h[28..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// What [`read`] found in a log file.
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
    if version > VERSION {
        return Err(Error::UnsupportedVersion {
            found: version,
            supported: VERSION,
        });
    }
    let mut g = [0u8; 8];
    g.copy_from_slice(&head[16..24]);
    let mut replay = Replay {
        generation: u64::from_le_bytes(g),
        ..Replay::default()
    };
    let mut at = HEADER;
    while at < bytes.len() {
        let Some(fh) = bytes.get(at..at + FRAME_HEADER) else {
            break; // a frame header cut by the end: a torn append
        };
        let word = |i: usize| u32::from_le_bytes([fh[i], fh[i + 1], fh[i + 2], fh[i + 3]]);
        if crc32c::crc32c(&fh[..8]) != word(8) {
            // Zeros to the end are an append the file's size got ahead of.
            if bytes[at..].iter().all(|&b| b == 0) {
                break;
            }
            return Err(bad(at, "frame header checksum mismatch"));
        }
        let len = word(0);
        if len > MAX_FRAME {
            return Err(bad(at, "frame longer than any record"));
        }
        let Some(payload) = bytes.get(at + FRAME_HEADER..at + FRAME_HEADER + len as usize) else {
            break; // a payload cut by the end: a torn append
        };
        if crc32c::crc32c(payload) != word(4) {
            return Err(bad(at, "frame checksum mismatch"));
        }
        let change = Change::decode(payload).ok_or_else(|| bad(at, "malformed change"))?;
        replay.changes.push(change);
        at += FRAME_HEADER + len as usize;
    }
    replay.end = (at - HEADER) as u64;
    replay.torn = (bytes.len() - at) as u64;
    Ok(Some(replay))
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
}

impl RecordLog {
    /// A new, empty log of `generation` in `dir`, replacing any there
    /// (atomically: the old one stays until the new one is in place).
    pub fn create(dir: &Path, generation: u64) -> Result<RecordLog> {
        write_atomic(dir, LOG_FILE, &header(generation))?;
        RecordLog::append_to(dir, generation, 0)
    }

    /// The log in `dir` opened for appending after its `end` intact bytes
    /// of frames (what [`read`] found); a torn tail after them is cut off.
    pub fn append_to(dir: &Path, generation: u64, end: u64) -> Result<RecordLog> {
        let path = dir.join(LOG_FILE);
        let io = |source| Error::Io {
            path: path.clone(),
            page: None,
            source,
        };
        let file = OpenOptions::new().write(true).open(&path).map_err(io)?;
        let len = HEADER as u64 + end;
        if file.metadata().map_err(io)?.len() != len {
            file.set_len(len).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        let mut log = RecordLog {
            path,
            file,
            generation,
            bytes: end,
            unsynced: false,
            failed: false,
        };
        use std::io::Seek;
        log.file
            .seek(std::io::SeekFrom::Start(len))
            .map_err(|source| log.io(source))?;
        Ok(log)
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

    /// Bytes of frames written since the snapshot.
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
        if self.failed {
            return Err(Error::StoreFailed(format!(
                "{}: an earlier write failed; reopen the index",
                self.path.display()
            )));
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
        self.bytes += frame.len() as u64;
        self.unsynced = true;
        Ok(())
    }

    /// Makes every change appended so far durable.
    pub fn sync(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.unsynced) {
            return Ok(());
        }
        self.file.sync_data().map_err(|e| {
            self.failed = true;
            self.io(e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes() -> Vec<Change> {
        vec![
            Change::Add {
                key: 0,
                id: -5,
                obj: None,
            },
            Change::Add {
                key: 1,
                id: 7,
                obj: Some(b"pickled".to_vec()),
            },
            Change::Remove { key: 0 },
        ]
    }

    fn written(dir: &Path) -> Vec<u8> {
        let mut log = RecordLog::create(dir, 3).unwrap();
        for c in changes() {
            match c {
                Change::Add { key, id, obj } => log.append_add(key, id, obj.as_deref()).unwrap(),
                Change::Remove { key } => log.append_remove(key).unwrap(),
            }
        }
        log.sync().unwrap();
        std::fs::read(dir.join(LOG_FILE)).unwrap()
    }

    #[test]
    fn changes_come_back_in_order_with_the_generation() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = written(dir.path());
        let r = read(&dir.path().join(LOG_FILE)).unwrap().unwrap();
        assert_eq!((r.generation, r.changes, r.torn), (3, changes(), 0));
        assert_eq!(r.end as usize, bytes.len() - HEADER);
    }

    #[test]
    fn a_torn_last_frame_is_cut_and_appending_resumes_after_the_intact_ones() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = written(dir.path());
        let path = dir.path().join(LOG_FILE);
        // Every cut inside the last frame, and zeros after the intact frames.
        let last = bytes.len() - (FRAME_HEADER + 9);
        for cut in last + 1..bytes.len() {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let r = read(&path).unwrap().unwrap();
            assert_eq!(r.changes, changes()[..2].to_vec(), "cut at {cut}");
            assert_eq!(r.torn as usize, cut - last);
        }
        let mut zeroed = bytes[..last].to_vec();
        zeroed.extend_from_slice(&[0u8; 40]);
        std::fs::write(&path, &zeroed).unwrap();
        let r = read(&path).unwrap().unwrap();
        assert_eq!((r.changes.len(), r.torn), (2, 40));
        let mut log = RecordLog::append_to(dir.path(), r.generation, r.end).unwrap();
        log.append_remove(1).unwrap();
        let r = read(&path).unwrap().unwrap();
        assert_eq!(r.changes.last(), Some(&Change::Remove { key: 1 }));
        assert_eq!((r.changes.len(), r.torn), (3, 0));
    }

    #[test]
    fn damage_inside_the_intact_frames_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = written(dir.path());
        let path = dir.path().join(LOG_FILE);
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            b[at] ^= 0x5a;
            std::fs::write(&path, &b).unwrap();
            match read(&path) {
                Err(e) => assert!(e.to_string().contains(LOG_FILE), "byte {at}: {e}"),
                // A flip can only pass as a torn tail when it cuts the
                // last frame's length short of the end of the file: then the
                // changes read are a prefix, never a different change.
                Ok(Some(r)) => {
                    assert!(r.torn > 0, "byte {at}: damage accepted as intact");
                    assert_eq!(
                        r.changes,
                        changes()[..r.changes.len()].to_vec(),
                        "byte {at}"
                    );
                }
                Ok(None) => unreachable!(),
            }
        }
    }
}
