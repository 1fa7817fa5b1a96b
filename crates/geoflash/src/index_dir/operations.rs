//! Updates and queries of an [`Index`]: insertion, deletion and update of
//! records (by the old rectangle, or by id alone through the index's
//! locator), range queries (one window or a batch in one traversal) and
//! nearest neighbours, each timed as a front-end phase, its errors naming
//! the page file.
use super::Index;
use crate::geom::{Point, Rect};
use crate::index::query::{
    checked_point, BatchKeys, BatchResult, KeyResult, KnnResult, Predicate, QueryResult,
};
use crate::index::checked;
use crate::metrics::Phase;
use crate::spatial::{SpatialIndex, Sought};
use crate::{Error, Result};

/// How many updates by id a batch warms at a time with
/// [`Index::warm_for_updates`] before applying them: enough for the
/// processor to overlap their memory latencies, few enough that their nodes
/// stay in its caches until their turn (16 and 32 measured alike at 10 M
/// objects, 8 less well).
pub const WARM_BATCH: usize = 16;

/// Why an object with an exact geometry is not moved by rectangle.
const MOVE_AN_OBJECT: &str = "has an exact geometry in the object heap, whose box is its own: delete it and \
                              insert it again with its new geometry";

impl Index {
    /// Runs the update `f` on the structure as a timed index phase, its
    /// errors naming the page file; refused on a read-only index. First the
    /// checkpoint the previous operation made due (by time, when it was a
    /// durability point of the store's mode, or by the record map's
    /// frames; `checkpoints.rs`): run before this operation changes
    /// anything, its error is this operation's, and an operation whose
    /// commit is durable never reports a failure.
    ///
    /// An update that fails for another reason than bad input (damage
    /// found on the way, a device error) may have written a part of itself
    /// in place: a journaled index then refuses every later change and
    /// checkpoint (`JournaledDevice::fail`), so that no checkpoint makes
    /// that part durable, and the next open rolls back to the last one.
    /// (The logged stores refuse changes after such an error by themselves.)
    /// Whatever the store, the index then answers nothing more until it is
    /// opened again (`failure.rs`): its structure in memory may hold the
    /// part.
    fn change(&mut self, f: impl FnOnce(&mut dyn SpatialIndex) -> Result<()>) -> Result<()> {
        self.writable_by_key()?;
        self.refuse_if_failed()?;
        if let Some(journal) = &self.journal {
            journal.refuse_if_failed()?;
        }
        if !self.records.staged {
            self.checkpoint_if_due()?;
        }
        let watch = self.watch();
        let done = f(&mut *self.tree).map_err(|e| self.locate(e));
        self.note(watch, Phase::Index);
        if let (Err(e), Some(journal)) = (&done, &self.journal) {
            if !e.is_user_error() {
                journal.fail(format!(
                    "an operation failed part-way ({e}); reopen the index: its pages roll back to the last checkpoint"
                ));
            }
        }
        self.noting_failure(done)
    }

    /// Runs the query `f` on the structure as a timed filter phase, its
    /// errors naming the page file.
    pub(super) fn ask<T>(&self, f: impl FnOnce(&dyn SpatialIndex) -> Result<T>) -> Result<T> {
        self.refuse_if_failed()?;
        let watch = self.watch();
        let r = f(&*self.tree).map_err(|e| self.locate(e));
        self.note(watch, Phase::Filter);
        r
    }

