//! The `Stats` record: one per operation batch (a build, a run of queries, a
//! recovery …), a superset of FESTIval's Execution table (see
//! `docs/architecture.md`, "Metrics").
//!
//! The JSON form is flat: every field is a `snake_case` scalar whose name is a
//! column of the results table ([`Stats::COLUMNS`] lists them in order,
//! [`Stats::to_columns`] pairs them with their values). The only
//! non-scalar fields are [`Stats::node_reads_by_level`] and
//! [`Stats::node_writes_by_level`], JSON arrays indexed by node level (0 =
//! leaves), which a results table stores as JSON text.
//!
//! Names that are easy to confuse are distinct:
//! - `device_write_amplification` (from the flash simulator): NAND page
//!   programs ÷ host flash-page writes, inside the device;
//! - `build_rewrite_factor`: bytes written to the device during a build ÷ the
//!   final index bytes (`index_bytes`), what the index and store cost on top
//!   of writing the index once.
//!
//! Time is split three ways — wall-clock (`wall_*`), CPU (`cpu_*`) and
//! simulated device time (`sim_*`) — and into the phases of [`Phase`]. The
//! `read_time_ns` / `write_time_ns` / `sync_time_ns` columns come from the
//! device's own counters (time inside device calls); `wall_read_ns` and
//! friends are measured by the store or runner around its phases (including
//! decoding, waiting, retries). `sim_time_ns` is the simulator's total
//! simulated time for the batch; the `sim_*_ns` phase columns split it.
use serde::{Deserialize, Serialize};

use crate::storage::{DeviceStats, IoCounters, PageDevice, SimCounters};
use crate::{Error, Result};

/// A phase of work that time is attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Index algorithms: choose-subtree, split, reinsert, condense.
    Index,
    /// Filter step of queries (MBR tests while traversing).
    Filter,
    /// Refinement step of queries (exact geometry tests).
    Refinement,
    /// Reading node pages.
    Read,
    /// Writing node pages.
    Write,
    /// Flushing buffered nodes or modifications.
    Flush,
    /// Writing and syncing the modification log.
    Log,
    /// Log compaction.
    Compaction,
    /// Recovery after a crash or restart.
    Recovery,
}

impl Phase {
    /// Every phase, in column order.
    pub const ALL: [Phase; 9] = [
        Phase::Index,
        Phase::Filter,
        Phase::Refinement,
        Phase::Read,
        Phase::Write,
        Phase::Flush,
        Phase::Log,
        Phase::Compaction,
        Phase::Recovery,
    ];
}

/// Which clock a time was measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    /// Wall-clock time.
    Wall,
    /// CPU time of the process.
    Cpu,
    /// Simulated device time (flash or disk simulator).
    Sim,
}

macro_rules! phase_times {
    ($(#[$meta:meta])* $name:ident, $clock:literal,
     [$($phase:ident => $field:ident: $what:literal),* $(,)?]) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct $name {
            $(
                #[doc = concat!("Nanoseconds of ", $clock, " time ", $what, ".")]
                pub $field: u64,
            )*
        }

        impl $name {
            /// The field of `phase` (`None`: not measured on this clock).
            fn slot(&mut self, phase: Phase) -> Option<&mut u64> {
                #[allow(unreachable_patterns)]
                match phase {
                    $(Phase::$phase => Some(&mut self.$field),)*
                    _ => None,
                }
            }

            /// Nanoseconds of `phase` (0 when not measured on this clock).
            pub fn get(&self, phase: Phase) -> u64 {
                #[allow(unreachable_patterns)]
                match phase {
                    $(Phase::$phase => self.$field,)*
                    _ => 0,
                }
            }

            fn add(&mut self, other: &$name) {
                $(self.$field = self.$field.saturating_add(other.$field);)*
            }

            fn since(&self, before: &$name) -> $name {
                $name {
                    $($field: self.$field.saturating_sub(before.$field),)*
                }
            }
        }
    };
}

phase_times!(
    /// Wall-clock time by phase (flattened into [`Stats`] as `wall_*_ns`).
    WallTimes,
    "wall-clock",
    [
        Index => wall_index_ns: "in the index operations (insert, delete, update, bulk load)",
        Filter => wall_filter_ns: "in the filter step of queries",
        Refinement => wall_refinement_ns: "in the refinement step of queries",
        Read => wall_read_ns: "reading node pages (device read and decoding)",
        Write => wall_write_ns: "writing node pages (encoding and device write)",
        Flush => wall_flush_ns: "flushing buffers",
        Log => wall_log_ns: "writing and syncing the log (a commit that only appends to the in-memory log tail is index time)",
        Compaction => wall_compaction_ns: "compacting the log",
        Recovery => wall_recovery_ns: "in recovery (restart at open)",
    ]
);

