//! The FOR-tree (Flash-Optimized R-tree, Jin, Xie, Wang and Yue, "Optimizing
//! R-tree for flash memory", Expert Systems with Applications 42(10), 2015)
//! as its own index over the [`NodeStore`] contract.
//!
//! Unlike FAST and eFIND, the FOR-tree changes the tree structure, so it is
//! an index of its own rather than a store: it keeps its nodes as pages of
//! any store (a [`PlainStore`](crate::store::PlainStore) without buffer, a
//! [`MemStore`](crate::store::mem::MemStore), …) and never knows which one.
//!
//! # Structure
//! - **Units.** A node that is full does not split: an *overflow node*
//!   (O-node) is appended to it instead. A *primary node* (P-node) and its
//!   O-nodes form a *unit*; the parent holds one entry for the whole unit
//!   (key: the P-node's page id, rectangle: the union of every entry of the
//!   unit). All nodes of a unit are at the same level, so every leaf is at
//!   the same depth counted in units; the tree is "unbalanced" only in the
//!   length of its overflow chains. Every node holds at most M entries, an
//!   O-node at least one, and a unit other than the root at least m in total.
//! - **Overflow node table (ONT).** For every P-node with O-nodes: its chain
//!   of O-nodes (in creation order) and an *access counter*: how many
//!   operations read the unit since it last had no O-node (the original's
//!   `tsc`). Every read of such a unit costs k extra page reads.
//! - **Merge-back.** When an element is added to a unit that has k ≥ 1
//!   O-nodes, and its access counter has reached the threshold
//!   ```text
//!   T(k) = ⌊(5k − 1) / 2⌋ · C_w / C_r
//!   ```
//!   (`C_w`, `C_r`: the cost of a page write and of a page read,
//!   [`FortreeConfig::write_read_ratio`]), the unit is *merged back*: its
//!   entries are redistributed into `p = ⌈n / M⌉` proper nodes (the P-node
//!   keeps the first group and the pages of the O-nodes are reused for the
//!   others, as the original does to use no more pages than an R-tree), and
//!   the `p − 1` new nodes are added to the parent as entries — which may
//!   make the parent overflow or merge back in turn; a merge-back of the
//!   root grows the tree by one level. The groups are formed spatially
//!   (sort-tile: slices by centre x, then runs by centre y, sizes as even as
//!   possible, so each holds between m and M entries), not in arrival order.
//!
//!   What the access counter counts is the subject of the next section:
//!   the original's count of accesses only merges small nodes back through
//!   searches; the default counts the extra page reads, which merges every
//!   node size back under insertions alone.
//!
//!   *Where the formula comes from.* The seeds describe the rule only in
//!   words ("a formula that takes into account the number of accesses to the
//!   node and the costs of reading and writing a flash page", thesis survey;
//!   "when a specific number of accesses in an overflowed node is reached",
//!   eFIND paper). `T(k)` is the rule of FESTIval's FOR-tree (`fortree.c`,
//!   the implementation the seeds' authors ran, which states that it follows
//!   the original paper), with `x` and `y` its read and write costs. It reads
//!   as a rent-or-buy rule: a unit with k O-nodes costs k extra reads per
//!   access; merging costs about `(5k − 1) / 2` page writes (the k + 1 nodes
//!   rewritten, the parent, and the amortised cost of the parent's own
//!   growth), so the unit is merged once the extra reads could have paid for
//!   the writes. The default `C_w / C_r = 10` is the seeds' flash chip
//!   (300 µs program, 30 µs read, `NOTES-experiments.md`).
//!
//! # The access counter ([`FortreeConfig::original_root_counter`])
//! In the original, ChooseLeaf counts an access of the units it passes
//! through but not of the unit it inserts into (FESTIval: "the ChooseLeaf
//! of the FOR-tree original paper does not increment this attribute for
//! leaf nodes"); only searches count every unit. While the root is a leaf,
//! its counter therefore never moves during insertions, it never merges
//! back, and a build appends every object to an ever longer overflow chain
//! of the root: the tree stays one level high and each insertion reads the
//! whole chain. This is the failure both seeds report ("the number of
//! accesses of an overflowed root node is never incremented in an insertion
//! operation … the FOR-tree failed to construct the index"). With
//! `original_root_counter = true` this behaviour is reproduced: every
//! search or pass adds 1, an insertion or deletion into the unit adds 0.
//!
//! **The default fixes it** with two changes that make the counter measure
//! what the threshold is compared with:
//! - every unit an insertion or deletion reads counts, the unit it changes
//!   included (those reads of the overflow chain are real costs);
//! - an access of a unit with k O-nodes adds **k**, the extra page reads
//!   the chain cost it, instead of 1.
//!
//! So the counter is the extra reads the chain has cost since it appeared,
//! and the unit merges back once they reach `T(k)`, the merge's write cost
//! in read units: a rent-or-buy rule, as the formula is meant. Counting
//! accesses (1 each) is not enough: under insertions alone a unit's counter
//! grows by at most M per O-node while `T(k)` grows by about
//! `2.5 · C_w/C_r` = 25 per O-node, so below M ≈ 25 (512-byte pages, M = 12)
//! a unit, the leaf root first, never merges back and the build degenerates
//! exactly like the original's. Counting extra reads, the counter reaches
//! at least `M · k(k − 1)/2` by the time the k-th O-node appears, which
//! passes `T(k)` at a k that depends on M and `C_w/C_r` only: the tree
//! grows at every M ≥ 3, and chains stay bounded whatever the number of
//! records (20,000 random boxes at the default ratio: longest chain 16
//! O-nodes at M = 3, 4 at M = 12, 2 at M = 16, 1 from M = 24 up).
//!
//! # Buffer and flushing
//! The FOR-tree keeps its own buffer of decoded nodes within
//! [`FortreeConfig::buffer_bytes`] (charged by the shared
//! [`node_bytes`](crate::store::accounting::node_bytes), plus
//! [`changes_bytes`](crate::store::accounting::changes_bytes) for the keys
//! a changed node differs in from its stored version — what a flush sends
//! to the store as entry-level changes): changed (dirty) nodes, nodes
//! created since the last flush, and clean nodes kept for reading. After each operation, if the buffer is over budget, clean nodes
//! are dropped least recently used first; if dirty nodes alone exceed it,
//! a *flush* writes the dirty nodes grouped into *flushing units* of
//! [`FortreeConfig::flush_unit`] consecutive page ids (the original's
//! "nodes clustered by increasing ids"), coldest units with most updates
//! first: unit score = (updates buffered in the unit) × (operations since
//! the unit's last update + 1). Units are flushed until the buffer is at
//! most `(1 − flush_fraction) × budget`. Nodes created since the last flush
//! get their page from the store at the next flush (they are written then,
//! whatever their score), and pages of deleted nodes are released then. One
//! flush is one store operation, so a store without buffer writes it as one
//! device batch; a flush of more than [`FLUSH_PART_BYTES`] (a checkpoint's
//! of a large buffer) is written as several operations in a row, the same
//! pages in the same order, so that the store's copies and write batch stay
//! within that bound.
//!
//! What the buffer charges is what it allocates for its nodes: each node's
//! entries in a vector of their length (`Buffer::put`), so a budget bounds
//! the memory of the nodes, not only their count.
//!
//! # Durability
//! The index is consistent on the store after [`Fortree::checkpoint`]
//! (which flushes everything and writes the ONT); between checkpoints its
//! state lives in memory, as in the original (whose ONT and buffer are main
//! memory structures). [`Fortree::open`] reopens a checkpointed index.
//!
//! # On-store layout
//! The store's [`TreeMeta::root`] is the FOR-tree's *head page*, which never
//! moves; `height` and `records` are the FOR-tree's. The head page and its
//! continuation pages hold the tree root and the ONT as entries whose
//! rectangles are points `(a, b)` carrying two integers (see `persist.rs`).
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::geom::Rect;
use crate::index::checked;
use crate::index::object_ids::ObjectIds;
use crate::page::{Entry, Node};
use crate::page_id::PageId;
use crate::store::accounting::{node_bytes, node_bytes_for};
use crate::store::{NodeStore, TreeMeta};
use crate::{Error, Result};

