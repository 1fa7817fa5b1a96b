//! Insertion, and the bottom-up pass shared with deletion that writes a
//! changed node and carries its consequences (new DBR, split, removal) to
//! the root.
use super::quad::{self, child_entry, point_entry, Quadrant};
use super::split::{split_internal, split_leaf};
use super::{duplicate_id, Step, XbrTree};
use crate::geom::Point;
use crate::page::Entry;
use crate::store::{NodeStore, TreeMeta};
use crate::{Error, Result};

/// What a changed node asks of its parent entry.
enum Carry {
    /// Replace the node's entry (new DBR), and add a sibling's entry after a split.
    Update(Entry, Option<Entry>),
    /// The node was removed with its (empty) subtree: drop its entry.
    Remove,
}

impl<S: NodeStore> XbrTree<S> {
    /// Inserts object `id` at `p` as one store operation. A point outside
    /// the domain, an id the tree holds, a point it holds, or a point that
    /// would overflow a leaf whose points no quadrant separates is an error
    /// and changes nothing (all are found before the operation starts).
    pub fn insert(&mut self, id: u64, p: Point) -> Result<()> {
        let code = self.domain.code(&p)?;
        if self.holds_id(id)? {
            return Err(duplicate_id(id));
        }
        let path = self.path_for_insert(&p, code)?;
        self.check_leaf_split(path.as_deref(), id, p)?;
        let done = (|| {
            let op = self.store.begin_op()?;
            self.insert_in_op(id, p, path)?;
            self.store.commit_op(op)
        })();
        self.track_ids(&done, |ids| {
            ids.insert(id);
        });
        done
    }

    /// The path to the leaf of the point with address `code` (`None` for a
    /// tree without root); a point the leaf already holds is an error.
    pub(crate) fn path_for_insert(&self, p: &Point, code: u64) -> Result<Option<Vec<Step>>> {
        let Some(root) = self.store.meta().root else {
            return Ok(None);
        };
        let path = self.descend(root, code)?;
        if let Some(leaf) = path.last() {
            if let Some(e) = leaf
                .node
                .entries
                .iter()
                .find(|e| quad::entry_point(e) == *p)
            {
                return Err(duplicate_point(p, e.key));
            }
        }
        Ok(Some(path))
    }

    /// An error if adding `(id, p)` to the leaf of `path` would overflow it
    /// and no quadrant separates its points: the leaf split's own refusal,
    /// found before an operation starts (inside one, the failure would
    /// leave the operation open and the store refusing further changes).
    pub(super) fn check_leaf_split(&self, path: Option<&[Step]>, id: u64, p: Point) -> Result<()> {
        let Some(leaf) = path.and_then(|s| s.last()) else {
            return Ok(());
        };
        if leaf.node.entries.len() < self.config.max_entries {
            return Ok(());
        }
        let mut entries = leaf.node.entries.clone();
        entries.push(point_entry(id, p));
        split_leaf(&self.domain, leaf.quad, entries).map(|_| ())
    }

    /// The insertion inside a running operation (`path` from
    /// [`path_for_insert`](Self::path_for_insert), checks done).
    pub(crate) fn insert_in_op(
        &mut self,
        id: u64,
        p: Point,
        path: Option<Vec<Step>>,
    ) -> Result<()> {
        let mut meta = self.store.meta();
        let entry = point_entry(id, p);
        match path {
            None => {
                let root = self.create_node(0, vec![entry])?;
                meta.root = Some(root);
                meta.height = 1;
            }
            Some(path) => {
                let Some(leaf) = path.last() else {
                    return Err(Error::corrupt(None, "empty root-to-leaf path"));
                };
                let mut entries = leaf.node.entries.clone();
                entries.push(entry);
                self.settle(&path, entries, &mut meta)?;
            }
        }
        meta.records += 1;
        self.store.set_meta(meta)
    }

