//! [`IndexSpec`]: the settings of a new index as a user names them, one
//! `key = value` at a time, checked in one place.
//!
//! The command line's flags (`--flush-percent 10`), the workbench's
//! `[[index]]` keys (`efind = { flush_percent = 10 }`) and the Python
//! package's keyword arguments (`flush_percent=10`) all go through
//! [`IndexSpec::set`]; [`IndexSpec::options`] then refuses the combinations
//! that make no sense (an eFIND parameter for the FAST store, a log setting
//! for the plain store, a FOR-tree parameter for an R*-tree, ...) with one
//! message naming the keys at fault, spelled as the front end spells them
//! ([`KeyStyle`]), and lowers the settings to the verified
//! [`IndexOptions`] the index is created from.
//!
//! A spec also reads and writes itself as text, `key=value` pairs joined by
//! commas (`store=fast,buffer=64MiB,fast_policy=fast-star`), the form the
//! peer benchmark's `--geoflash-variant` takes.
use std::collections::BTreeMap;
use std::fmt;

use crate::cache::PolicyKind;
use crate::geom::Rect;
use crate::grid::{GridKind, GridSettings};
use crate::index::{IndexKind, SplitKind};
use crate::index_dir::{FortreeOptions, IndexOptions, StoreKind, StoreOptions};
use crate::manifest::Crs;
use crate::storage::spec::DeviceSpec;
use crate::store::efind::{EfindConfig, FlushPolicy};
use crate::store::fast::{FastConfig, FastPolicy};
use crate::store::log::{Durability, LogFormat};
use crate::store::placement::Placement;
use crate::units::{check_page_size, parse_size};
use crate::{defaults, Error, Result};

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
/// name, one of [`IndexSpec::KEYS`]), so that a front end can point at
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Structure {
    /// A tree of the R-tree family.
    Tree(IndexKind),
    /// An R*-tree whose internal nodes a hybrid device keeps on its fast tier.
    ShrTree,
    /// The FOR-tree.
    Fortree,
    /// The xBR+-tree of points.
    Xbr,
    /// A grid file of points.
    Grid(GridKind),
}

impl Structure {
    /// Parses a kind: `shrtree` here, the others as the index options
    /// name them ([`IndexOptions::set_kind`]).
    fn parse(s: &str) -> Result<Structure> {
        if s.trim().eq_ignore_ascii_case("shrtree") {
            return Ok(Structure::ShrTree);
        }
        let mut o = IndexOptions::default();
        o.set_kind(s.trim()).map_err(|_| {
            Error::invalid(format!(
                "unknown index kind {s:?}: use rtree, rstar, hilbert, fortree, xbr, shrtree, grid, gffm, lbgrid or hgrid"
            ))
        })?;
        Ok(match (o.grid, o.fortree, o.xbr) {
            (Some(g), _, _) => Structure::Grid(g.kind),
            (None, Some(_), _) => Structure::Fortree,
            (None, None, true) => Structure::Xbr,
            (None, None, false) => Structure::Tree(o.kind),
        })
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
    "temporal_control",
];
/// Keys of the log, which the eFIND and FAST stores keep.
const LOG_KEYS: &[&str] = &[
    "flush_unit",
    "log_capacity",
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
/// [module documentation](self). Unset keys take the product defaults
/// ([`crate::defaults`]): an R*-tree of 4 KiB pages with quadratic splits
/// on the eFIND store (the plain store for a FOR-tree) with 256 MiB, on the
/// index directory's file read through the OS page cache.
#[derive(Debug, Clone, Default)]
pub struct IndexSpec {
    /// The value of each key set, by canonical name, as given.
    values: BTreeMap<&'static str, String>,
    /// The name each key was given under (an alias such as `reinsert`).
    names: BTreeMap<&'static str, String>,
    style: KeyStyle,
}

impl IndexSpec {
    /// Every key [`set`](Self::set) takes, by canonical name (aliases:
    /// `reinsert` for `reinsert_percent`, `policy` for `fast_policy`).
    pub const KEYS: &'static [&'static str] = &[
        "kind",
        "split",
        "page_size",
        "max_entries",
        "min_entries",
        "min_fill",
        "reinsert_percent",
        "hilbert_domain",
        "store",
        "buffer",
        "buffer_policy",
        "device",
        "placement",
        "journal",
        "crs",
        "units",
        "durability",
        "group_commit",
        "flush_unit",
        "log_capacity",
        "log_format",
        "flush_percent",
        "flush_policy",
        "read_buffer_percent",
        "temporal_control",
        "fast_policy",
        "seed",
        "fortree_write_read_ratio",
        "fortree_original_root_counter",
        "grid_queries",
        "grid_dir_share",
        "grid_cold_pages",
        "grid_s",
        "grid_special",
    ];

    /// An empty spec (every key at its default) whose messages spell keys in `style`.
    pub fn new(style: KeyStyle) -> IndexSpec {
        IndexSpec {
            style,
            ..IndexSpec::default()
        }
    }

    /// The canonical name of `key` (`None`: no such key).
    fn canonical(key: &str) -> Option<&'static str> {
        let key = key.trim();
        match key {
            "reinsert" => Some("reinsert_percent"),
            "policy" => Some("fast_policy"),
            _ => Self::KEYS.iter().copied().find(|k| *k == key),
        }
    }

