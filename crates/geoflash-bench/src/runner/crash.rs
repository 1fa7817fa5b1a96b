//! Crash-and-recover steps: inserts after the last checkpoint, a crash
//! (the index dropped unflushed) and the reopening that recovers from the
//! log, measured.
use std::path::Path;

use geoflash::metrics::Stats;
use geoflash::{Error, Index, Result};

use super::exec::Exec;
use super::measure::{Clock, Row};
use crate::target::Target;

/// Crash and recover: `operations` inserts without a checkpoint, the index
/// dropped without flushing (a crash at an operation boundary), then
/// reopened, which runs recovery from the log. The row measures the reopen.
pub(super) fn crash_and_recover(
    exec: &mut Exec,
    target: Target,
    operations: usize,
) -> Result<(Target, Row)> {
    let skipped = |index: Target, message: String| {
        Ok((
            index,
            Row {
                parameter: String::new(),
                status: "skipped",
                message,
                stats: Stats::new("crash_and_recover"),
                latency_median_ns: None,
            },
        ))
    };
    if exec.store == "none" {
        // A grid file (no store).
        return skipped(
            target,
            "crash_and_recover is not supported by this index kind (it keeps no log; \
             R-trees on the efind and fast stores do)"
                .to_string(),
        );
    }
    let index = target;
    if exec.store != "efind" && exec.store != "fast" {
        return skipped(
            index,
            format!(
                "crash_and_recover is not supported by store {} in this version (it keeps no log; efind and fast do)",
                exec.store
            ),
        );
    }
    let Some(dir) = index.as_index().dir().map(Path::to_path_buf) else {
        let device = index.as_index().manifest().device.clone();
        return skipped(
            index,
            format!(
                "crash_and_recover needs a file device: an index on {} lives in this process only",
                device
            ),
        );
    };
    let mut index = index;
    let reads = index.index().read_mode();
    let before = exec.live.len();
    exec.bar.set_message("crash_and_recover");
    for _ in 0..operations {
        exec.insert_next(index.index_mut())?;
    }
    // The crash: no checkpoint, no close.
    drop(index.into_index());
    let clock = Clock::start();
    let mut index = Index::open(&dir, geoflash::engine::Access::Write)?;
    index.set_read_mode(reads);
    let mut s = index.stats("crash_and_recover");
    clock.stamp(&mut s);
    let recovered = usize::try_from(index.len()).unwrap_or(usize::MAX);
    if recovered < before || recovered > before + operations {
        return Err(Error::corrupt(
            None,
            format!(
                "after the crash the index holds {recovered} records: expected between {before} \
             (the last checkpoint) and {} (every insert)",
                before + operations
            ),
        ));
    }
    // The inserts that did not survive are gone from the live set.
    exec.live.truncate(recovered);
    let report = index
        .restart_report()
        .and_then(|r| serde_json::to_string(r).ok())
        .unwrap_or_default();
    s.operations = (recovered - before) as u64;
    let target = Target::new(index);
    // The recovered index's size, as every other step records it.
    s.set_index_bytes(target.index_bytes());
    Ok((
        target,
        Row {
            parameter: format!("operations={operations}"),
            status: "ok",
            message: format!(
                "{} of {operations} inserts after the last checkpoint recovered; restart: {report}",
                recovered - before
            ),
            stats: s,
            latency_median_ns: None,
        },
    ))
}
