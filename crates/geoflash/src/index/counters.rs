//! [`TreeCounters`]: what the index algorithms count about their own work
//! (splits, reinsertions, merges, updates in place). The trees keep them, the index front end
//! adds them to its [`crate::metrics::Stats`]; stores never see them.
use serde::{Deserialize, Serialize};

/// Structural work of an index since it was created or opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeCounters {
    /// Node splits (an R-tree split, a Hilbert R-tree 1-to-2 or 2-to-3
    /// split, an xBR+-tree split; a root split counts once).
    pub splits: u64,
    /// Entries reinserted: R*-tree forced reinsertion and the orphans of
    /// CondenseTree (records, for the Hilbert R-tree).
    pub reinsertions: u64,
    /// Node merges: underfull nodes dissolved by CondenseTree, FOR-tree
    /// units merged back.
    pub merges: u64,
    /// Updates done in place, bottom-up: the record rewritten in its leaf,
    /// whose rectangle already contained the new one (R-tree and R*-tree;
    /// the other updates are a deletion and an insertion).
    #[serde(default)]
    pub updates_in_place: u64,
}

impl TreeCounters {
    /// `self` minus `before` (an earlier snapshot).
    pub fn since(&self, before: &TreeCounters) -> TreeCounters {
        TreeCounters {
            splits: self.splits.saturating_sub(before.splits),
            reinsertions: self.reinsertions.saturating_sub(before.reinsertions),
            merges: self.merges.saturating_sub(before.merges),
            updates_in_place: self
                .updates_in_place
                .saturating_sub(before.updates_in_place),
        }
    }
}

/// Here, beside the trees' counters, so that [`crate::metrics`] knows
/// nothing of the index layer.
impl crate::metrics::Stats {
    /// Adds an index's tree counters (splits, reinsertions, merges,
    /// updates in place).
    pub fn absorb_tree(&mut self, tree: &TreeCounters) {
        add_counters!(
            self,
            TreeCounters {
                splits,
                reinsertions,
                merges,
                updates_in_place,
            } = *tree
        );
    }
}
