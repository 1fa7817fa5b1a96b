//! Parsing: workload TOML into the [`Workload`] model. The file is first
//! read into a raw form that keeps every value's span, then each
//! `[[dataset]]`, `[[index]]` and `[[step]]` is checked and converted
//! (`dataset`, `index`, `step`), so that every error names the file, the
//! line and the key (`values`).
use std::collections::HashSet;
use std::path::Path;

use geoflash::{Error, Result};
use serde::Deserialize;
use toml::Spanned;

use crate::generate::GeometryKind;
use crate::workload::model::{DatasetSource, Scale, Step, Workload};

mod dataset;
mod index;
mod step;
mod values;

use values::Ctx;

/// A workload file as read, each value with its span.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    repetitions: Option<Spanned<i64>>,
    #[serde(default, rename = "dataset")]
    datasets: Vec<Spanned<RawDataset>>,
    #[serde(default, rename = "index")]
    indexes: Vec<Spanned<RawIndex>>,
    #[serde(default, rename = "step")]
    steps: Vec<Spanned<RawStep>>,
}

/// An optional value with its span: a value, a list or a per-scale table.
type Val = Option<Spanned<toml::Value>>;

/// A `[[dataset]]` entry as read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDataset {
    name: Spanned<String>,
    generator: Option<Spanned<String>>,
    file: Option<Spanned<String>>,
    layer: Option<Spanned<String>>,
    postgis: Option<Spanned<toml::Table>>,
    geometry: Val,
    count: Val,
    seed: Val,
    order: Val,
    params: Option<Spanned<toml::Table>>,
}

/// An `[[index]]` entry as read; every key may hold a list.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIndex {
    name: Spanned<String>,
    kind: Val,
    split: Val,
    page_size: Val,
    max_entries: Val,
    reinsert: Val,
    store: Val,
    buffer: Val,
    buffer_policy: Val,
    device: Val,
    reads: Val,
    journal: Val,
    efind: Option<Spanned<toml::Table>>,
    fast: Option<Spanned<toml::Table>>,
    grid: Option<Spanned<toml::Table>>,
}

/// A `[[step]]` entry as read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    kind: Spanned<String>,
    method: Val,
    bulk: Val,
    fill: Val,
    fraction: Val,
    selectivity: Val,
    windows: Val,
    count: Val,
    aspect: Val,
    placement: Val,
    predicate: Val,
    repetitions: Val,
    seed: Val,
    k: Val,
    operations: Val,
    insert_ratio: Val,
    query: Val,
    group: Val,
    objects: Val,
    moves_per_commit: Val,
    commits: Val,
    step: Val,
    queries_between: Val,
    window: Val,
}

impl Workload {
    /// Reads and checks the workload file at `path` at `scale`.
    pub fn load(path: &Path, scale: Scale) -> Result<Workload> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            page: None,
            source,
        })?;
        Workload::parse(&text, path, scale)
    }

    /// Parses and checks workload `text` (read from `path`; relative dataset
    /// and windows files are relative to its directory).
    pub fn parse(text: &str, path: &Path, scale: Scale) -> Result<Workload> {
        let raw: RawWorkload = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| format!("line {}: ", Ctx { path, text, scale }.line(&s)))
                .unwrap_or_default();
            Error::invalid(format!(
                "{}: {line}{}",
                path.display(),
                e.message().trim_end()
            ))
        })?;
        let cx = Ctx { path, text, scale };
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        let name = raw.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(cx.err(&raw.name.span(), "name", "must not be empty"));
        }
        let repetitions = match &raw.repetitions {
            None => 1,
            Some(r) if *r.get_ref() >= 1 && *r.get_ref() <= 1000 => *r.get_ref() as u32,
            Some(r) => return Err(cx.err(&r.span(), "repetitions", "must be in 1..=1000")),
        };
        if raw.datasets.is_empty() {
            return Err(Error::invalid(format!(
                "{}: no [[dataset]]: a workload needs at least one",
                path.display()
            )));
        }
        if raw.indexes.is_empty() {
            return Err(Error::invalid(format!(
                "{}: no [[index]]: a workload needs at least one",
                path.display()
            )));
        }
        let mut datasets = Vec::new();
        let mut seen = HashSet::new();
        for (i, d) in raw.datasets.iter().enumerate() {
            let d = d.get_ref();
            new_name(&cx, &mut seen, &d.name, "dataset", i)?;
            datasets.extend(dataset::parse_dataset(&cx, d, i, base)?);
        }
        let mut indexes = Vec::new();
        let mut seen = HashSet::new();
        for (i, x) in raw.indexes.iter().enumerate() {
            let x = x.get_ref();
            new_name(&cx, &mut seen, &x.name, "index", i)?;
            indexes.extend(index::parse_index(&cx, x, i)?);
        }
        check_point_kinds(&cx, &raw, &indexes, &datasets)?;
        let steps = parse_steps(&cx, &raw, base)?;
        Ok(Workload {
            name,
            description: raw.description.clone(),
            scale,
            repetitions,
            datasets,
            indexes,
            steps,
            text: text.to_string(),
            path: path.to_path_buf(),
        })
    }
}

