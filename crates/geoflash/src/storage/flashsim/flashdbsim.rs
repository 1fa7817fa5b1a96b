//! The Flash-DBSim compatibility mode (`ftl=flashdbsim`): the behaviour of
//! Flash-DBSim's FTL01 and its NAND device, so that counts measured here can
//! be put beside those the flash-simulator paper and the FESTIval experiments
//! (eFIND, FAST) published. The rules, as specified in issue 9:
//!
//! - **Page-level mapping**, out-of-place updates: a write takes a free page,
//!   programs it, and only then marks the old copy dead.
//! - **Exactly one reserved block**, always erased. Initially the last block;
//!   afterwards whichever block the last collection erased.
//! - **The logical space is the pages the host allocates.** The device offers
//!   every page outside the reserved block (`(blocks − 1) × pages per block`
//!   flash pages); the pages the host never writes are the only
//!   over-provisioning (`op` is ignored).
//! - **Allocation**: the block being filled keeps receiving pages in order;
//!   when it is full, the next block is the first one in list order (block
//!   number) other than the reserved block that has a free page.
//! - **Garbage collection only when no free page is left**, one call per
//!   allocation that finds none:
//!   - if fully dead blocks exist (programmed pages, none live), they are all
//!     erased at once, with no copies;
//!   - otherwise the victim is the dirty block (one with a dead page) with the
//!     most dead pages, ties to the earliest in list order; its live pages are
//!     copied to the reserved block, the victim is erased and becomes the
//!     reserved block.
//! - **Wear levelling**, checked only in the victim case: if the victim's
//!   erase count minus the lowest erase count among dirty blocks (ties to the
//!   earliest) exceeds `wl_threshold`, that least-erased block's live data
//!   moves to the reserved block and it is erased, the victim's live data
//!   moves into it, and the victim (erased) becomes the reserved block.
//!   `wl_threshold=0` turns wear levelling off, as in the page FTL.
//! - **Latency** is a sum per operation, no parallelism: a read costs
//!   `read_ns + transfer_ns_per_byte × flash page bytes` (Flash-DBSim's random
//!   plus serial access time), a program `program_ns`, an erase `erase_ns`; a
//!   garbage-collection copy is a read plus a program. Channels, dies and
//!   planes are ignored.
//!
//! Without Flash-DBSim's defects: 64-bit totals and per-block counts that do
//! not overflow at any block size, the erase limit as configured (erasing a
//! block that reached it fails with [`Error::DeviceFull`]), devices of any
//! size, and a clear [`Error::DeviceFull`] when every page outside the
//! reserved block holds live data, so a collection has nothing to reclaim.
use super::config::FlashSimConfig;
use super::ftl::{Ftl, FtlImage, NandCounters};
use super::timing::Timeline;
use crate::{Error, Result};

/// Free or dead entry of `p2l` / unmapped entry of `l2p`.
const NONE: u32 = u32::MAX;

/// The Flash-DBSim-compatible FTL (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct DbFtl {
    ppb: u32,
    logical: u64,
    read_cost: u64,
    program_ns: u64,
    erase_ns: u64,
    wl_threshold: u32,
    erase_limit: u32,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    /// Per block: pages programmed since the last erase (free pages follow).
    write_ptr: Vec<u32>,
    /// Per block: live pages.
    valid: Vec<u32>,
    erase_count: Vec<u32>,
    reserved: usize,
    current: Option<usize>,
    clock_ns: u64,
    pub(crate) counters: NandCounters,
}

fn corrupt(msg: String) -> Error {
    Error::corrupt(
        None,
        format!("flashsim (flashdbsim) invariant violated: {msg}"),
    )
}

