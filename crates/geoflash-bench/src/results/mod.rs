//! The results store: an SQLite file, or a PostgreSQL database given a
//! URL (FESTIval's relational schema's successor; the schema is documented
//! in `docs/results-schema.md`). Both hold the same tables and view:
//!
//! - `runs`: one row per `geoflash bench` invocation (workload, its text,
//!   scale, host, kernel, version, start and end);
//! - `configurations`: one row per configuration of a workload's cross
//!   product (dataset, insertion order, index parameters, repetition, the
//!   full configuration as JSON, the device's description), unique by its
//!   key; `completed_at` is set when all its steps are recorded;
//! - `results`: one row per executed step (and per selectivity or k), with
//!   the step's parameters and every column of [`Stats`] (`Stats::COLUMNS`);
//! - the view `results_full` joins the three for SQL and pandas.
//!
//! The rows of one step are written in one transaction: an interrupted run
//! leaves whole steps only, and a configuration without `completed_at` is
//! re-run (its rows replaced) by the next run. The statements are written
//! once for both databases ([`sql`]); only the connection differs.
use std::path::{Path, PathBuf};

use geoflash::metrics::Stats;
use geoflash::{Error, Result};
use rusqlite::Connection;

#[cfg(feature = "postgres")]
mod postgres;
pub mod sql;
mod sqlite;

use sql::{column_type, query_one, Dialect, Sql, Value};

/// Schema version (SQLite: `PRAGMA user_version`; PostgreSQL: the comment
/// on table `results`, `geoflash results schema N`). Version 2: the
/// simulator's columns ([`simulator_only`]) of a row measured on a real
/// device are NULL (version 1 stored 0 there; opening such a store sets
/// them to NULL).
pub const SCHEMA_VERSION: i64 = 2;

/// True for the metrics only a simulated device measures (simulated times,
/// NAND operations, garbage collection, wear): on a real device they do
/// not apply, and the results store holds NULL for them.
pub fn simulator_only(metric: &str) -> bool {
    metric.starts_with("sim_")
        || metric.starts_with("nand_")
        || metric.starts_with("gc_")
        || metric.starts_with("erase_count_")
        || matches!(metric, "retired_blocks" | "device_write_amplification")
}

/// The statement that sets the simulator's columns of real-device rows to
/// NULL (what version 1 stored as 0).
fn null_simulator_columns_sql() -> String {
    let sets: Vec<String> = Stats::COLUMNS
        .iter()
        .filter(|c| simulator_only(c))
        .map(|c| format!("{c} = NULL"))
        .collect();
    format!(
        "UPDATE results SET {} WHERE device_simulated = 0",
        sets.join(", ")
    )
}

/// Where a results store is: an SQLite file or a PostgreSQL URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultsLocation {
    /// An SQLite file (created if missing).
    Sqlite(PathBuf),
    /// A PostgreSQL database (`postgresql://user@host/db`); the tables are
    /// created in its current schema if missing.
    Postgres(String),
}

impl ResultsLocation {
    /// A PostgreSQL URL (`postgresql://…`, `postgres://…`) or else a file path.
    pub fn parse(s: &str) -> ResultsLocation {
        if crate::pg::is_url(s) {
            ResultsLocation::Postgres(s.trim().to_string())
        } else {
            ResultsLocation::Sqlite(PathBuf::from(s))
        }
    }
}

impl std::fmt::Display for ResultsLocation {
    /// The path, or the URL without its password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResultsLocation::Sqlite(p) => write!(f, "{}", p.display()),
            ResultsLocation::Postgres(u) => f.write_str(&crate::pg::redact(u)),
        }
    }
}

impl std::str::FromStr for ResultsLocation {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(ResultsLocation::parse(s))
    }
}

/// The connection of a store.
enum Backend {
    Sqlite(Connection),
    #[cfg(feature = "postgres")]
    Postgres(Box<::postgres::Client>),
}

impl Backend {
    /// Runs `f` on the connection, in one transaction when `tx` (committed
    /// when `f` succeeds, rolled back when it fails).
    fn with<T>(&mut self, tx: bool, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T> {
        match self {
            Backend::Sqlite(conn) if tx => {
                let t = conn
                    .transaction()
                    .map_err(|e| Error::results_store(e.to_string()))?;
                let r = f(&mut sqlite::SqliteSql(&t))?;
                t.commit()
                    .map_err(|e| Error::results_store(e.to_string()))?;
                Ok(r)
            }
            Backend::Sqlite(conn) => f(&mut sqlite::SqliteSql(conn)),
            #[cfg(feature = "postgres")]
            Backend::Postgres(client) if tx => {
                let db = |e: ::postgres::Error| Error::results_store(crate::pg::message(&e));
                let mut t = client.transaction().map_err(db)?;
                let r = f(&mut postgres::PgSql(&mut t))?;
                t.commit().map_err(db)?;
                Ok(r)
            }
            #[cfg(feature = "postgres")]
            Backend::Postgres(client) => f(&mut postgres::PgSql(client.as_mut())),
        }
    }
}

/// An open results store.
pub struct ResultsStore {
    backend: Backend,
    /// The file, or the URL without its password.
    location: String,
}

impl std::fmt::Debug for ResultsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultsStore")
            .field("location", &self.location)
            .finish()
    }
}

/// The columns of `results` that are not `Stats` columns.
pub const STEP_COLUMNS: &[&str] = &[
    "result_id",
    "run_id",
    "config_id",
    "step_index",
    "step_kind",
    "parameter",
    "step_json",
    "status",
    "message",
    "recorded_at",
];

/// The columns of `results` the workbench measures itself, after the
/// `Stats` columns: NULL in rows that do not measure them (and in rows
/// recorded before they existed).
pub const MEASURED_COLUMNS: &[&str] = &[
    // The median latency of the row's operations, timed one by one (the
    // queries between the commits of a move step).
    "latency_median_ns",
];

