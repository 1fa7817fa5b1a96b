//! The page-mapping flash translation layer: out-of-place updates, trim,
//! garbage collection, wear levelling and bad-block retirement.
//!
//! # Layout and tables
//! Block `b` lives on plane `b mod planes`; physical page `ppn = b × ppb + i`.
//! `l2p[logical page]` and `p2l[physical page]` are the forward and reverse
//! maps (`NONE` = unmapped / not holding valid data). Per block: state (free,
//! open for writing, full, retired), valid-page count, write pointer, erase
//! count and the sequence number of its last program (its age for
//! cost-benefit). Per plane: a min-heap of free blocks by erase count, the open
//! write block, and the full blocks bucketed by valid count (so greedy victim
//! selection is O(pages per block)). Everything is a `Vec` indexed by number.
//!
//! # Writes
//! Host flash pages are striped round-robin across planes: each program goes
//! to the next plane's open block (a write batch lands on consecutive planes,
//! hence on different channels and dies). A plane opens a new block from its
//! free heap, lowest erase count first (dynamic wear levelling). One free block
//! per plane is reserved for garbage collection; a plane that cannot accept a
//! host page even after garbage collection is skipped.
//!
//! # Garbage collection
//! Before a plane opens a new block for host data, if its free blocks are
//! below `gc_threshold`, the collector repeatedly picks a victim among the
//! plane's full blocks (greedy: most invalid pages; cost-benefit: highest
//! `(1 − u)/2u × age`), copies its valid pages to the plane's open block
//! (on-die copyback) and erases it, until the threshold is met or no full block
//! has an invalid page. Every iteration erases at least one invalid page, so
//! the loop terminates.
//!
//! # Wear levelling (static)
//! After a collection, if the erase counts of the good blocks spread by more
//! than `wear_leveling_threshold` (max − min), the collector looks for a full
//! block at the minimum erase count (a block holding cold data that GC never
//! picks), scanning round-robin from where the previous search stopped,
//! migrates its valid pages to its plane's open block and erases it; the block
//! enters the free heap with the lowest count and is reused first, so it
//! starts absorbing hot writes. At most one migration per collection. When no
//! full block sits at the minimum (the least-worn blocks are free and will be
//! picked by dynamic wear levelling), the search is not repeated until the
//! minimum or maximum changes.
//!
//! # Endurance
//! A block whose erase count reaches `erase_limit` is retired (never used
//! again). Writes fail with [`Error::DeviceFull`] once the good blocks cannot
//! hold the logical space plus the garbage-collection reserve, or when no plane
//! can take a page.
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use super::config::{FlashSimConfig, GcPolicy};
use super::timing::Timeline;
use crate::{Error, Result};

/// Unmapped entry of `l2p` / free or invalid entry of `p2l`.
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockState {
    Free,
    Open,
    Full,
    Retired,
}

#[derive(Debug, Clone)]
struct Block {
    state: BlockState,
    valid: u32,
    write_ptr: u32,
    erase_count: u32,
    /// Sequence number of the last program into this block.
    last_write: u64,
    /// Position in `buckets[plane][valid]` while full.
    bucket_pos: u32,
}

#[derive(Debug, Clone, Default)]
struct Plane {
    free: BinaryHeap<Reverse<(u32, u32)>>,
    open: Option<u32>,
    /// `buckets[v]`: the full blocks with `v` valid pages.
    buckets: Vec<Vec<u32>>,
}

/// NAND operation counters of the FTL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct NandCounters {
    pub(crate) reads: u64,
    pub(crate) programs: u64,
    pub(crate) erases: u64,
    /// Valid pages copied by GC and by wear levelling.
    pub(crate) gc_copies: u64,
    /// Garbage-collection invocations that erased at least one block.
    pub(crate) gc_runs: u64,
    /// Pages copied by wear levelling (included in `gc_copies`).
    pub(crate) wl_copies: u64,
    /// Blocks migrated by wear levelling.
    pub(crate) wl_migrations: u64,
    /// Programs of host data (the denominator of write amplification).
    pub(crate) host_programs: u64,
}

/// The page-mapping FTL (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct Ftl {
    ppb: u32,
    nplanes: usize,
    logical: u64,
    gc_policy: GcPolicy,
    gc_threshold: u32,
    wl_threshold: u32,
    erase_limit: u32,
    reserved_blocks: u64,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    blocks: Vec<Block>,
    planes: Vec<Plane>,
    next_plane: usize,
    seq: u64,
    /// Erase count -> number of good (not retired) blocks with it.
    erase_hist: BTreeMap<u32, u32>,
    retired: u64,
    wl_cursor: usize,
    wl_skip: Option<(u32, u32)>,
    pub(crate) counters: NandCounters,
}

