//! The workbench from Python (`geoflash.bench`): runs a workload — a TOML
//! file, or a workload given as a Python dict (passed here as JSON and
//! turned into TOML) — with the workbench's runner into a SQLite results
//! store. The Python side (`python/geoflash/bench.py`) reads the store into
//! pandas DataFrames.
use std::path::{Path, PathBuf};

use geoflash_bench::results::sql::Value;
use geoflash_bench::results::{ResultsLocation, ResultsStore};
use geoflash_bench::runner::{run, RunOptions};
use geoflash_bench::workload::{Scale, Workload};
use geoflash_engine::engine::Error;
use pyo3::prelude::*;

use crate::to_py;

/// A workload given as JSON text (a dict from Python) as TOML text.
fn json_to_toml(json: &str) -> Result<String, Error> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| Error::invalid(format!("workload dict: {e}")))?;
    let toml_value: toml::Value =
        serde_json::from_value(value).map_err(|e| Error::invalid(format!("workload dict: {e}")))?;
    toml::to_string(&toml_value).map_err(|e| Error::invalid(format!("workload dict: {e}")))
}

/// The workload `workload`: a TOML file's path, or with `from_json` a
/// workload as JSON text.
fn load(workload: &str, from_json: bool, scale: Scale) -> Result<Workload, Error> {
    if from_json {
        let text = json_to_toml(workload)?;
        Workload::parse(&text, Path::new("<dict>"), scale)
    } else {
        Workload::load(Path::new(workload), scale)
    }
}

/// The configurations of `workload` at `scale` (after `only`) as JSON: a
/// list of `{"position", "key", "what", "complete"}` in the order `pick`
/// numbers them, `complete` telling whether the results store `results`
/// (created if missing) already holds the configuration whole.
#[pyfunction]
#[pyo3(signature = (workload, results, scale="small", from_json=false, only=Vec::new()))]
pub fn bench_plan(
    workload: String,
    results: String,
    scale: &str,
    from_json: bool,
    only: Vec<String>,
) -> PyResult<String> {
    let scale: Scale = scale.parse().map_err(to_py)?;
    let w = load(&workload, from_json, scale).map_err(to_py)?;
    let mut store =
        ResultsStore::open_location(&ResultsLocation::parse(&results)).map_err(to_py)?;
    let configs = w.configurations(&only);
    if configs.is_empty() {
        return Err(to_py(Error::invalid(format!(
            "no index configuration of workload {:?} is named {}",
            w.name,
            only.join(" or ")
        ))));
    }
    let mut out = Vec::new();
    for (position, c) in configs.iter().enumerate() {
        let key = c.key(&w.name, w.scale).map_err(to_py)?;
        let complete = store.is_complete(&key).map_err(to_py)?;
        out.push(serde_json::json!({
            "position": position,
            "key": key,
            "what": format!("{} / {} / rep {}", c.dataset.name, c.index.name, c.repetition),
            "complete": complete,
        }));
    }
    serde_json::to_string(
        &serde_json::json!({"workload": w.name, "scale": scale.name(), "configurations": out}),
    )
    .map_err(|e| to_py(Error::invalid(e.to_string())))
}

/// Runs the workload `workload` (a TOML file's path, or with `from_json`
/// a workload as JSON text) at `scale` into the results store `results`
/// (an SQLite file, or a PostgreSQL URL)
/// and returns the run summary with the workload's name as JSON text.
/// `only` restricts the run to some index configurations (as
/// `geoflash bench --index`); `force` re-runs complete ones; indexes on
/// `file` devices are created in `workdir` (default: the temporary
/// directory); `pick` runs only the configuration at that position of
/// `bench_plan`'s list. The GIL is released while the workload runs.
#[pyfunction]
#[pyo3(signature = (workload, results, scale="small", from_json=false, force=false, only=Vec::new(), workdir=None, pick=None))]
#[allow(clippy::too_many_arguments)]
pub fn bench_run(
    py: Python<'_>,
    workload: String,
    results: String,
    scale: &str,
    from_json: bool,
    force: bool,
    only: Vec<String>,
    workdir: Option<PathBuf>,
    pick: Option<usize>,
) -> PyResult<String> {
    let scale: Scale = scale.parse().map_err(to_py)?;
    let w = load(&workload, from_json, scale).map_err(to_py)?;
    let name = w.name.clone();
    let summary = py
        .allow_threads(|| -> Result<_, Error> {
            let mut store = ResultsStore::open_location(&ResultsLocation::parse(&results))?;
            run(
                &w,
                &mut store,
                &RunOptions {
                    force,
                    only,
                    progress: false,
                    command: "geoflash.bench.run".into(),
                    workdir,
                    pick,
                },
            )
        })
        .map_err(to_py)?;
    serde_json::to_string(&serde_json::json!({
        "workload": name,
        "scale": scale.name(),
        "summary": summary,
    }))
    .map_err(|e| to_py(Error::invalid(e.to_string())))
}

