//! The xBR+-tree (Roumelis, Vassilakopoulos, Loukopoulos, Corral and
//! Manolopoulos, "The xBR+-tree: an efficient access method for points",
//! DEXA 2015) with the SSD batch algorithms of Fevgas' thesis §3.6 (bulk
//! loading, bulk insertion, batch queries; Roumelis et al., MEDI 2018 and
//! Computing 2019), written once against [`NodeStore`] so that it runs on the
//! plain, eFIND and FAST stores unchanged.
//!
//! # Structure
//! A balanced disk tree for distinct 2-D points in a declared domain, one
//! node per page. The domain is decomposed like a quadtree ([`quad`]): every
//! internal entry names a *quadrant* (its address, in the entry's payload)
//! and holds the child's page id and its DBR — the MBR of the points stored
//! below, which queries prune with. The *region* of an entry is its
//! quadrant minus the deeper quadrants of the other entries of the same node
//! (the xBR-tree's "holes"); the entries of a node partition the node's
//! region, and a point belongs to the entry with the deepest quadrant that
//! holds it. Every internal node has one entry whose quadrant is the node's
//! own quadrant (the *remainder*: the whole domain for the root), so every
//! point of the node's region has an entry. Leaves hold `(object id, point)`.
//!
//! # Splits
//! - *Leaf.* A leaf with M + 1 points is split as in the thesis: "a new
//!   subregion is inserted, which corresponds to the quadrant that hosts the
//!   larger number of elements; the other region is what is left". Starting
//!   from the leaf's quadrant we descend into the sub-quadrant holding most
//!   of its points, level by level, and take the quadrant of that chain whose
//!   share of the points is closest to one half (the xBR+-tree's balancing
//!   criterion); its points move to a new leaf, which gets a new entry in
//!   the parent. Points that share every quadrant down to [`MAX_LEVEL`]
//!   cannot be separated: an insertion that would need it is an error.
//! - *Internal.* A node with M + 1 entries moves the entries lying inside
//!   one quadrant S to a new node; S is chosen among the quadrants of its
//!   entries (other than the node's own) so that the two halves are as
//!   even as possible. **Reconstruction:** the xBR+-tree papers allow other
//!   quadrants too; S equal to an entry's quadrant is the choice that never
//!   cuts an entry's region (the entry with quadrant S moves with its holes
//!   and becomes the new node's remainder), so no split propagates
//!   downwards. Fill is therefore not guaranteed: in skewed cases a split
//!   may move few entries. Both nodes stay correct.
//!
//! # Deletion
//! By `(id, point)`. The point is removed and the DBRs on its path are
//! recomputed exactly. A leaf (or subtree) left without points is removed
//! with its entry unless that entry is its parent's remainder — its region
//! then returns to the entry of the parent that encloses it, the deepest
//! other quadrant holding it. An internal root with one entry gives way to
//! its child (the tree shrinks).
//!
//! # Ids, points and the domain
//! Object ids are unique per tree (kept in memory like the R-tree's, built
//! by one walk at the first insertion after an open); points are distinct
//! and inside the domain given at creation. Each of these is a clear
//! [`Error::InvalidInput`] that changes nothing. The domain and M are not
//! stored in the tree: they are given again at [`XbrTree::open`] (the front
//! end keeps them in its manifest, as the Hilbert R-tree's domain).
//!
//! # Store operations and batches
//! Every insertion and deletion is one store operation; a bulk insertion is
//! one operation per chunk of points and a bulk load one per group of
//! nodes written (see [`bulk`]). Queries exist one node at a time and in
//! batches that read each level's nodes with one [`NodeStore::get_batch`]
//! (see [`query`]).
use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::geom::Rect;
use crate::index::object_ids::ObjectIds;
use crate::page::{self, Entry, Node};
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::{Error, Result};

pub mod bulk;
mod check;
mod delete;
mod external;
mod insert;
pub mod quad;
pub mod query;
mod spatial;
mod split;
#[cfg(test)]
mod tests;

pub use bulk::BulkOptions;
pub use check::XbrReport;
pub use quad::{Domain, Quadrant};

/// Parameters of an xBR+-tree, fixed for its life.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct XbrConfig {
    /// The domain every point must lie in (closed rectangle, positive extent).
    pub domain: Rect,
    /// M: the most entries of a node (at least 3, at most what a page holds).
    pub max_entries: usize,
}

