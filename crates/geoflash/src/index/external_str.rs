//! Sort-Tile-Recursive with bounded memory: the STR load of
//! [`super::bulk`] over external sorts, for inputs larger than memory
//! (issue 47, item 5: the in-memory STR load holds every record).
//!
//! Each level is packed as the in-memory loader packs it, and the tree is
//! the same, node for node and page for page:
//!
//! 1. the level's entries are sorted by (centre x, key), in memory when
//!    they fit half the budget, else in sorted runs merged with a fan-in
//!    that fits the other half (the records of the leaves also give their
//!    (id, position) pairs, merged to find a duplicate id as the Hilbert
//!    load does);
//! 2. the sorted stream is cut into STR's vertical slices (⌈√g⌉ slices of
//!    the level's g nodes, the node sizes spread evenly as in memory); each
//!    slice is sorted by (centre y, key), again in memory or in runs, and
//!    cut into its nodes, each node's entries in key order;
//! 3. each node goes to the store through the bulk sink, and its parent
//!    entry to a temporary file that is the next level's input.
//!
//! A level of at most M entries is one node, the root. Memory: about the
//! budget for records being sorted and the merges' read buffers, whatever
//! the input's size; a slice holds about √(n·M) records, so slices stay in
//! memory unless the budget is far below the input.
use std::path::PathBuf;

use super::bulk::{even_sizes_at, node_count, tree_nodes, BulkWatch, Nodes, STOP_EVERY};
use super::external::{
    check_unique_ids, duplicate_record, reduce_runs, reserve_within, EntryRec, ExternalBulkConfig,
    ExternalBulkReport, Keyed, Merge, Reader, Spill, READ_BUFFER, RUN_RECORD_COST,
};
use super::ops::{center, ordered_bits};
use super::{checked, entry_of, RTree};
use crate::geom::Rect;
use crate::page::Entry;
use crate::store::{BulkSink, NodeStore, TreeMeta};
use crate::{Error, Result};

/// The coordinate of the entries' centres a sort orders by first.
#[derive(Debug, Clone, Copy)]
enum Axis {
    /// Centre x: a level's vertical slices.
    X,
    /// Centre y: the nodes of one slice.
    Y,
}

impl Axis {
    /// The integer image of the centre's coordinate (ordered as
    /// [`f64::total_cmp`], as the in-memory loader's sort keys are).
    fn key(self, r: &Rect) -> u64 {
        let (x, y) = center(r);
        ordered_bits(match self {
            Axis::X => x,
            Axis::Y => y,
        })
    }
}

/// How much memory each part of the load may take.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// Records one sort holds in memory (a run, or a level or slice that
    /// needs no run).
    run_len: usize,
    /// Runs merged at once.
    fan_in: usize,
}

impl Limits {
    /// Half of `budget` for the records of a sort, half for the read
    /// buffers of a merge (a slice is sorted while its level's merge is
    /// open).
    fn of(budget: usize) -> Self {
        let half = budget / 2;
        Limits {
            run_len: (half / RUN_RECORD_COST).max(2),
            fan_in: (half / READ_BUFFER).saturating_sub(1).max(2),
        }
    }
}

/// Entries in (sort key, entry key) order: held in memory, or merged from
/// sorted runs (removed by [`Sorted::finish`]).
enum Sorted {
    /// A sort that fit in memory.
    Held(std::vec::IntoIter<Keyed>),
    /// A merge of runs.
    Merged {
        /// The merge.
        merge: Box<Merge<Keyed>>,
        /// Its run files.
        runs: Vec<PathBuf>,
    },
}

impl Sorted {
    /// The next entry, `None` at the end.
    fn next_entry(&mut self) -> Result<Option<Entry>> {
        match self {
            Sorted::Held(it) => Ok(it.next().map(|k| k.entry)),
            Sorted::Merged { merge, .. } => Ok(merge.next_rec()?.map(|k| k.entry)),
        }
    }

    /// The next `size` entries into `node` (cleared first); an error when
    /// the entries end early.
    fn next_node(&mut self, size: usize, node: &mut Vec<Entry>) -> Result<()> {
        node.clear();
        for _ in 0..size {
            match self.next_entry()? {
                Some(e) => node.push(e),
                None => return Err(ended_early()),
            }
        }
        Ok(())
    }

