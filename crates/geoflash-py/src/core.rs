//! `_geoflash.Core`: the engine's [`Index`] plus the record map, with flat,
//! typed methods. The `rtree`-style API (`geoflash.Index`) is written in
//! Python on top of it (`python/geoflash/__init__.py`).
//!
//! Arrays cross the boundary as native-endian `bytes` (NumPy's
//! `tobytes()` / `frombuffer`), so the module needs no NumPy at build time.
//! Long operations (bulk loads, queries, checkpoints) run with the GIL
//! released. The index sits behind a read-write lock: queries from several
//! Python threads run in parallel, changes one at a time. No call takes
//! the GIL back while it holds the lock (a thread holding the GIL may be
//! waiting for the lock), so answers are built into Python objects after
//! the lock is released.
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use geoflash_engine::engine::records::{RecordLog, Records, Replay, RECORDS_FILE};
use geoflash_engine::engine::{
    defaults, from_wkb, Access, BatchDurability, BulkMethod, DirLock, Error, Geometry, Hit, Index,
    IndexKind, IndexOptions, IndexSpec, KeyStyle, KnnResult, OpId, OpenBatch, Predicate, Result,
    StructureSpec, MANIFEST_FILE,
};
use geoflash_engine::geom::{Point, Rect, MAX_COORD};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict};

use crate::items::FoundItems;
use crate::to_py;

/// The log of the record map grows to at most this many bytes, or the
/// snapshot's size if larger, before a commit checkpoints (snapshot and
/// engine checkpoint): the work of a commit stays what it changed, and a
/// checkpoint's snapshot is paid for by at least as many logged bytes.
const RECORD_LOG_BUDGET: u64 = 64 << 20;

/// An open index and, inside it, its record map ([`Index::records`]).
struct State {
    index: Index,
    /// The record map's own log (`pyrecords.log`) of a writable index in a
    /// directory with Python ids whose store's log does not take them
    /// ([`Index::records_in_log`]; see `geoflash_engine::engine::records`).
    log: Option<RecordLog>,
    /// Bytes of the last snapshot (`pyrecords.dat`).
    snapshot_bytes: u64,
    /// The engine's durable operation when the map's log was last synced.
    synced_op: Option<OpId>,
    writable: bool,
    /// The batch `with index.batch():` opened, until it ends.
    batch: Option<OpenBatch>,
    /// The thread that opened [`State::batch`]: changes from other threads
    /// wait for the batch to end (see [`Core::with`]), so that a change
    /// another thread makes durable by itself (`sync`) is never taken into
    /// the batch and left undurable until it commits.
    batch_thread: Option<std::thread::ThreadId>,
    /// Threads holding changes back ([`Core::hold_changes`]): changes from
    /// other threads wait until they let go, as for a batch.
    holders: Vec<std::thread::ThreadId>,
    /// Rows of `from_geoseries` in memory whose own entry was deleted
    /// ([`Core::delete_row`]): their geometry went with it, and an entry
    /// with their id is a box.
    dropped_rows: std::collections::BTreeSet<i64>,
    /// The process that created or opened the index. After `os.fork()` the
    /// child holds a copy of this state, the directory's lock included
    /// (the lock belongs to the open file, which both processes share): a
    /// write or a checkpoint from the child would overwrite what the
    /// parent writes, so only the owner writes ([`State::check_owner`]).
    owner: u32,
}

impl State {
    /// The state of an index just created or opened. Its operations take
    /// no CPU-clock readings ([`Index::set_operation_cpu_time`]): Python
    /// calls them one by one, and two readings per call were a large share
    /// of a small insert or query. Wall times are still kept; batches
    /// (`with index.batch():`) still measure their CPU time.
    fn new(mut index: Index, writable: bool, replay: Option<&Replay>) -> Result<State> {
        index.set_operation_cpu_time(false);
        let records = index.records();
        let log = match index.dir() {
            Some(dir) if writable && !records.is_identity() && !index.records_in_log() => {
                Some(match replay {
                    Some(r) if r.generation == records.generation() => {
                        RecordLog::append_to(dir, r)?
                    }
                    _ => RecordLog::create(dir, records.generation())?,
                })
            }
            _ => None,
        };
        let snapshot_bytes = index
            .dir()
            .and_then(|d| std::fs::metadata(d.join(RECORDS_FILE)).ok())
            .map_or(0, |m| m.len());
        let synced_op = index.durable_op();
        Ok(State {
            index,
            log,
            snapshot_bytes,
            synced_op,
            writable,
            batch: None,
            batch_thread: None,
            holders: Vec::new(),
            dropped_rows: std::collections::BTreeSet::new(),
            owner: crate::pid::current(),
        })
    }

    /// True when this process may write the index: it opened it, or the
    /// index lives in memory only (a forked child has its own copy of that).
    fn owned(&self) -> bool {
        self.index.dir().is_none() || crate::pid::current() == self.owner
    }

    /// Refuses a write (or checkpoint) of an index in a directory opened
    /// for writing by another process: a child made by `os.fork()`.
    fn check_owner(&self) -> Result<()> {
        if !self.writable || self.owned() {
            return Ok(());
        }
        let dir = self.index.dir().map(Path::display);
        Err(Error::invalid(format!(
            "geoflash index {} was opened for writing by process {}; a forked child (process {}) cannot \
             write it (both would write the same files): close this copy in the child (close() writes \
             nothing there) and open the index again once the parent has closed it",
            dir.map_or_else(String::new, |d| d.to_string()),
            self.owner,
            std::process::id()
        )))
    }

    /// Fails the index with `e`, the error of a change, commit or
    /// checkpoint, unless it is bad input ([`Index::fail`]). What such a
    /// failure leaves is uncertain: the engine may hold in memory an
    /// operation (or a batch) that is not durable, the record map may
    /// disagree with the tree (a key the map gave back that the tree
    /// holds), or, for a map with its own log, the engine's batch was left
    /// open so later batches would commit nothing; an interruption, which
    /// leaves the engine at an operation boundary, can leave the map
    /// changed and the tree not. Only a new open knows what is durable, so
    /// until then nothing is answered ([`State::check_failed`]).
    fn note_failure(&mut self, e: &Error) {
        self.index.fail(e);
    }

    /// Refuses every call once the index failed ([`Index::refuse_if_failed`]:
    /// the engine's error, which names the directory and the failure).
    fn check_failed(&self) -> Result<()> {
        self.index.refuse_if_failed()
    }

    /// Checkpoints the record map and the engine. A map in the store's log
    /// is checkpointed by the engine (its snapshot, then the store's
    /// checkpoint naming it). A map with its own log: that log synced, the
    /// engine's checkpoint, then the map's snapshot of the next generation
    /// and its log started over (see `geoflash_engine::engine::records`).
    /// In this order a snapshot never holds a change the tree may not
    /// have: a crash or a failure before the snapshot leaves the log with
    /// every change since the last one (deletions with their objects),
    /// which the next open replays and reconciles with the tree; after it,
    /// snapshot and tree are the same state. (The snapshot used to come
    /// first: a failed engine checkpoint then reopened deletions the tree
    /// had not kept without their objects.)
    fn checkpoint(&mut self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.check_owner()?;
        let own_log = match self.index.dir() {
            Some(dir) if !self.index.records().is_identity() && !self.index.records_in_log() => {
                Some(dir.to_path_buf())
            }
            _ => None,
        };
        if let (Some(log), Some(_)) = (&mut self.log, &own_log) {
            log.sync()?;
        }
        self.index.checkpoint()?;
        self.synced_op = self.index.durable_op();
        if let Some(dir) = own_log {
            self.log = None;
            self.snapshot_bytes = self.index.records_mut().save(&dir)?;
            self.log = Some(RecordLog::create(&dir, self.index.records().generation())?);
        }
        Ok(())
    }

    /// After a change outside a batch: syncs the map's log when the
    /// engine's log made more operations durable (its durability mode:
    /// every operation, a group, or none), so the ids of what the engine
    /// acknowledges are durable with it.
    fn after_change(&mut self) -> Result<()> {
        if self.batch.is_some() {
            return Ok(());
        }
        let durable = self.index.durable_op();
        if durable != self.synced_op {
            if let Some(log) = &mut self.log {
                log.sync()?;
            }
            self.synced_op = durable;
        }
        Ok(())
    }

