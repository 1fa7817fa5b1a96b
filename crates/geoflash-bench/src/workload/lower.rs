//! Lowering: the translation of a checked [`IndexConfig`] into the
//! library's options (an R-tree's [`IndexOptions`] through the library's
//! front door, [`IndexSpec`]; a grid file's [`geoflash::grid::GridOptions`]),
//! each checked as the library checks it.
use geoflash::geom::Rect;
use geoflash::{Error, IndexOptions, IndexSpec, KeyStyle, Result, SpecError};

use super::model::{GridKind, GridParams, IndexConfig, IndexFamily};

/// The grid options of a configuration over `domain`: the buffer budget in
/// pages split between directory pages (`dir_share`, 0.75 by default as in
/// the thesis' final runs) and bucket pages, each buffer a hot list and a
/// cold list of `cold_pages` (128 pages by default, at most an eighth of the
/// budget; one page for kind `grid`, which therefore writes page by page).
pub fn grid_options(
    kind: GridKind,
    params: &GridParams,
    page_size: usize,
    buffer_bytes: usize,
    domain: Rect,
) -> Result<geoflash::grid::GridOptions> {
    let pages = buffer_bytes / page_size.max(1);
    let share = params.dir_share.unwrap_or(0.75);
    if !(share > 0.0 && share < 1.0) {
        return Err(Error::invalid(format!(
            "grid dir_share {share} must lie in (0, 1)"
        )));
    }
    let cold = match (kind, params.cold_pages) {
        (GridKind::Grid, _) => 1,
        (_, Some(c)) => c,
        (_, None) => (pages / 8).clamp(1, 128),
    };
    let dir_total = ((pages as f64) * share).round() as usize;
    let bucket_total = pages.saturating_sub(dir_total);
    if dir_total < cold + 2 || bucket_total < cold + 2 {
        return Err(Error::invalid(format!(
            "a buffer of {buffer_bytes} bytes ({pages} pages of {page_size} bytes) is too small for \
             grid buffers of 2 hot and {cold} cold pages each"
        )));
    }
    let mut o = geoflash::grid::GridOptions::new(domain);
    if kind == GridKind::HGrid {
        let d = geoflash::grid::hot::HybridOptions::default();
        o.hybrid = Some(geoflash::grid::hot::HybridOptions {
            s: params.s.unwrap_or(d.s),
            special: params.special.unwrap_or(d.special),
        });
    } else if params.s.is_some() || params.special.is_some() {
        return Err(Error::invalid(
            "grid parameters s and special apply to kind hgrid only",
        ));
    }
    o.dir_hot_pages = dir_total - cold;
    o.bucket_hot_pages = bucket_total - cold;
    o.cold_pages = cold;
    o.validate()?;
    Ok(o)
}

impl IndexConfig {
    /// The grid options of a grid kind over `domain` (checked).
    pub fn grid_options(&self, domain: Rect) -> Result<geoflash::grid::GridOptions> {
        let IndexFamily::Grid(kind) = self.family()? else {
            return Err(Error::invalid(format!(
                "index kind {} is not a grid file",
                self.kind
            )));
        };
        grid_options(
            kind,
            &self.grid.clone().unwrap_or_default(),
            self.page_size,
            self.buffer_bytes,
            domain,
        )
    }

    /// The settings of a tree kind as the library's front door takes them
    /// (the workbench's keys renamed: `reinsert`, `efind.X`, `fast.X`).
    pub fn spec(&self) -> std::result::Result<IndexSpec, SpecError> {
        let mut pairs: Vec<(&str, String)> = vec![
            ("kind", self.kind.clone()),
            ("split", self.split.clone()),
            ("page_size", self.page_size.to_string()),
            ("reinsert", self.reinsert.to_string()),
            ("store", self.store.clone()),
            ("buffer", self.buffer_bytes.to_string()),
            ("device", self.device.clone()),
        ];
        if let Some(m) = self.max_entries {
            pairs.push(("max_entries", m.to_string()));
        }
        // The model keeps the default policy when none is given; only a
        // policy given is a setting (FAST keeps no buffer to set it on).
        if self.buffer_policy != "s2q" {
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
            other => other.into(),
        }
    }

    /// The library options of a tree kind (checked by the library's front door).
    pub fn options(&self) -> Result<IndexOptions> {
        if self.family()? != IndexFamily::Tree {
            return Err(Error::invalid(format!(
                "index kind {} is not an R-tree: it has no tree options",
                self.kind
            )));
        }
        Ok(self.spec()?.options()?)
    }
}