/// Columns of `results` that older stores hold and this version no longer
/// writes (a metric the schema documents is measured, or it is not in the
/// schema): left in the stores that have them (new rows hold NULL there),
/// never created in new ones, and left out when a configuration is copied
/// ([`ResultsStore::copy_configuration`]) so that an old store's rows copy
/// into a new store.
///
/// - `unmodified_nodes_flushed`: nodes a flush wrote although unmodified.
///   FAST and eFIND flush buffered (modified) nodes only, so it was never
///   measured and always 0.
pub const RETIRED_COLUMNS: &[&str] = &["unmodified_nodes_flushed"];

/// The columns of `configurations` that `results_full` adds to `results`.
const VIEW_COLUMNS: &str =
    "c.workload, c.scale, c.dataset, c.insertion_order, c.dataset_count, c.index_name,
         c.index_kind, c.split, c.page_size, c.store, c.buffer_bytes, c.buffer_policy,
         c.device, c.device_description, c.repetition";

/// The tables, in either dialect (`{key}`: the key type; `{stats}`: the `Stats` columns).
const TABLES: &str = "CREATE TABLE IF NOT EXISTS runs (
  run_id {key},
  workload TEXT NOT NULL,
  workload_path TEXT NOT NULL,
  workload_text TEXT NOT NULL,
  scale TEXT NOT NULL,
  geoflash_version TEXT NOT NULL,
  host TEXT NOT NULL,
  kernel TEXT NOT NULL,
  command TEXT NOT NULL,
  started_at BIGINT NOT NULL,
  finished_at BIGINT
);
CREATE TABLE IF NOT EXISTS configurations (
  config_id {key},
  config_key TEXT NOT NULL UNIQUE,
  workload TEXT NOT NULL,
  scale TEXT NOT NULL,
  dataset TEXT NOT NULL,
  insertion_order TEXT NOT NULL,
  dataset_count BIGINT NOT NULL,
  index_name TEXT NOT NULL,
  index_kind TEXT NOT NULL,
  split TEXT NOT NULL,
  page_size BIGINT NOT NULL,
  store TEXT NOT NULL,
  buffer_bytes BIGINT NOT NULL,
  buffer_policy TEXT NOT NULL,
  device TEXT NOT NULL,
  device_description TEXT NOT NULL DEFAULT '',
  repetition BIGINT NOT NULL,
  config_json TEXT NOT NULL,
  run_id BIGINT REFERENCES runs(run_id),
  completed_at BIGINT
);
CREATE TABLE IF NOT EXISTS results (
  result_id {key},
  run_id BIGINT NOT NULL REFERENCES runs(run_id),
  config_id BIGINT NOT NULL REFERENCES configurations(config_id),
  step_index BIGINT NOT NULL,
  step_kind TEXT NOT NULL,
  parameter TEXT NOT NULL,
  step_json TEXT NOT NULL,
  status TEXT NOT NULL,
  message TEXT NOT NULL,
  recorded_at BIGINT NOT NULL{stats}
);
CREATE INDEX IF NOT EXISTS results_by_config ON results(config_id);";

/// What a new configuration row holds.
#[derive(Debug, Clone)]
pub struct ConfigRow<'a> {
    /// Unique key (the configuration's JSON with workload and scale).
    pub key: &'a str,
    /// Workload name.
    pub workload: &'a str,
    /// Scale name.
    pub scale: &'a str,
    /// Dataset name.
    pub dataset: &'a str,
    /// Insertion order name.
    pub insertion_order: &'a str,
    /// Objects in the dataset.
    pub dataset_count: u64,
    /// Index configuration name.
    pub index_name: &'a str,
    /// rtree, rstar, hilbert.
    pub index_kind: &'a str,
    /// Split.
    pub split: &'a str,
    /// Page size in bytes.
    pub page_size: u64,
    /// Store kind.
    pub store: &'a str,
    /// Buffer bytes.
    pub buffer_bytes: u64,
    /// Buffer policy.
    pub buffer_policy: &'a str,
    /// Device spec string.
    pub device: &'a str,
    /// Repetition number.
    pub repetition: u32,
    /// Full configuration JSON.
    pub config_json: &'a str,
}

/// One step result to record.
#[derive(Debug, Clone)]
pub struct StepRow<'a> {
    /// Step position in the workload.
    pub step_index: usize,
    /// Step kind.
    pub step_kind: &'a str,
    /// The varied parameter of the row (`selectivity=0.01%`, `k=10`) or empty.
    pub parameter: &'a str,
    /// The step as JSON.
    pub step_json: &'a str,
    /// `ok`, `skipped` or `error`.
    pub status: &'a str,
    /// Why a step was skipped or failed.
    pub message: &'a str,
    /// The metrics.
    pub stats: &'a Stats,
    /// The median latency of the row's operations when they were timed one
    /// by one (column `latency_median_ns`), else `None` (NULL).
    pub latency_median_ns: Option<u64>,
}

impl<'a> StepRow<'a> {
    /// An `ok` row of the first step, kind `step_kind`, with no parameter,
    /// no message and an empty step (`{}`): the rows of tests and of
    /// synthetic results.
    pub fn ok(step_kind: &'a str, stats: &'a Stats) -> Self {
        StepRow {
            step_index: 0,
            step_kind,
            parameter: "",
            step_json: "{}",
            status: "ok",
            message: "",
            stats,
            latency_median_ns: None,
        }
    }
}

/// Seconds since the Unix epoch.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn int(v: u64) -> Value {
    Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
}

/// The comment on `results` that holds a PostgreSQL store's schema version.
const VERSION_COMMENT: &str = "geoflash results schema ";

/// The schema version of the store behind `db` (0: a new store).
fn schema_version(db: &mut dyn Sql) -> Result<i64> {
    match db.dialect() {
        Dialect::Sqlite => Ok(query_one(db, "PRAGMA user_version", &[])?
            .and_then(|v| v.as_i64())
            .unwrap_or(0)),
        Dialect::Postgres => {
            let c = query_one(
                db,
                "SELECT obj_description(to_regclass('results'), 'pg_class')",
                &[],
            )?;
            Ok(c.as_ref()
                .and_then(Value::as_str)
                .and_then(|s| s.strip_prefix(VERSION_COMMENT))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0))
        }
    }
}

