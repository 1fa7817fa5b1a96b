//! A two-tier device: a small fast tier (3D XPoint-like) in front of a slow
//! tier (flash), as in Ch. 4 of Fevgas' thesis (H-Grid, sHR-tree).
//!
//! The logical pages are those of the slow tier (`capacity()` is its
//! capacity). A **placement map** says which pages live on the fast tier,
//! each in a slot of its own; every other page lives on the slow tier under
//! its own number. Three ways put a page on the fast tier:
//! - a **hint** ([`PageDevice::hint_tier`]) from the layer above: the page
//!   moves to the hinted tier at its next write (a whole-page write, so no
//!   copy is needed); this is how stores place tree nodes
//!   ([`crate::store::placement`]) and how H-Grid places hot pages;
//! - [`HybridDevice::with_fast_range`]: pages below a bound go to the fast
//!   tier at their first write;
//! - [`HybridDevice::place`] moves a page at once, copying its contents.
//!
//! The fast tier holds at most `fast_pages` pages (its capacity, or less with
//! [`HybridDevice::with_fast_pages`] / the spec's `&fast_pages=N`). When it is
//! full a page meant for it stays on the slow tier — the graceful fallback the
//! thesis assumes — and is counted in [`HybridDevice::fallbacks`]. A trim
//! frees the page's fast slot.
//!
//! A batch is split into its fast and slow parts, each submitted to its tier
//! as one batch. Counters: host counters of the hybrid device itself, and
//! per tier in [`HybridDevice::tier_stats`]; the simulator counters (when a
//! tier is simulated) add both tiers' NAND counts and simulated times (the
//! tiers are driven one after the other).
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

pub use super::Tier;
use super::{check_batch, DeviceStats, IoTracker, PageDevice, PageId, SimCounters};
use crate::{Error, Result};

/// The spec of a 3D XPoint-like tier on the flash simulator: read 7 µs,
/// write 18 µs (Intel Optane, Table 4.1 of the thesis); see the `xpoint`
/// preset of [`FlashSimConfig`](super::flashsim::FlashSimConfig).
pub const XPOINT_SPEC: &str = "flashsim:preset=xpoint";

/// The spec of the thesis' flash tier (Intel DC P3700: read 120 µs, write
/// 30 µs); the `p3700` preset.
pub const P3700_SPEC: &str = "flashsim:preset=p3700";

/// Part of a batch for one tier: `(index in the batch, page on the tier)`.
type Parts = Vec<(usize, u64)>;

#[derive(Debug, Default)]
struct Inner {
    slot: HashMap<PageId, u64>,
    free_slots: Vec<u64>,
    next_slot: u64,
    fast_limit: u64,
    fast_range: u64,
    /// Pending hints: the tier each page goes to at its next write.
    hint: HashMap<PageId, Tier>,
    refused: HashSet<PageId>,
    fallbacks: u64,
    tracker: IoTracker,
}

