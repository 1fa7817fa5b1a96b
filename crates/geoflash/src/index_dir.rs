//! [`Index`]: an R-tree-family index opened from (or created in) an index
//! directory — the manifest, the advisory lock, the device, the node store
//! and the tree put together. This is the type the command line and the
//! Python package use; the layers below know nothing of directories.
//!
//! **The eFIND log.** An eFIND index on a `file` device keeps its log in
//! `log.dat` next to `pages.dat` (same page size and direct-I/O setting, the
//! log's pages from page 0). On every other device (`flashsim:`, `hddsim:`,
//! `mem:`, `hybrid:`) the log is a region of the same device: its last
//! `2 + 2 × ⌈log_capacity / (page_size − 40)⌉` pages, node pages being
//! allocated below it (see [`crate::store::efind`]). Opening an index for
//! writing runs restart (recovery); opening it read-only when its log holds
//! changes to recover is an error saying so. A simulated device's state
//! reaches `device.img` only at checkpoints, so after a killed process a
//! simulated index comes back as of its last checkpoint.
//!
//! An index on a `file` device lives in its directory (`pages.dat`) and can
//! be reopened; one on a `flashsim:` device keeps the simulator's state in
//! `device.img` (saved at every checkpoint), so a later command reopens the
//! same simulated NAND with its contents, mapping and wear (counters count
//! from each opening). Indexes on `mem:`
//! and `hddsim:` devices live only in their process; their directory keeps
//! the manifest for the record.
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::cache::PolicyKind;
use crate::geom::{HilbertDomain, Point, Rect};
use crate::index::fortree::{Fortree, FortreeConfig};
use crate::index::query::{BatchResult, KnnResult, Predicate, QueryResult};
use crate::index::xbr::{XbrConfig, XbrTree};
use crate::index::{
    BulkMethod, ExternalBulkConfig, ExternalBulkReport, IndexKind, RTree, ReadMode, SplitKind,
    TreeParams,
};
use crate::manifest::{Access, Crs, DirLock, Manifest, MANIFEST_VERSION};
use crate::metrics::{Phase, PhaseTimes, Stats, Stopwatch};
use crate::staging::Staging;
use crate::storage::file::{FileDevice, FileDeviceOptions};
use crate::storage::flashsim::FlashSim;
use crate::storage::spec::DeviceSpec;
use crate::storage::PageDevice;
use crate::store::efind::{EfindConfig, EfindStore, RestartReport};
use crate::store::fast::{FastConfig, FastStore, LogPlacement};
use crate::store::placement::Placement;
use crate::store::plain::{PlainConfig, PlainStore};
use crate::store::{NodeStore, OpId};
pub use crate::structure::FortreeOptions;
use crate::structure::Structure;
use crate::{Error, Result};

/// File of node pages inside an index directory.
pub const PAGES_FILE: &str = "pages.dat";

/// File of the eFIND log inside an index directory (file devices).
pub const LOG_FILE: &str = "log.dat";

/// File of the saved flash-simulator state inside an index directory.
pub const DEVICE_IMAGE_FILE: &str = "device.img";

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
    /// ([`Placement`]; `internal-fast` is the sHR-tree). Plain store only.
    #[serde(default)]
    pub placement: Placement,
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
    /// Device spec string.
    pub device: String,
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
            device: "file".into(),
            crs: Crs::default(),
            hilbert_domain: None,
            fortree: None,
            xbr: false,
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
    /// set already) or `xbr` (the xBR+-tree, for points).
    pub fn set_kind(&mut self, name: &str) -> Result<()> {
        self.xbr = false;
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
                    "unknown index kind {name:?}: use rtree, rstar, hilbert, fortree or xbr"
                ))
            })?;
            self.fortree = None;
        }
        Ok(())
    }

    /// The structure's name as the manifest records it (`rstar`, `fortree`, `xbr`, ...).
    pub fn kind_name(&self) -> String {
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

    /// These options with, for a Hilbert R-tree without a domain, the
    /// extent of `items` as its domain (widened where it is flat, so the
    /// curve has an area to cover).
    pub fn with_domain_of<'a>(&self, items: impl IntoIterator<Item = &'a Rect>) -> IndexOptions {
        let mut o = self.clone();
        if (o.kind != IndexKind::Hilbert && !o.xbr) || o.hilbert_domain.is_some() {
            return o;
        }
        o.hilbert_domain = Rect::union_all(items).and_then(|e| {
            let pad = |lo: f64, hi: f64| {
                if hi > lo {
                    0.0
                } else {
                    lo.abs().max(1.0) * 1e-9
                }
            };
            let (px, py) = (pad(e.min_x, e.max_x), pad(e.min_y, e.max_y));
            Rect::new(e.min_x - px, e.min_y - py, e.max_x + px, e.max_y + py).ok()
        });
        o
    }
}

/// An open index.
///
/// ```
/// use geoflash::geom::{Point, Rect};
/// use geoflash::index::query::Predicate;
/// use geoflash::{Index, IndexOptions};
///
/// let opts = IndexOptions { device: "flashsim:preset=seed-tc58".into(), ..IndexOptions::default() };
/// let mut index = Index::create_temporary(&opts)?;
/// for i in 0..1000u64 {
///     let x = (i % 40) as f64;
///     let y = (i / 40) as f64;
///     index.insert(i, Rect::new(x, y, x + 0.5, y + 0.5)?)?;
/// }
/// index.checkpoint()?;
/// let found = index.query(Rect::new(0.0, 0.0, 2.0, 2.0)?, Predicate::Intersects)?;
/// assert_eq!(found.hits.len(), 9);
/// let near = index.nearest(Point::new(10.2, 3.2)?, 1, false)?;
/// assert_eq!(near.neighbors[0].id, 3 * 40 + 10);
/// println!("NAND programs: {}", index.stats("example").sim.nand_programs);
/// # Ok::<(), geoflash::Error>(())
/// ```
pub struct Index {
    dir: Option<PathBuf>,
    manifest: Manifest,
    tree: Structure,
    device: Arc<dyn PageDevice>,
    /// The log's own device (`log.dat`), when the store keeps its log apart.
    log_device: Option<Arc<dyn PageDevice>>,
    /// What restart did when the index was opened.
    restart: Option<RestartReport>,
    /// The flash simulator behind `device`, when it is one: its state is
    /// saved to `device.img` at each checkpoint so later commands can reopen it.
    sim: Option<Arc<FlashSim>>,
    /// The object heap (`objects.dat`), when the index stores geometries.
    objects: Option<crate::objects::Heap>,
    access: Access,
    _lock: Option<DirLock>,
    /// Time of the front end's phases since the index was created or
    /// opened: index operations, filter and refinement of queries, recovery
    /// at open (the store measures its own phases).
    times: Mutex<PhaseTimes>,
}

/// A device, and the flash simulator behind it when it is one.
type OpenedDevice = (Arc<dyn PageDevice>, Option<Arc<FlashSim>>);

/// Opens the device a spec names; a flash simulator is also returned as
/// itself so its state can be saved.
fn open_device(
    spec: &DeviceSpec,
    page_size: usize,
    default_path: Option<&Path>,
) -> Result<OpenedDevice> {
    match spec {
        DeviceSpec::FlashSim { params } => {
            let joined: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let sim = Arc::new(FlashSim::from_params(&joined.join("&"), page_size)?);
            Ok((sim.clone(), Some(sim)))
        }
        other => Ok((other.open(page_size, default_path)?, None)),
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("dir", &self.dir)
            .field("kind", &self.manifest.kind)
            .field("device", &self.device.describe())
            .field("records", &self.tree.len())
            .finish()
    }
}

/// Creates (`fresh`) or opens the store the options name on `device` (the
/// one place that maps store options to a store; tools that replay a build
/// on another device use it too). A store with a log keeps it in a region
/// of `device`; see [`make_store_with_log`].
pub fn make_store(
    device: Arc<dyn PageDevice>,
    opts: &StoreOptions,
    kind: IndexKind,
    fresh: bool,
) -> Result<Box<dyn NodeStore>> {
    let how = if fresh {
        StoreOpen::Create
    } else {
        StoreOpen::Write
    };
    make_store_with_log(device, None, opts, kind, how).map(|(s, _)| s)
}

/// How [`make_store_with_log`] obtains its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreOpen {
    /// Format the device as a new, empty store.
    Create,
    /// Open for writing (stores with a log run restart).
    Write,
    /// Open for reading only (a store whose log needs recovery is refused).
    Read,
}