/// Adds `name`, of the `i`-th `what` (e.g. `dataset`), to the names
/// `seen` so far: an error when it is there already.
fn new_name(
    cx: &Ctx,
    seen: &mut HashSet<String>,
    name: &Spanned<String>,
    what: &str,
    i: usize,
) -> Result<()> {
    if seen.insert(name.get_ref().clone()) {
        return Ok(());
    }
    Err(cx.err(
        &name.span(),
        &format!("{what}[{i}].name"),
        format!("duplicate {what} name {:?}", name.get_ref()),
    ))
}

/// Point index kinds need point datasets (files are checked when read).
fn check_point_kinds(
    cx: &Ctx,
    raw: &RawWorkload,
    indexes: &[crate::workload::model::IndexConfig],
    datasets: &[crate::workload::model::DatasetConfig],
) -> Result<()> {
    for x in indexes {
        if !x.is_grid() {
            continue;
        }
        for d in datasets {
            if let DatasetSource::Generator(g) = &d.source {
                if g.geometry != GeometryKind::Point {
                    let span = raw
                        .indexes
                        .iter()
                        .find(|r| *r.get_ref().name.get_ref() == x.base_name)
                        .map(|r| r.get_ref().name.span())
                        .unwrap_or(0..0);
                    return Err(cx.err(
                        &span,
                        "kind",
                        format!(
                            "index kind {} indexes points, but dataset {:?} generates boxes: \
                             give it geometry = \"point\"",
                            x.kind(),
                            d.name
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The steps, the first a build and no other.
fn parse_steps(cx: &Ctx, raw: &RawWorkload, base: &Path) -> Result<Vec<Step>> {
    if raw.steps.is_empty() {
        return Err(Error::invalid(format!(
            "{}: no [[step]]: a workload needs at least one (e.g. kind = \"build\")",
            cx.path.display()
        )));
    }
    let mut steps = Vec::new();
    for (i, s) in raw.steps.iter().enumerate() {
        steps.push(step::parse_step(cx, s.get_ref(), i, base)?);
    }
    if !matches!(steps.first(), Some(Step::Build { .. })) {
        return Err(cx.err(
            &raw.steps
                .first()
                .map(|s| s.get_ref().kind.span())
                .unwrap_or(0..0),
            "step[0].kind",
            "the first step must be a build",
        ));
    }
    for (i, s) in steps.iter().enumerate().skip(1) {
        if matches!(s, Step::Build { .. }) {
            let span = raw
                .steps
                .get(i)
                .map(|s| s.get_ref().kind.span())
                .unwrap_or(0..0);
            return Err(cx.err(
                &span,
                &format!("step[{i}].kind"),
                "only the first step may be a build",
            ));
        }
    }
    Ok(steps)
}
