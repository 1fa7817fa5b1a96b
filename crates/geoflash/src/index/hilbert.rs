//! The Hilbert R-tree (Kamel and Faloutsos 1994): a B+-tree on the Hilbert
//! value of the rectangles' centres, with MBRs.
//!
//! - Every entry's `payload` holds a Hilbert value: a record's own (the
//!   value of its centre in the tree's fixed [`HilbertDomain`]; centres
//!   outside the domain are clamped to its border cells, which keeps the tree
//!   correct, only less well clustered), an internal entry's largest Hilbert
//!   value (LHV) of its subtree.
//! - Inside a node the entries are ordered by `(payload, key)` (the store
//!   keeps them by key; the tree sorts on reading), with one exception for
//!   ties: see [`RTree::sort_entries`]. Between siblings the order is a
//!   B+-tree's: every value under one child is at most every value under the
//!   next.
//! - Ties: records in one cell whose ids agree modulo 2^32 have equal values,
//!   so a run of them can span siblings that then share their LHV `h`. In
//!   the tree's order such a group is one child that may hold values below
//!   `h` (the group's first) and children holding `h` alone; the page ids do
//!   not tell the first apart, so the tree finds it by reading the group's
//!   smallest values ([`RTree::subtree_min`]), which only ties pay.
//! - ChooseLeaf descends into the first child whose LHV is at least the new
//!   value (else the last child), in that order.
//! - Overflow uses deferred splitting with s = 2 cooperating siblings
//!   ("2-to-3"): the overflowing node and its right sibling (the left one for
//!   the last child) share their entries evenly when they fit in two nodes;
//!   otherwise a third node is created and the entries spread over three.
//!   The root splits 1-to-2.
//! - Deletion is the R-tree's CondenseTree (instead of the paper's merging
//!   with siblings): the records under an underfull node are reinserted one
//!   by one (whole subtrees cannot be, their value ranges would overlap
//!   their new siblings'), so the B+-tree order holds.
//! - Record values: see [`record_value`]; the domain's order is at most 16.
use std::cmp::Ordering;

use super::{diff, duplicate_id, RTree, Step};
use crate::geom::HilbertDomain;
use crate::page::Entry;
use crate::page_id::PageId;
use crate::store::{NodeStore, TreeMeta};
use crate::{Error, Result};

/// The value a record carries: the Hilbert value of its centre (domain
/// order ≤ 16, so below 2^32) in the high 32 bits and the low 32 bits of its
/// object id in the low ones, so values are distinct unless two ids in the
/// same cell agree modulo 2^32 (those ties: see the module's documentation).
pub(crate) fn record_value(domain: &HilbertDomain, rect: &crate::geom::Rect, id: u64) -> u64 {
    (domain.hilbert_rect(rect) << 32) | (id & 0xFFFF_FFFF)
}

/// Order of entries in a Hilbert R-tree node.
pub(crate) fn hilbert_order(a: &Entry, b: &Entry) -> Ordering {
    a.payload.cmp(&b.payload).then(a.key.cmp(&b.key))
}

/// Spreads `entries` (sorted) evenly over `n` groups, in order.
fn spread(entries: Vec<Entry>, n: usize) -> Vec<Vec<Entry>> {
    let n = n.max(1);
    let k = entries.len();
    let (base, extra) = (k / n, k % n);
    let mut it = entries.into_iter();
    (0..n)
        .map(|i| it.by_ref().take(base + usize::from(i < extra)).collect())
        .collect()
}

impl<S: NodeStore> RTree<S> {
    /// The child of a node at `level` (≥ 1) holding `entries` to descend
    /// into for Hilbert value `h`: the first in the tree's order whose LHV
    /// is at least `h`, else the last. Among children tying on that LHV, a
    /// value below it must go to the group's first (the one that may hold
    /// smaller values) and a value above every LHV to a child holding the
    /// LHV alone, so only then is the group read; a value equal to the LHV
    /// may go to any of them (the smallest page id, as without ties).
    pub(crate) fn choose_by_lhv(
        &self,
        level: u16,
        entries: &[Entry],
        h: u64,
    ) -> Result<Option<PageId>> {
        let mut above: Option<(u64, PageId, usize)> = None;
        let mut last: Option<(u64, PageId, usize)> = None;
        for e in entries {
            if e.payload >= h {
                above = Some(match above {
                    Some((v, k, n)) if v == e.payload => (v, k.min(e.key), n + 1),
                    Some(a) if a.0 < e.payload => a,
                    _ => (e.payload, e.key, 1),
                });
            }
            last = Some(match last {
                Some((v, k, n)) if v == e.payload => (v, k.max(e.key), n + 1),
                Some(l) if l.0 > e.payload => l,
                _ => (e.payload, e.key, 1),
            });
        }
        let (lhv, key, ties, first) = match (above, last) {
            (Some((v, k, n)), _) => (v, k, n, true),
            (None, Some((v, k, n))) => (v, k, n, false),
            (None, None) => return Ok(None),
        };
        if ties == 1 || (first && lhv == h) {
            return Ok(Some(key));
        }
        let mut group: Vec<Entry> = entries
            .iter()
            .filter(|e| e.payload == lhv)
            .copied()
            .collect();
        self.sort_entries(level, &mut group)?;
        let pick = if first { group.first() } else { group.last() };
        Ok(pick.map(|e| e.key))
    }

