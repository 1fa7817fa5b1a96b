//! H-Grid's hot-region detection (Fevgas' thesis §4.3.2): which
//! sub-directories and buckets belong on the fast (3D XPoint) tier.
//!
//! Every access to a sub-directory `i` at time `T` (a global counter of
//! accesses) updates its access count and gives it the weight of Eq. 4.1,
//!
//! `W_i = F_i − (1 − t_i / T)`,
//!
//! where `F_i` is its access count normalised to `[0, 1]` (divided by the
//! largest count of any sub-directory) and `t_i` the time of its previous
//! access (0 before the first, so a first access weighs `F_i − 1`). A
//! bucket `j` of parent `i` weighs, by Eq. 4.2,
//!
//! `W_j = (W_i + F_j) − (1 − t_j / T)`,
//!
//! where `F_j` is the bucket's number of reads, not normalised (the thesis:
//! "the number of read requests F_j").
//!
//! Algorithm 9 (HybridBucketDetect) adds each weight to a cumulative moving
//! average `CA` (one for sub-directories, one for buckets); a page is **hot**
//! when `W > s · CA`, with `s` the selectivity constant (the thesis varied it
//! from 1.0 to 2.5), and a bucket only if its parent sub-directory is hot
//! too.
//!
//! **Deviation:** the weights are compared shifted by the aging term's
//! range — `W + 1` for sub-directories (`W ∈ [−1, 1]`), `W + 2` for buckets
//! (`W ≥ −2`) — so that they and their average are never negative.
//! Taken literally, the first access of every page weighs about −1, the
//! average turns negative, and `W > s · CA` then admits more pages as `s`
//! grows, the opposite of a selectivity constant; shifted, `s = 1` admits
//! the pages above the average and larger `s` fewer, as the thesis
//! describes. The average also counts the accesses to pages already
//! hot (Algorithm 9 runs only for pages outside the table): otherwise the
//! hottest pages leave the average as soon as they qualify, the bar sinks
//! to the weight of first accesses, and any page read twice qualifies. A hot page enters the hybrid table (HDT for sub-directories, HBT for
//! buckets: page → weight), whose weight is updated at each later access
//! (Algorithm 10); as in the thesis there is no cooling, so a hot page stays
//! hot (its future-work "cooling process" is not implemented). The **special
//! case** puts every sub-directory on the fast tier.
//!
//! The tables live in memory: a reopened H-Grid starts with empty tables
//! (its pages stay where the device has them until they are written again).
//! Page ids of freed pages keep their statistics until reused.
use std::collections::HashMap;

use crate::storage::PageId;
use crate::{Error, Result};

/// H-Grid's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HybridOptions {
    /// The selectivity constant s of Algorithm 9 (≥ 0; the thesis: 1.0–2.5).
    pub s: f64,
    /// The special case: every sub-directory on the fast tier.
    pub special: bool,
}

impl Default for HybridOptions {
    /// s = 1.5, not the special case.
    fn default() -> Self {
        HybridOptions {
            s: 1.5,
            special: false,
        }
    }
}

impl HybridOptions {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        if !(self.s.is_finite() && self.s >= 0.0) {
            return Err(Error::invalid(format!(
                "H-Grid selectivity constant s = {} must be a finite number >= 0",
                self.s
            )));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Access {
    count: u64,
    last: u64,
}

/// Access statistics, the moving average and the hybrid table of one page kind.
#[derive(Debug, Default)]
struct Table {
    /// Added to every weight before averaging and comparing (see the deviation).
    shift: f64,
    /// Normalise access counts to `[0, 1]` (sub-directories) or not (buckets).
    normalise: bool,
    stats: HashMap<u64, Access>,
    max_count: u64,
    sum: f64,
    n: u64,
    hybrid: HashMap<u64, f64>,
}

impl Table {
    /// Records an access at time `now` and returns `F − D` (Eq. 4.1's terms).
    fn touch(&mut self, id: u64, now: u64) -> f64 {
        let a = self.stats.entry(id).or_default();
        let prev = a.last;
        a.count += 1;
        a.last = now;
        let count = a.count;
        self.max_count = self.max_count.max(count);
        let f = if self.normalise {
            count as f64 / self.max_count.max(1) as f64
        } else {
            count as f64
        };
        let d = (now - prev.min(now)) as f64 / now.max(1) as f64;
        f - d
    }

