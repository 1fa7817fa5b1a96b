//! `FlashSim`: a NAND flash simulator behind the [`PageDevice`](super::PageDevice) interface.
//!
//! It plays the role Flash-DBSim plays in the flash-simulator paper (Carniel
//! et al.): the index runs unchanged on an emulated NAND device and every
//! NAND read, program and erase is counted, with the FTL and GC settings that
//! the paper left unreported made explicit parameters ([`FlashSimConfig`]).
//!
//! - [`config`]: geometry, FTL parameters, latencies, presets, `key=value` overrides;
//! - `ftl`: the page-mapping FTL (out-of-place updates, trim, greedy or
//!   cost-benefit GC, dynamic and static wear levelling, block retirement);
//! - `flashdbsim`: the Flash-DBSim compatibility mode (`ftl=flashdbsim`):
//!   FTL01's rules (one reserved block, GC only when no page is free, victim
//!   with the most dead pages, dead-block batch erase, wear-levelling swap)
//!   and latencies summed per operation without parallelism;
//! - `timing`: latencies and the overlap of operations on different planes and channels;
//! - `persist`: [`FlashSim::save`] / [`FlashSim::load`] of the whole state
//!   (the `device.img` of a simulated index), checksummed and validated on load.
//!
//! # Host pages and flash pages
//! The host (index) page size is fixed at construction. A host page of `k`
//! flash pages (host ≥ flash) is stored as `k` logical flash pages (the seeds'
//! 16 KiB node on 2 KiB flash pages = 8 programs per write, 8 reads per read).
//! Host pages smaller than a flash page share it: writing one is a
//! read-modify-write of its flash page (a NAND read, if the flash page holds
//! data and the batch does not rewrite all of it, then a program); host pages
//! of one batch that fall into the same flash page are merged into one
//! program, as a device write buffer would. Reading a flash page that holds no
//! data (never written, or trimmed) costs no NAND operation and returns zeros.
//! Trimming a host page unmaps its flash pages; a flash page shared by smaller
//! host pages is unmapped when all of them are trimmed.
//!
//! # Time
//! `sim_time_ns` is a simulated clock. A batch is issued at once: its NAND
//! operations overlap across planes and channels (each keeps a busy-until
//! time; host writes are striped round-robin over the planes, so a write
//! batch lands on consecutive planes, which sit on different channels), and
//! the clock advances to the batch's last completion; separate calls
//! accumulate. Garbage collection and wear levelling triggered by a write are
//! charged to it (on-die copybacks and erases on the planes involved). The
//! planes of a die are modelled as independent units, an idealised
//! multi-plane operation; with one plane per die this is the per-die model.
//!
//! # Counters
//! `device_write_amplification` = NAND programs ÷ host flash-page programs
//! (after the merging above), so a sequential workload scores exactly 1.
//! `retired_blocks` and the erase-count spread describe the device's state
//! (they are not reset by `reset_stats`); the other counters and
//! `sim_time_ns` count from the last reset.
//!
//! # Contents
//! Data lives in a hash map by host page (sparse), written after the FTL has
//! placed the page; the FTL tables decide every count and time. A batch that
//! fails with [`Error::DeviceFull`] may have written a prefix of its pages.
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

pub mod config;
mod flashdbsim;
mod ftl;
mod persist;
mod timing;

#[cfg(test)]
mod limits_tests;
#[cfg(test)]
mod tests;

pub use config::{FlashSimConfig, FtlMode, GcPolicy};
#[cfg(test)]
pub use config::{CONFIG_KEYS, PRESETS};

use super::{Counted, DeviceExt, DeviceGeometry, DeviceStats, PageDevice, PageId, SimCounters};
use crate::units::check_page_size;
use crate::{Error, Result};
use flashdbsim::Engine;
use ftl::NandCounters;
use timing::Timeline;

/// A simulated NAND flash device with a page-mapping FTL (see the module
/// documentation), counted.
pub type FlashSim = Counted<FlashSimIo>;

internal! {
    /// The simulator behind a [`FlashSim`], uncounted.
    #[derive(Debug)]
    pub struct FlashSimIo {
        config: FlashSimConfig,
        host_page_size: usize,
        /// Flash pages per host page (1 when the host page is not larger).
        flash_per_host: u64,
        /// Host pages per flash page (1 when the host page is not smaller).
        host_per_flash: u64,
        capacity: u64,
        inner: Mutex<Inner>,
    }
}

