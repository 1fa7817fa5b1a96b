//! `FaultyDevice`: crash and fault injection for tests.
//!
//! The wrapped device is the *durable* medium (like the "durable" image of
//! redb's crash-consistency backend). Writes and trims since the last
//! [`sync`](PageDevice::sync) live in a volatile overlay that reads see first;
//! `sync` applies the overlay to the inner device and syncs it.
//!
//! At a crash every unsynced write is independently **kept**, **dropped** or
//! **torn** (a prefix of `k × 512` bytes of the new content lands over the old
//! content, `0 < k < page_size / 512`), and the surviving writes reach the
//! inner device in a random order, so unsynced data persists partially and out
//! of order. The decisions come from a `ChaCha8Rng` seeded by the
//! [`FaultPlan`]: the same plan and the same calls give the same durable image.
//!
//! Besides crashes the plan can inject sticky I/O errors (the `n`-th read,
//! write or sync call fails with [`Error::InjectedFault`] and every later call
//! fails too, like redb's `CheckedBackend`) and a full device
//! ([`Error::DeviceFull`] for pages at or beyond a limit, or beyond a number of
//! distinct pages written). An error of the inner device is sticky too.
//!
//! Details: a trim is an unsynced write of zeros that a crash keeps or drops
//! (never tears); the pages of a crashing batch after the crash point never
//! reach the device; [`FaultyDevice::into_inner`] without a crash drops every
//! unsynced write. `stats()` reports this wrapper's host-visible I/O (reads
//! served from the overlay count like any read) and, as `sim`, the inner
//! device's simulator counters, which see only what reached the durable medium.
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Counted, DeviceExt, DeviceGeometry, DeviceStats, PageDevice, PageId};
use crate::{Error, Result};

/// Size of the atomic unit of a torn write: a page tears only at multiples of this.
pub const SECTOR_SIZE: usize = 512;

/// What a [`FaultyDevice`] will do wrong. Build one with [`FaultPlan::none`],
/// [`FaultPlan::crash_after_writes`] or [`FaultPlan::random_crash`] and add
/// faults with the `with_*`/`fail_*` methods. Counts are 1-based.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Crash while the `n`-th page write is in flight (`Some(0)`: at the first write call, before any page).
    pub crash_at_write: Option<u64>,
    /// Crash during the `n`-th `sync` call, before any of it is durable.
    pub crash_at_sync: Option<u64>,
    /// Seed of the random decisions (crash point of `random_crash`, fate of unsynced writes).
    pub seed: u64,
    /// The `n`-th `read_batch` call fails (and every later call).
    pub fail_read: Option<u64>,
    /// The `n`-th `write_batch` call fails (and every later call).
    pub fail_write: Option<u64>,
    /// The `n`-th `sync` call fails (and every later call).
    pub fail_sync: Option<u64>,
    /// Writes to pages `>= limit` fail with [`Error::DeviceFull`].
    pub full_at_page: Option<u64>,
    /// Writes that would make more than this many distinct pages written fail with [`Error::DeviceFull`].
    pub max_distinct_pages: Option<u64>,
}

impl FaultPlan {
    /// No faults at all: the device behaves like its inner device with a volatile write cache.
    pub fn none() -> Self {
        FaultPlan::default()
    }

    /// Crash while the `n`-th page write (counted over all batches, 1-based) is in flight:
    /// the pages of that batch up to the `n`-th are unsynced writes at the crash, the rest
    /// of the batch never reaches the device, and the call returns [`Error::Crashed`].
    /// `n = 0` crashes at the first write call before any of its pages.
    pub fn crash_after_writes(n: u64) -> Self {
        FaultPlan {
            crash_at_write: Some(n),
            ..FaultPlan::default()
        }
    }

    /// Crash at a page write drawn uniformly from `1..=max_writes` with `seed`
    /// (the same seed also drives the fate of unsynced writes). `max_writes = 0`
    /// never crashes on its own.
    pub fn random_crash(seed: u64, max_writes: u64) -> Self {
        let crash_at_write = if max_writes == 0 {
            None
        } else {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
            Some(rng.gen_range(1..=max_writes))
        };
        FaultPlan {
            crash_at_write,
            seed,
            ..FaultPlan::default()
        }
    }

    /// Crash during the `n`-th `sync` call (1-based): its unsynced writes meet
    /// the same fates as at any crash and the call returns [`Error::Crashed`].
    /// Combines with a write crash point (whichever comes first).
    pub fn crash_at_sync(mut self, n: u64) -> Self {
        self.crash_at_sync = Some(n);
        self
    }

    /// Sets the seed of the crash decisions.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Fails the `n`-th `read_batch` call (1-based) and every call after it.
    pub fn fail_read(mut self, n: u64) -> Self {
        self.fail_read = Some(n);
        self
    }

    /// Fails the `n`-th `write_batch` call (1-based) and every call after it.
    /// The pages of the failed batch may still land if the device later crashes.
    pub fn fail_write(mut self, n: u64) -> Self {
        self.fail_write = Some(n);
        self
    }

