//! LB-Grid's buckets: **log-buckets** and the in-memory **BTT** (bucket
//! translation table).
//!
//! A bucket reference in a sub-directory is a *logical* bucket id. Every
//! insert or delete appends a [`LogRecord`] (point, operation, bucket id,
//! timestamp) to the *working* log-bucket in memory, and the BTT entry of the
//! bucket lists the log-bucket pages holding its records. A full working
//! log-bucket is sealed into the log-bucket buffer (a [`HotCold`] pair), so
//! log-buckets reach the device append-only in batch writes of the cold
//! list. A log-bucket may hold records of many logical buckets.
//!
//! - **readBucket** (Algorithm 1): the pages of `BTT[B]` that are not in
//!   memory are read in **one** batch; the records of `B` are replayed in
//!   timestamp order (the last record of a point wins; a delete removes it).
//!   [`BucketLayer::read_many`] does the same for a group of buckets.
//! - **Insert** (Algorithm 2): while the bucket's estimated size is below
//!   its capacity (the records of one log-bucket), the record is appended
//!   without reading anything; otherwise the bucket is read, and split if it
//!   really is full. A point the grid file holds is refused, as GFFM does;
//!   a new point is still appended without reading (see below).
//! - **Points held: fingerprints.** Appending blindly cannot see a point
//!   already there, and the replay lets the last record of a point win, so
//!   a second object at a point would silently replace the first. Each
//!   BTT entry therefore keeps a 32-bit fingerprint of every point its
//!   bucket holds ([`BttEntry::fps`], 4 bytes a point, outside the buffer
//!   budget like the grid file's id set; it was a map of every point to
//!   its id, about 100 bytes a point with the replay at open). A point
//!   whose fingerprint the bucket lacks is surely not there: it is
//!   appended without reading, as Algorithm 2 does. A fingerprint that
//!   matches (the point is there, or another point shares it, about one
//!   in 2^32 per point of the bucket) costs one readBucket, which
//!   decides exactly. Fingerprints are not known after an open for a
//!   bucket whose records include deletes or repeat a fingerprint (see
//!   below): its first update reads it, and any read of a bucket fills
//!   them. Nothing on the device changes.
//! - **Delete** (Algorithm 3): a point whose fingerprint the bucket lacks
//!   is [`DeleteOutcome::NotFound`] without reading; otherwise the bucket
//!   is read (one readBucket, as GFFM reads its bucket page) and a delete
//!   record is appended only if it holds the point under the object's id.
//!   The thesis appends the record without reading and without a check;
//!   its workloads delete nothing. At or below the occupancy threshold the
//!   grid file tries a merge.
//! - Split and merge give the resulting buckets **fresh** logical ids and
//!   append their live records anew; the old ids leave the BTT. A
//!   log-bucket page no BTT entry lists any more is freed.
//!
//! **Persistence of the BTT: rebuilt at open.** A checkpoint writes the
//! sealed log-buckets, the working log-bucket and, in the metadata, the
//! list of log-bucket pages some bucket still uses, the working page, the
//! next bucket id and the clock. [`BucketLayer::open`] reads every listed
//! page (in batches), keeps the records of buckets that a sub-directory
//! still references (ids are never reused, so records of split or merged
//! buckets are recognised as dead), and rebuilds each BTT list. Records
//! are not kept: each bucket counts its inserts and deletes (its size,
//! deletes assumed to hit, exact for a file whose deletes were checked)
//! and keeps the fingerprints of its inserts, which are its points when
//! it has no delete record and no fingerprint twice (else they are left
//! unknown). Its cost is one read of every live log-bucket page. When
//! every bucket is known, the ids of the insert records read are the ids
//! held: the grid file takes them as its id set (an `ObjectIds`);
//! otherwise it rebuilds the set by reading the buckets (as GFFM's), at
//! the first insertion after the open.
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::index::object_ids::ObjectIds;
use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

use super::buffer::{BufferStats, HotCold, PageValue};
use super::codec::{self, PageKind, Reader, Writer};
use super::{
    Alloc, BucketIo, BucketLayer, DeleteOutcome, GridOptions, GridPoint, InsertOutcome, OpenedIds,
};

/// Bytes of one encoded log record.
const RECORD_BYTES: usize = 41;