fn corrupt(msg: String) -> Error {
    Error::corrupt(None, format!("flashsim invariant violated: {msg}"))
}

impl Ftl {
    /// A fresh (all blocks erased, nothing mapped) FTL for a validated configuration.
    pub(crate) fn new(cfg: &FlashSimConfig) -> Result<Ftl> {
        cfg.validate()?;
        let too_big = || Error::invalid("flashsim geometry too large for this platform");
        let nblocks = usize::try_from(cfg.blocks()).map_err(|_| too_big())?;
        let nplanes = usize::try_from(cfg.planes()).map_err(|_| too_big())?;
        let ppb = cfg.pages_per_block;
        let logical = cfg.logical_flash_pages();
        let nlogical = usize::try_from(logical).map_err(|_| too_big())?;
        let nphys = usize::try_from(cfg.physical_pages()).map_err(|_| too_big())?;
        let mut planes: Vec<Plane> = (0..nplanes)
            .map(|_| Plane {
                free: BinaryHeap::new(),
                open: None,
                buckets: vec![Vec::new(); ppb as usize + 1],
            })
            .collect();
        for b in 0..nblocks {
            planes[b % nplanes].free.push(Reverse((0, b as u32)));
        }
        let mut erase_hist = BTreeMap::new();
        erase_hist.insert(0, nblocks as u32);
        Ok(Ftl {
            ppb,
            nplanes,
            logical,
            gc_policy: cfg.gc_policy,
            gc_threshold: cfg.gc_threshold,
            wl_threshold: cfg.wear_leveling_threshold,
            erase_limit: cfg.erase_limit,
            reserved_blocks: cfg.reserved_blocks(),
            l2p: vec![NONE; nlogical],
            p2l: vec![NONE; nphys],
            blocks: vec![
                Block {
                    state: BlockState::Free,
                    valid: 0,
                    write_ptr: 0,
                    erase_count: 0,
                    last_write: 0,
                    bucket_pos: 0,
                };
                nblocks
            ],
            planes,
            next_plane: 0,
            seq: 0,
            erase_hist,
            retired: 0,
            wl_cursor: 0,
            wl_skip: None,
            counters: NandCounters::default(),
        })
    }

    /// Number of logical flash pages.
    pub(crate) fn logical_pages(&self) -> u64 {
        self.logical
    }

    /// Blocks retired at the erase limit.
    pub(crate) fn retired_blocks(&self) -> u64 {
        self.retired
    }

    fn plane_of(&self, block: usize) -> usize {
        block % self.nplanes
    }

    fn block_of(&self, ppn: u32) -> usize {
        (ppn / self.ppb) as usize
    }

    fn lookup(&self, lfp: u64) -> Option<u32> {
        mapped(&self.l2p, lfp)
    }

    /// True if the logical page holds data.
    pub(crate) fn is_mapped(&self, lfp: u64) -> bool {
        self.lookup(lfp).is_some()
    }

    /// Number of mapped logical pages.
    pub(crate) fn mapped_count(&self) -> u64 {
        self.l2p.iter().filter(|&&p| p != NONE).count() as u64
    }

    /// Reads a logical page (a NAND read if mapped); returns its completion time.
    pub(crate) fn read(&mut self, lfp: u64, ready: u64, tl: &mut Timeline) -> u64 {
        match self.lookup(lfp) {
            Some(ppn) => {
                self.counters.reads += 1;
                let plane = self.plane_of(self.block_of(ppn));
                tl.read(plane, ready)
            }
            None => ready,
        }
    }

    /// Writes a logical page out of place; returns the program's completion time.
    pub(crate) fn write(&mut self, lfp: u64, ready: u64, tl: &mut Timeline) -> Result<u64> {
        let idx = slot(&self.l2p, self.logical, lfp)?;
        let ppn = self.alloc_host(ready, tl)?;
        let plane = self.plane_of(self.block_of(ppn));
        let done = tl.program(plane, ready);
        self.counters.programs += 1;
        self.counters.host_programs += 1;
        self.remap(idx, ppn);
        Ok(done)
    }