    /// Fails the `n`-th `sync` call (1-based) and every call after it; nothing of
    /// that sync is guaranteed durable.
    pub fn fail_sync(mut self, n: u64) -> Self {
        self.fail_sync = Some(n);
        self
    }

    /// Writes to pages `>= limit` fail with [`Error::DeviceFull`] (not sticky: the batch is refused whole).
    pub fn full_at_page(mut self, limit: u64) -> Self {
        self.full_at_page = Some(limit);
        self
    }

    /// A write batch that would bring the number of distinct pages ever written
    /// above `n` fails with [`Error::DeviceFull`] (not sticky: the batch is refused whole).
    pub fn max_distinct_pages(mut self, n: u64) -> Self {
        self.max_distinct_pages = Some(n);
        self
    }
}

/// What happened to one unsynced write at a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteFate {
    /// The whole page reached the medium.
    Kept,
    /// Nothing of it reached the medium.
    Dropped,
    /// Only the first `bytes` bytes (a multiple of [`SECTOR_SIZE`]) reached the medium.
    Torn {
        /// Length of the prefix that landed.
        bytes: usize,
    },
}

/// One unsynced write at the crash and its fate, in the order the writes were issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashRecord {
    /// Page written.
    pub page: PageId,
    /// `true` for a trim (the new content is zeros).
    pub trim: bool,
    /// What reached the medium.
    pub fate: WriteFate,
    /// Position of this write in the order in which surviving writes were applied (`None` if dropped).
    pub applied_as: Option<usize>,
}

/// A wrapper that simulates a volatile write cache over a durable device, with
/// crashes, torn writes and injected errors. See the [module docs](self).
///
/// ```
/// use geoflash::storage::faulty::{FaultPlan, FaultyDevice};
/// use geoflash::storage::mem::MemDevice;
/// use geoflash::storage::PageDevice;
/// use geoflash::Error;
///
/// // Crash while the third page write is in flight.
/// let dev = FaultyDevice::new(MemDevice::new(512, 16)?, FaultPlan::crash_after_writes(3).with_seed(7));
/// dev.write(0, &[1u8; 512])?;
/// dev.sync()?; // page 0 is durable now
/// dev.write(1, &[2u8; 512])?; // volatile: kept, dropped or torn at the crash
/// let mut buf = [0u8; 512];
/// dev.read(1, &mut buf)?; // reads see the newest data before the crash
/// assert_eq!(buf, [2u8; 512]);
/// assert!(matches!(dev.write(2, &[3u8; 512]), Err(Error::Crashed(_))));
/// assert!(matches!(dev.read(0, &mut buf), Err(Error::Crashed(_)))); // sticky
/// assert_eq!(dev.writes_seen(), 3);
///
/// // "Reboot": recover from the durable image.
/// let durable = dev.into_inner();
/// durable.read(0, &mut buf)?;
/// assert_eq!(buf, [1u8; 512]); // synced data always survives
/// # Ok::<(), geoflash::Error>(())
/// ```
pub type FaultyDevice<D> = Counted<FaultyIo<D>>;

/// The faults behind a [`FaultyDevice`], uncounted.
#[derive(Debug)]
pub struct FaultyIo<D: PageDevice> {
    inner: D,
    page_size: usize,
    capacity: u64,
    plan: FaultPlan,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    rng: ChaCha8Rng,
    /// Unsynced writes in issue order (`None` = trim).
    log: Vec<(PageId, Option<Box<[u8]>>)>,
    /// Index in `log` of the newest unsynced write of each page.
    newest: HashMap<PageId, usize>,
    distinct: HashSet<PageId>,
    writes_seen: u64,
    read_calls: u64,
    write_calls: u64,
    sync_calls: u64,
    failed: Option<String>,
    crashed: Option<String>,
    crash_records: Vec<CrashRecord>,
}

impl<D: PageDevice> FaultyDevice<D> {
    /// Wraps `inner`, the durable medium, with the faults of `plan`.
    pub fn new(inner: D, plan: FaultPlan) -> Self {
        let page_size = inner.page_size();
        let capacity = inner.capacity();
        let state = State {
            rng: ChaCha8Rng::seed_from_u64(plan.seed),
            log: Vec::new(),
            newest: HashMap::new(),
            distinct: HashSet::new(),
            writes_seen: 0,
            read_calls: 0,
            write_calls: 0,
            sync_calls: 0,
            failed: None,
            crashed: None,
            crash_records: Vec::new(),
        };
        Counted::wrap(FaultyIo {
            inner,
            page_size,
            capacity,
            plan,
            state: Mutex::new(state),
        })
    }

    /// Consumes the wrapper and returns the durable device (to "reboot" and
    /// recover from it). Unsynced writes of a device that has not crashed are lost,
    /// as if the power had failed and every one of them had been dropped.
    pub fn into_inner(self) -> D {
        self.into_uncounted().inner
    }

