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
//! persisted at once whenever it gets full". Here the input is sorted by
//! Z-order (the points' addresses; in memory, or by an external sort), the
//! tree is built in memory by inserting the points in that order into an xBR+-tree on a [`MemStore`] (the same
//! algorithms as on disk), and its nodes are written to the target store,
//! children before parents, [`BulkOptions::write_batch`] nodes per store
//! operation — the write buffer: a store without a node buffer writes each
//! operation as one device batch.
//!
//! **Memory.** The tree in memory holds at most about
//! [`BulkOptions::held_nodes`] nodes (issue 47: the tree beside the input
//! grew with it, 177 MB at 3 M points). Insertion in Z-order never comes
//! back to a quadrant that lies wholly before the next point's address, so
//! when the tree in memory holds more nodes than that, the subtrees of such
//! quadrants are written to the target store and each of their nodes in
//! memory gives way to an empty placeholder on the same page (about 60
//! bytes; the tree's next nodes get the pages they would have had, so its
//! entries keep their order and its splits their choices). The tree built
//! is the one a load held whole would build, node for node; only its pages
//! differ (written in the order they are left behind, not in one post-order
//! walk at the end). A load of at most `held_nodes` nodes writes the very
//! pages of one held whole. Before anything is written, the input is
//! checked: ids, the domain, distinct points, and at most M points in one
//! finest cell (the leaf split's refusal).
//!
//! An input larger than memory (the thesis' phases 1–2, which partition it
//! into quadrant sub-files) is sorted by address through temporary files
//! instead, in one stream that the same build takes
//! ([`XbrTree::load_external`], `super::external`).
//!
//! **Not done:** the merge with an existing tree (phase 4); the target
//! store must be empty. Until the last operation sets the tree metadata the new
//! nodes are unreachable, so a crash in the middle (or an I/O error) leaves
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
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{duplicate_id, insert::duplicate_point, XbrTree};
#[cfg(any(test, feature = "internals"))]
use super::XbrConfig;
use crate::geom::Point;
use crate::page::Entry;
use crate::page_id::PageId;
use crate::store::mem::MemStore;
use crate::store::bulk::BulkSink;
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
    /// Bulk loading: nodes of the tree being built held in memory at once
    /// (a few KiB each: 177 MB held the 63,362 nodes of 3 M points at 4 KiB
    /// pages). Past it, the nodes that the
    /// remaining points can no longer reach are written to the target
    /// store, so the memory of the build does not grow with the input; a
    /// tree of fewer nodes is held whole and written at the end.
    pub held_nodes: usize,
}

impl Default for BulkOptions {
    /// 128 nodes per write batch, chunks of 2,048 points, reads of at most
    /// 1,024 pages, 2,048 nodes held by a bulk load (about 6 MiB at 4 KiB pages).
    fn default() -> Self {
        BulkOptions {
            write_batch: 128,
            chunk_points: 2048,
            read_batch: 1024,
            held_nodes: 2048,
        }
    }
}

