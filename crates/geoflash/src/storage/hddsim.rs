//! `HddSim`: a magnetic disk model. Pages live in memory (sparse, like
//! [`MemDevice`](super::mem::MemDevice)); every request advances a simulated
//! clock by what a disk would spend on it, reported as
//! [`SimCounters::sim_time_ns`](super::SimCounters) (the NAND fields stay 0).
//!
//! # The model
//! - **Layout.** Bytes are laid out track after track: a track holds
//!   `media_rate_mb_s × one revolution` bytes (the media rate *is* one track
//!   per revolution), a cylinder holds `heads` tracks. Page `p` starts at byte
//!   `p × page_size`; its cylinder and its angle on the track follow.
//! - **Seek** over `d` cylinders, `D` being the full stroke (cylinders − 1):
//!   0 for `d = 0`; for `1 ≤ d ≤ D/3` the short-seek curve
//!   `t2t + (avg − t2t)·sqrt((d − 1)/(D/3 − 1))` (arm acceleration dominates);
//!   for `d > D/3` the straight line from `avg` at `D/3` to `full` at `D`
//!   (coast phase). `D/3` is the mean distance of two uniformly random
//!   cylinders, which is where the classic model places the quoted average
//!   seek; the mean seek *time* over random pairs is a little lower (0.97×avg
//!   for the preset, because the short-seek curve is concave).
//! - **Rotation** is deterministic: the platter angle is the simulated clock
//!   modulo one revolution, and a request waits until its first byte passes
//!   under the head. For random requests this averages half a revolution
//!   (4.17 ms at 7,200 RPM); a request that follows the head needs no wait.
//! - **Transfer** at the media rate, once positioned.
//! - **Per-command time** `read_overhead_ms` / `write_overhead_ms` for each
//!   media access (one per contiguous run of pages), before the seek:
//!   controller, firmware and host path time the mechanics do not explain.
//! - **Read-ahead.** After a media read the drive keeps reading the next
//!   `read_ahead_bytes` into its buffer; a read there is a cache hit served at
//!   the media rate (the drive is still streaming), and the window moves on, so
//!   sequential reads stream at about the media rate.
//! - **Write-back cache** of `write_cache_bytes`: a write is acknowledged after
//!   `cache_overhead_ms` plus the interface transfer; a rewrite of a cached page
//!   costs the same and needs no extra destage. When the cache is full, the
//!   drive destages the next cached run in elevator (C-SCAN) order from the head
//!   position before accepting the write; `sync` destages everything in the
//!   same order. Contiguous cached pages go to the medium as one run. Reads of
//!   cached pages are cache hits. This is how 4 KB random writes appear faster
//!   than random reads: destaging `C` cached pages spread over the disk in
//!   elevator order needs only short seeks. `write_cache_bytes = 0` writes through.
//! - The clock only advances with device work: background destaging while the
//!   host is idle is not modelled.
//! - A batch is one queue of commands: the drive serves it in C-SCAN order
//!   from the head position, merging contiguous pages (NCQ).
//!
//! # Calibration of the `7200rpm` preset
//! The JIDM 2017 paper (`hdd-vs-ssd-spatial-indices`, Table I) measured its
//! 2 TB 7,200 RPM Western Digital drive with Iometer: 4 KB random reads
//! 0.185 MB/s and random writes 0.441 MB/s. Iometer's "MB" is 2^20 bytes (the
//! SSD row, 285.156 and 109.375 MB/s, is exactly 73,000 and 28,000 IOPS of
//! 4 KiB), so the drive did 0.185 × 256 = 47.36 reads/s, **21.12 ms per random
//! read**, and 0.441 × 256 = 112.9 writes/s, **8.86 ms per random write**.
//! - Mechanics from a datasheet-class 7,200 RPM drive: 8.33 ms per revolution
//!   (4.17 ms average rotational wait), track-to-track 1.0 ms, average seek
//!   8.5 ms, full stroke 17 ms, media rate 150 MB/s (1.25 MB per track,
//!   4 KiB transfer 0.027 ms), 4 heads, 2 TB: 400,067 cylinders.
//! - Random read over the whole disk: mean seek over random cylinder pairs
//!   (integrating the seek curve against the distance density 2(1 − x)) is
//!   8.26 ms; 8.26 + 4.17 + 0.03 = 12.46 ms of mechanics. The measurement
//!   leaves **8.66 ms** per read, which becomes `read_overhead_ms`.
//! - Random write, sustained: the 16 MiB write cache holds C = 4,096 pages of
//!   4 KiB, so elevator destaging seeks about 400,067 / 4,096 ≈ 98 cylinders
//!   (seek(98) = 1.20 ms), then waits 4.17 ms on average for rotation and
//!   transfers for 0.03 ms: 5.40 ms, plus 0.02 ms for the host's acknowledged
//!   write into the cache. The measurement leaves **3.44 ms** per destaged
//!   write, which becomes `write_overhead_ms`.
//! - The test `preset_matches_the_measured_rates` checks on 2,000 random
//!   operations over the whole disk that the simulated rates land within ±15%
//!   of 0.185 and 0.441 MiB/s; they land at 0.1856 and 0.4382 MiB/s, and at
//!   0.4433 MiB/s for writes sustained over four cache sizes (all within 1%).
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{Counted, DeviceExt, DeviceGeometry, DeviceStats, PageDevice, PageId, SimCounters};
use crate::units::{check_page_size, parse_size};
use crate::{Error, Result};

