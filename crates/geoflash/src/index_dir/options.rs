//! The options of an index: the structure and its parameters
//! ([`IndexOptions`]: kind, split, page size, node capacity, the Hilbert
//! domain, the FOR-tree's and xBR+-tree's settings), the node store
//! ([`StoreKind`], [`StoreOptions`]) and the device spec, with the checks
//! that turn them into the verified configuration of each structure.
use serde::{Deserialize, Serialize};

use crate::cache::PolicyKind;
use crate::geom::{HilbertDomain, Rect};
use crate::grid::{GridConfig, GridKind, GridSettings};
use crate::index::fortree::FortreeConfig;
use crate::index::xbr::XbrConfig;
use crate::index::{IndexKind, SplitKind, TreeParams};
use crate::manifest::Crs;
use crate::storage::file::IoEngine;
use crate::storage::spec::DeviceSpec;
use crate::store::efind::EfindConfig;
use crate::store::fast::FastConfig;
use crate::store::log::RecoveryMode;
use crate::store::placement::Placement;
use crate::{Error, Result};

/// Which node store an index uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// The disk-based baseline: nodes in place, optional buffer.
    Plain,
    /// The eFIND framework.
    Efind,
    /// The FAST framework.
    Fast,
}

impl std::str::FromStr for StoreKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "plain" => Ok(StoreKind::Plain),
            "efind" => Ok(StoreKind::Efind),
            "fast" => Ok(StoreKind::Fast),
            _ => Err(Error::invalid(format!(
                "unknown store {s:?}: use plain, efind or fast"
            ))),
        }
    }
}

/// Store parameters recorded in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StoreOptions {
    /// Which store.
    pub kind: StoreKind,
    /// Memory budget of the store in bytes (`--buffer`).
    pub buffer_bytes: usize,
    /// Replacement policy of the buffer (`--buffer-policy`; eFIND's read buffer).
    pub policy: PolicyKind,
    /// eFIND's parameters (`None`: the paper's final configuration). Its
    /// `buffer_bytes`, `read_policy` and `with_payload` are taken from the
    /// fields above and the tree kind.
    #[serde(default)]
    pub efind: Option<EfindConfig>,
    /// FAST's parameters (`None`: FAST*, units of 5 pages, group commit, a
    /// 10 MiB log). Its `buffer_bytes` and `with_payload` are taken from the
    /// fields above and the tree kind.
    #[serde(default)]
    pub fast: Option<FastConfig>,
    /// Which nodes the store hints to the fast tier of a two-tier device
    /// ([`Placement`]; `internal-fast` is the sHR-tree). Every store kind.
    #[serde(default)]
    pub placement: Placement,
    /// The papers' in-place mode (`journal = off`): the pages of a
    /// structure written in place (the plain store, grid files) get no
    /// rollback journal (`journal.dat`), so a crash between checkpoints can
    /// leave a mix of old and new pages. For the seed workloads, which
    /// reproduce the papers' I/O; such an index refuses acknowledgements.
    #[serde(default)]
    pub in_place: bool,
    /// What opening an eFIND or FAST store for writing does with damage
    /// before its log's tail (a session setting, never kept in the
    /// manifest: `Index::open_recovering`, `geoflash recover
    /// --tolerate-corrupt-tail`).
    #[serde(skip)]
    pub recovery: RecoveryMode,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            kind: StoreKind::Plain,
            buffer_bytes: 512 * 1024,
            policy: PolicyKind::S2q,
            efind: None,
            fast: None,
            placement: Placement::None,
            in_place: false,
            recovery: RecoveryMode::AbsoluteConsistency,
        }
    }
}

/// Everything needed to create an index.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexOptions {
    /// Tree kind.
    pub kind: IndexKind,
    /// Split of the R-tree.
    pub split: SplitKind,
    /// Page (node) size in bytes.
    pub page_size: usize,
    /// M; `None` for the most a page holds.
    pub max_entries: Option<usize>,
    /// m; `None` for ⌈M/2⌉.
    pub min_entries: Option<usize>,
    /// R*-tree forced-reinsertion percentage.
    pub reinsert_percent: u8,
    /// Store and memory budget.
    pub store: StoreOptions,
    /// The device, parsed once (its text form is `DeviceSpec`'s `Display`,
    /// what the manifest records).
    pub device: DeviceSpec,
    /// Coordinate reference of the data.
    pub crs: Crs,
    /// The extent a Hilbert R-tree maps onto its curve (order 16), fixed at
    /// creation and recorded in the manifest; objects outside it are
    /// clamped to its border cells (correct, less well clustered).
    /// Required to create an empty Hilbert R-tree; a bulk load without it
    /// uses the extent of its items. An xBR+-tree (`xbr`) takes it as its
    /// domain: every point must lie inside.
    pub hilbert_domain: Option<Rect>,
    /// `Some`: the index is a FOR-tree (`--kind fortree`) with these
    /// parameters instead of a tree of `kind`; it runs on the plain store
    /// without a buffer and keeps `store.buffer_bytes` as its own buffer.
    pub fortree: Option<FortreeOptions>,
    /// The index is an xBR+-tree of points (`--kind xbr`, `index::xbr`)
    /// over `hilbert_domain`, with M from `max_entries` or the page size.
    pub xbr: bool,
    /// `Some`: the index is a grid file of points (`--kind grid`, `gffm`,
    /// `lbgrid`, `hgrid`; [`crate::grid`]) over `hilbert_domain` with these
    /// settings instead of a tree; it has no node store and keeps
    /// `store.buffer_bytes` as the budget of its own buffers.
    pub grid: Option<GridSettings>,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            kind: IndexKind::RStar,
            split: SplitKind::Quadratic,
            page_size: 4096,
            max_entries: None,
            min_entries: None,
            reinsert_percent: crate::index::params::DEFAULT_REINSERT_PERCENT,
            store: StoreOptions::default(),
            // `file`: the index directory's own file, direct I/O.
            device: DeviceSpec::File {
                path: None,
                direct: true,
                engine: IoEngine::Auto,
                capacity: None,
            },
            crs: Crs::default(),
            hilbert_domain: None,
            fortree: None,
            xbr: false,
            grid: None,
        }
    }
}