    /// Commits (the end of a batch): a map in the store's log commits with
    /// the engine ([`Index::end_batch`] with [`BatchDurability::Commit`]:
    /// one log sync); a map with its own log has it synced first, and
    /// checkpoints when that log has outgrown its budget.
    fn end_batch(&mut self, batch: OpenBatch, succeeded: bool) -> Result<()> {
        if succeeded && self.writable {
            if let Some(log) = &mut self.log {
                log.sync()?;
            }
        }
        self.index.end_batch(batch, succeeded)?;
        if !succeeded {
            return Ok(());
        }
        self.synced_op = self.index.durable_op();
        let grown = self
            .log
            .as_ref()
            .is_some_and(|l| l.bytes() > RECORD_LOG_BUDGET.max(self.snapshot_bytes));
        if grown {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Moves the one live entry with user id `id` to `r`, keeping its
    /// object (see `Core::update`); the caller then runs
    /// [`State::after_change`].
    fn update(&mut self, id: i64, r: Rect) -> Result<()> {
        if !self.writable {
            return Err(Error::invalid("the index is open read-only"));
        }
        let key = match self.index.records_mut().only_live_key(id) {
            Ok(key) => key,
            Err(0) => {
                // The engine's words for an identity map (`Index::update_by_id`).
                return Err(Error::invalid(format!(
                    "object {id} is not in the index: nothing to update"
                )));
            }
            Err(n) => {
                return Err(Error::invalid(format!(
                    "id {id} has {n} entries: update(id, coordinates) moves one entry; \
                     use delete(id, coordinates) and insert for duplicate ids"
                )))
            }
        };
        if self.index.objects().is_some_and(|h| h.contains(key)) {
            // The same words as the wrapper's for an index in memory
            // (`_stores_geometry` in spatial_index.py).
            return Err(Error::invalid(format!(
                "id {id}: its entry stores an exact geometry (from_geoseries), whose box is \
                 that geometry's bounds and cannot move apart from it: delete the entry and \
                 insert it again instead (an inserted entry has no geometry and counts as its box)"
            )));
        }
        self.index.update_by_id(key, r)
    }

    /// [`Index::warm_for_updates`] of the first [`geoflash_engine::engine::WARM_BATCH`]
    /// of `ids` (user ids; those without exactly one live entry are left
    /// out, as `update` refuses them).
    fn warm_for_updates(&mut self, ids: &[i64]) {
        let records = self.index.records_mut();
        let keys: Vec<u64> = ids
            .iter()
            .take(geoflash_engine::engine::WARM_BATCH)
            .filter_map(|&id| records.only_live_key(id).ok())
            .collect();
        self.index.warm_for_updates(&keys);
    }

    /// The user ids of the records `hits` found.
    fn ids_of(&self, hits: &[Hit]) -> Result<Vec<i64>> {
        let mut ids = Vec::new();
        self.index
            .records()
            .extend_ids(hits.iter().map(|h| h.id), &mut ids)?;
        Ok(ids)
    }

    /// The key of the live entry with user id `id` and MBR exactly `rect`.
    /// Deletes the entry of record `key` with box `r` (its object too,
    /// and its record, in the store's log or the map's own).
    fn delete_key(&mut self, key: u64, r: Rect) -> Result<()> {
        if self.index.records_in_log() {
            // The REMOVE goes to the store's log with the deletion.
            return self.index.delete_logged_record(key, r);
        }
        if self.index.objects().is_some_and(|h| h.contains(key)) {
            self.index.delete_object(key)?;
        } else {
            self.index.delete(key, r)?;
        }
        self.index.records_mut().remove(key);
        if let Some(log) = self.log.as_mut() {
            log.append_remove(key)?;
        }
        self.after_change()
    }

    /// The smallest record key among `key` and the entries with user id
    /// `id` and exactly `rect`.
    fn first_key(&self, id: i64, rect: Rect, key: u64) -> Result<u64> {
        let found = self.index.query(rect, Predicate::Contains)?;
        let mut first = key;
        for h in found.hits.iter().filter(|h| h.rect == rect) {
            if h.id < first && self.index.records().id(h.id)? == id {
                first = h.id;
            }
        }
        Ok(first)
    }

    fn find(&self, id: i64, rect: Rect) -> Result<Option<u64>> {
        if let Some(key) = self.index.records().identity_key(id) {
            let found = self.index.query(rect, Predicate::Contains)?;
            return Ok(found
                .hits
                .iter()
                .find(|h| h.id == key && h.rect == rect)
                .map(|h| h.id));
        }
        let found = self.index.query(rect, Predicate::Contains)?;
        for h in &found.hits {
            if h.rect == rect && self.index.records().id(h.id)? == id {
                return Ok(Some(h.id));
            }
        }
        Ok(None)
    }
}

/// A predicate by name (shapely's reading: `predicate(window, object)`).
fn predicate(name: &str) -> Result<Predicate> {
    match name {
        "intersects" => Ok(Predicate::Intersects),
        "contains" => Ok(Predicate::Contains),
        "within" => Ok(Predicate::Within),
        _ => Err(Error::invalid(format!(
            "unknown predicate {name:?}: use intersects, contains or within"
        ))),
    }
}

/// A keyword argument's value as the text [`IndexSpec::set`] reads:
/// strings as they are, numbers in decimal, booleans as `on`/`off`, four
/// numbers (the Hilbert domain) as `minx,miny,maxx,maxy`.
fn option_text(key: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = v.downcast::<PyBool>() {
        return Ok(if b.is_true() { "on" } else { "off" }.into());
    }
    if let Ok(s) = v.extract::<String>() {
        return Ok(s);
    }
    if let Ok(n) = v.extract::<i64>() {
        return Ok(n.to_string());
    }
    if let Ok(x) = v.extract::<f64>() {
        return Ok(x.to_string());
    }
    if let Ok((a, b, c, d)) = v.extract::<(f64, f64, f64, f64)>() {
        return Ok(format!("{a},{b},{c},{d}"));
    }
    Err(user_error(format!(
        "option {key}: expected a string, a number or four numbers, not {}",
        v.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    )))
}

/// Index options from the Python keyword arguments (`None` values mean the
/// default), through the library's one front door ([`IndexSpec`]), which
/// checks every combination as the command line and the workbench do. An
/// index in this process only (`in_memory`) takes the defaults of one
/// (`geoflash::defaults::MEMORY_*`, the `mem:` device) where the engine
/// would take those of an index directory; the engine applies them where
/// they apply (a FOR-tree or a grid file keeps the plain store).
fn parse_options(opts: &Bound<'_, PyDict>, in_memory: bool) -> PyResult<IndexOptions> {
    let mut spec = IndexSpec::new(KeyStyle::Key);
    if in_memory {
        for (k, v) in [
            ("store", defaults::MEMORY_STORE),
            ("buffer", defaults::MEMORY_BUFFER),
            ("device", defaults::MEMORY_DEVICE),
        ] {
            spec.set_default(k, v).map_err(|e| to_py(e.into()))?;
        }
    }
    for (k, v) in opts.iter() {
        let key: String = k.extract()?;
        if v.is_none() {
            continue;
        }
        let text = option_text(&key, &v)?;
        spec.set(&key, &text).map_err(|e| to_py(e.into()))?;
    }
    spec.options().map_err(|e| to_py(e.into()))
}

/// Native-endian `f64` boxes (`minx, miny, maxx, maxy` per row) as
/// rectangles; query windows (`windows`) are clamped as [`window`] does.
pub(crate) fn boxes(bytes: &[u8], windows: bool) -> Result<Vec<Rect>> {
    box_rows(bytes)?
        .enumerate()
        .map(|(i, row)| rect_of_row(i, row, windows))
        .collect()
}

/// The 32-byte rows of a box buffer.
fn box_rows(bytes: &[u8]) -> Result<std::slice::ChunksExact<'_, u8>> {
    let rows = bytes.chunks_exact(32);
    if !rows.remainder().is_empty() {
        return Err(Error::invalid(format!(
            "box buffer of {} bytes is not a whole number of rows of four float64",
            bytes.len()
        )));
    }
    Ok(rows)
}

/// Row `i` of a box buffer (see [`boxes`]) as a rectangle.
fn rect_of_row(i: usize, row: &[u8], windows: bool) -> Result<Rect> {
    let mut c = [0f64; 4];
    for (v, b) in c.iter_mut().zip(row.chunks_exact(8)) {
        *v = f64_of(b);
        if windows {
            *v = clamp(*v);
        }
    }
    Rect::new(c[0], c[1], c[2], c[3]).map_err(|e| match e {
        // the message once prefixed "invalid input: "
        Error::InvalidInput(m) => Error::invalid(format!("row {i}: {m}")),
        e => e,
    })
}

/// A native-endian `f64` of 8 bytes.
fn f64_of(b: &[u8]) -> f64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    f64::from_ne_bytes(a)
}

