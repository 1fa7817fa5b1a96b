//! `geoflash bench WORKLOAD.toml --results RESULTS.sqlite|postgresql://…`:
//! runs a workload file's cross product and records every step's metrics.
use std::path::PathBuf;

use geoflash::ErrorKind;
use geoflash_bench::results::{ResultsLocation, ResultsStore};
use geoflash_bench::runner::{self, RunOptions};
use geoflash_bench::workload::{Scale, Workload};

use crate::output::{print_json, row};
use crate::Failure;

/// Options of `bench`.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  geoflash bench workloads/smoke.toml --results results.sqlite --scale smoke\n  geoflash bench workloads/efind-vs-plain.toml --results r.sqlite --scale small --index efind --force\n  geoflash bench workloads/smoke.toml --scale smoke --results postgresql://bench@dbhost/results   (PGPASSWORD for a password)\n  geoflash report --results r.sqlite --out report/"
)]
pub struct BenchArgs {
    /// Workload file (TOML; see docs/workbench.md).
    workload: PathBuf,
    /// Results store: an SQLite file (created if missing) or a PostgreSQL
    /// URL, postgresql://user@host[:port]/dbname (tables created if missing).
    #[arg(long)]
    results: ResultsLocation,
    /// smoke, small or full: which of the workload's counts to use.
    #[arg(long, default_value = "small")]
    scale: String,
    /// Re-run configurations already complete in the results store (their
    /// rows are replaced once the re-run succeeded).
    #[arg(long)]
    force: bool,
    /// Run only the index configurations with this name (repeatable): a full
    /// name (`efind[page_size=4KiB]`), a base name (`efind`), or a base name
    /// or `*` with varied parameters that must match (`*[page_size=4KiB]`).
    #[arg(long = "index")]
    only: Vec<String>,
    /// Directory for the indexes of `file` devices (default: the temporary directory).
    #[arg(long)]
    workdir: Option<PathBuf>,
    /// Check the workload file and print its configurations without running them.
    #[arg(long)]
    check: bool,
    /// Print the run summary as JSON (last line of standard output).
    #[arg(long)]
    json: bool,
    /// Run the configurations as tasks on the Dask cluster whose scheduler
    /// is at this address (tcp://host:8786), through the Python package
    /// (`python3 -m geoflash.dask.sweep`; $GEOFLASH_PYTHON names another
    /// interpreter): with an SQLite --results the rows are written into it
    /// on this machine; with a PostgreSQL URL every worker writes its rows
    /// into that database. See docs/scaleout.md.
    #[arg(long, value_name = "SCHEDULER")]
    dask: Option<String>,
}

/// `geoflash bench --dask SCHEDULER`: hands the sweep to
/// `geoflash.dask.sweep` in Python, which submits one Dask task per
/// configuration; the rows go into the SQLite store on this machine, or
/// straight from the workers into the PostgreSQL store.
fn dask_sweep(a: &BenchArgs, scheduler: &str) -> Result<(), Failure> {
    let results: std::ffi::OsString = match &a.results {
        ResultsLocation::Sqlite(path) => path.into(),
        ResultsLocation::Postgres(url) => url.into(),
    };
    if a.force || a.json {
        return Err(geoflash::Error::invalid("--dask does not take --force or --json").into());
    }
    let python = std::env::var("GEOFLASH_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = std::process::Command::new(&python);
    cmd.args(["-m", "geoflash.dask.sweep"])
        .arg(&a.workload)
        .arg("--scheduler")
        .arg(scheduler)
        .arg("--results")
        .arg(&results)
        .arg("--scale")
        .arg(&a.scale);
    for o in &a.only {
        cmd.arg("--index").arg(o);
    }
    if let Some(w) = &a.workdir {
        cmd.arg("--workdir").arg(w);
    }
    let status = cmd.status().map_err(|e| {
        Failure::new(
            ErrorKind::InvalidInput,
            anyhow::anyhow!(
                "cannot run {python} for --dask: {e} (set GEOFLASH_PYTHON to a Python with geoflash and dask installed)"
            ),
        )
    })?;
    match status.code() {
        Some(0) => Ok(()),
        code => Err(Failure {
            code: code.map_or(crate::FAILURE, |c| c.clamp(1, 255) as u8),
            error: anyhow::anyhow!(
                "the Dask sweep ({python} -m geoflash.dask.sweep) failed ({status})"
            ),
        }),
    }
}

/// `geoflash bench`.
pub fn bench(a: BenchArgs) -> Result<(), Failure> {
    let scale: Scale = a.scale.parse()?;
    crate::input_file(&a.workload)?;
    let w = Workload::load(&a.workload, scale)?;
    // An `--index` that names no configuration is bad input (exit 2), with
    // `--check` too, and refused before the results store is created.
    let configs = w.chosen_configurations(&a.only)?;
    if let Some(scheduler) = a.dask.as_deref().filter(|_| !a.check) {
        return dask_sweep(&a, scheduler);
    }
    if a.check {
        if a.json {
            print_json(&serde_json::json!({
                "workload": w.name,
                "scale": scale,
                "configurations": configs.len(),
                "steps": w.steps.len(),
            }))?;
        } else {
            for c in &configs {
                let order = serde_json::to_value(c.dataset.order)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                outln!(
                    "{} ({order}) · {} · rep {}",
                    c.dataset.name,
                    c.index.name,
                    c.repetition
                );
            }
            outln!(
                "{} configurations, {} steps each",
                configs.len(),
                w.steps.len()
            );
        }
        return Ok(());
    }
    let mut store = ResultsStore::open_location(&a.results)?;
    let opts = RunOptions {
        force: a.force,
        only: a.only.clone(),
        progress: crate::show_progress(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        workdir: a.workdir.clone(),
        pick: None,
    };
    let summary = runner::run(&w, &mut store, &opts)?;
    for m in summary
        .unsupported
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
    {
        eprintln!("geoflash: note: {m}");
    }
    for f in &summary.failures {
        eprintln!("geoflash: configuration failed: {f}");
    }
    if a.json {
        print_json(&summary)?;
    } else {
        row("workload", &w.name);
        row("scale", scale.name());
        row("results", &a.results);
        row("run id", summary.run_id);
        row("configurations", summary.configurations);
        row("executed", summary.executed);
        row("already complete (skipped)", summary.skipped_complete);
        row("result rows", summary.rows);
        row("failed configurations", summary.failures.len());
    }
    if !summary.failures.is_empty() {
        return Err(Failure {
            code: crate::FAILURE,
            error: anyhow::anyhow!(
                "{} of {} configurations failed (recorded with status 'error'; a later run retries them; \
                 a configuration re-run with --force keeps its earlier complete results)",
                summary.failures.len(),
                summary.executed
            ),
        });
    }
    Ok(())
}
