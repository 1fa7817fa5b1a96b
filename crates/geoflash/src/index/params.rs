//! Tree parameters: one typed value, checked once by [`TreeParams::verify`].
//!
//! The value is serde-serialisable so a store or a manifest can keep it.
use serde::{Deserialize, Serialize};

use crate::geom::HilbertDomain;
use crate::{Error, Result};

/// Which member of the R-tree family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexKind {
    /// Guttman's R-tree with the split of [`TreeParams::split`].
    RTree,
    /// Beckmann et al.'s R*-tree (its own ChooseSubtree, split and forced reinsertion).
    RStar,
    /// Kamel and Faloutsos' Hilbert R-tree.
    Hilbert,
}

/// The node split of Guttman's R-tree (ignored by the R*-tree, which has its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SplitKind {
    /// Linear-cost split (PickSeeds by normalised separation).
    Linear,
    /// Quadratic-cost split (PickSeeds by wasted area, PickNext by preference).
    Quadratic,
    /// Exhaustive split minimising the total area (only for small M).
    Exponential,
}

/// Largest M the exponential split accepts (it examines 2^M partitions).
pub const MAX_EXPONENTIAL_M: usize = 20;

/// Default forced-reinsertion percentage of the R*-tree (the paper's 30%).
pub const DEFAULT_REINSERT_PERCENT: u8 = 30;

/// Parameters of one tree.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TreeParams {
    /// Which tree.
    pub kind: IndexKind,
    /// Split algorithm of the R-tree (the R*-tree always uses the R* split).
    pub split: SplitKind,
    /// Maximum entries per node, M.
    pub max_entries: usize,
    /// Minimum entries per node except the root, m (2 ≤ m ≤ ⌈M/2⌉).
    pub min_entries: usize,
    /// R*-tree: percentage of M removed and reinserted on the first overflow
    /// of a level during one insertion (0 disables forced reinsertion).
    pub reinsert_percent: u8,
    /// Hilbert R-tree: the domain mapped onto the Hilbert curve (fixed at creation).
    pub hilbert_domain: Option<HilbertDomain>,
}

impl TreeParams {
    /// Parameters for `kind` with M = `max_entries` and the seeds' default
    /// m = ⌈M/2⌉ (Table III), quadratic split, 30% reinsertion. Not yet verified.
    pub fn new(kind: IndexKind, max_entries: usize) -> Self {
        TreeParams {
            kind,
            split: SplitKind::Quadratic,
            max_entries,
            min_entries: max_entries.div_ceil(2),
            reinsert_percent: DEFAULT_REINSERT_PERCENT,
            hilbert_domain: None,
        }
    }

    /// Parameters for a page that holds `capacity` entries (from the page
    /// codec): M = capacity, m = ⌈M/2⌉, verified. A page too small for a node
    /// of m ≥ 2 (capacity < 3) is an error that says so.
    pub fn for_capacity(kind: IndexKind, capacity: usize) -> Result<Self> {
        if capacity < 3 {
            return Err(Error::invalid(format!(
                "the page holds only {capacity} entries: a tree node needs at least 3 (M ≥ 3 so that m ≥ 2); use a larger page size"
            )));
        }
        let p = TreeParams::new(kind, capacity);
        p.verify()?;
        Ok(p)
    }

    /// Parameters for pages of `page_size` bytes: M from the page codec
    /// ([`crate::page::max_entries`]; entries carry a payload in the Hilbert
    /// R-tree), m = ⌈M/2⌉, verified.
    pub fn for_page(kind: IndexKind, page_size: usize) -> Result<Self> {
        let capacity = crate::page::max_entries(page_size, kind == IndexKind::Hilbert);
        TreeParams::for_capacity(kind, capacity).map_err(|e| match e {
            Error::InvalidInput(msg) => Error::invalid(format!("page size {page_size} B: {msg}")),
            other => other,
        })
    }

    /// This value with split `split`.
    pub fn with_split(mut self, split: SplitKind) -> Self {
        self.split = split;
        self
    }

    /// This value with minimum fill `m`.
    pub fn with_min_entries(mut self, m: usize) -> Self {
        self.min_entries = m;
        self
    }

    /// This value with a forced-reinsertion percentage.
    pub fn with_reinsert_percent(mut self, p: u8) -> Self {
        self.reinsert_percent = p;
        self
    }

    /// This value with a Hilbert domain.
    pub fn with_hilbert_domain(mut self, domain: HilbertDomain) -> Self {
        self.hilbert_domain = Some(domain);
        self
    }

    /// Number of entries the R*-tree removes on a forced reinsertion (0 when disabled).
    pub fn reinsert_count(&self) -> usize {
        if self.kind != IndexKind::RStar || self.reinsert_percent == 0 {
            return 0;
        }
        let p = (self.max_entries * usize::from(self.reinsert_percent) + 50) / 100;
        p.max(1)
    }

