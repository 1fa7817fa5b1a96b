//! Parsing an `[[index]]` entry. Every key may hold a list; the lists are
//! the dimensions of a cross product (expanded by `expand`). Each
//! combination's values are read onto the workbench's defaults, and the
//! configuration is checked as the library checks it, naming the key at
//! fault.
use std::ops::Range;

use geoflash::engine::FastPolicy;
use geoflash::engine::LogFormat;
use geoflash::{Error, Result};
use toml::Spanned;

use super::values::{as_size, as_str, as_uint, strip_invalid, Ctx};
use super::RawIndex;
use crate::workload::expand::{self, Dim};
use crate::workload::model::{EfindParams, FastParams, GridParams, IndexConfig, IndexFamily};

/// One dimension of the cross product: key `key`'s value, a list or one value.
fn dims_of(cx: &Ctx, key: &str, v: &Spanned<toml::Value>) -> Result<Dim> {
    let values = match v.get_ref() {
        toml::Value::Array(a) if a.is_empty() => return Err(cx.err(&v.span(), key, "empty list")),
        toml::Value::Array(a) => a.clone(),
        other => vec![other.clone()],
    };
    Ok(Dim {
        key: key.to_string(),
        span: v.span(),
        values,
    })
}

/// The keys of an index's `efind` table.
const EFIND_KEYS: &[&str] = &[
    "flush_percent",
    "flush_unit",
    "flush_policy",
    "read_buffer_percent",
    "temporal_control",
    "durability",
    "log_capacity",
    "log_format",
];

/// The keys of an index's `fast` table.
const FAST_KEYS: &[&str] = &[
    "policy",
    "flush_unit",
    "durability",
    "log_capacity",
    "log_format",
    "seed",
];

/// The keys of an index's `grid` table.
const GRID_KEYS: &[&str] = &["queries", "dir_share", "cold_pages", "s", "special"];

/// Parses `[[index]]` entry `i` into one checked configuration per
/// combination of its parameter lists.
pub(super) fn parse_index(cx: &Ctx, x: &RawIndex, i: usize) -> Result<Vec<IndexConfig>> {
    let key = |k: &str| format!("index[{i}].{k}");
    let dims = index_dims(cx, x, i)?;
    let Some(combos) = expand::combinations(&dims) else {
        return Err(cx.err(
            &x.name.span(),
            &key("name"),
            "the parameter lists expand to more than 100000 configurations",
        ));
    };
    let mut out = Vec::new();
    for combo in combos {
        let mut c = expand::defaults(x.name.get_ref());
        for (d, &j) in dims.iter().zip(&combo) {
            let Some(v) = d.values.get(j) else { continue };
            set_value(cx, i, &mut c, d, v)?;
        }
        c.name = expand::name(&c.name, &dims, &combo);
        out.push(check(cx, x, i, &dims, c)?);
    }
    Ok(out)
}

/// The dimensions of entry `i`'s cross product: its keys, then the keys of
/// its `efind`, `fast` and `grid` tables (unknown ones refused).
fn index_dims(cx: &Ctx, x: &RawIndex, i: usize) -> Result<Vec<Dim>> {
    let key = |k: &str| format!("index[{i}].{k}");
    let mut dims = Vec::new();
    for (k, v) in [
        ("kind", &x.kind),
        ("split", &x.split),
        ("page_size", &x.page_size),
        ("max_entries", &x.max_entries),
        ("reinsert", &x.reinsert),
        ("store", &x.store),
        ("buffer", &x.buffer),
        ("buffer_policy", &x.buffer_policy),
        ("device", &x.device),
        ("reads", &x.reads),
        ("journal", &x.journal),
    ] {
        if let Some(v) = v {
            let mut d = dims_of(cx, &key(k), v)?;
            d.key = k.to_string();
            dims.push(d);
        }
    }
    for (table, allowed) in [
        ("efind", Some(EFIND_KEYS)),
        ("fast", Some(FAST_KEYS)),
        ("grid", Some(GRID_KEYS)),
    ] {
        let t = match table {
            "efind" => &x.efind,
            "fast" => &x.fast,
            _ => &x.grid,
        };
        if let Some(t) = t {
            for (k, v) in t.get_ref() {
                if let Some(allowed) = allowed {
                    if !allowed.contains(&k.as_str()) {
                        return Err(cx.err(
                            &t.span(),
                            &key(&format!("{table}.{k}")),
                            format!("unknown {table} parameter (use {})", allowed.join(", ")),
                        ));
                    }
                }
                let values = match v {
                    toml::Value::Array(a) if a.is_empty() => {
                        return Err(cx.err(&t.span(), &key(&format!("{table}.{k}")), "empty list"))
                    }
                    toml::Value::Array(a) => a.clone(),
                    other => vec![other.clone()],
                };
                dims.push(Dim {
                    key: format!("{table}.{k}"),
                    span: t.span(),
                    values,
                });
            }
        }
    }
    Ok(dims)
}

