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
use crate::page_id::{IdMap, IdSet};

use super::write_buffer::{Body, WbEntry, WriteBuffer};
use crate::page::Entry;
use crate::storage::PageId;
use crate::store::EntryChange;

/// What the group did to one page.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Touched {
    /// Created by the group: logged as NEW with its whole content.
    Created,
    /// Entries changed by the group (keys, hashed: the records sort them):
    /// logged as MOD with their newest versions.
    Modified(IdSet),
    /// Deleted by the group (page created before it): logged as DEL.
    Deleted(u16),
}

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
        let t = self
            .pages
            .entry(id)
            .or_insert_with(|| Touched::Modified(IdSet::default()));
        if let Touched::Deleted(_) = t {
            // Deleted pages are not reused before a checkpoint, which logs
            // nothing of a group; a modification after a deletion is a
            // fresh set of changes of the stored page.
            *t = Touched::Modified(IdSet::default());
        }
        if let Touched::Modified(keys) = t {
            for c in changes {
                let key = match c {
                    EntryChange::Upsert(e) => e.key,
                    EntryChange::Remove(k) => *k,
                };
                if keys.insert(key) {
                    self.changes += 1;
                }
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
        let mut out = Vec::with_capacity(pages.len());
        for (id, touched) in pages {
            let row = wb.get(id);
            let rec = match (touched, row.map(|r| (r.height, &r.body))) {
                (Touched::Deleted(level), None | Some((_, Body::Del))) => PageRecord::Del(*level),
                (Touched::Created, Some((height, Body::New(node)))) => {
                    PageRecord::New(height, node.entries.clone())
                }
                (Touched::Modified(keys), Some((height, body))) if *body != Body::Del => {
                    let mut keys: Vec<u64> = keys.iter().copied().collect();
                    keys.sort_unstable();
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
                    let changes = keys
                        .into_iter()
                        .map(|k| match latest(k) {
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
    pub fn clear(&mut self) {
        *self = HeldGroup::default();
    }
}
