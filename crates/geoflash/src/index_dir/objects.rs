//! Exact geometries of an [`Index`]: its object heap (`objects.dat`),
//! opened with the index or created on first use; objects inserted and
//! deleted with their MBRs, each change of the heap made durable with its
//! operation (see [`crate::objects`], "Commits"): a frame in the store's
//! log (eFIND, FAST), or the checkpoint (stores under a rollback
//! journal); range queries refined on the geometries.
use std::path::Path;

use super::options::IndexOptions;
use super::Index;
use crate::geom::Rect;
use crate::index::bulk::BulkWatch;
use crate::index::query::{Predicate, QueryResult};
use crate::index::BulkMethod;
use crate::manifest::{Access, Manifest};
use crate::metrics::Phase;
use crate::objects::{frame, Committed, Heap};
use crate::{Error, Result};

/// The object heap of the index in `dir`, if it has one, its committed
/// records those `committed` says; a missing heap the manifest names is
/// damage naming it ([`require_heap_file`]).
pub(super) fn open_objects(
    dir: &Path,
    manifest: &Manifest,
    access: Access,
    committed: Committed,
) -> Result<Option<Heap>> {
    require_heap_file(dir, manifest)?;
    let path = dir.join(crate::objects::OBJECTS_FILE);
    if !path.exists() {
        return Ok(None);
    }
    Heap::open(&path, access == Access::Read, committed).map(Some)
}

/// An error naming `objects.dat` when the manifest of the index in `dir`
/// says it has an object heap ([`Manifest::objects`]) and the file is
/// missing (deleted or renamed away): checked before anything of the
/// index is opened or recovered, by read-only and writable opens alike.
/// Before, such an index opened without a heap, its objects answered as
/// their boxes, and its next object insert created an empty heap.
pub(super) fn require_heap_file(dir: &Path, manifest: &Manifest) -> Result<()> {
    let path = dir.join(crate::objects::OBJECTS_FILE);
    if manifest.objects && !path.exists() {
        return Err(super::devices::missing_file(
            &path,
            "the object heap of the index (its exact geometries)",
        ));
    }
    Ok(())
}

/// The first generation a store's checkpoint names for the object heap
/// of an index without a record map in the store's log (the high bit set):
/// the map's generations count from 1, so an open tells whose generation
/// the checkpoint names.
pub(super) const HEAP_ONLY_GENERATIONS: u64 = 1 << 63;

/// Bytes of pending heap changes past which the next object operation
/// first writes them to the file, uncommitted until the checkpoint's mark
/// ([`Heap::spill`]), so that memory holds little of a long load (small in
/// tests, so that the crash campaigns spill often).
const HEAP_SPILL_BYTES: u64 = if cfg!(test) { 512 } else { 1 << 20 };

/// How an index makes its object heap's changes durable with its
/// operations (see [`crate::objects`], "Commits").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HeapProtocol {
    /// Each change is a frame logged with its operation; checkpoints name
    /// the heap's generation in the store's CHECKPOINT record.
    Log,
    /// The structure is durable at checkpoints only, under a rollback
    /// journal whose header names the heap's generation.
    Journal,
    /// The index directory is on a simulated device saved whole at
    /// checkpoints (`device.img`), whose image names the heap's generation.
    Saved,
    /// Written in place without a journal (the papers' mode): no crash
    /// promise, for the heap either.
    Unprotected,
}

/// The object heap: its protocol, opening and committing with the index.
impl Index {
    /// The heap's protocol; `Err` naming why when the index has none that
    /// keeps the heap and the tree together (a store with a log written
    /// before CLIENT frames, or the plain store on a simulated device).
    pub(super) fn heap_protocol(&self) -> Result<HeapProtocol> {
        if self.tree.client_log_ref().is_some() {
            return Ok(HeapProtocol::Log);
        }
        if self.journal.is_some() {
            return Ok(HeapProtocol::Journal);
        }
        if self.saved_at_checkpoints() {
            return Ok(HeapProtocol::Saved);
        }
        if self.manifest.store.in_place() {
            return Ok(HeapProtocol::Unprotected);
        }
        let dir = self.dir.as_deref().map_or(String::new(), |d| format!("{}: ", d.display()));
        Err(Error::invalid(format!(
            "{dir}this index cannot commit changes of its object heap ({}) with its operations: its store's \
             log predates the frames that carry them; rebuild it (`geoflash build`) to change its objects",
            crate::objects::OBJECTS_FILE
        )))
    }