    /// Consumes the wrapper as the end of its process leaves the device
    /// when the machine keeps running: every completed write, synced or not,
    /// is in the kernel's cache and reaches the durable medium (a process
    /// that failed and exited, then a new one reading the file). A crashed
    /// device is returned as the crash left it.
    pub fn into_inner_after_exit(self) -> Result<D> {
        let io = self.into_uncounted();
        {
            let st = io.lock();
            if st.crashed.is_none() {
                io.apply_unsynced(&st)?;
            }
        }
        Ok(io.inner)
    }
}

impl<D: PageDevice> FaultyIo<D> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked; the state is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The plan this device follows.
    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// Page writes seen so far (pages, not batches), including those of a batch
    /// in flight at the crash. Run a script once without faults to count its
    /// writes, then crash at each `k` in `1..=writes_seen()` to enumerate crash points.
    pub fn writes_seen(&self) -> u64 {
        self.lock().writes_seen
    }

    /// Number of writes and trims issued since the last successful sync (volatile).
    pub fn unsynced_writes(&self) -> usize {
        self.lock().log.len()
    }

    /// True once the device has crashed.
    pub fn is_crashed(&self) -> bool {
        self.lock().crashed.is_some()
    }

    /// The fate of every unsynced write at the crash, in issue order (empty before a crash).
    pub fn crash_records(&self) -> Vec<CrashRecord> {
        self.lock().crash_records.clone()
    }

    /// The durable device. Before a crash it holds only what was synced; after
    /// a crash it holds the post-crash image.
    pub fn durable(&self) -> &D {
        &self.inner
    }

    /// Crashes the device now: every unsynced write is kept, dropped or torn and
    /// the survivors are applied to the durable device in a random order. Every
    /// later call returns [`Error::Crashed`]. Crashing twice does nothing more.
    pub fn crash_now(&self) -> Result<()> {
        let mut st = self.lock();
        if st.crashed.is_some() {
            return Ok(());
        }
        let reason = format!(
            "crash requested after {} page writes; recover from the durable device",
            st.writes_seen
        );
        self.crash(&mut st, reason)
    }

    /// Applies the crash to the durable device and marks the device crashed.
    fn crash(&self, st: &mut State, reason: String) -> Result<()> {
        st.crashed = Some(reason);
        let sectors = self.page_size / SECTOR_SIZE;
        let log = std::mem::take(&mut st.log);
        st.newest.clear();
        let mut records = Vec::with_capacity(log.len());
        let mut survivors = Vec::new();
        for (i, (page, data)) in log.iter().enumerate() {
            let choice = st.rng.gen_range(0..3u32);
            let fate = match choice {
                0 => WriteFate::Kept,
                1 => WriteFate::Dropped,
                _ if sectors > 1 && data.is_some() => WriteFate::Torn {
                    bytes: st.rng.gen_range(1..sectors) * SECTOR_SIZE,
                },
                _ => WriteFate::Dropped,
            };
            if fate != WriteFate::Dropped {
                survivors.push(i);
            }
            records.push(CrashRecord {
                page: *page,
                trim: data.is_none(),
                fate,
                applied_as: None,
            });
        }
        survivors.shuffle(&mut st.rng);
        let mut old = vec![0u8; self.page_size];
        for (order, &i) in survivors.iter().enumerate() {
            let (Some((page, data)), Some(rec)) = (log.get(i), records.get_mut(i)) else {
                continue;
            };
            rec.applied_as = Some(order);
            match (data, rec.fate) {
                (None, _) => self.inner.trim(&[*page])?,
                (Some(d), WriteFate::Torn { bytes }) => {
                    self.inner.read(*page, &mut old)?;
                    if let (Some(dst), Some(src)) = (old.get_mut(..bytes), d.get(..bytes)) {
                        dst.copy_from_slice(src);
                    }
                    self.inner.write(*page, &old)?;
                }
                (Some(d), _) => self.inner.write(*page, d)?,
            }
        }
        st.crash_records = records;
        self.inner.sync()
    }

    /// The sticky error, if the device has crashed or failed.
    fn check_alive(st: &State) -> Result<()> {
        if let Some(reason) = &st.crashed {
            return Err(Error::Crashed(reason.clone()));
        }
        if let Some(reason) = &st.failed {
            return Err(Error::InjectedFault(reason.clone()));
        }
        Ok(())
    }

    fn fail(st: &mut State, reason: String) -> Error {
        st.failed = Some(reason.clone());
        Error::InjectedFault(reason)
    }

    /// Makes an error of the inner device sticky and returns it.
    fn inner_failed(st: &mut State, e: Error) -> Error {
        st.failed = Some(format!("the inner device failed earlier: {e}"));
        e
    }

    /// Writes the newest unsynced version of each page (or its trim) to
    /// the inner device, in issue order, without syncing it.
    fn apply_unsynced(&self, st: &State) -> Result<()> {
        // Apply the newest version of each page, in issue order.
        let mut newest: Vec<(usize, PageId)> = st.newest.iter().map(|(&p, &i)| (i, p)).collect();
        newest.sort_unstable();
        let mut pages = Vec::new();
        let mut data = Vec::new();
        let mut trims = Vec::new();
        for &(i, p) in &newest {
            match st.log.get(i) {
                Some((_, Some(d))) => {
                    pages.push(p);
                    data.extend_from_slice(d);
                }
                Some((_, None)) => trims.push(p),
                None => {}
            }
        }
        if !trims.is_empty() {
            self.inner.trim(&trims)?;
        }
        if !pages.is_empty() {
            self.inner.write_batch(&pages, &data)?;
        }
        Ok(())
    }

    /// The plan's full device: the number of `pages` that fit and the
    /// error of the first that does not, if any does not.
    fn first_full(&self, st: &State, pages: &[PageId]) -> Option<(usize, Error)> {
        if let Some(limit) = self.plan.full_at_page {
            if let Some(i) = pages.iter().position(|&p| p >= limit) {
                let p = pages[i];
                return Some((
                    i,
                    Error::DeviceFull(format!(
                        "injected: page {p} is at or beyond the planned limit of {limit} pages"
                    )),
                ));
            }
        }
        let max = self.plan.max_distinct_pages?;
        let mut new = HashSet::new();
        for (i, &p) in pages.iter().enumerate() {
            if !st.distinct.contains(&p) && new.insert(p) && (st.distinct.len() + new.len()) as u64 > max {
                return Some((
                    i,
                    Error::DeviceFull(format!(
                        "injected: page {p} would exceed the planned {max} distinct pages ({} used)",
                        st.distinct.len() + new.len() - 1
                    )),
                ));
            }
        }
        None
    }

    fn push_write(st: &mut State, page: PageId, data: Option<Box<[u8]>>) {
        st.newest.insert(page, st.log.len());
        st.log.push((page, data));
    }
}