impl XbrConfig {
    /// Domain `domain` and M = `max_entries`.
    pub fn new(domain: Rect, max_entries: usize) -> Self {
        XbrConfig {
            domain,
            max_entries,
        }
    }

    /// Domain `domain` and the M of a `page_size`-byte page (entries carry
    /// the quadrant as payload: 84 at 4 KiB).
    pub fn for_page(domain: Rect, page_size: usize) -> Self {
        XbrConfig::new(domain, page::max_entries(page_size, true))
    }

    /// Checks the parameters and returns the domain's address mapping.
    pub fn verify(&self) -> Result<Domain> {
        if self.max_entries < 3 {
            return Err(Error::invalid(format!(
                "xBR+-tree nodes need at least 3 entries (max_entries = {})",
                self.max_entries
            )));
        }
        Domain::new(self.domain)
    }
}

/// An xBR+-tree over a node store. See the module documentation.
#[derive(Debug)]
pub struct XbrTree<S: NodeStore> {
    store: S,
    config: XbrConfig,
    domain: Domain,
    /// The object ids of the tree (`None` until built, and after a failed operation).
    ids: Option<ObjectIds>,
    /// Nodes held in memory during a bulk insertion (fetched in batches,
    /// kept current by every change the insertion makes).
    pins: Option<HashMap<PageId, Arc<Node>>>,
    /// Node splits since the tree was created or opened (the xBR+-tree
    /// neither reinserts nor merges: a node left without points is removed).
    counters: crate::index::TreeCounters,
}

/// One node on a root-to-leaf path.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    /// Page of the node.
    pub(crate) id: PageId,
    /// The node as read.
    pub(crate) node: Arc<Node>,
    /// The node's quadrant (its entry's in the parent; the domain for the root).
    pub(crate) quad: Quadrant,
    /// Internal nodes: index of the entry the path follows.
    pub(crate) chosen: usize,
}

impl<S: NodeStore> XbrTree<S> {
    /// A new, empty tree on `store`, which must hold no tree yet.
    pub fn create(store: S, config: XbrConfig) -> Result<Self> {
        let domain = config.verify()?;
        store.meta().check_no_tree("one")?;
        Ok(XbrTree {
            store,
            config,
            domain,
            ids: Some(ObjectIds::new()),
            pins: None,
            counters: crate::index::TreeCounters::default(),
        })
    }

    /// The tree kept by `store`, created with `config`.
    pub fn open(store: S, config: XbrConfig) -> Result<Self> {
        let domain = config.verify()?;
        let tree = XbrTree {
            store,
            config,
            domain,
            ids: None,
            pins: None,
            counters: crate::index::TreeCounters::default(),
        };
        let meta = tree.store.meta();
        if let Some(root) = meta.root {
            let node = tree.node(root)?;
            if node.level + 1 != meta.height {
                return Err(Error::corrupt(
                    Some(root),
                    format!(
                        "root at level {} in a tree of height {}",
                        node.level, meta.height
                    ),
                ));
            }
            if node.entries.len() > config.max_entries {
                return Err(Error::invalid(format!(
                    "the root holds {} entries, more than max_entries = {}: open the tree with the M it was created with",
                    node.entries.len(),
                    config.max_entries
                )));
            }
        }
        Ok(tree)
    }

    /// The parameters.
    pub fn config(&self) -> &XbrConfig {
        &self.config
    }

#[cfg(test)]
    /// The domain's address mapping.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// Splits since the tree was created or opened.
    pub fn counters(&self) -> crate::index::TreeCounters {
        self.counters
    }

    store_accessors!(counts "point");

