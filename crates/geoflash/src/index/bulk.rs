//! Bulk loading: STR (Sort-Tile-Recursive, Leutenegger et al. 1997) and
//! Hilbert packing (Kamel and Faloutsos 1993), level by level from the
//! leaves up, every node created once with its final entries (so each page
//! is written once, in allocation order).
//!
//! Nodes hold `⌊M · fill⌋` entries (at least m); the entries of a level are
//! spread evenly over its nodes so every node holds between m and M entries.
//! The nodes go to the store through [`NodeStore::bulk_load`]: outside
//! operations, unlogged, in large sequential batches, and the tree is
//! published atomically once complete (see [`crate::store::bulk`]): a crash
//! in the middle leaves the empty tree, never a part of the new one.
//!
//! Every loader (these two, and the bounded-memory ones of
//! [`super::external`] and `super::external_str`) can be stopped by its
//! caller ([`BulkWatch`]): it asks every 65,536 records of its passes over
//! its input, between its sorts (and their runs and merges) and before
//! each node it stores, and a stopped load publishes nothing, as a failed
//! one. A single sort is not interrupted.
use super::ops::{center, ordered_bits};
use super::params::{IndexKind, TreeParams};
use super::{checked, entry_of, RTree};
use crate::geom::{HilbertDomain, Rect};
use crate::page::Entry;
use crate::store::{BulkSink, NodeStore, TreeMeta};
use crate::{Error, Result};

/// How a bulk load orders the entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BulkMethod {
    /// Sort-Tile-Recursive: vertical slices by centre x, runs by centre y.
    Str,
    /// Hilbert packing: entries by the Hilbert value of their centre.
    Hilbert,
}

/// What the caller of a bulk load has to say while it runs: whether to
/// stop, and how far the load is. A load asks its `stop` at coarse
/// points of its sort and write phases (between sort runs and merge passes,
/// every 65,536 records read, checked or merged, before each node it stores, between
/// the selections of an STR level's slices); when it answers `true` the load
/// ends with [`Error::Interrupted`] and publishes nothing (the store holds
/// no tree, the temporary files are removed). A load tells `stored` the
/// nodes it has stored so far and the tree's total, every 64 nodes and
/// after the last one. The index layer does not know who asks: a front
/// end's Ctrl-C ([`crate::engine::request_stop`]) reaches it as the `stop`
/// an index directory's build passes.
#[derive(Clone, Copy)]
pub struct BulkWatch<'a> {
    stop: &'a (dyn Fn() -> bool + Sync),
    stored: &'a dyn Fn(u64, u64),
}

/// The `stop` of a load nobody stops.
fn never() -> bool {
    false
}

/// The `stored` of a load nobody follows.
fn unfollowed(_: u64, _: u64) {}

impl<'a> BulkWatch<'a> {
    /// A load nobody stops or follows.
    pub const NONE: BulkWatch<'static> = BulkWatch {
        stop: &never,
        stored: &unfollowed,
    };

    /// A load stopped when `stop` answers `true`, telling `stored` the
    /// nodes stored so far and the tree's total.
    pub fn new(stop: &'a (dyn Fn() -> bool + Sync), stored: &'a dyn Fn(u64, u64)) -> Self {
        BulkWatch { stop, stored }
    }

    /// A load stopped when `stop` answers `true`, followed by nobody.
    pub fn stopped_by(stop: &'a (dyn Fn() -> bool + Sync)) -> Self {
        BulkWatch {
            stop,
            stored: &unfollowed,
        }
    }

    /// The caller's `stop`, for a thread of the load.
    pub(crate) fn stop(&self) -> &'a (dyn Fn() -> bool + Sync) {
        self.stop
    }

    /// [`Error::Interrupted`] when the caller asks the load to stop.
    pub(crate) fn check(&self) -> Result<()> {
        match (self.stop)() {
            true => Err(stopped()),
            false => Ok(()),
        }
    }
}

impl std::fmt::Debug for BulkWatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BulkWatch")
    }
}

/// The error of a bulk load its caller stopped ([`BulkWatch`]).
pub(crate) fn stopped() -> Error {
    Error::Interrupted("the bulk load was stopped before it finished: nothing was published".into())
}

/// Records read or merged between two questions to a load's `stop`.
pub(crate) const STOP_EVERY: u64 = 1 << 16;

/// The nodes a tree packed from `records` records holds at `cap` entries
/// per node and at least `m`: each level's nodes ([`node_count`]) up to
/// the root.
pub(crate) fn tree_nodes(records: u64, cap: usize, m: usize) -> u64 {
    let (mut k, mut total) = (usize::try_from(records).unwrap_or(usize::MAX), 0u64);
    loop {
        let g = node_count(k, cap, m);
        total += g as u64;
        if g <= 1 {
            return total;
        }
        k = g;
    }
}

/// The nodes one bulk load stores: each stored through [`Nodes::store`],
/// which asks the load's [`BulkWatch`] whether to stop first and tells it
/// the count afterwards.
pub(crate) struct Nodes<'a> {
    watch: BulkWatch<'a>,
    /// Nodes stored so far.
    done: u64,
    /// Nodes of the whole tree.
    total: u64,
}

impl<'a> Nodes<'a> {
    /// No node stored yet of a tree of `total` nodes.
    pub(crate) fn new(watch: BulkWatch<'a>, total: u64) -> Self {
        Nodes {
            watch,
            done: 0,
            total,
        }
    }

