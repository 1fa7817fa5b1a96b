//! Deletion: FindLeaf, CondenseTree (underfull nodes are removed and their
//! entries reinserted at their own level) and shortening of the tree.
use super::ops::{contains, intersects};
use super::params::IndexKind;
use super::{diff, RTree, Step};
use crate::geom::Rect;
use crate::page::Entry;
use crate::page_id::PageId;
use crate::store::{NodeStore, TreeMeta};
use crate::{Error, Result};

impl<S: NodeStore> RTree<S> {
    /// The path from the root to the leaf holding record `(id, rect)`; an
    /// error naming the record when it is absent.
    pub(crate) fn find_record(&self, id: u64, rect: &Rect) -> Result<Vec<Step>> {
        let absent = || {
            Error::invalid(format!(
                "object {id} with rectangle ({}, {}, {}, {}) is not in the index",
                rect.min_x(),
                rect.min_y(),
                rect.max_x(),
                rect.max_y()
            ))
        };
        let Some(root) = self.store.meta().root else {
            return Err(absent());
        };
        let mut path = Vec::new();
        if self.find_in(root, id, Probe::Exact(rect), None, &mut path)? {
            Ok(path)
        } else {
            Err(absent())
        }
    }

    /// The path from the root to the leaf holding record `id`, whose
    /// rectangle intersects `within` (a rectangle known to contain it, such
    /// as the id locator's; keys are unique in the tree); `None` when no
    /// record `id` intersects `within`.
    pub(crate) fn find_record_within(&self, id: u64, within: &Rect) -> Result<Option<Vec<Step>>> {
        let Some(root) = self.store.meta().root else {
            return Ok(None);
        };
        let mut path = Vec::new();
        let found = self.find_in(root, id, Probe::Within(within), None, &mut path)?;
        Ok(found.then_some(path))
    }

    /// [`find_record`](Self::find_record) told that the record was last
    /// seen in leaf `leaf`: the search reads no other leaf (every leaf
    /// whose rectangle contains `rect` is a candidate, and where leaves
    /// overlap a search without the hint reads several), and falls back to
    /// the full search when the record is not there any more (a split or a
    /// reinsertion moved it). The internal nodes are read as before.
    pub(crate) fn find_record_near(
        &self,
        id: u64,
        rect: &Rect,
        leaf: Option<PageId>,
    ) -> Result<Vec<Step>> {
        if let (Some(leaf), Some(root)) = (leaf, self.store.meta().root) {
            let mut path = Vec::new();
            if self.find_in(root, id, Probe::Exact(rect), Some(leaf), &mut path)? {
                return Ok(path);
            }
        }
        self.find_record(id, rect)
    }

    /// Depth-first search below `page` for record `id` as `probe` gives it,
    /// pushing the nodes on the way onto `path`; with `leaf`, the only leaf
    /// read.
    fn find_in(
        &self,
        page: PageId,
        id: u64,
        probe: Probe<'_>,
        leaf: Option<PageId>,
        path: &mut Vec<Step>,
    ) -> Result<bool> {
        let node = self.store.get(page)?;
        path.push(Step {
            id: page,
            node: node.clone(),
        });
        // Linear scans: a node's entries are read from memory in order,
        // which the prefetcher streams, where the dependent probes of a
        // binary search each wait for a cache miss in a cold node.
        if node.level == 0 {
            if node.entries.iter().any(|e| e.key == id && probe.is(&e.rect)) {
                return Ok(true);
            }
        } else {
            for &first in probe.passes() {
                let wanted = |e: &&Entry| {
                    probe.below(&e.rect, first) && (node.level > 1 || leaf.is_none_or(|l| e.key == l))
                };
                for e in node.entries.iter().filter(wanted) {
                    if self.find_in(e.key, id, probe, leaf, path)? {
                        return Ok(true);
                    }
                }
            }
        }
        path.pop();
        Ok(false)
    }

