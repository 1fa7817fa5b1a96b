//! The typed configuration of an index: which structure ([`StructureSpec`],
//! resolved into its verified [`StructureConfig`]) and which node store
//! ([`StoreSpec`]) with each one's own options, so that a combination that
//! makes no sense (a FOR-tree parameter on an R*-tree, an eFIND setting on
//! the FAST store) cannot be written down.
//!
//! Text exists only at the edges: [`crate::IndexSpec`] parses `key = value`
//! settings into these types once, and the manifest (`manifest.json`)
//! serialises the verified [`StructureConfig`] and the [`StoreSpec`] an
//! index was created with, which the one factory
//! (`index_dir::factory::make`) builds the index from at creation and at
//! every opening. A structure's name (`rstar`, `fortree`, `gffm`, ...) is
//! mapped to and from its type here and nowhere else
//! ([`StructureSpec::named`], [`StructureSpec::kind_name`]).
use serde::{Deserialize, Serialize};

use crate::cache::PolicyKind;
use crate::geom::{HilbertDomain, Rect};
use crate::grid::{GridConfig, GridKind, GridSettings};
use crate::index::fortree::FortreeConfig;
use crate::index::params::DEFAULT_REINSERT_PERCENT;
use crate::index::xbr::XbrConfig;
use crate::index::{IndexKind, SplitKind, TreeParams};
use crate::store::efind::EfindConfig;
use crate::store::fast::FastConfig;
use crate::store::placement::Placement;
use crate::{Error, Result};

/// The structure of an index and its own parameters, as a user asks for it
/// (node capacities may be left to the page size, the domain to the data).
/// It serialises as `{"tree": {...}}`, `{"fortree": {...}}`, ... (the
/// workbench records it in a configuration's key).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StructureSpec {
    /// A tree of the R-tree family: R-tree, R*-tree or Hilbert R-tree.
    Tree(TreeSpec),
    /// The FOR-tree (`kind = fortree`): it buffers and flushes its nodes
    /// itself and runs on the plain store, taking the store's memory
    /// budget as its buffer.
    Fortree(FortreeSpec),
    /// The xBR+-tree of points (`kind = xbr`) over the index's domain.
    Xbr(XbrSpec),
    /// A grid file of points (`grid`, `gffm`, `lbgrid`, `hgrid`) over the
    /// index's domain; it has no node store and keeps the store's memory
    /// budget for its own buffers.
    Grid(GridSettings),
}

/// The parameters of an R-tree-family tree.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TreeSpec {
    /// Which tree.
    pub kind: IndexKind,
    /// The R-tree's split (the R*-tree and Hilbert R-tree have their own).
    pub split: SplitKind,
    /// M; `None` for the most a page holds.
    pub max_entries: Option<usize>,
    /// m; `None` for ⌈M/2⌉.
    pub min_entries: Option<usize>,
    /// The R*-tree's forced-reinsertion percentage.
    pub reinsert_percent: u8,
}

impl TreeSpec {
    /// A tree of `kind` with the defaults: quadratic split, M from the
    /// page, m = ⌈M/2⌉, 30 % reinsertion.
    pub fn new(kind: IndexKind) -> TreeSpec {
        TreeSpec {
            kind,
            split: SplitKind::Quadratic,
            max_entries: None,
            min_entries: None,
            reinsert_percent: DEFAULT_REINSERT_PERCENT,
        }
    }
}

/// The FOR-tree's parameters; its buffer is the store's memory budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FortreeSpec {
    /// M; `None` for the most a page holds.
    pub max_entries: Option<usize>,
    /// m; `None` for the FOR-tree's default.
    pub min_entries: Option<usize>,
    /// `C_w / C_r` in the merge-back threshold (default 10, the seeds' chip).
    pub write_read_ratio: f64,
    /// Reproduce the original root counter (the seeds' failure); default off.
    pub original_root_counter: bool,
    /// Pages per flushing unit of its buffer (default 5).
    pub flush_unit: usize,
}

