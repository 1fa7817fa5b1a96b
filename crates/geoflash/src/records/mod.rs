//! The record map of a Python index: internal record keys → user ids and
//! pickled objects.
//!
//! The engine's leaf keys are unique, but the `rtree` API allows duplicate
//! ids (and any `i64`, negative ones included). So every entry gets an
//! internal *record key*, allocated densely from 0 (`next_key`), and this map
//! remembers the user's id of each key and the pickled `obj=` payload, if
//! any. Keys are never reused, and the id of a deleted key is kept (so
//! that a crash recovery can bring a key back to life, see [`log`]).
//!
//! # File format (`pyrecords.dat` in the index directory): the snapshot
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `GFPYREC\0` |
//! | 2 | format version (`u16` LE): 4, or 5 for a map whose changes are in the store's log (the compact layout below); 2 and 3 (and 1, without a generation) are the column layout, read and upgraded at the next checkpoint |
//! | 6 | zero |
//! | 8 | generation (`u64` LE; absent in version 1, read as 0) |
//! | 8 | `n`: number of keys allocated (`u64` LE) |
//! | 8 | `o`: number of objects (`u64` LE) |
//! | 8 | `d`: the dense prefix, keys `0..d` whose id is the key itself (`u64` LE, at most `n`) |
//! | 8·(n − d) | user id of each key from `d` on (`i64` LE) |
//! | ⌈n / 8⌉ | liveness: bit `k % 8` of byte `k / 8` set if key `k` is live (the bits past `n` clear) |
//! | … | `o` objects, ascending key: key (`u64` LE), length `l` (`u32` LE), `l` bytes |
//! | 4 | CRC-32C of everything before |
//!
//! The column layout (versions 1 to 3) has no `d`: an id for every key
//! (8·n bytes), then a byte per key, 1 if live. The compact layout writes
//! an index whose ids are its keys (`from_arrays` with `arange`, ids
//! inserted in order) in an eighth of a byte per object instead of 9 bytes:
//! 125 KB instead of 9 MB at 1,000,000 objects, which every open reads and
//! checksums and every checkpoint writes.
//!
//! The snapshot is replaced atomically (write, sync, rename, sync the
//! directory) at checkpoints only. The changes between two snapshots go
//! either to the store's own log, as CLIENT frames committed with the
//! operation they belong to (an eFIND or FAST index whose log is of
//! superblock versions 8 to 11: snapshot version 5, see
//! [`crate::store::log::client`] and the `Index` methods of
//! `index_dir/records.rs`), or, for the other stores, to the map's own log
//! ([`log`], `pyrecords.log`), which a commit syncs (snapshot version 2;
//! see [`log`] for that protocol). An index directory without the file was
//! built outside Python (the command line): its record keys are the user
//! ids ([`Records::identity`]) and it cannot take new entries from Python.
//!
//! With the store's log, a checkpoint writes the snapshot of the next
//! generation to `pyrecords.next.dat` ([`NEXT_FILE`]), then checkpoints
//! the store naming that generation, then renames the file to
//! `pyrecords.dat`; [`Records::load_logged`] uses the generation the
//! store's newest checkpoint names to pick the snapshot after a crash
//! between two of these steps. A store checkpoint that returned an error
//! may have become durable all the same, so a `pyrecords.next.dat` left by
//! a failed checkpoint is never overwritten by a later one
//! ([`Records::save_next`] refuses until the index is reopened).
use std::collections::HashMap;
use std::path::Path;

use crate::manifest::write_atomic;
use crate::{Error, Result};

/// File name of the record map inside an index directory.
pub const RECORDS_FILE: &str = "pyrecords.dat";
/// File name of the snapshot a checkpoint of a map in the store's log
/// writes before the store's checkpoint (renamed to [`RECORDS_FILE`] after it).
pub const NEXT_FILE: &str = "pyrecords.next.dat";

pub mod log;

