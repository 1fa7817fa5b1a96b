//! Mixed steps: inserts of objects not yet loaded interleaved (seeded) with
//! range queries or exact point lookups, ending with a checkpoint.
use geoflash::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::exec::Exec;
use super::measure::{measure, ok_row, Row};
use crate::target::{Answer, Target};
use crate::windows::{windows, Placement};
use crate::workload::{MixedQuery, Step};

impl Exec<'_> {
    /// A mixed step (its six parameters read from `step`): one row.
    pub(super) fn mixed(&mut self, index: &mut Target, step: &Step) -> Result<Vec<Row>> {
        let Step::Mixed {
            operations,
            insert_ratio,
            selectivity,
            predicate,
            query,
            seed,
        } = step
        else {
            return Err(Error::invalid(format!(
                "mixed cannot run a {} step",
                step.kind()
            )));
        };
        let label = step.kind();
        // The parser's limit, again before the plan and windows are allocated.
        crate::workload::step_operations(*operations as u64, "operations")?;
        let bar = self.bar.clone();
        let mut rng = ChaCha8Rng::seed_from_u64(*seed);
        let plan: Vec<bool> = (0..*operations)
            .map(|_| rng.gen::<f64>() < *insert_ratio)
            .collect();
        let inserts = plan.iter().filter(|x| **x).count();
        let left = self.data.len() - self.next.min(self.data.len());
        if inserts > left {
            return Err(Error::invalid(format!(
                "the mixed step inserts {inserts} objects but only {left} of the dataset are left: \
                 lower the build step's fraction or the mixed step's operations"
            )));
        }
        let queries = plan.len() - inserts;
        let ws = windows(
            self.extent,
            *selectivity,
            1.0,
            queries,
            Placement::Uniform,
            &[],
            seed.wrapping_add(1),
        )?;
        crate::progress::restart(&bar, plan.len() as u64);
        let mut pick = ChaCha8Rng::seed_from_u64(seed.wrapping_add(2));
        let s = measure(index, label, |ix, s| {
            let mut wi = ws.iter();
            for is_insert in &plan {
                if *is_insert {
                    self.insert_next(ix)?;
                } else if *query == MixedQuery::Point {
                    // An exact lookup of an object loaded so far.
                    let i = pick.gen_range(0..self.live.len().max(1));
                    if let Some((_, r)) = self.live.get(i) {
                        Answer::from(&ix.point_group(&[r.center()])?).add_to(s);
                    }
                } else if let Some(w) = wi.next() {
                    Answer::from(&ix.query(*w, *predicate)?).add_to(s);
                }
                s.operations += 1;
                bar.inc(1);
            }
            ix.checkpoint()
        })?;
        let q = match query {
            MixedQuery::Range => "",
            MixedQuery::Point => ";query=point",
        };
        Ok(vec![ok_row(format!("insert_ratio={insert_ratio}{q}"), s)])
    }
}
