//! Workload files (TOML): datasets, index configurations, the cross product
//! of parameter lists, and the steps run on each configuration. The format
//! is documented in `docs/workbench.md`; [`Workload::parse`] checks
//! everything it can before anything runs, and every error names the file,
//! the line and the key.
//!
//! ```toml
//! name = "example"
//! [[dataset]]
//! name = "uniform"
//! generator = "uniform"
//! geometry = "box"
//! count = { smoke = 2000, small = 100000, full = 1000000 }
//! order = ["random", "hilbert"]          # a list: one configuration per value
//!
//! [[index]]
//! name = "efind"
//! store = "efind"
//! page_size = ["2KiB", "4KiB"]
//! device = "flashsim:preset=seed-tc58"
//! efind = { flush_policy = ["mh", "mhao"] }
//!
//! [[step]]
//! kind = "build"
//! [[step]]
//! kind = "range_queries"
//! selectivity = ["0.01%", "0.1%"]
//! count = 100
//! ```
use std::ops::Range;
use std::path::{Path, PathBuf};

use geoflash::geom::Rect;
use geoflash::index::query::Predicate;
use geoflash::index::BulkMethod;
use geoflash::index_dir::{StoreKind, StoreOptions};
use geoflash::manifest::Crs;
use geoflash::storage::spec::DeviceSpec;
use geoflash::store::efind::{EfindConfig, FlushPolicy};
use geoflash::store::fast::{FastConfig, FastPolicy};
use geoflash::store::log::LogFormat;
use geoflash::units::parse_size;
use geoflash::{Error, IndexOptions, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::generate::{Distribution, GenParams, GeometryKind, InsertionOrder};
use crate::windows::{parse_selectivity, Placement};

/// How large a run is: every count in a workload may give one value per scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Seconds: what `make test` runs.
    Smoke,
    /// Minutes on a 2-core machine.
    Small,
    /// The seed papers' sizes.
    Full,
}

impl Scale {
    /// The scale's name in workload files.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Smoke => "smoke",
            Scale::Small => "small",
            Scale::Full => "full",
        }
    }
}

impl std::str::FromStr for Scale {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "smoke" => Ok(Scale::Smoke),
            "small" => Ok(Scale::Small),
            "full" => Ok(Scale::Full),
            _ => Err(Error::invalid(format!(
                "unknown scale {s:?}: use smoke, small or full"
            ))),
        }
    }
}

/// Where a dataset comes from.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetSource {
    /// A generator with its parameters.
    Generator(GenParams),
    /// A dataset file (any format [`crate::import::read_rects`] reads).
    File(PathBuf),
    /// A PostGIS table (recorded without the URL's password).
    Postgis(crate::postgis::PostgisSource),
}

/// A dataset with one insertion order.
#[derive(Debug, Clone, Serialize)]
pub struct DatasetConfig {
    /// Name given in the workload.
    pub name: String,
    /// Generator or file.
    pub source: DatasetSource,
    /// Insertion order of the objects.
    pub order: InsertionOrder,
    /// Seed of the order (and of the generator).
    pub seed: u64,
}

/// eFIND parameters of a configuration, as in `geoflash build`'s flags
/// (absent ones keep the paper's final configuration).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EfindParams {
    /// p, percentage of oldest buffered pages a flush considers.
    pub flush_percent: Option<u8>,
    /// s, pages per flushing unit.
    pub flush_unit: Option<usize>,
    /// Flushing policy m, mh, mha or mhao.
    pub flush_policy: Option<String>,
    /// Read-buffer share in percent.
    pub read_buffer_percent: Option<u8>,
    /// Temporal control on or off.
    pub temporal_control: Option<bool>,
    /// Durability of the log: sync, group, group:N,T or none.
    pub durability: Option<String>,
    /// Bytes of the log.
    pub log_capacity: Option<u64>,
    /// Format of the log: per-change (the papers', pinned by the seed
    /// workloads) or first-image (the default).
    pub log_format: Option<String>,
}

/// One index configuration (after expanding parameter lists).
#[derive(Debug, Clone, Serialize)]
pub struct IndexConfig {
    /// The workload's name for it, with the varied parameters appended
    /// (`efind[page_size=2048]`).
    pub name: String,
    /// The `[[index]]` entry's own name.
    pub base_name: String,
    /// rtree, rstar, hilbert, fortree or xbr (the xBR+-tree, for point data).
    pub kind: String,
    /// linear, quadratic or exponential.
    pub split: String,
    /// Page size in bytes.
    pub page_size: usize,
    /// M (None: as many as a page holds).
    pub max_entries: Option<usize>,
    /// R*-tree reinsertion percentage.
    pub reinsert: u8,
    /// plain, efind or fast.
    pub store: String,
    /// Memory budget of the store in bytes.
    pub buffer_bytes: usize,
    /// lru, hlru, s2q or 2q.
    pub buffer_policy: String,
    /// Device spec string.
    pub device: String,
    /// How range and kNN queries read nodes: `single` (the papers' one page
    /// at a time, the workbench's default) or `batched` (the library's
    /// default: the children of a node in one device batch; kNN reads the
    /// queued nodes it will likely visit next in one batch). Left out of the
    /// configuration key when `single`, so keys of earlier results stay.
    #[serde(skip_serializing_if = "is_single_reads")]
    pub reads: String,
    /// eFIND parameters.
    pub efind: Option<EfindParams>,
    /// FAST parameters.
    pub fast: Option<FastParams>,
    /// Grid-file parameters (the grid kinds only).
    pub grid: Option<GridParams>,
}

/// Whether `reads` is the workbench's default, `single`.
fn is_single_reads(reads: &str) -> bool {
    reads == "single"
}

/// The families of index kinds the runner drives (see [`crate::target`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexFamily {
    /// The R-tree family through [`geoflash::Index`]: `rtree`, `rstar`,
    /// `hilbert`, `fortree`, `xbr` (points only), and `shrtree` (an R*-tree on the plain store that hints
    /// every internal node to the fast tier of a hybrid device).
    Tree,
    /// A grid file of points.
    Grid(GridKind),
}

/// The grid-file kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GridKind {
    /// The two-level Grid File: GFFM's in-place buckets behind an LRU buffer
    /// that writes each dirty page on its own (a cold list of one page).
    Grid,
    /// GFFM: in-place buckets, hot/cold buffers writing in batches.
    Gffm,
    /// LB-Grid: log-buckets and the BTT.
    LbGrid,
    /// H-Grid: GFFM with hot-region placement on a hybrid device.
    HGrid,
}

/// Every index kind a workload may name, for messages.
pub const INDEX_KINDS: &[&str] = &[
    "rtree", "rstar", "hilbert", "fortree", "xbr", "shrtree", "grid", "gffm", "lbgrid", "hgrid",
];

impl IndexFamily {
    /// The family of index kind `kind`; an error listing the kinds.
    pub fn of(kind: &str) -> Result<IndexFamily> {
        Ok(match kind {
            "rtree" | "rstar" | "hilbert" | "fortree" | "xbr" | "shrtree" => IndexFamily::Tree,
            "grid" => IndexFamily::Grid(GridKind::Grid),
            "gffm" => IndexFamily::Grid(GridKind::Gffm),
            "lbgrid" => IndexFamily::Grid(GridKind::LbGrid),
            "hgrid" => IndexFamily::Grid(GridKind::HGrid),
            _ => {
                return Err(Error::invalid(format!(
                    "unknown index kind {kind:?}: use {}",
                    INDEX_KINDS.join(", ")
                )))
            }
        })
    }