    fn spell(&self, key: &'static str) -> String {
        self.style
            .spell(self.names.get(key).map(String::as_str).unwrap_or(key))
    }

    fn fail(&self, key: &'static str, msg: impl Into<String>) -> SpecError {
        SpecError {
            key: Some(key),
            error: Error::invalid(msg.into()),
        }
    }

    /// Sets `key` to `value` (text, as the user wrote it), checking the
    /// value alone; [`options`](Self::options) checks it against the rest.
    /// An unknown key or a value that does not parse is an error naming it.
    pub fn set(&mut self, key: &str, value: &str) -> std::result::Result<(), SpecError> {
        let Some(k) = Self::canonical(key) else {
            return Err(SpecError {
                key: None,
                error: Error::invalid(format!(
                    "unknown index option {:?}; the options are {}",
                    self.style.spell(key),
                    Self::KEYS
                        .iter()
                        .map(|k| self.style.spell(k))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            });
        };
        self.names.insert(k, key.trim().to_string());
        let value = value.trim();
        self.parse_value(k, value).map_err(|e| SpecError {
            key: Some(k),
            error: e,
        })?;
        self.values.insert(k, value.to_string());
        Ok(())
    }

    /// Checks `value` alone as a value of key `k`.
    fn parse_value(&self, k: &'static str, v: &str) -> Result<()> {
        match k {
            "kind" => Structure::parse(v).map(drop),
            "split" => v.parse::<SplitKind>().map(drop),
            "page_size" => self
                .size(k, v, 1 << 24)
                .and_then(|n| check_page_size(n as usize)),
            "max_entries" | "min_entries" => self.count(k, v, 1 << 24).map(drop),
            "min_fill" => self.min_fill(v).map(drop),
            "reinsert_percent" => self.percent(k, v, 99).map(drop),
            "hilbert_domain" => self.rect(v).map(drop),
            "store" => v.parse::<StoreKind>().map(drop),
            "buffer" | "log_capacity" => self.size(k, v, u64::MAX).map(drop),
            "buffer_policy" => v.parse::<PolicyKind>().map(drop),
            "device" => DeviceSpec::parse(v).map(drop),
            "placement" => Placement::parse(v).map(drop),
            "crs" | "units" => Ok(()),
            "durability" => Durability::parse(v).map(drop),
            "group_commit" => Durability::parse(&format!("group:{v}")).map(drop),
            "flush_unit" => self.count(k, v, 1 << 20).map(drop),
            "log_format" => LogFormat::parse(v).map(drop),
            "flush_percent" => self.percent(k, v, 100).map(drop),
            "read_buffer_percent" => self.percent(k, v, 99).map(drop),
            "flush_policy" => v.parse::<FlushPolicy>().map(drop),
            "temporal_control" | "fortree_original_root_counter" | "grid_special" | "journal" => {
                self.switch(k, v).map(drop)
            }
            "grid_queries" => self.grid_batched(v).map(drop),
            "grid_cold_pages" => self.count(k, v, 1 << 20).map(drop),
            "grid_dir_share" | "grid_s" => self.number(k, v).map(drop),
            "fast_policy" => FastPolicy::parse(v).map(drop),
            "seed" => self.count(k, v, u64::MAX).map(drop),
            "fortree_write_read_ratio" => match v.parse::<f64>() {
                Ok(r) if r.is_finite() && r > 0.0 => Ok(()),
                _ => Err(Error::invalid(format!(
                    "{} {v:?} must be a positive number",
                    self.spell(k)
                ))),
            },
            _ => Ok(()),
        }
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

    fn has(&self, k: &str) -> bool {
        self.values.contains_key(k)
    }

    /// The value of `k`, parsed by `parse` (which [`set`](Self::set) ran
    /// already; an error here names the key all the same).
    fn parsed<T>(
        &self,
        k: &'static str,
        parse: impl FnOnce(&str) -> Result<T>,
    ) -> std::result::Result<Option<T>, SpecError> {
        match self.values.get(k) {
            None => Ok(None),
            Some(v) => parse(v).map(Some).map_err(|error| SpecError {
                key: Some(k),
                error,
            }),
        }
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
                    "{} apply to {owner}, not {actual}",
                    given
                        .iter()
                        .map(|k| self.spell(k))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The verified options of the index these settings describe: every
    /// combination checked, the keys at fault named. A Hilbert R-tree or an
    /// xBR+-tree without a `hilbert_domain` is checked with a stand-in
    /// domain (a build from data takes the data's extent).
    pub fn options(&self) -> std::result::Result<IndexOptions, SpecError> {
        let structure = self
            .parsed("kind", Structure::parse)?
            .unwrap_or(Structure::Tree(IndexKind::RStar));
        let fortree = structure == Structure::Fortree;
        let grid = match structure {
            Structure::Grid(kind) => Some(kind),
            _ => None,
        };
        let kind_key = self.spell("kind");
        let kind_text = format!("{kind_key} {:?}", self.get("kind").unwrap_or("rstar"));
        self.refuse_unless(grid.is_some(), GRID_KEYS, "the grid files", &kind_text)?;
        if grid.is_some() {
            let mut own = TREE_KEYS.to_vec();
            own.extend(EFIND_KEYS.iter().chain(LOG_KEYS).chain(FAST_KEYS));
            self.refuse_unless(
                false,
                &own,
                "the trees and their node stores",
                &format!("{kind_text} (a grid file keeps its own buffers)"),
            )?;
        }
        let default_store = if fortree || grid.is_some() {
            "plain"
        } else {
            defaults::STORE
        };
        let store: StoreKind = self
            .parsed("store", |v| v.parse())?
            .map_or_else(|| default_store.parse(), Ok)
            .map_err(|error| SpecError {
                key: Some("store"),
                error,
            })?;
        let store_name = match store {
            StoreKind::Plain => "plain",
            StoreKind::Efind => "efind",
            StoreKind::Fast => "fast",
        };
        let store_key = self.spell("store");
        let actual = format!("{store_key} {store_name:?}");
        self.refuse_unless(
            store == StoreKind::Efind,
            EFIND_KEYS,
            &format!("{store_key} \"efind\""),
            &actual,
        )?;
        self.refuse_unless(
            store != StoreKind::Plain,
            LOG_KEYS,
            &format!("{store_key} \"efind\" or \"fast\""),
            &actual,
        )?;
        self.refuse_unless(
            store == StoreKind::Fast,
            FAST_KEYS,
            &format!("{store_key} \"fast\""),
            &actual,
        )?;
        // The rollback journal protects what is written in place (the plain
        // store's nodes, grid files); eFIND and FAST keep a log instead.
        self.refuse_unless(
            store == StoreKind::Plain,
            &["journal"],
            &format!("{store_key} \"plain\" (and the FOR-tree, xBR+-tree and grid files on it)"),
            &actual,
        )?;
        let in_place = !self
            .parsed("journal", |v| self.switch("journal", v))?
            .unwrap_or(true);
        self.refuse_unless(
            fortree,
            FORTREE_KEYS,
            &format!("{kind_key} fortree"),
            &kind_text,
        )?;
        let buffer = self
            .parsed("buffer", |v| self.size("buffer", v, u64::MAX))?
            .map_or_else(|| parse_size(defaults::BUFFER), Ok)
            .map_err(|error| SpecError {
                key: Some("buffer"),
                error,
            })?;
        let buffer_bytes = usize::try_from(buffer).map_err(|_| {
            self.fail(
                "buffer",
                format!("{} {buffer} is too large", self.spell("buffer")),
            )
        })?;
        if buffer_bytes == 0 && (store != StoreKind::Plain || fortree) {
            let what = if fortree {
                "FOR-tree".to_string()
            } else {
                format!("{store_name} store")
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
        let device = self.get("device").unwrap_or(defaults::DEVICE).to_string();
        let parsed_device = DeviceSpec::parse(&device).map_err(|error| SpecError {
            key: Some("device"),
            error,
        })?;
        let tiered = match structure {
            Structure::ShrTree => Some(("shrtree", "internal nodes")),
            Structure::Grid(GridKind::HGrid) => Some(("hgrid", "hot pages")),
            _ => None,
        };
        if let (Some((kind, what)), false) =
            (tiered, matches!(parsed_device, DeviceSpec::Hybrid { .. }))
        {
            return Err(self.fail(
                "device",
                format!(
                    "index kind {kind} places {what} on the fast tier of a hybrid device: \
                     device {device:?} has one tier (use hybrid:fast=(SPEC);slow=(SPEC))"
                ),
            ));
        }
        let durability = self.durability()?;
        let mut options = IndexOptions {
            split: self
                .parsed("split", |v| v.parse())?
                .unwrap_or(SplitKind::Quadratic),
            page_size: self
                .parsed("page_size", |v| self.size("page_size", v, 1 << 24))?
                .map_or(4096, |n| n as usize),
            max_entries: self
                .parsed("max_entries", |v| self.count("max_entries", v, 1 << 24))?
                .map(|n| n as usize),
            min_entries: self
                .parsed("min_entries", |v| self.count("min_entries", v, 1 << 24))?
                .map(|n| n as usize),
            reinsert_percent: self
                .parsed("reinsert_percent", |v| {
                    self.percent("reinsert_percent", v, 99)
                })?
                .unwrap_or(crate::index::params::DEFAULT_REINSERT_PERCENT),
            store: StoreOptions {
                kind: store,
                buffer_bytes,
                policy: self
                    .parsed("buffer_policy", |v| v.parse())?
                    .unwrap_or(PolicyKind::S2q),
                efind: self.efind_config(store, durability)?,
                fast: self.fast_config(store, durability)?,
                placement: match (structure, self.parsed("placement", Placement::parse)?) {
                    (_, Some(p)) => p,
                    (Structure::ShrTree, None) => Placement::SHR_TREE,
                    (_, None) => Placement::None,
                },
                in_place,
                ..StoreOptions::default()
            },
            device: parsed_device,
            crs: Crs {
                name: self
                    .get("crs")
                    .map_or_else(|| Crs::default().name, String::from),
                units: self
                    .get("units")
                    .map_or_else(|| Crs::default().units, String::from),
            },
            hilbert_domain: self.parsed("hilbert_domain", |v| self.rect(v))?,
            ..IndexOptions::default()
        };
        match structure {
            Structure::Tree(kind) => options.kind = kind,
            Structure::ShrTree => options.kind = IndexKind::RStar,
            Structure::Fortree => {
                options.kind = IndexKind::RTree;
                let mut f = FortreeOptions::default();
                if let Some(r) = self.parsed("fortree_write_read_ratio", |v| {
                    v.parse::<f64>().map_err(|e| Error::invalid(e.to_string()))
                })? {
                    f.write_read_ratio = r;
                }
                if let Some(on) = self.parsed("fortree_original_root_counter", |v| {
                    self.switch("fortree_original_root_counter", v)
                })? {
                    f.original_root_counter = on;
                }
                options.fortree = Some(f);
            }
            Structure::Xbr => {
                options.kind = IndexKind::RTree;
                options.xbr = true;
            }
            Structure::Grid(kind) => {
                options.kind = IndexKind::RTree;
                options.grid = Some(self.grid_settings(kind)?);
            }
        }
        if let Some(fill) = self.parsed("min_fill", |v| self.min_fill(v))? {
            if options.min_entries.is_some() {
                return Err(self.fail(
                    "min_fill",
                    format!(
                        "give {} or {}, not both",
                        self.spell("min_fill"),
                        self.spell("min_entries")
                    ),
                ));
            }
            options.min_entries = Some(match fill {
                MinFill::Count(m) => m,
                MinFill::Fraction(f) => {
                    let max = match options.max_entries {
                        Some(m) => m,
                        None => self.checked(&options)?,
                    };
                    ((f * max as f64).ceil() as usize).max(2)
                }
            });
        }
        self.checked(&options)?;
        Ok(options)
    }

    /// Checks `options` as creating the index would (with a stand-in domain
    /// where the data's extent is to come), naming the key at fault; M.
    fn checked(&self, options: &IndexOptions) -> std::result::Result<usize, SpecError> {
        let mut check = options.clone();
        if check.hilbert_domain.is_none() {
            check.hilbert_domain = Some(Rect::from_valid(0.0, 0.0, 1.0, 1.0));
        }
        let blame = |error: Error| {
            let msg = error.to_string();
            let key = if msg.contains("max entries") && self.has("max_entries") {
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
            };
            SpecError {
                key: Some(key),
                error,
            }
        };
        if check.grid.is_some() {
            check.grid_config().map_err(|error| {
                let msg = error.to_string();
                let key = if msg.contains("dir_share") {
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
                };
                SpecError {
                    key: Some(key),
                    error,
                }
            })?;
            return Ok(0);
        }
        let max = check.tree_params().map_err(blame)?.max_entries;
        check.fortree_config().map_err(blame)?;
        check.xbr_config().map_err(blame)?;
        if let Some(e) = &check.store.efind {
            e.verify_for_page(check.page_size)
                .map_err(|error| SpecError {
                    key: Some("flush_unit"),
                    error,
                })?;
        }
        Ok(max)
    }

    /// The grid-file settings of kind `kind`: its defaults, with the
    /// `grid_*` keys given.
    fn grid_settings(&self, kind: GridKind) -> std::result::Result<GridSettings, SpecError> {
        let mut g = GridSettings::new(kind);
        if let Some(b) = self.parsed("grid_queries", |v| self.grid_batched(v))? {
            g.batched = b;
        }
        if let Some(d) = self.parsed("grid_dir_share", |v| self.number("grid_dir_share", v))? {
            g.dir_share = d;
        }
        g.cold_pages = self
            .parsed("grid_cold_pages", |v| {
                self.count("grid_cold_pages", v, 1 << 20)
            })?
            .map(|n| n as usize);
        g.s = self.parsed("grid_s", |v| self.number("grid_s", v))?;
        g.special = self.parsed("grid_special", |v| self.switch("grid_special", v))?;
        Ok(g)
    }

    /// `durability` with `group_commit` folded in (`None`: neither is set).
    fn durability(&self) -> std::result::Result<Option<Durability>, SpecError> {
        let d = self.get("durability");
        let g = self.get("group_commit");
        let parsed = match (d, g) {
            (None | Some("group"), Some(g)) => Durability::parse(&format!("group:{g}")),
            (Some(d), Some(_)) => {
                return Err(self.fail(
                    "group_commit",
                    format!(
                        "{} goes with {} group, not {d}",
                        self.spell("group_commit"),
                        self.spell("durability")
                    ),
                ))
            }
            (Some(d), None) => Durability::parse(d),
            (None, None) => return Ok(None),
        };
        parsed.map(Some).map_err(|error| SpecError {
            key: Some(if g.is_some() {
                "group_commit"
            } else {
                "durability"
            }),
            error,
        })
    }

    /// The log settings shared by eFIND and FAST.
    fn log_settings(
        &self,
        durability: Option<Durability>,
    ) -> std::result::Result<LogSettings, SpecError> {
        Ok(LogSettings {
            unit: self
                .parsed("flush_unit", |v| self.count("flush_unit", v, 1 << 20))?
                .map(|n| n as usize),
            capacity: self.parsed("log_capacity", |v| self.size("log_capacity", v, u64::MAX))?,
            format: self.parsed("log_format", LogFormat::parse)?,
            durability,
        })
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

    /// eFIND's configuration (`None`: not the eFIND store, or nothing set:
    /// the paper's final configuration).
    fn efind_config(
        &self,
        store: StoreKind,
        durability: Option<Durability>,
    ) -> std::result::Result<Option<EfindConfig>, SpecError> {
        if store != StoreKind::Efind
            || (self.given(EFIND_KEYS).is_empty() && self.given(LOG_KEYS).is_empty())
        {
            return Ok(None);
        }
        let mut c = EfindConfig::default();
        if let Some(p) = self.parsed("flush_percent", |v| self.percent("flush_percent", v, 100))? {
            c.flush_percent = p;
        }
        if let Some(p) = self.parsed("flush_policy", |v| v.parse())? {
            c.policy = p;
        }
        if let Some(r) = self.parsed("read_buffer_percent", |v| {
            self.percent("read_buffer_percent", v, 99)
        })? {
            c.read_buffer_percent = r;
        }
        if let Some(on) = self.parsed("temporal_control", |v| self.switch("temporal_control", v))? {
            c.temporal_control = if on {
                c.temporal_control.or(Some(Default::default()))
            } else {
                None
            };
        }
        self.log_settings(durability)?.apply(
            &mut c.flush_unit,
            &mut c.log_capacity,
            &mut c.log_format,
            &mut c.durability,
        );
        self.blame_verify(c.verify(), EFIND_KEYS, "flush_percent")?;
        Ok(Some(c))
    }

    /// FAST's configuration (`None`: not the FAST store, or nothing set: FAST*).
    fn fast_config(
        &self,
        store: StoreKind,
        durability: Option<Durability>,
    ) -> std::result::Result<Option<FastConfig>, SpecError> {
        if store != StoreKind::Fast
            || (self.given(FAST_KEYS).is_empty() && self.given(LOG_KEYS).is_empty())
        {
            return Ok(None);
        }
        let mut c = FastConfig::default();
        if let Some(p) = self.parsed("fast_policy", FastPolicy::parse)? {
            c.policy = p;
        }
        if let Some(s) = self.parsed("seed", |v| self.count("seed", v, u64::MAX))? {
            c.seed = s;
        }
        self.log_settings(durability)?.apply(
            &mut c.flush_unit,
            &mut c.log_capacity,
            &mut c.log_format,
            &mut c.durability,
        );
        self.blame_verify(c.verify(), FAST_KEYS, "flush_unit")?;
        Ok(Some(c))
    }
}

/// The log's settings, which the eFIND and FAST configurations share
/// (`None`: not set, the configuration's default stays).
struct LogSettings {
    unit: Option<usize>,
    capacity: Option<u64>,
    format: Option<LogFormat>,
    durability: Option<Durability>,
}

impl LogSettings {
    /// Sets the settings given onto a store configuration's fields.
    fn apply(
        &self,
        unit: &mut usize,
        capacity: &mut u64,
        format: &mut LogFormat,
        durability: &mut Durability,
    ) {
        if let Some(u) = self.unit {
            *unit = u;
        }
        if let Some(c) = self.capacity {
            *capacity = c;
        }
        if let Some(f) = self.format {
            *format = f;
        }
        if let Some(d) = self.durability {
            *durability = d;
        }
    }
}

/// `key=value` pairs joined by commas, in [`IndexSpec::KEYS`] order. A
/// value holding commas (`hilbert_domain=0,0,1,1`) reads back whole.
impl fmt::Display for IndexSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for k in Self::KEYS {
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
