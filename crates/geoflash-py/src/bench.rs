//! The workbench from Python (`geoflash.bench`): runs a workload — a TOML
//! file, or a workload given as a Python dict (passed here as JSON and
//! turned into TOML) — with the workbench's runner into a SQLite results
//! store. The Python side (`python/geoflash/bench.py`) reads the store into
//! pandas DataFrames.
use std::path::{Path, PathBuf};

use geoflash_bench::results::ResultsStore;
use geoflash_bench::runner::{run, RunOptions};
use geoflash_bench::workload::{Scale, Workload};
use geoflash_engine::Error;
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

/// Runs the workload `workload` (a TOML file's path, or with `from_json`
/// a workload as JSON text) at `scale` into the results store `results`
/// and returns the run summary with the workload's name as JSON text.
/// `only` restricts the run to some index configurations (as
/// `geoflash bench --index`); `force` re-runs complete ones; indexes on
/// `file` devices are created in `workdir` (default: the temporary
/// directory). The GIL is released while the workload runs.
#[pyfunction]
#[pyo3(signature = (workload, results, scale="small", from_json=false, force=false, only=Vec::new(), workdir=None))]
#[allow(clippy::too_many_arguments)]
pub fn bench_run(
    py: Python<'_>,
    workload: String,
    results: PathBuf,
    scale: &str,
    from_json: bool,
    force: bool,
    only: Vec<String>,
    workdir: Option<PathBuf>,
) -> PyResult<String> {
    let scale: Scale = scale.parse().map_err(to_py)?;
    let w = if from_json {
        let text = json_to_toml(&workload).map_err(to_py)?;
        Workload::parse(&text, Path::new("<dict>"), scale)
    } else {
        Workload::load(Path::new(&workload), scale)
    }
    .map_err(to_py)?;
    let name = w.name.clone();
    let summary = py
        .allow_threads(|| -> Result<_, Error> {
            let mut store = ResultsStore::open(&results)?;
            run(
                &w,
                &mut store,
                &RunOptions {
                    force,
                    only,
                    progress: false,
                    command: "geoflash.bench.run".into(),
                    workdir,
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