    /// The load's watch.
    pub(crate) fn watch(&self) -> BulkWatch<'a> {
        self.watch
    }

    /// Nodes stored so far.
    pub(crate) fn done(&self) -> u64 {
        self.done
    }

    /// Stores a node of `level` holding `entries` through `sink` (unless
    /// the load was asked to stop) and returns its page id.
    pub(crate) fn store(
        &mut self,
        sink: &mut dyn BulkSink,
        level: u16,
        entries: &[Entry],
    ) -> Result<crate::page_id::PageId> {
        self.watch.check()?;
        let page = sink.node(level, entries)?;
        self.done += 1;
        if self.done.is_multiple_of(64) || self.done >= self.total {
            (self.watch.stored)(self.done, self.total.max(self.done));
        }
        Ok(page)
    }
}

/// Sizes of `groups` groups spreading `k` entries evenly.
fn even_sizes(k: usize, groups: usize) -> Vec<usize> {
    let groups = groups.max(1);
    let (base, extra) = (k / groups, k % groups);
    (0..groups).map(|i| base + usize::from(i < extra)).collect()
}

/// Size of group `i` of [`even_sizes`]`(k, groups)`, without the vector.
pub(crate) fn even_sizes_at(k: usize, groups: usize, i: usize) -> usize {
    let groups = groups.max(1);
    let (base, extra) = (k / groups, k % groups);
    base + usize::from(i < extra)
}

/// Number of nodes for `k` entries at `cap` per node, such that an even
/// spread gives every node between m and M entries.
pub(crate) fn node_count(k: usize, cap: usize, m: usize) -> usize {
    let g = k.div_ceil(cap.max(1)).max(1);
    if g > 1 && k / g < m {
        (k / m).max(1)
    } else {
        g
    }
}

/// A record one level of a bulk load packs: an input item (object id,
/// rectangle) at the leaves of a tree packed without Hilbert values, so the
/// input is packed where it lies (no copy of a million items into entries
/// first), or an entry (a record with its Hilbert value, a child's key and
/// MBR).
trait Packed: Copy + Sync {
    /// The key the record is stored under.
    fn key(&self) -> u64;
    /// Its rectangle.
    fn rect(&self) -> &Rect;
    /// The entry a node stores for it.
    fn entry(&self) -> Entry;
}

impl Packed for Entry {
    #[inline]
    fn key(&self) -> u64 {
        self.key
    }
    #[inline]
    fn rect(&self) -> &Rect {
        &self.rect
    }
    #[inline]
    fn entry(&self) -> Entry {
        *self
    }
}

impl Packed for (u64, Rect) {
    #[inline]
    fn key(&self) -> u64 {
        self.0
    }
    #[inline]
    fn rect(&self) -> &Rect {
        &self.1
    }
    #[inline]
    fn entry(&self) -> Entry {
        Entry {
            key: self.0,
            rect: self.1,
            payload: 0,
        }
    }
}

/// How one level's records are cut into nodes.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// In the order they are in (a Hilbert R-tree: Hilbert order at the
    /// leaves, the order of the level below above them).
    InOrder,
    /// Sort-Tile-Recursive: vertical slices by centre x, runs by centre y.
    Str,
    /// By the Hilbert value of their rectangle in the domain.
    Hilbert(HilbertDomain),
}

/// What every level of one bulk load shares.
struct Level<'s> {
    sink: &'s mut dyn BulkSink,
    /// The nodes stored so far, and the load's watch.
    nodes: Nodes<'s>,
    kind: IndexKind,
    /// Entries per node (at most M).
    cap: usize,
    /// Fewest entries per node (m).
    m: usize,
    /// A node's entries before it is stored (one buffer for all nodes).
    gathered: Vec<Entry>,
}

impl Level<'_> {
    /// Stores `records` as the nodes of `level`, cut by `cut`, and returns
    /// the entries of the level above (one per node, in the order stored).
    fn pack<T: Packed>(&mut self, level: u16, records: &mut [T], cut: Cut) -> Result<Vec<Entry>> {
        let k = records.len();
        let stop = self.nodes.watch().stop();
        self.emit_level(level, k, |sizes, gathered, emit| match cut {
            _ if sizes.len() < 2 => emit_runs(records, sizes, gathered, emit),
            Cut::InOrder => emit_runs(records, sizes, gathered, emit),
            Cut::Hilbert(d) => {
                // One sort of the level: the load may stop before it, and
                // at the first node after it.
                if stop() {
                    return Err(stopped());
                }
                records.sort_by_cached_key(|e| (d.hilbert_rect(e.rect()), e.key()));
                emit_runs(records, sizes, gathered, emit)
            }
            Cut::Str => str_runs(records, sizes, emit, pipelined_for(k), stop),
        })
    }

    /// [`pack`](Self::pack) of the load's input items at the leaves, which
    /// it owns: an STR cut frees them as their nodes are made
    /// ([`str_runs_consuming`]).
    fn pack_items(&mut self, mut items: Vec<(u64, Rect)>, cut: Cut) -> Result<Vec<Entry>> {
        if !matches!(cut, Cut::Str) {
            return self.pack(0, &mut items, cut);
        }
        let k = items.len();
        let stop = self.nodes.watch().stop();
        self.emit_level(0, k, |sizes, gathered, emit| {
            if sizes.len() < 2 {
                emit_runs(&items, sizes, gathered, emit)
            } else {
                str_runs_consuming(items, sizes, emit, pipelined_for(k), stop)
            }
        })
    }

    /// Stores the `k` records of `level` as the nodes `cut` emits, given
    /// the sizes of the nodes (one node when `k` fits in one), this level's
    /// gathering buffer and the function that stores a node; returns the
    /// entries of the level above (one per node, in the order stored).
    fn emit_level(
        &mut self,
        level: u16,
        k: usize,
        cut: impl FnOnce(&[usize], &mut Vec<Entry>, &mut dyn FnMut(&[Entry]) -> Result<()>) -> Result<()>,
    ) -> Result<Vec<Entry>> {
        let groups = node_count(k, self.cap, self.m);
        let mut parents = Vec::with_capacity(groups);
        let (sink, nodes, kind) = (&mut *self.sink, &mut self.nodes, self.kind);
        let mut emit = |node: &[Entry]| -> Result<()> {
            let mut parent = entry_of(kind, 0, node)?;
            parent.key = nodes.store(sink, level, node)?;
            parents.push(parent);
            Ok(())
        };
        let sizes = if k <= self.cap {
            vec![k]
        } else {
            even_sizes(k, groups)
        };
        cut(&sizes, &mut self.gathered, &mut emit)?;
        Ok(parents)
    }
}

