//! Where the rows of one configuration's execution go ([`Recorder`]):
//! straight into the results store, one transaction per step, for a
//! configuration that is new or incomplete there; held in memory and
//! written with the deletion of the old rows in one transaction once every
//! step ran, for a forced re-run of a configuration complete there, so that
//! a re-run that fails or is interrupted leaves the complete results it
//! would have replaced.
use geoflash::metrics::Stats;
use geoflash::{Error, Result};

use super::measure::Row;
use crate::results::{ConfigRow, ResultsStore, StepRow};
use crate::workload::Step;

/// A row held until its configuration completes.
struct HeldRow {
    step_index: usize,
    step_kind: &'static str,
    step_json: String,
    row: Row,
}

/// Where the rows go.
enum Sink {
    /// Into the store as each step ends, under configuration `config_id`.
    Store { config_id: i64 },
    /// Held until the configuration completes, with its device's description.
    Held {
        rows: Vec<HeldRow>,
        description: String,
    },
}

/// Records the rows of one configuration's execution in run `run_id`.
pub(super) struct Recorder<'a> {
    store: &'a mut ResultsStore,
    run_id: i64,
    sink: Sink,
    /// Result rows of steps that ran written into the store so far (a
    /// failure's `error` row is not counted, as [`RunSummary::rows`](super::RunSummary::rows) counts).
    written: usize,
}

/// The JSON of a step, as its rows record it.
fn step_json(s: &Step) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

impl<'a> Recorder<'a> {
    /// Starts recording configuration `c` in run `run_id`: with `replace`
    /// (a forced re-run of a configuration complete in `store`) the rows
    /// are held and nothing is written yet; otherwise the configuration's
    /// row is created or reset at once
    /// ([`ResultsStore::begin_configuration`]).
    pub(super) fn begin(
        store: &'a mut ResultsStore,
        run_id: i64,
        c: &ConfigRow,
        replace: bool,
    ) -> Result<Self> {
        let sink = if replace {
            Sink::Held {
                rows: Vec::new(),
                description: String::new(),
            }
        } else {
            Sink::Store {
                config_id: store.begin_configuration(run_id, c)?,
            }
        };
        Ok(Recorder {
            store,
            run_id,
            sink,
            written: 0,
        })
    }

    /// True when the rows are held until the configuration completes (a
    /// forced re-run of a complete configuration).
    pub(super) fn holds(&self) -> bool {
        matches!(self.sink, Sink::Held { .. })
    }

    /// Rows written into the store so far.
    pub(super) fn written(&self) -> usize {
        self.written
    }

    /// Records the description of the configuration's device.
    pub(super) fn device(&mut self, text: &str) -> Result<()> {
        match &mut self.sink {
            Sink::Store { config_id } => self.store.set_device_description(*config_id, text),
            Sink::Held { description, .. } => {
                *description = text.to_string();
                Ok(())
            }
        }
    }

    /// Records the rows of step `s` (position `i`), all in one transaction.
    pub(super) fn step(&mut self, i: usize, s: &Step, rows: Vec<Row>) -> Result<()> {
        let json = step_json(s);
        match &mut self.sink {
            Sink::Store { config_id } => {
                let step_rows: Vec<StepRow> = rows
                    .iter()
                    .map(|r| step_row(i, s.kind(), &json, r))
                    .collect();
                self.store
                    .record_step(self.run_id, *config_id, &step_rows)?;
                self.written += rows.len();
            }
            Sink::Held { rows: held, .. } => {
                held.extend(rows.into_iter().map(|row| HeldRow {
                    step_index: i,
                    step_kind: s.kind(),
                    step_json: json.clone(),
                    row,
                }));
            }
        }
        Ok(())
    }

    /// Records that step `s` (position `i`) failed with `e`: a row with
    /// status `error`, the configuration left incomplete. A forced re-run
    /// records nothing: the configuration keeps its complete results.
    pub(super) fn fail(&mut self, i: usize, s: &Step, e: &Error) -> Result<()> {
        if let Sink::Store { config_id } = self.sink {
            let row = Row {
                parameter: String::new(),
                status: "error",
                message: e.to_string(),
                stats: Stats::new(s.kind()),
                latency_median_ns: None,
            };
            let json = step_json(s);
            self.store
                .record(self.run_id, config_id, &step_row(i, s.kind(), &json, &row))?;
        }
        Ok(())
    }

    /// Marks configuration `c` complete: held rows are written with it, and
    /// its earlier rows deleted, in one transaction
    /// ([`ResultsStore::replace_configuration`]). Returns the rows written
    /// in all.
    pub(super) fn finish(mut self, c: &ConfigRow) -> Result<usize> {
        match &self.sink {
            Sink::Store { config_id } => self.store.complete_configuration(*config_id)?,
            Sink::Held { rows, description } => {
                let step_rows: Vec<StepRow> = rows
                    .iter()
                    .map(|h| step_row(h.step_index, h.step_kind, &h.step_json, &h.row))
                    .collect();
                self.store
                    .replace_configuration(self.run_id, c, description, &step_rows)?;
                self.written += rows.len();
            }
        }
        Ok(self.written)
    }
}

/// The results-store row of `r`, of step `step_kind` at position `i`.
fn step_row<'r>(i: usize, step_kind: &'r str, step_json: &'r str, r: &'r Row) -> StepRow<'r> {
    StepRow {
        step_index: i,
        step_kind,
        parameter: &r.parameter,
        step_json,
        status: r.status,
        message: &r.message,
        stats: &r.stats,
        latency_median_ns: r.latency_median_ns,
    }
}