    /// True if the family indexes points only.
    pub fn points_only(self) -> bool {
        !matches!(self, IndexFamily::Tree)
    }
}

/// Grid-file parameters of one configuration (`None`: the default).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GridParams {
    /// `plain` (one page per read) or `batched` (Algorithms 6–8); default batched.
    pub queries: Option<String>,
    /// Share of the buffer given to directory pages (the thesis: 0.75).
    pub dir_share: Option<f64>,
    /// Pages of each cold list, the size of every batch write (the thesis: 128).
    pub cold_pages: Option<usize>,
    /// H-Grid's selectivity constant s (default 1.5).
    pub s: Option<f64>,
    /// H-Grid's special case: every sub-directory on the fast tier.
    pub special: Option<bool>,
}

impl GridParams {
    /// True if queries use the batched algorithms.
    pub fn batched(&self) -> Result<bool> {
        match self.queries.as_deref() {
            None | Some("batched") => Ok(true),
            Some("plain") => Ok(false),
            Some(other) => Err(Error::invalid(format!(
                "grid queries {other:?}: use plain or batched"
            ))),
        }
    }
}

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

/// FAST parameters of one configuration (`None`: the store's default).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FastParams {
    /// Flushing policy fast, fast-star, flush-all or random.
    pub policy: Option<String>,
    /// Pages per flushing unit.
    pub flush_unit: Option<usize>,
    /// Durability of the log: sync, group, group:N,T or none.
    pub durability: Option<String>,
    /// Bytes of the log.
    pub log_capacity: Option<u64>,
    /// Format of the log: per-change or first-image (the default).
    pub log_format: Option<String>,
    /// Seed of the random policy.
    pub seed: Option<u64>,
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
    /// The index family of the configuration's kind.
    pub fn family(&self) -> Result<IndexFamily> {
        IndexFamily::of(&self.kind)
    }

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
        if shr && store_kind != StoreKind::Plain {
            return Err(Error::invalid(format!(
                "index kind shrtree needs store = \"plain\" (store {:?} does not hint its writes)",
                self.store
            )));
        }
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

/// How a build step loads the dataset.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildMethod {
    /// One insertion per object, in the dataset's order.
    Insert,
    /// Bottom-up bulk load.
    Bulk(BulkMethod),
}

fn ser_predicate<S: serde::Serializer>(
    p: &Predicate,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(predicate_name(*p))
}

/// The workload-file name of a predicate.
pub fn predicate_name(p: Predicate) -> &'static str {
    match p {
        Predicate::Intersects => "intersects",
        Predicate::Contains => "contains",
        Predicate::Within => "within",
    }
}

/// Where range-query windows come from.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowSource {
    /// Generated: one batch of `count` windows per selectivity.
    Generated {
        /// Selectivities (fractions of the extent's area).
        selectivities: Vec<f64>,
        /// The selectivities as written (for labels).
        labels: Vec<String>,
        /// Windows per selectivity.
        count: usize,
        /// Width/height ratio.
        aspect: f64,
        /// uniform or on-data.
        #[serde(serialize_with = "ser_placement")]
        placement: Placement,
    },
    /// A CSV file `minx,miny,maxx,maxy`.
    File(PathBuf),
}

fn ser_placement<S: serde::Serializer>(
    p: &Placement,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(match p {
        Placement::Uniform => "uniform",
        Placement::OnData => "on-data",
    })
}

/// One step of a workload.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    /// Builds the index from the first `fraction` of the dataset.
    Build {
        /// Insert or bulk load.
        method: BuildMethod,
        /// Bulk-load fill factor.
        fill: f64,
        /// Share of the dataset loaded (the rest is left for `mixed` steps).
        fraction: f64,
    },
    /// Range queries; one result row per selectivity (or one for a windows file).
    RangeQueries {
        /// Windows.
        windows: WindowSource,
        /// Predicate.
        #[serde(serialize_with = "ser_predicate")]
        predicate: Predicate,
        /// Each window is run this many times.
        repetitions: u32,
        /// Seed of the windows.
        seed: u64,
    },
    /// k-nearest-neighbour queries; one result row per k.
    Knn {
        /// Values of k.
        k: Vec<usize>,
        /// Query points per k.
        count: usize,
        /// Points uniform in the extent or on data objects.
        #[serde(serialize_with = "ser_placement")]
        placement: Placement,
        /// Seed of the points.
        seed: u64,
    },
    /// Inserts of objects not yet loaded mixed with range queries.
    Mixed {
        /// Total operations.
        operations: usize,
        /// Share of operations that insert.
        insert_ratio: f64,
        /// Selectivity of the queries.
        selectivity: f64,
        /// Predicate of the queries.
        #[serde(serialize_with = "ser_predicate")]
        predicate: Predicate,
        /// The searches: range queries of `selectivity` or exact point
        /// lookups of loaded objects (the thesis' insert/search mixes).
        query: MixedQuery,
        /// Seed of the interleaving and of the windows.
        seed: u64,
    },
    /// Exact point lookups of loaded objects, in groups (the thesis' group
    /// point queries; a group of 1 is a single lookup); one row per group size.
    PointQueries {
        /// Group sizes.
        group: Vec<usize>,
        /// Points looked up per group size.
        count: usize,
        /// Seed of the points.
        seed: u64,
    },
    /// Deletes a share of the loaded objects in random order.
    Delete {
        /// Share of the loaded objects deleted.
        fraction: f64,
        /// Seed of the order.
        seed: u64,
    },
    /// Flushes and syncs (a checkpoint).
    Checkpoint,
    /// Inserts `operations` more objects without a checkpoint, crashes (the
    /// index is dropped without flushing) and reopens it, which recovers
    /// from the log. Needs a store with a log (efind) on a `file` device.
    CrashAndRecover {
        /// Inserts between the last checkpoint and the crash.
        operations: usize,
    },
}

impl Step {
    /// The step's kind as written in workload files.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Build { .. } => "build",
            Step::RangeQueries { .. } => "range_queries",
            Step::Knn { .. } => "knn",
            Step::Mixed { .. } => "mixed",
            Step::PointQueries { .. } => "point_queries",
            Step::Delete { .. } => "delete",
            Step::Checkpoint => "checkpoint",
            Step::CrashAndRecover { .. } => "crash_and_recover",
        }
    }
}

/// What the searches of a mixed step are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MixedQuery {
    /// Range queries of the step's selectivity.
    Range,
    /// Exact point lookups of objects already loaded.
    Point,
}

/// One configuration of the cross product: a dataset in one order, one index
/// configuration, one repetition.
#[derive(Debug, Clone, Serialize)]
pub struct Configuration {
    /// The dataset and its order.
    pub dataset: DatasetConfig,
    /// The index.
    pub index: IndexConfig,
    /// Repetition number, from 0.
    pub repetition: u32,
}

impl Configuration {
    /// A stable key identifying the configuration in a results store (its
    /// JSON, which holds every parameter).
    pub fn key(&self, workload: &str, scale: Scale) -> Result<String> {
        let v = serde_json::json!({
            "workload": workload,
            "scale": scale,
            "configuration": self,
        });
        serde_json::to_string(&v)
            .map_err(|e| Error::invalid(format!("cannot serialize configuration: {e}")))
    }
}