/// Whether a level of `k` records sorts its STR slices on a second thread.
fn pipelined_for(k: usize) -> bool {
    k >= PIPELINE_MIN_RECORDS && crate::defaults::cores() > 1
}

impl<S: NodeStore> RTree<S> {
    /// A new tree on the empty `store` holding `items` (object id,
    /// rectangle), built bottom-up by `method` at fill factor `fill` in
    /// (0, 1]. Object ids must be unique; rectangles are validated. A
    /// Hilbert R-tree is always packed in Hilbert order (in its own domain).
    #[cfg(any(test, feature = "internals"))]
    pub fn bulk_load(
        store: S,
        params: TreeParams,
        items: Vec<(u64, Rect)>,
        method: BulkMethod,
        fill: f64,
    ) -> Result<Self> {
        RTree::bulk_load_watched(store, params, items, method, fill, BulkWatch::NONE)
    }

    /// [`RTree::bulk_load`], stopped and followed by `watch`: when it
    /// asks to stop, the load ends with [`Error::Interrupted`] and the
    /// store holds no tree.
    pub fn bulk_load_watched(
        store: S,
        params: TreeParams,
        items: Vec<(u64, Rect)>,
        method: BulkMethod,
        fill: f64,
        watch: BulkWatch<'_>,
    ) -> Result<Self> {
        let mut tree = RTree::create(store, params)?;
        if !(fill > 0.0 && fill <= 1.0) {
            return Err(Error::invalid(format!(
                "bulk-load fill factor {fill} must be in (0, 1]"
            )));
        }
        let hilbert_tree = params.kind == IndexKind::Hilbert;
        let tree_domain = if hilbert_tree {
            Some(tree.domain()?)
        } else {
            None
        };
        let mut items = items;
        // Ids strictly ascending (the common case) are unique without a set.
        let mut ascending = true;
        let mut prev: Option<u64> = None;
        for (i, (id, rect)) in items.iter_mut().enumerate() {
            // The pass over the input may stop every STOP_EVERY records.
            if (i as u64).is_multiple_of(STOP_EVERY) {
                watch.check()?;
            }
            *rect = checked(*rect)?;
            ascending &= prev.is_none_or(|p| p < *id);
            prev = Some(*id);
        }
        watch.check()?;
        if !ascending {
            let mut ids: Vec<u64> = items.iter().map(|&(id, _)| id).collect();
            ids.sort_unstable();
            watch.check()?;
            if let Some(w) = ids.windows(2).find(|w| w.first() == w.get(1)) {
                let id = w.first().copied().unwrap_or_default();
                return Err(Error::invalid(format!(
                    "object id {id} appears twice in the bulk-load input (object ids must be unique)"
                )));
            }
        }
        let records = items.len() as u64;
        if records == 0 {
            return Ok(tree);
        }
        let p = tree.params;
        let cap =
            ((p.max_entries as f64 * fill).floor() as usize).clamp(p.min_entries, p.max_entries);
        let cut = match (method, p.hilbert_domain) {
            (BulkMethod::Str, _) if p.kind != IndexKind::Hilbert => Cut::Str,
            (_, Some(d)) => Cut::Hilbert(d),
            (_, None) => {
                let extent = Rect::union_all(items.iter().map(|(_, r)| r))
                    .ok_or_else(|| Error::invalid("bulk load of no entries"))?;
                Cut::Hilbert(HilbertDomain::new(extent, HilbertDomain::DEFAULT_ORDER)?)
            }
        };
        let (m, kind) = (p.min_entries, p.kind);
        let total = tree_nodes(records, cap, m);
        tree.store.bulk_load(Box::new(move |sink| {
            let mut packer = Level {
                sink,
                nodes: Nodes::new(watch, total),
                kind,
                cap,
                m,
                gathered: Vec::with_capacity(cap),
            };
            let (mut entries, cut) = match tree_domain {
                // A Hilbert R-tree is packed in Hilbert order; upper levels
                // keep the order of the level below.
                Some(d) => {
                    let mut leaves: Vec<Entry> = Vec::with_capacity(items.len());
                    for (i, (key, rect)) in items.into_iter().enumerate() {
                        // The Hilbert values may stop every STOP_EVERY records.
                        if (i as u64).is_multiple_of(STOP_EVERY) {
                            watch.check()?;
                        }
                        leaves.push(Entry {
                            key,
                            rect,
                            payload: super::hilbert::record_value(&d, &rect, key),
                        });
                    }
                    // One sort of the leaves: the load may stop before it,
                    // and at the first node after it.
                    watch.check()?;
                    leaves.sort_by(super::hilbert::hilbert_order);
                    (packer.pack(0, &mut leaves, Cut::InOrder)?, Cut::InOrder)
                }
                None => (packer.pack_items(items, cut)?, cut),
            };
            let mut level: u16 = 1;
            loop {
                if let [root] = entries.as_slice() {
                    return Ok(TreeMeta {
                        root: Some(root.key),
                        height: level,
                        records,
                    });
                }
                entries = packer.pack(level, &mut entries, cut)?;
                level += 1;
            }
        }))?;
        Ok(tree)
    }
}

