//! Running a workload: [`run`] walks the cross product, skips what the
//! results store holds complete, and records each configuration; `execute`
//! runs one configuration's steps on a fresh index, one transaction per
//! step (a forced re-run of a complete configuration: one transaction for
//! all, `record.rs`).
use geoflash::geom::Rect;
use geoflash::{Error, Result};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget};
use std::io::IsTerminal;

use super::build::build;
use super::crash::crash_and_recover;
use super::dataset::{load_dataset, order_name, source_records, DatasetCache};
use super::exec::Exec;
use super::measure::Row;
use super::record::Recorder;
use super::{RunOptions, RunSummary};
use crate::progress::style as bar_style;
use crate::results::{ConfigRow, ResultsStore};
use crate::workload::{Configuration, DatasetSource, Step, Workload};

/// The configurations of `w` that `opts` names (`only`, then `pick`), at
/// least one.
fn chosen_configurations(w: &Workload, opts: &RunOptions) -> Result<Vec<Configuration>> {
    let mut configs = w.chosen_configurations(&opts.only)?;
    if let Some(i) = opts.pick {
        if i >= configs.len() {
            return Err(Error::invalid(format!(
                "workload {:?} has {} configurations: there is none at position {i}",
                w.name,
                configs.len()
            )));
        }
        configs = vec![configs.swap_remove(i)];
    }
    Ok(configs)
}

/// The run's progress bars, on standard error when `opts.progress`: the
/// configurations of `w` (`n`) and the current step's operations.
fn progress_bars(
    w: &Workload,
    opts: &RunOptions,
    n: usize,
) -> (MultiProgress, ProgressBar, ProgressBar) {
    let multi = MultiProgress::with_draw_target(if opts.progress {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let overall = multi.add(ProgressBar::new(n as u64));
    overall.set_style(bar_style(
        "{msg} [{bar:30}] {pos}/{len} configurations (eta {eta})",
    ));
    overall.set_message(w.name.clone());
    let step_bar = multi.add(ProgressBar::new(0));
    step_bar.set_style(bar_style(
        "  {msg} [{bar:30}] {pos}/{len} ({rate}, eta {eta})",
    ));
    (multi, overall, step_bar)
}

/// Runs workload `w`, recording into `store`.
pub fn run(w: &Workload, store: &mut ResultsStore, opts: &RunOptions) -> Result<RunSummary> {
    let configs = chosen_configurations(w, opts)?;
    // PostGIS tables are read before anything is recorded: a server that
    // cannot be reached leaves no trace in the results store.
    let mut cache = DatasetCache::new();
    for c in &configs {
        if matches!(c.dataset.source, DatasetSource::Postgis(_)) {
            source_records(&c.dataset, &mut cache)?;
        }
    }
    let run_id = store.begin_run(
        &w.name,
        &w.path.display().to_string(),
        &w.text,
        w.scale.name(),
        &opts.command,
    )?;
    let (_multi, overall, step_bar) = progress_bars(w, opts, configs.len());
    let mut summary = RunSummary {
        run_id,
        configurations: configs.len(),
        ..RunSummary::default()
    };
    // Off a terminal (CI, `make demo > log`) the bars draw nothing: say
    // which configuration starts, one line each, instead.
    let lines = opts.progress && !std::io::stderr().is_terminal();
    for (i, c) in configs.iter().enumerate() {
        overall.inc(1);
        let key = c.key(&w.name, w.scale)?;
        // A forced re-run of a complete configuration replaces its rows
        // only once it succeeded (`Recorder`).
        let complete = store.is_complete(&key)?;
        if complete && !opts.force {
            summary.skipped_complete += 1;
            continue;
        }
        let what = format!(
            "{} / {} ({}) / rep {}",
            c.dataset.name,
            c.index.name,
            order_name(&c.dataset),
            c.repetition
        );
        if lines {
            eprintln!(
                "{}: configuration {}/{}: {what}",
                w.name,
                i + 1,
                configs.len()
            );
        }
        overall.set_message(what.clone());
        let data = match load_dataset(&c.dataset, &mut cache) {
            Ok(d) => d,
            Err(e) => {
                // A dataset that cannot be read fails the whole run: nothing else can use it.
                store.finish_run(run_id)?;
                return Err(e);
            }
        };
        let config_json = serde_json::to_string(c)
            .map_err(|e| Error::invalid(format!("cannot serialize configuration: {e}")))?;
        let order = order_name(&c.dataset);
        let row = config_row(w, c, &key, &order, data.len(), &config_json);
        let mut rec = Recorder::begin(store, run_id, &row, complete)?;
        summary.executed += 1;
        match execute(w, c, &data, &mut rec, opts, &step_bar, &mut summary) {
            Ok(()) => summary.rows += rec.finish(&row)?,
            Err(Failed::Store(e)) => return Err(e),
            Err(Failed::Step(e)) => {
                summary.rows += rec.written();
                let kept = if rec.holds() {
                    " (a forced re-run: nothing recorded, its earlier complete results are kept)"
                } else {
                    ""
                };
                summary.failures.push(format!("{what}: {e}{kept}"));
            }
        }
    }
    step_bar.finish_and_clear();
    overall.finish_and_clear();
    store.finish_run(run_id)?;
    Ok(summary)
}

/// The configurations row of configuration `c` of workload `w` (key
/// `key`, insertion order `order`, `count` objects, JSON `config_json`).
fn config_row<'a>(
    w: &'a Workload,
    c: &'a Configuration,
    key: &'a str,
    order: &'a str,
    count: usize,
    config_json: &'a str,
) -> ConfigRow<'a> {
    ConfigRow {
        key,
        workload: &w.name,
        scale: w.scale.name(),
        dataset: &c.dataset.name,
        insertion_order: order,
        dataset_count: count as u64,
        index_name: &c.index.name,
        index_kind: c.index.kind(),
        split: c.index.split(),
        page_size: c.index.options.page_size as u64,
        store: c.index.store(),
        buffer_bytes: c.index.options.store.buffer_bytes() as u64,
        buffer_policy: c.index.buffer_policy(),
        device: c.index.device(),
        repetition: c.repetition,
        config_json,
    }
}

