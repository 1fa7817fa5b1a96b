//! Bulk loading with bounded memory: Hilbert packing over an external sort,
//! for inputs larger than memory.
//!
//! [`RTree::bulk_load_external`] reads `(object id, rectangle)` pairs from
//! any iterator and never holds more than about
//! [`ExternalBulkConfig::memory_budget`] bytes of them:
//!
//! 1. when the Hilbert domain is not fixed by the tree's parameters, the
//!    input is first copied to temporary files, one per run, while its
//!    extent is computed (the domain is that extent, as in
//!    [`RTree::bulk_load`]); each file is removed once its run is formed;
//! 2. records are read in chunks that fit the budget, each chunk sorted by
//!    (Hilbert value of the rectangle's centre, object id) and written as a
//!    sorted run; the object ids of the chunk, each with its position in
//!    the input, are sorted and written as a second run, so duplicate ids
//!    are found by merging those (no id set in memory), and the error names
//!    both records;
//! 3. runs are merged with a fan-in that fits the budget (several passes
//!    when there are many runs);
//! 4. the merged stream is cut into leaves in order, bottom-up: each node is
//!    created once with its final entries and goes to the store through
//!    [`NodeStore::bulk_load`] (fresh pages written in large sequential
//!    batches, unlogged, the tree published atomically once complete: see
//!    [`crate::store::bulk`]), and each level's parent entries are streamed
//!    to a temporary file that the next level reads sequentially. Upper levels
//!    keep the order of the level below (Kamel and Faloutsos's packing; the
//!    in-memory loader re-sorts them by Hilbert value, which gives a
//!    slightly different tree with the same answers).
//!
//! Node sizes follow the in-memory loader: `⌊M · fill⌋` entries (at least
//! m), spread evenly so every node holds between m and M entries. In a
//! Hilbert R-tree records are ordered by their Hilbert value in the tree's
//! own domain (its payload), exactly like [`RTree::bulk_load`].
//!
//! The budget covers the records being sorted and the merge's read
//! buffers; the store's own buffer comes on top (give the store a bounded
//! buffer too). Temporary files are created in
//! [`ExternalBulkConfig::temp_dir`] and removed when the load ends, whether
//! it succeeds, fails or is stopped ([`super::bulk::BulkWatch`]).
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use super::bulk::{
    even_sizes_at, node_count, tree_nodes, BulkMethod, BulkWatch, Nodes, STOP_EVERY,
};
use super::params::{IndexKind, TreeParams};
use super::{checked, entry_of, RTree};
use crate::geom::{HilbertDomain, Rect};
use crate::page::Entry;
use crate::store::{NodeStore, TreeMeta};
use crate::{Error, Result};

/// Smallest memory budget accepted (bytes).
pub const MIN_MEMORY_BUDGET: usize = 16 * 1024;

/// Bytes of one merge reader's buffer (the fan-in is the budget divided by this).
pub(super) const READ_BUFFER: usize = 8 * 1024;

/// Bytes one record costs while a run is formed (the keyed record plus its
/// id and position).
pub(super) const RUN_RECORD_COST: usize = KEYED_BYTES + 16;

/// Settings of `RTree::bulk_load_external`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalBulkConfig {
    /// Bytes of memory for records being sorted and merge buffers (at least
    /// `MIN_MEMORY_BUDGET`).
    pub memory_budget: usize,
    /// Directory for the temporary run files (must exist and be writable).
    pub temp_dir: PathBuf,
}

impl ExternalBulkConfig {
    /// Checks a bulk load's fill factor (in (0, 1]) and this memory budget
    /// (at least [`MIN_MEMORY_BUDGET`]): the loads check them before they
    /// read their input, and a front end can check them first.
    pub fn check(&self, fill: f64) -> Result<()> {
        if !(fill > 0.0 && fill <= 1.0) {
            return Err(Error::invalid(format!(
                "bulk-load fill factor {fill} must be in (0, 1]"
            )));
        }
        if self.memory_budget < MIN_MEMORY_BUDGET {
            return Err(Error::invalid(format!(
                "bulk-load memory budget of {} bytes is below the minimum of {MIN_MEMORY_BUDGET}",
                self.memory_budget
            )));
        }
        Ok(())
    }
}

/// What `RTree::bulk_load_external` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExternalBulkReport {
    /// Records loaded.
    pub records: u64,
    /// Sorted runs written by the run-formation pass (record runs).
    pub runs: u64,
    /// Merge passes over the record runs (0 when one run sufficed).
    pub merge_passes: u64,
    /// Bytes written to temporary files, all passes together.
    pub bytes_spilled: u64,
    /// Nodes created.
    pub nodes: u64,
}

