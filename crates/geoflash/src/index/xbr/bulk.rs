//! The SSD batch algorithms of Fevgas' thesis §3.6 for building and growing
//! an xBR+-tree: bulk loading and bulk insertion (Roumelis et al.,
//! "Bulk-loading and bulk-insertion algorithms for xBR+-trees in Solid State
//! Drives", Computing 2019).
//!
//! # Bulk loading
//! The thesis' four phases split the input into quadrant sub-files until
//! each fits memory, sort each by Z-order, build an xBR+-tree of each in
//! memory and merge it into the tree on disk, with large batched reads and
//! writes and "newly created nodes accumulated into a write buffer, which is
//! persisted at once whenever it gets full". Here the input is one
//! in-memory slice (the caller's memory bound): it is sorted by Z-order
//! (the points' addresses), the tree is built in memory by inserting the
//! points in that order into an xBR+-tree on a [`MemStore`] (the same
//! algorithms as on disk), and the nodes are then written bottom-up to the
//! target store, [`BulkOptions::write_batch`] nodes per store operation —
//! the write buffer: a store without a node buffer writes each operation as
//! one device batch. **Not done:** phases 1–2 (external partitioning of an
//! input larger than memory) and the merge with an existing tree (phase 4);
//! the target store must be empty. Until the last operation sets the tree
//! metadata the new nodes are unreachable, so a crash in the middle leaves
//! an empty tree (and pages the allocator still counts as used).
//!
//! # Bulk insertion
//! Points are taken in chunks of [`BulkOptions::chunk_points`] (the thesis'
//! in-memory buffer), each sorted by Z-order. A chunk is first routed down
//! the tree as a batch of point-location queries (one batched read per
//! level, [`BulkOptions::read_batch`] pages at most per read), which also
//! finds points the tree holds already (an error before anything changes).
//! The nodes read stay in memory while the chunk's points are inserted with
//! the ordinary algorithm inside **one** store operation, so its reads hit
//! memory and all its changed leaves (and the splits they cause) reach the
//! store together at the operation's end — one batch write on a store
//! without a node buffer. Each chunk is atomic; an error in a chunk leaves
//! the earlier chunks inserted and says how many points that is.
use std::collections::HashSet;
#[cfg(any(test, feature = "internals"))]
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{duplicate_id, insert::duplicate_point, XbrTree};
#[cfg(any(test, feature = "internals"))]
use super::XbrConfig;
use crate::geom::Point;
use crate::page::Entry;
use crate::page_id::PageId;
use crate::store::mem::MemStore;
use crate::store::{NodeStore, TreeMeta};
use crate::{Error, Result};

/// Sizes of the batches of the bulk algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkOptions {
    /// Bulk loading: nodes written per store operation (the write buffer;
    /// the thesis' best value was 128 pages).
    pub write_batch: usize,
    /// Bulk insertion: points per chunk (one store operation each).
    pub chunk_points: usize,
    /// Most pages of one batched read.
    pub read_batch: usize,
}

impl Default for BulkOptions {
    /// 128 nodes per write batch, chunks of 2,048 points, reads of at most 1,024 pages.
    fn default() -> Self {
        BulkOptions {
            write_batch: 128,
            chunk_points: 2048,
            read_batch: 1024,
        }
    }
}

impl BulkOptions {
    fn verify(&self) -> Result<()> {
        if self.write_batch == 0 || self.chunk_points == 0 || self.read_batch == 0 {
            return Err(Error::invalid(format!(
                "bulk batch sizes must be positive: {self:?}"
            )));
        }
        Ok(())
    }
}

