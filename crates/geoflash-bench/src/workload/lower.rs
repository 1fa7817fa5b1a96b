//! Lowering: the translation of a checked [`IndexConfig`] into the
//! library's options (an R-tree's [`IndexOptions`], a grid file's
//! [`geoflash::grid::GridOptions`], the FAST store's [`FastConfig`]), each
//! checked as the library checks it.
use geoflash::geom::Rect;
use geoflash::index_dir::{StoreKind, StoreOptions};
use geoflash::manifest::Crs;
use geoflash::storage::spec::DeviceSpec;
use geoflash::store::efind::{EfindConfig, FlushPolicy};
use geoflash::store::fast::{FastConfig, FastPolicy};
use geoflash::store::log::LogFormat;
use geoflash::{Error, IndexOptions, Result};

use super::model::{FastParams, GridKind, GridParams, IndexConfig, IndexFamily};

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

impl FastParams {
    /// The store configuration these parameters describe (checked).
    pub fn config(&self) -> Result<FastConfig> {
        let mut c = FastConfig::default();
        if let Some(p) = &self.policy {
            c.policy = FastPolicy::parse(p)?;
        }
        if let Some(u) = self.flush_unit {
            c.flush_unit = u;
        }
        if let Some(d) = &self.durability {
            c.durability = geoflash::store::log::Durability::parse(d)?;
        }
        if let Some(l) = self.log_capacity {
            c.log_capacity = l;
        }
        if let Some(f) = &self.log_format {
            c.log_format = LogFormat::parse(f)?;
        }
        if let Some(seed) = self.seed {
            c.seed = seed;
        }
        c.verify()?;
        Ok(c)
    }
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

    /// The library options of a tree kind (checked).
    pub fn options(&self) -> Result<IndexOptions> {
        if self.family()? != IndexFamily::Tree {
            return Err(Error::invalid(format!(
                "index kind {} is not an R-tree: it has no tree options",
                self.kind
            )));
        }
        let store_kind: StoreKind = self.store.parse()?;
        let efind = match &self.efind {
            None => None,
            Some(p) => {
                let mut c = EfindConfig::default();
                if let Some(v) = p.flush_percent {
                    c.flush_percent = v;
                }
                if let Some(v) = p.flush_unit {
                    c.flush_unit = v;
                }
                if let Some(v) = &p.flush_policy {
                    c.policy = parse_flush_policy(v)?;
                }
                if let Some(v) = p.read_buffer_percent {
                    c.read_buffer_percent = v;
                }
                if p.temporal_control == Some(false) {
                    c.temporal_control = None;
                }
                if let Some(d) = &p.durability {
                    c.durability = geoflash::store::log::Durability::parse(d)?;
                }
                if let Some(l) = p.log_capacity {
                    c.log_capacity = l;
                }
                if let Some(f) = &p.log_format {
                    c.log_format = LogFormat::parse(f)?;
                }
                c.verify()?;
                Some(c)
            }
        };
        let shr = self.kind == "shrtree";
        if shr && !matches!(DeviceSpec::parse(&self.device)?, DeviceSpec::Hybrid { .. }) {
            return Err(Error::invalid(format!(
                "index kind shrtree places internal nodes on the fast tier of a hybrid device: \
                 device {:?} has one tier (use hybrid:fast=(SPEC);slow=(SPEC))",
                self.device
            )));
        }
        let mut opts = IndexOptions {
            split: self.split.parse()?,
            page_size: self.page_size,
            max_entries: self.max_entries,
            min_entries: None,
            reinsert_percent: self.reinsert,
            store: StoreOptions {
                kind: store_kind,
                buffer_bytes: self.buffer_bytes,
                policy: self.buffer_policy.parse()?,
                efind,
                fast: self.fast.as_ref().map(FastParams::config).transpose()?,
                placement: if shr {
                    geoflash::store::placement::Placement::SHR_TREE
                } else {
                    geoflash::store::placement::Placement::None
                },
                ..StoreOptions::default()
            },
            device: self.device.clone(),
            crs: Crs::default(),
            hilbert_domain: None,
            ..IndexOptions::default()
        };
        if shr {
            opts.kind = geoflash::index::IndexKind::RStar;
        } else {
            opts.set_kind(&self.kind)?;
        }
        // A Hilbert R-tree's domain comes from the dataset when the index is
        // created; check the other parameters with a stand-in domain.
        let mut check = opts.clone();
        if check.kind == geoflash::index::IndexKind::Hilbert && check.hilbert_domain.is_none() {
            check.hilbert_domain = Some(Rect::new(0.0, 0.0, 1.0, 1.0)?);
        }
        check.tree_params()?;
        DeviceSpec::parse(&self.device)?;
        Ok(opts)
    }
}

/// The eFIND flushing policy named `s`.
pub fn parse_flush_policy(s: &str) -> Result<FlushPolicy> {
    s.parse()
}