/// [`make_store`] with the log on `log_device` when given (else in a region
/// of `device`), also returning what restart did (stores with a log).
pub fn make_store_with_log(
    device: Arc<dyn PageDevice>,
    log_device: Option<Arc<dyn PageDevice>>,
    opts: &StoreOptions,
    kind: IndexKind,
    how: StoreOpen,
) -> Result<(Box<dyn NodeStore>, Option<RestartReport>)> {
    make_store_payload(device, log_device, opts, kind == IndexKind::Hilbert, how)
}

/// [`make_store_with_log`] for entries that carry a payload (`with_payload`:
/// the Hilbert R-tree, the xBR+-tree) or not.
pub fn make_store_payload(
    device: Arc<dyn PageDevice>,
    log_device: Option<Arc<dyn PageDevice>>,
    opts: &StoreOptions,
    with_payload: bool,
    how: StoreOpen,
) -> Result<(Box<dyn NodeStore>, Option<RestartReport>)> {
    let fresh = how == StoreOpen::Create;
    if opts.placement != Placement::None && opts.kind != StoreKind::Plain {
        return Err(Error::invalid(format!(
            "placement {} needs the plain store: the {:?} store does not hint its writes to a tiered device",
            opts.placement, opts.kind
        )));
    }
    match opts.kind {
        StoreKind::Plain => {
            let cfg = PlainConfig {
                buffer_bytes: opts.buffer_bytes,
                policy: opts.policy,
                with_payload,
            };
            let store = if fresh {
                PlainStore::create(device, cfg)?
            } else {
                PlainStore::open(device, cfg)?
            };
            Ok((Box::new(store.with_placement(opts.placement)), None))
        }
        StoreKind::Efind => {
            let cfg = EfindConfig {
                buffer_bytes: opts.buffer_bytes,
                read_policy: opts.policy,
                with_payload,
                ..opts.efind.unwrap_or_default()
            };
            cfg.verify()?;
            let store = match (how, log_device) {
                (StoreOpen::Create, None) => EfindStore::create(device, cfg)?,
                (StoreOpen::Create, Some(l)) => EfindStore::create_with_log(device, l, cfg)?,
                (StoreOpen::Write, None) => EfindStore::open(device, cfg)?,
                (StoreOpen::Write, Some(l)) => EfindStore::open_with_log(device, l, cfg)?,
                (StoreOpen::Read, l) => EfindStore::open_read_only(device, l, cfg)?,
            };
            let report = store.restart_report().cloned();
            Ok((Box::new(store), report))
        }
        StoreKind::Fast => {
            let cfg = FastConfig {
                buffer_bytes: opts.buffer_bytes,
                with_payload,
                ..opts.fast.unwrap_or_default()
            };
            cfg.verify()?;
            let pages = cfg.log_pages(device.page_size())?;
            // The log as eFIND places it: `log.dat` from page 0 when given,
            // else the last pages of the node device.
            let log = match log_device {
                Some(l) => LogPlacement {
                    device: l,
                    first_page: 0,
                    pages,
                },
                None => LogPlacement::tail_of(&device, pages)?,
            };
            let store = match how {
                StoreOpen::Create => FastStore::create(device, log, cfg)?,
                StoreOpen::Write => FastStore::open(device, log, cfg)?,
                StoreOpen::Read => FastStore::open_read_only(device, log, cfg)?,
            };
            let report = store.restart_report().cloned();
            Ok((Box::new(store), report))
        }
    }
}

/// The file holding the pages of the index in `dir`: `pages.dat`, the
/// path of a `file:PATH` device, `device.img` for a simulated one (or the
/// manifest's device spec as written, for devices without a file).
fn pages_file(dir: &Path, manifest: &Manifest) -> PathBuf {
    match DeviceSpec::parse(&manifest.device) {
        Ok(DeviceSpec::File { path: Some(p), .. }) => p,
        Ok(DeviceSpec::File { path: None, .. }) => dir.join(PAGES_FILE),
        Ok(DeviceSpec::FlashSim { .. }) => dir.join(DEVICE_IMAGE_FILE),
        _ => PathBuf::from(format!("{} (device {})", dir.display(), manifest.device)),
    }
}

/// Refuses a bulk load of a FOR-tree (it is built by insertion).
fn no_fortree_bulk(opts: &IndexOptions) -> Result<()> {
    if opts.fortree.is_some() {
        return Err(Error::invalid(
            "the FOR-tree has no bulk load: build it by insertion",
        ));
    }
    Ok(())
}