/// What a log record does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOp {
    /// The point is (now) in the bucket with this id.
    Insert,
    /// The point is no longer in the bucket.
    Delete,
}

/// One log record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogRecord {
    /// The point (its id is 0 in delete records).
    pub point: GridPoint,
    /// The operation.
    pub op: LogOp,
    /// Logical bucket id.
    pub bucket: u64,
    /// Timestamp (a counter over the whole grid file).
    pub ts: u64,
}

/// A decoded log-bucket page.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LogPage(pub Vec<LogRecord>);

impl PageValue for LogPage {
    fn encode(&self, page_size: usize) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        w.len(self.0.len())?;
        for r in &self.0 {
            w.f64(r.point.x);
            w.f64(r.point.y);
            w.u64(r.point.id);
            w.u64(r.bucket);
            w.u64(r.ts);
            w.u8(match r.op {
                LogOp::Insert => 1,
                LogOp::Delete => 2,
            });
        }
        codec::frame(PageKind::LogBucket, &w.buf, page_size)
    }

    fn decode(id: PageId, page: &[u8]) -> Result<Self> {
        let p = codec::unframe_kind(id, page, PageKind::LogBucket)?;
        let mut r = Reader::new(p, Some(id));
        let n = r.count(RECORD_BYTES)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let point = GridPoint {
                x: r.f64()?,
                y: r.f64()?,
                id: r.u64()?,
            };
            let bucket = r.u64()?;
            let ts = r.u64()?;
            let op = match r.u8()? {
                1 => LogOp::Insert,
                2 => LogOp::Delete,
                o => {
                    return Err(Error::corrupt(
                        Some(id),
                        format!("unknown log operation {o}"),
                    ))
                }
            };
            v.push(LogRecord {
                point,
                op,
                bucket,
                ts,
            });
        }
        Ok(LogPage(v))
    }
}

/// One BTT entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BttEntry {
    /// Log-bucket pages holding records of the bucket, oldest first.
    pub pages: Vec<PageId>,
    /// Points in the bucket: exact after a read, else counted from the
    /// records appended since (deletes assumed to hit).
    pub est: usize,
    /// The [`fingerprint`]s of the points the bucket holds, in no order
    /// (equal ones for points that share one); `None` while not known
    /// (after an open, see the module docs): a read fills them.
    pub fps: Option<Vec<u32>>,
}

/// LB-Grid's bucket layer (see the module docs).
#[derive(Debug)]
pub struct LogBuckets {
    buf: HotCold<LogPage>,
    cap: usize,
    btt: HashMap<u64, BttEntry>,
    refs: HashMap<PageId, u32>,
    work: Vec<LogRecord>,
    work_page: Option<PageId>,
    next_bucket: u64,
    ts: u64,
    /// The object ids of the insert records read at open, while every
    /// bucket is known and no id came twice (then they are the ids held);
    /// `None` otherwise, and once the grid file took them.
    opened_ids: Option<ObjectIds>,
}

/// The key of a point in the replay: the bits of its coordinates (`-0.0`
/// is normalised by the grid file before it gets here).
fn key(x: f64, y: f64) -> (u64, u64) {
    (x.to_bits(), y.to_bits())
}

/// splitmix64's finaliser: every bit of `z` reaches every bit of the result.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The 32-bit fingerprint of point `(x, y)` kept in [`BttEntry::fps`]: a
/// fixed function of its coordinates' bits (the same in every run, so
/// the I/O of a workload is reproducible). Equal points have equal
/// fingerprints; two points of a bucket share one by chance only.
pub fn fingerprint(x: f64, y: f64) -> u32 {
    let (kx, ky) = key(x, y);
    (mix(mix(kx) ^ ky) >> 32) as u32
}

/// The fingerprints of `pts`.
fn fingerprints(pts: &[GridPoint]) -> Vec<u32> {
    pts.iter().map(|p| fingerprint(p.x, p.y)).collect()
}

/// Replays records (any order) into the live points.
fn replay(mut recs: Vec<LogRecord>) -> Vec<GridPoint> {
    recs.sort_by_key(|r| r.ts);
    let mut live: HashMap<(u64, u64), (u64, GridPoint)> = HashMap::new();
    for r in recs {
        let key = key(r.point.x, r.point.y);
        match r.op {
            LogOp::Insert => {
                live.insert(key, (r.ts, r.point));
            }
            LogOp::Delete => {
                live.remove(&key);
            }
        }
    }
    let mut v: Vec<(u64, GridPoint)> = live.into_values().collect();
    v.sort_by_key(|t| t.0);
    v.into_iter().map(|t| t.1).collect()
}

