//! Deletion: FindLeaf over units, removal, unit repair and CondenseTree
//! (underfull units dissolved and their entries reinserted at their level).
use super::{checked, Access, Fortree, Step};
use crate::geom::Rect;
use crate::page::{Entry, Node};
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::{Error, Result};

impl<S: NodeStore> Fortree<S> {
    /// Deletes object `id` whose MBR is `rect` (the rectangle it was
    /// inserted with). An absent pair is an error and the tree is unchanged.
    pub fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        let done = self.delete_record(id, rect);
        match (&done, self.ids.as_mut()) {
            (Ok(()), Some(ids)) => {
                ids.remove(&id);
            }
            (Ok(()), None) => {}
            // An absent record or a bad rectangle changes nothing.
            (Err(Error::InvalidInput(_)), _) => {}
            (Err(_), _) => self.ids = None,
        }
        done
    }

    /// Deletes the record; an [`Error::InvalidInput`] changes nothing.
    fn delete_record(&mut self, id: u64, rect: Rect) -> Result<()> {
        let rect = checked(rect)?;
        let not_found = || {
            Error::invalid(format!(
                "object {id} with rectangle {rect:?} is not in the index"
            ))
        };
        let root = self.root.ok_or_else(not_found)?;
        let top = self
            .height
            .checked_sub(1)
            .ok_or_else(|| Error::corrupt(Some(root), "a root but height 0"))?;
        let mut path = Vec::new();
        let holder = self
            .find_leaf(
                Step {
                    primary: root,
                    level: top,
                },
                id,
                &rect,
                &mut path,
            )?
            .ok_or_else(not_found)?;
        self.tick += 1;
        let node = self.node(holder)?;
        let mut new = Node::clone(&node);
        new.entries.retain(|e| e.key != id);
        self.put(holder, new)?;
        self.records = self.records.saturating_sub(1);
        self.condense(&path)?;
        self.end_op()
    }

    /// Depth-first search for the leaf unit holding `(id, rect)`; fills
    /// `path` (root first) and returns the node holding the record.
    fn find_leaf(
        &mut self,
        step: Step,
        id: u64,
        rect: &Rect,
        path: &mut Vec<Step>,
    ) -> Result<Option<PageId>> {
        let access = if step.level == 0 {
            Access::Target
        } else {
            Access::Pass
        };
        self.count_access(step.primary, access);
        path.push(step);
        let nodes = self.unit(step.primary)?;
        if step.level == 0 {
            for (nid, n) in &nodes {
                if let Ok(i) = n.entries.binary_search_by_key(&id, |e| e.key) {
                    if n.entries.get(i).is_some_and(|e| e.rect == *rect) {
                        return Ok(Some(*nid));
                    }
                }
            }
        } else {
            let children: Vec<PageId> = nodes
                .iter()
                .flat_map(|(_, n)| n.entries.iter())
                .filter(|e| e.rect.contains(rect))
                .map(|e| e.key)
                .collect();
            for c in children {
                let child = Step {
                    primary: c,
                    level: step.level - 1,
                };
                if let Some(h) = self.find_leaf(child, id, rect, path)? {
                    return Ok(Some(h));
                }
            }
        }
        path.pop();
        Ok(None)
    }

    /// Keeps a unit well-formed after removals: no empty O-node, and a
    /// P-node that is empty takes the entries of the last O-node.
    pub(super) fn repair_unit(&mut self, primary: PageId) -> Result<()> {
        let nodes = self.unit(primary)?;
        let mut empty: Vec<PageId> = nodes
            .iter()
            .skip(1)
            .filter(|(_, n)| n.entries.is_empty())
            .map(|(id, _)| *id)
            .collect();
        if let Some(e) = self.ont.get_mut(&primary) {
            e.overflow.retain(|o| !empty.contains(o));
        }
        for id in empty.drain(..) {
            self.remove_node(id);
        }
        let p_empty = nodes.first().is_some_and(|(_, n)| n.entries.is_empty());
        if p_empty {
            let last = self.ont.get_mut(&primary).and_then(|e| e.overflow.pop());
            if let Some(o) = last {
                let moved = self.node(o)?;
                self.put(primary, Node::clone(&moved))?;
                self.remove_node(o);
            }
        }
        if self
            .ont
            .get(&primary)
            .is_some_and(|e| e.overflow.is_empty())
        {
            self.ont.remove(&primary);
        }
        Ok(())
    }

    /// CondenseTree along `path` (root first) after a removal in its last
    /// unit: dissolves units below m, refreshes rectangles, shortens the
    /// tree while the root is an internal unit with one entry, and
    /// reinserts the orphaned entries at their level.
    fn condense(&mut self, path: &[Step]) -> Result<()> {
        let mut orphans: Vec<(u16, Entry)> = Vec::new();
        for i in (1..path.len()).rev() {
            let (Some(step), Some(parent)) = (path.get(i).copied(), path.get(i - 1).copied())
            else {
                break;
            };
            self.repair_unit(step.primary)?;
            if self.unit_len(step.primary)? < self.config.min_entries {
                for (nid, n) in self.unit(step.primary)? {
                    orphans.extend(n.entries.iter().map(|e| (step.level, *e)));
                    self.remove_node(nid);
                }
                self.ont.remove(&step.primary);
                let (holder, node) = self.holder_of(parent.primary, step.primary)?;
                let mut new = Node::clone(&node);
                new.entries.retain(|e| e.key != step.primary);
                self.put(holder, new)?;
                self.stats.condensed_units += 1;
            } else {
                self.refresh_parent_entry(parent.primary, step.primary)?;
            }
        }
        if let Some(root) = path.first() {
            self.repair_unit(root.primary)?;
        }
        self.shorten()?;
        // Reinsert, highest level first (records last), each at its level.
        orphans.sort_by_key(|o| std::cmp::Reverse(o.0));
        for (level, e) in orphans {
            self.reinsert(level, e)?;
        }
        Ok(())
    }

    /// While the root is an internal unit with a single entry, its child
    /// becomes the root; an empty root leaves an empty tree.
    fn shorten(&mut self) -> Result<()> {
        while let Some(root) = self.root {
            let nodes = self.unit(root)?;
            let total: usize = nodes.iter().map(|(_, n)| n.entries.len()).sum();
            if total == 0 {
                for (id, _) in nodes {
                    self.remove_node(id);
                }
                self.ont.remove(&root);
                self.root = None;
                self.height = 0;
                break;
            }
            if self.height > 1 && total == 1 {
                let child = nodes
                    .iter()
                    .flat_map(|(_, n)| n.entries.first())
                    .next()
                    .map(|e| e.key)
                    .ok_or_else(|| Error::corrupt(Some(root), "root entry vanished"))?;
                for (id, _) in nodes {
                    self.remove_node(id);
                }
                self.ont.remove(&root);
                self.root = Some(child);
                self.height -= 1;
                continue;
            }
            break;
        }
        Ok(())
    }

    /// Puts an orphaned entry of `level` back into the tree; a subtree
    /// whose level the tree no longer has above it is dissolved into its
    /// records.
    fn reinsert(&mut self, level: u16, e: Entry) -> Result<()> {
        match self.root {
            Some(root) if self.height > level => {
                let path = self.choose_path(root, &e.rect, level)?;
                self.insert_along(&path, e)
            }
            None if level == 0 => {
                let root = self.create_node(0, vec![e]);
                self.root = Some(root);
                self.height = 1;
                Ok(())
            }
            _ if level == 0 => Err(Error::corrupt(None, "a root but height 0")),
            _ => {
                // `e` points to a unit at `level - 1` that cannot hang below a
                // unit of `level`: reinsert its entries one level down.
                let child = e.key;
                let nodes = self.unit(child)?;
                self.ont.remove(&child);
                for (id, n) in nodes {
                    self.remove_node(id);
                    for x in &n.entries {
                        self.reinsert(level - 1, *x)?;
                    }
                }
                Ok(())
            }
        }
    }
}