/// Reads value `v` of dimension `d` (of entry `i`) into configuration `c`,
/// checking it as far as it can be checked alone.
fn set_value(cx: &Ctx, i: usize, c: &mut IndexConfig, d: &Dim, v: &toml::Value) -> Result<()> {
    let key = |k: &str| format!("index[{i}].{k}");
    let k = key(&d.key);
    let at = |r: Result<()>| cx.at(&d.span, &k, r);
    match d.key.as_str() {
        "kind" => at(as_str(v).map(|s| c.kind = s))?,
        "split" => at(as_str(v).map(|s| c.split = s))?,
        "page_size" => at(as_size(v).and_then(|s| {
            c.page_size = usize::try_from(s).map_err(|_| Error::invalid("page size too large"))?;
            Ok(())
        }))?,
        "max_entries" => at(as_uint(v).map(|m| c.max_entries = Some(m as usize)))?,
        "reinsert" => at(as_uint(v).and_then(|m| {
            c.reinsert = u8::try_from(m)
                .ok()
                .filter(|m| *m < 100)
                .ok_or_else(|| Error::invalid(format!("{m} is not a percentage below 100")))?;
            Ok(())
        }))?,
        "store" => at(as_str(v).map(|s| c.store = s))?,
        "buffer" => at(as_size(v).and_then(|s| {
            c.buffer_bytes = usize::try_from(s).map_err(|_| Error::invalid("buffer too large"))?;
            Ok(())
        }))?,
        "buffer_policy" => at(as_str(v).map(|s| c.buffer_policy = s))?,
        "device" => at(as_str(v).map(|s| c.device = s))?,
        "reads" => at(as_str(v).map(|s| c.reads = s))?,
        "journal" => at(as_str(v).map(|s| c.journal = Some(s)))?,
        other => {
            if let Some(p) = other.strip_prefix("efind.") {
                let e = c.efind.get_or_insert_with(EfindParams::default);
                let pct = |v: &toml::Value| -> Result<u8> {
                    let n = as_uint(v)?;
                    u8::try_from(n)
                        .ok()
                        .filter(|n| *n <= 100)
                        .ok_or_else(|| Error::invalid(format!("{n} is not a percentage")))
                };
                match p {
                    "flush_percent" => at(pct(v).map(|n| e.flush_percent = Some(n)))?,
                    "read_buffer_percent" => at(pct(v).map(|n| e.read_buffer_percent = Some(n)))?,
                    "flush_unit" => at(as_uint(v).map(|n| e.flush_unit = Some(n as usize)))?,
                    "durability" => at(as_str(v).and_then(|s| {
                        geoflash::engine::Durability::parse(&s)?;
                        e.durability = Some(s);
                        Ok(())
                    }))?,
                    "log_capacity" => at(as_size(v).map(|n| e.log_capacity = Some(n)))?,
                    "log_format" => at(as_str(v).and_then(|s| {
                        LogFormat::parse(&s)?;
                        e.log_format = Some(s);
                        Ok(())
                    }))?,
                    "flush_policy" => at(as_str(v).and_then(|s| {
                        s.parse::<geoflash::engine::FlushPolicy>()?;
                        e.flush_policy = Some(s);
                        Ok(())
                    }))?,
                    _ => at(match v {
                        toml::Value::Boolean(b) => {
                            e.temporal_control = Some(*b);
                            Ok(())
                        }
                        toml::Value::String(s) if s == "on" || s == "off" => {
                            e.temporal_control = Some(s == "on");
                            Ok(())
                        }
                        other => Err(Error::invalid(format!(
                            "temporal_control {other}: use \"on\", \"off\" or a boolean"
                        ))),
                    })?,
                }
            } else if let Some(p) = other.strip_prefix("grid.") {
                let g = c.grid.get_or_insert_with(GridParams::default);
                match p {
                    "queries" => at(as_str(v).map(|s| g.queries = Some(s)))?,
                    "dir_share" => at(match v {
                        toml::Value::Float(f) => {
                            g.dir_share = Some(*f);
                            Ok(())
                        }
                        other => Err(Error::invalid(format!(
                            "dir_share {other}: expected a fraction such as 0.75"
                        ))),
                    })?,
                    "s" => at(match v {
                        toml::Value::Float(f) => {
                            g.s = Some(*f);
                            Ok(())
                        }
                        toml::Value::Integer(i) => {
                            g.s = Some(*i as f64);
                            Ok(())
                        }
                        other => Err(Error::invalid(format!(
                            "s {other}: expected a number such as 1.5"
                        ))),
                    })?,
                    "special" => at(match v {
                        toml::Value::Boolean(b) => {
                            g.special = Some(*b);
                            Ok(())
                        }
                        other => Err(Error::invalid(format!(
                            "special {other}: expected true or false"
                        ))),
                    })?,
                    _ => at(as_uint(v).map(|n| g.cold_pages = Some(n as usize)))?,
                }
            } else if let Some(p) = other.strip_prefix("fast.") {
                let f = c.fast.get_or_insert_with(FastParams::default);
                match p {
                    "policy" => at(as_str(v).and_then(|s| {
                        FastPolicy::parse(&s)?;
                        f.policy = Some(s);
                        Ok(())
                    }))?,
                    "flush_unit" => at(as_uint(v).map(|n| f.flush_unit = Some(n as usize)))?,
                    "durability" => at(as_str(v).and_then(|s| {
                        geoflash::engine::Durability::parse(&s)?;
                        f.durability = Some(s);
                        Ok(())
                    }))?,
                    "log_capacity" => at(as_size(v).map(|n| f.log_capacity = Some(n)))?,
                    "log_format" => at(as_str(v).and_then(|s| {
                        LogFormat::parse(&s)?;
                        f.log_format = Some(s);
                        Ok(())
                    }))?,
                    _ => at(as_uint(v).map(|n| f.seed = Some(n)))?,
                }
            }
        }
    }
    Ok(())
}