    /// Flushes the store: the tree needs no recovery after it.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.store.checkpoint()
    }

    /// Node `id`: the pinned copy during a bulk insertion, else the store's.
    pub(crate) fn node(&self, id: PageId) -> Result<Arc<Node>> {
        if let Some(n) = self.pins.as_ref().and_then(|p| p.get(&id)) {
            return Ok(Arc::clone(n));
        }
        self.store.get(id)
    }

    /// Nodes `ids` (in order), the ones not pinned read with one batch.
    pub(crate) fn nodes_batch(&self, ids: &[PageId]) -> Result<Vec<Arc<Node>>> {
        let pinned = |id: &PageId| self.pins.as_ref().and_then(|p| p.get(id)).cloned();
        let missing: Vec<PageId> = ids
            .iter()
            .filter(|id| pinned(id).is_none())
            .copied()
            .collect();
        let mut read = self.store.get_batch(&missing)?.into_iter();
        ids.iter()
            .map(|id| match pinned(id) {
                Some(n) => Ok(n),
                None => read.next().ok_or_else(|| {
                    Error::corrupt(Some(*id), "a batch read returned too few nodes")
                }),
            })
            .collect()
    }

    /// Keeps the pinned copy of node `id` current (no-op outside bulk insertions).
    fn pin(&mut self, id: PageId, node: Option<Node>) {
        if let Some(p) = self.pins.as_mut() {
            match node {
                Some(n) => {
                    p.insert(id, Arc::new(n));
                }
                None => {
                    p.remove(&id);
                }
            }
        }
    }

    /// Rewrites node `old` (page `id`) to hold `entries`, sending the store
    /// only the entries that changed.
    pub(crate) fn write_node(
        &mut self,
        id: PageId,
        old: &Node,
        mut entries: Vec<Entry>,
    ) -> Result<()> {
        entries.sort_by_key(|e| e.key);
        let changes = crate::index::diff(&old.entries, &entries);
        if !changes.is_empty() {
            self.store.modify(id, old.level, &changes)?;
            self.pin(
                id,
                Some(Node {
                    level: old.level,
                    entries,
                }),
            );
        }
        Ok(())
    }

    /// Creates a node at `level` holding `entries`.
    pub(crate) fn create_node(&mut self, level: u16, mut entries: Vec<Entry>) -> Result<PageId> {
        entries.sort_by_key(|e| e.key);
        let id = self.store.create(level, entries.clone())?;
        self.pin(id, Some(Node { level, entries }));
        Ok(id)
    }

    /// Deletes node `id`.
    pub(crate) fn delete_node(&mut self, id: PageId) -> Result<()> {
        self.store.delete(id)?;
        self.pin(id, None);
        Ok(())
    }

    /// The root-to-leaf path of the point with address `code`.
    pub(crate) fn descend(&self, root: PageId, code: u64) -> Result<Vec<Step>> {
        let mut path = Vec::with_capacity(usize::from(self.height()));
        let mut id = root;
        let mut quad = Quadrant::ROOT;
        loop {
            let node = self.node(id)?;
            if node.level == 0 {
                path.push(Step {
                    id,
                    node,
                    quad,
                    chosen: 0,
                });
                return Ok(path);
            }
            let chosen = quad::route(&node.entries, code, id)?;
            let child = quad::child_ref(&node.entries[chosen], id)?;
            let level = node.level;
            path.push(Step {
                id,
                node,
                quad,
                chosen,
            });
            let next = self.node(child.page)?;
            if next.level + 1 != level {
                return Err(Error::corrupt(
                    Some(child.page),
                    format!(
                        "child at level {} below a node at level {level}",
                        next.level
                    ),
                ));
            }
            id = child.page;
            quad = child.quad;
        }
    }

    /// True when the tree holds object id `id` (builds the id set first when
    /// it is not known: one walk over the tree).
    pub(crate) fn holds_id(&mut self, id: u64) -> Result<bool> {
        if self.ids.is_none() {
            self.ids = Some(self.collect_ids()?);
        }
        Ok(self.ids.as_ref().is_some_and(|s| s.contains(&id)))
    }

    /// Every object id in the leaves; an id found twice is a corrupt tree.
    fn collect_ids(&self) -> Result<ObjectIds> {
        super::ids::leaf_ids(self.store.meta().root, |page| self.node(page))
    }

    /// Keeps the id set in step with a finished operation: `apply` on
    /// success, forgetting the set on failure (the next insertion rebuilds it).
    pub(crate) fn track_ids(
        &mut self,
        outcome: &Result<()>,
        apply: impl FnOnce(&mut ObjectIds),
    ) {
        match (outcome, self.ids.as_mut()) {
            (Ok(()), Some(ids)) => apply(ids),
            (Ok(()), None) => {}
            (Err(_), _) => self.ids = None,
        }
    }
}

/// The error for an id the tree already holds.
pub(crate) fn duplicate_id(id: u64) -> Error {
    Error::invalid(format!("object id {id} is already in the xBR+-tree"))
}
