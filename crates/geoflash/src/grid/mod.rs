//! Grid files for NVMe (Fevgas' thesis, Ch. 3): the two-level Grid File,
//! **GFFM** (buckets updated in place behind hot/cold buffers that write in
//! batches) and **LB-Grid** (log-buckets and an in-memory bucket translation
//! table), with the thesis' batched range, kNN and group point queries
//! beside their plain (unbatched) variants.
//!
//! # Structure
//! A [`GridFile`] indexes distinct 2-D points (each with a `u64` id) inside a
//! declared domain. The **root directory** (a [`dir::Grid`] whose cells hold
//! sub-directory page ids, with its linear scales) lives in memory; each
//! **sub-directory** is one page holding its own scales and grid array,
//! whose cells hold bucket references; several cells may share a bucket (the
//! cells of one bucket form a box, its *region*). A point lookup reads one
//! sub-directory and one bucket.
//!
//! What a bucket reference means is the [`BucketLayer`]'s business:
//! - [`gffm::InPlaceBuckets`] ([`Gffm`]): the reference is the page id of a
//!   bucket page, rewritten in place;
//! - [`lbgrid::LogBuckets`] ([`LbGrid`]): the reference is a logical bucket
//!   id; the BTT maps it to the log-bucket pages holding its records.
//!
//! Sub-directories and bucket (or log-bucket) pages have separate
//! [`buffer::HotCold`] buffers (Algorithms 4–5).
//!
//! # Splits and merges
//! An overflowing bucket splits along an existing boundary of its region
//! when one separates its points, else a new boundary is added to the
//! sub-directory's scale at the median of its points (the axis with the most
//! distinct values); pieces still too full split again. A sub-directory
//! whose page would overflow splits at its middle boundary (the axis with
//! more boundaries): buckets straddling that boundary are split, the boundary
//! is added to the root scale if missing, and the root cells are divided —
//! the split propagates to the root. After a delete leaves a bucket at or
//! below `merge_threshold` of its capacity, it merges with a neighbour whose
//! region forms a box with its own, if the two fit in `merge_fill` of a
//! bucket; boundaries that no longer separate regions are removed, and a
//! sub-directory that has shrunk to a quarter of a page merges with a
//! neighbouring sub-directory when the result fits a page (propagation to
//! the root, whose redundant boundaries are removed too). A merge that
//! fails (a neighbour that cannot be read, LB-Grid's device full) changes
//! nothing and is skipped: the deletion stands and reports success.
//!
//! # Persistence
//! Like the plain store, a grid file is consistent **at checkpoints**
//! ([`GridFile::checkpoint`] writes every dirty page in batches, then the
//! metadata — root directory, counters, for LB-Grid the list of live
//! log-bucket pages — as a chain of checksummed pages, then page 0, and
//! syncs). It has no log of its own: a crash between checkpoints loses the
//! changes since the last one and may leave pages of the next state on the
//! device. [`GridFile::open`] reads page 0 and the chain; the free pages are
//! recomputed from what is reachable (nothing else is persisted). LB-Grid's
//! BTT is **rebuilt at open** by reading every live log-bucket page (in
//! batches) and replaying its records — see [`lbgrid`].
//!
//! # H-Grid (hybrid storage)
//! With [`GridOptions::hybrid`] set, a GFFM grid file becomes **H-Grid**
//! (thesis §4.3): every access to a sub-directory or bucket feeds the
//! hot-region detector of [`hot`] (Eqs. 4.1–4.2, Algorithms 9–10); a hot
//! page is re-tagged for the fast tier in its buffer and marked dirty, and
//! the buffers keep one write buffer (cold list) per tier, each flushed as
//! one batch after a [`PageDevice::hint_tier`] — so on a
//! [`HybridDevice`](crate::storage::hybrid::HybridDevice) the hot pages move to
//! the 3D XPoint tier at their next write and are read from there (the
//! device reads each page where it lives: Algorithm 11's order, memory
//! first). The special case puts every sub-directory on the fast tier. On a
//! device of one tier the hints are ignored and H-Grid behaves as GFFM.
//!
//! # Bad input
//! Points outside the domain or with non-finite coordinates are
//! [`Error::InvalidInput`]; so is inserting a point the grid file already
//! holds, whatever the layer (LB-Grid appends without reading, the
//! thesis' design, when the fingerprints of its bucket's points rule the
//! point out, and reads the bucket when one matches), and inserting an
//! object id the grid file already holds at another point (the grid file
//! keeps the set of its ids in memory, like the FOR-tree: created empty,
//! or built at the first insertion after an open by one range query over
//! the domain, unless LB-Grid learnt them from the scan of its
//! log-buckets at the open). A deletion removes only the point held under the
//! object's id: an absent point, or one held by another object, is
//! [`DeleteOutcome::NotFound`] and changes nothing (LB-Grid reads the
//! bucket unless its fingerprints rule the point out).
//!
//! An update (a move) checks everything the insertion could refuse — the
//! new point's domain, its validity, another object holding it — before
//! the deletion, and puts the object back where it was if the insertion
//! fails all the same (device full, points no boundary separates).
//!
//! # Read-only access
//! A grid file opened with [`GridFile::open_read_only`] (a reader under a
//! rollback journal) refuses changes and never marks a page dirty: H-Grid
//! still counts accesses, but its queries do not re-tag hot pages for the
//! fast tier (that would make them write at eviction).
use std::collections::{BinaryHeap, HashSet};