    /// The generation the index's newest checkpoint names for the heap
    /// (`None`: its checkpoints name none; see [`Committed`]).
    pub(super) fn heap_generation(&self) -> Option<u64> {
        if let Some(c) = self.tree.client_log_ref() {
            return Some(c.generation().unwrap_or(0));
        }
        if let Some(j) = &self.journal {
            return Some(j.client_mark());
        }
        if let (Some(s), true) = (self.images.sims.first(), self.saved_at_checkpoints()) {
            // An image saved before marks names none: the heap up to its
            // last mark.
            return s.sim.client_mark();
        }
        // A store with a log but no client log: a reader of a log whose
        // checkpoints named no generation (it opens none then), or a log
        // written before CLIENT frames (whose heap, of version 1, has no
        // marks and is read whole).
        (!self.manifest.store.is_plain()).then_some(0)
    }

    /// Which records of the heap file are committed (see [`Committed`]):
    /// through the generation the index's checkpoint names; without one,
    /// up to the last mark, of the generation the manifest records or a
    /// later one when it records one ([`Manifest::objects_mark`]).
    pub(super) fn heap_committed(&self) -> Committed {
        match (self.heap_generation(), self.manifest.objects_mark) {
            (Some(g), _) => Committed::Through(g),
            (None, Some(g)) => Committed::NotBefore(g),
            (None, None) => Committed::LastMark,
        }
    }

    /// Records the object heap in the manifest when it says less than the
    /// index holds: that the index has a heap ([`Manifest::objects`]), and,
    /// when the index's checkpoints name no generation (journal off), the
    /// generation of the heap's newest mark ([`Manifest::objects_mark`]).
    /// Called when the heap is created (after its file, before any object
    /// is put in it), by a writable open that holds a heap, and after the
    /// heap's commit at each checkpoint; the manifest is replaced
    /// atomically and synced. Nothing is written read-only, without a
    /// heap or a directory, or when the manifest says so already.
    pub(super) fn record_heap(&mut self) -> Result<()> {
        let (Some(dir), Some(heap)) = (self.dir.as_deref(), self.objects.as_ref()) else {
            return Ok(());
        };
        if self.access == Access::Read {
            return Ok(());
        }
        let unprotected = matches!(self.heap_protocol(), Ok(HeapProtocol::Unprotected));
        let mark = match unprotected {
            true => heap.mark().max(self.manifest.objects_mark),
            false => self.manifest.objects_mark,
        };
        if self.manifest.objects && mark == self.manifest.objects_mark {
            return Ok(());
        }
        let recorded = Manifest {
            objects: true,
            objects_mark: mark,
            ..self.manifest.clone()
        };
        recorded.store(dir)?;
        self.manifest = recorded;
        Ok(())
    }

    /// At open: the heap, its committed records, then the changes of the
    /// operations the store's restart kept (`frames`), pending again.
    pub(super) fn open_heap(&mut self, frames: Vec<Vec<u8>>) -> Result<()> {
        let Some(dir) = self.dir.clone() else {
            return Ok(());
        };
        self.objects = open_objects(&dir, &self.manifest, self.access, self.heap_committed())?;
        self.record_heap()?;
        if frames.is_empty() {
            return Ok(());
        }
        let heap = self.objects.as_mut().ok_or_else(|| {
            Error::corrupt(
                None,
                format!(
                    "the store's log holds {} change(s) of the object heap, but {} is missing",
                    frames.len(),
                    crate::objects::OBJECTS_FILE
                ),
            )
            .in_file(dir.join(crate::objects::OBJECTS_FILE))
        })?;
        for f in &frames {
            heap.apply_frame(f)?;
        }
        Ok(())
    }

    /// Whether the heap has changes the next checkpoint writes.
    pub(super) fn heap_pending(&self) -> bool {
        self.objects.as_ref().is_some_and(Heap::has_pending)
    }

    /// Part of the checkpoint naming `generation`: the heap's pending
    /// changes and its mark, written and synced before the store's
    /// checkpoint or the journal's commit names the generation.
    pub(super) fn commit_heap(&mut self, generation: u64) -> Result<()> {
        let Some(heap) = self.objects.as_mut() else {
            return Ok(());
        };
        heap.commit(generation)?;
        if let Some(j) = &self.journal {
            j.set_client_mark(generation);
        }
        for s in &self.images.sims {
            s.sim.set_client_mark(generation);
        }
        // Journal off: the manifest records the generation committed.
        self.record_heap()
    }

