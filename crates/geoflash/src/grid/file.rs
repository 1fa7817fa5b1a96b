//! The two-level grid file over a [`BucketLayer`]: directory maintenance
//! (splits and merges with propagation), queries, checkpoint and open.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use crate::geom::{Point, Rect};
use crate::index::object_ids::ObjectIds;
use crate::storage::{PageDevice, PageId, Tier};
use crate::{Error, Result};

use super::buffer::HotCold;
use super::codec::{self, PageKind, Reader, Writer};
use super::dir::{CellBox, Grid, SubDir};
use super::hot::HotRegions;
use super::{
    next_fit, Alloc, BucketIo, BucketLayer, DeleteOutcome, Dist, GridOptions, GridPoint, GridStats,
    InsertOutcome, KBest,
};

const META_VERSION: u16 = 1;

/// A two-level grid file of 2-D points on a [`PageDevice`]; see the
/// [module documentation](super) for the structure and its guarantees.
pub struct GridFile<L: BucketLayer> {
    dev: Arc<dyn PageDevice>,
    opts: GridOptions,
    root: Grid,
    dirs: HotCold<SubDir>,
    layer: L,
    alloc: Alloc,
    meta_chain: Vec<PageId>,
    stats: GridStats,
    /// H-Grid's hot-region detector (`None`: a flat grid file).
    hot: Option<HotRegions>,
    /// Opened by [`GridFile::open_read_only`]: changes are refused and no
    /// page is ever marked dirty.
    read_only: bool,
    /// The object ids held (`None` until built: after an open, and after
    /// an operation that failed half-way). Chunked ([`ObjectIds`]): dense
    /// ids take 1 bit to 2 bytes each, not a hash set's 9 to 18.
    ids: Option<ObjectIds>,
    /// The set was built from points of which some share an id (a grid
    /// file written before ids were checked): a deletion cannot tell
    /// whether the id is still held elsewhere, so it forgets the set.
    shared_ids: bool,
    /// Points held (`None` until counted: after an open of GFFM, and after
    /// an operation that failed half-way).
    points: Option<u64>,
}

/// What [`GridFile::update`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveOutcome {
    /// The object is at its new point.
    Moved,
    /// No point with the object's id at its old point: nothing changed.
    NotFound,
    /// Another object (this id) holds the new point: nothing changed.
    PointHeld(u64),
}

/// A split planned before anything changes: the buckets it replaces and
/// the points of the buckets it creates. In the planned grids a new bucket
/// stands in as [`Plan::bucket`]`(k)` and a new sub-directory as
/// [`Plan::dir`]`(k)`, values no page id or logical bucket id reaches.
#[derive(Debug, Default)]
struct Plan {
    /// Buckets the split replaces.
    old: Vec<u64>,
    /// New buckets by placeholder index (`None`: split again meanwhile).
    pieces: Vec<Option<Vec<GridPoint>>>,
    /// Bucket splits, for the counters.
    bucket_splits: u64,
}

impl Plan {
    const BUCKET: u64 = 1 << 63;
    const DIR: u64 = Self::BUCKET | 1 << 62;

    fn bucket(k: usize) -> u64 {
        Self::BUCKET + k as u64
    }

    fn dir(k: usize) -> u64 {
        Self::DIR + k as u64
    }

    /// A new bucket holding `pts`: its placeholder.
    fn piece(&mut self, pts: Vec<GridPoint>) -> u64 {
        self.pieces.push(Some(pts));
        Self::bucket(self.pieces.len() - 1)
    }

    /// The points of new bucket `r`, which leaves the plan (`None`: `r` is
    /// an existing bucket).
    fn take(&mut self, r: u64) -> Option<Vec<GridPoint>> {
        let k = usize::try_from(r.checked_sub(Self::BUCKET)?).ok()?;
        self.pieces.get_mut(k)?.take()
    }
}

/// An H-Grid sub-directory access: its weight and whether it is hot.
type DirVisit = (f64, bool);

impl<L: BucketLayer> std::fmt::Debug for GridFile<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GridFile")
            .field("kind", &L::NAME)
            .field("device", &self.dev)
            .field("root_cells", &self.root.cells.len())
            .field("pages_in_use", &self.alloc.in_use())
            .finish()
    }
}

fn coord(p: &GridPoint, axis: usize) -> f64 {
    if axis == 0 {
        p.x
    } else {
        p.y
    }
}

/// The existing boundary inside `bx` that best balances `pts` while leaving
/// points on both sides.
fn best_existing(g: &Grid, bx: &CellBox, pts: &[GridPoint]) -> Option<(usize, usize)> {
    let n = pts.len();
    let mut best: Option<(usize, usize, usize)> = None;
    for axis in 0..2 {
        let (a, b) = bx.span(axis);
        for i in a..b.saturating_sub(1) {
            let Some(&v) = g.scale(axis).get(i) else {
                continue;
            };
            let lo = pts.iter().filter(|p| coord(p, axis) < v).count();
            if lo == 0 || lo == n {
                continue;
            }
            let score = lo.max(n - lo);
            if best.is_none_or(|(s, _, _)| score < s) {
                best = Some((score, axis, i));
            }
        }
    }
    best.map(|(_, a, i)| (a, i))
}

/// A new boundary at the median of `pts` along the axis with the larger
/// spread (that has two distinct values); points `< v` go below it.
fn data_boundary(pts: &[GridPoint]) -> Option<(usize, f64)> {
    let mut cands = Vec::new();
    for axis in 0..2 {
        let mut v: Vec<f64> = pts.iter().map(|p| coord(p, axis)).collect();
        v.sort_by(f64::total_cmp);
        let (Some(&lo), Some(&hi)) = (v.first(), v.last()) else {
            continue;
        };
        if hi > lo {
            let mut m = v.get(v.len() / 2).copied().unwrap_or(hi);
            if m <= lo {
                m = v.iter().copied().find(|&x| x > lo).unwrap_or(hi);
            }
            cands.push((hi - lo, axis, m));
        }
    }
    cands
        .into_iter()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, axis, m)| (axis, m))
}