impl Default for FortreeSpec {
    fn default() -> Self {
        let d = FortreeConfig::new(4);
        FortreeSpec {
            max_entries: None,
            min_entries: None,
            write_read_ratio: d.write_read_ratio,
            original_root_counter: d.original_root_counter,
            flush_unit: d.flush_unit,
        }
    }
}

/// The xBR+-tree's parameters; its domain is the index's.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct XbrSpec {
    /// M; `None` for the most a page holds.
    pub max_entries: Option<usize>,
}

impl Default for StructureSpec {
    /// An R*-tree.
    fn default() -> Self {
        StructureSpec::Tree(TreeSpec::new(IndexKind::RStar))
    }
}

/// The names of the structures, as the `kind` key, the manifest and
/// messages spell them.
pub const KIND_NAMES: &[&str] = &[
    "rtree", "rstar", "hilbert", "fortree", "xbr", "grid", "gffm", "lbgrid", "hgrid",
];

impl StructureSpec {
    /// A tree of `kind` with its defaults.
    pub fn tree(kind: IndexKind) -> StructureSpec {
        StructureSpec::Tree(TreeSpec::new(kind))
    }

    /// The structure named `name` (one of [`KIND_NAMES`], any case) with
    /// its defaults.
    pub fn named(name: &str) -> Result<StructureSpec> {
        let n = name.trim().to_ascii_lowercase();
        if let Some(kind) = GridKind::of(&n) {
            return Ok(StructureSpec::Grid(GridSettings::new(kind)));
        }
        Ok(match n.as_str() {
            "fortree" => StructureSpec::Fortree(FortreeSpec::default()),
            "xbr" => StructureSpec::Xbr(XbrSpec::default()),
            _ => StructureSpec::Tree(TreeSpec::new(n.parse().map_err(|_| {
                Error::invalid(format!(
                    "unknown index kind {name:?}: use {}",
                    KIND_NAMES.join(", ")
                ))
            })?)),
        })
    }