impl<D: PageDevice> PageDevice for FaultyIo<D> {
    fn geometry(&self) -> DeviceGeometry {
        DeviceGeometry::new(self.page_size, self.capacity)
    }

    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        let mut st = self.lock();
        Self::check_alive(&st)?;
        st.read_calls += 1;
        if self.plan.fail_read == Some(st.read_calls) {
            let n = st.read_calls;
            return Err(Self::fail(
                &mut st,
                format!("read call {n} failed as planned; the device fails from now on"),
            ));
        }
        let mut missing = Vec::new();
        let mut missing_slots = Vec::new();
        for (slot, (&p, out)) in pages
            .iter()
            .zip(buf.chunks_exact_mut(self.page_size))
            .enumerate()
        {
            match st.newest.get(&p).and_then(|&i| st.log.get(i)) {
                Some((_, Some(data))) => out.copy_from_slice(data),
                Some((_, None)) => out.fill(0),
                None => {
                    missing.push(p);
                    missing_slots.push(slot);
                }
            }
        }
        if !missing.is_empty() {
            let mut tmp = vec![0u8; missing.len() * self.page_size];
            if let Err(e) = self.inner.read_batch(&missing, &mut tmp) {
                return Err(Self::inner_failed(&mut st, e));
            }
            for (&slot, data) in missing_slots.iter().zip(tmp.chunks_exact(self.page_size)) {
                let off = slot * self.page_size;
                if let Some(out) = buf.get_mut(off..off + self.page_size) {
                    out.copy_from_slice(data);
                }
            }
        }
        Ok(())
    }

    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        let mut st = self.lock();
        Self::check_alive(&st)?;
        if let Some((fit, full)) = self.first_full(&st, pages) {
            // A short write, as a full file system gives: the pages before
            // the first one without room are written.
            for (&p, chunk) in pages[..fit].iter().zip(data.chunks_exact(self.page_size)) {
                st.distinct.insert(p);
                Self::push_write(&mut st, p, Some(chunk.into()));
            }
            return Err(full);
        }
        st.write_calls += 1;
        let failing = self.plan.fail_write == Some(st.write_calls);
        for (&p, chunk) in pages.iter().zip(data.chunks_exact(self.page_size)) {
            if let Some(n) = self.plan.crash_at_write {
                if st.writes_seen >= n {
                    let reason = format!(
                        "crashed as planned while page write {n} was in flight; recover from the durable device"
                    );
                    self.crash(&mut st, reason.clone())?;
                    return Err(Error::Crashed(reason));
                }
            }
            st.writes_seen += 1;
            st.distinct.insert(p);
            Self::push_write(&mut st, p, Some(chunk.into()));
        }
        if let Some(n) = self.plan.crash_at_write {
            if st.writes_seen >= n && !pages.is_empty() && st.writes_seen - (pages.len() as u64) < n
            {
                // The crash point was the last page of this batch: it is still in flight.
                let reason = format!(
                    "crashed as planned while page write {n} was in flight; recover from the durable device"
                );
                self.crash(&mut st, reason.clone())?;
                return Err(Error::Crashed(reason));
            }
        }
        if failing {
            let n = st.write_calls;
            return Err(Self::fail(
                &mut st,
                format!("write call {n} failed as planned; the device fails from now on"),
            ));
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let mut st = self.lock();
        Self::check_alive(&st)?;
        st.sync_calls += 1;
        if self.plan.crash_at_sync == Some(st.sync_calls) {
            let reason = format!(
                "crashed as planned during sync call {}; recover from the durable device",
                st.sync_calls
            );
            self.crash(&mut st, reason.clone())?;
            return Err(Error::Crashed(reason));
        }
        if self.plan.fail_sync == Some(st.sync_calls) {
            let n = st.sync_calls;
            return Err(Self::fail(
                &mut st,
                format!("sync call {n} failed as planned; the device fails from now on"),
            ));
        }
        let applied = self.apply_unsynced(&st).and_then(|()| self.inner.sync());
        if let Err(e) = applied {
            return Err(Self::inner_failed(&mut st, e));
        }
        st.log.clear();
        st.newest.clear();
        Ok(())
    }

    fn trim(&self, pages: &[PageId]) -> Result<()> {
        let mut st = self.lock();
        Self::check_alive(&st)?;
        for &p in pages {
            Self::push_write(&mut st, p, None);
        }
        Ok(())
    }

    /// Counts the pages as written for the plan's full device (a reserved
    /// page has its room): [`Error::DeviceFull`] when they do not all fit.
    fn reserve(&self, pages: std::ops::Range<PageId>) -> Result<()> {
        let mut st = self.lock();
        Self::check_alive(&st)?;
        let pages: Vec<PageId> = pages.collect();
        if let Some((_, full)) = self.first_full(&st, &pages) {
            return Err(full);
        }
        st.distinct.extend(pages);
        Ok(())
    }

    fn describe(&self) -> String {
        format!("faulty({:?}) over {}", self.plan, self.inner.describe())
    }

    fn path(&self) -> Option<std::path::PathBuf> {
        self.inner.path()
    }
}