    /// Algorithm 9 from line 4: accumulates `w`, and decides whether `id`
    /// becomes hot (`eligible` is the parent condition).
    fn detect(&mut self, id: u64, w: f64, s: f64, eligible: bool) -> bool {
        let w_shifted = w + self.shift;
        self.sum += w_shifted;
        self.n += 1;
        if let Some(old) = self.hybrid.get_mut(&id) {
            *old = w;
            return true;
        }
        if !eligible {
            return false;
        }
        let ca = self.sum / self.n as f64;
        if w_shifted > s * ca {
            self.hybrid.insert(id, w);
            return true;
        }
        false
    }
}

/// H-Grid's hot-region detector (see the module docs).
#[derive(Debug)]
pub struct HotRegions {
    opts: HybridOptions,
    now: u64,
    dirs: Table,
    buckets: Table,
}

impl HotRegions {
    /// A detector with empty tables.
    pub fn new(opts: HybridOptions) -> Result<Self> {
        opts.validate()?;
        Ok(HotRegions {
            opts,
            now: 0,
            dirs: Table {
                shift: 1.0,
                normalise: true,
                ..Table::default()
            },
            buckets: Table {
                shift: 2.0,
                ..Table::default()
            },
        })
    }

    /// An access to sub-directory `p`: its weight (Eq. 4.1) and whether it
    /// is hot (always in the special case).
    pub fn touch_dir(&mut self, p: PageId) -> (f64, bool) {
        self.now += 1;
        let w = self.dirs.touch(p, self.now);
        if self.opts.special {
            self.dirs.hybrid.insert(p, w);
            return (w, true);
        }
        let hot = self.dirs.detect(p, w, self.opts.s, true);
        (w, hot)
    }

    /// An access to bucket `b` whose parent weighs `w_parent` and is hot or
    /// not: whether the bucket is hot (Eq. 4.2, Algorithms 9–10).
    pub fn touch_bucket(&mut self, b: u64, w_parent: f64, parent_hot: bool) -> bool {
        self.now += 1;
        let w = w_parent + self.buckets.touch(b, self.now);
        self.buckets.detect(b, w, self.opts.s, parent_hot)
    }

    /// True if sub-directory `p` is in the HDT.
    #[cfg(test)]
    pub fn dir_is_hot(&self, p: PageId) -> bool {
        self.dirs.hybrid.contains_key(&p)
    }

    /// True if bucket `b` is in the HBT.
    #[cfg(test)]
    pub fn bucket_is_hot(&self, b: u64) -> bool {
        self.buckets.hybrid.contains_key(&b)
    }

    /// Sub-directories and buckets in the hybrid tables.
    pub fn hot_counts(&self) -> (usize, usize) {
        (self.dirs.hybrid.len(), self.buckets.hybrid.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequent_recent_pages_turn_hot_and_buckets_need_a_hot_parent() {
        let mut h = HotRegions::new(HybridOptions {
            s: 1.0,
            special: false,
        })
        .unwrap();
        // Sub-directory 1 is read over and over, 2..50 once each.
        let mut hot1 = false;
        for i in 0..200u64 {
            let (_, h1) = h.touch_dir(1);
            hot1 |= h1;
            h.touch_dir(2 + i % 49);
        }
        assert!(hot1 && h.dir_is_hot(1));
        // A bucket under a cold parent never turns hot; under a hot one a
        // frequently read bucket does.
        for _ in 0..50 {
            assert!(!h.touch_bucket(7, -1.0, false));
        }
        assert!(!h.bucket_is_hot(7));
        let mut hot = false;
        for _ in 0..50 {
            let (w, p) = h.touch_dir(1);
            hot |= h.touch_bucket(8, w, p);
            h.touch_bucket(100 + (h.now % 97), -0.5, false);
        }
        assert!(hot && h.bucket_is_hot(8));
        let (d, b) = h.hot_counts();
        assert!(d >= 1 && b >= 1 && d < 49, "{d} {b}");
        // The special case: every sub-directory is hot at once.
        let mut sp = HotRegions::new(HybridOptions {
            s: 2.0,
            special: true,
        })
        .unwrap();
        assert!(sp.touch_dir(42).1);
        assert!(HotRegions::new(HybridOptions {
            s: f64::NAN,
            special: false
        })
        .is_err());
    }
}