impl BulkOptions {
    fn verify(&self) -> Result<()> {
        if self.write_batch == 0
            || self.chunk_points == 0
            || self.read_batch == 0
            || self.held_nodes == 0
        {
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
    items: impl IntoIterator<Item = Result<(u64, Point)>>,
    mut held: impl FnMut(u64) -> Result<bool>,
) -> Result<Vec<(u64, u64, Point)>> {
    let items = items.into_iter();
    // About 2 bytes an id or less while the ids are dense (a `HashSet`
    // took 16 to 36 bytes an id, twice while it grew).
    let mut ids = crate::index::object_ids::ObjectIds::new();
    let mut out = Vec::with_capacity(items.size_hint().0);
    for item in items {
        let (id, p) = item?;
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

/// The check of a load's points, sorted by address, that the leaf split
/// relies on: more than M points sharing one finest cell is an error before
/// anything is written (the split would refuse them midway through the
/// load). It holds the points of the current address only.
pub(super) struct CellRuns {
    max: usize,
    code: Option<u64>,
    run: Vec<Entry>,
}

impl CellRuns {
    /// A check for nodes of at most `max` entries.
    pub(super) fn new(max: usize) -> Self {
        CellRuns {
            max,
            code: None,
            run: Vec::new(),
        }
    }

    /// Takes the next point (`id` at `p`, address `code`) of the sorted stream.
    pub(super) fn push(&mut self, domain: &super::Domain, id: u64, code: u64, p: Point) -> Result<()> {
        if self.code != Some(code) {
            self.code = Some(code);
            self.run.clear();
        }
        self.run.push(super::quad::point_entry(id, p));
        if self.run.len() > self.max {
            super::split::split_leaf(domain, super::quad::Quadrant::ROOT, self.run.clone())?;
        }
        Ok(())
    }
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
    #[cfg(any(test, feature = "internals"))]
    pub fn load(&mut self, items: &[(u64, Point)], opts: BulkOptions) -> Result<()> {
        self.load_each(items.iter().map(|&item| Ok(item)), opts)
    }

    /// [`load`](Self::load) of the points `items` yields, as they come (a
    /// caller that makes them from other records holds no copy of them
    /// beside the load's own, Z-ordered): the first error `items` yields
    /// is returned before anything is written.
    pub fn load_each(
        &mut self,
        items: impl IntoIterator<Item = Result<(u64, Point)>>,
        opts: BulkOptions,
    ) -> Result<()> {
        self.load_counted(items, opts).map(|_| ())
    }

    /// [`load`](Self::load), returning the most nodes of the tree being
    /// built that memory held at once (placeholders of written nodes not
    /// counted).
    pub(crate) fn load_counted(
        &mut self,
        items: impl IntoIterator<Item = Result<(u64, Point)>>,
        opts: BulkOptions,
    ) -> Result<usize> {
        opts.verify()?;
        let meta = self.store.meta();
        if meta.root.is_some() || meta.records > 0 {
            return Err(Error::invalid(
                "a bulk load needs an empty xBR+-tree: use bulk insertion to add to one",
            ));
        }
        let batch = sorted_batch(&self.domain, items, |_| Ok(false))?;
        let mut cells = CellRuns::new(self.config.max_entries);
        for &(id, code, p) in &batch {
            cells.push(&self.domain, id, code, p)?;
        }
        let (peak, _) = self.build_sorted(batch.iter().map(|&point| Ok(point)), opts)?;
        self.ids = Some(batch.iter().map(|&(id, _, _)| id).collect());
        Ok(peak)
    }

    /// Builds this empty tree of the points of `sorted` (id, address,
    /// point), checked and sorted by address (see [`Builder`]); returns
    /// the most nodes memory held at once and the nodes of the tree.
    pub(super) fn build_sorted(
        &mut self,
        sorted: impl Iterator<Item = Result<(u64, u64, Point)>>,
        opts: BulkOptions,
    ) -> Result<(usize, u64)> {
        let mut b = Builder::new(self.config)?;
        let mut w = Writer {
            tree: self,
            op: None,
            in_op: 0,
            limit: opts.write_batch,
        };
        match b.build(sorted, opts.held_nodes, &mut w) {
            Ok(meta) => w.publish(meta)?,
            Err(e) => {
                // Nodes written so far stay unreachable (no metadata names
                // them), as after a crash; the store's operation is closed.
                if let Some(op) = w.op.take() {
                    let _ = w.tree.store.commit_op(op);
                }
                return Err(e);
            }
        }
        Ok((b.peak, b.nodes()))
    }

    /// [`build_sorted`](Self::build_sorted) through the store's bulk load
    /// ([`NodeStore::bulk_load`]): the nodes go to fresh pages, unlogged, and
    /// the tree is published once complete (an error publishes nothing).
    pub(super) fn build_sorted_unlogged(
        &mut self,
        sorted: impl Iterator<Item = Result<(u64, u64, Point)>>,
        held_nodes: usize,
    ) -> Result<(usize, u64)> {
        let mut b = Builder::new(self.config)?;
        let empty = self.store.meta();
        self.store.bulk_load(Box::new(|sink| {
            let meta = b.build(sorted, held_nodes, &mut Sunk(sink))?;
            Ok(meta.unwrap_or(empty))
        }))?;
        Ok((b.peak, b.nodes()))
    }

#[cfg(any(test, feature = "internals"))]
    /// Inserts `items` in chunks (see the module documentation). Returns the
    /// number of store operations (chunks).
    pub fn bulk_insert(&mut self, items: &[(u64, Point)], opts: BulkOptions) -> Result<usize> {
        opts.verify()?;
        let domain = self.domain;
        // Ids and domain for the whole input first; points against the tree per chunk.
        let mut held = |id| self.holds_id(id);
        let batch = sorted_batch(&domain, items.iter().map(|&item| Ok(item)), &mut held)?;
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
/// Where a load's finished nodes go, children before parents.
trait NodeOut {
    /// Stores a node of `level` holding `entries` and returns its page.
    fn node(&mut self, level: u16, entries: Vec<Entry>) -> Result<PageId>;
}

/// The nodes through `tree`'s store operations, `limit` nodes an operation
/// (the thesis' write buffer; the load the workbench measures).
struct Writer<'t, S: NodeStore> {
    tree: &'t mut XbrTree<S>,
    op: Option<crate::store::OpId>,
    in_op: usize,
    limit: usize,
}

impl<S: NodeStore> NodeOut for Writer<'_, S> {
    /// Creates the node in the running operation (begun when none runs,
    /// committed when full).
    fn node(&mut self, level: u16, entries: Vec<Entry>) -> Result<PageId> {
        if self.op.is_none() {
            self.op = Some(self.tree.store.begin_op()?);
        }
        let id = self.tree.create_node(level, entries)?;
        self.in_op += 1;
        if self.in_op >= self.limit {
            if let Some(op) = self.op.take() {
                self.tree.store.commit_op(op)?;
            }
            self.in_op = 0;
        }
        Ok(id)
    }
}

impl<S: NodeStore> Writer<'_, S> {
    /// Sets the tree's metadata to `meta` (nothing for an empty load) in
    /// the last operation.
    fn publish(&mut self, meta: Option<TreeMeta>) -> Result<()> {
        let Some(meta) = meta else {
            return Ok(());
        };
        if self.op.is_none() {
            self.op = Some(self.tree.store.begin_op()?);
        }
        self.tree.store.set_meta(meta)?;
        if let Some(op) = self.op.take() {
            self.tree.store.commit_op(op)?;
        }
        Ok(())
    }
}

/// The nodes through a store's bulk load ([`BulkSink`]).
struct Sunk<'s>(&'s mut dyn BulkSink);

impl NodeOut for Sunk<'_> {
    fn node(&mut self, level: u16, entries: Vec<Entry>) -> Result<PageId> {
        self.0.node(level, &entries)
    }
}

/// A bulk load under way: the tree built in memory by Z-ordered insertion,
/// the write batches to the target, and the nodes already written.
///
/// A node of `mem` whose quadrant lies wholly before the next point's
/// address never changes again: insertion in Z-order reaches only the
/// quadrants holding the points to come (a split rewrites the node it
/// splits and its parent, both on that path, and only moves entries, the
/// written nodes' among them, between such nodes). When `mem` holds too many
/// nodes, such subtrees are written to the target (children before
/// parents, as at the end), and each written node of `mem` gives way to an
/// empty placeholder on the same page, so that the pages `mem` hands out,
/// hence the order of the entries of its nodes and its splits, stay those
/// of a build held whole: the same tree, its nodes written in another order.
struct Builder {
    mem: XbrTree<MemStore>,
    /// Written nodes whose parent is still in `mem`: their page in `mem`
    /// (a placeholder now), their page in the target.
    written: HashMap<PageId, PageId>,
    /// Placeholders in `mem`.
    released: u64,
    /// The most nodes `mem` held at once, placeholders not counted.
    peak: usize,
}

impl Builder {
    /// A load of nothing yet into a tree of `config`.
    fn new(config: super::XbrConfig) -> Result<Self> {
        Ok(Builder {
            mem: XbrTree::create(MemStore::new(), config)?,
            written: HashMap::new(),
            released: 0,
            peak: 0,
        })
    }