    /// Unmaps a logical page (its physical copy becomes invalid).
    pub(crate) fn trim(&mut self, lfp: u64) {
        let Some(idx) = usize::try_from(lfp).ok().filter(|&i| i < self.l2p.len()) else {
            return;
        };
        let old = self.l2p[idx];
        if old != NONE {
            self.p2l[old as usize] = NONE;
            let b = self.block_of(old);
            self.dec_valid(b);
            self.l2p[idx] = NONE;
        }
    }

    /// Fails with [`Error::DeviceFull`] when the good blocks cannot hold the
    /// logical space plus the garbage-collection reserve.
    pub(crate) fn check_capacity(&self) -> Result<()> {
        let nblocks = self.blocks.len() as u64;
        let good = nblocks - self.retired;
        let data_blocks = self.logical.div_ceil(u64::from(self.ppb));
        let needed = data_blocks + self.reserved_blocks;
        if good < needed {
            return Err(Error::DeviceFull(format!(
                "flash worn out: {} of {nblocks} blocks retired at the erase limit of {}; \
                 the {good} good blocks cannot hold the {} logical pages ({data_blocks} blocks) \
                 plus the {} blocks garbage collection needs",
                self.retired, self.erase_limit, self.logical, self.reserved_blocks
            )));
        }
        Ok(())
    }

    /// Points `lfp` at `ppn`, invalidating its previous copy.
    fn remap(&mut self, lfp: usize, ppn: u32) {
        let old = self.l2p[lfp];
        if old != NONE {
            self.p2l[old as usize] = NONE;
            let ob = self.block_of(old);
            self.dec_valid(ob);
        }
        self.l2p[lfp] = ppn;
        self.p2l[ppn as usize] = lfp as u32;
        let b = self.block_of(ppn);
        self.inc_valid(b);
        self.seq += 1;
        self.blocks[b].last_write = self.seq;
    }

    fn bucket_insert(&mut self, b: usize) {
        let p = self.plane_of(b);
        let v = self.blocks[b].valid as usize;
        let bucket = &mut self.planes[p].buckets[v];
        self.blocks[b].bucket_pos = bucket.len() as u32;
        bucket.push(b as u32);
    }

    fn bucket_remove(&mut self, b: usize) {
        let p = self.plane_of(b);
        let v = self.blocks[b].valid as usize;
        let pos = self.blocks[b].bucket_pos as usize;
        let bucket = &mut self.planes[p].buckets[v];
        bucket.swap_remove(pos);
        if let Some(&moved) = bucket.get(pos) {
            self.blocks[moved as usize].bucket_pos = pos as u32;
        }
    }

    fn inc_valid(&mut self, b: usize) {
        let full = self.blocks[b].state == BlockState::Full;
        if full {
            self.bucket_remove(b);
        }
        self.blocks[b].valid += 1;
        if full {
            self.bucket_insert(b);
        }
    }

    fn dec_valid(&mut self, b: usize) {
        let full = self.blocks[b].state == BlockState::Full;
        if full {
            self.bucket_remove(b);
        }
        self.blocks[b].valid -= 1;
        if full {
            self.bucket_insert(b);
        }
    }

    /// Takes the next page of open block `b`; the block becomes full at its last page.
    fn take_page(&mut self, b: usize) -> u32 {
        let i = self.blocks[b].write_ptr;
        self.blocks[b].write_ptr += 1;
        if self.blocks[b].write_ptr == self.ppb {
            self.blocks[b].state = BlockState::Full;
            let p = self.plane_of(b);
            self.planes[p].open = None;
            self.bucket_insert(b);
        }
        b as u32 * self.ppb + i
    }

    /// A page for host data: the next plane in round-robin order that can take one.
    fn alloc_host(&mut self, ready: u64, tl: &mut Timeline) -> Result<u32> {
        for _ in 0..self.nplanes {
            let p = self.next_plane;
            self.next_plane = (p + 1) % self.nplanes;
            if let Some(ppn) = self.alloc_in_plane(p, false, ready, tl)? {
                return Ok(ppn);
            }
        }
        let why = if self.retired > 0 {
            format!(
                "flash worn out: {} of {} blocks retired at the erase limit of {}",
                self.retired,
                self.blocks.len(),
                self.erase_limit
            )
        } else {
            "flash full".to_string()
        };
        Err(Error::DeviceFull(format!(
            "{why}; no plane can take a page and garbage collection finds no block it can \
             reclaim ({} of {} logical pages hold data)",
            self.mapped_count(),
            self.logical
        )))
    }