    /// Checks every constraint once; the error names the offending parameter.
    pub fn verify(&self) -> Result<()> {
        let (m, big_m) = (self.min_entries, self.max_entries);
        if big_m < 3 {
            return Err(Error::invalid(format!(
                "max entries M = {big_m} is too small: a node needs M ≥ 3 (so that m ≥ 2); the page is too small"
            )));
        }
        if m < 2 {
            return Err(Error::invalid(format!(
                "min entries m = {m} is too small: m must be at least 2"
            )));
        }
        if 2 * m > big_m + 1 {
            return Err(Error::invalid(format!(
                "min entries m = {m} is too large for M = {big_m}: m must be at most ⌈M/2⌉ = {}",
                big_m.div_ceil(2)
            )));
        }
        if self.kind == IndexKind::RTree
            && self.split == SplitKind::Exponential
            && big_m > MAX_EXPONENTIAL_M
        {
            return Err(Error::invalid(format!(
                "the exponential split examines 2^M partitions and is refused for M = {big_m} > {MAX_EXPONENTIAL_M}; use linear or quadratic, or --max-entries ≤ {MAX_EXPONENTIAL_M}"
            )));
        }
        if self.reinsert_percent > 100 {
            return Err(Error::invalid(format!(
                "reinsert percentage {} is above 100",
                self.reinsert_percent
            )));
        }
        let p = self.reinsert_count();
        if p > big_m + 1 - m {
            return Err(Error::invalid(format!(
                "reinsert percentage {}% removes {p} of {} entries and would leave fewer than m = {m}",
                self.reinsert_percent,
                big_m + 1
            )));
        }
        if self.kind == IndexKind::Hilbert {
            match self.hilbert_domain {
                None => return Err(Error::invalid(
                    "a Hilbert R-tree needs a Hilbert domain (the extent mapped onto the curve)",
                )),
                Some(d) if !(d.extent().width() > 0.0 && d.extent().height() > 0.0) => {
                    return Err(Error::invalid(format!(
                        "the Hilbert domain {:?} has zero width or height",
                        d.extent()
                    )))
                }
                Some(d) if d.order() > 16 => {
                    return Err(Error::invalid(format!(
                        "the Hilbert R-tree needs a domain of order at most 16 (got {}): record values keep the low 32 bits for the object id",
                        d.order()
                    )))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for IndexKind {
    type Err = Error;
    /// `rtree`, `rstar` or `hilbert` (the command line's names).
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "rtree" => Ok(IndexKind::RTree),
            "rstar" => Ok(IndexKind::RStar),
            "hilbert" => Ok(IndexKind::Hilbert),
            _ => Err(Error::invalid(format!(
                "unknown index kind {s:?}: use rtree, rstar or hilbert"
            ))),
        }
    }
}

impl std::str::FromStr for SplitKind {
    type Err = Error;
    /// `linear`, `quadratic` or `exponential`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "linear" => Ok(SplitKind::Linear),
            "quadratic" => Ok(SplitKind::Quadratic),
            "exponential" => Ok(SplitKind::Exponential),
            _ => Err(Error::invalid(format!(
                "unknown split {s:?}: use linear, quadratic or exponential"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_table_iii() {
        let p = TreeParams::for_capacity(IndexKind::RStar, 113).unwrap();
        assert_eq!((p.min_entries, p.max_entries), (57, 113));
        let p = TreeParams::for_capacity(IndexKind::RTree, 56).unwrap();
        assert_eq!(p.min_entries, 28);
        assert_eq!(TreeParams::new(IndexKind::RStar, 10).reinsert_count(), 3);
        assert_eq!(TreeParams::new(IndexKind::RTree, 10).reinsert_count(), 0);
    }

    #[test]
    fn page_sizes_give_the_codec_capacities() {
        let p = TreeParams::for_page(IndexKind::RStar, 4096).unwrap();
        assert_eq!(p.max_entries, crate::page::max_entries(4096, false));
        assert_eq!(p.min_entries, p.max_entries.div_ceil(2));
        let err = TreeParams::for_page(IndexKind::RTree, 64)
            .unwrap_err()
            .to_string();
        assert!(err.contains("page size 64"), "{err}");
    }

    #[test]
    fn bad_parameters_are_refused_with_clear_errors() {
        let err = |p: TreeParams| p.verify().unwrap_err().to_string();
        assert!(TreeParams::for_capacity(IndexKind::RTree, 2)
            .unwrap_err()
            .to_string()
            .contains("page"));
        assert!(
            err(TreeParams::new(IndexKind::RTree, 8).with_min_entries(1)).contains("at least 2")
        );
        assert!(err(TreeParams::new(IndexKind::RTree, 8).with_min_entries(5)).contains("at most"));
        assert!(TreeParams::new(IndexKind::RTree, 9)
            .with_min_entries(5)
            .verify()
            .is_ok());
        assert!(
            err(TreeParams::new(IndexKind::RTree, 21).with_split(SplitKind::Exponential))
                .contains("exponential")
        );
        assert!(TreeParams::new(IndexKind::RTree, 20)
            .with_split(SplitKind::Exponential)
            .verify()
            .is_ok());
        assert!(
            err(TreeParams::new(IndexKind::RStar, 10).with_reinsert_percent(90))
                .contains("fewer than m")
        );
        assert!(err(TreeParams::new(IndexKind::Hilbert, 10)).contains("domain"));
    }

    #[test]
    fn params_round_trip_through_json() {
        let p = TreeParams::new(IndexKind::RStar, 12).with_split(SplitKind::Linear);
        let s = serde_json::to_string(&p).unwrap();
        let q: TreeParams = serde_json::from_str(&s).unwrap();
        assert_eq!(p, q);
    }
}