impl<D: PageDevice> DeviceExt for FaultyIo<D> {
    /// No I/O counters (the host-visible I/O, reads served from the
    /// overlay included, is [`Counted`]'s); the inner device's simulator
    /// counters, which reflect only what reached the durable medium (a
    /// reset of this wrapper's counters leaves them alone).
    fn stats(&self) -> DeviceStats {
        DeviceStats {
            sim: self.inner.stats().sim,
            ..DeviceStats::default()
        }
    }

    // Not `overwrites_durable`: the wrapped device is the durable medium
    // here, whatever it is (a crash never restores an image), so every
    // page keeps its before-image (the default).
    super::forward_device_ext!(inner: hint_tier, tiers, page_tier, sim_clock_ns);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::mem::MemDevice;
    use proptest::prelude::*;

    const PS: usize = 2048; // four sectors per page
    const CAP: u64 = 16;

    /// Content of version `v` of a page: every sector distinct from every other
    /// version's sector at the same place.
    fn content(v: u32) -> Vec<u8> {
        (0..PS)
            .map(|i| (v as usize * 131 + i / SECTOR_SIZE * 17 + i) as u8 ^ (v >> 8) as u8)
            .collect()
    }

    #[derive(Debug, Clone)]
    enum Op {
        Write(Vec<PageId>),
        Trim(Vec<PageId>),
        Sync,
    }

    fn script() -> Vec<Op> {
        use Op::*;
        vec![
            Write(vec![0, 1, 2]),
            Sync,
            Write(vec![1]),
            Write(vec![3, 4]),
            Write(vec![1, 5]),
            Trim(vec![2]),
            Sync,
            Write(vec![0]),
            Write(vec![6, 7, 0, 3]),
            Sync,
            Write(vec![2, 2, 4]),
            Write(vec![5]),
        ]
    }

    /// What the durable image may hold per page: the last synced version and
    /// every version written after it (up to the crash).
    #[derive(Default)]
    struct Oracle {
        synced: HashMap<PageId, Vec<u8>>,
        pending: Vec<(PageId, Vec<u8>)>,
    }