/// How the execution of a configuration failed.
enum Failed {
    /// The results store failed: stop the run.
    Store(Error),
    /// A step failed: recorded, the run goes on.
    Step(Error),
}

/// Runs the steps of configuration `c` of workload `w` on `data`, recording
/// each step's rows with `rec`.
fn execute(
    w: &Workload,
    c: &Configuration,
    data: &[(u64, Rect)],
    rec: &mut Recorder,
    opts: &RunOptions,
    bar: &ProgressBar,
    summary: &mut RunSummary,
) -> std::result::Result<(), Failed> {
    let fail = |rec: &mut Recorder, i: usize, s: &Step, e: Error| match rec.fail(i, s, &e) {
        Ok(()) => Failed::Step(e),
        Err(se) => Failed::Store(se),
    };
    let Some(first) = w.steps.first() else {
        return Ok(());
    };
    let (mut index, _dir, (s, note), next) =
        match build(c, first, data, opts.workdir.as_deref(), bar) {
            Ok(x) => x,
            Err(e) => return Err(fail(rec, 0, first, e)),
        };
    rec.device(&index.device().describe())
        .map_err(Failed::Store)?;
    rec.step(
        0,
        first,
        vec![Row {
            parameter: String::new(),
            status: "ok",
            message: note,
            stats: s,
            latency_median_ns: None,
        }],
    )
    .map_err(Failed::Store)?;
    let extent = Rect::union_all(data.iter().map(|(_, r)| r))
        .ok_or_else(|| Failed::Step(Error::invalid("empty dataset")))?;
    let mut exec = Exec {
        data,
        extent,
        next,
        live: data.get(..next).unwrap_or(data).to_vec(),
        bar: bar.clone(),
        store: c.index.store().to_string(),
    };
    for (i, step) in w.steps.iter().enumerate().skip(1) {
        if let Step::CrashAndRecover { operations } = step {
            match crash_and_recover(&mut exec, index, *operations) {
                Ok((ix, r)) => {
                    index = ix;
                    if r.status == "skipped" {
                        summary.unsupported.push(r.message.clone());
                    }
                    rec.step(i, step, vec![r]).map_err(Failed::Store)?;
                    continue;
                }
                Err(e) => return Err(fail(rec, i, step, e)),
            }
        }
        match exec.step(&mut index, step) {
            Ok(rows) => {
                for r in rows.iter().filter(|r| r.status == "skipped") {
                    summary.unsupported.push(r.message.clone());
                }
                rec.step(i, step, rows).map_err(Failed::Store)?;
            }
            Err(e) => return Err(fail(rec, i, step, e)),
        }
    }
    Ok(())
}
