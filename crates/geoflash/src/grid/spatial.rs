//! A grid file as a [`SpatialIndex`]: [`GridIndex`] (`grid`, `gffm`,
//! `lbgrid`, `hgrid` in the workbench).
//!
//! Grid files index **points**: every object must be a degenerate
//! rectangle (a point); a box is an error naming the kind. Queries run
//! plain or batched (Algorithms 6–8 of the batch paper: batched range
//! queries, kNN with prefetching, group point queries) as the index was
//! made. Points satisfy `intersects` and `contains` when they lie in the
//! (closed) window; a point matches `within` (contains the window) only
//! for a window that is that very point.
use std::any::Any;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{BucketLayer, DeleteOutcome, GridFile, GridOptions, MoveOutcome};
use crate::geom::{Point, Rect};
use crate::index::query::{BatchResult, KnnResult, Neighbor, Predicate, QueryResult};
use crate::spatial::{get, knn_answer, lock, point_answer, point_group_answer, SpatialIndex};
use crate::storage::PageDevice;
use crate::store::StoreStats;
use crate::{Error, Result};

/// A grid file behind the [`SpatialIndex`] trait (behind a lock: its
/// queries move pages through its buffers).
pub struct GridIndex<L: BucketLayer> {
    grid: Mutex<GridFile<L>>,
    kind: String,
    batched: bool,
}

impl<L: BucketLayer> std::fmt::Debug for GridIndex<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GridIndex")
            .field("kind", &self.kind)
            .field("batched", &self.batched)
            .finish_non_exhaustive()
    }
}

impl<L: BucketLayer + 'static> GridIndex<L> {
    /// Creates an empty grid file of kind `kind` (its name in messages) on
    /// `dev`; `batched` picks the batched query algorithms.
    pub fn create(
        kind: &str,
        dev: Arc<dyn PageDevice>,
        opts: GridOptions,
        batched: bool,
    ) -> Result<Self> {
        Ok(Self::wrap(GridFile::create(dev, opts)?, kind, batched))
    }

    /// Reopens the grid file that the last checkpoint left on `dev` (see
    /// [`GridFile::open`]); GFFM's points are counted when first asked for.
    pub fn open(
        kind: &str,
        dev: Arc<dyn PageDevice>,
        opts: GridOptions,
        batched: bool,
    ) -> Result<Self> {
        Ok(Self::wrap(GridFile::open(dev, opts)?, kind, batched))
    }

    /// [`GridIndex::open`] for reading only (see
    /// [`GridFile::open_read_only`]): changes are refused and queries
    /// write nothing, as a reader of a read-only device needs.
    pub fn open_read_only(
        kind: &str,
        dev: Arc<dyn PageDevice>,
        opts: GridOptions,
        batched: bool,
    ) -> Result<Self> {
        Ok(Self::wrap(
            GridFile::open_read_only(dev, opts)?,
            kind,
            batched,
        ))
    }

    fn wrap(grid: GridFile<L>, kind: &str, batched: bool) -> Self {
        GridIndex {
            grid: Mutex::new(grid),
            kind: kind.to_string(),
            batched,
        }
    }

    fn not_in(&self, id: u64, x: f64, y: f64) -> Error {
        Error::invalid(format!(
            "object {id} at ({x}, {y}) is not in the {} grid file",
            self.kind
        ))
    }

    /// The grid file, locked.
    pub fn grid(&self) -> MutexGuard<'_, GridFile<L>> {
        lock(&self.grid)
    }

    fn point_of(&self, id: u64, r: &Rect) -> Result<(f64, f64)> {
        if !r.is_point() {
            return Err(Error::invalid(format!(
                "index kind {} indexes points, but object {id} is a box ({}, {}, {}, {}): \
                 use a point dataset (geometry = \"point\")",
                self.kind,
                r.min_x(),
                r.min_y(),
                r.max_x(),
                r.max_y()
            )));
        }
        Ok((r.min_x(), r.min_y()))
    }
}

/// No client log: a grid file has no node store.
impl<L: BucketLayer + 'static> crate::spatial::StoreLink for GridIndex<L> {}