/// Parameters of the disk model. Units are in the field names: `_ms`
/// milliseconds, `_mb_s` decimal megabytes (10^6 bytes) per second, `_bytes` bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddSimConfig {
    /// Spindle speed in revolutions per minute.
    pub rpm: f64,
    /// Capacity in bytes.
    pub capacity_bytes: u64,
    /// Recording surfaces (tracks per cylinder).
    pub heads: u32,
    /// Sustained media transfer rate in MB/s (10^6 bytes); also fixes the bytes per track.
    pub media_rate_mb_s: f64,
    /// Seek time over one cylinder, in ms.
    pub track_to_track_ms: f64,
    /// Seek time over a third of the stroke (the mean random distance), in ms.
    pub average_seek_ms: f64,
    /// Seek time over the full stroke, in ms.
    pub full_stroke_ms: f64,
    /// Fixed time per media read command (one per contiguous run), in ms.
    pub read_overhead_ms: f64,
    /// Fixed time per media write command (one per contiguous destaged run), in ms.
    pub write_overhead_ms: f64,
    /// Host interface rate in MB/s (10^6 bytes), for cache hits and cached writes.
    pub interface_mb_s: f64,
    /// Fixed time of a request served by the drive's cache (read hit or cached write), in ms.
    pub cache_overhead_ms: f64,
    /// Write-back cache size in bytes (0: write through).
    pub write_cache_bytes: u64,
    /// Read-ahead after each media read, in bytes (0: none).
    pub read_ahead_bytes: u64,
}

/// Names of the presets accepted by [`HddSimConfig::preset`].
pub const PRESETS: &[&str] = &["7200rpm", "7200rpm-datasheet"];

/// Keys accepted by [`HddSimConfig::set`].
pub const KEYS: &[&str] = &[
    "rpm",
    "capacity_bytes",
    "heads",
    "media_rate_mb_s",
    "track_to_track_ms",
    "average_seek_ms",
    "full_stroke_ms",
    "read_overhead_ms",
    "write_overhead_ms",
    "interface_mb_s",
    "cache_overhead_ms",
    "write_cache_bytes",
    "read_ahead_bytes",
];

impl Default for HddSimConfig {
    /// The `7200rpm` preset.
    fn default() -> Self {
        HddSimConfig {
            rpm: 7200.0,
            capacity_bytes: 2_000_000_000_000,
            heads: 4,
            media_rate_mb_s: 150.0,
            track_to_track_ms: 1.0,
            average_seek_ms: 8.5,
            full_stroke_ms: 17.0,
            read_overhead_ms: 8.66,
            write_overhead_ms: 3.44,
            interface_mb_s: 300.0,
            cache_overhead_ms: 0.01,
            write_cache_bytes: 16 << 20,
            read_ahead_bytes: 512 << 10,
        }
    }
}

impl HddSimConfig {
    /// A named configuration: `7200rpm` (the JIDM 2017 drive, calibrated to its
    /// measured 4 KB random rates, see the module docs) or
    /// `7200rpm-datasheet` (the same mechanics with only 0.1 ms per command:
    /// what the datasheet promises, about 12.5 ms per random read).
    pub fn preset(name: &str) -> Result<Self> {
        match name {
            "7200rpm" => Ok(HddSimConfig::default()),
            "7200rpm-datasheet" => Ok(HddSimConfig {
                read_overhead_ms: 0.1,
                write_overhead_ms: 0.1,
                ..HddSimConfig::default()
            }),
            other => Err(Error::invalid(format!(
                "unknown hddsim preset {other:?}; presets: {}",
                PRESETS.join(", ")
            ))),
        }
    }