/// A fixed-size record of a run file.
pub(super) trait Fixed: Copy + Ord {
    /// Encoded size in bytes.
    const BYTES: usize;
    /// Encodes into `out` (`BYTES` long).
    fn put(&self, out: &mut Vec<u8>);
    /// Decodes from `b` (`BYTES` long); an error for a record no encoder
    /// writes (an invalid rectangle).
    fn get(b: &[u8]) -> Result<Self>;
}

pub(super) fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

pub(super) fn le_f64(b: &[u8], at: usize) -> f64 {
    f64::from_bits(le_u64(b, at))
}

/// An object id and the record's position in the input (0-based); ordered
/// by id, then position.
impl Fixed for (u64, u64) {
    const BYTES: usize = 16;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_le_bytes());
        out.extend_from_slice(&self.1.to_le_bytes());
    }
    fn get(b: &[u8]) -> Result<Self> {
        Ok((le_u64(b, 0), le_u64(b, 8)))
    }
}

/// Bytes of an encoded entry.
const ENTRY_BYTES: usize = 48;
/// Bytes of an encoded keyed record.
const KEYED_BYTES: usize = 8 + ENTRY_BYTES;

fn put_entry(e: &Entry, out: &mut Vec<u8>) {
    for v in [e.key, e.rect.min_x().to_bits(), e.rect.min_y().to_bits()] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [
        e.rect.max_x().to_bits(),
        e.rect.max_y().to_bits(),
        e.payload,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn get_entry(b: &[u8], at: usize) -> Result<Entry> {
    let key = le_u64(b, at);
    let rect = Rect::new(
        le_f64(b, at + 8),
        le_f64(b, at + 16),
        le_f64(b, at + 24),
        le_f64(b, at + 32),
    )
    .map_err(|e| Error::corrupt(None, format!("bulk load: entry with key {key}: {e}")))?;
    Ok(Entry {
        key,
        rect,
        payload: le_u64(b, at + 40),
    })
}

/// An entry with its sort key; ordered by (sort key, entry key).
#[derive(Debug, Clone, Copy)]
pub(super) struct Keyed {
    /// The key the records are sorted by first.
    pub(super) sort: u64,
    /// The entry.
    pub(super) entry: Entry,
}

ordered_by!(Keyed, |a, b| (a.sort, a.entry.key)
    .cmp(&(b.sort, b.entry.key)));

impl Fixed for Keyed {
    const BYTES: usize = KEYED_BYTES;
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.sort.to_le_bytes());
        put_entry(&self.entry, out);
    }
    fn get(b: &[u8]) -> Result<Self> {
        Ok(Keyed {
            sort: le_u64(b, 0),
            entry: get_entry(b, 8)?,
        })
    }
}

impl Fixed for EntryRec {
    const BYTES: usize = ENTRY_BYTES;
    fn put(&self, out: &mut Vec<u8>) {
        put_entry(&self.0, out);
    }
    fn get(b: &[u8]) -> Result<Self> {
        Ok(EntryRec(get_entry(b, 0)?))
    }
}

/// An entry in a level file (never sorted; `Ord` by key only to be [`Fixed`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct EntryRec(pub(super) Entry);
ordered_by!(EntryRec, |a, b| a.0.key.cmp(&b.0.key));

/// Temporary files of one load, removed on drop.
pub(super) struct Spill {
    dir: PathBuf,
    stem: String,
    next: u64,
    live: Vec<PathBuf>,
    /// Bytes written to its files so far.
    pub(super) bytes: u64,
}

static LOADS: AtomicU64 = AtomicU64::new(0);

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        page: None,
        source,
    }
}

impl Spill {
    pub(super) fn new(dir: &Path) -> Result<Self> {
        if !dir.is_dir() {
            return Err(Error::invalid(format!(
                "temporary directory {} for the bulk load does not exist",
                dir.display()
            )));
        }
        let n = LOADS.fetch_add(1, AtomicOrdering::Relaxed);
        Ok(Spill {
            dir: dir.to_path_buf(),
            stem: format!("geoflash-bulk-{}-{n}", std::process::id()),
            next: 0,
            live: Vec::new(),
            bytes: 0,
        })
    }

    /// A new empty temporary file for writing.
    pub(super) fn create(&mut self) -> Result<(PathBuf, Writer)> {
        let path = self.dir.join(format!("{}-{}.tmp", self.stem, self.next));
        self.next += 1;
        let f = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        self.live.push(path.clone());
        Ok((
            path.clone(),
            Writer {
                out: BufWriter::with_capacity(READ_BUFFER, f),
                path,
                buf: Vec::with_capacity(KEYED_BYTES),
                bytes: 0,
            },
        ))
    }