phase_times!(
    /// CPU time by phase (flattened into [`Stats`] as `cpu_*_ns`), on the
    /// clock of the thread that did the work.
    CpuTimes,
    "thread CPU",
    [
        Index => cpu_index_ns: "in the index operations (insert, delete, update, bulk load)",
        Filter => cpu_filter_ns: "in the filter step of queries",
        Refinement => cpu_refinement_ns: "in the refinement step of queries",
        Read => cpu_read_ns: "reading node pages (device read and decoding)",
        Write => cpu_write_ns: "writing node pages (encoding and device write)",
        Flush => cpu_flush_ns: "flushing buffers",
        Log => cpu_log_ns: "writing and syncing the log (a commit that only appends to the in-memory log tail is index time)",
        Compaction => cpu_compaction_ns: "compacting the log",
        Recovery => cpu_recovery_ns: "in recovery (restart at open)",
    ]
);

phase_times!(
    /// Simulated device time by phase (flattened into [`Stats`] as
    /// `sim_*_ns`): the simulator's clock advance during the phase. There is
    /// no `sim_refinement_ns`: refinement reads the object heap, a file that
    /// never lives on a simulated device.
    SimTimes,
    "simulated device",
    [
        Index => sim_index_ns: "during the index operations (insert, delete, update, bulk load)",
        Filter => sim_filter_ns: "during the filter step of queries",
        Read => sim_read_ns: "reading node pages",
        Write => sim_write_ns: "writing node pages",
        Flush => sim_flush_ns: "flushing buffers",
        Log => sim_log_ns: "writing and syncing the log (a commit that only appends to the in-memory log tail is index time)",
        Compaction => sim_compaction_ns: "compacting the log",
        Recovery => sim_recovery_ns: "in recovery (restart at open)",
    ]
);

/// Time by phase on the three clocks, as a store or the index front end
/// accumulates it ([`Stopwatch`] measures one phase).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseTimes {
    /// Wall-clock time by phase.
    #[serde(flatten)]
    pub wall: WallTimes,
    /// CPU time by phase.
    #[serde(flatten)]
    pub cpu: CpuTimes,
    /// Simulated device time by phase.
    #[serde(flatten)]
    pub sim: SimTimes,
}

impl PhaseTimes {
    /// Adds `other` phase by phase.
    pub fn add(&mut self, other: &PhaseTimes) {
        self.wall.add(&other.wall);
        self.cpu.add(&other.cpu);
        self.sim.add(&other.sim);
    }

    /// `self` minus `before` (an earlier snapshot), phase by phase.
    pub fn since(&self, before: &PhaseTimes) -> PhaseTimes {
        PhaseTimes {
            wall: self.wall.since(&before.wall),
            cpu: self.cpu.since(&before.cpu),
            sim: self.sim.since(&before.sim),
        }
    }

    /// Adds `ns` nanoseconds measured on `clock` to `phase` (ignored for a
    /// phase the clock does not measure).
    pub fn add_ns(&mut self, clock: Clock, phase: Phase, ns: u64) {
        let slot = match clock {
            Clock::Wall => self.wall.slot(phase),
            Clock::Cpu => self.cpu.slot(phase),
            Clock::Sim => self.sim.slot(phase),
        };
        if let Some(slot) = slot {
            *slot = slot.saturating_add(ns);
        }
    }

    /// Runs `work` as `phase` on the three clocks (`device` provides the
    /// simulated one) and returns its result with the time it took.
    pub fn measure<T>(
        phase: Phase,
        device: &dyn PageDevice,
        work: impl FnOnce() -> T,
    ) -> (T, PhaseTimes) {
        let watch = Stopwatch::start(device.sim_clock_ns());
        let out = work();
        let mut t = PhaseTimes::default();
        watch.stop(phase, device.sim_clock_ns(), &mut t);
        (out, t)
    }

    /// Nanoseconds of `phase` on `clock`.
    pub fn get(&self, clock: Clock, phase: Phase) -> u64 {
        match clock {
            Clock::Wall => self.wall.get(phase),
            Clock::Cpu => self.cpu.get(phase),
            Clock::Sim => self.sim.get(phase),
        }
    }
}

/// CPU time of the calling thread so far, ns (`None` where the platform has
/// no thread CPU clock).
pub fn thread_cpu_ns() -> Option<u64> {
    cpu_time::ThreadTime::try_now()
        .ok()
        .map(|t| u64::try_from(t.as_duration().as_nanos()).unwrap_or(u64::MAX))
}

/// CPU time of the whole process so far, ns (`None` where the platform has
/// no process CPU clock).
pub fn process_cpu_ns() -> Option<u64> {
    cpu_time::ProcessTime::try_now()
        .ok()
        .map(|t| u64::try_from(t.as_duration().as_nanos()).unwrap_or(u64::MAX))
}

