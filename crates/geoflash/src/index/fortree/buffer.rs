//! The FOR-tree's node buffer: decoded nodes by page id, dirty or clean,
//! nodes created since the last flush under provisional ids, and the
//! choice of the flushing units (see the module documentation of
//! [`super`]).
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::index::diff;
use crate::page::Node;
use crate::page_id::PageId;
use crate::store::accounting::{changes_bytes, node_bytes};
use crate::store::EntryChange;

/// Provisional ids of nodes not yet in the store start here (far above any
/// page of a device).
pub(super) const VIRTUAL_BASE: PageId = 1 << 62;

/// True for a provisional id.
pub(super) fn is_virtual(id: PageId) -> bool {
    id >= VIRTUAL_BASE
}

#[derive(Debug, Clone)]
struct Slot {
    /// The current version.
    node: Arc<Node>,
    /// True when the store holds a version of the node.
    stored: bool,
    /// Keys whose entries differ from the stored version (upserted or removed).
    changed: BTreeSet<u64>,
    dirty: bool,
    /// Changes since the last flush.
    updates: u64,
    /// Operation tick of the last change.
    last_update: u64,
    /// Use clock of the last access (for dropping clean nodes).
    last_use: u64,
}

impl Slot {
    /// The node and, for a changed stored node, its changed keys (charged
    /// as buffered changes by the shared accounting function).
    fn bytes(&self) -> usize {
        let b = node_bytes(&self.node);
        if self.changed.is_empty() {
            b
        } else {
            b + changes_bytes(1, self.changed.len())
        }
    }
}

/// The buffer.
#[derive(Debug, Default)]
pub(super) struct Buffer {
    slots: HashMap<PageId, Slot>,
    /// [`Slot::bytes`] of every slot, kept as slots change (so that the
    /// peak can be noted at every read without a pass over the buffer).
    bytes: usize,
    /// Pages of deleted nodes, released at the next flush.
    deleted: Vec<PageId>,
    next_virtual: u64,
    clock: u64,
}

impl Buffer {
    /// Bytes charged for every buffered node and the changed keys of stored ones.
    pub(super) fn bytes(&self) -> usize {
        #[cfg(test)]
        assert_eq!(
            self.bytes,
            self.slots.values().map(Slot::bytes).sum::<usize>(),
            "the FOR-tree buffer's byte count drifted"
        );
        self.bytes
    }

    /// What [`Self::bytes`] would be if every node were charged for the
    /// entries its vector has room for (its capacity) instead of those it
    /// holds: the memory the buffer's nodes take, measured as it charges them.
    #[cfg(test)]
    pub(super) fn allocated_bytes(&self) -> usize {
        self.slots
            .values()
            .map(|s| {
                let b = crate::store::accounting::node_bytes_for(s.node.entries.capacity());
                if s.changed.is_empty() {
                    b
                } else {
                    b + changes_bytes(1, s.changed.len())
                }
            })
            .sum()
    }

    /// Buffered nodes.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// [`node_bytes`] of the buffered node `id` (0 when it is not buffered).
    pub(super) fn node_bytes_of(&self, id: PageId) -> usize {
        self.slots.get(&id).map_or(0, |s| node_bytes(&s.node))
    }

    pub(super) fn contains(&self, id: PageId) -> bool {
        self.slots.contains_key(&id)
    }

    /// The buffered version of `id`, if any.
    pub(super) fn get(&mut self, id: PageId) -> Option<Arc<Node>> {
        self.clock += 1;
        let clock = self.clock;
        self.slots.get_mut(&id).map(|s| {
            s.last_use = clock;
            Arc::clone(&s.node)
        })
    }

    /// Keeps a node just read from the store.
    pub(super) fn insert_clean(&mut self, id: PageId, node: Arc<Node>) {
        self.clock += 1;
        let slot = Slot {
            node,
            stored: true,
            changed: BTreeSet::new(),
            dirty: false,
            updates: 0,
            last_update: 0,
            last_use: self.clock,
        };
        self.bytes += slot.bytes();
        if let Some(old) = self.slots.insert(id, slot) {
            self.bytes -= old.bytes();
        }
    }