#[derive(Debug)]
struct Inner {
    ftl: Engine,
    timeline: Timeline,
    data: HashMap<PageId, Box<[u8]>>,
    /// FTL counters at the last reset.
    base: NandCounters,
    /// Clock at the last reset.
    time_base: u64,
    /// The client mark saved with the image (see
    /// [`FlashSimIo::set_client_mark`]; `None`: an image saved before it).
    client_mark: Option<u64>,
}

/// Extra simulator counters beyond [`SimCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg(test)]
pub struct FlashSimDetail {
    /// Flash-page programs of host data since the last reset (the write-amplification denominator).
    pub host_flash_programs: u64,
    /// Pages copied by static wear levelling since the last reset (included in `gc_copies`).
    pub wear_leveling_copies: u64,
    /// Blocks migrated by static wear levelling since the last reset.
    pub wear_leveling_migrations: u64,
    /// Logical flash pages currently holding data.
    pub mapped_flash_pages: u64,
    /// Logical flash pages of the device.
    pub logical_flash_pages: u64,
}

impl FlashSim {
    /// A fresh (erased) simulated device for `host_page_size`-byte host pages.
    pub fn new(config: FlashSimConfig, host_page_size: usize) -> Result<FlashSim> {
        FlashSimIo::fresh(config, host_page_size).map(Counted::wrap)
    }

    /// Parses the parameter part of a `flashsim:` spec (see
    /// [`FlashSimConfig::from_params`]) and builds the device.
    pub fn from_params(params: &str, host_page_size: usize) -> Result<FlashSim> {
        FlashSim::new(FlashSimConfig::from_params(params)?, host_page_size)
    }
}

impl FlashSimIo {
    /// A fresh (erased) simulator for `host_page_size`-byte host pages.
    fn fresh(config: FlashSimConfig, host_page_size: usize) -> Result<FlashSimIo> {
        config.validate()?;
        check_page_size(host_page_size)?;
        let flash = config.flash_page_size;
        let (flash_per_host, host_per_flash) = if host_page_size >= flash {
            ((host_page_size / flash) as u64, 1)
        } else {
            (1, (flash / host_page_size) as u64)
        };
        let ftl = Engine::new(&config)?;
        let logical = ftl.logical_pages();
        let capacity = if flash_per_host > 1 {
            logical / flash_per_host
        } else {
            logical.saturating_mul(host_per_flash)
        };
        if capacity == 0 {
            return Err(Error::invalid(format!(
                "flashsim: {logical} logical flash pages of {flash} bytes cannot hold one host page of {host_page_size} bytes"
            )));
        }
        let planes = usize::try_from(config.planes())
            .map_err(|_| Error::invalid("flashsim: too many planes"))?;
        let timeline = Timeline::new(
            planes,
            config.channels as usize,
            config.read_ns,
            config.program_ns,
            config.erase_ns,
            config.transfer_ns_per_page(),
        );
        Ok(FlashSimIo {
            config,
            host_page_size,
            flash_per_host,
            host_per_flash,
            capacity,
            inner: Mutex::new(Inner {
                ftl,
                timeline,
                data: HashMap::new(),
                base: NandCounters::default(),
                time_base: 0,
                client_mark: Some(0),
            }),
        })
    }

    /// The client mark of the saved image this device was loaded from (or
    /// the one the next save writes, once set): the generation of the
    /// index's object heap that the saved pages go with (0 for a new
    /// device; `None` for an image saved before marks, which names none).
    pub fn client_mark(&self) -> Option<u64> {
        self.lock().client_mark
    }

    /// Sets the client mark the next save writes with the image, so that it
    /// is saved exactly with the pages.
    pub fn set_client_mark(&self, mark: u64) {
        self.lock().client_mark = Some(mark);
    }

