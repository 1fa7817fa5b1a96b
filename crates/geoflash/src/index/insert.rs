//! Insertion: ChooseLeaf/ChooseSubtree, overflow treatment (split or R*
//! forced reinsertion) and AdjustTree, through entry-level store changes.
use std::collections::VecDeque;

use super::ops::{area, enlargement, mbr, union};
use super::params::IndexKind;
use super::{diff, duplicate_id, rstar, split, RTree, Step};
use crate::geom::Rect;
use crate::page::{holds_key, Entry};
use crate::page_id::PageId;
use crate::store::{EntryChange, NodeStore, TreeMeta};
use crate::{Error, Result};

impl<S: NodeStore> RTree<S> {
    /// The path from `root` to the node at `target` level where an entry
    /// with rectangle `rect` goes.
    pub(crate) fn choose_path(
        &self,
        root: PageId,
        entry: &Entry,
        target: u16,
    ) -> Result<Vec<Step>> {
        let rect = &entry.rect;
        let mut path = Vec::new();
        let mut id = root;
        loop {
            let node = self.store.get(id)?;
            if node.level < target {
                return Err(Error::corrupt(
                    Some(id),
                    format!(
                        "node at level {} reached while looking for level {target}",
                        node.level
                    ),
                ));
            }
            if node.level == target {
                path.push(Step { id, node });
                return Ok(path);
            }
            let child = match self.params.kind {
                IndexKind::Hilbert => self.choose_by_lhv(node.level, &node.entries, entry.payload)?,
                IndexKind::RStar if node.level == 1 => {
                    rstar::choose_by_overlap(&node.entries, rect)
                }
                _ => choose_by_enlargement(&node.entries, rect),
            }
            .ok_or_else(|| Error::corrupt(Some(id), "internal node without entries"))?;
            path.push(Step { id, node });
            id = child;
        }
    }

    /// Adds `entry` to the last node of `path` and treats overflows and MBR
    /// changes up to the root. Entries removed by a forced reinsertion are
    /// appended to `pending` with their level, nearest to the centre first.
    pub(crate) fn insert_along(
        &mut self,
        mut path: Vec<Step>,
        entry: Entry,
        meta: &mut TreeMeta,
        reinserted: &mut Vec<u16>,
        pending: &mut VecDeque<(u16, Entry)>,
    ) -> Result<()> {
        let max = self.params.max_entries;
        let reinsert_count = self.params.reinsert_count();
        let mut add: Option<Entry> = Some(entry);
        let mut update: Option<Entry> = None;
        let mut i = path.len();
        while i > 0 {
            i -= 1;
            if let Some(next) = self.grow_in_place(&mut path, i, &mut update, &mut add)? {
                match next {
                    Some(u) => {
                        update = Some(u);
                        continue;
                    }
                    None => break,
                }
            }
            let Some(step) = path.get(i) else { break };
            let (id, level) = (step.id, step.node.level);
            let mut entries = step.node.entries.clone();
            // The changes of this node when it does not overflow, built
            // directly (the node's entries are in key order).
            let mut changes: Vec<EntryChange> = Vec::with_capacity(2);
            if let Some(u) = update.take() {
                let i = entries
                    .binary_search_by_key(&u.key, |e| e.key)
                    .map_err(|_| {
                        Error::corrupt(Some(step.id), "child entry missing from its parent")
                    })?;
                if let Some(slot) = entries.get_mut(i) {
                    if slot.rect != u.rect {
                        slot.rect = u.rect;
                        changes.push(EntryChange::Upsert(*slot));
                    }
                }
            }
            if let Some(a) = add.take() {
                if holds_key(&entries, a.key) {
                    return Err(if level == 0 {
                        duplicate_id(a.key)
                    } else {
                        Error::corrupt(Some(step.id), format!("child {} appears twice", a.key))
                    });
                }
                entries.push(a);
                changes.push(EntryChange::Upsert(a));
            }

            if entries.len() <= max {
                if !changes.is_empty() {
                    release(&mut path, i);
                    self.store.modify(id, level, &changes)?;
                }
                update = self.changed_parent_entry(&path, i, &entries)?;
                if update.is_none() {
                    break;
                }
            } else if reinsert_count > 0 && i > 0 && !reinserted.contains(&level) {
                reinserted.push(level);
                let (keep, removed) = rstar::pick_reinsert(entries, reinsert_count);
                self.counters.reinsertions += removed.len() as u64;
                let changes = diff(&step.node.entries, &keep);
                release(&mut path, i);
                self.store.modify(id, level, &changes)?;
                pending.extend(removed.into_iter().map(|e| (level, e)));
                update = self.changed_parent_entry(&path, i, &keep)?;
                if update.is_none() {
                    break;
                }
            } else {
                let (a, b) = split::split(&self.params, entries)?;
                self.counters.splits += 1;
                let changes = diff(&step.node.entries, &a);
                release(&mut path, i);
                self.store.modify(id, level, &changes)?;
                let (ra, rb) = match (mbr(&a), mbr(&b)) {
                    (Some(ra), Some(rb)) => (ra, rb),
                    _ => return Err(Error::corrupt(Some(id), "split produced an empty group")),
                };
                let new_id = self.store.create(level, b)?;
                let left = Entry {
                    key: id,
                    rect: ra,
                    payload: 0,
                };
                let right = Entry {
                    key: new_id,
                    rect: rb,
                    payload: 0,
                };
                if i == 0 {
                    let root = self.store.create(level + 1, vec![left, right])?;
                    meta.root = Some(root);
                    meta.height = meta.height.saturating_add(1);
                    break;
                }
                update = Some(left);
                add = Some(right);
            }
        }
        Ok(())
    }
}

