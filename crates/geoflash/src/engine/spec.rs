//! [`IndexSpec`]: the settings of a new index as a user names them, one
//! `key = value` at a time, checked in one place.
//!
//! The command line's flags (`--flush-percent 10`), the workbench's
//! `[[index]]` keys (`efind = { flush_percent = 10 }`) and the Python
//! package's keyword arguments (`flush_percent=10`) all go through
//! [`IndexSpec::set`], which parses each value once into its typed field;
//! [`IndexSpec::options`] then refuses the combinations that make no sense
//! (an eFIND parameter for the FAST store, a log setting for the plain
//! store, a FOR-tree parameter for an R*-tree, ...) with one message naming
//! the keys at fault, spelled as the front end spells them ([`KeyStyle`]),
//! and builds the typed [`IndexOptions`] (a [`StructureSpec`] and a
//! [`StoreSpec`]) the index is created from. Text exists only here, at the
//! edge: nothing past `options` reads a key or a kind's name.
//!
//! A spec also reads and writes itself as text, `key=value` pairs joined by
//! commas (`store=fast,buffer=64MiB,fast_policy=fast-star`), the form the
//! peer benchmark's `--geoflash-variant` takes.
use std::collections::BTreeMap;
use std::fmt;

use crate::cache::PolicyKind;
use crate::config::{
    EfindSpec, FastSpec, MemorySpec, PlainSpec, StoreKind, StoreSpec, StructureConfig,
    StructureSpec, TreeSpec,
};
use crate::geom::Rect;
use crate::grid::{GridKind, GridSettings};
use crate::index::{IndexKind, SplitKind};
use crate::index_dir::IndexOptions;
use crate::manifest::Crs;
use crate::storage::spec::DeviceSpec;
use crate::store::efind::{EfindConfig, FlushPolicy, ReadBufferMode};
use crate::store::fast::{FastConfig, FastPolicy};
use crate::store::log::{Durability, LogFormat};
use crate::store::placement::Placement;
use crate::units::{check_page_size, parse_size};
use crate::{defaults, Error, Result};

use super::settings::{setting_named, Setting, SETTINGS};

/// How a front end spells a key in its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyStyle {
    /// As the key is named: `flush_percent` (Python, workload files).
    #[default]
    Key,
    /// As a command-line flag: `--flush-percent`.
    Flag,
}

impl KeyStyle {
    /// `key` spelled in this style.
    pub fn spell(self, key: &str) -> String {
        match self {
            KeyStyle::Key => key.to_string(),
            KeyStyle::Flag => format!("--{}", key.replace('_', "-")),
        }
    }
}

/// A refused setting: the error, and the key it is about (its canonical
/// name, the key of one of [`IndexSpec::SETTINGS`]), so that a front end can point at
/// where the user wrote it.
#[derive(Debug)]
pub struct SpecError {
    /// The key at fault (canonical name; `None`: a key the spec does not know).
    pub key: Option<&'static str>,
    /// What is wrong, the keys spelled in the spec's [`KeyStyle`].
    pub error: Error,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for SpecError {}

impl From<SpecError> for Error {
    fn from(e: SpecError) -> Error {
        e.error
    }
}

/// The structure a spec's `kind` names.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// A structure with its defaults.
    Structure(StructureSpec),
    /// An R*-tree whose internal nodes a hybrid device keeps on its fast tier.
    ShrTree,
}

impl Kind {
    /// Parses a kind: `shrtree` here, the others as [`StructureSpec::named`]
    /// names them.
    fn parse(s: &str) -> Result<Kind> {
        if s.trim().eq_ignore_ascii_case("shrtree") {
            return Ok(Kind::ShrTree);
        }
        StructureSpec::named(s).map(Kind::Structure).map_err(|_| {
            Error::invalid(format!(
                "unknown index kind {s:?}: use {}",
                IndexSpec::kinds().join(", ")
            ))
        })
    }

    /// The structure (an sHR-tree is an R*-tree).
    fn structure(self) -> StructureSpec {
        match self {
            Kind::Structure(s) => s,
            Kind::ShrTree => StructureSpec::Tree(TreeSpec::new(IndexKind::RStar)),
        }
    }
}

/// The smallest node occupancy: a count, or a fraction of M.
#[derive(Debug, Clone, Copy, PartialEq)]
enum MinFill {
    Count(usize),
    Fraction(f64),
}

/// Keys that only the eFIND store takes.
const EFIND_KEYS: &[&str] = &[
    "flush_percent",
    "flush_policy",
    "read_buffer_percent",
    "read_buffer_mode",
    "temporal_control",
    "temporal_queues",
];
/// Keys of the log, which the eFIND and FAST stores keep.
const LOG_KEYS: &[&str] = &[
    "flush_unit",
    "log_capacity",
    "checkpoint_interval",
    "log_format",
    "durability",
    "group_commit",
];
/// Keys that only the FAST store takes.
const FAST_KEYS: &[&str] = &["fast_policy", "seed"];
/// Keys that only the FOR-tree takes.
const FORTREE_KEYS: &[&str] = &["fortree_write_read_ratio", "fortree_original_root_counter"];
/// Keys that only the grid files take.
const GRID_KEYS: &[&str] = &[
    "grid_queries",
    "grid_dir_share",
    "grid_cold_pages",
    "grid_s",
    "grid_special",
];
/// Keys of the trees' nodes and node stores, which a grid file (its own
/// buffers, no node store) does not take.
const TREE_KEYS: &[&str] = &[
    "split",
    "max_entries",
    "min_entries",
    "min_fill",
    "reinsert_percent",
    "store",
    "buffer_policy",
    "placement",
];