const MAGIC: &[u8; 8] = b"GFPYREC\0";
/// The snapshot format written for a map with its own log: 4 since the
/// compact layout (2 was the column layout, from when the map got a log in
/// issue 43).
const VERSION: u16 = 4;
/// The snapshot format of a map whose changes are in the store's log (5,
/// the compact layout; 3 the column layout): a build that reads only the
/// formats before it refuses it by name instead of reading the snapshot
/// without the changes logged since.
pub const LOGGED_VERSION: u16 = 5;
/// The first format of the compact layout (the dense prefix and a liveness
/// bit per key; see the module docs).
const COMPACT_VERSION: u16 = 4;
/// Header bytes of a version-2 snapshot (32 in version 1).
const HEADER: usize = 40;

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
    /// The generation of the snapshot this map was read from or last
    /// saved as (its log continues it).
    generation: u64,
    /// The snapshot's format version it was read from (`VERSION` for a new map).
    read_version: u16,
    /// User id → live keys beyond the dense prefix (a key below `dense`
    /// is its own id's, its liveness in `alive`), built on the first
    /// [`Records::live_keys_of`] and kept in step from then on (`None`
    /// until then: most sessions never look an id up). Empty while every
    /// id is its key, as after `from_arrays` with `arange`.
    by_id: Option<HashMap<i64, Vec<u64>>>,
}

/// A growable set of bits, one per key: live or deleted.
#[derive(Debug, Default)]
struct BitSet {
    words: Vec<u64>,
    len: u64,
}

impl BitSet {
    /// The bits of `bytes`, one a byte (nonzero: set), packed 64 to a word
    /// (a record map's liveness column, decoded a word at a time).
    fn from_bytes(bytes: &[u8]) -> BitSet {
        let words = bytes
            .chunks(64)
            .map(|c| {
                c.iter()
                    .enumerate()
                    .fold(0u64, |w, (i, &b)| w | (u64::from(b != 0) << i))
            })
            .collect();
        BitSet {
            words,
            len: bytes.len() as u64,
        }
    }

