//! Move steps (moving objects): batches of updates by id
//! (`Index::update_by_id`: the index finds the old rectangle), each
//! object's rectangle shifted by a seeded random offset (same size), each
//! batch one commit (`BatchDurability::Commit`: a store with a log syncs
//! it instead of checkpointing, on `flashsim:` too, where the runner's
//! indexes live in the process; the plain store, and an index directory
//! with a simulated tier, checkpoint), and after
//! each commit a few windows queried and checked against a brute-force
//! oracle of the current rectangles. The first update by id builds the
//! index's id locator (one query over the whole index): inside the first
//! commit's measurement.
//!
//! Two rows: `phase=moves`, the batches and their commits (the queries
//! excluded), whose `operations` are the moves; and `phase=queries`, the
//! windows between commits, with the median latency of one query in
//! `latency_median_ns`.
use std::time::Instant;

use geoflash::engine::Predicate;
use geoflash::geom::Rect;
use geoflash::metrics::Stats;
use geoflash::{BatchDurability, Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::exec::Exec;
use super::measure::{measure_target, Row};
use crate::target::{Answer, Target};
use crate::windows::{windows, Placement};
use crate::workload::Step;

/// The median of `v` (for an even count the mean of the two middle
/// values, rounded down to a whole nanosecond, as the report's medians and
/// pandas' `median` take it), `None` when empty.
fn median(mut v: Vec<u64>) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    let hi = *v.get(n / 2)?;
    if n % 2 == 1 {
        return Some(hi);
    }
    let lo = *v.get(n / 2 - 1)?;
    Some(lo + (hi - lo) / 2)
}

/// `r` shifted by `(dx, dy)`, then pulled back inside `extent` (when it
/// fits there) so that the objects stay where the windows are.
fn shifted(r: &Rect, dx: f64, dy: f64, extent: &Rect) -> Result<Rect> {
    let pull = |lo: f64, hi: f64, d: f64, elo: f64, ehi: f64| {
        if hi - lo > ehi - elo {
            d
        } else if lo + d < elo {
            elo - lo
        } else if hi + d > ehi {
            ehi - hi
        } else {
            d
        }
    };
    let dx = pull(r.min_x(), r.max_x(), dx, extent.min_x(), extent.max_x());
    let dy = pull(r.min_y(), r.max_y(), dy, extent.min_y(), extent.max_y());
    Rect::new(
        r.min_x() + dx,
        r.min_y() + dy,
        r.max_x() + dx,
        r.max_y() + dy,
    )
}

/// The ids of `got` and `want` that only one of them holds (at most a few
/// of each), for the message of a wrong answer.
fn difference(mut got: Vec<u64>, mut want: Vec<u64>) -> Option<String> {
    got.sort_unstable();
    want.sort_unstable();
    if got == want {
        return None;
    }
    // At most 5 ids of `a` that `b` (sorted) does not hold.
    let absent = |a: &[u64], b: &[u64]| -> Vec<u64> {
        a.iter()
            .filter(|i| b.binary_search(i).is_err())
            .take(5)
            .copied()
            .collect()
    };
    let missing = absent(&want, &got);
    let extra = absent(&got, &want);
    Some(format!(
        "{} objects answered, {} expected (missing ids {missing:?}, unexpected ids {extra:?}, \
         at most 5 of each)",
        got.len(),
        want.len()
    ))
}

/// The moving objects: the first `n` of a seeded shuffle of the `loaded`
/// live objects' positions.
fn choose_movers(rng: &mut ChaCha8Rng, loaded: usize, n: usize) -> Vec<usize> {
    let mut movers: Vec<usize> = (0..loaded).collect();
    for i in 0..n {
        let j = rng.gen_range(i..loaded);
        movers.swap(i, j);
    }
    movers.truncate(n);
    movers
}