impl LogBuckets {
    /// Logical buckets in the BTT.
    #[cfg(test)]
    pub fn buckets(&self) -> usize {
        self.btt.len()
    }

    /// Mean length of the BTT lists (the thesis' L).
    #[cfg(test)]
    pub fn mean_list_len(&self) -> f64 {
        if self.btt.is_empty() {
            return 0.0;
        }
        self.btt.values().map(|e| e.pages.len()).sum::<usize>() as f64 / self.btt.len() as f64
    }

    /// Heap bytes of the fingerprints of every bucket: what the layer
    /// keeps per point beside the BTT's page lists.
    #[cfg(test)]
    pub fn held_bytes(&self) -> usize {
        self.btt
            .values()
            .filter_map(|e| e.fps.as_ref())
            .map(|v| v.capacity() * std::mem::size_of::<u32>())
            .sum()
    }

    /// Buckets whose fingerprints are not known.
    #[cfg(test)]
    pub fn unknown_buckets(&self) -> usize {
        self.btt.values().filter(|e| e.fps.is_none()).count()
    }

    fn entry(&mut self, b: u64) -> Result<&mut BttEntry> {
        self.btt
            .get_mut(&b)
            .ok_or_else(|| Error::corrupt(None, format!("logical bucket {b} is not in the BTT")))
    }

    /// Appends a record to the working log-bucket, sealing it first if full
    /// (`room`: see [`LogBuckets::seal`]). An error changes nothing.
    fn append(&mut self, io: &mut BucketIo<'_>, rec: LogRecord, room: bool) -> Result<()> {
        let wp = match self.work_page {
            Some(p) => p,
            None => {
                let p = io.alloc.alloc()?;
                self.work_page = Some(p);
                p
            }
        };
        let wp = if self.work.len() >= self.cap {
            self.seal(io, wp, room)?
        } else {
            wp
        };
        self.work.push(rec);
        let e = self.entry(rec.bucket)?;
        if e.pages.last() != Some(&wp) {
            e.pages.push(wp);
            *self.refs.entry(wp).or_insert(0) += 1;
        }
        Ok(())
    }

    /// Moves the full working log-bucket into the buffer (dirty) and starts
    /// a new one. The new page and (with `room`) room in the buffer come
    /// first, so an error changes nothing. Without `room` the caller has
    /// made room already (see [`BucketLayer::rewrite`]) and only the
    /// allocation can fail.
    fn seal(&mut self, io: &mut BucketIo<'_>, wp: PageId, room: bool) -> Result<PageId> {
        if self.refs.get(&wp).copied().unwrap_or(0) == 0 {
            // No live bucket needs it: reuse the page.
            self.work.clear();
            return Ok(wp);
        }
        let np = io.alloc.alloc()?;
        if room {
            if let Err(e) = self.buf.reserve(io.dev, 1) {
                io.alloc.free(np);
                return Err(e);
            }
        }
        self.buf.stage(wp, LogPage(std::mem::take(&mut self.work)));
        self.work_page = Some(np);
        Ok(np)
    }

