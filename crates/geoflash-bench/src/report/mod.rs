//! Reports from a results store, laid out as a paper's evaluation: per
//! workload step (and selectivity or k), figures first, then tables.
//!
//! - **Figures** (SVG, drawn by `plotters`, see [`figure`]): per metric,
//!   grouped bars with one group per page size (labelled 2, 4, …, 32 KiB)
//!   and one bar per configuration, as the seed papers' figures, in small
//!   multiples by insertion order (columns) and durability (rows); the
//!   legend in its own column; Okabe–Ito colours with a marker shape per
//!   configuration; every axis with its unit. With `--headline` and
//!   `--baseline`, the gains of the headline configuration over the
//!   baseline come first, as a figure of their own.
//! - **Tables**: per metric, configurations × page sizes (values are
//!   medians over repetitions; "—" where a value does not apply, such as
//!   simulated time on a real file); the full table of every configuration
//!   behind a `<details>` disclosure. Also written as CSV (`summary.csv`,
//!   empty fields where a value does not apply) and Markdown (`summary.md`).
//!
//! Gains are (ref − v)/ref against the baseline configuration with the same
//! dataset, order, page size and compatible parameters ([`gains`]).
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use geoflash::{Error, Result};

use crate::results::sql::Value;
use crate::results::{ResultsLocation, ResultsStore};

pub mod figure;
pub mod gains;
pub mod simcorr;
pub mod tables;
#[cfg(test)]
mod tests;

use figure::{Facet, GroupedBars, Mark};
use gains::{device_label, durability, push_new, variant};
use tables::html_escape;

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
    /// the headline (`headline.md` and the first figure); needs `baseline`.
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
    /// Rows of the simulator-vs-device view ([`simcorr`]): steps
    /// with configurations run on both a `flashsim:` and a `file` device.
    pub sim_vs_device: usize,
}

/// One bar of a panel: a configuration's median values over its repetitions.
#[derive(Debug, Clone)]
pub struct Bar {
    /// Configuration name (with its varied parameters).
    pub index_name: String,
    /// Insertion order of the dataset.
    pub order: String,
    /// The device spec it ran on (`flashsim:preset=seed-tc58`, `file`, …).
    pub device: String,
    /// "dataset (order)".
    pub group: String,
    /// Page size in bytes.
    pub page_size: i64,
    /// Repetitions the medians are over.
    pub repetitions: usize,
    /// Per metric: the median, or `None` where the metric does not apply.
    pub values: Vec<Option<f64>>,
    /// Per metric: the values of the repetitions the median is over (empty
    /// where the metric does not apply).
    pub samples: Vec<Vec<f64>>,
}

