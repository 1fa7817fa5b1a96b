//! The runner: executes a workload's cross product, each configuration on a
//! fresh index, and records one [`Stats`](geoflash::metrics::Stats) row per step (per selectivity, per
//! k) in a [`ResultsStore`](crate::results::ResultsStore).
//!
//! Per step the device counters are reset, the store's buffer peak is
//! restarted and its other counters are differenced, so every row holds
//! that step's work only (its `peak_buffer_bytes`: the peak during the
//! step). Build, mixed and
//! delete steps end with a checkpoint (flush and sync), inside the
//! measurement, as FESTIval's protocol flushed at the end of a workload.
//! Configurations already complete in the results store are skipped unless
//! `force`, which re-runs them and replaces their rows in the transaction
//! that records the re-run complete (a re-run that fails or is killed
//! leaves the old rows). A configuration that fails is recorded with
//! status `error`, left incomplete (so a later run retries it) and the run
//! goes on with the next; a forced re-run that fails records nothing.
//!
//! The module holds [`run`] and the execution of one configuration
//! (`run`), where its rows go (`record`), dataset loading (`dataset`), the measurement shared by every
//! step (`measure`), the state of an execution and the dispatch of its
//! steps (`exec`), and one file per step kind: `build` (creating and
//! loading the index), `range`, `knn`, `points`, `mixed`, `delete`,
//! `moving` (move steps) and `crash`.
use std::path::PathBuf;

use serde::Serialize;

mod build;
mod crash;
mod dataset;
mod delete;
mod exec;
mod knn;
mod measure;
mod mixed;
mod moving;
mod points;
mod range;
mod record;
mod run;
#[cfg(test)]
mod tests;

pub use run::run;

/// How to run a workload.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Re-run configurations already complete in the results store; their
    /// rows are replaced only once the re-run succeeded.
    pub force: bool,
    /// Only the index configurations with these names (base or expanded); all when empty.
    pub only: Vec<String>,
    /// Draw progress bars on standard error.
    pub progress: bool,
    /// The command line, recorded with the run.
    pub command: String,
    /// Directory for the index directories of `file` devices (default: the system's temporary directory).
    pub workdir: Option<PathBuf>,
    /// Only the configuration at this position of the cross product (after
    /// `only`; positions as [`Workload::configurations`](crate::workload::Workload::configurations) lists them): one
    /// task of a sweep spread over several machines (`geoflash.dask.run`).
    pub pick: Option<usize>,
}

/// What a run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunSummary {
    /// The run's id in the results store.
    pub run_id: i64,
    /// Configurations in the cross product (after `only`).
    pub configurations: usize,
    /// Configurations executed.
    pub executed: usize,
    /// Configurations skipped because already complete.
    pub skipped_complete: usize,
    /// Result rows written.
    pub rows: usize,
    /// Steps skipped as unsupported (with the reason).
    pub unsupported: Vec<String>,
    /// Configurations that failed (with the error).
    pub failures: Vec<String>,
}