impl<S: NodeStore> RTree<S> {
    /// The common case of [`RTree::insert_along`] without copying the node:
    /// `path[i]` does not overflow and its entries only grow (an added entry,
    /// a child whose rectangle grew), so its MBR in the parent is the old one
    /// grown by the new rectangles. Returns `None` (nothing done) when the
    /// case does not apply, else the parent entry to update next (`None`:
    /// stop). Takes `update` and `add` when it applies.
    fn grow_in_place(
        &mut self,
        path: &mut [Step],
        i: usize,
        update: &mut Option<Entry>,
        add: &mut Option<Entry>,
    ) -> Result<Option<Option<Entry>>> {
        let Some(step) = path.get(i) else {
            return Ok(None);
        };
        let old = &step.node.entries;
        if old.len() + usize::from(add.is_some()) > self.params.max_entries {
            return Ok(None);
        }
        let mut changes: Vec<EntryChange> = Vec::with_capacity(2);
        if let Some(u) = update {
            let Ok(pos) = old.binary_search_by_key(&u.key, |e| e.key) else {
                return Err(Error::corrupt(
                    Some(step.id),
                    "child entry missing from its parent",
                ));
            };
            let Some(cur) = old.get(pos) else {
                return Ok(None);
            };
            if !u.rect.contains(&cur.rect) {
                return Ok(None);
            }
            if cur.rect != u.rect {
                changes.push(EntryChange::Upsert(Entry {
                    rect: u.rect,
                    ..*cur
                }));
            }
        }
        if let Some(a) = add {
            if holds_key(old, a.key) {
                return Err(if step.node.level == 0 {
                    duplicate_id(a.key)
                } else {
                    Error::corrupt(Some(step.id), format!("child {} appears twice", a.key))
                });
            }
            changes.push(EntryChange::Upsert(*a));
        }
        *update = None;
        *add = None;
        let (id, level) = (step.id, step.node.level);
        if !changes.is_empty() {
            release(path, i);
            self.store.modify(id, level, &changes)?;
        }
        let Some(parent) = i.checked_sub(1).and_then(|p| path.get(p)) else {
            return Ok(Some(None));
        };
        let current = super::child_entry(parent, id)?;
        let mut new = *current;
        for c in &changes {
            if let EntryChange::Upsert(e) = c {
                new.rect = union(&new.rect, &e.rect);
                if self.params.kind == IndexKind::Hilbert {
                    new.payload = new.payload.max(e.payload);
                }
            }
        }
        Ok(Some(if new == *current { None } else { Some(new) }))
    }
}

/// Guttman's ChooseLeaf step: the child needing the least enlargement, ties
/// by the smallest area, then the first in key order.
pub(crate) fn choose_by_enlargement(entries: &[Entry], rect: &Rect) -> Option<PageId> {
    let mut best: Option<(f64, f64, PageId)> = None;
    for e in entries {
        let enl = enlargement(&e.rect, rect);
        let a = area(&e.rect);
        let better = match best {
            None => true,
            Some((be, ba, _)) => enl < be || (enl == be && a < ba),
        };
        if better {
            best = Some((enl, a, e.key));
        }
    }
    best.map(|(_, _, k)| k)
}

/// Drops `path[i]`'s reference to its node before the node is changed
/// ([`Step::release`]).
fn release(path: &mut [Step], i: usize) {
    if let Some(step) = path.get_mut(i) {
        step.release();
    }
}