/// The results of one step (and parameter) of one workload.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Workload name.
    pub workload: String,
    /// Scale it ran at.
    pub scale: String,
    /// Step number.
    pub step_index: i64,
    /// Step kind (`build`, `range_queries`, …).
    pub step_kind: String,
    /// Step parameter (`selectivity=0.1%;predicate=intersects`, …).
    pub parameter: String,
    /// The configurations' results.
    pub bars: Vec<Bar>,
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

    /// The step and its first parameter ("range_queries selectivity=0.1%").
    pub fn step_label(&self) -> String {
        match self.parameter.split(';').next().filter(|p| !p.is_empty()) {
            Some(p) => format!("{} {p}", self.step_kind),
            None => self.step_kind.clone(),
        }
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

/// The name of an index configuration without its varied page size.
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
                page_size, CAST(device_simulated AS BIGINT), device, {}
         FROM results_full WHERE status = 'ok'
         ORDER BY workload, scale, step_index, parameter, config_id",
        cols.join(", ")
    );
    let rows = store.query(&sql, &[])?;
    // panel key -> (bar key -> the metric values of every repetition)
    type BarKey = (String, String, String, i64, String);
    type PanelKey = (String, String, i64, String, String);
    /// A bar and the metric values of its repetitions.
    type Samples = Vec<(BarKey, Vec<Option<f64>>)>;
    let mut panels: BTreeMap<PanelKey, Panel> = BTreeMap::new();
    let mut samples: BTreeMap<PanelKey, Samples> = BTreeMap::new();
    let mut order = Vec::new();
    for r in rows {
        let text = |i: usize| {
            r.get(i)
                .and_then(Value::as_str)
                .map(String::from)
                .ok_or_else(|| Error::results_store(format!("column {i} is not text")))
        };
        let int = |i: usize| {
            r.get(i)
                .and_then(Value::as_i64)
                .ok_or_else(|| Error::results_store(format!("column {i} is not an integer")))
        };
        let (workload, scale, step_index) = (text(0)?, text(1)?, int(2)?);
        let (step_kind, parameter, index_name) = (text(3)?, text(4)?, text(5)?);
        let (dataset, ord, page_size) = (text(6)?, text(7)?, int(8)?);
        let simulated = r.get(9).and_then(Value::as_i64).unwrap_or(0) != 0;
        let device = text(10)?;
        // NULL, or a simulator's metric on a real device: does not apply.
        let values: Vec<Option<f64>> = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let v = r.get(11 + i).and_then(Value::as_f64)?;
                (simulated || !tables::simulator_only(m)).then_some(v)
            })
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
            .push(((index_name, dataset, ord, page_size, device), values));
    }
    for (key, rows) in samples {
        let Some(panel) = panels.get_mut(&key) else {
            continue;
        };
        let mut bars: Vec<(BarKey, Vec<Vec<Option<f64>>>)> = Vec::new();
        for (bar, values) in rows {
            match bars.iter_mut().find(|(b, _)| *b == bar) {
                Some((_, v)) => v.push(values),
                None => bars.push((bar, vec![values])),
            }
        }
        for ((index_name, dataset, ord, page_size, device), reps) in bars {
            let samples: Vec<Vec<f64>> = (0..metrics.len())
                .map(|m| {
                    reps.iter()
                        .filter_map(|v| v.get(m).copied().flatten())
                        .collect()
                })
                .collect();
            let values = samples
                .iter()
                .map(|v| (!v.is_empty()).then(|| median(v.clone())))
                .collect();
            panel.bars.push(Bar {
                index_name,
                group: format!("{dataset} ({ord})"),
                order: ord,
                device,
                page_size,
                repetitions: reps.len(),
                values,
                samples,
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

/// A configuration's series in the figures: its name before `[` and its
/// varied parameters other than page size and durability (durability is a
/// facet), plus the dataset when a panel has several.
fn series_of(b: &Bar, with_dataset: bool) -> String {
    let base = b.index_name.split('[').next().unwrap_or("").to_string();
    let mut rest: Vec<String> = variant(&b.index_name)
        .into_iter()
        .filter(|(k, _)| k != "store.durability")
        .map(|(k, v)| {
            if k == "device" {
                device_label(&v)
            } else {
                format!("{k}={v}")
            }
        })
        .collect();
    if with_dataset {
        rest.push(b.group.split(" (").next().unwrap_or("").to_string());
    }
    if rest.is_empty() {
        base
    } else {
        format!("{base} · {}", rest.join(", "))
    }
}

/// The name of a configuration without its durability (`efind.durability`, `fast.durability`, …).
fn without_durability(name: &str) -> String {
    let Some((base, rest)) = name.split_once('[') else {
        return name.to_string();
    };
    let kept: Vec<&str> = rest
        .trim_end_matches(']')
        .split(',')
        .filter(|p| {
            p.split_once('=')
                .is_none_or(|(k, _)| !k.ends_with(".durability"))
        })
        .collect();
    if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}[{}]", kept.join(","))
    }
}

/// The steps that only read the index (their work does not depend on how
/// the index was made durable).
fn read_only(step_kind: &str) -> bool {
    matches!(step_kind, "range_queries" | "knn" | "point_queries")
}

/// True when, for every configuration of `bars` run under several values of
/// one varied parameter (`strip` removes it from the name), metric `m` has
/// the same value under each (and at least one configuration was run
/// under several).
fn same_across(bars: &[Bar], m: usize, strip: impl Fn(&Bar) -> String) -> bool {
    let mut seen: Vec<(String, &str, i64, Option<f64>)> = Vec::new();
    let mut repeated = false;
    for b in bars {
        let key = strip(b);
        let v = b.values.get(m).copied().flatten();
        match seen
            .iter()
            .find(|(k, g, p, _)| *k == key && *g == b.group && *p == b.page_size)
        {
            Some((_, _, _, w)) => {
                if *w != v {
                    return false;
                }
                repeated = true;
            }
            None => seen.push((key, &b.group, b.page_size, v)),
        }
    }
    repeated
}

/// Merges the bars whose names are equal once `strip` is applied: one bar
/// named so, its runs pooled (each metric's median over them), on `device`
/// (`None`: the first bar's).
fn merge_bars(bars: Vec<Bar>, strip: impl Fn(&Bar) -> String, device: Option<&str>) -> Vec<Bar> {
    let mut out: Vec<Bar> = Vec::new();
    for b in bars {
        let name = strip(&b);
        match out
            .iter_mut()
            .find(|o| o.index_name == name && o.group == b.group && o.page_size == b.page_size)
        {
            Some(o) => {
                o.repetitions += b.repetitions;
                for (mine, theirs) in o.samples.iter_mut().zip(b.samples) {
                    mine.extend(theirs);
                }
                o.values = o
                    .samples
                    .iter()
                    .map(|v| (!v.is_empty()).then(|| median(v.clone())))
                    .collect();
            }
            None => out.push(Bar {
                index_name: name,
                device: device.map_or_else(|| b.device.clone(), String::from),
                ..b
            }),
        }
    }
    out
}

/// The durabilities of a panel's configurations, if its step reads only
/// and every count among the panel's metrics (not a time) is the same under
/// each durability: then the figures pool the durabilities' runs instead of
/// drawing the same numbers once per durability.
fn pooled_durabilities(panel: &Panel, metrics: &[String]) -> Option<Vec<String>> {
    if !read_only(&panel.step_kind) {
        return None;
    }
    let counts: Vec<usize> = (0..metrics.len())
        .filter(|&m| metrics.get(m).is_some_and(|n| !n.ends_with("_ns")))
        .collect();
    let strip = |b: &Bar| without_durability(&b.index_name);
    if counts.is_empty() || !counts.iter().all(|&m| same_across(&panel.bars, m, strip)) {
        return None;
    }
    let mut all = Vec::new();
    for b in &panel.bars {
        if let Some(d) = durability(&b.index_name) {
            push_new(&mut all, &d);
        }
    }
    Some(all)
}

/// True for a metric of time measured by the host's clock (wall or CPU).
fn host_time(metric: &str) -> bool {
    metric.ends_with("_ns") && !tables::simulator_only(metric)
}

/// The bars of `panel` that have a value of metric `m`, with what would
/// draw the same numbers twice merged ([`panel_figure`]); a note for the
/// caption in `notes` for each merge.
fn drawn_bars(
    panel: &Panel,
    m: usize,
    metric: &str,
    pooled: Option<&[String]>,
    notes: &mut Vec<String>,
) -> Vec<Bar> {
    let mut bars: Vec<Bar> = panel
        .bars
        .iter()
        .filter(|b| b.values.get(m).copied().flatten().is_some())
        .cloned()
        .collect();
    if let Some(ds) = pooled {
        bars = merge_bars(bars, |b| without_durability(&b.index_name), None);
        notes.push(format!(
            "durabilities {} pooled: this step reads only and its page counts are the same under each",
            ds.join(" and ")
        ));
    }
    let devices: BTreeSet<&str> = bars.iter().map(|b| b.device.as_str()).collect();
    if devices.len() > 1
        && !metric.ends_with("_ns")
        && same_across(&bars, m, |b| without_param(&b.index_name, "device"))
    {
        let all = devices
            .iter()
            .map(|d| device_label(d))
            .collect::<Vec<_>>()
            .join(" and ");
        bars = merge_bars(bars, |b| without_param(&b.index_name, "device"), Some(""));
        notes.push(format!("the same on {all}: drawn once"));
    }
    bars
}

/// The figure of metric `m` of a panel and the notes its caption needs:
/// one group per page size (no x axis for one page size), one bar per
/// configuration ([`series_of`]), facets by insertion order (columns) and
/// durability (rows; a configuration without durability appears in every
/// row). What would draw the same numbers twice is drawn once: the
/// durabilities of a read-only step whose counts do not depend on them
/// (`pooled`, their runs pooled), and the devices of a metric with the
/// same value on each. Wall time on a simulator is labelled as the host's
/// CPU time. Style numbers come from `styles` (shared by all figures).
fn panel_figure(
    panel: &Panel,
    m: usize,
    metric: &str,
    styles: &BTreeMap<String, usize>,
    pooled: Option<&[String]>,
) -> (GroupedBars, Vec<String>) {
    let mut notes = Vec::new();
    let bars = drawn_bars(panel, m, metric, pooled, &mut notes);
    if host_time(metric) && bars.iter().any(|b| b.device.starts_with("flashsim")) {
        notes.push(
            "on the simulator this is the host's time to simulate (CPU, no device time; its simulated time is another figure), on a file the real device's"
                .into(),
        );
    }
    let datasets: BTreeSet<&str> = bars
        .iter()
        .map(|b| b.group.split(" (").next().unwrap_or(""))
        .collect();
    let with_dataset = datasets.len() > 1;
    let sizes: Vec<i64> = bars
        .iter()
        .map(|b| b.page_size)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut orders: Vec<String> = Vec::new();
    let mut durabilities: BTreeSet<String> = BTreeSet::new();
    let mut series: Vec<String> = Vec::new();
    for b in &bars {
        push_new(&mut orders, &b.order);
        if let Some(d) = durability(&b.index_name) {
            durabilities.insert(d);
        }
        push_new(&mut series, &series_of(b, with_dataset));
    }
    series.sort_by_key(|s| styles.get(s).copied().unwrap_or(usize::MAX));
    let rows: Vec<Option<String>> = if durabilities.is_empty() {
        vec![None]
    } else {
        durabilities.into_iter().map(Some).collect()
    };
    let scale = tables::scale(metric);
    let mut facets = Vec::new();
    for d in &rows {
        for o in &orders {
            let mut title = format!("order: {o}");
            if let Some(d) = d {
                title.push_str(&format!(" · durability: {d}"));
            }
            let marks = bars
                .iter()
                .filter(|b| b.order == *o)
                .filter(|b| match (d, durability(&b.index_name)) {
                    (Some(d), Some(mine)) => *d == mine,
                    _ => true,
                })
                .filter_map(|b| {
                    let v = b.values.get(m).copied().flatten()?;
                    let g = sizes.iter().position(|&s| s == b.page_size)?;
                    let s = series
                        .iter()
                        .position(|s| *s == series_of(b, with_dataset))?;
                    let runs = b
                        .samples
                        .get(m)
                        .map(|r| r.iter().map(|x| x / scale).collect())
                        .unwrap_or_default();
                    Some(Mark {
                        runs,
                        ..Mark::new(g, s, v / scale)
                    })
                })
                .collect();
            facets.push(Facet { title, bars: marks });
        }
    }
    let single = sizes.len() == 1;
    if single {
        notes.push(format!(
            "{} pages",
            sizes
                .first()
                .map_or(String::new(), |&s| tables::page_size(s))
        ));
    }
    let on_sim_wall = host_time(metric);
    let fig = GroupedBars {
        groups: sizes.iter().map(|&s| tables::page_size(s)).collect(),
        series: series
            .into_iter()
            .map(|s| {
                let st = styles.get(&s).copied().unwrap_or(0);
                let shown = if on_sim_wall && s.contains("simulator") {
                    format!("{s} — host CPU")
                } else {
                    s
                };
                (shown, st)
            })
            .collect(),
        facets,
        columns: orders.len().max(1),
        x_desc: if single {
            String::new()
        } else {
            "page size (KiB)".into()
        },
        y_desc: tables::label(metric),
    };
    (fig, notes)
}

/// Writes `fig` to `plots/<file>`, adds it to the summary and returns its
/// `<figure>` element.
fn figure_html(
    out: &Path,
    file: &str,
    fig: &GroupedBars,
    caption: &str,
    summary: &mut ReportSummary,
) -> Result<String> {
    let path = out.join("plots").join(file);
    figure::draw(&path, fig)?;
    summary.plots.push(path);
    let (w, h) = fig.size();
    Ok(format!(
        "<figure><img src=\"plots/{file}\" width=\"{w}\" height=\"{h}\" alt=\"{c}\"><figcaption>{c}</figcaption></figure>\n",
        c = html_escape(caption)
    ))
}

/// The page's style: a text column as wide as the widest figure
/// ([`figure::PAGE_WIDTH`]), so figures are shown at the size they are
/// drawn; wide tables scroll inside the column instead of being cut off.
const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;padding:0 1em;max-width:960px;color:#222;line-height:1.4}\
h2{border-top:1px solid #ccc;padding-top:0.6em;margin-top:2em}\
figure{margin:1em 0}figure img{max-width:100%;height:auto;display:block}\
.wide{overflow-x:auto;max-width:100%}.finding{background:#fff4e5;border-left:4px solid #D55E00;padding:0.4em 0.8em}\
figcaption{font-size:0.9em;color:#444;margin-top:0.3em}\
table{border-collapse:collapse;margin:0.8em 0;font-size:0.9em}\
caption{text-align:left;font-weight:bold;padding:0.3em 0}\
td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}\
td:first-child,th:first-child{text-align:left}\
details{margin:0.8em 0}summary{cursor:pointer;color:#0072B2}\
nav li{margin:0.15em 0}";

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
    if opts.headline.is_some() && opts.baseline.is_none() {
        return Err(Error::invalid(
            "a headline table needs a baseline (--baseline)",
        ));
    }
    let mut store = ResultsStore::open_existing(results)?;
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
    let corr = simcorr::correlations(&mut store)?;
    let mut r = Report {
        out,
        opts,
        metrics: &metrics,
        styles: series_styles(&panels),
        csv: csv_header(&metrics, opts.baseline.is_some()),
        md: String::from("# geoflash report\n"),
        html: String::new(),
        summary: ReportSummary {
            html: out.join("index.html"),
            panels: panels.len(),
            sim_vs_device: corr.len(),
            ..ReportSummary::default()
        },
    };
    r.intro(results, &panels, !corr.is_empty());
    if let (Some(target), Some(baseline)) = (&opts.headline, &opts.baseline) {
        r.headline(&panels, target, baseline)?;
    }
    if !corr.is_empty() {
        r.sim_vs_device(&corr);
    }
    for panel in &panels {
        r.panel(panel)?;
    }
    r.finish()
}

/// One colour and marker per configuration, the same in every figure.
fn series_styles(panels: &[Panel]) -> BTreeMap<String, usize> {
    let mut styles: BTreeMap<String, usize> = BTreeMap::new();
    let (mut bases, mut rests): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for p in panels {
        let several = p
            .bars
            .iter()
            .map(|b| b.group.split(" (").next().unwrap_or(""))
            .collect::<BTreeSet<_>>()
            .len()
            > 1;
        for b in &p.bars {
            // and the configuration drawn once for all devices (panel_figure)
            let all_devices = Bar {
                index_name: without_param(&b.index_name, "device"),
                ..b.clone()
            };
            for key in [series_of(b, several), series_of(&all_devices, several)] {
                // a hue per configuration, a variant (marker) per device and other settings
                let (base, rest) = key.split_once(" · ").unwrap_or((key.as_str(), ""));
                // (drawn once for all devices: the first variant's marker)
                push_new(&mut bases, base);
                if !rest.is_empty() {
                    push_new(&mut rests, rest);
                }
                let hue = bases.iter().position(|x| x == base).unwrap_or(0);
                let variant = rests.iter().position(|x| x == rest).unwrap_or(0);
                styles
                    .entry(key.clone())
                    .or_insert(figure::style_number(hue, variant));
            }
        }
    }
    styles
}

/// The header line of `summary.csv`: each metric, and its gain with a baseline.
fn csv_header(metrics: &[String], gains: bool) -> String {
    let mut csv = String::from(
        "workload,scale,step_index,step_kind,parameter,configuration,page_size,repetitions",
    );
    for m in metrics {
        csv.push(',');
        csv.push_str(m);
        if gains {
            csv.push_str(&format!(",{m}_gain"));
        }
    }
    csv.push('\n');
    csv
}

/// A report being written: its three documents (the CSV and Markdown
/// tables and the HTML page) and what it wrote so far.
struct Report<'a> {
    out: &'a Path,
    opts: &'a ReportOptions,
    metrics: &'a [String],
    /// The style number of each series ([`series_styles`]).
    styles: BTreeMap<String, usize>,
    csv: String,
    md: String,
    html: String,
    summary: ReportSummary,
}

impl Report<'_> {
    /// The page's head, its introduction and its table of contents.
    fn intro(&mut self, results: &ResultsLocation, panels: &[Panel], sim_vs_device: bool) {
        let html = &mut self.html;
        let _ = writeln!(
            html,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>geoflash report</title>\n<style>{STYLE}</style></head><body>\n<h1>geoflash report</h1>"
        );
        let _ = writeln!(
            html,
            "<p>Results: <code>{}</code>. Values are medians over repetitions; “{}” marks a value that does not apply (a simulator's count on a real device). Tables: <a href=\"summary.csv\">summary.csv</a>, <a href=\"summary.md\">summary.md</a>{}.</p>",
            html_escape(&results.to_string()),
            tables::NOT_APPLICABLE,
            match &self.opts.baseline {
                Some(b) => format!(". Gains are (ref − value)/ref against <b>{}</b>", html_escape(b)),
                None => String::new(),
            }
        );
        html.push_str("<nav><ul>\n");
        if let (Some(t), Some(b)) = (&self.opts.headline, &self.opts.baseline) {
            let _ = writeln!(
                html,
                "<li><a href=\"#headline\">Gains of {} over {}</a></li>",
                html_escape(t),
                html_escape(b)
            );
        }
        if sim_vs_device {
            html.push_str("<li><a href=\"#sim-vs-device\">Simulator vs device</a></li>\n");
        }
        for p in panels {
            let _ = writeln!(
                html,
                "<li><a href=\"#{}\">{}</a></li>",
                p.slug(),
                html_escape(&p.title())
            );
        }
        html.push_str("</ul></nav>\n");
    }

    /// The headline: gains of `target` over `baseline` (`headline.md`, a
    /// figure, tables) and where a third configuration beats both.
    fn headline(&mut self, panels: &[Panel], target: &str, baseline: &str) -> Result<()> {
        let rows = gains::headline_rows(panels, self.metrics, target, baseline);
        let table = gains::headline_markdown(&rows, target, baseline);
        let p = self.out.join("headline.md");
        std::fs::write(&p, &table).map_err(|e| io_err(&p, e))?;
        self.summary.headline = Some(p);
        let _ = writeln!(
            self.html,
            "<h2 id=\"headline\">Gains of {t} over {b}</h2>",
            t = html_escape(target),
            b = html_escape(baseline)
        );
        self.findings(panels, target, baseline);
        let fig = gains::headline_figure(&rows, target, baseline);
        if !fig.is_empty() {
            let caption = format!(
                "Gain (ref − value)/ref of {target} over {baseline} per workload step, in % (positive: {target} is better), on the first shown metric that applies to each configuration (simulated time on the simulator, wall time on a real device); facets by insertion order and durability."
            );
            let img = figure_html(self.out, "headline.svg", &fig, &caption, &mut self.summary)?;
            self.html.push_str(&img);
        }
        self.html.push_str(
            &gains::headline_pivot(&rows)
                .html(Some("Gains by page size (configurations × page size)")),
        );
        let _ = writeln!(
            self.html,
            "<details><summary>Headline table, one row per comparison (headline.md)</summary>{}</details>",
            gains::headline_table(&rows, target, baseline).html(None)
        );
        Ok(())
    }

    /// Where a third configuration beats both `target` and `baseline`
    /// (query steps behind a disclosure).
    fn findings(&mut self, panels: &[Panel], target: &str, baseline: &str) {
        let findings = gains::findings(panels, self.metrics, target, baseline);
        if findings.is_empty() {
            return;
        }
        let html = &mut self.html;
        let _ = writeln!(
            html,
            "<div class=\"finding\"><p><b>Neither {t} nor {b} is best everywhere.</b> Where a third configuration beats both (each at its best durability, on the metric the gains below compare):</p><ul>",
            t = html_escape(target),
            b = html_escape(baseline)
        );
        let queries = findings.iter().filter(|f| f.0).count();
        for (_, f) in findings.iter().filter(|f| !f.0) {
            let _ = writeln!(html, "<li>{}</li>", html_escape(f));
        }
        html.push_str("</ul>");
        if queries > 0 {
            let _ = write!(
                html,
                "<details><summary>and in {queries} comparisons of query steps</summary><ul>"
            );
            for (_, f) in findings.iter().filter(|f| f.0) {
                let _ = writeln!(html, "<li>{}</li>", html_escape(f));
            }
            html.push_str("</ul></details>");
        }
        html.push_str("</div>\n");
        let _ = write!(
            self.md,
            "\n## Where neither {target} nor {baseline} is best\n\n"
        );
        for (_, f) in &findings {
            let _ = writeln!(self.md, "- {f}");
        }
    }

    /// How well the simulator's counts rank configurations as the device does.
    fn sim_vs_device(&mut self, corr: &[simcorr::Correlation]) {
        let about = "Spearman rank correlation, over the configurations run on both devices, \
                     of each simulator count with the real device's wall time (medians over \
                     repetitions): +1 when the simulator ranks the configurations exactly as \
                     the device does; – for fewer than 3 configurations or a constant side.";
        let _ = write!(
            self.md,
            "\n## Simulator vs device\n\n{about}\n\n{}",
            simcorr::markdown(corr)
        );
        let _ = writeln!(
            self.html,
            "<h2 id=\"sim-vs-device\">Simulator vs device</h2>\n<p>{}</p>\n{}",
            html_escape(about),
            simcorr::html(corr, html_escape)
        );
    }

    /// One workload step: its CSV rows, figures and tables.
    fn panel(&mut self, panel: &Panel) -> Result<()> {
        let metrics = self.metrics;
        let title = panel.title();
        let slug = panel.slug();
        let shown: Vec<usize> = (0..metrics.len())
            .filter(|&m| {
                panel
                    .bars
                    .iter()
                    .any(|b| b.values.get(m).copied().flatten().is_some_and(|v| v != 0.0))
            })
            .collect();
        let all_gains: Option<Vec<Vec<Option<f64>>>> = self.opts.baseline.as_ref().map(|b| {
            (0..metrics.len())
                .map(|m| gains::gains(panel, m, b))
                .collect()
        });
        self.csv_rows(panel, all_gains.as_deref());
        let _ = writeln!(self.html, "<h2 id=\"{slug}\">{}</h2>", html_escape(&title));
        self.figures(panel, &shown)?;
        // Then the pivoted tables, and the full table behind a disclosure.
        let _ = writeln!(self.md, "\n## {title}\n");
        for &m in &shown {
            let metric = metrics.get(m).map(String::as_str).unwrap_or("");
            let t = tables::pivot(panel, m, metric);
            let caption = format!("{} (configurations × page size)", tables::label(metric));
            self.html.push_str(&t.html(Some(&caption)));
            let _ = write!(self.md, "\n**{caption}**\n\n{}", t.markdown());
        }
        let full = tables::full(panel, &shown, metrics, all_gains.as_deref());
        let _ = writeln!(
            self.html,
            "<details><summary>Full table: all {} configurations of this step{}</summary>{}</details>",
            panel.bars.len(),
            if all_gains.is_some() { ", with gains" } else { "" },
            full.html(None)
        );
        let _ = write!(self.md, "\n**Full table**\n\n{}", full.markdown());
        Ok(())
    }

    /// The CSV rows of `panel`: every metric; empty where it does not apply.
    fn csv_rows(&mut self, panel: &Panel, all_gains: Option<&[Vec<Option<f64>>]>) {
        let csv = &mut self.csv;
        for (bi, b) in panel.bars.iter().enumerate() {
            let _ = write!(
                csv,
                "{},{},{},{},{},{},{},{}",
                tables::csv_field(&panel.workload),
                tables::csv_field(&panel.scale),
                panel.step_index,
                tables::csv_field(&panel.step_kind),
                tables::csv_field(&panel.parameter),
                tables::csv_field(&format!("{} · {}", b.index_name, b.group)),
                b.page_size,
                b.repetitions
            );
            for (m, v) in b.values.iter().enumerate() {
                let _ = write!(csv, ",{}", v.map(|v| v.to_string()).unwrap_or_default());
                if let Some(g) = all_gains {
                    let g = g.get(m).and_then(|g| g.get(bi).copied().flatten());
                    let _ = write!(csv, ",{}", g.map(|g| g.to_string()).unwrap_or_default());
                }
            }
            csv.push('\n');
        }
    }

    /// The figures of `panel`, one per metric `shown`.
    fn figures(&mut self, panel: &Panel, shown: &[usize]) -> Result<()> {
        let slug = panel.slug();
        let pooled = pooled_durabilities(panel, self.metrics);
        for &m in shown {
            let metric = self.metrics.get(m).map(String::as_str).unwrap_or("");
            let (fig, notes) = panel_figure(panel, m, metric, &self.styles, pooled.as_deref());
            if fig.is_empty() {
                continue;
            }
            let mut caption = format!(
                "{} by {}configuration — {}; bars: medians over repetitions, dots: the runs; facets by insertion order{}",
                tables::label(metric),
                if fig.x_desc.is_empty() { "" } else { "page size and " },
                panel.step_label(),
                if fig.facets.len() > fig.columns { " and durability" } else { "" }
            );
            for n in &notes {
                caption.push_str("; ");
                caption.push_str(n);
            }
            caption.push('.');
            let img = figure_html(
                self.out,
                &format!("{slug}-{metric}.svg"),
                &fig,
                &caption,
                &mut self.summary,
            )?;
            self.html.push_str(&img);
        }
        Ok(())
    }

    /// Writes `summary.csv`, `summary.md` and `index.html`.
    fn finish(mut self) -> Result<ReportSummary> {
        self.html.push_str("</body></html>\n");
        for (name, text) in [("summary.csv", &self.csv), ("summary.md", &self.md)] {
            let p = self.out.join(name);
            std::fs::write(&p, text).map_err(|e| io_err(&p, e))?;
            self.summary.tables.push(p);
        }
        let summary = self.summary;
        std::fs::write(&summary.html, &self.html).map_err(|e| io_err(&summary.html, e))?;
        Ok(summary)
    }
}
