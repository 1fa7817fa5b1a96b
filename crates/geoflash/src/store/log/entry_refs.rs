//! Entry references: the compact log's dictionary of entries already logged
//! (superblock version 5, [`super::LogConfig::entry_refs`]).
//!
//! An R*-tree build moves most entries after they were inserted: a forced
//! reinsertion takes 10 % (the paper: 30 %) of an overflowing node's entries to other nodes,
//! and a split copies half of a node into a new one. Without references
//! the log carries every moved entry's 32-byte rectangle again. With them,
//! a NEW or MOD record names an entry whose content equals the one last
//! logged with the same level and key in the live region by its key alone
//! (tag [`TAG_SAME`](super::payload) and the key, about 4 bytes instead of
//! about 40).
//!
//! **The invariant.** The writer's [`EntryMemo`] maps (level, key) to the
//! content the writer last appended with that level and key *in the live
//! region*; [`resolve`] rebuilds the same map from the region's records in
//! stream order and replaces every reference by that content. The two
//! agree because:
//! - the memo only learns from records that reached the log (a store
//!   [`EntryMemo::clear`]s it when an append fails), in append order;
//! - it is cleared whenever the live region starts afresh (a compaction,
//!   a checkpoint or a restart switches to a new epoch, see
//!   [`EntryMemo::for_epoch`]), so a reference never points before the
//!   region the scan starts from, nor at a record a compaction dropped;
//! - content is compared bit for bit (`-0.0` is not `0.0`);
//! - a log is a prefix after a crash: a surviving reference's target is
//!   older, so it survived too.
//!
//! Scans resolve references before anything else looks at the records
//! ([`super::reader`]), so restart, compaction and the read-only reader
//! see plain NEW and MOD payloads, and a compaction writes the survivors
//! out in full. Only the eFIND store writes references; FAST logs are
//! created without them (version 4).
use crate::page::Entry;
use crate::page_id::IdMap;
#[cfg(test)]
use crate::Result;

#[cfg(test)]
use super::{PayloadCodec, Record, RecordKind};

/// Bytes one slot of a memo's hash map takes: the key, the content and
/// the map's control byte.
const SLOT_BYTES: usize = 8 + std::mem::size_of::<Content>() + 1;

/// The most entries a memo of `bytes` holds: as many as a hash map whose
/// slots take at most `bytes` holds (its slot count is a power of two,
/// filled to 7/8), so that the memory is what was given whatever the
/// count (and half as much again while the map grows into its last size).
fn entries_within(bytes: usize) -> usize {
    let slots = bytes / SLOT_BYTES;
    if slots < 8 {
        return 1;
    }
    let slots = 1usize << (usize::BITS - 1 - slots.leading_zeros());
    slots / 8 * 7
}

/// An entry's content compared bit for bit: the rectangle's four
/// coordinates and the payload.
type Content = [u64; 5];

/// The content of `e`, bit for bit.
pub(super) fn content(e: &Entry) -> Content {
    let [a, b, c, d] = e.rect.to_bits();
    [a, b, c, d, e.payload]
}

/// The writer's side: the content last logged for each (level, key) in the
/// live region. See the [module docs](self).
#[derive(Debug, Default, Clone)]
pub struct EntryMemo {
    /// One map per level (index = level).
    levels: Vec<IdMap<Content>>,
    /// Entries held.
    len: usize,
    /// At most this many entries: a full memo is cleared (the next records
    /// log their entries in full and fill it again).
    max_entries: usize,
    /// The log epoch the memo describes.
    epoch: Option<u64>,
}

impl EntryMemo {
    /// An empty memo of at most `bytes` of memory (at least one entry;
    /// see [`entries_within`]).
    pub fn with_capacity_bytes(bytes: usize) -> Self {
        EntryMemo {
            max_entries: entries_within(bytes),
            ..EntryMemo::default()
        }
    }

    /// An empty memo of at most `n` entries (tests).
    #[cfg(test)]
    pub fn with_max_entries(n: usize) -> Self {
        EntryMemo {
            max_entries: n.max(1),
            ..EntryMemo::default()
        }
    }

    #[cfg(test)]
    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    /// Whether the memo holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets everything (always safe: later records log entries in full).
    pub fn clear(&mut self) {
        self.levels.clear();
        self.len = 0;
        self.epoch = None;
    }

    /// The memo for the log's live `epoch`: cleared if it described another.
    pub fn for_epoch(&mut self, epoch: u64) -> &mut Self {
        if self.epoch != Some(epoch) {
            self.clear();
            self.epoch = Some(epoch);
        }
        self
    }

    /// Notes that `e` at `level` is being logged; true when the content
    /// last logged with its level and key is the same (the record may name
    /// it by key).
    pub(super) fn note(&mut self, level: u16, e: &Entry) -> bool {
        let c = content(e);
        let l = usize::from(level);
        if self.levels.len() <= l {
            self.levels.resize_with(l + 1, IdMap::default);
        }
        let Some(map) = self.levels.get_mut(l) else {
            return false;
        };
        match map.insert(e.key, c) {
            Some(old) => old == c,
            None => {
                self.len += 1;
                if self.len > self.max_entries {
                    let epoch = self.epoch;
                    self.clear();
                    self.epoch = epoch;
                    // The entry being logged is written in full (it was
                    // not known), so the cleared memo may start with it.
                    self.note(level, e);
                }
                false
            }
        }
    }
}

/// The reader's side: the content last seen for each (level, key), rebuilt
/// from the records in stream order.
#[derive(Debug, Default)]
pub(super) struct Resolver {
    levels: Vec<IdMap<Entry>>,
}

impl Resolver {
    /// Remembers `e` at `level` (a NEW entry, or an upsert written in full).
    pub(super) fn learn(&mut self, level: u16, e: Entry) {
        let l = usize::from(level);
        if self.levels.len() <= l {
            self.levels.resize_with(l + 1, IdMap::default);
        }
        if let Some(map) = self.levels.get_mut(l) {
            map.insert(e.key, e);
        }
    }

    /// The entry last seen with `level` and `key`.
    pub(super) fn lookup(&self, level: u16, key: u64) -> Option<Entry> {
        self.levels
            .get(usize::from(level))
            .and_then(|m| m.get(&key))
            .copied()
    }
}

/// Replaces the payload of every NEW and MOD record of `records` (a live
/// region's records in stream order, base records first) by the same
/// payload without references. A reference whose target is not among the
/// earlier records is damage, reported naming the record.
#[cfg(test)]
pub(crate) fn resolve(records: &mut [Record], codec: PayloadCodec) -> Result<()> {
    let mut resolver = Resolver::default();
    for rec in records.iter_mut() {
        if matches!(rec.kind, RecordKind::New | RecordKind::Mod) {
            rec.payload = codec.resolve_refs(rec, &mut resolver)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