impl DbFtl {
    /// A fresh device: every block erased, the last one reserved.
    pub(crate) fn new(cfg: &FlashSimConfig) -> Result<DbFtl> {
        cfg.validate()?;
        let too_big = || Error::invalid("flashsim geometry too large for this platform");
        let nblocks = usize::try_from(cfg.blocks()).map_err(|_| too_big())?;
        let nphys = usize::try_from(cfg.physical_pages()).map_err(|_| too_big())?;
        let logical = cfg.logical_flash_pages();
        let nlogical = usize::try_from(logical).map_err(|_| too_big())?;
        let serial = (cfg.transfer_ns_per_byte * cfg.flash_page_size as f64).round() as u64;
        Ok(DbFtl {
            ppb: cfg.pages_per_block,
            logical,
            read_cost: cfg.read_ns.saturating_add(serial),
            program_ns: cfg.program_ns,
            erase_ns: cfg.erase_ns,
            wl_threshold: cfg.wear_leveling_threshold,
            erase_limit: cfg.erase_limit,
            l2p: vec![NONE; nlogical],
            p2l: vec![NONE; nphys],
            write_ptr: vec![0; nblocks],
            valid: vec![0; nblocks],
            erase_count: vec![0; nblocks],
            reserved: nblocks.saturating_sub(1),
            current: None,
            clock_ns: 0,
            counters: NandCounters::default(),
        })
    }

    /// The simulated clock: the sum of every operation's latency.
    pub(crate) fn now(&self) -> u64 {
        self.clock_ns
    }

    fn block_of(&self, ppn: u32) -> usize {
        (ppn / self.ppb) as usize
    }