    /// Removes the run files.
    fn finish(self, spill: &mut Spill) {
        if let Sorted::Merged { merge, runs } = self {
            drop(merge);
            for r in &runs {
                spill.remove(r);
            }
        }
    }
}

fn ended_early() -> Error {
    Error::corrupt(None, "bulk load: a sorted level ended early")
}

/// What one sort did.
#[derive(Debug, Default)]
struct SortStats {
    /// Entries sorted.
    count: u64,
    /// Chunks sorted (runs written, or the one chunk held in memory).
    runs: u64,
    /// Merge passes (0 when held in memory or one run sufficed).
    passes: u64,
}

/// The (id, position) pairs of the leaves' records, to find a duplicate
/// id: held when the records were, else in sorted runs.
#[derive(Default)]
struct Ids {
    held: Vec<(u64, u64)>,
    runs: Vec<PathBuf>,
}

impl Ids {
    /// An error naming both records of the first duplicate id.
    fn check(mut self, spill: &mut Spill, fan_in: usize, watch: BulkWatch<'_>) -> Result<()> {
        if self.runs.is_empty() {
            self.held.sort_unstable();
            return match self.held.windows(2).find(|w| w[0].0 == w[1].0) {
                Some(w) => Err(duplicate_record(w[0].0, w[0].1, w[1].1)),
                None => Ok(()),
            };
        }
        check_unique_ids(spill, self.runs, fan_in, watch)
    }
}

/// Sorts the entries of `input` by (`axis` of their centre, key) within
/// `limits`: held in memory when they fit one run, else written in sorted
/// runs and merged. With `ids`, also collects the (key, position) pairs of
/// the entries (the leaves' records) the same way. Stops when `watch`
/// asks: every [`STOP_EVERY`] entries read, before and after each sort of
/// a run, and in the merges ([`reduce_runs`]).
fn sort_by(
    spill: &mut Spill,
    input: impl Iterator<Item = Result<Entry>>,
    axis: Axis,
    limits: Limits,
    expected: Option<usize>,
    mut ids: Option<&mut Ids>,
    watch: BulkWatch<'_>,
) -> Result<(Sorted, SortStats)> {
    let mut input = input.peekable();
    let mut stats = SortStats::default();
    let mut runs = Vec::new();
    // A known number of entries is allocated at once; an unknown one (the
    // input's records) as it comes: the budget bounds the chunk, it is not
    // allocated up front.
    let capacity = expected.map_or(0, |n| n.min(limits.run_len));
    let mut chunk: Vec<Keyed> = Vec::with_capacity(capacity);
    loop {
        chunk.clear();
        while chunk.len() < limits.run_len {
            let Some(e) = input.next() else { break };
            let entry = e?;
            if (chunk.len() as u64 + 1).is_multiple_of(STOP_EVERY) {
                watch.check()?;
            }
            if let Some(ids) = ids.as_deref_mut() {
                reserve_within(&mut ids.held, limits.run_len);
                ids.held.push((entry.key, stats.count + chunk.len() as u64));
            }
            reserve_within(&mut chunk, limits.run_len);
            chunk.push(Keyed {
                sort: axis.key(&entry.rect),
                entry,
            });
        }
        stats.count += chunk.len() as u64;
        stats.runs += u64::from(!chunk.is_empty());
        watch.check()?;
        chunk.sort_unstable();
        watch.check()?;
        let last = input.peek().is_none();
        if runs.is_empty() && last {
            return Ok((Sorted::Held(chunk.into_iter()), stats));
        }
        runs.push(spill.write_all(&chunk)?);
        if let Some(ids) = ids.as_deref_mut() {
            ids.held.sort_unstable();
            ids.runs.push(spill.write_all(&ids.held)?);
            ids.held.clear();
        }
        if last {
            break;
        }
    }
    drop(chunk);
    let (runs, passes) = reduce_runs::<Keyed>(spill, runs, limits.fan_in, READ_BUFFER, watch)?;
    stats.passes = passes + u64::from(runs.len() > 1);
    let merge = Box::new(Merge::open(&runs, READ_BUFFER)?);
    Ok((Sorted::Merged { merge, runs }, stats))
}