    /// Sets one parameter from text (`hddsim:preset=NAME&key=value` overrides).
    /// Byte fields accept sizes (`16MiB`); the others numbers.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let num = || -> Result<f64> {
            let v: f64 = value
                .trim()
                .parse()
                .map_err(|_| Error::invalid(format!("hddsim {key}={value:?} is not a number")))?;
            if !v.is_finite() {
                return Err(Error::invalid(format!(
                    "hddsim {key}={value:?} is not finite"
                )));
            }
            Ok(v)
        };
        match key {
            "rpm" => self.rpm = num()?,
            "capacity_bytes" => self.capacity_bytes = parse_size(value)?,
            "heads" => {
                self.heads = value.trim().parse().map_err(|_| {
                    Error::invalid(format!(
                        "hddsim heads={value:?} is not a whole number of heads"
                    ))
                })?
            }
            "media_rate_mb_s" => self.media_rate_mb_s = num()?,
            "track_to_track_ms" => self.track_to_track_ms = num()?,
            "average_seek_ms" => self.average_seek_ms = num()?,
            "full_stroke_ms" => self.full_stroke_ms = num()?,
            "read_overhead_ms" => self.read_overhead_ms = num()?,
            "write_overhead_ms" => self.write_overhead_ms = num()?,
            "interface_mb_s" => self.interface_mb_s = num()?,
            "cache_overhead_ms" => self.cache_overhead_ms = num()?,
            "write_cache_bytes" => self.write_cache_bytes = parse_size(value)?,
            "read_ahead_bytes" => self.read_ahead_bytes = parse_size(value)?,
            other => {
                return Err(Error::invalid(format!(
                    "unknown hddsim parameter {other:?}; valid keys: preset, {}",
                    KEYS.join(", ")
                )))
            }
        }
        Ok(())
    }

    /// Parses the parameter part of a device spec, `preset=NAME&key=value&…`
    /// (without the `hddsim:` prefix). The preset, if given, comes first and
    /// defaults to `7200rpm`; the result is validated.
    #[cfg(test)]
    pub fn from_params(params: &str) -> Result<Self> {
        let pairs: Vec<(&str, &str)> = params
            .split('&')
            .filter(|s| !s.trim().is_empty())
            .map(|kv| {
                kv.split_once('=').ok_or_else(|| {
                    Error::invalid(format!("hddsim parameter {kv:?} is not key=value"))
                })
            })
            .collect::<Result<_>>()?;
        let mut config = HddSimConfig::default();
        if let Some((_, name)) = pairs.iter().find(|(k, _)| k.trim() == "preset") {
            config = HddSimConfig::preset(name.trim())?;
        }
        for (k, v) in pairs.iter().filter(|(k, _)| k.trim() != "preset") {
            config.set(k.trim(), v)?;
        }
        config.validate()?;
        Ok(config)
    }

    /// Checks every parameter and the geometry they imply.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("rpm", self.rpm),
            ("media_rate_mb_s", self.media_rate_mb_s),
            ("interface_mb_s", self.interface_mb_s),
        ];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::invalid(format!(
                    "hddsim {name} must be a positive number, got {v}"
                )));
            }
        }
        let non_negative = [
            ("track_to_track_ms", self.track_to_track_ms),
            ("average_seek_ms", self.average_seek_ms),
            ("full_stroke_ms", self.full_stroke_ms),
            ("read_overhead_ms", self.read_overhead_ms),
            ("write_overhead_ms", self.write_overhead_ms),
            ("cache_overhead_ms", self.cache_overhead_ms),
        ];
        for (name, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::invalid(format!(
                    "hddsim {name} must be a non-negative number of milliseconds, got {v}"
                )));
            }
        }
        if !(self.track_to_track_ms <= self.average_seek_ms
            && self.average_seek_ms <= self.full_stroke_ms)
        {
            return Err(Error::invalid(format!(
                "hddsim seek times must satisfy track_to_track_ms ({}) <= average_seek_ms ({}) <= full_stroke_ms ({})",
                self.track_to_track_ms, self.average_seek_ms, self.full_stroke_ms
            )));
        }
        if self.capacity_bytes == 0 {
            return Err(Error::invalid("hddsim capacity_bytes must be positive"));
        }
        if self.heads == 0 {
            return Err(Error::invalid("hddsim heads must be at least 1"));
        }
        if self.track_bytes() < 512 {
            return Err(Error::invalid(format!(
                "hddsim media_rate_mb_s ({}) and rpm ({}) give fewer than 512 bytes per track",
                self.media_rate_mb_s, self.rpm
            )));
        }
        Ok(())
    }

    /// Nanoseconds per revolution.
    fn revolution_ns(&self) -> f64 {
        60e9 / self.rpm
    }

    /// Bytes per track: one revolution at the media rate, in whole 512-byte sectors.
    fn track_bytes(&self) -> u64 {
        let raw = self.media_rate_mb_s * 1e6 * self.revolution_ns() / 1e9;
        if raw.is_finite() && raw >= 0.0 {
            (raw as u64) / 512 * 512
        } else {
            0
        }
    }
}

/// A simulated hard disk. See the [module docs](self) for the model.
///
/// ```
/// use geoflash::storage::hddsim::{HddSim, HddSimConfig};
/// use geoflash::storage::PageDevice;
///
/// let mut config = HddSimConfig::preset("7200rpm")?;
/// config.set("write_cache_bytes", "8MiB")?;
/// let disk = HddSim::new(config, 4096)?;
/// disk.write(12_345, &[7u8; 4096])?; // acknowledged by the cache: microseconds
/// let mut buf = [0u8; 4096];
/// disk.read(999_999, &mut buf)?; // a random read: command, seek, rotation, transfer
/// disk.sync()?; // destages the cached write
/// let ms = disk.stats().sim.map_or(0, |s| s.sim_time_ns) as f64 / 1e6;
/// assert!(ms > 10.0 && ms < 100.0, "{ms} ms");
/// # Ok::<(), geoflash::Error>(())
/// ```
pub type HddSim = Counted<HddSimIo>;

internal! {
    /// The disk model behind an [`HddSim`], uncounted.
    #[derive(Debug)]
    pub struct HddSimIo {
        config: HddSimConfig,
        page_size: usize,
        capacity: u64,
        geo: Geometry,
        inner: Mutex<HddInner>,
    }
}