/// The wall and process CPU clocks of one batch (a build, a run of
/// queries): [`finish`](Self::finish) sets `wall_time_ns` and `cpu_time_ns`.
#[derive(Debug, Clone, Copy)]
pub struct BatchClock {
    wall: std::time::Instant,
    cpu: Option<u64>,
    /// Wall time spent in [`excluding`](Self::excluding) scopes.
    excluded_wall: std::time::Duration,
    /// Process CPU time spent in [`excluding`](Self::excluding) scopes, ns.
    excluded_cpu: u64,
}

impl BatchClock {
    /// Starts both clocks.
    pub fn start() -> BatchClock {
        BatchClock {
            wall: std::time::Instant::now(),
            cpu: process_cpu_ns(),
            excluded_wall: std::time::Duration::ZERO,
            excluded_cpu: 0,
        }
    }

    /// Runs `f` off the clocks: what it takes (printing the answers of a
    /// batch as they are found, say) is left out of what
    /// [`finish`](Self::finish) reports.
    pub fn excluding<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let (wall, cpu) = (std::time::Instant::now(), process_cpu_ns());
        let out = f();
        self.excluded_wall += wall.elapsed();
        if let (Some(a), Some(b)) = (cpu, process_cpu_ns()) {
            self.excluded_cpu += b.saturating_sub(a);
        }
        out
    }

    /// Wall-clock time since the start, the excluded scopes left out.
    pub fn elapsed(&self) -> std::time::Duration {
        self.wall.elapsed().saturating_sub(self.excluded_wall)
    }

    /// Sets `s.wall_time_ns` and `s.cpu_time_ns` to the time since the
    /// start, the [`excluding`](Self::excluding) scopes left out.
    pub fn finish(&self, s: &mut Stats) {
        s.wall_time_ns = u64::try_from(self.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if let (Some(a), Some(b)) = (self.cpu, process_cpu_ns()) {
            s.cpu_time_ns = b.saturating_sub(a).saturating_sub(self.excluded_cpu);
        }
    }
}

