//! Device counters: host-side I/O counts kept by [`Counted`](super::Counted)
//! around every device, and the NAND counters that only the flash simulator
//! fills.
use serde::{Deserialize, Serialize};

use super::PageId;

/// Host-side I/O counters, kept by [`Counted`](super::Counted) for the device it wraps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoCounters {
    /// Pages read.
    pub pages_read: u64,
    /// Pages written.
    pub pages_written: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// `read_batch` calls (a single `read` counts as a batch of one).
    pub read_batches: u64,
    /// `write_batch` calls.
    pub write_batches: u64,
    /// Reads of the page right after the previously read page.
    pub sequential_reads: u64,
    /// Other reads.
    pub random_reads: u64,
    /// Writes of the page right after the previously written page.
    pub sequential_writes: u64,
    /// Other writes.
    pub random_writes: u64,
    /// `sync` calls.
    pub syncs: u64,
    /// Pages trimmed.
    pub pages_trimmed: u64,
    /// Wall-clock nanoseconds spent inside read calls.
    pub read_time_ns: u64,
    /// Wall-clock nanoseconds spent inside write calls.
    pub write_time_ns: u64,
    /// Wall-clock nanoseconds spent inside sync calls.
    pub sync_time_ns: u64,
}

impl IoCounters {
    /// Adds `b`'s counts to these (saturating; every field, by destructuring).
    pub fn add(&mut self, b: &IoCounters) {
        add_counters!(
            self,
            IoCounters {
                pages_read,
                pages_written,
                bytes_read,
                bytes_written,
                read_batches,
                write_batches,
                sequential_reads,
                random_reads,
                sequential_writes,
                random_writes,
                syncs,
                pages_trimmed,
                read_time_ns,
                write_time_ns,
                sync_time_ns,
            } = *b
        );
    }
}

/// NAND-level counters of the flash simulator (and the simulated time of the
/// disk model). Zero on real devices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SimCounters {
    /// NAND page reads (host reads, read-modify-write reads and GC reads).
    pub nand_reads: u64,
    /// NAND page programs (host writes and GC copies).
    pub nand_programs: u64,
    /// Block erases.
    pub nand_erases: u64,
    /// Valid pages copied by garbage collection.
    pub gc_copies: u64,
    /// Garbage collection invocations.
    pub gc_runs: u64,
    /// Blocks retired because they reached the erase limit.
    pub retired_blocks: u64,
    /// NAND programs ÷ host flash-page writes (`device_write_amplification`).
    pub device_write_amplification: f64,
    /// Lowest erase count of any block.
    pub erase_count_min: u64,
    /// Mean erase count.
    pub erase_count_mean: f64,
    /// Highest erase count of any block.
    pub erase_count_max: u64,
    /// Blocks the erase counts are taken over (0 without erase counts):
    /// the weight of `erase_count_mean` when two devices' counters are
    /// combined (the tiers of a hybrid device). Not a results column.
    #[serde(skip)]
    pub erase_blocks: u64,
    /// Simulated elapsed time in nanoseconds.
    pub sim_time_ns: u64,
}

impl SimCounters {
    /// Host flash-page writes behind these counters: NAND programs ÷
    /// write amplification.
    fn host_flash_writes(&self) -> f64 {
        let wa = self.device_write_amplification;
        if wa > 0.0 && wa.is_finite() {
            self.nand_programs as f64 / wa
        } else {
            0.0
        }
    }

    /// Sums `b` into these counters, `b` being a later batch of the same
    /// device. Write amplification is recombined from the NAND programs
    /// and host writes of both; the device-state columns (retired blocks
    /// and the erase-count snapshot, which `reset_stats` does not reset)
    /// are `b`'s when `b` has them: summing them would count the same
    /// retired blocks once per batch. (Two devices side by side, the tiers
    /// of a hybrid device, add their retired blocks instead.)
    pub fn add(&mut self, b: &SimCounters) {
        let a = self;
        let SimCounters {
            nand_reads,
            nand_programs,
            nand_erases,
            gc_copies,
            gc_runs,
            retired_blocks,
            device_write_amplification: _,
            erase_count_min,
            erase_count_mean,
            erase_count_max,
            erase_blocks,
            sim_time_ns,
        } = *b;
        let host = a.host_flash_writes() + b.host_flash_writes();
        a.nand_reads = a.nand_reads.saturating_add(nand_reads);
        a.nand_programs = a.nand_programs.saturating_add(nand_programs);
        a.nand_erases = a.nand_erases.saturating_add(nand_erases);
        a.gc_copies = a.gc_copies.saturating_add(gc_copies);
        a.gc_runs = a.gc_runs.saturating_add(gc_runs);
        a.sim_time_ns = a.sim_time_ns.saturating_add(sim_time_ns);
        a.device_write_amplification = if host > 0.0 {
            a.nand_programs as f64 / host
        } else {
            0.0
        };
        if erase_count_max > 0 || erase_count_mean > 0.0 || retired_blocks > 0 {
            a.retired_blocks = retired_blocks;
            a.erase_count_min = erase_count_min;
            a.erase_count_mean = erase_count_mean;
            a.erase_count_max = erase_count_max;
            a.erase_blocks = erase_blocks;
        }
    }
}

