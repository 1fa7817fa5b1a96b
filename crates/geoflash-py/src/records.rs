//! The record map of a Python index: internal record keys → user ids and
//! pickled objects.
//!
//! The engine's leaf keys are unique, but the `rtree` API allows duplicate
//! ids (and any `i64`, negative ones included). So every entry gets an
//! internal *record key*, allocated densely from 0 (`next_key`), and this map
//! remembers the user's id of each key and the pickled `obj=` payload, if
//! any. Keys are never reused.
//!
//! # File format (`pyrecords.dat` in the index directory)
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `GFPYREC\0` |
//! | 2 | format version (`u16` LE) |
//! | 6 | zero |
//! | 8 | `n`: number of keys allocated (`u64` LE) |
//! | 8 | `o`: number of objects (`u64` LE) |
//! | 8·n | user id of each key (`i64` LE) |
//! | n | 1 if the key is live, 0 if deleted |
//! | … | `o` objects, ascending key: key (`u64` LE), length `l` (`u32` LE), `l` bytes |
//! | 4 | CRC-32C of everything before |
//!
//! The file is replaced atomically (write, sync, rename, sync the directory)
//! *before* each engine checkpoint, so after a crash it is never older than
//! the checkpointed tree. An index directory without the file was built
//! outside Python (the command line): its record keys are the user ids
//! ([`Records::identity`]) and it cannot take new entries from Python.
use std::collections::HashMap;
use std::path::Path;

use geoflash_engine::{Error, Result};

/// File name of the record map inside an index directory.
pub const RECORDS_FILE: &str = "pyrecords.dat";

const MAGIC: &[u8; 8] = b"GFPYREC\0";
const VERSION: u16 = 1;
const HEADER: usize = 32;

/// Internal record keys → user ids and pickled objects. See the module docs.
#[derive(Debug, Default)]
pub struct Records {
    /// Ids of an index built elsewhere: key = id, nothing stored.
    identity: bool,
    ids: Vec<i64>,
    alive: Vec<bool>,
    live: u64,
    objs: HashMap<u64, Vec<u8>>,
}

impl Records {
    /// An empty map.
    pub fn new() -> Records {
        Records::default()
    }

    /// The map of an index built elsewhere, whose keys are the ids.
    pub fn identity() -> Records {
        Records {
            identity: true,
            ..Records::default()
        }
    }

    /// Allocates a key for `id` (with its pickled object); returns the key.
    pub fn add(&mut self, id: i64, obj: Option<Vec<u8>>) -> Result<u64> {
        if self.identity {
            return Err(Error::invalid(
                "this index was built outside Python (no pyrecords.dat): it can be queried and \
                 entries deleted, but new entries can only be added by the tool that built it",
            ));
        }
        let key = self.ids.len() as u64;
        self.ids.push(id);
        self.alive.push(true);
        self.live += 1;
        if let Some(o) = obj {
            self.objs.insert(key, o);
        }
        Ok(key)
    }

    /// Forgets the last key allocated (an insert that the engine refused).
    pub fn undo_add(&mut self, key: u64) {
        if !self.identity && key + 1 == self.ids.len() as u64 {
            self.ids.pop();
            self.alive.pop();
            self.live = self.live.saturating_sub(1);
            self.objs.remove(&key);
        }
    }

    /// Marks `key` deleted and drops its object.
    pub fn remove(&mut self, key: u64) {
        if let Some(a) = usize::try_from(key)
            .ok()
            .and_then(|k| self.alive.get_mut(k))
        {
            if *a {
                *a = false;
                self.live = self.live.saturating_sub(1);
            }
        }
        self.objs.remove(&key);
    }

    /// The user id of live `key`; [`Error::Corrupt`] if the map does not know it.
    pub fn id(&self, key: u64) -> Result<i64> {
        if self.identity {
            return i64::try_from(key).map_err(|_| {
                Error::corrupt(
                    None,
                    format!("record key {key} does not fit a Python id (i64)"),
                )
            });
        }
        let k = usize::try_from(key).ok();
        match (
            k.and_then(|k| self.ids.get(k)),
            k.and_then(|k| self.alive.get(k)),
        ) {
            (Some(id), Some(true)) => Ok(*id),
            _ => Err(Error::corrupt(
                None,
                format!(
                    "record key {key} is in the tree but not in the id map ({RECORDS_FILE}): \
                     the map is older than the index (was the process stopped without flush() or close()?)"
                ),
            )),
        }
    }