    /// Runs `op` (an operation of the structure) with the heap's `frame`
    /// staged for the store's log when the heap's protocol logs it; first
    /// the checkpoint the previous operation made due, unless a frame of
    /// the record map is staged already (its caller ran it).
    fn with_heap_frame(&mut self, frame: &[u8], op: impl FnOnce(&mut Index) -> Result<()>) -> Result<()> {
        let logged = self.heap_protocol()? == HeapProtocol::Log;
        if let Some(heap) = self.objects.as_mut().filter(|h| h.pending_bytes() > HEAP_SPILL_BYTES) {
            // Before the operation, so that an error here is not that of
            // an operation already durable.
            heap.spill()?;
        }
        if !self.records.staged {
            self.checkpoint_if_due()?;
        }
        self.with_staged(logged.then_some(frame), op)
    }
}

/// Exact geometries: the object heap and refined queries.
impl Index {
    /// A new index in `dir` holding `objects`: their MBRs bulk-loaded into
    /// the tree as [`Index::bulk_load`] does, their geometries in the heap.
    pub fn bulk_load_objects(
        dir: &Path,
        opts: &IndexOptions,
        objects: &[(u64, crate::objects::Geometry)],
        method: BulkMethod,
        fill: f64,
    ) -> Result<Index> {
        Index::bulk_load_objects_then(dir, opts, objects, method, fill, |_| Ok(()))
    }

    /// [`Index::bulk_load_objects`], telling `progress` how far the writing
    /// of the tree is, as [`Index::bulk_load_with_progress`] does.
    pub fn bulk_load_objects_with_progress(
        dir: &Path,
        opts: &IndexOptions,
        objects: &[(u64, crate::objects::Geometry)],
        method: BulkMethod,
        fill: f64,
        progress: &dyn Fn(u64, u64),
    ) -> Result<Index> {
        let watch = BulkWatch::new(super::create::stop_of(Some(dir)), progress);
        Index::bulk_load_objects_watched(dir, opts, objects, method, fill, watch, |_| Ok(()))
    }

    /// [`Index::bulk_load_objects`], then `then` on the new index in its
    /// staging directory, before it is checkpointed and published (see
    /// [`Index::bulk_load_then`]).
    pub fn bulk_load_objects_then(
        dir: &Path,
        opts: &IndexOptions,
        objects: &[(u64, crate::objects::Geometry)],
        method: BulkMethod,
        fill: f64,
        then: impl FnOnce(&mut Index) -> Result<()>,
    ) -> Result<Index> {
        let watch = BulkWatch::stopped_by(super::create::stop_of(Some(dir)));
        Index::bulk_load_objects_watched(dir, opts, objects, method, fill, watch, then)
    }

    /// [`Index::bulk_load_objects_then`], stopped and followed by `watch`.
    pub(super) fn bulk_load_objects_watched(
        dir: &Path,
        opts: &IndexOptions,
        objects: &[(u64, crate::objects::Geometry)],
        method: BulkMethod,
        fill: f64,
        watch: BulkWatch<'_>,
        then: impl FnOnce(&mut Index) -> Result<()>,
    ) -> Result<Index> {
        let mut items = Vec::with_capacity(objects.len());
        for (i, (id, g)) in objects.iter().enumerate() {
            // A stop request ends the load here too.
            if i.is_multiple_of(1 << 16) {
                watch
                    .check()
                    .map_err(|e| super::create::stopped_in(Some(dir), e))?;
            }
            let r = crate::objects::geometry::bounding_rect(g)
                .map_err(|e| Error::invalid(format!("object {id}: {e}")))?;
            items.push((*id, r));
        }
        opts.structure.check_bulk_load()?;
        Index::staged(dir, opts, |staging| {
            let mut index =
                Index::bulk_load_at(Some(staging), None, opts, items, method, fill, watch)?;
            let heap = index.objects_mut()?;
            for (i, (id, g)) in objects.iter().enumerate() {
                // A stop request ends the load here too (nothing is
                // published: see `Index::bulk_load`).
                if i.is_multiple_of(1 << 16) {
                    watch.check()?;
                }
                heap.put(*id, &[], g)?;
                if heap.pending_bytes() > super::records::RECORD_FRAMES_BUDGET {
                    // Written now, committed by the load's checkpoint.
                    heap.spill()?;
                }
            }
            then(&mut index)?;
            Ok((index, ()))
        })
        .map(|(index, ())| index)
        .map_err(|e| super::create::stopped_in(Some(dir), e))
    }