    /// Nodes of the tree built so far: a tree of height h built by
    /// insertion holds `splits + h` nodes.
    fn nodes(&self) -> u64 {
        self.mem.counters().splits + u64::from(self.mem.height())
    }

    /// Nodes of `mem` holding entries. Insertion removes no node, and
    /// creates one at each split and one more at each growth of the tree:
    /// a tree of height h holds `splits + h` nodes.
    fn held(&self) -> usize {
        self.nodes().saturating_sub(self.released) as usize
    }

    /// Inserts the points of `sorted` (id, address, point; sorted by
    /// address) into `mem`, writing the finished nodes to `out` whenever
    /// `mem` holds more than `held_nodes` nodes (or twice what the last
    /// release left), then the rest. Returns the metadata of the tree
    /// written (`None` when `sorted` is empty).
    fn build(
        &mut self,
        sorted: impl Iterator<Item = Result<(u64, u64, Point)>>,
        held_nodes: usize,
        out: &mut dyn NodeOut,
    ) -> Result<Option<TreeMeta>> {
        let mut release_at = held_nodes;
        let mut sorted = sorted.peekable();
        while let Some(point) = sorted.next() {
            let (id, _, p) = point?;
            self.mem.insert(id, p)?;
            let held = self.held();
            self.peak = self.peak.max(held);
            if held > release_at {
                if let Some(Ok((_, next, _))) = sorted.peek() {
                    let next = *next;
                    self.release_finished(next, out)?;
                    release_at = held_nodes.max(2 * self.held());
                }
            }
        }
        let meta = self.mem.store.meta();
        let Some(root) = meta.root else {
            return Ok(None);
        };
        let new_root = self.copy_subtree(root, out, &mut Vec::new())?;
        Ok(Some(TreeMeta {
            root: Some(new_root),
            ..meta
        }))
    }