/// A native-endian `i64` of 8 bytes.
fn i64_of(b: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    i64::from_ne_bytes(a)
}

/// Native-endian `i64` values.
fn int64s(bytes: &[u8]) -> Result<Vec<i64>> {
    Ok(int64_rows(bytes)?.map(i64_of).collect())
}

/// The 8-byte values of an `i64` buffer.
fn int64_rows(bytes: &[u8]) -> Result<std::slice::ChunksExact<'_, u8>> {
    let rows = bytes.chunks_exact(8);
    if !rows.remainder().is_empty() {
        return Err(Error::invalid(format!(
            "id buffer of {} bytes is not a whole number of int64",
            bytes.len()
        )));
    }
    Ok(rows)
}

/// The `k` entries nearest to `q` (and with `ties` those at the k-th
/// distance): the engine's best-first search (batched reads) with
/// rtree's distances; a point goes through the index front end, which
/// serves every index kind.
pub(crate) fn nearest_of(index: &Index, q: Rect, k: usize, ties: bool) -> Result<KnnResult> {
    if q.is_point() {
        index.nearest(Point::new(q.min_x(), q.min_y())?, k, ties)
    } else {
        index.nearest_to(q, k, ties)
    }
}

/// Windows of a batched query from which it runs in shares, one thread
/// each: below this a thread costs more than the share saves.
const PARALLEL_WINDOWS: usize = 2_048;

/// The user ids of the entries related to each of `windows` by `p`, as
/// (offsets, `windows.len() + 1` values; ids, window `i`'s at
/// `offsets[i]..offsets[i+1]`), each window's sorted by id when `sorted`
/// (else in traversal order). One batched traversal of the tree
/// ([`Index::query_batch_flat`]) per share of consecutive windows, the
/// shares on every core.
pub(crate) fn batch_ids(
    index: &Index,
    windows: &[Rect],
    p: Predicate,
    sorted: bool,
) -> Result<(Vec<i64>, Vec<i64>)> {
    let share = |ws: &[Rect]| -> Result<(Vec<i64>, Vec<i64>)> {
        let found = index.query_batch_flat(ws, p)?;
        let mut ids: Vec<i64> = Vec::with_capacity(found.keys.len());
        index
            .records()
            .extend_ids(found.keys.iter().copied(), &mut ids)?;
        let offsets: Vec<i64> = found.offsets.iter().map(|&o| o as i64).collect();
        if sorted {
            for w in found.offsets.windows(2) {
                if let Some(run) = ids.get_mut(w[0]..w[1]) {
                    run.sort_unstable();
                }
            }
        }
        Ok((offsets, ids))
    };
    let threads = geoflash_engine::defaults::cores()
        .min(windows.len() / PARALLEL_WINDOWS)
        .max(1);
    if threads == 1 {
        return share(windows);
    }
    let size = windows.len().div_ceil(threads);
    let parts: Vec<Result<(Vec<i64>, Vec<i64>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = windows
            .chunks(size)
            .map(|ws| s.spawn(move || share(ws)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("a query thread panicked")))
            })
            .collect()
    });
    let mut offsets: Vec<i64> = vec![0];
    let mut ids: Vec<i64> = Vec::new();
    for part in parts {
        let (o, i) = part?;
        let base = ids.len() as i64;
        offsets.extend(o.iter().skip(1).map(|x| x + base));
        ids.extend(i);
    }
    Ok((offsets, ids))
}

/// A new `bytearray` of `values` in native byte order, written in place:
/// NumPy's `frombuffer` makes a writable array of it without a copy.
/// The most ids [`Core::query`] returns as a Python list (40 bytes an id
/// with its `int`): a larger answer is a buffer of 8 bytes an id, whose
/// iteration in Python makes an `int` at each step (a `memoryview`
/// yields about 20 ns an id): small answers, the most frequent, keep the
/// list's speed, and a large one costs a few bytes a record.
const LISTED_IDS: usize = 4096;

fn ne_bytearray<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    values: &[T],
    f: impl Fn(T) -> [u8; N],
) -> PyResult<Bound<'py, PyByteArray>> {
    PyByteArray::new_bound_with(py, values.len() * N, |buf| {
        for (out, v) in buf.chunks_exact_mut(N).zip(values) {
            out.copy_from_slice(&f(*v));
        }
        Ok(())
    })
}

fn ne_bytes<T: Copy, const N: usize>(values: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * N);
    for v in values {
        out.extend_from_slice(&f(*v));
    }
    out
}

fn rect(minx: f64, miny: f64, maxx: f64, maxy: f64) -> PyResult<Rect> {
    Rect::new(minx, miny, maxx, maxy).map_err(to_py)
}

/// The 2 or 4 real numbers of `items` (and how many), None for another
/// count or an item that is not a real number.
fn two_or_four<'py>(
    items: impl ExactSizeIterator<Item = Bound<'py, PyAny>>,
) -> Option<([f64; 4], usize)> {
    let n = items.len();
    if !matches!(n, 2 | 4) {
        return None;
    }
    let mut c = [0f64; 4];
    for (slot, v) in c.iter_mut().zip(items) {
        *slot = v.extract::<f64>().ok()?;
    }
    Some((c, n))
}

/// `coordinates` as `(minx, miny, maxx, maxy)` when it is a list or tuple
/// (exactly) of 2 (a point) or 4 real numbers in the index's order
/// (`interleaved` or not); None for anything else, which the Python layer
/// then reads or refuses with a precise error. Real numbers are what
/// `PyFloat_AsDouble` takes (`float`, `int`, NumPy numbers, anything with
/// `__float__` or `__index__`), never a `str` or `bytes` that `float()`
/// would parse.
fn ordered_box(coordinates: &Bound<'_, PyAny>, interleaved: bool) -> Option<(f64, f64, f64, f64)> {
    use pyo3::types::{PyList, PyTuple};
    let numbers = if let Ok(t) = coordinates.downcast_exact::<PyTuple>() {
        two_or_four(t.iter())
    } else if let Ok(l) = coordinates.downcast_exact::<PyList>() {
        two_or_four(l.iter())
    } else {
        None
    };
    let ([a, b, x, y], n) = numbers?;
    Some(match (n, interleaved) {
        (2, _) => (a, b, a, b),
        (_, true) => (a, b, x, y),
        (_, false) => (a, x, b, y),
    })
}

/// [`ordered_box`] for the Python layer (`Index._box`'s fast path, on the
/// way of every query and of an insert with an object): one call instead
/// of a Python loop over the coordinates.
#[pyfunction]
pub(crate) fn box_of(
    coordinates: &Bound<'_, PyAny>,
    interleaved: bool,
) -> Option<(f64, f64, f64, f64)> {
    ordered_box(coordinates, interleaved)
}

/// A coordinate of a query window in the engine's range: beyond it
/// (infinities included) it is clamped to ±[`MAX_COORD`], which changes no
/// answer since every stored box lies inside; NaN stays NaN (and is refused).
pub(crate) fn clamp(v: f64) -> f64 {
    v.clamp(-MAX_COORD, MAX_COORD)
}

/// A query window, which may be unbounded (`(-inf, -inf, inf, inf)` finds
/// everything); NaN and inverted windows are refused.
fn window(minx: f64, miny: f64, maxx: f64, maxy: f64) -> PyResult<Rect> {
    rect(clamp(minx), clamp(miny), clamp(maxx), clamp(maxy))
}

fn bulk_method(name: &str) -> Result<BulkMethod> {
    BulkMethod::from_str(name)
}

/// Attaches the id map of a new index and saves it in its directory
/// while the index is still in its staging directory (`Index::build`,
/// `bulk_load_then`, `bulk_load_objects_then`), so that a directory is
/// never published without its map: in the store's log when the store
/// takes it (the engine's checkpoint writes the first snapshot), else as a
/// snapshot for the map's own log.
fn save_records(index: &mut Index, mut records: Records) -> Result<()> {
    if index.can_log_records() {
        index.log_records_in_store(records)?;
        return Ok(());
    }
    if let Some(dir) = index.dir() {
        records.save(dir)?;
    }
    index.set_records(records);
    Ok(())
}