use crate::geom::{Point, Rect};
use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

pub mod buffer;
pub mod codec;
mod config;
pub mod dir;
mod file;
pub mod gffm;
pub mod hot;
#[cfg(test)]
mod integrity_tests;
pub mod lbgrid;
#[cfg(test)]
mod review_tests;
mod spatial;
#[cfg(test)]
mod tests;

pub use buffer::BufferStats;
pub use config::{GridConfig, GridKind, GridSettings};
pub use file::{GridFile, MoveOutcome};
pub use spatial::GridIndex;

/// GFFM: the two-level grid file with in-place buckets.
#[cfg(test)]
pub type Gffm = GridFile<gffm::InPlaceBuckets>;
/// LB-Grid: the two-level grid file with log-buckets and a BTT.
#[cfg(test)]
pub type LbGrid = GridFile<lbgrid::LogBuckets>;

/// One indexed point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridPoint {
    /// x coordinate.
    pub x: f64,
    /// y coordinate.
    pub y: f64,
    /// The caller's id for the point.
    pub id: u64,
}

impl GridPoint {
    /// The point as a [`Point`].
    pub fn point(&self) -> Point {
        Point {
            x: self.x,
            y: self.y,
        }
    }

    /// True if both coordinates equal `(x, y)`.
    pub fn at(&self, x: f64, y: f64) -> bool {
        self.x == x && self.y == y
    }
}

/// Parameters of a grid file, checked once by [`GridOptions::validate`].
#[derive(Debug, Clone, PartialEq)]
pub struct GridOptions {
    /// The declared domain: every point must lie inside (closed).
    pub domain: Rect,
    /// Hot-list pages of the sub-directory buffer (also the group size of
    /// batched sub-directory reads).
    pub dir_hot_pages: usize,
    /// Hot-list pages of the bucket / log-bucket buffer (also the group size
    /// of batched bucket reads, the thesis' LBB).
    pub bucket_hot_pages: usize,
    /// Cold-list pages of each buffer: the size of every batch write
    /// (the thesis' CLRU; 128 pages by default).
    pub cold_pages: usize,
    /// A bucket at or below this fraction of its capacity after a delete
    /// tries to merge (0.3 in the thesis).
    pub merge_threshold: f64,
    /// Two buckets merge only if their points fill at most this fraction of one bucket.
    pub merge_fill: f64,
    /// H-Grid's hot-region placement (`None`: a flat grid file).
    pub hybrid: Option<hot::HybridOptions>,
}

impl GridOptions {
    /// Defaults for `domain`: 256 hot directory pages, 512 hot bucket pages,
    /// cold lists of 128 pages, merge at 30 % into at most 70 %.
    pub fn new(domain: Rect) -> GridOptions {
        GridOptions {
            domain,
            dir_hot_pages: 256,
            bucket_hot_pages: 512,
            cold_pages: 128,
            merge_threshold: 0.3,
            merge_fill: 0.7,
            hybrid: None,
        }
    }

