//! Reports from a results store: per workload step (and selectivity or k) a
//! table of the chosen metrics by configuration (medians over
//! repetitions), gains over a baseline configuration as (ref − v)/ref, bar
//! charts (SVG, by `plotters`) of each metric by configuration, line charts
//! by page size when a step was run at several page sizes, and an HTML page
//! linking them. Tables are written as CSV (`summary.csv`) and Markdown
//! (`summary.md`).
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use geoflash::{Error, Result};
use plotters::prelude::*;

use crate::results::sql::Value;
use crate::results::{ResultsLocation, ResultsStore};

/// The metrics a report shows by default (those that are all zero in a panel are left out).
pub const DEFAULT_METRICS: &[&str] = &[
    "pages_written",
    "pages_read",
    "nand_erases",
    "wall_time_ns",
    "sim_time_ns",
];

/// What to report.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Metrics (columns of `results`); empty for [`DEFAULT_METRICS`].
    pub metrics: Vec<String>,
    /// Index configuration (name, or the name before `[`) that gains are computed against.
    pub baseline: Option<String>,
    /// Configuration (name before `[`) whose gains over the baseline make
    /// the headline table (`headline.md`); needs `baseline`.
    pub headline: Option<String>,
}

/// What [`write_report`] wrote.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReportSummary {
    /// The HTML page.
    pub html: PathBuf,
    /// Tables (CSV and Markdown).
    pub tables: Vec<PathBuf>,
    /// Plots (SVG).
    pub plots: Vec<PathBuf>,
    /// Panels (workload × step × parameter).
    pub panels: usize,
    /// The headline table (`headline.md`), when asked for.
    pub headline: Option<PathBuf>,
    /// Rows of the simulator-vs-device view ([`crate::simcorr`]): steps
    /// with configurations run on both a `flashsim:` and a `file` device.
    pub sim_vs_device: usize,
}

/// One bar of a panel: a configuration's median values over its repetitions.
#[derive(Debug, Clone)]
struct Bar {
    /// index name · dataset (order)
    label: String,
    index_name: String,
    group: String,
    page_size: i64,
    repetitions: usize,
    values: Vec<f64>,
}

/// The results of one step (and parameter) of one workload.
#[derive(Debug, Clone)]
struct Panel {
    workload: String,
    scale: String,
    step_index: i64,
    step_kind: String,
    parameter: String,
    bars: Vec<Bar>,
}

impl Panel {
    fn title(&self) -> String {
        let mut t = format!(
            "{} ({}) — step {} {}",
            self.workload, self.scale, self.step_index, self.step_kind
        );
        if !self.parameter.is_empty() {
            t.push_str(&format!(" [{}]", self.parameter));
        }
        t
    }

    fn slug(&self) -> String {
        let raw = format!(
            "{}-{}-{}-{}-{}",
            self.workload, self.scale, self.step_index, self.step_kind, self.parameter
        );
        raw.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect::<String>()
            .split('-')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("-")
    }
}

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        page: None,
        source,
    }
}

/// The name of an index configuration without its varied page size, for line-chart series.
fn without_page_size(name: &str) -> String {
    without_param(name, "page_size")
}

/// The name of an index configuration without its varied parameter `key`
/// (`a[page_size=1024,device=file]` without `device`: `a[page_size=1024]`).
pub(crate) fn without_param(name: &str, key: &str) -> String {
    let Some((base, rest)) = name.split_once('[') else {
        return name.to_string();
    };
    let inner = rest.trim_end_matches(']');
    let kept: Vec<&str> = inner
        .split(',')
        .filter(|p| p.split_once('=').map(|(k, _)| k) != Some(key))
        .collect();
    if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}[{}]", kept.join(","))
    }
}