    impl Oracle {
        fn sync(&mut self) {
            for (p, d) in self.pending.drain(..) {
                self.synced.insert(p, d);
            }
        }
        fn synced(&self, p: PageId) -> Vec<u8> {
            self.synced.get(&p).cloned().unwrap_or_else(|| vec![0; PS])
        }
        /// Every page is its synced version, or sector by sector a mix of it and later versions.
        fn check(&self, durable: &MemDevice) {
            let mut buf = vec![0u8; PS];
            for p in 0..CAP {
                durable.read(p, &mut buf).unwrap();
                let base = self.synced(p);
                let later: Vec<&Vec<u8>> = self
                    .pending
                    .iter()
                    .filter(|(q, _)| *q == p)
                    .map(|(_, d)| d)
                    .collect();
                if later.is_empty() {
                    assert_eq!(buf, base, "page {p} lost its synced content");
                    continue;
                }
                for (s, got) in buf.chunks(SECTOR_SIZE).enumerate() {
                    let r = s * SECTOR_SIZE..(s + 1) * SECTOR_SIZE;
                    let ok = got == &base[r.clone()] || later.iter().any(|v| got == &v[r.clone()]);
                    assert!(ok, "page {p} sector {s} holds data never written there");
                }
                // A single later version: exactly old, new, or a sector-aligned prefix of new over old.
                if let [only] = later.as_slice() {
                    let prefix = (0..=PS / SECTOR_SIZE).any(|k| {
                        let cut = k * SECTOR_SIZE;
                        buf[..cut] == only[..cut] && buf[cut..] == base[cut..]
                    });
                    assert!(
                        prefix,
                        "page {p} is not a torn prefix of its one unsynced write"
                    );
                }
            }
        }
    }

    /// Runs `ops` on a fresh device with `plan`, stopping at the crash (or
    /// crashing at the end); returns the oracle and the device.
    fn run(ops: &[Op], plan: FaultPlan) -> (Oracle, FaultyDevice<MemDevice>) {
        let crash_at = plan.crash_at_write;
        let dev = FaultyDevice::new(MemDevice::new(PS, CAP).unwrap(), plan);
        let mut oracle = Oracle::default();
        let mut version = 0u32;
        let mut issued = 0u64;
        for op in ops {
            let res = match op {
                Op::Write(pages) => {
                    let mut data = Vec::new();
                    for &p in pages {
                        version += 1;
                        let c = content(version);
                        data.extend_from_slice(&c);
                        issued += 1;
                        if crash_at.is_none_or(|n| issued <= n) {
                            oracle.pending.push((p, c));
                        }
                    }
                    dev.write_batch(pages, &data)
                }
                Op::Trim(pages) => {
                    for &p in pages {
                        oracle.pending.push((p, vec![0; PS]));
                    }
                    dev.trim(pages)
                }
                Op::Sync => dev.sync().map(|()| oracle.sync()),
            };
            match res {
                Ok(()) => {}
                Err(Error::Crashed(_)) => return (oracle, dev),
                Err(e) => panic!("unexpected error {e}"),
            }
        }
        dev.crash_now().unwrap();
        (oracle, dev)
    }

    #[test]
    fn every_crash_point_leaves_a_legal_image() {
        let ops = script();
        let (_, counting) = run(&ops, FaultPlan::none());
        let total = counting.writes_seen();
        assert_eq!(total, 17);
        let mut fates = HashSet::new();
        for seed in 0..4 {
            for k in 0..=total {
                let (oracle, dev) = run(&ops, FaultPlan::crash_after_writes(k).with_seed(seed));
                assert!(dev.is_crashed());
                assert_eq!(dev.writes_seen(), k, "crash point {k}");
                for r in dev.crash_records() {
                    fates.insert(std::mem::discriminant(&r.fate));
                }
                oracle.check(dev.durable());
            }
        }
        assert_eq!(fates.len(), 3, "kept, dropped and torn writes all occur");
    }

    #[test]
    fn crash_during_each_sync() {
        let ops = script();
        for seed in 0..4 {
            for n in 1..=3 {
                let (oracle, dev) = run(&ops, FaultPlan::none().crash_at_sync(n).with_seed(seed));
                assert!(dev.is_crashed());
                assert!(
                    !dev.crash_records().is_empty(),
                    "sync {n} had unsynced writes"
                );
                oracle.check(dev.durable());
            }
        }
    }

    #[test]
    fn inner_errors_are_sticky() {
        let inner = FaultyDevice::new(
            MemDevice::new(PS, CAP).unwrap(),
            FaultPlan::none().fail_sync(2),
        );
        let dev = FaultyDevice::new(inner, FaultPlan::none());
        let page = content(1);
        dev.write(0, &page).unwrap();
        dev.sync().unwrap();
        dev.write(1, &page).unwrap();
        assert!(matches!(dev.sync(), Err(Error::InjectedFault(_))));
        let mut buf = vec![0u8; PS];
        assert!(matches!(
            dev.read(0, &mut buf),
            Err(Error::InjectedFault(_))
        ));
        assert!(matches!(dev.write(2, &page), Err(Error::InjectedFault(_))));
    }