impl IndexOptions {
    /// The verified tree parameters these options describe.
    pub fn tree_params(&self) -> Result<TreeParams> {
        let capacity = crate::page::max_entries(self.page_size, self.kind == IndexKind::Hilbert);
        let mut p = match self.max_entries {
            // A page too small for a node: for_page's error names it.
            None if capacity < 3 => TreeParams::for_page(self.kind, self.page_size)?,
            // Verified below, once the Hilbert domain is set.
            None => TreeParams::new(self.kind, capacity),
            Some(m) if m > capacity => {
                return Err(Error::invalid(format!(
                    "max entries {m} does not fit a page of {} bytes, which holds at most {capacity} entries",
                    self.page_size
                )))
            }
            Some(m) => TreeParams::new(self.kind, m),
        };
        p = p
            .with_split(self.split)
            .with_reinsert_percent(self.reinsert_percent);
        if let Some(m) = self.min_entries {
            p = p.with_min_entries(m);
        }
        if let (IndexKind::Hilbert, Some(extent)) = (self.kind, self.hilbert_domain) {
            p = p.with_hilbert_domain(HilbertDomain::new(extent, HilbertDomain::DEFAULT_ORDER)?);
        }
        p.verify()?;
        Ok(p)
    }

    /// Sets the structure from its name: `rtree`, `rstar`, `hilbert`,
    /// `fortree` (the FOR-tree, with its default parameters unless some are
    /// set already), `xbr` (the xBR+-tree, for points) or a grid file of
    /// points (`grid`, `gffm`, `lbgrid`, `hgrid`, with the defaults of
    /// [`GridSettings::new`] unless settings are set already).
    pub fn set_kind(&mut self, name: &str) -> Result<()> {
        self.xbr = false;
        if let Some(kind) = GridKind::of(name) {
            self.kind = IndexKind::RTree;
            self.fortree = None;
            let mut g = self.grid.unwrap_or(GridSettings::new(kind));
            g.kind = kind;
            self.grid = Some(g);
            return Ok(());
        }
        self.grid = None;
        if name.eq_ignore_ascii_case("fortree") {
            self.kind = IndexKind::RTree;
            self.fortree.get_or_insert_with(FortreeOptions::default);
        } else if name.eq_ignore_ascii_case("xbr") {
            self.kind = IndexKind::RTree;
            self.fortree = None;
            self.xbr = true;
        } else {
            self.kind = name.parse().map_err(|_| {
                Error::invalid(format!(
                    "unknown index kind {name:?}: use rtree, rstar, hilbert, fortree, xbr, grid, gffm, lbgrid or hgrid"
                ))
            })?;
            self.fortree = None;
        }
        Ok(())
    }

    /// Refuses options that name more than one structure (`fortree`,
    /// `xbr` and `grid` are alternatives to one another and to a tree of
    /// `kind`), which options built field by field can say and
    /// [`set_kind`](Self::set_kind) and [`crate::IndexSpec`] never do.
    pub fn check_structure(&self) -> Result<()> {
        let named: Vec<&str> = [
            self.fortree.is_some().then_some("fortree"),
            self.xbr.then_some("xbr"),
            self.grid.map(|g| g.kind.name()),
        ]
        .into_iter()
        .flatten()
        .collect();
        if named.len() > 1 {
            return Err(Error::invalid(format!(
                "the options name more than one structure ({}): set one with set_kind",
                named.join(", ")
            )));
        }
        Ok(())
    }

    /// The structure's name as the manifest records it (`rstar`, `fortree`, `xbr`, ...).
    pub fn kind_name(&self) -> String {
        if let Some(g) = self.grid {
            return g.kind.name().into();
        }
        match (self.fortree, self.xbr) {
            (Some(_), _) => "fortree".into(),
            (None, true) => "xbr".into(),
            (None, false) => kind_name(self.kind),
        }
    }