/// Neighbours of reference `v` whose box forms a box with `v`'s: `(neighbour,
/// axis, neighbour is on the high side, union box)`.
fn box_neighbours(g: &Grid, v: u64) -> Result<Vec<(u64, usize, bool, CellBox)>> {
    let bx = g.find_box(v)?;
    let mut out = Vec::new();
    for axis in 0..2 {
        let other = 1 - axis;
        let (a, b) = bx.span(axis);
        let (oa, ob) = bx.span(other);
        for high in [false, true] {
            let k = if high {
                if b >= g.n(axis) {
                    continue;
                }
                b
            } else {
                if a == 0 {
                    continue;
                }
                a - 1
            };
            let (c, r) = if axis == 0 { (k, oa) } else { (oa, k) };
            let m = g.cell(c, r)?;
            if m == v {
                continue;
            }
            let mb = g.find_box(m)?;
            let (ma, mbb) = mb.span(axis);
            let adjacent = if high { ma == b } else { mbb == a };
            if adjacent && mb.span(other) == (oa, ob) {
                let mut u = bx;
                if axis == 0 {
                    u.c0 = a.min(ma);
                    u.c1 = b.max(mbb);
                } else {
                    u.r0 = a.min(ma);
                    u.r1 = b.max(mbb);
                }
                out.push((m, axis, high, u));
            }
        }
    }
    Ok(out)
}

fn in_rect(r: &Rect, p: &GridPoint) -> bool {
    p.x >= r.min_x() && p.x <= r.max_x() && p.y >= r.min_y() && p.y <= r.max_y()
}

impl<L: BucketLayer> GridFile<L> {
    /// Creates an empty grid file on `dev` (overwriting whatever it holds)
    /// and checkpoints it, so that [`GridFile::open`] finds it.
    pub fn create(dev: Arc<dyn PageDevice>, opts: GridOptions) -> Result<Self> {
        opts.validate()?;
        let ps = dev.page_size();
        let mut alloc = Alloc::new(1, dev.capacity());
        let mut layer = L::new(&opts, ps)?;
        let b = layer
            .rewrite(
                &mut BucketIo {
                    dev: &*dev,
                    alloc: &mut alloc,
                },
                &[],
                vec![Vec::new()],
            )?
            .first()
            .copied()
            .ok_or_else(|| Error::invalid("bucket layer created no bucket"))?;
        let sd = alloc.alloc()?;
        let mut dirs = Self::dir_buffer(&opts)?;
        let hot = opts.hybrid.map(HotRegions::new).transpose()?;
        dirs.put(&*dev, sd, SubDir(Grid::single(opts.domain, b)))?;
        let root = Grid::single(opts.domain, sd);
        let mut g = GridFile {
            dev,
            opts,
            root,
            dirs,
            layer,
            alloc,
            meta_chain: Vec::new(),
            stats: GridStats::default(),
            hot,
            read_only: false,
            ids: Some(ObjectIds::new()),
            shared_ids: false,
            points: Some(0),
        };
        g.checkpoint()?;
        Ok(g)
    }

    /// The sub-directory buffer: H-Grid's special case tags every
    /// sub-directory for the fast tier.
    fn dir_buffer(opts: &GridOptions) -> Result<HotCold<SubDir>> {
        let b = HotCold::new(opts.dir_hot_pages, opts.cold_pages)?;
        Ok(match opts.hybrid {
            Some(h) if h.special => b.with_default_tier(Tier::Fast),
            _ => b,
        })
    }

    /// H-Grid: records an access to sub-directory `sdp` (Eq. 4.1); a hot
    /// one is tagged for the fast tier. Returns its weight and hotness.
    fn visit_dir(&mut self, sdp: PageId) -> Result<DirVisit> {
        let Some(h) = self.hot.as_mut() else {
            return Ok((0.0, false));
        };
        let (w, hot) = h.touch_dir(sdp);
        // A reader never re-tags: that dirties the page, which its
        // eviction would then write.
        if hot && !self.read_only {
            self.dirs.set_tier(&*self.dev, sdp, Tier::Fast)?;
        }
        Ok((w, hot))
    }

    /// H-Grid: records an access to buckets `bs` of a sub-directory visited
    /// as `parent` (Eq. 4.2); hot ones are tagged for the fast tier.
    fn visit_buckets(&mut self, parent: DirVisit, bs: &[u64]) -> Result<()> {
        let Some(h) = self.hot.as_mut() else {
            return Ok(());
        };
        let hot: Vec<u64> = bs
            .iter()
            .copied()
            .filter(|&b| h.touch_bucket(b, parent.0, parent.1))
            .collect();
        if self.read_only {
            return Ok(());
        }
        let dev = Arc::clone(&self.dev);
        for b in hot {
            self.layer.set_tier(&*dev, b, Tier::Fast)?;
        }
        Ok(())
    }

    /// Opens the grid file that the last [`GridFile::checkpoint`] left on
    /// `dev`. The domain comes from the device (`opts.domain` is ignored);
    /// the buffer sizes from `opts`. LB-Grid rebuilds its BTT here.
    pub fn open(dev: Arc<dyn PageDevice>, opts: GridOptions) -> Result<Self> {
        Self::open_as(dev, opts, false)
    }

    /// [`GridFile::open`] for reading only (a reader of a device opened
    /// read-only, such as a rollback journal's reader): changes are
    /// refused, a checkpoint writes nothing, and queries never mark a page
    /// dirty (H-Grid does not re-tag hot pages), so nothing is ever
    /// written.
    pub fn open_read_only(dev: Arc<dyn PageDevice>, opts: GridOptions) -> Result<Self> {
        Self::open_as(dev, opts, true)
    }