/// The column names of `table`.
fn columns(db: &mut dyn Sql, table: &str) -> Result<Vec<String>> {
    let q = db.dialect().columns_query(table);
    Ok(db
        .query(&q, &[])?
        .into_iter()
        .filter_map(|r| {
            r.into_iter()
                .next()
                .and_then(|v| v.as_str().map(String::from))
        })
        .collect())
}

/// True when the database behind `db` has a table `results` (in
/// PostgreSQL, one its search path finds).
fn holds_results(db: &mut dyn Sql) -> Result<bool> {
    let q = match db.dialect() {
        Dialect::Sqlite => {
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'results'"
        }
        Dialect::Postgres => {
            "SELECT CAST(CASE WHEN to_regclass('results') IS NULL THEN 0 ELSE 1 END AS BIGINT)"
        }
    };
    Ok(query_one(db, q, &[])?.and_then(|v| v.as_i64()).unwrap_or(0) > 0)
}

/// Creates the tables and the view if missing, adds the `Stats` columns
/// added since the store was created, and records the schema version (one
/// transaction); changes nothing in a store that is up to date.
fn init(db: &mut dyn Sql) -> Result<()> {
    let dialect = db.dialect();
    if dialect == Dialect::Postgres {
        // Several processes may open a new store at once (sweeps on Dask).
        db.batch("SELECT pg_advisory_xact_lock(7263540919)")?;
    }
    let version = schema_version(db)?;
    if version > SCHEMA_VERSION {
        return Err(Error::results_store(format!(
            "schema version {version} is newer than this geoflash knows ({SCHEMA_VERSION})"
        )));
    }
    if version == SCHEMA_VERSION {
        // Up to date: change nothing (a reader with SELECT rights only can
        // open it, and readers are not blocked by a re-created view).
        let results = columns(db, "results")?;
        let view = columns(db, "results_full")?;
        if Stats::COLUMNS
            .iter()
            .chain(MEASURED_COLUMNS)
            .all(|c| results.iter().any(|r| r == c))
            && results.iter().all(|c| view.contains(c))
        {
            return Ok(());
        }
    }
    let mut stats_cols = String::new();
    for (name, v) in Stats::default().to_columns() {
        stats_cols.push_str(&format!(",\n  {name} {}", column_type(&v)));
    }
    for name in MEASURED_COLUMNS {
        stats_cols.push_str(&format!(",\n  {name} BIGINT"));
    }
    db.batch(
        &TABLES
            .replace("{key}", dialect.key_type())
            .replace("{stats}", &stats_cols),
    )?;
    // Columns added to Stats after the store was created.
    let existing = columns(db, "results")?;
    for (name, v) in Stats::default().to_columns() {
        if !existing.iter().any(|c| c == name) {
            db.batch(&format!(
                "ALTER TABLE results ADD COLUMN {name} {}",
                column_type(&v)
            ))?;
        }
    }
    for name in MEASURED_COLUMNS {
        if !existing.iter().any(|c| c == name) {
            db.batch(&format!("ALTER TABLE results ADD COLUMN {name} BIGINT"))?;
        }
    }
    if version == 1 {
        // Version 1 stored 0 for the simulator's metrics of a real device.
        db.batch(&null_simulator_columns_sql())?;
    }
    db.batch(&format!(
        "DROP VIEW IF EXISTS results_full;
CREATE VIEW results_full AS
  SELECT {VIEW_COLUMNS}, r.*
  FROM results r JOIN configurations c ON r.config_id = c.config_id;"
    ))?;
    match dialect {
        Dialect::Sqlite => db.batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}")),
        Dialect::Postgres => db.batch(&format!(
            "COMMENT ON TABLE results IS '{VERSION_COMMENT}{SCHEMA_VERSION}'"
        )),
    }
}

impl ResultsStore {
    fn new(backend: Backend, location: String) -> Result<ResultsStore> {
        let mut store = ResultsStore { backend, location };
        let location = store.location.clone();
        store.backend.with(true, init).map_err(|e| match e {
            Error::ResultsStore { .. } => e.in_results_store(&location),
            // Whatever else fails while opening a store is the store's failure.
            other => Error::results_store(other.to_string()).in_results_store(&location),
        })?;
        Ok(store)
    }

    /// Opens the results store at `location` for reading it (a report): an
    /// SQLite file that exists, or a PostgreSQL database, either holding
    /// the table `results` (its schema is brought up to date as
    /// [`open_location`](Self::open_location) does). Anything else is bad
    /// input, and is left as it was: opening it as a store would create
    /// the tables (and set `PRAGMA user_version`) in another program's
    /// database, or in an empty file.
    pub fn open_existing(location: &ResultsLocation) -> Result<ResultsStore> {
        let (mut backend, name) = match location {
            ResultsLocation::Sqlite(path) => {
                let name = path.display().to_string();
                let flags =
                    rusqlite::OpenFlags::default() - rusqlite::OpenFlags::SQLITE_OPEN_CREATE;
                let conn = Connection::open_with_flags(path, flags)
                    .map_err(|e| Error::results_store(e.to_string()).in_results_store(&name))?;
                (Backend::Sqlite(conn), name)
            }
            #[cfg(feature = "postgres")]
            ResultsLocation::Postgres(url) => (
                Backend::Postgres(Box::new(crate::pg::connect(url)?)),
                crate::pg::redact(url),
            ),
            #[cfg(not(feature = "postgres"))]
            ResultsLocation::Postgres(url) => return Err(crate::pg::unsupported(url)),
        };
        let holds = backend
            .with(false, holds_results)
            .map_err(|e| e.in_results_store(&name))?;
        if !holds {
            return Err(Error::invalid(format!(
                "{name} is not a geoflash results store (it has no table `results`): \
                 give the store that `geoflash bench --results` wrote"
            )));
        }
        Self::new(backend, name)
    }