fn load_panels(store: &mut ResultsStore, metrics: &[String]) -> Result<Vec<Panel>> {
    // Check the metric names against the table's columns (no SQL from users).
    let columns = store.columns("results")?;
    for m in metrics {
        if !columns.iter().any(|c| c == m) {
            return Err(Error::invalid(format!(
                "unknown metric {m:?}: use a column of the results table (e.g. pages_written, nand_erases, wall_time_ns)"
            )));
        }
    }
    let cols: Vec<String> = metrics
        .iter()
        .map(|m| format!("CAST({m} AS DOUBLE PRECISION)"))
        .collect();
    let sql = format!(
        "SELECT workload, scale, step_index, step_kind, parameter, index_name, dataset, insertion_order,
                page_size, {}
         FROM results_full WHERE status = 'ok'
         ORDER BY workload, scale, step_index, parameter, config_id",
        cols.join(", ")
    );
    let rows = store.query(&sql, &[])?;
    // panel key -> (bar key -> the metric values of every repetition)
    type BarKey = (String, String, String, i64);
    type PanelKey = (String, String, i64, String, String);
    let mut panels: BTreeMap<PanelKey, Panel> = BTreeMap::new();
    let mut samples: BTreeMap<PanelKey, Vec<(BarKey, Vec<f64>)>> = BTreeMap::new();
    let mut order = Vec::new();
    for r in rows {
        let text = |i: usize| {
            r.get(i)
                .and_then(Value::as_str)
                .map(String::from)
                .ok_or_else(|| Error::invalid(format!("results store: column {i} is not text")))
        };
        let int = |i: usize| {
            r.get(i).and_then(Value::as_i64).ok_or_else(|| {
                Error::invalid(format!("results store: column {i} is not an integer"))
            })
        };
        let (workload, scale, step_index) = (text(0)?, text(1)?, int(2)?);
        let (step_kind, parameter, index_name) = (text(3)?, text(4)?, text(5)?);
        let (dataset, ord, page_size) = (text(6)?, text(7)?, int(8)?);
        let values: Vec<f64> = (0..metrics.len())
            .map(|i| r.get(9 + i).and_then(Value::as_f64).unwrap_or(0.0))
            .collect();
        let key = (
            workload.clone(),
            scale.clone(),
            step_index,
            step_kind.clone(),
            parameter.clone(),
        );
        panels.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            Panel {
                workload,
                scale,
                step_index,
                step_kind,
                parameter,
                bars: Vec::new(),
            }
        });
        samples
            .entry(key)
            .or_default()
            .push(((index_name, dataset, ord, page_size), values));
    }
    for (key, rows) in samples {
        let Some(panel) = panels.get_mut(&key) else {
            continue;
        };
        let mut bars: Vec<(BarKey, Vec<Vec<f64>>)> = Vec::new();
        for (bar, values) in rows {
            match bars.iter_mut().find(|(b, _)| *b == bar) {
                Some((_, v)) => v.push(values),
                None => bars.push((bar, vec![values])),
            }
        }
        for ((index_name, dataset, ord, page_size), reps) in bars {
            let values = (0..metrics.len())
                .map(|m| median(reps.iter().filter_map(|v| v.get(m).copied()).collect()))
                .collect();
            panel.bars.push(Bar {
                label: format!("{index_name} · {dataset} ({ord})"),
                index_name,
                group: format!("{dataset} ({ord})"),
                page_size,
                repetitions: reps.len(),
                values,
            });
        }
    }
    Ok(order
        .into_iter()
        .filter_map(|k| panels.remove(&k))
        .collect())
}

/// The median of `v` (the mean of the two middle values for an even count; 0 when empty).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let hi = v.get(n / 2).copied().unwrap_or(0.0);
    if n % 2 == 1 {
        hi
    } else {
        (v.get(n / 2 - 1).copied().unwrap_or(hi) + hi) / 2.0
    }
}

/// The varied parameters of a configuration name (`efind[device=file,efind.durability=none]`)
/// without its page size, store-specific keys (`efind.x`, `fast.x`) renamed
/// `store.x` so that the same setting of two stores compares equal.
fn variant(name: &str) -> BTreeMap<String, String> {
    let Some((_, rest)) = name.split_once('[') else {
        return BTreeMap::new();
    };
    rest.trim_end_matches(']')
        .split(',')
        .filter_map(|p| p.split_once('='))
        .filter(|(k, _)| *k != "page_size")
        .map(|(k, v)| {
            let k = match k.split_once('.') {
                Some(("efind" | "fast", rest)) => format!("store.{rest}"),
                _ => k.to_string(),
            };
            (k, v.to_string())
        })
        .collect()
}

fn is_baseline(index_name: &str, baseline: &str) -> bool {
    index_name == baseline || index_name.split('[').next() == Some(baseline)
}