/// One level's packing: the store's sink, the node sizes, the spill files.
struct Packer<'a> {
    sink: &'a mut dyn BulkSink,
    spill: &'a mut Spill,
    limits: Limits,
    kind: super::params::IndexKind,
    /// Entries per node (at most M).
    cap: usize,
    /// Fewest entries per node (m).
    m: usize,
    /// Nodes stored so far, and the load's watch.
    nodes: Nodes<'a>,
}

impl Packer<'_> {
    /// Stores `node` (sorted by key here) as a node of `level`; returns its
    /// parent entry.
    fn store(&mut self, level: u16, node: &mut [Entry]) -> Result<Entry> {
        node.sort_unstable_by_key(|e| e.key);
        let mut parent = entry_of(self.kind, 0, node)?;
        parent.key = self.nodes.store(self.sink, level, node)?;
        Ok(parent)
    }

    /// Packs the `k` entries of `level`, sorted by centre x, into STR's
    /// slices and nodes; writes the parent entries to a new file and
    /// returns it with their number. A level of one node (at most `cap`
    /// entries, or too few for two nodes of m) is the root: `Err(root)`
    /// gives its parent entry.
    fn level(
        &mut self,
        level: u16,
        k: usize,
        mut sorted: Sorted,
    ) -> Result<std::result::Result<(PathBuf, usize), Entry>> {
        let mut node = Vec::with_capacity(self.cap.min(k));
        let groups = match k <= self.cap {
            true => 1,
            false => node_count(k, self.cap, self.m),
        };
        if groups == 1 {
            sorted.next_node(k, &mut node)?;
            sorted.finish(self.spill);
            return Ok(Err(self.store(level, &mut node)?));
        }
        let slices = (groups as f64).sqrt().ceil().max(1.0) as usize;
        let per_slice = groups.div_ceil(slices).max(1);
        let (path, mut parents) = self.spill.create()?;
        let mut first = 0;
        while first < groups {
            let nodes = first..(first + per_slice).min(groups);
            let n: usize = nodes.clone().map(|g| even_sizes_at(k, groups, g)).sum();
            let mut taken = 0;
            let input = std::iter::from_fn(|| match taken < n {
                true => {
                    taken += 1;
                    Some(sorted.next_entry().and_then(|e| e.ok_or_else(ended_early)))
                }
                false => None,
            });
            let watch = self.nodes.watch();
            let (mut slice, _) = sort_by(
                self.spill,
                input,
                Axis::Y,
                self.limits,
                Some(n),
                None,
                watch,
            )?;
            for g in nodes {
                slice.next_node(even_sizes_at(k, groups, g), &mut node)?;
                let parent = self.store(level, &mut node)?;
                parents.push(&EntryRec(parent))?;
            }
            slice.finish(self.spill);
            first += per_slice;
        }
        sorted.finish(self.spill);
        self.spill.bytes += parents.finish()?;
        Ok(Ok((path, groups)))
    }
}