    #[test]
    fn crash_records_replay_to_the_durable_image() {
        let ops = script();
        for seed in 0..8 {
            let (oracle, dev) = run(&ops, FaultPlan::random_crash(seed, 16));
            let mut image: HashMap<PageId, Vec<u8>> =
                (0..CAP).map(|p| (p, oracle.synced(p))).collect();
            let records = dev.crash_records();
            assert_eq!(records.len(), oracle.pending.len());
            let mut applied: Vec<(usize, usize)> = records
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.applied_as.map(|o| (o, i)))
                .collect();
            applied.sort_unstable();
            for (_, i) in applied {
                let (p, new) = &oracle.pending[i];
                let page = image.get_mut(p).unwrap();
                match records[i].fate {
                    WriteFate::Kept => page.copy_from_slice(new),
                    WriteFate::Torn { bytes } => page[..bytes].copy_from_slice(&new[..bytes]),
                    WriteFate::Dropped => panic!("a dropped write was applied"),
                }
            }
            let mut buf = vec![0u8; PS];
            for p in 0..CAP {
                dev.durable().read(p, &mut buf).unwrap();
                assert_eq!(buf, image[&p], "seed {seed} page {p}");
            }
        }
    }

    fn image(dev: &MemDevice) -> Vec<u8> {
        let mut buf = vec![0u8; PS * CAP as usize];
        let pages: Vec<PageId> = (0..CAP).collect();
        dev.read_batch(&pages, &mut buf).unwrap();
        buf
    }

    #[test]
    fn same_seed_same_outcome() {
        let ops = script();
        let mut images = HashSet::new();
        for seed in 0..6 {
            let (_, a) = run(&ops, FaultPlan::random_crash(seed, 16));
            let (_, b) = run(&ops, FaultPlan::random_crash(seed, 16));
            assert_eq!(a.writes_seen(), b.writes_seen());
            assert_eq!(a.crash_records(), b.crash_records());
            let img = image(a.durable());
            assert_eq!(img, image(b.durable()), "seed {seed}");
            images.insert(img);
        }
        assert!(images.len() > 1, "different seeds give different outcomes");
    }

    #[test]
    fn reads_see_the_overlay_before_a_crash() {
        let dev = FaultyDevice::new(MemDevice::new(PS, CAP).unwrap(), FaultPlan::none());
        let (a, b) = (content(1), content(2));
        dev.write(3, &a).unwrap();
        let mut buf = vec![0u8; 2 * PS];
        dev.read_batch(&[3, 4], &mut buf).unwrap();
        assert_eq!(&buf[..PS], &a[..]);
        assert!(buf[PS..].iter().all(|&x| x == 0));
        // The durable medium has nothing yet.
        dev.durable().read(3, &mut buf[..PS]).unwrap();
        assert!(buf[..PS].iter().all(|&x| x == 0));
        dev.sync().unwrap();
        dev.durable().read(3, &mut buf[..PS]).unwrap();
        assert_eq!(&buf[..PS], &a[..]);
        dev.write(3, &b).unwrap();
        dev.trim(&[3]).unwrap();
        dev.read(3, &mut buf[..PS]).unwrap();
        assert!(buf[..PS].iter().all(|&x| x == 0), "a trim reads as zeros");
        assert_eq!(dev.unsynced_writes(), 2);
        dev.sync().unwrap();
        assert_eq!(dev.durable().pages_in_use(), 0);
        let s = dev.stats().io;
        assert_eq!((s.pages_written, s.pages_read, s.syncs), (2, 3, 2));
        // Without a crash, dropping the wrapper loses unsynced writes.
        dev.write(5, &a).unwrap();
        let durable = dev.into_inner();
        durable.read(5, &mut buf[..PS]).unwrap();
        assert!(buf[..PS].iter().all(|&x| x == 0));
    }

    #[test]
    fn crashed_device_is_sticky() {
        let dev = FaultyDevice::new(MemDevice::new(PS, CAP).unwrap(), FaultPlan::none());
        dev.write(1, &content(1)).unwrap();
        dev.crash_now().unwrap();
        dev.crash_now().unwrap();
        let mut buf = vec![0u8; PS];
        assert!(matches!(dev.read(1, &mut buf), Err(Error::Crashed(_))));
        assert!(matches!(dev.write(1, &buf), Err(Error::Crashed(_))));
        assert!(matches!(dev.sync(), Err(Error::Crashed(_))));
        assert!(matches!(dev.trim(&[1]), Err(Error::Crashed(_))));
        // Bad input is still reported as such.
        assert!(matches!(
            dev.read(99, &mut buf),
            Err(Error::PageOutOfRange { .. })
        ));
    }

    #[test]
    fn injected_errors_are_sticky() {
        let page = content(1);
        let mut buf = vec![0u8; PS];
        // Read.
        let dev = FaultyDevice::new(
            MemDevice::new(PS, CAP).unwrap(),
            FaultPlan::none().fail_read(2),
        );
        dev.read(0, &mut buf).unwrap();
        assert!(matches!(
            dev.read(0, &mut buf),
            Err(Error::InjectedFault(_))
        ));
        assert!(matches!(dev.write(0, &page), Err(Error::InjectedFault(_))));
        assert!(matches!(dev.sync(), Err(Error::InjectedFault(_))));
        assert!(matches!(
            dev.read(0, &mut buf),
            Err(Error::InjectedFault(_))
        ));
        // Write: the failed batch does not become durable by itself.
        let dev = FaultyDevice::new(
            MemDevice::new(PS, CAP).unwrap(),
            FaultPlan::none().fail_write(2),
        );
        dev.write(0, &page).unwrap();
        dev.sync().unwrap();
        assert!(matches!(dev.write(1, &page), Err(Error::InjectedFault(_))));
        assert!(matches!(dev.sync(), Err(Error::InjectedFault(_))));
        assert!(matches!(
            dev.read(0, &mut buf),
            Err(Error::InjectedFault(_))
        ));
        dev.crash_now().unwrap();
        assert!(matches!(dev.read(0, &mut buf), Err(Error::Crashed(_))));
        let durable = dev.into_inner();
        durable.read(0, &mut buf).unwrap();
        assert_eq!(buf, page);
        // Sync: nothing of the failed sync is durable.
        let dev = FaultyDevice::new(
            MemDevice::new(PS, CAP).unwrap(),
            FaultPlan::none().fail_sync(1),
        );
        dev.write(2, &page).unwrap();
        assert!(matches!(dev.sync(), Err(Error::InjectedFault(_))));
        assert!(matches!(dev.sync(), Err(Error::InjectedFault(_))));
        assert_eq!(dev.durable().pages_in_use(), 0);
    }

    #[test]
    fn full_device() {
        let page = content(1);
        let dev = FaultyDevice::new(
            MemDevice::new(PS, CAP).unwrap(),
            FaultPlan::none().full_at_page(4),
        );
        dev.write(3, &page).unwrap();
        let two = [page.clone(), page.clone()].concat();
        assert!(matches!(
            dev.write_batch(&[2, 4], &two),
            Err(Error::DeviceFull(_))
        ));
        // A short write, as a full file system gives: the page before the
        // refused one is written, and the device keeps working.
        let mut buf = vec![0u8; PS];
        dev.read(2, &mut buf).unwrap();
        assert_eq!(buf, page);
        dev.read(4, &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 0));
        dev.write(2, &page).unwrap();
        // Reserving pages beyond the limit is refused as writing them is.
        assert!(matches!(dev.reserve(3..5), Err(Error::DeviceFull(_))));
        dev.reserve(0..4).unwrap();

        let dev = FaultyDevice::new(
            MemDevice::new(PS, CAP).unwrap(),
            FaultPlan::none().max_distinct_pages(2),
        );
        dev.write_batch(&[0, 1], &two).unwrap();
        dev.write(0, &page).unwrap();
        assert!(matches!(dev.write(7, &page), Err(Error::DeviceFull(_))));
        dev.sync().unwrap();
        assert_eq!(dev.durable().pages_in_use(), 2);
        // A reserved page counts as written: its later write has room.
        let dev = FaultyDevice::new(
            MemDevice::new(PS, CAP).unwrap(),
            FaultPlan::none().max_distinct_pages(3),
        );
        dev.reserve(5..7).unwrap();
        assert!(matches!(dev.reserve(7..9), Err(Error::DeviceFull(_))));
        dev.write(0, &page).unwrap();
        assert!(matches!(dev.write(1, &page), Err(Error::DeviceFull(_))));
        dev.write_batch(&[5, 6], &two).unwrap();
    }

    #[test]
    fn a_process_exit_keeps_every_completed_write_and_a_power_loss_none() {
        let page = vec![7u8; PS];
        let exit = FaultyDevice::new(MemDevice::new(PS, CAP).unwrap(), FaultPlan::none());
        exit.write(1, &page).unwrap();
        let power = FaultyDevice::new(MemDevice::new(PS, CAP).unwrap(), FaultPlan::none());
        power.write(1, &page).unwrap();
        let mut buf = vec![0u8; PS];
        exit.into_inner_after_exit().unwrap().read(1, &mut buf).unwrap();
        assert_eq!(buf, page);
        power.into_inner().read(1, &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 0));
    }

    #[test]
    fn random_crash_points_are_in_range() {
        let mut seen = HashSet::new();
        for seed in 0..64 {
            let n = FaultPlan::random_crash(seed, 10).crash_at_write.unwrap();
            assert!((1..=10).contains(&n));
            seen.insert(n);
        }
        assert!(seen.len() > 5);
        assert_eq!(FaultPlan::random_crash(1, 0).crash_at_write, None);
    }

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => proptest::collection::vec(0..CAP, 1..5).prop_map(Op::Write),
            1 => proptest::collection::vec(0..CAP, 1..3).prop_map(Op::Trim),
            1 => Just(Op::Sync),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        #[test]
        fn random_scripts_crash_legally(ops in proptest::collection::vec(op_strategy(), 1..30), seed in any::<u64>(), max in 0u64..60) {
            let (oracle, dev) = run(&ops, FaultPlan::random_crash(seed, max));
            prop_assert!(dev.is_crashed());
            oracle.check(dev.durable());
        }
    }
}