    /// Replaces the node `id` (which must be buffered; else it is added as new).
    /// The node's entries are kept in a vector of their length: the buffer
    /// charges entries ([`node_bytes`]), and a vector grown by pushes holds
    /// up to twice its entries (at 16 MiB, 26 MB of vectors for 16 MB charged).
    pub(super) fn put(&mut self, id: PageId, mut node: Node, tick: u64) {
        node.entries.shrink_to_fit();
        self.clock += 1;
        let clock = self.clock;
        let before = self.slots.get(&id).map_or(0, Slot::bytes);
        let slot = self.slots.entry(id).or_insert_with(|| Slot {
            node: Arc::new(Node {
                level: node.level,
                entries: Vec::new(),
            }),
            stored: !is_virtual(id),
            changed: BTreeSet::new(),
            dirty: true,
            updates: 0,
            last_update: tick,
            last_use: clock,
        });
        if slot.stored {
            for c in diff(&slot.node.entries, &node.entries) {
                slot.changed.insert(match c {
                    EntryChange::Upsert(e) => e.key,
                    EntryChange::Remove(k) => k,
                });
            }
        }
        slot.node = Arc::new(node);
        slot.dirty = true;
        slot.updates += 1;
        slot.last_update = tick;
        slot.last_use = clock;
        let after = slot.bytes();
        self.bytes = self.bytes - before + after;
    }

    /// A new node under a provisional id.
    pub(super) fn create(&mut self, node: Node, tick: u64) -> PageId {
        let id = VIRTUAL_BASE + self.next_virtual;
        self.next_virtual += 1;
        self.put(id, node, tick);
        id
    }

    /// Deletes node `id`: a provisional node simply disappears, a stored one
    /// is released at the next flush.
    pub(super) fn remove(&mut self, id: PageId) {
        if let Some(old) = self.slots.remove(&id) {
            self.bytes -= old.bytes();
        }
        if !is_virtual(id) {
            self.deleted.push(id);
        }
    }

    /// True when a flush has something to do besides dirty stored nodes.
    pub(super) fn has_pending(&self) -> bool {
        !self.deleted.is_empty() || self.slots.keys().any(|&id| is_virtual(id))
    }

    pub(super) fn take_deleted(&mut self) -> Vec<PageId> {
        std::mem::take(&mut self.deleted)
    }