    /// The object heap, if the index has one.
    pub fn objects(&self) -> Option<&crate::objects::Heap> {
        self.objects.as_ref()
    }

    /// The object heap, created in the index directory when missing (its
    /// first mark the generation the index's checkpoint names), refusing
    /// writes when it cannot take them. An opened index already holds its
    /// heap if it has one, so a heap file found here is a leftover (none in
    /// a new staging directory): it is replaced. The manifest records the
    /// heap ([`Index::record_heap`]) before any object is put in it: the
    /// file first, so a crash between the two leaves a heap the manifest
    /// does not name (it opens, and the next writable open records it),
    /// never a manifest naming a heap that is not there.
    fn objects_mut(&mut self) -> Result<&mut crate::objects::Heap> {
        self.writable_by_key()?;
        if self.objects.is_none() {
            let dir = self.dir.as_deref().ok_or_else(|| {
                Error::invalid("an object heap needs an index directory; this index has none")
            })?;
            let path = dir.join(crate::objects::OBJECTS_FILE);
            if path.exists() {
                std::fs::remove_file(&path).map_err(|source| Error::Io {
                    path: path.clone(),
                    page: None,
                    source,
                })?;
            }
            let generation = self.heap_generation().unwrap_or(0);
            self.objects = Some(crate::objects::Heap::create(&path, generation)?);
        }
        if !self.manifest.objects {
            self.record_heap()?;
        }
        let heap = self
            .objects
            .as_mut()
            .ok_or_else(|| Error::invalid("the object heap was not created (an internal error)"))?;
        heap.check_writable()?;
        Ok(heap)
    }

    /// Inserts object `id` with its exact geometry: the WKB goes to the
    /// object heap (created on first use), the MBR into the tree, in one
    /// operation (the heap's change is durable exactly when the tree's is).
    /// An error if `id` is already in the heap; nothing changes on an
    /// error.
    pub fn insert_object(&mut self, id: u64, geometry: &crate::objects::Geometry) -> Result<()> {
        crate::objects::geometry::bounding_rect(geometry)
            .map_err(|e| Error::invalid(format!("object {id}: {e}")))?;
        let object = Heap::prepare(id, &[], geometry)?;
        self.heap_protocol()?;
        if self.objects_mut()?.contains(id) {
            return Err(Error::invalid(format!(
                "object {id} is already in the object heap; delete it first"
            )));
        }
        let rect = object.rect();
        self.with_heap_frame(&object.frame(id), |index| index.insert_entry(id, rect))?;
        // No I/O: the heap was found writable above.
        self.objects_mut()?.put_prepared(id, object)
    }

    /// Deletes object `id` from the tree and the object heap, in one
    /// operation (as [`Index::insert_object`]).
    pub fn delete_object(&mut self, id: u64) -> Result<()> {
        self.heap_protocol()?;
        let heap = self.objects_mut()?;
        let g = heap
            .get(id)?
            .ok_or_else(|| Error::invalid(format!("object {id} is not in the object heap")))?;
        let rect = crate::objects::geometry::bounding_rect(&g)?;
        self.delete_object_at(id, rect)
    }

    /// [`Index::delete_object`] of `id`, whose MBR in the tree is `rect`.
    pub(super) fn delete_object_at(&mut self, id: u64, rect: Rect) -> Result<()> {
        self.heap_protocol()?;
        self.objects_mut()?;
        self.with_heap_frame(&frame::delete(id), |index| index.delete_entry(id, rect))?;
        self.objects_mut()?.delete(id)
    }

    /// Range query with refinement: the filter step on MBRs, then the exact
    /// geometries from the object heap (`crate::index::refine::refine`).
    /// `stats.candidates` counts the filter step's answers, `stats.results`
    /// the refined ones. An error if the index has no object heap.
    pub fn query_refined(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        let heap = self.objects.as_ref().ok_or_else(|| {
            Error::invalid(format!(
                "the index{} has no object heap ({}): build it from a file of geometries (GeoJSON, a CSV with a `wkt` column, FlatGeobuf, GeoParquet, Shapefile, GeoPackage or OSM PBF) to use refinement",
                self.dir.as_deref().map(|d| format!(" in {}", d.display())).unwrap_or_default(),
                crate::objects::OBJECTS_FILE
            ))
        })?;
        let filtered = self.query(window, predicate)?;
        let watch = self.watch();
        let refined = crate::index::refine::refine(filtered, heap, window, predicate);
        self.note(watch, Phase::Refinement);
        refined
    }
}