    /// The structure's name (one of [`KIND_NAMES`]).
    pub fn kind_name(&self) -> &'static str {
        match self {
            StructureSpec::Tree(t) => match t.kind {
                IndexKind::RTree => "rtree",
                IndexKind::RStar => "rstar",
                IndexKind::Hilbert => "hilbert",
            },
            StructureSpec::Fortree(_) => "fortree",
            StructureSpec::Xbr(_) => "xbr",
            StructureSpec::Grid(g) => g.kind.name(),
        }
    }

    /// The same kind of structure as `other` keeping this one's node
    /// capacities where both have them (what choosing a kind after setting
    /// M does).
    pub fn with_kind_of(self, other: StructureSpec) -> StructureSpec {
        let (max, min) = self.capacities();
        match other {
            StructureSpec::Tree(t) => StructureSpec::Tree(TreeSpec {
                max_entries: t.max_entries.or(max),
                min_entries: t.min_entries.or(min),
                ..t
            }),
            StructureSpec::Fortree(f) => StructureSpec::Fortree(FortreeSpec {
                max_entries: f.max_entries.or(max),
                min_entries: f.min_entries.or(min),
                ..f
            }),
            StructureSpec::Xbr(x) => StructureSpec::Xbr(XbrSpec {
                max_entries: x.max_entries.or(max),
            }),
            grid => grid,
        }
    }

    /// M and m as given (`None`: from the page, or not a node structure).
    pub fn capacities(&self) -> (Option<usize>, Option<usize>) {
        match self {
            StructureSpec::Tree(t) => (t.max_entries, t.min_entries),
            StructureSpec::Fortree(f) => (f.max_entries, f.min_entries),
            StructureSpec::Xbr(x) => (x.max_entries, None),
            StructureSpec::Grid(_) => (None, None),
        }
    }

    /// True for the structures that need a domain: a Hilbert R-tree (its
    /// curve's), an xBR+-tree and a grid file (every point inside).
    pub fn needs_domain(&self) -> bool {
        match self {
            StructureSpec::Tree(t) => t.kind == IndexKind::Hilbert,
            StructureSpec::Fortree(_) => false,
            StructureSpec::Xbr(_) | StructureSpec::Grid(_) => true,
        }
    }

    /// Refuses a bulk load of a structure built by insertion only (the
    /// FOR-tree, the grid files).
    pub fn check_bulk_load(&self) -> Result<()> {
        match self {
            StructureSpec::Fortree(_) => Err(Error::invalid(
                "the FOR-tree has no bulk load: build it by insertion",
            )),
            StructureSpec::Grid(g) => Err(Error::invalid(format!(
                "bulk loading is not available for index kind {}: build it by insertion",
                g.kind
            ))),
            _ => Ok(()),
        }
    }

    /// The verified configuration of this structure on pages of
    /// `page_size` bytes over `domain` (required by the structures that
    /// [`need one`](Self::needs_domain), the Hilbert R-tree excepted, which
    /// is refused when it is created without one), on `store`.
    pub fn resolve(
        &self,
        page_size: usize,
        domain: Option<Rect>,
        store: &StoreSpec,
    ) -> Result<StructureConfig> {
        Ok(match *self {
            StructureSpec::Tree(t) => StructureConfig::Tree(tree_params(&t, page_size, domain)?),
            StructureSpec::Fortree(f) => {
                StructureConfig::Fortree(fortree_config(&f, page_size, store)?)
            }
            StructureSpec::Xbr(x) => {
                let domain = domain.ok_or_else(|| {
                    Error::invalid(
                        "an xBR+-tree needs its domain (--hilbert-domain, or a build from data, which uses its extent)",
                    )
                })?;
                let max = fitting_max(x.max_entries, page_size, true, " xBR+-tree")?;
                let c = XbrConfig::new(domain, max);
                c.verify()?;
                StructureConfig::Xbr(c)
            }
            StructureSpec::Grid(settings) => {
                if !store.is_plain() {
                    return Err(Error::invalid(format!(
                        "a grid file ({}) keeps its own buffers and has no node store: leave the store at plain",
                        settings.kind
                    )));
                }
                let domain = domain.ok_or_else(|| {
                    Error::invalid(
                        "a grid file needs its domain (--hilbert-domain, or a build from data, which uses its extent)",
                    )
                })?;
                let c = GridConfig {
                    settings,
                    domain,
                    buffer_bytes: store.buffer_bytes(),
                };
                c.options(page_size)?;
                StructureConfig::Grid(c)
            }
        })
    }
}

/// M as given, checked against what a page of `page_size` bytes holds
/// (entries with a payload or not), else that capacity.
fn fitting_max(
    max: Option<usize>,
    page_size: usize,
    payload: bool,
    what: &str,
) -> Result<usize> {
    let capacity = crate::page::max_entries(page_size, payload);
    match max {
        Some(m) if m > capacity => Err(Error::invalid(format!(
            "max entries {m} does not fit a page of {page_size} bytes, which holds at most {capacity}{what} entries"
        ))),
        Some(m) => Ok(m),
        None => Ok(capacity),
    }
}

/// The verified parameters of an R-tree-family tree.
fn tree_params(t: &TreeSpec, page_size: usize, domain: Option<Rect>) -> Result<TreeParams> {
    let hilbert = t.kind == IndexKind::Hilbert;
    let capacity = crate::page::max_entries(page_size, hilbert);
    let mut p = match t.max_entries {
        // A page too small for a node: for_page's error names it.
        None if capacity < 3 => TreeParams::for_page(t.kind, page_size)?,
        max => TreeParams::new(t.kind, fitting_max(max, page_size, hilbert, "")?),
    };
    p = p
        .with_split(t.split)
        .with_reinsert_percent(t.reinsert_percent);
    if let Some(m) = t.min_entries {
        p = p.with_min_entries(m);
    }
    if let (true, Some(extent)) = (hilbert, domain) {
        p = p.with_hilbert_domain(HilbertDomain::new(extent, HilbertDomain::DEFAULT_ORDER)?);
    }
    p.verify()?;
    Ok(p)
}