    /// A page in plane `p`. Host allocations run GC when the plane's free blocks
    /// are below the threshold and never take the plane's last free block; GC
    /// allocations may (`for_gc`). `None`: the plane has no room.
    fn alloc_in_plane(
        &mut self,
        p: usize,
        for_gc: bool,
        ready: u64,
        tl: &mut Timeline,
    ) -> Result<Option<u32>> {
        if let Some(b) = self.planes[p].open {
            return Ok(Some(self.take_page(b as usize)));
        }
        if !for_gc {
            if self.planes[p].free.len() < self.gc_threshold as usize {
                self.collect(p, ready, tl)?;
                if let Some(b) = self.planes[p].open {
                    return Ok(Some(self.take_page(b as usize)));
                }
            }
            if self.planes[p].free.len() < 2 {
                return Ok(None);
            }
        }
        let Some(Reverse((_, b))) = self.planes[p].free.pop() else {
            return Ok(None);
        };
        let b = b as usize;
        self.blocks[b].state = BlockState::Open;
        self.planes[p].open = Some(b as u32);
        Ok(Some(self.take_page(b)))
    }

    /// Garbage collection in plane `p` (see the module documentation).
    fn collect(&mut self, p: usize, ready: u64, tl: &mut Timeline) -> Result<()> {
        let mut erased = false;
        while self.planes[p].free.len() < self.gc_threshold as usize {
            let Some(victim) = self.select_victim(p) else {
                break;
            };
            let (moved, _, t) = self.relocate(victim, ready, tl)?;
            if !moved {
                break;
            }
            self.bucket_remove(victim);
            self.erase(victim, t, tl);
            erased = true;
        }
        if erased {
            self.counters.gc_runs += 1;
            self.wear_level(ready, tl)?;
        }
        Ok(())
    }

    /// Blocks plane `p` must open to copy `valid` pages (beyond its open block's room).
    fn blocks_needed(&self, p: usize, valid: u32) -> usize {
        let room = match self.planes[p].open {
            Some(b) => self.ppb - self.blocks[b as usize].write_ptr,
            None => 0,
        };
        valid.saturating_sub(room).div_ceil(self.ppb) as usize
    }

    /// Whether collecting block `b` (of plane `p`, needing `opened` new blocks
    /// for its valid pages) keeps a free block for the next collection: a
    /// victim that retires at this erase does not return to the free list.
    fn affordable(&self, p: usize, b: usize, opened: usize, strict: bool) -> bool {
        let free = self.planes[p].free.len();
        let retires = self.blocks[b].erase_count + 1 >= self.erase_limit;
        if strict && retires {
            opened < free
        } else {
            opened <= free
        }
    }

    /// The victim among plane `p`'s full blocks that have at least one invalid
    /// page and can be collected with the space at hand. Blocks that would
    /// retire are taken only when that leaves a free block, or as a last resort.
    fn select_victim(&self, p: usize) -> Option<usize> {
        self.select_victim_with(p, true)
            .or_else(|| self.select_victim_with(p, false))
    }

    fn select_victim_with(&self, p: usize, strict: bool) -> Option<usize> {
        let buckets = &self.planes[p].buckets;
        let ppb = self.ppb as usize;
        let free = self.planes[p].free.len();
        let mut best: Option<(f64, usize)> = None;
        for (v, bucket) in buckets.iter().enumerate().take(ppb) {
            let opened = self.blocks_needed(p, v as u32);
            if opened > free {
                break;
            }
            match self.gc_policy {
                GcPolicy::Greedy => {
                    // The lowest bucket holding an affordable block: most invalid pages.
                    if let Some(&b) = bucket
                        .iter()
                        .rev()
                        .find(|&&b| self.affordable(p, b as usize, opened, strict))
                    {
                        return Some(b as usize);
                    }
                }
                GcPolicy::CostBenefit => {
                    for &b in bucket {
                        if !self.affordable(p, b as usize, opened, strict) {
                            continue;
                        }
                        let blk = &self.blocks[b as usize];
                        let u = f64::from(blk.valid) / f64::from(self.ppb);
                        let age = (self.seq - blk.last_write) as f64 + 1.0;
                        let score = if blk.valid == 0 {
                            f64::INFINITY
                        } else {
                            (1.0 - u) / (2.0 * u) * age
                        };
                        let better = match best {
                            Some((s, _)) => score > s,
                            None => true,
                        };
                        if better {
                            best = Some((score, b as usize));
                        }
                    }
                }
            }
        }
        best.map(|(_, b)| b)
    }