/// Derived constants of the model.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    rev_ns: f64,
    track_bytes: u64,
    cylinder_bytes: u64,
    /// Full stroke in cylinders (cylinders − 1).
    stroke: u64,
    /// Nanoseconds per byte at the media rate.
    media_ns_per_byte: f64,
    /// Nanoseconds per byte at the interface rate.
    interface_ns_per_byte: f64,
    t2t_ns: f64,
    avg_ns: f64,
    full_ns: f64,
    read_overhead_ns: f64,
    write_overhead_ns: f64,
    cache_overhead_ns: f64,
    cache_pages: usize,
    read_ahead_pages: u64,
}

impl Geometry {
    /// Seek time over `d` cylinders, in nanoseconds.
    fn seek_ns(&self, d: u64) -> f64 {
        if d == 0 {
            return 0.0;
        }
        let stroke = self.stroke as f64;
        let third = stroke / 3.0;
        let d = d as f64;
        if d <= third {
            if third <= 1.0 {
                return self.t2t_ns;
            }
            self.t2t_ns + (self.avg_ns - self.t2t_ns) * ((d - 1.0) / (third - 1.0)).sqrt()
        } else {
            self.avg_ns + (self.full_ns - self.avg_ns) * (d - third) / (stroke - third)
        }
    }
}

#[derive(Debug, Default)]
struct HddInner {
    pages: HashMap<PageId, Box<[u8]>>,
    /// Pages in the write-back cache, not yet on the medium (contents are in `pages`).
    dirty: BTreeSet<PageId>,
    /// Simulated clock in nanoseconds (fixes the platter angle).
    clock_ns: f64,
    /// Clock value at the last `reset_stats`.
    base_ns: f64,
    /// Byte offset under the head (right after the last media transfer).
    head_byte: u64,
    /// Pages `[start, end)` in the read-ahead buffer.
    read_ahead: Option<(PageId, PageId)>,
    media_reads: u64,
    media_writes: u64,
}

impl HddSim {
    /// A disk of `config` with pages of `page_size` bytes; its capacity is
    /// `capacity_bytes / page_size` pages.
    pub fn new(config: HddSimConfig, page_size: usize) -> Result<Self> {
        HddSimIo::fresh(config, page_size).map(Counted::wrap)
    }
}

impl HddSimIo {
    /// The model of a disk of `config` (see [`HddSim::new`]).
    fn fresh(config: HddSimConfig, page_size: usize) -> Result<Self> {
        check_page_size(page_size)?;
        config.validate()?;
        let capacity = config.capacity_bytes / page_size as u64;
        if capacity == 0 {
            return Err(Error::invalid(format!(
                "hddsim capacity_bytes ({}) is smaller than one page of {page_size} bytes",
                config.capacity_bytes
            )));
        }
        let track_bytes = config.track_bytes();
        let cylinder_bytes = track_bytes.saturating_mul(u64::from(config.heads));
        let cylinders = config.capacity_bytes.div_ceil(cylinder_bytes).max(1);
        let geo = Geometry {
            rev_ns: config.revolution_ns(),
            track_bytes,
            cylinder_bytes,
            stroke: cylinders - 1,
            media_ns_per_byte: 1e3 / config.media_rate_mb_s,
            interface_ns_per_byte: 1e3 / config.interface_mb_s,
            t2t_ns: config.track_to_track_ms * 1e6,
            avg_ns: config.average_seek_ms * 1e6,
            full_ns: config.full_stroke_ms * 1e6,
            read_overhead_ns: config.read_overhead_ms * 1e6,
            write_overhead_ns: config.write_overhead_ms * 1e6,
            cache_overhead_ns: config.cache_overhead_ms * 1e6,
            cache_pages: usize::try_from(config.write_cache_bytes / page_size as u64)
                .unwrap_or(usize::MAX),
            read_ahead_pages: config.read_ahead_bytes / page_size as u64,
        };
        Ok(HddSimIo {
            config,
            page_size,
            capacity,
            geo,
            inner: Mutex::new(HddInner::default()),
        })
    }

    /// Number of cylinders of the modelled disk.
    pub fn cylinders(&self) -> u64 {
        self.geo.stroke + 1
    }

    /// Seek time over `distance` cylinders, in milliseconds (the model's seek curve).
    #[cfg(test)]
    pub fn seek_ms(&self, distance: u64) -> f64 {
        self.geo.seek_ns(distance) / 1e6
    }

    /// Simulated nanoseconds since creation or the last [`DeviceExt::reset_stats`].
    pub fn sim_time_ns(&self) -> u64 {
        let st = self.lock();
        (st.clock_ns - st.base_ns).max(0.0).round() as u64
    }

    /// Pages in the write-back cache that have not reached the medium.
    #[cfg(test)]
    pub fn cached_pages(&self) -> usize {
        self.lock().dirty.len()
    }