/// Checks configuration `c` of entry `x` (number `i`, with dimensions
/// `dims`) as the library would, naming the key at fault; a grid kind's
/// store becomes `none`.
fn check(
    cx: &Ctx,
    x: &RawIndex,
    i: usize,
    dims: &[Dim],
    mut c: IndexConfig,
) -> Result<IndexConfig> {
    let key = |k: &str| format!("index[{i}].{k}");
    if c.efind.is_some() && c.store != "efind" {
        let span = x.efind.as_ref().map(|t| t.span()).unwrap_or(0..0);
        return Err(cx.err(
            &span,
            &key("efind"),
            format!("eFIND parameters given for store {:?}", c.store),
        ));
    }
    if c.fast.is_some() && c.store != "fast" {
        let span = x.fast.as_ref().map(|t| t.span()).unwrap_or(0..0);
        return Err(cx.err(
            &span,
            &key("fast"),
            format!("FAST parameters given for store {:?}", c.store),
        ));
    }
    // Check everything the library checks, naming the key.
    let span = x.name.span();
    let check_key = |k: &str, dflt: &Range<usize>| -> Range<usize> {
        dims.iter()
            .find(|d| d.key == k)
            .map(|d| d.span.clone())
            .unwrap_or_else(|| dflt.clone())
    };
    let family = match IndexFamily::of(&c.kind) {
        Ok(f) => f,
        Err(e) => return Err(cx.err(&check_key("kind", &span), &key("kind"), strip_invalid(&e))),
    };
    if c.grid.is_some() && !matches!(family, IndexFamily::Grid(_)) {
        let span = x.grid.as_ref().map(|t| t.span()).unwrap_or(0..0);
        return Err(cx.err(
            &span,
            &key("grid"),
            format!("grid parameters given for index kind {:?}", c.kind),
        ));
    }
    if let Err(e) = c.reads.parse::<geoflash::engine::ReadMode>() {
        return Err(cx.err(&check_key("reads", &span), &key("reads"), strip_invalid(&e)));
    }
    // The library's front door checks every setting and combination and
    // names the key at fault, which is pointed at where the file gives it.
    if let Err(e) = c.spec().and_then(|s| s.options()) {
        let k = e
            .key
            .map(|k| c.workload_key(k))
            .unwrap_or_else(|| "kind".into());
        let at = match k.split_once('.') {
            Some(("efind", _)) => x.efind.as_ref().map(|t| t.span()),
            Some(("fast", _)) => x.fast.as_ref().map(|t| t.span()),
            Some(("grid", _)) => x.grid.as_ref().map(|t| t.span()),
            _ => None,
        }
        .unwrap_or_else(|| check_key(&k, &span));
        return Err(cx.err(&at, &key(&k), strip_invalid(&e.error)));
    }
    if family != IndexFamily::Tree {
        // Grid files have their own buffers and no store.
        c.store = "none".into();
    }
    Ok(c)
}
