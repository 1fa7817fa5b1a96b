//! Expansion: an `[[index]]` entry's parameter lists become a cross
//! product of configurations, each named for the parameters it varies; a workload's datasets, index
//! configurations and repetitions become its [`Configuration`]s, which an
//! `--index` filter may narrow.
use std::ops::Range;

use super::model::{Configuration, IndexConfig, Workload};

/// One dimension of an index's cross product.
pub(super) struct Dim {
    /// The key (`page_size`, `efind.flush_policy`).
    pub(super) key: String,
    /// Where its value stands in the file.
    pub(super) span: Range<usize>,
    /// Its values (one when not a list).
    pub(super) values: Vec<toml::Value>,
}

/// Every combination of one value per dimension of `dims` (as indexes into
/// each dimension's values, the last dimension varying fastest); `None`
/// when they exceed 100000.
pub(super) fn combinations(dims: &[Dim]) -> Option<Vec<Vec<usize>>> {
    let mut combos: Vec<Vec<usize>> = vec![Vec::new()];
    for d in dims {
        let mut next = Vec::with_capacity(combos.len() * d.values.len());
        for c in &combos {
            for j in 0..d.values.len() {
                let mut c2 = c.clone();
                c2.push(j);
                next.push(c2);
            }
        }
        combos = next;
        if combos.len() > 100_000 {
            return None;
        }
    }
    Some(combos)
}

/// The name of combination `combo` of `dims` for entry `base`: `base`
/// with the parameters that vary in the entry appended
/// (`efind[page_size=2KiB,efind.flush_policy=mh]`), or `base` alone.
pub(super) fn name(base: &str, dims: &[Dim], combo: &[usize]) -> String {
    let mut varied = Vec::new();
    for (d, &j) in dims.iter().zip(combo) {
        let Some(v) = d.values.get(j) else { continue };
        if d.values.len() > 1 {
            let shown = match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            varied.push(format!("{}={shown}", d.key));
        }
    }
    if varied.is_empty() {
        base.to_string()
    } else {
        format!("{}[{}]", base, varied.join(","))
    }
}

impl Workload {
    /// Every configuration of the cross product datasets × indexes × repetitions,
    /// keeping the indexes whose base name is in `only` (all when empty).
    pub fn configurations(&self, only: &[String]) -> Vec<Configuration> {
        let mut out = Vec::new();
        for d in &self.datasets {
            for x in &self.indexes {
                if !only.is_empty() && !only.iter().any(|o| selects(o, x)) {
                    continue;
                }
                for repetition in 0..self.repetitions {
                    out.push(Configuration {
                        dataset: d.clone(),
                        index: x.clone(),
                        repetition,
                    });
                }
            }
        }
        out
    }
}

/// Whether the `--index` filter `filter` selects configuration `x`: its
/// full name (`efind[page_size=4KiB]`), its base name (`efind`), or a base
/// name (or `*`) with some varied parameters that must all match
/// (`*[page_size=4KiB]`, `efind[device=file]`).
fn selects(filter: &str, x: &IndexConfig) -> bool {
    if filter == x.base_name || filter == x.name {
        return true;
    }
    let Some((base, rest)) = filter.split_once('[') else {
        return false;
    };
    if base != "*" && base != x.base_name {
        return false;
    }
    let varied: Vec<&str> = x
        .name
        .split_once('[')
        .map(|(_, r)| r.trim_end_matches(']').split(',').collect())
        .unwrap_or_default();
    rest.trim_end_matches(']')
        .split(',')
        .filter(|p| !p.is_empty())
        .all(|p| varied.contains(&p))
}