/// Emits `records` as consecutive nodes of `sizes`, each gathered into
/// `gathered` and sorted by key there (the page's order).
fn emit_runs<T: Packed>(
    records: &[T],
    sizes: &[usize],
    gathered: &mut Vec<Entry>,
    emit: &mut dyn FnMut(&[Entry]) -> Result<()>,
) -> Result<()> {
    for node in runs(records, sizes) {
        emit_gathered(node.iter().map(Packed::entry), gathered, emit)?;
    }
    Ok(())
}

/// `items` cut into consecutive runs of `sizes` (shorter ones at the end
/// if `items` runs out).
fn runs<'a, T>(items: &'a [T], sizes: &'a [usize]) -> impl Iterator<Item = &'a [T]> + 'a {
    let mut rest = items;
    sizes.iter().map(move |&s| {
        let (run, tail) = rest.split_at(s.min(rest.len()));
        rest = tail;
        run
    })
}

/// Emits the node holding `entries`, gathered into `gathered` and sorted by
/// key there (the page's order).
fn emit_gathered(
    entries: impl Iterator<Item = Entry>,
    gathered: &mut Vec<Entry>,
    emit: &mut dyn FnMut(&[Entry]) -> Result<()>,
) -> Result<()> {
    gathered.clear();
    gathered.extend(entries);
    gathered.sort_unstable_by_key(|e| e.key);
    emit(gathered)
}

/// Levels of at least this many records sort their STR slices on a second
/// thread while the calling thread stores the nodes of the slices already
/// sorted (below it, a thread costs more than it saves).
const PIPELINE_MIN_RECORDS: usize = 65_536;

/// Sorted slices the sorting thread may be ahead of the storing one.
const SLICES_AHEAD: usize = 2;