/// True when the results store `results` (an SQLite file or a PostgreSQL
/// URL; created if missing) holds the configuration `key` complete.
#[pyfunction]
pub fn bench_is_complete(py: Python<'_>, results: String, key: String) -> PyResult<bool> {
    py.allow_threads(|| {
        ResultsStore::open_location(&ResultsLocation::parse(&results))?.is_complete(&key)
    })
    .map_err(to_py)
}

/// Copies the configuration `key`, complete in the results store `source`,
/// with its rows into the results store `results` in one transaction
/// (`ResultsStore::copy_configuration`): returns the number of result rows
/// copied, or None (nothing written) when `results` already holds it
/// complete. The GIL is released meanwhile.
#[pyfunction]
pub fn bench_copy_configuration(
    py: Python<'_>,
    source: String,
    results: String,
    key: String,
) -> PyResult<Option<usize>> {
    py.allow_threads(|| -> Result<_, Error> {
        let mut from = ResultsStore::open_location(&ResultsLocation::parse(&source))?;
        let mut to = ResultsStore::open_location(&ResultsLocation::parse(&results))?;
        to.copy_configuration(&mut from, &key)
    })
    .map_err(to_py)
}

/// The rows of the `results_full` view of the results store `results` (an
/// SQLite file or a PostgreSQL URL), of workload `workload` and scale
/// `scale` when given, in the order they were recorded, as JSON text
/// `{"columns": [...], "rows": [[...], ...]}`.
#[pyfunction]
#[pyo3(signature = (results, workload=None, scale=None))]
pub fn bench_rows(
    py: Python<'_>,
    results: String,
    workload: Option<String>,
    scale: Option<String>,
) -> PyResult<String> {
    py.allow_threads(|| -> Result<_, Error> {
        let mut store = ResultsStore::open_location(&ResultsLocation::parse(&results))?;
        let mut filter = Vec::new();
        let mut params = Vec::new();
        for (column, v) in [("workload", workload), ("scale", scale)] {
            if let Some(v) = v {
                params.push(Value::Text(v));
                filter.push(format!("{column} = ?{}", params.len()));
            }
        }
        let filter = if filter.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", filter.join(" AND "))
        };
        let rows = store.select(
            "results_full",
            &format!("{filter} ORDER BY result_id"),
            &params,
        )?;
        let json = |v: &Value| match v {
            Value::Null => serde_json::Value::Null,
            Value::Int(i) => (*i).into(),
            Value::Real(f) => (*f).into(),
            Value::Text(s) => s.as_str().into(),
        };
        let out: Vec<Vec<serde_json::Value>> = rows
            .rows
            .iter()
            .map(|r| r.iter().map(json).collect())
            .collect();
        serde_json::to_string(&serde_json::json!({"columns": rows.columns, "rows": out}))
            .map_err(|e| Error::invalid(e.to_string()))
    })
    .map_err(to_py)
}

/// The results store `results` as messages name it: the file, or the
/// PostgreSQL URL without its password; `is_url` tells which.
#[pyfunction]
pub fn bench_location(results: &str) -> (String, bool) {
    let location = ResultsLocation::parse(results);
    let is_url = matches!(location, ResultsLocation::Postgres(_));
    (location.to_string(), is_url)
}