    /// Checks every parameter; the error names the bad one.
    pub fn validate(&self) -> Result<()> {
        let d = &self.domain;
        Rect::new(d.min_x(), d.min_y(), d.max_x(), d.max_y())?;
        if !(d.max_x() > d.min_x() && d.max_y() > d.min_y()) {
            return Err(Error::invalid(
                "grid domain must have a positive width and height",
            ));
        }
        if self.dir_hot_pages < 2 || self.bucket_hot_pages < 2 || self.cold_pages < 1 {
            return Err(Error::invalid(format!(
                "grid buffers need at least 2 hot pages and 1 cold page (dir_hot_pages {}, bucket_hot_pages {}, cold_pages {})",
                self.dir_hot_pages, self.bucket_hot_pages, self.cold_pages
            )));
        }
        let ok = |v: f64| v > 0.0 && v < 1.0;
        if !ok(self.merge_threshold)
            || !ok(self.merge_fill)
            || self.merge_threshold > self.merge_fill
        {
            return Err(Error::invalid(format!(
                "grid merge_threshold {} and merge_fill {} must lie in (0, 1) with threshold <= fill",
                self.merge_threshold, self.merge_fill
            )));
        }
        if let Some(h) = &self.hybrid {
            h.validate()?;
        }
        Ok(())
    }
}

/// Counters of a grid file (device counters come from the device).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct GridStats {
    /// Bucket splits.
    pub bucket_splits: u64,
    /// Sub-directory splits.
    pub dir_splits: u64,
    /// Bucket merges.
    pub bucket_merges: u64,
    /// Sub-directory merges.
    pub dir_merges: u64,
    /// The sub-directory buffer's counters.
    pub dir_buffer: BufferStats,
    /// The bucket (log-bucket) buffer's counters.
    pub bucket_buffer: BufferStats,
    /// H-Grid: sub-directories in the hybrid table (hot).
    pub hot_dirs: u64,
    /// H-Grid: buckets in the hybrid table (hot).
    pub hot_buckets: u64,
}

/// What a delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The point was found with the object's id and removed (GFFM).
    Removed,
    /// No point with the object's id was there (a point held under
    /// another id included): nothing changed.
    NotFound,
    /// The point is held with the object's id (LB-Grid read its bucket
    /// to be sure) and a delete record was appended to the log.
    Logged,
}

/// The object ids a bucket layer learnt at open, for the grid file's id
/// set ([`BucketLayer::take_ids`]).
#[derive(Debug, Default)]
pub struct OpenedIds(pub(crate) crate::index::object_ids::ObjectIds);

/// Result of [`BucketLayer::insert`].
#[derive(Debug)]
pub enum InsertOutcome {
    /// Stored.
    Done,
    /// The point is already present (a layer that checks).
    Duplicate,
    /// The bucket is full: here are all its points plus the new one; the
    /// caller splits.
    Full(Vec<GridPoint>),
}

/// Page allocation shared by directories and buckets: the free pages (lowest
/// first) and the end of the used space. Page 0 is the superblock.
///
/// The free pages are kept as ranges, so that a grid file reopened with
/// many free pages below its end (after mass deletions, or a damaged
/// metadata page recording a huge end) costs memory for the ranges, not
/// for every page.
#[derive(Debug, Clone)]
pub struct Alloc {
    next: PageId,
    /// Free pages as `start -> end` (exclusive), disjoint and not adjacent.
    free: std::collections::BTreeMap<PageId, PageId>,
    /// Pages in `free`.
    free_pages: u64,
    capacity: u64,
}

impl Alloc {
    /// An allocator whose first fresh page is `next`.
    pub fn new(next: PageId, capacity: u64) -> Alloc {
        Alloc {
            next,
            free: Default::default(),
            free_pages: 0,
            capacity,
        }
    }

    /// A page: the lowest free one, else a fresh one; [`Error::DeviceFull`] at capacity.
    pub fn alloc(&mut self) -> Result<PageId> {
        if let Some((start, end)) = self.free.pop_first() {
            if start + 1 < end {
                self.free.insert(start + 1, end);
            }
            self.free_pages -= 1;
            return Ok(start);
        }
        if self.next >= self.capacity {
            return Err(Error::DeviceFull(format!(
                "grid file needs page {} but the device holds {} pages",
                self.next, self.capacity
            )));
        }
        self.next += 1;
        Ok(self.next - 1)
    }

    /// Returns `p` to the free pages (a page already free stays free once).
    pub fn free(&mut self, p: PageId) {
        self.free_range(p, p.saturating_add(1));
    }

