//! Deletion by `(id, point)`, and the move of a point (an update) as one
//! store operation; the condensing is [`XbrTree::settle`]'s.
use super::quad::{self, point_entry};
use super::{Step, XbrTree};
use crate::geom::Point;
use crate::store::NodeStore;
use crate::{Error, Result};

/// The position of object `id` at `p` in the leaf ending `path`.
fn position_in_leaf(path: &[Step], id: u64, p: Point) -> Option<usize> {
    path.last()?
        .node
        .entries
        .iter()
        .position(|e| e.key == id && quad::entry_point(e) == p)
}

impl<S: NodeStore> XbrTree<S> {
    /// Deletes object `id` at `p` (the point it was inserted with) as one
    /// store operation. An absent pair is an error and changes nothing.
    pub fn delete(&mut self, id: u64, p: Point) -> Result<()> {
        let absent = || {
            Error::invalid(format!(
                "object id {id} at ({}, {}) is not in the xBR+-tree",
                p.x, p.y
            ))
        };
        let mut meta = self.store.meta();
        let (Some(root), Ok(code)) = (meta.root, self.domain.code(&p)) else {
            return Err(absent());
        };
        let path = self.descend(root, code)?;
        let (Some(leaf), Some(pos)) = (path.last(), position_in_leaf(&path, id, p)) else {
            return Err(absent());
        };
        let mut entries = leaf.node.entries.clone();
        entries.remove(pos);
        let done = (|| {
            let op = self.store.begin_op()?;
            self.settle(&path, entries, &mut meta)?;
            meta.records = meta.records.saturating_sub(1);
            self.store.set_meta(meta)?;
            self.store.commit_op(op)
        })();
        self.track_ids(&done, |ids| {
            ids.remove(&id);
        });
        done
    }

    /// Moves object `id` from `from` to `p` as one store operation, so that
    /// a crash of a logged store (eFIND, FAST) comes back with the object
    /// at one point or the other, never without it (two operations, a
    /// deletion then an insertion, lost it when the crash came between
    /// their commits). The caller has checked `p`: in the domain, held by
    /// no other object. An absent `(id, from)`, or a leaf that cannot take
    /// `p` (points no quadrant separates), is an error found before the
    /// operation starts, and changes nothing. Within its leaf the entry is
    /// rewritten; otherwise the point is inserted in its new leaf first
    /// (the checks of [`insert`](Self::insert), exact there: the leaf does
    /// not hold the moved entry), then deleted from its old one.
    pub(crate) fn move_point(&mut self, id: u64, from: Point, p: Point) -> Result<()> {
        let absent = || {
            Error::invalid(format!(
                "object id {id} at ({}, {}) is not in the xBR+-tree",
                from.x, from.y
            ))
        };
        let code = self.domain.code(&p)?;
        let (Some(root), Ok(from_code)) = (self.store.meta().root, self.domain.code(&from)) else {
            return Err(absent());
        };
        let from_path = self.descend(root, from_code)?;
        let (Some(leaf), Some(pos)) = (from_path.last(), position_in_leaf(&from_path, id, from))
        else {
            return Err(absent());
        };
        let to_path = self.descend(root, code)?;
        let same_leaf = to_path.last().map(|s| s.id) == Some(leaf.id);
        let mut entries = leaf.node.entries.clone();
        if !same_leaf {
            self.check_leaf_split(Some(&to_path), id, p)?;
        }
        let done = (|| {
            let op = self.store.begin_op()?;
            let mut meta = self.store.meta();
            if same_leaf {
                entries[pos] = point_entry(id, p);
                self.settle(&from_path, entries, &mut meta)?;
            } else {
                drop(from_path);
                self.insert_in_op(id, p, Some(to_path))?;
                meta = self.store.meta();
                let root = meta
                    .root
                    .ok_or_else(|| Error::corrupt(None, "no root after an insertion"))?;
                let path = self.descend(root, from_code)?;
                let (Some(leaf), Some(pos)) = (path.last(), position_in_leaf(&path, id, from))
                else {
                    return Err(Error::corrupt(
                        path.last().map(|s| s.id),
                        format!("object {id} moved from its leaf by an insertion elsewhere"),
                    ));
                };
                let mut entries = leaf.node.entries.clone();
                entries.remove(pos);
                self.settle(&path, entries, &mut meta)?;
                meta.records = meta.records.saturating_sub(1);
            }
            self.store.set_meta(meta)?;
            self.store.commit_op(op)
        })();
        // The id set is unchanged (forgotten on failure, rebuilt later).
        self.track_ids(&done, |_| {});
        done
    }
}
