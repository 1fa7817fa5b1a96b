//! The results store: an SQLite file (FESTIval's relational schema's
//! successor, documented in `docs/workbench.md`).
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
//! Every step row is written in its own transaction: an interrupted run
//! leaves whole rows only, and a configuration without `completed_at` is
//! re-run (its rows replaced) by the next run.
use std::path::Path;

use geoflash::metrics::Stats;
use geoflash::{Error, Result};
use rusqlite::{params, Connection, OptionalExtension};

/// Schema version stored in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 1;

/// An open results store.
pub struct ResultsStore {
    conn: Connection,
}

impl std::fmt::Debug for ResultsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultsStore").finish()
    }
}

fn db_err(e: rusqlite::Error) -> Error {
    Error::invalid(format!("results store: {e}"))
}

/// The SQL type of a `Stats` column.
fn column_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Number(n) if n.is_f64() => "REAL",
        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => "INTEGER",
        _ => "TEXT",
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
}

fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // seconds since the epoch as an SQLite-readable timestamp
    format!("{secs}")
}

impl ResultsStore {
    /// Opens (creating if needed) the store at `path` and brings its schema
    /// up to date (columns added to `Stats` since are added to `results`).
    pub fn open(path: &Path) -> Result<ResultsStore> {
        let conn = Connection::open(path)
            .map_err(|e| Error::invalid(format!("results store {}: {e}", path.display())))?;
        let store = ResultsStore { conn };
        store.init().map_err(|e| {
            Error::invalid(format!("results store {}: {}", path.display(), strip(&e)))
        })?;
        Ok(store)
    }

    /// An in-memory store (tests).
    pub fn in_memory() -> Result<ResultsStore> {
        let conn = Connection::open_in_memory().map_err(db_err)?;
        let store = ResultsStore { conn };
        store.init()?;
        Ok(store)
    }