    fn index(&self, lfp: u64) -> Result<usize> {
        usize::try_from(lfp)
            .ok()
            .filter(|&i| i < self.l2p.len())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "flashsim: logical flash page {lfp} beyond {}",
                    self.logical
                ))
            })
    }

    fn lookup(&self, lfp: u64) -> Option<u32> {
        let idx = usize::try_from(lfp).ok()?;
        match self.l2p.get(idx) {
            Some(&p) if p != NONE => Some(p),
            _ => None,
        }
    }

    /// Dead pages of block `b`.
    fn dead(&self, b: usize) -> u32 {
        self.write_ptr[b] - self.valid[b]
    }

    /// Reads a logical page: one NAND read if it holds data.
    pub(crate) fn read(&mut self, lfp: u64) {
        if self.lookup(lfp).is_some() {
            self.counters.reads += 1;
            self.clock_ns += self.read_cost;
        }
    }

    /// Writes a logical page out of place (collecting first if no page is free).
    pub(crate) fn write(&mut self, lfp: u64) -> Result<()> {
        let idx = self.index(lfp)?;
        let ppn = self.alloc()?;
        self.counters.programs += 1;
        self.counters.host_programs += 1;
        self.clock_ns += self.program_ns;
        self.remap(idx, ppn);
        Ok(())
    }

    /// Marks a logical page's copy dead.
    pub(crate) fn trim(&mut self, lfp: u64) {
        let Ok(idx) = self.index(lfp) else {
            return;
        };
        let old = self.l2p[idx];
        if old != NONE {
            self.p2l[old as usize] = NONE;
            let b = self.block_of(old);
            self.valid[b] -= 1;
            self.l2p[idx] = NONE;
        }
    }

    fn remap(&mut self, lfp: usize, ppn: u32) {
        let old = self.l2p[lfp];
        if old != NONE {
            self.p2l[old as usize] = NONE;
            let ob = self.block_of(old);
            self.valid[ob] -= 1;
        }
        self.l2p[lfp] = ppn;
        self.p2l[ppn as usize] = lfp as u32;
        let b = self.block_of(ppn);
        self.valid[b] += 1;
    }

    /// The next free page of block `b` (the caller checked there is one).
    fn take(&mut self, b: usize) -> u32 {
        let i = self.write_ptr[b];
        self.write_ptr[b] += 1;
        b as u32 * self.ppb + i
    }

    /// The first block in list order, other than the reserved one, with a free page.
    fn first_with_room(&self) -> Option<usize> {
        (0..self.write_ptr.len()).find(|&b| b != self.reserved && self.write_ptr[b] < self.ppb)
    }

    /// A free page for host data, collecting garbage once if none is left.
    fn alloc(&mut self) -> Result<u32> {
        if let Some(b) = self.current.filter(|&b| self.write_ptr[b] < self.ppb) {
            return Ok(self.take(b));
        }
        let b = match self.first_with_room() {
            Some(b) => b,
            None => {
                self.collect()?;
                self.first_with_room().ok_or_else(|| {
                    Error::DeviceFull(
                        "flashsim (flashdbsim): garbage collection left no free page".into(),
                    )
                })?
            }
        };
        self.current = Some(b);
        Ok(self.take(b))
    }

    fn check_erasable(&self, blocks: &[usize]) -> Result<()> {
        match blocks
            .iter()
            .find(|&&b| self.erase_count[b] >= self.erase_limit)
        {
            Some(&b) => Err(Error::DeviceFull(format!(
                "flashsim (flashdbsim): block {b} reached the erase limit of {} erases",
                self.erase_limit
            ))),
            None => Ok(()),
        }
    }

    fn erase(&mut self, b: usize) {
        self.write_ptr[b] = 0;
        self.valid[b] = 0;
        self.erase_count[b] += 1;
        self.counters.erases += 1;
        self.clock_ns += self.erase_ns;
    }

    /// Copies the live pages of `from` into the free pages of `to`; returns the count.
    fn copy_live(&mut self, from: usize, to: usize) -> u64 {
        let base = from as u32 * self.ppb;
        let mut copies = 0;
        for i in 0..self.write_ptr[from] {
            let lfp = self.p2l[(base + i) as usize];
            if lfp == NONE {
                continue;
            }
            let dst = self.take(to);
            self.remap(lfp as usize, dst);
            self.counters.reads += 1;
            self.counters.programs += 1;
            self.counters.gc_copies += 1;
            self.clock_ns += self.read_cost + self.program_ns;
            copies += 1;
        }
        copies
    }

    /// One garbage collection (see the module documentation).
    fn collect(&mut self) -> Result<()> {
        let n = self.write_ptr.len();
        let dead_blocks: Vec<usize> = (0..n)
            .filter(|&b| b != self.reserved && self.write_ptr[b] > 0 && self.valid[b] == 0)
            .collect();
        self.current = None;
        if !dead_blocks.is_empty() {
            self.check_erasable(&dead_blocks)?;
            for &b in &dead_blocks {
                self.erase(b);
            }
            self.counters.gc_runs += 1;
            return Ok(());
        }
        let mut victim: Option<usize> = None;
        for b in (0..n).filter(|&b| b != self.reserved) {
            if self.dead(b) > victim.map_or(0, |v| self.dead(v)) {
                victim = Some(b);
            }
        }
        let Some(v) = victim else {
            return Err(Error::DeviceFull(format!(
                "flashsim (flashdbsim): no free page is left and no page to collect: the host's \
                 {} live pages fill every page outside the reserved block ({} blocks × {} pages); \
                 in this mode the pages the host never allocates are the only spare, so leave \
                 some of the {} logical pages unused",
                self.mapped_count(),
                n.saturating_sub(1),
                self.ppb,
                self.logical
            )));
        };
        let r = self.reserved;
        // The least-erased dirty block, ties to the earliest.
        let mut least = v;
        for b in (0..n).filter(|&b| b != r && self.dead(b) > 0) {
            if self.erase_count[b] < self.erase_count[least] {
                least = b;
            }
        }
        let swap = self.wl_threshold > 0
            && least != v
            && self.erase_count[v] - self.erase_count[least] > self.wl_threshold;
        if swap {
            self.check_erasable(&[least, v])?;
            let moved = self.copy_live(least, r);
            self.erase(least);
            let moved_v = self.copy_live(v, least);
            self.erase(v);
            self.counters.wl_copies += moved + moved_v;
            self.counters.wl_migrations += 1;
        } else {
            self.check_erasable(&[v])?;
            self.copy_live(v, r);
            self.erase(v);
        }
        self.reserved = v;
        self.counters.gc_runs += 1;
        Ok(())
    }

    /// Number of logical flash pages.
    pub(crate) fn logical_pages(&self) -> u64 {
        self.logical
    }

    /// True if the logical page holds data.
    pub(crate) fn is_mapped(&self, lfp: u64) -> bool {
        self.lookup(lfp).is_some()
    }

    /// Number of mapped logical pages.
    pub(crate) fn mapped_count(&self) -> u64 {
        self.l2p.iter().filter(|&&p| p != NONE).count() as u64
    }

    /// Lowest, mean and highest erase count over all blocks.
    pub(crate) fn erase_spread(&self) -> (u64, f64, u64) {
        let n = self.erase_count.len();
        if n == 0 {
            return (0, 0.0, 0);
        }
        let min = self.erase_count.iter().copied().min().unwrap_or(0);
        let max = self.erase_count.iter().copied().max().unwrap_or(0);
        let sum: u64 = self.erase_count.iter().map(|&c| u64::from(c)).sum();
        (u64::from(min), sum as f64 / n as f64, u64::from(max))
    }

    /// The reserved block (for tests).
    #[cfg(test)]
    pub(crate) fn reserved_block(&self) -> usize {
        self.reserved
    }

    /// Erase count of block `b` (for tests).
    #[cfg(test)]
    pub(crate) fn erase_count_of(&self, b: usize) -> u32 {
        self.erase_count.get(b).copied().unwrap_or(0)
    }

    /// The block holding logical page `lfp` (for tests).
    #[cfg(test)]
    pub(crate) fn block_holding(&self, lfp: u64) -> Option<usize> {
        self.lookup(lfp).map(|p| self.block_of(p))
    }

    /// Checks the tables: maps agree, mapped pages are programmed, live
    /// counts, the reserved block is erased, erase counts within the limit.
    pub(crate) fn check_invariants(&self) -> Result<()> {
        let ppb = self.ppb as usize;
        let n = self.write_ptr.len();
        if self.p2l.len() != n * ppb || self.l2p.len() as u64 != self.logical {
            return Err(corrupt("table sizes disagree with the geometry".into()));
        }
        for (lfp, &ppn) in self.l2p.iter().enumerate() {
            if ppn == NONE {
                continue;
            }
            let back = self.p2l.get(ppn as usize).copied();
            if back != Some(lfp as u32) {
                return Err(corrupt(format!(
                    "logical page {lfp} maps to physical {ppn}, which does not map back"
                )));
            }
            let b = self.block_of(ppn);
            if ppn % self.ppb >= self.write_ptr[b] {
                return Err(corrupt(format!(
                    "logical page {lfp} maps to unprogrammed physical page {ppn}"
                )));
            }
        }
        for b in 0..n {
            let pages = &self.p2l[b * ppb..(b + 1) * ppb];
            let mut live = 0u32;
            for &lfp in pages.iter().filter(|&&l| l != NONE) {
                live += 1;
                if lfp as usize >= self.l2p.len() {
                    return Err(corrupt(format!("block {b} holds logical page {lfp}")));
                }
            }
            if live != self.valid[b] || self.write_ptr[b] > self.ppb || live > self.write_ptr[b] {
                return Err(corrupt(format!(
                    "block {b}: {} live counted, {live} held, write pointer {}",
                    self.valid[b], self.write_ptr[b]
                )));
            }
            if self.erase_count[b] > self.erase_limit {
                return Err(corrupt(format!(
                    "block {b} erased {} times, beyond the limit {}",
                    self.erase_count[b], self.erase_limit
                )));
            }
        }
        if self.reserved >= n || self.write_ptr[self.reserved] != 0 {
            return Err(corrupt(format!(
                "reserved block {} is not an erased block",
                self.reserved
            )));
        }
        if self.current.is_some_and(|c| c >= n || c == self.reserved) {
            return Err(corrupt(
                "the block being filled is the reserved block".into(),
            ));
        }
        Ok(())
    }

    /// The state to save, in the page FTL's image layout: per block (state 0
    /// erased / 1 partly programmed / 2 full, write pointer, erase count, 0),
    /// the forward map, `next_plane` = the block being filled (`u64::MAX`
    /// none), `seq` = 0, `wl_cursor` = the reserved block.
    pub(crate) fn export(&self) -> FtlImage {
        FtlImage {
            blocks: self
                .write_ptr
                .iter()
                .zip(&self.erase_count)
                .map(|(&wp, &ec)| {
                    let state = if wp == 0 {
                        0
                    } else if wp < self.ppb {
                        1
                    } else {
                        2
                    };
                    (state, wp, ec, 0)
                })
                .collect(),
            l2p: self.l2p.clone(),
            next_plane: self.current.map_or(u64::MAX, |c| c as u64),
            seq: 0,
            wl_cursor: self.reserved as u64,
        }
    }

    /// Rebuilds the FTL from a saved image, validating everything.
    pub(crate) fn restore(cfg: &FlashSimConfig, image: FtlImage) -> Result<DbFtl> {
        let bad = |msg: String| Error::corrupt(None, format!("flashsim state: {msg}"));
        let mut ftl = DbFtl::new(cfg)?;
        let n = ftl.write_ptr.len();
        if image.blocks.len() != n || image.l2p.len() != ftl.l2p.len() {
            return Err(bad(format!(
                "{} blocks and {} logical pages saved, the configuration has {n} and {}",
                image.blocks.len(),
                image.l2p.len(),
                ftl.l2p.len()
            )));
        }
        for (b, &(_, wp, ec, _)) in image.blocks.iter().enumerate() {
            if wp > ftl.ppb || ec > ftl.erase_limit {
                return Err(bad(format!(
                    "block {b} has write pointer {wp} and erase count {ec}"
                )));
            }
            ftl.write_ptr[b] = wp;
            ftl.erase_count[b] = ec;
        }
        for (lfp, &ppn) in image.l2p.iter().enumerate() {
            if ppn == NONE {
                continue;
            }
            match ftl.p2l.get_mut(ppn as usize) {
                Some(slot) if *slot == NONE => *slot = lfp as u32,
                Some(_) => return Err(bad(format!("physical page {ppn} mapped twice"))),
                None => return Err(bad(format!("logical page {lfp} maps beyond the device"))),
            }
            let b = (ppn / ftl.ppb) as usize;
            if let Some(v) = ftl.valid.get_mut(b) {
                *v += 1;
            }
        }
        ftl.l2p = image.l2p;
        ftl.reserved = usize::try_from(image.wl_cursor)
            .ok()
            .filter(|&r| r < n)
            .ok_or_else(|| bad(format!("reserved block {} out of range", image.wl_cursor)))?;
        ftl.current = if image.next_plane == u64::MAX {
            None
        } else {
            Some(
                usize::try_from(image.next_plane)
                    .ok()
                    .filter(|&c| c < n)
                    .ok_or_else(|| {
                        bad(format!("current block {} out of range", image.next_plane))
                    })?,
            )
        };
        ftl.check_invariants()?;
        Ok(ftl)
    }
}