    /// Opens (creating if needed) the SQLite store at `path` and brings its
    /// schema up to date (columns added to `Stats` since are added to `results`).
    pub fn open(path: &Path) -> Result<ResultsStore> {
        let conn = Connection::open(path).map_err(|e| {
            Error::results_store(e.to_string()).in_results_store(&path.display().to_string())
        })?;
        Self::new(Backend::Sqlite(conn), path.display().to_string())
    }

    /// Opens the store at `location`: an SQLite file, or a PostgreSQL
    /// database whose tables are created if missing. A server that cannot
    /// be reached is an error naming the URL (without its password).
    pub fn open_location(location: &ResultsLocation) -> Result<ResultsStore> {
        match location {
            ResultsLocation::Sqlite(p) => Self::open(p),
            ResultsLocation::Postgres(url) => Self::connect(url),
        }
    }

    /// Opens the PostgreSQL store at `url` (see [`crate::pg`]).
    #[cfg(feature = "postgres")]
    pub fn connect(url: &str) -> Result<ResultsStore> {
        let client = crate::pg::connect(url)?;
        Self::new(Backend::Postgres(Box::new(client)), crate::pg::redact(url))
    }

    /// Refuses a PostgreSQL URL: this build has no PostgreSQL support.
    #[cfg(not(feature = "postgres"))]
    pub fn connect(url: &str) -> Result<ResultsStore> {
        Err(crate::pg::unsupported(url))
    }

    /// An in-memory SQLite store (tests).
    pub fn in_memory() -> Result<ResultsStore> {
        let conn = Connection::open_in_memory().map_err(|e| Error::results_store(e.to_string()))?;
        Self::new(Backend::Sqlite(conn), ":memory:".into())
    }

