//! Lowering: the translation of a checked [`IndexConfig`] into the
//! library's [`IndexOptions`] through the library's front door,
//! [`IndexSpec`], which checks them (every family: trees and grid files).
use geoflash::{IndexOptions, IndexSpec, KeyStyle, Result, SpecError};

use super::model::{IndexConfig, IndexFamily};

impl IndexConfig {
    /// The settings as the library's front door takes them (the
    /// workbench's keys renamed: `reinsert`, `efind.X`, `fast.X`,
    /// `grid.X`). A grid file takes no tree or store setting (the
    /// workbench's defaults of those are left out).
    pub fn spec(&self) -> std::result::Result<IndexSpec, SpecError> {
        let mut pairs: Vec<(&str, String)> = vec![
            ("kind", self.kind.clone()),
            ("page_size", self.page_size.to_string()),
            ("buffer", self.buffer_bytes.to_string()),
            ("device", self.device.clone()),
        ];
        let grid = matches!(IndexFamily::of(&self.kind), Ok(IndexFamily::Grid(_)));
        if !grid {
            pairs.extend([
                ("split", self.split.clone()),
                ("reinsert", self.reinsert.to_string()),
                ("store", self.store.clone()),
            ]);
        }
        if let Some(m) = self.max_entries {
            pairs.push(("max_entries", m.to_string()));
        }
        if let Some(j) = &self.journal {
            pairs.push(("journal", j.clone()));
        }
        // The model keeps the default policy when none is given; only a
        // policy given is a setting (FAST keeps no buffer to set it on).
        if self.buffer_policy != "s2q" && !grid {
            pairs.push(("buffer_policy", self.buffer_policy.clone()));
        }
        if let Some(e) = &self.efind {
            let n = |v: Option<u8>| v.map(|n| n.to_string());
            pairs.extend(
                [
                    ("flush_percent", n(e.flush_percent)),
                    ("read_buffer_percent", n(e.read_buffer_percent)),
                    ("flush_unit", e.flush_unit.map(|u| u.to_string())),
                    ("flush_policy", e.flush_policy.clone()),
                    (
                        "temporal_control",
                        e.temporal_control.map(|on| on.to_string()),
                    ),
                    ("durability", e.durability.clone()),
                    ("log_capacity", e.log_capacity.map(|l| l.to_string())),
                    ("log_format", e.log_format.clone()),
                ]
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?))),
            );
        }
        if let Some(f) = &self.fast {
            pairs.extend(
                [
                    ("fast_policy", f.policy.clone()),
                    ("flush_unit", f.flush_unit.map(|u| u.to_string())),
                    ("durability", f.durability.clone()),
                    ("log_capacity", f.log_capacity.map(|l| l.to_string())),
                    ("log_format", f.log_format.clone()),
                    ("seed", f.seed.map(|s| s.to_string())),
                ]
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?))),
            );
        }
        if let Some(g) = &self.grid {
            pairs.extend(
                [
                    ("grid_queries", g.queries.clone()),
                    ("grid_dir_share", g.dir_share.map(|v| v.to_string())),
                    ("grid_cold_pages", g.cold_pages.map(|v| v.to_string())),
                    ("grid_s", g.s.map(|v| v.to_string())),
                    ("grid_special", g.special.map(|v| v.to_string())),
                ]
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?))),
            );
        }
        let mut spec = IndexSpec::new(KeyStyle::Key);
        for (k, v) in pairs {
            spec.set(k, &v)?;
        }
        Ok(spec)
    }

    /// The workbench's name of the library's key `key` for this
    /// configuration (`reinsert`, `efind.flush_unit`, `fast.policy`, ...).
    pub fn workload_key(&self, key: &str) -> String {
        match key {
            "reinsert_percent" => "reinsert".into(),
            "fast_policy" => "fast.policy".into(),
            "seed" => "fast.seed".into(),
            "flush_percent" | "flush_policy" | "read_buffer_percent" | "temporal_control" => {
                format!("efind.{key}")
            }
            "flush_unit" | "durability" | "log_capacity" | "log_format" => {
                let table = if self.fast.is_some() { "fast" } else { "efind" };
                format!("{table}.{key}")
            }
            other => match other.strip_prefix("grid_") {
                Some(g) => format!("grid.{g}"),
                None => other.into(),
            },
        }
    }

    /// The library options of the configuration (checked by the library's
    /// front door).
    pub fn options(&self) -> Result<IndexOptions> {
        Ok(self.spec()?.options()?)
    }
}