    /// Writes `items` (in order) to a new file.
    pub(super) fn write_all<T: Fixed>(&mut self, items: &[T]) -> Result<PathBuf> {
        let (path, mut w) = self.create()?;
        for it in items {
            w.push(it)?;
        }
        self.bytes += w.finish()?;
        Ok(path)
    }

    /// Removes a file that is no longer needed.
    pub(super) fn remove(&mut self, path: &Path) {
        // A file that cannot be removed now is retried on drop.
        if std::fs::remove_file(path).is_ok() {
            self.live.retain(|p| p != path);
        }
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        for p in &self.live {
            if let Err(e) = std::fs::remove_file(p) {
                tracing::warn!("bulk load: cannot remove {}: {e}", p.display());
            }
        }
    }
}

/// Sequential writer of fixed-size records.
pub(super) struct Writer {
    out: BufWriter<File>,
    path: PathBuf,
    buf: Vec<u8>,
    bytes: u64,
}

impl Writer {
    pub(super) fn push<T: Fixed>(&mut self, it: &T) -> Result<()> {
        self.buf.clear();
        it.put(&mut self.buf);
        self.out
            .write_all(&self.buf)
            .map_err(|e| io_err(&self.path, e))?;
        self.bytes += T::BYTES as u64;
        Ok(())
    }

    /// Flushes; returns the bytes written.
    pub(super) fn finish(mut self) -> Result<u64> {
        self.out.flush().map_err(|e| io_err(&self.path, e))?;
        Ok(self.bytes)
    }
}

/// Sequential reader of fixed-size records.
pub(super) struct Reader<T: Fixed> {
    input: BufReader<File>,
    path: PathBuf,
    buf: Vec<u8>,
    _t: std::marker::PhantomData<T>,
}

impl<T: Fixed> Reader<T> {
    pub(super) fn open(path: &Path, buffer: usize) -> Result<Self> {
        let f = File::open(path).map_err(|e| io_err(path, e))?;
        Ok(Reader {
            input: BufReader::with_capacity(buffer.max(T::BYTES), f),
            path: path.to_path_buf(),
            buf: vec![0u8; T::BYTES],
            _t: std::marker::PhantomData,
        })
    }

    /// The next record, `None` at the end of the file.
    pub(super) fn next_rec(&mut self) -> Result<Option<T>> {
        let mut filled = 0;
        while filled < T::BYTES {
            let Some(dst) = self.buf.get_mut(filled..) else {
                break;
            };
            match self.input.read(dst) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(&self.path, e)),
            }
        }
        if filled == 0 {
            return Ok(None);
        }
        if filled < T::BYTES {
            return Err(io_err(
                &self.path,
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "temporary bulk-load file ends inside a record",
                ),
            ));
        }
        T::get(&self.buf)
            .map(Some)
            .map_err(|e| e.in_file(&self.path))
    }
}

/// K-way merge of sorted run files.
pub(super) struct Merge<T: Fixed> {
    readers: Vec<Reader<T>>,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(T, usize)>>,
}

impl<T: Fixed> Merge<T> {
    pub(super) fn open(paths: &[PathBuf], buffer: usize) -> Result<Self> {
        let mut readers = Vec::with_capacity(paths.len());
        let mut heap = std::collections::BinaryHeap::with_capacity(paths.len());
        for (i, p) in paths.iter().enumerate() {
            let mut r = Reader::open(p, buffer)?;
            if let Some(first) = r.next_rec()? {
                heap.push(std::cmp::Reverse((first, i)));
            }
            readers.push(r);
        }
        Ok(Merge { readers, heap })
    }

    pub(super) fn next_rec(&mut self) -> Result<Option<T>> {
        let Some(std::cmp::Reverse((it, i))) = self.heap.pop() else {
            return Ok(None);
        };
        if let Some(r) = self.readers.get_mut(i) {
            if let Some(next) = r.next_rec()? {
                self.heap.push(std::cmp::Reverse((next, i)));
            }
        }
        Ok(Some(it))
    }
}

/// Merges `runs` until at most `fan_in` remain; returns them and the
/// passes made. Stops when `watch` asks, before each merge of a group of
/// runs and every [`STOP_EVERY`] records merged.
pub(super) fn reduce_runs<T: Fixed>(
    spill: &mut Spill,
    mut runs: Vec<PathBuf>,
    fan_in: usize,
    buffer: usize,
    watch: BulkWatch<'_>,
) -> Result<(Vec<PathBuf>, u64)> {
    let fan_in = fan_in.max(2);
    let mut passes = 0;
    while runs.len() > fan_in {
        passes += 1;
        let mut next = Vec::with_capacity(runs.len().div_ceil(fan_in));
        for group in runs.chunks(fan_in) {
            watch.check()?;
            let mut m: Merge<T> = Merge::open(group, buffer)?;
            let (path, mut w) = spill.create()?;
            let mut merged = 0u64;
            while let Some(it) = m.next_rec()? {
                w.push(&it)?;
                merged += 1;
                if merged.is_multiple_of(STOP_EVERY) {
                    watch.check()?;
                }
            }
            spill.bytes += w.finish()?;
            drop(m);
            for p in group {
                spill.remove(p);
            }
            next.push(path);
        }
        runs = next;
    }
    Ok((runs, passes))
}

