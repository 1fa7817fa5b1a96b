//! `geoflash bench WORKLOAD.toml --results RESULTS.sqlite|postgresql://…`:
//! runs a workload file's cross product and records every step's metrics.
use std::path::PathBuf;

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
    /// Re-run configurations already complete in the results store.
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
}

/// `geoflash bench`.
pub fn bench(a: BenchArgs) -> Result<(), Failure> {
    let scale: Scale = a.scale.parse()?;
    crate::input_file(&a.workload)?;
    let w = Workload::load(&a.workload, scale)?;
    if a.check {
        let configs = w.configurations(&a.only);
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
        progress: true,
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
            code: 1,
            error: anyhow::anyhow!(
                "{} of {} configurations failed (recorded with status 'error'; a later run retries them)",
                summary.failures.len(),
                summary.executed
            ),
        });
    }
    Ok(())
}