    /// The key of `id` in an identity map (an index built elsewhere).
    pub fn identity_key(&self, id: i64) -> Option<u64> {
        if self.identity {
            u64::try_from(id).ok()
        } else {
            None
        }
    }

    /// The pickled object of `key`, if any.
    pub fn obj(&self, key: u64) -> Option<&[u8]> {
        self.objs.get(&key).map(Vec::as_slice)
    }

    /// Live entries the map knows (`None` for an identity map).
    pub fn live(&self) -> Option<u64> {
        (!self.identity).then_some(self.live)
    }

    /// The file's bytes (see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        let n = self.ids.len();
        let body: usize = self.objs.values().map(|o| 12 + o.len()).sum();
        let mut out = Vec::with_capacity(HEADER + 9 * n + body + 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&[0u8; 6]);
        out.extend_from_slice(&(n as u64).to_le_bytes());
        out.extend_from_slice(&(self.objs.len() as u64).to_le_bytes());
        for id in &self.ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
        out.extend(self.alive.iter().map(|&a| u8::from(a)));
        let mut keys: Vec<u64> = self.objs.keys().copied().collect();
        keys.sort_unstable();
        for k in keys {
            if let Some(o) = self.objs.get(&k) {
                out.extend_from_slice(&k.to_le_bytes());
                out.extend_from_slice(&(o.len() as u32).to_le_bytes());
                out.extend_from_slice(o);
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes a file's bytes; [`Error::Corrupt`] or
    /// [`Error::UnsupportedVersion`] for anything but an intact file.
    pub fn decode(bytes: &[u8]) -> Result<Records> {
        let bad = |why: &str| Error::corrupt(None, format!("{RECORDS_FILE}: {why}"));
        let Some((data, crc)) = bytes.split_last_chunk::<4>() else {
            return Err(bad("file shorter than its header"));
        };
        if data.len() < HEADER || &data[..8] != MAGIC {
            return Err(bad("not a record map (bad magic or too short)"));
        }
        if crc32c::crc32c(data) != u32::from_le_bytes(*crc) {
            return Err(bad("checksum mismatch"));
        }
        let mut r = Reader { data, at: 8 };
        let version = r.u16()?;
        if version > VERSION {
            return Err(Error::UnsupportedVersion {
                found: version,
                supported: VERSION,
            });
        }
        r.take(6)?;
        let n = usize::try_from(r.u64()?).map_err(|_| bad("key count too large"))?;
        let o = r.u64()?;
        if n.checked_mul(9).is_none_or(|b| b > data.len()) {
            return Err(bad("key count larger than the file"));
        }
        let ids: Vec<i64> = r
            .take(8 * n)?
            .chunks_exact(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                i64::from_le_bytes(a)
            })
            .collect();
        let alive: Vec<bool> = r.take(n)?.iter().map(|&b| b != 0).collect();
        let live = alive.iter().filter(|&&a| a).count() as u64;
        let mut objs = HashMap::new();
        for _ in 0..o {
            let key = r.u64()?;
            let len = r.u32()? as usize;
            if key >= n as u64 {
                return Err(bad(&format!("object of unknown key {key}")));
            }
            objs.insert(key, r.take(len)?.to_vec());
        }
        if r.at != data.len() {
            return Err(bad("trailing bytes after the last object"));
        }
        Ok(Records {
            identity: false,
            ids,
            alive,
            live,
            objs,
        })
    }

    /// Replaces the map file in `dir` atomically (no-op for an identity map).
    pub fn save(&self, dir: &Path) -> Result<()> {
        if self.identity {
            return Ok(());
        }
        geoflash_engine::manifest::write_atomic(dir, RECORDS_FILE, &self.encode())
    }

    /// The map of the index in `dir`: its file, or an identity map if it has none.
    pub fn load(dir: &Path) -> Result<Records> {
        let path = dir.join(RECORDS_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => Records::decode(&bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Records::identity()),
            Err(source) => Err(Error::Io {
                path,
                page: None,
                source,
            }),
        }
    }
}

/// Bounds-checked little-endian reads.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(len);
        let s = end.and_then(|e| self.data.get(self.at..e)).ok_or_else(|| {
            Error::corrupt(
                None,
                format!("{RECORDS_FILE}: truncated at byte {}", self.at),
            )
        })?;
        self.at += len;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16> {
        let mut a = [0u8; 2];
        a.copy_from_slice(self.take(2)?);
        Ok(u16::from_le_bytes(a))
    }
    fn u32(&mut self) -> Result<u32> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
}