thread_local! {
    /// Whether a [`CpuClockOff`] scope is open on this thread.
    static CPU_CLOCK_OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A scope in which the [`Stopwatch`]es started on this thread read no CPU
/// clock (wall-clock and simulated time are still measured): the front end
/// opens it around an operation whose caller turned operation CPU time off
/// (`Index::set_operation_cpu_time`), so that the stores' phases inside
/// that operation (the node reads of a query, a flush an insertion causes)
/// skip the two system calls too. A cold query batch reads nodes in dozens
/// of device batches, and the thread-clock readings around them were a
/// sixth of its time. The previous setting comes back when the scope ends.
#[derive(Debug)]
#[must_use = "the scope ends when the value is dropped"]
pub(crate) struct CpuClockOff {
    before: bool,
    /// The setting is the thread's: the scope must end on its thread.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl CpuClockOff {
    /// Opens the scope on the calling thread.
    pub(crate) fn enter() -> CpuClockOff {
        CpuClockOff {
            before: CPU_CLOCK_OFF.with(|c| c.replace(true)),
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for CpuClockOff {
    fn drop(&mut self) {
        CPU_CLOCK_OFF.with(|c| c.set(self.before));
    }
}

/// The thread's CPU clock for a [`Stopwatch`]: `None` inside a
/// [`CpuClockOff`] scope.
pub(crate) fn stopwatch_cpu_ns() -> Option<u64> {
    if CPU_CLOCK_OFF.with(std::cell::Cell::get) {
        None
    } else {
        thread_cpu_ns()
    }
}

/// Measures one phase on the three clocks: wall, the thread's CPU and, when
/// given, a simulated device's clock (`crate::storage::PageDevice::sim_clock_ns`).
/// Start it at a layer boundary (an operation, a flush, a batch of page
/// reads), never per entry.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    wall: Option<std::time::Instant>,
    cpu: Option<u64>,
    sim: Option<u64>,
}

impl Stopwatch {
    /// Starts measuring; `sim` is the simulated clock now (`None` on a real
    /// device). Inside a `CpuClockOff` scope the CPU clock is not read.
    pub fn start(sim: Option<u64>) -> Stopwatch {
        Stopwatch {
            wall: Some(std::time::Instant::now()),
            cpu: stopwatch_cpu_ns(),
            sim,
        }
    }

    /// Starts measuring simulated time only, reading no clock: for
    /// operations inside a batch, whose wall-clock and CPU time are measured
    /// once around the whole batch (a wall-clock reading costs about 25 ns,
    /// a few per cent of an insertion).
    pub fn start_sim_only(sim: Option<u64>) -> Stopwatch {
        Stopwatch {
            wall: None,
            cpu: None,
            sim,
        }
    }

    /// Adds the time since [`start`](Self::start) to `phase` of `into`;
    /// `sim` is the simulated clock now.
    pub fn stop(self, phase: Phase, sim: Option<u64>, into: &mut PhaseTimes) {
        if let Some(w) = self.wall {
            let wall = u64::try_from(w.elapsed().as_nanos()).unwrap_or(u64::MAX);
            into.add_ns(Clock::Wall, phase, wall);
        }
        if let Some(a) = self.cpu {
            if let Some(b) = thread_cpu_ns() {
                into.add_ns(Clock::Cpu, phase, b.saturating_sub(a));
            }
        }
        if let (Some(a), Some(b)) = (self.sim, sim) {
            into.add_ns(Clock::Sim, phase, b.saturating_sub(a));
        }
    }
}

/// The metrics of one operation batch. See the module documentation for the
/// column conventions. Every counter is a delta over the batch except where a
/// field says it is a snapshot or a peak.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Name of the batch: the operation (`build`, `insert`, `range_query`,
    /// `knn`, `recover` …), possibly with a suffix chosen by the runner.
    pub label: String,
    /// User operations in the batch (inserts, deletes, queries …).
    pub operations: u64,

    /// Total wall-clock nanoseconds of the batch.
    pub wall_time_ns: u64,
    /// Total CPU nanoseconds of the batch.
    pub cpu_time_ns: u64,
    /// Wall-clock, CPU and simulated time by phase (the simulated total is
    /// `sim_time_ns`). Phases nest: index and filter include the reads,
    /// writes, flushes and log work they cause; a flush includes its writes.
    #[serde(flatten)]
    pub times: PhaseTimes,

    /// Node pages read from the device, by node level (index 0 = leaves).
    pub node_reads_by_level: Vec<u64>,
    /// Node pages written to the device, by node level (index 0 = leaves).
    pub node_writes_by_level: Vec<u64>,
    /// Node pages read from the device (all levels).
    pub node_reads: u64,
    /// Node pages written to the device (all levels).
    pub node_writes: u64,
    /// Nodes requested from the store (`NodeStore::get`).
    pub node_gets: u64,

    /// True when the device is simulated (the NAND columns are meaningful).
    pub device_simulated: bool,
    /// Host-side device counters: pages and bytes read and written, batches,
    /// sequential/random accesses, syncs, trims, time inside device calls.
    #[serde(flatten)]
    pub io: IoCounters,
    /// NAND counters of the flash simulator (zeros on real devices). The
    /// erase-count columns are snapshots at the end of the batch.
    #[serde(flatten)]
    pub sim: SimCounters,

    /// Bytes of the index at the end of the batch (pages in use × page size),
    /// the denominator of `build_rewrite_factor`; 0 when not measured.
    pub index_bytes: u64,
    /// Bytes written to the device during the batch ÷ `index_bytes` (0 when
    /// `index_bytes` is 0). Meaningful for builds.
    pub build_rewrite_factor: f64,

    /// Node requests answered from memory.
    pub buffer_hits: u64,
    /// Node requests that read the device.
    pub buffer_misses: u64,
    /// Flush events.
    pub flushes: u64,
    /// Nodes written by flushes.
    pub flushed_nodes: u64,
    /// Nodes created.
    pub nodes_created: u64,
    /// Nodes deleted.
    pub nodes_deleted: u64,
    /// Operations committed by the store.
    pub ops_committed: u64,

    /// Node splits.
    pub splits: u64,
    /// Entries reinserted (R*-tree forced reinsertion, condense-tree).
    pub reinsertions: u64,
    /// Node merges (underflow handling).
    pub merges: u64,
    /// Updates done in place, bottom-up (the record rewritten in its leaf,
    /// R-tree and R*-tree).
    pub updates_in_place: u64,

    /// Query candidates: objects whose MBR passed the filter step.
    pub query_candidates: u64,
    /// Query results: objects reported (after refinement when it runs).
    pub query_results: u64,

    /// Bytes appended to the modification log.
    pub log_bytes: u64,
    /// Records appended to the modification log.
    pub log_records: u64,
    /// Log pages written (appends and compactions; also counted in `pages_written`).
    #[serde(default)]
    pub log_pages_written: u64,
    /// Log syncs (also counted in `syncs`).
    #[serde(default)]
    pub log_syncs: u64,
    /// Log compactions.
    #[serde(default)]
    pub compactions: u64,
    /// Flushes forced by the log (compaction could not free enough).
    #[serde(default)]
    pub forced_flushes: u64,
    /// Full page images logged before in-place writes (torn-write protection).
    #[serde(default)]
    pub page_images: u64,
    /// Bytes of page images in the log.
    #[serde(default)]
    pub page_image_bytes: u64,
    /// eFIND temporal control (`tc_*`, `precached`).
    #[serde(flatten)]
    pub temporal_control: TemporalControlCounts,

    /// Peak bytes of buffer memory (shared accounting function), a peak, not a sum.
    pub peak_buffer_bytes: u64,
}

/// What eFIND's temporal control did: the choice of its flushing policy on
/// writes (the columns `tc_seq`, `tc_str`, `tc_both`, `tc_fallback`) and the
/// flushed pages it kept for reads (`precached`). Zero for other stores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemporalControlCounts {
    /// Writes: the sequential pages (Seq) chosen.
    #[serde(default, rename = "tc_seq")]
    pub seq: u64,
    /// Writes: the strided pages (Str) chosen.
    #[serde(default, rename = "tc_str")]
    pub stride: u64,
    /// Writes: Seq ∪ Str chosen.
    #[serde(default, rename = "tc_both")]
    pub both: u64,
    /// Writes: neither applied, the oldest pages chosen.
    #[serde(default, rename = "tc_fallback")]
    pub fallback: u64,
    /// Reads: flushed pages pre-cached into the read buffer (a read after
    /// the write avoided).
    #[serde(default)]
    pub precached: u64,
}

impl TemporalControlCounts {
    fn fields(&mut self) -> [&mut u64; 5] {
        [
            &mut self.seq,
            &mut self.stride,
            &mut self.both,
            &mut self.fallback,
            &mut self.precached,
        ]
    }

    /// Flushing choices made on writes (all but `precached`).
    pub fn write_choices(&self) -> u64 {
        self.seq + self.stride + self.both + self.fallback
    }

    /// Adds `other`'s counts (saturating).
    pub fn add(&mut self, other: &TemporalControlCounts) {
        let mut other = *other;
        for (a, b) in self.fields().into_iter().zip(other.fields()) {
            *a = a.saturating_add(*b);
        }
    }

    /// The counts since `before` (saturating at zero).
    pub fn since(&self, before: &TemporalControlCounts) -> TemporalControlCounts {
        let (mut now, mut before) = (*self, *before);
        for (a, b) in now.fields().into_iter().zip(before.fields()) {
            *a = a.saturating_sub(*b);
        }
        now
    }
}

/// Adds the counts per level of `from` to `into`, which grows to `from`'s length.
pub(crate) fn add_levels(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a = a.saturating_add(*b);
    }
}