    /// Copies the valid pages of block `b` to its plane's open block. Returns
    /// whether every page moved, how many moved and when the last copy completes.
    fn relocate(&mut self, b: usize, ready: u64, tl: &mut Timeline) -> Result<(bool, u64, u64)> {
        let p = self.plane_of(b);
        let mut t = ready;
        let mut copies = 0;
        let base = b as u32 * self.ppb;
        for i in 0..self.ppb {
            let lfp = self.p2l[(base + i) as usize];
            if lfp == NONE {
                continue;
            }
            let Some(new) = self.alloc_in_plane(p, true, ready, tl)? else {
                return Ok((false, copies, t));
            };
            t = t.max(tl.copyback(p, ready));
            self.counters.reads += 1;
            self.counters.programs += 1;
            self.counters.gc_copies += 1;
            copies += 1;
            self.remap(lfp as usize, new);
        }
        Ok((true, copies, t))
    }

    /// Erases block `b` (no valid pages, not in a bucket) once `ready`; retires it at the erase limit.
    fn erase(&mut self, b: usize, ready: u64, tl: &mut Timeline) {
        let p = self.plane_of(b);
        tl.erase(p, ready);
        self.counters.erases += 1;
        let old = self.blocks[b].erase_count;
        if let Some(n) = self.erase_hist.get_mut(&old) {
            *n -= 1;
            if *n == 0 {
                self.erase_hist.remove(&old);
            }
        }
        let count = old + 1;
        let blk = &mut self.blocks[b];
        blk.erase_count = count;
        blk.write_ptr = 0;
        blk.valid = 0;
        if count >= self.erase_limit {
            blk.state = BlockState::Retired;
            self.retired += 1;
        } else {
            blk.state = BlockState::Free;
            *self.erase_hist.entry(count).or_insert(0) += 1;
            self.planes[p].free.push(Reverse((count, b as u32)));
        }
    }

    /// Static wear levelling (see the module documentation).
    fn wear_level(&mut self, ready: u64, tl: &mut Timeline) -> Result<()> {
        if self.wl_threshold == 0 {
            return Ok(());
        }
        let (Some((&min, _)), Some((&max, _))) = (
            self.erase_hist.first_key_value(),
            self.erase_hist.last_key_value(),
        ) else {
            return Ok(());
        };
        if max - min <= self.wl_threshold || self.wl_skip == Some((min, max)) {
            return Ok(());
        }
        let n = self.blocks.len();
        let found = (0..n).map(|k| (self.wl_cursor + k) % n).find(|&b| {
            let blk = &self.blocks[b];
            blk.state == BlockState::Full && blk.erase_count == min && {
                let p = self.plane_of(b);
                self.affordable(p, b, self.blocks_needed(p, blk.valid), true)
            }
        });
        let Some(b) = found else {
            self.wl_skip = Some((min, max));
            return Ok(());
        };
        self.wl_cursor = (b + 1) % n;
        let (moved, copies, t) = self.relocate(b, ready, tl)?;
        self.counters.wl_copies += copies;
        if moved {
            self.bucket_remove(b);
            self.erase(b, t, tl);
            self.counters.wl_migrations += 1;
        }
        Ok(())
    }