/// Everything a device reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceStats {
    /// Host-side counters.
    pub io: IoCounters,
    /// Simulator counters (`None` on real devices).
    pub sim: Option<SimCounters>,
}

/// Keeps [`IoCounters`] for a device, classifying each access as sequential
/// (the page right after the previous one of the same direction) or random.
#[derive(Debug, Default)]
pub struct IoTracker {
    counters: IoCounters,
    last_read: Option<PageId>,
    last_write: Option<PageId>,
}

/// How many of `pages` follow the page before them in the same direction
/// (`last`, which ends at the batch's last page): the batch's sequential
/// accesses; the others are random.
fn sequential(last: &mut Option<PageId>, pages: &[PageId]) -> u64 {
    let mut seq = 0;
    for &p in pages {
        if last.map(|l| l.wrapping_add(1)) == Some(p) {
            seq += 1;
        }
        *last = Some(p);
    }
    seq
}

impl IoTracker {
    /// Records a batch of reads of `page_size`-byte pages that took `ns` nanoseconds.
    pub fn record_reads(&mut self, pages: &[PageId], page_size: usize, ns: u64) {
        let n = pages.len() as u64;
        let seq = sequential(&mut self.last_read, pages);
        let c = &mut self.counters;
        c.read_batches += 1;
        c.read_time_ns += ns;
        c.pages_read += n;
        c.bytes_read += n * page_size as u64;
        c.sequential_reads += seq;
        c.random_reads += n - seq;
    }

    /// Records a batch of writes of `page_size`-byte pages that took `ns` nanoseconds.
    pub fn record_writes(&mut self, pages: &[PageId], page_size: usize, ns: u64) {
        let n = pages.len() as u64;
        let seq = sequential(&mut self.last_write, pages);
        let c = &mut self.counters;
        c.write_batches += 1;
        c.write_time_ns += ns;
        c.pages_written += n;
        c.bytes_written += n * page_size as u64;
        c.sequential_writes += seq;
        c.random_writes += n - seq;
    }

    /// Records a sync that took `ns` nanoseconds.
    pub fn record_sync(&mut self, ns: u64) {
        self.counters.syncs += 1;
        self.counters.sync_time_ns += ns;
    }

    /// Records trimmed pages.
    pub fn record_trim(&mut self, pages: usize) {
        self.counters.pages_trimmed += pages as u64;
    }

    /// The counters so far.
    pub fn counters(&self) -> IoCounters {
        self.counters
    }

    /// Resets the counters and the sequential-access memory.
    pub fn reset(&mut self) {
        *self = IoTracker::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two batches measured on one worn device: each reports the device's
    /// 3 retired blocks (a state, not reset between batches); their sum
    /// still has 3, not 6.
    #[test]
    fn retired_blocks_are_a_snapshot_when_batches_add() {
        let batch = |programs| SimCounters {
            nand_programs: programs,
            nand_erases: 2,
            retired_blocks: 3,
            erase_count_min: 1,
            erase_count_mean: 2.0,
            erase_count_max: 4,
            ..SimCounters::default()
        };
        let mut sum = batch(10);
        sum.add(&batch(20));
        assert_eq!((sum.nand_programs, sum.nand_erases), (30, 4));
        assert_eq!(sum.retired_blocks, 3);
        assert_eq!(sum.erase_count_max, 4);
        // A later batch after more wear: its snapshot.
        let mut later = batch(5);
        later.retired_blocks = 5;
        sum.add(&later);
        assert_eq!(sum.retired_blocks, 5);
    }

    #[test]
    fn classifies_sequential_and_random() {
        let mut t = IoTracker::default();
        t.record_writes(&[3, 4, 5, 9], 4096, 10);
        t.record_reads(&[9, 10, 2], 4096, 5);
        let c = t.counters();
        assert_eq!((c.sequential_writes, c.random_writes), (2, 2));
        assert_eq!((c.sequential_reads, c.random_reads), (1, 2));
        assert_eq!(c.bytes_written, 4 * 4096);
        assert_eq!((c.read_batches, c.write_batches), (1, 1));
        t.reset();
        assert_eq!(t.counters(), IoCounters::default());
    }
}