    fn open_as(dev: Arc<dyn PageDevice>, opts: GridOptions, read_only: bool) -> Result<Self> {
        let ps = dev.page_size();
        let mut page = vec![0u8; ps];
        dev.read(0, &mut page)?;
        let sp = codec::unframe_kind(0, &page, PageKind::Super)?;
        let mut r = Reader::new(sp, Some(0));
        let kind = r.u8()?;
        if kind != L::KIND {
            return Err(Error::invalid(format!(
                "the device holds a grid file of kind {kind}, not {} (kind {})",
                L::NAME,
                L::KIND
            )));
        }
        let stored_ps = r.u32()? as usize;
        if stored_ps != ps {
            return Err(Error::invalid(format!(
                "grid file written with {stored_ps}-byte pages opened with {ps}-byte pages"
            )));
        }
        let mut next = r.u64()?;
        let total = r.u64()?;
        let mut meta = Vec::new();
        let mut chain = Vec::new();
        while next != 0 {
            if chain.contains(&next) || chain.len() as u64 > dev.capacity() {
                return Err(Error::corrupt(Some(next), "grid metadata chain loops"));
            }
            chain.push(next);
            dev.read(next, &mut page)?;
            let p = codec::unframe_kind(next, &page, PageKind::Meta)?;
            let mut cr = Reader::new(p, Some(next));
            let nn = cr.u64()?;
            let len = cr.count(1)?;
            meta.extend_from_slice(p.get(12..12 + len).unwrap_or_default());
            next = nn;
        }
        if meta.len() as u64 != total {
            return Err(Error::corrupt(
                Some(0),
                format!(
                    "grid metadata of {} bytes where {total} were recorded",
                    meta.len()
                ),
            ));
        }
        let mut r = Reader::new(&meta, None);
        let v = r.u32()?;
        Error::check_version(
            "grid metadata",
            v,
            u32::from(META_VERSION),
            u32::from(META_VERSION),
        )?;
        let alloc_next = r.u64()?;
        if alloc_next == 0 || alloc_next > dev.capacity() {
            let e = Error::corrupt(
                chain.first().copied(),
                format!(
                    "grid metadata records {alloc_next} allocated pages, but the device holds {} pages",
                    dev.capacity()
                ),
            );
            return Err(match dev.path() {
                Some(p) => e.in_file(p),
                None => e,
            });
        }
        let root = Grid::decode_from(&mut r, None)?;
        let mut opts = opts;
        opts.domain = root.region;
        opts.validate()?;
        let mut dirs = Self::dir_buffer(&opts)?;
        let hot = opts.hybrid.map(HotRegions::new).transpose()?;
        let sds: Vec<PageId> = root.boxes().into_iter().map(|(p, _)| p).collect();
        let mut live = HashSet::new();
        for group in sds.chunks(opts.dir_hot_pages) {
            for sd in dirs.fetch_many(&*dev, group)? {
                live.extend(sd.0.cells.iter().copied());
            }
        }
        let (mut layer, layer_pages) = L::open(&opts, &*dev, &mut r, &live)?;
        let mut used: HashSet<PageId> = HashSet::new();
        used.insert(0);
        for p in chain.iter().chain(&sds).chain(&layer_pages) {
            if *p >= alloc_next || !used.insert(*p) {
                return Err(Error::corrupt(
                    Some(*p),
                    format!("grid page {p} is used twice or lies beyond the allocated {alloc_next} pages"),
                ));
            }
        }
        let mut alloc = Alloc::new(alloc_next, dev.capacity());
        let mut used: Vec<PageId> = used.into_iter().collect();
        used.sort_unstable();
        // The gaps between used pages are free (as ranges, not page by page).
        let mut from = 1;
        for p in used.into_iter().chain(std::iter::once(alloc_next)) {
            alloc.free_range(from, p);
            from = from.max(p + 1);
        }
        let points = layer.held_len();
        let ids = layer.take_ids().map(|o| o.0);
        Ok(GridFile {
            dev,
            opts,
            root,
            dirs,
            layer,
            alloc,
            meta_chain: chain,
            stats: GridStats::default(),
            hot,
            read_only,
            ids,
            shared_ids: false,
            points,
        })
    }

    /// Writes every dirty page in batches, then the metadata chain and page
    /// 0, and syncs: after it returns, [`GridFile::open`] finds this state.
    /// Opened read-only, it writes nothing (nothing can have changed).
    pub fn checkpoint(&mut self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let dev = Arc::clone(&self.dev);
        let ps = dev.page_size();
        self.layer.flush(&*dev)?;
        self.dirs.flush_all(&*dev)?;
        let chunk = codec::payload_capacity(ps).saturating_sub(12);
        if chunk == 0 {
            return Err(Error::invalid("page too small for grid metadata"));
        }
        let n = self.encode_meta()?.len().div_ceil(chunk).max(1);
        let mut chain = Vec::with_capacity(n);
        for _ in 0..n {
            chain.push(self.alloc.alloc()?);
        }
        // The length does not depend on the allocator's state, only its value does.
        let meta = self.encode_meta()?;
        let mut data = Vec::with_capacity(n * ps);
        for (i, &p) in chain.iter().enumerate() {
            let part = meta
                .get(i * chunk..((i + 1) * chunk).min(meta.len()))
                .unwrap_or_default();
            let mut w = Writer::default();
            w.u64(chain.get(i + 1).copied().unwrap_or(0));
            w.len(part.len())?;
            w.buf.extend_from_slice(part);
            let _ = p;
            data.extend_from_slice(&codec::frame(PageKind::Meta, &w.buf, ps)?);
        }
        dev.write_batch(&chain, &data)?;
        dev.sync()?;
        let mut w = Writer::default();
        w.u8(L::KIND);
        w.len(ps)?;
        w.u64(chain.first().copied().unwrap_or(0));
        w.u64(meta.len() as u64);
        dev.write(0, &codec::frame(PageKind::Super, &w.buf, ps)?)?;
        dev.sync()?;
        for p in std::mem::replace(&mut self.meta_chain, chain) {
            self.alloc.free(p);
        }
        Ok(())
    }

