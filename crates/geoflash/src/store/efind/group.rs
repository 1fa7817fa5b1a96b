//! The compact log format's operation groups: which pages the operations
//! completed since the last logged group changed, so that the group is
//! logged as the net changes of those pages (see the [module
//! docs](super) ("Durability") and [`crate::store::log::LogFormat::Compact`]).
//!
//! The group only remembers *what* changed (page ids, entry keys, whether
//! the page was created or deleted); the content comes from the write
//! buffer when the group is logged, which holds the newest version of
//! every change until the page is flushed, and a page is never flushed
//! before the group that changed it is logged.
use std::collections::hash_map::Entry as Slot;
use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use crate::page_id::{IdHasher, IdMap};

use super::write_buffer::{Body, WbEntry, WriteBuffer};
use crate::page::Entry;
use crate::storage::PageId;
use crate::store::EntryChange;

/// What the group did to one page.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Touched {
    /// Created by the group: logged as NEW with its whole content.
    Created,
    /// Entries changed by the group (their keys are in
    /// [`HeldGroup::keys`] under this run number): logged as MOD with their
    /// newest versions.
    Modified(u64),
    /// Deleted by the group (page created before it): logged as DEL.
    Deleted(u16),
}

/// The most pages and keys a cleared group keeps room for (about 1.4 MiB of
/// tables, outside the store's memory budget as the group's tables always
/// were): a commit of a few thousand moves reuses its tables, a group of a
/// build's millions of changes gives its memory back.
const RETAINED_CAPACITY: usize = 1 << 15;

/// One page's record of a logged group.
#[derive(Debug, Clone, PartialEq)]
pub enum PageRecord {
    /// NEW: the level and the whole content.
    New(u16, Vec<Entry>),
    /// MOD: the level and the net change of every changed entry.
    Mod(u16, Vec<EntryChange>),
    /// DEL: the level.
    Del(u16),
}

/// The operations completed since the last logged group, by page.
#[derive(Debug, Default, Clone)]
pub struct HeldGroup {
    /// Hashed (an insertion touches it once per changed page); the records
    /// come out in page order.
    pages: IdMap<Touched>,
    /// The changed entries of the pages the group modified, as `(run,
    /// key)`: one set for the whole group rather than one per page, so a
    /// page with one changed entry (a move in place) allocates nothing.
    /// Each time a page starts a set of changes (first modified, or
    /// modified again after it was deleted) it takes a new run number, so
    /// the keys of its earlier changes, left in the set, are not its keys
    /// any more. (A page the group created ignores modifications: it is
    /// logged whole.)
    keys: HashSet<(u64, u64), BuildHasherDefault<IdHasher>>,
    /// Run numbers handed out (the next is `runs`).
    runs: u64,
    /// Entry changes held (bounds the size of the group's records).
    changes: usize,
    /// An operation of the group changed the tree metadata.
    pub meta: bool,
    /// Operations in the group.
    pub ops: u64,
    /// Newest operation of the group.
    pub last_op: Option<crate::store::OpId>,
}

impl HeldGroup {
    /// Whether nothing is held (no operation since the last logged group).
    pub fn is_empty(&self) -> bool {
        self.ops == 0 && self.pages.is_empty() && !self.meta
    }

    /// Entry changes held.
    pub fn changes(&self) -> usize {
        self.changes
    }

    /// Page `id` was created.
    pub fn created(&mut self, id: PageId, entries: usize) {
        self.pages.insert(id, Touched::Created);
        self.changes += entries.max(1);
    }

    /// Entries of page `id` changed.
    pub fn modified(&mut self, id: PageId, changes: &[EntryChange]) {
        let next = self.runs;
        let run = match self.pages.entry(id) {
            Slot::Occupied(mut held) => match held.get_mut() {
                // Created by the group: logged whole.
                Touched::Created => return,
                Touched::Modified(run) => *run,
                // Modified after its deletion (deleted pages are not reused
                // before a checkpoint, which logs nothing of a group): a
                // fresh set of changes of the stored page.
                t @ Touched::Deleted(_) => {
                    *t = Touched::Modified(next);
                    next
                }
            },
            Slot::Vacant(page) => {
                page.insert(Touched::Modified(next));
                next
            }
        };
        if run == next {
            self.runs += 1;
        }
        for c in changes {
            let key = match c {
                EntryChange::Upsert(e) => e.key,
                EntryChange::Remove(k) => *k,
            };
            if self.keys.insert((run, key)) {
                self.changes += 1;
            }
        }
    }

    /// Page `id` (at `level`) was deleted: a page the group created leaves
    /// the group (the write buffer forgets it too), any other is logged as DEL.
    pub fn deleted(&mut self, id: PageId, level: u16) {
        if self.pages.get(&id) == Some(&Touched::Created) {
            self.pages.remove(&id);
        } else {
            self.pages.insert(id, Touched::Deleted(level));
            self.changes += 1;
        }
    }

    /// One operation completed (`op`).
    pub fn completed(&mut self, op: crate::store::OpId, meta_changed: bool) {
        self.ops += 1;
        self.last_op = Some(op);
        self.meta |= meta_changed;
    }