    /// Sorts `entries` of a node at `level` into the tree's order: by
    /// `(payload, key)`, except that in a group of children tying on their
    /// LHV the one whose subtree holds a value below it comes first (a
    /// sound tree has at most one per group; the others hold the LHV
    /// alone, in any order). Records (level 0) of equal value are alike.
    pub(crate) fn sort_entries(&self, level: u16, entries: &mut [Entry]) -> Result<()> {
        entries.sort_by(hilbert_order);
        if level == 0 {
            return Ok(());
        }
        let mut i = 0;
        while let Some(h) = entries.get(i).map(|e| e.payload) {
            let end = i + entries[i..].iter().take_while(|e| e.payload == h).count();
            if end - i > 1 {
                for k in i..end {
                    if self.subtree_min(entries[k].key)? < h {
                        entries[i..=k].rotate_right(1);
                        break;
                    }
                }
            }
            i = end;
        }
        Ok(())
    }

    /// The smallest Hilbert value under node `id` (`u64::MAX` for an empty
    /// leaf): it lies under the children of the smallest LHV, since every
    /// value under a later child is at least that LHV.
    pub(crate) fn subtree_min(&self, id: PageId) -> Result<u64> {
        let node = self.store.get(id)?;
        let low = node.entries.iter().map(|e| e.payload).min();
        let Some(low) = low else {
            return Ok(u64::MAX);
        };
        if node.level == 0 {
            return Ok(low);
        }
        let mut min = u64::MAX;
        for e in node.entries.iter().filter(|e| e.payload == low) {
            min = min.min(self.subtree_min(e.key)?);
        }
        Ok(min)
    }

    /// The tree's Hilbert domain (verified present for Hilbert trees).
    pub(crate) fn domain(&self) -> Result<HilbertDomain> {
        self.params
            .hilbert_domain
            .ok_or_else(|| Error::invalid("a Hilbert R-tree needs a Hilbert domain"))
    }

    /// Deletes the subtree under the orphaned entry `e` of level `level` and
    /// returns its records (a Hilbert R-tree reinserts records only).
    pub(crate) fn take_records(
        &mut self,
        level: u16,
        e: Entry,
        out: &mut Vec<Entry>,
    ) -> Result<()> {
        if level == 0 {
            out.push(e);
            return Ok(());
        }
        let node = self.store.get(e.key)?;
        self.store.delete(e.key)?;
        for c in &node.entries {
            self.take_records(node.level, *c, out)?;
        }
        Ok(())
    }

    /// Splits the node of `step` 1-to-2 with `entries` (its entries and
    /// the one that overflowed it, in Hilbert order): the first half stays
    /// in the node, the second goes to a new node. Returns the parent
    /// entries of both (rect and LHV).
    fn split_in_two(&mut self, step: &Step, entries: Vec<Entry>) -> Result<(Entry, Entry)> {
        let level = step.node.level;
        let mut groups = spread(entries, 2).into_iter();
        self.counters.splits += 1;
        let (Some(a), Some(b)) = (groups.next(), groups.next()) else {
            return Err(Error::corrupt(Some(step.id), "split failed"));
        };
        self.store
            .modify(step.id, level, &diff(&step.node.entries, &a))?;
        let left = self.entry_for(step.id, &a)?;
        let b_id = self.store.create(level, b.clone())?;
        Ok((left, self.entry_for(b_id, &b)?))
    }