    /// The connection, for queries (reports, tests).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    fn init(&self) -> Result<()> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(db_err)?;
        if version > SCHEMA_VERSION {
            return Err(Error::invalid(format!(
                "schema version {version} is newer than this geoflash knows ({SCHEMA_VERSION})"
            )));
        }
        let mut stats_cols = String::new();
        for (name, v) in Stats::default().to_columns() {
            stats_cols.push_str(&format!(",\n  {name} {}", column_type(&v)));
        }
        let sql = format!(
            "BEGIN;
CREATE TABLE IF NOT EXISTS runs (
  run_id INTEGER PRIMARY KEY,
  workload TEXT NOT NULL,
  workload_path TEXT NOT NULL,
  workload_text TEXT NOT NULL,
  scale TEXT NOT NULL,
  geoflash_version TEXT NOT NULL,
  host TEXT NOT NULL,
  kernel TEXT NOT NULL,
  command TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  finished_at INTEGER
);
CREATE TABLE IF NOT EXISTS configurations (
  config_id INTEGER PRIMARY KEY,
  config_key TEXT NOT NULL UNIQUE,
  workload TEXT NOT NULL,
  scale TEXT NOT NULL,
  dataset TEXT NOT NULL,
  insertion_order TEXT NOT NULL,
  dataset_count INTEGER NOT NULL,
  index_name TEXT NOT NULL,
  index_kind TEXT NOT NULL,
  split TEXT NOT NULL,
  page_size INTEGER NOT NULL,
  store TEXT NOT NULL,
  buffer_bytes INTEGER NOT NULL,
  buffer_policy TEXT NOT NULL,
  device TEXT NOT NULL,
  device_description TEXT NOT NULL DEFAULT '',
  repetition INTEGER NOT NULL,
  config_json TEXT NOT NULL,
  run_id INTEGER REFERENCES runs(run_id),
  completed_at INTEGER
);
CREATE TABLE IF NOT EXISTS results (
  result_id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(run_id),
  config_id INTEGER NOT NULL REFERENCES configurations(config_id),
  step_index INTEGER NOT NULL,
  step_kind TEXT NOT NULL,
  parameter TEXT NOT NULL,
  step_json TEXT NOT NULL,
  status TEXT NOT NULL,
  message TEXT NOT NULL,
  recorded_at INTEGER NOT NULL{stats_cols}
);
CREATE INDEX IF NOT EXISTS results_by_config ON results(config_id);
DROP VIEW IF EXISTS results_full;
CREATE VIEW results_full AS
  SELECT c.workload, c.scale, c.dataset, c.insertion_order, c.dataset_count, c.index_name,
         c.index_kind, c.split, c.page_size, c.store, c.buffer_bytes, c.buffer_policy,
         c.device, c.device_description, c.repetition, r.*
  FROM results r JOIN configurations c ON r.config_id = c.config_id;
PRAGMA user_version = {SCHEMA_VERSION};
COMMIT;"
        );
        self.conn.execute_batch(&sql).map_err(db_err)?;
        // Columns added to Stats after the file was created.
        let existing: Vec<String> = {
            let mut st = self
                .conn
                .prepare("PRAGMA table_info(results)")
                .map_err(db_err)?;
            let rows = st
                .query_map([], |r| r.get::<_, String>(1))
                .map_err(db_err)?;
            rows.collect::<std::result::Result<_, _>>()
                .map_err(db_err)?
        };
        for (name, v) in Stats::default().to_columns() {
            if !existing.iter().any(|c| c == name) {
                self.conn
                    .execute_batch(&format!(
                        "ALTER TABLE results ADD COLUMN {name} {}",
                        column_type(&v)
                    ))
                    .map_err(db_err)?;
            }
        }
        Ok(())
    }

    /// Records the start of a run; returns its id.
    pub fn begin_run(
        &self,
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
        self.conn
            .execute(
                "INSERT INTO runs (workload, workload_path, workload_text, scale, geoflash_version, host, kernel, command, started_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    workload,
                    path,
                    text,
                    scale,
                    env!("CARGO_PKG_VERSION"),
                    host,
                    kernel,
                    command,
                    now()
                ],
            )
            .map_err(db_err)?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Records the end of run `run_id`.
    pub fn finish_run(&self, run_id: i64) -> Result<()> {
        self.conn
            .execute(
                "UPDATE runs SET finished_at = ?1 WHERE run_id = ?2",
                params![now(), run_id],
            )
            .map_err(db_err)?;
        Ok(())
    }

    /// True when the configuration `key` has all its steps recorded.
    pub fn is_complete(&self, key: &str) -> Result<bool> {
        let v: Option<Option<i64>> = self
            .conn
            .query_row(
                "SELECT completed_at FROM configurations WHERE config_key = ?1",
                params![key],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        Ok(matches!(v, Some(Some(_))))
    }

    /// Starts configuration `c` in run `run_id`: a new row, or the existing
    /// one with its earlier results removed (one transaction). Returns its id.
    pub fn begin_configuration(&mut self, run_id: i64, c: &ConfigRow) -> Result<i64> {
        let tx = self.conn.transaction().map_err(db_err)?;
        let existing: Option<i64> = tx
            .query_row(
                "SELECT config_id FROM configurations WHERE config_key = ?1",
                params![c.key],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        let id = match existing {
            Some(id) => {
                tx.execute("DELETE FROM results WHERE config_id = ?1", params![id])
                    .map_err(db_err)?;
                tx.execute(
                    "UPDATE configurations SET completed_at = NULL, run_id = ?1, dataset_count = ?2 WHERE config_id = ?3",
                    params![run_id, c.dataset_count as i64, id],
                )
                .map_err(db_err)?;
                id
            }
            None => {
                tx.execute(
                    "INSERT INTO configurations (config_key, workload, scale, dataset, insertion_order, dataset_count,
                       index_name, index_kind, split, page_size, store, buffer_bytes, buffer_policy, device,
                       repetition, config_json, run_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                    params![
                        c.key,
                        c.workload,
                        c.scale,
                        c.dataset,
                        c.insertion_order,
                        c.dataset_count as i64,
                        c.index_name,
                        c.index_kind,
                        c.split,
                        c.page_size as i64,
                        c.store,
                        c.buffer_bytes as i64,
                        c.buffer_policy,
                        c.device,
                        c.repetition,
                        c.config_json,
                        run_id
                    ],
                )
                .map_err(db_err)?;
                tx.last_insert_rowid()
            }
        };
        tx.commit().map_err(db_err)?;
        Ok(id)
    }

    /// Records the device description of configuration `config_id`.
    pub fn set_device_description(&self, config_id: i64, description: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE configurations SET device_description = ?1 WHERE config_id = ?2",
                params![description, config_id],
            )
            .map_err(db_err)?;
        Ok(())
    }

    /// Marks configuration `config_id` complete.
    pub fn complete_configuration(&self, config_id: i64) -> Result<()> {
        self.conn
            .execute(
                "UPDATE configurations SET completed_at = ?1 WHERE config_id = ?2",
                params![now(), config_id],
            )
            .map_err(db_err)?;
        Ok(())
    }

    /// Records one step result (one transaction).
    pub fn record(&mut self, run_id: i64, config_id: i64, row: &StepRow) -> Result<i64> {
        let cols = row.stats.to_columns();
        let mut names: Vec<String> = STEP_COLUMNS.iter().skip(1).map(|s| s.to_string()).collect();
        names.extend(cols.iter().map(|(n, _)| n.to_string()));
        let placeholders: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
        let sql = format!(
            "INSERT INTO results ({}) VALUES ({})",
            names.join(", "),
            placeholders.join(", ")
        );
        let mut values: Vec<rusqlite::types::Value> = vec![
            run_id.into(),
            config_id.into(),
            (row.step_index as i64).into(),
            row.step_kind.to_string().into(),
            row.parameter.to_string().into(),
            row.step_json.to_string().into(),
            row.status.to_string().into(),
            row.message.to_string().into(),
            now().parse::<i64>().unwrap_or(0).into(),
        ];
        for (_, v) in cols {
            values.push(match v {
                serde_json::Value::Number(n) if n.is_f64() => {
                    rusqlite::types::Value::Real(n.as_f64().unwrap_or(0.0))
                }
                serde_json::Value::Number(n) => {
                    rusqlite::types::Value::Integer(n.as_i64().unwrap_or_else(|| {
                        n.as_u64()
                            .map(|u| u.min(i64::MAX as u64) as i64)
                            .unwrap_or(0)
                    }))
                }
                serde_json::Value::Bool(b) => rusqlite::types::Value::Integer(i64::from(b)),
                serde_json::Value::String(s) => rusqlite::types::Value::Text(s),
                serde_json::Value::Null => rusqlite::types::Value::Null,
                other => rusqlite::types::Value::Text(other.to_string()),
            });
        }
        let tx = self.conn.transaction().map_err(db_err)?;
        tx.execute(&sql, rusqlite::params_from_iter(values.iter()))
            .map_err(db_err)?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(db_err)?;
        Ok(id)
    }
}