    fn encode_meta(&self) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        w.u32(u32::from(META_VERSION));
        w.u64(self.alloc.next());
        self.root.encode_into(&mut w)?;
        self.layer.encode_meta(&mut w)?;
        Ok(w.buf)
    }

    /// Counters.
    pub fn stats(&self) -> GridStats {
        let (hot_dirs, hot_buckets) = self.hot.as_ref().map_or((0, 0), |h| h.hot_counts());
        GridStats {
            dir_buffer: self.dirs.stats(),
            bucket_buffer: self.layer.buffer_stats(),
            hot_dirs: hot_dirs as u64,
            hot_buckets: hot_buckets as u64,
            ..self.stats
        }
    }

    /// Pages in use on the device (page 0 and the metadata chain included).
    pub fn pages_in_use(&self) -> u64 {
        self.alloc.in_use()
    }

    /// The in-memory root directory.
    #[cfg(test)]
    pub fn root(&self) -> &Grid {
        &self.root
    }

    /// The bucket layer (for inspection).
    #[cfg(test)]
    pub fn layer(&self) -> &L {
        &self.layer
    }

    fn max_dir_bytes(&self) -> usize {
        codec::payload_capacity(self.dev.page_size())
    }

    /// Normalises and checks a point to insert or delete: finite and inside the domain.
    fn check_point(&self, x: f64, y: f64) -> Result<(f64, f64)> {
        let d = &self.opts.domain;
        if !(x.is_finite() && y.is_finite())
            || x < d.min_x()
            || x > d.max_x()
            || y < d.min_y()
            || y > d.max_y()
        {
            return Err(Error::invalid(format!(
                "point ({x}, {y}) lies outside the grid's domain ({}, {}, {}, {})",
                d.min_x(),
                d.min_y(),
                d.max_x(),
                d.max_y()
            )));
        }
        // -0.0 and 0.0 are one point.
        Ok((x + 0.0, y + 0.0))
    }

    fn subdir(&mut self, p: PageId) -> Result<Arc<SubDir>> {
        self.dirs.fetch(&*self.dev, p)
    }

    /// An error if the grid file was opened read-only.
    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::invalid(format!(
                "the {} grid file was opened read-only: it takes no changes",
                L::NAME
            )));
        }
        Ok(())
    }

    /// Forgets the id set and the count after an operation that failed
    /// half-way (the next insertion or count rebuilds them).
    fn forget_census(&mut self) {
        self.ids = None;
        self.points = None;
    }

    /// Points held: known, or counted now (LB-Grid from its buckets'
    /// fingerprints when all are known; else by one range query over the
    /// domain, once after an open).
    pub fn count(&mut self) -> Result<u64> {
        if let Some(n) = self.points {
            return Ok(n);
        }
        let n = match self.layer.held_len() {
            Some(n) => n,
            None => {
                let d = self.opts.domain;
                let mut n = 0u64;
                self.range_each(&d, |_| n += 1)?;
                n
            }
        };
        self.points = Some(n);
        Ok(n)
    }

    /// True if object id `id` is held; builds the id set first when it is
    /// not known (by one range query over the domain whose points are
    /// taken as they are read, not gathered), counting the points on the
    /// way.
    fn holds_id(&mut self, id: u64) -> Result<bool> {
        if self.ids.is_none() {
            let mut set = ObjectIds::new();
            let (mut n, mut shared) = (0u64, false);
            let mut add = |i: u64| {
                n += 1;
                shared |= !set.insert(i);
            };
            let d = self.opts.domain;
            self.range_each(&d, |p| add(p.id))?;
            self.points = Some(n);
            self.shared_ids = shared;
            self.ids = Some(set);
        }
        Ok(self.ids.as_ref().is_some_and(|s| s.contains(&id)))
    }

    /// Heap bytes of the id set, about (`None` while it is not built).
    #[cfg(test)]
    pub(crate) fn id_set_heap_bytes(&self) -> Option<usize> {
        self.ids.as_ref().map(ObjectIds::heap_bytes)
    }

    /// Inserts point `(x, y)` with `id`. A point the grid file holds is
    /// refused, whatever the bucket layer (LB-Grid checks the fingerprints
    /// of its bucket's points, see [`lbgrid`](super::lbgrid)), and so is an
    /// object id it holds at another point.
    pub fn insert(&mut self, x: f64, y: f64, id: u64) -> Result<()> {
        self.check_writable()?;
        let (x, y) = self.check_point(x, y)?;
        if self.holds_id(id)? {
            return Err(Error::invalid(format!(
                "object id {id} is already in the grid file (object ids are unique; \
                 use an update to move it)"
            )));
        }
        match self.insert_tracked(x, y, id)? {
            true => Ok(()),
            false => Err(Self::point_taken(x, y)),
        }
    }

    fn point_taken(x: f64, y: f64) -> Error {
        Error::invalid(format!(
            "point ({x}, {y}) is already in the grid file (points are unique)"
        ))
    }

    /// Inserts the checked point `(x, y)` with `id` (whose id is not
    /// checked) and keeps the id set and the count: false if the point is
    /// held (nothing changed).
    fn insert_tracked(&mut self, x: f64, y: f64, id: u64) -> Result<bool> {
        match self.insert_point(x, y, id) {
            Ok(true) => {
                if let Some(s) = self.ids.as_mut() {
                    s.insert(id);
                }
                if let Some(n) = self.points.as_mut() {
                    *n += 1;
                }
                Ok(true)
            }
            Ok(false) => Ok(false),
            Err(e) => {
                self.forget_census();
                Err(e)
            }
        }
    }

    /// Inserts the checked point `(x, y)`: false if the point is held.
    fn insert_point(&mut self, x: f64, y: f64, id: u64) -> Result<bool> {
        let dev = Arc::clone(&self.dev);
        let sdp = self.root.lookup(x, y)?;
        let b = self.subdir(sdp)?.0.lookup(x, y)?;
        let wd = self.visit_dir(sdp)?;
        match self.layer.insert(
            &mut BucketIo {
                dev: &*dev,
                alloc: &mut self.alloc,
            },
            b,
            GridPoint { x, y, id },
        )? {
            InsertOutcome::Done => self.visit_buckets(wd, &[b])?,
            InsertOutcome::Duplicate => return Ok(false),
            InsertOutcome::Full(pts) => self.split_bucket(sdp, b, pts)?,
        }
        Ok(true)
    }

    /// True if the bucket layer knows without reading a bucket that no
    /// point is at the checked point `(x, y)` (LB-Grid's fingerprints;
    /// GFFM locates nothing here and reads in [`GridFile::get`]).
    fn surely_free(&mut self, x: f64, y: f64) -> Result<bool> {
        if !L::BLIND_UPDATES {
            return Ok(false);
        }
        let sdp = self.root.lookup(x, y)?;
        let b = self.subdir(sdp)?.0.lookup(x, y)?;
        Ok(self.layer.surely_absent(b, x, y))
    }

    /// Moves object `id` from `old` to `new`. Everything the insertion
    /// could refuse is checked first (the new point inside the domain and
    /// finite, not held by another object): a refusal changes nothing. If
    /// the insertion fails all the same, the object is put back at `old`
    /// and the insertion's error returned; if that fails too, the error
    /// says the object is lost.
    pub fn update(&mut self, id: u64, old: (f64, f64), new: (f64, f64)) -> Result<MoveOutcome> {
        self.check_writable()?;
        let (ox, oy) = self.check_point(old.0, old.1)?;
        let (nx, ny) = self.check_point(new.0, new.1)?;
        if (ox, oy) != (nx, ny) {
            let holder = match self.surely_free(nx, ny)? {
                true => None,
                false => self.get(nx, ny)?,
            };
            if let Some(h) = holder {
                return Ok(MoveOutcome::PointHeld(h));
            }
        }
        if self.delete(ox, oy, id)? == DeleteOutcome::NotFound {
            return Ok(MoveOutcome::NotFound);
        }
        let failure = match self.insert_tracked(nx, ny, id) {
            Ok(true) => return Ok(MoveOutcome::Moved),
            Ok(false) => Self::point_taken(nx, ny),
            Err(e) => e,
        };
        match self.insert_tracked(ox, oy, id) {
            Ok(true) => Err(failure),
            Ok(false) => Err(Error::StoreFailed(format!(
                "moving object {id} to ({nx}, {ny}) failed ({failure}), and its old point \
                 ({ox}, {oy}) was taken meanwhile: the object is no longer in the grid file"
            ))),
            Err(e) => Err(Error::StoreFailed(format!(
                "moving object {id} to ({nx}, {ny}) failed ({failure}), and putting it back at \
                 ({ox}, {oy}) failed too ({e}): the object is no longer in the grid file"
            ))),
        }
    }

    /// Splits bucket `b` of sub-directory `sdp`, which must hold `pts`, and
    /// the sub-directory (and its halves) until each fits a page, every
    /// sub-directory split propagated to the root directory.
    ///
    /// All or nothing: the whole split is first planned on copies of the
    /// grids, new buckets and sub-directories standing in under
    /// placeholder references ([`Plan`]); then the pages of the new
    /// sub-directories are allocated and the bucket layer rewrites every
    /// bucket involved in one call, which changes nothing if it fails.
    /// After that nothing can fail. So an error (the device full, a failing
    /// write) leaves the grid file as it was before the insertion.
    fn split_bucket(&mut self, sdp: PageId, b: u64, pts: Vec<GridPoint>) -> Result<()> {
        let cap = self.layer.capacity();
        let mut plan = Plan::default();
        let mut g = self.subdir(sdp)?.0.clone();
        plan.old.push(b);
        let bx = g.find_box(b)?;
        let mut stack = vec![(bx, pts)];
        let mut done: Vec<(CellBox, Vec<GridPoint>)> = Vec::new();
        while let Some((mut bx, pts)) = stack.pop() {
            if pts.len() <= cap {
                done.push((bx, pts));
                continue;
            }
            let (axis, i) = match best_existing(&g, &bx, &pts) {
                Some(s) => s,
                None => {
                    let (axis, v) = data_boundary(&pts).ok_or_else(|| {
                        Error::corrupt(
                            None,
                            format!(
                                "bucket {b} overflows with {} copies of one point",
                                pts.len()
                            ),
                        )
                    })?;
                    let c = g.insert_boundary(axis, v)?;
                    for (ob, _) in stack.iter_mut().chain(done.iter_mut()) {
                        ob.widen_after_insert(axis, c);
                    }
                    bx.widen_after_insert(axis, c);
                    (axis, c)
                }
            };
            let v = *g
                .scale(axis)
                .get(i)
                .ok_or_else(|| Error::invalid("split boundary vanished"))?;
            let (lo, hi) = bx.split(axis, i);
            let (pl, ph): (Vec<GridPoint>, Vec<GridPoint>) =
                pts.into_iter().partition(|p| coord(p, axis) < v);
            stack.push((lo, pl));
            stack.push((hi, ph));
        }
        plan.bucket_splits += done.len().saturating_sub(1) as u64;
        for (bx, piece) in done {
            let r = plan.piece(piece);
            g.fill(&bx, r);
        }
        let (root, grids) = self.plan_subdir_splits(&mut plan, sdp, g)?;
        self.commit(plan, sdp, root, grids)
    }

    /// Plans the splits of sub-directory `sdp`, whose grid is now `g`,
    /// until each part fits a page: buckets straddling a split boundary are
    /// split at it. Returns the new root directory and the grids, `sdp`'s
    /// first, then one per new sub-directory (placeholder
    /// [`Plan::dir`]`(k)` in the root for grid `k`).
    fn plan_subdir_splits(
        &mut self,
        plan: &mut Plan,
        sdp: PageId,
        g: Grid,
    ) -> Result<(Option<Grid>, Vec<Grid>)> {
        let dev = Arc::clone(&self.dev);
        let max = self.max_dir_bytes();
        let mut root: Option<Grid> = None;
        let mut grids = vec![g];
        let mut work = vec![0usize];
        while let Some(k) = work.pop() {
            let newk = grids.len();
            let Some(g) = grids.get_mut(k) else { continue };
            if g.encoded_len() <= max {
                continue;
            }
            let axis = if g.xs.len() >= g.ys.len() { 0 } else { 1 };
            let i = g.scale(axis).len() / 2;
            let v = *g.scale(axis).get(i).ok_or_else(|| {
                Error::invalid("sub-directory too large for its page without a boundary")
            })?;
            // Buckets straddling the boundary are split at it.
            for (bref, bx) in g.boxes() {
                let (a, b) = bx.span(axis);
                if a <= i && b > i + 1 {
                    let pts = match plan.take(bref) {
                        Some(pts) => pts,
                        None => {
                            plan.old.push(bref);
                            self.layer.read_one(&*dev, bref)?
                        }
                    };
                    let (pl, ph): (Vec<GridPoint>, Vec<GridPoint>) =
                        pts.into_iter().partition(|q| coord(q, axis) < v);
                    let (lo, hi) = bx.split(axis, i);
                    g.fill(&lo, plan.piece(pl));
                    g.fill(&hi, plan.piece(ph));
                    plan.bucket_splits += 1;
                }
            }
            let (mut lo, mut hi) = g.split_at(axis, i)?;
            lo.remove_redundant();
            hi.remove_redundant();
            let root = root.get_or_insert_with(|| self.root.clone());
            let j = match root.scale(axis).iter().position(|&b| b == v) {
                Some(j) => j,
                None => root.insert_boundary(axis, v)?,
            };
            let me = if k == 0 { sdp } else { Plan::dir(k) };
            let rb = root.find_box(me)?;
            let (_, rhi) = rb.split(axis, j);
            root.fill(&rhi, Plan::dir(newk));
            *g = lo;
            grids.push(hi);
            work.push(k);
            work.push(newk);
        }
        Ok((root, grids))
    }

    /// Carries out a planned split: see [`GridFile::split_bucket`].
    fn commit(
        &mut self,
        plan: Plan,
        sdp: PageId,
        root: Option<Grid>,
        grids: Vec<Grid>,
    ) -> Result<()> {
        let dev = Arc::clone(&self.dev);
        let mut dirs: Vec<PageId> = vec![sdp];
        let undo = |alloc: &mut Alloc, dirs: &[PageId], e: Error| {
            dirs.iter().skip(1).for_each(|&p| alloc.free(p));
            Err(e)
        };
        for _ in 1..grids.len() {
            match self.alloc.alloc() {
                Ok(p) => dirs.push(p),
                Err(e) => return undo(&mut self.alloc, &dirs, e),
            }
        }
        if let Err(e) = self.dirs.reserve_for(&*dev, &dirs) {
            return undo(&mut self.alloc, &dirs, e);
        }
        let (refs, pieces): (Vec<u64>, Vec<Vec<GridPoint>>) = plan
            .pieces
            .into_iter()
            .enumerate()
            .filter_map(|(k, p)| p.map(|p| (Plan::bucket(k), p)))
            .unzip();
        let ids = match self.layer.rewrite(
            &mut BucketIo {
                dev: &*dev,
                alloc: &mut self.alloc,
            },
            &plan.old,
            pieces,
        ) {
            Ok(ids) if ids.len() == refs.len() => ids,
            Ok(_) => return Err(Error::invalid("bucket layer returned too few buckets")),
            Err(e) => return undo(&mut self.alloc, &dirs, e),
        };
        // Nothing below can fail.
        let mut real: HashMap<u64, u64> = refs.into_iter().zip(ids).collect();
        real.extend(
            dirs.iter()
                .enumerate()
                .skip(1)
                .map(|(k, &p)| (Plan::dir(k), p)),
        );
        let resolve = |mut g: Grid| {
            for c in &mut g.cells {
                if let Some(&r) = real.get(c) {
                    *c = r;
                }
            }
            g
        };
        for (&p, g) in dirs.iter().zip(grids) {
            self.dirs.stage(p, SubDir(resolve(g)));
        }
        if let Some(root) = root {
            self.root = resolve(root);
        }
        self.stats.bucket_splits += plan.bucket_splits;
        self.stats.dir_splits += dirs.len() as u64 - 1;
        Ok(())
    }

    /// Deletes object `id` at `(x, y)`: only a point held under that id
    /// ([`DeleteOutcome::NotFound`] otherwise, nothing changed). A bucket
    /// left at or below the merge threshold merges with a neighbour (see
    /// the module docs).
    pub fn delete(&mut self, x: f64, y: f64, id: u64) -> Result<DeleteOutcome> {
        self.check_writable()?;
        let (x, y) = self.check_point(x, y)?;
        let out = self.delete_point(x, y, id);
        match out {
            Ok(DeleteOutcome::NotFound) => {}
            Ok(_) => {
                if self.shared_ids {
                    // Another point may hold the id too.
                    self.ids = None;
                } else if let Some(s) = self.ids.as_mut() {
                    s.remove(&id);
                }
                if let Some(n) = self.points.as_mut() {
                    *n = n.saturating_sub(1);
                }
            }
            Err(_) => self.forget_census(),
        }
        out
    }

    fn delete_point(&mut self, x: f64, y: f64, id: u64) -> Result<DeleteOutcome> {
        let dev = Arc::clone(&self.dev);
        let sdp = self.root.lookup(x, y)?;
        let b = self.subdir(sdp)?.0.lookup(x, y)?;
        let wd = self.visit_dir(sdp)?;
        let (out, est) = self.layer.delete(
            &mut BucketIo {
                dev: &*dev,
                alloc: &mut self.alloc,
            },
            b,
            GridPoint { x, y, id },
        )?;
        self.visit_buckets(wd, &[b])?;
        let cap = self.layer.capacity();
        if out != DeleteOutcome::NotFound && (est as f64) <= self.opts.merge_threshold * cap as f64
        {
            // The deletion is done. The merge is housekeeping that changes
            // nothing when it fails (a bucket below the threshold is legal,
            // and a failing device fails the next write or checkpoint), so
            // its error must not report the deletion as failed: a move
            // would then stop with the object at neither point.
            if let Err(e) = self.try_merge(sdp, b) {
                tracing::warn!(error = %e, "grid file: the merge after a deletion failed and was skipped");
            }
        }
        Ok(out)
    }

    /// Merges bucket `b` of sub-directory `sdp` with the first neighbour
    /// it fits with, then the sub-directory with a neighbour (see the
    /// module docs). Each step is all or nothing (reads and room in the
    /// buffers first, the layer's rewrite changing nothing if it fails), so
    /// an error leaves the grid file consistent, merged or not.
    fn try_merge(&mut self, sdp: PageId, b: u64) -> Result<()> {
        let dev = Arc::clone(&self.dev);
        let limit = self.opts.merge_fill * self.layer.capacity() as f64;
        let mut g = self.subdir(sdp)?.0.clone();
        for (m, _, _, union) in box_neighbours(&g, b)? {
            let both = self.layer.read_many(&*dev, &[b, m])?;
            let total: usize = both.iter().map(Vec::len).sum();
            if total as f64 > limit {
                continue;
            }
            let all: Vec<GridPoint> = both.into_iter().flatten().collect();
            // Room for the sub-directory first: after the rewrite nothing
            // may fail.
            self.dirs.reserve_for(&*dev, &[sdp])?;
            let ids = self.layer.rewrite(
                &mut BucketIo {
                    dev: &*dev,
                    alloc: &mut self.alloc,
                },
                &[b, m],
                vec![all],
            )?;
            let id = ids
                .first()
                .copied()
                .ok_or_else(|| Error::invalid("merge produced no bucket"))?;
            g.fill(&union, id);
            g.remove_redundant();
            self.dirs.stage(sdp, SubDir(g));
            self.stats.bucket_merges += 1;
            return self.try_merge_subdir(sdp);
        }
        Ok(())
    }

    /// Merges sub-directory `p` into a neighbour when it has shrunk to a
    /// quarter of a page and the merged grid fits a page.
    fn try_merge_subdir(&mut self, p: PageId) -> Result<()> {
        let max = self.max_dir_bytes();
        let g = self.subdir(p)?.0.clone();
        if g.encoded_len() * 4 > max {
            return Ok(());
        }
        for (q, axis, high, union) in box_neighbours(&self.root, p)? {
            let gq = self.subdir(q)?.0.clone();
            let mut merged = if high {
                Grid::merge(&g, &gq, axis)?
            } else {
                Grid::merge(&gq, &g, axis)?
            };
            merged.remove_redundant();
            if merged.encoded_len() > max {
                continue;
            }
            self.dirs.reserve_for(&*self.dev, &[p])?;
            self.dirs.stage(p, SubDir(merged));
            self.dirs.remove(q);
            self.alloc.free(q);
            self.root.fill(&union, p);
            self.root.remove_redundant();
            self.stats.dir_merges += 1;
            return Ok(());
        }
        Ok(())
    }

    fn check_query_point(x: f64, y: f64) -> Result<Point> {
        Point::new(x, y)
    }

    /// The id of the point at `(x, y)`, if present (one sub-directory read,
    /// one bucket read). A point outside the domain is simply absent.
    pub fn get(&mut self, x: f64, y: f64) -> Result<Option<u64>> {
        Self::check_query_point(x, y)?;
        let (x, y) = (x + 0.0, y + 0.0);
        if self.check_point(x, y).is_err() {
            return Ok(None);
        }
        let dev = Arc::clone(&self.dev);
        let sdp = self.root.lookup(x, y)?;
        let b = self.subdir(sdp)?.0.lookup(x, y)?;
        let wd = self.visit_dir(sdp)?;
        let pts = self.layer.read_one(&*dev, b)?;
        self.visit_buckets(wd, &[b])?;
        Ok(pts.iter().find(|p| p.at(x, y)).map(|p| p.id))
    }

    /// Points inside `r` (closed), the plain way: sub-directories and buckets
    /// read one at a time.
    pub fn range(&mut self, r: &Rect) -> Result<Vec<GridPoint>> {
        let dev = Arc::clone(&self.dev);
        let mut out = Vec::new();
        let Some(rb) = self.root.cells_of(r) else {
            return Ok(out);
        };
        for sdp in self.root.refs_in(&rb) {
            let sd = self.subdir(sdp)?;
            let wd = self.visit_dir(sdp)?;
            let Some(bb) = sd.0.cells_of(r) else { continue };
            for b in sd.0.refs_in(&bb) {
                out.extend(
                    self.layer
                        .read_one(&*dev, b)?
                        .into_iter()
                        .filter(|p| in_rect(r, p)),
                );
                self.visit_buckets(wd, &[b])?;
            }
        }
        Ok(out)
    }

    /// Points inside `r` (closed), Algorithm 6: sub-directories fetched in
    /// groups that fit the directory buffer; per sub-directory, the
    /// intersecting buckets grouped next-fit into batches that fit the
    /// bucket buffer (LBB), each batch one device read.
    pub fn range_batched(&mut self, r: &Rect) -> Result<Vec<GridPoint>> {
        let mut out = Vec::new();
        self.range_each(r, |p| out.push(p))?;
        Ok(out)
    }

    /// [`GridFile::range_batched`] handing each point to `f` as its batch
    /// is read: a pass over the whole domain holds one batch of buckets,
    /// not every point.
    fn range_each(&mut self, r: &Rect, mut f: impl FnMut(GridPoint)) -> Result<()> {
        let dev = Arc::clone(&self.dev);
        let Some(rb) = self.root.cells_of(r) else {
            return Ok(());
        };
        let sds = self.root.refs_in(&rb);
        let lbb = self.opts.bucket_hot_pages;
        for group in sds.chunks(self.opts.dir_hot_pages) {
            let fetched = self.dirs.fetch_many(&*dev, group)?;
            for (sd, &sdp) in fetched.iter().zip(group) {
                let wd = self.visit_dir(sdp)?;
                let Some(bb) = sd.0.cells_of(r) else { continue };
                let buckets = sd.0.refs_in(&bb);
                let layer = &self.layer;
                let groups = next_fit(&buckets, |b| layer.pages_of(b), lbb);
                for bg in groups {
                    for pts in self.layer.read_many(&*dev, &bg)? {
                        pts.into_iter().filter(|p| in_rect(r, p)).for_each(&mut f);
                    }
                    self.visit_buckets(wd, &bg)?;
                }
            }
        }
        Ok(())
    }

    /// The `k` nearest points to `(x, y)` with their distances, nearest
    /// first, the plain way: buckets read one at a time, closest first.
    pub fn knn(&mut self, x: f64, y: f64, k: usize) -> Result<Vec<(f64, GridPoint)>> {
        self.knn_impl(x, y, k, 1, 1)
    }

    /// The `k` nearest points, Algorithm 7: ring-by-ring traversal of the
    /// root directory from the query's cell; the buckets of the reached
    /// sub-directories wait in a min-heap on mindist, and as many of the
    /// closest as fit the bucket buffer are prefetched in one batch. The
    /// listing's `size ≤ k` / `size > k` tests are corrected to `< k` / `≥ k`.
    ///
    /// Within a sub-directory the buckets are taken in exact mindist order
    /// (the order the thesis' per-sub-directory rings approximate). The
    /// search stops when k points are known and neither a queued bucket nor
    /// anything beyond the rings seen so far can be closer than the k-th.
    pub fn knn_prefetch(&mut self, x: f64, y: f64, k: usize) -> Result<Vec<(f64, GridPoint)>> {
        let (lbb, dg) = (self.opts.bucket_hot_pages, self.opts.dir_hot_pages);
        self.knn_impl(x, y, k, lbb, dg)
    }

    /// The distance from `p` (inside `bx`) to the nearest side of the cells
    /// `bx` that is not the border of the grid: nothing outside `bx` is
    /// closer ([`f64::INFINITY`] when `bx` covers the whole grid).
    fn beyond(&self, bx: &CellBox, p: &Point) -> f64 {
        let (nx, ny) = (self.root.nx(), self.root.ny());
        let br = self.root.box_rect(bx);
        let mut b = f64::INFINITY;
        if bx.c0 > 0 {
            b = b.min(p.x - br.min_x());
        }
        if bx.c1 < nx {
            b = b.min(br.max_x() - p.x);
        }
        if bx.r0 > 0 {
            b = b.min(p.y - br.min_y());
        }
        if bx.r1 < ny {
            b = b.min(br.max_y() - p.y);
        }
        b.max(0.0)
    }

    fn knn_impl(
        &mut self,
        x: f64,
        y: f64,
        k: usize,
        budget: usize,
        dir_group: usize,
    ) -> Result<Vec<(f64, GridPoint)>> {
        let p = Self::check_query_point(x, y)?;
        let mut best = KBest::new(k);
        if k == 0 {
            return Ok(Vec::new());
        }
        let dev = Arc::clone(&self.dev);
        let (rc, rr) = self.root.locate(p.x, p.y);
        let (nx, ny) = (self.root.nx(), self.root.ny());
        let sd_boxes: HashMap<u64, CellBox> = self.root.boxes().into_iter().collect();
        let mut cellq: BinaryHeap<Reverse<(Dist, u64)>> = BinaryHeap::new();
        let mut seen_sd: HashSet<u64> = HashSet::new();
        let mut seen_b: HashSet<u64> = HashSet::new();
        let mut parent: HashMap<u64, DirVisit> = HashMap::new();
        let mut ring = 0usize;
        loop {
            let bx = CellBox {
                c0: rc.saturating_sub(ring),
                c1: (rc + ring + 1).min(nx),
                r0: rr.saturating_sub(ring),
                r1: (rr + ring + 1).min(ny),
            };
            let covers_all = bx.c0 == 0 && bx.r0 == 0 && bx.c1 == nx && bx.r1 == ny;
            let mut ring_sds: Vec<(Dist, u64)> = Vec::new();
            for r in bx.r0..bx.r1 {
                for c in bx.c0..bx.c1 {
                    if c.abs_diff(rc).max(r.abs_diff(rr)) != ring {
                        continue;
                    }
                    let s = self.root.cell(c, r)?;
                    if seen_sd.contains(&s) {
                        continue;
                    }
                    let sb = sd_boxes
                        .get(&s)
                        .ok_or_else(|| Error::corrupt(None, "root directory box missing"))?;
                    let md = self.root.box_mindist(sb, &p);
                    if md < best.kth() {
                        seen_sd.insert(s);
                        ring_sds.push((Dist(md), s));
                    }
                }
            }
            ring_sds.sort();
            let ids: Vec<u64> = ring_sds.iter().map(|t| t.1).collect();
            for group in ids.chunks(dir_group.max(1)) {
                let sds = if group.len() == 1 {
                    vec![self.subdir(group[0])?]
                } else {
                    self.dirs.fetch_many(&*dev, group)?
                };
                for (sd, &sdp) in sds.iter().zip(group) {
                    let wd = self.visit_dir(sdp)?;
                    for (bref, bb) in sd.0.boxes() {
                        if seen_b.insert(bref) {
                            parent.insert(bref, wd);
                            cellq.push(Reverse((Dist(sd.0.box_mindist(&bb, &p)), bref)));
                        }
                    }
                }
            }
            // Nothing outside the rings seen so far is closer than `bound`.
            let bound = self.beyond(&bx, &p);
            while let Some(&Reverse((Dist(d), _))) = cellq.peek() {
                if d >= bound || d >= best.kth() {
                    break;
                }
                // While fewer than k points are known, prefetch only the
                // closest buckets expected to hold twice the missing points;
                // once k are known, every queued bucket closer than the k-th
                // (the buffer permitting).
                let need = best.missing();
                let mut group = Vec::new();
                let mut used = 0usize;
                let mut expected = 0usize;
                while let Some(&Reverse((Dist(d2), b2))) = cellq.peek() {
                    if d2 >= bound || d2 >= best.kth() {
                        break;
                    }
                    let n = self.layer.pages_of(b2).max(1);
                    // (Saturating: k may be anything up to `usize::MAX`.)
                    if !group.is_empty()
                        && (used + n > budget || (need > 0 && expected >= need.saturating_mul(2)))
                    {
                        break;
                    }
                    cellq.pop();
                    group.push(b2);
                    used += n;
                    expected += self.layer.size_hint(b2);
                }
                let all = if group.len() == 1 {
                    vec![self.layer.read_one(&*dev, group[0])?]
                } else {
                    self.layer.read_many(&*dev, &group)?
                };
                for q in all.iter().flatten() {
                    best.offer(q.point().distance(&p), q);
                }
                for b in group {
                    let wd = parent.get(&b).copied().unwrap_or((0.0, false));
                    self.visit_buckets(wd, &[b])?;
                }
            }
            if covers_all || best.kth() <= bound {
                break;
            }
            ring += 1;
        }
        Ok(best.into_sorted())
    }

    /// Ids of many points (`None` where absent), the plain way: one
    /// [`GridFile::get`] per point.
    pub fn group_get_plain(&mut self, pts: &[(f64, f64)]) -> Result<Vec<Option<u64>>> {
        pts.iter().map(|&(x, y)| self.get(x, y)).collect()
    }

    /// Ids of many points, Algorithm 8: the points grouped by
    /// sub-directory; sub-directories fetched in groups that fit the
    /// directory buffer; the buckets they need, across the sub-directories
    /// of a group, read next-fit in batches that fit the bucket buffer.
    pub fn group_get(&mut self, pts: &[(f64, f64)]) -> Result<Vec<Option<u64>>> {
        let dev = Arc::clone(&self.dev);
        let mut out = vec![None; pts.len()];
        let mut table: Vec<(PageId, Vec<usize>)> = Vec::new();
        let mut at: HashMap<PageId, usize> = HashMap::new();
        for (i, &(x, y)) in pts.iter().enumerate() {
            Self::check_query_point(x, y)?;
            let Ok((x, y)) = self.check_point(x, y) else {
                continue;
            };
            let sdp = self.root.lookup(x, y)?;
            let slot = *at.entry(sdp).or_insert_with(|| {
                table.push((sdp, Vec::new()));
                table.len() - 1
            });
            if let Some(t) = table.get_mut(slot) {
                t.1.push(i);
            }
        }
        let lbb = self.opts.bucket_hot_pages;
        for group in table.chunks(self.opts.dir_hot_pages) {
            let ids: Vec<PageId> = group.iter().map(|t| t.0).collect();
            let sds = self.dirs.fetch_many(&*dev, &ids)?;
            let mut buckets: Vec<u64> = Vec::new();
            let mut wanted: HashMap<u64, Vec<usize>> = HashMap::new();
            let mut parent: HashMap<u64, DirVisit> = HashMap::new();
            for (sd, (sdp, idxs)) in sds.iter().zip(group) {
                let wd = self.visit_dir(*sdp)?;
                for &i in idxs {
                    let (x, y) = pts.get(i).copied().unwrap_or_default();
                    let b = sd.0.lookup(x + 0.0, y + 0.0)?;
                    parent.insert(b, wd);
                    wanted
                        .entry(b)
                        .or_insert_with(|| {
                            buckets.push(b);
                            Vec::new()
                        })
                        .push(i);
                }
            }
            let layer = &self.layer;
            let groups = next_fit(&buckets, |b| layer.pages_of(b), lbb);
            for bg in groups {
                let all = self.layer.read_many(&*dev, &bg)?;
                for b in &bg {
                    let wd = parent.get(b).copied().unwrap_or((0.0, false));
                    self.visit_buckets(wd, &[*b])?;
                }
                for (b, bpts) in bg.iter().zip(all) {
                    for &i in wanted.get(b).map(Vec::as_slice).unwrap_or_default() {
                        let (x, y) = pts.get(i).copied().unwrap_or_default();
                        let (x, y) = (x + 0.0, y + 0.0);
                        if let Some(slot) = out.get_mut(i) {
                            *slot = bpts.iter().find(|p| p.at(x, y)).map(|p| p.id);
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Checks every structural invariant (root boxes equal sub-directory
    /// regions, every point inside its bucket's region, bucket sizes) and
    /// returns the number of points.
    pub fn verify(&mut self) -> Result<u64> {
        let dev = Arc::clone(&self.dev);
        let cap = self.layer.capacity();
        let mut n = 0u64;
        let mut seen = HashSet::new();
        for (sdp, rb) in self.root.boxes() {
            let sd = self.subdir(sdp)?;
            if self.root.box_rect(&rb) != sd.0.region {
                return Err(Error::corrupt(
                    Some(sdp),
                    "sub-directory region differs from its root cells",
                ));
            }
            for (b, bb) in sd.0.boxes() {
                if !seen.insert(b) {
                    return Err(Error::corrupt(
                        Some(sdp),
                        format!("bucket {b} referenced by two sub-directories"),
                    ));
                }
                let rect = sd.0.box_rect(&bb);
                let pts = self.layer.read_one(&*dev, b)?;
                if pts.len() > cap && !L::BLIND_UPDATES {
                    return Err(Error::corrupt(
                        None,
                        format!("bucket {b} holds {} points, capacity {cap}", pts.len()),
                    ));
                }
                for q in &pts {
                    if !in_rect(&rect, q) || sd.0.lookup(q.x, q.y)? != b {
                        return Err(Error::corrupt(
                            None,
                            format!("point ({}, {}) lies outside bucket {b}'s region", q.x, q.y),
                        ));
                    }
                }
                n += pts.len() as u64;
            }
        }
        Ok(n)
    }
}
