//! Parsing a `[[dataset]]` entry: a generator with its parameters (checked
//! on a one-object instance), a dataset file, or a PostGIS table; one
//! [`DatasetConfig`] per insertion order listed.
use std::path::Path;

use geoflash::Result;
use toml::Spanned;

use super::values::{as_str, Ctx};
use super::RawDataset;
use crate::generate::{Distribution, GenParams, GeometryKind, InsertionOrder};
use crate::workload::model::{DatasetConfig, DatasetSource};

/// The keys of a generated dataset's `params` table.
const GEN_PARAMS: &[&str] = &[
    "max_size",
    "percentage",
    "buffer",
    "probability",
    "digits",
    "split_range",
    "dither",
    "cluster_size",
    "cluster_sigma",
];

/// The keys of a dataset's `postgis` table.
const POSTGIS_KEYS: &[&str] = &["url", "table", "geometry_column", "id_column"];

/// A dataset's `postgis = { url, table, geometry_column = "geom", id_column }`.
/// The URL is checked for its form only: the server is read when the
/// workload runs.
fn parse_postgis(
    cx: &Ctx,
    t: &Spanned<toml::Table>,
    key: &str,
) -> Result<crate::postgis::PostgisSource> {
    let span = t.span();
    let get = |k: &str| -> Result<Option<String>> {
        match t.get_ref().get(k) {
            None => Ok(None),
            Some(toml::Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(toml::Value::String(_)) => {
                Err(cx.err(&span, &format!("{key}.{k}"), "must not be empty"))
            }
            Some(other) => Err(cx.err(
                &span,
                &format!("{key}.{k}"),
                format!("expected a string, found {}", other.type_str()),
            )),
        }
    };
    if let Some(k) = t
        .get_ref()
        .keys()
        .find(|k| !POSTGIS_KEYS.contains(&k.as_str()))
    {
        return Err(cx.err(
            &span,
            &format!("{key}.{k}"),
            format!("unknown key (use {})", POSTGIS_KEYS.join(", ")),
        ));
    }
    let required = |k: &str| get(k)?.ok_or_else(|| cx.err(&span, &format!("{key}.{k}"), "missing"));
    let url = required("url")?;
    if !crate::pg::is_url(&url) {
        return Err(cx.err(
            &span,
            &format!("{key}.url"),
            format!(
                "{:?} is not a PostgreSQL URL (postgresql://user@host/dbname)",
                crate::pg::redact(&url)
            ),
        ));
    }
    Ok(crate::postgis::PostgisSource {
        url,
        table: required("table")?,
        geometry_column: get("geometry_column")?.unwrap_or_else(|| "geom".into()),
        id_column: get("id_column")?,
    })
}

/// Parses `[[dataset]]` entry `i` (files relative to `base`): one
/// configuration per insertion order.
pub(super) fn parse_dataset(
    cx: &Ctx,
    d: &RawDataset,
    i: usize,
    base: &Path,
) -> Result<Vec<DatasetConfig>> {
    let key = |k: &str| format!("dataset[{i}].{k}");
    let seed = match &d.seed {
        None => 1,
        Some(v) => cx.int(&v.span(), v.get_ref(), &key("seed"))?,
    };
    if let (Some(l), None) = (&d.layer, &d.file) {
        return Err(cx.err(
            &l.span(),
            &key("layer"),
            "applies to a dataset file (file = \"x.gpkg\") only",
        ));
    }
    let source = match (&d.generator, &d.file, &d.postgis) {
        (None, None, Some(t)) => {
            not_generated(cx, d, i, "a PostGIS table")?;
            DatasetSource::Postgis(parse_postgis(cx, t, &key("postgis"))?)
        }
        (Some(g), None, None) => generated(cx, d, i, g, seed)?,
        (None, Some(f), None) => from_file(cx, d, i, f, base)?,
        (None, None, None) => {
            return Err(cx.err(
                &d.name.span(),
                &key("name"),
                "a dataset needs a generator, a file or a postgis table",
            ))
        }
        (g, f, p) => {
            let span = g
                .as_ref()
                .map(|g| g.span())
                .or_else(|| f.as_ref().map(|f| f.span()))
                .or_else(|| p.as_ref().map(|p| p.span()))
                .unwrap_or_else(|| d.name.span());
            return Err(cx.err(
                &span,
                &key("generator"),
                "give one of generator, file or postgis, not several",
            ));
        }
    };
    let orders = match &d.order {
        None => vec![InsertionOrder::AsGenerated],
        Some(v) => cx.list(v, &key("order"), |x| as_str(x)?.parse())?,
    };
    Ok(orders
        .into_iter()
        .map(|order| DatasetConfig {
            name: d.name.get_ref().clone(),
            source: source.clone(),
            order,
            seed,
        })
        .collect())
}

/// Fails when generator keys are given to a dataset of `what` (a file or
/// a PostGIS table), `[[dataset]]` entry `i`.
fn not_generated(cx: &Ctx, d: &RawDataset, i: usize, what: &str) -> Result<()> {
    let key = |k: &str| format!("dataset[{i}].{k}");
    for (k, v) in [("geometry", &d.geometry), ("count", &d.count)] {
        if let Some(v) = v {
            return Err(cx.err(
                &v.span(),
                &key(k),
                format!("applies to generated datasets only, not to {what}"),
            ));
        }
    }
    if let Some(t) = &d.params {
        return Err(cx.err(
            &t.span(),
            &key("params"),
            format!("applies to generated datasets only, not to {what}"),
        ));
    }
    Ok(())
}

/// The source of generated `[[dataset]]` entry `i`: generator `g`, its
/// geometry, count and parameters (checked on a one-object instance).
fn generated(
    cx: &Ctx,
    d: &RawDataset,
    i: usize,
    g: &Spanned<String>,
    seed: u64,
) -> Result<DatasetSource> {
    let key = |k: &str| format!("dataset[{i}].{k}");
    let dist: Distribution = cx.at(&g.span(), &key("generator"), g.get_ref().parse())?;
    let geometry: GeometryKind = match &d.geometry {
        None => GeometryKind::Point,
        Some(v) => {
            let s = cx.string(v, &key("geometry"))?;
            cx.at(&v.span(), &key("geometry"), s.parse())?
        }
    };
    let count = match &d.count {
        None => {
            return Err(cx.err(
                &d.name.span(),
                &key("count"),
                "a generated dataset needs a count",
            ))
        }
        Some(v) => cx.scaled(v, &key("count"))?,
    };
    if count == 0 {
        return Err(cx.err(&d.name.span(), &key("count"), "must be at least 1"));
    }
    let count =
        usize::try_from(count).map_err(|_| cx.err(&d.name.span(), &key("count"), "too large"))?;
    let mut p = GenParams::new(dist, geometry, count, seed);
    if let Some(t) = &d.params {
        for (k, v) in t.get_ref() {
            let pk = key(&format!("params.{k}"));
            let span = t.span();
            match k.as_str() {
                "max_size" => p.max_size = cx.float(&span, v, &pk)?,
                "percentage" => p.percentage = cx.float(&span, v, &pk)?,
                "buffer" => p.buffer = cx.float(&span, v, &pk)?,
                "probability" => p.probability = cx.float(&span, v, &pk)?,
                "digits" => {
                    p.digits = u32::try_from(cx.int(&span, v, &pk)?)
                        .map_err(|_| cx.err(&span, &pk, "too large"))?
                }
                "split_range" => p.split_range = cx.float(&span, v, &pk)?,
                "dither" => p.dither = cx.float(&span, v, &pk)?,
                "cluster_size" => p.cluster_size = cx.float(&span, v, &pk)?,
                "cluster_sigma" => p.cluster_sigma = cx.float(&span, v, &pk)?,
                _ => {
                    return Err(cx.err(
                        &span,
                        &pk,
                        format!(
                            "unknown generator parameter (use {})",
                            GEN_PARAMS.join(", ")
                        ),
                    ))
                }
            }
        }
        // The generator checks its parameters; try a tiny instance now.
        let mut probe = p.clone();
        probe.count = 1;
        cx.at(
            &t.span(),
            &key("params"),
            crate::generate::generate(&probe).map(|_| ()),
        )?;
    }
    Ok(DatasetSource::Generator(p))
}

/// The source of `[[dataset]]` entry `i` read from file `f` (relative to
/// `base`): a GeoPackage's layer is chosen now, not when the workload runs.
fn from_file(
    cx: &Ctx,
    d: &RawDataset,
    i: usize,
    f: &Spanned<String>,
    base: &Path,
) -> Result<DatasetSource> {
    let key = |k: &str| format!("dataset[{i}].{k}");
    let p = base.join(f.get_ref());
    if !p.is_file() {
        return Err(cx.err(
            &f.span(),
            &key("file"),
            format!("dataset file {} does not exist", p.display()),
        ));
    }
    let format = cx.at(
        &f.span(),
        &key("file"),
        crate::import::InputFormat::from_path(&p),
    )?;
    not_generated(cx, d, i, "a file")?;
    let layer = d.layer.as_ref().map(|l| (l.span(), l.get_ref().clone()));
    Ok(match (format, layer) {
        (crate::import::InputFormat::GeoPackage, layer) => {
            // The layer (or the only one) is chosen now, not when the workload runs.
            let (span, name) = match &layer {
                Some((span, name)) => (span.clone(), Some(name.as_str())),
                None => (f.span(), None),
            };
            let k = key(if layer.is_some() { "layer" } else { "file" });
            cx.at(&span, &k, crate::formats::gpkg::check_layer(&p, name))?;
            match layer {
                Some((_, layer)) => DatasetSource::Layer { file: p, layer },
                None => DatasetSource::File(p),
            }
        }
        (_, Some((span, _))) => {
            return Err(cx.err(
                &span,
                &key("layer"),
                "applies to GeoPackage files (.gpkg) only",
            ))
        }
        (_, None) => DatasetSource::File(p),
    })
}
