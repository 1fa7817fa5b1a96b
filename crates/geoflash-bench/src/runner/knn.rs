//! k-nearest-neighbour steps: seeded query points, one row per k.
use geoflash::geom::{Point, Rect};
use geoflash::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::exec::Exec;
use super::measure::{measure, ok_row, Row};
use crate::target::{Answer, Target};
use crate::windows::Placement;

/// `count` query points (seeded): uniform in `extent` or centres of objects of `data`.
fn knn_points(
    extent: &Rect,
    data: &[(u64, Rect)],
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
                let i = rng.gen_range(0..data.len().max(1));
                let c = data
                    .get(i)
                    .map(|(_, r)| r.center())
                    .ok_or_else(|| Error::invalid("kNN points on data need a non-empty dataset"))?;
                Ok(c)
            }
        })
        .collect()
}

impl Exec<'_> {
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
        let points = knn_points(&self.extent, self.data, *count, *placement, *seed)?;
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
