//! Delete steps: a seeded random share of the loaded objects deleted,
//! ending with a checkpoint.
use geoflash::geom::Rect;
use geoflash::Result;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::exec::Exec;
use super::measure::{measure, ok_row, Row};
use crate::target::Target;

impl Exec<'_> {
    /// A delete step labelled `label`: a share `fraction` of the loaded
    /// objects deleted in random (seeded) order, then a checkpoint; one row.
    pub(super) fn delete(
        &mut self,
        index: &mut Target,
        label: &str,
        fraction: &f64,
        seed: &u64,
    ) -> Result<Vec<Row>> {
        let bar = self.bar.clone();
        let n = ((self.live.len() as f64) * fraction).round() as usize;
        let mut rng = ChaCha8Rng::seed_from_u64(*seed);
        // choose n live objects at random
        for i in 0..n.min(self.live.len()) {
            let j = rng.gen_range(i..self.live.len());
            self.live.swap(i, j);
        }
        let victims: Vec<(u64, Rect)> = self.live.drain(..n.min(self.live.len())).collect();
        crate::progress::restart(&bar, victims.len() as u64);
        let s = measure(index, label, |ix, s| {
            for (id, r) in &victims {
                ix.delete(*id, *r)?;
                s.operations += 1;
                bar.inc(1);
            }
            ix.checkpoint()
        })?;
        Ok(vec![ok_row(format!("fraction={fraction}"), s)])
    }
}