/// A parsed, checked workload at one scale.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// Name.
    pub name: String,
    /// Free text.
    pub description: String,
    /// The scale the counts were taken at.
    pub scale: Scale,
    /// Repetitions of each configuration.
    pub repetitions: u32,
    /// Datasets, one per insertion order.
    pub datasets: Vec<DatasetConfig>,
    /// Index configurations, lists expanded.
    pub indexes: Vec<IndexConfig>,
    /// Steps, in order.
    pub steps: Vec<Step>,
    /// The file's text (recorded with the results).
    #[serde(skip)]
    pub text: String,
    /// The file's path.
    pub path: PathBuf,
}

// ---------------------------------------------------------------- raw form

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    repetitions: Option<Spanned<i64>>,
    #[serde(default, rename = "dataset")]
    datasets: Vec<Spanned<RawDataset>>,
    #[serde(default, rename = "index")]
    indexes: Vec<Spanned<RawIndex>>,
    #[serde(default, rename = "step")]
    steps: Vec<Spanned<RawStep>>,
}

type Val = Option<Spanned<toml::Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDataset {
    name: Spanned<String>,
    generator: Option<Spanned<String>>,
    file: Option<Spanned<String>>,
    postgis: Option<Spanned<toml::Table>>,
    geometry: Val,
    count: Val,
    seed: Val,
    order: Val,
    params: Option<Spanned<toml::Table>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIndex {
    name: Spanned<String>,
    kind: Val,
    split: Val,
    page_size: Val,
    max_entries: Val,
    reinsert: Val,
    store: Val,
    buffer: Val,
    buffer_policy: Val,
    device: Val,
    reads: Val,
    efind: Option<Spanned<toml::Table>>,
    fast: Option<Spanned<toml::Table>>,
    grid: Option<Spanned<toml::Table>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    kind: Spanned<String>,
    method: Val,
    bulk: Val,
    fill: Val,
    fraction: Val,
    selectivity: Val,
    windows: Val,
    count: Val,
    aspect: Val,
    placement: Val,
    predicate: Val,
    repetitions: Val,
    seed: Val,
    k: Val,
    operations: Val,
    insert_ratio: Val,
    query: Val,
    group: Val,
}

/// Turns spans into "line N" messages.
struct Ctx<'a> {
    path: &'a Path,
    text: &'a str,
    scale: Scale,
}

impl Ctx<'_> {
    fn line(&self, span: &Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text
            .get(..end)
            .map(|t| t.matches('\n').count() + 1)
            .unwrap_or(1)
    }

    fn err(&self, span: &Range<usize>, key: &str, msg: impl std::fmt::Display) -> Error {
        Error::invalid(format!(
            "{}: line {}, key `{key}`: {msg}",
            self.path.display(),
            self.line(span)
        ))
    }

    /// Maps a library error on a value to a located one.
    fn at<T>(&self, span: &Range<usize>, key: &str, r: Result<T>) -> Result<T> {
        r.map_err(|e| self.err(span, key, strip_invalid(&e)))
    }

    fn string(&self, v: &Spanned<toml::Value>, key: &str) -> Result<String> {
        match v.get_ref() {
            toml::Value::String(s) => Ok(s.clone()),
            other => Err(self.err(
                &v.span(),
                key,
                format!("expected a string, found {}", other.type_str()),
            )),
        }
    }

    fn int(&self, span: &Range<usize>, v: &toml::Value, key: &str) -> Result<u64> {
        match v {
            toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
            toml::Value::Integer(i) => Err(self.err(span, key, format!("{i} is negative"))),
            other => Err(self.err(
                span,
                key,
                format!("expected an integer, found {}", other.type_str()),
            )),
        }
    }

    fn float(&self, span: &Range<usize>, v: &toml::Value, key: &str) -> Result<f64> {
        match v {
            toml::Value::Float(f) if f.is_finite() => Ok(*f),
            toml::Value::Integer(i) => Ok(*i as f64),
            other => Err(self.err(
                span,
                key,
                format!("expected a number, found {}", other.type_str()),
            )),
        }
    }

    /// An integer, or a table `{ smoke = .., small = .., full = .. }` picked by the scale.
    fn scaled(&self, v: &Spanned<toml::Value>, key: &str) -> Result<u64> {
        let span = v.span();
        match v.get_ref() {
            toml::Value::Table(t) => {
                for k in t.keys() {
                    if k.parse::<Scale>().is_err() {
                        return Err(self.err(
                            &span,
                            key,
                            format!("unknown scale {k:?} (use smoke, small and full)"),
                        ));
                    }
                }
                let chosen = t.get(self.scale.name()).ok_or_else(|| {
                    self.err(
                        &span,
                        key,
                        format!("no value for scale {}", self.scale.name()),
                    )
                })?;
                self.int(&span, chosen, &format!("{key}.{}", self.scale.name()))
            }
            other => self.int(&span, other, key),
        }
    }

    /// A value or a list of values (each converted by `f`).
    fn list<T>(
        &self,
        v: &Spanned<toml::Value>,
        key: &str,
        f: impl Fn(&toml::Value) -> Result<T>,
    ) -> Result<Vec<T>> {
        let span = v.span();
        let items: Vec<&toml::Value> = match v.get_ref() {
            toml::Value::Array(a) if a.is_empty() => {
                return Err(self.err(&span, key, "empty list"));
            }
            toml::Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        items
            .into_iter()
            .map(|x| f(x).map_err(|e| self.err(&span, key, strip_invalid(&e))))
            .collect()
    }
}

/// The message of an error without its "invalid argument" prefix.
fn strip_invalid(e: &Error) -> String {
    match e {
        Error::InvalidInput(m) => m.clone(),
        other => other.to_string(),
    }
}

fn as_str(v: &toml::Value) -> Result<String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        other => Err(Error::invalid(format!(
            "expected a string, found {}",
            other.type_str()
        ))),
    }
}

fn as_uint(v: &toml::Value) -> Result<u64> {
    match v {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        other => Err(Error::invalid(format!(
            "expected a non-negative integer, found {other}"
        ))),
    }
}

fn as_size(v: &toml::Value) -> Result<u64> {
    match v {
        toml::Value::Integer(i) if *i > 0 => Ok(*i as u64),
        toml::Value::String(s) => parse_size(s),
        other => Err(Error::invalid(format!(
            "expected a size such as 4096 or \"4KiB\", found {other}"
        ))),
    }
}

fn as_selectivity(v: &toml::Value) -> Result<(f64, String)> {
    match v {
        toml::Value::String(s) => Ok((parse_selectivity(s)?, s.clone())),
        toml::Value::Float(f) => Ok((parse_selectivity(&f.to_string())?, f.to_string())),
        other => Err(Error::invalid(format!(
            "expected a selectivity such as \"0.01%\" or 0.0001, found {other}"
        ))),
    }
}