mod buffer;
mod check;
#[cfg(test)]
mod crash_tests;
mod delete;
mod insert;
#[cfg(test)]
mod memory_tests;
mod persist;
pub(crate) mod query;
#[cfg(test)]
mod review_tests;
mod spatial;
#[cfg(test)]
mod tests;

use buffer::Buffer;
pub use check::FortreeReport;

/// Parameters of a `Fortree`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FortreeConfig {
    /// M: the most entries of a node (P-node or O-node).
    pub max_entries: usize,
    /// m: the fewest entries of a unit other than the root (P-node and O-nodes together).
    pub min_entries: usize,
    /// Buffer budget in bytes (0: every operation writes its changes at its end).
    pub buffer_bytes: usize,
    /// Pages per flushing unit (groups of consecutive page ids).
    pub flush_unit: usize,
    /// Share of the budget a flush frees at least, in (0, 1].
    pub flush_fraction: f64,
    /// `C_w / C_r`, the cost of a page write over that of a page read, in
    /// the merge-back threshold (see the module documentation).
    pub write_read_ratio: f64,
    /// Reproduce the original access counter (1 per access; insertions never
    /// count the unit they insert into, so a leaf root never merges back);
    /// `false` (default): every access counts, and adds the extra page reads
    /// of the unit's overflow chain (see the module documentation).
    pub original_root_counter: bool,
}