impl<S: NodeStore> RTree<S> {
    /// A new tree on the empty `store` holding `items` (object id,
    /// rectangle), packed bottom-up by `method` at fill factor `fill` in
    /// (0, 1], using about `config.memory_budget` bytes of memory and
    /// temporary files in `config.temp_dir`: in Hilbert order (see the
    /// module documentation), or by STR ([`super::external_str`]: the same
    /// tree as [`RTree::bulk_load`]'s STR). A Hilbert R-tree is always
    /// packed in Hilbert order, as in memory. Object ids must be unique and
    /// rectangles valid: a violation is an error and the store holds no
    /// tree (the bulk load publishes nothing).
    #[cfg(any(test, feature = "internals"))]
    pub fn bulk_load_external<I>(
        store: S,
        params: TreeParams,
        items: I,
        method: BulkMethod,
        fill: f64,
        config: &ExternalBulkConfig,
    ) -> Result<(Self, ExternalBulkReport)>
    where
        I: IntoIterator<Item = (u64, Rect)>,
    {
        RTree::bulk_load_external_watched(
            store,
            params,
            items,
            method,
            fill,
            config,
            BulkWatch::NONE,
        )
    }

    /// [`RTree::bulk_load_external`], stopped and followed by `watch`
    /// (asked between sort runs and merge passes, every 65,536 records
    /// read or merged, and before each node stored): when it asks to stop,
    /// the load ends with [`Error::Interrupted`], the store holds no tree
    /// and the temporary files are removed.
    pub fn bulk_load_external_watched<I>(
        store: S,
        params: TreeParams,
        items: I,
        method: BulkMethod,
        fill: f64,
        config: &ExternalBulkConfig,
        watch: BulkWatch<'_>,
    ) -> Result<(Self, ExternalBulkReport)>
    where
        I: IntoIterator<Item = (u64, Rect)>,
    {
        let mut tree = RTree::create(store, params)?;
        config.check(fill)?;
        if method == BulkMethod::Str && params.kind != IndexKind::Hilbert {
            return super::external_str::load(tree, items, fill, config, watch);
        }
        let mut spill = Spill::new(&config.temp_dir)?;
        let mut report = ExternalBulkReport::default();
        let hilbert_tree = params.kind == IndexKind::Hilbert;
        let run_len = (config.memory_budget / RUN_RECORD_COST).max(2);

        let Some((runs, id_runs, records)) = sorted_runs(
            &mut spill,
            items,
            params.hilbert_domain,
            hilbert_tree,
            run_len,
            watch,
        )?
        else {
            return Ok((tree, report));
        };
        report.records = records;
        report.runs = runs.len() as u64;
        if records == 0 {
            return Ok((tree, report));
        }
        let fan_in = (config.memory_budget / READ_BUFFER)
            .saturating_sub(1)
            .max(2);

        check_unique_ids(&mut spill, id_runs, fan_in, watch)?;

        let (runs, passes) = reduce_runs::<Keyed>(&mut spill, runs, fan_in, READ_BUFFER, watch)?;
        report.merge_passes = passes + u64::from(runs.len() > 1);
        watch.check()?;
        let mut merged: Merge<Keyed> = Merge::open(&runs, READ_BUFFER)?;
        let leaves = std::iter::from_fn(move || merged.next_rec().transpose())
            .map(|k| k.map(|k: Keyed| k.entry));
        let p = tree.params;
        let cap =
            ((p.max_entries as f64 * fill).floor() as usize).clamp(p.min_entries, p.max_entries);
        let (spilled, nodes) = (&mut spill, &mut report.nodes);
        let mut stored = Nodes::new(watch, tree_nodes(records, cap, p.min_entries));
        tree.store.bulk_load(Box::new(move |sink| {
            let mut level: u16 = 0;
            let mut k = records as usize;
            let mut input: Box<dyn Iterator<Item = Result<Entry>>> = Box::new(leaves);
            let mut prev_file: Option<PathBuf> = None;
            loop {
                let groups = if k <= cap {
                    1
                } else {
                    node_count(k, cap, p.min_entries)
                };
                let single = groups == 1;
                let mut out = if single {
                    None
                } else {
                    Some(spilled.create()?)
                };
                let mut root = None;
                let mut node: Vec<Entry> = Vec::new();
                for g in 0..groups {
                    let size = if single {
                        k
                    } else {
                        even_sizes_at(k, groups, g)
                    };
                    next_node(&mut input, size, &mut node)?;
                    let mut parent = entry_of(p.kind, 0, &node)?;
                    parent.key = stored.store(sink, level, &node)?;
                    root = Some(parent.key);
                    *nodes = stored.done();
                    if let Some((_, w)) = out.as_mut() {
                        w.push(&EntryRec(parent))?;
                    }
                }
                drop(input);
                if let Some(done) = prev_file.take() {
                    spilled.remove(&done);
                }
                for r in &runs {
                    spilled.remove(r);
                }
                let Some((path, w)) = out else {
                    return Ok(TreeMeta {
                        root,
                        height: level + 1,
                        records,
                    });
                };
                spilled.bytes += w.finish()?;
                let mut r: Reader<EntryRec> = Reader::open(&path, READ_BUFFER)?;
                input = Box::new(
                    std::iter::from_fn(move || r.next_rec().transpose())
                        .map(|e| e.map(|EntryRec(e)| e)),
                );
                prev_file = Some(path);
                k = groups;
                level += 1;
            }
        }))?;
        report.bytes_spilled = spill.bytes;
        Ok((tree, report))
    }
}

