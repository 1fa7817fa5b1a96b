//! Gains over a baseline: which baseline configuration each bar is compared
//! with, the gain (ref − v)/ref, and the headline (the gains of one
//! configuration over the baseline) as rows, a Markdown table, a pivoted
//! table and a figure.
use std::collections::{BTreeMap, BTreeSet};

use super::figure::{Facet, GroupedBars, Mark};
use super::tables::{self, Table};
use super::{Bar, Panel};

/// The varied parameters of a configuration name (`efind[device=file,efind.durability=none]`)
/// without its page size, store-specific keys (`efind.x`, `fast.x`) renamed
/// `store.x` so that the same setting of two stores compares equal.
pub fn variant(name: &str) -> BTreeMap<String, String> {
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

/// The durability of a configuration (`store.durability`), if it has one.
pub fn durability(name: &str) -> Option<String> {
    variant(name).remove("store.durability")
}

/// True if configuration `index_name` is `baseline` or one of its variants.
pub fn is_baseline(index_name: &str, baseline: &str) -> bool {
    index_name == baseline || index_name.split('[').next() == Some(baseline)
}

/// The baseline bar of `b`: a configuration of the baseline with the same
/// dataset, order, page size and device whose varied parameters (device,
/// durability, …) do not contradict `b`'s, the one sharing the most of them
/// (so `efind[device=file,efind.durability=none]` is compared with
/// `fast[device=file,fast.durability=none]`, not with FAST on another device).
pub fn reference_of<'a>(panel: &'a Panel, b: &Bar, baseline: &str) -> Option<&'a Bar> {
    let mine = variant(&b.index_name);
    panel
        .bars
        .iter()
        .filter(|r| {
            is_baseline(&r.index_name, baseline)
                && r.group == b.group
                && r.page_size == b.page_size
                && r.device == b.device
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

/// Gain of each bar over its baseline bar ([`reference_of`]) as (ref − v)/ref;
/// `None` where either value does not apply or the reference is 0.
pub fn gains(panel: &Panel, metric: usize, baseline: &str) -> Vec<Option<f64>> {
    panel
        .bars
        .iter()
        .map(|b| {
            let rv = (*reference_of(panel, b, baseline)?.values.get(metric)?)?;
            let v = (*b.values.get(metric)?)?;
            (rv != 0.0).then(|| (rv - v) / rv)
        })
        .collect()
}

/// One row of the headline: a configuration of the target against its
/// baseline configuration on one step, dataset (order) and page size.
#[derive(Debug, Clone)]
pub struct HeadlineRow {
    /// The step (and its first parameter).
    pub step: String,
    /// Dataset (order).
    pub group: String,
    /// Insertion order.
    pub order: String,
    /// Durability, when the configuration has one.
    pub durability: Option<String>,
    /// The other varied parameters (device, …), `k=v, …`.
    pub rest: String,
    /// Page size in bytes.
    pub page_size: i64,
    /// The metric compared.
    pub metric: String,
    /// The baseline's value.
    pub reference: f64,
    /// The target's value.
    pub value: f64,
    /// (reference − value) / reference, when the reference is not 0.
    pub gain: Option<f64>,
}

/// The headline rows: per panel, per configuration of `target`, the first
/// of `metrics` that applies to it and its baseline and is not 0 for it
/// (simulated time on a simulator, wall time on a real device, …).
pub fn headline_rows(
    panels: &[Panel],
    metrics: &[String],
    target: &str,
    baseline: &str,
) -> Vec<HeadlineRow> {
    let mut out = Vec::new();
    for panel in panels {
        for b in panel
            .bars
            .iter()
            .filter(|b| is_baseline(&b.index_name, target))
        {
            let Some(r) = reference_of(panel, b, baseline) else {
                continue;
            };
            let found = b.values.iter().enumerate().find_map(|(m, v)| {
                let v = (*v).filter(|v| *v != 0.0)?;
                let rv = (*r.values.get(m)?)?;
                Some((metrics.get(m)?.clone(), rv, v))
            });
            let Some((metric, rv, v)) = found else {
                continue;
            };
            let mut var = variant(&b.index_name);
            let durability = var.remove("store.durability");
            out.push(HeadlineRow {
                step: panel.step_label(),
                group: b.group.clone(),
                order: b.order.clone(),
                durability,
                rest: var
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                page_size: b.page_size,
                metric,
                reference: rv,
                value: v,
                gain: (rv != 0.0).then(|| (rv - v) / rv),
            });
        }
    }
    out
}

/// The headline as a Markdown table, one row per [`HeadlineRow`].
pub fn headline_markdown(rows: &[HeadlineRow], target: &str, baseline: &str) -> String {
    headline_table(rows, target, baseline).markdown()
}

/// The headline table, one row per [`HeadlineRow`].
pub fn headline_table(rows: &[HeadlineRow], target: &str, baseline: &str) -> Table {
    Table {
        header: vec![
            "step".into(),
            "dataset (order)".into(),
            format!("{target} configuration"),
            "page size".into(),
            "metric".into(),
            baseline.into(),
            target.into(),
            "gain".into(),
        ],
        rows: rows
            .iter()
            .map(|r| {
                let mut shown = r.rest.clone();
                if let Some(d) = &r.durability {
                    if !shown.is_empty() {
                        shown.push_str(", ");
                    }
                    shown.push_str(&format!("store.durability={d}"));
                }
                vec![
                    r.step.clone(),
                    r.group.clone(),
                    shown,
                    tables::page_size(r.page_size),
                    tables::label(&r.metric),
                    tables::value(&r.metric, Some(r.reference)),
                    tables::value(&r.metric, Some(r.value)),
                    tables::gain(r.gain),
                ]
            })
            .collect(),
    }
}

/// The series of a headline row in the figure and the pivot: the varied
/// parameters other than durability and the metric ("device=file · wall
/// time"), with the page size when there are several.
fn series_of(r: &HeadlineRow, several_sizes: bool) -> String {
    let rest = shown_variant(&r.rest);
    let mut s = if rest.is_empty() {
        tables::short_label(&r.metric)
    } else {
        format!("{rest} · {}", tables::short_label(&r.metric))
    };
    if several_sizes {
        s = format!("{} · {s}", tables::page_size(r.page_size));
    }
    s
}

/// The facet of a headline row: (order, durability).
fn facet_of(r: &HeadlineRow) -> (String, String) {
    (r.order.clone(), r.durability.clone().unwrap_or_default())
}

/// The headline as a figure: the gain in % per step (x groups), one bar per
/// series (`series_of`), facets by insertion order (columns) and
/// durability (rows).
pub fn headline_figure(rows: &[HeadlineRow], target: &str, baseline: &str) -> GroupedBars {
    let several = rows
        .iter()
        .map(|r| r.page_size)
        .collect::<BTreeSet<_>>()
        .len()
        > 1;
    let mut steps: Vec<String> = Vec::new();
    let mut series: Vec<String> = Vec::new();
    let mut orders: Vec<String> = Vec::new();
    let mut durabilities: BTreeSet<String> = BTreeSet::new();
    for r in rows {
        push_new(&mut steps, &r.step);
        push_new(&mut series, &series_of(r, several));
        push_new(&mut orders, &r.order);
        durabilities.insert(r.durability.clone().unwrap_or_default());
    }
    let mut facets = Vec::new();
    for d in &durabilities {
        for o in &orders {
            let mut title = format!("order: {o}");
            if !d.is_empty() {
                title.push_str(&format!(" · durability: {d}"));
            }
            let bars = rows
                .iter()
                .filter(|r| facet_of(r) == (o.clone(), d.clone()))
                .filter_map(|r| {
                    let g = steps.iter().position(|s| *s == r.step)?;
                    let s = series.iter().position(|s| *s == series_of(r, several))?;
                    Some(Mark::new(g, s, r.gain? * 100.0))
                })
                .collect();
            facets.push(Facet { title, bars });
        }
    }
    GroupedBars {
        groups: steps,
        series: series
            .into_iter()
            .enumerate()
            // a hue and a marker of its own for each series
            .map(|(i, s)| (s, super::figure::style_number(i, i)))
            .collect(),
        facets,
        columns: orders.len().max(1),
        x_desc: "workload step".into(),
        y_desc: format!("gain of {target} over {baseline} (%)"),
    }
}

/// The headline pivoted: one row per step, dataset (order), durability and
/// series, one column per page size, cells the gain.
pub fn headline_pivot(rows: &[HeadlineRow]) -> Table {
    let sizes: BTreeSet<i64> = rows.iter().map(|r| r.page_size).collect();
    let mut header: Vec<String> = ["step", "dataset (order)", "durability", "compared on"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    header.extend(sizes.iter().map(|&s| tables::page_size(s)));
    let mut out: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for r in rows {
        let key = vec![
            r.step.clone(),
            r.group.clone(),
            r.durability
                .clone()
                .unwrap_or_else(|| tables::NOT_APPLICABLE.into()),
            series_of(r, false),
        ];
        let col = sizes.iter().position(|&s| s == r.page_size).unwrap_or(0);
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, cells)) => cells[col] = tables::gain(r.gain),
            None => {
                let mut cells = vec![tables::NOT_APPLICABLE.to_string(); sizes.len()];
                cells[col] = tables::gain(r.gain);
                out.push((key, cells));
            }
        }
    }
    Table {
        header,
        rows: out
            .into_iter()
            .map(|(k, c)| k.into_iter().chain(c).collect())
            .collect(),
    }
}