impl Exec<'_> {
    /// One batch's `count` moves, planned before it is timed: each of a
    /// random one of `movers` by a random offset of at most `(ex, ey)`. An
    /// object may move twice in a batch, from where its previous move left
    /// it (the old rectangle is the oracle's; the index finds its own).
    /// The oracle (`live`) takes the new rectangles.
    fn plan_moves(
        &mut self,
        rng: &mut ChaCha8Rng,
        movers: &[usize],
        count: usize,
        (ex, ey): (f64, f64),
    ) -> Result<Vec<(u64, Rect, Rect)>> {
        let mut plan = Vec::with_capacity(count);
        for _ in 0..count {
            let i = movers[rng.gen_range(0..movers.len())];
            let (id, old) = self.live[i];
            let dx = (rng.gen::<f64>() * 2.0 - 1.0) * ex;
            let dy = (rng.gen::<f64>() * 2.0 - 1.0) * ey;
            let new = shifted(&old, dx, dy, &self.extent)?;
            self.live[i].1 = new;
            plan.push((id, old, new));
        }
        Ok(plan)
    }

    /// Every answer of windows `ws` after commit `commit` of `commits`
    /// against the current rectangles.
    fn check_answers(
        &self,
        ws: &[Rect],
        answers: Vec<Vec<u64>>,
        commit: usize,
        commits: usize,
    ) -> Result<()> {
        for (w, got) in ws.iter().zip(answers) {
            let want: Vec<u64> = self
                .live
                .iter()
                .filter(|(_, r)| w.intersects(r))
                .map(|(id, _)| *id)
                .collect();
            if let Some(d) = difference(got, want) {
                return Err(Error::corrupt(
                    None,
                    format!(
                        "move step: after commit {commit} of {commits}, window {w:?} is answered \
                         wrongly: {d}"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A move step (its parameters read from `step`): two rows.
    pub(super) fn moving(&mut self, index: &mut Target, step: &Step) -> Result<Vec<Row>> {
        let Step::Move {
            objects,
            moves_per_commit,
            commits,
            step: largest,
            queries_between,
            window,
            seed,
        } = step
        else {
            return Err(Error::invalid(format!(
                "move cannot run a {} step",
                step.kind()
            )));
        };
        let label = step.kind();
        // The parser's limit, again before the plans are allocated.
        crate::workload::step_operations(
            (*moves_per_commit as u64).saturating_mul(*commits as u64),
            "moves_per_commit × commits",
        )?;
        let loaded = self.live.len();
        let n = objects.unwrap_or(loaded);
        if n == 0 || n > loaded {
            return Err(Error::invalid(format!(
                "the move step moves {n} objects but the index holds {loaded}"
            )));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(*seed);
        let movers = choose_movers(&mut rng, loaded, n);
        let (ex, ey) = (
            self.extent.width() * largest,
            self.extent.height() * largest,
        );
        let bar = self.bar.clone();
        crate::progress::restart(&bar, (*moves_per_commit * *commits) as u64);
        let mut moves = Stats::new(label);
        let mut queries = Stats::new(label);
        let mut notes = String::new();
        let mut latencies = Vec::with_capacity(commits * queries_between);
        for c in 0..*commits {
            let plan = self.plan_moves(&mut rng, &movers, *moves_per_commit, (ex, ey))?;
            let (s, note) = measure_target(index, label, |t, s| {
                t.as_index_mut()
                    .batch(BatchDurability::Commit, |ix| {
                        let ids: Vec<u64> = plan.iter().map(|m| m.0).collect();
                        for (i, (id, _, new)) in plan.iter().enumerate() {
                            ix.warm_before_update(i, &ids);
                            ix.update_by_id(*id, *new)?;
                        }
                        Ok(())
                    })
                    .map_err(|e| {
                        Error::invalid(format!(
                            "move step: commit {} of {commits} failed: {e}",
                            c + 1
                        ))
                    })?;
                s.operations += plan.len() as u64;
                Ok(())
            })?;
            moves.merge(&s);
            notes = note;
            bar.inc(plan.len() as u64);
            if *queries_between == 0 {
                continue;
            }
            let ws = windows(
                self.extent,
                *window,
                1.0,
                *queries_between,
                Placement::Uniform,
                &[],
                seed.wrapping_add(1 + c as u64),
            )?;
            let mut answers = Vec::with_capacity(ws.len());
            let (s, _) = measure_target(index, label, |t, s| {
                for w in &ws {
                    let clock = Instant::now();
                    let r = t.index().query(*w, Predicate::Intersects)?;
                    latencies.push(u64::try_from(clock.elapsed().as_nanos()).unwrap_or(u64::MAX));
                    Answer::from(&r).add_to(s);
                    s.operations += 1;
                    answers.push(r.hits.iter().map(|h| h.id).collect::<Vec<u64>>());
                }
                Ok(())
            })?;
            queries.merge(&s);
            self.check_answers(&ws, answers, c + 1, *commits)?;
        }
        let param = format!("objects={n};moves_per_commit={moves_per_commit};commits={commits}");
        let mut rows = vec![Row {
            parameter: format!("{param};phase=moves"),
            status: "ok",
            message: notes,
            stats: moves,
            latency_median_ns: None,
        }];
        if *queries_between > 0 {
            rows.push(Row {
                parameter: format!("{param};phase=queries"),
                status: "ok",
                message: String::new(),
                stats: queries,
                latency_median_ns: median(latencies),
            });
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_shifts_and_differences() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![5, 1, 3]), Some(3));
        assert_eq!(median(vec![4, 1, 3, 2]), Some(2));
        // an even count: the mean of the two middle values, not the lower one
        assert_eq!(median(vec![10, 1, 4, 2]), Some(3));
        assert_eq!(median(vec![u64::MAX, u64::MAX - 2]), Some(u64::MAX - 1));
        let extent = Rect::new(0.0, 0.0, 10.0, 10.0).unwrap();
        let r = Rect::new(1.0, 1.0, 2.0, 3.0).unwrap();
        assert_eq!(
            shifted(&r, 0.5, -0.5, &extent).unwrap(),
            Rect::new(1.5, 0.5, 2.5, 2.5).unwrap()
        );
        // pulled back inside the extent, the same size
        assert_eq!(
            shifted(&r, -3.0, 8.0, &extent).unwrap(),
            Rect::new(0.0, 8.0, 1.0, 10.0).unwrap()
        );
        assert_eq!(difference(vec![3, 1, 2], vec![1, 2, 3]), None);
        let d = difference(vec![1, 4], vec![1, 2]).unwrap();
        assert!(
            d.contains("missing ids [2]") && d.contains("unexpected ids [4]"),
            "{d}"
        );
    }
}