/// The next `size` entries of `input` into `node` (cleared first): an
/// error when it ends early.
fn next_node(
    input: &mut dyn Iterator<Item = Result<Entry>>,
    size: usize,
    node: &mut Vec<Entry>,
) -> Result<()> {
    node.clear();
    for _ in 0..size {
        match input.next() {
            Some(e) => node.push(e?),
            None => {
                return Err(Error::corrupt(
                    None,
                    "bulk load: a temporary file ended early",
                ))
            }
        }
    }
    Ok(())
}

/// The record runs, the id runs and the number of records of an input.
type Runs = (Vec<PathBuf>, Vec<PathBuf>, u64);

/// Runs of `items` for a tree without a Hilbert domain: the input is
/// written once to temporary files of `run_len` records each while its
/// extent is measured, then each file is read back into its run in the
/// domain of that extent (see [`form_runs`]) and removed, so that the
/// copy and the runs never both hold the whole input (at most one file's
/// records more than the runs). `None` for an empty input.
/// The sorted runs of `items` on the curve of `domain`, else of the
/// input's extent (one extra pass; `None` for an input with no record).
fn sorted_runs(
    spill: &mut Spill,
    items: impl IntoIterator<Item = (u64, Rect)>,
    domain: Option<HilbertDomain>,
    hilbert_tree: bool,
    run_len: usize,
    watch: BulkWatch<'_>,
) -> Result<Option<Runs>> {
    let Some(d) = domain else {
        return form_runs_in_extent(spill, items, hilbert_tree, run_len, watch);
    };
    let mut out: Runs = (Vec::new(), Vec::new(), 0);
    form_runs(
        spill,
        items.into_iter().map(Ok),
        d,
        hilbert_tree,
        run_len,
        &mut out,
        watch,
    )?;
    Ok(Some(out))
}

fn form_runs_in_extent(
    spill: &mut Spill,
    items: impl IntoIterator<Item = (u64, Rect)>,
    hilbert_tree: bool,
    run_len: usize,
    watch: BulkWatch<'_>,
) -> Result<Option<Runs>> {
    let mut copies: Vec<PathBuf> = Vec::new();
    let mut open: Option<Writer> = None;
    let mut in_open = 0usize;
    let mut extent: Option<Rect> = None;
    let mut read = 0u64;
    for (id, rect) in items {
        read += 1;
        if read.is_multiple_of(STOP_EVERY) {
            watch.check()?;
        }
        let rect = checked(rect)?;
        extent = Some(extent.map_or(rect, |e| e.union(&rect)));
        let w = match open.as_mut() {
            Some(w) => w,
            None => {
                let (path, w) = spill.create()?;
                copies.push(path);
                in_open = 0;
                open.insert(w)
            }
        };
        w.push(&EntryRec(Entry {
            key: id,
            rect,
            payload: 0,
        }))?;
        in_open += 1;
        if in_open == run_len {
            if let Some(w) = open.take() {
                spill.bytes += w.finish()?;
            }
        }
    }
    if let Some(w) = open.take() {
        spill.bytes += w.finish()?;
    }
    watch.check()?;
    let Some(extent) = extent else {
        return Ok(None);
    };
    let d = HilbertDomain::new(extent, HilbertDomain::DEFAULT_ORDER)?;
    let mut out: Runs = (Vec::new(), Vec::new(), 0);
    for path in &copies {
        let mut r: Reader<EntryRec> = Reader::open(path, READ_BUFFER)?;
        let input = std::iter::from_fn(move || r.next_rec().transpose())
            .map(|e| e.map(|EntryRec(e)| (e.key, e.rect)));
        form_runs(spill, input, d, hilbert_tree, run_len, &mut out, watch)?;
        spill.remove(path);
    }
    Ok(Some(out))
}