/// The FTL behind a [`FlashSim`](super::FlashSim): the page-mapping FTL or
/// the Flash-DBSim compatibility mode.
#[derive(Debug, Clone)]
pub(crate) enum Engine {
    /// `ftl=page`.
    Page(Ftl),
    /// `ftl=flashdbsim`.
    Compat(DbFtl),
}

impl Engine {
    /// A fresh FTL of the configured mode.
    pub(crate) fn new(cfg: &FlashSimConfig) -> Result<Engine> {
        Ok(match cfg.ftl {
            super::config::FtlMode::Page => Engine::Page(Ftl::new(cfg)?),
            super::config::FtlMode::FlashDbSim => Engine::Compat(DbFtl::new(cfg)?),
        })
    }

    /// Rebuilds the FTL of the configured mode from a saved image.
    pub(crate) fn restore(cfg: &FlashSimConfig, image: FtlImage) -> Result<Engine> {
        Ok(match cfg.ftl {
            super::config::FtlMode::Page => Engine::Page(Ftl::restore(cfg, image)?),
            super::config::FtlMode::FlashDbSim => Engine::Compat(DbFtl::restore(cfg, image)?),
        })
    }

    /// The NAND counters.
    pub(crate) fn counters(&self) -> NandCounters {
        match self {
            Engine::Page(f) => f.counters,
            Engine::Compat(f) => f.counters,
        }
    }