/// The FOR-tree's verified configuration: M and m from the spec or the
/// page, the buffer from the store's budget. Only the plain store is
/// accepted: the FOR-tree buffers and flushes its nodes itself.
fn fortree_config(f: &FortreeSpec, page_size: usize, store: &StoreSpec) -> Result<FortreeConfig> {
    if !store.is_plain() {
        return Err(Error::invalid(
            "the FOR-tree keeps its own buffer and runs on the plain store (--store plain)",
        ));
    }
    let mut c = FortreeConfig::for_page_size(page_size)?;
    if let Some(m) = f.max_entries {
        c = FortreeConfig::new(fitting_max(Some(m), page_size, false, "")?);
    }
    if let Some(m) = f.min_entries {
        c.min_entries = m;
    }
    c.buffer_bytes = store.buffer_bytes();
    c.flush_unit = f.flush_unit;
    c.write_read_ratio = f.write_read_ratio;
    c.original_root_counter = f.original_root_counter;
    c.verify()?;
    Ok(c)
}

/// The verified configuration of an index's structure, every parameter
/// fixed (node capacities, domain, buffers): what the manifest records as
/// its `kind` and `index` and what the factory builds the structure from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StructureConfig {
    /// A tree of the R-tree family.
    Tree(TreeParams),
    /// The FOR-tree.
    Fortree(FortreeConfig),
    /// The xBR+-tree.
    Xbr(XbrConfig),
    /// A grid file.
    Grid(GridConfig),
}

impl StructureConfig {
    /// The structure's name (one of [`KIND_NAMES`]).
    pub fn kind_name(&self) -> &'static str {
        self.spec().kind_name()
    }

    /// The kind of structure this is, with its defaults (the names' one
    /// mapping goes through [`StructureSpec`]).
    fn spec(&self) -> StructureSpec {
        match self {
            StructureConfig::Tree(p) => StructureSpec::Tree(TreeSpec::new(p.kind)),
            StructureConfig::Fortree(_) => StructureSpec::Fortree(FortreeSpec::default()),
            StructureConfig::Xbr(_) => StructureSpec::Xbr(XbrSpec::default()),
            StructureConfig::Grid(g) => StructureSpec::Grid(GridSettings::new(g.settings.kind)),
        }
    }

    /// The structure's parameters as the manifest's `index` value.
    pub fn to_json(&self) -> Result<serde_json::Value> {
        match self {
            StructureConfig::Tree(c) => serde_json::to_value(c),
            StructureConfig::Fortree(c) => serde_json::to_value(c),
            StructureConfig::Xbr(c) => serde_json::to_value(c),
            StructureConfig::Grid(c) => serde_json::to_value(c),
        }
        .map_err(|e| Error::invalid(format!("index parameters do not serialise: {e}")))
    }

    /// The structure a manifest names as `kind` with parameters `index`; an
    /// unknown kind or parameters that do not read as that kind's are an
    /// error saying which.
    pub fn from_json(kind: &str, index: serde_json::Value) -> Result<StructureConfig> {
        let spec = StructureSpec::named(kind)
            .map_err(|_| Error::corrupt(None, format!("unknown index kind {kind:?}")))?;
        let bad = |e: serde_json::Error| {
            Error::corrupt(None, format!("index parameters of kind {kind}: {e}"))
        };
        let config = match spec {
            StructureSpec::Tree(_) => {
                StructureConfig::Tree(serde_json::from_value(index).map_err(bad)?)
            }
            StructureSpec::Fortree(_) => {
                StructureConfig::Fortree(serde_json::from_value(index).map_err(bad)?)
            }
            StructureSpec::Xbr(_) => StructureConfig::Xbr(serde_json::from_value(index).map_err(bad)?),
            StructureSpec::Grid(_) => {
                StructureConfig::Grid(serde_json::from_value(index).map_err(bad)?)
            }
        };
        if config.kind_name() != spec.kind_name() {
            return Err(Error::corrupt(
                None,
                format!(
                    "index kind {kind} with the parameters of kind {}",
                    config.kind_name()
                ),
            ));
        }
        Ok(config)
    }
}