/// Duplicate ids: merges the id runs (`fan_in` at a time) and compares
/// neighbours; the runs are removed when none is found. Stops when `watch`
/// asks (see [`reduce_runs`]).
pub(super) fn check_unique_ids(
    spill: &mut Spill,
    id_runs: Vec<PathBuf>,
    fan_in: usize,
    watch: BulkWatch<'_>,
) -> Result<()> {
    let (id_runs, _) = reduce_runs::<(u64, u64)>(spill, id_runs, fan_in, READ_BUFFER, watch)?;
    watch.check()?;
    let mut ids: Merge<(u64, u64)> = Merge::open(&id_runs, READ_BUFFER)?;
    let mut prev: Option<(u64, u64)> = None;
    let mut merged = 0u64;
    while let Some((id, at)) = ids.next_rec()? {
        merged += 1;
        if merged.is_multiple_of(STOP_EVERY) {
            watch.check()?;
        }
        if let Some((_, first)) = prev.filter(|p| p.0 == id) {
            return Err(duplicate_record(id, first, at));
        }
        prev = Some((id, at));
    }
    drop(ids);
    for p in &id_runs {
        spill.remove(p);
    }
    Ok(())
}

/// The error for object `id` found at input positions `first` and `again`
/// (0-based): "record N: ..." with the 1-based record numbers, so that a
/// front end can put its input file in front (the command line does).
pub(crate) fn duplicate_record(id: u64, first: u64, again: u64) -> Error {
    Error::invalid(format!(
        "record {}: object id {id} appears twice in the bulk-load input (it is also record {}; \
         object ids must be unique)",
        again + 1,
        first + 1
    ))
}

/// Reads `input` in chunks of `run_len` records, validates them, and writes
/// each chunk sorted by (Hilbert value, id) as a record run and its sorted
/// (id, position) pairs as an id run. Appends them to the record runs and
/// the id runs of `out` and counts the records in its count (where the
/// positions of `input`'s records start).
fn form_runs(
    spill: &mut Spill,
    input: impl Iterator<Item = Result<(u64, Rect)>>,
    domain: HilbertDomain,
    hilbert_tree: bool,
    run_len: usize,
    out: &mut Runs,
    watch: BulkWatch<'_>,
) -> Result<()> {
    let (runs, id_runs, count) = out;
    // Grown as records come (at most `run_len`): the budget bounds the
    // chunk, it is not allocated up front.
    let mut chunk: Vec<Keyed> = Vec::new();
    let mut ids: Vec<(u64, u64)> = Vec::new();
    let mut input = input.peekable();
    while input.peek().is_some() {
        chunk.clear();
        ids.clear();
        while chunk.len() < run_len {
            let Some(item) = input.next() else { break };
            let (id, rect) = item?;
            if (chunk.len() as u64 + 1).is_multiple_of(STOP_EVERY) {
                watch.check()?;
            }
            let rect = checked(rect)?;
            let (sort, payload) = if hilbert_tree {
                let v = super::hilbert::record_value(&domain, &rect, id);
                (v, v)
            } else {
                (domain.hilbert_rect(&rect), 0)
            };
            reserve_within(&mut chunk, run_len);
            chunk.push(Keyed {
                sort,
                entry: Entry {
                    key: id,
                    rect,
                    payload,
                },
            });
            reserve_within(&mut ids, run_len);
            ids.push((id, *count + ids.len() as u64));
        }
        *count += chunk.len() as u64;
        // Between sort runs: before a chunk is sorted, and before it is
        // written.
        watch.check()?;
        chunk.sort_unstable();
        ids.sort_unstable();
        watch.check()?;
        runs.push(spill.write_all(&chunk)?);
        id_runs.push(spill.write_all(&ids)?);
    }
    Ok(())
}

