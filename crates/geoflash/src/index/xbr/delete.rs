//! Deletion by `(id, point)`; the condensing is [`XbrTree::settle`]'s.
use super::quad;
use super::XbrTree;
use crate::geom::Point;
use crate::store::NodeStore;
use crate::{Error, Result};

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
        let Some(leaf) = path.last() else {
            return Err(absent());
        };
        let Some(pos) = leaf
            .node
            .entries
            .iter()
            .position(|e| e.key == id && quad::entry_point(e) == p)
        else {
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
}