    /// The group's page records, in ascending page order, read from the
    /// write buffer (which holds the newest version of every change). The
    /// caller logs them and then [`Self::clear`]s the group. A page the write buffer no longer holds as the group
    /// left it is an internal error (the buffer flushed a page of a group
    /// not logged yet).
    pub fn records(&self, wb: &WriteBuffer) -> Result<Vec<(PageId, PageRecord)>, String> {
        let mut pages: Vec<(PageId, &Touched)> =
            self.pages.iter().map(|(&id, t)| (id, t)).collect();
        pages.sort_unstable_by_key(|&(id, _)| id);
        // Every changed key, by run then key: a modified page's keys are
        // the run of its number.
        let mut keys: Vec<(u64, u64)> = self.keys.iter().copied().collect();
        keys.sort_unstable();
        let keys_of = |run: u64| {
            let from = keys.partition_point(|&(r, _)| r < run);
            let to = keys.partition_point(|&(r, _)| r <= run);
            keys.get(from..to).unwrap_or_default()
        };
        let mut out = Vec::with_capacity(pages.len());
        for (id, touched) in pages {
            let row = wb.get(id);
            let rec = match (touched, row.map(|r| (r.height, &r.body))) {
                (Touched::Deleted(level), None | Some((_, Body::Del))) => PageRecord::Del(*level),
                (Touched::Created, Some((height, Body::New(node)))) => {
                    PageRecord::New(height, node.entries.clone())
                }
                (Touched::Modified(run), Some((height, body))) if *body != Body::Del => {
                    let latest = |k: u64| match body {
                        Body::New(node) => node
                            .entries
                            .binary_search_by_key(&k, |e| e.key)
                            .ok()
                            .and_then(|i| node.entries.get(i))
                            .copied(),
                        Body::Mod(changes) => changes.get(k).copied().flatten(),
                        Body::Del => None,
                    };
                    let changes = keys_of(*run)
                        .iter()
                        .map(|&(_, k)| match latest(k) {
                            Some(e) => EntryChange::Upsert(e),
                            None => EntryChange::Remove(k),
                        })
                        .collect();
                    PageRecord::Mod(height, changes)
                }
                (t, _) => {
                    return Err(format!(
                        "page {id}: the operation group holds {t:?} but the write buffer {:?}",
                        row.map(WbEntry::status)
                    ))
                }
            };
            out.push((id, rec));
        }
        Ok(out)
    }

    /// Forgets the group (its changes are durable otherwise, by a checkpoint).
    ///
    /// The page map and key set keep their memory for the next group (a
    /// stream of commits would otherwise grow them again from empty every
    /// time), unless a large group left them above [`RETAINED_CAPACITY`].
    pub fn clear(&mut self) {
        if self.keys.capacity() > RETAINED_CAPACITY || self.pages.capacity() > RETAINED_CAPACITY {
            *self = HeldGroup::default();
            return;
        }
        self.pages.clear();
        self.keys.clear();
        self.runs = 0;
        self.changes = 0;
        self.meta = false;
        self.ops = 0;
        self.last_op = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// What the group held per page before the keys moved into one set:
    /// the oracle.
    #[derive(Debug, Clone, PartialEq)]
    enum Model {
        Created,
        Modified(BTreeSet<u64>),
        Deleted(u16),
    }

    #[derive(Debug, Clone)]
    enum Op {
        Created(PageId, usize),
        Modified(PageId, Vec<(bool, u64)>),
        Deleted(PageId, u16),
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..6, 0usize..4).prop_map(|(p, n)| Op::Created(p, n)),
            (0u64..6, proptest::collection::vec((any::<bool>(), 0u64..8), 0..4))
                .prop_map(|(p, c)| Op::Modified(p, c)),
            (0u64..6, 0u16..3).prop_map(|(p, l)| Op::Deleted(p, l)),
            Just(Op::Clear),
        ]
    }

    impl HeldGroup {
        /// The page's state as the oracle writes it.
        fn as_model(&self) -> BTreeMap<PageId, Model> {
            self.pages
                .iter()
                .map(|(&id, t)| {
                    let m = match t {
                        Touched::Created => Model::Created,
                        Touched::Deleted(l) => Model::Deleted(*l),
                        Touched::Modified(run) => Model::Modified(
                            self.keys.iter().filter(|(r, _)| r == run).map(|(_, k)| *k).collect(),
                        ),
                    };
                    (id, m)
                })
                .collect()
        }
    }

    proptest! {
        /// Random creations, modifications, deletions and clears: the pages,
        /// their changed keys and the count of changes are those of the
        /// per-page sets the group kept before.
        #[test]
        fn one_key_set_holds_what_per_page_sets_held(ops in proptest::collection::vec(op(), 0..60)) {
            let mut group = HeldGroup::default();
            let mut model: BTreeMap<PageId, Model> = BTreeMap::new();
            let mut changes = 0usize;
            for op in ops {
                match op {
                    Op::Created(id, n) => {
                        group.created(id, n);
                        model.insert(id, Model::Created);
                        changes += n.max(1);
                    }
                    Op::Modified(id, keys) => {
                        let list: Vec<EntryChange> = keys
                            .iter()
                            .map(|&(up, k)| if up {
                                EntryChange::Upsert(Entry { key: k, rect: crate::geom::Rect::world(), payload: 0 })
                            } else {
                                EntryChange::Remove(k)
                            })
                            .collect();
                        group.modified(id, &list);
                        let t = model.entry(id).or_insert_with(|| Model::Modified(BTreeSet::new()));
                        if let Model::Deleted(_) = t {
                            *t = Model::Modified(BTreeSet::new());
                        }
                        if let Model::Modified(set) = t {
                            for &(_, k) in &keys {
                                if set.insert(k) {
                                    changes += 1;
                                }
                            }
                        }
                    }
                    Op::Deleted(id, level) => {
                        group.deleted(id, level);
                        if model.get(&id) == Some(&Model::Created) {
                            model.remove(&id);
                        } else {
                            model.insert(id, Model::Deleted(level));
                            changes += 1;
                        }
                    }
                    Op::Clear => {
                        group.clear();
                        model.clear();
                        changes = 0;
                    }
                }
                prop_assert_eq!(group.as_model(), model.clone());
                prop_assert_eq!(group.changes(), changes);
            }
        }
    }
}