/// Room in `v` for one more item, its capacity kept at most `limit` (a
/// run's records): grown by doubling up to `limit`, so that a sort takes
/// the memory its records need, never more than its budget, and a budget
/// above the machine's memory is a bound, not an allocation that fails.
pub(super) fn reserve_within<T>(v: &mut Vec<T>, limit: usize) {
    if v.len() == v.capacity() {
        let more = v.capacity().max(1024).min(limit.saturating_sub(v.len()));
        v.reserve_exact(more.max(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{BulkMethod, Predicate, SplitKind};
    use crate::store::mem::MemStore;
    use proptest::prelude::*;

    fn items(n: u64, seed: u64) -> Vec<(u64, Rect)> {
        (0..n)
            .map(|i| {
                let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
                let x = (h % 10_007) as f64 / 100.0;
                let y = ((h >> 20) % 10_009) as f64 / 100.0;
                let w = ((h >> 40) % 7) as f64 / 10.0;
                (i * 3 + 1, Rect::new(x, y, x + w, y + w / 2.0).unwrap())
            })
            .collect()
    }

    fn answers<S: NodeStore>(t: &RTree<S>, w: Rect) -> Vec<u64> {
        t.query(w, Predicate::Intersects).unwrap().sorted_ids()
    }

    fn brute(data: &[(u64, Rect)], w: &Rect) -> Vec<u64> {
        let mut v: Vec<u64> = data
            .iter()
            .filter(|(_, r)| r.intersects(w))
            .map(|(i, _)| *i)
            .collect();
        v.sort_unstable();
        v
    }

    fn windows() -> Vec<Rect> {
        (0..12)
            .map(|i| {
                let x = (i * 7 % 90) as f64;
                let y = (i * 13 % 90) as f64;
                Rect::new(x, y, x + 1.0 + i as f64, y + 2.0 + i as f64).unwrap()
            })
            .collect()
    }

    fn tiny(dir: &Path) -> ExternalBulkConfig {
        ExternalBulkConfig {
            memory_budget: MIN_MEMORY_BUDGET,
            temp_dir: dir.to_path_buf(),
        }
    }

    fn leftovers(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn tiny_budget_many_runs_answers_like_the_in_memory_load() {
        let dir = tempfile::tempdir().unwrap();
        let data = items(6000, 7);
        for params in [
            TreeParams::new(IndexKind::RStar, 12),
            TreeParams::new(IndexKind::RTree, 7).with_split(SplitKind::Quadratic),
            TreeParams::new(IndexKind::Hilbert, 6).with_hilbert_domain(
                HilbertDomain::new(Rect::new(0.0, 0.0, 60.0, 60.0).unwrap(), 8).unwrap(),
            ),
        ] {
            for fill in [1.0, 0.7] {
                let (mut t, rep) = RTree::bulk_load_external(
                    MemStore::new(),
                    params,
                    data.iter().copied(), BulkMethod::Hilbert,
                    fill,
                    &tiny(dir.path()),
                )
                .unwrap();
                // 16 KiB at 72 bytes a record: 227 records a run.
                assert!(rep.runs >= 20, "{rep:?}");
                assert!(rep.merge_passes >= 2, "{rep:?}");
                assert_eq!(rep.records, 6000);
                assert_eq!(leftovers(dir.path()), 0, "temporary files left behind");
                let report = t.check().unwrap();
                assert_eq!(report.records, 6000);
                let mem = RTree::bulk_load(
                    MemStore::new(),
                    params,
                    data.clone(),
                    BulkMethod::Hilbert,
                    fill,
                )
                .unwrap();
                assert_eq!(t.height(), mem.height());
                for w in windows() {
                    let want = brute(&data, &w);
                    assert_eq!(answers(&t, w), want);
                    assert_eq!(answers(&mem, w), want);
                }
                let p = crate::geom::Point::new(30.0, 30.0).unwrap();
                let distances = |k: crate::index::query::KnnResult| -> Vec<f64> {
                    k.neighbors.iter().map(|n| n.distance).collect()
                };
                assert_eq!(
                    distances(t.nearest(p, 10, false).unwrap()),
                    distances(mem.nearest(p, 10, false).unwrap())
                );
                // The tree stays updatable.
                for (id, r) in data.iter().take(100) {
                    t.delete(*id, *r).unwrap();
                }
                t.insert(1, Rect::new(1.0, 1.0, 2.0, 2.0).unwrap()).unwrap();
                t.check().unwrap();
            }
        }
    }

    #[test]
    fn hilbert_tree_leaves_equal_the_in_memory_load() {
        // In a Hilbert R-tree both loaders order records by payload then id:
        // the leaf level is the same sequence.
        let dir = tempfile::tempdir().unwrap();
        let data = items(3000, 11);
        let params = TreeParams::new(IndexKind::Hilbert, 9).with_hilbert_domain(
            HilbertDomain::new(Rect::new(0.0, 0.0, 101.0, 101.0).unwrap(), 10).unwrap(),
        );
        let (t, _) = RTree::bulk_load_external(
            MemStore::new(),
            params,
            data.clone(), BulkMethod::Hilbert,
            1.0,
            &tiny(dir.path()),
        )
        .unwrap();
        let mem =
            RTree::bulk_load(MemStore::new(), params, data, BulkMethod::Hilbert, 1.0).unwrap();
        assert_eq!(leaf_ids(&t), leaf_ids(&mem));
    }

    /// Leaf contents left to right.
    fn leaf_ids<S: NodeStore>(t: &RTree<S>) -> Vec<Vec<u64>> {
        fn walk<S: NodeStore>(t: &RTree<S>, id: u64, out: &mut Vec<Vec<u64>>) {
            let n = t.store.get(id).unwrap();
            if n.level == 0 {
                let mut keys: Vec<(u64, u64)> =
                    n.entries.iter().map(|e| (e.payload, e.key)).collect();
                keys.sort_unstable();
                out.push(keys.into_iter().map(|(_, k)| k).collect());
            } else {
                let mut kids: Vec<(u64, u64)> =
                    n.entries.iter().map(|e| (e.payload, e.key)).collect();
                kids.sort_unstable();
                for (_, k) in kids {
                    walk(t, k, out);
                }
            }
        }
        let mut out = Vec::new();
        if let Some(root) = t.store.meta().root {
            walk(t, root, &mut out);
        }
        out
    }

    #[test]
    fn bad_input_is_refused_and_leaves_no_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = TreeParams::new(IndexKind::RStar, 8);
        let r = Rect::new(0.0, 0.0, 1.0, 1.0).unwrap();
        // A duplicate far apart (different runs).
        let mut data = items(2000, 3);
        data.push((data[5].0, r));
        let err = RTree::bulk_load_external(MemStore::new(), p, data, BulkMethod::Hilbert, 1.0, &tiny(dir.path()))
            .unwrap_err();
        // Both records named (issue 44): the first is record 6, its
        // duplicate the last one.
        let m = err.to_string();
        assert!(m.contains("twice"), "{m}");
        assert!(
            m.contains("record 2001: object id") && m.contains("also record 6;"),
            "{m}"
        );
        assert_eq!(leftovers(dir.path()), 0);
        let nan = Rect::invalid_for_tests(f64::NAN, r.min_y(), r.max_x(), r.max_y());
        let err = RTree::bulk_load_external(
            MemStore::new(),
            p,
            vec![(1, r), (2, nan)], BulkMethod::Hilbert,
            1.0,
            &tiny(dir.path()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("finite"), "{err}");
        assert_eq!(leftovers(dir.path()), 0);
        let small = ExternalBulkConfig {
            memory_budget: 100,
            temp_dir: dir.path().to_path_buf(),
        };
        assert!(RTree::bulk_load_external(MemStore::new(), p, vec![(1, r)], BulkMethod::Hilbert, 1.0, &small).is_err());
        assert!(RTree::bulk_load_external(
            MemStore::new(),
            p,
            vec![(1, r)], BulkMethod::Hilbert,
            0.0,
            &tiny(dir.path())
        )
        .is_err());
        let missing = ExternalBulkConfig {
            memory_budget: MIN_MEMORY_BUDGET,
            temp_dir: dir.path().join("absent"),
        };
        assert!(
            RTree::bulk_load_external(MemStore::new(), p, vec![(1, r)], BulkMethod::Hilbert, 1.0, &missing)
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
        // Empty input: an empty tree.
        let (t, rep) = RTree::bulk_load_external(
            MemStore::new(),
            p,
            Vec::<(u64, Rect)>::new(), BulkMethod::Hilbert,
            1.0,
            &tiny(dir.path()),
        )
        .unwrap();
        assert!(t.is_empty());
        assert_eq!(rep.records, 0);
        assert_eq!(leftovers(dir.path()), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]
        #[test]
        fn external_load_matches_brute_force(
            n in 0u64..1500,
            seed in any::<u64>(),
            max in 4usize..40,
            fill in 0.5f64..=1.0,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let data = items(n, seed);
            let params = TreeParams::new(IndexKind::RStar, max);
            let (t, rep) = RTree::bulk_load_external(
                MemStore::new(),
                params,
                data.clone(), BulkMethod::Hilbert,
                fill,
                &tiny(dir.path()),
            )
            .unwrap();
            prop_assert_eq!(rep.records, n);
            prop_assert_eq!(t.check().unwrap().records, n);
            for w in windows() {
                prop_assert_eq!(answers(&t, w), brute(&data, &w));
            }
            prop_assert_eq!(leftovers(dir.path()), 0);
        }
    }
}
