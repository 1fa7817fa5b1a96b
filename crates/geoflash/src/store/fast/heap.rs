//! Flushing units, the FlushHeap and the flushing policies (Section 7).
//!
//! **Units.** A flushing unit is a group of `flush_unit` consecutive page
//! ids: page `p` (≥ 1; page 0 is the header) belongs to unit
//! `(p − 1) / flush_unit`. The unit is thus fixed when the node is created,
//! as in FAST (the allocation policy, [`crate::store::alloc`], hands out
//! consecutive ids in creation order). A flush writes the unit's *buffered*
//! nodes; nodes of the unit without buffered changes are not rewritten (on
//! an FTL device nothing forces it; the paper's raw-flash copy of the rest of
//! the block is the simulator's business).
//!
//! **FlushHeap.** Every unit with at least one buffered update, ordered by
//! its number of buffered updates (ties: the lower unit). Insert, update and
//! removal cost O(log n); the maximum O(log n) (a `BTreeSet`, which also
//! gives deterministic ties).
//!
//! **Policies** ([`FastPolicy`]):
//! - `Fast`: the unit with the most buffered updates (the heap's maximum);
//! - `FastStar`: most updates *and* least recently updated. The paper leaves
//!   the combination open; here the score of a unit is
//!   `updates × (1 + age / (age + H))`, where `age` is the number of updates
//!   the whole table received since the unit's last update and `H` the
//!   number of updates currently buffered (a scale that grows with the
//!   buffer). The recency factor runs from 1 (just updated) to 2 (not
//!   updated for much longer than the buffer's content): a unit that is
//!   still being updated must hold up to twice the updates of a cold one to
//!   be chosen, so hot units stay in memory to absorb more updates while the
//!   number of updates per flush stays within a factor 2 of FAST's choice.
//!   Ties go to the lower unit;
//! - `FlushAll`: every buffered node (the paper's baseline);
//! - `Random`: a unit chosen uniformly among the units with buffered updates
//!   (the paper's Rand-Flush), from a seeded generator (deterministic runs).
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::storage::PageId;
use crate::{Error, Result};

/// Flushing policy of a `FastStore`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FastPolicy {
    /// The unit with the most buffered updates.
    Fast,
    /// Most updates and least recently updated (see the module documentation).
    #[default]
    FastStar,
    /// Everything buffered at once.
    FlushAll,
    /// A random unit with buffered updates.
    Random,
}

impl FastPolicy {
    /// Parses `fast`, `fast-star` (or `fast*`), `flush-all`, `random`.
    pub fn parse(s: &str) -> Result<FastPolicy> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fast" => Ok(FastPolicy::Fast),
            "fast-star" | "fast*" | "faststar" => Ok(FastPolicy::FastStar),
            "flush-all" => Ok(FastPolicy::FlushAll),
            "random" => Ok(FastPolicy::Random),
            _ => Err(Error::invalid(format!(
                "FAST flushing policy {s:?}: expected fast, fast-star, flush-all or random"
            ))),
        }
    }

    /// The name `parse` accepts.
    pub fn name(self) -> &'static str {
        match self {
            FastPolicy::Fast => "fast",
            FastPolicy::FastStar => "fast-star",
            FastPolicy::FlushAll => "flush-all",
            FastPolicy::Random => "random",
        }
    }
}

impl std::str::FromStr for FastPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        FastPolicy::parse(s)
    }
}

/// What the heap knows about one unit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitState {
    /// Buffered updates of the unit's nodes.
    pub updates: u64,
    /// Timestamp of the unit's last update.
    pub last_update: u64,
    /// The unit's buffered pages.
    pub pages: BTreeSet<PageId>,
}

/// The FlushHeap: units with buffered updates, by number of updates.
#[derive(Debug, Clone, Default)]
pub struct FlushHeap {
    unit_pages: u64,
    units: BTreeMap<u64, UnitState>,
    order: BTreeSet<(u64, std::cmp::Reverse<u64>)>,
    total: u64,
}

impl FlushHeap {
    /// An empty heap for units of `unit_pages` pages (at least 1).
    pub fn new(unit_pages: usize) -> Self {
        FlushHeap {
            unit_pages: (unit_pages as u64).max(1),
            ..Self::default()
        }
    }

    /// The unit of page `id`.
    pub fn unit_of(&self, id: PageId) -> u64 {
        id.saturating_sub(1) / self.unit_pages
    }

    /// Updates buffered in all units.
    #[cfg(test)]
    pub fn total_updates(&self) -> u64 {
        self.total
    }

    /// Whether no unit has buffered updates.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    /// Page `id`'s buffered updates went from `before` to `after` (0 = the
    /// page left the table) at time `ts` (`None`: not an update, e.g. a flush).
    pub fn touch(&mut self, id: PageId, before: u64, after: u64, ts: Option<u64>) {
        let u = self.unit_of(id);
        let st = self.units.entry(u).or_default();
        self.order.remove(&(st.updates, std::cmp::Reverse(u)));
        st.updates = st.updates.saturating_sub(before).saturating_add(after);
        self.total = self.total.saturating_sub(before).saturating_add(after);
        if let Some(ts) = ts {
            st.last_update = st.last_update.max(ts);
        }
        if after == 0 {
            st.pages.remove(&id);
        } else {
            st.pages.insert(id);
        }
        if st.pages.is_empty() {
            self.units.remove(&u);
        } else {
            self.order.insert((st.updates, std::cmp::Reverse(u)));
        }
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.units.clear();
        self.order.clear();
        self.total = 0;
    }