/// Which node store an index uses, without its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// The disk-based baseline: nodes in place, optional buffer.
    Plain,
    /// The eFIND framework.
    Efind,
    /// The FAST framework.
    Fast,
    /// Decoded nodes in this process's memory, no device (an index without
    /// a directory: the `mem:` device holds nothing).
    Memory,
}

impl StoreKind {
    /// Every store, in the order messages list them.
    pub const ALL: [StoreKind; 4] = [
        StoreKind::Plain,
        StoreKind::Efind,
        StoreKind::Fast,
        StoreKind::Memory,
    ];

    /// The store's name (`plain`, `efind`, `fast`, `memory`).
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Plain => "plain",
            StoreKind::Efind => "efind",
            StoreKind::Fast => "fast",
            StoreKind::Memory => "memory",
        }
    }
}

impl std::str::FromStr for StoreKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        StoreKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown store {s:?}: use plain, efind, fast or memory"
                ))
            })
    }
}

/// The node store of an index with its own options, as the manifest
/// records it (`store`). A structure without a node store (a grid file)
/// or with its own buffer (the FOR-tree) records the plain store with
/// no buffer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum StoreSpec {
    /// The disk-based baseline.
    Plain(PlainSpec),
    /// The eFIND framework.
    Efind(EfindSpec),
    /// The FAST framework.
    Fast(FastSpec),
    /// Decoded nodes in memory (`crate::store::mem::MemStore`): an index
    /// without a directory, on `mem:`.
    Memory(MemorySpec),
}

/// The memory store's options: none besides the structure's (it keeps
/// every node, decoded, with no budget, device, log or journal).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySpec {}

/// The plain store's options.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlainSpec {
    /// Memory budget of the buffer in bytes (0: no buffer).
    pub buffer_bytes: usize,
    /// Replacement policy of the buffer.
    pub policy: PolicyKind,
    /// Which nodes are hinted to the fast tier of a two-tier device.
    #[serde(default)]
    pub placement: Placement,
    /// The papers' in-place mode (`journal = off`): the pages of a
    /// structure written in place (the plain store, grid files) get no
    /// rollback journal (`journal.dat`), so a crash between checkpoints can
    /// leave a mix of old and new pages. For the seed workloads, which
    /// reproduce the papers' I/O; such an index refuses acknowledgements.
    #[serde(default)]
    pub in_place: bool,
}

/// The eFIND store's options.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EfindSpec {
    /// Memory budget in bytes (write buffer and read buffer).
    pub buffer_bytes: usize,
    /// Replacement policy of the read buffer.
    pub policy: PolicyKind,
    /// Which nodes are hinted to the fast tier of a two-tier device.
    #[serde(default)]
    pub placement: Placement,
    /// eFIND's parameters (`EfindConfig::default()`: the paper's final
    /// configuration; a `log_capacity` of 0 is sized at creation). Its
    /// `buffer_bytes`, `read_policy`, `with_payload` and `recovery` are
    /// taken from the fields above, the structure and the session.
    pub efind: EfindConfig,
    /// Checkpoints by time: a durability point (a commit, a group commit)
    /// this many milliseconds or more after the index's last checkpoint
    /// is a checkpoint; 0: off (see [`StoreSpec::checkpoint_interval`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub checkpoint_interval_ms: u64,
}

