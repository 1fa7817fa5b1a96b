//! Parsing an `[[index]]` entry. Every key may hold a list; the lists are
//! the dimensions of a cross product (expanded by `expand`). Each
//! combination's values are set through the library's one key table
//! ([`IndexSpec::set`]) onto the workbench's defaults
//! ([`WORKBENCH_DEFAULTS`](crate::workload::WORKBENCH_DEFAULTS)); the
//! library parses and checks them and names the key at fault, which is
//! pointed at where the file gives it.
//!
//! A workload names the library's keys as they are (`page_size`,
//! `reinsert`, `buffer_policy`, ...) or in the table of the part they
//! belong to: `efind = { flush_policy = "mh" }` and `fast = { policy =
//! "fast" }` hold the keys of that store and its log
//! ([`IndexSpec::store_keys`]), `grid = { s = 1.5 }` the grid files' keys
//! without their `grid_` prefix ([`IndexSpec::GRID_KEYS`]). `reads` is the
//! workbench's own (how the runner's queries read nodes).
use geoflash::engine::device::{DeviceSpec, FlashSimConfig, HddSimConfig};
use geoflash::engine::{ReadMode, StoreKind};
use geoflash::{IndexSpec, Result};
use toml::Spanned;

use super::values::{duplicate, strip_invalid, Ctx};
use super::RawIndex;
use crate::workload::expand::{self, Dim};
use crate::workload::model::IndexConfig;

/// One dimension of the cross product: key `key`'s value, a list or one value.
fn dims_of(cx: &Ctx, key: &str, v: &Spanned<toml::Value>) -> Result<Dim> {
    let values = match v.get_ref() {
        toml::Value::Array(a) if a.is_empty() => return Err(cx.err(&v.span(), key, "empty list")),
        toml::Value::Array(a) => a.clone(),
        other => vec![other.clone()],
    };
    if let Some(d) = duplicate(&values) {
        return Err(cx.err(&v.span(), key, d));
    }
    Ok(Dim {
        key: key.to_string(),
        span: v.span(),
        values,
    })
}

/// The library keys (canonical names) that table `table` (`efind`, `fast`
/// or `grid`) of an `[[index]]` entry may hold.
fn table_keys(table: &str) -> Vec<&'static str> {
    match table {
        "efind" => IndexSpec::store_keys(StoreKind::Efind),
        "fast" => IndexSpec::store_keys(StoreKind::Fast),
        _ => IndexSpec::GRID_KEYS.to_vec(),
    }
}

/// The library's key for workload key `key` (`efind.flush_unit` is
/// `flush_unit`, `grid.s` is `grid_s`); `None` for `reads`, the
/// workbench's own.
fn library_key(key: &str) -> Option<String> {
    match key.split_once('.') {
        _ if key == "reads" => None,
        Some(("grid", k)) => Some(format!("grid_{k}")),
        Some((_, k)) => Some(k.to_string()),
        None => Some(key.to_string()),
    }
}

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
        let mut spec = IndexConfig::workbench_spec()?;
        let mut reads = ReadMode::Single;
        for (d, &j) in dims.iter().zip(&combo) {
            let Some(v) = d.values.get(j) else { continue };
            set_value(cx, i, &mut spec, &mut reads, d, v)?;
        }
        let options = spec.options().map_err(|e| {
            // The key at fault, pointed at where the file gives it.
            let at = e.key.and_then(|k| {
                dims.iter()
                    .find(|d| library_key(&d.key).and_then(|l| IndexSpec::key(&l)) == Some(k))
            });
            match at {
                Some(d) => cx.err(&d.span, &key(&d.key), strip_invalid(&e.error)),
                None => cx.err(
                    &x.name.span(),
                    &key(e.key.unwrap_or("kind")),
                    strip_invalid(&e.error),
                ),
            }
        })?;
        check_device(&options.device).map_err(|e| {
            match dims.iter().find(|d| d.key == "device") {
                Some(d) => cx.err(&d.span, &key("device"), strip_invalid(&e)),
                None => cx.err(&x.name.span(), &key("device"), strip_invalid(&e)),
            }
        })?;
        let c = IndexConfig {
            name: expand::name(x.name.get_ref(), &dims, &combo),
            base_name: x.name.get_ref().to_string(),
            options,
            spec,
            reads,
        };
        // A store's table given for another store (its log's keys would
        // be taken by the other one).
        for (table, store, what) in [
            ("efind", StoreKind::Efind, "eFIND"),
            ("fast", StoreKind::Fast, "FAST"),
        ] {
            let t = if table == "efind" { &x.efind } else { &x.fast };
            if let (Some(t), false) = (t, c.options.store.kind() == store && !c.is_grid()) {
                return Err(cx.err(
                    &t.span(),
                    &key(table),
                    format!("{what} parameters given for store {:?}", c.store()),
                ));
            }
        }
        out.push(c);
    }
    Ok(out)
}