fn kind_name(kind: IndexKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

impl Index {
    /// Creates a new, empty index in `dir` (created if missing; it must not hold an index yet).
    /// Created atomically, as [`Index::build`] creates.
    pub fn create(dir: &Path, opts: &IndexOptions) -> Result<Index> {
        Index::build(dir, opts, |_| Ok::<(), Error>(())).map(|(index, ())| index)
    }

    /// A new, empty index with no directory (any device but a plain `file`;
    /// it lives in this process).
    pub fn create_temporary(opts: &IndexOptions) -> Result<Index> {
        Index::create_in(None, opts, RTree::create)
    }

    /// A new index in `dir` (or in this process only, for `None`) holding
    /// `items`, built bottom-up by `method` at fill factor `fill` in (0, 1],
    /// each page written once. Created atomically (see [`Index::build`]).
    pub fn bulk_load(
        dir: Option<&Path>,
        opts: &IndexOptions,
        items: Vec<(u64, Rect)>,
        method: BulkMethod,
        fill: f64,
    ) -> Result<Index> {
        no_fortree_bulk(opts)?;
        Index::staged_or_temporary(dir, opts, |at| {
            Index::bulk_load_in(at, opts, items, method, fill)
        })
    }

    /// Runs `make` in a staging directory for `dir` and publishes the index
    /// it makes atomically ([`Index::staged`]); without a directory runs it
    /// as it is (the index lives in this process).
    fn staged_or_temporary(
        dir: Option<&Path>,
        opts: &IndexOptions,
        make: impl FnOnce(Option<&Path>) -> Result<Index>,
    ) -> Result<Index> {
        match dir {
            Some(dir) => Index::staged(dir, opts, |staging| make(Some(staging)).map(|i| (i, ())))
                .map(|(index, ())| index),
            None => make(None),
        }
    }

    /// [`Index::bulk_load`] with its files in `dir` as it is.
    fn bulk_load_in(
        dir: Option<&Path>,
        opts: &IndexOptions,
        items: Vec<(u64, Rect)>,
        method: BulkMethod,
        fill: f64,
    ) -> Result<Index> {
        let opts = opts.with_domain_of(items.iter().map(|(_, r)| r));
        if opts.xbr {
            // The xBR+-tree's own bulk load (Z-order, write batches), into
            // the empty tree the directory is created with.
            let points = items
                .iter()
                .map(|&(id, r)| crate::structure::as_point(id, &r).map(|p| (id, p)))
                .collect::<Result<Vec<_>>>()?;
            let mut index = Index::create_in(dir, &opts, RTree::create)?;
            let watch = index.watch();
            index.tree.xbr_load(&points)?;
            index.note(watch, Phase::Index);
            index.checkpoint()?;
            return Ok(index);
        }
        Index::create_in(dir, &opts, |store, params| {
            RTree::bulk_load(store, params, items, method, fill)
        })
    }

    /// A new index in `dir` (or in this process only, for `None`) holding
    /// `items`, Hilbert-packed bottom-up with bounded memory: about
    /// `config.memory_budget` bytes of records, the rest in temporary files
    /// in `config.temp_dir` ([`RTree::bulk_load_external`]), so the input may
    /// be larger than memory. The first error among `items` stops the load
    /// and is returned, and no index is left (the directory is created
    /// atomically, as [`Index::build`] creates). The R-tree family only; a Hilbert R-tree
    /// needs its domain in `opts` (the manifest records it before the load).
    pub fn bulk_load_external<I>(
        dir: Option<&Path>,
        opts: &IndexOptions,
        items: I,
        fill: f64,
        config: &ExternalBulkConfig,
    ) -> Result<(Index, ExternalBulkReport)>
    where
        I: IntoIterator<Item = Result<(u64, Rect)>>,
    {
        if opts.fortree.is_some() || opts.xbr {
            return Err(Error::invalid(
                "the bounded-memory bulk load builds the R-tree family (rtree, rstar, hilbert); \
                 build the FOR-tree by insertion and the xBR+-tree with its own bulk load",
            ));
        }
        let failure: std::cell::Cell<Option<Error>> = std::cell::Cell::new(None);
        let records = items.into_iter().map_while(|r| match r {
            Ok(v) => Some(v),
            Err(e) => {
                failure.set(Some(e));
                None
            }
        });
        let mut report = ExternalBulkReport::default();
        let make = |at: Option<&Path>| {
            Index::create_in(at, opts, |store, params| {
                let (tree, r) = RTree::bulk_load_external(store, params, records, fill, config)?;
                if let Some(e) = failure.take() {
                    return Err(e);
                }
                report = r;
                Ok(tree)
            })
        };
        let index = Index::staged_or_temporary(dir, opts, make)?;
        Ok((index, report))
    }

    /// A new index in `dir`, filled by `fill` (insertions, say), created
    /// atomically: everything happens in the staging directory beside `dir`
    /// (`.NAME.building`, see [`crate::staging`]), which is checkpointed and
    /// renamed onto `dir` once `fill` returns `Ok`. If anything fails the
    /// staging directory is removed (and the `file:PATH` device files the
    /// build created), so `dir` is left as it was: absent, or an empty
    /// directory. `dir` must not exist yet, or be an empty directory.
    ///
    /// A `fill` that stops early (Ctrl-C) and returns `Ok` publishes the
    /// index it made. A process killed inside `fill` leaves the staging
    /// directory, a consistent index that
    /// [`crate::staging::adopt_interrupted`] (`geoflash recover`) renames
    /// onto `dir`.
    pub fn build<T, E: From<Error>>(
        dir: &Path,
        opts: &IndexOptions,
        fill: impl FnOnce(&mut Index) -> std::result::Result<T, E>,
    ) -> std::result::Result<(Index, T), E> {
        Index::staged(dir, opts, |staging| {
            let mut index = Index::create_in(Some(staging), opts, RTree::create)?;
            let t = fill(&mut index)?;
            Ok((index, t))
        })
    }

    /// Runs `make` on a new staging directory for `dir` and publishes what
    /// it returns (checkpointed, renamed onto `dir`); removes the staging
    /// directory if anything fails. The one place where index directories
    /// are created.
    fn staged<T, E: From<Error>>(
        dir: &Path,
        opts: &IndexOptions,
        make: impl FnOnce(&Path) -> std::result::Result<(Index, T), E>,
    ) -> std::result::Result<(Index, T), E> {
        let spec = DeviceSpec::parse(&opts.device)?;
        let staging = Staging::begin(dir, &spec)?;
        let made = make(staging.dir()).and_then(|(mut index, t)| {
            index.checkpoint()?;
            staging.publish()?;
            index.dir = Some(dir.to_path_buf());
            Ok((index, t))
        });
        if made.is_err() {
            staging.abandon();
        }
        made
    }

    /// Creates the manifest, device and store in `dir` (a new staging
    /// directory, see [`Index::staged`]), and lets `build` make the tree.
    fn create_in(
        dir: Option<&Path>,
        opts: &IndexOptions,
        build: impl FnOnce(Box<dyn NodeStore>, TreeParams) -> Result<RTree<Box<dyn NodeStore>>>,
    ) -> Result<Index> {
        let params = opts.tree_params()?;
        let fortree = opts.fortree_config()?;
        let xbr = opts.xbr_config()?;
        if let Some(e) = &opts.store.efind {
            e.verify_for_page(opts.page_size)?;
        }
        let mut store_opts = opts.store;
        if fortree.is_some() {
            // The FOR-tree's buffer is its own (recorded in its parameters).
            store_opts.buffer_bytes = 0;
        }
        let mut fast_auto_log = false;
        if store_opts.kind == StoreKind::Efind {
            // The manifest records every eFIND parameter, durability and log
            // size included (0: automatic, resolved by the store at creation;
            // its identity page keeps the size it chose).
            store_opts.efind = Some(store_opts.efind.unwrap_or_default());
        }
        if store_opts.kind == StoreKind::Fast {
            // Likewise every FAST parameter (FAST's open sizes its log from it).
            let mut f = store_opts.fast.unwrap_or_default();
            f.buffer_bytes = store_opts.buffer_bytes;
            fast_auto_log = f.log_capacity == 0;
            f.log_capacity = f.resolved_log_capacity();
            f.verify()?;
            store_opts.fast = Some(f);
        }
        let spec = DeviceSpec::parse(&opts.device)?;
        let mut manifest = Manifest {
            format_version: MANIFEST_VERSION,
            created_by: format!("geoflash {}", env!("CARGO_PKG_VERSION")),
            kind: opts.kind_name(),
            page_size: opts.page_size,
            device: spec.to_string(),
            crs: opts.crs.clone(),
            index: match (&fortree, &xbr) {
                (Some(c), _) => serde_json::to_value(c),
                (None, Some(c)) => serde_json::to_value(c),
                (None, None) => serde_json::to_value(params),
            }
            .map_err(|e| Error::invalid(e.to_string()))?,
            store: serde_json::to_value(store_opts).map_err(|e| Error::invalid(e.to_string()))?,
        };
        let (lock, (device, sim), log_device) = match dir {
            Some(dir) => {
                // A new, empty staging directory (nothing to clear).
                let lock = DirLock::acquire(dir, Access::Write)?;
                let pages = dir.join(PAGES_FILE);
                let log_device = open_log_device(&spec, &store_opts, dir, opts.page_size, Access::Write)?;
                (Some(lock), open_device(&spec, opts.page_size, Some(&pages))?, log_device)
            }
            None if matches!(spec, DeviceSpec::File { path: None, .. }) => {
                return Err(Error::invalid(
                    "an index without a directory needs a device other than plain \"file\" (e.g. mem:)",
                ))
            }
            None => (None, open_device(&spec, opts.page_size, None)?, None),
        };
        if let (Some(f), None, true) = (store_opts.fast.as_mut(), &log_device, fast_auto_log) {
            // An automatic log on the node device leaves room for the nodes
            // (as eFIND's does); the manifest keeps the size chosen.
            f.log_capacity = crate::store::log::cap_to_shared_device(
                f.log_capacity,
                device.capacity().saturating_mul(opts.page_size as u64),
            );
            manifest.store =
                serde_json::to_value(store_opts).map_err(|e| Error::invalid(e.to_string()))?;
        }
        let mut times = PhaseTimes::default();
        let (store, _) = make_store_payload(
            device.clone(),
            log_device.clone(),
            &store_opts,
            opts.kind == IndexKind::Hilbert || xbr.is_some(),
            StoreOpen::Create,
        )?;
        let tree = match (fortree, xbr) {
            (Some(c), _) => Structure::Fortree(Box::new(Mutex::new(Fortree::create(store, c)?))),
            (None, Some(c)) => Structure::Xbr(Box::new(XbrTree::create(store, c)?)),
            (None, None) => {
                // A bulk load builds the whole tree here: index work.
                let watch = Stopwatch::start(device.sim_clock_ns());
                let tree = build(store, params)?;
                watch.stop(Phase::Index, device.sim_clock_ns(), &mut times);
                Structure::RTree(tree)
            }
        };
        let mut index = Index {
            dir: dir.map(Path::to_path_buf),
            manifest,
            tree,
            device,
            log_device,
            restart: None,
            sim,
            objects: None,
            access: Access::Write,
            _lock: lock,
            times: Mutex::new(times),
        };
        index.checkpoint()?;
        // The manifest is written last: a directory without one holds no index.
        if let Some(dir) = dir {
            index.manifest.store(dir)?;
        }
        Ok(index)
    }

    /// Opens the index in `dir` for reading (shared) or writing (exclusive).
    /// `buffer` overrides the store's memory budget for this session.
    pub fn open(dir: &Path, access: Access) -> Result<Index> {
        Index::open_unlocated(dir, access).map_err(|e| match Manifest::load(dir) {
            Ok(m) => e.in_file(pages_file(dir, &m)),
            Err(_) => e,
        })
    }

    /// [`Index::open`] without naming the file in corruption errors.
    fn open_unlocated(dir: &Path, access: Access) -> Result<Index> {
        if !dir.join(crate::manifest::MANIFEST_FILE).is_file() {
            return Err(Error::invalid(format!(
                "{} is not an index directory (no {}){}",
                dir.display(),
                crate::manifest::MANIFEST_FILE,
                crate::staging::interrupted_hint(dir).unwrap_or_default()
            )));
        }
        let lock = DirLock::acquire(dir, access)?;
        let manifest = Manifest::load(dir)?;
        let index_params = |what: &str| {
            Error::corrupt(
                None,
                format!("manifest {what} parameters: {}", manifest.index),
            )
        };
        let mut xbr: Option<XbrConfig> = None;
        let (params, fortree) = if manifest.kind == "fortree" {
            let c: FortreeConfig = serde_json::from_value(manifest.index.clone())
                .map_err(|_| index_params("FOR-tree"))?;
            (TreeParams::new(IndexKind::RTree, c.max_entries), Some(c))
        } else if manifest.kind == "xbr" {
            let c: XbrConfig = serde_json::from_value(manifest.index.clone())
                .map_err(|_| index_params("xBR+-tree"))?;
            xbr = Some(c);
            (TreeParams::new(IndexKind::RTree, c.max_entries), None)
        } else {
            let p: TreeParams = serde_json::from_value(manifest.index.clone())
                .map_err(|_| index_params("index"))?;
            (p, None)
        };
        let store_opts: StoreOptions = serde_json::from_value(manifest.store.clone())
            .map_err(|e| Error::corrupt(None, format!("manifest store parameters: {e}")))?;
        let spec = DeviceSpec::parse(&manifest.device)?;
        let mut sim = None;
        let device: Arc<dyn PageDevice> = match &spec {
            DeviceSpec::File { path, direct, engine, capacity } => {
                let path = path.clone().unwrap_or_else(|| dir.join(PAGES_FILE));
                let capacity_pages = capacity.map_or(0, |c| c / manifest.page_size as u64);
                let opts = FileDeviceOptions {
                    direct: *direct,
                    engine: *engine,
                    capacity_pages,
                    read_only: access == Access::Read,
                };
                Arc::new(FileDevice::open(&path, manifest.page_size, opts)?)
            }
            DeviceSpec::FlashSim { .. } => {
                let image = dir.join(DEVICE_IMAGE_FILE);
                if !image.is_file() {
                    return Err(Error::invalid(format!(
                        "the index in {} was built on {spec} but its simulator state ({DEVICE_IMAGE_FILE}) is missing",
                        dir.display()
                    )));
                }
                let loaded = Arc::new(FlashSim::load(&image)?);
                sim = Some(loaded.clone());
                loaded
            }
            other => {
                return Err(Error::invalid(format!(
                    "the index in {} was built on device {other}, which lives only in its process in this version; rebuild it",
                    dir.display()
                )))
            }
        };
        let log_device = open_log_device(&spec, &store_opts, dir, manifest.page_size, access)?;
        let how = match access {
            Access::Read => StoreOpen::Read,
            Access::Write => StoreOpen::Write,
        };
        // Opening a store with a log for writing runs its restart (recovery).
        let watch = Stopwatch::start(device.sim_clock_ns());
        let (store, restart) = make_store_payload(
            device.clone(),
            log_device.clone(),
            &store_opts,
            params.kind == IndexKind::Hilbert || xbr.is_some(),
            how,
        )?;
        let mut times = PhaseTimes::default();
        if restart.is_some() {
            watch.stop(Phase::Recovery, device.sim_clock_ns(), &mut times);
        }
        let tree = match (fortree, xbr) {
            (Some(c), _) => Structure::Fortree(Box::new(Mutex::new(Fortree::open(store, c)?))),
            (None, Some(c)) => Structure::Xbr(Box::new(XbrTree::open(store, c)?)),
            (None, None) => Structure::RTree(RTree::open(store, params)?),
        };
        Ok(Index {
            dir: Some(dir.to_path_buf()),
            manifest,
            tree,
            device,
            log_device,
            restart,
            sim,
            objects: open_objects(dir, access)?,
            access,
            _lock: Some(lock),
            times: Mutex::new(times),
        })
    }

    /// `e` naming the index's page file (`pages.dat`, the `file:PATH`, or
    /// `device.img` of a simulated device) when it is a corruption error
    /// that names no file yet (the log names `log.dat` itself). For
    /// errors from [`Index::structure`] or [`Index::tree`] calls.
    pub fn locate(&self, e: Error) -> Error {
        match &self.dir {
            Some(dir) => e.in_file(pages_file(dir, &self.manifest)),
            None => e,
        }
    }

    fn writable(&self) -> Result<()> {
        if self.access == Access::Read {
            return Err(Error::invalid("the index is open read-only"));
        }
        Ok(())
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The directory, if the index has one.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The R-tree-family tree (for inspection, checks and direct
    /// traversals); an error for a FOR-tree index, whose operations go
    /// through [`Index::structure`].
    pub fn tree(&self) -> Result<&RTree<Box<dyn NodeStore>>> {
        self.tree.rtree("this operation")
    }

    /// Sets how range and kNN queries read nodes ([`ReadMode`]: batched by default,
    /// `single` for the papers' one-page-at-a-time reads); the answers do
    /// not change. Not persisted: each open starts batched.
    pub fn set_read_mode(&mut self, mode: ReadMode) {
        self.tree.set_read_mode(mode);
    }

    /// How range and kNN queries read nodes.
    pub fn read_mode(&self) -> ReadMode {
        self.tree.read_mode()
    }

    /// The structure the index holds: an R-tree-family tree or a FOR-tree.
    pub fn structure(&self) -> &Structure {
        &self.tree
    }

    /// The device.
    pub fn device(&self) -> &Arc<dyn PageDevice> {
        &self.device
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.tree.len()
    }

    /// True when the index holds no record.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// Inserts object `id` with MBR `rect` (one atomic operation).
    pub fn insert(&mut self, id: u64, rect: Rect) -> Result<()> {
        self.writable()?;
        let watch = self.watch();
        let done = self.tree.insert(id, rect).map_err(|e| self.locate(e));
        self.note(watch, Phase::Index);
        done
    }

    /// Deletes object `id` with MBR `rect`; an error if it is absent.
    pub fn delete(&mut self, id: u64, rect: Rect) -> Result<()> {
        self.writable()?;
        let watch = self.watch();
        let done = self.tree.delete(id, rect).map_err(|e| self.locate(e));
        self.note(watch, Phase::Index);
        done
    }

    /// Moves object `id` from `old` to `new`.
    pub fn update(&mut self, id: u64, old: Rect, new: Rect) -> Result<()> {
        self.writable()?;
        let watch = self.watch();
        let done = self.tree.update(id, old, new).map_err(|e| self.locate(e));
        self.note(watch, Phase::Index);
        done
    }

    /// Range query.
    pub fn query(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        let watch = self.watch();
        let r = self
            .tree
            .query(window, predicate)
            .map_err(|e| self.locate(e));
        self.note(watch, Phase::Filter);
        r
    }

    /// Batched range queries in one traversal.
    pub fn query_batch(&self, windows: &[Rect], predicate: Predicate) -> Result<BatchResult> {
        let watch = self.watch();
        let r = self
            .tree
            .query_batch(windows, predicate)
            .map_err(|e| self.locate(e));
        self.note(watch, Phase::Filter);
        r
    }

    /// The `k` nearest objects to `point` (and every object tied with the k-th when `ties`).
    pub fn nearest(&self, point: Point, k: usize, ties: bool) -> Result<KnnResult> {
        let watch = self.watch();
        let r = self
            .tree
            .nearest(point, k, ties)
            .map_err(|e| self.locate(e));
        self.note(watch, Phase::Filter);
        r
    }

    /// Time of the front end's phases since the index was created or opened:
    /// index operations, the filter and refinement steps of queries, and
    /// recovery at open (the store's own phases are in its counters).
    pub fn phase_times(&self) -> PhaseTimes {
        *self.times.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A stopwatch started now, on the device's simulated clock if it has one.
    fn watch(&self) -> Stopwatch {
        Stopwatch::start(self.device.sim_clock_ns())
    }

    /// Adds the time since `watch` started to the front end's `phase`.
    fn note(&self, watch: Stopwatch, phase: Phase) {
        let mut times = self.times.lock().unwrap_or_else(|e| e.into_inner());
        watch.stop(phase, self.device.sim_clock_ns(), &mut times);
    }

    /// Flushes everything and syncs the device; a simulated flash device's
    /// state is saved to `device.img` (atomically) so a later command can reopen it.
    pub fn checkpoint(&mut self) -> Result<()> {
        if self.access == Access::Read {
            return Ok(());
        }
        if let Some(heap) = &self.objects {
            heap.sync()?;
        }
        self.tree.checkpoint().map_err(|e| self.locate(e))?;
        if let (Some(sim), Some(dir)) = (&self.sim, &self.dir) {
            sim.save(&dir.join(DEVICE_IMAGE_FILE))?;
        }
        Ok(())
    }

    /// Device and store counters so far, as one [`Stats`] record labelled
    /// `label`. The I/O of a separate log device (`log.dat`) is added to the
    /// device counters; the log's own columns come from the store.
    pub fn stats(&self, label: &str) -> Stats {
        let mut s = Stats::new(label);
        let mut dev = self.device.stats();
        if let Some(log) = &self.log_device {
            add_io(&mut dev.io, &log.stats().io);
        }
        s.set_device(&dev);
        s.absorb_store(&self.tree.store_stats());
        s.absorb_tree(&self.tree.tree_counters());
        s.times
            .add(&self.times.lock().unwrap_or_else(|e| e.into_inner()));
        s
    }

    /// The device of the log when it is a separate file (`log.dat`), else `None`.
    pub fn log_device(&self) -> Option<&Arc<dyn PageDevice>> {
        self.log_device.as_ref()
    }

    /// What restart (recovery) did when the index was opened for writing
    /// (`None` for stores without a log, and for created indexes).
    pub fn restart_report(&self) -> Option<&RestartReport> {
        self.restart.as_ref()
    }

    /// The newest committed operation of a store with a log.
    pub fn last_committed_op(&self) -> Option<OpId> {
        self.tree.last_committed_op()
    }

    /// The newest operation whose commit is durable (stores with a log): it
    /// and every earlier operation survive a crash. `None` for stores whose
    /// operations are durable only after [`checkpoint`](Self::checkpoint).
    pub fn durable_op(&self) -> Option<OpId> {
        self.tree.durable_op()
    }

    /// Checkpoints (when writable) and closes the index.
    pub fn close(mut self) -> Result<()> {
        self.checkpoint()
    }
}

/// Adds the I/O counters `b` to `a`.
fn add_io(a: &mut crate::storage::IoCounters, b: &crate::storage::IoCounters) {
    a.pages_read += b.pages_read;
    a.pages_written += b.pages_written;
    a.bytes_read += b.bytes_read;
    a.bytes_written += b.bytes_written;
    a.read_batches += b.read_batches;
    a.write_batches += b.write_batches;
    a.sequential_reads += b.sequential_reads;
    a.random_reads += b.random_reads;
    a.sequential_writes += b.sequential_writes;
    a.random_writes += b.random_writes;
    a.syncs += b.syncs;
    a.pages_trimmed += b.pages_trimmed;
    a.read_time_ns += b.read_time_ns;
    a.write_time_ns += b.write_time_ns;
    a.sync_time_ns += b.sync_time_ns;
}

/// The log device of an eFIND index on a `file` device: `log.dat` in `dir`
/// (same direct-I/O and engine settings). `None` for other stores and
/// devices, whose log (if any) is a region of the index device.
fn open_log_device(
    spec: &DeviceSpec,
    store: &StoreOptions,
    dir: &Path,
    page_size: usize,
    access: Access,
) -> Result<Option<Arc<dyn PageDevice>>> {
    let DeviceSpec::File { direct, engine, .. } = spec else {
        return Ok(None);
    };
    if store.kind == StoreKind::Plain {
        return Ok(None);
    }
    let path = dir.join(LOG_FILE);
    let opts = FileDeviceOptions {
        direct: *direct,
        engine: *engine,
        capacity_pages: 0,
        read_only: access == Access::Read,
    };
    Ok(Some(Arc::new(FileDevice::open(&path, page_size, opts)?)))
}

/// The object heap of the index in `dir`, if it has one.
fn open_objects(dir: &Path, access: Access) -> Result<Option<crate::objects::Heap>> {
    let path = dir.join(crate::objects::OBJECTS_FILE);
    if !path.exists() {
        return Ok(None);
    }
    crate::objects::Heap::open(&path, access == Access::Read).map(Some)
}

/// Exact geometries: the object heap and refined queries.
impl Index {
    /// A new index in `dir` holding `objects`: their MBRs bulk-loaded into
    /// the tree as [`Index::bulk_load`] does, their geometries in the heap.
    pub fn bulk_load_objects(
        dir: &Path,
        opts: &IndexOptions,
        objects: &[(u64, crate::objects::Geometry)],
        method: BulkMethod,
        fill: f64,
    ) -> Result<Index> {
        let items = objects
            .iter()
            .map(|(id, g)| {
                crate::objects::geometry::bounding_rect(g)
                    .map(|r| (*id, r))
                    .map_err(|e| Error::invalid(format!("object {id}: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        no_fortree_bulk(opts)?;
        Index::staged(dir, opts, |staging| {
            let mut index = Index::bulk_load_in(Some(staging), opts, items, method, fill)?;
            let heap = index.objects_mut()?;
            for (id, g) in objects {
                heap.put(*id, &[], g)?;
            }
            Ok((index, ()))
        })
        .map(|(index, ())| index)
    }

    /// The object heap, if the index has one.
    pub fn objects(&self) -> Option<&crate::objects::Heap> {
        self.objects.as_ref()
    }

    /// The object heap, created in the index directory when missing. An
    /// opened index already holds its heap if it has one, so a heap file
    /// found here is a leftover (none in a new staging directory): it is
    /// replaced.
    fn objects_mut(&mut self) -> Result<&mut crate::objects::Heap> {
        self.writable()?;
        let heap = match self.objects.take() {
            Some(h) => h,
            None => {
                let dir = self.dir.as_deref().ok_or_else(|| {
                    Error::invalid("an object heap needs an index directory; this index has none")
                })?;
                let path = dir.join(crate::objects::OBJECTS_FILE);
                if path.exists() {
                    std::fs::remove_file(&path).map_err(|source| Error::Io {
                        path: path.clone(),
                        page: None,
                        source,
                    })?;
                }
                crate::objects::Heap::create(&path)?
            }
        };
        Ok(self.objects.insert(heap))
    }

    /// Inserts object `id` with its exact geometry: the WKB goes to the
    /// object heap (created on first use), the MBR into the tree. An error
    /// if `id` is already in the heap; nothing changes on an error.
    pub fn insert_object(&mut self, id: u64, geometry: &crate::objects::Geometry) -> Result<()> {
        let rect = crate::objects::geometry::bounding_rect(geometry)
            .map_err(|e| Error::invalid(format!("object {id}: {e}")))?;
        if self.objects_mut()?.contains(id) {
            return Err(Error::invalid(format!(
                "object {id} is already in the object heap; delete it first"
            )));
        }
        let watch = self.watch();
        let done = self.tree.insert(id, rect);
        self.note(watch, Phase::Index);
        done?;
        if let Err(e) = self.objects_mut().and_then(|h| h.put(id, &[], geometry)) {
            let _ = self.tree.delete(id, rect);
            return Err(e);
        }
        Ok(())
    }

    /// Deletes object `id` from the tree and the object heap.
    pub fn delete_object(&mut self, id: u64) -> Result<()> {
        let heap = self.objects_mut()?;
        let g = heap
            .get(id)?
            .ok_or_else(|| Error::invalid(format!("object {id} is not in the object heap")))?;
        let rect = crate::objects::geometry::bounding_rect(&g)?;
        let watch = self.watch();
        let done = self.tree.delete(id, rect);
        self.note(watch, Phase::Index);
        done?;
        self.objects_mut()?.delete(id)
    }

    /// Range query with refinement: the filter step on MBRs, then the exact
    /// geometries from the object heap ([`crate::index::refine::refine`]).
    /// `stats.candidates` counts the filter step's answers, `stats.results`
    /// the refined ones. An error if the index has no object heap.
    pub fn query_refined(&self, window: Rect, predicate: Predicate) -> Result<QueryResult> {
        let heap = self.objects.as_ref().ok_or_else(|| {
            Error::invalid(format!(
                "the index{} has no object heap ({}): build it from a file with geometries (GeoJSON) to use refinement",
                self.dir.as_deref().map(|d| format!(" in {}", d.display())).unwrap_or_default(),
                crate::objects::OBJECTS_FILE
            ))
        })?;
        let filtered = self.query(window, predicate)?;
        let watch = self.watch();
        let refined = crate::index::refine::refine(filtered, heap, window, predicate);
        self.note(watch, Phase::Refinement);
        refined
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn rect(i: u64) -> Rect {
        let x = (i * 7919 % 1000) as f64;
        let y = (i * 104_729 % 997) as f64;
        Rect::new(x, y, x + 5.0, y + 5.0).unwrap()
    }

    fn file_opts() -> IndexOptions {
        IndexOptions {
            page_size: 1024,
            device: "file?direct=false".into(),
            ..IndexOptions::default()
        }
    }

    #[test]
    fn create_close_reopen_read_only_answers_identically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        let mut idx = Index::create(&path, &file_opts()).unwrap();
        for i in 0..2000 {
            idx.insert(i, rect(i)).unwrap();
        }
        let window = Rect::new(100.0, 100.0, 400.0, 300.0).unwrap();
        let mut before: Vec<u64> = idx
            .query(window, Predicate::Intersects)
            .unwrap()
            .hits
            .iter()
            .map(|h| h.id)
            .collect();
        before.sort_unstable();
        assert!(!before.is_empty());
        idx.close().unwrap();

        let ro = Index::open(&path, Access::Read).unwrap();
        assert_eq!(ro.len(), 2000);
        let mut after: Vec<u64> = ro
            .query(window, Predicate::Intersects)
            .unwrap()
            .hits
            .iter()
            .map(|h| h.id)
            .collect();
        after.sort_unstable();
        assert_eq!(before, after);
        ro.tree().unwrap().check().unwrap();
        // a second reader shares; a writer is refused while readers hold it
        let ro2 = Index::open(&path, Access::Read).unwrap();
        assert!(Index::open(&path, Access::Write)
            .unwrap_err()
            .to_string()
            .contains("locked"));
        drop(ro2);
        let mut ro = ro;
        assert!(ro
            .insert(9999, rect(1))
            .unwrap_err()
            .to_string()
            .contains("read-only"));
        drop(ro);

        let mut w = Index::open(&path, Access::Write).unwrap();
        w.delete(5, rect(5)).unwrap();
        w.close().unwrap();
        assert_eq!(Index::open(&path, Access::Read).unwrap().len(), 1999);
    }

    #[test]
    fn logged_indexes_reopen_with_the_same_answers_and_write_less() {
        let dir = tempfile::tempdir().unwrap();
        let mut written = Vec::new();
        for (name, kind) in [
            ("efind", StoreKind::Efind),
            ("plain", StoreKind::Plain),
            ("fast", StoreKind::Fast),
        ] {
            let opts = IndexOptions {
                store: StoreOptions {
                    kind,
                    buffer_bytes: 64 * 1024,
                    ..StoreOptions::default()
                },
                ..file_opts()
            };
            let path = dir.path().join(name);
            let mut idx = Index::create(&path, &opts).unwrap();
            for i in 0..3000 {
                idx.insert(i, rect(i * 7 % 3001)).unwrap();
            }
            for i in (0..3000).step_by(3) {
                idx.delete(i, rect(i * 7 % 3001)).unwrap();
            }
            idx.checkpoint().unwrap();
            written.push(idx.device().stats().io.pages_written);
            let window = Rect::new(200.0, 100.0, 700.0, 600.0).unwrap();
            let mut a: Vec<u64> = idx
                .query(window, Predicate::Intersects)
                .unwrap()
                .hits
                .iter()
                .map(|h| h.id)
                .collect();
            idx.close().unwrap();
            let ro = Index::open(&path, Access::Read).unwrap();
            assert_eq!(ro.len(), 2000);
            ro.tree().unwrap().check().unwrap();
            let mut b: Vec<u64> = ro
                .query(window, Predicate::Intersects)
                .unwrap()
                .hits
                .iter()
                .map(|h| h.id)
                .collect();
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "{name}");
        }
        assert!(
            written[0] < written[1] && written[2] < written[1],
            "eFIND wrote {} pages, plain {}, FAST {}",
            written[0],
            written[1],
            written[2]
        );
    }

    /// A store with a log (eFIND or FAST): 16 KiB of memory, a 256 KiB log.
    fn logged_opts(kind: StoreKind, durability: crate::store::log::Durability) -> IndexOptions {
        IndexOptions {
            store: StoreOptions {
                kind,
                buffer_bytes: 16 * 1024,
                efind: (kind == StoreKind::Efind).then_some(EfindConfig {
                    durability,
                    log_capacity: 256 * 1024,
                    ..EfindConfig::default()
                }),
                fast: (kind == StoreKind::Fast).then_some(FastConfig {
                    durability,
                    log_capacity: 256 * 1024,
                    ..FastConfig::default()
                }),
                ..StoreOptions::default()
            },
            ..file_opts()
        }
    }

    fn ids_in_all(idx: &Index) -> Vec<u64> {
        let all = Rect::new(-1e9, -1e9, 1e9, 1e9).unwrap();
        let mut v: Vec<u64> = idx
            .query(all, Predicate::Intersects)
            .unwrap()
            .hits
            .iter()
            .map(|h| h.id)
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn efind_log_in_log_dat_recovers_an_index_closed_without_checkpoint() {
        log_in_log_dat_recovers_an_index_closed_without_checkpoint(StoreKind::Efind);
    }

    #[test]
    fn fast_log_in_log_dat_recovers_an_index_closed_without_checkpoint() {
        log_in_log_dat_recovers_an_index_closed_without_checkpoint(StoreKind::Fast);
    }

    fn log_in_log_dat_recovers_an_index_closed_without_checkpoint(kind: StoreKind) {
        use crate::store::log::Durability;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        let mut idx = Index::create(&path, &logged_opts(kind, Durability::Sync)).unwrap();
        assert!(path.join(LOG_FILE).is_file());
        for i in 0..1500 {
            idx.insert(i, rect(i)).unwrap();
        }
        for i in (0..1500).step_by(5) {
            idx.delete(i, rect(i)).unwrap();
        }
        let last = idx.last_committed_op().unwrap();
        assert_eq!(
            idx.durable_op(),
            Some(last),
            "sync: every commit is durable"
        );
        let log_io = idx.log_device().unwrap().stats().io.pages_written;
        assert!(log_io > 0);
        let s = idx.stats("build");
        assert!(s.io.pages_written >= log_io + idx.device().stats().io.pages_written);
        // The manifest records the durability and the log size.
        let m = serde_json::to_string(&idx.manifest().store).unwrap();
        assert!(m.contains("Sync") && m.contains("log_capacity"), "{m}");
        // "Crash": drop without checkpoint (the writes reached the files).
        drop(idx);
        let e = Index::open(&path, Access::Read).unwrap_err().to_string();
        assert!(e.contains("needs recovery"), "{e}");
        let idx = Index::open(&path, Access::Write).unwrap();
        let r = idx.restart_report().unwrap().clone();
        assert!(r.changes_replayed > 0 && r.records_in_tree == 1200, "{r:?}");
        assert_eq!(idx.len(), 1200);
        idx.tree().unwrap().check().unwrap();
        let want: Vec<u64> = (0..1500).filter(|i| i % 5 != 0).collect();
        assert_eq!(ids_in_all(&idx), want);
        idx.close().unwrap();
        // After the checkpoint of close, read-only opens need no recovery.
        let ro = Index::open(&path, Access::Read).unwrap();
        assert_eq!(ids_in_all(&ro), want);
        drop(ro);
        // A log of another index is refused.
        let other = dir.path().join("other");
        Index::create(&other, &logged_opts(kind, Durability::Sync))
            .unwrap()
            .close()
            .unwrap();
        std::fs::copy(other.join(LOG_FILE), path.join(LOG_FILE)).unwrap();
        let e = Index::open(&path, Access::Write).unwrap_err().to_string();
        assert!(e.contains("another index"), "{e}");
    }

    #[test]
    fn logged_stores_on_simulated_flash_keep_their_log_in_a_region_of_the_device() {
        for kind in [StoreKind::Efind, StoreKind::Fast] {
            logged_store_on_simulated_flash(kind);
        }
    }

    fn logged_store_on_simulated_flash(kind: StoreKind) {
        use crate::store::log::Durability;
        let dir = tempfile::tempdir().unwrap();
        let opts = IndexOptions {
            device: "flashsim:preset=seed-tc58".into(),
            ..logged_opts(
                kind,
                Durability::Group {
                    ops: 16,
                    millis: 50,
                },
            )
        };
        let path = dir.path().join("sim");
        let mut idx = Index::create(&path, &opts).unwrap();
        assert!(idx.log_device().is_none() && !path.join(LOG_FILE).exists());
        for i in 0..800 {
            idx.insert(i, rect(i)).unwrap();
        }
        let s = idx.stats("build");
        assert!(s.sim.nand_programs > 0);
        idx.close().unwrap();
        let ro = Index::open(&path, Access::Read).unwrap();
        assert_eq!(ids_in_all(&ro), (0..800).collect::<Vec<_>>());
        ro.tree().unwrap().check().unwrap();
    }

    #[test]
    fn hilbert_indexes_keep_their_domain_in_the_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let hilbert = IndexOptions {
            kind: IndexKind::Hilbert,
            page_size: 1024,
            ..file_opts()
        };
        // An empty Hilbert R-tree needs its domain.
        let e = Index::create(&dir.path().join("none"), &hilbert).unwrap_err();
        assert!(
            e.is_user_error() && e.to_string().contains("Hilbert domain"),
            "{e}"
        );
        let items: Vec<(u64, Rect)> = (0..1500).map(|i| (i, rect(i))).collect();
        let window = Rect::new(100.0, 0.0, 900.0, 400.0).unwrap();
        let want: BTreeSet<u64> = items
            .iter()
            .filter(|(_, r)| r.intersects(&window))
            .map(|(id, _)| *id)
            .collect();
        // By insertion with a domain smaller than the data (clamped), and
        // bulk-loaded with the items' extent as its domain.
        let given = IndexOptions {
            hilbert_domain: Some(Rect::new(0.0, 0.0, 300.0, 300.0).unwrap()),
            ..hilbert.clone()
        };
        let p1 = dir.path().join("inserted");
        let mut a = Index::create(&p1, &given).unwrap();
        for (id, r) in &items {
            a.insert(*id, *r).unwrap();
        }
        a.close().unwrap();
        let p2 = dir.path().join("bulk");
        Index::bulk_load(Some(&p2), &hilbert, items.clone(), BulkMethod::Hilbert, 1.0)
            .unwrap()
            .close()
            .unwrap();
        for p in [&p1, &p2] {
            let ix = Index::open(p, Access::Write).unwrap();
            assert!(ix.manifest().index.to_string().contains("hilbert_domain"));
            ix.tree().unwrap().check().unwrap();
            let got: BTreeSet<u64> = ix
                .query(window, Predicate::Intersects)
                .unwrap()
                .hits
                .iter()
                .map(|h| h.id)
                .collect();
            assert_eq!(got, want, "{}", p.display());
        }
    }

    #[test]
    fn bad_creation_requests() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        Index::create(&path, &file_opts()).unwrap().close().unwrap();
        assert!(Index::create(&path, &file_opts())
            .unwrap_err()
            .to_string()
            .contains("already holds"));
        let bad = [
            IndexOptions {
                page_size: 3000,
                ..file_opts()
            },
            IndexOptions {
                max_entries: Some(10_000),
                ..file_opts()
            },
            IndexOptions {
                min_entries: Some(1),
                ..file_opts()
            },
            IndexOptions {
                device: "tape:".into(),
                ..file_opts()
            },
            IndexOptions {
                store: StoreOptions {
                    kind: StoreKind::Fast,
                    fast: Some(FastConfig {
                        flush_unit: 0,
                        ..FastConfig::default()
                    }),
                    ..StoreOptions::default()
                },
                ..file_opts()
            },
            IndexOptions {
                store: StoreOptions {
                    kind: StoreKind::Fast,
                    fast: Some(FastConfig {
                        log_capacity: 512,
                        ..FastConfig::default()
                    }),
                    ..StoreOptions::default()
                },
                ..file_opts()
            },
            IndexOptions {
                store: StoreOptions {
                    kind: StoreKind::Efind,
                    efind: Some(EfindConfig {
                        log_capacity: 512,
                        ..EfindConfig::default()
                    }),
                    ..StoreOptions::default()
                },
                ..file_opts()
            },
        ];
        for (i, o) in bad.iter().enumerate() {
            let target = dir.path().join(format!("bad{i}"));
            let e = Index::create(&target, o).unwrap_err();
            assert!(e.is_user_error(), "{e}");
            // Nothing is left behind, staging directory included.
            assert!(!target.exists(), "{e}");
            assert!(
                !crate::staging::staging_dir(&target).unwrap().exists(),
                "{e}"
            );
        }
        assert!(Index::open(dir.path(), Access::Read)
            .unwrap_err()
            .to_string()
            .contains("not an index directory"));
    }

    /// The directory entries of `dir`, sorted.
    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_failed_build_leaves_no_directory_and_the_previous_index_untouched() {
        let tmp = tempfile::tempdir().unwrap();
        let flash = IndexOptions {
            device: "flashsim:preset=seed-tc58".into(),
            ..IndexOptions::default()
        };
        let xbr = {
            let mut o = file_opts();
            o.set_kind("xbr").unwrap();
            o.hilbert_domain = Some(Rect::new(0.0, 0.0, 2000.0, 2000.0).unwrap());
            o
        };
        for (name, opts) in [("file", file_opts()), ("flash", flash), ("xbr", xbr)] {
            let target = tmp.path().join(name);
            // A duplicate id after 1,000 insertions (a box for the xBR+-tree).
            let e = Index::build(&target, &opts, |ix| {
                for i in 0..1000u64 {
                    let p = i as f64;
                    ix.insert(i, Rect::new(p, 1.0, p, 1.0)?)?;
                }
                // The xBR+-tree refuses a box; the others a duplicate id.
                let id = if opts.xbr { 5000 } else { 0 };
                ix.insert(id, Rect::new(0.0, 0.0, 3.0, 3.0)?)
            })
            .unwrap_err();
            assert!(e.is_user_error(), "{name}: {e}");
            assert_eq!(entries(tmp.path()), Vec::<String>::new(), "{name}: {e}");
        }
        // The same failure over an existing index: refused, untouched.
        let target = tmp.path().join("idx");
        let mut first = Index::create(&target, &file_opts()).unwrap();
        first.insert(1, rect(1)).unwrap();
        first.close().unwrap();
        let before = std::fs::read(target.join(PAGES_FILE)).unwrap();
        let e = Index::build(&target, &file_opts(), |ix| ix.insert(2, rect(2))).unwrap_err();
        assert!(e.to_string().contains("already holds an index"), "{e}");
        assert_eq!(std::fs::read(target.join(PAGES_FILE)).unwrap(), before);
        assert_eq!(entries(tmp.path()), vec!["idx".to_string()]);
        assert_eq!(
            ids_in_all(&Index::open(&target, Access::Read).unwrap()),
            vec![1]
        );
        // An explicit device file outside the directory: removed with the
        // failed build that created it.
        let dev = tmp.path().join("dev.dat");
        let opts = IndexOptions {
            device: format!("file:{}?direct=false", dev.display()),
            ..file_opts()
        };
        let other = tmp.path().join("other");
        Index::build(&other, &opts, |ix| {
            ix.insert(1, rect(1))?;
            ix.insert(1, rect(1))
        })
        .unwrap_err();
        assert!(!dev.exists() && !other.exists());
        // A successful build publishes the directory under its name only.
        let (ix, n) = Index::build(&other, &opts, |ix| {
            ix.insert(1, rect(1))?;
            Ok::<u32, Error>(1)
        })
        .unwrap();
        assert_eq!((n, ix.dir()), (1, Some(other.as_path())));
        ix.close().unwrap();
        assert_eq!(entries(tmp.path()), vec!["dev.dat", "idx", "other"]);
    }

    #[test]
    fn a_killed_build_is_adopted_and_recovered() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("idx");
        let opts = logged_opts(StoreKind::Efind, crate::store::log::Durability::Sync);
        // What a killed build leaves: a staging directory whose operations
        // are durable in its log only (no checkpoint after them).
        let staging = Staging::begin(&target, &DeviceSpec::parse(&opts.device).unwrap()).unwrap();
        let mut ix = Index::create_in(Some(staging.dir()), &opts, RTree::create).unwrap();
        for i in 1..=300 {
            ix.insert(i, rect(i)).unwrap();
        }
        drop(ix);
        let e = Index::open(&target, Access::Read).unwrap_err();
        assert!(e.to_string().contains("geoflash recover"), "{e}");
        let e = Index::create(&target, &opts).unwrap_err();
        assert!(e.to_string().contains("interrupted build"), "{e}");
        assert_eq!(
            crate::staging::adopt_interrupted(&target)
                .unwrap()
                .as_deref(),
            Some(staging.dir())
        );
        let ix = Index::open(&target, Access::Write).unwrap();
        assert_eq!(ids_in_all(&ix), (1..=300).collect::<Vec<_>>());
        assert_eq!(entries(tmp.path()), vec!["idx".to_string()]);
    }

    #[test]
    fn simulated_devices_live_in_their_process() {
        let dir = tempfile::tempdir().unwrap();
        let opts = IndexOptions {
            device: "flashsim:preset=seed-tc58".into(),
            ..IndexOptions::default()
        };
        let mut idx = Index::create(&dir.path().join("sim"), &opts).unwrap();
        for i in 0..500 {
            idx.insert(i, rect(i)).unwrap();
        }
        idx.checkpoint().unwrap();
        let s = idx.stats("build");
        assert!(s.device_simulated && s.sim.nand_programs > 0);
        let programs = s.sim.nand_programs;
        let window = Rect::new(0.0, 0.0, 500.0, 500.0).unwrap();
        let before = idx.query(window, Predicate::Intersects).unwrap().hits.len();
        idx.close().unwrap();
        // the simulated NAND comes back with its contents and counters
        let ro = Index::open(&dir.path().join("sim"), Access::Read).unwrap();
        assert_eq!(
            ro.query(window, Predicate::Intersects).unwrap().hits.len(),
            before
        );
        // counters count from the opening: the reopened device has programmed nothing yet
        assert!(programs > 0);
        assert_eq!(ro.stats("reopen").sim.nand_programs, 0);
        drop(ro);
        std::fs::remove_file(dir.path().join("sim").join(DEVICE_IMAGE_FILE)).unwrap();
        let e = Index::open(&dir.path().join("sim"), Access::Read)
            .unwrap_err()
            .to_string();
        assert!(e.contains("device.img"), "{e}");
        let hdd = IndexOptions {
            device: "hddsim:preset=7200rpm".into(),
            ..IndexOptions::default()
        };
        Index::create(&dir.path().join("hdd"), &hdd)
            .unwrap()
            .close()
            .unwrap();
        let e = Index::open(&dir.path().join("hdd"), Access::Read)
            .unwrap_err()
            .to_string();
        assert!(e.contains("lives only in its process"), "{e}");

        let mut t = Index::create_temporary(&IndexOptions {
            device: "mem:".into(),
            ..IndexOptions::default()
        })
        .unwrap();
        t.insert(1, rect(1)).unwrap();
        assert_eq!(
            t.nearest(Point::new(0.0, 0.0).unwrap(), 1, false)
                .unwrap()
                .neighbors
                .len(),
            1
        );
    }

    #[test]
    fn objects_are_stored_refined_and_reopened() {
        use crate::objects::Geometry;
        use geo::{line_string, polygon};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        let mut idx = Index::create(&path, &file_opts()).unwrap();
        let no_heap = idx
            .query_refined(
                Rect::new(0.0, 0.0, 1.0, 1.0).unwrap(),
                Predicate::Intersects,
            )
            .unwrap_err();
        assert!(no_heap.to_string().contains("no object heap"), "{no_heap}");
        // thin diagonal triangles: the window at the empty corner of each MBR
        for i in 0..50u64 {
            let x = i as f64 * 20.0;
            let tri: Geometry =
                polygon![(x: x, y: 0.0), (x: x + 10.0, y: 10.0), (x: x + 10.0, y: 9.0), (x: x, y: 0.0)]
                    .into();
            idx.insert_object(i, &tri).unwrap();
        }
        let line: Geometry = line_string![(x: 0.0, y: 50.0), (x: 1000.0, y: 50.0)].into();
        idx.insert_object(1000, &line).unwrap();
        assert!(idx
            .insert_object(3, &line)
            .unwrap_err()
            .to_string()
            .contains("already"));
        assert_eq!(idx.len(), 51);
        let corner = Rect::new(0.0, 8.0, 2.0, 10.0).unwrap();
        let r = idx.query_refined(corner, Predicate::Intersects).unwrap();
        assert_eq!((r.stats.candidates, r.stats.results), (1, 0));
        let band = Rect::new(-1.0, 5.0, 1001.0, 60.0).unwrap();
        let r = idx.query_refined(band, Predicate::Contains).unwrap();
        assert_eq!(r.stats.results, 1, "only the line lies inside the band");
        idx.delete_object(1000).unwrap();
        assert!(idx.delete_object(1000).is_err());
        idx.close().unwrap();
        // a heap left by a build killed before its manifest (in its staging
        // directory) does not leak into a new index; a directory holding
        // files is refused, untouched
        let stale = dir.path().join("stale");
        let staging = crate::staging::staging_dir(&stale).unwrap();
        std::fs::create_dir_all(&staging).unwrap();
        std::fs::create_dir_all(&stale).unwrap();
        for d in [&staging, &stale] {
            std::fs::copy(
                path.join(crate::objects::OBJECTS_FILE),
                d.join(crate::objects::OBJECTS_FILE),
            )
            .unwrap();
        }
        assert!(Index::create(&stale, &file_opts()).is_err());
        assert!(stale.join(crate::objects::OBJECTS_FILE).is_file());
        std::fs::remove_file(stale.join(crate::objects::OBJECTS_FILE)).unwrap();
        let mut fresh = Index::create(&stale, &file_opts()).unwrap();
        fresh.insert_object(3, &line).unwrap();
        assert_eq!(fresh.objects().unwrap().len(), 1);
        drop(fresh);

        let ro = Index::open(&path, Access::Read).unwrap();
        assert_eq!(ro.objects().unwrap().len(), 50);
        let w = Rect::new(0.0, 0.0, 1000.0, 10.0).unwrap();
        let r = ro.query_refined(w, Predicate::Contains).unwrap();
        assert_eq!(r.stats.results, 50);
        let r = ro
            .query_refined(Rect::new(9.5, 9.0, 9.8, 9.3).unwrap(), Predicate::Within)
            .unwrap();
        assert_eq!(r.hits.iter().map(|h| h.id).collect::<Vec<_>>(), vec![0]);
        drop(ro);

        let objs: Vec<(u64, Geometry)> = (0..300u64)
            .map(|i| {
                let x = (i % 20) as f64 * 3.0;
                let y = (i / 20) as f64 * 3.0;
                (
                    i,
                    polygon![(x: x, y: y), (x: x + 2.0, y: y), (x: x, y: y + 2.0), (x: x, y: y)]
                        .into(),
                )
            })
            .collect();
        let bulk = Index::bulk_load_objects(
            &dir.path().join("bulk"),
            &file_opts(),
            &objs,
            BulkMethod::Str,
            1.0,
        )
        .unwrap();
        // the window touches each triangle's MBR corner (x+2, y+2) only
        let r = bulk
            .query_refined(
                Rect::new(1.5, 1.5, 2.5, 2.5).unwrap(),
                Predicate::Intersects,
            )
            .unwrap();
        assert_eq!((r.stats.candidates, r.stats.results), (1, 0));
        assert_eq!(bulk.objects().unwrap().len(), 300);
    }

    /// `kind = xbr`: an xBR+-tree of points behind `Index` on every store,
    /// by insertion and by bulk load, answering like brute force after a
    /// reopen; boxes and points outside the domain are refused.
    #[test]
    fn xbr_index_on_every_store_answers_like_brute_force_after_reopen() {
        let pts: Vec<(u64, Rect)> = (0..1500u64)
            .map(|i| {
                let x = (i * 7919 % 1000) as f64 / 10.0;
                let y = (i * 104_729 % 997) as f64 / 10.0;
                (i, Rect::new(x, y, x, y).unwrap())
            })
            .collect();
        let window = Rect::new(20.0, 10.0, 45.0, 60.0).unwrap();
        let want: BTreeSet<u64> = pts
            .iter()
            .filter(|(_, r)| window.contains(r))
            .map(|(i, _)| *i)
            .collect();
        let dir = tempfile::tempdir().unwrap();
        for (n, store) in [StoreKind::Plain, StoreKind::Efind, StoreKind::Fast]
            .into_iter()
            .enumerate()
        {
            let mut opts = IndexOptions {
                page_size: 1024,
                device: "file?direct=false".into(),
                hilbert_domain: Some(Rect::new(0.0, 0.0, 100.0, 100.0).unwrap()),
                store: StoreOptions {
                    kind: store,
                    ..StoreOptions::default()
                },
                ..IndexOptions::default()
            };
            opts.set_kind("xbr").unwrap();
            assert_eq!(opts.kind_name(), "xbr");
            let by_insert = dir.path().join(format!("ins{n}"));
            let mut idx = Index::create(&by_insert, &opts).unwrap();
            for &(i, r) in &pts {
                idx.insert(i, r).unwrap();
            }
            let e = idx.insert(9999, rect(1)).unwrap_err();
            assert!(e.to_string().contains("points"), "{e}");
            let e = idx
                .insert(9999, Rect::new(150.0, 1.0, 150.0, 1.0).unwrap())
                .unwrap_err();
            assert!(e.to_string().contains("outside"), "{e}");
            idx.delete(0, pts[0].1).unwrap();
            idx.close().unwrap();
            let bulk = dir.path().join(format!("bulk{n}"));
            opts.hilbert_domain = None; // the extent of the data
            Index::bulk_load(Some(&bulk), &opts, pts[1..].to_vec(), BulkMethod::Str, 1.0)
                .unwrap()
                .close()
                .unwrap();
            let mut want = want.clone();
            want.remove(&0);
            for path in [&by_insert, &bulk] {
                let idx = Index::open(path, Access::Read).unwrap();
                assert_eq!(idx.manifest().kind, "xbr");
                assert_eq!(idx.len(), 1499);
                let t = idx.structure().xbr().unwrap();
                t.check().unwrap();
                let got: BTreeSet<u64> = idx
                    .query(window, Predicate::Contains)
                    .unwrap()
                    .hits
                    .iter()
                    .map(|h| h.id)
                    .collect();
                assert_eq!(got, want);
                let batch = idx
                    .query_batch(&[window, window], Predicate::Intersects)
                    .unwrap();
                assert!(batch.results.iter().all(|r| r.hits.len() == want.len()));
                let near = idx
                    .nearest(Point::new(50.0, 50.0).unwrap(), 5, true)
                    .unwrap();
                let mut d: Vec<f64> = pts[1..]
                    .iter()
                    .map(|(_, r)| r.min_dist_point(&Point::new(50.0, 50.0).unwrap()))
                    .collect();
                d.sort_by(f64::total_cmp);
                assert!(near.neighbors.len() >= 5);
                assert_eq!(near.neighbors[4].distance, d[4]);
                assert!(idx.tree().is_err(), "not an R-tree");
            }
        }
    }
}
