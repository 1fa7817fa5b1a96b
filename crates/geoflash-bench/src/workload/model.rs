//! The model of a workload: the typed, checked form a workload file is
//! parsed into ([`Workload`] with its [`DatasetConfig`]s, [`IndexConfig`]s
//! and [`Step`]s, the [`Configuration`]s of its cross product), and the
//! [`Scale`] its counts are taken at. Parsing lives in `parse`, the
//! expansion of parameter lists in `expand`.
use std::path::PathBuf;

use geoflash::engine::{BulkMethod, Predicate, ReadMode, StructureSpec};
use geoflash::{Error, IndexOptions, IndexSpec, KeyStyle, Result};
use serde::{Deserialize, Serialize};

use crate::generate::{GenParams, InsertionOrder};
use crate::windows::Placement;

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

from_names!(Scale, "scale", "smoke" => Smoke, "small" => Small, "full" => Full);

/// Where a dataset comes from.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DatasetSource {
    /// A generator with its parameters.
    Generator(GenParams),
    /// A dataset file (any format [`crate::import::read_rects`] reads).
    File(PathBuf),
    /// A layer of a GeoPackage file (`file = "city.gpkg"`, `layer =
    /// "buildings"`), needed when the file has several.
    Layer {
        /// The GeoPackage file.
        file: PathBuf,
        /// The name of its feature layer (its table).
        layer: String,
    },
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

/// The workbench's defaults, the papers' settings the seed workloads rely
/// on, by the library's key names: an R*-tree (quadratic split, 4 KiB
/// pages, 30 % reinsertion) on the eFIND store with a 512 KiB S2Q buffer (the
/// paper's fixed read share) on device `flashsim:preset=seed-tc58`, and no
/// checkpoints by time. They are
/// the library's front-end defaults ([`IndexSpec::set_default`]) of every
/// configuration, so one stays out of a structure it does not apply to (a
/// grid file gets no store, the FOR-tree the plain store).
pub const WORKBENCH_DEFAULTS: &[(&str, &str)] = &[
    ("kind", "rstar"),
    ("split", "quadratic"),
    ("page_size", "4096"),
    ("reinsert_percent", "30"),
    ("store", "efind"),
    ("buffer", "512KiB"),
    ("buffer_policy", "s2q"),
    // The paper's read buffer: a fixed share of the budget, the stored
    // version read under every buffered modification.
    ("read_buffer_mode", "fixed"),
    ("device", "flashsim:preset=seed-tc58"),
    // The papers checkpoint at the end of a run only.
    ("checkpoint_interval", "off"),
];

/// One index configuration (after expanding parameter lists): the
/// `[[index]]` entry's keys read through the library's one key table
/// ([`IndexSpec::set`]) onto [`WORKBENCH_DEFAULTS`], and the typed options
/// they resolve to. Its JSON (part of a configuration's key) holds the
/// names and the options, every parameter typed.
#[derive(Debug, Clone, Serialize)]
pub struct IndexConfig {
    /// The workload's name for it, with the varied parameters appended
    /// (`efind[page_size=2048]`).
    pub name: String,
    /// The `[[index]]` entry's own name.
    pub base_name: String,
    /// What the index is created from: structure, page size, store, device.
    #[serde(flatten)]
    pub options: IndexOptions,
    /// The settings as given, by the library's key names (for the text of
    /// the results' columns); [`IndexConfig::options`] is what they mean.
    #[serde(skip)]
    pub spec: IndexSpec,
    /// How range and kNN queries read nodes: `single` (the papers' one page
    /// at a time, the workbench's default) or `batched` (the library's
    /// default: the children of a node in one device batch; kNN reads the
    /// queued nodes it will likely visit next in one batch). Left out of the
    /// configuration key when `single`.
    #[serde(skip_serializing_if = "is_single_reads")]
    pub reads: ReadMode,
}

/// Whether `reads` is the workbench's default, `single`.
fn is_single_reads(reads: &ReadMode) -> bool {
    *reads == ReadMode::Single
}

impl IndexConfig {
    /// The library's settings of a configuration before its entry's keys:
    /// empty, with [`WORKBENCH_DEFAULTS`] as its defaults.
    pub(crate) fn workbench_spec() -> Result<IndexSpec> {
        let mut spec = IndexSpec::new(KeyStyle::Key);
        for (k, v) in WORKBENCH_DEFAULTS {
            spec.set_default(k, v)?;
        }
        Ok(spec)
    }

