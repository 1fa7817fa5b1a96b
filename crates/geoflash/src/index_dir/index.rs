//! The [`Index`] type: what an open index holds, its accessors, its
//! counters and phase times, checkpoint and close. An index is created in
//! `create.rs`, reopened in `open.rs`, updated and queried in
//! `operations.rs`, and keeps exact geometries in `objects.rs`.
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::devices::Images;
use super::factory::pages_file;
use super::objects::HEAP_ONLY_GENERATIONS;
use crate::index::ReadMode;
use crate::manifest::{Access, DirLock, Manifest};
use crate::metrics::{CpuClockOff, Phase, PhaseTimes, Stats, Stopwatch};
use crate::spatial::{DynRTree, SpatialIndex};
use crate::storage::PageDevice;
use crate::store::efind::RestartReport;
use crate::store::OpId;
use crate::{Error, Result};

/// An open index.
///
/// Dropping an index without [`close`](Self::close) writes nothing more:
/// for its files a drop is a crash, and the next open recovers what its
/// store made durable (every acknowledged operation: see
/// [`durable_op`](Self::durable_op)) and nothing after it. `close`
/// checkpoints, so the next open has nothing to replay.
///
/// ```
/// use geoflash::geom::{Point, Rect};
/// use geoflash::engine::Predicate;
/// use geoflash::{Index, IndexOptions};
///
/// let opts = IndexOptions { device: "flashsim:preset=seed-tc58".parse()?, ..IndexOptions::default() };
/// let mut index = Index::create_temporary(&opts)?;
/// for i in 0..1000u64 {
///     let x = (i % 40) as f64;
///     let y = (i / 40) as f64;
///     index.insert(i, Rect::new(x, y, x + 0.5, y + 0.5)?)?;
/// }
/// index.checkpoint()?;
/// let found = index.query(Rect::new(0.0, 0.0, 2.0, 2.0)?, Predicate::Intersects)?;
/// assert_eq!(found.hits.len(), 9);
/// let near = index.nearest(Point::new(10.2, 3.2)?, 1, false)?;
/// assert_eq!(near.neighbors[0].id, 3 * 40 + 10);
/// println!("NAND programs: {}", index.stats("example").sim.nand_programs);
/// # Ok::<(), geoflash::Error>(())
/// ```
pub struct Index {
    pub(super) dir: Option<PathBuf>,
    pub(super) manifest: Manifest,
    /// The structure: an R-tree-family tree, a FOR-tree or an xBR+-tree.
    pub(super) tree: Box<dyn SpatialIndex>,
    pub(super) device: Arc<dyn PageDevice>,
    /// The log's own device (`log.dat`), when the store keeps its log apart.
    pub(super) log_device: Option<Arc<dyn PageDevice>>,
    /// What restart did when the index was opened.
    pub(super) restart: Option<RestartReport>,
    /// The rollback journal of a structure that writes in place on the
    /// directory's file (`journal.dat`), committed at each checkpoint.
    pub(super) journal: Option<Arc<crate::storage::journal::JournaledDevice>>,
    /// Pages the journal rolled back (or, read-only, serves from its
    /// images) when the index was opened.
    pub(super) rolled_back: u64,
    /// The flash simulators behind `device` (the device itself or the
    /// tiers of a hybrid) and a hybrid's placement map: their state is
    /// saved to `device.img` (and `device.fast.img` and `tiers.map`,
    /// together: `images.rs`) at each checkpoint so later commands can
    /// reopen it.
    pub(super) images: Images,
    /// The object heap (`objects.dat`), when the index stores geometries.
    pub(super) objects: Option<crate::objects::Heap>,
    pub(super) access: Access,
    pub(super) _lock: Option<DirLock>,
    /// The staging directory a new index was built in before it was
    /// published as `dir` (`Index::staged`): its devices still name their
    /// files there, so [`Index::locate`] names them in `dir` instead.
    pub(super) built_in: Option<PathBuf>,
    /// Time of the front end's phases since the index was created or
    /// opened: index operations, filter and refinement of queries, recovery
    /// at open (the store measures its own phases).
    pub(super) times: Mutex<PhaseTimes>,
    /// Inside [`Index::batch`]: operations take no CPU-clock readings (the
    /// batch measures its CPU time once).
    pub(super) in_batch: bool,
    /// Operations outside a batch read the thread's CPU clock at each end
    /// (see [`Index::set_operation_cpu_time`]).
    pub(super) operation_cpu_time: bool,
    /// Each object's rectangle, for [`Index::update_by_id`] (built at its
    /// first use).
    pub(super) locator: super::locator::Locator,
    /// Checkpoints by time (see `checkpoints.rs`).
    pub(super) checkpoints: super::checkpoints::CheckpointTimer,
    /// A front end's record map (see `records.rs`).
    pub(super) records: super::records::RecordState,
    /// Why the index refuses every call after a change, commit or
    /// checkpoint failed (see `failure.rs`).
    pub(super) failure: Option<String>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("dir", &self.dir)
            .field("kind", &self.manifest.kind())
            .field("device", &self.device)
            .field("records", &self.len())
            .finish()
    }
}

