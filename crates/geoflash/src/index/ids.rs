//! The set of object ids a tree holds, so that an insertion can refuse an id
//! that is already anywhere in the tree (not only in the leaf the new
//! rectangle goes to).
//!
//! An R-tree cannot find a record by id without its rectangle, so the tree
//! keeps the ids in memory, as an [`ObjectIds`]: dense ids (`0..n`, row
//! numbers) in chunks of arrays and bitmaps, from 2 bytes down to 1 bit per
//! record (4 M consecutive ids: 0.5 MB), ids spread too thinly for that in a
//! hash set (about 9–18 bytes per record). The set is outside the store's
//! node budget (`--buffer`), which counts pages and buffered changes only.
//!
//! The set is built lazily: a tree created empty starts with an empty set; a
//! tree opened from a store, or bulk loaded, gets its set at the first
//! insertion by one walk over the whole tree (every page read once, counted
//! by the store and the device like any read). The set is trusted only while
//! its size equals the record count of the tree's metadata and no operation
//! failed since it was built; otherwise the next insertion rebuilds it.
use std::sync::Arc;

use super::object_ids::ObjectIds;
use super::RTree;
use crate::page::Node;
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::{Error, Result};

/// The ids of the records of a tree, when known.
#[derive(Debug, Default)]
pub(crate) struct IdSet {
    ids: ObjectIds,
    /// False until built, and after a failed operation.
    valid: bool,
}

impl IdSet {
    /// The set of an empty tree.
    pub(crate) fn empty() -> Self {
        IdSet {
            ids: ObjectIds::new(),
            valid: true,
        }
    }

    /// A set to be built at the first insertion.
    pub(crate) fn unknown() -> Self {
        IdSet::default()
    }

    /// Forgets the ids (after a failed operation): the next insertion rebuilds them.
    pub(crate) fn invalidate(&mut self) {
        self.valid = false;
        self.ids = ObjectIds::new();
    }

    /// Records that `id` was inserted (no-op while the set is not built).
    pub(crate) fn added(&mut self, id: u64) {
        if self.valid {
            self.ids.insert(id);
        }
    }

    /// Records that `id` was deleted (no-op while the set is not built).
    pub(crate) fn removed(&mut self, id: u64) {
        if self.valid {
            self.ids.remove(&id);
        }
    }
}

impl<S: NodeStore> RTree<S> {
    /// True when the tree holds a record with object id `id`; builds the id
    /// set first when it is not known (one walk over the tree).
    pub(crate) fn holds_id(&mut self, id: u64) -> Result<bool> {
        let records = self.store.meta().records;
        if !self.ids.valid || self.ids.ids.len() as u64 != records {
            let ids = self.collect_ids()?;
            self.ids = IdSet { ids, valid: true };
        }
        Ok(self.ids.ids.contains(&id))
    }

    /// Every object id in the leaves; an id found twice is a corrupt tree.
    pub(crate) fn collect_ids(&self) -> Result<ObjectIds> {
        leaf_ids(self.store.meta().root, |page| self.store.get(page))
    }
}

/// Every object id in the leaves of the tree rooted at `root` (nodes read
/// with `get`; internal entries' keys are child pages); an id found twice
/// is a corrupt tree. Shared by the R-tree family and the xBR+-tree.
pub(crate) fn leaf_ids(
    root: Option<PageId>,
    get: impl Fn(PageId) -> Result<Arc<Node>>,
) -> Result<ObjectIds> {
    let mut ids = ObjectIds::new();
    let mut stack: Vec<PageId> = root.into_iter().collect();
    while let Some(page) = stack.pop() {
        let node = get(page)?;
        if node.level == 0 {
            for e in &node.entries {
                if !ids.insert(e.key) {
                    return Err(Error::corrupt(
                        Some(page),
                        format!("object id {} appears twice in the tree", e.key),
                    ));
                }
            }
        } else {
            stack.extend(node.entries.iter().map(|e| e.key));
        }
    }
    Ok(ids)
}
