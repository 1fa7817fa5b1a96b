//! The tree modifications table of FAST (Section 4 of the paper):
//! `node id -> (status, content)`, with
//!
//! - **NEW**: the complete in-memory node (created since its last flush);
//! - **MOD**: the list of modifications `(timestamp, change)` in arrival
//!   order, repeats allowed as in the paper (a key changed twice appears
//!   twice; RetrieveNode applies the list in order, so the last one wins).
//!   Changes address entries by key, per the node-store contract, where the
//!   paper's GiST implementation used slots;
//! - **DEL**: nothing (the node was deleted).
//!
//! Memory, per the shared accounting ([`crate::store::accounting`]): a NEW
//! row costs the bytes of its decoded node ([`node_bytes`]), a MOD row
//! [`changes_bytes`]`(1, list length)`, a DEL row [`changes_bytes`]`(1, 0)`.
//!
//! The list in memory is compacted, the paper's list accounted: once a
//! MOD list has doubled since it was last compacted (and holds at least
//! [`COMPACT_AT`] modifications), only the last modification of each key
//! is kept, sorted by key ([`compact`]). A key's last change alone decides
//! it (an upsert leaves the entry, a removal leaves none, whatever came
//! before), so RetrieveNode builds the same node; the row's bytes still
//! count every modification of the paper's list, so the table fills, and
//! FAST flushes, exactly when the paper's would (the seed workloads' I/O).
//! Without it a node changed by every operation (the path to where moving
//! objects go) kept a list as long as the operations since its last flush,
//! all applied at each of its retrievals: 30,000 moves of 1,000 boxes on
//! FAST took over 10 minutes of CPU, against under a second on eFIND.
//!
//! Each row also counts its buffered *updates* (what FAST's FlushHeap
//! orders units by): 1 for a creation or a deletion, plus one per
//! entry-level change since the last flush.

use crate::page::Node;
use crate::storage::PageId;
use crate::store::accounting::{changes_bytes, node_bytes};
use crate::store::EntryChange;
use crate::{Error, Result};

/// One modification of a MOD row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Modification {
    /// Logical time of arrival (the table's clock).
    pub timestamp: u64,
    /// The change.
    pub change: EntryChange,
}

/// Status and content of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    /// Created since its last flush: the whole node.
    New(Node),
    /// Modified: the level and the modifications in arrival order.
    Mod {
        /// Node level.
        level: u16,
        /// Modifications in arrival order, compacted: the first `sorted`
        /// are one per key, ascending by key (see the module
        /// documentation), the rest arrived since.
        mods: Vec<Modification>,
        /// How many of `mods` are compacted (sorted by key, one per key).
        sorted: usize,
        /// Modifications the paper's list would hold: every one since the
        /// row was made (what the row's bytes count).
        listed: usize,
    },
    /// Deleted: nothing is written for it.
    Del {
        /// Level the node had.
        level: u16,
    },
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableEntry {
    /// Status and content.
    pub row: Row,
    /// Buffered updates (see the module documentation).
    pub updates: u64,
    /// Timestamp of the last update.
    pub last_update: u64,
}

impl TableEntry {
    /// Bytes the row costs (shared accounting).
    pub fn bytes(&self) -> usize {
        match &self.row {
            Row::New(n) => node_bytes(n),
            Row::Mod { listed, .. } => changes_bytes(1, *listed),
            Row::Del { .. } => changes_bytes(1, 0),
        }
    }

    /// The level of the node.
    pub fn level(&self) -> u16 {
        match &self.row {
            Row::New(n) => n.level,
            Row::Mod { level, .. } | Row::Del { level } => *level,
        }
    }
}

/// Applies `changes` in order to the entries of `node` (kept sorted by key).
pub fn apply(node: &mut Node, changes: impl IntoIterator<Item = EntryChange>) {
    for c in changes {
        crate::store::mem::apply_changes(&mut node.entries, std::slice::from_ref(&c));
    }
}