/// A device of two tiers (see the module docs).
pub struct HybridDevice {
    fast: Arc<dyn PageDevice>,
    slow: Arc<dyn PageDevice>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for HybridDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl HybridDevice {
    /// A hybrid of `fast` and `slow` (same page size) with every page on the
    /// slow tier until placed; the whole fast tier is usable.
    pub fn new(fast: Arc<dyn PageDevice>, slow: Arc<dyn PageDevice>) -> Result<Self> {
        if fast.page_size() != slow.page_size() {
            return Err(Error::invalid(format!(
                "hybrid device tiers have different page sizes ({} and {})",
                fast.page_size(),
                slow.page_size()
            )));
        }
        let inner = Inner {
            fast_limit: fast.capacity(),
            ..Inner::default()
        };
        Ok(HybridDevice {
            fast,
            slow,
            inner: Mutex::new(inner),
        })
    }

    /// Places pages `0..n` on the fast tier when first written (as far as it has room).
    pub fn with_fast_range(self, n: u64) -> Self {
        self.lock().fast_range = n;
        self
    }

    /// Uses at most `n` pages of the fast tier (at most its capacity).
    pub fn with_fast_pages(self, n: u64) -> Self {
        {
            let mut g = self.lock();
            g.fast_limit = n.min(self.fast.capacity());
        }
        self
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pages meant for the fast tier that stayed on the slow one because it
    /// was full (each page counted once).
    pub fn fallbacks(&self) -> u64 {
        self.lock().fallbacks
    }

    /// Pages on the fast tier.
    pub fn fast_pages(&self) -> u64 {
        self.lock().slot.len() as u64
    }

    /// Pages the fast tier may hold.
    pub fn fast_limit(&self) -> u64 {
        self.lock().fast_limit
    }

    /// The tier page `p` lives on now.
    pub fn tier_of(&self, p: PageId) -> Tier {
        if self.lock().slot.contains_key(&p) {
            Tier::Fast
        } else {
            Tier::Slow
        }
    }

    /// The counters of each tier's own device: `(fast, slow)`.
    pub fn tier_stats(&self) -> (DeviceStats, DeviceStats) {
        (self.fast.stats(), self.slow.stats())
    }

    /// A fast slot for `p` if it belongs there and one is free.
    fn fast_slot(&self, g: &mut Inner, p: PageId, want_fast: bool) -> Option<u64> {
        if let Some(&s) = g.slot.get(&p) {
            return Some(s);
        }
        if !want_fast {
            return None;
        }
        let s = match g.free_slots.pop() {
            Some(s) => s,
            None if g.next_slot < g.fast_limit => {
                g.next_slot += 1;
                g.next_slot - 1
            }
            None => {
                if g.refused.insert(p) {
                    g.fallbacks += 1;
                }
                return None;
            }
        };
        g.slot.insert(p, s);
        Some(s)
    }

    /// Moves page `p` to `tier` now, copying its contents. Returns the tier
    /// it ended on (the slow one if the fast tier is full).
    pub fn place(&self, p: PageId, tier: Tier) -> Result<Tier> {
        check_batch(&[p], 0, 0, self.capacity())?;
        let ps = self.page_size();
        let mut g = self.lock();
        g.hint.remove(&p);
        let cur = g.slot.get(&p).copied();
        match (cur, tier) {
            (Some(_), Tier::Fast) | (None, Tier::Slow) => Ok(tier),
            (None, Tier::Fast) => {
                let mut buf = vec![0u8; ps];
                self.slow.read(p, &mut buf)?;
                let Some(s) = self.fast_slot(&mut g, p, true) else {
                    return Ok(Tier::Slow);
                };
                self.fast.write(s, &buf)?;
                Ok(Tier::Fast)
            }
            (Some(s), Tier::Slow) => {
                let mut buf = vec![0u8; ps];
                self.fast.read(s, &mut buf)?;
                self.slow.write(p, &buf)?;
                g.slot.remove(&p);
                g.free_slots.push(s);
                self.fast.trim(&[s])?;
                Ok(Tier::Slow)
            }
        }
    }

    /// Splits a read batch by where its pages live: `(index in batch, fast
    /// slot)` and `(index, slow page)`.
    fn split_read(&self, pages: &[PageId]) -> (Parts, Parts) {
        let g = self.lock();
        let (mut f, mut s) = (Vec::new(), Vec::new());
        for (i, &p) in pages.iter().enumerate() {
            match g.slot.get(&p) {
                Some(&slot) => f.push((i, slot)),
                None => s.push((i, p)),
            }
        }
        (f, s)
    }

    /// Splits a write batch, applying pending hints and the fast range: a
    /// page hinted slow leaves its fast slot (the write replaces the whole
    /// page), a page hinted fast takes a slot if one is free.
    fn split_write(&self, pages: &[PageId]) -> Result<(Parts, Parts)> {
        let mut g = self.lock();
        let (mut f, mut s) = (Vec::new(), Vec::new());
        let mut released = Vec::new();
        for (i, &p) in pages.iter().enumerate() {
            let hint = g.hint.remove(&p);
            if hint == Some(Tier::Slow) {
                if let Some(slot) = g.slot.remove(&p) {
                    g.free_slots.push(slot);
                    released.push(slot);
                }
            }
            let want = match hint {
                Some(t) => t == Tier::Fast,
                None => p < g.fast_range,
            };
            match self.fast_slot(&mut g, p, want) {
                Some(slot) => f.push((i, slot)),
                None => s.push((i, p)),
            }
        }
        drop(g);
        if !released.is_empty() {
            self.fast.trim(&released)?;
        }
        Ok((f, s))
    }
}

fn add_sim(a: Option<SimCounters>, b: Option<SimCounters>) -> Option<SimCounters> {
    match (a, b) {
        (None, None) => None,
        (Some(x), None) | (None, Some(x)) => Some(x),
        (Some(x), Some(y)) => Some(SimCounters {
            nand_reads: x.nand_reads + y.nand_reads,
            nand_programs: x.nand_programs + y.nand_programs,
            nand_erases: x.nand_erases + y.nand_erases,
            gc_copies: x.gc_copies + y.gc_copies,
            gc_runs: x.gc_runs + y.gc_runs,
            retired_blocks: x.retired_blocks + y.retired_blocks,
            device_write_amplification: if x.nand_programs + y.nand_programs == 0 {
                0.0
            } else {
                // Weighted by each tier's programs.
                let w = |c: &SimCounters| c.device_write_amplification * c.nand_programs as f64;
                (w(&x) + w(&y)) / (x.nand_programs + y.nand_programs) as f64
            },
            erase_count_min: x.erase_count_min.min(y.erase_count_min),
            erase_count_mean: (x.erase_count_mean + y.erase_count_mean) / 2.0,
            erase_count_max: x.erase_count_max.max(y.erase_count_max),
            sim_time_ns: x.sim_time_ns + y.sim_time_ns,
        }),
    }
}

impl PageDevice for HybridDevice {
    fn page_size(&self) -> usize {
        self.slow.page_size()
    }

    fn capacity(&self) -> u64 {
        self.slow.capacity()
    }

    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        let ps = self.page_size();
        check_batch(pages, buf.len(), ps, self.capacity())?;
        let start = Instant::now();
        let (f, s) = self.split_read(pages);
        for (dev, part) in [(&self.fast, &f), (&self.slow, &s)] {
            if part.is_empty() {
                continue;
            }
            let ids: Vec<PageId> = part.iter().map(|t| t.1).collect();
            let mut tmp = vec![0u8; ids.len() * ps];
            dev.read_batch(&ids, &mut tmp)?;
            for (k, (i, _)) in part.iter().enumerate() {
                if let (Some(dst), Some(src)) = (
                    buf.get_mut(i * ps..(i + 1) * ps),
                    tmp.get(k * ps..(k + 1) * ps),
                ) {
                    dst.copy_from_slice(src);
                }
            }
        }
        let ns = start.elapsed().as_nanos() as u64;
        self.lock().tracker.record_reads(pages, ps, ns);
        Ok(())
    }

    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        let ps = self.page_size();
        check_batch(pages, data.len(), ps, self.capacity())?;
        let start = Instant::now();
        let (f, s) = self.split_write(pages)?;
        for (dev, part) in [(&self.fast, &f), (&self.slow, &s)] {
            if part.is_empty() {
                continue;
            }
            let ids: Vec<PageId> = part.iter().map(|t| t.1).collect();
            let mut tmp = Vec::with_capacity(ids.len() * ps);
            for (i, _) in part {
                tmp.extend_from_slice(data.get(i * ps..(i + 1) * ps).unwrap_or_default());
            }
            dev.write_batch(&ids, &tmp)?;
        }
        let ns = start.elapsed().as_nanos() as u64;
        self.lock().tracker.record_writes(pages, ps, ns);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let start = Instant::now();
        self.fast.sync()?;
        self.slow.sync()?;
        self.lock()
            .tracker
            .record_sync(start.elapsed().as_nanos() as u64);
        Ok(())
    }