    /// Provisional nodes, lowest level first (children before parents).
    pub(super) fn virtual_ids_by_level(&self) -> Vec<PageId> {
        let mut v: Vec<(u16, PageId)> = self
            .slots
            .iter()
            .filter(|(id, _)| is_virtual(**id))
            .map(|(id, s)| (s.node.level, *id))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, id)| id).collect()
    }

    /// Dirty stored nodes, by page id.
    pub(super) fn dirty_real(&self) -> Vec<PageId> {
        let mut v: Vec<PageId> = self
            .slots
            .iter()
            .filter(|(id, s)| s.dirty && !is_virtual(**id))
            .map(|(id, _)| *id)
            .collect();
        v.sort_unstable();
        v
    }

    /// Renames provisional ids after they got their pages: their slots
    /// become clean (the store now holds them) and every entry naming them
    /// is rewritten.
    pub(super) fn rename(&mut self, map: &HashMap<PageId, PageId>) {
        for (v, real) in map {
            if let Some(mut slot) = self.slots.remove(v) {
                slot.dirty = false;
                slot.updates = 0;
                self.slots.insert(*real, slot);
            }
        }
        for slot in self.slots.values_mut() {
            if slot.node.level == 0 || !slot.node.entries.iter().any(|e| map.contains_key(&e.key)) {
                continue;
            }
            let mut node = Node::clone(&slot.node);
            for e in &mut node.entries {
                if let Some(r) = map.get(&e.key) {
                    if slot.stored {
                        slot.changed.remove(&e.key);
                        slot.changed.insert(*r);
                    }
                    e.key = *r;
                }
            }
            node.entries.sort_unstable_by_key(|e| e.key);
            slot.node = Arc::new(node);
            slot.dirty = true;
        }
        // Materialised nodes hold what the store now holds (renamed above
        // when they referred to other materialised nodes).
        for real in map.values() {
            if let Some(slot) = self.slots.get_mut(real) {
                slot.stored = true;
                slot.changed.clear();
                slot.dirty = false;
                slot.updates = 0;
            }
        }
        // Renaming changed the changed keys of many slots: counted again
        // (once per flush that created nodes).
        self.bytes = self.slots.values().map(Slot::bytes).sum();
    }

    /// The level of `id` and the entry-level changes from the stored version
    /// to the current one (`None` when `id` is not buffered or not stored).
    pub(super) fn changes_of(&self, id: PageId) -> Option<(u16, Vec<EntryChange>)> {
        let slot = self.slots.get(&id)?;
        if !slot.stored {
            return None;
        }
        let entries = &slot.node.entries;
        let changes = slot
            .changed
            .iter()
            .map(|k| match entries.binary_search_by_key(k, |e| e.key) {
                Ok(i) => entries
                    .get(i)
                    .map_or(EntryChange::Remove(*k), |e| EntryChange::Upsert(*e)),
                Err(_) => EntryChange::Remove(*k),
            })
            .collect();
        Some((slot.node.level, changes))
    }

    /// After a write: the stored version is the current one.
    pub(super) fn mark_clean(&mut self, id: PageId) {
        if let Some(slot) = self.slots.get_mut(&id) {
            self.bytes -= slot.bytes();
            slot.changed.clear();
            self.bytes += slot.bytes();
            slot.dirty = false;
            slot.updates = 0;
        }
    }

    /// Drops clean nodes, least recently used first, until at most `target` bytes remain.
    pub(super) fn evict_clean(&mut self, target: usize) {
        let mut bytes = self.bytes();
        if bytes <= target {
            return;
        }
        let mut clean: Vec<(u64, PageId)> = self
            .slots
            .iter()
            .filter(|(_, s)| !s.dirty)
            .map(|(id, s)| (s.last_use, *id))
            .collect();
        clean.sort_unstable();
        for (_, id) in clean {
            if bytes <= target {
                break;
            }
            if let Some(s) = self.slots.remove(&id) {
                bytes = bytes.saturating_sub(s.bytes());
            }
        }
        self.bytes = bytes;
    }

    /// The dirty stored nodes a flush writes: flushing units of `unit`
    /// consecutive page ids, coldest with most updates first (score =
    /// updates × (ticks since the unit's last update + 1)), until the
    /// buffer would hold at most `target` bytes once written nodes are
    /// dropped. Provisional nodes are always written and counted so.
    pub(super) fn choose_flush(&self, target: usize, unit: usize, now: u64) -> Vec<PageId> {
        let mut bytes = self.bytes();
        for (id, s) in &self.slots {
            if is_virtual(*id) {
                bytes = bytes.saturating_sub(s.bytes());
            }
        }
        // unit number → (updates, last update, members)
        let mut units: BTreeMap<u64, (u64, u64, Vec<PageId>)> = BTreeMap::new();
        for (id, s) in &self.slots {
            if s.dirty && !is_virtual(*id) {
                let u = units.entry(id / unit.max(1) as u64).or_default();
                u.0 += s.updates;
                u.1 = u.1.max(s.last_update);
                u.2.push(*id);
            }
        }
        let mut ranked: Vec<(f64, u64, Vec<PageId>)> = units
            .into_iter()
            .map(|(n, (updates, last, members))| {
                let age = now.saturating_sub(last) as f64 + 1.0;
                (updates as f64 * age, n, members)
            })
            .collect();
        // Highest score first; ties by lowest unit number.
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut out = Vec::new();
        for (_, _, mut members) in ranked {
            if bytes <= target && !out.is_empty() {
                break;
            }
            for id in &members {
                if let Some(s) = self.slots.get(id) {
                    bytes = bytes.saturating_sub(s.bytes());
                }
            }
            members.sort_unstable();
            out.extend(members);
        }
        out
    }
}