    /// The configuration this device was built with.
    #[cfg(test)]
    pub fn config(&self) -> &FlashSimConfig {
        &self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A poisoned lock only means another thread panicked mid-call.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Simulator counters not in [`SimCounters`].
    #[cfg(test)]
    pub fn detail(&self) -> FlashSimDetail {
        let inner = self.lock();
        let c = inner.ftl.counters();
        let b = inner.base;
        FlashSimDetail {
            host_flash_programs: c.host_programs - b.host_programs,
            wear_leveling_copies: c.wl_copies - b.wl_copies,
            wear_leveling_migrations: c.wl_migrations - b.wl_migrations,
            mapped_flash_pages: inner.ftl.mapped_count(),
            logical_flash_pages: inner.ftl.logical_pages(),
        }
    }

    /// Checks the FTL's invariants (every logical page mapped at most once,
    /// forward and reverse maps agree, valid-page counts per block, free-block,
    /// retirement and erase-count accounting, erase counts within the limit)
    /// and that the stored contents agree with the mapping. For tests and `verify`.
    pub fn check_invariants(&self) -> Result<()> {
        let inner = self.lock();
        inner.ftl.check_invariants()?;
        let mut lfps = HashSet::new();
        for &h in inner.data.keys() {
            for lfp in self.flash_pages_of(h) {
                if !inner.ftl.is_mapped(lfp) {
                    return Err(Error::corrupt(
                        Some(h),
                        format!(
                            "flashsim: host page {h} holds data but flash page {lfp} is unmapped"
                        ),
                    ));
                }
                lfps.insert(lfp);
            }
        }
        let mapped = inner.ftl.mapped_count();
        if mapped != lfps.len() as u64 {
            return Err(Error::corrupt(
                None,
                format!(
                    "flashsim: {mapped} flash pages mapped but host data covers {}",
                    lfps.len()
                ),
            ));
        }
        Ok(())
    }

    /// The logical flash pages of host page `h`.
    fn flash_pages_of(&self, h: PageId) -> std::ops::Range<u64> {
        if self.host_per_flash > 1 {
            let lfp = h / self.host_per_flash;
            lfp..lfp + 1
        } else {
            let first = h * self.flash_per_host;
            first..first + self.flash_per_host
        }
    }

    /// The host pages sharing flash page `lfp` (when host pages are smaller).
    fn host_pages_of(&self, lfp: u64) -> std::ops::Range<u64> {
        let first = lfp * self.host_per_flash;
        first..(first + self.host_per_flash).min(self.capacity)
    }
}

impl PageDevice for FlashSimIo {
    fn geometry(&self) -> DeviceGeometry {
        DeviceGeometry::new(self.host_page_size, self.capacity)
    }

    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let t0 = inner.timeline.begin();
        let mut read_lfps = HashSet::new();
        for (&h, out) in pages.iter().zip(buf.chunks_exact_mut(self.host_page_size)) {
            for lfp in self.flash_pages_of(h) {
                // A flash page shared by several requested host pages is read once.
                if self.host_per_flash == 1 || read_lfps.insert(lfp) {
                    inner.ftl.read(lfp, t0, &mut inner.timeline);
                }
            }
            match inner.data.get(&h) {
                Some(d) => out.copy_from_slice(d),
                None => out.fill(0),
            }
        }
        inner.timeline.finish();
        Ok(())
    }

    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        inner.ftl.check_capacity()?;
        let t0 = inner.timeline.begin();
        let result = if self.host_per_flash == 1 {
            let mut r = Ok(());
            for (&h, chunk) in pages.iter().zip(data.chunks_exact(self.host_page_size)) {
                if let Err(e) = self
                    .flash_pages_of(h)
                    .try_for_each(|lfp| inner.ftl.write(lfp, t0, &mut inner.timeline).map(drop))
                {
                    // A host page of several flash pages failed half-way: if it
                    // held nothing before, unmap the part written (it still
                    // reads as zeros); otherwise it keeps its old contents.
                    if !inner.data.contains_key(&h) {
                        for lfp in self.flash_pages_of(h) {
                            inner.ftl.trim(lfp);
                        }
                    }
                    r = Err(e);
                    break;
                }
                inner.data.insert(h, chunk.into());
            }
            r
        } else {
            self.write_shared(inner, pages, data, t0)
        };
        inner.timeline.finish();
        result
    }

    fn sync(&self) -> Result<()> {
        // Programs complete before a batch returns: nothing is volatile.
        Ok(())
    }

    fn trim(&self, pages: &[PageId]) -> Result<()> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        for &h in pages {
            inner.data.remove(&h);
            for lfp in self.flash_pages_of(h) {
                let unused = self.host_per_flash == 1
                    || self
                        .host_pages_of(lfp)
                        .all(|other| !inner.data.contains_key(&other));
                if unused {
                    inner.ftl.trim(lfp);
                }
            }
        }
        Ok(())
    }

    fn describe(&self) -> String {
        let c = &self.config;
        format!(
            "flashsim: preset={} ftl={} capacity={} B ({} blocks of {} × {} B pages) planes={} \
             ({} channels × {} dies × {} planes) op={} gc={} gc_threshold={} wl_threshold={} \
             erase_limit={} read={}ns program={}ns erase={}ns transfer={}ns/B; \
             host page {} B, {} host pages",
            c.preset,
            c.ftl.name(),
            c.capacity,
            c.blocks(),
            c.pages_per_block,
            c.flash_page_size,
            c.planes(),
            c.channels,
            c.dies_per_channel,
            c.planes_per_die,
            c.over_provisioning,
            c.gc_policy.name(),
            c.gc_threshold,
            c.wear_leveling_threshold,
            c.erase_limit,
            c.read_ns,
            c.program_ns,
            c.erase_ns,
            c.transfer_ns_per_byte,
            self.host_page_size,
            self.capacity
        )
    }
}

