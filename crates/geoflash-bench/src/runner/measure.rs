//! The measurement shared by every step: [`measure`] runs a step's work
//! between resets and differences of the device, store and tree counters
//! and its clocks; [`Row`] is a finished result row.
use std::time::Instant;

use geoflash::metrics::Stats;
use geoflash::{Result, SpatialIndex};

use crate::target::{tier_note, Target};

/// Runs `work` on `target` as one measured step labelled `label`; returns
/// the step's metrics and, on a hybrid device, the note of its per-tier
/// counters during the step.
pub(super) fn measure(
    target: &mut Target,
    label: &str,
    work: impl FnOnce(&mut dyn SpatialIndex, &mut Stats) -> Result<()>,
) -> Result<(Stats, String)> {
    measure_target(target, label, |t, s| work(t.index_mut(), s))
}

/// [`measure`], the work given the target itself (a step that needs the
/// [`geoflash::Index`] behind it: its batches).
pub(super) fn measure_target(
    target: &mut Target,
    label: &str,
    work: impl FnOnce(&mut Target, &mut Stats) -> Result<()>,
) -> Result<(Stats, String)> {
    target.reset_device_stats();
    // The buffer peak is the step's own: restarted at what the buffers
    // hold now (the store counters are differenced, a peak cannot be).
    target.index_mut().restart_buffer_peak();
    let (before, tree_before) = (target.index().store_stats(), target.index().tree_counters());
    let times_before = target.phase_times();
    let clock = Clock::start();
    let mut s = Stats::new(label);
    work(target, &mut s)?;
    clock.stamp(&mut s);
    target.device_stats_into(&mut s);
    let (after, tree_after) = (target.index().store_stats(), target.index().tree_counters());
    s.absorb_store(&after.since(&before));
    s.absorb_tree(&tree_after.since(&tree_before));
    s.times.add(&target.phase_times().since(&times_before));
    s.set_index_bytes(target.index_bytes());
    Ok((s, tier_note(&**target.device())))
}

/// The wall-clock and process CPU time of a measured piece of work.
pub(super) struct Clock {
    /// The process's CPU time at the start (`None` where unavailable).
    cpu: Option<cpu_time::ProcessTime>,
    /// The wall-clock time at the start.
    wall: Instant,
}

impl Clock {
    /// Starts both clocks.
    pub(super) fn start() -> Clock {
        Clock {
            cpu: cpu_time::ProcessTime::try_now().ok(),
            wall: Instant::now(),
        }
    }

    /// Writes the time since the start into `s` (`wall_time_ns`, and
    /// `cpu_time_ns` where the CPU clock could be read).
    pub(super) fn stamp(&self, s: &mut Stats) {
        s.wall_time_ns = u64::try_from(self.wall.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if let Some(d) = self.cpu.as_ref().and_then(|c| c.try_elapsed().ok()) {
            s.cpu_time_ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        }
    }
}

/// A finished row: parameter, status, message, metrics.
pub(super) struct Row {
    pub(super) parameter: String,
    pub(super) status: &'static str,
    pub(super) message: String,
    pub(super) stats: Stats,
    /// The median latency of the row's operations, when timed one by one.
    pub(super) latency_median_ns: Option<u64>,
}

/// The row of a step that ran: status `ok`, the tier note as its message.
pub(super) fn ok_row(parameter: String, (stats, message): (Stats, String)) -> Row {
    Row {
        parameter,
        status: "ok",
        message,
        stats,
        latency_median_ns: None,
    }
}