    /// Number of blocks (retired ones included).
    pub(crate) fn block_count(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// Lowest, mean and highest erase count over all blocks.
    pub(crate) fn erase_spread(&self) -> (u64, f64, u64) {
        let n = self.blocks.len();
        if n == 0 {
            return (0, 0.0, 0);
        }
        let (mut min, mut max, mut sum) = (u32::MAX, 0u32, 0u64);
        for b in &self.blocks {
            min = min.min(b.erase_count);
            max = max.max(b.erase_count);
            sum += u64::from(b.erase_count);
        }
        (u64::from(min), sum as f64 / n as f64, u64::from(max))
    }

    /// Checks every structural invariant of the tables (see `check_invariants` of `FlashSim`).
    pub(crate) fn check_invariants(&self) -> Result<()> {
        let ppb = self.ppb as usize;
        if self.p2l.len() != self.blocks.len() * ppb || self.l2p.len() as u64 != self.logical {
            return Err(corrupt("table sizes disagree with the geometry".into()));
        }
        let mapped = self.check_forward_map()?;
        let total_valid = self.check_blocks()?;
        if total_valid != mapped {
            return Err(corrupt(format!(
                "{mapped} logical pages mapped but {total_valid} physical pages valid"
            )));
        }
        self.check_planes()?;
        self.check_accounting()
    }

    /// Forward map -> reverse map: every mapped logical page points at a
    /// programmed physical page that points back. Returns the number of
    /// mapped logical pages.
    fn check_forward_map(&self) -> Result<u64> {
        let mut mapped = 0u64;
        for (lfp, &ppn) in self.l2p.iter().enumerate() {
            if ppn == NONE {
                continue;
            }
            mapped += 1;
            let Some(&back) = self.p2l.get(ppn as usize) else {
                return Err(corrupt(format!(
                    "logical page {lfp} maps beyond the device ({ppn})"
                )));
            };
            if back as usize != lfp {
                return Err(corrupt(format!(
                    "logical page {lfp} maps to physical {ppn}, which belongs to {back}"
                )));
            }
            let b = &self.blocks[self.block_of(ppn)];
            if !matches!(b.state, BlockState::Open | BlockState::Full)
                || ppn % self.ppb >= b.write_ptr
            {
                return Err(corrupt(format!(
                    "logical page {lfp} maps to unprogrammed physical page {ppn} ({:?})",
                    b.state
                )));
            }
        }
        Ok(mapped)
    }

    /// Reverse map -> forward map, valid counts and states per block.
    /// Returns the number of valid physical pages.
    fn check_blocks(&self) -> Result<u64> {
        let ppb = self.ppb as usize;
        let mut total_valid = 0u64;
        for (bi, b) in self.blocks.iter().enumerate() {
            let pages = &self.p2l[bi * ppb..(bi + 1) * ppb];
            let mut valid = 0u32;
            for (i, &lfp) in pages.iter().enumerate() {
                if lfp == NONE {
                    continue;
                }
                valid += 1;
                let ppn = (bi * ppb + i) as u32;
                if self.l2p.get(lfp as usize) != Some(&ppn) {
                    return Err(corrupt(format!(
                        "physical page {ppn} claims logical {lfp}, which maps elsewhere"
                    )));
                }
            }
            total_valid += u64::from(valid);
            if valid != b.valid {
                return Err(corrupt(format!(
                    "block {bi} counts {} valid pages, holds {valid}",
                    b.valid
                )));
            }
            if b.erase_count > self.erase_limit {
                return Err(corrupt(format!(
                    "block {bi} erased {} times, beyond the limit {}",
                    b.erase_count, self.erase_limit
                )));
            }
            let p = self.plane_of(bi);
            let ok = match b.state {
                BlockState::Free => b.write_ptr == 0 && valid == 0,
                BlockState::Open => {
                    b.write_ptr < self.ppb && self.planes[p].open == Some(bi as u32)
                }
                BlockState::Full => {
                    b.write_ptr == self.ppb
                        && self.planes[p].buckets[b.valid as usize].get(b.bucket_pos as usize)
                            == Some(&(bi as u32))
                }
                BlockState::Retired => valid == 0 && b.erase_count == self.erase_limit,
            };
            if !ok {
                return Err(corrupt(format!(
                    "block {bi} in state {:?} is inconsistent",
                    b.state
                )));
            }
        }
        Ok(total_valid)
    }

    /// Per-plane free heaps, open blocks and buckets.
    fn check_planes(&self) -> Result<()> {
        let mut seen_free = vec![false; self.blocks.len()];
        for (p, plane) in self.planes.iter().enumerate() {
            for &Reverse((count, b)) in plane.free.iter() {
                let bi = b as usize;
                let Some(blk) = self.blocks.get(bi) else {
                    return Err(corrupt(format!("free list of plane {p} holds block {b}")));
                };
                if blk.state != BlockState::Free
                    || blk.erase_count != count
                    || self.plane_of(bi) != p
                    || std::mem::replace(&mut seen_free[bi], true)
                {
                    return Err(corrupt(format!(
                        "free list of plane {p}: block {b} is not a free block of this plane"
                    )));
                }
            }
            if let Some(b) = plane.open {
                if self.blocks.get(b as usize).map(|x| x.state) != Some(BlockState::Open)
                    || self.plane_of(b as usize) != p
                {
                    return Err(corrupt(format!("plane {p}: open block {b} is not open")));
                }
            }
            let in_buckets: usize = plane.buckets.iter().map(Vec::len).sum();
            let full = (p..self.blocks.len())
                .step_by(self.nplanes)
                .filter(|&b| self.blocks[b].state == BlockState::Full)
                .count();
            if in_buckets != full {
                return Err(corrupt(format!(
                    "plane {p}: {full} full blocks but {in_buckets} in the GC buckets"
                )));
            }
        }
        let free = self
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Free)
            .count();
        if free != seen_free.iter().filter(|&&s| s).count() {
            return Err(corrupt(format!(
                "{free} free blocks but fewer in the free lists"
            )));
        }
        Ok(())
    }