/// Checks the parameters of the simulators in `spec` (a `flashsim:` or
/// `hddsim:` spec, or a tier of a `hybrid:` one) as opening the device
/// does: the preset (else the simulator's default), then each key in
/// order, then the configuration they give. [`DeviceSpec::parse`] keeps
/// them as text, so a misspelt preset or key used to pass `--check` and
/// fail every configuration at its build. A `file:PATH` device is
/// refused: every configuration makes its own file in its scratch
/// directory, and one path would be shared by all of them.
fn check_device(spec: &DeviceSpec) -> Result<()> {
    /// `params` applied onto `preset(NAME)` (or `dflt`) with `set`.
    fn apply<C>(
        params: &[(String, String)],
        dflt: C,
        preset: impl Fn(&str) -> Result<C>,
        set: impl Fn(&mut C, &str, &str) -> Result<()>,
    ) -> Result<C> {
        let mut c = match params.iter().find(|(k, _)| k == "preset") {
            Some((_, name)) => preset(name)?,
            None => dflt,
        };
        for (k, v) in params.iter().filter(|(k, _)| k != "preset") {
            set(&mut c, k, v)?;
        }
        Ok(c)
    }
    match spec {
        DeviceSpec::FlashSim { params } => apply(
            params,
            FlashSimConfig::default(),
            FlashSimConfig::preset,
            FlashSimConfig::set,
        )?
        .validate(),
        DeviceSpec::HddSim { params } => apply(
            params,
            HddSimConfig::default(),
            HddSimConfig::preset,
            HddSimConfig::set,
        )?
        .validate(),
        DeviceSpec::Hybrid { fast, slow, .. } => {
            check_device(fast)?;
            check_device(slow)
        }
        DeviceSpec::File { path: Some(p), .. } => Err(geoflash::Error::invalid(format!(
            "file:{} names one file for every configuration and repetition (the second build \
             finds it holding the first's data, and the file outlives the run): give `file` with \
             its options (e.g. `file?direct=false`), which each configuration makes in its \
             scratch directory",
            p.display()
        ))),
        _ => Ok(()),
    }
}

/// The dimensions of entry `i`'s cross product: its keys, then the keys of
/// its `efind`, `fast` and `grid` tables (keys the table's part does not
/// take refused).
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
    for (table, t) in [("efind", &x.efind), ("fast", &x.fast), ("grid", &x.grid)] {
        let Some(t) = t else { continue };
        let allowed = table_keys(table);
        for (k, v) in t.get_ref() {
            let name = format!("{table}.{k}");
            let known = library_key(&name)
                .and_then(|l| IndexSpec::key(&l))
                .is_some_and(|l| allowed.contains(&l));
            if !known {
                let shown: Vec<&str> = allowed
                    .iter()
                    .map(|a| a.strip_prefix("grid_").unwrap_or(a))
                    .collect();
                return Err(cx.err(
                    &t.span(),
                    &key(&name),
                    format!("unknown {table} parameter (use {})", shown.join(", ")),
                ));
            }
            let values = match v {
                toml::Value::Array(a) if a.is_empty() => {
                    return Err(cx.err(&t.span(), &key(&name), "empty list"))
                }
                toml::Value::Array(a) => a.clone(),
                other => vec![other.clone()],
            };
            if let Some(d) = duplicate(&values) {
                return Err(cx.err(&t.span(), &key(&name), d));
            }
            dims.push(Dim {
                key: name,
                span: t.span(),
                values,
            });
        }
    }
    Ok(dims)
}

/// Sets value `v` of dimension `d` (of entry `i`): `reads` into `reads`,
/// every other key into `spec` through the library's key table, which
/// parses it as the command line's flag and Python's keyword argument.
fn set_value(
    cx: &Ctx,
    i: usize,
    spec: &mut IndexSpec,
    reads: &mut ReadMode,
    d: &Dim,
    v: &toml::Value,
) -> Result<()> {
    let k = format!("index[{i}].{}", d.key);
    let text = match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        other => {
            return Err(cx.err(
                &d.span,
                &k,
                format!(
                    "expected a string, a number or a boolean, found {}",
                    other.type_str()
                ),
            ))
        }
    };
    match library_key(&d.key) {
        None => *reads = cx.at(&d.span, &k, text.parse::<ReadMode>())?,
        Some(l) => spec
            .set(&l, &text)
            .map_err(|e| cx.err(&d.span, &k, strip_invalid(&e.error)))?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key of a table names a key of the library's table.
    #[test]
    fn table_keys_are_library_keys() {
        for (table, key, want) in [
            ("efind", "flush_policy", Some("flush_policy")),
            ("fast", "policy", Some("fast_policy")),
            ("grid", "s", Some("grid_s")),
            ("grid", "dir_share", Some("grid_dir_share")),
        ] {
            let l = library_key(&format!("{table}.{key}")).unwrap();
            assert_eq!(IndexSpec::key(&l), want);
            assert!(table_keys(table).contains(&want.unwrap()));
        }
        assert_eq!(library_key("reads"), None);
        assert_eq!(library_key("reinsert").as_deref(), Some("reinsert"));
        assert!(!table_keys("efind").contains(&"fast_policy"));
    }
}