    /// Key `key`'s value as the entry gives it, else the workbench's default.
    fn text(&self, key: &str) -> &str {
        self.spec
            .get(key)
            .or_else(|| {
                WORKBENCH_DEFAULTS
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| *v)
            })
            .unwrap_or("")
    }

    /// True for a grid file (points only, no node store).
    pub fn is_grid(&self) -> bool {
        matches!(self.options.structure, StructureSpec::Grid(_))
    }

    /// The index kind as written (`rstar`, `shrtree`, `gffm`, ...).
    pub fn kind(&self) -> &str {
        self.text("kind")
    }

    /// The split as written (`quadratic` unless given).
    pub fn split(&self) -> &str {
        self.text("split")
    }

    /// The buffer policy as written (`s2q` unless given).
    pub fn buffer_policy(&self) -> &str {
        self.text("buffer_policy")
    }

    /// The device as written.
    pub fn device(&self) -> &str {
        self.text("device")
    }

    /// The node store (`plain`, `efind`, `fast`), `none` for a grid file,
    /// which keeps its own buffers.
    pub fn store(&self) -> &'static str {
        if self.is_grid() {
            "none"
        } else {
            self.options.store.kind().name()
        }
    }
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

/// Serializes a predicate by its workload-file name.
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
        /// uniform or on-data (centred on objects in the index when the
        /// step runs: deleted and not yet inserted ones excluded, moved
        /// ones where they are now).
        #[serde(serialize_with = "ser_placement")]
        placement: Placement,
    },
    /// A CSV file `minx,miny,maxx,maxy`.
    File(PathBuf),
}

/// Serializes a window placement by its workload-file name.
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
        /// Points uniform in the extent or on data objects (the centres of
        /// objects in the index when the step runs, as for windows).
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
    /// Moving objects: `commits` batches of `moves_per_commit` moves, each
    /// move an update by id of one of `objects` loaded objects to its rectangle
    /// shifted by a random offset (same size); each batch committed
    /// (`BatchDurability::Commit`), then `queries_between` windows checked
    /// against a brute-force oracle of the current rectangles. Two rows:
    /// the moves (queries excluded) and the queries between commits.
    Move {
        /// Objects that move (the first ones of a seeded shuffle of the
        /// loaded objects; `None`: all of them).
        objects: Option<usize>,
        /// Moves per commit (one batch).
        moves_per_commit: usize,
        /// Commits (batches).
        commits: usize,
        /// Largest displacement on each axis, as a fraction of the data
        /// extent's width and height.
        step: f64,
        /// Windows queried and checked after each commit.
        queries_between: usize,
        /// Area of those windows, as a fraction of the extent's area.
        window: f64,
        /// Seed of the objects, moves and windows.
        seed: u64,
    },
    /// Inserts `operations` more objects without a checkpoint, crashes (the
    /// index is dropped without flushing) and reopens it, which recovers
    /// from the log. Needs a store with a log (efind) on a `file` device.
    CrashAndRecover {
        /// Inserts between the last checkpoint and the crash.
        operations: usize,
    },
}

/// The most operations (queries or inserts) one step runs: a step holds
/// its plan and its query windows in memory (a mixed step about 33 bytes
/// per operation, so some 3.3 GB at this limit), and a count beyond it is
/// a typo, not an experiment (the shipped workloads stay below 10^6).
pub const MAX_STEP_OPERATIONS: u64 = 100_000_000;

/// The `n` operations (`what`: the key that sets them) of a step, refused
/// beyond [`MAX_STEP_OPERATIONS`]. One check shared by the parser, so that
/// `geoflash bench --check` refuses what the run would, and by the runner,
/// before it allocates a step's plan and windows (a mixed step of 10^14
/// operations used to pass `--check` and abort allocating 100 TB).
pub fn step_operations(n: u64, what: &str) -> Result<usize> {
    if n > MAX_STEP_OPERATIONS {
        return Err(Error::invalid(format!(
            "{what} = {n} is more than the {MAX_STEP_OPERATIONS} operations one step may run \
             (a step holds its plan and query windows in memory)"
        )));
    }
    usize::try_from(n).map_err(|_| Error::invalid(format!("{what} = {n} is too large")))
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
            Step::Move { .. } => "move",
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
    /// The digest of the workload's steps ([`Workload::steps_digest`]):
    /// part of the [key](Self::key), not of the configuration's JSON.
    #[serde(skip)]
    pub steps_digest: String,
}

impl Configuration {
    /// A stable key identifying the configuration in a results store: the
    /// JSON of the workload's name, the scale, the configuration (which
    /// holds every parameter of the dataset and the index) and, as
    /// `steps`, the digest of the workload's steps, so that a configuration
    /// whose steps changed is not found complete. The results store reads
    /// it back: a key without its `steps` names the configuration whatever
    /// its steps, and a configuration recorded with other steps (or before
    /// keys had them) is replaced when this one begins
    /// ([`ResultsStore::begin_configuration`](crate::results::ResultsStore::begin_configuration)).
    pub fn key(&self, workload: &str, scale: Scale) -> Result<String> {
        let v = serde_json::json!({
            "workload": workload,
            "scale": scale,
            "configuration": self,
            "steps": self.steps_digest,
        });
        serde_json::to_string(&v)
            .map_err(|e| Error::invalid(format!("cannot serialize configuration: {e}")))
    }
}

/// FNV-1a (64 bits) of `bytes`.
pub(super) fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
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