    fn trim(&self, pages: &[PageId]) -> Result<()> {
        check_batch(pages, 0, 0, self.capacity())?;
        // A trimmed page leaves the fast tier; both copies read as zeros.
        let mut slots = Vec::new();
        {
            let mut g = self.lock();
            for p in pages {
                g.hint.remove(p);
                if let Some(s) = g.slot.remove(p) {
                    g.free_slots.push(s);
                    slots.push(s);
                }
            }
        }
        if !slots.is_empty() {
            self.fast.trim(&slots)?;
        }
        self.slow.trim(pages)?;
        self.lock().tracker.record_trim(pages.len());
        Ok(())
    }

    fn stats(&self) -> DeviceStats {
        DeviceStats {
            io: self.lock().tracker.counters(),
            sim: add_sim(self.fast.stats().sim, self.slow.stats().sim),
        }
    }

    /// The sum of the tiers' simulated clocks (each tier advances its own).
    fn sim_clock_ns(&self) -> Option<u64> {
        match (self.fast.sim_clock_ns(), self.slow.sim_clock_ns()) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        }
    }

    fn reset_stats(&self) {
        self.fast.reset_stats();
        self.slow.reset_stats();
        self.lock().tracker.reset();
    }

    fn describe(&self) -> String {
        format!(
            "hybrid(fast={}; slow={}; fast_pages={})",
            self.fast.describe(),
            self.slow.describe(),
            self.fast_limit()
        )
    }

    fn tiers(&self) -> Option<super::TierReport> {
        let (fast, slow) = self.tier_stats();
        let g = self.lock();
        Some(super::TierReport {
            fast,
            slow,
            fast_pages: g.slot.len() as u64,
            fast_limit: g.fast_limit,
            fallbacks: g.fallbacks,
        })
    }

    fn page_tier(&self, page: PageId) -> Option<Tier> {
        Some(self.tier_of(page))
    }

    fn hint_tier(&self, pages: &[PageId], tier: Tier) -> Result<()> {
        check_batch(pages, 0, 0, self.capacity())?;
        let mut g = self.lock();
        for &p in pages {
            g.hint.insert(p, tier);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::mem::MemDevice;

    fn hybrid(fast_cap: u64, range: u64) -> (HybridDevice, Arc<MemDevice>, Arc<MemDevice>) {
        let f = Arc::new(MemDevice::new(512, fast_cap).unwrap());
        let s = Arc::new(MemDevice::new(512, 100).unwrap());
        let h = HybridDevice::new(f.clone(), s.clone())
            .unwrap()
            .with_fast_range(range);
        (h, f, s)
    }

    fn page(v: u8) -> Vec<u8> {
        vec![v; 512]
    }

    #[test]
    fn pages_go_to_their_tier_and_read_back() {
        let (h, f, s) = hybrid(4, 6);
        let ids: Vec<u64> = (0..10).collect();
        let data: Vec<u8> = ids.iter().flat_map(|&i| page(i as u8 + 1)).collect();
        h.write_batch(&ids, &data).unwrap();
        // Pages 0..4 fit the fast tier; 4 and 5 were meant for it and fell back.
        assert_eq!(h.fast_pages(), 4);
        assert_eq!(h.fallbacks(), 2);
        assert_eq!(f.stats().io.pages_written, 4);
        assert_eq!(s.stats().io.pages_written, 6);
        assert_eq!(
            (f.stats().io.write_batches, s.stats().io.write_batches),
            (1, 1)
        );
        let mut buf = vec![0u8; 10 * 512];
        h.read_batch(&ids, &mut buf).unwrap();
        assert_eq!(buf, data);
        assert_eq!(h.stats().io.pages_read, 10);
        // Moving pages between tiers keeps their contents.
        assert_eq!(h.place(2, Tier::Slow).unwrap(), Tier::Slow);
        assert_eq!(h.place(8, Tier::Fast).unwrap(), Tier::Fast);
        assert_eq!(h.place(9, Tier::Fast).unwrap(), Tier::Slow);
        assert_eq!(h.tier_of(8), Tier::Fast);
        let mut one = page(0);
        h.read(2, &mut one).unwrap();
        assert_eq!(one, page(3));
        h.read(8, &mut one).unwrap();
        assert_eq!(one, page(9));
        assert!(h.read(100, &mut one).is_err());
        assert!(h.write_batch(&[1], &[0u8; 10]).is_err());
    }

    #[test]
    fn mismatched_page_sizes_are_refused_and_the_xpoint_tier_opens() {
        let f = Arc::new(MemDevice::new(512, 4).unwrap());
        let s = Arc::new(MemDevice::new(1024, 4).unwrap());
        assert!(HybridDevice::new(f, s).is_err());
        let x = crate::storage::spec::DeviceSpec::parse(XPOINT_SPEC)
            .unwrap()
            .open(4096, None)
            .unwrap();
        let n = crate::storage::spec::DeviceSpec::parse("flashsim:preset=nvme")
            .unwrap()
            .open(4096, None)
            .unwrap();
        let h = HybridDevice::new(x, n).unwrap().with_fast_range(8);
        let ids: Vec<u64> = (0..16).collect();
        h.write_batch(&ids, &vec![7u8; 16 * 4096]).unwrap();
        let sim = h.stats().sim.unwrap();
        assert!(sim.sim_time_ns > 0 && sim.nand_programs > 0, "{sim:?}");
        assert!(h.describe().contains("hybrid"));
    }

    #[test]
    fn hints_move_pages_at_their_next_write_and_a_full_tier_falls_back() {
        let f = Arc::new(MemDevice::new(512, 100).unwrap());
        let s = Arc::new(MemDevice::new(512, 100).unwrap());
        let h = HybridDevice::new(f.clone(), s.clone())
            .unwrap()
            .with_fast_pages(2);
        assert_eq!(h.fast_limit(), 2);
        h.write_batch(&[1, 2, 3], &[page(1), page(2), page(3)].concat())
            .unwrap();
        assert_eq!(h.fast_pages(), 0);
        // A hint costs no I/O and moves nothing until the page is written.
        h.hint_tier(&[1, 2, 3], Tier::Fast).unwrap();
        assert_eq!(h.tier_of(1), Tier::Slow);
        let before = (f.stats().io, s.stats().io);
        assert_eq!(before.0.pages_written, 0);
        h.write_batch(&[1, 2, 3], &[page(4), page(5), page(6)].concat())
            .unwrap();
        // Two fit the capped fast tier; the third falls back and is counted.
        assert_eq!(h.fast_pages(), 2);
        assert_eq!(h.fallbacks(), 1);
        let tiers: Vec<Tier> = [1, 2, 3].iter().map(|&p| h.tier_of(p)).collect();
        assert_eq!(tiers, vec![Tier::Fast, Tier::Fast, Tier::Slow]);
        let mut buf = vec![0u8; 3 * 512];
        h.read_batch(&[1, 2, 3], &mut buf).unwrap();
        assert_eq!(buf, [page(4), page(5), page(6)].concat());
        // A slow hint frees the slot at the next write; the freed slot serves another page.
        h.hint_tier(&[1], Tier::Slow).unwrap();
        h.hint_tier(&[3], Tier::Fast).unwrap();
        h.write_batch(&[1, 3], &[page(7), page(8)].concat())
            .unwrap();
        assert_eq!((h.tier_of(1), h.tier_of(3)), (Tier::Slow, Tier::Fast));
        h.read_batch(&[1, 2, 3], &mut buf).unwrap();
        assert_eq!(buf, [page(7), page(5), page(8)].concat());
        // A trim frees the slot and the page reads zeros from either tier.
        h.trim(&[3]).unwrap();
        assert_eq!(h.tier_of(3), Tier::Slow);
        let mut one = page(9);
        h.read(3, &mut one).unwrap();
        assert_eq!(one, page(0));
        // Per-tier counters add up to the hybrid's host counters.
        let (fs, ss) = h.tier_stats();
        assert_eq!(
            fs.io.pages_written + ss.io.pages_written,
            h.stats().io.pages_written
        );
        assert!(h.hint_tier(&[100], Tier::Fast).is_err());
    }
}