    /// The file, or the URL without its password.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The store's SQL dialect.
    pub fn dialect(&self) -> Dialect {
        match self.backend {
            Backend::Sqlite(_) => Dialect::Sqlite,
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs a query (parameters written `?1, ?2, …` in either dialect) and
    /// returns its rows. PostgreSQL columns must be integers, floats or text
    /// (cast aggregates such as `sum` and `avg` with `CAST(… AS DOUBLE PRECISION)`).
    pub fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>> {
        self.backend.with(false, |db| db.query(sql, params))
    }

    /// Runs statements separated by semicolons, without parameters and
    /// outside any transaction (maintenance: indexes, views of your own).
    pub fn batch(&mut self, sql: &str) -> Result<()> {
        self.backend.with(false, |db| db.batch(sql))
    }

    /// The column names of `table` (or view).
    pub fn columns(&mut self, table: &str) -> Result<Vec<String>> {
        self.backend.with(false, |db| columns(db, table))
    }

    /// Records the start of a run; returns its id.
    pub fn begin_run(
        &mut self,
        workload: &str,
        path: &str,
        text: &str,
        scale: &str,
        command: &str,
    ) -> Result<i64> {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let params = [
            workload.into(),
            path.into(),
            text.into(),
            scale.into(),
            env!("CARGO_PKG_VERSION").into(),
            host.as_str().into(),
            kernel.as_str().into(),
            command.into(),
            now().into(),
        ];
        self.backend.with(true, |db| {
            inserted_id(db.query(
                "INSERT INTO runs (workload, workload_path, workload_text, scale, geoflash_version, host, kernel, command, started_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING run_id",
                &params,
            )?)
        })
    }

    /// Records the end of run `run_id`.
    pub fn finish_run(&mut self, run_id: i64) -> Result<()> {
        self.update(
            "UPDATE runs SET finished_at = ?1 WHERE run_id = ?2",
            &[now().into(), run_id.into()],
        )
    }

    /// Runs one statement that changes rows (autocommitted).
    fn update(&mut self, sql: &str, params: &[Value]) -> Result<()> {
        self.backend
            .with(false, |db| db.execute(sql, params).map(|_| ()))
    }

    /// True when the configuration `key` has all its steps recorded.
    pub fn is_complete(&mut self, key: &str) -> Result<bool> {
        let v = self.backend.with(false, |db| {
            query_one(
                db,
                "SELECT completed_at FROM configurations WHERE config_key = ?1",
                &[key.into()],
            )
        })?;
        Ok(matches!(v, Some(v) if v != Value::Null))
    }

    /// Starts configuration `c` in run `run_id`: a new row, or the existing
    /// one with its earlier results removed (one transaction). The
    /// configurations `c` supersedes (the same configuration of the
    /// workload recorded with other steps: a workbench key that differs
    /// in its `steps` digest only) are deleted with their results. Returns
    /// its id. (A forced re-run of a complete configuration uses
    /// [`replace_configuration`](Self::replace_configuration) instead, so
    /// that its earlier results stay until the re-run succeeded.)
    pub fn begin_configuration(&mut self, run_id: i64, c: &ConfigRow) -> Result<i64> {
        self.backend
            .with(true, |db| reset_configuration(db, run_id, c))
    }

    /// Records configuration `c` complete in run `run_id` with `rows`, all
    /// its results, and its device `description`, in one transaction: its
    /// earlier results (and the configurations it supersedes, as
    /// [`begin_configuration`](Self::begin_configuration) deletes them)
    /// are deleted in the transaction that writes the new ones, so that a
    /// re-run that fails or is killed before this leaves the complete
    /// results it would have replaced. Returns the configuration's id.
    pub fn replace_configuration(
        &mut self,
        run_id: i64,
        c: &ConfigRow,
        description: &str,
        rows: &[StepRow],
    ) -> Result<i64> {
        let recorded_at = now();
        self.backend.with(true, |db| {
            let id = reset_configuration(db, run_id, c)?;
            insert_step_rows(db, run_id, id, rows, recorded_at)?;
            db.execute(
                "UPDATE configurations SET device_description = ?1, completed_at = ?2 WHERE config_id = ?3",
                &[description.into(), recorded_at.into(), id.into()],
            )?;
            Ok(id)
        })
    }

    /// Records the device description of configuration `config_id`.
    pub fn set_device_description(&mut self, config_id: i64, description: &str) -> Result<()> {
        self.update(
            "UPDATE configurations SET device_description = ?1 WHERE config_id = ?2",
            &[description.into(), config_id.into()],
        )
    }

    /// Marks configuration `config_id` complete.
    pub fn complete_configuration(&mut self, config_id: i64) -> Result<()> {
        self.update(
            "UPDATE configurations SET completed_at = ?1 WHERE config_id = ?2",
            &[now().into(), config_id.into()],
        )
    }

    /// Records one step result (one transaction); returns its id.
    pub fn record(&mut self, run_id: i64, config_id: i64, row: &StepRow) -> Result<i64> {
        let ids = self.record_step(run_id, config_id, std::slice::from_ref(row))?;
        ids.first()
            .copied()
            .ok_or_else(|| Error::results_store("no row recorded"))
    }

    /// Records the rows of one step (one per selectivity, k, …) in one
    /// transaction: all of them or, when anything fails, none. Returns their ids.
    pub fn record_step(
        &mut self,
        run_id: i64,
        config_id: i64,
        rows: &[StepRow],
    ) -> Result<Vec<i64>> {
        let recorded_at = now();
        self.backend.with(true, |db| {
            insert_step_rows(db, run_id, config_id, rows, recorded_at)
        })
    }

    /// Copies configuration `key`, complete in `from`, into this store with
    /// its result rows and the rows of the runs that wrote them, in one
    /// transaction: a process killed while copying leaves nothing of it.
    /// Returns the number of result rows copied, or `None` (and writes
    /// nothing) when this store already holds the configuration complete; an
    /// incomplete copy here (an interrupted `geoflash bench`) is replaced.
    /// On PostgreSQL, copies of one configuration by several processes at
    /// once wait for each other (a transaction-level advisory lock on the
    /// key), so exactly one of them writes it. The ids of the copied rows are
    /// assigned by this store. Used by `geoflash.dask.run`, whose workers run
    /// a configuration into a store of their own and copy it into a shared one.
    pub fn copy_configuration(
        &mut self,
        from: &mut ResultsStore,
        key: &str,
    ) -> Result<Option<usize>> {
        let config = from.select(
            "configurations",
            "WHERE config_key = ?1 AND completed_at IS NOT NULL",
            &[key.into()],
        )?;
        let Some(config_row) = config.rows.first() else {
            return Err(
                Error::results_store(format!("configuration {key} is not complete there"))
                    .in_results_store(&from.location),
            );
        };
        let config_id = config.get(config_row, "config_id")?.clone();
        let results = from.select(
            "results",
            "WHERE config_id = ?1 ORDER BY result_id",
            &[config_id],
        )?;
        let mut run_ids: Vec<Value> = Vec::new();
        for v in std::iter::once(config.get(config_row, "run_id")?).chain(
            results
                .rows
                .iter()
                .map(|r| results.get(r, "run_id"))
                .collect::<Result<Vec<_>>>()?,
        ) {
            if *v != Value::Null && !run_ids.contains(v) {
                run_ids.push(v.clone());
            }
        }
        let mut runs = Vec::with_capacity(run_ids.len());
        for id in &run_ids {
            runs.push(from.select("runs", "WHERE run_id = ?1", std::slice::from_ref(id))?);
        }
        self.backend.with(true, |db| {
            if db.dialect() == Dialect::Postgres {
                db.execute("SELECT pg_advisory_xact_lock(?1)", &[key_lock(key).into()])?;
            }
            let found = db.query(
                "SELECT config_id, completed_at FROM configurations WHERE config_key = ?1",
                &[key.into()],
            )?;
            if let Some(found) = found.first() {
                if found.get(1).is_some_and(|v| *v != Value::Null) {
                    return Ok(None);
                }
                let id = found.first().cloned().unwrap_or(Value::Null);
                db.execute(
                    "DELETE FROM results WHERE config_id = ?1",
                    std::slice::from_ref(&id),
                )?;
                db.execute("DELETE FROM configurations WHERE config_id = ?1", &[id])?;
            }
            drop_superseded(
                db,
                key,
                config.get(config_row, "workload")?,
                config.get(config_row, "scale")?,
            )?;
            let mut new_run_ids = Vec::with_capacity(runs.len());
            for (old, run) in run_ids.iter().zip(&runs) {
                for row in &run.rows {
                    new_run_ids.push((
                        old.clone(),
                        insert_row(db, "runs", run, row, "run_id", &[])?,
                    ));
                }
            }
            let run_id = |old: &Value| {
                new_run_ids
                    .iter()
                    .find(|(o, _)| o == old)
                    .map(|(_, n)| Value::Int(*n))
                    .unwrap_or(Value::Null)
            };
            let new_config = insert_row(
                db,
                "configurations",
                &config,
                config_row,
                "config_id",
                &[("run_id", run_id(config.get(config_row, "run_id")?))],
            )?;
            for row in &results.rows {
                insert_row(
                    db,
                    "results",
                    &results,
                    row,
                    "result_id",
                    &[
                        ("run_id", run_id(results.get(row, "run_id")?)),
                        ("config_id", Value::Int(new_config)),
                    ],
                )?;
            }
            Ok(Some(results.rows.len()))
        })
    }

    /// Every column of the rows of `table` (or view) that `filter` keeps
    /// (`SELECT * FROM table filter`: a `WHERE` and `ORDER BY` clause, or
    /// empty, with parameters `?1…`), with the names of the columns.
    pub fn select(&mut self, table: &str, filter: &str, params: &[Value]) -> Result<Rows> {
        self.backend.with(false, |db| {
            let columns = columns(db, table)?;
            let rows = db.query(&format!("SELECT * FROM {table} {filter}"), params)?;
            Ok(Rows { columns, rows })
        })
    }
}

/// Rows of a table and the names of its columns ([`ResultsStore::select`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    /// The column names, in the order of the values of each row.
    pub columns: Vec<String>,
    /// The rows.
    pub rows: Vec<Vec<Value>>,
}

impl Rows {
    /// The value of column `name` in `row` (one of these rows).
    pub fn get<'a>(&self, row: &'a [Value], name: &str) -> Result<&'a Value> {
        self.columns
            .iter()
            .position(|c| c == name)
            .and_then(|i| row.get(i))
            .ok_or_else(|| Error::results_store(format!("no column {name}")))
    }
}