impl FortreeConfig {
    /// Defaults for M = `max_entries`: m = ⌈M/2⌉, 512 KiB of buffer,
    /// flushing units of 5 pages, flushes of at least 10 % of the buffer,
    /// `C_w / C_r` = 10, the fixed root counter.
    pub fn new(max_entries: usize) -> Self {
        FortreeConfig {
            max_entries,
            min_entries: crate::page::default_min_entries(max_entries),
            buffer_bytes: 512 * 1024,
            flush_unit: 5,
            flush_fraction: 0.1,
            write_read_ratio: 10.0,
            original_root_counter: false,
        }
    }

    /// Defaults with M of a node page of `page_size` bytes (entries without payload).
    pub fn for_page_size(page_size: usize) -> Result<Self> {
        crate::units::check_page_size(page_size)?;
        Ok(Self::new(crate::page::max_entries(page_size, false)))
    }

    /// Checks the parameters once; every error names the parameter.
    pub fn verify(&self) -> Result<()> {
        if self.max_entries < 3 {
            return Err(Error::invalid(format!(
                "FOR-tree: max_entries (M) must be at least 3, got {}",
                self.max_entries
            )));
        }
        if self.min_entries < 1 || 2 * self.min_entries > self.max_entries + 1 {
            return Err(Error::invalid(format!(
                "FOR-tree: min_entries (m) must be in 1..=(M+1)/2 = 1..={}, got {}",
                self.max_entries.div_ceil(2),
                self.min_entries
            )));
        }
        if self.flush_unit == 0 {
            return Err(Error::invalid(
                "FOR-tree: flush_unit must be at least 1 page",
            ));
        }
        if !(self.flush_fraction > 0.0 && self.flush_fraction <= 1.0) {
            return Err(Error::invalid(format!(
                "FOR-tree: flush_fraction must be in (0, 1], got {}",
                self.flush_fraction
            )));
        }
        if !(self.write_read_ratio.is_finite() && self.write_read_ratio > 0.0) {
            return Err(Error::invalid(format!(
                "FOR-tree: write_read_ratio (C_w / C_r) must be a positive number, got {}",
                self.write_read_ratio
            )));
        }
        Ok(())
    }