/// Applies a MOD row's list to the stored version of its node: the
/// compacted part (distinct keys, ascending: one pass over the node) and
/// then the modifications that arrived since, in order.
pub fn apply_mods(node: &mut Node, mods: &[Modification], sorted: usize) {
    let (compacted, since) = mods.split_at(sorted.min(mods.len()));
    let compacted: Vec<EntryChange> = compacted.iter().map(|m| m.change).collect();
    crate::store::mem::apply_changes(&mut node.entries, &compacted);
    apply(node, since.iter().map(|m| m.change));
}

/// The length from which a MOD list is compacted (once it has doubled
/// since its last compaction).
pub const COMPACT_AT: usize = 64;

/// Keeps the last modification of each key, sorted by key (the list a
/// MOD row keeps in memory: see the module documentation).
pub fn compact(mods: &mut Vec<Modification>) {
    let key = |m: &Modification| match m.change {
        EntryChange::Upsert(e) => e.key,
        EntryChange::Remove(k) => k,
    };
    // A stable sort keeps each key's modifications in arrival order: the
    // last of each run is the one that decides it.
    mods.sort_by_key(key);
    let mut kept: Vec<Modification> = Vec::with_capacity(mods.len());
    for m in mods.drain(..) {
        match kept.last_mut() {
            Some(last) if key(last) == key(&m) => *last = m,
            _ => kept.push(m),
        }
    }
    *mods = kept;
}

/// The tree modifications table.
#[derive(Debug, Default, Clone)]
pub struct ModTable {
    rows: crate::page_id::IdMap<TableEntry>,
    bytes: usize,
}

/// What a table change did to a row's updates (for the FlushHeap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Touch {
    /// Updates the row had before (0 if it had none).
    pub before: u64,
    /// Updates it has now (0 if the row is gone).
    pub after: u64,
}

