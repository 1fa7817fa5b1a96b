//! `geoflash report RESULTS.sqlite|postgresql://… --out DIR` (or
//! `--results RESULTS`): figures, tables and an HTML page.
use std::path::PathBuf;

use geoflash_bench::report::{write_report, ReportOptions};
use geoflash_bench::results::ResultsLocation;

use crate::output::{print_json, row};
use crate::Failure;

/// Options of `report`.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  geoflash report results.sqlite --out report/\n  geoflash report --results results.sqlite --out report/ --baseline fast --headline efind\n  geoflash report --results r.sqlite --out report/ --metric nand_erases --metric sim_time_ns --baseline plain\n  geoflash report --results postgresql://bench@dbhost/results --out report/"
)]
pub struct ReportArgs {
    /// Results store written by `geoflash bench`: an SQLite file or a
    /// PostgreSQL URL (or give it with --results).
    #[arg(value_name = "RESULTS", required_unless_present = "results")]
    store: Option<ResultsLocation>,
    /// The results store, as an option (the same as the positional RESULTS).
    #[arg(long, value_name = "RESULTS", conflicts_with = "store")]
    results: Option<ResultsLocation>,
    /// Output directory (index.html, summary.csv, summary.md, plots/).
    #[arg(long)]
    out: PathBuf,
    /// Metric to show (a column of the results table; repeatable; default:
    /// pages_written, pages_read, nand_erases, wall_time_ns, sim_time_ns).
    #[arg(long = "metric")]
    metrics: Vec<String>,
    /// Index configuration that gains (ref − value)/ref are computed against.
    #[arg(long)]
    baseline: Option<String>,
    /// Also print the Markdown tables (summary.md) on standard output.
    #[arg(long)]
    print: bool,
    /// Write and print a headline table: the gains of this configuration
    /// (name before `[`) over the baseline, one row per step and variant.
    #[arg(long, requires = "baseline")]
    headline: Option<String>,
    /// Print the summary as JSON (last line of standard output).
    #[arg(long)]
    json: bool,
}

/// `geoflash report`.
pub fn report(a: ReportArgs) -> Result<(), Failure> {
    let Some(results) = a.store.as_ref().or(a.results.as_ref()) else {
        return Err(geoflash::Error::invalid(
            "report: give the results store (geoflash report RESULTS --out DIR)",
        )
        .into());
    };
    // A report reads an existing results store (`bench` creates one).
    if let ResultsLocation::Sqlite(path) = results {
        crate::input_file(path)?;
    }
    let s = write_report(
        results,
        &a.out,
        &ReportOptions {
            metrics: a.metrics.clone(),
            baseline: a.baseline.clone(),
            headline: a.headline.clone(),
        },
    )?;
    let printed = a.print.then(|| a.out.join("summary.md"));
    for md in printed.iter().chain(&s.headline) {
        let text = std::fs::read_to_string(md).map_err(|source| geoflash::Error::Io {
            path: md.to_path_buf(),
            page: None,
            source,
        })?;
        outln!("{text}");
    }
    if a.json {
        print_json(&s)?;
    } else {
        row("report", s.html.display());
        row("panels", s.panels);
        row("plots", s.plots.len());
    }
    Ok(())
}