    /// The bits of `bytes` as the compact snapshot packs them (bit `k % 8`
    /// of byte `k / 8`), `len` of them; `None` when `bytes` is not
    /// ⌈len / 8⌉ long or sets a bit past `len`.
    fn from_bits(bytes: &[u8], len: u64) -> Option<BitSet> {
        if u64::try_from(bytes.len()).ok()? != len.div_ceil(8) {
            return None;
        }
        let words: Vec<u64> = bytes
            .chunks(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(a)
            })
            .collect();
        let tail = len % 64;
        let clear_past_len = tail == 0 || words.last().is_none_or(|&w| w >> tail == 0);
        clear_past_len.then_some(BitSet { words, len })
    }

    /// The bits packed as [`BitSet::from_bits`] reads them.
    fn to_bits(&self) -> impl Iterator<Item = u8> + '_ {
        let n = usize::try_from(self.len.div_ceil(8)).unwrap_or(usize::MAX);
        self.words.iter().flat_map(|w| w.to_le_bytes()).take(n)
    }

    /// Number of set bits (the bits past [`len`](Self::len) are clear).
    fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

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

    /// Sets bit `i` (below [`len`](Self::len)); true if it was clear.
    fn set(&mut self, i: u64) -> bool {
        if i >= self.len || self.get(i) {
            return false;
        }
        self.words[(i / 64) as usize] |= 1 << (i % 64);
        true
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
        Records {
            read_version: VERSION,
            ..Records::default()
        }
    }

    /// The map of an index built elsewhere, whose keys are the ids.
    pub fn identity() -> Records {
        Records {
            identity: true,
            ..Records::default()
        }
    }

    /// The map of keys `0..dense + ids.len()`: the first `dense` keys are
    /// their own ids, then these ids; with this liveness and these objects.
    fn from_parts(
        dense: u64,
        ids: Vec<i64>,
        alive: BitSet,
        live: u64,
        objs: HashMap<u64, Vec<u8>>,
    ) -> Records {
        Records {
            identity: false,
            dense,
            ids,
            alive,
            live,
            objs,
            generation: 0,
            read_version: VERSION,
            by_id: None,
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
    /// An object longer than the snapshot's length field holds (`u32`) is
    /// refused, the map unchanged.
    pub fn add(&mut self, id: i64, obj: Option<Vec<u8>>) -> Result<u64> {
        if self.identity {
            return Err(Error::invalid(
                "this index was built outside Python (no pyrecords.dat): it can be queried and \
                 entries deleted, but new entries can only be added by the tool that built it",
            ));
        }
        if let Some(len) = obj.as_ref().map(Vec::len).filter(|&l| u32::try_from(l).is_err()) {
            return Err(Error::invalid(format!(
                "a stored object of {len} bytes is more than the id map holds ({} bytes at most, \
                 its length is 32 bits in {RECORDS_FILE})",
                u32::MAX
            )));
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
        self.note_live(id, key);
        Ok(key)
    }

    /// Adds live `key` of `id` to the id → keys map, if built (nothing
    /// for a key of the dense prefix).
    fn note_live(&mut self, id: i64, key: u64) {
        if key < self.dense {
            return;
        }
        if let Some(m) = &mut self.by_id {
            m.entry(id).or_default().push(key);
        }
    }

    /// Removes `key` from the id → keys map, if built (nothing for a key
    /// of the dense prefix).
    fn note_dead(&mut self, key: u64) {
        if key < self.dense {
            return;
        }
        let Some(id) = self.stored_id(key) else {
            return;
        };
        if let Some(m) = &mut self.by_id {
            if let Some(keys) = m.get_mut(&id) {
                keys.retain(|&k| k != key);
                if keys.is_empty() {
                    m.remove(&id);
                }
            }
        }
    }

    /// The live keys of user `id` (an identity map: the id itself when it
    /// can be a key; the caller checks the tree holds it). The first call
    /// builds an id → keys map of every live key, which later changes keep
    /// in step.
    pub fn live_keys_of(&mut self, id: i64) -> Vec<u64> {
        if self.identity {
            return u64::try_from(id).map(|k| vec![k]).unwrap_or_default();
        }
        let mut keys: Vec<u64> = self.dense_key_of(id).into_iter().collect();
        keys.extend_from_slice(self.keys_beyond_dense(id));
        keys
    }

    /// The one live key of user `id`: `Ok(key)`, or `Err(n)` when `id`
    /// has `n` live keys, none or several (duplicates). As
    /// [`Records::live_keys_of`] without building a vector: the common
    /// case of an update by id.
    pub fn only_live_key(&mut self, id: i64) -> std::result::Result<u64, usize> {
        if self.identity {
            return u64::try_from(id).map_err(|_| 0);
        }
        let dense = self.dense_key_of(id);
        match (dense, self.keys_beyond_dense(id)) {
            (Some(k), []) => Ok(k),
            (None, [k]) => Ok(*k),
            (d, more) => Err(usize::from(d.is_some()) + more.len()),
        }
    }

    /// Key `id` itself when it lies in the dense prefix and is live.
    fn dense_key_of(&self, id: i64) -> Option<u64> {
        u64::try_from(id)
            .ok()
            .filter(|&k| k < self.dense && self.alive.get(k))
    }

    /// The live keys of `id` beyond the dense prefix, building the id →
    /// keys map first if needed.
    fn keys_beyond_dense(&mut self, id: i64) -> &[u64] {
        if self.by_id.is_none() {
            let mut m: HashMap<i64, Vec<u64>> = HashMap::new();
            for k in (self.dense..self.keys()).filter(|&k| self.alive.get(k)) {
                if let Some(id) = self.stored_id(k) {
                    m.entry(id).or_default().push(k);
                }
            }
            self.by_id = Some(m);
        }
        self.by_id
            .as_ref()
            .and_then(|m| m.get(&id))
            .map_or(&[], Vec::as_slice)
    }

    /// Forgets the last key allocated (an insert that the engine refused).
    pub fn undo_add(&mut self, key: u64) {
        if !self.identity && key + 1 == self.keys() {
            self.note_dead(key);
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
            self.note_dead(key);
        }
        if !self.objs.is_empty() {
            self.objs.remove(&key);
        }
    }

    /// Brings deleted `key` back to life (a crash recovery found it in the
    /// tree: its deletion did not survive); false if it was live or unknown.
    pub fn resurrect(&mut self, key: u64) -> bool {
        let back = !self.identity && self.alive.set(key);
        if back {
            self.live += 1;
            if let Some(id) = self.stored_id(key) {
                self.note_live(id, key);
            }
        }
        back
    }

    /// Drops the objects of deleted keys (replayed deletions keep them
    /// until the tree has confirmed them: see [`Records::replay`]).
    pub fn prune_objects(&mut self) {
        let alive = &self.alive;
        self.objs.retain(|&k, _| alive.get(k));
    }

    /// Whether `key` was ever allocated (live or deleted).
    pub fn knows(&self, key: u64) -> bool {
        self.identity || key < self.keys()
    }

    /// Applies the changes of the map's log, oldest first. A deletion keeps
    /// the key's object: the tree may still hold the key after a crash (its
    /// deletion not durable), and [`Records::prune_objects`] drops what
    /// the tree confirmed. An ADD must allocate the next key: anything else
    /// means a log that does not continue this snapshot.
    pub fn replay(&mut self, changes: &[log::Change]) -> Result<()> {
        self.replay_from(changes, log::LOG_FILE)
    }

    /// [`Records::replay`] of changes read from `source` (named in errors).
    fn replay_from(&mut self, changes: &[log::Change], source: &str) -> Result<()> {
        for c in changes {
            match c {
                log::Change::Add { key, id, obj } => {
                    if *key != self.keys() {
                        return Err(Error::corrupt(
                            None,
                            format!(
                                "{source}: adds key {key} where the map has {} keys: the log does not continue {RECORDS_FILE}",
                                self.keys()
                            ),
                        ));
                    }
                    self.add(*id, obj.clone())?;
                }
                log::Change::Remove { key } => {
                    if self.alive.clear(*key) {
                        self.live = self.live.saturating_sub(1);
                        self.note_dead(*key);
                    }
                }
            }
        }
        Ok(())
    }

    /// The generation of the snapshot the map continues.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The snapshot format the map was read from (older than the current
    /// one: the next checkpoint upgrades it).
    pub fn read_version(&self) -> u16 {
        self.read_version
    }

    /// Whether the map is an identity map (an index built outside Python).
    pub fn is_identity(&self) -> bool {
        self.identity
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
        if self.keys_are_ids(keys.clone())? {
            out.extend(keys.map(|k| k as i64));
            return Ok(());
        }
        for k in keys {
            out.push(self.id(k)?);
        }
        Ok(())
    }

    /// Whether `keys` are their records' user ids, so that none needs a
    /// lookup: in an identity map (a key that does not fit an `i64` is
    /// the error [`Records::id`] gives), or when every key is live and
    /// below the dense prefix (`from_arrays` with `arange`, nothing
    /// deleted).
    fn keys_are_ids(&self, mut keys: impl Iterator<Item = u64> + Clone) -> Result<bool> {
        if self.identity {
            return match keys.find(|&k| i64::try_from(k).is_err()) {
                Some(k) => self.id(k).map(|_| true),
                None => Ok(true),
            };
        }
        Ok(self.live == self.keys() && keys.all(|k| k < self.dense))
    }

    /// The user ids of the records with `keys`, as [`Records::extend_ids`]
    /// gives them, in the memory of `keys` (8 bytes an id: a query's
    /// answer is not held twice while it becomes ids).
    pub fn into_ids(&self, mut keys: Vec<u64>) -> Result<Vec<i64>> {
        if !self.keys_are_ids(keys.iter().copied())? {
            for k in &mut keys {
                *k = u64::from_ne_bytes(self.id(*k)?.to_ne_bytes());
            }
        }
        // Same size and alignment: collected in place.
        Ok(keys
            .into_iter()
            .map(|k| i64::from_ne_bytes(k.to_ne_bytes()))
            .collect())
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
        self.encode_as(VERSION, self.generation)
    }

    /// The file's bytes in format `version` (of the compact layout) with
    /// `generation`.
    fn encode_as(&self, version: u16, generation: u64) -> Vec<u8> {
        let beyond = self.ids.len();
        let bits = usize::try_from(self.keys().div_ceil(8)).unwrap_or(usize::MAX);
        let body: usize = self.objs.values().map(|o| 12 + o.len()).sum();
        let mut out = Vec::with_capacity(HEADER + 8 + 8 * beyond + bits + body + 4);
        self.encode_header(&mut out, version, generation);
        out.extend_from_slice(&self.dense.to_le_bytes());
        for id in &self.ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
        out.extend(self.alive.to_bits());
        self.encode_objects_and_crc(out)
    }

    /// The file's bytes in the column layout of versions 1 to 3 (`version`
    /// 2 or 3; the tests make version 1 from it), as builds before the
    /// compact layout wrote them.
    #[cfg(test)]
    pub(crate) fn encode_columns(&self, version: u16, generation: u64) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_header(&mut out, version, generation);
        for key in 0..self.keys() {
            let id = self.stored_id(key).unwrap_or_default();
            out.extend_from_slice(&id.to_le_bytes());
        }
        out.extend((0..self.keys()).map(|k| u8::from(self.alive.get(k))));
        self.encode_objects_and_crc(out)
    }

    /// Magic, version, generation and the key and object counts.
    fn encode_header(&self, out: &mut Vec<u8>, version: u16, generation: u64) {
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&[0u8; 6]);
        out.extend_from_slice(&generation.to_le_bytes());
        out.extend_from_slice(&self.keys().to_le_bytes());
        out.extend_from_slice(&(self.objs.len() as u64).to_le_bytes());
    }

    /// Appends the objects (ascending key) and the checksum to `out`.
    fn encode_objects_and_crc(&self, mut out: Vec<u8>) -> Vec<u8> {
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
        if data.len() < 32 || &data[..8] != MAGIC {
            return Err(bad("not a record map (bad magic or too short)"));
        }
        if crc32c::crc32c(data) != u32::from_le_bytes(*crc) {
            return Err(bad("checksum mismatch"));
        }
        let mut r = Reader { data, at: 8 };
        let version = r.u16()?;
        Error::check_version("record map", version, 1, LOGGED_VERSION)?;
        r.take(6)?;
        let generation = if version >= 2 { r.u64()? } else { 0 };
        let n = usize::try_from(r.u64()?).map_err(|_| bad("key count too large"))?;
        let o = r.u64()?;
        let (dense, ids, alive) = if version >= COMPACT_VERSION {
            decode_compact(&mut r, n)?
        } else {
            decode_columns(&mut r, n)?
        };
        let live = alive.count_ones();
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
        let mut map = Records::from_parts(dense, ids, alive, live, objs);
        map.generation = generation;
        map.read_version = version;
        Ok(map)
    }

    /// Writes the snapshot of the next generation in `dir` atomically and
    /// returns its size in bytes (nothing for an identity map). The map's
    /// log must then start over with [`generation`](Self::generation)
    /// ([`log::RecordLog::create`]): the snapshot holds everything logged.
    pub fn save(&mut self, dir: &Path) -> Result<u64> {
        if self.identity {
            return Ok(0);
        }
        self.generation += 1;
        let bytes = self.encode();
        if let Err(e) = write_atomic(dir, RECORDS_FILE, &bytes) {
            self.generation -= 1;
            return Err(e);
        }
        self.read_version = VERSION;
        Ok(bytes.len() as u64)
    }

    /// Writes the snapshot of `generation` (the one the store's next
    /// checkpoint names, above the map's) to `NEXT_FILE` in `dir` (format
    /// `LOGGED_VERSION`, atomically: write, sync, rename, sync the
    /// directory) and returns the file's size. The map keeps its generation
    /// until the store's checkpoint naming the new one is durable
    /// ([`Records::promote_next`]).
    ///
    /// Refused ([`Error::StoreFailed`], nothing written) while
    /// `NEXT_FILE` holds a snapshot of a generation above the map's other
    /// than `generation`: that of an earlier checkpoint whose store's
    /// checkpoint returned an error, which may have come after its
    /// superblock switch was durable (a failed mirror write or sync after
    /// it), so the store's durable state may name that snapshot although
    /// the store believes otherwise. It is the only copy of that
    /// generation; only a new open, which reads the store's durable
    /// checkpoint, can tell whether it counts ([`Records::load_logged`]).
    pub fn save_next(&self, dir: &Path, generation: u64) -> Result<u64> {
        self.check_no_pending_next(dir, generation)?;
        let bytes = self.encode_as(LOGGED_VERSION, generation);
        write_atomic(dir, NEXT_FILE, &bytes)?;
        Ok(bytes.len() as u64)
    }

    /// The refusal of [`Records::save_next`] of `generation` in `dir` when
    /// `NEXT_FILE` holds the snapshot of a checkpoint whose outcome is
    /// unknown (a generation above the map's, other than `generation`).
    fn check_no_pending_next(&self, dir: &Path, generation: u64) -> Result<()> {
        let pending = read_snapshot(dir, NEXT_FILE)?.map(|m| m.generation);
        match pending {
            Some(g) if g > self.generation && g != generation => Err(Error::StoreFailed(format!(
                "{}: a checkpoint that failed left the record map's snapshot of generation {g} here, and \
                 the store's checkpoint naming it may have become durable before the failure; it is the \
                 only copy of that generation, so no checkpoint overwrites it: reopen the index (its open \
                 takes the snapshot the store's durable checkpoint names)",
                dir.join(NEXT_FILE).display()
            ))),
            _ => Ok(()),
        }
    }

    /// After the store's checkpoint naming `generation` is durable: renames
    /// `NEXT_FILE` to [`RECORDS_FILE`] in `dir` (then syncs the
    /// directory) and takes `generation` as the map's.
    pub fn promote_next(&mut self, dir: &Path, generation: u64) -> Result<()> {
        finish_next(dir)?;
        self.generation = generation;
        self.read_version = LOGGED_VERSION;
        Ok(())
    }

    /// Finishes a [`Records::promote_next`] that failed after the store's
    /// checkpoint naming `generation` was durable (the rename, or the
    /// directory's sync after it): renames `pyrecords.next.dat` onto
    /// [`RECORDS_FILE`] when it is the snapshot of `generation`, else
    /// checks that [`RECORDS_FILE`] is (the rename was done), syncs the
    /// directory and takes `generation` as the map's. The next checkpoint
    /// runs it before it writes its own snapshot to `pyrecords.next.dat`, which
    /// would otherwise replace the one the store names.
    pub fn finish_promotion(&mut self, dir: &Path, generation: u64) -> Result<()> {
        let gen_of = |name: &str| -> Result<Option<u64>> {
            Ok(read_snapshot(dir, name)?.map(|m| m.generation))
        };
        if gen_of(NEXT_FILE)? == Some(generation) {
            finish_next(dir)?;
        } else {
            let held = gen_of(RECORDS_FILE)?;
            if held != Some(generation) {
                return Err(Error::corrupt(
                    None,
                    format!(
                        "the store's newest checkpoint names record-map generation {generation}, but neither \
                         {RECORDS_FILE} nor {NEXT_FILE} holds it"
                    ),
                )
                .in_file(dir.join(RECORDS_FILE)));
            }
            crate::manifest::sync_dir(dir)?;
        }
        self.generation = generation;
        self.read_version = LOGGED_VERSION;
        Ok(())
    }

    /// The map of the index in `dir` whose changes are in the store's log:
    /// the snapshot of `generation` (the one the store's newest checkpoint
    /// names) with `frames` applied (the store's CLIENT frames since that
    /// checkpoint, oldest first, each a change as `log::add_frame` and
    /// `log::remove_frame` write them). The snapshot is `pyrecords.dat`,
    /// or `pyrecords.next.dat` after a crash between the store's checkpoint
    /// and the rename (`writable`: the rename is finished); a
    /// `pyrecords.next.dat` of another generation is a checkpoint that did
    /// not happen (`writable`: removed). Anything else is an error naming
    /// both files and the generations.
    pub fn load_logged(
        dir: &Path,
        generation: u64,
        frames: &[Vec<u8>],
        writable: bool,
    ) -> Result<Records> {
        let current = read_snapshot(dir, RECORDS_FILE)?;
        let next = read_snapshot(dir, NEXT_FILE)?;
        let gen_of = |m: &Option<Records>| m.as_ref().map(|m| m.generation);
        let (cur_gen, next_gen) = (gen_of(&current), gen_of(&next));
        let mut map = match (current, next) {
            (Some(m), next) if m.generation == generation => {
                if writable && next.is_some() {
                    let path = dir.join(NEXT_FILE);
                    std::fs::remove_file(&path).map_err(|source| Error::Io {
                        path,
                        page: None,
                        source,
                    })?;
                }
                m
            }
            (_, Some(n)) if n.generation == generation => {
                if writable {
                    finish_next(dir)?;
                }
                n
            }
            _ => {
                let says = |g: Option<u64>| {
                    g.map_or("is missing".to_string(), |g| format!("holds generation {g}"))
                };
                return Err(Error::corrupt(
                    None,
                    format!(
                        "the store's newest checkpoint names record-map generation {generation}, but {RECORDS_FILE} {} and {NEXT_FILE} {}",
                        says(cur_gen),
                        says(next_gen)
                    ),
                )
                .in_file(dir.join(RECORDS_FILE)));
            }
        };
        let changes = frames
            .iter()
            .map(|f| {
                log::decode_frame(f).ok_or_else(|| {
                    Error::corrupt(
                        None,
                        "a frame of the store's log that is not a record-map change",
                    )
                    .in_file(dir.join(RECORDS_FILE))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        map.replay_from(&changes, "the store's log")
            .map_err(|e| e.in_file(dir.join(RECORDS_FILE)))?;
        map.prune_objects();
        Ok(map)
    }

    /// The map of the index in `dir`: its snapshot with the changes of its
    /// log applied (see `log`), or an identity map if it has no snapshot;
    /// with what was read of the log when it continues the snapshot
    /// (`None`: no log, or one the snapshot already holds).
    pub fn load(dir: &Path) -> Result<(Records, Option<log::Replay>)> {
        let path = dir.join(RECORDS_FILE);
        let mut map = match std::fs::read(&path) {
            Ok(bytes) => Records::decode(&bytes).map_err(|e| e.in_file(&path))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Records::identity(), None))
            }
            Err(source) => {
                return Err(Error::Io {
                    path,
                    page: None,
                    source,
                })
            }
        };
        let Some(replay) = log::read(&dir.join(log::LOG_FILE))? else {
            return Ok((map, None));
        };
        if replay.generation < map.generation {
            // Written before the snapshot, which holds its changes.
            return Ok((map, None));
        }
        if replay.generation > map.generation {
            return Err(Error::corrupt(
                None,
                format!(
                    "{}: generation {} is newer than {RECORDS_FILE}'s ({}): the snapshot is older than its log",
                    log::LOG_FILE,
                    replay.generation,
                    map.generation
                ),
            ));
        }
        map.replay(&replay.changes)?;
        Ok((map, Some(replay)))
    }
}

/// An `i64` from 8 little-endian bytes.
fn le_i64(c: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(c);
    i64::from_le_bytes(a)
}

/// The keys' columns of the compact layout (versions 4 and 5) for `n`
/// keys: the dense prefix, the ids after it and the liveness bits.
fn decode_compact(r: &mut Reader<'_>, n: usize) -> Result<(u64, Vec<i64>, BitSet)> {
    let bad = |why: &str| Error::corrupt(None, format!("{RECORDS_FILE}: {why}"));
    let dense = r.u64()?;
    let beyond = u64::try_from(n)
        .ok()
        .and_then(|n| n.checked_sub(dense))
        .ok_or_else(|| bad("dense prefix longer than the key count"))?;
    let id_bytes = usize::try_from(beyond)
        .ok()
        .and_then(|b| b.checked_mul(8))
        .filter(|&b| b <= r.data.len())
        .ok_or_else(|| bad("key count larger than the file"))?;
    let ids = r.take(id_bytes)?.chunks_exact(8).map(le_i64).collect();
    let len = n as u64;
    let alive = BitSet::from_bits(r.take(n.div_ceil(8))?, len)
        .ok_or_else(|| bad("liveness bits set past the last key"))?;
    Ok((dense, ids, alive))
}

/// The keys' columns of the column layout (versions 1 to 3) for `n` keys:
/// an id and a liveness byte per key. The prefix of keys that are their
/// own ids (all of them after `from_arrays` with `arange`) is counted, not
/// kept.
fn decode_columns(r: &mut Reader<'_>, n: usize) -> Result<(u64, Vec<i64>, BitSet)> {
    if n.checked_mul(9).is_none_or(|b| b > r.data.len()) {
        return Err(Error::corrupt(
            None,
            format!("{RECORDS_FILE}: key count larger than the file"),
        ));
    }
    let id_bytes = r.take(8 * n)?;
    let dense = id_bytes
        .chunks_exact(8)
        .enumerate()
        .position(|(k, c)| i64::try_from(k).map_or(true, |k| le_i64(c) != k))
        .unwrap_or(n);
    let ids = id_bytes[8 * dense..].chunks_exact(8).map(le_i64).collect();
    Ok((dense as u64, ids, BitSet::from_bytes(r.take(n)?)))
}

/// The snapshot `name` in `dir` (`None` when there is no such file).
fn read_snapshot(dir: &Path, name: &str) -> Result<Option<Records>> {
    let path = dir.join(name);
    match std::fs::read(&path) {
        Ok(bytes) => Records::decode(&bytes)
            .map(Some)
            .map_err(|e| e.in_file(&path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Io {
            path,
            page: None,
            source,
        }),
    }
}

/// Renames [`NEXT_FILE`] to [`RECORDS_FILE`] in `dir` and syncs the directory.
fn finish_next(dir: &Path) -> Result<()> {
    let (from, to) = (dir.join(NEXT_FILE), dir.join(RECORDS_FILE));
    std::fs::rename(&from, &to).map_err(|source| Error::Io {
        path: from,
        page: None,
        source,
    })?;
    crate::manifest::sync_dir(dir)
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

#[cfg(test)]
mod tests;