    /// The simulated clock.
    pub(crate) fn now(&self, tl: &Timeline) -> u64 {
        match self {
            Engine::Page(_) => tl.now(),
            Engine::Compat(f) => f.now(),
        }
    }

    /// Reads a logical page; returns its completion time.
    pub(crate) fn read(&mut self, lfp: u64, ready: u64, tl: &mut Timeline) -> u64 {
        match self {
            Engine::Page(f) => f.read(lfp, ready, tl),
            Engine::Compat(f) => {
                f.read(lfp);
                ready
            }
        }
    }

    /// Writes a logical page; returns its completion time.
    pub(crate) fn write(&mut self, lfp: u64, ready: u64, tl: &mut Timeline) -> Result<u64> {
        match self {
            Engine::Page(f) => f.write(lfp, ready, tl),
            Engine::Compat(f) => f.write(lfp).map(|()| ready),
        }
    }

    /// Unmaps a logical page.
    pub(crate) fn trim(&mut self, lfp: u64) {
        match self {
            Engine::Page(f) => f.trim(lfp),
            Engine::Compat(f) => f.trim(lfp),
        }
    }

    /// Fails when the device is worn out (page FTL only).
    pub(crate) fn check_capacity(&self) -> Result<()> {
        match self {
            Engine::Page(f) => f.check_capacity(),
            Engine::Compat(_) => Ok(()),
        }
    }