impl<L: BucketLayer + 'static> SpatialIndex for GridIndex<L> {
    fn family(&self) -> &'static str {
        "a grid file"
    }

    /// Exact: the grid file counts as it goes (it refuses a point it holds
    /// and tells a deletion of one it does not hold, LB-Grid from the
    /// fingerprints of its buckets' points or a read of the bucket). After
    /// a reopen LB-Grid knows its count from its scan of the log-buckets
    /// when no bucket holds a delete record; otherwise, and for GFFM, the
    /// points are counted once by one range query over the whole domain
    /// (its reads count in the device's counters). `None` if that query
    /// fails.
    fn len(&self) -> Option<u64> {
        self.grid().count().ok()
    }

    /// 2: the sub-directory pages above the bucket pages.
    fn height(&self) -> u16 {
        2
    }

    /// An object id the grid file holds (at another point) is refused, as
    /// is a point it holds.
    fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
        let (x, y) = self.point_of(id, &rect)?;
        get(&mut self.grid).insert(x, y, id)
    }

    /// Only the point held under `id`: a point held by another object is
    /// not found.
    fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        let (x, y) = self.point_of(id, &rect)?;
        match get(&mut self.grid).delete(x, y, id)? {
            DeleteOutcome::NotFound => Err(self.not_in(id, x, y)),
            DeleteOutcome::Removed | DeleteOutcome::Logged => Ok(()),
        }
    }

    /// A move ([`GridFile::update`]): the new point is checked (inside the
    /// domain, not held by another object) before the deletion, and the
    /// object is put back if the insertion fails all the same.
    fn update(&mut self, id: u64, old: Rect, new: Rect) -> Result<()> {
        let (ox, oy) = self.point_of(id, &old)?;
        let (x, y) = self.point_of(id, &new)?;
        match get(&mut self.grid).update(id, (ox, oy), (x, y))? {
            MoveOutcome::Moved => Ok(()),
            MoveOutcome::NotFound => Err(self.not_in(id, ox, oy)),
            MoveOutcome::PointHeld(other) => Err(Error::invalid(format!(
                "point ({x}, {y}) is already in the {} grid file (object id {other}); a grid file holds distinct points",
                self.kind
            ))),
        }
    }

    fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        let mut grid = self.grid();
        if predicate == Predicate::Within {
            // Only the window's own point can contain it.
            let found = match window.is_point() {
                true => grid.get(window.min_x(), window.min_y())?,
                false => None,
            };
            let at = window.center();
            return Ok(point_answer(
                found.map(|id| (id, at)),
                &window,
                predicate,
                0,
            ));
        }
        let points = match self.batched {
            true => grid.range_batched(&window)?,
            false => grid.range(&window)?,
        };
        Ok(point_answer(
            points.into_iter().map(|p| (p.id, p.point())),
            &window,
            predicate,
            0,
        ))
    }

    /// By ascending distance, ties by id, and with `ties` every point at
    /// the k-th distance too, as every structure answers. The grid file's
    /// kNN gives the `m` nearest points with ties at the m-th distance in
    /// no order, so `m` grows (doubling from `k`) while the m-th point is
    /// as near as the k-th: then every point tied with the k-th is in hand
    /// (`ties` used to be ignored, and ties at the k-th came in the grid's
    /// order).
    fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        let mut grid = self.grid();
        let mut m = k;
        loop {
            let found = match self.batched {
                true => grid.knn_prefetch(point.x, point.y, m)?,
                false => grid.knn(point.x, point.y, m)?,
            };
            let kth = found.get(k.wrapping_sub(1)).map(|f| f.0);
            if k > 0 && found.len() == m && found.last().map(|f| f.0) == kth {
                m = m.saturating_mul(2);
                continue;
            }
            let mut neighbors: Vec<Neighbor> = found
                .into_iter()
                .map(|(distance, p)| Neighbor {
                    id: p.id,
                    rect: Rect::from_point(p.point()),
                    distance,
                })
                .collect();
            neighbors.sort_by(|a, b| a.distance.total_cmp(&b.distance).then(a.id.cmp(&b.id)));
            match kth {
                Some(d) if ties => neighbors.retain(|n| n.distance <= d),
                _ => neighbors.truncate(k),
            }
            return Ok(knn_answer(neighbors));
        }
    }

    fn point_group(&self, points: &[Point]) -> Result<BatchResult> {
        let pts: Vec<(f64, f64)> = points.iter().map(|p| (p.x, p.y)).collect();
        let mut grid = self.grid();
        let found = match self.batched {
            true => grid.group_get(&pts)?,
            false => grid.group_get_plain(&pts)?,
        };
        Ok(point_group_answer(points, &found))
    }

    fn checkpoint(&mut self) -> Result<()> {
        get(&mut self.grid).checkpoint()
    }

    /// The two buffers' counters (sub-directories and buckets) as store
    /// counters.
    fn store_stats(&self) -> StoreStats {
        let g = self.grid().stats();
        let (d, b) = (g.dir_buffer, g.bucket_buffer);
        StoreStats {
            node_gets: d.hits + d.misses + b.hits + b.misses,
            buffer_hits: d.hits + b.hits,
            buffer_misses: d.misses + b.misses,
            node_reads: d.misses + b.misses,
            node_writes: d.pages_written + b.pages_written,
            flushes: d.write_batches + b.write_batches,
            flushed_nodes: d.pages_written + b.pages_written,
            ..StoreStats::default()
        }
    }

    /// The pages the grid file occupies (page 0 and its metadata included).
    fn pages_in_use(&self) -> u64 {
        self.grid().pages_in_use()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