/// Deletes the configurations `c` supersedes ([`drop_superseded`]), then
/// inserts `c` as a new row of run `run_id`, or, when its key is there,
/// deletes that row's results and marks it incomplete and of run `run_id`.
/// Returns its id.
fn reset_configuration(db: &mut dyn Sql, run_id: i64, c: &ConfigRow) -> Result<i64> {
    drop_superseded(db, c.key, &c.workload.into(), &c.scale.into())?;
    let existing = query_one(
        db,
        "SELECT config_id FROM configurations WHERE config_key = ?1",
        &[c.key.into()],
    )?
    .and_then(|v| v.as_i64());
    if let Some(id) = existing {
        db.execute("DELETE FROM results WHERE config_id = ?1", &[id.into()])?;
        db.execute(
            "UPDATE configurations SET completed_at = NULL, run_id = ?1, dataset_count = ?2 WHERE config_id = ?3",
            &[run_id.into(), int(c.dataset_count), id.into()],
        )?;
        return Ok(id);
    }
    inserted_id(db.query(
        "INSERT INTO configurations (config_key, workload, scale, dataset, insertion_order, dataset_count,
           index_name, index_kind, split, page_size, store, buffer_bytes, buffer_policy, device,
           repetition, config_json, run_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
         RETURNING config_id",
        &[
            c.key.into(),
            c.workload.into(),
            c.scale.into(),
            c.dataset.into(),
            c.insertion_order.into(),
            int(c.dataset_count),
            c.index_name.into(),
            c.index_kind.into(),
            c.split.into(),
            int(c.page_size),
            c.store.into(),
            int(c.buffer_bytes),
            c.buffer_policy.into(),
            c.device.into(),
            i64::from(c.repetition).into(),
            c.config_json.into(),
            run_id.into(),
        ],
    )?)
}

/// Inserts `rows` as results of configuration `config_id` in run `run_id`,
/// recorded at `recorded_at`; returns their ids.
fn insert_step_rows(
    db: &mut dyn Sql,
    run_id: i64,
    config_id: i64,
    rows: &[StepRow],
    recorded_at: i64,
) -> Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(rows.len());
    for row in rows {
        let cols = row.stats.to_columns();
        let mut names: Vec<&str> = STEP_COLUMNS.iter().skip(1).copied().collect();
        names.extend(cols.iter().map(|(n, _)| *n));
        names.push("latency_median_ns");
        let placeholders: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
        let sql = format!(
            "INSERT INTO results ({}) VALUES ({}) RETURNING result_id",
            names.join(", "),
            placeholders.join(", ")
        );
        let mut values: Vec<Value> = vec![
            run_id.into(),
            config_id.into(),
            int(row.step_index as u64),
            row.step_kind.into(),
            row.parameter.into(),
            row.step_json.into(),
            row.status.into(),
            row.message.into(),
            recorded_at.into(),
        ];
        // A simulator's metric on a real device does not apply: NULL, not 0.
        let real = !row.stats.device_simulated;
        values.extend(cols.into_iter().map(|(name, v)| {
            if real && simulator_only(name) {
                Value::Null
            } else {
                Value::from_json(v)
            }
        }));
        values.push(row.latency_median_ns.map_or(Value::Null, int));
        ids.push(inserted_id(db.query(&sql, &values)?)?);
    }
    Ok(ids)
}

/// Inserts `row` (of `from`) into `table` without its key column `key`
/// and the [`RETIRED_COLUMNS`], with the values of `replace` instead of
/// theirs; returns the new key.
fn insert_row(
    db: &mut dyn Sql,
    table: &str,
    from: &Rows,
    row: &[Value],
    key: &str,
    replace: &[(&str, Value)],
) -> Result<i64> {
    let mut names = Vec::new();
    let mut values = Vec::new();
    for (name, v) in from.columns.iter().zip(row) {
        if name == key || RETIRED_COLUMNS.contains(&name.as_str()) {
            continue;
        }
        names.push(name.as_str());
        values.push(
            replace
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, r)| r.clone())
                .unwrap_or_else(|| v.clone()),
        );
    }
    let placeholders: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
    inserted_id(db.query(
        &format!(
            "INSERT INTO {table} ({}) VALUES ({}) RETURNING {key}",
            names.join(", "),
            placeholders.join(", ")
        ),
        &values,
    )?)
}

/// What configuration key `key` names whatever the steps: the workbench's
/// key (the JSON of [`Configuration::key`](crate::workload::Configuration::key))
/// without its `steps` digest; `None` for a key of another form (tests and
/// synthetic results name configurations as they like).
fn key_identity(key: &str) -> Option<serde_json::Value> {
    let mut v: serde_json::Value = serde_json::from_str(key).ok()?;
    let o = v.as_object_mut()?;
    if !o.contains_key("configuration") {
        return None;
    }
    o.remove("steps");
    Some(v)
}