/// Refuses a new index in directory `dir` on a device that lives only in
/// this process (`mem:`, `hddsim:`, a `hybrid:` with such a tier): its
/// directory would hold a manifest and the id map but not the nodes, so
/// every later open fails ("lives only in its process") after this process
/// acknowledged its batches and its `close()`. The command line's `build`
/// refuses the same devices (`Index::device_outlives_process`).
fn refuse_process_only_device(dir: &Path, opts: &IndexOptions) -> Result<()> {
    if Index::device_outlives_process(&opts.device) {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "device \"{}\" lives only in its process: the index directory {} would hold an index \
         no later open can read; use a device that keeps its state in the index directory \
         (file, the default with a path; file:PATH; flashsim:…; a hybrid of those), \
         or no path for an index in this process",
        opts.device,
        dir.display()
    )))
}

/// A bad-input error (`geoflash.RTreeError`) with message `msg`.
fn user_error(msg: impl Into<String>) -> PyErr {
    to_py(Error::invalid(msg))
}

fn poisoned() -> Error {
    Error::invalid("the index is unusable: an earlier call panicked")
}

fn closed() -> Error {
    Error::invalid("operation on a closed index")
}

/// The entries a query found, as [`Core::query_keys`] gives them: record
/// keys, user ids and boxes (`minx, miny, maxx, maxy` each).
struct KeyedHits {
    keys: Vec<u64>,
    ids: Vec<i64>,
    rects: Vec<f64>,
}

impl KeyedHits {
    /// The entries related to `r` by `p`.
    fn of(st: &State, r: Rect, p: Predicate) -> Result<KeyedHits> {
        let found = st.index.query(r, p)?;
        Ok(KeyedHits {
            keys: found.hits.iter().map(|h| h.id).collect(),
            ids: st.ids_of(&found.hits)?,
            rects: found
                .hits
                .iter()
                .flat_map(|h| {
                    [
                        h.rect.min_x(),
                        h.rect.min_y(),
                        h.rect.max_x(),
                        h.rect.max_y(),
                    ]
                })
                .collect(),
        })
    }

    /// (keys as native uint64, ids as native int64, boxes as native float64 rows).
    #[allow(clippy::type_complexity)]
    fn into_py(
        self,
        py: Python<'_>,
    ) -> (Bound<'_, PyBytes>, Bound<'_, PyBytes>, Bound<'_, PyBytes>) {
        (
            PyBytes::new_bound(py, &ne_bytes(&self.keys, u64::to_ne_bytes)),
            PyBytes::new_bound(py, &ne_bytes(&self.ids, i64::to_ne_bytes)),
            PyBytes::new_bound(py, &ne_bytes(&self.rects, f64::to_ne_bytes)),
        )
    }
}

/// The engine side of `geoflash.Index` (internal: use `geoflash.Index`).
#[pyclass(module = "geoflash._geoflash")]
pub struct Core {
    inner: RwLock<Option<State>>,
    path: Option<PathBuf>,
    /// How many changes ([`Core::change`]) ran, and [`Core::note_change`]
    /// calls: Python's caches of the index's contents (the exact
    /// geometries) are valid while it stays what it was when they were
    /// made. Changed only under the write lock, so under a read lock it is
    /// the count of the state read.
    changes: AtomicU64,
}

impl Core {
    fn new(state: State) -> Core {
        Core {
            path: state.index.dir().map(Path::to_path_buf),
            inner: RwLock::new(Some(state)),
            changes: AtomicU64::new(0),
        }
    }

    /// [`Core::delete`], and with `row` [`Core::delete_row`].
    fn delete_entry(&self, id: i64, b: [f64; 4], row: bool) -> PyResult<bool> {
        window(b[0], b[1], b[2], b[3])?;
        let exact = Rect::new(b[0], b[1], b[2], b[3]);
        self.change(|st| {
            if !st.writable {
                return Err(Error::invalid("the index is open read-only"));
            }
            let Ok(r) = exact else {
                return Ok(false);
            };
            let Some(key) = st.find(id, r)? else {
                return Ok(false);
            };
            let own = if row { st.first_key(id, r, key)? } else { key };
            st.delete_key(key, r)?;
            if row && own == key {
                st.dropped_rows.insert(id);
            }
            Ok(true)
        })
    }

    /// [`Core::changes`] now (under a read lock: the count of the state read).
    pub(crate) fn changes_now(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    fn lock(&self) -> Result<RwLockWriteGuard<'_, Option<State>>> {
        self.inner.write().map_err(|_| poisoned())
    }

    fn lock_read(&self) -> Result<RwLockReadGuard<'_, Option<State>>> {
        self.inner.read().map_err(|_| poisoned())
    }

    /// Runs `f`, a change, on the open state, exclusively; refused in a
    /// forked child of the process that opened the index for writing
    /// ([`State::check_owner`]). Errors become Python exceptions after the
    /// lock is released ([`to_py`] takes the GIL).
    ///
    /// While another thread's batch is open, waits for it to end (the GIL
    /// released): a batch's changes are durable together at its end, so a
    /// change of this thread must not be made inside it.
    fn with<R>(&self, f: impl FnOnce(&mut State) -> Result<R>) -> PyResult<R> {
        self.exclusive(false, f)
    }

    /// [`Core::with`] of a change to the entries (an insert, a delete, an
    /// update), counted in [`Core::changes`] whether it succeeds or not (a
    /// failed one may have applied part of its work). Batches and
    /// checkpoints change no entry and are not counted: Python's cache of
    /// the exact geometries stays valid across them.
    fn change<R>(&self, f: impl FnOnce(&mut State) -> Result<R>) -> PyResult<R> {
        self.exclusive(true, f)
    }

    /// [`Core::with`], counting the change when `counts`.
    fn exclusive<R>(&self, counts: bool, f: impl FnOnce(&mut State) -> Result<R>) -> PyResult<R> {
        let me = std::thread::current().id();
        let mut f = Some(f);
        let mut run = || loop {
            let mut guard = self.lock()?;
            let st = guard.as_mut().ok_or_else(closed)?;
            st.check_owner()?;
            st.check_failed()?;
            if st.batch_thread.is_some_and(|t| t != me) || st.holders.iter().any(|&t| t != me) {
                drop(guard);
                Python::with_gil(|py| {
                    py.allow_threads(|| std::thread::sleep(std::time::Duration::from_micros(200)))
                });
                continue;
            }
            let Some(f) = f.take() else {
                return Err(Error::invalid("internal: a change ran twice"));
            };
            let out = f(st).inspect_err(|e| st.note_failure(e));
            if counts {
                // still under the write lock: readers see the count of their state
                self.changes.fetch_add(1, Ordering::AcqRel);
            }
            return out;
        };
        run().map_err(to_py)
    }

    /// Runs `f` on the open state, shared with other readers; refused once
    /// the index failed ([`State::check_failed`]).
    fn read_state<R>(&self, f: impl FnOnce(&State) -> Result<R>) -> Result<R> {
        let guard = self.lock_read()?;
        let st = guard.as_ref().ok_or_else(closed)?;
        st.check_failed()?;
        f(st)
    }

    /// [`Core::read`] of what describes the index rather than its data
    /// (manifest, counters, access), served after a failure too.
    fn read_meta<R>(&self, f: impl FnOnce(&State) -> Result<R>) -> PyResult<R> {
        let guard = self.lock_read().map_err(to_py)?;
        let r = match guard.as_ref() {
            Some(st) => f(st),
            None => Err(closed()),
        };
        drop(guard);
        r.map_err(to_py)
    }

    /// [`Core::read_state`] with its error as a Python exception.
    fn read<R>(&self, f: impl FnOnce(&State) -> Result<R>) -> PyResult<R> {
        self.read_state(f).map_err(to_py)
    }

    /// [`Core::read`] with the GIL released.
    fn read_nogil<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&State) -> Result<R> + Send,
    ) -> PyResult<R> {
        py.allow_threads(|| self.read_state(f)).map_err(to_py)
    }

    /// [`Core::read_nogil`] of the index alone: for the searches of other
    /// modules (`nearest.rs`), which need no more of the state.
    pub(crate) fn read_index_nogil<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Index) -> Result<R> + Send,
    ) -> PyResult<R> {
        self.read_nogil(py, |st| f(&st.index))
    }
}

