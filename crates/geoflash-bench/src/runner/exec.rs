//! The state of one configuration's execution after its build ([`Exec`]),
//! and the dispatch of its steps to the files of their kinds.
use geoflash::geom::Rect;
use geoflash::{Error, Result, SpatialIndex};
use indicatif::ProgressBar;

use super::measure::{measure, ok_row, Row};
use crate::target::Target;
use crate::workload::Step;

/// The state of one configuration's execution.
pub(super) struct Exec<'a> {
    /// The dataset in insertion order.
    pub(super) data: &'a [(u64, Rect)],
    /// The extent of the whole dataset.
    pub(super) extent: Rect,
    /// Objects `data[..next]` have been offered to the index.
    pub(super) next: usize,
    /// Objects in the index now.
    pub(super) live: Vec<(u64, Rect)>,
    /// The progress bar of the steps.
    pub(super) bar: ProgressBar,
    /// The store's name.
    pub(super) store: String,
}

impl Exec<'_> {
    /// Inserts the next object of the dataset not yet offered to the index.
    pub(super) fn insert_next(&mut self, index: &mut dyn SpatialIndex) -> Result<()> {
        let Some(&(id, r)) = self.data.get(self.next) else {
            return Err(Error::invalid(format!(
                "the dataset's {} objects are all inserted: a mixed step needs objects left \
                 (give the build step a fraction below 1)",
                self.data.len()
            )));
        };
        index.insert(id, r)?;
        self.live.push((id, r));
        self.next += 1;
        Ok(())
    }

    /// Runs `step` (any kind but build and crash_and_recover, which the
    /// configuration's loop runs) and returns its rows.
    pub(super) fn step(&mut self, index: &mut Target, step: &Step) -> Result<Vec<Row>> {
        let label = step.kind();
        crate::progress::restart(&self.bar, 0);
        self.bar.set_message(label.to_string());
        match step {
            Step::Build { .. } => Err(Error::invalid("a build step must come first")),
            Step::RangeQueries {
                windows: source,
                predicate,
                repetitions,
                seed,
            } => self.range_queries(index, label, source, predicate, repetitions, seed),
            Step::Knn {
                k,
                count,
                placement,
                seed,
            } => self.knn(index, label, k, count, placement, seed),
            Step::PointQueries { group, count, seed } => {
                self.point_queries(index, label, group, count, seed)
            }
            Step::Mixed { .. } => self.mixed(index, step),
            Step::Delete { fraction, seed } => self.delete(index, label, fraction, seed),
            Step::Checkpoint => {
                let s = measure(index, label, |ix, _| ix.checkpoint())?;
                Ok(vec![ok_row(String::new(), s)])
            }
            Step::Move { .. } => self.moving(index, step),
            Step::CrashAndRecover { .. } => Err(Error::invalid(
                "crash_and_recover is run by the configuration's loop",
            )),
        }
    }
}
