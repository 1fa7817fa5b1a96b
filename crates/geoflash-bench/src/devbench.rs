//! `devbench`: a fixed pattern of page reads and writes against any device,
//! to measure a real device or to compare it with the simulators.
//!
//! Page ids are drawn from a *region* of the device: the first
//! `min(capacity, region_bytes / page_size)` pages. Sequential patterns cycle
//! through the region; random ones draw ids uniformly from it (seeded, so a
//! run is repeatable). Read patterns first fill the region (not counted), so
//! that a file device reads real blocks and a simulator reads mapped pages.
use std::str::FromStr;
use std::time::Instant;

use geoflash::storage::trace::{replay_with_progress, ReplaySummary, Trace};
use geoflash::storage::{DeviceStats, PageDevice, PageId};
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

impl FromStr for Pattern {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "seq-read" => Pattern::SeqRead,
            "seq-write" => Pattern::SeqWrite,
            "random-read" => Pattern::RandomRead,
            "random-write" => Pattern::RandomWrite,
            "mixed" => Pattern::Mixed,
            _ => {
                return Err(Error::invalid(format!(
                    "unknown pattern {s:?}: use seq-read, seq-write, random-read, random-write or mixed"
                )))
            }
        })
    }
}

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
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut data = vec![0u8; config.batch * page_size];
    rng.fill(&mut data[..]);

    if config.pattern.reads() && config.prefill {
        fill_region(device, region_pages, &data[..page_size])?;
    }
    device.reset_stats();

    let mut ids: Vec<PageId> = Vec::with_capacity(config.batch);
    let mut next_seq: PageId = 0;
    let mut done = 0u64;
    let start = Instant::now();
    while done < config.count {
        let n = (config.count - done).min(config.batch as u64) as usize;
        ids.clear();
        for _ in 0..n {
            if config.pattern.sequential() {
                ids.push(next_seq);
                next_seq = (next_seq + 1) % region_pages;
            } else {
                ids.push(rng.gen_range(0..region_pages));
            }
        }
        let buf = &mut data[..n * page_size];
        let read = match config.pattern {
            Pattern::SeqRead | Pattern::RandomRead => true,
            Pattern::SeqWrite | Pattern::RandomWrite => false,
            Pattern::Mixed => rng.gen_bool(config.read_fraction),
        };
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

/// Writes every page of the region once, in large sequential batches, and syncs.
fn fill_region(device: &dyn PageDevice, region_pages: u64, page: &[u8]) -> Result<()> {
    const CHUNK: u64 = 256;
    let page_size = page.len();
    let chunk_data: Vec<u8> = page
        .iter()
        .copied()
        .cycle()
        .take(CHUNK as usize * page_size)
        .collect();
    let mut first = 0;
    while first < region_pages {
        let n = (region_pages - first).min(CHUNK);
        let ids: Vec<PageId> = (first..first + n).collect();
        device.write_batch(&ids, &chunk_data[..n as usize * page_size])?;
        first += n;
    }
    device.sync()
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
    use geoflash::storage::mem::MemDevice;

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

    #[test]
    fn bad_parameters() {
        let dev = MemDevice::new(4096, 10).unwrap();
        let bad = [
            DevbenchConfig {
                batch: 0,
                ..DevbenchConfig::default()
            },
            DevbenchConfig {
                count: 0,
                ..DevbenchConfig::default()
            },
            DevbenchConfig {
                read_fraction: 2.0,
                ..DevbenchConfig::default()
            },
            DevbenchConfig {
                region_bytes: 100,
                ..DevbenchConfig::default()
            },
        ];
        for cfg in bad {
            assert!(run(&dev, &cfg, &|_| {}).is_err());
        }
        assert!("zigzag".parse::<Pattern>().is_err());
    }
}