    /// Adds `entry` to the last node of `path` and treats overflow by
    /// deferred splitting, adjusting MBRs and LHVs up to the root.
    pub(crate) fn hilbert_insert_along(
        &mut self,
        path: Vec<Step>,
        entry: Entry,
        meta: &mut TreeMeta,
    ) -> Result<()> {
        let max = self.params.max_entries;
        let mut add: Option<Entry> = Some(entry);
        // Replacements of child entries of the current node (rect and LHV).
        let mut updates: Vec<Entry> = Vec::new();
        for (i, step) in path.iter().enumerate().rev() {
            let level = step.node.level;
            let mut entries = step.node.entries.clone();
            for u in updates.drain(..) {
                let slot = entries.iter_mut().find(|e| e.key == u.key).ok_or_else(|| {
                    Error::corrupt(Some(step.id), "child entry missing from its parent")
                })?;
                *slot = u;
            }
            if let Some(a) = add.take() {
                if entries.iter().any(|e| e.key == a.key) {
                    return Err(if level == 0 {
                        duplicate_id(a.key)
                    } else {
                        Error::corrupt(Some(step.id), format!("child {} appears twice", a.key))
                    });
                }
                entries.push(a);
            }
            if entries.len() <= max {
                let changes = diff(&step.node.entries, &entries);
                if !changes.is_empty() {
                    self.store.modify(step.id, level, &changes)?;
                }
                match self.changed_parent_entry(&path, i, &entries)? {
                    Some(u) => updates.push(u),
                    None => break,
                }
                continue;
            }
            self.sort_entries(level, &mut entries)?;
            let Some(parent) = i.checked_sub(1).and_then(|p| path.get(p)) else {
                // The root splits 1-to-2.
                let (left, right) = self.split_in_two(step, entries)?;
                let root = self.store.create(level + 1, vec![left, right])?;
                meta.root = Some(root);
                meta.height = meta.height.saturating_add(1);
                break;
            };
            // Cooperating sibling: the next in Hilbert order, else the previous.
            let mut order: Vec<Entry> = parent.node.entries.clone();
            self.sort_entries(parent.node.level, &mut order)?;
            let pos = order.iter().position(|e| e.key == step.id).ok_or_else(|| {
                Error::corrupt(Some(parent.id), "child entry missing from its parent")
            })?;
            let sib_pos = if pos + 1 < order.len() {
                pos + 1
            } else {
                pos.wrapping_sub(1)
            };
            let Some(sib_id) = order.get(sib_pos).map(|e| e.key) else {
                // An only child (a root with one child while orphans are
                // reinserted after a deletion): split 1-to-2.
                let (left, right) = self.split_in_two(step, entries)?;
                updates.push(left);
                add = Some(right);
                continue;
            };
            let sib = self.store.get(sib_id)?;
            if sib.level != level {
                return Err(Error::corrupt(Some(sib_id), "sibling at another level"));
            }
            // (first, second) in Hilbert order.
            type Member<'a> = (PageId, &'a [Entry]);
            let (first, second): (Member<'_>, Member<'_>) = if sib_pos > pos {
                ((step.id, &step.node.entries), (sib_id, &sib.entries))
            } else {
                ((sib_id, &sib.entries), (step.id, &step.node.entries))
            };
            let mut all: Vec<Entry> = entries;
            all.extend(sib.entries.iter().copied());
            self.sort_entries(level, &mut all)?;
            if all.len() <= 2 * max {
                let mut groups = spread(all, 2).into_iter();
                let (Some(a), Some(b)) = (groups.next(), groups.next()) else {
                    return Err(Error::corrupt(Some(step.id), "redistribution failed"));
                };
                self.store.modify(first.0, level, &diff(first.1, &a))?;
                self.store.modify(second.0, level, &diff(second.1, &b))?;
                updates.push(self.entry_for(first.0, &a)?);
                updates.push(self.entry_for(second.0, &b)?);
            } else {
                let mut groups = spread(all, 3).into_iter();
                self.counters.splits += 1;
                let (Some(a), Some(b), Some(c)) = (groups.next(), groups.next(), groups.next())
                else {
                    return Err(Error::corrupt(Some(step.id), "2-to-3 split failed"));
                };
                self.store.modify(first.0, level, &diff(first.1, &a))?;
                self.store.modify(second.0, level, &diff(second.1, &b))?;
                updates.push(self.entry_for(first.0, &a)?);
                updates.push(self.entry_for(second.0, &b)?);
                let c_id = self.store.create(level, c.clone())?;
                add = Some(self.entry_for(c_id, &c)?);
            }
        }
        Ok(())
    }
}