#[pymethods]
impl Core {
    /// A new, empty index in `path` (`None`: in this process only).
    #[staticmethod]
    #[pyo3(signature = (path, options))]
    fn create(
        py: Python<'_>,
        path: Option<PathBuf>,
        options: &Bound<'_, PyDict>,
    ) -> PyResult<Core> {
        let opts = parse_options(options, path.is_none())?;
        if let Some(dir) = &path {
            refuse_process_only_device(dir, &opts).map_err(to_py)?;
        }
        let hilbert =
            matches!(opts.structure, StructureSpec::Tree(t) if t.kind == IndexKind::Hilbert);
        if hilbert && opts.hilbert_domain.is_none() {
            return Err(user_error(
                "kind=\"hilbert\" built by insertion needs hilbert_domain=(minx, miny, maxx, maxy), \
                 the extent mapped onto the Hilbert curve (objects outside it are clamped); \
                 a bulk load (a stream, from_arrays, from_geoseries) takes the data's extent",
            ));
        }
        if opts.needs_domain() && opts.hilbert_domain.is_none() {
            return Err(user_error(format!(
                "kind=\"{}\" built by insertion needs hilbert_domain=(minx, miny, maxx, maxy), \
                 the domain every point lies in",
                opts.kind_name()
            )));
        }
        let state = py
            .allow_threads(|| -> Result<State> {
                // The map goes in before the index is published (see
                // `save_records`).
                let index = match &path {
                    Some(dir) => {
                        Index::build(dir, &opts, |index| save_records(index, Records::new()))?.0
                    }
                    None => {
                        let mut index = Index::create_temporary(&opts)?;
                        save_records(&mut index, Records::new())?;
                        index
                    }
                };
                State::new(index, true, None)
            })
            .map_err(to_py)?;
        Ok(Core::new(state))
    }

    /// A new index of `rows` entries given in `chunks`, an iterable of
    /// `(ids, boxes)` byte strings (native int64; native float64, four per
    /// row), bulk-loaded by `method` ("str" or "hilbert") at fill factor
    /// `fill`; `objs` are the pickled objects of the rows. Chunks rather
    /// than two whole buffers: a chunk's bytes are freed before the next is
    /// made, so the copies out of NumPy reuse the same memory instead of
    /// faulting in fresh pages for the whole input (measured: a tenth of an
    /// in-memory load of a million boxes). `rows` sizes the input once; a
    /// wrong value costs only reallocations.
    #[staticmethod]
    #[pyo3(signature = (path, options, rows, chunks, objs=None, method="str", fill=1.0))]
    #[allow(clippy::too_many_arguments)]
    fn bulk(
        py: Python<'_>,
        path: Option<PathBuf>,
        options: &Bound<'_, PyDict>,
        rows: usize,
        chunks: &Bound<'_, PyAny>,
        objs: Option<Vec<Option<Vec<u8>>>>,
        method: &str,
        fill: f64,
    ) -> PyResult<Core> {
        let opts = parse_options(options, path.is_none())?;
        if let Some(dir) = &path {
            refuse_process_only_device(dir, &opts).map_err(to_py)?;
        }
        let method = bulk_method(method).map_err(to_py)?;
        let mut records = Records::new();
        let mut objs = objs.map(Vec::into_iter);
        let mut items = Vec::with_capacity(rows.min(1 << 28));
        for chunk in chunks.iter()? {
            let (ids, boxes): (Bound<'_, PyBytes>, Bound<'_, PyBytes>) = chunk?.extract()?;
            let (ids, boxes) = (ids.as_bytes(), boxes.as_bytes());
            // One pass from the buffers to the items, without
            // intermediate vectors of ids and rectangles.
            py.allow_threads(|| -> Result<()> {
                let (ids, rows) = (int64_rows(ids)?, box_rows(boxes)?);
                if ids.len() != rows.len() {
                    return Err(Error::invalid(format!(
                        "{} ids for {} boxes",
                        ids.len(),
                        rows.len()
                    )));
                }
                for (id, row) in ids.zip(rows) {
                    let r = rect_of_row(items.len(), row, false)?;
                    let obj = objs.as_mut().and_then(|o| o.next()).flatten();
                    items.push((records.add(i64_of(id), obj)?, r));
                }
                Ok(())
            })
            .map_err(to_py)?;
        }
        let state = py
            .allow_threads(|| -> Result<State> {
                let index = match &path {
                    Some(dir) => Index::bulk_load_then(dir, &opts, items, method, fill, |index| {
                        save_records(index, records)
                    })?,
                    None => {
                        let mut index = Index::bulk_load(None, &opts, items, method, fill)?;
                        save_records(&mut index, records)?;
                        index
                    }
                };
                State::new(index, true, None)
            })
            .map_err(to_py)?;
        Ok(Core::new(state))
    }

    /// A new index in directory `path` holding geometries given as WKB,
    /// with user ids `ids` (native int64): MBRs bulk-loaded into the tree,
    /// the geometries in the object heap (`objects.dat`).
    #[staticmethod]
    #[pyo3(signature = (path, options, ids, wkbs, method="str", fill=1.0))]
    fn bulk_geometries(
        py: Python<'_>,
        path: PathBuf,
        options: &Bound<'_, PyDict>,
        ids: &[u8],
        wkbs: Vec<Bound<'_, PyBytes>>,
        method: &str,
        fill: f64,
    ) -> PyResult<Core> {
        let opts = parse_options(options, false)?;
        refuse_process_only_device(&path, &opts).map_err(to_py)?;
        let method = bulk_method(method).map_err(to_py)?;
        let wkbs: Vec<Vec<u8>> = wkbs.iter().map(|b| b.as_bytes().to_vec()).collect();
        let state = py
            .allow_threads(|| -> Result<State> {
                let ids = int64s(ids)?;
                if ids.len() != wkbs.len() {
                    return Err(Error::invalid(format!(
                        "{} ids for {} geometries",
                        ids.len(),
                        wkbs.len()
                    )));
                }
                let mut records = Records::new();
                let mut objects: Vec<(u64, Geometry)> = Vec::with_capacity(ids.len());
                for (i, (id, w)) in ids.into_iter().zip(&wkbs).enumerate() {
                    let g = from_wkb(w, &format!("geometry {i}"))?;
                    objects.push((records.add(id, None)?, g));
                }
                let index =
                    Index::bulk_load_objects_then(&path, &opts, &objects, method, fill, |index| {
                        save_records(index, records)
                    })?;
                State::new(index, true, None)
            })
            .map_err(to_py)?;
        Ok(Core::new(state))
    }

    /// Opens the index in directory `path` (for writing unless `readonly`).
    #[staticmethod]
    #[pyo3(signature = (path, readonly=false))]
    fn open(py: Python<'_>, path: PathBuf, readonly: bool) -> PyResult<Core> {
        let access = if readonly {
            Access::Read
        } else {
            Access::Write
        };
        let (state, warning) = py
            .allow_threads(|| -> Result<(State, Option<String>)> {
                let mut index = Index::open(&path, access)?;
                // This package is the front end whose map keys the index.
                index.claim_records();
                // A map in the store's log comes back with the tree, the
                // same prefix of operations (the engine read it at open);
                // a map with its own log is read here.
                let in_log = index.records_in_log();
                let replay = if in_log {
                    None
                } else {
                    let (records, replay) = Records::load(&path)?;
                    index.set_records(records);
                    replay
                };
                let mut warning = None;
                // After a crash the tree decides which keys are live when
                // the map keeps its own log: that log holds changes since
                // its snapshot (a clean close leaves it empty), restart
                // replayed operations, the rollback journal undid pages;
                // and whenever the counts differ.
                let logged = replay.as_ref().is_some_and(|r| !r.changes.is_empty() || r.torn > 0);
                let recovered = !in_log
                    && (index
                        .restart_report()
                        .is_some_and(|r| r.recovered_anything())
                        || index.rolled_back_pages() > 0);
                let (index, changed) = match index.records().live() {
                    Some(live) if logged || recovered || index.len() != live => {
                        let tree = index.len();
                        let mut records = index.swap_records(Records::identity());
                        let r = crate::stale::reconcile(index, &mut records, !readonly)?;
                        let mut index = r.index;
                        index.swap_records(records);
                        if r.unknown_entries + r.missing_keys + r.revived_keys > 0 {
                            warning = Some(format!(
                                "{}: the id map ({RECORDS_FILE} and its log) and the tree ({tree} entries, the map \
                                 knew {live}) disagreed after a crash; the tree decides: {} entries whose ids the map \
                                 never logged dropped (operations after the last commit), {} ids the tree no longer \
                                 held marked deleted, {} it still held brought back{}",
                                path.display(),
                                r.unknown_entries,
                                r.missing_keys,
                                r.revived_keys,
                                if readonly {
                                    " (read-only: served from a copy in memory; open it for writing to repair it on disk)"
                                } else {
                                    " (repaired on disk)"
                                }
                            ));
                        }
                        (index, true)
                    }
                    _ => (index, false),
                };
                let records = index.records();
                let upgrade = !in_log && records.read_version() < 2 && !records.is_identity();
                let mut st = State::new(index, !readonly, replay.as_ref())?;
                if !readonly && (changed || upgrade) {
                    // The repair, or the snapshot's new format (so that an
                    // older build refuses the index instead of ignoring the log).
                    st.checkpoint()?;
                }
                Ok((st, warning))
            })
            .map_err(to_py)?;
        if let Some(w) = warning {
            let category = py.get_type_bound::<pyo3::exceptions::PyRuntimeWarning>();
            PyErr::warn_bound(py, category.as_any(), &w, 1)?;
        }
        Ok(Core::new(state))
    }

