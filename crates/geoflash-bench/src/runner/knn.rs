//! k-nearest-neighbour steps: seeded query points, one row per k.
use geoflash::geom::{Point, Rect};
use geoflash::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::exec::Exec;
use super::measure::{measure, ok_row, Row};
use crate::target::{Answer, Target};
use crate::windows::Placement;

/// `count` query points (seeded): uniform in `extent` or centres of
/// objects of `live`, the objects in the index at this step (the ones
/// earlier steps deleted, or that are not inserted yet, are not data to
/// query around; a moved object at its current rectangle).
fn knn_points(
    extent: &Rect,
    live: &[(u64, Rect)],
    count: usize,
    placement: Placement,
    seed: u64,
) -> Result<Vec<Point>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|_| match placement {
            Placement::Uniform => Point::new(
                extent.min_x() + rng.gen::<f64>() * extent.width(),
                extent.min_y() + rng.gen::<f64>() * extent.height(),
            ),
            Placement::OnData => {
                let i = rng.gen_range(0..live.len().max(1));
                let c = live.get(i).map(|(_, r)| r.center()).ok_or_else(|| {
                    Error::invalid("kNN points on data need objects in the index: it is empty")
                })?;
                Ok(c)
            }
        })
        .collect()
}

impl Exec<'_> {
    /// The `count` query points of a knn step placed by `placement`
    /// (seeded): uniform in the dataset's extent, or on the objects in the
    /// index now.
    pub(super) fn knn_points(
        &self,
        count: usize,
        placement: Placement,
        seed: u64,
    ) -> Result<Vec<Point>> {
        knn_points(&self.extent, &self.live, count, placement, seed)
    }

    /// A knn step labelled `label`: `count` points placed by `placement`
    /// (seeded), one row per value of `k`.
    pub(super) fn knn(
        &mut self,
        index: &mut Target,
        label: &str,
        k: &[usize],
        count: &usize,
        placement: &Placement,
        seed: &u64,
    ) -> Result<Vec<Row>> {
        let bar = self.bar.clone();
        let points = self.knn_points(*count, *placement, *seed)?;
        let mut rows = Vec::new();
        for &kk in k {
            crate::progress::restart(&bar, points.len() as u64);
            let s = measure(index, label, |ix, s| {
                for p in &points {
                    Answer::from(&ix.nearest(*p, kk, false)?).add_to(s);
                    s.operations += 1;
                    bar.inc(1);
                }
                Ok(())
            })?;
            rows.push(ok_row(format!("k={kk}"), s));
        }
        Ok(rows)
    }
}