impl Workload {
    /// Reads and checks the workload file at `path` at `scale`.
    pub fn load(path: &Path, scale: Scale) -> Result<Workload> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            page: None,
            source,
        })?;
        Workload::parse(&text, path, scale)
    }

    /// Parses and checks workload `text` (read from `path`; relative dataset
    /// and windows files are relative to its directory).
    pub fn parse(text: &str, path: &Path, scale: Scale) -> Result<Workload> {
        let raw: RawWorkload = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| format!("line {}: ", Ctx { path, text, scale }.line(&s)))
                .unwrap_or_default();
            Error::invalid(format!(
                "{}: {line}{}",
                path.display(),
                e.message().trim_end()
            ))
        })?;
        let cx = Ctx { path, text, scale };
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        let name = raw.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(cx.err(&raw.name.span(), "name", "must not be empty"));
        }
        let repetitions = match &raw.repetitions {
            None => 1,
            Some(r) if *r.get_ref() >= 1 && *r.get_ref() <= 1000 => *r.get_ref() as u32,
            Some(r) => return Err(cx.err(&r.span(), "repetitions", "must be in 1..=1000")),
        };
        if raw.datasets.is_empty() {
            return Err(Error::invalid(format!(
                "{}: no [[dataset]]: a workload needs at least one",
                path.display()
            )));
        }
        if raw.indexes.is_empty() {
            return Err(Error::invalid(format!(
                "{}: no [[index]]: a workload needs at least one",
                path.display()
            )));
        }
        let mut datasets = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, d) in raw.datasets.iter().enumerate() {
            let d = d.get_ref();
            if !seen.insert(d.name.get_ref().clone()) {
                return Err(cx.err(
                    &d.name.span(),
                    &format!("dataset[{i}].name"),
                    format!("duplicate dataset name {:?}", d.name.get_ref()),
                ));
            }
            datasets.extend(parse_dataset(&cx, d, i, base)?);
        }
        let mut indexes = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (i, x) in raw.indexes.iter().enumerate() {
            let x = x.get_ref();
            if !seen.insert(x.name.get_ref().clone()) {
                return Err(cx.err(
                    &x.name.span(),
                    &format!("index[{i}].name"),
                    format!("duplicate index name {:?}", x.name.get_ref()),
                ));
            }
            indexes.extend(parse_index(&cx, x, i)?);
        }
        // Point index kinds need point datasets (files are checked when read).
        for x in &indexes {
            if !IndexFamily::of(&x.kind).is_ok_and(IndexFamily::points_only) {
                continue;
            }
            for d in &datasets {
                if let DatasetSource::Generator(g) = &d.source {
                    if g.geometry != GeometryKind::Point {
                        let span = raw
                            .indexes
                            .iter()
                            .find(|r| *r.get_ref().name.get_ref() == x.base_name)
                            .map(|r| r.get_ref().name.span())
                            .unwrap_or(0..0);
                        return Err(cx.err(
                            &span,
                            "kind",
                            format!(
                                "index kind {} indexes points, but dataset {:?} generates boxes: \
                                 give it geometry = \"point\"",
                                x.kind, d.name
                            ),
                        ));
                    }
                }
            }
        }
        if raw.steps.is_empty() {
            return Err(Error::invalid(format!(
                "{}: no [[step]]: a workload needs at least one (e.g. kind = \"build\")",
                path.display()
            )));
        }
        let mut steps = Vec::new();
        for (i, s) in raw.steps.iter().enumerate() {
            steps.push(parse_step(&cx, s.get_ref(), i, base)?);
        }
        if !matches!(steps.first(), Some(Step::Build { .. })) {
            return Err(cx.err(
                &raw.steps
                    .first()
                    .map(|s| s.get_ref().kind.span())
                    .unwrap_or(0..0),
                "step[0].kind",
                "the first step must be a build",
            ));
        }
        for (i, s) in steps.iter().enumerate().skip(1) {
            if matches!(s, Step::Build { .. }) {
                let span = raw
                    .steps
                    .get(i)
                    .map(|s| s.get_ref().kind.span())
                    .unwrap_or(0..0);
                return Err(cx.err(
                    &span,
                    &format!("step[{i}].kind"),
                    "only the first step may be a build",
                ));
            }
        }
        Ok(Workload {
            name,
            description: raw.description.clone(),
            scale,
            repetitions,
            datasets,
            indexes,
            steps,
            text: text.to_string(),
            path: path.to_path_buf(),
        })
    }

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

const GEN_PARAMS: &[&str] = &[
    "max_size",
    "percentage",
    "buffer",
    "probability",
    "digits",
    "split_range",
    "dither",
    "cluster_size",
    "cluster_sigma",
];

/// The keys of a dataset's `postgis` table.
const POSTGIS_KEYS: &[&str] = &["url", "table", "geometry_column", "id_column"];

