//! Expansion: an `[[index]]` entry's parameter lists become a cross
//! product of configurations, each named for the parameters it varies; a workload's datasets, index
//! configurations and repetitions become its [`Configuration`]s, which an
//! `--index` filter may narrow.
use std::ops::Range;

use geoflash::{Error, Result};

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
        let steps_digest = self.steps_digest();
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
                        steps_digest: steps_digest.clone(),
                    });
                }
            }
        }
        out
    }
}

impl Workload {
    /// [`Workload::configurations`] after the `--index` filter `only`,
    /// refused when they are none (a misspelt name): the error names the
    /// workload's index configurations. What `geoflash bench` checks before
    /// anything is written, `--check` included.
    pub fn chosen_configurations(&self, only: &[String]) -> Result<Vec<Configuration>> {
        let configs = self.configurations(only);
        if configs.is_empty() {
            return Err(Error::invalid(format!(
                "no index configuration of workload {:?} is named {}; its index configurations: {}",
                self.name,
                only.join(" or "),
                self.index_names()
            )));
        }
        Ok(configs)
    }

    /// The names an `--index` filter may give, for messages: the
    /// `[[index]]` names, then the expanded ones (the first 12 of many).
    fn index_names(&self) -> String {
        const SHOWN: usize = 12;
        let mut bases: Vec<&str> = Vec::new();
        let mut expanded: Vec<&str> = Vec::new();
        for x in &self.indexes {
            if !bases.contains(&x.base_name.as_str()) {
                bases.push(&x.base_name);
            }
            if x.name != x.base_name && !expanded.contains(&x.name.as_str()) {
                expanded.push(&x.name);
            }
        }
        let mut out = bases.join(", ");
        if !expanded.is_empty() {
            let more = expanded.len().saturating_sub(SHOWN);
            expanded.truncate(SHOWN);
            out.push_str(&format!("; expanded: {}", expanded.join(", ")));
            if more > 0 {
                out.push_str(&format!(" and {more} more"));
            }
        }
        out
    }

    /// A digest of the steps every configuration runs (their parameters at
    /// the workload's scale): FNV-1a (64 bits) of their JSON, as 16 hex
    /// digits. Part of each configuration's key, so that editing a step
    /// (`k = 1` → `k = 7`) makes every configuration incomplete again.
    pub fn steps_digest(&self) -> String {
        let json = serde_json::to_string(&self.steps)
            .unwrap_or_else(|e| format!("steps that do not serialize: {e}"));
        format!("{:016x}", super::model::fnv1a64(json.as_bytes()))
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