/// The settings of a new index, given as `key = value` pairs; see the
/// module documentation. Unset keys take the front end's defaults
/// ([`set_default`](IndexSpec::set_default): the workbench pins the
/// papers' settings, Python an index in memory), else the product defaults
/// ([`crate::defaults`]): an R*-tree of 4 KiB pages with quadratic splits
/// on the eFIND store (the plain store for a FOR-tree and the grid files)
/// with 256 MiB, on the index directory's file read through the OS page
/// cache.
#[derive(Debug, Clone, Default)]
pub struct IndexSpec {
    /// The value of each key set, parsed.
    typed: Settings,
    /// The value of each key set, by canonical name, as given (for
    /// [`get`](IndexSpec::get) and the text form).
    values: BTreeMap<&'static str, String>,
    /// The front end's defaults, by canonical name, as given: each one
    /// stands for its key while the key is not [`set`](IndexSpec::set),
    /// where the key applies (a default store leaves the FOR-tree and the
    /// grid files on the plain store, a default buffer policy is not a
    /// setting of the FAST store).
    defaults: BTreeMap<&'static str, String>,
    /// The name each key was given under (an alias such as `reinsert`).
    names: BTreeMap<&'static str, String>,
    style: KeyStyle,
}

/// The value of each key set (`None`: not set), parsed once by
/// [`IndexSpec::set`].
#[derive(Debug, Clone, Default)]
struct Settings {
    kind: Option<Kind>,
    split: Option<SplitKind>,
    page_size: Option<usize>,
    max_entries: Option<usize>,
    min_entries: Option<usize>,
    min_fill: Option<MinFill>,
    reinsert_percent: Option<u8>,
    hilbert_domain: Option<Rect>,
    store: Option<StoreKind>,
    buffer: Option<u64>,
    buffer_policy: Option<PolicyKind>,
    device: Option<DeviceSpec>,
    placement: Option<Placement>,
    journal: Option<bool>,
    crs: Option<String>,
    units: Option<String>,
    durability: Option<Durability>,
    group_commit: Option<Durability>,
    flush_unit: Option<usize>,
    log_capacity: Option<u64>,
    /// Milliseconds; 0 is off.
    checkpoint_interval: Option<u64>,
    log_format: Option<LogFormat>,
    flush_percent: Option<u8>,
    flush_policy: Option<FlushPolicy>,
    read_buffer_percent: Option<u8>,
    read_buffer_mode: Option<ReadBufferMode>,
    temporal_control: Option<bool>,
    temporal_queues: Option<usize>,
    fast_policy: Option<FastPolicy>,
    seed: Option<u64>,
    fortree_write_read_ratio: Option<f64>,
    fortree_original_root_counter: Option<bool>,
    grid_batched: Option<bool>,
    grid_dir_share: Option<f64>,
    grid_cold_pages: Option<usize>,
    grid_s: Option<f64>,
    grid_special: Option<bool>,
}

impl IndexSpec {
    /// Every setting [`set`](Self::set) takes, with its aliases and help
    /// text, in the order help texts list them (one [`Setting`] a row: the
    /// command line's `build` flags, the workbench's keys and Python's
    /// keyword arguments are these names).
    pub const SETTINGS: &'static [Setting] = SETTINGS;

    /// An empty spec (every key at its default) whose messages spell keys in `style`.
    pub fn new(style: KeyStyle) -> IndexSpec {
        IndexSpec {
            style,
            ..IndexSpec::default()
        }
    }