/// `RTree::bulk_load_external` by STR (see the module documentation), for
/// the trees the in-memory loader packs by STR (not the Hilbert R-tree).
pub(super) fn load<S: NodeStore>(
    mut tree: RTree<S>,
    items: impl IntoIterator<Item = (u64, Rect)>,
    fill: f64,
    config: &ExternalBulkConfig,
    watch: BulkWatch<'_>,
) -> Result<(RTree<S>, ExternalBulkReport)> {
    let mut spill = Spill::new(&config.temp_dir)?;
    let mut report = ExternalBulkReport::default();
    let limits = Limits::of(config.memory_budget);
    let leaves = items.into_iter().map(|(key, rect)| {
        checked(rect).map(|rect| Entry {
            key,
            rect,
            payload: 0,
        })
    });
    let mut ids = Ids::default();
    let (sorted, stats) = sort_by(
        &mut spill,
        leaves,
        Axis::X,
        limits,
        None,
        Some(&mut ids),
        watch,
    )?;
    ids.check(&mut spill, limits.fan_in, watch)?;
    (report.records, report.runs, report.merge_passes) = (stats.count, stats.runs, stats.passes);
    let records = stats.count;
    if records == 0 {
        sorted.finish(&mut spill);
        return Ok((tree, report));
    }
    let p = tree.params;
    let cap = ((p.max_entries as f64 * fill).floor() as usize).clamp(p.min_entries, p.max_entries);
    let (spilled, nodes) = (&mut spill, &mut report.nodes);
    tree.store.bulk_load(Box::new(move |sink| {
        let mut packer = Packer {
            sink,
            spill: spilled,
            limits,
            kind: p.kind,
            cap,
            m: p.min_entries,
            nodes: Nodes::new(watch, tree_nodes(records, cap, p.min_entries)),
        };
        let (mut level, mut k, mut sorted) = (0u16, records as usize, sorted);
        loop {
            match packer.level(level, k, sorted)? {
                Err(root) => {
                    *nodes = packer.nodes.done();
                    return Ok(TreeMeta {
                        root: Some(root.key),
                        height: level + 1,
                        records,
                    });
                }
                Ok((path, groups)) => {
                    let mut r: Reader<EntryRec> = Reader::open(&path, READ_BUFFER)?;
                    let input = std::iter::from_fn(|| r.next_rec().transpose())
                        .map(|e| e.map(|EntryRec(e)| e));
                    sorted = sort_by(
                        packer.spill,
                        input,
                        Axis::X,
                        limits,
                        Some(groups),
                        None,
                        watch,
                    )?
                    .0;
                    packer.spill.remove(&path);
                    (k, level) = (groups, level + 1);
                }
            }
        }
    }))?;
    report.bytes_spilled = spill.bytes;
    Ok((tree, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::external::MIN_MEMORY_BUDGET;
    use crate::index::params::{IndexKind, TreeParams};
    use crate::index::{BulkMethod, Predicate, SplitKind};
    use crate::store::mem::MemStore;
    use proptest::prelude::*;
    use std::path::Path;

    /// `n` boxes in [0, 101]², ids unique and not in order; every eighth
    /// one shares its centre with its neighbour (ties broken by id).
    fn items(n: u64, seed: u64) -> Vec<(u64, Rect)> {
        (0..n)
            .map(|i| {
                let h = (i / 8 * 8 + u64::from(i % 8 != 0) * i).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    ^ seed;
                let x = (h % 10_007) as f64 / 100.0;
                let y = ((h >> 20) % 10_009) as f64 / 100.0;
                let w = ((h >> 40) % 7) as f64 / 10.0;
                let id = (i * 7_919 + seed % 1_000) % (n * 8 + 1) + i * (n * 8 + 1);
                (id, Rect::new(x, y, x + w, y + w / 2.0).unwrap())
            })
            .collect()
    }

    fn config(dir: &Path, memory_budget: usize) -> ExternalBulkConfig {
        ExternalBulkConfig {
            memory_budget,
            temp_dir: dir.to_path_buf(),
        }
    }

    /// Every node from the root down, depth first: its page, its level
    /// and its entries.
    fn nodes<S: NodeStore>(t: &RTree<S>) -> Vec<(u64, u16, Vec<Entry>)> {
        let mut out = Vec::new();
        let mut stack: Vec<u64> = t.store.meta().root.into_iter().collect();
        while let Some(id) = stack.pop() {
            let n = t.store.get(id).unwrap();
            if n.level > 0 {
                stack.extend(n.entries.iter().rev().map(|e| e.key));
            }
            out.push((id, n.level, n.entries.clone()));
        }
        out
    }

    fn external(
        params: TreeParams,
        data: &[(u64, Rect)],
        fill: f64,
        budget: usize,
        dir: &Path,
    ) -> (RTree<MemStore>, ExternalBulkReport) {
        RTree::bulk_load_external(
            MemStore::new(),
            params,
            data.iter().copied(),
            BulkMethod::Str,
            fill,
            &config(dir, budget),
        )
        .unwrap()
    }

    fn in_memory(params: TreeParams, data: &[(u64, Rect)], fill: f64) -> RTree<MemStore> {
        RTree::bulk_load(MemStore::new(), params, data.to_vec(), BulkMethod::Str, fill).unwrap()
    }

    #[test]
    fn the_tree_is_the_in_memory_loads_node_for_node() {
        let dir = tempfile::tempdir().unwrap();
        let data = items(9_000, 5);
        for params in [
            TreeParams::new(IndexKind::RStar, 12),
            TreeParams::new(IndexKind::RTree, 5).with_split(SplitKind::Quadratic),
        ] {
            for fill in [1.0, 0.7] {
                let want = nodes(&in_memory(params, &data, fill));
                // The smallest budget sorts every level and slice in runs
                // merged in several passes; a large one holds them all.
                for budget in [MIN_MEMORY_BUDGET, 8 << 20, 64 << 20] {
                    let (t, rep) = external(params, &data, fill, budget, dir.path());
                    assert!(nodes(&t) == want, "{params:?} fill {fill} budget {budget}");
                    assert_eq!(rep.records, 9_000);
                    assert_eq!(rep.nodes, want.len() as u64);
                    match budget {
                        MIN_MEMORY_BUDGET => {
                            assert!(rep.runs >= 50 && rep.merge_passes >= 2, "{rep:?}")
                        }
                        // Sorted in memory; only the parent levels' files.
                        _ => assert_eq!((rep.runs, rep.merge_passes), (1, 0), "{rep:?}"),
                    }
                    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
                }
            }
        }
    }

    #[test]
    fn a_duplicate_id_names_both_records_held_or_spilled() {
        let dir = tempfile::tempdir().unwrap();
        let p = TreeParams::new(IndexKind::RStar, 8);
        let mut data = items(3_000, 9);
        data.push((data[41].0, Rect::new(0.0, 0.0, 1.0, 1.0).unwrap()));
        for budget in [MIN_MEMORY_BUDGET, 64 << 20] {
            let err = RTree::bulk_load_external(
                MemStore::new(),
                p,
                data.clone(),
                BulkMethod::Str,
                1.0,
                &config(dir.path(), budget),
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("record 3001: object id") && err.contains("also record 42;"), "{err}");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }

    #[test]
    fn a_hilbert_tree_is_packed_in_hilbert_order_whatever_the_method() {
        let dir = tempfile::tempdir().unwrap();
        let data = items(2_000, 3);
        let params = TreeParams::new(IndexKind::Hilbert, 9).with_hilbert_domain(
            crate::geom::HilbertDomain::new(Rect::new(0.0, 0.0, 101.0, 101.0).unwrap(), 10)
                .unwrap(),
        );
        let (t, _) = external(params, &data, 1.0, MIN_MEMORY_BUDGET, dir.path());
        let mem = RTree::bulk_load(MemStore::new(), params, data, BulkMethod::Hilbert, 1.0).unwrap();
        let leaves = |t: &RTree<MemStore>| -> Vec<Vec<u64>> {
            nodes(t)
                .into_iter()
                .filter(|(_, level, _)| *level == 0)
                .map(|(_, _, e)| e.iter().map(|e| e.key).collect())
                .collect()
        };
        assert_eq!(leaves(&t), leaves(&mem));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]
        #[test]
        fn external_str_equals_the_in_memory_load_and_brute_force(
            n in 0u64..2_000,
            seed in any::<u64>(),
            max in 4usize..30,
            fill in 0.4f64..=1.0,
            budget in MIN_MEMORY_BUDGET..(256 << 10),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let data = items(n, seed);
            let params = TreeParams::new(IndexKind::RStar, max);
            let (t, rep) = external(params, &data, fill, budget, dir.path());
            prop_assert_eq!(rep.records, n);
            prop_assert!(nodes(&t) == nodes(&in_memory(params, &data, fill)));
            prop_assert_eq!(t.check().unwrap().records, n);
            for i in 0..8 {
                let (x, y) = ((i * 13 % 90) as f64, (i * 29 % 90) as f64);
                let w = Rect::new(x, y, x + 3.0 + i as f64, y + 2.0).unwrap();
                let mut want: Vec<u64> =
                    data.iter().filter(|(_, r)| r.intersects(&w)).map(|(id, _)| *id).collect();
                want.sort_unstable();
                prop_assert_eq!(t.query(w, Predicate::Intersects).unwrap().sorted_ids(), want);
            }
            prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }
}
