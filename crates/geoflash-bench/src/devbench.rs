//! `devbench`: a fixed pattern of page reads and writes against any device,
//! to measure a real device or to compare it with the simulators.
//!
//! Page ids are drawn from a *region* of the device: the first
//! `min(capacity, region_bytes / page_size)` pages. Sequential patterns cycle
//! through the region; random ones draw ids uniformly from it (seeded, so a
//! run is repeatable). Read patterns first write the pages they will read
//! (not counted), so that a file device reads real blocks and a simulator
//! reads mapped pages: the whole region when it has at most `count` pages,
//! else only the pages the run's seeded sequence reads (drawn once ahead),
//! so that the prefill costs time and, on the simulators, which keep their
//! pages in memory, memory in proportion to `count`, not to the region.
//!
//! The buffer of a batch holds `min(batch, count)` pages; a batch the
//! machine cannot hold is bad input, not an allocation failure.
use std::collections::BTreeSet;
use std::time::Instant;

use geoflash::engine::device::{replay_with_progress, ReplaySummary, Trace};
use geoflash::engine::device::{DeviceStats, PageDevice, PageId};
use geoflash::engine::reserve;
use geoflash::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// The access pattern of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Sequential reads.
    SeqRead,
    /// Sequential writes.
    SeqWrite,
    /// Uniformly random reads.
    RandomRead,
    /// Uniformly random writes.
    RandomWrite,
    /// Uniformly random pages, each batch a read or a write (read with probability `read_fraction`).
    Mixed,
}

impl Pattern {
    /// True for patterns that read (and so need a filled region).
    pub fn reads(self) -> bool {
        matches!(
            self,
            Pattern::SeqRead | Pattern::RandomRead | Pattern::Mixed
        )
    }

    fn sequential(self) -> bool {
        matches!(self, Pattern::SeqRead | Pattern::SeqWrite)
    }
}

from_names!(Pattern, "pattern",
    "seq-read" => SeqRead, "seq-write" => SeqWrite, "random-read" => RandomRead,
    "random-write" => RandomWrite, "mixed" => Mixed);

/// Parameters of a run.
#[derive(Debug, Clone, Serialize)]
pub struct DevbenchConfig {
    /// Access pattern.
    pub pattern: Pattern,
    /// Number of page operations.
    pub count: u64,
    /// Pages per batch (1 = one page per call).
    pub batch: usize,
    /// Seed of the random page ids (and of the data written).
    pub seed: u64,
    /// Region of the device used, in bytes (capped by the device's capacity).
    pub region_bytes: u64,
    /// Share of batches that read in the `mixed` pattern.
    pub read_fraction: f64,
    /// Fill the region before a read pattern (not counted).
    pub prefill: bool,
}

