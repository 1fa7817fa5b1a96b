//! Point-query steps: exact lookups of loaded objects in groups, one row
//! per group size.
use geoflash::geom::{Point, Rect};
use geoflash::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::exec::Exec;
use super::measure::{measure, ok_row, Row};
use crate::target::{Answer, Target};

/// `count` loaded objects' centres drawn at random (seeded), for exact point lookups.
fn live_points(live: &[(u64, Rect)], count: usize, seed: u64) -> Result<Vec<Point>> {
    if live.is_empty() {
        return Err(Error::invalid(
            "point lookups need loaded objects: the index is empty",
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Ok((0..count)
        .filter_map(|_| live.get(rng.gen_range(0..live.len())))
        .map(|(_, r)| r.center())
        .collect())
}

impl Exec<'_> {
    /// A point_queries step labelled `label`: `count` loaded objects'
    /// centres (seeded) looked up in groups, one row per size in `group`.
    pub(super) fn point_queries(
        &mut self,
        index: &mut Target,
        label: &str,
        group: &[usize],
        count: &usize,
        seed: &u64,
    ) -> Result<Vec<Row>> {
        let bar = self.bar.clone();
        let points = live_points(&self.live, *count, *seed)?;
        let mut rows = Vec::new();
        for &g in group {
            crate::progress::restart(&bar, points.len() as u64);
            let s = measure(index, label, |ix, s| {
                for chunk in points.chunks(g.max(1)) {
                    Answer::from(&ix.point_group(chunk)?).add_to(s);
                    s.operations += chunk.len() as u64;
                    bar.inc(chunk.len() as u64);
                }
                Ok(())
            })?;
            rows.push(ok_row(format!("group={g}"), s));
        }
        Ok(rows)
    }
}