    /// The unit with the most buffered updates (FAST).
    pub fn max_unit(&self) -> Option<u64> {
        self.order.last().map(|(_, std::cmp::Reverse(u))| *u)
    }

    /// FAST*'s score of a unit at time `now` (see the module documentation).
    pub fn star_score(&self, st: &UnitState, now: u64) -> f64 {
        let age = now.saturating_sub(st.last_update) as f64;
        let h = self.total.max(1) as f64;
        st.updates as f64 * (1.0 + age / (age + h))
    }

    /// The buffered pages to flush under `policy` at time `now`; `rng` is
    /// advanced by the random policy. Empty when nothing is buffered.
    pub fn choose(&self, policy: FastPolicy, now: u64, rng: &mut u64) -> Vec<PageId> {
        let unit = match policy {
            FastPolicy::Fast => self.max_unit(),
            FastPolicy::FastStar => {
                let mut best: Option<(f64, u64)> = None;
                for (&u, st) in &self.units {
                    let s = self.star_score(st, now);
                    if best.is_none_or(|(b, _)| s > b) {
                        best = Some((s, u));
                    }
                }
                best.map(|(_, u)| u)
            }
            FastPolicy::FlushAll => {
                return self
                    .units
                    .values()
                    .flat_map(|s| s.pages.iter().copied())
                    .collect()
            }
            FastPolicy::Random => {
                if self.units.is_empty() {
                    None
                } else {
                    let i = (splitmix(rng) % self.units.len() as u64) as usize;
                    self.units.keys().nth(i).copied()
                }
            }
        };
        unit.and_then(|u| self.units.get(&u))
            .map(|s| s.pages.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// SplitMix64: the random policy's generator (deterministic from the seed).
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_consecutive_page_groups() {
        let h = FlushHeap::new(5);
        assert_eq!(
            (1..=11).map(|p| h.unit_of(p)).collect::<Vec<_>>(),
            vec![0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2]
        );
    }

    #[test]
    fn paper_example_fast_flushes_the_unit_with_most_updates() {
        // Fig. 4: B, C, D (pages 1-3) in unit B1 with one update each; G
        // (page 6) in unit B2 with one update. FAST flushes B1.
        let mut h = FlushHeap::new(5);
        for (p, ts) in [(3, 1), (6, 2), (1, 3), (2, 4)] {
            h.touch(p, 0, 1, Some(ts));
        }
        assert_eq!(h.max_unit(), Some(0));
        let mut rng = 1;
        assert_eq!(h.choose(FastPolicy::Fast, 4, &mut rng), vec![1, 2, 3]);
        assert_eq!(h.total_updates(), 4);
        // Flushing removes the unit.
        for p in [1, 2, 3] {
            h.touch(p, 1, 0, None);
        }
        assert_eq!(h.choose(FastPolicy::Fast, 4, &mut rng), vec![6]);
        assert_eq!(h.choose(FastPolicy::FlushAll, 4, &mut rng), vec![6]);
        h.touch(6, 1, 0, None);
        assert!(h.is_empty() && h.total_updates() == 0);
        assert!(h.choose(FastPolicy::FastStar, 9, &mut rng).is_empty());
        assert!(h.choose(FastPolicy::Random, 9, &mut rng).is_empty());
    }

    #[test]
    fn fast_star_keeps_a_hot_unit_with_fewer_than_twice_the_updates() {
        let mut h = FlushHeap::new(1);
        // Unit of page 1: 6 updates, the last at t = 100 (hot).
        h.touch(1, 0, 6, Some(100));
        // Unit of page 2: 4 updates, the last at t = 10 (cold).
        h.touch(2, 0, 4, Some(10));
        let mut rng = 0;
        assert_eq!(h.choose(FastPolicy::Fast, 100, &mut rng), vec![1]);
        // Score: 6 × 1 = 6 against 4 × (1 + 90/100) = 7.6.
        assert_eq!(h.choose(FastPolicy::FastStar, 100, &mut rng), vec![2]);
        // With more than twice the updates the hot unit goes first.
        h.touch(1, 6, 9, Some(100));
        assert_eq!(h.choose(FastPolicy::FastStar, 100, &mut rng), vec![1]);
    }

    #[test]
    fn random_is_seeded_and_covers_the_units() {
        let mut h = FlushHeap::new(1);
        for p in 1..=4 {
            h.touch(p, 0, 1, Some(p));
        }
        let pick = |seed: u64| {
            let mut rng = seed;
            (0..40)
                .map(|_| h.choose(FastPolicy::Random, 5, &mut rng)[0])
                .collect::<Vec<_>>()
        };
        assert_eq!(pick(3), pick(3));
        let seen: BTreeSet<PageId> = pick(3).into_iter().collect();
        assert_eq!(seen, (1..=4).collect());
    }

    #[test]
    fn policy_names_parse() {
        for p in [
            FastPolicy::Fast,
            FastPolicy::FastStar,
            FastPolicy::FlushAll,
            FastPolicy::Random,
        ] {
            assert_eq!(FastPolicy::parse(p.name()).unwrap(), p);
        }
        assert!(FastPolicy::parse("lru").is_err());
    }
}