/// The baseline bar of `b`: a configuration of the baseline with the same
/// dataset, order and page size whose varied parameters (device,
/// durability, …) do not contradict `b`'s, the one sharing the most of them
/// (so `efind[device=file,efind.durability=none]` is compared with
/// `fast[device=file,fast.durability=none]`, not with FAST on another device).
fn reference_of<'a>(panel: &'a Panel, b: &Bar, baseline: &str) -> Option<&'a Bar> {
    let mine = variant(&b.index_name);
    panel
        .bars
        .iter()
        .filter(|r| {
            is_baseline(&r.index_name, baseline) && r.group == b.group && r.page_size == b.page_size
        })
        .filter_map(|r| {
            let theirs = variant(&r.index_name);
            let conflict = theirs
                .iter()
                .any(|(k, v)| mine.get(k).is_some_and(|m| m != v));
            let shared = theirs
                .iter()
                .filter(|(k, v)| mine.get(*k) == Some(*v))
                .count();
            (!conflict).then_some((shared, r))
        })
        .max_by_key(|(shared, _)| *shared)
        .map(|(_, r)| r)
}

/// Gain of each bar over its baseline bar ([`reference_of`]) as (ref − v)/ref.
fn gains(panel: &Panel, metric: usize, baseline: &str) -> Vec<Option<f64>> {
    panel
        .bars
        .iter()
        .map(|b| {
            let rv = *reference_of(panel, b, baseline)?.values.get(metric)?;
            let v = *b.values.get(metric)?;
            (rv != 0.0).then(|| (rv - v) / rv)
        })
        .collect()
}

/// The headline table: one row per configuration of `target` and panel,
/// with the first of `metrics` that is non-zero for it (simulated time on a
/// simulator, wall time on a real device, …), its baseline's value and the
/// gain (ref − v)/ref.
fn headline(panels: &[Panel], metrics: &[String], target: &str, baseline: &str) -> String {
    let mut md = format!(
        "| step | dataset (order) | {target} configuration | page | metric | {baseline} | {target} | gain |\n|---|---|---|---:|---|---:|---:|---:|\n"
    );
    for panel in panels {
        let step = if panel.parameter.is_empty() {
            panel.step_kind.clone()
        } else {
            format!(
                "{} {}",
                panel.step_kind,
                panel.parameter.split(';').next().unwrap_or("")
            )
        };
        for b in panel
            .bars
            .iter()
            .filter(|b| is_baseline(&b.index_name, target))
        {
            let Some(r) = reference_of(panel, b, baseline) else {
                continue;
            };
            let Some((m, v)) = b
                .values
                .iter()
                .enumerate()
                .find(|(_, v)| **v != 0.0)
                .map(|(m, v)| (m, *v))
            else {
                continue;
            };
            let (Some(metric), Some(rv)) = (metrics.get(m), r.values.get(m).copied()) else {
                continue;
            };
            let gain = if rv != 0.0 {
                format!("{:+.0} %", (rv - v) / rv * 100.0)
            } else {
                "–".into()
            };
            let shown = variant(&b.index_name)
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                md,
                "| {step} | {} | {shown} | {} KiB | {metric} | {} | {} | {gain} |",
                b.group,
                b.page_size / 1024,
                fmt_value(metric, rv),
                fmt_value(metric, v),
            );
        }
    }
    md
}