/// The FAST store's options.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FastSpec {
    /// Memory budget of the modifications table in bytes.
    pub buffer_bytes: usize,
    /// Which nodes are hinted to the fast tier of a two-tier device.
    #[serde(default)]
    pub placement: Placement,
    /// FAST's parameters (`FastConfig::default()`: FAST*, units of 5
    /// pages, group commit, an automatic log). Its `with_payload` and
    /// `recovery` are taken from the structure and the session.
    pub fast: FastConfig,
    /// Checkpoints by time, as [`EfindSpec::checkpoint_interval_ms`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub checkpoint_interval_ms: u64,
}

/// Serde: a field left out of the JSON while 0 (off).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Default for StoreSpec {
    /// The plain store with 512 KiB and the S2Q policy.
    fn default() -> Self {
        StoreSpec::plain(512 * 1024)
    }
}

impl StoreSpec {
    /// The plain store with `buffer_bytes` and the S2Q policy.
    pub fn plain(buffer_bytes: usize) -> StoreSpec {
        StoreSpec::Plain(PlainSpec {
            buffer_bytes,
            policy: PolicyKind::S2q,
            placement: Placement::None,
            in_place: false,
        })
    }

    /// The eFIND store with `buffer_bytes` and the parameters of `efind`.
    pub fn efind(buffer_bytes: usize, efind: EfindConfig) -> StoreSpec {
        StoreSpec::Efind(EfindSpec {
            buffer_bytes,
            policy: PolicyKind::S2q,
            placement: Placement::None,
            efind,
            checkpoint_interval_ms: 0,
        })
    }

    /// The FAST store with `buffer_bytes` and the parameters of `fast`.
    pub fn fast(buffer_bytes: usize, fast: FastConfig) -> StoreSpec {
        StoreSpec::Fast(FastSpec {
            buffer_bytes,
            placement: Placement::None,
            fast,
            checkpoint_interval_ms: 0,
        })
    }

    /// The store of `kind` with `buffer_bytes` and its default parameters.
    pub fn of_kind(kind: StoreKind, buffer_bytes: usize) -> StoreSpec {
        match kind {
            StoreKind::Plain => StoreSpec::plain(buffer_bytes),
            StoreKind::Efind => StoreSpec::efind(buffer_bytes, EfindConfig::default()),
            StoreKind::Fast => StoreSpec::fast(buffer_bytes, FastConfig::default()),
            StoreKind::Memory => StoreSpec::Memory(MemorySpec {}),
        }
    }

    /// Which store.
    pub fn kind(&self) -> StoreKind {
        match self {
            StoreSpec::Plain(_) => StoreKind::Plain,
            StoreSpec::Efind(_) => StoreKind::Efind,
            StoreSpec::Fast(_) => StoreKind::Fast,
            StoreSpec::Memory(_) => StoreKind::Memory,
        }
    }

    /// True for the plain store (no log).
    pub fn is_plain(&self) -> bool {
        matches!(self, StoreSpec::Plain(_))
    }

    /// The memory budget in bytes (0 for the memory store, which has none:
    /// it keeps every node).
    pub fn buffer_bytes(&self) -> usize {
        match self {
            StoreSpec::Plain(s) => s.buffer_bytes,
            StoreSpec::Efind(s) => s.buffer_bytes,
            StoreSpec::Fast(s) => s.buffer_bytes,
            StoreSpec::Memory(_) => 0,
        }
    }

    /// Sets the memory budget (nothing for the memory store).
    pub fn set_buffer_bytes(&mut self, bytes: usize) {
        match self {
            StoreSpec::Plain(s) => s.buffer_bytes = bytes,
            StoreSpec::Efind(s) => s.buffer_bytes = bytes,
            StoreSpec::Fast(s) => s.buffer_bytes = bytes,
            StoreSpec::Memory(_) => {}
        }
    }