/// Checks a batch of new points: inside the domain, ids unique in the batch
/// and not in `held`, points distinct. Returns the points with their
/// addresses, sorted by address (Z-order), then id.
fn sorted_batch(
    domain: &super::Domain,
    items: &[(u64, Point)],
    mut held: impl FnMut(u64) -> Result<bool>,
) -> Result<Vec<(u64, u64, Point)>> {
    let mut ids = HashSet::with_capacity(items.len());
    let mut out = Vec::with_capacity(items.len());
    for &(id, p) in items {
        let code = domain.code(&p)?;
        if !ids.insert(id) || held(id)? {
            return Err(duplicate_id(id));
        }
        out.push((code, id, p));
    }
    out.sort_by(|a, b| {
        (a.0, a.2.x, a.2.y, a.1)
            .partial_cmp(&(b.0, b.2.x, b.2.y, b.1))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    for w in out.windows(2) {
        if w[0].2 == w[1].2 {
            return Err(duplicate_point(&w[1].2, w[0].1));
        }
    }
    Ok(out.into_iter().map(|(c, id, p)| (id, c, p)).collect())
}

impl<S: NodeStore> XbrTree<S> {
#[cfg(any(test, feature = "internals"))]
    /// Builds a tree of `items` on the empty `store` (see the module
    /// documentation). Bad points or ids are errors before anything is written.
    pub fn bulk_load(
        store: S,
        config: XbrConfig,
        items: &[(u64, Point)],
        opts: BulkOptions,
    ) -> Result<Self> {
        let mut tree = XbrTree::create(store, config)?;
        tree.load(items, opts)?;
        Ok(tree)
    }

    /// Bulk loads `items` into this tree, which must be empty (see
    /// [`bulk_load`](Self::bulk_load)).
    pub fn load(&mut self, items: &[(u64, Point)], opts: BulkOptions) -> Result<()> {
        opts.verify()?;
        let meta = self.store.meta();
        if meta.root.is_some() || meta.records > 0 {
            return Err(Error::invalid(
                "a bulk load needs an empty xBR+-tree: use bulk insertion to add to one",
            ));
        }
        let batch = sorted_batch(&self.domain, items, |_| Ok(false))?;
        let mut mem = XbrTree::create(MemStore::new(), self.config)?;
        for &(id, _, p) in &batch {
            mem.insert(id, p)?;
        }
        let meta = mem.store.meta();
        let Some(root) = meta.root else {
            return Ok(());
        };
        let mut writer = Writer {
            op: Some(self.store.begin_op()?),
            in_op: 0,
            limit: opts.write_batch,
        };
        let new_root = copy_subtree(&mem, root, self, &mut writer)?;
        if writer.op.is_none() {
            writer.op = Some(self.store.begin_op()?);
        }
        self.store.set_meta(TreeMeta {
            root: Some(new_root),
            ..meta
        })?;
        if let Some(op) = writer.op.take() {
            self.store.commit_op(op)?;
        }
        self.ids = Some(batch.iter().map(|&(id, _, _)| id).collect());
        Ok(())
    }

#[cfg(any(test, feature = "internals"))]
    /// Inserts `items` in chunks (see the module documentation). Returns the
    /// number of store operations (chunks).
    pub fn bulk_insert(&mut self, items: &[(u64, Point)], opts: BulkOptions) -> Result<usize> {
        opts.verify()?;
        let domain = self.domain;
        // Ids and domain for the whole input first; points against the tree per chunk.
        let mut held = |id| self.holds_id(id);
        let batch = sorted_batch(&domain, items, &mut held)?;
        let mut done = 0usize;
        let mut chunks = 0;
        for chunk in batch.chunks(opts.chunk_points) {
            let outcome = self.insert_chunk(chunk, opts.read_batch);
            self.pins = None;
            if let Err(e) = outcome {
                self.ids = None;
                return Err(Error::invalid(format!(
                    "bulk insertion stopped after {done} of {} points: {e}",
                    batch.len()
                )));
            }
            done += chunk.len();
            chunks += 1;
        }
        Ok(chunks)
    }

#[cfg(any(test, feature = "internals"))]
    /// One chunk: batched routing (pinning every node read), then every
    /// insertion in one store operation.
    fn insert_chunk(&mut self, chunk: &[(u64, u64, Point)], read_batch: usize) -> Result<()> {
        let probes: Vec<super::query::PointProbe> = chunk
            .iter()
            .map(|&(_, _, p)| super::query::PointProbe::new(&self.domain, p))
            .collect();
        let mut read: HashMap<PageId, std::sync::Arc<crate::page::Node>> = HashMap::new();
        let (found, _) = self.probe_batch(&probes, read_batch, &mut |id, n| {
            read.insert(id, std::sync::Arc::clone(n));
        })?;
        if let Some((i, f)) = found.iter().enumerate().find(|(_, f)| !f.is_empty()) {
            return Err(duplicate_point(&chunk[i].2, f[0].0));
        }
        self.pins = Some(read);
        let op = self.store.begin_op()?;
        for &(id, code, p) in chunk {
            let path = self.path_for_insert(&p, code)?;
            self.insert_in_op(id, p, path)?;
            if let Some(ids) = self.ids.as_mut() {
                ids.insert(id);
            }
        }
        self.store.commit_op(op)
    }
}

/// Groups node creations into store operations of at most `limit` nodes.
struct Writer {
    op: Option<crate::store::OpId>,
    in_op: usize,
    limit: usize,
}

/// Writes the subtree of `page` of the in-memory tree `mem` into `tree`'s
/// store, children before parents; returns the new page of its root.
fn copy_subtree<S: NodeStore>(
    mem: &XbrTree<MemStore>,
    page: PageId,
    tree: &mut XbrTree<S>,
    w: &mut Writer,
) -> Result<PageId> {
    let node = mem.node(page)?;
    let entries: Vec<Entry> = if node.level == 0 {
        node.entries.clone()
    } else {
        let mut v = Vec::with_capacity(node.entries.len());
        for e in &node.entries {
            let key = copy_subtree(mem, e.key, tree, w)?;
            v.push(Entry { key, ..*e });
        }
        v
    };
    if w.op.is_none() {
        w.op = Some(tree.store.begin_op()?);
    }
    let id = tree.create_node(node.level, entries)?;
    w.in_op += 1;
    if w.in_op >= w.limit {
        if let Some(op) = w.op.take() {
            tree.store.commit_op(op)?;
        }
        w.in_op = 0;
    }
    Ok(id)
}