fn fmt_value(metric: &str, v: f64) -> String {
    if metric.ends_with("_ns") {
        format!("{:.3} ms", v / 1e6)
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// How a metric is plotted: the divisor and the axis label (`_ns` times in ms).
fn plot_unit(metric: &str) -> (f64, String) {
    match metric.strip_suffix("_ns") {
        Some(base) => (1e6, format!("{base} (ms)")),
        None => (1.0, metric.to_string()),
    }
}

fn bar_chart(path: &Path, title: &str, metric: &str, bars: &[(String, f64)]) -> Result<()> {
    let plot_err =
        |e: &dyn std::fmt::Display| Error::invalid(format!("plot {}: {e}", path.display()));
    let height = 120 + 28 * bars.len() as u32;
    // Room for the longest label at about 6.5 px a character.
    let longest = bars.iter().map(|b| b.0.chars().count()).max().unwrap_or(0) as u32;
    let label_area = (longest * 13 / 2 + 20).clamp(120, 900);
    let root = SVGBackend::new(path, (label_area + 600, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(&e))?;
    let max = bars.iter().map(|b| b.1).fold(0.0f64, f64::max);
    let max = if max > 0.0 { max * 1.1 } else { 1.0 };
    let n = bars.len() as u32;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(label_area)
        .build_cartesian_2d(0.0..max, (0u32..n).into_segmented())
        .map_err(|e| plot_err(&e))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(metric)
        .y_labels(bars.len().max(1))
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                labels.get(*i as usize).cloned().unwrap_or_default()
            }
            SegmentValue::Last => String::new(),
        })
        .draw()
        .map_err(|e| plot_err(&e))?;
    chart
        .draw_series(
            Histogram::horizontal(&chart)
                .style(BLUE.mix(0.6).filled())
                .margin(4)
                .data(bars.iter().enumerate().map(|(i, b)| (i as u32, b.1))),
        )
        .map_err(|e| plot_err(&e))?;
    root.present().map_err(|e| plot_err(&e))?;
    Ok(())
}