    /// Pages that [`BucketLayer::rewrite`] of `old` into `pieces` allocates,
    /// log-buckets it seals into the buffer, and the pages dropping `old`
    /// frees: the same walk as [`LogBuckets::drop_bucket`] and
    /// [`LogBuckets::append`], without changing anything.
    fn rewrite_pages(&self, old: &[u64], pieces: &[Vec<GridPoint>]) -> (u64, usize, Vec<PageId>) {
        let mut left: HashMap<PageId, u32> = HashMap::new();
        let old: HashSet<u64> = old.iter().copied().collect();
        for e in old.iter().filter_map(|b| self.btt.get(b)) {
            for &p in &e.pages {
                let n = left
                    .entry(p)
                    .or_insert_with(|| self.refs.get(&p).copied().unwrap_or(0));
                *n = n.saturating_sub(1);
            }
        }
        let refs = |p: PageId| {
            left.get(&p)
                .copied()
                .unwrap_or_else(|| self.refs.get(&p).copied().unwrap_or(0))
        };
        let mut freed: Vec<PageId> = left
            .iter()
            .filter(|&(&p, &n)| n == 0 && Some(p) != self.work_page)
            .map(|(&p, _)| p)
            .collect();
        freed.sort_unstable();
        let mut len = self
            .work
            .iter()
            .filter(|r| !old.contains(&r.bucket))
            .count();
        // Whether the working page exists, and whether a live bucket uses it.
        let (mut page, mut live) = (
            self.work_page.is_some(),
            self.work_page.is_some_and(|p| refs(p) > 0),
        );
        let (mut allocs, mut seals) = (0u64, 0usize);
        for _ in pieces.iter().flatten() {
            if !page {
                allocs += 1;
                (page, live) = (true, false);
            }
            if len >= self.cap {
                if live {
                    allocs += 1;
                    seals += 1;
                }
                len = 0;
            }
            len += 1;
            live = true;
        }
        (allocs, seals, freed)
    }

    fn drop_bucket(&mut self, alloc: &mut Alloc, b: u64) {
        let Some(e) = self.btt.remove(&b) else { return };
        self.work.retain(|r| r.bucket != b);
        for p in e.pages {
            let left = match self.refs.get_mut(&p) {
                Some(n) => {
                    *n = n.saturating_sub(1);
                    *n
                }
                None => 0,
            };
            if left == 0 {
                self.refs.remove(&p);
                if Some(p) != self.work_page {
                    self.buf.remove(p);
                    alloc.free(p);
                }
            }
        }
    }

    /// Appends a record of `op` on `point` for bucket `b`, stamped with the
    /// next timestamp (`room`: see [`LogBuckets::seal`]).
    fn log(
        &mut self,
        io: &mut BucketIo<'_>,
        bucket: u64,
        point: GridPoint,
        op: LogOp,
        room: bool,
    ) -> Result<()> {
        self.ts += 1;
        let ts = self.ts;
        self.append(
            io,
            LogRecord {
                point,
                op,
                bucket,
                ts,
            },
            room,
        )
    }

    /// Appends the insert record of `p`, a point bucket `b` does not hold,
    /// and counts it in the entry: `est` points before it.
    fn log_insert(
        &mut self,
        io: &mut BucketIo<'_>,
        b: u64,
        p: GridPoint,
        est: usize,
    ) -> Result<InsertOutcome> {
        self.log(io, b, p, LogOp::Insert, true)?;
        let e = self.entry(b)?;
        e.est = est + 1;
        if let Some(v) = e.fps.as_mut() {
            v.push(fingerprint(p.x, p.y));
        }
        Ok(InsertOutcome::Done)
    }

    /// Inserts `p`, a point the layer does not hold, into bucket `b`
    /// (Algorithm 2); `read`: the bucket's points if it was just read.
    fn insert_new(
        &mut self,
        io: &mut BucketIo<'_>,
        b: u64,
        p: GridPoint,
        read: Option<Vec<GridPoint>>,
    ) -> Result<InsertOutcome> {
        let est = self.entry(b)?.est;
        if est < self.cap {
            return self.log_insert(io, b, p, est);
        }
        let mut pts = match read {
            Some(pts) => pts,
            None => self.read_one(io.dev, b)?,
        };
        if pts.iter().any(|q| q.at(p.x, p.y)) {
            // The bucket holds it after all: refused, never replaced.
            return Ok(InsertOutcome::Duplicate);
        }
        if pts.len() < self.cap {
            let n = pts.len();
            return self.log_insert(io, b, p, n);
        }
        pts.push(p);
        Ok(InsertOutcome::Full(pts))
    }

    /// False if bucket `b` surely holds no point at `(x, y)`: its
    /// fingerprints are known and none matches. True means a read must
    /// tell.
    fn may_hold(&self, b: u64, x: f64, y: f64) -> bool {
        self.btt
            .get(&b)
            .and_then(|e| e.fps.as_ref())
            .is_none_or(|v| v.contains(&fingerprint(x, y)))
    }