    /// Number of logical flash pages.
    pub(crate) fn logical_pages(&self) -> u64 {
        match self {
            Engine::Page(f) => f.logical_pages(),
            Engine::Compat(f) => f.logical_pages(),
        }
    }

    /// True if the logical page holds data.
    pub(crate) fn is_mapped(&self, lfp: u64) -> bool {
        match self {
            Engine::Page(f) => f.is_mapped(lfp),
            Engine::Compat(f) => f.is_mapped(lfp),
        }
    }

    /// Number of mapped logical pages.
    pub(crate) fn mapped_count(&self) -> u64 {
        match self {
            Engine::Page(f) => f.mapped_count(),
            Engine::Compat(f) => f.mapped_count(),
        }
    }

    /// Blocks retired at the erase limit (none in compatibility mode).
    pub(crate) fn retired_blocks(&self) -> u64 {
        match self {
            Engine::Page(f) => f.retired_blocks(),
            Engine::Compat(_) => 0,
        }
    }

    /// Lowest, mean and highest erase count.
    pub(crate) fn erase_spread(&self) -> (u64, f64, u64) {
        match self {
            Engine::Page(f) => f.erase_spread(),
            Engine::Compat(f) => f.erase_spread(),
        }
    }

    /// Checks the FTL's invariants.
    pub(crate) fn check_invariants(&self) -> Result<()> {
        match self {
            Engine::Page(f) => f.check_invariants(),
            Engine::Compat(f) => f.check_invariants(),
        }
    }