/// Deletes, with their results, the configurations that `key` (of
/// `workload` at `scale`) supersedes: those of another key naming the same
/// configuration ([`key_identity`]), recorded with other steps, or before
/// keys held the steps. Their rows measured another workload: kept, a
/// report would pool them with this configuration's as repetitions.
/// Returns how many were deleted.
fn drop_superseded(db: &mut dyn Sql, key: &str, workload: &Value, scale: &Value) -> Result<usize> {
    let Some(identity) = key_identity(key) else {
        return Ok(0);
    };
    let others = db.query(
        "SELECT config_id, config_key FROM configurations
         WHERE workload = ?1 AND scale = ?2 AND config_key <> ?3",
        &[workload.clone(), scale.clone(), key.into()],
    )?;
    let mut dropped = 0;
    for row in others {
        let (Some(id), Some(other)) = (row.first().cloned(), row.get(1).and_then(Value::as_str))
        else {
            continue;
        };
        if key_identity(other).as_ref() != Some(&identity) {
            continue;
        }
        db.execute(
            "DELETE FROM results WHERE config_id = ?1",
            std::slice::from_ref(&id),
        )?;
        db.execute("DELETE FROM configurations WHERE config_id = ?1", &[id])?;
        dropped += 1;
    }
    Ok(dropped)
}

/// The advisory lock of configuration `key` (FNV-1a of the key).
fn key_lock(key: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h as i64
}