    /// Takes the records of live buckets in page `p` into the BTT at open:
    /// the page joins their lists; an insert's fingerprint joins its
    /// bucket's, a delete is counted in `dels`.
    fn take_page(&mut self, p: PageId, lp: &LogPage, dels: &mut HashMap<u64, usize>) {
        for rec in &lp.0 {
            let Some(e) = self.btt.get_mut(&rec.bucket) else {
                continue;
            };
            if e.pages.last() != Some(&p) {
                e.pages.push(p);
                *self.refs.entry(p).or_insert(0) += 1;
            }
            match rec.op {
                LogOp::Insert => {
                    if let Some(v) = e.fps.as_mut() {
                        v.push(fingerprint(rec.point.x, rec.point.y));
                    }
                    if let Some(ids) = self.opened_ids.as_mut() {
                        if !ids.insert(rec.point.id) {
                            self.opened_ids = None;
                        }
                    }
                }
                LogOp::Delete => *dels.entry(rec.bucket).or_insert(0) += 1,
            }
        }
    }

    /// After the pages are taken at open: each bucket's size is its
    /// inserts less its deletes, and its fingerprints are its points'
    /// when it has no delete and no fingerprint twice (its inserts are
    /// then its points), else unknown; the ids read are kept only if
    /// every bucket is known.
    fn settle_open(&mut self, dels: &HashMap<u64, usize>) {
        let mut all_known = true;
        for (b, e) in self.btt.iter_mut() {
            let d = dels.get(b).copied().unwrap_or(0);
            let Some(mut v) = e.fps.take() else { continue };
            e.est = v.len().saturating_sub(d);
            v.sort_unstable();
            if d == 0 && v.windows(2).all(|w| w.first() != w.get(1)) {
                v.shrink_to_fit();
                e.fps = Some(v);
            } else {
                all_known = false;
            }
        }
        if !all_known {
            self.opened_ids = None;
        }
    }
}

impl BucketLayer for LogBuckets {
    const KIND: u8 = 2;
    const NAME: &'static str = "lbgrid";
    const BLIND_UPDATES: bool = true;

    fn new(opts: &GridOptions, page_size: usize) -> Result<Self> {
        let cap = codec::slots(page_size, RECORD_BYTES, "log records")?;
        Ok(LogBuckets {
            buf: HotCold::new(opts.bucket_hot_pages, opts.cold_pages)?,
            cap,
            btt: HashMap::new(),
            refs: HashMap::new(),
            work: Vec::new(),
            work_page: None,
            next_bucket: 1,
            ts: 0,
            opened_ids: None,
        })
    }

    fn capacity(&self) -> usize {
        self.cap
    }

    fn size_hint(&self, b: u64) -> usize {
        self.btt.get(&b).map_or(0, |e| e.est)
    }

    fn pages_of(&self, b: u64) -> usize {
        self.btt.get(&b).map_or(0, |e| {
            e.pages
                .iter()
                .filter(|p| Some(**p) != self.work_page)
                .count()
        })
    }

    fn rewrite(
        &mut self,
        io: &mut BucketIo<'_>,
        old: &[u64],
        pieces: Vec<Vec<GridPoint>>,
    ) -> Result<Vec<u64>> {
        // All or nothing: the pages the rewrite needs are counted first, and
        // room for the log-buckets it seals is made in the buffer (after
        // the pages that dropping `old` frees have left it, as before);
        // a refusal changes nothing. After that nothing can fail.
        let (need, seals, freed) = self.rewrite_pages(old, &pieces);
        let avail = io.alloc.available_after(&freed);
        if need > avail {
            return Err(Error::DeviceFull(format!(
                "grid file needs {need} pages for new log-buckets but the device has {avail} left"
            )));
        }
        let taken: Vec<(PageId, Arc<LogPage>)> = freed
            .iter()
            .filter_map(|&p| self.buf.take_dirty(p).map(|v| (p, v)))
            .collect();
        if let Err(e) = self.buf.reserve(io.dev, seals) {
            for (p, v) in taken {
                self.buf.stage_arc(p, v);
            }
            return Err(e);
        }
        for &b in old {
            self.drop_bucket(io.alloc, b);
        }
        let mut ids = Vec::with_capacity(pieces.len());
        for piece in pieces {
            let id = self.next_bucket;
            self.next_bucket += 1;
            self.btt.insert(
                id,
                BttEntry {
                    pages: Vec::new(),
                    est: piece.len(),
                    // A split's pieces hold the point being inserted.
                    fps: Some(fingerprints(&piece)),
                },
            );
            for point in piece {
                self.log(io, id, point, LogOp::Insert, false)?;
            }
            ids.push(id);
        }
        Ok(ids)
    }