    /// Retired-block and erase accounting.
    fn check_accounting(&self) -> Result<()> {
        let retired = self
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Retired)
            .count();
        if retired as u64 != self.retired {
            return Err(corrupt(format!(
                "{retired} blocks retired but {} counted",
                self.retired
            )));
        }
        let mut hist = BTreeMap::new();
        for b in self
            .blocks
            .iter()
            .filter(|b| b.state != BlockState::Retired)
        {
            *hist.entry(b.erase_count).or_insert(0u32) += 1;
        }
        if hist != self.erase_hist {
            return Err(corrupt("erase-count histogram out of date".into()));
        }
        Ok(())
    }
}

/// The persistent part of the FTL's state: everything else is derived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FtlImage {
    /// Per block: state (0 free, 1 open, 2 full, 3 retired), write pointer,
    /// erase count, sequence number of its last program.
    pub(crate) blocks: Vec<(u8, u32, u32, u64)>,
    /// The forward map (`u32::MAX` = unmapped).
    pub(crate) l2p: Vec<u32>,
    pub(crate) next_plane: u64,
    pub(crate) seq: u64,
    pub(crate) wl_cursor: u64,
}

impl FtlImage {
    /// Fills `p2l` (the reverse map, `NONE` where unmapped) from the
    /// image's forward map: an error for a physical page mapped twice or
    /// beyond `p2l`.
    pub(crate) fn reverse_into(&self, p2l: &mut [u32]) -> Result<()> {
        let bad = |msg: String| Error::corrupt(None, format!("flashsim state: {msg}"));
        p2l.fill(NONE);
        for (lfp, &ppn) in self.l2p.iter().enumerate() {
            if ppn == NONE {
                continue;
            }
            match p2l.get_mut(ppn as usize) {
                Some(slot) if *slot == NONE => *slot = lfp as u32,
                Some(_) => return Err(bad(format!("physical page {ppn} mapped twice"))),
                None => return Err(bad(format!("logical page {lfp} maps beyond the device"))),
            }
        }
        Ok(())
    }
}

/// The physical page the forward map `l2p` gives logical page `lfp`, if
/// any.
pub(crate) fn mapped(l2p: &[u32], lfp: u64) -> Option<u32> {
    let idx = usize::try_from(lfp).ok()?;
    match l2p.get(idx) {
        Some(&p) if p != NONE => Some(p),
        _ => None,
    }
}

/// `lfp` as an index into the forward map `l2p` of a device of `logical`
/// pages: an error beyond it.
pub(crate) fn slot(l2p: &[u32], logical: u64, lfp: u64) -> Result<usize> {
    usize::try_from(lfp)
        .ok()
        .filter(|&i| i < l2p.len())
        .ok_or_else(|| {
            Error::invalid(format!(
                "flashsim: logical flash page {lfp} beyond {logical}"
            ))
        })
}

impl Ftl {
    /// The state to save.
    pub(crate) fn export(&self) -> FtlImage {
        FtlImage {
            blocks: self
                .blocks
                .iter()
                .map(|b| {
                    let state = match b.state {
                        BlockState::Free => 0,
                        BlockState::Open => 1,
                        BlockState::Full => 2,
                        BlockState::Retired => 3,
                    };
                    (state, b.write_ptr, b.erase_count, b.last_write)
                })
                .collect(),
            l2p: self.l2p.clone(),
            next_plane: self.next_plane as u64,
            seq: self.seq,
            wl_cursor: self.wl_cursor as u64,
        }
    }

