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

use geoflash_engine::engine::{write_atomic, Error, Result};

/// File name of the record map inside an index directory.
pub const RECORDS_FILE: &str = "pyrecords.dat";

const MAGIC: &[u8; 8] = b"GFPYREC\0";
const VERSION: u16 = 1;
const HEADER: usize = 32;

/// Internal record keys → user ids and pickled objects. See the module docs.
///
/// In memory the common case costs no hashing and no id storage: while
/// every id so far equals its key (ids `0, 1, 2, …` inserted in order, or
/// `from_arrays` with `arange`), the map keeps only the count of that dense
/// prefix and answers `id(key)` from a range check and a bit of the
/// liveness set. The first id that differs from its key ends the prefix;
/// from there on ids are stored, so arbitrary, negative and duplicate ids
/// behave exactly as before. Objects are looked up in their hash map only
/// when the map holds any.
#[derive(Debug, Default)]
pub struct Records {
    /// Ids of an index built elsewhere: key = id, nothing stored.
    identity: bool,
    /// Keys below `dense` have id = key (not stored in `ids`).
    dense: u64,
    /// Ids of keys `dense..`: `ids[key - dense]`.
    ids: Vec<i64>,
    /// Liveness of each key allocated (the number of keys is `alive.len()`).
    alive: BitSet,
    live: u64,
    objs: HashMap<u64, Vec<u8>>,
}

/// A growable set of bits, one per key: live or deleted.
#[derive(Debug, Default)]
struct BitSet {
    words: Vec<u64>,
    len: u64,
}

impl BitSet {
    /// Number of bits.
    fn len(&self) -> u64 {
        self.len
    }

    /// Appends bit `on`.
    fn push(&mut self, on: bool) {
        let (w, b) = ((self.len / 64) as usize, self.len % 64);
        if w == self.words.len() {
            self.words.push(0);
        }
        if on {
            self.words[w] |= 1 << b;
        }
        self.len += 1;
    }

    /// Removes the last bit.
    fn pop(&mut self) {
        if self.len == 0 {
            return;
        }
        self.len -= 1;
        let (w, b) = ((self.len / 64) as usize, self.len % 64);
        self.words[w] &= !(1 << b);
        if b == 0 {
            self.words.pop();
        }
    }

    /// Bit `i` (false beyond the end).
    fn get(&self, i: u64) -> bool {
        i < self.len
            && usize::try_from(i / 64)
                .ok()
                .and_then(|w| self.words.get(w))
                .is_some_and(|word| word >> (i % 64) & 1 == 1)
    }

    /// Clears bit `i`; true if it was set.
    fn clear(&mut self, i: u64) -> bool {
        if !self.get(i) {
            return false;
        }
        self.words[(i / 64) as usize] &= !(1 << (i % 64));
        true
    }
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

    /// The map of keys `0..ids.len()` with these ids, liveness and objects.
    fn from_parts(
        mut ids: Vec<i64>,
        alive: BitSet,
        live: u64,
        objs: HashMap<u64, Vec<u8>>,
    ) -> Records {
        let dense = ids
            .iter()
            .enumerate()
            .take_while(|&(k, &id)| i64::try_from(k).is_ok_and(|k| k == id))
            .count();
        Records {
            identity: false,
            dense: dense as u64,
            ids: ids.split_off(dense),
            alive,
            live,
            objs,
        }
    }

    /// Number of keys allocated.
    fn keys(&self) -> u64 {
        self.alive.len()
    }

    /// The id stored for allocated `key`, live or not.
    fn stored_id(&self, key: u64) -> Option<i64> {
        if key < self.dense {
            return i64::try_from(key).ok();
        }
        usize::try_from(key - self.dense)
            .ok()
            .and_then(|i| self.ids.get(i))
            .copied()
    }

    /// Allocates a key for `id` (with its pickled object); returns the key.
    pub fn add(&mut self, id: i64, obj: Option<Vec<u8>>) -> Result<u64> {
        if self.identity {
            return Err(Error::invalid(
                "this index was built outside Python (no pyrecords.dat): it can be queried and \
                 entries deleted, but new entries can only be added by the tool that built it",
            ));
        }
        let key = self.keys();
        if self.ids.is_empty() && i64::try_from(key).is_ok_and(|k| k == id) {
            self.dense += 1;
        } else {
            self.ids.push(id);
        }
        self.alive.push(true);
        self.live += 1;
        if let Some(o) = obj {
            self.objs.insert(key, o);
        }
        Ok(key)
    }