/// A dataset's `postgis = { url, table, geometry_column = "geom", id_column }`.
/// The URL is checked for its form only: the server is read when the
/// workload runs.
fn parse_postgis(
    cx: &Ctx,
    t: &Spanned<toml::Table>,
    key: &str,
) -> Result<crate::postgis::PostgisSource> {
    let span = t.span();
    let get = |k: &str| -> Result<Option<String>> {
        match t.get_ref().get(k) {
            None => Ok(None),
            Some(toml::Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(toml::Value::String(_)) => {
                Err(cx.err(&span, &format!("{key}.{k}"), "must not be empty"))
            }
            Some(other) => Err(cx.err(
                &span,
                &format!("{key}.{k}"),
                format!("expected a string, found {}", other.type_str()),
            )),
        }
    };
    if let Some(k) = t
        .get_ref()
        .keys()
        .find(|k| !POSTGIS_KEYS.contains(&k.as_str()))
    {
        return Err(cx.err(
            &span,
            &format!("{key}.{k}"),
            format!("unknown key (use {})", POSTGIS_KEYS.join(", ")),
        ));
    }
    let required = |k: &str| get(k)?.ok_or_else(|| cx.err(&span, &format!("{key}.{k}"), "missing"));
    let url = required("url")?;
    if !crate::pg::is_url(&url) {
        return Err(cx.err(
            &span,
            &format!("{key}.url"),
            format!(
                "{:?} is not a PostgreSQL URL (postgresql://user@host/dbname)",
                crate::pg::redact(&url)
            ),
        ));
    }
    Ok(crate::postgis::PostgisSource {
        url,
        table: required("table")?,
        geometry_column: get("geometry_column")?.unwrap_or_else(|| "geom".into()),
        id_column: get("id_column")?,
    })
}

fn parse_dataset(cx: &Ctx, d: &RawDataset, i: usize, base: &Path) -> Result<Vec<DatasetConfig>> {
    let key = |k: &str| format!("dataset[{i}].{k}");
    let seed = match &d.seed {
        None => 1,
        Some(v) => cx.int(&v.span(), v.get_ref(), &key("seed"))?,
    };
    // Generator keys given to a file or PostGIS dataset.
    let not_generated = |what: &str| -> Result<()> {
        for (k, v) in [("geometry", &d.geometry), ("count", &d.count)] {
            if let Some(v) = v {
                return Err(cx.err(
                    &v.span(),
                    &key(k),
                    format!("applies to generated datasets only, not to {what}"),
                ));
            }
        }
        if let Some(t) = &d.params {
            return Err(cx.err(
                &t.span(),
                &key("params"),
                format!("applies to generated datasets only, not to {what}"),
            ));
        }
        Ok(())
    };
    let source = match (&d.generator, &d.file, &d.postgis) {
        (None, None, Some(t)) => {
            not_generated("a PostGIS table")?;
            DatasetSource::Postgis(parse_postgis(cx, t, &key("postgis"))?)
        }
        (Some(g), None, None) => {
            let dist: Distribution = cx.at(&g.span(), &key("generator"), g.get_ref().parse())?;
            let geometry: GeometryKind = match &d.geometry {
                None => GeometryKind::Point,
                Some(v) => {
                    let s = cx.string(v, &key("geometry"))?;
                    cx.at(&v.span(), &key("geometry"), s.parse())?
                }
            };
            let count = match &d.count {
                None => {
                    return Err(cx.err(
                        &d.name.span(),
                        &key("count"),
                        "a generated dataset needs a count",
                    ))
                }
                Some(v) => cx.scaled(v, &key("count"))?,
            };
            if count == 0 {
                return Err(cx.err(&d.name.span(), &key("count"), "must be at least 1"));
            }
            let count = usize::try_from(count)
                .map_err(|_| cx.err(&d.name.span(), &key("count"), "too large"))?;
            let mut p = GenParams::new(dist, geometry, count, seed);
            if let Some(t) = &d.params {
                for (k, v) in t.get_ref() {
                    let pk = key(&format!("params.{k}"));
                    let span = t.span();
                    match k.as_str() {
                        "max_size" => p.max_size = cx.float(&span, v, &pk)?,
                        "percentage" => p.percentage = cx.float(&span, v, &pk)?,
                        "buffer" => p.buffer = cx.float(&span, v, &pk)?,
                        "probability" => p.probability = cx.float(&span, v, &pk)?,
                        "digits" => {
                            p.digits = u32::try_from(cx.int(&span, v, &pk)?)
                                .map_err(|_| cx.err(&span, &pk, "too large"))?
                        }
                        "split_range" => p.split_range = cx.float(&span, v, &pk)?,
                        "dither" => p.dither = cx.float(&span, v, &pk)?,
                        "cluster_size" => p.cluster_size = cx.float(&span, v, &pk)?,
                        "cluster_sigma" => p.cluster_sigma = cx.float(&span, v, &pk)?,
                        _ => {
                            return Err(cx.err(
                                &span,
                                &pk,
                                format!(
                                    "unknown generator parameter (use {})",
                                    GEN_PARAMS.join(", ")
                                ),
                            ))
                        }
                    }
                }
                // The generator checks its parameters; try a tiny instance now.
                let mut probe = p.clone();
                probe.count = 1;
                cx.at(
                    &t.span(),
                    &key("params"),
                    crate::generate::generate(&probe).map(|_| ()),
                )?;
            }
            DatasetSource::Generator(p)
        }
        (None, Some(f), None) => {
            let p = base.join(f.get_ref());
            if !p.is_file() {
                return Err(cx.err(
                    &f.span(),
                    &key("file"),
                    format!("dataset file {} does not exist", p.display()),
                ));
            }
            cx.at(
                &f.span(),
                &key("file"),
                crate::import::InputFormat::from_path(&p),
            )?;
            not_generated("a file")?;
            DatasetSource::File(p)
        }
        (None, None, None) => {
            return Err(cx.err(
                &d.name.span(),
                &key("name"),
                "a dataset needs a generator, a file or a postgis table",
            ))
        }
        (g, f, p) => {
            let span = g
                .as_ref()
                .map(|g| g.span())
                .or_else(|| f.as_ref().map(|f| f.span()))
                .or_else(|| p.as_ref().map(|p| p.span()))
                .unwrap_or_else(|| d.name.span());
            return Err(cx.err(
                &span,
                &key("generator"),
                "give one of generator, file or postgis, not several",
            ));
        }
    };
    let orders = match &d.order {
        None => vec![InsertionOrder::AsGenerated],
        Some(v) => cx.list(v, &key("order"), |x| as_str(x)?.parse())?,
    };
    Ok(orders
        .into_iter()
        .map(|order| DatasetConfig {
            name: d.name.get_ref().clone(),
            source: source.clone(),
            order,
            seed,
        })
        .collect())
}

/// One dimension of an index's cross product.
struct Dim {
    key: String,
    span: Range<usize>,
    values: Vec<toml::Value>,
}

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

const FAST_KEYS: &[&str] = &[
    "policy",
    "flush_unit",
    "durability",
    "log_capacity",
    "log_format",
    "seed",
];

const GRID_KEYS: &[&str] = &["queries", "dir_share", "cold_pages", "s", "special"];

fn parse_index(cx: &Ctx, x: &RawIndex, i: usize) -> Result<Vec<IndexConfig>> {
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
    // cross product
    let mut combos: Vec<Vec<usize>> = vec![Vec::new()];
    for d in &dims {
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
            return Err(cx.err(
                &x.name.span(),
                &key("name"),
                "the parameter lists expand to more than 100000 configurations",
            ));
        }
    }
    let has_store_table = x.efind.is_some() || x.fast.is_some();
    let mut out = Vec::new();
    for combo in combos {
        let mut c = IndexConfig {
            name: x.name.get_ref().clone(),
            base_name: x.name.get_ref().clone(),
            kind: "rstar".into(),
            split: "quadratic".into(),
            page_size: 4096,
            max_entries: None,
            reinsert: 30,
            store: "efind".into(),
            buffer_bytes: 512 * 1024,
            buffer_policy: "s2q".into(),
            device: "flashsim:preset=seed-tc58".into(),
            reads: "single".into(),
            efind: None,
            fast: None,
            grid: None,
        };
        let mut varied = Vec::new();
        for (d, &j) in dims.iter().zip(&combo) {
            let Some(v) = d.values.get(j) else { continue };
            if d.values.len() > 1 {
                let shown = match v {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                varied.push(format!("{}={shown}", d.key));
            }
            let k = key(&d.key);
            let at = |r: Result<()>| cx.at(&d.span, &k, r);
            match d.key.as_str() {
                "kind" => at(as_str(v).map(|s| c.kind = s))?,
                "split" => at(as_str(v).map(|s| c.split = s))?,
                "page_size" => at(as_size(v).and_then(|s| {
                    c.page_size =
                        usize::try_from(s).map_err(|_| Error::invalid("page size too large"))?;
                    Ok(())
                }))?,
                "max_entries" => at(as_uint(v).map(|m| c.max_entries = Some(m as usize)))?,
                "reinsert" => at(as_uint(v).and_then(|m| {
                    c.reinsert = u8::try_from(m).ok().filter(|m| *m < 100).ok_or_else(|| {
                        Error::invalid(format!("{m} is not a percentage below 100"))
                    })?;
                    Ok(())
                }))?,
                "store" => at(as_str(v).map(|s| c.store = s))?,
                "buffer" => at(as_size(v).and_then(|s| {
                    c.buffer_bytes =
                        usize::try_from(s).map_err(|_| Error::invalid("buffer too large"))?;
                    Ok(())
                }))?,
                "buffer_policy" => at(as_str(v).map(|s| c.buffer_policy = s))?,
                "device" => at(as_str(v).map(|s| c.device = s))?,
                "reads" => at(as_str(v).map(|s| c.reads = s))?,
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
                            "read_buffer_percent" => {
                                at(pct(v).map(|n| e.read_buffer_percent = Some(n)))?
                            }
                            "flush_unit" => {
                                at(as_uint(v).map(|n| e.flush_unit = Some(n as usize)))?
                            }
                            "durability" => at(as_str(v).and_then(|s| {
                                geoflash::store::log::Durability::parse(&s)?;
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
                                parse_flush_policy(&s)?;
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
                            "queries" => at(as_str(v).and_then(|s| {
                                g.queries = Some(s);
                                g.batched().map(|_| ())
                            }))?,
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
                            "flush_unit" => {
                                at(as_uint(v).map(|n| f.flush_unit = Some(n as usize)))?
                            }
                            "durability" => at(as_str(v).and_then(|s| {
                                geoflash::store::log::Durability::parse(&s)?;
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
        }
        if !varied.is_empty() {
            c.name = format!("{}[{}]", c.name, varied.join(","));
        }
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
        let _ = has_store_table;
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
            Err(e) => {
                return Err(cx.err(&check_key("kind", &span), &key("kind"), strip_invalid(&e)))
            }
        };
        if c.grid.is_some() && !matches!(family, IndexFamily::Grid(_)) {
            let span = x.grid.as_ref().map(|t| t.span()).unwrap_or(0..0);
            return Err(cx.err(
                &span,
                &key("grid"),
                format!("grid parameters given for index kind {:?}", c.kind),
            ));
        }
        if let Err(e) = c.reads.parse::<geoflash::index::ReadMode>() {
            return Err(cx.err(&check_key("reads", &span), &key("reads"), strip_invalid(&e)));
        }
        if family != IndexFamily::Tree {
            // Grid files have their own buffers and no store.
            if let Err(e) = DeviceSpec::parse(&c.device) {
                return Err(cx.err(
                    &check_key("device", &span),
                    &key("device"),
                    strip_invalid(&e),
                ));
            }
            if family == IndexFamily::Grid(GridKind::HGrid)
                && !matches!(DeviceSpec::parse(&c.device), Ok(DeviceSpec::Hybrid { .. }))
            {
                return Err(cx.err(
                    &check_key("device", &span),
                    &key("device"),
                    format!(
                        "index kind hgrid places hot pages on the fast tier of a hybrid device: \
                         device {:?} has one tier (use hybrid:fast=(SPEC);slow=(SPEC))",
                        c.device
                    ),
                ));
            }
            let unit = Rect::new(0.0, 0.0, 1.0, 1.0)?;
            if let Err(e) = c.grid_options(unit) {
                let at = x.grid.as_ref().map(|t| t.span()).unwrap_or(span.clone());
                return Err(cx.err(&at, &key("grid"), strip_invalid(&e)));
            }
            c.store = "none".into();
            out.push(c);
            continue;
        }
        if let Err(e) = c.split.parse::<geoflash::index::SplitKind>() {
            return Err(cx.err(&check_key("split", &span), &key("split"), strip_invalid(&e)));
        }
        if let Err(e) = c.store.parse::<StoreKind>() {
            return Err(cx.err(&check_key("store", &span), &key("store"), strip_invalid(&e)));
        }
        if let Err(e) = c.buffer_policy.parse::<geoflash::cache::PolicyKind>() {
            return Err(cx.err(
                &check_key("buffer_policy", &span),
                &key("buffer_policy"),
                strip_invalid(&e),
            ));
        }
        if let Err(e) = DeviceSpec::parse(&c.device) {
            return Err(cx.err(
                &check_key("device", &span),
                &key("device"),
                strip_invalid(&e),
            ));
        }
        if let Err(e) = c.options() {
            let msg = strip_invalid(&e);
            // Name the key the library's complaint is about.
            let k = if msg.contains("read buffer") || msg.contains("flush") {
                "efind"
            } else if msg.contains("max entries") && dims.iter().any(|d| d.key == "max_entries") {
                "max_entries"
            } else if msg.contains("reinsert") && dims.iter().any(|d| d.key == "reinsert") {
                "reinsert"
            } else if msg.contains("shrtree") {
                if msg.contains("store") {
                    "store"
                } else {
                    "device"
                }
            } else {
                "page_size"
            };
            let at = if k == "efind" {
                x.efind
                    .as_ref()
                    .map(|t| t.span())
                    .unwrap_or_else(|| span.clone())
            } else {
                check_key(k, &span)
            };
            return Err(cx.err(&at, &key(k), msg));
        }
        out.push(c);
    }
    Ok(out)
}

const STEP_KEYS: &[(&str, &[&str])] = &[
    ("build", &["method", "bulk", "fill", "fraction"]),
    (
        "range_queries",
        &[
            "selectivity",
            "windows",
            "count",
            "aspect",
            "placement",
            "predicate",
            "repetitions",
            "seed",
        ],
    ),
    ("knn", &["k", "count", "placement", "seed"]),
    (
        "mixed",
        &[
            "operations",
            "insert_ratio",
            "selectivity",
            "predicate",
            "query",
            "seed",
        ],
    ),
    ("point_queries", &["group", "count", "seed"]),
    ("delete", &["fraction", "seed"]),
    ("checkpoint", &[]),
    ("crash_and_recover", &["operations"]),
];

fn parse_step(cx: &Ctx, s: &RawStep, i: usize, base: &Path) -> Result<Step> {
    let key = |k: &str| format!("step[{i}].{k}");
    let kind = s.kind.get_ref().as_str();
    let Some((_, allowed)) = STEP_KEYS.iter().find(|(k, _)| *k == kind) else {
        let kinds: Vec<&str> = STEP_KEYS.iter().map(|(k, _)| *k).collect();
        return Err(cx.err(
            &s.kind.span(),
            &key("kind"),
            format!("unknown step kind {kind:?} (use {})", kinds.join(", ")),
        ));
    };
    let given: [(&str, &Val); 17] = [
        ("method", &s.method),
        ("bulk", &s.bulk),
        ("fill", &s.fill),
        ("fraction", &s.fraction),
        ("selectivity", &s.selectivity),
        ("windows", &s.windows),
        ("count", &s.count),
        ("aspect", &s.aspect),
        ("placement", &s.placement),
        ("predicate", &s.predicate),
        ("repetitions", &s.repetitions),
        ("seed", &s.seed),
        ("k", &s.k),
        ("operations", &s.operations),
        ("insert_ratio", &s.insert_ratio),
        ("query", &s.query),
        ("group", &s.group),
    ];
    for (k, v) in given {
        if let Some(v) = v {
            if !allowed.contains(&k) {
                return Err(cx.err(
                    &v.span(),
                    &key(k),
                    format!(
                        "does not apply to {kind} steps (they take: {})",
                        if allowed.is_empty() {
                            "nothing".to_string()
                        } else {
                            allowed.join(", ")
                        }
                    ),
                ));
            }
        }
    }
    let float_in = |v: &Val, k: &str, dflt: f64, lo: f64, hi: f64| -> Result<f64> {
        match v {
            None => Ok(dflt),
            Some(v) => {
                let f = cx.float(&v.span(), v.get_ref(), &key(k))?;
                if f > lo && f <= hi {
                    Ok(f)
                } else {
                    Err(cx.err(&v.span(), &key(k), format!("{f} must be in ({lo}, {hi}]")))
                }
            }
        }
    };
    let seed = match &s.seed {
        None => 1,
        Some(v) => cx.int(&v.span(), v.get_ref(), &key("seed"))?,
    };
    let predicate = match &s.predicate {
        None => Predicate::Intersects,
        Some(v) => {
            let p = cx.string(v, &key("predicate"))?;
            match p.as_str() {
                "intersects" => Predicate::Intersects,
                "contains" => Predicate::Contains,
                "within" => Predicate::Within,
                _ => {
                    return Err(cx.err(
                        &v.span(),
                        &key("predicate"),
                        format!("unknown predicate {p:?}: use intersects, contains or within"),
                    ))
                }
            }
        }
    };
    let placement = match &s.placement {
        None => Placement::Uniform,
        Some(v) => {
            let p = cx.string(v, &key("placement"))?;
            cx.at(&v.span(), &key("placement"), p.parse())?
        }
    };
    let count = |dflt: u64| -> Result<usize> {
        let n = match &s.count {
            None => dflt,
            Some(v) => cx.scaled(v, &key("count"))?,
        };
        if n == 0 {
            let span = s.count.as_ref().map(|v| v.span()).unwrap_or(0..0);
            return Err(cx.err(&span, &key("count"), "must be at least 1"));
        }
        usize::try_from(n).map_err(|_| Error::invalid("count too large"))
    };
    Ok(match kind {
        "build" => {
            let method = match (&s.method, &s.bulk) {
                (None, None) => BuildMethod::Insert,
                (Some(m), b) => {
                    let m = cx.string(m, &key("method"))?;
                    match (m.as_str(), b) {
                        ("insert", None) => BuildMethod::Insert,
                        ("insert", Some(b)) => {
                            return Err(cx.err(
                                &b.span(),
                                &key("bulk"),
                                "applies to method = \"bulk\" only",
                            ))
                        }
                        ("bulk", None) => BuildMethod::Bulk(BulkMethod::Str),
                        ("bulk", Some(b)) => {
                            let bs = cx.string(b, &key("bulk"))?;
                            BuildMethod::Bulk(cx.at(&b.span(), &key("bulk"), bs.parse())?)
                        }
                        _ => {
                            let span = s.method.as_ref().map(|v| v.span()).unwrap_or(0..0);
                            return Err(cx.err(
                                &span,
                                &key("method"),
                                format!("unknown build method {m:?}: use insert or bulk"),
                            ));
                        }
                    }
                }
                (None, Some(b)) => {
                    let bs = cx.string(b, &key("bulk"))?;
                    BuildMethod::Bulk(cx.at(&b.span(), &key("bulk"), bs.parse())?)
                }
            };
            Step::Build {
                method,
                fill: float_in(&s.fill, "fill", 1.0, 0.0, 1.0)?,
                fraction: float_in(&s.fraction, "fraction", 1.0, 0.0, 1.0)?,
            }
        }
        "range_queries" => {
            let windows = match (&s.selectivity, &s.windows) {
                (Some(v), None) => {
                    let sels = cx.list(v, &key("selectivity"), as_selectivity)?;
                    let aspect = float_in(&s.aspect, "aspect", 1.0, 0.0, f64::MAX)?;
                    WindowSource::Generated {
                        selectivities: sels.iter().map(|x| x.0).collect(),
                        labels: sels.into_iter().map(|x| x.1).collect(),
                        count: count(100)?,
                        aspect,
                        placement,
                    }
                }
                (None, Some(w)) => {
                    for (k, v) in [
                        ("count", &s.count),
                        ("aspect", &s.aspect),
                        ("placement", &s.placement),
                    ] {
                        if let Some(v) = v {
                            return Err(cx.err(
                                &v.span(),
                                &key(k),
                                "applies to generated windows (selectivity), not to a windows file",
                            ));
                        }
                    }
                    let p = base.join(cx.string(w, &key("windows"))?);
                    if !p.is_file() {
                        return Err(cx.err(
                            &w.span(),
                            &key("windows"),
                            format!("windows file {} does not exist", p.display()),
                        ));
                    }
                    WindowSource::File(p)
                }
                (Some(v), Some(_)) => {
                    return Err(cx.err(
                        &v.span(),
                        &key("selectivity"),
                        "give either selectivity or windows, not both",
                    ))
                }
                (None, None) => {
                    return Err(cx.err(
                        &s.kind.span(),
                        &key("selectivity"),
                        "range_queries needs a selectivity (e.g. \"0.01%\") or a windows file",
                    ))
                }
            };
            let repetitions = match &s.repetitions {
                None => 1,
                Some(v) => {
                    let n = cx.scaled(v, &key("repetitions"))?;
                    u32::try_from(n)
                        .ok()
                        .filter(|n| (1..=10_000).contains(n))
                        .ok_or_else(|| {
                            cx.err(&v.span(), &key("repetitions"), "must be in 1..=10000")
                        })?
                }
            };
            Step::RangeQueries {
                windows,
                predicate,
                repetitions,
                seed,
            }
        }
        "knn" => {
            let k = match &s.k {
                None => vec![1],
                Some(v) => cx.list(v, &key("k"), |x| {
                    let n = as_uint(x)?;
                    if n == 0 {
                        return Err(Error::invalid("k must be at least 1"));
                    }
                    usize::try_from(n).map_err(|_| Error::invalid("k too large"))
                })?,
            };
            Step::Knn {
                k,
                count: count(100)?,
                placement,
                seed,
            }
        }
        "mixed" => {
            let operations = match &s.operations {
                None => {
                    return Err(cx.err(
                        &s.kind.span(),
                        &key("operations"),
                        "mixed needs a number of operations",
                    ))
                }
                Some(v) => cx.scaled(v, &key("operations"))?,
            };
            let ratio = match &s.insert_ratio {
                None => 0.5,
                Some(v) => {
                    let f = cx.float(&v.span(), v.get_ref(), &key("insert_ratio"))?;
                    if !(0.0..=1.0).contains(&f) {
                        return Err(cx.err(&v.span(), &key("insert_ratio"), "must be in [0, 1]"));
                    }
                    f
                }
            };
            let selectivity = match &s.selectivity {
                None => 1e-4,
                Some(v) => {
                    cx.at(&v.span(), &key("selectivity"), as_selectivity(v.get_ref()))?
                        .0
                }
            };
            let query = match &s.query {
                None => MixedQuery::Range,
                Some(v) => match cx.string(v, &key("query"))?.as_str() {
                    "range" => MixedQuery::Range,
                    "point" => MixedQuery::Point,
                    other => {
                        return Err(cx.err(
                            &v.span(),
                            &key("query"),
                            format!("unknown query {other:?}: use range or point"),
                        ))
                    }
                },
            };
            Step::Mixed {
                operations: usize::try_from(operations)
                    .map_err(|_| Error::invalid("operations too large"))?,
                insert_ratio: ratio,
                selectivity,
                predicate,
                query,
                seed,
            }
        }
        "point_queries" => {
            let group = match &s.group {
                None => vec![1],
                Some(v) => cx.list(v, &key("group"), |x| {
                    let n = as_uint(x)?;
                    if n == 0 {
                        return Err(Error::invalid("a group holds at least 1 point"));
                    }
                    usize::try_from(n).map_err(|_| Error::invalid("group too large"))
                })?,
            };
            Step::PointQueries {
                group,
                count: count(100)?,
                seed,
            }
        }
        "delete" => Step::Delete {
            fraction: float_in(&s.fraction, "fraction", 0.1, 0.0, 1.0)?,
            seed,
        },
        "checkpoint" => Step::Checkpoint,
        _ => {
            let operations = match &s.operations {
                None => 0,
                Some(v) => cx.scaled(v, &key("operations"))?,
            };
            Step::CrashAndRecover {
                operations: usize::try_from(operations)
                    .map_err(|_| Error::invalid("operations too large"))?,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
description = "a test"
repetitions = 2

[[dataset]]
name = "u"
generator = "uniform"
geometry = "box"
count = { smoke = 100, small = 1000 }
order = ["random", "hilbert"]
params = { max_size = 0.01 }

[[index]]
name = "plain"
store = "plain"
page_size = ["1KiB", 2048]
buffer = "64KiB"
device = "mem:"

[[index]]
name = "efind"
store = "efind"
device = "flashsim:preset=seed-tc58"
efind = { flush_policy = ["mh", "mhao"], temporal_control = "off" }

[[step]]
kind = "build"

[[step]]
kind = "range_queries"
selectivity = ["0.01%", "1%"]
count = { smoke = 5, small = 50, full = 500 }

[[step]]
kind = "knn"
k = [1, 10]
"#;

    fn parse(text: &str) -> Result<Workload> {
        Workload::parse(text, Path::new("w.toml"), Scale::Smoke)
    }

    #[test]
    fn cross_product_and_scales() {
        let w = parse(GOOD).unwrap();
        assert_eq!(w.datasets.len(), 2);
        assert_eq!(w.indexes.len(), 4);
        let names: Vec<&str> = w.indexes.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "plain[page_size=1KiB]",
                "plain[page_size=2048]",
                "efind[efind.flush_policy=mh]",
                "efind[efind.flush_policy=mhao]"
            ]
        );
        assert_eq!(w.indexes[0].page_size, 1024);
        assert_eq!(
            w.indexes[3].efind.as_ref().unwrap().temporal_control,
            Some(false)
        );
        assert_eq!(w.configurations(&[]).len(), 2 * 4 * 2);
        assert_eq!(w.configurations(&["efind".into()]).len(), 2 * 2 * 2);
        // filters by varied parameters, with a base name or `*`
        assert_eq!(w.configurations(&["*[page_size=1KiB]".into()]).len(), 2 * 2);
        assert_eq!(
            w.configurations(&["efind[efind.flush_policy=mh]".into()])
                .len(),
            2 * 2
        );
        assert_eq!(
            w.configurations(&["plain[efind.flush_policy=mh]".into()])
                .len(),
            0
        );
        assert_eq!(w.configurations(&["*[page_size=4KiB]".into()]).len(), 0);
        match &w.steps[1] {
            Step::RangeQueries {
                windows:
                    WindowSource::Generated {
                        count,
                        selectivities,
                        ..
                    },
                ..
            } => {
                assert_eq!(*count, 5);
                assert_eq!(selectivities, &[1e-4, 1e-2]);
            }
            other => panic!("{other:?}"),
        }
        let DatasetSource::Generator(p) = &w.datasets[0].source else {
            panic!()
        };
        assert_eq!(p.count, 100);
        let small = Workload::parse(GOOD, Path::new("w.toml"), Scale::Small).unwrap();
        let DatasetSource::Generator(p) = &small.datasets[0].source else {
            panic!()
        };
        assert_eq!(p.count, 1000);
        // no full count for the dataset
        let e = Workload::parse(GOOD, Path::new("w.toml"), Scale::Full)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 10") && e.contains("dataset[0].count") && e.contains("full"),
            "{e}"
        );
        // every configuration's key is distinct
        let keys: std::collections::HashSet<String> = w
            .configurations(&[])
            .iter()
            .map(|c| c.key("t", Scale::Smoke).unwrap())
            .collect();
        assert_eq!(keys.len(), 16);
    }

    /// Each bad input gives an error naming the line and the key.
    #[test]
    fn reads_default_to_single_and_stay_out_of_the_key() {
        let w = parse(GOOD).unwrap();
        let c = &w.configurations(&[])[0];
        assert_eq!(c.index.reads, "single");
        assert!(!c.key("t", Scale::Smoke).unwrap().contains("reads"));
        let w = parse(&GOOD.replace(
            "device = \"mem:\"",
            "device = \"mem:\"\nreads = \"batched\"",
        ))
        .unwrap();
        let c = &w.configurations(&[])[0];
        assert_eq!(c.index.reads, "batched");
        assert!(c
            .key("t", Scale::Smoke)
            .unwrap()
            .contains("\"reads\":\"batched\""));
    }

    #[test]
    fn errors_name_line_and_key() {
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "page_size = [\"1KiB\", 2048]",
                "page_size = [\"1KiB\", 3]",
                &["line 17", "index[0].page_size"],
            ),
            (
                "store = \"plain\"",
                "store = \"plian\"",
                &["line 16", "index[0].store", "plian"],
            ),
            (
                "device = \"mem:\"",
                "device = \"tape:\"",
                &["line 19", "index[0].device"],
            ),
            (
                "device = \"mem:\"",
                "device = \"mem:\"\nreads = \"sometimes\"",
                &["line 20", "index[0].reads", "batched or single"],
            ),
            (
                "k = [1, 10]",
                "k = [1, 0]",
                &["line 37", "step[2].k", "at least 1"],
            ),
            (
                "k = [1, 10]",
                "k = 1\nfill = 0.5",
                &["line 38", "step[2].fill", "does not apply to knn"],
            ),
            (
                "kind = \"knn\"",
                "kind = \"knnn\"",
                &["line 36", "step[2].kind", "unknown step kind"],
            ),
            (
                "generator = \"uniform\"",
                "generator = \"uniforme\"",
                &["line 8", "dataset[0].generator"],
            ),
            (
                "order = [\"random\", \"hilbert\"]",
                "order = [\"random\", \"zorder\"]",
                &["line 11", "dataset[0].order", "zorder"],
            ),
            (
                "params = { max_size = 0.01 }",
                "params = { max_sise = 0.01 }",
                &["line 12", "params.max_sise"],
            ),
            (
                "params = { max_size = 0.01 }",
                "params = { max_size = 7.0 }",
                &["line 12", "max_size"],
            ),
            (
                "selectivity = [\"0.01%\", \"1%\"]",
                "selectivity = [\"0.01%\", \"200%\"]",
                &["line 32", "step[1].selectivity"],
            ),
            (
                "repetitions = 2",
                "repetitions = 0",
                &["line 4", "repetitions"],
            ),
            (
                "repetitions = 2",
                "repetitions = 2\ncolour = \"red\"",
                &["line 5", "colour"],
            ),
            (
                "efind = { flush_policy = [\"mh\", \"mhao\"], temporal_control = \"off\" }",
                "efind = { flush_policy = \"mx\" }",
                &["line 25", "index[1].efind.flush_policy"],
            ),
            (
                "efind = { flush_policy = [\"mh\", \"mhao\"], temporal_control = \"off\" }",
                "efind = { flush_percentage = 3 }",
                &[
                    "line 25",
                    "efind.flush_percentage",
                    "unknown efind parameter",
                ],
            ),
            (
                "name = \"plain\"\nstore = \"plain\"",
                "name = \"plain\"\nstore = \"plain\"\nefind = { flush_unit = 2 }",
                &["index[0].efind", "store \"plain\""],
            ),
            (
                "[[step]]\nkind = \"build\"",
                "[[step]]\nkind = \"knn\"",
                &["step[0].kind", "first step must be a build"],
            ),
            (
                "name = \"plain\"\nstore",
                "name = \"efind\"\nstore",
                &["duplicate index name"],
            ),
            (
                "buffer = \"64KiB\"",
                "buffer = \"64 parsecs\"",
                &["line 18", "index[0].buffer"],
            ),
            (
                "count = { smoke = 100, small = 1000 }",
                "count = { smok = 100 }",
                &["line 10", "unknown scale"],
            ),
        ];
        for (from, to, wants) in cases {
            assert!(GOOD.contains(from), "{from}");
            let text = GOOD.replacen(from, to, 1);
            let e = parse(&text).unwrap_err().to_string();
            for want in *wants {
                assert!(e.contains(want), "{to}: {e} (wanted {want})");
            }
            assert!(e.contains("w.toml"), "{e}");
        }
        // toml syntax errors carry the line too
        let e = parse("name = \"x\"\n[[dataset]\n").unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn missing_files_and_steps() {
        let text = GOOD.replace(
            "generator = \"uniform\"\ngeometry = \"box\"\ncount = { smoke = 100, small = 1000 }",
            "file = \"nowhere.csv\"",
        );
        let text = text.replace("params = { max_size = 0.01 }\n", "");
        let e = parse(&text).unwrap_err().to_string();
        assert!(
            e.contains("nowhere.csv") && e.contains("does not exist") && e.contains("line 8"),
            "{e}"
        );
        let e = parse("name = \"x\"\n").unwrap_err().to_string();
        assert!(e.contains("no [[dataset]]"), "{e}");
        let cut = GOOD.split("[[step]]").next().unwrap();
        let e = parse(cut).unwrap_err().to_string();
        assert!(e.contains("no [[step]]"), "{e}");
    }
}