impl Index {
    /// `e` naming the index's page file (`pages.dat`, the `file:PATH`, or
    /// `device.img` of a simulated device) when it is a corruption error
    /// that names no file yet (the log names `log.dat` itself). For
    /// errors from [`Index::structure`] or `Index::tree` calls. Of an
    /// index created in this process, the files its devices name in their
    /// errors are named where the index was published, not in its staging
    /// directory.
    pub fn locate(&self, e: Error) -> Error {
        let e = match (&self.built_in, &self.dir) {
            (Some(from), Some(to)) => e.moved_dir(from, to),
            _ => e,
        };
        match &self.dir {
            Some(dir) => e.in_file(pages_file(dir, &self.manifest)),
            None => e,
        }
    }

    /// An error unless the index is open for writing.
    pub(super) fn writable(&self) -> Result<()> {
        if self.access == Access::Read {
            return Err(Error::invalid("the index is open read-only"));
        }
        Ok(())
    }

    /// [`Index::writable`] for a change of entries by key: also refused on
    /// an index whose keys are an unclaimed front end's record map
    /// ([`Index::claim_records`]).
    pub(super) fn writable_by_key(&self) -> Result<()> {
        self.writable()?;
        self.check_keyed_writes()
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The directory, if the index has one.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The R-tree-family tree (for inspection, checks and direct
    /// traversals); an error for a FOR-tree index, whose operations go
    /// through [`Index::structure`].
    pub(crate) fn tree(&self) -> Result<&DynRTree> {
        self.tree.rtree("this operation")
    }

    /// Sets how range and kNN queries read nodes ([`ReadMode`]: batched by default,
    /// `single` for the papers' one-page-at-a-time reads); the answers do
    /// not change. Not persisted: each open starts batched.
    pub fn set_read_mode(&mut self, mode: ReadMode) {
        self.tree.set_read_mode(mode);
    }

    /// How range and kNN queries read nodes.
    pub fn read_mode(&self) -> ReadMode {
        self.tree.read_mode()
    }

    /// The structure the index holds: an R-tree-family tree, a FOR-tree or
    /// an xBR+-tree, behind the [`SpatialIndex`] trait (its family's own
    /// operations through [`rtree`](trait.SpatialIndex.html#method.rtree),
    /// [`xbr`](trait.SpatialIndex.html#method.xbr) and
    /// [`fortree`](trait.SpatialIndex.html#method.fortree)).
    pub fn structure(&self) -> &dyn SpatialIndex {
        &*self.tree
    }

    /// The device.
    pub fn device(&self) -> &Arc<dyn PageDevice> {
        &self.device
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        // Every family an index holds counts its records.
        self.tree.len().unwrap_or_default()
    }

    /// True when the index holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Time of the front end's phases since the index was created or opened:
    /// index operations, the filter and refinement steps of queries, and
    /// recovery at open (the store's own phases are in its counters).
    pub fn phase_times(&self) -> PhaseTimes {
        *self.times.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets whether each operation outside a batch (insert, delete, update,
    /// query, query batch, nearest, object operations) reads the thread's
    /// CPU clock at its start and end (on by default; not persisted).
    ///
    /// A CPU-clock reading is a system call, and for one-by-one calls from
    /// an interpreter (the Python package turns it off) the two readings are
    /// a large share of a small operation. When off, [`Index::phase_times`]
    /// and [`Index::stats`] still count the wall-clock (and simulated) time
    /// of every operation, but the CPU column of the front end's phases
    /// (`cpu_index_ns`, `cpu_filter_ns`, `cpu_refine_ns`) does not measure
    /// them: it holds only what batches ([`Index::batch`], which read the
    /// clock once at each end) and the operations run while it was on added.
    /// The stores' phases inside such an operation (its node reads, the
    /// flushes and log writes it causes) count their wall-clock time but
    /// not their CPU time either; outside operations (checkpoints, closing)
    /// they are timed as before.
    pub fn set_operation_cpu_time(&mut self, on: bool) {
        self.operation_cpu_time = on;
    }

    /// Whether operations outside a batch read the CPU clock
    /// (see [`Index::set_operation_cpu_time`]).
    pub fn operation_cpu_time(&self) -> bool {
        self.operation_cpu_time
    }

    /// A stopwatch started now, on the device's simulated clock if it has
    /// one; inside a batch on that clock alone (the batch measures its wall
    /// and CPU time once), and without a CPU-clock reading when operation
    /// CPU time is off.
    ///
    /// When operation CPU time is off, the operation also runs in a
    /// [`CpuClockOff`] scope until [`Index::note`]: the stores' phases inside
    /// it (node reads, the flushes and log writes it causes) read no CPU
    /// clock either.
    pub(super) fn watch(&self) -> OpWatch {
        let sim = self.device.sim_clock_ns();
        // Entered first: `Stopwatch::start` reads no CPU clock inside it.
        let cpu_off = (!self.operation_cpu_time).then(CpuClockOff::enter);
        let watch = if self.in_batch {
            Stopwatch::start_sim_only(sim)
        } else {
            Stopwatch::start(sim)
        };
        OpWatch {
            watch,
            _cpu_off: cpu_off,
        }
    }

    /// Adds the time since `watch` started to the front end's `phase`
    /// (and ends its [`CpuClockOff`] scope, if any).
    pub(super) fn note(&self, watch: OpWatch, phase: Phase) {
        let mut times = self.times.lock().unwrap_or_else(|e| e.into_inner());
        watch.watch.stop(phase, self.device.sim_clock_ns(), &mut times);
    }

    /// Flushes everything and syncs the device; a simulated flash device's
    /// state is saved to `device.img` (atomically; the two images of a
    /// hybrid of simulators together, `images.rs`) so a later command can
    /// reopen it. When the record map (its changes in the store's log)
    /// changed or the object heap has pending changes, the checkpoint names
    /// a new generation: the map's snapshot of it and the heap's commit
    /// (its changes and mark) are written first, then the store's
    /// checkpoint (or the rollback journal's commit) names it, so a crash
    /// anywhere reopens the three together (see `records.rs` and
    /// the `objects` module). A checkpoint that fails after the heap's
    /// commit tells the heap so (`Heap::compact` then refuses until the
    /// index is reopened).
    pub fn checkpoint(&mut self) -> Result<()> {
        if self.access == Access::Read {
            return Ok(());
        }
        self.refuse_if_failed()?;
        let named = self.before_store_checkpoint();
        let named = self.noting_failure(named)?;
        let finished = self.finish_checkpoint(named);
        let finished = self.noting_failure(finished);
        if let (Err(_), Some((g, _)), Some(heap)) = (&finished, named, self.objects.as_mut()) {
            // The heap's mark of `g` is written, and the store's durable
            // checkpoint may name `g` or the generation before.
            heap.checkpoint_failed(g);
        }
        finished
    }

    /// The rest of [`Index::checkpoint`] after
    /// [`Index::before_store_checkpoint`] (which returned `named`): the
    /// store's checkpoint, the record map's promotion, the images and the
    /// rollback journal's commit.
    fn finish_checkpoint(&mut self, named: Option<(u64, bool)>) -> Result<()> {
        self.tree.checkpoint().map_err(|e| self.locate(e))?;
        if let Some((g, true)) = named {
            self.records_after_checkpoint(g)?;
        }
        // The journal commits with the simulators' images (`images.rs`).
        match &self.dir {
            Some(dir) => super::images::save(dir, &self.images, self.journal.as_deref())
                .map_err(|e| self.locate(e))?,
            None => {
                if let Some(journal) = &self.journal {
                    journal.commit().map_err(|e| self.locate(e))?;
                }
            }
        }
        self.checkpoints.restart();
        Ok(())
    }

    /// The first steps of a checkpoint that names a new generation (see
    /// [`Index::checkpoint`]): the record map's snapshot of it, the object
    /// heap's commit, and the generation staged for the store's
    /// checkpoint. Returns the generation and whether the map's snapshot
    /// was written (`None`: the checkpoint names no new generation).
    pub(super) fn before_store_checkpoint(&mut self) -> Result<Option<(u64, bool)>> {
        let Some(g) = self.next_checkpoint_generation() else {
            return Ok(None);
        };
        let saved = self.records_before_checkpoint(g)?;
        self.commit_heap(g)?;
        if let Some(c) = self.tree.client_log() {
            c.set_next_generation(g);
        }
        Ok(Some((g, saved)))
    }

    /// The generation the next checkpoint names, when it must name a new
    /// one (the record map in the store's log changed, or the object heap
    /// has changes pending): one never named before. In a store's log the
    /// record map's generations count from 1 and the object heap's alone
    /// (no map in the log) from [`HEAP_ONLY_GENERATIONS`], so an open tells
    /// which one the store's checkpoint names.
    fn next_checkpoint_generation(&self) -> Option<u64> {
        if !self.records_changed() && !self.heap_pending() {
            return None;
        }
        let saved_mark = self.images.sims.first().and_then(|s| s.sim.client_mark());
        let named = match (self.tree.client_log_ref(), &self.journal) {
            (None, None) if self.saved_at_checkpoints() && saved_mark.is_some() => {
                saved_mark.unwrap_or(0)
            }
            (Some(c), _) => {
                let scheme = if self.records_in_log() { 0 } else { HEAP_ONLY_GENERATIONS };
                let ours = |g: Option<u64>| g.filter(|g| g & HEAP_ONLY_GENERATIONS == scheme);
                let newest = ours(c.generation()).max(ours(c.next_generation()));
                newest.unwrap_or(scheme).max(self.records.map_generation())
            }
            (None, Some(j)) => j.client_mark(),
            (None, None) => self
                .objects
                .as_ref()
                .and_then(crate::objects::Heap::mark)
                .unwrap_or(0),
        };
        Some(named + 1)
    }

    /// How long after the last checkpoint a durability point checkpoints
    /// (`None`: never; see [`StoreSpec::checkpoint_interval`](crate::config::StoreSpec::checkpoint_interval)).
    pub fn checkpoint_interval(&self) -> Option<std::time::Duration> {
        self.checkpoints.interval()
    }

    /// Before an operation (for what the previous one made due), outside a
    /// batch that waits for its end: a checkpoint when the interval has
    /// passed and the store's durability mode has made every committed
    /// operation durable (a durability point; see `checkpoints.rs`).
    pub(super) fn checkpoint_if_due(&mut self) -> Result<()> {
        // A batch waiting for its end runs the store in the unbounded
        // group mode: its end is its durability point.
        if self.record_frames_due() {
            // The record map's frames reached their budget: a checkpoint
            // between operations (inside a batch too) makes them obsolete.
            return self.checkpoint();
        }
        // The batch's test first: it spares the clock read of `due` on
        // every operation of a batch.
        if self.tree.durability() == Some(crate::store::log::Durability::UNBOUNDED_GROUP)
            || !self.checkpoints.due()
        {
            return Ok(());
        }
        let durable = self.tree.durable_op();
        if durable.is_some() && durable == self.tree.last_committed_op() {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Makes every operation committed so far durable at the lowest cost
    /// the store allows: a store with a log (eFIND, FAST) syncs its log
    /// (which holds the object heap's changes too) and keeps its dirty nodes
    /// for its flushing policy, so a crash after this returns replays them
    /// from the log; a store without a log, or an index directory on a
    /// simulated device (saved whole to `device.img` at checkpoints), is
    /// [checkpointed](Self::checkpoint). A simulated device without a
    /// directory (a workbench run) lives in its process: there the commit
    /// is the log sync it simulates. A commit that comes
    /// [`checkpoint_interval`](Self::checkpoint_interval) or more after the
    /// last checkpoint is a checkpoint (checkpoints by time).
    pub fn commit(&mut self) -> Result<()> {
        if self.access == Access::Read {
            return Ok(());
        }
        self.refuse_if_failed()?;
        if self.saved_at_checkpoints() || self.checkpoints.due() || self.record_frames_due() {
            return self.checkpoint();
        }
        let synced = self.tree.sync_committed().map_err(|e| self.locate(e));
        if self.noting_failure(synced)? {
            return Ok(());
        }
        self.checkpoint()
    }

    /// Device and store counters so far, as one [`Stats`] record labelled
    /// `label`. The I/O of a separate log device (`log.dat`) is added to the
    /// device counters; the log's own columns come from the store.
    pub fn stats(&self, label: &str) -> Stats {
        let mut s = Stats::new(label);
        let mut dev = self.device.stats();
        if let Some(log) = &self.log_device {
            dev.io.add(&log.stats().io);
        }
        s.set_device(&dev);
        s.absorb_store(&self.tree.store_stats());
        s.absorb_tree(&self.tree.tree_counters());
        s.times
            .add(&self.times.lock().unwrap_or_else(|e| e.into_inner()));
        s
    }

    /// The device of the log when it is a separate file (`log.dat`), else `None`.
    pub fn log_device(&self) -> Option<&Arc<dyn PageDevice>> {
        self.log_device.as_ref()
    }

    /// Pages of an index that writes in place which its rollback journal
    /// (`journal.dat`) restored to the last checkpoint when it was opened:
    /// what a crash since that checkpoint had changed (0 after a clean close).
    pub fn rolled_back_pages(&self) -> u64 {
        self.rolled_back
    }

    /// What restart (recovery) did when the index was opened for writing
    /// (`None` for stores without a log, and for created indexes).
    pub fn restart_report(&self) -> Option<&RestartReport> {
        self.restart.as_ref()
    }

    /// The newest committed operation of a store with a log.
    pub fn last_committed_op(&self) -> Option<OpId> {
        self.tree.last_committed_op()
    }

    /// The newest operation whose commit is durable (stores with a log): it
    /// and every earlier operation survive a crash. `None` for stores whose
    /// operations are durable only after [`checkpoint`](Self::checkpoint),
    /// and for an index directory on a simulated device, whose state
    /// (`device.img`, log included) is saved only at checkpoints (see
    /// [`saved_at_checkpoints`](Self::saved_at_checkpoints); issue 44: a
    /// killed eFIND build on `flashsim:` lost the operations it had
    /// acknowledged by its log syncs).
    pub fn durable_op(&self) -> Option<OpId> {
        if self.saved_at_checkpoints() {
            return None;
        }
        self.tree.durable_op()
    }

    /// Whether the index survives its process only as of its last
    /// [`checkpoint`](Self::checkpoint) whatever its store: an index
    /// directory on a simulated device (or a `hybrid:` with a simulated
    /// tier), saved whole at checkpoints.
    pub fn saved_at_checkpoints(&self) -> bool {
        !self.images.is_empty() && self.dir.is_some()
    }

    /// Checkpoints (when writable) and closes the index. An index that
    /// failed ([`failure`](Self::failure)) is released without writing
    /// anything, as the Python package's `close()` does: its checkpoint
    /// could make durable a part of the failed change, and the call that
    /// failed reported it.
    pub fn close(mut self) -> Result<()> {
        if self.failure.is_some() {
            return Ok(());
        }
        self.checkpoint()
    }
}

/// A front-end phase being timed ([`Index::watch`] → [`Index::note`]): the
/// stopwatch and, while operation CPU time is off, the scope in which no
/// stopwatch of the thread reads the CPU clock.
#[derive(Debug)]
pub(super) struct OpWatch {
    watch: Stopwatch,
    _cpu_off: Option<CpuClockOff>,
}