impl Stats {
    /// Column names of the flat JSON form, in serialization order.
    pub const COLUMNS: &'static [&'static str] = &[
        "label",
        "operations",
        "wall_time_ns",
        "cpu_time_ns",
        "wall_index_ns",
        "wall_filter_ns",
        "wall_refinement_ns",
        "wall_read_ns",
        "wall_write_ns",
        "wall_flush_ns",
        "wall_log_ns",
        "wall_compaction_ns",
        "wall_recovery_ns",
        "cpu_index_ns",
        "cpu_filter_ns",
        "cpu_refinement_ns",
        "cpu_read_ns",
        "cpu_write_ns",
        "cpu_flush_ns",
        "cpu_log_ns",
        "cpu_compaction_ns",
        "cpu_recovery_ns",
        "sim_index_ns",
        "sim_filter_ns",
        "sim_read_ns",
        "sim_write_ns",
        "sim_flush_ns",
        "sim_log_ns",
        "sim_compaction_ns",
        "sim_recovery_ns",
        "node_reads_by_level",
        "node_writes_by_level",
        "node_reads",
        "node_writes",
        "node_gets",
        "device_simulated",
        "pages_read",
        "pages_written",
        "bytes_read",
        "bytes_written",
        "read_batches",
        "write_batches",
        "sequential_reads",
        "random_reads",
        "sequential_writes",
        "random_writes",
        "syncs",
        "pages_trimmed",
        "read_time_ns",
        "write_time_ns",
        "sync_time_ns",
        "nand_reads",
        "nand_programs",
        "nand_erases",
        "gc_copies",
        "gc_runs",
        "retired_blocks",
        "device_write_amplification",
        "erase_count_min",
        "erase_count_mean",
        "erase_count_max",
        "sim_time_ns",
        "index_bytes",
        "build_rewrite_factor",
        "buffer_hits",
        "buffer_misses",
        "flushes",
        "flushed_nodes",
        "nodes_created",
        "nodes_deleted",
        "ops_committed",
        "splits",
        "reinsertions",
        "merges",
        "updates_in_place",
        "query_candidates",
        "query_results",
        "log_bytes",
        "log_records",
        "log_pages_written",
        "log_syncs",
        "compactions",
        "forced_flushes",
        "page_images",
        "page_image_bytes",
        "tc_seq",
        "tc_str",
        "tc_both",
        "tc_fallback",
        "precached",
        "peak_buffer_bytes",
    ];

    /// An empty record named `label`.
    pub fn new(label: impl Into<String>) -> Stats {
        Stats {
            label: label.into(),
            ..Stats::default()
        }
    }

    /// A record holding a device's counters (host I/O and, for simulators, NAND).
    pub fn from_device(device: &DeviceStats) -> Stats {
        let mut s = Stats::default();
        s.set_device(device);
        s
    }

    /// Replaces the device columns with `device`'s counters.
    pub fn set_device(&mut self, device: &DeviceStats) {
        self.io = device.io;
        self.device_simulated = device.sim.is_some();
        self.sim = device.sim.unwrap_or_default();
    }

    /// Adds `ns` nanoseconds measured on `clock` to `phase` (ignored for a
    /// phase the clock does not measure: refinement on the simulated clock).
    pub fn add_time(&mut self, clock: Clock, phase: Phase, ns: u64) {
        self.times.add_ns(clock, phase, ns);
    }

    /// Nanoseconds attributed to `phase` on `clock`.
    pub fn time(&self, clock: Clock, phase: Phase) -> u64 {
        self.times.get(clock, phase)
    }

    /// Counts a node page read at `level`.
    pub fn record_node_read(&mut self, level: u16) {
        self.node_reads = self.node_reads.saturating_add(1);
        bump_level(&mut self.node_reads_by_level, level);
    }

    /// Counts a node page written at `level`.
    pub fn record_node_write(&mut self, level: u16) {
        self.node_writes = self.node_writes.saturating_add(1);
        bump_level(&mut self.node_writes_by_level, level);
    }

    /// Sets `index_bytes` and recomputes `build_rewrite_factor` = bytes
    /// written ÷ `index_bytes` (0 when `index_bytes` is 0).
    pub fn set_index_bytes(&mut self, index_bytes: u64) {
        self.index_bytes = index_bytes;
        self.build_rewrite_factor = if index_bytes > 0 {
            self.io.bytes_written as f64 / index_bytes as f64
        } else {
            0.0
        };
    }

    /// Buffer hit ratio, hits ÷ (hits + misses), 0 without requests.
    pub fn buffer_hit_ratio(&self) -> f64 {
        let total = self.buffer_hits.saturating_add(self.buffer_misses);
        if total == 0 {
            0.0
        } else {
            self.buffer_hits as f64 / total as f64
        }
    }

    /// Sums `other` (a later batch) into `self`: counters and times add,
    /// per-level counts add level by level, peaks take the maximum, the
    /// device write amplification is recombined from both batches' NAND
    /// programs and host writes, erase-count snapshots and `index_bytes` are
    /// the later batch's (when it has them) and `build_rewrite_factor` is
    /// recomputed. The label stays `self`'s unless it is empty.
    pub fn merge(&mut self, other: &Stats) {
        if self.label.is_empty() {
            self.label.clone_from(&other.label);
        }
        self.operations = self.operations.saturating_add(other.operations);
        self.wall_time_ns = self.wall_time_ns.saturating_add(other.wall_time_ns);
        self.cpu_time_ns = self.cpu_time_ns.saturating_add(other.cpu_time_ns);
        self.times.add(&other.times);
        add_levels(&mut self.node_reads_by_level, &other.node_reads_by_level);
        add_levels(&mut self.node_writes_by_level, &other.node_writes_by_level);
        self.node_reads = self.node_reads.saturating_add(other.node_reads);
        self.node_writes = self.node_writes.saturating_add(other.node_writes);
        self.node_gets = self.node_gets.saturating_add(other.node_gets);
        self.device_simulated |= other.device_simulated;
        self.io.add(&other.io);
        self.sim.add(&other.sim);
        let index_bytes = if other.index_bytes > 0 {
            other.index_bytes
        } else {
            self.index_bytes
        };
        self.set_index_bytes(index_bytes);
        for (a, b) in [
            (&mut self.buffer_hits, other.buffer_hits),
            (&mut self.buffer_misses, other.buffer_misses),
            (&mut self.flushes, other.flushes),
            (&mut self.flushed_nodes, other.flushed_nodes),
            (&mut self.nodes_created, other.nodes_created),
            (&mut self.nodes_deleted, other.nodes_deleted),
            (&mut self.ops_committed, other.ops_committed),
            (&mut self.splits, other.splits),
            (&mut self.reinsertions, other.reinsertions),
            (&mut self.merges, other.merges),
            (&mut self.updates_in_place, other.updates_in_place),
            (&mut self.query_candidates, other.query_candidates),
            (&mut self.query_results, other.query_results),
            (&mut self.log_bytes, other.log_bytes),
            (&mut self.log_records, other.log_records),
            (&mut self.log_pages_written, other.log_pages_written),
            (&mut self.log_syncs, other.log_syncs),
            (&mut self.compactions, other.compactions),
            (&mut self.forced_flushes, other.forced_flushes),
            (&mut self.page_images, other.page_images),
            (&mut self.page_image_bytes, other.page_image_bytes),
        ] {
            *a = a.saturating_add(b);
        }
        self.temporal_control.add(&other.temporal_control);
        self.peak_buffer_bytes = self.peak_buffer_bytes.max(other.peak_buffer_bytes);
    }

    /// The record as one line of JSON (the flat form of the module documentation).
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(&self.sanitized())
            .map_err(|e| Error::invalid(format!("cannot serialize statistics: {e}")))
    }

    /// Parses a record written by [`Stats::to_json`]. Missing columns (a
    /// record written before they existed) are zero; unknown ones are ignored.
    pub fn from_json(text: &str) -> Result<Stats> {
        let bad = |e: serde_json::Error| Error::invalid(format!("not a statistics record: {e}"));
        let given: serde_json::Value = serde_json::from_str(text).map_err(bad)?;
        let serde_json::Value::Object(given) = given else {
            return Err(Error::invalid(
                "not a statistics record: expected a JSON object",
            ));
        };
        let mut full = match serde_json::to_value(Stats::default()).map_err(bad)? {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        full.extend(given);
        serde_json::from_value(serde_json::Value::Object(full)).map_err(bad)
    }

    /// `(column, value)` pairs in [`Stats::COLUMNS`] order, for a results table.
    pub fn to_columns(&self) -> Vec<(&'static str, serde_json::Value)> {
        let value = serde_json::to_value(self.sanitized()).unwrap_or(serde_json::Value::Null);
        Self::COLUMNS
            .iter()
            .map(|&name| {
                (
                    name,
                    value.get(name).cloned().unwrap_or(serde_json::Value::Null),
                )
            })
            .collect()
    }

    /// A copy whose floating-point fields are finite (non-finite values, which
    /// JSON cannot carry, become 0).
    fn sanitized(&self) -> Stats {
        let fix = |v: f64| if v.is_finite() { v } else { 0.0 };
        let mut s = self.clone();
        s.build_rewrite_factor = fix(s.build_rewrite_factor);
        s.sim.device_write_amplification = fix(s.sim.device_write_amplification);
        s.sim.erase_count_mean = fix(s.sim.erase_count_mean);
        s
    }
}