    /// The merge-back threshold `T(k) = ⌊(5k − 1)/2⌋ · C_w/C_r` for a unit
    /// with `k` O-nodes: the unit merges back when an element is added to it
    /// and its access counter is at least this value.
    pub fn merge_threshold(&self, k: usize) -> f64 {
        let k = k as f64;
        ((5.0 * k - 1.0) / 2.0).floor().max(0.0) * self.write_read_ratio
    }
}

internal! {
    /// One entry of the overflow node table.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct OntEntry {
        /// The O-nodes of the unit, in creation order.
        pub overflow: Vec<PageId>,
        /// The unit's access counter since it got its first O-node: accesses
        /// with the original counter, extra page reads of its overflow chain
        /// with the fixed one ([`FortreeConfig::original_root_counter`]).
        pub accesses: u64,
    }
}

internal! {
    /// Counters of a FOR-tree since it was created or opened.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct FortreeStats {
        /// O-nodes in the tree now.
        pub overflow_nodes: u64,
        /// O-nodes created.
        pub overflow_nodes_created: u64,
        /// Merge-back operations.
        pub merge_backs: u64,
        /// Units dissolved by deletions (their entries reinserted).
        pub condensed_units: u64,
        /// Flush events (each one store operation).
        pub flushes: u64,
        /// Nodes written by flushes (created and changed nodes).
        pub flushed_nodes: u64,
        /// Node requests answered by the FOR-tree's buffer.
        pub buffer_hits: u64,
        /// Node requests that went to the store.
        pub buffer_misses: u64,
        /// Node pages the store read from its device.
        pub pages_read: u64,
        /// Node pages the store wrote to its device.
        pub pages_written: u64,
        /// Peak bytes of the FOR-tree's buffer (noted when a node is read
        /// into it, changed or created), since the tree was opened or since
        /// `Fortree::restart_buffer_peak`.
        pub peak_buffer_bytes: u64,
    }
}

internal! {
    /// A FOR-tree over a node store. See the module documentation.
    ///
    /// Queries take `&mut self`: they count accesses in the overflow node table
    /// and fill the buffer.
    #[derive(Debug)]
    pub struct Fortree<S: NodeStore> {
        store: S,
        config: FortreeConfig,
        /// The head page (the store's `TreeMeta::root`).
        head: PageId,
        /// Continuation pages of the head written by the last checkpoint.
        continuation: Vec<PageId>,
        root: Option<PageId>,
        height: u16,
        records: u64,
        ont: BTreeMap<PageId, OntEntry>,
        buf: Buffer,
        stats: FortreeStats,
        /// Operation clock (one tick per insert or delete).
        tick: u64,
        /// The object ids of the records, for the duplicate check of insertions
        /// (`None` until built by one walk over the tree, and after a failed
        /// operation), as the R-tree family keeps them (`index::ids`): an
        /// [`ObjectIds`], about 2 bytes an id or less while the ids are dense
        /// (a `HashSet` took 9 to 18 bytes an id, and both tables while it
        /// grew: 28 MB at 1 M objects).
        ids: Option<ObjectIds>,
        /// The most a flush sends the store in one store operation, in
        /// bytes: [`FLUSH_PART_BYTES`]. Only tests lower it
        /// (`Fortree::set_flush_part_bytes`), so that the flush of a small
        /// tree is written in many parts; the pages written and their
        /// order do not depend on it, only the number of store operations.
        part_bytes: usize,
    }
}

/// The most a flush sends the store in one store operation, in bytes: per
/// node its decoded bytes ([`node_bytes`], the copy a store keeps until the
/// operation ends) and those of a full node (at least its page, which a
/// store without buffer encodes into the operation's write batch). A flush
/// of more (a checkpoint's, of every dirty node of a large buffer) is
/// written in several operations of at most this much: as one, it held a
/// copy of the whole buffer and its pages besides the buffer (at a 16 MiB
/// budget, 15 MB of copies and an 18 MB write batch).
pub(crate) const FLUSH_PART_BYTES: usize = 8 << 20;

