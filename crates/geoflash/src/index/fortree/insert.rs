//! Insertion: ChooseLeaf over units, AddElement (an O-node instead of a
//! split), merge-back and AdjustTree.
use super::{checked, Access, Fortree, Step};
use crate::geom::Rect;
use crate::index::insert::choose_by_enlargement;
use crate::index::ops::mbr;
use crate::page::{Entry, Node};
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::{Error, Result};
use crate::index::object_ids::ObjectIds;

/// The error for an id the tree already holds (the R-tree family's words).
fn duplicate_id(id: u64) -> Error {
    Error::invalid(format!(
        "object id {id} is already in the index (object ids must be unique)"
    ))
}

impl<S: NodeStore> Fortree<S> {
    /// Inserts object `id` with MBR `rect`. An id already anywhere in the
    /// tree is an error and changes nothing (as in
    /// [`RTree::insert`](crate::index::RTree::insert)).
    pub fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
        let rect = checked(rect)?;
        if self.holds_id(id)? {
            return Err(duplicate_id(id));
        }
        let done = self.insert_new(id, rect);
        match (&done, self.ids.as_mut()) {
            (Ok(()), Some(ids)) => {
                ids.insert(id);
            }
            (Ok(()), None) => {}
            (Err(_), _) => self.ids = None,
        }
        done
    }

    /// Inserts a record whose id the tree does not hold.
    fn insert_new(&mut self, id: u64, rect: Rect) -> Result<()> {
        let entry = Entry {
            key: id,
            rect,
            payload: 0,
        };
        self.tick += 1;
        let Some(root) = self.root else {
            let root = self.create_node(0, vec![entry]);
            self.root = Some(root);
            self.height = 1;
            self.records = 1;
            return self.end_op();
        };
        let path = self.choose_path(root, &entry.rect, 0)?;
        self.insert_along(&path, entry)?;
        self.records += 1;
        self.end_op()
    }

    /// True when the tree holds a record with object id `id`; builds the id
    /// set first when it is not known or its size disagrees with the record
    /// count (one walk over every unit, read through the buffer, which is
    /// then trimmed to its budget).
    pub(super) fn holds_id(&mut self, id: u64) -> Result<bool> {
        let known = self
            .ids
            .as_ref()
            .is_some_and(|s| s.len() as u64 == self.records);
        if !known {
            self.ids = None;
            let ids = self.collect_ids();
            self.buf.evict_clean(self.config.buffer_bytes);
            self.ids = Some(ids?);
        }
        Ok(self.ids.as_ref().is_some_and(|s| s.contains(&id)))
    }

    /// Every object id in the leaf units; an id found twice is a corrupt tree.
    fn collect_ids(&mut self) -> Result<ObjectIds> {
        let mut ids = ObjectIds::new();
        let mut stack: Vec<PageId> = self.root.into_iter().collect();
        while let Some(primary) = stack.pop() {
            for (page, node) in self.unit(primary)? {
                if node.level == 0 {
                    for e in &node.entries {
                        if !ids.insert(e.key) {
                            return Err(Error::corrupt(
                                Some(page),
                                format!("object id {} appears twice in the FOR-tree", e.key),
                            ));
                        }
                    }
                } else {
                    stack.extend(node.entries.iter().map(|e| e.key));
                }
            }
        }
        Ok(ids)
    }

    /// The units from the root down to the unit at `target` level where an
    /// entry with rectangle `rect` goes (least enlargement over every entry
    /// of a unit, ties by the smallest area, then the first in unit order).
    pub(super) fn choose_path(
        &mut self,
        root: PageId,
        rect: &Rect,
        target: u16,
    ) -> Result<Vec<Step>> {
        let mut path = Vec::new();
        let mut id = root;
        let mut level = self
            .height
            .checked_sub(1)
            .ok_or_else(|| Error::corrupt(Some(root), "a root but height 0"))?;
        loop {
            if level < target {
                return Err(Error::corrupt(
                    Some(id),
                    format!("unit at level {level} reached while looking for level {target}"),
                ));
            }
            path.push(Step { primary: id, level });
            let access = if level == target {
                Access::Target
            } else {
                Access::Pass
            };
            self.count_access(id, access);
            if level == target {
                return Ok(path);
            }
            let nodes = self.unit(id)?;
            if let Some((_, node)) = nodes.iter().find(|(_, n)| n.level != level) {
                return Err(Error::corrupt(
                    Some(id),
                    format!("node at level {} in a unit of level {level}", node.level),
                ));
            }
            let all: Vec<Entry> = nodes
                .iter()
                .flat_map(|(_, n)| n.entries.iter().copied())
                .collect();
            id = choose_by_enlargement(&all, rect)
                .ok_or_else(|| Error::corrupt(Some(id), "internal unit without entries"))?;
            level -= 1;
        }
    }

    /// Adds `entry` to the last unit of `path` and adjusts the tree up to
    /// the root (rectangles, entries of units produced by merge-backs, a new
    /// root when the root merges back).
    pub(super) fn insert_along(&mut self, path: &[Step], entry: Entry) -> Result<()> {
        let mut i = path.len();
        let Some(last) = path.last().copied() else {
            return Err(Error::corrupt(None, "empty insertion path"));
        };
        let mut new_units = self.add_element(last.primary, last.level, entry)?;
        while i > 1 {
            i -= 1;
            let (Some(child), Some(parent)) = (path.get(i).copied(), path.get(i - 1).copied())
            else {
                break;
            };
            let changed = self.refresh_parent_entry(parent.primary, child.primary)?;
            if new_units.is_empty() && !changed {
                return Ok(());
            }
            let mut up = Vec::new();
            for e in new_units {
                up.extend(self.add_element(parent.primary, parent.level, e)?);
            }
            new_units = up;
        }
        // The root unit merged back: grow the tree.
        while !new_units.is_empty() {
            let root = self
                .root
                .ok_or_else(|| Error::corrupt(None, "tree lost its root during an insertion"))?;
            let rect = self
                .unit_mbr(root)?
                .ok_or_else(|| Error::corrupt(Some(root), "root unit left without entries"))?;
            let level = self.height;
            let new_root = self.create_node(
                level,
                vec![Entry {
                    key: root,
                    rect,
                    payload: 0,
                }],
            );
            self.root = Some(new_root);
            self.height = self.height.saturating_add(1);
            let mut up = Vec::new();
            for e in new_units {
                up.extend(self.add_element(new_root, level, e)?);
            }
            new_units = up;
        }
        Ok(())
    }

    /// Sets the parent's entry of unit `child` to the unit's MBR; true when it changed.
    pub(super) fn refresh_parent_entry(&mut self, parent: PageId, child: PageId) -> Result<bool> {
        let rect = self
            .unit_mbr(child)?
            .ok_or_else(|| Error::corrupt(Some(child), "unit left without entries"))?;
        let (holder, node) = self.holder_of(parent, child)?;
        let Ok(i) = node.entries.binary_search_by_key(&child, |e| e.key) else {
            return Err(Error::corrupt(
                Some(parent),
                "child entry missing from its parent unit",
            ));
        };
        if node.entries.get(i).is_some_and(|e| e.rect == rect) {
            return Ok(false);
        }
        let mut new = Node::clone(&node);
        if let Some(e) = new.entries.get_mut(i) {
            e.rect = rect;
        }
        self.put(holder, new)?;
        Ok(true)
    }

    /// The node of the unit of `primary` holding the entry with key `key`.
    pub(super) fn holder_of(
        &mut self,
        primary: PageId,
        key: u64,
    ) -> Result<(PageId, std::sync::Arc<Node>)> {
        self.unit(primary)?
            .into_iter()
            .find(|(_, n)| n.entries.binary_search_by_key(&key, |e| e.key).is_ok())
            .ok_or_else(|| {
                Error::corrupt(Some(primary), format!("entry {key} missing from the unit"))
            })
    }

    /// AddElement: puts `entry` into the P-node of the unit if it has room,
    /// else into the first O-node with room, else into a new O-node; then
    /// merges the unit back if its access counter reached the threshold.
    /// Returns the entries of the units a merge-back produced (for the parent).
    pub(super) fn add_element(
        &mut self,
        primary: PageId,
        level: u16,
        entry: Entry,
    ) -> Result<Vec<Entry>> {
        let max = self.config.max_entries;
        let nodes = self.unit(primary)?;
        let mut placed = false;
        for (id, node) in &nodes {
            if node.level != level {
                return Err(Error::corrupt(
                    Some(*id),
                    format!("node at level {} in a unit of level {level}", node.level),
                ));
            }
            if node.entries.len() < max {
                let pos = match node.entries.binary_search_by_key(&entry.key, |e| e.key) {
                    Ok(_) => {
                        return Err(Error::corrupt(
                            Some(*id),
                            format!("entry {} appears twice in a unit", entry.key),
                        ))
                    }
                    Err(p) => p,
                };
                // Sized for the result: a clone and an insert would double
                // the vector (the buffer charges entries, not capacity).
                let (before, after) = node.entries.split_at(pos);
                let mut entries = Vec::with_capacity(node.entries.len() + 1);
                entries.extend_from_slice(before);
                entries.push(entry);
                entries.extend_from_slice(after);
                self.put(*id, Node { level, entries })?;
                placed = true;
                break;
            }
        }
        if !placed {
            let o = self.create_node(level, vec![entry]);
            self.ont.entry(primary).or_default().overflow.push(o);
            self.stats.overflow_nodes_created += 1;
        }
        let due = self.ont.get(&primary).is_some_and(|e| {
            !e.overflow.is_empty()
                && e.accesses as f64 >= self.config.merge_threshold(e.overflow.len())
        });
        if due {
            return self.merge_back(primary, level);
        }
        Ok(Vec::new())
    }

    /// Merges the unit of `primary` back into ⌈n/M⌉ proper nodes: the
    /// P-node keeps the first group, the O-nodes' pages are reused for the
    /// others (which become P-nodes of new units) and the rest are deleted.
    /// Returns the parent entries of the new units.
    pub(super) fn merge_back(&mut self, primary: PageId, level: u16) -> Result<Vec<Entry>> {
        let nodes = self.unit(primary)?;
        let chain: Vec<PageId> = self
            .ont
            .remove(&primary)
            .map(|e| e.overflow)
            .unwrap_or_default();
        let entries: Vec<Entry> = nodes
            .iter()
            .flat_map(|(_, n)| n.entries.iter().copied())
            .collect();
        let groups = tile(entries, self.config.max_entries);
        let mut out = Vec::new();
        let mut pages = std::iter::once(primary).chain(chain.iter().copied());
        for (i, g) in groups.into_iter().enumerate() {
            let id = pages.next().ok_or_else(|| {
                Error::corrupt(Some(primary), "merge-back produced too many nodes")
            })?;
            if i > 0 {
                let rect = mbr(&g)
                    .ok_or_else(|| Error::corrupt(Some(id), "merge-back produced an empty node"))?;
                out.push(Entry {
                    key: id,
                    rect,
                    payload: 0,
                });
            }
            let mut g = g;
            g.sort_unstable_by_key(|e| e.key);
            self.put(id, Node { level, entries: g })?;
        }
        for id in pages {
            self.remove_node(id);
        }
        self.stats.merge_backs += 1;
        Ok(out)
    }
}