    /// Returns pages `a..b` to the free pages (page 0 and pages from
    /// [`Alloc::next`] on are ignored; pages already free stay free once).
    pub fn free_range(&mut self, a: PageId, b: PageId) {
        let (mut a, mut b) = (a.max(1), b.min(self.next));
        if a >= b {
            return;
        }
        // Absorb the range starting at or before `a` that reaches it.
        if let Some((&s, &e)) = self.free.range(..=a).next_back() {
            if e >= a {
                if e >= b {
                    return;
                }
                self.free.remove(&s);
                self.free_pages -= e - s;
                a = s;
            }
        }
        // Absorb every range starting inside `a..=b`.
        while let Some((&s, &e)) = self.free.range(a..=b).next() {
            self.free.remove(&s);
            self.free_pages -= e - s;
            b = b.max(e);
        }
        self.free.insert(a, b);
        self.free_pages += b - a;
    }

    /// One past the highest page ever allocated.
    pub fn next(&self) -> PageId {
        self.next
    }

    /// Pages in use (allocated and not free), the superblock included.
    pub fn in_use(&self) -> u64 {
        self.next - self.free_pages
    }

    /// Pages [`Alloc::alloc`] would hand out before it refuses, once the
    /// pages of `freed` (distinct) are freed too.
    pub fn available_after(&self, freed: &[PageId]) -> u64 {
        let in_use = |p: PageId| {
            p >= 1
                && p < self.next
                && self
                    .free
                    .range(..=p)
                    .next_back()
                    .is_none_or(|(_, &e)| e <= p)
        };
        let freed = freed.iter().filter(|&&p| in_use(p)).count() as u64;
        self.capacity.saturating_sub(self.next) + self.free_pages + freed
    }
}

/// What a bucket layer writes with: the grid file's device and its page
/// allocator, borrowed together for one update.
pub struct BucketIo<'a> {
    /// The grid file's device.
    pub dev: &'a dyn PageDevice,
    /// The grid file's page allocator.
    pub alloc: &'a mut Alloc,
}

/// How a grid file keeps its buckets (GFFM in place, LB-Grid in log-buckets).
/// The directory algorithms in [`GridFile`] are written once against it.
pub trait BucketLayer: Sized + Send {
    /// Kind code stored in the superblock.
    const KIND: u8;
    /// Name for messages and reports.
    const NAME: &'static str;
    /// True if inserts and deletes do not read the bucket (LB-Grid): its
    /// size is then an estimate, and a bucket written before deletes were
    /// checked against its points may hold more than its capacity
    /// (deletes of absent points were logged as hits); the next read
    /// corrects the estimate and the next insert splits it.
    const BLIND_UPDATES: bool;