/// A device spec for people: `flashsim:preset=seed-tc58` → "simulator
/// (seed-tc58)", `file` → "file", `file?direct=false` → "file (buffered)";
/// anything else as it is.
pub fn device_label(spec: &str) -> String {
    if let Some(rest) = spec.strip_prefix("flashsim") {
        let preset = rest
            .trim_start_matches(':')
            .split([',', '&', '?'])
            .find_map(|p| p.strip_prefix("preset="));
        return match preset {
            Some(p) => format!("simulator ({p})"),
            None => "simulator".into(),
        };
    }
    match spec {
        "file" | "file?direct=true" => "file".into(),
        "file?direct=false" => "file (buffered)".into(),
        _ => spec.into(),
    }
}

/// Varied parameters `k=v, …` for people: a device by [`device_label`]
/// (`device=file, store.durability=none` → `file, store.durability=none`).
pub fn shown_variant(rest: &str) -> String {
    rest.split(", ")
        .filter(|p| !p.is_empty())
        .map(|p| match p.strip_prefix("device=") {
            Some(d) => device_label(d),
            None => p.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The name of a configuration before its `[`.
fn base_name(index_name: &str) -> &str {
    index_name.split('[').next().unwrap_or(index_name)
}

/// What a reader of the headline must not miss: per step, dataset (order),
/// device and page size, a configuration that is neither `target` nor
/// `baseline` but does better than both on the metric the headline compares
/// there (the first of `metrics` that applies to the target and is not 0:
/// simulated time on a simulator, wall time on a real device), each
/// configuration at its best variant (durability, …). One sentence each,
/// with whether its step only reads (`true`: a query step).
pub fn findings(
    panels: &[Panel],
    metrics: &[String],
    target: &str,
    baseline: &str,
) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for panel in panels {
        // (group, device, page size) in the panel's order
        let mut cells: Vec<(&str, &str, i64)> = Vec::new();
        for b in &panel.bars {
            let c = (b.group.as_str(), b.device.as_str(), b.page_size);
            if !cells.contains(&c) {
                cells.push(c);
            }
        }
        for (group, device, size) in cells {
            let here: Vec<&Bar> = panel
                .bars
                .iter()
                .filter(|b| b.group == group && b.device == device && b.page_size == size)
                .collect();
            let applies =
                |m: usize, b: &&Bar| b.values.get(m).copied().flatten().filter(|v| *v != 0.0);
            let Some(m) = (0..metrics.len()).find(|&m| {
                here.iter()
                    .any(|b| is_baseline(&b.index_name, target) && applies(m, b).is_some())
            }) else {
                continue;
            };
            // each configuration's best value on metric m
            let mut best: Vec<(&str, f64)> = Vec::new();
            for b in &here {
                let Some(v) = b.values.get(m).copied().flatten() else {
                    continue;
                };
                let name = base_name(&b.index_name);
                match best.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, x)) => *x = x.min(v),
                    None => best.push((name, v)),
                }
            }
            let of = |n: &str| best.iter().find(|(b, _)| *b == n).map(|x| x.1);
            let (Some(t), Some(r)) = (of(target), of(baseline)) else {
                continue;
            };
            let Some(&(winner, w)) = best.iter().min_by(|a, b| a.1.total_cmp(&b.1)) else {
                continue;
            };
            if winner == target || winner == baseline || w >= t.min(r) {
                continue;
            }
            let metric = metrics.get(m).map(String::as_str).unwrap_or("");
            let unit = if metric.ends_with("_ns") { " ms" } else { "" };
            let v = |x: f64| format!("{}{unit}", tables::value(metric, Some(x)));
            out.push((super::read_only(&panel.step_kind), format!(
                "{step}, {group}, {device}, {size}: {winner} beats both {target} and {baseline} on {what} ({wv} against {tv} and {rv}).",
                step = panel.step_label(),
                device = device_label(device),
                size = tables::page_size(size),
                what = tables::short_label(metric),
                wv = v(w),
                tv = v(t),
                rv = v(r),
            )));
        }
    }
    out
}

/// Appends `s` to `v` unless it is there already.
pub fn push_new(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}