/// The id an `INSERT … RETURNING` returned.
fn inserted_id(rows: Vec<Vec<Value>>) -> Result<i64> {
    rows.first()
        .and_then(|r| r.first())
        .and_then(Value::as_i64)
        .ok_or_else(|| Error::results_store("the insert returned no id"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config<'a>(key: &'a str) -> ConfigRow<'a> {
        ConfigRow {
            key,
            workload: "w",
            scale: "smoke",
            dataset: "d",
            insertion_order: "random",
            dataset_count: 10,
            index_name: "plain",
            index_kind: "rstar",
            split: "quadratic",
            page_size: 4096,
            store: "plain",
            buffer_bytes: 1024,
            buffer_policy: "lru",
            device: "mem:",
            repetition: 0,
            config_json: "{}",
        }
    }

    #[test]
    fn every_stats_column_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.sqlite");
        let mut st = ResultsStore::open(&path).unwrap();
        let run = st
            .begin_run("w", "w.toml", "name='w'", "smoke", "test")
            .unwrap();
        let c = st.begin_configuration(run, &config("k1")).unwrap();
        let mut s = Stats::new("build");
        s.operations = 7;
        s.io.pages_written = 1 << 40;
        s.build_rewrite_factor = 1.25;
        s.device_simulated = true;
        s.node_writes_by_level = vec![3, 1];
        st.record(run, c, &StepRow::ok("build", &s)).unwrap();
        assert!(!st.is_complete("k1").unwrap());
        st.complete_configuration(c).unwrap();
        assert!(st.is_complete("k1").unwrap());
        st.finish_run(run).unwrap();
        drop(st);
        // reopening keeps the data and the schema
        let mut st = ResultsStore::open(&path).unwrap();
        let rows = st
            .query(
                "SELECT operations, pages_written, build_rewrite_factor, node_writes_by_level, device_simulated FROM results_full WHERE index_name = 'plain'",
                &[],
            )
            .unwrap();
        assert_eq!(
            rows,
            vec![vec![
                Value::Int(7),
                Value::Int(1 << 40),
                Value::Real(1.25),
                Value::Text("[3,1]".into()),
                Value::Int(1)
            ]]
        );
        // every Stats column exists
        let cols = st.columns("results").unwrap();
        for name in Stats::COLUMNS {
            assert!(cols.iter().any(|c| c == name), "{name}");
        }
    }

    #[test]
    fn a_real_device_stores_null_for_the_simulator_metrics_and_old_stores_are_upgraded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.sqlite");
        let mut st = ResultsStore::open(&path).unwrap();
        let run = st.begin_run("w", "w.toml", "", "smoke", "test").unwrap();
        let c = st.begin_configuration(run, &config("k1")).unwrap();
        let mut real = Stats::new("build");
        real.io.pages_written = 5;
        st.record(run, c, &StepRow::ok("build", &real)).unwrap();
        let mut sim = Stats::new("build");
        sim.device_simulated = true;
        st.record(run, c, &StepRow::ok("build", &sim)).unwrap();
        let q = "SELECT sim_time_ns, nand_erases, pages_written FROM results ORDER BY result_id";
        let null_row = vec![Value::Null, Value::Null, Value::Int(5)];
        let sim_row = vec![Value::Int(0), Value::Int(0), Value::Int(0)];
        assert_eq!(
            st.query(q, &[]).unwrap(),
            vec![null_row.clone(), sim_row.clone()]
        );
        // A version-1 store holds 0 there: opening it sets NULL, only on the real device's row.
        st.batch("UPDATE results SET sim_time_ns = 0, nand_erases = 0; PRAGMA user_version = 1")
            .unwrap();
        drop(st);
        let mut st = ResultsStore::open(&path).unwrap();
        assert_eq!(st.query(q, &[]).unwrap(), vec![null_row, sim_row]);
    }

    #[test]
    fn rerunning_a_configuration_replaces_its_rows() {
        let mut st = ResultsStore::in_memory().unwrap();
        let run = st.begin_run("w", "p", "t", "smoke", "c").unwrap();
        let c = st.begin_configuration(run, &config("k")).unwrap();
        let s = Stats::new("x");
        let row = StepRow::ok("build", &s);
        st.record(run, c, &row).unwrap();
        st.record(run, c, &row).unwrap();
        let c2 = st.begin_configuration(run, &config("k")).unwrap();
        assert_eq!(c, c2);
        let n = st.query("SELECT count(*) FROM results", &[]).unwrap();
        assert_eq!(n, vec![vec![Value::Int(0)]]);
    }

    #[test]
    fn a_configuration_is_copied_once_whole() {
        let mut from = ResultsStore::in_memory().unwrap();
        let run = from.begin_run("w", "p", "t", "smoke", "c").unwrap();
        let c = from.begin_configuration(run, &config("k")).unwrap();
        let mut s = Stats::new("x");
        s.operations = 5;
        let row = |kind| StepRow::ok(kind, &s);
        from.record_step(run, c, &[row("build"), row("range")])
            .unwrap();
        let mut to = ResultsStore::in_memory().unwrap();
        // not complete in the source: refused
        let e = to
            .copy_configuration(&mut from, "k")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not complete"), "{e}");
        from.complete_configuration(c).unwrap();
        // an incomplete copy in the target (an interrupted run) is replaced
        let other = to.begin_run("w", "p", "t", "smoke", "c").unwrap();
        let partial = to.begin_configuration(other, &config("k")).unwrap();
        to.record(other, partial, &row("build")).unwrap();
        assert_eq!(to.copy_configuration(&mut from, "k").unwrap(), Some(2));
        assert!(to.is_complete("k").unwrap());
        // once complete, copies write nothing
        assert_eq!(to.copy_configuration(&mut from, "k").unwrap(), None);
        let rows = to
            .query(
                "SELECT step_kind, operations, workload FROM results_full ORDER BY result_id",
                &[],
            )
            .unwrap();
        assert_eq!(
            rows,
            vec![
                vec!["build".into(), Value::Int(5), "w".into()],
                vec!["range".into(), Value::Int(5), "w".into()],
            ]
        );
        let runs = to.select("runs", "ORDER BY run_id", &[]).unwrap();
        assert_eq!(runs.rows.len(), 2);
        assert_eq!(
            runs.get(&runs.rows[1], "command").unwrap(),
            &Value::from("c")
        );
    }

    /// A metric the schema documents is measured: `unmodified_nodes_flushed`
    /// never was (always 0), so it is no `Stats` column and new stores have
    /// no such column; an old store that has it still opens, records, and
    /// copies its configurations into a new store.
    #[test]
    fn a_retired_column_is_left_out_of_new_stores_and_copies() {
        for retired in RETIRED_COLUMNS {
            assert!(!Stats::COLUMNS.contains(retired), "{retired}");
        }
        let mut new = ResultsStore::in_memory().unwrap();
        let cols = new.columns("results").unwrap();
        assert!(
            !cols.iter().any(|c| c == "unmodified_nodes_flushed"),
            "{cols:?}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        ResultsStore::open(&path)
            .unwrap()
            .batch("ALTER TABLE results ADD COLUMN unmodified_nodes_flushed BIGINT")
            .unwrap();
        let mut old = ResultsStore::open(&path).unwrap();
        let run = old.begin_run("w", "p", "t", "smoke", "c").unwrap();
        let c = old.begin_configuration(run, &config("k")).unwrap();
        let mut s = Stats::new("build");
        s.flushed_nodes = 3;
        old.record(run, c, &StepRow::ok("build", &s)).unwrap();
        old.complete_configuration(c).unwrap();
        assert_eq!(new.copy_configuration(&mut old, "k").unwrap(), Some(1));
        let rows = new.query("SELECT flushed_nodes FROM results", &[]).unwrap();
        assert_eq!(rows, vec![vec![Value::Int(3)]]);
    }

    /// A workbench key names its configuration and the digest of its
    /// steps: beginning or copying a configuration deletes the same one
    /// recorded with other steps (or with a key from before keys held the
    /// steps), and nothing else.
    #[test]
    fn a_configuration_recorded_with_other_steps_is_replaced() {
        let key = |x: u32, steps: Option<&str>| {
            let mut v = serde_json::json!({
                "workload": "w", "scale": "smoke", "configuration": {"x": x},
            });
            if let Some(s) = steps {
                v["steps"] = s.into();
            }
            v.to_string()
        };
        let mut st = ResultsStore::in_memory().unwrap();
        let run = st.begin_run("w", "p", "t", "smoke", "c").unwrap();
        let s = Stats::new("build");
        let record = |st: &mut ResultsStore, key: &str| {
            let c = st.begin_configuration(run, &config(key)).unwrap();
            st.record(run, c, &StepRow::ok("build", &s)).unwrap();
            st.complete_configuration(c).unwrap();
        };
        for k in [key(1, None), key(2, Some("a")), "1/synthetic".to_string()] {
            record(&mut st, &k);
        }
        record(&mut st, &key(1, Some("b")));
        let keys = |st: &mut ResultsStore| -> Vec<String> {
            st.query(
                "SELECT config_key FROM configurations ORDER BY config_key",
                &[],
            )
            .unwrap()
            .into_iter()
            .map(|r| r[0].as_str().unwrap().to_string())
            .collect()
        };
        let mut want = vec![
            key(1, Some("b")),
            key(2, Some("a")),
            "1/synthetic".to_string(),
        ];
        want.sort();
        assert_eq!(keys(&mut st), want);
        let rows = st.query("SELECT count(*) FROM results", &[]).unwrap();
        assert_eq!(rows, vec![vec![Value::Int(3)]]);
        // a copy replaces it too
        let mut from = ResultsStore::in_memory().unwrap();
        let run = from.begin_run("w", "p", "t", "smoke", "c").unwrap();
        let c = from
            .begin_configuration(run, &config(&key(1, Some("c"))))
            .unwrap();
        from.record(run, c, &StepRow::ok("build", &s)).unwrap();
        from.complete_configuration(c).unwrap();
        assert_eq!(
            st.copy_configuration(&mut from, &key(1, Some("c")))
                .unwrap(),
            Some(1)
        );
        let mut want = vec![key(1, Some("c")), key(2, Some("a")), "1/synthetic".into()];
        want.sort();
        assert_eq!(keys(&mut st), want);
        let rows = st.query("SELECT count(*) FROM results", &[]).unwrap();
        assert_eq!(rows, vec![vec![Value::Int(3)]]);
    }

    #[test]
    fn not_a_database_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("junk.sqlite");
        std::fs::write(&p, vec![7u8; 4096]).unwrap();
        let e = ResultsStore::open(&p).unwrap_err().to_string();
        assert!(e.contains("junk.sqlite"), "{e}");
    }
}