    /// Writes `entries` as the new content of the last node of `path` and
    /// carries the consequences up: new DBRs, splits (a root split grows
    /// the tree), removal of emptied subtrees that are not their parent's
    /// remainder, and an internal root left with one entry giving way to
    /// its child. Updates `meta`'s root and height.
    pub(crate) fn settle(
        &mut self,
        path: &[Step],
        mut entries: Vec<Entry>,
        meta: &mut TreeMeta,
    ) -> Result<()> {
        let mut removed = false;
        for i in (0..path.len()).rev() {
            let step = &path[i];
            let level = step.node.level;
            let dbr = quad::dbr_of(level, &entries, step.id)?;
            let remainder = i == 0 || path[i - 1].quad == step.quad;
            let carry = if dbr.is_none() && !remainder {
                self.drop_subtree(step.id, level, &entries)?;
                removed = true;
                Carry::Remove
            } else if entries.len() > self.config.max_entries {
                self.counters.splits += 1;
                let split = if level == 0 {
                    split_leaf(&self.domain, step.quad, entries)?
                } else {
                    split_internal(step.quad, entries, step.id)?
                };
                let moved_dbr = quad::dbr_of(level, &split.moved, step.id)?;
                let stay_dbr = quad::dbr_of(level, &split.stay, step.id)?;
                self.write_node(step.id, &step.node, split.stay)?;
                let sibling = self.create_node(level, split.moved)?;
                Carry::Update(
                    child_entry(&self.domain, step.id, step.quad, stay_dbr),
                    Some(child_entry(&self.domain, sibling, split.quad, moved_dbr)),
                )
            } else {
                self.write_node(step.id, &step.node, entries)?;
                Carry::Update(child_entry(&self.domain, step.id, step.quad, dbr), None)
            };
            if i == 0 {
                if let Carry::Update(old_root, Some(sibling)) = carry {
                    let root = self.create_node(level + 1, vec![old_root, sibling])?;
                    meta.root = Some(root);
                    meta.height += 1;
                }
                break;
            }
            let parent = &path[i - 1];
            entries = parent.node.entries.clone();
            match carry {
                Carry::Remove => {
                    entries.remove(parent.chosen);
                }
                Carry::Update(e, sibling) => {
                    if entries[parent.chosen] == e && sibling.is_none() {
                        break;
                    }
                    entries[parent.chosen] = e;
                    entries.extend(sibling);
                }
            }
        }
        if removed {
            self.shrink_root(meta)?;
        }
        Ok(())
    }

    /// Deletes node `page` (at `level`, now holding `entries`) and every
    /// node below it: a subtree without points.
    fn drop_subtree(&mut self, page: u64, level: u16, entries: &[Entry]) -> Result<()> {
        if level > 0 {
            for e in entries {
                let child = self.node(e.key)?;
                self.drop_subtree(e.key, child.level, &child.entries)?;
            }
        }
        self.delete_node(page)
    }

    /// While the root is an internal node with a single entry (necessarily
    /// the whole domain), its child becomes the root.
    fn shrink_root(&mut self, meta: &mut TreeMeta) -> Result<()> {
        while let (Some(root), true) = (meta.root, meta.height > 1) {
            let node = self.node(root)?;
            let [only] = node.entries.as_slice() else {
                break;
            };
            let child = quad::child_ref(only, root)?;
            if child.quad != Quadrant::ROOT {
                return Err(Error::corrupt(
                    Some(root),
                    "the root's only entry does not cover the domain",
                ));
            }
            self.delete_node(root)?;
            meta.root = Some(child.page);
            meta.height -= 1;
        }
        Ok(())
    }
}

/// The error for a point the tree already holds.
pub(crate) fn duplicate_point(p: &Point, holder: u64) -> Error {
    Error::invalid(format!(
        "point ({}, {}) is already in the xBR+-tree (object id {holder}); the xBR+-tree holds distinct points",
        p.x, p.y
    ))
}