/// The store operation a flush is writing and what it was sent so far.
#[derive(Debug)]
struct FlushPart {
    op: crate::store::OpId,
    /// The bytes charged to the operation ([`Fortree::next_part`]).
    bytes: usize,
}

/// One unit on a root-to-unit path: its P-node and its level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    primary: PageId,
    level: u16,
}

/// Why a unit is read: decides whether its access counter moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// A query.
    Search,
    /// An insertion or deletion passing through the unit.
    Pass,
    /// An insertion or deletion that changes the unit itself.
    Target,
}

impl<S: NodeStore> Fortree<S> {
    /// A new, empty FOR-tree on `store`, which must hold no tree yet
    /// (writes the head page).
    pub fn create(mut store: S, config: FortreeConfig) -> Result<Self> {
        config.verify()?;
        store.meta().check_no_tree("a FOR-tree")?;
        let op = store.begin_op()?;
        let head = store.create(0, persist::head_entries(None, 0, None)?)?;
        store.set_meta(TreeMeta {
            root: Some(head),
            height: 0,
            records: 0,
        })?;
        store.commit_op(op)?;
        let mut t = Self::assemble(store, config, head);
        t.ids = Some(ObjectIds::new());
        Ok(t)
    }

    fn assemble(store: S, config: FortreeConfig, head: PageId) -> Self {
        Fortree {
            store,
            config,
            head,
            continuation: Vec::new(),
            root: None,
            height: 0,
            records: 0,
            ont: BTreeMap::new(),
            buf: Buffer::default(),
            stats: FortreeStats::default(),
            tick: 0,
            ids: None,
            part_bytes: FLUSH_PART_BYTES,
        }
    }

    /// For tests: writes every later flush in store operations of at most
    /// `bytes` (instead of [`FLUSH_PART_BYTES`]; a node is never split, so
    /// a part holds at least one), to crash a checkpoint of a small tree
    /// between its parts.
    #[cfg(test)]
    pub(crate) fn set_flush_part_bytes(&mut self, bytes: usize) {
        self.part_bytes = bytes;
    }

    /// The parameters.
    pub fn config(&self) -> &FortreeConfig {
        &self.config
    }