/// Adds one to `levels[level]`, growing the vector as needed.
pub(crate) fn bump_level(levels: &mut Vec<u64>, level: u16) {
    let i = usize::from(level);
    if levels.len() <= i {
        levels.resize(i + 1, 0);
    }
    if let Some(v) = levels.get_mut(i) {
        *v = v.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    use std::collections::HashSet;

    /// The keys of a JSON object in document order, duplicates kept.
    struct Keys(Vec<String>);

    impl<'de> Deserialize<'de> for Keys {
        fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Keys, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: MapAccess<'de>>(
                    self,
                    mut m: A,
                ) -> std::result::Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some(k) = m.next_key::<String>()? {
                        m.next_value::<IgnoredAny>()?;
                        keys.push(k);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(V)
        }
    }

    fn sample() -> Stats {
        let mut s = Stats::new("build");
        s.operations = 1000;
        s.wall_time_ns = 5_000_000;
        s.cpu_time_ns = 4_000_000;
        s.add_time(Clock::Wall, Phase::Flush, 300);
        s.add_time(Clock::Cpu, Phase::Index, 200);
        s.add_time(Clock::Sim, Phase::Log, 100);
        s.record_node_read(0);
        s.record_node_read(2);
        s.record_node_write(1);
        s.set_device(&DeviceStats {
            io: IoCounters {
                pages_written: 10,
                bytes_written: 40960,
                pages_read: 3,
                ..IoCounters::default()
            },
            sim: Some(SimCounters {
                nand_programs: 15,
                device_write_amplification: 1.5,
                erase_count_max: 2,
                erase_count_mean: 0.5,
                sim_time_ns: 77,
                ..SimCounters::default()
            }),
        });
        s.set_index_bytes(8192);
        s.splits = 4;
        s.log_bytes = 123;
        s.peak_buffer_bytes = 4096;
        s
    }

    #[test]
    fn json_keys_unique_snake_case_and_listed() {
        let json = sample().to_json().unwrap();
        let Keys(keys) = serde_json::from_str(&json).unwrap();
        let unique: HashSet<&String> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len(), "duplicate keys in {keys:?}");
        for k in &keys {
            assert!(
                k.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    && !k.starts_with('_')
                    && !k.ends_with('_')
                    && !k.contains("__"),
                "{k} is not snake_case"
            );
        }
        assert_eq!(keys, Stats::COLUMNS);
        // The two easily confused names are both there, distinct.
        assert!(keys.iter().any(|k| k == "device_write_amplification"));
        assert!(keys.iter().any(|k| k == "build_rewrite_factor"));
        // Flat: nothing but scalars, except the per-level arrays.
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        for (k, val) in v.as_object().unwrap() {
            assert!(!val.is_object(), "{k} is nested");
            assert_eq!(val.is_array(), k.ends_with("_by_level"), "{k}");
        }
    }

    #[test]
    fn json_round_trip() {
        let s = sample();
        let back = Stats::from_json(&s.to_json().unwrap()).unwrap();
        assert_eq!(back, s);
        let d = Stats::default();
        assert_eq!(Stats::from_json(&d.to_json().unwrap()).unwrap(), d);
        assert!(Stats::from_json("{\"label\": 3}").is_err());
        assert!(Stats::from_json("[1, 2]").is_err());
        assert!(Stats::from_json("not json").is_err());
        // Older records without some columns still load, the columns as zero.
        let partial = Stats::from_json(r#"{"label":"x","splits":2}"#).unwrap();
        assert_eq!((partial.label.as_str(), partial.splits), ("x", 2));
        assert_eq!(partial.io, IoCounters::default());
        // Non-finite ratios never reach the JSON.
        let mut n = sample();
        n.build_rewrite_factor = f64::NAN;
        let back = Stats::from_json(&n.to_json().unwrap()).unwrap();
        assert_eq!(back.build_rewrite_factor, 0.0);
    }

    #[test]
    fn columns_follow_fields() {
        let s = sample();
        let cols = s.to_columns();
        assert_eq!(cols.len(), Stats::COLUMNS.len());
        let get = |name: &str| cols.iter().find(|(k, _)| *k == name).unwrap().1.clone();
        assert_eq!(get("label"), serde_json::json!("build"));
        assert_eq!(get("wall_flush_ns"), serde_json::json!(300));
        assert_eq!(get("cpu_index_ns"), serde_json::json!(200));
        assert_eq!(get("sim_log_ns"), serde_json::json!(100));
        assert_eq!(get("sim_time_ns"), serde_json::json!(77));
        assert_eq!(get("node_reads_by_level"), serde_json::json!([1, 0, 1]));
        assert_eq!(get("build_rewrite_factor"), serde_json::json!(5.0));
        assert_eq!(get("device_write_amplification"), serde_json::json!(1.5));
        assert_eq!(get("device_simulated"), serde_json::json!(true));
    }

    #[test]
    fn times_by_clock_and_phase() {
        let mut s = Stats::default();
        for (i, phase) in Phase::ALL.into_iter().enumerate() {
            s.add_time(Clock::Wall, phase, i as u64 + 1);
            s.add_time(Clock::Cpu, phase, 10 * (i as u64 + 1));
            s.add_time(Clock::Sim, phase, 100 * (i as u64 + 1));
        }
        for (i, phase) in Phase::ALL.into_iter().enumerate() {
            assert_eq!(s.time(Clock::Wall, phase), i as u64 + 1);
            assert_eq!(s.time(Clock::Cpu, phase), 10 * (i as u64 + 1));
            // Refinement has no simulated time (the object heap is a file).
            let sim = if phase == Phase::Refinement {
                0
            } else {
                100 * (i as u64 + 1)
            };
            assert_eq!(s.time(Clock::Sim, phase), sim);
        }
        assert_eq!(s.times.wall.wall_recovery_ns, 9);
        assert_eq!(s.times.cpu.cpu_read_ns, 40);
        assert_eq!(s.times.sim.sim_filter_ns, 200);
    }

    #[test]
    fn device_helpers() {
        let real = Stats::from_device(&DeviceStats {
            io: IoCounters {
                pages_read: 7,
                ..IoCounters::default()
            },
            sim: None,
        });
        assert!(!real.device_simulated);
        assert_eq!(real.io.pages_read, 7);
        assert_eq!(real.sim, SimCounters::default());
        assert_eq!(Stats::default().buffer_hit_ratio(), 0.0);
    }

    #[test]
    fn merge_sums_and_recombines() {
        let a = sample();
        let mut b = sample();
        b.label = "other".into();
        b.sim.nand_programs = 30; // 30 programs for 10 host writes: WA 3
        b.sim.device_write_amplification = 3.0;
        b.sim.erase_count_max = 5;
        b.index_bytes = 0;
        b.peak_buffer_bytes = 10;
        b.record_node_read(4);
        let mut m = a.clone();
        m.merge(&b);
        assert_eq!(m.label, "build");
        assert_eq!(m.operations, 2000);
        assert_eq!(m.io.bytes_written, 2 * 40960);
        assert_eq!(m.sim.nand_programs, 45);
        // (15 + 30) programs over (10 + 10) host writes.
        assert!((m.sim.device_write_amplification - 2.25).abs() < 1e-12);
        assert_eq!(m.sim.erase_count_max, 5);
        assert_eq!(m.node_reads_by_level, vec![2, 0, 2, 0, 1]);
        assert_eq!(m.node_reads, 5);
        assert_eq!(m.node_writes_by_level, vec![0, 2]);
        assert_eq!(m.index_bytes, 8192);
        assert_eq!(m.build_rewrite_factor, 10.0);
        assert_eq!(m.peak_buffer_bytes, 4096);
        assert_eq!(m.splits, 8);
        assert_eq!(m.time(Clock::Wall, Phase::Flush), 600);
        assert_eq!(m.sim.sim_time_ns, 154);
        // Merging into an empty record gives the record back.
        let mut e = Stats::default();
        e.merge(&a);
        assert_eq!(e, a);
    }
}