/// STR: cuts `records` into vertical slices by centre x and each slice into
/// runs of `sizes` by centre y, and emits each run as a node, its entries in
/// key order (the page's order).
///
/// One order of the records' positions is partitioned by centre x at the
/// slice boundaries (each slice holds the records a full sort would put
/// there, in no order); each slice's part is then re-keyed by centre y and
/// sorted in place, and its nodes' entries are gathered from it into one
/// buffer per slice: the records are copied once, into the buffer the
/// nodes are emitted from.
///
/// `pipelined`: the slices are sorted and gathered on a second thread, one
/// or two ahead of the calling thread, which emits the nodes of each slice
/// in order as it arrives (the sink encodes and stores them: the calling
/// thread's work, so the gathering moves to the thread that would
/// otherwise wait). The nodes, their order and everything emitted are the
/// same either way.
fn str_runs<T: Packed>(
    records: &[T],
    sizes: &[usize],
    emit: &mut dyn FnMut(&[Entry]) -> Result<()>,
    pipelined: bool,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<()> {
    // When the records' keys ascend with their positions (ids in order at
    // the leaves, page ids in the order stored above them), a node's
    // positions are sorted instead of its gathered entries: 8-byte values
    // rather than 48-byte entries, and the gathered entries come out in key
    // order.
    let keys_ascend = records.windows(2).all(|w| match w {
        [a, b] => a.key() < b.key(),
        _ => true,
    });
    str_runs_with(records, sizes, emit, pipelined, keys_ascend, stop)
}

/// [`str_runs`], told whether the records' keys ascend with their
/// positions (`false` is right for any records).
fn str_runs_with<T: Packed>(
    records: &[T],
    sizes: &[usize],
    emit: &mut dyn FnMut(&[Entry]) -> Result<()>,
    pipelined: bool,
    keys_ascend: bool,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<()> {
    let (slice_sizes, cuts) = str_slice_sizes(sizes);
    let mut order: Vec<u128> = records
        .iter()
        .enumerate()
        .map(|(i, e)| sort_key(center(e.rect()).0, i))
        .collect();
    partition_at(&mut order, &cuts, records, pipelined, stop);
    if stop() {
        return Err(stopped());
    }
    let mut parts: Vec<&mut [u128]> = Vec::with_capacity(slice_sizes.len());
    let mut rest = order.as_mut_slice();
    for c in &slice_sizes {
        let n = c.iter().sum::<usize>().min(rest.len());
        let (part, tail) = std::mem::take(&mut rest).split_at_mut(n);
        rest = tail;
        parts.push(part);
    }
    let mut parts = parts.into_iter();
    let mut positions = Vec::new();
    // Sorts the next slice by centre y and gathers its nodes into `out`.
    let next = move |sizes: &[usize], out: &mut Vec<Entry>| {
        if let Some(part) = parts.next() {
            sort_slice_by_y(part, records);
            gather_nodes(part, sizes, records, keys_ascend, &mut positions, out);
        }
    };
    emit_slices(&slice_sizes, next, emit, pipelined)
}

/// [`str_runs`] of an input it owns: the same nodes, emitted in the same
/// order, with the input freed as they are made. The records themselves
/// are partitioned into the vertical slices, the first slice at the end
/// (by centre x and key, descending); each slice is then sorted where it
/// lies and cut off the vector's end. A record is held once, in the input
/// or in the nodes gathered from it, and no order of positions is kept:
/// the load's memory peaks at about the tree's size, not at the input,
/// its order and the tree (issue 47, item 4).
fn str_runs_consuming(
    mut records: Vec<(u64, Rect)>,
    sizes: &[usize],
    emit: &mut dyn FnMut(&[Entry]) -> Result<()>,
    pipelined: bool,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<()> {
    let (slice_sizes, ends) = str_slice_sizes(sizes);
    let n = records.len();
    // The slices' boundaries counted from the end, ascending.
    let cuts: Vec<usize> = ends.iter().rev().map(|&e| n.saturating_sub(e)).collect();
    let x_and_key = |r: &(u64, Rect)| (center(&r.1).0, r.0);
    let descending = |a: &(u64, Rect), b: &(u64, Rect)| {
        let ((xa, ka), (xb, kb)) = (x_and_key(a), x_and_key(b));
        xb.total_cmp(&xa).then(kb.cmp(&ka))
    };
    partition_by(&mut records, &cuts, &descending, pipelined, stop);
    if stop() {
        return Err(stopped());
    }
    let (mut keys, mut positions) = (Vec::new(), Vec::new());
    // Takes the next slice off the end of `records`, sorted by centre y,
    // and gathers its nodes into `out`.
    let next = move |sizes: &[usize], out: &mut Vec<Entry>| {
        let start = records.len().saturating_sub(sizes.iter().sum::<usize>());
        if let Some(slice) = records.get(start..) {
            keys.clear();
            keys.extend(slice.iter().enumerate().map(|(i, e)| sort_key(center(e.rect()).1, i)));
            sort_by_coordinate_and_key(&mut keys, slice);
            gather_nodes(&keys, sizes, slice, false, &mut positions, out);
        }
        records.truncate(start);
        // Gives the slice's memory back (a large vector shrinks in place).
        records.shrink_to_fit();
    };
    emit_slices(&slice_sizes, next, emit, pipelined)
}

/// STR's vertical slices for nodes of `sizes`: the sizes of each slice's
/// nodes, and where each slice but the last ends (ascending).
fn str_slice_sizes(sizes: &[usize]) -> (Vec<&[usize]>, Vec<usize>) {
    let slices = (sizes.len() as f64).sqrt().ceil().max(1.0) as usize;
    let per_slice = sizes.len().div_ceil(slices).max(1);
    let slice_sizes: Vec<&[usize]> = sizes.chunks(per_slice).collect();
    let mut ends: Vec<usize> = slice_sizes
        .iter()
        .scan(0, |end, c| {
            *end += c.iter().sum::<usize>();
            Some(*end)
        })
        .collect();
    ends.pop();
    (slice_sizes, ends)
}

/// Emits the nodes of each slice of `slice_sizes` in order, the slice's
/// entries produced by `next` (called once per slice, in order, with the
/// sizes of its nodes and a buffer to fill). `pipelined`: `next` runs on a
/// second thread, one or two slices ahead of the calling thread, which
/// emits the nodes of each slice as it arrives (the sink encodes and
/// stores them: the calling thread's work, so the gathering moves to the
/// thread that would otherwise wait). The nodes, their order and
/// everything emitted are the same either way.
fn emit_slices(
    slice_sizes: &[&[usize]],
    mut next: impl FnMut(&[usize], &mut Vec<Entry>) + Send,
    emit: &mut dyn FnMut(&[Entry]) -> Result<()>,
    pipelined: bool,
) -> Result<()> {
    if !pipelined || slice_sizes.len() < 2 {
        let mut slice = Vec::new();
        for c in slice_sizes {
            next(c, &mut slice);
            emit_nodes(&slice, c, emit)?;
        }
        return Ok(());
    }
    std::thread::scope(|scope| {
        let (sorted, arrivals) = std::sync::mpsc::sync_channel::<Vec<Entry>>(SLICES_AHEAD);
        // The slices' buffers go back to the sorting thread once emitted,
        // so a load fills a few buffers instead of allocating one a slice.
        let (spent, returned) = std::sync::mpsc::sync_channel::<Vec<Entry>>(SLICES_AHEAD + 2);
        scope.spawn(move || {
            for c in slice_sizes {
                let mut slice = returned.try_recv().unwrap_or_default();
                next(c, &mut slice);
                // The receiver is gone when emitting failed: stop.
                if sorted.send(slice).is_err() {
                    break;
                }
            }
        });
        for c in slice_sizes {
            let slice = arrivals.recv().map_err(|_| {
                Error::corrupt(None, "internal: the STR sorting thread stopped early")
            })?;
            emit_nodes(&slice, c, emit)?;
            // At most SLICES_AHEAD + 2 buffers exist, so this never fails
            // for want of room; a buffer it could not return is dropped.
            let _ = spent.try_send(slice);
        }
        Ok(())
    })
}

/// Gathers the entries of one sorted STR slice into `out` (cleared first),
/// node after node (runs of `sizes`), each node's entries in key order.
fn gather_nodes<T: Packed>(
    slice: &[u128],
    sizes: &[usize],
    records: &[T],
    keys_ascend: bool,
    positions: &mut Vec<u128>,
    out: &mut Vec<Entry>,
) {
    out.clear();
    // Sorts the node's positions (when keys ascend with them) or its
    // (key, position) pairs, 16 bytes each, rather than its gathered
    // 48-byte entries.
    let order_of = |t: &u128| {
        let p = position(*t);
        match keys_ascend {
            true => p as u128,
            false => (u128::from(records.get(p).map_or(0, Packed::key)) << 64) | p as u128,
        }
    };
    for node in runs(slice, sizes) {
        positions.clear();
        positions.extend(node.iter().map(order_of));
        positions.sort_unstable();
        out.extend(positions.iter().filter_map(|&p| records.get(position(p)).map(Packed::entry)));
    }
}

/// Emits `entries` as consecutive nodes of `sizes`.
fn emit_nodes(
    entries: &[Entry],
    sizes: &[usize],
    emit: &mut dyn FnMut(&[Entry]) -> Result<()>,
) -> Result<()> {
    runs(entries, sizes).try_for_each(emit)
}

/// Re-keys the positions of one STR slice by their records' centre y and
/// sorts them by (y, the record's key).
fn sort_slice_by_y<T: Packed>(part: &mut [u128], records: &[T]) {
    for t in part.iter_mut() {
        if let Some(e) = records.get(position(*t)) {
            *t = sort_key(center(e.rect()).1, position(*t));
        }
    }
    sort_by_coordinate_and_key(part, records);
}

/// The sort key of the entry at `position` with centre coordinate `coord`:
/// an order-preserving integer image of the coordinate's bits above the
/// position. Sorting these 16-byte keys, computed once, and gathering the
/// entries in their order is faster than sorting the 48-byte entries
/// themselves, recomputing the keys at every comparison (that took a third
/// of an in-memory STR load).
#[inline]
fn sort_key(coord: f64, position: usize) -> u128 {
    (u128::from(ordered_bits(coord)) << 64) | position as u128
}

/// The entry position a [`sort_key`] holds.
#[inline]
fn position(key: u128) -> usize {
    key as u64 as usize
}

/// Sorts [`sort_key`]s by (coordinate, the entry's key): by the
/// coordinates' bits, then each run of equal coordinates by the entries'
/// keys, so the order is that of a stable sort on (coordinate, key)
/// whatever the input order (entry keys are unique).
///
/// The first sort is a radix sort on the 64 bits of the coordinate (an
/// STR slice of about 10,000 keys sorts in less than half the time of a
/// comparison sort of the 128-bit keys; passes whose byte is the same in
/// every key are skipped).
fn sort_by_coordinate_and_key<T: Packed>(order: &mut [u128], entries: &[T]) {
    radsort::sort_by_key(order, |t| (*t >> 64) as u64);
    let key_of = |t: &u128| entries.get(position(*t)).map_or(0, Packed::key);
    for run in order.chunk_by_mut(|a, b| a >> 64 == b >> 64) {
        if run.len() > 1 {
            run.sort_unstable_by_key(key_of);
        }
    }
}

/// Partitions `order` at the ascending positions `cuts` by (coordinate,
/// the entry's key), as [`sort_by_coordinate_and_key`] orders: afterwards
/// every key before a cut orders before every key after it, so each part
/// holds the keys a full sort would put there, in no particular order
/// ([`partition_by`]).
fn partition_at<T: Packed>(
    order: &mut [u128],
    cuts: &[usize],
    entries: &[T],
    parallel: bool,
    stop: &(dyn Fn() -> bool + Sync),
) {
    // The entries' keys are looked up only for equal coordinates: the
    // comparison of the packed keys alone touches no entry.
    let key_of = |t: &u128| entries.get(position(*t)).map_or(0, Packed::key);
    let by_coordinate_and_key = |a: &u128, b: &u128| {
        (a >> 64)
            .cmp(&(b >> 64))
            .then_with(|| key_of(a).cmp(&key_of(b)))
    };
    partition_by(order, cuts, &by_coordinate_and_key, parallel, stop);
}

/// Partitions `items` at the ascending positions `cuts` by `cmp`, a total
/// order: afterwards every item before a cut orders before every item
/// after it, so each part holds the items a full sort would put there, in
/// no particular order. One selection per cut, each within the part its
/// neighbours left: the O(n log n) sort of a whole level becomes
/// O(n log slices) (STR needs the vertical slices, not the order inside
/// them).
///
/// `parallel`: after the first selection, the two halves are partitioned
/// on two threads (the same result).
///
/// `stop` is asked before each selection: when it answers `true` the
/// partition ends unfinished (the caller asks again and gives up).
fn partition_by<T: Send, F: Fn(&T, &T) -> std::cmp::Ordering + Sync>(
    items: &mut [T],
    cuts: &[usize],
    cmp: &F,
    parallel: bool,
    stop: &(dyn Fn() -> bool + Sync),
) {
    if cuts.is_empty() || stop() {
        return;
    }
    let (before, rest) = cuts.split_at(cuts.len() / 2);
    let Some((&cut, after)) = rest.split_first() else {
        return;
    };
    let cut = cut.min(items.len());
    if cut > 0 && cut < items.len() {
        items.select_nth_unstable_by(cut, cmp);
    }
    let (left, right) = items.split_at_mut(cut);
    let shifted: Vec<usize> = after.iter().map(|c| c.saturating_sub(cut)).collect();
    if parallel {
        std::thread::scope(|scope| {
            scope.spawn(|| partition_by(left, before, cmp, false, stop));
            partition_by(right, &shifted, cmp, false, stop);
        });
    } else {
        partition_by(left, before, cmp, false, stop);
        partition_by(right, &shifted, cmp, false, stop);
    }
}

impl std::str::FromStr for BulkMethod {
    type Err = crate::Error;
    /// `str` or `hilbert`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "str" => Ok(BulkMethod::Str),
            "hilbert" => Ok(BulkMethod::Hilbert),
            _ => Err(crate::Error::invalid(format!(
                "unknown bulk-load method {s:?}: use str or hilbert"
            ))),
        }
    }
}

#[cfg(test)]
#[path = "bulk_boundary_tests.rs"]
mod boundary_tests;

#[cfg(test)]
#[path = "bulk_stop_tests.rs"]
mod stop_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Predicate, SplitKind};
    use crate::store::mem::MemStore;

    #[test]
    fn ordered_bits_order_like_total_cmp() {
        let vals = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -f64::MIN_POSITIVE,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            0.5,
            1.0,
            3.75,
            1e300,
            f64::INFINITY,
        ];
        for a in vals {
            for b in vals {
                assert_eq!(
                    ordered_bits(a).cmp(&ordered_bits(b)),
                    a.total_cmp(&b),
                    "{a} vs {b}"
                );
            }
        }
    }

    /// Points at few distinct x coordinates (long runs of ties), one per
    /// distinct key of `cells` (coordinate class, key).
    fn tied_entries(cells: &[(u8, u64)]) -> Vec<Entry> {
        let mut seen = std::collections::HashSet::new();
        cells
            .iter()
            .filter(|(_, key)| seen.insert(*key))
            .map(|&(c, key)| {
                let x = f64::from(c) - 2.5;
                Entry {
                    key,
                    rect: Rect::new(x, 0.0, x, 0.0).unwrap(),
                    payload: 0,
                }
            })
            .collect()
    }

    /// The [`sort_key`]s of `entries` by their lower x, in input order.
    fn min_x_keys(entries: &[Entry]) -> Vec<u128> {
        entries
            .iter()
            .enumerate()
            .map(|(i, e)| sort_key(e.rect.min_x(), i))
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            crate::testenv::proptest_cases()
        ))]

        /// The packed sort orders like a sort on (coordinate, key): few
        /// distinct coordinates (long runs of ties), keys in any order.
        #[test]
        fn the_packed_sort_orders_by_coordinate_then_key(
            cells in proptest::collection::vec((0u8..6, proptest::prelude::any::<u64>()), 0..200),
        ) {
            let entries = tied_entries(&cells);
            let mut order = min_x_keys(&entries);
            sort_by_coordinate_and_key(&mut order, &entries);
            let got: Vec<u64> = order.iter().map(|&t| entries[position(t)].key).collect();
            let mut want = entries.clone();
            want.sort_by(|a, b| a.rect.min_x().total_cmp(&b.rect.min_x()).then(a.key.cmp(&b.key)));
            let want: Vec<u64> = want.iter().map(|e| e.key).collect();
            proptest::prop_assert_eq!(got, want);
        }

        /// Partitioning at cuts puts in each part the keys the full sort
        /// puts there: few distinct coordinates (ties across cuts), keys in
        /// any order, cuts anywhere; on one thread or two.
        #[test]
        fn partitioning_at_cuts_gives_the_parts_of_the_full_sort(
            cells in proptest::collection::vec((0u8..6, proptest::prelude::any::<u64>()), 0..200),
            raw_cuts in proptest::collection::vec(0usize..200, 0..12),
            parallel in proptest::prelude::any::<bool>(),
        ) {
            let entries = tied_entries(&cells);
            let mut cuts: Vec<usize> = raw_cuts.into_iter().filter(|&c| c < entries.len()).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let keys = min_x_keys(&entries);
            let mut sorted = keys.clone();
            sort_by_coordinate_and_key(&mut sorted, &entries);
            let mut parted = keys;
            partition_at(&mut parted, &cuts, &entries, parallel, &never);
            let bounds: Vec<usize> = std::iter::once(0)
                .chain(cuts.iter().copied())
                .chain(std::iter::once(entries.len()))
                .collect();
            for w in bounds.windows(2) {
                let (a, b) = (w[0], w[1]);
                let mut got = parted[a..b].to_vec();
                sort_by_coordinate_and_key(&mut got, &entries);
                proptest::prop_assert_eq!(&got[..], &sorted[a..b]);
            }
        }
    }

    /// What [`str_runs`] emits for `entries` cut into nodes of at most
    /// `cap` entries, with or without the sorting thread (`fail_at`: the
    /// emission of that node fails).
    fn str_nodes(
        entries: &[Entry],
        cap: usize,
        pipelined: bool,
        fail_at: Option<usize>,
    ) -> Result<Vec<Vec<u64>>> {
        str_nodes_with(entries, cap, pipelined, fail_at, None)
    }

    /// [`str_nodes`] through [`str_runs_with`] told `keys_ascend`, or
    /// through [`str_runs`] (which finds out) for `None`.
    fn str_nodes_with(
        entries: &[Entry],
        cap: usize,
        pipelined: bool,
        fail_at: Option<usize>,
        keys_ascend: Option<bool>,
    ) -> Result<Vec<Vec<u64>>> {
        let sizes = even_sizes(entries.len(), entries.len().div_ceil(cap));
        let mut out = Vec::new();
        let mut emit = |node: &[Entry]| -> Result<()> {
            if Some(out.len()) == fail_at {
                return Err(Error::invalid("the sink refused the node"));
            }
            out.push(node.iter().map(|e| e.key).collect());
            Ok(())
        };
        match keys_ascend {
            Some(k) => str_runs_with(entries, &sizes, &mut emit, pipelined, k, &never)?,
            None => str_runs(entries, &sizes, &mut emit, pipelined, &never)?,
        }
        Ok(out)
    }

    /// 20,000 boxes of pseudo-random sizes whose lower corners lie on a
    /// coarse grid (ties inside and across STR slices), the `i`-th under
    /// key `key(i)`.
    fn grid_entries(seed: u64, key: impl Fn(u64) -> u64) -> Vec<Entry> {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..20_000u64)
            .map(|i| {
                let (x, y) = ((next() * 64.0).floor(), (next() * 64.0).floor());
                Entry {
                    key: key(i),
                    rect: Rect::new(x, y, x + next(), y + next()).unwrap(),
                    payload: 0,
                }
            })
            .collect()
    }

    /// The sorting thread changes nothing of what STR emits, and a failing
    /// sink stops the load with its error (the thread then stops too).
    #[test]
    fn str_emits_the_same_nodes_with_and_without_the_sorting_thread() {
        let entries = grid_entries(7, |i| (i * 7919) % 20_011);
        for cap in [4, 50, 113] {
            let plain = str_nodes(&entries, cap, false, None).unwrap();
            assert_eq!(plain, str_nodes(&entries, cap, true, None).unwrap(), "cap {cap}");
            assert_eq!(plain.iter().map(Vec::len).sum::<usize>(), entries.len());
            for fail_at in [0, plain.len() / 2, plain.len() - 1] {
                let err = str_nodes(&entries, cap, true, Some(fail_at)).unwrap_err();
                assert!(err.to_string().contains("sink refused"), "{err}");
            }
        }
    }

    /// Records whose keys ascend with their positions: sorting a node's
    /// positions gives what sorting its gathered entries gives, on one
    /// thread or two (and `str_runs` sees that the keys ascend).
    #[test]
    fn str_emits_the_same_nodes_when_it_sorts_positions() {
        let entries = grid_entries(11, |i| 3 * i + 5);
        for cap in [4, 50, 113] {
            let want = str_nodes_with(&entries, cap, false, None, Some(false)).unwrap();
            for pipelined in [false, true] {
                let got = str_nodes_with(&entries, cap, pipelined, None, Some(true)).unwrap();
                assert_eq!(got, want, "cap {cap}, pipelined {pipelined}");
                assert_eq!(str_nodes(&entries, cap, pipelined, None).unwrap(), want);
            }
        }
    }

    /// An input STR owns and frees as it goes gives the nodes of the one it
    /// borrows, in the same order, on one thread or two, and a failing sink
    /// stops it with its error.
    #[test]
    fn str_of_an_owned_input_emits_the_same_nodes() {
        let entries = grid_entries(13, |i| (i * 7919) % 20_011);
        let items: Vec<(u64, Rect)> = entries.iter().map(|e| (e.key, e.rect)).collect();
        for cap in [4, 50, 113] {
            let want = str_nodes(&entries, cap, false, None).unwrap();
            let sizes = even_sizes(items.len(), items.len().div_ceil(cap));
            for pipelined in [false, true] {
                for fail_at in [None, Some(0), Some(want.len() / 2)] {
                    let mut got: Vec<Vec<u64>> = Vec::new();
                    let mut emit = |node: &[Entry]| -> Result<()> {
                        if Some(got.len()) == fail_at {
                            return Err(Error::invalid("the sink refused the node"));
                        }
                        got.push(node.iter().map(|e| e.key).collect());
                        Ok(())
                    };
                    let done =
                        str_runs_consuming(items.clone(), &sizes, &mut emit, pipelined, &never);
                    match fail_at {
                        None => assert_eq!(got, want, "cap {cap}, pipelined {pipelined}"),
                        Some(_) => assert!(done.unwrap_err().to_string().contains("sink refused")),
                    }
                }
            }
        }
    }

    #[test]
    fn even_sizes_at_matches_even_sizes() {
        for k in 0..60 {
            for g in 1..9 {
                let all = even_sizes(k, g);
                for (i, s) in all.iter().enumerate() {
                    assert_eq!(even_sizes_at(k, g, i), *s);
                }
            }
        }
    }

    #[test]
    fn even_spread_keeps_every_node_within_bounds() {
        for big_m in 3..30usize {
            let m = big_m.div_ceil(2);
            for cap in m..=big_m {
                for k in (big_m + 1)..400 {
                    let sizes = even_sizes(k, node_count(k, cap, m));
                    assert_eq!(sizes.iter().sum::<usize>(), k);
                    assert!(
                        sizes.iter().all(|&s| s >= m && s <= big_m),
                        "M={big_m} cap={cap} k={k}: {sizes:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn bulk_loaded_trees_are_sound_and_answer_like_inserted_ones() {
        let items: Vec<(u64, Rect)> = (0..3000u64)
            .map(|i| {
                let x = ((i * 7919) % 1009) as f64 / 10.0;
                let y = ((i * 104_729) % 997) as f64 / 10.0;
                (
                    i,
                    Rect::new(x, y, x + (i % 4) as f64, y + (i % 3) as f64).unwrap(),
                )
            })
            .collect();
        for method in [BulkMethod::Str, BulkMethod::Hilbert] {
            for fill in [1.0, 0.7, 0.01] {
                for params in [
                    TreeParams::new(IndexKind::RStar, 12),
                    TreeParams::new(IndexKind::RTree, 7).with_split(SplitKind::Linear),
                    TreeParams::new(IndexKind::Hilbert, 6).with_hilbert_domain(
                        HilbertDomain::new(Rect::new(0.0, 0.0, 50.0, 50.0).unwrap(), 5).unwrap(),
                    ),
                ] {
                    for n in [0usize, 1, 7, 12, 13, 100, 3000] {
                        let sub = items[..n].to_vec();
                        let mut t =
                            RTree::bulk_load(MemStore::new(), params, sub.clone(), method, fill)
                                .unwrap();
                        let rep = t.check().unwrap();
                        assert_eq!(rep.records, n as u64);
                        let w = Rect::new(20.0, 20.0, 40.0, 35.0).unwrap();
                        let got = t.query(w, Predicate::Intersects).unwrap().sorted_ids();
                        let want: Vec<u64> = sub
                            .iter()
                            .filter(|(_, r)| r.intersects(&w))
                            .map(|(i, _)| *i)
                            .collect();
                        assert_eq!(got, want);
                        // The tree stays updatable.
                        for (id, r) in sub.iter().take(50) {
                            t.delete(*id, *r).unwrap();
                        }
                        t.insert(1_000_000, w).unwrap();
                        t.check().unwrap();
                    }
                }
            }
        }
    }

    #[test]
    fn bulk_load_refuses_bad_input() {
        let r = Rect::new(0.0, 0.0, 1.0, 1.0).unwrap();
        let p = TreeParams::new(IndexKind::RStar, 8);
        let dup = RTree::bulk_load(
            MemStore::new(),
            p,
            vec![(1, r), (1, r)],
            BulkMethod::Str,
            1.0,
        );
        assert!(dup.unwrap_err().to_string().contains("twice"));
        let bad = RTree::bulk_load(MemStore::new(), p, vec![(1, r)], BulkMethod::Str, 0.0);
        assert!(bad.unwrap_err().to_string().contains("fill"));
        let nan = Rect::invalid_for_tests(f64::NAN, r.min_y(), r.max_x(), r.max_y());
        assert!(
            RTree::bulk_load(MemStore::new(), p, vec![(1, nan)], BulkMethod::Str, 1.0).is_err()
        );
    }
}