impl Default for DevbenchConfig {
    fn default() -> Self {
        DevbenchConfig {
            pattern: Pattern::RandomRead,
            count: 10_000,
            batch: 1,
            seed: 42,
            region_bytes: 256 << 20,
            read_fraction: 0.5,
            prefill: true,
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct DevbenchReport {
    /// The device, as it describes itself.
    pub device: String,
    /// The run's parameters.
    pub config: DevbenchConfig,
    /// Page size in bytes.
    pub page_size: usize,
    /// Pages in the region used.
    pub region_pages: u64,
    /// Wall-clock time of the measured part, in nanoseconds.
    pub wall_ns: u64,
    /// Page operations per wall-clock second.
    pub ops_per_sec: f64,
    /// Megabytes (10^6 bytes) per wall-clock second.
    pub mb_per_sec: f64,
    /// Page operations per simulated second (simulated devices only).
    pub sim_ops_per_sec: Option<f64>,
    /// The device's counters for the measured part.
    pub stats: DeviceStats,
}

/// Runs `config` on `device`. `progress` is called with the number of page
/// operations done so far (for a progress bar).
pub fn run(
    device: &dyn PageDevice,
    config: &DevbenchConfig,
    progress: &dyn Fn(u64),
) -> Result<DevbenchReport> {
    if config.batch == 0 {
        return Err(Error::invalid("batch must be at least 1"));
    }
    if config.count == 0 {
        return Err(Error::invalid("count must be at least 1"));
    }
    if !(0.0..=1.0).contains(&config.read_fraction) {
        return Err(Error::invalid(format!(
            "read fraction {} is not in [0, 1]",
            config.read_fraction
        )));
    }
    let page_size = device.page_size();
    let region_pages = (config.region_bytes / page_size as u64).min(device.capacity());
    if region_pages == 0 {
        return Err(Error::invalid(format!(
            "region of {} bytes holds no page of {page_size} bytes",
            config.region_bytes
        )));
    }
    // No batch is larger than the run.
    let batch = usize::try_from(config.count).map_or(config.batch, |c| c.min(config.batch));
    let buf_bytes = batch.checked_mul(page_size).ok_or_else(|| {
        Error::invalid(format!(
            "batch of {batch} pages of {page_size} bytes is too large"
        ))
    })?;
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut data = reserve::filled(0u8, buf_bytes, "batch buffer (bytes)")?;
    rng.fill(&mut data[..]);
    let mut draws = Draws {
        rng,
        next_seq: 0,
        region_pages,
        pattern: config.pattern,
        read_fraction: config.read_fraction,
    };
    let mut ids: Vec<PageId> = reserve::vec_for(batch, "batch")?;

    if config.pattern.reads() && config.prefill {
        let page = data.get(..page_size).unwrap_or_default();
        if region_pages <= config.count {
            fill_region(device, region_pages, page)?;
        } else {
            fill_pages(
                device,
                &read_pages(draws.clone(), config.count, batch),
                page,
            )?;
        }
    }
    device.reset_stats();

    let mut done = 0u64;
    let start = Instant::now();
    while done < config.count {
        let n = (config.count - done).min(batch as u64) as usize;
        let read = draws.next(n, &mut ids);
        let buf = &mut data[..n * page_size];
        if read {
            device.read_batch(&ids, buf)?;
        } else {
            device.write_batch(&ids, buf)?;
        }
        done += n as u64;
        progress(done);
    }
    if !config.pattern.reads() || config.pattern == Pattern::Mixed {
        device.sync()?;
    }
    let wall_ns = start.elapsed().as_nanos().max(1) as u64;
    let stats = device.stats();
    let secs = wall_ns as f64 / 1e9;
    let sim_ops_per_sec = stats
        .sim
        .filter(|s| s.sim_time_ns > 0)
        .map(|s| config.count as f64 / (s.sim_time_ns as f64 / 1e9));
    Ok(DevbenchReport {
        device: device.describe(),
        config: config.clone(),
        page_size,
        region_pages,
        wall_ns,
        ops_per_sec: config.count as f64 / secs,
        mb_per_sec: (config.count * page_size as u64) as f64 / 1e6 / secs,
        sim_ops_per_sec,
        stats,
    })
}

/// The page ids of a run, batch by batch, and whether each batch reads:
/// one seeded sequence, which the prefill can draw ahead from a clone.
#[derive(Clone)]
struct Draws {
    rng: ChaCha8Rng,
    next_seq: PageId,
    region_pages: u64,
    pattern: Pattern,
    read_fraction: f64,
}

impl Draws {
    /// Draws the next batch of `n` page ids into `ids`; true when it reads.
    fn next(&mut self, n: usize, ids: &mut Vec<PageId>) -> bool {
        ids.clear();
        for _ in 0..n {
            if self.pattern.sequential() {
                ids.push(self.next_seq);
                self.next_seq = (self.next_seq + 1) % self.region_pages;
            } else {
                ids.push(self.rng.gen_range(0..self.region_pages));
            }
        }
        match self.pattern {
            Pattern::SeqRead | Pattern::RandomRead => true,
            Pattern::SeqWrite | Pattern::RandomWrite => false,
            Pattern::Mixed => self.rng.gen_bool(self.read_fraction),
        }
    }
}

/// The distinct pages the read batches of a run of `count` operations in
/// batches of `batch` will read, ascending.
fn read_pages(mut draws: Draws, count: u64, batch: usize) -> Vec<PageId> {
    let mut pages = BTreeSet::new();
    let mut ids = Vec::new();
    let mut done = 0u64;
    while done < count {
        let n = (count - done).min(batch as u64) as usize;
        if draws.next(n, &mut ids) {
            pages.extend(ids.iter().copied());
        }
        done += n as u64;
    }
    pages.into_iter().collect()
}

/// Pages written per prefill batch.
const FILL_CHUNK: usize = 256;

/// Writes every page of the region once, in large sequential batches, and syncs.
fn fill_region(device: &dyn PageDevice, region_pages: u64, page: &[u8]) -> Result<()> {
    let chunk_data = repeated(page, FILL_CHUNK);
    let mut first = 0;
    while first < region_pages {
        let n = (region_pages - first).min(FILL_CHUNK as u64);
        let ids: Vec<PageId> = (first..first + n).collect();
        device.write_batch(&ids, &chunk_data[..n as usize * page.len()])?;
        first += n;
    }
    device.sync()
}

/// Writes each of `pages` once, in batches of ascending ids, and syncs.
fn fill_pages(device: &dyn PageDevice, pages: &[PageId], page: &[u8]) -> Result<()> {
    let chunk_data = repeated(page, FILL_CHUNK);
    for ids in pages.chunks(FILL_CHUNK) {
        device.write_batch(ids, &chunk_data[..ids.len() * page.len()])?;
    }
    device.sync()
}

/// `n` copies of `page`, one after the other.
fn repeated(page: &[u8], n: usize) -> Vec<u8> {
    page.iter().copied().cycle().take(n * page.len()).collect()
}

/// What replaying a trace measured.
#[derive(Debug, Clone, Serialize)]
pub struct TraceReplayReport {
    /// The device, as it describes itself.
    pub device: String,
    /// The trace file replayed.
    pub trace: String,
    /// Page size in bytes (the trace's).
    pub page_size: usize,
    /// What was submitted: records, batches, syncs, trims, pages.
    pub replayed: ReplaySummary,
    /// Wall-clock time of the replay, in nanoseconds.
    pub wall_ns: u64,
    /// The device's counters for the replay (reset before it starts).
    pub stats: DeviceStats,
}

/// Replays `trace` (read from `name`) on `device`, call by call with its
/// batch boundaries, syncs and trims; the device's counters are reset first,
/// so on a fresh device of the recorded model they equal the recorded run's.
pub fn replay_trace(
    device: &dyn PageDevice,
    trace: &Trace,
    name: &str,
    progress: &dyn Fn(u64),
) -> Result<TraceReplayReport> {
    device.reset_stats();
    let start = Instant::now();
    let replayed = replay_with_progress(trace, device, progress)?;
    let wall_ns = start.elapsed().as_nanos() as u64;
    Ok(TraceReplayReport {
        device: device.describe(),
        trace: name.to_string(),
        page_size: trace.page_size,
        replayed,
        wall_ns,
        stats: device.stats(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use geoflash::engine::device::{DeviceExt, DeviceGeometry, MemDevice};

    #[test]
    fn counts_what_it_does() {
        let dev = MemDevice::new(4096, 1000).unwrap();
        for (pattern, batch) in [
            (Pattern::SeqWrite, 8),
            (Pattern::RandomRead, 1),
            (Pattern::Mixed, 4),
        ] {
            let cfg = DevbenchConfig {
                pattern,
                batch,
                count: 100,
                ..DevbenchConfig::default()
            };
            let r = run(&dev, &cfg, &|_| {}).unwrap();
            let io = r.stats.io;
            assert_eq!(io.pages_read + io.pages_written, 100, "{pattern:?}");
            assert_eq!(r.region_pages, 1000);
            if pattern == Pattern::SeqWrite {
                assert_eq!(io.write_batches, 100 / 8 + 1);
                assert_eq!(io.random_writes, 1);
            }
        }
    }

    /// A sparse device in memory that refuses to hold more than `budget`
    /// pages written: stands for a simulator whose memory runs out.
    struct Budgeted {
        inner: MemDevice,
        written: std::sync::atomic::AtomicU64,
        budget: u64,
    }

    impl PageDevice for Budgeted {
        fn geometry(&self) -> DeviceGeometry {
            self.inner.geometry()
        }
        fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
            self.inner.read_batch(pages, buf)
        }
        fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
            use std::sync::atomic::Ordering;
            let n = pages.len() as u64;
            if self.written.fetch_add(n, Ordering::Relaxed) + n > self.budget {
                return Err(Error::invalid("out of memory (budget of pages written)"));
            }
            self.inner.write_batch(pages, data)
        }
        fn sync(&self) -> Result<()> {
            self.inner.sync()
        }
        fn trim(&self, pages: &[PageId]) -> Result<()> {
            self.inner.trim(pages)
        }
        fn describe(&self) -> String {
            self.inner.describe()
        }
    }

    impl DeviceExt for Budgeted {
        fn stats(&self) -> DeviceStats {
            self.inner.stats()
        }
        fn reset_stats(&self) {
            self.inner.reset_stats()
        }
    }

    /// Issue 17, item 2: a region far larger than the run (a terabyte on a
    /// simulator that keeps its pages in memory) prefills only the pages the
    /// run reads, and every one of them is read back as written.
    #[test]
    fn a_huge_region_prefills_only_the_pages_the_run_reads() {
        for (pattern, batch) in [
            (Pattern::RandomRead, 1),
            (Pattern::SeqRead, 7),
            (Pattern::Mixed, 3),
        ] {
            let dev = Budgeted {
                inner: MemDevice::new(4096, 1 << 40).unwrap(),
                written: 0.into(),
                budget: 1000,
            };
            let cfg = DevbenchConfig {
                pattern,
                batch,
                count: 500,
                region_bytes: 1 << 40,
                ..DevbenchConfig::default()
            };
            let r = run(&dev, &cfg, &|_| {}).unwrap();
            assert_eq!(r.region_pages, 1 << 28);
            let io = r.stats.io;
            assert_eq!(io.pages_read + io.pages_written, 500, "{pattern:?}");
            // Every page the run read was prefilled (nothing reads as zeros).
            let mut draws = Draws {
                rng: ChaCha8Rng::seed_from_u64(0),
                next_seq: 0,
                region_pages: r.region_pages,
                pattern,
                read_fraction: 0.5,
            };
            draws.rng = {
                let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
                let mut data = vec![0u8; batch * 4096];
                rng.fill(&mut data[..]);
                rng
            };
            for p in read_pages(draws, cfg.count, batch) {
                let mut buf = vec![0u8; 4096];
                dev.inner.read(p, &mut buf).unwrap();
                assert!(buf.iter().any(|&b| b != 0), "page {p} not prefilled");
            }
        }
    }

    /// A batch larger than the machine can hold is bad input, and a batch
    /// larger than the run holds only the run.
    #[test]
    fn huge_batches_are_bad_input_or_bounded_by_the_run() {
        let dev = MemDevice::new(4096, 1000).unwrap();
        let cfg = DevbenchConfig {
            batch: usize::MAX,
            count: u64::MAX,
            ..DevbenchConfig::default()
        };
        let err = run(&dev, &cfg, &|_| {}).unwrap_err();
        assert!(err.is_user_error(), "{err}");
        let cfg = DevbenchConfig {
            pattern: Pattern::RandomWrite,
            batch: usize::MAX,
            count: 10,
            ..DevbenchConfig::default()
        };
        let r = run(&dev, &cfg, &|_| {}).unwrap();
        assert_eq!(r.stats.io.pages_written, 10);
    }

    #[test]
    fn bad_parameters() {
        let dev = MemDevice::new(4096, 10).unwrap();
        let bad: [fn(&mut DevbenchConfig); 4] = [
            |c| c.batch = 0,
            |c| c.count = 0,
            |c| c.read_fraction = 2.0,
            |c| c.region_bytes = 100,
        ];
        for (i, spoil) in bad.into_iter().enumerate() {
            let mut cfg = DevbenchConfig::default();
            spoil(&mut cfg);
            assert!(run(&dev, &cfg, &|_| {}).is_err(), "bad configuration {i}");
        }
        assert!("zigzag".parse::<Pattern>().is_err());
    }
}