    /// Which nodes the store hints to the fast tier of a two-tier device
    /// (none for the memory store, which writes no page).
    pub fn placement(&self) -> Placement {
        match self {
            StoreSpec::Plain(s) => s.placement,
            StoreSpec::Efind(s) => s.placement,
            StoreSpec::Fast(s) => s.placement,
            StoreSpec::Memory(_) => Placement::None,
        }
    }

    /// This store with fast-tier hints `placement` (the memory store
    /// ignores them).
    pub fn with_placement(mut self, placement: Placement) -> StoreSpec {
        match &mut self {
            StoreSpec::Plain(s) => s.placement = placement,
            StoreSpec::Efind(s) => s.placement = placement,
            StoreSpec::Fast(s) => s.placement = placement,
            StoreSpec::Memory(_) => {}
        }
        self
    }

    /// True for the papers' in-place mode of the plain store (no rollback
    /// journal; see [`PlainSpec::in_place`]).
    pub fn in_place(&self) -> bool {
        matches!(self, StoreSpec::Plain(s) if s.in_place)
    }

    /// Checkpoints by time: how long after the index's last checkpoint a
    /// durability point (the end of a batch's commit, a group commit of the
    /// store's durability mode) checkpoints instead of only syncing the
    /// log, bounding what a crash leaves to replay by time as the log's
    /// capacity bounds it by size. `None`: off, and always for the plain
    /// store (no log: its commits are checkpoints). The constructors
    /// ([`StoreSpec::efind`], [`StoreSpec::fast`]) leave it off; the front
    /// ends' [`crate::IndexSpec`] sets
    /// [`defaults::CHECKPOINT_INTERVAL`](crate::defaults::CHECKPOINT_INTERVAL).
    pub fn checkpoint_interval(&self) -> Option<std::time::Duration> {
        let ms = match self {
            StoreSpec::Plain(_) | StoreSpec::Memory(_) => 0,
            StoreSpec::Efind(s) => s.checkpoint_interval_ms,
            StoreSpec::Fast(s) => s.checkpoint_interval_ms,
        };
        (ms > 0).then(|| std::time::Duration::from_millis(ms))
    }

    /// This store with checkpoints by time every `interval` (`None`: off;
    /// nothing for the plain store, which has no log).
    pub fn with_checkpoint_interval(mut self, interval: Option<std::time::Duration>) -> StoreSpec {
        let ms = interval.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1));
        match &mut self {
            StoreSpec::Plain(_) | StoreSpec::Memory(_) => {}
            StoreSpec::Efind(s) => s.checkpoint_interval_ms = ms,
            StoreSpec::Fast(s) => s.checkpoint_interval_ms = ms,
        }
        self
    }

    /// The log's capacity as given, 0 for automatic (`None`: no log).
    pub fn log_capacity(&self) -> Option<u64> {
        match self {
            StoreSpec::Plain(_) | StoreSpec::Memory(_) => None,
            StoreSpec::Efind(s) => Some(s.efind.log_capacity),
            StoreSpec::Fast(s) => Some(s.fast.log_capacity),
        }
    }

    /// Checks the store's parameters that depend on the page size
    /// (eFIND's flushing unit against pages of `page_size` bytes).
    pub fn verify(&self, page_size: usize) -> Result<()> {
        match self {
            StoreSpec::Plain(s) if s.policy.keeps_read_queue() => Err(Error::invalid(format!(
                "buffer policy {} is FESTIval's read buffer of eFIND (its A1 is eFIND's read \
                 queue): the plain store cannot take it",
                s.policy
            ))),
            StoreSpec::Plain(_) | StoreSpec::Memory(_) => Ok(()),
            StoreSpec::Efind(s) => EfindConfig {
                read_policy: s.policy,
                ..s.efind
            }
            .verify_for_page(page_size),
            StoreSpec::Fast(_) => Ok(()),
        }
    }
}