    /// The state to save.
    pub(crate) fn export(&self) -> FtlImage {
        match self {
            Engine::Page(f) => f.export(),
            Engine::Compat(f) => f.export(),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The compatibility rules on devices small enough to follow by hand.
    //! Notation: `bN` is block N, `[a, b, …]` the logical pages it holds in
    //! page order, `x` a dead page, `.` a free page.
    use super::*;

    /// 4 blocks of 4 pages of 512 bytes: b3 reserved, 12 logical pages.
    fn tiny(extra: &str) -> DbFtl {
        let cfg = FlashSimConfig::from_params(&format!(
            "page_size=512&ppb=4&blocks=4&ftl=flashdbsim&read_ns=10&program_ns=100&erase_ns=1000{extra}"
        ))
        .unwrap();
        DbFtl::new(&cfg).unwrap()
    }

    fn write_all(f: &mut DbFtl, pages: impl IntoIterator<Item = u64>) {
        for p in pages {
            f.write(p).unwrap();
            f.check_invariants().unwrap();
        }
    }

    #[test]
    fn victim_choice_ties_to_the_earliest_and_the_reserved_block_rotates() {
        let mut f = tiny("&wl_threshold=0");
        assert_eq!((f.logical_pages(), f.reserved_block()), (12, 3));
        // b0 [0 1 2 3], b1 [4 5 6 7], b2 [8 9 0 4]: b0 and b1 have one dead page each.
        write_all(&mut f, (0..10).chain([0, 4]));
        // GC only when no free page is left: none ran while b0..b2 had room.
        assert_eq!((f.counters.gc_runs, f.counters.erases), (0, 0));
        assert_eq!(f.block_holding(0), Some(2));
        // Write 9: no free page. No fully dead block; b0 and b1 tie with one
        // dead page each, so the earliest (b0) is the victim: its live 1, 2, 3
        // go to the reserved b3, b0 is erased and becomes the reserved block;
        // 9 lands on b3's last page.
        write_all(&mut f, [9]);
        assert_eq!(f.reserved_block(), 0);
        assert_eq!(
            (f.counters.gc_runs, f.counters.erases, f.counters.gc_copies),
            (1, 1, 3)
        );
        for p in [1, 2, 3, 9] {
            assert_eq!(f.block_holding(p), Some(3), "page {p}");
        }
        assert_eq!(f.erase_count_of(0), 1);
        // Write 5: b1 [x 5 6 7] and b2 [8 x 0 4] tie again (one dead page):
        // b1 is collected into b0 (5, 6, 7), erased, and becomes the reserved
        // block; 5 is then rewritten on b0's last page.
        write_all(&mut f, [5]);
        assert_eq!(f.reserved_block(), 1);
        assert_eq!(
            (f.counters.gc_runs, f.counters.erases, f.counters.gc_copies),
            (2, 2, 6)
        );
        for p in [5, 6, 7] {
            assert_eq!(f.block_holding(p), Some(0), "page {p}");
        }
        // Host programs 14, copies 6; reads only for the copies.
        assert_eq!(
            (
                f.counters.host_programs,
                f.counters.programs,
                f.counters.reads
            ),
            (14, 20, 6)
        );
        // Time: 20 programs × 100 + 6 copy reads × 10 + 2 erases × 1000.
        assert_eq!(f.now(), 20 * 100 + 6 * 10 + 2 * 1000);
    }

    #[test]
    fn fully_dead_blocks_are_erased_together_without_copies() {
        let mut f = tiny("");
        write_all(&mut f, 0..12);
        // Release 0..8: b0 and b1 are fully dead, b2 fully live.
        for p in 0..8 {
            f.trim(p);
        }
        // Writing 0 finds no free page: both dead blocks are erased in one
        // collection, nothing is copied, the reserved block stays b3, and the
        // write goes to the first block in list order with room (b0).
        write_all(&mut f, [0]);
        assert_eq!(
            (f.counters.gc_runs, f.counters.erases, f.counters.gc_copies),
            (1, 2, 0)
        );
        assert_eq!(f.reserved_block(), 3);
        assert_eq!(f.block_holding(0), Some(0));
        assert_eq!((f.erase_count_of(0), f.erase_count_of(1)), (1, 1));
        // The next 7 writes fill b0 and b1 without another collection.
        write_all(&mut f, 1..8);
        assert_eq!(f.counters.gc_runs, 1);
        assert_eq!(f.block_holding(7), Some(1));
    }

    /// Sets up b0 = cold [0 1 2 x] at erase count 0, b1 = [x x 6 7] at erase
    /// count 2, b2 = [8 9 10 11] at 0, b3 reserved; no free page. Then writes 4.
    fn wear_scenario(threshold: u32) -> DbFtl {
        let mut f = tiny(&format!("&wl_threshold={threshold}"));
        write_all(&mut f, 0..12);
        f.trim(3);
        for _ in 0..2 {
            // b1 fully dead: the next write erases it (alone) and refills it.
            for p in 4..8 {
                f.trim(p);
            }
            write_all(&mut f, 4..8);
        }
        assert_eq!((f.erase_count_of(1), f.counters.erases), (2, 2));
        f.trim(4);
        f.trim(5);
        write_all(&mut f, [4]);
        f
    }

    #[test]
    fn wear_levelling_swaps_the_least_erased_block() {
        // Victim b1 (2 dead pages); the least-erased dirty block is b0 (count
        // 0); 2 − 0 > 1, so: b0's live 0, 1, 2 move to the reserved b3, b0 is
        // erased (count 1); b1's live 6, 7 move into b0; b1 is erased (count
        // 3) and becomes the reserved block. 4 lands on b0's third page.
        let f = wear_scenario(1);
        assert_eq!(f.reserved_block(), 1);
        for (p, b) in [(0, 3), (1, 3), (2, 3), (6, 0), (7, 0), (4, 0)] {
            assert_eq!(f.block_holding(p), Some(b), "page {p}");
        }
        assert_eq!(
            (
                f.erase_count_of(0),
                f.erase_count_of(1),
                f.erase_count_of(3)
            ),
            (1, 3, 0)
        );
        assert_eq!(
            (
                f.counters.gc_runs,
                f.counters.erases,
                f.counters.gc_copies,
                f.counters.wl_copies,
                f.counters.wl_migrations
            ),
            (3, 4, 5, 5, 1)
        );
    }

    #[test]
    fn without_wear_levelling_the_victim_alone_moves() {
        // Same state, threshold 2 (2 − 0 does not exceed it): b1's live 6, 7
        // move to b3, b1 is erased and reserved; cold b0 stays put.
        let f = wear_scenario(2);
        assert_eq!(f.reserved_block(), 1);
        for (p, b) in [(0, 0), (1, 0), (2, 0), (6, 3), (7, 3), (4, 3)] {
            assert_eq!(f.block_holding(p), Some(b), "page {p}");
        }
        assert_eq!(
            (
                f.counters.erases,
                f.counters.gc_copies,
                f.counters.wl_migrations
            ),
            (3, 2, 0)
        );
    }

    #[test]
    fn a_full_logical_space_is_a_clear_error() {
        let mut f = tiny("");
        write_all(&mut f, 0..12);
        let e = f.write(0).unwrap_err();
        assert!(matches!(e, Error::DeviceFull(_)), "{e}");
        assert!(e.to_string().contains("no page to collect"), "{e}");
        // Nothing changed: page 0 still where it was, no erase.
        assert_eq!((f.block_holding(0), f.counters.erases), (Some(0), 0));
        f.check_invariants().unwrap();
        // Releasing one page makes room again (one copy of 3 live pages).
        f.trim(5);
        f.write(0).unwrap();
        assert_eq!(f.counters.gc_copies, 3);
    }

    #[test]
    fn the_erase_limit_is_enforced_as_configured() {
        let mut f = tiny("&erase_limit=2");
        write_all(&mut f, 0..12);
        let mut result = Ok(());
        for round in 0..10 {
            for p in 4..8 {
                f.trim(p);
            }
            result = (4..8).try_for_each(|p| f.write(p));
            if result.is_err() {
                assert_eq!(round, 2);
                break;
            }
        }
        let e = result.unwrap_err();
        assert!(e.to_string().contains("erase limit of 2"), "{e}");
        assert_eq!(f.erase_count_of(1), 2);
        f.check_invariants().unwrap();
    }

    #[test]
    fn counts_do_not_overflow_with_large_blocks() {
        // 2 blocks of 65,536 pages (beyond a 16-bit count per block).
        let cfg =
            FlashSimConfig::from_params("page_size=512&ppb=65536&blocks=2&ftl=flashdbsim").unwrap();
        let mut f = DbFtl::new(&cfg).unwrap();
        for p in 0..65536 {
            f.write(p).unwrap();
        }
        f.trim(0);
        f.write(0).unwrap();
        assert_eq!(f.counters.gc_copies, 65535);
        f.check_invariants().unwrap();
    }

    #[test]
    fn image_round_trip() {
        let f = wear_scenario(1);
        let cfg = FlashSimConfig::from_params(
            "page_size=512&ppb=4&blocks=4&ftl=flashdbsim&read_ns=10&program_ns=100&erase_ns=1000&wl_threshold=1",
        )
        .unwrap();
        let g = DbFtl::restore(&cfg, f.export()).unwrap();
        assert_eq!(
            (g.reserved, g.current, &g.l2p, &g.erase_count),
            (f.reserved, f.current, &f.l2p, &f.erase_count)
        );
        let mut bad = f.export();
        bad.wl_cursor = 0; // b0 holds data: it cannot be the reserved block
        assert!(DbFtl::restore(&cfg, bad).is_err());
    }
}