    /// Removes record `id` from the leaf at the end of `path` inside an open
    /// operation, condenses the tree and shortens it.
    pub(crate) fn delete_in_op(
        &mut self,
        id: u64,
        path: Vec<Step>,
        meta: &mut TreeMeta,
    ) -> Result<()> {
        let m = self.params.min_entries;
        let mut orphans: Vec<(u16, Entry)> = Vec::new();
        let mut remove: Option<u64> = Some(id);
        let mut update: Option<Entry> = None;
        for (i, step) in path.iter().enumerate().rev() {
            let level = step.node.level;
            let mut entries = step.node.entries.clone();
            if let Some(k) = remove.take() {
                entries.retain(|e| e.key != k);
            }
            if let Some(u) = update.take() {
                if let Some(slot) = entries.iter_mut().find(|e| e.key == u.key) {
                    *slot = u;
                }
            }
            if i > 0 && entries.len() < m {
                // CondenseTree: eliminate the node, keep its entries for reinsertion.
                self.store.delete(step.id)?;
                self.counters.merges += 1;
                orphans.extend(entries.into_iter().map(|e| (level, e)));
                remove = Some(step.id);
                continue;
            }
            let changes = diff(&step.node.entries, &entries);
            if !changes.is_empty() {
                self.store.modify(step.id, level, &changes)?;
            }
            match self.changed_parent_entry(&path, i, &entries)? {
                Some(u) => update = Some(u),
                None => break,
            }
        }
        meta.records = meta.records.saturating_sub(1);
        if self.params.kind == IndexKind::Hilbert {
            let mut records = Vec::new();
            for (level, e) in orphans {
                self.take_records(level, e, &mut records)?;
            }
            self.counters.reinsertions += records.len() as u64;
            for e in records {
                self.reinsert_entry(0, e, meta)?;
            }
        } else {
            self.counters.reinsertions += orphans.len() as u64;
            for (level, e) in orphans {
                self.reinsert_entry(level, e, meta)?;
            }
        }
        self.shorten(meta)
    }

    /// Replaces an internal root with a single child by that child, and
    /// drops an empty leaf root.
    fn shorten(&mut self, meta: &mut TreeMeta) -> Result<()> {
        while let Some(root) = meta.root {
            let node = self.store.get(root)?;
            match (node.level, node.entries.as_slice()) {
                (0, []) => {
                    self.store.delete(root)?;
                    meta.root = None;
                    meta.height = 0;
                }
                (_, []) => {
                    return Err(Error::corrupt(Some(root), "internal root without entries"));
                }
                (l, [only]) if l > 0 => {
                    self.store.delete(root)?;
                    meta.root = Some(only.key);
                    meta.height = meta.height.saturating_sub(1);
                }
                _ => break,
            }
        }
        Ok(())
    }
}

/// How a search knows the record it looks for, beside its key.
#[derive(Clone, Copy)]
enum Probe<'a> {
    /// Its exact rectangle: the search descends where an entry's rectangle
    /// contains it.
    Exact(&'a Rect),
    /// A rectangle that contains it: the search descends where an entry's
    /// rectangle intersects it, and takes the leaf entry of the key that
    /// intersects it.
    Within(&'a Rect),
}

impl Probe<'_> {
    /// The passes over a node's children: `true` for the first, `false`
    /// for the second, which a [`Probe::Within`] takes when the first did
    /// not find the record.
    fn passes(&self) -> &'static [bool] {
        match self {
            Probe::Exact(_) => &[true],
            Probe::Within(_) => &[true, false],
        }
    }

    /// Whether a subtree whose rectangle is `r` may hold the record, in
    /// the first pass or the second: a [`Probe::Within`] tries first the
    /// subtrees whose rectangle contains `within` (the record's subtree,
    /// but where the record lies on its edge: `within` is barely larger),
    /// then those that only intersect it, so that it reads the nodes a
    /// search with the exact rectangle reads, unless the record lies on
    /// its subtree's edge.
    fn below(&self, r: &Rect, first: bool) -> bool {
        match (self, first) {
            (Probe::Exact(rect), _) => contains(r, rect),
            (Probe::Within(within), true) => contains(r, within),
            (Probe::Within(within), false) => intersects(r, within) && !contains(r, within),
        }
    }

    /// Whether a leaf entry of the record's key with rectangle `r` is it.
    fn is(&self, r: &Rect) -> bool {
        match self {
            Probe::Exact(rect) => r == *rect,
            Probe::Within(within) => intersects(r, within),
        }
    }
}