    /// Inserts object `id` with MBR `rect` (one atomic operation). In an
    /// index with an object heap the entry has no stored geometry (its
    /// box stands for it in refined queries); an error if the heap holds
    /// `id` already.
    pub fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
        self.refuse_stored_geometry(id, "is already in the index with an exact geometry; delete it first")?;
        self.insert_entry(id, rect)
    }

    /// The tree's insertion of `id` at `rect` (see [`Index::insert`]).
    pub(super) fn insert_entry(&mut self, id: u64, rect: Rect) -> Result<()> {
        let done = self.change(|t| t.insert(id, rect));
        self.locator.track(&done, |m| {
            m.insert(id, rect);
        });
        done
    }

    /// Deletes object `id` with MBR `rect`; an error if it is absent. An
    /// object the object heap holds is deleted from it too, in the same
    /// operation (as [`Index::delete_object`]).
    pub fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        // (A store whose log predates the heap's frames deletes the entry
        // alone, as it always did: its heap cannot change with the tree.)
        if self.objects.as_ref().is_some_and(|h| h.contains(id)) && self.heap_protocol().is_ok() {
            return self.delete_object_at(id, rect);
        }
        self.delete_entry(id, rect)
    }

    /// The tree's deletion of `id` at `rect` (see [`Index::delete`]).
    pub(super) fn delete_entry(&mut self, id: u64, rect: Rect) -> Result<()> {
        let done = self.change(|t| t.delete(id, rect));
        self.locator.track(&done, |m| {
            m.remove(&id);
        });
        done
    }

    /// An error naming `id` when the object heap holds it: its box is its
    /// geometry's, so it is changed as an object, never by rectangle.
    fn refuse_stored_geometry(&self, id: u64, why: &str) -> Result<()> {
        if self.objects.as_ref().is_some_and(|h| h.contains(id)) {
            return Err(Error::invalid(format!("object {id} {why}")));
        }
        Ok(())
    }

    /// Moves object `id` from `old` to `new` (an R-tree or R*-tree rewrites
    /// the record in its leaf when the leaf's rectangle contains `new`: see
    /// `crate::index::RTree::update`). An error for an object with an exact
    /// geometry in the object heap (delete it and insert it again).
    pub fn update(&mut self, id: u64, old: Rect, new: Rect) -> Result<()> {
        self.refuse_stored_geometry(id, MOVE_AN_OBJECT)?;
        let done = self.change(|t| t.update(id, old, new));
        self.locator.track(&done, |m| {
            m.insert(id, new);
        });
        done
    }

    /// Moves object `id` to rectangle `new` without being told where it is
    /// now: its current rectangle comes from the index's id → rectangle
    /// locator, then this is [`Index::update`] (one atomic operation; in
    /// place in an R-tree or R*-tree when the object stays inside its
    /// leaf's rectangle). Every structure takes it; those of points (the
    /// xBR+-tree, the grid files) take a point as `new`, as for
    /// [`Index::insert`].
    ///
    /// The locator is a map from id to rectangle built by one query over
    /// the whole index at the first update by id after the index was
    /// created or opened (every page read once), then kept in step by the
    /// index's insertions, deletions and updates: 20 bytes of memory per
    /// record while the ids are dense, about 40–70 otherwise (the
    /// rectangle in single precision, rounded outward, within which the
    /// structure finds the exact one), with a hint of the leaf each record
    /// was last rewritten in (so that the update reads that leaf, not every
    /// leaf whose rectangle contains the record's). An id the index does
    /// not hold is an error naming it, and the index is unchanged; so is a
    /// new rectangle the structure refuses (a structure of points: a box, a
    /// point outside its domain or held by another object), and the
    /// locator is kept.
    ///
    /// ```
    /// use geoflash::engine::Predicate;
    /// use geoflash::geom::Rect;
    /// use geoflash::{Index, IndexOptions};
    ///
    /// let opts = IndexOptions { device: "mem:".parse()?, ..IndexOptions::default() };
    /// let mut index = Index::create_temporary(&opts)?;
    /// for i in 0..100u64 {
    ///     let x = i as f64;
    ///     index.insert(i, Rect::new(x, 0.0, x + 0.5, 0.5)?)?;
    /// }
    /// // Object 7 moves a little, object 8 far away: no old rectangle needed.
    /// index.update_by_id(7, Rect::new(7.1, 0.1, 7.4, 0.4)?)?;
    /// index.update_by_id(8, Rect::new(500.0, 500.0, 501.0, 501.0)?)?;
    /// let found = index.query(Rect::new(400.0, 400.0, 600.0, 600.0)?, Predicate::Intersects)?;
    /// assert_eq!(found.sorted_ids(), vec![8]);
    /// assert!(index.update_by_id(1000, Rect::new(0.0, 0.0, 1.0, 1.0)?).is_err());
    /// assert_eq!(index.len(), 100);
    /// # Ok::<(), geoflash::Error>(())
    /// ```
    pub fn update_by_id(&mut self, id: u64, new: Rect) -> Result<()> {
        self.writable_by_key()?;
        self.refuse_stored_geometry(id, MOVE_AN_OBJECT)?;
        let mut rebuilt = false;
        loop {
            let (within, near) = self.in_locator(id)?.ok_or_else(|| {
                Error::invalid(format!(
                    "object {id} is not in the index: nothing to update"
                ))
            })?;
            match self.update_within(id, within, new, near)? {
                Sought::Moved(_) => return Ok(()),
                Sought::Absent if !rebuilt => {
                    // Not where the map says: a stale map (changed another
                    // way than by this index's operations), rebuilt.
                    self.locator.forget();
                    rebuilt = true;
                }
                Sought::Absent => {
                    return Err(Error::corrupt(
                        None,
                        format!(
                            "object {id} is in the id locator just rebuilt from the index, \
                             but the index finds no such object within {within:?}"
                        ),
                    ))
                }
            }
        }
    }

    /// The structure's [`SpatialIndex::update_within`] as one operation
    /// of this index ([`change`](Self::change)), the locator kept in step.
    pub(super) fn update_within(
        &mut self,
        id: u64,
        within: Rect,
        new: Rect,
        near: Option<u64>,
    ) -> Result<Sought> {
        let mut sought = Sought::Absent;
        let done = self.change(|t| {
            sought = t.update_within(id, within, new, near)?;
            Ok(())
        });
        match sought {
            Sought::Moved(at) => self.locator.track(&done, |m| m.place(id, new, at)),
            Sought::Absent => self.locator.track(&done, |_| {}),
        }
        done.map(|()| sought)
    }

    /// The locator's rectangle of object `id` (its own, rounded outward)
    /// and the hint of where it is stored, the map built first if it is
    /// not (timed as an index phase); `None` when the index does not hold
    /// `id`. An error drops the map.
    fn in_locator(&mut self, id: u64) -> Result<Option<(Rect, Option<u64>)>> {
        let records = self.tree.len();
        let tree = &self.tree;
        let scan = |visit: &mut dyn FnMut(u64, Rect, Option<u64>)| tree.visit_located(visit);
        let watch = self.watch();
        let found = self.locator.find(id, records, scan);
        self.note(watch, Phase::Index);
        found.map_err(|e| {
            self.locator.forget();
            self.locate(e)
        })
    }

    /// A hint that objects `ids` are about to be moved by
    /// [`update_by_id`](Self::update_by_id): the id locator's entries of
    /// `ids` and the nodes they point to (those the store holds in memory)
    /// are loaded into the processor's caches now, in two tight passes, so
    /// that their memory latencies overlap instead of stalling each update
    /// in turn. Nothing is read from the device, and no answer, counter or
    /// buffer order changes; before the locator is built (the first update
    /// by id builds it) this does nothing. A batch of updates calls it with
    /// the ids of each [`WARM_BATCH`] updates before applying them (about
    /// 8 % faster moves at 10 M objects, `docs/benchmarks.md`).
    ///
    /// ```
    /// use geoflash::geom::Rect;
    /// use geoflash::{Index, IndexOptions, WARM_BATCH};
    ///
    /// let opts = IndexOptions { device: "mem:".parse()?, ..IndexOptions::default() };
    /// let mut index = Index::create_temporary(&opts)?;
    /// for i in 0..100u64 {
    ///     index.insert(i, Rect::new(i as f64, 0.0, i as f64 + 0.5, 0.5)?)?;
    /// }
    /// let moves: Vec<(u64, Rect)> = (0..100u64)
    ///     .map(|i| Ok((i, Rect::new(i as f64 + 0.1, 0.1, i as f64 + 0.4, 0.4)?)))
    ///     .collect::<geoflash::Result<_>>()?;
    /// for chunk in moves.chunks(WARM_BATCH) {
    ///     let ids: Vec<u64> = chunk.iter().map(|m| m.0).collect();
    ///     index.warm_for_updates(&ids);
    ///     for &(id, r) in chunk {
    ///         index.update_by_id(id, r)?;
    ///     }
    /// }
    /// assert_eq!(index.len(), 100);
    /// # Ok::<(), geoflash::Error>(())
    /// ```
    pub fn warm_for_updates(&self, ids: &[u64]) {
        let pages = self.locator.hints(ids);
        if !pages.is_empty() {
            self.tree.warm_pages(&pages);
        }
    }

    /// The warm-up of a batch of updates by id, for the loop that applies
    /// them: before update `i` of the batch whose ids are `ids`, when `i` is
    /// a multiple of [`WARM_BATCH`], [`warm_for_updates`](Self::warm_for_updates)
    /// of the next [`WARM_BATCH`] ids; nothing otherwise.
    pub fn warm_before_update(&self, i: usize, ids: &[u64]) {
        if i.is_multiple_of(WARM_BATCH) {
            let ahead = ids.get(i..).unwrap_or_default();
            self.warm_for_updates(ahead.get(..WARM_BATCH).unwrap_or(ahead));
        }
    }

    /// Range query. A window that [`Rect::new`] refuses (one built with
    /// [`Rect::from_point`] of a point it would refuse) is an error,
    /// whatever the structure; so in every query below.
    pub fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        let window = checked(window)?;
        self.ask(|t| t.query(window, predicate))
    }

    /// [`query`](Self::query) answering with record keys alone (8 bytes a
    /// record found: the R-tree family collects no rectangle).
    pub fn query_keys(&self, window: Rect, predicate: Predicate) -> Result<KeyResult> {
        let window = checked(window)?;
        self.ask(|t| t.query_keys(window, predicate))
    }

    /// How many objects [`query`](Self::query) would return, without
    /// collecting them.
    pub fn count(&self, window: Rect, predicate: Predicate) -> Result<u64> {
        let window = checked(window)?;
        self.ask(|t| t.count(window, predicate))
    }

    /// The rectangle covering every object, `None` for an empty index
    /// (one node read for the R-tree family, a query over everything for
    /// the other structures).
    pub fn bounds(&self) -> Result<Option<Rect>> {
        self.ask(|t| t.bounds())
    }

    /// Batched range queries in one traversal.
    pub fn query_batch(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchResult> {
        check_all(windows, |w| checked(*w))?;
        self.ask(|t| t.query_batch(windows, predicate))
    }

    /// Batched range queries in one traversal, answering with record keys
    /// alone (no rectangle copied per record).
    pub fn query_batch_keys(
        &self,
        windows: &[Rect],
        predicate: Predicate,
    ) -> Result<Vec<KeyResult>> {
        check_all(windows, |w| checked(*w))?;
        self.ask(|t| t.query_batch_keys(windows, predicate))
    }

    /// Batched range queries in one traversal, answering with one flat
    /// list of record keys ([`BatchKeys`]).
    pub fn query_batch_flat(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchKeys> {
        check_all(windows, |w| checked(*w))?;
        self.ask(|t| t.query_batch_flat(windows, predicate))
    }

    /// The `k` nearest objects to `point` (and every object tied with the k-th when `ties`).
    /// A point with a coordinate that [`Point::new`] refuses (not finite, or
    /// beyond [`crate::geom::MAX_COORD`]) is an error, whatever the structure.
    pub fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        let point = checked_point(point)?;
        self.ask(|t| t.nearest(point, k, ties))
    }

    /// [`Index::nearest`] of each point of `points`, one answer per point in
    /// order, each as `nearest` gives it. On the R-tree family with batched
    /// reads the searches run together (up to 256 at a time) and read the
    /// nodes they need next as one device batch, so a cold index is read
    /// with many pages in flight; other indices, and an index in memory
    /// (nothing to read: running together only costs it CPU, 15–20 % on
    /// 10,000 points), search one point after the other.
    pub fn nearest_batch(&self, points: &[Point], k: usize, ties: bool) -> Result<Vec<KnnResult>> {
        check_all(points, |p| checked_point(*p))?;
        if self.dir().is_none() {
            return points.iter().map(|p| self.nearest(*p, k, ties)).collect();
        }
        self.ask(|t| t.nearest_batch(points, k, ties))
    }
}

/// `Ok` when `check` accepts every item of `items` (the query points and
/// windows of a batch, refused before the structure sees any), else the
/// first refusal.
pub(super) fn check_all<T, U>(items: &[T], check: impl Fn(&T) -> Result<U>) -> Result<()> {
    for item in items {
        check(item)?;
    }
    Ok(())
}