    /// Writes to `out` every subtree of `mem` that the points from address
    /// `next` on can no longer reach, and puts placeholders in its pages.
    fn release_finished(&mut self, next: u64, out: &mut dyn NodeOut) -> Result<()> {
        let Some(root) = self.mem.store.meta().root else {
            return Ok(());
        };
        let mut done = Vec::new();
        self.release_below(root, next, out, &mut done)?;
        if done.is_empty() {
            return Ok(());
        }
        let op = self.mem.store.begin_op()?;
        for &page in &done {
            self.mem.delete_node(page)?;
        }
        self.mem.store.commit_op(op)?;
        // The freed pages are the smallest free ones: the placeholders take
        // exactly them, and the tree's next nodes the pages they would have had.
        let op = self.mem.store.begin_op()?;
        let mut taken = Vec::with_capacity(done.len());
        for _ in &done {
            taken.push(self.mem.store.create(0, Vec::new())?);
        }
        self.mem.store.commit_op(op)?;
        done.sort_unstable();
        taken.sort_unstable();
        if taken != done {
            return Err(Error::corrupt(
                None,
                "xBR+-tree bulk load: placeholders on other pages than the nodes written",
            ));
        }
        self.released += done.len() as u64;
        Ok(())
    }

    /// [`release_finished`](Self::release_finished) below node `page` of
    /// `mem`, which the points to come still reach; `done` collects the
    /// pages written.
    fn release_below(
        &mut self,
        page: PageId,
        next: u64,
        out: &mut dyn NodeOut,
        done: &mut Vec<PageId>,
    ) -> Result<()> {
        let node = self.mem.node(page)?;
        if node.level == 0 {
            return Ok(());
        }
        for e in &node.entries {
            if self.written.contains_key(&e.key) {
                continue;
            }
            let child = super::quad::child_ref(e, page)?;
            let q = child.quad;
            if super::quad::Quadrant::of_code(next, q.level()).path() > q.path() {
                let id = self.copy_subtree(child.page, out, done)?;
                self.written.insert(child.page, id);
            } else {
                self.release_below(child.page, next, out, done)?;
            }
        }
        Ok(())
    }

    /// Writes the subtree of `page` of `mem` to `out`, children
    /// before parents (a child written earlier is not written again);
    /// returns the new page of its root. `done` collects the pages of `mem`
    /// written.
    fn copy_subtree(
        &mut self,
        page: PageId,
        out: &mut dyn NodeOut,
        done: &mut Vec<PageId>,
    ) -> Result<PageId> {
        let node = self.mem.node(page)?;
        let entries: Vec<Entry> = if node.level == 0 {
            node.entries.clone()
        } else {
            let mut v = Vec::with_capacity(node.entries.len());
            for e in &node.entries {
                let key = match self.written.remove(&e.key) {
                    Some(key) => key,
                    None => self.copy_subtree(e.key, out, done)?,
                };
                v.push(Entry { key, ..*e });
            }
            v
        };
        let id = out.node(node.level, entries)?;
        done.push(page);
        Ok(id)
    }
}