impl DeviceExt for FlashSimIo {
    /// Never: the simulator's state is durable only when its owner saves
    /// its image, and a crash returns to that image whole.
    fn overwrites_durable(&self, pages: &[PageId]) -> Vec<bool> {
        vec![false; pages.len()]
    }

    /// No I/O counters (see [`Counted`]); the NAND counters since the last reset.
    fn stats(&self) -> DeviceStats {
        let inner = self.lock();
        let c = inner.ftl.counters();
        let b = inner.base;
        let host = c.host_programs - b.host_programs;
        let programs = c.programs - b.programs;
        let (erase_count_min, erase_count_mean, erase_count_max) = inner.ftl.erase_spread();
        let sim = SimCounters {
            nand_reads: c.reads - b.reads,
            nand_programs: programs,
            nand_erases: c.erases - b.erases,
            gc_copies: c.gc_copies - b.gc_copies,
            gc_runs: c.gc_runs - b.gc_runs,
            retired_blocks: inner.ftl.retired_blocks(),
            device_write_amplification: if host == 0 {
                0.0
            } else {
                programs as f64 / host as f64
            },
            erase_count_min,
            erase_count_mean,
            erase_count_max,
            erase_blocks: inner.ftl.erase_blocks(),
            sim_time_ns: inner.ftl.now(&inner.timeline) - inner.time_base,
        };
        DeviceStats {
            sim: Some(sim),
            ..DeviceStats::default()
        }
    }

    fn sim_clock_ns(&self) -> Option<u64> {
        let inner = self.lock();
        Some(inner.ftl.now(&inner.timeline))
    }

    /// Resets the NAND counters' base and the reported simulated time.
    fn reset_stats(&self) {
        let mut inner = self.lock();
        inner.base = inner.ftl.counters();
        inner.time_base = inner.ftl.now(&inner.timeline);
    }
}

impl FlashSimIo {
    /// Writes host pages smaller than a flash page: one (read-modify-)write per
    /// distinct flash page of the batch, in order of first appearance.
    fn write_shared(
        &self,
        inner: &mut Inner,
        pages: &[PageId],
        data: &[u8],
        t0: u64,
    ) -> Result<()> {
        let mut order: Vec<u64> = Vec::new();
        let mut members: HashMap<u64, Vec<(PageId, usize)>> = HashMap::new();
        for (i, &h) in pages.iter().enumerate() {
            let lfp = h / self.host_per_flash;
            let list = members.entry(lfp).or_default();
            if list.is_empty() {
                order.push(lfp);
            }
            list.push((h, i));
        }
        for lfp in order {
            let Some(list) = members.get(&lfp) else {
                continue;
            };
            let covered: HashSet<PageId> = list.iter().map(|&(h, _)| h).collect();
            let whole = self.host_pages_of(lfp).all(|h| covered.contains(&h));
            let ready = if whole {
                t0
            } else {
                // Read-modify-write: the rest of the flash page comes from NAND.
                inner.ftl.read(lfp, t0, &mut inner.timeline)
            };
            inner.ftl.write(lfp, ready, &mut inner.timeline)?;
            for &(h, i) in list {
                let off = i * self.host_page_size;
                if let Some(chunk) = data.get(off..off + self.host_page_size) {
                    inner.data.insert(h, chunk.into());
                }
            }
        }
        Ok(())
    }
}