    store_accessors!();

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.records
    }

    #[cfg(any(test, feature = "internals"))]
    /// True when the tree holds no record.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Number of levels (0 for an empty tree, 1 when the root unit is a leaf).
    pub fn height(&self) -> u16 {
        self.height
    }

    #[cfg(test)]
    /// The P-node of the root unit (`None` for an empty tree).
    pub fn root(&self) -> Option<PageId> {
        self.root
    }

    /// The overflow node table: P-node → its O-nodes and access counter.
    pub fn ont(&self) -> &BTreeMap<PageId, OntEntry> {
        &self.ont
    }

    /// Number of O-nodes of the unit whose P-node is `primary`.
    pub fn chain_len(&self, primary: PageId) -> usize {
        self.ont.get(&primary).map_or(0, |e| e.overflow.len())
    }

    #[cfg(test)]
    /// Bytes the buffer holds now.
    pub fn buffered_bytes(&self) -> usize {
        self.buf.bytes()
    }

    /// Counters since the tree was created or opened.
    pub fn stats(&self) -> FortreeStats {
        let s = self.store.stats();
        FortreeStats {
            overflow_nodes: self.ont.values().map(|e| e.overflow.len() as u64).sum(),
            pages_read: s.node_reads,
            pages_written: s.node_writes,
            ..self.stats
        }
    }

    /// Restarts the buffer peak (`peak_buffer_bytes` of [`Self::stats`])
    /// at the bytes the buffer holds now, and the store's
    /// (`NodeStore::restart_buffer_peak`).
    pub fn restart_buffer_peak(&mut self) {
        self.stats.peak_buffer_bytes = self.buf.bytes() as u64;
        self.store.restart_buffer_peak();
    }

    /// Node `id`, from the buffer or the store.
    fn node(&mut self, id: PageId) -> Result<Arc<Node>> {
        if let Some(n) = self.buf.get(id) {
            self.stats.buffer_hits += 1;
            return Ok(n);
        }
        self.stats.buffer_misses += 1;
        let n = self.store.get(id)?;
        self.buf.insert_clean(id, Arc::clone(&n));
        // A read grows the buffer (a query's as an insertion's): its peak.
        self.note_peak();
        Ok(n)
    }

    /// Replaces node `id` (dirty from now on).
    fn put(&mut self, id: PageId, node: Node) -> Result<()> {
        if !self.buf.contains(id) {
            self.node(id)?;
        }
        self.buf.put(id, node, self.tick);
        self.note_peak();
        Ok(())
    }

    /// A new node (its page comes from the store at the next flush).
    fn create_node(&mut self, level: u16, mut entries: Vec<Entry>) -> PageId {
        entries.sort_unstable_by_key(|e| e.key);
        let id = self.buf.create(Node { level, entries }, self.tick);
        self.note_peak();
        id
    }

    /// Deletes node `id` (its page is released at the next flush).
    fn remove_node(&mut self, id: PageId) {
        self.buf.remove(id);
    }

    fn note_peak(&mut self) {
        let b = self.buf.bytes() as u64;
        if b > self.stats.peak_buffer_bytes {
            self.stats.peak_buffer_bytes = b;
        }
    }

    /// The nodes of the unit whose P-node is `primary`: the P-node first,
    /// then its O-nodes in chain order.
    fn unit(&mut self, primary: PageId) -> Result<Vec<(PageId, Arc<Node>)>> {
        let chain: Vec<PageId> = self
            .ont
            .get(&primary)
            .map(|e| e.overflow.clone())
            .unwrap_or_default();
        let mut out = Vec::with_capacity(chain.len() + 1);
        out.push((primary, self.node(primary)?));
        for o in chain {
            out.push((o, self.node(o)?));
        }
        Ok(out)
    }

    /// Counts an access of the unit of `primary` per the configured rule
    /// (only units with O-nodes have a counter): the original adds 1 except
    /// for the unit an insertion or deletion changes; the fixed rule adds
    /// the unit's k O-nodes, the extra page reads of the access.
    fn count_access(&mut self, primary: PageId, access: Access) {
        let original = self.config.original_root_counter;
        if original && access == Access::Target {
            return;
        }
        if let Some(e) = self.ont.get_mut(&primary) {
            let cost = if original { 1 } else { e.overflow.len() as u64 };
            e.accesses = e.accesses.saturating_add(cost);
        }
    }

    /// The MBR of every entry of the unit of `primary` (`None` when empty).
    fn unit_mbr(&mut self, primary: PageId) -> Result<Option<Rect>> {
        let nodes = self.unit(primary)?;
        Ok(Rect::union_all(
            nodes
                .iter()
                .flat_map(|(_, n)| n.entries.iter().map(|e| &e.rect)),
        ))
    }

    /// Entries in the unit of `primary`.
    fn unit_len(&mut self, primary: PageId) -> Result<usize> {
        Ok(self
            .unit(primary)?
            .iter()
            .map(|(_, n)| n.entries.len())
            .sum())
    }

    /// The store's metadata for this tree: the head page, height and records.
    fn tree_meta(&self) -> TreeMeta {
        TreeMeta {
            root: Some(self.head),
            height: self.height,
            records: self.records,
        }
    }

    /// After a query: drops clean nodes beyond the budget (a query changes nothing).
    fn after_query(&mut self) {
        self.buf.evict_clean(self.config.buffer_bytes);
    }

    /// After the operation: keeps the buffer within its budget.
    fn end_op(&mut self) -> Result<()> {
        let budget = self.config.buffer_bytes;
        if self.buf.bytes() <= budget {
            return Ok(());
        }
        let target = ((budget as f64) * (1.0 - self.config.flush_fraction)) as usize;
        self.buf.evict_clean(target);
        if self.buf.bytes() > budget {
            let chosen = self
                .buf
                .choose_flush(target, self.config.flush_unit, self.tick);
            self.flush(Some(chosen))?;
            self.buf.evict_clean(target);
        }
        Ok(())
    }

    /// Writes buffered changes to the store: the given dirty nodes (all of
    /// them for `None`), every node created since the last flush, and the
    /// deletions. One store operation, or several in a row when the flush
    /// writes more than [`FLUSH_PART_BYTES`] (see [`FlushPart`]): the same
    /// nodes in the same order, each page written once.
    fn flush(&mut self, chosen: Option<Vec<PageId>>) -> Result<()> {
        let chosen = chosen.unwrap_or_else(|| self.buf.dirty_real());
        if chosen.is_empty() && !self.buf.has_pending() {
            return Ok(());
        }
        let mut part = FlushPart {
            op: self.store.begin_op()?,
            bytes: 0,
        };
        for id in self.buf.take_deleted() {
            self.store.delete(id)?;
        }
        let map = self.materialise(&mut part)?;
        let mut written = map.len() as u64;
        for id in chosen {
            let id = map.get(&id).copied().unwrap_or(id);
            if let Some((level, changes)) = self.buf.changes_of(id) {
                if !changes.is_empty() {
                    let bytes = self.buf.node_bytes_of(id);
                    self.next_part(&mut part, bytes)?;
                    self.store.modify(id, level, &changes)?;
                    written += 1;
                }
                self.buf.mark_clean(id);
            }
        }
        self.store.set_meta(self.tree_meta())?;
        self.store.commit_op(part.op)?;
        self.stats.flushes += 1;
        self.stats.flushed_nodes += written;
        Ok(())
    }

    /// Before a flush sends the store a node of `node_bytes` decoded bytes:
    /// commits the flush's current store operation and begins the next one
    /// when the node would take the operation past [`FLUSH_PART_BYTES`]
    /// (the tree's `part_bytes`, lower in some tests).
    fn next_part(&mut self, part: &mut FlushPart, node_bytes: usize) -> Result<()> {
        let cost = node_bytes + node_bytes_for(self.config.max_entries);
        if part.bytes > 0 && part.bytes + cost > self.part_bytes {
            self.store.commit_op(part.op)?;
            part.op = self.store.begin_op()?;
            part.bytes = 0;
        }
        part.bytes += cost;
        Ok(())
    }

    /// Gives every node created since the last flush its page in the store
    /// (children before parents, in the parts of `part`), and renames it
    /// everywhere: in the buffer, in parent entries, in the ONT and as the
    /// root. Returns the renaming.
    fn materialise(&mut self, part: &mut FlushPart) -> Result<HashMap<PageId, PageId>> {
        let mut map: HashMap<PageId, PageId> = HashMap::new();
        for v in self.buf.virtual_ids_by_level() {
            let Some(node) = self.buf.get(v) else {
                continue;
            };
            self.next_part(part, node_bytes(&node))?;
            let entries: Vec<Entry> = node
                .entries
                .iter()
                .map(|e| Entry {
                    key: if node.level > 0 {
                        map.get(&e.key).copied().unwrap_or(e.key)
                    } else {
                        e.key
                    },
                    ..*e
                })
                .collect();
            let real = self.store.create(node.level, entries)?;
            map.insert(v, real);
        }
        if map.is_empty() {
            return Ok(map);
        }
        self.buf.rename(&map);
        let mut ont = BTreeMap::new();
        for (p, mut e) in std::mem::take(&mut self.ont) {
            for o in &mut e.overflow {
                *o = map.get(o).copied().unwrap_or(*o);
            }
            ont.insert(map.get(&p).copied().unwrap_or(p), e);
        }
        self.ont = ont;
        if let Some(r) = self.root {
            self.root = Some(map.get(&r).copied().unwrap_or(r));
        }
        Ok(map)
    }

    /// Writes every buffered change, the ONT and the tree metadata, and
    /// checkpoints the store: [`Fortree::open`] finds this state again.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.flush(None)?;
        self.write_head()?;
        self.store.checkpoint()
    }
}