    /// Every name the `kind` key takes: the structures
    /// ([`KIND_NAMES`](crate::config::KIND_NAMES)) and `shrtree`, an
    /// R*-tree whose internal nodes a hybrid device keeps on its fast tier.
    pub fn kinds() -> Vec<&'static str> {
        let mut kinds = crate::config::KIND_NAMES.to_vec();
        let after = kinds
            .iter()
            .position(|k| *k == "xbr")
            .map_or(kinds.len(), |i| i + 1);
        kinds.insert(after, "shrtree");
        kinds
    }

    /// The keys of the settings that belong to store `store` alone or to
    /// the log it keeps (none for the plain store), by canonical name.
    pub fn store_keys(store: StoreKind) -> Vec<&'static str> {
        match store {
            StoreKind::Plain | StoreKind::Memory => Vec::new(),
            StoreKind::Efind => EFIND_KEYS.iter().chain(LOG_KEYS).copied().collect(),
            StoreKind::Fast => FAST_KEYS.iter().chain(LOG_KEYS).copied().collect(),
        }
    }

    /// The keys of the settings that only the grid files take.
    pub const GRID_KEYS: &'static [&'static str] = GRID_KEYS;

    /// The canonical name of key `name`, the key of one of
    /// [`SETTINGS`](Self::SETTINGS) (`reinsert` is `reinsert_percent`,
    /// `policy` is `fast_policy`); `None`: no such key.
    pub fn key(name: &str) -> Option<&'static str> {
        Self::canonical(name)
    }

    /// The canonical name of `key` (`None`: no such key).
    fn canonical(key: &str) -> Option<&'static str> {
        setting_named(key.trim()).map(|s| s.key)
    }

    /// The device as the user wrote it (or as its default prints), for
    /// errors about the device.
    fn device_text(&self, device: &DeviceSpec) -> String {
        match self.text("device") {
            Some(text) => text.to_string(),
            // Not given: the product default, as it is written.
            None if DeviceSpec::parse(defaults::DEVICE).is_ok_and(|d| d == *device) => {
                defaults::DEVICE.to_string()
            }
            None => device.to_string(),
        }
    }

    fn spell(&self, key: &'static str) -> String {
        self.style
            .spell(self.names.get(key).map(String::as_str).unwrap_or(key))
    }

    /// `error` about the value of `key`, its message led by the key as
    /// the user spelled it where a parser of values wrote it without one
    /// (`size "%%" does not start with a number` becomes `--page-size:
    /// size "%%" ...`).
    fn naming(&self, key: &'static str, error: Error) -> Error {
        let spelled = self.spell(key);
        match error {
            Error::InvalidInput(msg) if !msg.contains(&spelled) => {
                Error::invalid(format!("{spelled}: {msg}"))
            }
            other => other,
        }
    }

    fn fail(&self, key: &'static str, msg: impl Into<String>) -> SpecError {
        SpecError {
            key: Some(key),
            error: Error::invalid(msg.into()),
        }
    }

    /// Sets `key` to `value` (text, as the user wrote it), parsing the
    /// value into its typed field; [`options`](Self::options) checks it
    /// against the rest. An unknown key or a value that does not parse is
    /// an error naming it.
    pub fn set(&mut self, key: &str, value: &str) -> std::result::Result<(), SpecError> {
        let Some(k) = Self::canonical(key) else {
            return Err(SpecError {
                key: None,
                error: Error::invalid(format!(
                    "unknown index option {:?}; the options are {}",
                    self.style.spell(key),
                    SETTINGS
                        .iter()
                        .map(|s| self.style.spell(s.key))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            });
        };
        self.names.insert(k, key.trim().to_string());
        let value = value.trim();
        let mut typed = std::mem::take(&mut self.typed);
        let parsed = self.parse_into(k, value, &mut typed);
        self.typed = typed;
        parsed.map_err(|error| SpecError {
            key: Some(k),
            error: self.naming(k, error),
        })?;
        self.values.insert(k, value.to_string());
        Ok(())
    }

    /// Sets the front end's default of `key` to `value`: the value the key
    /// takes while it is not [`set`](Self::set), where it applies (see
    /// [`IndexSpec`]). Parsed and refused as `set` does; not a setting (not
    /// in [`get`](Self::get) or the text form, and never refused as
    /// misplaced).
    pub fn set_default(&mut self, key: &str, value: &str) -> std::result::Result<(), SpecError> {
        let mut check = IndexSpec::new(self.style);
        check.set(key, value)?;
        if let Some((k, v)) = check.values.pop_first() {
            self.defaults.insert(k, v);
        }
        Ok(())
    }

    /// This spec with the front end's defaults of the keys not set parsed
    /// into its typed fields (not into the values given): what
    /// [`options`](Self::options) reads.
    fn with_defaults(&self) -> std::result::Result<IndexSpec, SpecError> {
        let mut spec = self.clone();
        for (&k, v) in &self.defaults {
            if !self.has(k) {
                self.parse_into(k, v, &mut spec.typed)
                    .map_err(|error| SpecError {
                        key: Some(k),
                        error,
                    })?;
            }
        }
        Ok(spec)
    }

    /// Parses `v` as the value of key `k` into its field of `t`.
    fn parse_into(&self, k: &'static str, v: &str, t: &mut Settings) -> Result<()> {
        let small = |n: u64| n as usize;
        match k {
            "kind" => t.kind = Some(Kind::parse(v)?),
            "split" => t.split = Some(v.parse()?),
            "page_size" => {
                let n = small(self.size(k, v, 1 << 24)?);
                check_page_size(n)?;
                t.page_size = Some(n);
            }
            "max_entries" => t.max_entries = Some(small(self.count(k, v, 1 << 24)?)),
            "min_entries" => t.min_entries = Some(small(self.count(k, v, 1 << 24)?)),
            "min_fill" => t.min_fill = Some(self.min_fill(v)?),
            "reinsert_percent" => t.reinsert_percent = Some(self.percent(k, v, 99)?),
            "hilbert_domain" => t.hilbert_domain = Some(self.rect(v)?),
            "store" => t.store = Some(v.parse()?),
            "buffer" => t.buffer = Some(self.size(k, v, u64::MAX)?),
            "log_capacity" => t.log_capacity = Some(self.size(k, v, u64::MAX)?),
            "checkpoint_interval" => t.checkpoint_interval = Some(self.interval_ms(k, v)?),
            "buffer_policy" => t.buffer_policy = Some(v.parse()?),
            "device" => t.device = Some(DeviceSpec::parse(v)?),
            "placement" => t.placement = Some(Placement::parse(v)?),
            "crs" => t.crs = Some(v.to_string()),
            "units" => t.units = Some(v.to_string()),
            "durability" => t.durability = Some(Durability::parse(v)?),
            "group_commit" => t.group_commit = Some(Durability::parse(&format!("group:{v}"))?),
            "flush_unit" => t.flush_unit = Some(small(self.count(k, v, 1 << 20)?)),
            "log_format" => t.log_format = Some(LogFormat::parse(v)?),
            "flush_percent" => t.flush_percent = Some(self.percent(k, v, 100)?),
            "read_buffer_percent" => t.read_buffer_percent = Some(self.percent(k, v, 99)?),
            "read_buffer_mode" => t.read_buffer_mode = Some(v.parse()?),
            "flush_policy" => t.flush_policy = Some(v.parse()?),
            "temporal_control" => t.temporal_control = Some(self.switch(k, v)?),
            "temporal_queues" => t.temporal_queues = Some(small(self.count(k, v, 1 << 20)?)),
            "fortree_original_root_counter" => {
                t.fortree_original_root_counter = Some(self.switch(k, v)?)
            }
            "grid_special" => t.grid_special = Some(self.switch(k, v)?),
            "journal" => t.journal = Some(self.switch(k, v)?),
            "grid_queries" => t.grid_batched = Some(self.grid_batched(v)?),
            "grid_cold_pages" => t.grid_cold_pages = Some(small(self.count(k, v, 1 << 20)?)),
            "grid_dir_share" => t.grid_dir_share = Some(self.number(k, v)?),
            "grid_s" => t.grid_s = Some(self.number(k, v)?),
            "fast_policy" => t.fast_policy = Some(FastPolicy::parse(v)?),
            "seed" => t.seed = Some(self.count(k, v, u64::MAX)?),
            "fortree_write_read_ratio" => match v.parse::<f64>() {
                Ok(r) if r.is_finite() && r > 0.0 => t.fortree_write_read_ratio = Some(r),
                _ => {
                    return Err(Error::invalid(format!(
                        "{} {v:?} must be a positive number",
                        self.spell(k)
                    )))
                }
            },
            _ => {}
        }
        Ok(())
    }

    fn count(&self, k: &'static str, v: &str, max: u64) -> Result<u64> {
        let n: u64 = v.parse().map_err(|_| {
            Error::invalid(format!("{} {v:?} is not a whole number", self.spell(k)))
        })?;
        if n > max {
            return Err(Error::invalid(format!(
                "{} {n} exceeds {max}",
                self.spell(k)
            )));
        }
        Ok(n)
    }

    fn percent(&self, k: &'static str, v: &str, max: u64) -> Result<u8> {
        self.count(k, v, max).map(|n| n as u8)
    }

    fn size(&self, k: &'static str, v: &str, max: u64) -> Result<u64> {
        let n = parse_size(v)?;
        if n > max {
            return Err(Error::invalid(format!(
                "{} {v} exceeds {max} bytes",
                self.spell(k)
            )));
        }
        Ok(n)
    }

    fn number(&self, k: &'static str, v: &str) -> Result<f64> {
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(Error::invalid(format!(
                "{} {v:?} is not a number",
                self.spell(k)
            ))),
        }
    }

    /// `grid_queries`: true for `batched`, false for `plain`.
    fn grid_batched(&self, v: &str) -> Result<bool> {
        match v.to_ascii_lowercase().as_str() {
            "batched" => Ok(true),
            "plain" => Ok(false),
            _ => Err(Error::invalid(format!(
                "{} {v:?}: use plain or batched",
                self.spell("grid_queries")
            ))),
        }
    }

    /// A time interval in milliseconds: a number with a unit (`ms`, `s`,
    /// `min`, `h`; seconds without one), or `off` (0).
    fn interval_ms(&self, k: &'static str, v: &str) -> Result<u64> {
        let v = v.trim().to_ascii_lowercase();
        if v == "off" {
            return Ok(0);
        }
        let split = v
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(v.len());
        let (number, unit) = (&v[..split], v[split..].trim());
        let scale = match unit {
            "ms" => 1.0,
            "" | "s" => 1e3,
            "min" | "m" => 60e3,
            "h" => 3600e3,
            _ => f64::NAN,
        };
        match number.parse::<f64>() {
            Ok(x) if x.is_finite() && scale.is_finite() && x * scale < 1e15 => {
                Ok((x * scale).round() as u64)
            }
            _ => Err(Error::invalid(format!(
                "{} {v:?} is not a time interval: a number with ms, s, min or h (seconds without), or off",
                self.spell(k)
            ))),
        }
    }

    fn switch(&self, k: &'static str, v: &str) -> Result<bool> {
        match v.to_ascii_lowercase().as_str() {
            "on" | "true" | "yes" | "1" => Ok(true),
            "off" | "false" | "no" | "0" => Ok(false),
            _ => Err(Error::invalid(format!(
                "{} {v:?}: use on or off",
                self.spell(k)
            ))),
        }
    }

    fn rect(&self, v: &str) -> Result<Rect> {
        let n: Vec<f64> = v
            .split(',')
            .map(|x| x.trim().parse::<f64>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| {
                Error::invalid(format!(
                    "{} {v:?}: expected minx,miny,maxx,maxy",
                    self.spell("hilbert_domain")
                ))
            })?;
        match n[..] {
            [a, b, c, d] => Rect::new(a, b, c, d),
            _ => Err(Error::invalid(format!(
                "{} {v:?}: expected four numbers minx,miny,maxx,maxy",
                self.spell("hilbert_domain")
            ))),
        }
    }

    fn min_fill(&self, v: &str) -> Result<MinFill> {
        if let Ok(m) = v.parse::<usize>() {
            return Ok(MinFill::Count(m));
        }
        let f: f64 = v.parse().map_err(|_| {
            Error::invalid(format!(
                "min fill {v:?} is neither a fraction nor an entry count"
            ))
        })?;
        if !(f > 0.0 && f <= 0.5) {
            return Err(Error::invalid(format!("min fill {f} must be in (0, 0.5]")));
        }
        Ok(MinFill::Fraction(f))
    }

    /// The value of key `k` as given (`None`: not set).
    pub fn get(&self, key: &str) -> Option<&str> {
        Self::canonical(key).and_then(|k| self.values.get(k).map(String::as_str))
    }

    /// The value of key `k` as given, else the front end's default.
    fn text(&self, k: &str) -> Option<&str> {
        self.values
            .get(k)
            .or_else(|| self.defaults.get(k))
            .map(String::as_str)
    }

    fn has(&self, k: &str) -> bool {
        self.values.contains_key(k)
    }

    /// The keys of `keys` that are set.
    fn given(&self, keys: &[&'static str]) -> Vec<&'static str> {
        keys.iter().copied().filter(|k| self.has(k)).collect()
    }

    /// Refuses keys of `keys` that are set when `applies` is false, saying
    /// they belong to `owner` (e.g. `store "efind"`) and what the index is.
    fn refuse_unless(
        &self,
        applies: bool,
        keys: &[&'static str],
        owner: &str,
        actual: &str,
    ) -> std::result::Result<(), SpecError> {
        let given = self.given(keys);
        match given.first() {
            Some(&first) if !applies => Err(self.fail(
                first,
                format!(
                    "{} {} to {owner}, not {actual}",
                    given
                        .iter()
                        .map(|k| self.spell(k))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if given.len() == 1 { "applies" } else { "apply" }
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The typed options of the index these settings describe: every
    /// combination checked, the keys at fault named. A Hilbert R-tree or an
    /// xBR+-tree without a `hilbert_domain` is checked with a stand-in
    /// domain (a build from data takes the data's extent).
    pub fn options(&self) -> std::result::Result<IndexOptions, SpecError> {
        self.with_defaults()?.resolved()
    }

    /// [`options`](Self::options) of a spec whose defaults are in its
    /// typed fields.
    fn resolved(&self) -> std::result::Result<IndexOptions, SpecError> {
        let t = &self.typed;
        let kind = t.kind.unwrap_or(Kind::Structure(StructureSpec::default()));
        let store = self.refuse_misplaced(kind)?;
        let buffer_bytes = self.buffer_bytes(kind, store)?;
        let device = self.device(kind)?;
        if store == StoreKind::Memory && !matches!(device, DeviceSpec::Mem { .. }) {
            let text = self.device_text(&device);
            return Err(self.fail(
                "device",
                format!(
                    "{} \"memory\" keeps nodes decoded in this process, with no device: \
                     use {} \"mem:\" (an index without a directory), not {text:?}",
                    self.spell("store"),
                    self.spell("device")
                ),
            ));
        }
        let mut options = IndexOptions {
            structure: self.structure(kind.structure()),
            page_size: t.page_size.unwrap_or(4096),
            store: self.store(kind, store, buffer_bytes)?,
            device,
            crs: Crs {
                name: t.crs.clone().unwrap_or_else(|| Crs::default().name),
                units: t.units.clone().unwrap_or_else(|| Crs::default().units),
            },
            hilbert_domain: t.hilbert_domain,
        };
        if let Some(fill) = t.min_fill {
            let (max, min) = options.structure.capacities();
            if min.is_some() {
                return Err(self.fail(
                    "min_fill",
                    format!(
                        "give {} or {}, not both",
                        self.spell("min_fill"),
                        self.spell("min_entries")
                    ),
                ));
            }
            let m = match fill {
                MinFill::Count(m) => m,
                MinFill::Fraction(f) => {
                    let max = match max {
                        Some(m) => m,
                        None => self.checked(&options)?,
                    };
                    ((f * max as f64).ceil() as usize).max(2)
                }
            };
            match &mut options.structure {
                StructureSpec::Tree(t) => t.min_entries = Some(m),
                StructureSpec::Fortree(f) => f.min_entries = Some(m),
                StructureSpec::Xbr(_) | StructureSpec::Grid(_) => {}
            }
        }
        self.checked(&options)?;
        Ok(options)
    }

    /// Refuses the keys that do not apply to structure `kind` or to the
    /// store chosen (given, or the structure's default), and returns that store.
    fn refuse_misplaced(&self, kind: Kind) -> std::result::Result<StoreKind, SpecError> {
        let structure = kind.structure();
        let fortree = matches!(structure, StructureSpec::Fortree(_));
        let grid = matches!(structure, StructureSpec::Grid(_));
        let kind_key = self.spell("kind");
        let kind_text = format!("{kind_key} {:?}", self.text("kind").unwrap_or("rstar"));
        self.refuse_unless(grid, GRID_KEYS, "the grid files", &kind_text)?;
        if grid {
            let mut own = TREE_KEYS.to_vec();
            own.extend(EFIND_KEYS.iter().chain(LOG_KEYS).chain(FAST_KEYS));
            self.refuse_unless(
                false,
                &own,
                "the trees and their node stores",
                &format!("{kind_text} (a grid file keeps its own buffers)"),
            )?;
        }
        let store = match self.typed.store {
            Some(s) if self.has("store") => s,
            _ if fortree || grid => StoreKind::Plain,
            // A front end's default memory store applies to an index on
            // `mem:` given no setting of a store with a device (a budget,
            // a buffer policy, a placement); the plain store takes the others.
            Some(StoreKind::Memory)
                if !matches!(self.typed.device, Some(DeviceSpec::Mem { .. }))
                    || !self
                        .given(&["buffer", "buffer_policy", "placement"])
                        .is_empty() =>
            {
                StoreKind::Plain
            }
            // The front end's default.
            Some(s) => s,
            None => defaults::STORE.parse().map_err(|error| SpecError {
                key: Some("store"),
                error,
            })?,
        };
        let store_key = self.spell("store");
        let actual = format!("{store_key} {:?}", store.name());
        let owner = |s: &str| format!("{store_key} {s}");
        self.refuse_unless(
            store == StoreKind::Efind,
            EFIND_KEYS,
            &owner("\"efind\""),
            &actual,
        )?;
        self.refuse_unless(
            matches!(store, StoreKind::Efind | StoreKind::Fast),
            LOG_KEYS,
            &owner("\"efind\" or \"fast\""),
            &actual,
        )?;
        self.refuse_unless(
            store == StoreKind::Fast,
            FAST_KEYS,
            &owner("\"fast\""),
            &actual,
        )?;
        // The rollback journal protects what is written in place (the plain
        // store's nodes, grid files); eFIND and FAST keep a log instead.
        self.refuse_unless(
            store == StoreKind::Plain,
            &["journal"],
            &owner("\"plain\" (and the FOR-tree, xBR+-tree and grid files on it)"),
            &actual,
        )?;
        // The memory store keeps every node decoded: no budget to give, no
        // buffer to replace from, no pages to place on a tier.
        self.refuse_unless(
            store != StoreKind::Memory,
            &["buffer", "buffer_policy", "placement"],
            &format!(
                "the stores that keep nodes on a device; {store_key} \"memory\" keeps every node \
                 decoded in memory (give {store_key} \"plain\" for a node buffer over mem:)"
            ),
            &actual,
        )?;
        self.refuse_unless(
            fortree,
            FORTREE_KEYS,
            &format!("{kind_key} fortree"),
            &kind_text,
        )?;
        Ok(store)
    }

    /// The memory budget: given or the default, refused at 0 for a store
    /// or structure that needs memory; and `buffer_policy` refused where
    /// there is no such buffer.
    fn buffer_bytes(&self, kind: Kind, store: StoreKind) -> std::result::Result<usize, SpecError> {
        let fortree = matches!(kind.structure(), StructureSpec::Fortree(_));
        // The default follows the machine's memory (`defaults::buffer`).
        let buffer = self.typed.buffer.unwrap_or_else(defaults::buffer_bytes);
        let buffer_bytes = usize::try_from(buffer).map_err(|_| {
            self.fail(
                "buffer",
                format!("{} {buffer} is too large", self.spell("buffer")),
            )
        })?;
        let store_key = self.spell("store");
        if store == StoreKind::Memory {
            // Keeps every node (`refuse_misplaced` refused a budget).
            return Ok(0);
        }
        if buffer_bytes == 0 && (store != StoreKind::Plain || fortree) {
            let what = if fortree {
                "FOR-tree".to_string()
            } else {
                format!("{} store", store.name())
            };
            return Err(self.fail(
                "buffer",
                format!(
                    "{} 0 leaves the {what} no memory: give a budget (e.g. 512KiB); only {store_key} plain runs without a buffer",
                    self.spell("buffer")
                ),
            ));
        }
        if self.has("buffer_policy") && (store == StoreKind::Fast || fortree) {
            return Err(self.fail(
                "buffer_policy",
                format!(
                    "{} applies to the plain store's buffer and eFIND's read buffer; {} keeps no such buffer",
                    self.spell("buffer_policy"),
                    if fortree {
                        "the FOR-tree".to_string()
                    } else {
                        format!("{store_key} fast")
                    }
                ),
            ));
        }
        Ok(buffer_bytes)
    }

    /// The device: given or the default, refused when the structure places
    /// pages on the fast tier of a hybrid device and it has one tier.
    fn device(&self, kind: Kind) -> std::result::Result<DeviceSpec, SpecError> {
        let device = match &self.typed.device {
            Some(d) => d.clone(),
            None => DeviceSpec::parse(defaults::DEVICE).map_err(|error| SpecError {
                key: Some("device"),
                error,
            })?,
        };
        let tiered = match kind {
            Kind::ShrTree => Some(("shrtree", "internal nodes")),
            Kind::Structure(StructureSpec::Grid(g)) if g.kind == GridKind::HGrid => {
                Some(("hgrid", "hot pages"))
            }
            _ => None,
        };
        if let (Some((kind, what)), false) = (tiered, matches!(device, DeviceSpec::Hybrid { .. })) {
            let text = self.device_text(&device);
            return Err(self.fail(
                "device",
                format!(
                    "index kind {kind} places {what} on the fast tier of a hybrid device: \
                     device {text:?} has one tier (use hybrid:fast=(SPEC);slow=(SPEC))"
                ),
            ));
        }
        Ok(device)
    }

    /// The structure `base` (a kind with its defaults) with its own keys given.
    fn structure(&self, base: StructureSpec) -> StructureSpec {
        let t = &self.typed;
        match base {
            StructureSpec::Tree(tree) => StructureSpec::Tree(TreeSpec {
                kind: tree.kind,
                split: t.split.unwrap_or(tree.split),
                max_entries: t.max_entries,
                min_entries: t.min_entries,
                // The product's forced reinsertion (`defaults::REINSERT_PERCENT`);
                // the workbench pins the paper's 30 %.
                reinsert_percent: t.reinsert_percent.unwrap_or(defaults::REINSERT_PERCENT),
            }),
            StructureSpec::Fortree(mut f) => {
                f.max_entries = t.max_entries;
                f.min_entries = t.min_entries;
                f.write_read_ratio = t.fortree_write_read_ratio.unwrap_or(f.write_read_ratio);
                f.original_root_counter = t
                    .fortree_original_root_counter
                    .unwrap_or(f.original_root_counter);
                StructureSpec::Fortree(f)
            }
            StructureSpec::Xbr(mut x) => {
                x.max_entries = t.max_entries;
                StructureSpec::Xbr(x)
            }
            StructureSpec::Grid(g) => StructureSpec::Grid(self.grid_settings(g.kind)),
        }
    }

    /// The store `store` with its budget `buffer_bytes` and its own keys given.
    fn store(
        &self,
        kind: Kind,
        store: StoreKind,
        buffer_bytes: usize,
    ) -> std::result::Result<StoreSpec, SpecError> {
        let t = &self.typed;
        let placement = match (kind, t.placement) {
            (_, Some(p)) => p,
            (Kind::ShrTree, None) => Placement::SHR_TREE,
            (_, None) => Placement::None,
        };
        let policy = t.buffer_policy.unwrap_or(PolicyKind::S2q);
        let durability = self.durability()?;
        if policy.keeps_read_queue() && store != StoreKind::Efind {
            return Err(self.fail(
                "buffer_policy",
                format!(
                    "{} {policy} is FESTIval's read buffer of eFIND (its A1 is eFIND's read \
                     queue): it applies to {} \"efind\" only, not {} {:?}",
                    self.spell("buffer_policy"),
                    self.spell("store"),
                    self.spell("store"),
                    store.name()
                ),
            ));
        }
        Ok(match store {
            StoreKind::Plain => StoreSpec::Plain(PlainSpec {
                buffer_bytes,
                policy,
                placement,
                in_place: !t.journal.unwrap_or(true),
            }),
            StoreKind::Efind => StoreSpec::Efind(EfindSpec {
                buffer_bytes,
                policy,
                placement,
                efind: self.efind_config(durability)?,
                checkpoint_interval_ms: self.checkpoint_interval_ms()?,
            }),
            StoreKind::Fast => StoreSpec::Fast(FastSpec {
                buffer_bytes,
                placement,
                fast: self.fast_config(durability)?,
                checkpoint_interval_ms: self.checkpoint_interval_ms()?,
            }),
            StoreKind::Memory => StoreSpec::Memory(MemorySpec {}),
        })
    }

    /// The checkpoint interval of a store with a log, in milliseconds (0:
    /// off): as given, else [`defaults::CHECKPOINT_INTERVAL`].
    fn checkpoint_interval_ms(&self) -> std::result::Result<u64, SpecError> {
        match self.typed.checkpoint_interval {
            Some(ms) => Ok(ms),
            None => self
                .interval_ms("checkpoint_interval", defaults::CHECKPOINT_INTERVAL)
                .map_err(|error| SpecError {
                    key: Some("checkpoint_interval"),
                    error,
                }),
        }
    }

    /// Checks `options` as creating the index would (with a stand-in domain
    /// where the data's extent is to come), naming the key at fault; M.
    fn checked(&self, options: &IndexOptions) -> std::result::Result<usize, SpecError> {
        let mut check = options.clone();
        if check.hilbert_domain.is_none() {
            check.hilbert_domain = Some(Rect::from_valid(0.0, 0.0, 1.0, 1.0));
        }
        let grid = matches!(check.structure, StructureSpec::Grid(_));
        let resolved = check.resolve().map_err(|error| SpecError {
            key: Some(if grid {
                self.blame_grid(&error.to_string())
            } else {
                self.blame_tree(&error.to_string())
            }),
            error,
        })?;
        check
            .store
            .verify(check.page_size)
            .map_err(|error| SpecError {
                key: Some("flush_unit"),
                error,
            })?;
        Ok(match resolved {
            StructureConfig::Tree(p) => p.max_entries,
            StructureConfig::Fortree(c) => c.max_entries,
            StructureConfig::Xbr(c) => c.max_entries,
            StructureConfig::Grid(_) => 0,
        })
    }

    /// The key a tree's refusal `msg` is about.
    fn blame_tree(&self, msg: &str) -> &'static str {
        if msg.contains("max entries") && self.has("max_entries") {
            "max_entries"
        } else if msg.contains("min") && (self.has("min_entries") || self.has("min_fill")) {
            if self.has("min_fill") {
                "min_fill"
            } else {
                "min_entries"
            }
        } else if msg.contains("reinsert") && self.has("reinsert_percent") {
            "reinsert_percent"
        } else if msg.contains("FOR-tree") && self.has("store") {
            "store"
        } else {
            "page_size"
        }
    }

    /// The key a grid file's refusal `msg` is about.
    fn blame_grid(&self, msg: &str) -> &'static str {
        if msg.contains("dir_share") {
            "grid_dir_share"
        } else if msg.contains("s and special") {
            if self.has("grid_s") {
                "grid_s"
            } else {
                "grid_special"
            }
        } else if msg.contains("selectivity") {
            "grid_s"
        } else if msg.contains("too small") && self.has("grid_cold_pages") {
            "grid_cold_pages"
        } else if msg.contains("too small") || msg.contains("buffers need") {
            "buffer"
        } else {
            "page_size"
        }
    }

    /// The grid-file settings of kind `kind`: its defaults, with the
    /// `grid_*` keys given.
    fn grid_settings(&self, kind: GridKind) -> GridSettings {
        let t = &self.typed;
        let d = GridSettings::new(kind);
        GridSettings {
            kind,
            batched: t.grid_batched.unwrap_or(d.batched),
            dir_share: t.grid_dir_share.unwrap_or(d.dir_share),
            cold_pages: t.grid_cold_pages,
            s: t.grid_s,
            special: t.grid_special,
        }
    }

    /// `durability` with `group_commit` folded in (`None`: neither is set).
    fn durability(&self) -> std::result::Result<Option<Durability>, SpecError> {
        let t = &self.typed;
        match (self.get("durability"), t.group_commit) {
            (None | Some("group"), Some(g)) => Ok(Some(g)),
            (Some(d), Some(_)) => Err(self.fail(
                "group_commit",
                format!(
                    "{} goes with {} group, not {d}",
                    self.spell("group_commit"),
                    self.spell("durability")
                ),
            )),
            (_, None) => Ok(t.durability),
        }
    }

    /// The log settings given, set on a store configuration's fields.
    fn apply_log(
        &self,
        durability: Option<Durability>,
        unit: &mut usize,
        capacity: &mut u64,
        format: &mut LogFormat,
        durable: &mut Durability,
    ) {
        let t = &self.typed;
        *unit = t.flush_unit.unwrap_or(*unit);
        *capacity = t.log_capacity.unwrap_or(*capacity);
        *format = t.log_format.unwrap_or(*format);
        *durable = durability.unwrap_or(*durable);
    }

    /// `verified` (a store configuration's check) with its error blamed on
    /// the first key of `own` or of the log's keys that it names, else on
    /// `fallback`.
    fn blame_verify(
        &self,
        verified: Result<()>,
        own: &[&'static str],
        fallback: &'static str,
    ) -> std::result::Result<(), SpecError> {
        verified.map_err(|error| {
            let msg = error.to_string();
            let key = self
                .given(own)
                .into_iter()
                .chain(self.given(LOG_KEYS))
                .find(|k| msg.contains(&k.replace('_', " ")))
                .unwrap_or(fallback);
            SpecError {
                key: Some(key),
                error,
            }
        })
    }

    /// eFIND's configuration: the paper's final one with the keys given.
    fn efind_config(
        &self,
        durability: Option<Durability>,
    ) -> std::result::Result<EfindConfig, SpecError> {
        let t = &self.typed;
        let mut c = EfindConfig::default();
        c.flush_percent = t.flush_percent.unwrap_or(c.flush_percent);
        c.policy = t.flush_policy.unwrap_or(c.policy);
        c.read_buffer_percent = t.read_buffer_percent.unwrap_or(c.read_buffer_percent);
        // The product's read buffer takes what the write buffer leaves
        // (`crate::defaults::READ_BUFFER_MODE`); the workbench pins the
        // paper's fixed share.
        c.read_buffer_mode = t
            .read_buffer_mode
            .unwrap_or(crate::defaults::READ_BUFFER_MODE);
        if let Some(on) = t.temporal_control {
            c.temporal_control = if on {
                c.temporal_control.or(Some(Default::default()))
            } else {
                None
            };
        }
        if let Some(n) = t.temporal_queues {
            let key = "temporal_queues";
            match c.temporal_control.as_mut() {
                Some(tc) if n > 0 => (tc.rq_capacity, tc.wq_capacity) = (n, n),
                Some(_) => {
                    return Err(self.fail(
                        key,
                        format!("{} 0: a queue holds at least one page", self.spell(key)),
                    ))
                }
                None => {
                    return Err(self.fail(
                        key,
                        format!(
                            "{} applies with temporal control on (drop {} off)",
                            self.spell(key),
                            self.spell("temporal_control")
                        ),
                    ))
                }
            }
        }
        self.apply_log(
            durability,
            &mut c.flush_unit,
            &mut c.log_capacity,
            &mut c.log_format,
            &mut c.durability,
        );
        self.blame_verify(c.verify(), EFIND_KEYS, "flush_percent")?;
        let policy = t.buffer_policy.unwrap_or(c.read_policy);
        if policy.keeps_read_queue() && c.temporal_control.is_none() {
            return Err(self.fail(
                "buffer_policy",
                format!(
                    "{} {policy}: its A1 is eFIND's temporal control's read queue RQ (as in \
                     FESTIval, which refuses S2Q without it): it needs {} on",
                    self.spell("buffer_policy"),
                    self.spell("temporal_control")
                ),
            ));
        }
        Ok(c)
    }

    /// FAST's configuration: FAST* with the keys given.
    fn fast_config(
        &self,
        durability: Option<Durability>,
    ) -> std::result::Result<FastConfig, SpecError> {
        let t = &self.typed;
        let mut c = FastConfig::default();
        c.policy = t.fast_policy.unwrap_or(c.policy);
        c.seed = t.seed.unwrap_or(c.seed);
        self.apply_log(
            durability,
            &mut c.flush_unit,
            &mut c.log_capacity,
            &mut c.log_format,
            &mut c.durability,
        );
        self.blame_verify(c.verify(), FAST_KEYS, "flush_unit")?;
        Ok(c)
    }
}

/// `key=value` pairs joined by commas, in [`IndexSpec::SETTINGS`] order. A
/// value holding commas (`hilbert_domain=0,0,1,1`) reads back whole.
impl fmt::Display for IndexSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for k in SETTINGS.iter().map(|s| s.key) {
            if let Some(v) = self.values.get(k) {
                if !first {
                    f.write_str(",")?;
                }
                first = false;
                write!(f, "{k}={v}")?;
            }
        }
        Ok(())
    }
}

/// Reads `key=value` pairs joined by commas (keys spelled as keys). A comma
/// starts a new pair only where a key and `=` follow it, so a value may
/// hold commas (`hilbert_domain=0,0,1,1,store=plain`).
impl std::str::FromStr for IndexSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<IndexSpec> {
        let mut spec = IndexSpec::new(KeyStyle::Key);
        let mut pairs: Vec<String> = Vec::new();
        if s.trim().is_empty() {
            return Ok(spec);
        }
        for part in s.split(',') {
            let starts_pair = part
                .split_once('=')
                .is_some_and(|(k, _)| IndexSpec::canonical(k).is_some());
            match pairs.last_mut() {
                Some(last) if !starts_pair => {
                    last.push(',');
                    last.push_str(part);
                }
                _ => pairs.push(part.to_string()),
            }
        }
        for pair in pairs {
            let (k, v) = pair.split_once('=').ok_or_else(|| {
                Error::invalid(format!("index setting {pair:?}: expected key=value"))
            })?;
            spec.set(k, v)?;
        }
        Ok(spec)
    }
}
