//! I/O traces on the command line: `devbench --trace FILE` replays a trace,
//! `build --record-trace FILE` records the trace of a build's index device.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use geoflash::engine::device::{
    DeviceExt, DeviceSpec, DeviceStats, PageDevice, Trace, TraceDevice, TraceOp,
};
use geoflash::engine::{BulkMethod, Error, Index, IndexOptions};
use geoflash::geom::Rect;
use geoflash_bench::devbench;

use crate::output::{print_json, row};
use crate::{progress_bar, Failure};

/// `geoflash devbench --trace FILE --device SPEC [--overwrite]`: a trace
/// that writes or trims refuses a device file holding data without
/// `overwrite` ([`crate::refuse_overwrite`]).
pub fn replay(device: &str, trace_path: &Path, json: bool, overwrite: bool) -> Result<(), Failure> {
    let trace = Trace::read_file(trace_path)?;
    let spec = DeviceSpec::parse(device)?;
    let default_path = PathBuf::from(crate::DEVBENCH_FILE);
    let writes = trace
        .ops
        .iter()
        .any(|op| matches!(op, TraceOp::Write(_) | TraceOp::Trim(_)));
    if writes && !overwrite {
        crate::refuse_overwrite(&spec, &default_path)?;
    }
    let device = spec.open(trace.page_size, Some(&default_path))?;
    let bar = progress_bar(trace.ops.len() as u64, "replay");
    let report = devbench::replay_trace(
        device.as_ref(),
        &trace,
        &trace_path.display().to_string(),
        &|done| bar.set_position(done),
    )?;
    bar.finish(trace.ops.len() as u64);
    if json {
        print_json(&report)?;
        return Ok(());
    }
    let r = &report.replayed;
    let io = &report.stats.io;
    row("device", &report.device);
    row("trace", &report.trace);
    row("records", r.records);
    row(
        "batches",
        format!(
            "{} read, {} write, {} sync, {} trim",
            r.read_batches, r.write_batches, r.syncs, r.trims
        ),
    );
    row(
        "pages",
        format!(
            "{} read, {} written, {} trimmed",
            io.pages_read, io.pages_written, io.pages_trimmed
        ),
    );
    row("wall time", format!("{:.3} s", report.wall_ns as f64 / 1e9));
    if let Some(s) = &report.stats.sim {
        row(
            "NAND",
            format!(
                "{} reads, {} programs, {} erases, {} GC copies, {} GC runs",
                s.nand_reads, s.nand_programs, s.nand_erases, s.gc_copies, s.gc_runs
            ),
        );
        row(
            "device write amplification",
            format!("{:.3}", s.device_write_amplification),
        );
        row(
            "simulated time",
            format!("{:.3} s", s.sim_time_ns as f64 / 1e9),
        );
    }
    Ok(())
}

/// Host-side counters without wall-clock times (which differ between runs).
fn comparable(mut s: DeviceStats) -> DeviceStats {
    s.io.read_time_ns = 0;
    s.io.write_time_ns = 0;
    s.io.sync_time_ns = 0;
    s
}

/// `geoflash build --record-trace FILE`: the index's device is opened inside
/// the index directory's code, so the trace is recorded by running the same
/// build a second time, in this process, on a recording wrapper of a fresh
/// device of the same spec (the tree, the store and every operation are
/// deterministic). The replica's device counters must equal the index
/// build's (`expected`, taken before the index is closed), or the trace is
/// refused; the final checkpoint of closing the index is recorded too.
pub fn record_build(
    path: &Path,
    index_dir: &Path,
    opts: &IndexOptions,
    records: Vec<(u64, Rect)>,
    bulk: Option<(BulkMethod, f64)>,
    expected: &DeviceStats,
) -> Result<(), Failure> {
    let spec = opts.device.clone();
    if matches!(spec, DeviceSpec::File { path: Some(_), .. }) {
        return Err(Error::invalid(
            "--record-trace re-runs the build on a scratch device and cannot reuse an explicit \
             file:PATH device; use file, mem:, flashsim: or hddsim:",
        )
        .into());
    }
    let scratch = index_dir.join("record-trace.scratch");
    let device = spec.open(opts.page_size, Some(&scratch))?;
    let traced = Arc::new(TraceDevice::create(device, path, true)?);
    let result = replicate(traced.clone(), opts, records, bulk, expected);
    let finished = traced.finish();
    drop(traced);
    let _ = std::fs::remove_file(&scratch);
    if result.is_err() || finished.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result?;
    finished?;
    Ok(())
}

fn replicate(
    traced: Arc<TraceDevice<Arc<dyn PageDevice>>>,
    opts: &IndexOptions,
    records: Vec<(u64, Rect)>,
    bulk: Option<(BulkMethod, f64)>,
    expected: &DeviceStats,
) -> Result<(), Failure> {
    let device: Arc<dyn PageDevice> = traced.clone();
    let mut index = match bulk {
        Some((method, fill)) => Index::bulk_load_on(device, opts, records, method, fill)?,
        None => {
            // Created as the build's index is: one checkpoint of the empty tree.
            let mut index = Index::create_on(device, opts)?;
            let total = records.len() as u64;
            let bar = progress_bar(total, "record trace");
            for (i, (id, r)) in records.into_iter().enumerate() {
                index.insert(id, r)?;
                if i % 1024 == 0 {
                    bar.set_position(i as u64);
                }
            }
            bar.finish(total);
            index
        }
    };
    index.checkpoint()?;
    let got = comparable(traced.stats());
    if got != comparable(*expected) {
        return Err(anyhow::anyhow!(
            "--record-trace: the recorded re-run's device counters differ from the build's \
             ({:?} vs {:?}); the trace was not kept",
            got.io,
            expected.io
        )
        .into());
    }
    // Closing the index checkpoints once more.
    index.close()?;
    Ok(())
}