    /// Removes the index in directory `path` with everything in it (what
    /// `overwrite=True` replaces). The directory must hold an index that no
    /// process has open: the index's write lock is taken first.
    #[staticmethod]
    fn destroy(py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.allow_threads(|| -> Result<()> {
            if !path.join(MANIFEST_FILE).is_file() {
                return Err(Error::invalid(format!(
                    "{} holds no index to overwrite",
                    path.display()
                )));
            }
            let lock = DirLock::acquire(&path, Access::Write)?;
            std::fs::remove_dir_all(&path).map_err(|source| Error::Io {
                path: path.clone(),
                page: None,
                source,
            })?;
            drop(lock);
            Ok(())
        })
        .map_err(to_py)
    }

    /// Inserts entry `id` with the box and optional pickled object.
    #[pyo3(signature = (id, minx, miny, maxx, maxy, obj=None))]
    fn insert(
        &self,
        id: i64,
        minx: f64,
        miny: f64,
        maxx: f64,
        maxy: f64,
        obj: Option<Vec<u8>>,
    ) -> PyResult<()> {
        let r = rect(minx, miny, maxx, maxy)?;
        self.change(|st| {
            if !st.writable {
                return Err(Error::invalid("the index is open read-only"));
            }
            if st.index.records_in_log() {
                // The ADD goes to the store's log with the insertion.
                st.index.insert_logged_record(id, r, obj)?;
                return Ok(());
            }
            let key = st.index.records_mut().add(id, obj)?;
            let Some(log) = st.log.as_mut() else {
                if let Err(e) = st.index.insert(key, r) {
                    st.index.records_mut().undo_add(key);
                    return Err(e);
                }
                return Ok(());
            };
            // The ADD before the engine's insert (see the records log's protocol).
            if let Err(e) = log.append_add(key, id, st.index.records().obj(key)) {
                st.index.records_mut().undo_add(key);
                return Err(e);
            }
            if let Err(e) = st.index.insert(key, r) {
                // The key is in the log: it stays allocated, deleted.
                st.index.records_mut().remove(key);
                let _ = log.append_remove(key);
                return Err(e);
            }
            st.after_change()
        })
    }

    /// The common case of the wrapper's `insert` in one call: `id` an
    /// integer (anything with `__index__`), `coordinates` a list or tuple
    /// of 2 (a point) or 4 real numbers in the index's order (`interleaved`
    /// or not), no object. Returns False, having done nothing, for any
    /// other input, which the wrapper then checks and reports as before.
    fn insert_plain(
        &self,
        id: &Bound<'_, PyAny>,
        coordinates: &Bound<'_, PyAny>,
        interleaved: bool,
    ) -> PyResult<bool> {
        let Ok(id) = id.extract::<i64>() else {
            return Ok(false);
        };
        let Some((minx, miny, maxx, maxy)) = ordered_box(coordinates, interleaved) else {
            return Ok(false);
        };
        self.insert(id, minx, miny, maxx, maxy, None)?;
        Ok(true)
    }

    /// Deletes one entry with user id `id` and exactly this box; False if
    /// there is none (as for a box no entry can have: infinite or beyond the
    /// engine's range; NaN and inverted boxes are refused).
    fn delete(&self, id: i64, minx: f64, miny: f64, maxx: f64, maxy: f64) -> PyResult<bool> {
        self.delete_entry(id, [minx, miny, maxx, maxy], false)
    }

    /// [`Core::delete`] of an entry of row `id` of `from_geoseries` in
    /// memory, whose box is the row's geometry's: when the entry deleted
    /// is the row's own (of the entries with that id and box, the one of
    /// the smallest key: the others are duplicates inserted later), the
    /// row is marked as no longer holding its geometry
    /// ([`State::dropped_rows`]), in the same change, so that no reader
    /// sees one without the other.
    fn delete_row(&self, id: i64, minx: f64, miny: f64, maxx: f64, maxy: f64) -> PyResult<bool> {
        self.delete_entry(id, [minx, miny, maxx, maxy], true)
    }

    /// Moves the one live entry with user id `id` to this box, keeping its
    /// object: no old box needed (the engine's id → rectangle locator), and
    /// the entry rewritten in its leaf when the box stays inside it. An
    /// error for an id with no entry or with several (duplicates), and for
    /// an entry with a geometry in the object heap (its box is the
    /// geometry's own).
    fn update(&self, id: i64, minx: f64, miny: f64, maxx: f64, maxy: f64) -> PyResult<()> {
        let r = rect(minx, miny, maxx, maxy)?;
        self.change(|st| {
            st.update(id, r)?;
            st.after_change()
        })
    }

    /// [`Core::update`] of each row in turn, in one call with the GIL
    /// released: `ids` native int64, `boxes` native float64 rows (`minx,
    /// miny, maxx, maxy`), as many of each. Each row is one operation, as
    /// in a loop of `update`: an error at a row (a bad box, an unknown or
    /// duplicate id) leaves the rows before it applied and the rest not,
    /// and names the row. Returns the number of rows applied.
    fn update_batch(&self, py: Python<'_>, ids: &[u8], boxes: &[u8]) -> PyResult<u64> {
        py.allow_threads(|| {
            self.change(|st| {
                let (ids, rows) = (int64_rows(ids)?, box_rows(boxes)?);
                if ids.len() != rows.len() {
                    return Err(Error::invalid(format!(
                        "{} ids for {} boxes",
                        ids.len(),
                        rows.len()
                    )));
                }
                let mut applied = 0u64;
                let ids: Vec<i64> = ids.map(i64_of).collect();
                let moved = || -> Result<()> {
                    for (i, (&id, row)) in ids.iter().zip(rows).enumerate() {
                        if i.is_multiple_of(geoflash_engine::engine::WARM_BATCH) {
                            st.warm_for_updates(ids.get(i..).unwrap_or_default());
                        }
                        let r = rect_of_row(i, row, false)?;
                        st.update(id, r).map_err(|e| match e {
                            Error::InvalidInput(m) => Error::invalid(format!("row {i}: {m}")),
                            e => e,
                        })?;
                        applied += 1;
                    }
                    Ok(())
                };
                let done = moved();
                st.after_change()?;
                done.map(|()| applied)
            })
        })
    }

    /// User ids of the entries related to the box by `predicate`: a list
    /// of at most [`LISTED_IDS`], else a `bytearray` of native int64 (8
    /// bytes an entry found, held until the Python iterator over them is
    /// dropped: it makes each `int` as it yields).
    fn query(
        &self,
        py: Python<'_>,
        minx: f64,
        miny: f64,
        maxx: f64,
        maxy: f64,
        predicate: &str,
    ) -> PyResult<PyObject> {
        let (r, p) = (
            window(minx, miny, maxx, maxy)?,
            self::predicate(predicate).map_err(to_py)?,
        );
        let ids = self.read_nogil(py, |st| {
            // The keys alone (8 bytes a record, not a hit's 40), turned
            // into user ids where they are.
            let found = st.index.query_keys(r, p)?;
            st.index.records().into_ids(found.keys)
        })?;
        if ids.len() <= LISTED_IDS {
            return Ok(ids.into_py(py));
        }
        Ok(ne_bytearray(py, &ids, i64::to_ne_bytes)?
            .into_any()
            .unbind())
    }