fn strip(e: &Error) -> String {
    match e {
        Error::InvalidInput(m) => m.clone(),
        other => other.to_string(),
    }
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
        st.record(
            run,
            c,
            &StepRow {
                step_index: 0,
                step_kind: "build",
                parameter: "",
                step_json: "{}",
                status: "ok",
                message: "",
                stats: &s,
            },
        )
        .unwrap();
        assert!(!st.is_complete("k1").unwrap());
        st.complete_configuration(c).unwrap();
        assert!(st.is_complete("k1").unwrap());
        st.finish_run(run).unwrap();
        drop(st);
        // reopening keeps the data and the schema
        let st = ResultsStore::open(&path).unwrap();
        let (ops, pw, f, lv, sim): (i64, i64, f64, String, i64) = st
            .connection()
            .query_row(
                "SELECT operations, pages_written, build_rewrite_factor, node_writes_by_level, device_simulated FROM results_full WHERE index_name = 'plain'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap();
        assert_eq!(
            (ops, pw, f, lv.as_str(), sim),
            (7, 1 << 40, 1.25, "[3,1]", 1)
        );
        // every Stats column exists
        for name in Stats::COLUMNS {
            st.connection()
                .query_row(&format!("SELECT {name} FROM results"), [], |_| Ok(()))
                .unwrap();
        }
    }

    #[test]
    fn rerunning_a_configuration_replaces_its_rows() {
        let mut st = ResultsStore::in_memory().unwrap();
        let run = st.begin_run("w", "p", "t", "smoke", "c").unwrap();
        let c = st.begin_configuration(run, &config("k")).unwrap();
        let s = Stats::new("x");
        let row = StepRow {
            step_index: 0,
            step_kind: "build",
            parameter: "",
            step_json: "{}",
            status: "ok",
            message: "",
            stats: &s,
        };
        st.record(run, c, &row).unwrap();
        st.record(run, c, &row).unwrap();
        let c2 = st.begin_configuration(run, &config("k")).unwrap();
        assert_eq!(c, c2);
        let n: i64 = st
            .connection()
            .query_row("SELECT count(*) FROM results", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
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