    /// Media accesses (contiguous runs) so far: `(reads, writes)`.
    #[cfg(test)]
    pub fn media_accesses(&self) -> (u64, u64) {
        let st = self.lock();
        (st.media_reads, st.media_writes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HddInner> {
        // A poisoned lock only means another thread panicked; the state is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One media access of `n` pages from `first`: command time, seek,
    /// rotational wait, transfer. Moves the head and the clock.
    fn media_access(&self, st: &mut HddInner, first: PageId, n: u64, write: bool) {
        let g = &self.geo;
        let ps = self.page_size as u64;
        let start = first.saturating_mul(ps);
        let bytes = n.saturating_mul(ps);
        st.clock_ns += if write {
            g.write_overhead_ns
        } else {
            g.read_overhead_ns
        };
        let from = st.head_byte / g.cylinder_bytes;
        let to = start / g.cylinder_bytes;
        st.clock_ns += g.seek_ns(from.abs_diff(to));
        // Rotational wait until the first byte passes under the head.
        let angle = (st.clock_ns / g.rev_ns).fract();
        let target = (start % g.track_bytes) as f64 / g.track_bytes as f64;
        let wait = (target - angle).rem_euclid(1.0);
        // The head is exactly on a sequential continuation: no wait (not a full turn).
        let wait = if wait > 1.0 - 1e-9 { 0.0 } else { wait };
        st.clock_ns += wait * g.rev_ns;
        st.clock_ns += bytes as f64 * g.media_ns_per_byte;
        st.head_byte = start.saturating_add(bytes);
        if write {
            st.media_writes += 1;
        } else {
            st.media_reads += 1;
        }
    }

    /// Time of a request served by the cache at `ns_per_byte`.
    fn cache_hit(&self, st: &mut HddInner, ns_per_byte: f64) {
        st.clock_ns += self.geo.cache_overhead_ns + self.page_size as f64 * ns_per_byte;
    }

    /// Orders unique pages for one sweep of the elevator starting at the head (C-SCAN).
    fn cscan(&self, st: &HddInner, pages: &[PageId]) -> Vec<PageId> {
        let mut sorted: Vec<PageId> = pages.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let head_page = st.head_byte / self.page_size as u64;
        let split = sorted.partition_point(|&p| p < head_page);
        sorted.rotate_left(split);
        sorted
    }

    /// Destages the next cached run in C-SCAN order from the head.
    fn destage_one(&self, st: &mut HddInner) {
        let head_page = st.head_byte / self.page_size as u64;
        let first = st
            .dirty
            .range(head_page..)
            .next()
            .or_else(|| st.dirty.iter().next())
            .copied();
        let Some(first) = first else { return };
        let mut n = 0u64;
        while st.dirty.remove(&(first + n)) {
            n += 1;
        }
        self.media_access(st, first, n, true);
        // What was read ahead is unaffected (contents live in `pages`), but the head moved.
        st.read_ahead = None;
    }

    fn destage_all(&self, st: &mut HddInner) {
        while !st.dirty.is_empty() {
            self.destage_one(st);
        }
    }
}

impl PageDevice for HddSimIo {
    fn geometry(&self) -> DeviceGeometry {
        DeviceGeometry::new(self.page_size, self.capacity)
    }

    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        let mut st = self.lock();
        for (&p, out) in pages.iter().zip(buf.chunks_exact_mut(self.page_size)) {
            match st.pages.get(&p) {
                Some(data) => out.copy_from_slice(data),
                None => out.fill(0),
            }
        }
        // Timing: one sweep over the unique pages.
        let order = self.cscan(&st, pages);
        let mut i = 0;
        while let Some(&p) = order.get(i) {
            if st.dirty.contains(&p) {
                self.cache_hit(&mut st, self.geo.interface_ns_per_byte);
                i += 1;
            } else if st.read_ahead.is_some_and(|(a, b)| a <= p && p < b) {
                let per_byte = self
                    .geo
                    .media_ns_per_byte
                    .max(self.geo.interface_ns_per_byte);
                self.cache_hit(&mut st, per_byte);
                let next = p + 1;
                st.read_ahead = Some((next, next.saturating_add(self.geo.read_ahead_pages)));
                st.head_byte = next.saturating_mul(self.page_size as u64);
                i += 1;
            } else {
                // A run of contiguous pages that are neither cached nor read ahead.
                let mut n = 1u64;
                while order.get(i + n as usize) == Some(&(p + n)) && !st.dirty.contains(&(p + n)) {
                    n += 1;
                }
                self.media_access(&mut st, p, n, false);
                let next = p + n;
                st.read_ahead = (self.geo.read_ahead_pages > 0)
                    .then(|| (next, next.saturating_add(self.geo.read_ahead_pages)));
                i += n as usize;
            }
        }
        Ok(())
    }

    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        let mut st = self.lock();
        for (&p, chunk) in pages.iter().zip(data.chunks_exact(self.page_size)) {
            st.pages.insert(p, chunk.into());
        }
        if self.geo.cache_pages == 0 {
            // Write through, one sweep.
            let order = self.cscan(&st, pages);
            let mut i = 0;
            while let Some(&p) = order.get(i) {
                let mut n = 1u64;
                while order.get(i + n as usize) == Some(&(p + n)) {
                    n += 1;
                }
                self.media_access(&mut st, p, n, true);
                i += n as usize;
            }
            st.read_ahead = None;
        } else {
            for &p in pages {
                if !st.dirty.contains(&p) {
                    while st.dirty.len() >= self.geo.cache_pages {
                        self.destage_one(&mut st);
                    }
                    st.dirty.insert(p);
                }
                self.cache_hit(&mut st, self.geo.interface_ns_per_byte);
            }
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let mut st = self.lock();
        self.destage_all(&mut st);
        Ok(())
    }

    fn trim(&self, pages: &[PageId]) -> Result<()> {
        let mut st = self.lock();
        for p in pages {
            st.pages.remove(p);
            st.dirty.remove(p);
        }
        Ok(())
    }

    fn describe(&self) -> String {
        let c = &self.config;
        format!(
            "hddsim: {} rpm, {} bytes, {} cylinders x {} heads, seek {}/{}/{} ms, media {} MB/s, \
             overhead read {} ms write {} ms, write cache {} bytes, read-ahead {} bytes, page_size={}",
            c.rpm,
            c.capacity_bytes,
            self.cylinders(),
            c.heads,
            c.track_to_track_ms,
            c.average_seek_ms,
            c.full_stroke_ms,
            c.media_rate_mb_s,
            c.read_overhead_ms,
            c.write_overhead_ms,
            c.write_cache_bytes,
            c.read_ahead_bytes,
            self.page_size
        )
    }
}

impl DeviceExt for HddSimIo {
    /// No I/O counters (see [`Counted`]); as simulator counters,
    /// `sim_time_ns` the simulated time (the other fields are 0).
    fn stats(&self) -> DeviceStats {
        DeviceStats {
            sim: Some(SimCounters {
                sim_time_ns: self.sim_time_ns(),
                ..SimCounters::default()
            }),
            ..DeviceStats::default()
        }
    }

    fn sim_clock_ns(&self) -> Option<u64> {
        Some(self.lock().clock_ns.max(0.0).round() as u64)
    }

    /// Resets the reported simulated time (not the contents, the cache or
    /// the head position).
    fn reset_stats(&self) {
        let mut st = self.lock();
        st.base_ns = st.clock_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::tests::DeviceOp as Op;
    use crate::storage::PageDevice;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const KIB4: usize = 4096;

    /// MiB/s (2^20 bytes, as Iometer reports) of `bytes` moved in `ns` simulated nanoseconds.
    fn mib_s(bytes: u64, ns: u64) -> f64 {
        bytes as f64 / (1 << 20) as f64 / (ns as f64 / 1e9)
    }

    fn random_pages(n: usize, capacity: u64, seed: u64) -> Vec<PageId> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| rng.gen_range(0..capacity)).collect()
    }

    /// The MiB/s of `n` random 4 KiB writes (pages drawn with `seed`) and a
    /// sync on a fresh 7200 rpm disk.
    fn random_write_mib_s(n: usize, seed: u64) -> f64 {
        let d = HddSim::new(HddSimConfig::preset("7200rpm").unwrap(), KIB4).unwrap();
        let buf = vec![0u8; KIB4];
        for p in random_pages(n, d.capacity(), seed) {
            d.write(p, &buf).unwrap();
        }
        d.sync().unwrap();
        mib_s((n * KIB4) as u64, d.sim_time_ns())
    }

    #[test]
    fn preset_matches_the_measured_rates() {
        let ops = 2000;
        let d = HddSim::new(HddSimConfig::preset("7200rpm").unwrap(), KIB4).unwrap();
        let mut buf = vec![0u8; KIB4];
        for p in random_pages(ops, d.capacity(), 1) {
            d.read(p, &mut buf).unwrap();
        }
        let read = mib_s((ops * KIB4) as u64, d.sim_time_ns());
        assert!(
            (read / 0.185 - 1.0).abs() < 0.15,
            "random read {read} MiB/s"
        );

        let write = random_write_mib_s(ops, 2);
        assert!(
            (write / 0.441 - 1.0).abs() < 0.15,
            "random write {write} MiB/s"
        );

        // Sustained: four times the cache, every write destaged by the end.
        let sustained = random_write_mib_s(4 * 4096, 3);
        assert!(
            (sustained / 0.441 - 1.0).abs() < 0.15,
            "sustained random write {sustained} MiB/s"
        );
    }

    #[test]
    fn sequential_reads_are_far_faster_than_random_ones() {
        let d = HddSim::new(HddSimConfig::preset("7200rpm").unwrap(), KIB4).unwrap();
        let mut buf = vec![0u8; KIB4];
        let n = 2000u64;
        for p in 1000..1000 + n {
            d.read(p, &mut buf).unwrap();
        }
        let seq = mib_s(n * KIB4 as u64, d.sim_time_ns());
        assert!(seq > 50.0, "sequential reads at {seq} MiB/s");
        assert!(seq > 100.0 * 0.185);
        // One big batch is a single media run.
        d.reset_stats();
        let pages: Vec<PageId> = (50_000..50_256).collect();
        let mut big = vec![0u8; pages.len() * KIB4];
        d.read_batch(&pages, &mut big).unwrap();
        let (reads, _) = d.media_accesses();
        let batch = mib_s(big.len() as u64, d.sim_time_ns());
        assert!(batch > 30.0, "batched sequential read at {batch} MiB/s");
        assert!(reads <= 2, "{reads} media reads");
    }

    #[test]
    fn sequential_writes_stream() {
        let d = HddSim::new(HddSimConfig::preset("7200rpm").unwrap(), KIB4).unwrap();
        let buf = vec![7u8; KIB4];
        let n = 3 * 4096u64;
        for p in 0..n {
            d.write(p, &buf).unwrap();
        }
        d.sync().unwrap();
        let rate = mib_s(n * KIB4 as u64, d.sim_time_ns());
        assert!(rate > 50.0, "sequential writes at {rate} MiB/s");
        assert_eq!(d.cached_pages(), 0);
    }

    #[test]
    fn write_through_is_as_slow_as_the_mechanics() {
        let mut c = HddSimConfig::preset("7200rpm-datasheet").unwrap();
        c.write_cache_bytes = 0;
        let d = HddSim::new(c, KIB4).unwrap();
        let buf = vec![1u8; KIB4];
        let ops = 500;
        for p in random_pages(ops, d.capacity(), 4) {
            d.write(p, &buf).unwrap();
        }
        let ms_per_op = d.sim_time_ns() as f64 / ops as f64 / 1e6;
        // Mean seek 8.26 ms + half a turn 4.17 ms + 0.1 ms command.
        assert!((ms_per_op - 12.55).abs() < 1.0, "{ms_per_op} ms per write");
        assert_eq!(d.media_accesses(), (0, ops as u64));
    }

    #[test]
    fn seek_curve() {
        let d = HddSim::new(HddSimConfig::default(), KIB4).unwrap();
        let stroke = d.cylinders() - 1;
        assert_eq!(d.cylinders(), 400_067);
        assert_eq!(d.seek_ms(0), 0.0);
        assert!((d.seek_ms(1) - 1.0).abs() < 1e-9);
        assert!((d.seek_ms(stroke / 3) - 8.5).abs() < 0.01);
        assert!((d.seek_ms(stroke) - 17.0).abs() < 1e-9);
        let mut last = 0.0;
        for k in 0..=200 {
            let s = d.seek_ms(stroke * k / 200);
            assert!(s >= last);
            last = s;
        }
        // Mean over random cylinder pairs, as used in the calibration.
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let n = 20_000;
        let mean: f64 = (0..n)
            .map(|_| {
                let (a, b) = (rng.gen_range(0..=stroke), rng.gen_range(0..=stroke));
                d.seek_ms(a.abs_diff(b))
            })
            .sum::<f64>()
            / n as f64;
        assert!((mean - 8.26).abs() < 0.15, "mean seek {mean} ms");
    }

    #[test]
    fn deterministic_and_counted() {
        let run = || {
            let d = HddSim::new(HddSimConfig::default(), KIB4).unwrap();
            let mut buf = vec![0u8; KIB4];
            for (i, p) in random_pages(300, d.capacity(), 5).into_iter().enumerate() {
                if i % 3 == 0 {
                    d.write(p, &buf).unwrap();
                } else {
                    d.read(p, &mut buf).unwrap();
                }
            }
            d.sync().unwrap();
            d.stats()
        };
        let (a, b) = (run(), run());
        let (sa, sb) = (a.sim.unwrap(), b.sim.unwrap());
        assert_eq!(sa.sim_time_ns, sb.sim_time_ns);
        assert!(sa.sim_time_ns > 0);
        assert_eq!(sa.nand_programs, 0);
        assert_eq!(
            (a.io.pages_written, a.io.pages_read, a.io.syncs),
            (100, 200, 1)
        );
    }

    #[test]
    fn reset_stats_keeps_contents() {
        let d = HddSim::new(HddSimConfig::default(), KIB4).unwrap();
        d.write(3, &[5u8; KIB4]).unwrap();
        d.reset_stats();
        assert_eq!(d.stats().sim.unwrap().sim_time_ns, 0);
        assert_eq!(d.stats().io.pages_written, 0);
        let mut buf = vec![0u8; KIB4];
        d.read(3, &mut buf).unwrap();
        assert_eq!(buf, vec![5u8; KIB4]);
        assert!(d.describe().starts_with("hddsim: 7200 rpm"));
    }

    #[test]
    fn config_errors() {
        assert!(HddSimConfig::preset("7200rpm").is_ok());
        let e = HddSimConfig::preset("floppy").unwrap_err().to_string();
        assert!(e.contains("7200rpm-datasheet"), "{e}");
        let mut c = HddSimConfig::default();
        let e = c.set("spindle", "1").unwrap_err().to_string();
        assert!(
            e.contains("valid keys") && e.contains("write_cache_bytes"),
            "{e}"
        );
        assert!(c.set("rpm", "fast").is_err());
        assert!(c.set("rpm", "inf").is_err());
        assert!(c.set("heads", "-2").is_err());
        c.set("write_cache_bytes", "8MiB").unwrap();
        assert_eq!(c.write_cache_bytes, 8 << 20);
        for (k, v) in [
            ("rpm", "0"),
            ("capacity_bytes", "0"),
            ("heads", "0"),
            ("media_rate_mb_s", "0"),
            ("interface_mb_s", "-1"),
            ("read_overhead_ms", "-0.5"),
            ("full_stroke_ms", "2"),
            ("track_to_track_ms", "9"),
            ("media_rate_mb_s", "0.01"),
        ] {
            let mut c = HddSimConfig::default();
            c.set(k, v).unwrap();
            assert!(c.validate().is_err(), "{k}={v} accepted");
            assert!(HddSim::new(c, KIB4).is_err());
        }
        let c = HddSimConfig {
            capacity_bytes: 1000,
            ..HddSimConfig::default()
        };
        assert!(HddSim::new(c, KIB4).is_err(), "smaller than a page");
        assert!(HddSim::new(HddSimConfig::default(), 1000).is_err());
        // Spec parameters.
        let c = HddSimConfig::from_params("preset=7200rpm&write_cache_bytes=0&rpm=5400").unwrap();
        assert_eq!((c.write_cache_bytes, c.rpm), (0, 5400.0));
        let c = HddSimConfig::from_params("rpm=5400&preset=7200rpm-datasheet").unwrap();
        assert_eq!((c.rpm, c.read_overhead_ms), (5400.0, 0.1));
        assert!(HddSimConfig::from_params("rpm").is_err());
        assert!(HddSimConfig::from_params("rpm=0").is_err());
        assert_eq!(
            HddSimConfig::from_params("").unwrap(),
            HddSimConfig::default()
        );
        // Serde round trip; unknown fields refused.
        let json = serde_json::to_string(&HddSimConfig::default()).unwrap();
        let back: HddSimConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, HddSimConfig::default());
        assert!(serde_json::from_str::<HddSimConfig>(r#"{"rpm": 1}"#).is_err());
    }

    #[test]
    fn bad_input_is_an_error() {
        let c = HddSimConfig {
            capacity_bytes: 16 * 512,
            ..HddSimConfig::default()
        };
        let d = HddSim::new(c, 512).unwrap();
        assert_eq!(d.capacity(), 16);
        let mut buf = vec![0u8; 512];
        assert!(matches!(
            d.read(16, &mut buf),
            Err(Error::PageOutOfRange { .. })
        ));
        assert!(matches!(
            d.write(0, &buf[..10]),
            Err(Error::BufferSize { .. })
        ));
        assert!(matches!(d.trim(&[16]), Err(Error::PageOutOfRange { .. })));
    }

    const CAP: u64 = 64;

    fn op_strategy() -> impl Strategy<Value = Op> {
        let pages = || proptest::collection::vec(0..CAP, 0..6);
        prop_oneof![
            4 => (pages(), any::<u8>()).prop_map(|(p, v)| Op::Write(p, v)),
            4 => pages().prop_map(Op::Read),
            1 => pages().prop_map(Op::Trim),
            1 => Just(Op::Sync),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        #[test]
        fn contents_match_an_oracle(
            ops in proptest::collection::vec(op_strategy(), 1..60),
            cache_pages in 0u64..6,
            read_ahead_pages in 0u64..4,
        ) {
            let ps = 512usize;
            let c = HddSimConfig {
                capacity_bytes: CAP * ps as u64,
                write_cache_bytes: cache_pages * ps as u64,
                read_ahead_bytes: read_ahead_pages * ps as u64,
                ..HddSimConfig::default()
            };
            let d = HddSim::new(c, ps).unwrap();
            let mut oracle: HashMap<PageId, Vec<u8>> = HashMap::new();
            let mut last_time = 0;
            for (i, op) in ops.iter().enumerate() {
                match op {
                    Op::Write(pages, v) => {
                        let mut data = Vec::new();
                        for (j, &p) in pages.iter().enumerate() {
                            let page: Vec<u8> = (0..ps).map(|k| v.wrapping_add((i + j + k) as u8)).collect();
                            data.extend_from_slice(&page);
                            oracle.insert(p, page);
                        }
                        d.write_batch(pages, &data).unwrap();
                        prop_assert!(d.cached_pages() <= cache_pages as usize);
                    }
                    Op::Read(pages) => {
                        let mut buf = vec![0xAAu8; pages.len() * ps];
                        d.read_batch(pages, &mut buf).unwrap();
                        for (&p, got) in pages.iter().zip(buf.chunks(ps)) {
                            let want = oracle.get(&p).cloned().unwrap_or_else(|| vec![0; ps]);
                            prop_assert_eq!(got, &want[..]);
                        }
                    }
                    Op::Trim(pages) => {
                        for p in pages {
                            oracle.remove(p);
                        }
                        d.trim(pages).unwrap();
                    }
                    Op::Sync => {
                        d.sync().unwrap();
                        prop_assert_eq!(d.cached_pages(), 0);
                    }
                }
                let t = d.sim_time_ns();
                prop_assert!(t >= last_time);
                last_time = t;
            }
        }
    }
}