    fn read_many(&mut self, dev: &dyn PageDevice, bs: &[u64]) -> Result<Vec<Vec<GridPoint>>> {
        let mut pages: Vec<PageId> = Vec::new();
        for b in bs {
            let e = self.btt.get(b).ok_or_else(|| {
                Error::corrupt(None, format!("logical bucket {b} is not in the BTT"))
            })?;
            for &p in &e.pages {
                if Some(p) != self.work_page && !pages.contains(&p) {
                    pages.push(p);
                }
            }
        }
        let vals: HashMap<PageId, Arc<LogPage>> = if pages.is_empty() {
            HashMap::new()
        } else {
            pages
                .iter()
                .copied()
                .zip(self.buf.fetch_many(dev, &pages)?)
                .collect()
        };
        let mut out = Vec::with_capacity(bs.len());
        for b in bs {
            let mut recs = Vec::new();
            let list = self.btt.get(b).map(|e| e.pages.clone()).unwrap_or_default();
            for p in list {
                if Some(p) == self.work_page {
                    recs.extend(self.work.iter().filter(|r| r.bucket == *b).copied());
                } else if let Some(lp) = vals.get(&p) {
                    recs.extend(lp.0.iter().filter(|r| r.bucket == *b).copied());
                }
            }
            let pts = replay(recs);
            if let Some(e) = self.btt.get_mut(b) {
                e.est = pts.len();
                if e.fps.is_none() {
                    e.fps = Some(fingerprints(&pts));
                }
            }
            out.push(pts);
        }
        Ok(out)
    }

    fn read_one(&mut self, dev: &dyn PageDevice, b: u64) -> Result<Vec<GridPoint>> {
        Ok(self
            .read_many(dev, &[b])?
            .into_iter()
            .next()
            .unwrap_or_default())
    }

    fn insert(&mut self, io: &mut BucketIo<'_>, b: u64, p: GridPoint) -> Result<InsertOutcome> {
        // Fingerprints that rule the point out: appended blindly.
        if !self.may_hold(b, p.x, p.y) {
            return self.insert_new(io, b, p, None);
        }
        let pts = self.read_one(io.dev, b)?;
        if pts.iter().any(|q| q.at(p.x, p.y)) {
            return Ok(InsertOutcome::Duplicate);
        }
        self.insert_new(io, b, p, Some(pts))
    }

    fn delete(
        &mut self,
        io: &mut BucketIo<'_>,
        b: u64,
        p: GridPoint,
    ) -> Result<(DeleteOutcome, usize)> {
        let (x, y) = (p.x, p.y);
        if !self.may_hold(b, x, y)
            || !self
                .read_one(io.dev, b)?
                .iter()
                .any(|q| q.at(x, y) && q.id == p.id)
        {
            return Ok((DeleteOutcome::NotFound, self.entry(b)?.est));
        }
        self.log(io, b, GridPoint { x, y, id: 0 }, LogOp::Delete, true)?;
        let e = self.entry(b)?;
        e.est = e.est.saturating_sub(1);
        let f = fingerprint(x, y);
        if let Some(v) = e.fps.as_mut() {
            if let Some(i) = v.iter().position(|&g| g == f) {
                v.swap_remove(i);
            }
        }
        Ok((DeleteOutcome::Logged, e.est))
    }

    fn surely_absent(&self, b: u64, x: f64, y: f64) -> bool {
        !self.may_hold(b, x, y)
    }

    fn take_ids(&mut self) -> Option<OpenedIds> {
        self.opened_ids.take().map(OpenedIds)
    }

    fn held_len(&self) -> Option<u64> {
        self.btt
            .values()
            .map(|e| e.fps.as_ref().map(|v| v.len() as u64))
            .sum()
    }

    fn flush(&mut self, dev: &dyn PageDevice) -> Result<()> {
        self.buf.flush_all(dev)?;
        if let Some(wp) = self.work_page {
            dev.write(wp, &LogPage(self.work.clone()).encode(dev.page_size())?)?;
        }
        Ok(())
    }