/// Splits `entries` into `⌈n / max⌉` groups of sizes as even as possible,
/// spatially (sort-tile: slices by centre x, then runs by centre y).
pub(super) fn tile(mut entries: Vec<Entry>, max: usize) -> Vec<Vec<Entry>> {
    let n = entries.len();
    let p = n.div_ceil(max.max(1)).max(1);
    if p == 1 {
        return vec![entries];
    }
    let sizes: Vec<usize> = (0..p)
        .map(|i| crate::index::bulk::even_sizes_at(n, p, i))
        .collect();
    let slices = (p as f64).sqrt().ceil() as usize;
    let cx = |e: &Entry| e.rect.min_x() + e.rect.max_x();
    let cy = |e: &Entry| e.rect.min_y() + e.rect.max_y();
    entries.sort_by(|a, b| cx(a).total_cmp(&cx(b)).then(a.key.cmp(&b.key)));
    let mut groups = Vec::with_capacity(p);
    let mut rest = entries.into_iter();
    let mut node = 0usize;
    for s in 0..slices {
        let nodes_here = crate::index::bulk::even_sizes_at(p, slices, s);
        let take: usize = sizes.iter().skip(node).take(nodes_here).sum();
        let mut slice: Vec<Entry> = rest.by_ref().take(take).collect();
        slice.sort_by(|a, b| cy(a).total_cmp(&cy(b)).then(a.key.cmp(&b.key)));
        let mut it = slice.into_iter();
        for size in sizes.iter().skip(node).take(nodes_here) {
            groups.push(it.by_ref().take(*size).collect());
        }
        node += nodes_here;
    }
    groups
}