fn line_chart(
    path: &Path,
    title: &str,
    metric: &str,
    series: &BTreeMap<String, Vec<(i64, f64)>>,
) -> Result<()> {
    let plot_err =
        |e: &dyn std::fmt::Display| Error::invalid(format!("plot {}: {e}", path.display()));
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(&e))?;
    let xs = series.values().flatten().map(|p| p.0 as f64);
    let (lo, hi) = xs.fold((f64::MAX, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
    let ymax = series
        .values()
        .flatten()
        .map(|p| p.1)
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((lo.max(1.0)..hi.max(lo + 1.0)).log_scale(), 0.0..ymax)
        .map_err(|e| plot_err(&e))?;
    chart
        .configure_mesh()
        .x_desc("page size (bytes)")
        .y_desc(metric)
        .draw()
        .map_err(|e| plot_err(&e))?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let mut pts = pts.clone();
        pts.sort_by_key(|p| p.0);
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0 as f64, p.1)),
                color.stroke_width(2),
            ))
            .map_err(|e| plot_err(&e))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| plot_err(&e))?;
    root.present().map_err(|e| plot_err(&e))?;
    Ok(())
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn csv_field(s: &str) -> String {
    if s.contains(',') || s.contains('"') || s.contains('\n') {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes the report of the results store at `results` (an SQLite file
/// or a PostgreSQL URL) into directory `out`.
pub fn write_report(
    results: &ResultsLocation,
    out: &Path,
    opts: &ReportOptions,
) -> Result<ReportSummary> {
    if let ResultsLocation::Sqlite(p) = results {
        if !p.is_file() {
            return Err(Error::invalid(format!(
                "results store {} does not exist",
                p.display()
            )));
        }
    }
    let mut store = ResultsStore::open_location(results)?;
    let metrics: Vec<String> = if opts.metrics.is_empty() {
        DEFAULT_METRICS.iter().map(|s| s.to_string()).collect()
    } else {
        opts.metrics.clone()
    };
    let panels = load_panels(&mut store, &metrics)?;
    if panels.is_empty() {
        return Err(Error::invalid(format!(
            "results store {results} holds no successful result"
        )));
    }
    let plots_dir = out.join("plots");
    std::fs::create_dir_all(&plots_dir).map_err(|e| io_err(&plots_dir, e))?;
    let mut summary = ReportSummary {
        html: out.join("index.html"),
        panels: panels.len(),
        ..ReportSummary::default()
    };
    let mut csv = String::from(
        "workload,scale,step_index,step_kind,parameter,configuration,page_size,repetitions",
    );
    for m in &metrics {
        csv.push(',');
        csv.push_str(m);
        if opts.baseline.is_some() {
            csv.push_str(&format!(",{m}_gain"));
        }
    }
    csv.push('\n');
    let mut md = String::from("# geoflash report\n");
    let mut html = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>geoflash report</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:100%;display:block;margin:0.5em 0}</style></head><body>\n<h1>geoflash report</h1>\n",
    );
    let _ = writeln!(
        html,
        "<p>Results: <code>{}</code>. Tables: <a href=\"summary.csv\">summary.csv</a>, <a href=\"summary.md\">summary.md</a>. Values are medians over repetitions{}.</p>",
        html_escape(&results.to_string()),
        match &opts.baseline {
            Some(b) => format!("; gains are (ref − value)/ref against <b>{}</b>", html_escape(b)),
            None => String::new(),
        }
    );
    for panel in &panels {
        let title = panel.title();
        let slug = panel.slug();
        let shown: Vec<usize> = (0..metrics.len())
            .filter(|&m| {
                panel
                    .bars
                    .iter()
                    .any(|b| b.values.get(m).is_some_and(|v| *v != 0.0))
            })
            .collect();
        let all_gains: Vec<Vec<Option<f64>>> = (0..metrics.len())
            .map(|m| match &opts.baseline {
                Some(b) => gains(panel, m, b),
                None => vec![None; panel.bars.len()],
            })
            .collect();
        // CSV: every metric
        for (bi, b) in panel.bars.iter().enumerate() {
            let _ = write!(
                csv,
                "{},{},{},{},{},{},{},{}",
                csv_field(&panel.workload),
                csv_field(&panel.scale),
                panel.step_index,
                csv_field(&panel.step_kind),
                csv_field(&panel.parameter),
                csv_field(&b.label),
                b.page_size,
                b.repetitions
            );
            for (m, v) in b.values.iter().enumerate() {
                let _ = write!(csv, ",{v}");
                if opts.baseline.is_some() {
                    let g = all_gains
                        .get(m)
                        .and_then(|g| g.get(bi).copied().flatten())
                        .map(|g| g.to_string())
                        .unwrap_or_default();
                    let _ = write!(csv, ",{g}");
                }
            }
            csv.push('\n');
        }
        // Markdown and HTML tables: the metrics that are not all zero
        let _ = writeln!(md, "\n## {title}\n");
        let _ = writeln!(html, "<h2 id=\"{slug}\">{}</h2>", html_escape(&title));
        let mut header = vec!["configuration".to_string(), "reps".to_string()];
        for &m in &shown {
            let name = metrics.get(m).cloned().unwrap_or_default();
            header.push(name.clone());
            if opts.baseline.is_some() {
                header.push(format!("{name} gain"));
            }
        }
        let _ = writeln!(md, "| {} |", header.join(" | "));
        let _ = writeln!(md, "|{}", "---|".repeat(header.len()));
        html.push_str("<table><tr>");
        for h in &header {
            let _ = write!(html, "<th>{}</th>", html_escape(h));
        }
        html.push_str("</tr>\n");
        for (bi, b) in panel.bars.iter().enumerate() {
            let mut cells = vec![b.label.clone(), b.repetitions.to_string()];
            for &m in &shown {
                let name = metrics.get(m).map(String::as_str).unwrap_or("");
                cells.push(fmt_value(name, b.values.get(m).copied().unwrap_or(0.0)));
                if opts.baseline.is_some() {
                    cells.push(
                        all_gains
                            .get(m)
                            .and_then(|g| g.get(bi).copied().flatten())
                            .map(|g| format!("{:+.1}%", g * 100.0))
                            .unwrap_or_else(|| "–".into()),
                    );
                }
            }
            let _ = writeln!(md, "| {} |", cells.join(" | "));
            html.push_str("<tr>");
            for c in &cells {
                let _ = write!(html, "<td>{}</td>", html_escape(c));
            }
            html.push_str("</tr>\n");
        }
        html.push_str("</table>\n");
        // Plots
        let page_sizes: std::collections::BTreeSet<i64> =
            panel.bars.iter().map(|b| b.page_size).collect();
        for &m in &shown {
            let metric = metrics.get(m).cloned().unwrap_or_default();
            let file = format!("{slug}-{metric}.svg");
            let path = plots_dir.join(&file);
            // Configurations without this metric (simulated time on a real
            // device) are left out of its chart; times are shown in ms.
            let (scale, unit) = plot_unit(&metric);
            let bars: Vec<(String, f64)> = panel
                .bars
                .iter()
                .filter_map(|b| {
                    let v = b.values.get(m).copied().unwrap_or(0.0);
                    (v != 0.0).then(|| (b.label.clone(), v / scale))
                })
                .collect();
            bar_chart(&path, &title, &unit, &bars)?;
            let _ = writeln!(
                html,
                "<img src=\"plots/{file}\" alt=\"{} by configuration\">",
                html_escape(&metric)
            );
            summary.plots.push(path);
            if page_sizes.len() > 1 {
                let mut series: BTreeMap<String, Vec<(i64, f64)>> = BTreeMap::new();
                let (scale, unit) = plot_unit(&metric);
                for b in &panel.bars {
                    let v = b.values.get(m).copied().unwrap_or(0.0);
                    if v == 0.0 {
                        continue;
                    }
                    series
                        .entry(format!(
                            "{} · {}",
                            without_page_size(&b.index_name),
                            b.group
                        ))
                        .or_default()
                        .push((b.page_size, v / scale));
                }
                let file = format!("{slug}-{metric}-by-page-size.svg");
                let path = plots_dir.join(&file);
                line_chart(&path, &title, &unit, &series)?;
                let _ = writeln!(
                    html,
                    "<img src=\"plots/{file}\" alt=\"{} by page size\">",
                    html_escape(&metric)
                );
                summary.plots.push(path);
            }
        }
    }
    let corr = crate::simcorr::correlations(&mut store)?;
    summary.sim_vs_device = corr.len();
    if !corr.is_empty() {
        let about = "Spearman rank correlation, over the configurations run on both devices, \
                     of each simulator count with the real device's wall time (medians over \
                     repetitions): +1 when the simulator ranks the configurations exactly as \
                     the device does; – for fewer than 3 configurations or a constant side.";
        let _ = write!(
            md,
            "\n## Simulator vs device\n\n{about}\n\n{}",
            crate::simcorr::markdown(&corr)
        );
        let _ = writeln!(
            html,
            "<h2 id=\"sim-vs-device\">Simulator vs device</h2>\n<p>{}</p>\n{}",
            html_escape(about),
            crate::simcorr::html(&corr, html_escape)
        );
    }
    if let Some(target) = &opts.headline {
        let Some(baseline) = &opts.baseline else {
            return Err(Error::invalid(
                "a headline table needs a baseline (--baseline)",
            ));
        };
        let table = headline(&panels, &metrics, target, baseline);
        let p = out.join("headline.md");
        std::fs::write(&p, &table).map_err(|e| io_err(&p, e))?;
        summary.headline = Some(p);
        let _ = writeln!(
            html,
            "<h2>Headline: {} against {}</h2>\n<pre>{}</pre>",
            html_escape(target),
            html_escape(baseline),
            html_escape(&table)
        );
    }
    html.push_str("</body></html>\n");
    for (name, text) in [("summary.csv", &csv), ("summary.md", &md)] {
        let p = out.join(name);
        std::fs::write(&p, text).map_err(|e| io_err(&p, e))?;
        summary.tables.push(p);
    }
    std::fs::write(&summary.html, &html).map_err(|e| io_err(&summary.html, e))?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{run, RunOptions};
    use crate::workload::{Scale, Workload};

    const W: &str = r#"
name = "report-test"
[[dataset]]
name = "u"
generator = "uniform"
count = 400
order = "random"
[[index]]
name = "plain"
store = "plain"
page_size = [1024, 2048]
buffer = "8KiB"
device = "flashsim:preset=seed-tc58"
[[index]]
name = "efind"
store = "efind"
page_size = [1024, 2048]
buffer = "8KiB"
device = "flashsim:preset=seed-tc58"
[[step]]
kind = "build"
[[step]]
kind = "range_queries"
selectivity = "1%"
count = 10
"#;

    #[test]
    fn medians_and_baseline_variants() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(vec![]), 0.0);
        let bar = |name: &str, v: f64| Bar {
            label: name.into(),
            index_name: name.into(),
            group: "d (o)".into(),
            page_size: 4096,
            repetitions: 3,
            values: vec![v],
        };
        let panel = Panel {
            workload: "w".into(),
            scale: "smoke".into(),
            step_index: 0,
            step_kind: "build".into(),
            parameter: String::new(),
            bars: vec![
                bar("fast[device=mem:,fast.durability=none]", 10.0),
                bar("fast[device=file,fast.durability=none]", 20.0),
                bar("fast[device=file,fast.durability=group]", 40.0),
                bar("efind[device=file,efind.durability=group]", 30.0),
                bar("plain[device=file]", 50.0),
            ],
        };
        let table = headline(
            std::slice::from_ref(&panel),
            &["sim_time_ns".into()],
            "efind",
            "fast",
        );
        assert!(table.contains("| device=file, store.durability=group | 4 KiB | sim_time_ns | 0.000 ms | 0.000 ms | +25 % |"), "{table}");
        let g = gains(&panel, 0, "fast");
        // eFIND on file with group commit against FAST on file with group commit
        assert_eq!(g[3], Some(0.25));
        // plain (no durability) against a FAST configuration on the same device
        assert!(g[4].is_some_and(|x| x < 0.0));
        assert_eq!(g[0], Some(0.0));
    }

    #[test]
    fn report_has_tables_plots_and_gains() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.sqlite");
        let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
        let mut st = ResultsStore::open(&db).unwrap();
        run(&w, &mut st, &RunOptions::default()).unwrap();
        drop(st);
        let out = dir.path().join("report");
        let s = write_report(
            &ResultsLocation::Sqlite(db.clone()),
            &out,
            &ReportOptions {
                metrics: vec![],
                baseline: Some("plain".into()),
                headline: None,
            },
        )
        .unwrap();
        assert_eq!(s.panels, 2);
        let html = std::fs::read_to_string(&s.html).unwrap();
        // every plot exists, is SVG and is linked from the page
        assert!(!s.plots.is_empty());
        for p in &s.plots {
            let text = std::fs::read_to_string(p).unwrap();
            assert!(
                text.starts_with("<svg") || text.contains("<svg"),
                "{}",
                p.display()
            );
            assert!(text.contains("<rect") || text.contains("<polyline") || text.contains("<path"));
            let name = p.file_name().unwrap().to_str().unwrap();
            assert!(html.contains(name), "{name} not linked");
        }
        // page sizes vary: line charts exist
        assert!(s
            .plots
            .iter()
            .any(|p| p.to_str().unwrap().ends_with("by-page-size.svg")));
        // gains: (ref - v)/ref against the plain row of the same page size; 0 for plain itself
        let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
        let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let col = |h: &str| header.iter().position(|x| *x == h).unwrap();
        let (gi, vi, ci, pi) = (
            col("pages_written_gain"),
            col("pages_written"),
            col("configuration"),
            col("page_size"),
        );
        let rows: Vec<Vec<&str>> = csv
            .lines()
            .skip(1)
            .filter(|l| l.contains(",build,"))
            .map(|l| l.split(',').collect())
            .collect();
        let mut seen = 0;
        for f in &rows {
            let reference = rows
                .iter()
                .find(|r| r[ci].starts_with("plain") && r[pi] == f[pi])
                .unwrap();
            let rv: f64 = reference[vi].parse().unwrap();
            let v: f64 = f[vi].parse().unwrap();
            let g: f64 = f[gi].parse().unwrap();
            assert!((g - (rv - v) / rv).abs() < 1e-12, "{f:?}");
            if f[ci].starts_with("plain") {
                assert_eq!(g, 0.0);
            }
            seen += 1;
        }
        assert_eq!(seen, 4);
        assert!(std::fs::read_to_string(out.join("summary.md"))
            .unwrap()
            .contains("| configuration |"));
    }

    #[test]
    fn bad_metric_and_missing_store() {
        let dir = tempfile::tempdir().unwrap();
        let e = write_report(
            &ResultsLocation::Sqlite(dir.path().join("none.sqlite")),
            dir.path(),
            &ReportOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("does not exist"), "{e}");
        let db = dir.path().join("r.sqlite");
        ResultsStore::open(&db).unwrap();
        let e = write_report(
            &ResultsLocation::Sqlite(db.clone()),
            dir.path(),
            &ReportOptions {
                metrics: vec!["pages_written; DROP TABLE results".into()],
                baseline: None,
                headline: None,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown metric"), "{e}");
        let e = write_report(
            &ResultsLocation::Sqlite(db.clone()),
            dir.path(),
            &ReportOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no successful result"), "{e}");
        assert_eq!(without_page_size("a[page_size=1024,store=x]"), "a[store=x]");
        assert_eq!(without_page_size("a[page_size=1024]"), "a");
    }
}