    fn encode_meta(&self, w: &mut Writer) -> Result<()> {
        w.u64(self.next_bucket);
        w.u64(self.ts);
        w.u64(self.work_page.unwrap_or(0));
        let mut pages: Vec<PageId> = self
            .refs
            .keys()
            .copied()
            .filter(|p| Some(*p) != self.work_page)
            .collect();
        pages.sort_unstable();
        w.len(pages.len())?;
        pages.iter().for_each(|p| w.u64(*p));
        Ok(())
    }

    fn open(
        opts: &GridOptions,
        dev: &dyn PageDevice,
        r: &mut Reader<'_>,
        live: &HashSet<u64>,
    ) -> Result<(Self, Vec<PageId>)> {
        let mut layer = Self::new(opts, dev.page_size())?;
        layer.next_bucket = r.u64()?;
        layer.ts = r.u64()?;
        let wp = r.u64()?;
        let n = r.count(8)?;
        let mut pages = Vec::with_capacity(n);
        for _ in 0..n {
            pages.push(r.u64()?);
        }
        if let Some(b) = live.iter().find(|&&b| b >= layer.next_bucket || b == 0) {
            return Err(Error::corrupt(
                Some(0),
                format!("sub-directory refers to logical bucket {b}, never allocated"),
            ));
        }
        for &b in live {
            let fps = Some(Vec::new());
            layer.btt.insert(
                b,
                BttEntry {
                    fps,
                    ..BttEntry::default()
                },
            );
        }
        let mut dels: HashMap<u64, usize> = HashMap::new();
        layer.opened_ids = Some(ObjectIds::new());
        let ps = dev.page_size();
        for chunk in pages.chunks(opts.bucket_hot_pages.max(1)) {
            let mut buf = vec![0u8; chunk.len() * ps];
            dev.read_batch(chunk, &mut buf)?;
            for (i, &p) in chunk.iter().enumerate() {
                let page = buf.get(i * ps..(i + 1) * ps).unwrap_or_default();
                let lp = LogPage::decode(p, page)?;
                layer.take_page(p, &lp, &mut dels);
            }
        }
        let mut used: Vec<PageId> = layer.refs.keys().copied().collect();
        if wp != 0 {
            let mut page = vec![0u8; ps];
            dev.read(wp, &mut page)?;
            let lp = LogPage::decode(wp, &page)?;
            layer.take_page(wp, &lp, &mut dels);
            layer.work =
                lp.0.into_iter()
                    .filter(|r| live.contains(&r.bucket))
                    .collect();
            layer.work_page = Some(wp);
            used.push(wp);
        }
        layer.settle_open(&dels);
        if let Some(rec) = layer.work.iter().find(|r| r.ts > layer.ts) {
            return Err(Error::corrupt(
                Some(wp),
                format!(
                    "log record with timestamp {} after the clock {}",
                    rec.ts, layer.ts
                ),
            ));
        }
        Ok((layer, used))
    }

    fn buffer_stats(&self) -> BufferStats {
        self.buf.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_keeps_last_record_and_drops_deleted() {
        let p = |x: f64, id| GridPoint { x, y: 0.0, id };
        let r = |point, op, ts| LogRecord {
            point,
            op,
            bucket: 1,
            ts,
        };
        let out = replay(vec![
            r(p(1.0, 1), LogOp::Insert, 1),
            r(p(2.0, 2), LogOp::Insert, 2),
            r(p(1.0, 0), LogOp::Delete, 3),
            r(p(2.0, 5), LogOp::Insert, 4),
            r(p(1.0, 6), LogOp::Insert, 5),
        ]);
        assert_eq!(out, vec![p(2.0, 5), p(1.0, 6)]);
    }

    #[test]
    fn log_page_round_trip_and_bad_op() {
        let lp = LogPage(vec![LogRecord {
            point: GridPoint {
                x: 1.5,
                y: 2.5,
                id: 3,
            },
            op: LogOp::Delete,
            bucket: 9,
            ts: 11,
        }]);
        let enc = lp.encode(512).unwrap();
        assert_eq!(LogPage::decode(2, &enc).unwrap(), lp);
        let mut w = Writer::default();
        w.u32(1);
        for _ in 0..5 {
            w.u64(0);
        }
        w.u8(7);
        let bad = codec::frame(PageKind::LogBucket, &w.buf, 512).unwrap();
        assert!(LogPage::decode(2, &bad).is_err());
    }
}