    /// The xBR+-tree's configuration (`None` for other structures): the
    /// domain from `hilbert_domain` (required), M from `max_entries` or the
    /// page size.
    pub fn xbr_config(&self) -> Result<Option<XbrConfig>> {
        if !self.xbr {
            return Ok(None);
        }
        let domain = self.hilbert_domain.ok_or_else(|| {
            Error::invalid(
                "an xBR+-tree needs its domain (--hilbert-domain, or a build from data, which uses its extent)",
            )
        })?;
        let capacity = crate::page::max_entries(self.page_size, true);
        let max = match self.max_entries {
            Some(m) if m > capacity => {
                return Err(Error::invalid(format!(
                    "max entries {m} does not fit a page of {} bytes, which holds at most {capacity} xBR+-tree entries",
                    self.page_size
                )))
            }
            Some(m) => m,
            None => capacity,
        };
        let c = XbrConfig::new(domain, max);
        c.verify()?;
        Ok(Some(c))
    }

    /// The grid file's configuration (`None` for a tree): the domain from
    /// `hilbert_domain` (required), the memory budget from the store's,
    /// every parameter checked against the page size. A grid file has no
    /// node store: a store other than the plain one is refused.
    pub fn grid_config(&self) -> Result<Option<GridConfig>> {
        let Some(settings) = self.grid else {
            return Ok(None);
        };
        if self.store.kind != StoreKind::Plain {
            return Err(Error::invalid(format!(
                "a grid file ({}) keeps its own buffers and has no node store: leave the store at plain",
                settings.kind
            )));
        }
        let domain = self.hilbert_domain.ok_or_else(|| {
            Error::invalid(
                "a grid file needs its domain (--hilbert-domain, or a build from data, which uses its extent)",
            )
        })?;
        let c = GridConfig {
            settings,
            domain,
            buffer_bytes: self.store.buffer_bytes,
        };
        c.options(self.page_size)?;
        Ok(Some(c))
    }

    /// The FOR-tree's configuration (`None` for an R-tree-family index):
    /// M and m from `max_entries`/`min_entries` or the page size, the
    /// buffer from the store's budget. Only the plain store is accepted:
    /// the FOR-tree buffers and flushes its nodes itself.
    pub fn fortree_config(&self) -> Result<Option<FortreeConfig>> {
        let Some(f) = self.fortree else {
            return Ok(None);
        };
        if self.store.kind != StoreKind::Plain {
            return Err(Error::invalid(
                "the FOR-tree keeps its own buffer and runs on the plain store (--store plain)",
            ));
        }
        let mut c = FortreeConfig::for_page_size(self.page_size)?;
        if let Some(m) = self.max_entries {
            c = FortreeConfig::new(m);
        }
        if let Some(m) = self.min_entries {
            c.min_entries = m;
        }
        c.buffer_bytes = self.store.buffer_bytes;
        c.flush_unit = f.flush_unit;
        c.write_read_ratio = f.write_read_ratio;
        c.original_root_counter = f.original_root_counter;
        c.verify()?;
        Ok(Some(c))
    }

    /// True for the structures that need a domain: a Hilbert R-tree (its
    /// curve's), an xBR+-tree and a grid file (every point inside).
    pub fn needs_domain(&self) -> bool {
        self.kind == IndexKind::Hilbert || self.xbr || self.grid.is_some()
    }

    /// These options with, for a structure that needs a domain
    /// ([`needs_domain`](Self::needs_domain)) and has none, the extent of
    /// `items` as its domain (widened where it is flat, so the curve or the
    /// grid has an area to cover).
    pub fn with_domain_of<'a>(&self, items: impl IntoIterator<Item = &'a Rect>) -> IndexOptions {
        let mut o = self.clone();
        if !o.needs_domain() || o.hilbert_domain.is_some() {
            return o;
        }
        o.hilbert_domain = Rect::union_all(items).and_then(|e| e.with_area().ok());
        o
    }
}

/// Refuses a bulk load of a FOR-tree or a grid file (both are built by
/// insertion).
pub(super) fn no_bulk_load(opts: &IndexOptions) -> Result<()> {
    if opts.fortree.is_some() {
        return Err(Error::invalid(
            "the FOR-tree has no bulk load: build it by insertion",
        ));
    }
    if let Some(g) = opts.grid {
        return Err(Error::invalid(format!(
            "bulk loading is not available for index kind {}: build it by insertion",
            g.kind
        )));
    }
    Ok(())
}

fn kind_name(kind: IndexKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// The FOR-tree's own parameters in [`IndexOptions`](crate::IndexOptions)
/// (`--kind fortree`); M, m and the buffer come from the index options
/// (page size or `max_entries`, `min_entries`, the store's budget).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FortreeOptions {
    /// `C_w / C_r` in the merge-back threshold (default 10, the seeds' chip).
    pub write_read_ratio: f64,
    /// Reproduce the original root counter (the seeds' failure); default off.
    pub original_root_counter: bool,
    /// Pages per flushing unit of its buffer (default 5).
    pub flush_unit: usize,
}

impl Default for FortreeOptions {
    fn default() -> Self {
        let d = FortreeConfig::new(4);
        FortreeOptions {
            write_read_ratio: d.write_read_ratio,
            original_root_counter: d.original_root_counter,
            flush_unit: d.flush_unit,
        }
    }
}