    /// Number of entries related to the box by `predicate`.
    fn count(
        &self,
        py: Python<'_>,
        minx: f64,
        miny: f64,
        maxx: f64,
        maxy: f64,
        predicate: &str,
    ) -> PyResult<u64> {
        let (r, p) = (
            window(minx, miny, maxx, maxy)?,
            self::predicate(predicate).map_err(to_py)?,
        );
        self.read_nogil(py, |st| st.index.count(r, p))
    }

    /// (record keys as native uint64, user ids as native int64, boxes as
    /// native float64 rows) of the entries related to the box by `predicate`.
    #[allow(clippy::type_complexity)]
    fn query_keys<'py>(
        &self,
        py: Python<'py>,
        minx: f64,
        miny: f64,
        maxx: f64,
        maxy: f64,
        predicate: &str,
    ) -> PyResult<(
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
    )> {
        let (r, p) = (
            window(minx, miny, maxx, maxy)?,
            self::predicate(predicate).map_err(to_py)?,
        );
        let hits = self.read_nogil(py, |st| KeyedHits::of(st, r, p))?;
        Ok(hits.into_py(py))
    }

    /// (user id, pickled object or None, box) of the entries related to
    /// the box, as an iterator that makes each as it is yielded.
    fn query_items(
        &self,
        py: Python<'_>,
        minx: f64,
        miny: f64,
        maxx: f64,
        maxy: f64,
        predicate: &str,
    ) -> PyResult<FoundItems> {
        let (r, p) = (
            window(minx, miny, maxx, maxy)?,
            self::predicate(predicate).map_err(to_py)?,
        );
        self.read_nogil(py, |st| {
            FoundItems::of(st.index.records(), &st.index.query(r, p)?.hits)
        })
    }

    /// Batched range queries: `boxes` as native float64 rows; returns
    /// (offsets as native int64, len(boxes)+1; user ids as native int64).
    #[pyo3(signature = (boxes, predicate="intersects"))]
    fn query_batch<'py>(
        &self,
        py: Python<'py>,
        boxes: &[u8],
        predicate: &str,
    ) -> PyResult<(Bound<'py, PyByteArray>, Bound<'py, PyByteArray>)> {
        let p = self::predicate(predicate).map_err(to_py)?;
        let (offsets, ids) = self.read_nogil(py, |st| {
            let windows = self::boxes(boxes, true)?;
            batch_ids(&st.index, &windows, p, false)
        })?;
        Ok((
            ne_bytearray(py, &offsets, i64::to_ne_bytes)?,
            ne_bytearray(py, &ids, i64::to_ne_bytes)?,
        ))
    }

    /// The pairs of a bulk box query in shapely's layout: `boxes` as
    /// native float64 rows; returns one native int64 buffer of `2 × M`
    /// values, the M box positions then the M user ids of the entries
    /// related to each box by `predicate`, sorted by position then id
    /// (NumPy: `frombuffer(...).reshape(2, -1)`). One batched traversal,
    /// the windows in shares on every core, the GIL released.
    #[pyo3(signature = (boxes, predicate="intersects"))]
    fn query_pairs<'py>(
        &self,
        py: Python<'py>,
        boxes: &[u8],
        predicate: &str,
    ) -> PyResult<Bound<'py, PyByteArray>> {
        let p = self::predicate(predicate).map_err(to_py)?;
        let (offsets, ids) = self.read_nogil(py, |st| {
            let windows = self::boxes(boxes, true)?;
            batch_ids(&st.index, &windows, p, true)
        })?;
        let n = ids.len();
        PyByteArray::new_bound_with(py, 2 * n * 8, |buf| {
            let (left, right) = buf.split_at_mut(n * 8);
            let mut slots = left.chunks_exact_mut(8);
            for (pos, w) in offsets.windows(2).enumerate() {
                let b = (pos as i64).to_ne_bytes();
                for slot in slots.by_ref().take((w[1] - w[0]) as usize) {
                    slot.copy_from_slice(&b);
                }
            }
            for (slot, id) in right.chunks_exact_mut(8).zip(&ids) {
                slot.copy_from_slice(&id.to_ne_bytes());
            }
            Ok(())
        })
    }

    /// The `k` entries nearest to the box (a point when degenerate), and
    /// with `ties` every entry at the k-th distance, by ascending distance;
    /// user ids, or items when `items`.
    #[pyo3(signature = (minx, miny, maxx, maxy, k, ties=true, items=false))]
    #[allow(clippy::too_many_arguments)]
    fn nearest(
        &self,
        py: Python<'_>,
        minx: f64,
        miny: f64,
        maxx: f64,
        maxy: f64,
        k: usize,
        ties: bool,
        items: bool,
    ) -> PyResult<PyObject> {
        let q = window(minx, miny, maxx, maxy)?;
        let found = self.read_nogil(py, |st| {
            let found = nearest_of(&st.index, q, k, ties)?;
            let hits: Vec<Hit> = found
                .neighbors
                .iter()
                .map(|n| Hit {
                    id: n.id,
                    rect: n.rect,
                })
                .collect();
            if items {
                Ok(Err(FoundItems::of(st.index.records(), &hits)?))
            } else {
                Ok(Ok(st.ids_of(&hits)?))
            }
        })?;
        Ok(match found {
            Ok(ids) => ids.into_py(py),
            Err(items) => items.into_py(py),
        })
    }

    /// k-nearest queries of the boxes `boxes` (native float64 rows; a
    /// degenerate box is a point), as [`Core::nearest`] for each, in one
    /// call with the GIL released. Returns (offsets as native int64,
    /// len(boxes)+1; user ids as native int64; their distances as native
    /// float64), the answer of box `i` at `offsets[i]..offsets[i+1]`.
    #[pyo3(signature = (boxes, k, ties=true))]
    fn nearest_batch<'py>(
        &self,
        py: Python<'py>,
        boxes: &[u8],
        k: usize,
        ties: bool,
    ) -> PyResult<(
        Bound<'py, PyByteArray>,
        Bound<'py, PyByteArray>,
        Bound<'py, PyByteArray>,
    )> {
        let (offsets, ids, dists) = self.read_nogil(py, |st| {
            let queries = self::boxes(boxes, true)?;
            let mut offsets: Vec<i64> = Vec::with_capacity(queries.len() + 1);
            let mut ids: Vec<i64> = Vec::new();
            let mut dists: Vec<f64> = Vec::new();
            offsets.push(0);
            // One search after the other: searched together (the command
            // line's `knn --points`), a cold first pass reads 2.5x faster,
            // but a warm one, the usual case of an open index, costs about
            // 15 % more CPU (docs/benchmarks.md).
            for q in queries {
                let found = nearest_of(&st.index, q, k, ties)?;
                st.index
                    .records()
                    .extend_ids(found.neighbors.iter().map(|n| n.id), &mut ids)?;
                dists.extend(found.neighbors.iter().map(|n| n.distance));
                offsets.push(ids.len() as i64);
            }
            Ok((offsets, ids, dists))
        })?;
        Ok((
            ne_bytearray(py, &offsets, i64::to_ne_bytes)?,
            ne_bytearray(py, &ids, i64::to_ne_bytes)?,
            ne_bytearray(py, &dists, f64::to_ne_bytes)?,
        ))
    }

    /// WKB of the objects with record keys `keys` (native uint64) from the
    /// object heap; None where an entry has no stored geometry.
    fn wkb<'py>(&self, py: Python<'py>, keys: &[u8]) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let keys: Vec<u64> = int64s(keys)
            .map_err(to_py)?
            .into_iter()
            .map(|k| k as u64)
            .collect();
        let found = self.read_nogil(py, |st| {
            let Some(heap) = st.index.objects() else {
                return Ok(vec![None; keys.len()]);
            };
            keys.iter()
                .map(|&k| heap.get_wkb(k))
                .collect::<Result<Vec<_>>>()
        })?;
        Ok(found
            .into_iter()
            .map(|w| w.map(|b| PyBytes::new_bound(py, &b)))
            .collect())
    }

    /// True when the index has an object heap (exact geometries).
    fn has_geometries(&self) -> PyResult<bool> {
        self.read(|st| Ok(st.index.objects().is_some()))
    }

    /// The MBR of everything in the index, or None when it is empty.
    fn bounds(&self) -> PyResult<Option<(f64, f64, f64, f64)>> {
        self.read(|st| {
            Ok(st
                .index
                .bounds()?
                .map(|r| (r.min_x(), r.min_y(), r.max_x(), r.max_y())))
        })
    }

    /// The leaves as `rtree`'s `Index.leaves()` has them: (leaf page id,
    /// user ids of its entries, its MBR as (minx, miny, maxx, maxy)), left
    /// to right; empty for an empty index. The walk runs with the GIL released.
    #[allow(clippy::type_complexity)]
    fn leaves(&self, py: Python<'_>) -> PyResult<Vec<(u64, Vec<i64>, (f64, f64, f64, f64))>> {
        self.read_nogil(py, |st| {
            st.index
                .leaves()?
                .into_iter()
                .map(|(id, keys, r)| {
                    let ids = keys
                        .iter()
                        .map(|&k| st.index.records().id(k))
                        .collect::<Result<Vec<i64>>>()?;
                    Ok((id, ids, (r.min_x(), r.min_y(), r.max_x(), r.max_y())))
                })
                .collect()
        })
    }

    /// How many changes the index has had in this process (and
    /// [`Core::note_change`] calls): a cache of its contents made when it
    /// was `n` is valid while it is still `n`.
    #[getter]
    fn changes(&self) -> u64 {
        self.changes_now()
    }

    /// Counts a change that Python made beside the engine's (the rows of
    /// `from_geoseries` that hold their geometry), so that caches made
    /// before it are not taken as current.
    fn note_change(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    /// Every entry, as (the [`Core::changes`] of that state, record keys as
    /// native uint64, user ids as native int64, boxes as native float64
    /// rows, the rows dropped by [`Core::delete_row`] as sorted native
    /// int64), read under one lock.
    #[allow(clippy::type_complexity)]
    fn snapshot<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(
        u64,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
    )> {
        let (changes, hits, dropped) = self.read_nogil(py, |st| {
            Ok((
                self.changes_now(),
                KeyedHits::of(st, Rect::world(), Predicate::Intersects)?,
                st.dropped_rows.iter().copied().collect::<Vec<i64>>(),
            ))
        })?;
        let (keys, ids, rects) = hits.into_py(py);
        let dropped = PyBytes::new_bound(py, &ne_bytes(&dropped, i64::to_ne_bytes));
        Ok((changes, keys, ids, rects, dropped))
    }

    /// The rows dropped by [`Core::delete_row`], sorted (native int64).
    fn dropped_rows<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let dropped = self.read(|st| Ok(st.dropped_rows.iter().copied().collect::<Vec<i64>>()))?;
        Ok(PyBytes::new_bound(
            py,
            &ne_bytes(&dropped, i64::to_ne_bytes),
        ))
    }

    /// Whether [`Core::delete_row`] dropped row `id`.
    fn row_dropped(&self, id: i64) -> PyResult<bool> {
        self.read(|st| Ok(st.dropped_rows.contains(&id)))
    }

    /// Holds changes back: until [`Core::release_changes`], a change from
    /// another thread waits (as for another thread's batch), so that the
    /// calling thread reads one state across several calls (Python's
    /// exact queries, when a change came between their calls). Waits for
    /// a change under way to end; the GIL is released meanwhile.
    fn hold_changes(&self, py: Python<'_>) -> PyResult<()> {
        let me = std::thread::current().id();
        py.allow_threads(|| {
            let mut guard = self.lock()?;
            let st = guard.as_mut().ok_or_else(closed)?;
            st.holders.push(me);
            Ok(())
        })
        .map_err(to_py)
    }

    /// Ends one [`Core::hold_changes`] of the calling thread (nothing on a
    /// closed index).
    fn release_changes(&self, py: Python<'_>) -> PyResult<()> {
        let me = std::thread::current().id();
        py.allow_threads(|| {
            let mut guard = self.lock()?;
            if let Some(st) = guard.as_mut() {
                if let Some(at) = st.holders.iter().position(|&t| t == me) {
                    st.holders.swap_remove(at);
                }
            }
            Ok(())
        })
        .map_err(to_py)
    }

    fn __len__(&self) -> PyResult<usize> {
        self.read(|st| Ok(st.index.len() as usize))
    }

    /// Begins a batch of updates durable together at its end (Python's
    /// `with index.batch():`); an error if one is already open.
    fn begin_batch(&self) -> PyResult<()> {
        self.with(|st| {
            if st.batch.is_some() {
                return Err(Error::invalid("a batch is already open on this index"));
            }
            if !st.writable {
                return Err(Error::invalid(
                    "the index is open read-only: a batch of changes needs it open for writing",
                ));
            }
            st.batch = Some(st.index.begin_batch(BatchDurability::Commit)?);
            st.batch_thread = Some(std::thread::current().id());
            Ok(())
        })
    }

    /// Ends the open batch: when `succeeded`, commits (the engine's log
    /// synced, the id map's changes in it; for an id map with its own log,
    /// that log synced first; a checkpoint for stores without a log, or
    /// when the map's changes outgrew their budget); otherwise only
    /// restores the durability mode. Nothing to do without an open batch,
    /// or on an index closed inside the batch. On an index that failed
    /// inside the batch ([`State::failed`]) nothing is committed: the
    /// batch is dropped, and when `succeeded` (the block caught the error
    /// and went on) the refusal is raised.
    fn end_batch(&self, py: Python<'_>, succeeded: bool) -> PyResult<()> {
        py.allow_threads(|| {
            let refused = {
                let mut guard = self.lock().map_err(to_py)?;
                match guard.as_mut() {
                    // Closed inside the batch: its close made everything durable.
                    None => return Ok(()),
                    // The index failed inside the batch: nothing to commit,
                    // an error if the block went on as if nothing had failed.
                    Some(st) if st.index.failure().is_some() => {
                        st.batch = None;
                        st.batch_thread = None;
                        Some(st.check_failed())
                    }
                    Some(_) => None,
                }
            };
            match refused {
                Some(_) if !succeeded => return Ok(()),
                Some(r) => return r.map_err(to_py),
                None => {}
            }
            self.with(|st| match st.batch.take() {
                Some(batch) => {
                    st.batch_thread = None;
                    st.end_batch(batch, succeeded)
                }
                None => Ok(()),
            })
        })
    }

    /// Saves the id map and checkpoints the engine (everything durable).
    fn checkpoint(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| self.with(State::checkpoint))
    }

    /// Checkpoints (when writable) and closes; later calls raise ValueError.
    /// In a forked child of the process that opened the index for writing
    /// it only drops the child's copy, writing nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let state = self.lock().map_err(to_py)?.take();
        if let Some(mut st) = state {
            // A forked child's copy, or an index that failed (its
            // checkpoint would fail too, and would make durable what the
            // failure left): released without writing.
            if !st.owned() || st.index.failure().is_some() {
                drop(st);
                return Ok(());
            }
            py.allow_threads(move || -> Result<()> {
                st.checkpoint()?;
                st.index.close()
            })
            .map_err(to_py)?;
        }
        Ok(())
    }

    /// True once closed.
    #[getter]
    fn closed(&self) -> PyResult<bool> {
        Ok(self.lock_read().map_err(to_py)?.is_none())
    }

    /// The index directory, or None.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.path.clone()
    }

    /// True when the index is open read-only.
    #[getter]
    fn readonly(&self) -> PyResult<bool> {
        self.read_meta(|st| Ok(!st.writable))
    }

    /// Why the index refuses every call after a failure (see
    /// `State::failed`), or None.
    #[getter]
    fn failed(&self) -> PyResult<Option<String>> {
        self.read_meta(|st| Ok(st.index.failure().map(str::to_owned)))
    }

    /// The manifest (kind, page size, device, tree and store parameters) as JSON.
    fn manifest_json(&self) -> PyResult<String> {
        self.read_meta(|st| {
            serde_json::to_string(st.index.manifest()).map_err(|e| Error::invalid(e.to_string()))
        })
    }

    /// The device and store counters so far (`geoflash_engine::metrics::Stats`) as JSON.
    fn stats_json(&self) -> PyResult<String> {
        self.read_meta(|st| st.index.stats("python").to_json())
    }
}

impl Drop for Core {
    /// An index dropped without `close()` is checkpointed (errors are lost:
    /// call `close()` to see them); in a forked child of the process that
    /// opened it for writing, nothing is written.
    fn drop(&mut self) {
        if let Ok(inner) = self.inner.get_mut() {
            if let Some(mut st) = inner.take() {
                if st.owned() && st.index.failure().is_none() {
                    let _ = st.checkpoint();
                }
            }
        }
    }
}