    /// A fresh, empty layer.
    fn new(opts: &GridOptions, page_size: usize) -> Result<Self>;
    /// Points a bucket holds at most.
    fn capacity(&self) -> usize;
    /// Pages that reading bucket `b` takes (for grouping batched reads).
    fn pages_of(&self, b: u64) -> usize;
    /// Points bucket `b` is expected to hold, without reading it (exact
    /// when known; for kNN prefetch sizing).
    fn size_hint(&self, b: u64) -> usize;
    /// Creates buckets with these points (replacing `old`, which are
    /// dropped) and returns their references, one per piece, in order.
    fn rewrite(
        &mut self,
        io: &mut BucketIo<'_>,
        old: &[u64],
        pieces: Vec<Vec<GridPoint>>,
    ) -> Result<Vec<u64>>;
    /// Points of many buckets, reading every missing page in one batch.
    fn read_many(&mut self, dev: &dyn PageDevice, bs: &[u64]) -> Result<Vec<Vec<GridPoint>>>;
    /// Points of one bucket the plain way (the page through the buffer;
    /// LB-Grid: readBucket, one batch for the bucket's log-buckets).
    fn read_one(&mut self, dev: &dyn PageDevice, b: u64) -> Result<Vec<GridPoint>>;
    /// Inserts `p` into bucket `b`.
    fn insert(&mut self, io: &mut BucketIo<'_>, b: u64, p: GridPoint) -> Result<InsertOutcome>;
    /// Deletes object `p.id` at `(p.x, p.y)` from bucket `b`: a point held
    /// under another id is not it ([`DeleteOutcome::NotFound`], nothing
    /// changes). Returns the outcome and the bucket's (estimated) number of
    /// points afterwards.
    fn delete(
        &mut self,
        io: &mut BucketIo<'_>,
        b: u64,
        p: GridPoint,
    ) -> Result<(DeleteOutcome, usize)>;
    /// True if the layer knows without reading a page that bucket `b`
    /// holds no point at `(x, y)` (LB-Grid's fingerprints); false when
    /// only a read can tell (GFFM, the default).
    fn surely_absent(&self, b: u64, x: f64, y: f64) -> bool {
        let _ = (b, x, y);
        false
    }
    /// How many points the layer holds, when it knows without reading
    /// (LB-Grid, once the fingerprints of every bucket are known); `None`
    /// by default.
    fn held_len(&self) -> Option<u64> {
        None
    }
    /// The object ids held, once, when the layer learnt them at open
    /// without a read of its own (LB-Grid, when every bucket's points are
    /// known from the scan of its log-buckets); `None` by default (the
    /// grid file then reads its buckets at the first insertion).
    fn take_ids(&mut self) -> Option<OpenedIds> {
        None
    }
    /// Writes every dirty page.
    fn flush(&mut self, dev: &dyn PageDevice) -> Result<()>;
    /// Appends the layer's metadata.
    fn encode_meta(&self, w: &mut codec::Writer) -> Result<()>;
    /// Reopens the layer from its metadata; `live` holds every bucket
    /// reference of the sub-directories. Returns the layer and the pages it uses.
    fn open(
        opts: &GridOptions,
        dev: &dyn PageDevice,
        r: &mut codec::Reader<'_>,
        live: &HashSet<u64>,
    ) -> Result<(Self, Vec<PageId>)>;
    /// The bucket buffer's counters.
    fn buffer_stats(&self) -> BufferStats;
    /// Moves bucket `b` to `tier` at its next write, if the layer places
    /// buckets (GFFM's in-place buckets do; LB-Grid's log-buckets, shared
    /// by many buckets, do not: the default ignores it).
    fn set_tier(&mut self, dev: &dyn PageDevice, b: u64, tier: crate::storage::Tier) -> Result<()> {
        let _ = (dev, b, tier);
        Ok(())
    }
}

/// A total order on distances for heaps.
#[derive(Debug, Clone, Copy)]
struct Dist(f64);
ordered_by!(Dist, |a, b| a.0.total_cmp(&b.0));

/// The k best candidates so far: a max-heap on distance (the thesis' kNNqueue).
#[derive(Debug, Default)]
struct KBest {
    k: usize,
    heap: BinaryHeap<(Dist, u64, u64, u64)>,
}

impl KBest {
    fn new(k: usize) -> Self {
        KBest {
            k,
            heap: BinaryHeap::new(),
        }
    }
    /// Distance of the k-th best, infinite while fewer than k are known.
    fn kth(&self) -> f64 {
        if self.heap.len() < self.k {
            f64::INFINITY
        } else {
            self.heap.peek().map_or(f64::INFINITY, |t| t.0 .0)
        }
    }
    /// Points still missing to k.
    fn missing(&self) -> usize {
        self.k.saturating_sub(self.heap.len())
    }
    fn offer(&mut self, d: f64, p: &GridPoint) {
        // Fewer than k: take it (the listing's `size <= k` is off by one).
        if self.heap.len() < self.k {
            self.heap
                .push((Dist(d), p.x.to_bits(), p.y.to_bits(), p.id));
        } else if d < self.kth() {
            self.heap.pop();
            self.heap
                .push((Dist(d), p.x.to_bits(), p.y.to_bits(), p.id));
        }
    }
    fn into_sorted(self) -> Vec<(f64, GridPoint)> {
        let mut v: Vec<(f64, GridPoint)> = self
            .heap
            .into_iter()
            .map(|(d, x, y, id)| {
                (
                    d.0,
                    GridPoint {
                        x: f64::from_bits(x),
                        y: f64::from_bits(y),
                        id,
                    },
                )
            })
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.id.cmp(&b.1.id)));
        v
    }
}

/// Next-fit grouping: consecutive items go into one group until adding the
/// next one would exceed `budget` pages (an item larger than the budget
/// gets a group of its own).
pub fn next_fit<T: Copy>(items: &[T], pages: impl Fn(T) -> usize, budget: usize) -> Vec<Vec<T>> {
    let mut groups = Vec::new();
    let mut cur: Vec<T> = Vec::new();
    let mut used = 0usize;
    for &it in items {
        let n = pages(it).max(1);
        if !cur.is_empty() && used + n > budget {
            groups.push(std::mem::take(&mut cur));
            used = 0;
        }
        cur.push(it);
        used += n;
    }
    if !cur.is_empty() {
        groups.push(cur);
    }
    groups
}