impl ModTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes of the table (shared accounting).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The row of `id`.
    pub fn get(&self, id: PageId) -> Option<&TableEntry> {
        self.rows.get(&id)
    }

    /// Every page id, ascending.
    pub fn ids(&self) -> Vec<PageId> {
        let mut v: Vec<PageId> = self.rows.keys().copied().collect();
        v.sort_unstable();
        v
    }

    fn put(&mut self, id: PageId, row: TableEntry) -> u64 {
        let before = self.remove(id).map_or(0, |r| r.updates);
        self.bytes += row.bytes();
        self.rows.insert(id, row);
        before
    }

    /// A created node (entries sorted by key): status NEW.
    pub fn create(&mut self, id: PageId, node: Node, ts: u64) -> Touch {
        let before = self.put(
            id,
            TableEntry {
                row: Row::New(node),
                updates: 1,
                last_update: ts,
            },
        );
        Touch { before, after: 1 }
    }

    /// Entry-level changes of node `id`: applied to a NEW node, appended to
    /// a MOD list, or a new MOD row. An error for a deleted node.
    pub fn modify(
        &mut self,
        id: PageId,
        level: u16,
        changes: &[EntryChange],
        ts: u64,
    ) -> Result<Touch> {
        let n = changes.len() as u64;
        if matches!(self.rows.get(&id).map(|r| &r.row), Some(Row::Del { .. })) {
            return Err(Error::invalid(format!(
                "no node at page {id}: the node was deleted"
            )));
        }
        let mut row = match self.remove(id) {
            Some(r) => r,
            None => TableEntry {
                row: Row::Mod {
                    level,
                    mods: Vec::new(),
                    sorted: 0,
                    listed: 0,
                },
                updates: 0,
                last_update: ts,
            },
        };
        let before = row.updates;
        match &mut row.row {
            Row::New(node) => apply(node, changes.iter().copied()),
            Row::Mod {
                mods,
                sorted,
                listed,
                ..
            } => {
                mods.extend(changes.iter().map(|&change| Modification {
                    timestamp: ts,
                    change,
                }));
                *listed = listed.saturating_add(changes.len());
                if mods.len() >= COMPACT_AT.max(2 * *sorted) {
                    compact(mods);
                    *sorted = mods.len();
                }
            }
            Row::Del { .. } => {}
        }
        row.updates = row.updates.saturating_add(n);
        row.last_update = ts;
        let after = row.updates;
        self.bytes += row.bytes();
        self.rows.insert(id, row);
        Ok(Touch { before, after })
    }

    /// Deletion of node `id`: a NEW row (never flushed) leaves the table,
    /// any other becomes DEL.
    pub fn delete(&mut self, id: PageId, level: u16, ts: u64) -> Touch {
        match self.remove(id) {
            Some(TableEntry {
                row: Row::New(_),
                updates,
                ..
            }) => Touch {
                before: updates,
                after: 0,
            },
            other => {
                let before = other.map_or(0, |r| r.updates);
                let after = before.saturating_add(1);
                self.put(
                    id,
                    TableEntry {
                        row: Row::Del { level },
                        updates: after,
                        last_update: ts,
                    },
                );
                Touch { before, after }
            }
        }
    }

    /// Removes the row of `id` (after a flush).
    pub fn remove(&mut self, id: PageId) -> Option<TableEntry> {
        let row = self.rows.remove(&id)?;
        self.bytes -= row.bytes();
        Some(row)
    }

    /// Empties the table.
    pub fn clear(&mut self) {
        self.rows.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geom::Rect;
    use crate::page::Entry;

    fn e(k: u64, x: f64) -> Entry {
        Entry {
            key: k,
            rect: Rect::new(x, x, x + 1.0, x + 1.0).unwrap(),
            payload: 0,
        }
    }

    #[test]
    fn mod_lists_keep_arrival_order_and_repeats() {
        let mut t = ModTable::new();
        let ch1 = [EntryChange::Upsert(e(5, 1.0)), EntryChange::Remove(2)];
        let ch2 = [EntryChange::Upsert(e(5, 3.0))];
        assert_eq!(
            t.modify(9, 0, &ch1, 1).unwrap(),
            Touch {
                before: 0,
                after: 2
            }
        );
        assert_eq!(
            t.modify(9, 0, &ch2, 2).unwrap(),
            Touch {
                before: 2,
                after: 3
            }
        );
        let row = t.get(9).unwrap();
        let Row::Mod { mods, .. } = &row.row else {
            panic!("not MOD")
        };
        // Key 5 appears twice, in arrival order.
        assert_eq!(mods.len(), 3);
        assert_eq!(mods[0].timestamp, 1);
        assert_eq!(mods[2].change, ch2[0]);
        assert_eq!(t.bytes(), changes_bytes(1, 3));
        // Applying the list: the last version wins, removals drop.
        let mut n = Node {
            level: 0,
            entries: vec![e(1, 0.0), e(2, 0.0), e(5, 0.0)],
        };
        apply(&mut n, mods.iter().map(|m| m.change));
        assert_eq!(n.entries, vec![e(1, 0.0), e(5, 3.0)]);
    }

    /// The changes `(key, upsert, x)` describe: an upsert of the entry at
    /// `x`, or the removal of the key.
    fn changes_of(batch: &[(u64, bool, u8)]) -> Vec<EntryChange> {
        batch
            .iter()
            .map(|&(k, upsert, x)| {
                if upsert {
                    EntryChange::Upsert(e(k, f64::from(x)))
                } else {
                    EntryChange::Remove(k)
                }
            })
            .collect()
    }

    /// A MOD row modified many times retrieves the node the paper's whole
    /// list gives, keeps at most about twice its distinct keys in memory
    /// (before the compaction: every modification since the row was made)
    /// and counts every modification in its bytes.
    fn check_compaction(stored: &[u64], batches: &[Vec<(u64, bool, u8)>]) {
        let mut t = ModTable::new();
        let mut all: Vec<EntryChange> = Vec::new();
        let mut keys = std::collections::BTreeSet::new();
        for (i, batch) in batches.iter().enumerate() {
            keys.extend(batch.iter().map(|c| c.0));
            let changes = changes_of(batch);
            t.modify(7, 0, &changes, i as u64).unwrap();
            all.extend(&changes);
            let Row::Mod {
                mods,
                sorted,
                listed,
                ..
            } = &t.get(7).unwrap().row
            else {
                panic!("not MOD")
            };
            assert_eq!(*listed, all.len());
            assert_eq!(t.bytes(), changes_bytes(1, all.len()));
            assert!(
                mods.len() < COMPACT_AT.max(2 * keys.len()) + batch.len(),
                "{} modifications kept for {} keys",
                mods.len(),
                keys.len()
            );
            let node = Node {
                level: 0,
                entries: stored.iter().map(|&k| e(k, 100.0)).collect(),
            };
            let mut want = node.clone();
            apply(&mut want, all.iter().copied());
            let mut got = node;
            apply_mods(&mut got, mods, *sorted);
            assert_eq!(got, want, "after {} modifications", all.len());
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            crate::testenv::proptest_cases()
        ))]
        #[test]
        fn compacted_mod_lists_retrieve_what_the_whole_list_gives(
            stored in proptest::collection::btree_set(0u64..40, 0..30),
            batches in proptest::collection::vec(
                proptest::collection::vec((0u64..40, proptest::bool::ANY, 0u8..4), 1..5),
                1..200,
            ),
        ) {
            let stored: Vec<u64> = stored.into_iter().collect();
            check_compaction(&stored, &batches);
        }
    }

    /// The workload that found it: a node changed by each of 30,000
    /// operations (1,000 objects moved in turn into it) keeps a list of
    /// about its distinct keys, not of its operations.
    #[test]
    fn a_node_changed_by_every_operation_keeps_a_short_list() {
        let batches: Vec<Vec<(u64, bool, u8)>> = (0..30_000u64)
            .map(|i| {
                vec![
                    (i % 1000, true, (i % 4) as u8),
                    ((i + 500) % 1000, false, 0),
                ]
            })
            .collect();
        check_compaction(&[1, 2, 3], &batches[..300]);
        let mut t = ModTable::new();
        for (i, b) in batches.iter().enumerate() {
            t.modify(1, 0, &changes_of(b), i as u64).unwrap();
        }
        let Row::Mod { mods, listed, .. } = &t.get(1).unwrap().row else {
            panic!("not MOD")
        };
        assert_eq!(*listed, 60_000);
        assert!(
            mods.len() <= 2 * 1000 + 2,
            "{} modifications kept",
            mods.len()
        );
    }

    #[test]
    fn new_rows_absorb_changes_and_leave_on_delete() {
        let mut t = ModTable::new();
        t.create(
            3,
            Node {
                level: 1,
                entries: vec![e(1, 0.0)],
            },
            1,
        );
        t.modify(3, 1, &[EntryChange::Upsert(e(0, 2.0))], 2)
            .unwrap();
        let Row::New(n) = &t.get(3).unwrap().row else {
            panic!("not NEW")
        };
        assert_eq!(n.entries, vec![e(0, 2.0), e(1, 0.0)]);
        assert_eq!(t.bytes(), node_bytes(n));
        assert_eq!(
            t.delete(3, 1, 3),
            Touch {
                before: 2,
                after: 0
            }
        );
        assert!(t.is_empty() && t.bytes() == 0);
        // A stored node becomes DEL, and cannot be modified afterwards.
        t.modify(4, 0, &[EntryChange::Remove(1)], 4).unwrap();
        t.delete(4, 0, 5);
        assert!(matches!(t.get(4).unwrap().row, Row::Del { level: 0 }));
        assert!(t.modify(4, 0, &[EntryChange::Remove(1)], 6).is_err());
        assert_eq!(t.bytes(), changes_bytes(1, 0));
        t.clear();
        assert_eq!(t.bytes(), 0);
    }
}