    /// Forgets the last key allocated (an insert that the engine refused).
    pub fn undo_add(&mut self, key: u64) {
        if !self.identity && key + 1 == self.keys() {
            if self.ids.pop().is_none() {
                self.dense -= 1;
            }
            self.alive.pop();
            self.live = self.live.saturating_sub(1);
            if !self.objs.is_empty() {
                self.objs.remove(&key);
            }
        }
    }

    /// Marks `key` deleted and drops its object.
    pub fn remove(&mut self, key: u64) {
        if self.alive.clear(key) {
            self.live = self.live.saturating_sub(1);
        }
        if !self.objs.is_empty() {
            self.objs.remove(&key);
        }
    }

    /// Appends the user ids of the records with `keys` to `out`, as
    /// [`Records::id`] gives each: in one loop without a lookup when keys
    /// are the ids (an identity map, or keys in the dense prefix with
    /// nothing deleted).
    pub fn extend_ids<I>(&self, keys: I, out: &mut Vec<i64>) -> Result<()>
    where
        I: IntoIterator<Item = u64>,
        I::IntoIter: Clone + ExactSizeIterator,
    {
        let keys = keys.into_iter();
        out.reserve(keys.len());
        if self.identity {
            if let Some(k) = keys.clone().find(|&k| i64::try_from(k).is_err()) {
                return self.id(k).map(|_| ());
            }
            out.extend(keys.map(|k| k as i64));
            return Ok(());
        }
        // Every key live and below the dense prefix (`from_arrays` with
        // `arange`, nothing deleted): the ids are the keys, no lookup each.
        if self.live == self.keys() && keys.clone().all(|k| k < self.dense) {
            out.extend(keys.map(|k| k as i64));
            return Ok(());
        }
        for k in keys {
            out.push(self.id(k)?);
        }
        Ok(())
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
        match self.stored_id(key) {
            Some(id) if self.alive.get(key) => Ok(id),
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
        if self.objs.is_empty() {
            return None;
        }
        self.objs.get(&key).map(Vec::as_slice)
    }

    /// Whether the map knows `key` as a live record (always for an identity map).
    pub fn is_live(&self, key: u64) -> bool {
        self.identity || (key < self.keys() && self.alive.get(key))
    }

    /// The keys of the live records (empty for an identity map).
    pub fn live_keys(&self) -> impl Iterator<Item = u64> + '_ {
        let n = if self.identity { 0 } else { self.keys() };
        (0..n).filter(|&k| self.alive.get(k))
    }

    /// Live entries the map knows (`None` for an identity map).
    pub fn live(&self) -> Option<u64> {
        (!self.identity).then_some(self.live)
    }

    /// The file's bytes (see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        let n = usize::try_from(self.keys()).unwrap_or(usize::MAX);
        let body: usize = self.objs.values().map(|o| 12 + o.len()).sum();
        let mut out = Vec::with_capacity(HEADER + 9 * n + body + 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&[0u8; 6]);
        out.extend_from_slice(&(n as u64).to_le_bytes());
        out.extend_from_slice(&(self.objs.len() as u64).to_le_bytes());
        for key in 0..self.keys() {
            let id = self.stored_id(key).unwrap_or_default();
            out.extend_from_slice(&id.to_le_bytes());
        }
        out.extend((0..self.keys()).map(|k| u8::from(self.alive.get(k))));
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
        let mut alive = BitSet::default();
        for &b in r.take(n)? {
            alive.push(b != 0);
        }
        let live = (0..alive.len()).filter(|&k| alive.get(k)).count() as u64;
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
        Ok(Records::from_parts(ids, alive, live, objs))
    }

    /// Replaces the map file in `dir` atomically (no-op for an identity map).
    pub fn save(&self, dir: &Path) -> Result<()> {
        if self.identity {
            return Ok(());
        }
        write_atomic(dir, RECORDS_FILE, &self.encode())
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