    /// Rebuilds an FTL from a saved image for `cfg`, deriving the reverse map,
    /// valid counts, free lists, GC buckets and erase histogram, and checking
    /// every invariant: a damaged image is an error, never a panic.
    pub(crate) fn restore(cfg: &FlashSimConfig, image: FtlImage) -> Result<Ftl> {
        let bad = |msg: String| Error::corrupt(None, format!("flashsim state: {msg}"));
        let mut ftl = Ftl::new(cfg)?;
        if image.blocks.len() != ftl.blocks.len() || image.l2p.len() != ftl.l2p.len() {
            return Err(bad(format!(
                "{} blocks and {} logical pages saved, the configuration has {} and {}",
                image.blocks.len(),
                image.l2p.len(),
                ftl.blocks.len(),
                ftl.l2p.len()
            )));
        }
        image.reverse_into(&mut ftl.p2l)?;
        ftl.l2p = image.l2p;
        for plane in &mut ftl.planes {
            plane.free.clear();
            plane.open = None;
            plane.buckets.iter_mut().for_each(Vec::clear);
        }
        ftl.erase_hist.clear();
        ftl.retired = 0;
        let ppb = ftl.ppb as usize;
        for (bi, &(state, write_ptr, erase_count, last_write)) in image.blocks.iter().enumerate() {
            if write_ptr > ftl.ppb || erase_count > ftl.erase_limit {
                return Err(bad(format!(
                    "block {bi} has write pointer {write_ptr} and erase count {erase_count}"
                )));
            }
            let valid = ftl.p2l[bi * ppb..(bi + 1) * ppb]
                .iter()
                .filter(|&&l| l != NONE)
                .count() as u32;
            let p = ftl.plane_of(bi);
            let blk = &mut ftl.blocks[bi];
            blk.write_ptr = write_ptr;
            blk.erase_count = erase_count;
            blk.last_write = last_write;
            blk.valid = valid;
            blk.state = match state {
                0 => BlockState::Free,
                1 => BlockState::Open,
                2 => BlockState::Full,
                3 => BlockState::Retired,
                s => return Err(bad(format!("block {bi} has unknown state {s}"))),
            };
            match blk.state {
                BlockState::Free => {
                    ftl.planes[p].free.push(Reverse((erase_count, bi as u32)));
                }
                BlockState::Open => {
                    if ftl.planes[p].open.replace(bi as u32).is_some() {
                        return Err(bad(format!("plane {p} has two open blocks")));
                    }
                }
                BlockState::Full => ftl.bucket_insert(bi),
                BlockState::Retired => ftl.retired += 1,
            }
            if state != 3 {
                *ftl.erase_hist.entry(erase_count).or_insert(0) += 1;
            }
        }
        ftl.next_plane = usize::try_from(image.next_plane)
            .ok()
            .filter(|&n| n < ftl.nplanes)
            .ok_or_else(|| bad(format!("next plane {} out of range", image.next_plane)))?;
        ftl.seq = image.seq;
        ftl.wl_cursor = (image.wl_cursor % ftl.blocks.len().max(1) as u64) as usize;
        if ftl.blocks.iter().any(|b| b.last_write > ftl.seq) {
            return Err(bad(
                "a block was written after the last sequence number".into()
            ));
        }
        ftl.check_invariants()?;
        Ok(ftl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Greedy takes the block with most invalid pages; cost-benefit prefers an
    /// old block with fewer invalid pages over a young one.
    #[test]
    fn victim_selection_by_policy() {
        let victim = |policy: &str| {
            // 16 blocks of 4 pages, one plane: 44 logical pages.
            let cfg = FlashSimConfig::from_params(&format!(
                "page_size=512&ppb=4&blocks=16&op=0.3&gc={policy}"
            ))
            .unwrap();
            let mut ftl = Ftl::new(&cfg).unwrap();
            let mut tl = Timeline::new(1, 1, 1, 1, 1, 0);
            // Block 0 ("A"): pages 0..4, sequence numbers 1..4; eight filler
            // blocks: pages 4..36; block 9 ("B"): pages 36..40, sequence 37..40.
            for lfp in 0..40 {
                ftl.write(lfp, 0, &mut tl).unwrap();
            }
            let a = ftl.block_of(ftl.l2p[0]);
            let b = ftl.block_of(ftl.l2p[36]);
            // A keeps 3 valid pages, B 2.
            ftl.trim(1);
            ftl.trim(36);
            ftl.trim(37);
            ftl.check_invariants().unwrap();
            (ftl.select_victim(0), a, b)
        };
        // Greedy: B (2 invalid pages) over A (1).
        let (v, _, b) = victim("greedy");
        assert_eq!(v, Some(b));
        // Cost-benefit at sequence 40: A: u = 3/4, age 40 − 4 + 1 = 37,
        // (1/4)/(3/2) × 37 ≈ 6.2; B: u = 1/2, age 40 − 40 + 1 = 1, (1/2)/1 × 1 = 0.5.
        let (v, a, _) = victim("cost-benefit");
        assert_eq!(v, Some(a));
    }
}
