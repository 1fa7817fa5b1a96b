//! The age order of the flush index: the buffered pages by `(tick, page)`,
//! split into the candidates (the oldest ones) and the rest.
//!
//! Every change of a buffered page gives it a tick newer than any before,
//! so a page's new key always goes to the back: the order is a queue of
//! keys in ascending order, where a key whose page has been changed again
//! (or has left the buffer) stays in place, *stale*, and is skipped. The
//! candidates are the active keys before a split position; moving the split
//! one active key at a time keeps their number what the flush index wants.
//! Stale keys are dropped once they outnumber the live ones (plus a
//! constant), so the queue holds at most about twice the buffered pages.
//!
//! Until this queue the order was two ordered sets of `(tick, page)`, the
//! candidates and the rest: each change of a buffered page removed its key
//! from one and inserted the new key into the other, and at 16,000,000
//! rectangles (a write buffer of 200,000 pages) the flush index took 9 % of
//! a build's time, most of it those sets' cache misses. The queue changes
//! one counter and appends one key.
use std::collections::VecDeque;

use crate::storage::PageId;

/// Stale keys held beyond the live ones before [`AgeOrder::compact`]
/// drops them (small under test, so that the tests drop them).
const SLACK: usize = if cfg!(test) { 4 } else { 1024 };

/// A page's key in the order: the tick of its last change, then its id.
pub type Key = (u64, PageId);

/// The age order (see the [module docs](self)). Which keys are live (their
/// page's current key) and active (live and not set aside) is the owner's
/// knowledge, passed in as predicates.
#[derive(Debug, Clone, Default)]
pub struct AgeOrder {
    /// Keys in ascending order, stale ones included.
    order: VecDeque<Key>,
    /// Keys before this position are on the candidates' side.
    split: usize,
    /// Active keys before `split`.
    candidates: usize,
    /// Active keys from `split` on.
    rest: usize,
}

impl AgeOrder {
    /// Number of candidates.
    pub fn candidates(&self) -> usize {
        self.candidates
    }

    /// Number of active keys.
    pub fn active(&self) -> usize {
        self.candidates + self.rest
    }

    /// Number of keys held, stale ones included.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.order.len()
    }

    /// Whether `key`, held in the order, is on the candidates' side.
    fn is_candidate(&self, key: Key) -> bool {
        self.split > 0 && self.order.get(self.split - 1).is_some_and(|&last| key <= last)
    }

    /// Adds `key` (a page's new key, active or set aside). Returns whether
    /// an active key joined the candidates. A key newer than every held
    /// one (every change of a page) is appended; an older one (a buffer
    /// indexed after the fact) is inserted in its place.
    /// A key already held (a page changed without a new tick) is held
    /// once.
    pub fn insert(&mut self, key: Key, active: bool) -> bool {
        let at = match self.order.back() {
            Some(&last) if key <= last => self.order.partition_point(|&k| k < key),
            _ => self.order.len(),
        };
        let candidate = at < self.split;
        if self.order.get(at) != Some(&key) {
            self.order.insert(at, key);
            if candidate {
                self.split += 1;
            }
        }
        if active {
            self.count(candidate, true);
        }
        active && candidate
    }

    /// Active `key` stops being active (its page changed, left the buffer
    /// or was set aside; the key stays, stale or set aside). Returns whether
    /// it was a candidate.
    pub fn leave(&mut self, key: Key) -> bool {
        let candidate = self.is_candidate(key);
        self.count(candidate, false);
        candidate
    }

    /// Held `key` becomes active again (taken back after being set aside).
    /// Returns whether it is a candidate.
    pub fn rejoin(&mut self, key: Key) -> bool {
        let candidate = self.is_candidate(key);
        self.count(candidate, true);
        candidate
    }

    fn count(&mut self, candidate: bool, up: bool) {
        let n = if candidate {
            &mut self.candidates
        } else {
            &mut self.rest
        };
        *n = if up { *n + 1 } else { n.saturating_sub(1) };
    }

    /// Moves the split until `want` active keys (at most all of them) are
    /// candidates, the oldest ones; `moved(page, joined)` is told of each
    /// page that joined (`true`) or left (`false`) the candidates.
    pub fn rebalance(
        &mut self,
        want: usize,
        active: impl Fn(Key) -> bool,
        mut moved: impl FnMut(PageId, bool),
    ) {
        let want = want.min(self.active());
        while self.candidates > want && self.split > 0 {
            self.split -= 1;
            let key = self.order[self.split];
            if active(key) {
                self.candidates -= 1;
                self.rest += 1;
                moved(key.1, false);
            }
        }
        while self.candidates < want && self.split < self.order.len() {
            let key = self.order[self.split];
            self.split += 1;
            if active(key) {
                self.candidates += 1;
                self.rest -= 1;
                moved(key.1, true);
            }
        }
    }

    /// The candidates, oldest first.
    pub fn iter_candidates<'a>(
        &'a self,
        active: impl Fn(Key) -> bool + 'a,
    ) -> impl Iterator<Item = Key> + 'a {
        self.order
            .range(..self.split)
            .copied()
            .filter(move |&k| active(k))
    }

    /// Drops the stale keys (those `live` refuses) once there are more of
    /// them than `live_keys`, the number of keys `live` accepts, plus a
    /// small constant: each drop takes time in the keys held, paid for by
    /// as many changes.
    pub fn compact(&mut self, live_keys: usize, live: impl Fn(Key) -> bool) {
        if self.order.len() <= 2 * live_keys + SLACK {
            return;
        }
        let mut kept = VecDeque::with_capacity(2 * live_keys + SLACK);
        let mut split = 0;
        for (i, &key) in self.order.iter().enumerate() {
            if live(key) {
                if i < self.split {
                    split += 1;
                }
                kept.push_back(key);
            }
        }
        self.order = kept;
        self.split = split;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[derive(Debug, Clone)]
    enum Op {
        /// Page changed (a new key), set aside or not.
        Touch(PageId),
        /// Page given a key older than every other (out of order).
        Backdate(PageId),
        /// Page changed without a new tick (its key again).
        Again(PageId),
        /// Page left.
        Forget(PageId),
        Exclude(PageId),
        IncludeAll,
        /// A new candidate count, in percent of the active pages.
        Want(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u64..40).prop_map(Op::Touch),
            1 => (0u64..40).prop_map(Op::Backdate),
            1 => (0u64..40).prop_map(Op::Again),
            2 => (0u64..40).prop_map(Op::Forget),
            1 => (0u64..40).prop_map(Op::Exclude),
            1 => Just(Op::IncludeAll),
            2 => (0u8..=100).prop_map(Op::Want),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// The candidates are always the oldest active pages, as many as
        /// wanted: what two ordered sets give.
        #[test]
        fn candidates_are_the_oldest_active_pages(ops in prop::collection::vec(op(), 1..400)) {
            let mut age = AgeOrder::default();
            let mut pages: BTreeMap<PageId, u64> = BTreeMap::new();
            let mut excluded: BTreeSet<PageId> = BTreeSet::new();
            let mut joined: BTreeSet<PageId> = BTreeSet::new();
            let mut tick = 1_000_000;
            let mut past = 1_000_000;
            let mut percent = 30usize;
            for op in ops {
                match op {
                    Op::Touch(id) | Op::Backdate(id) => {
                        let t = if matches!(op, Op::Touch(_)) {
                            tick += 1;
                            tick
                        } else {
                            past -= 1;
                            past
                        };
                        if let Some(&old) = pages.get(&id) {
                            if !excluded.contains(&id) && age.leave((old, id)) {
                                joined.remove(&id);
                            }
                        }
                        pages.insert(id, t);
                        if age.insert((t, id), !excluded.contains(&id)) {
                            joined.insert(id);
                        }
                    }
                    Op::Again(id) => {
                        if let Some(&t) = pages.get(&id) {
                            let active = !excluded.contains(&id);
                            if active && age.leave((t, id)) {
                                joined.remove(&id);
                            }
                            if age.insert((t, id), active) {
                                joined.insert(id);
                            }
                        }
                    }
                    Op::Forget(id) => {
                        if let Some(t) = pages.remove(&id) {
                            if !excluded.remove(&id) && age.leave((t, id)) {
                                joined.remove(&id);
                            }
                        }
                    }
                    Op::Exclude(id) => {
                        if let Some(&t) = pages.get(&id) {
                            if excluded.insert(id) && age.leave((t, id)) {
                                joined.remove(&id);
                            }
                        }
                    }
                    Op::IncludeAll => {
                        for id in std::mem::take(&mut excluded) {
                            if age.rejoin((pages[&id], id)) {
                                joined.insert(id);
                            }
                        }
                    }
                    Op::Want(p) => percent = usize::from(p),
                }
                let current = pages.clone();
                let active = |k: Key| current.get(&k.1) == Some(&k.0) && !excluded.contains(&k.1);
                let n = pages.len() - excluded.len();
                let want = (n * percent).div_ceil(100);
                age.rebalance(want, active, |id, into| {
                    if into {
                        joined.insert(id);
                    } else {
                        joined.remove(&id);
                    }
                });
                age.compact(pages.len(), |k| current.get(&k.1) == Some(&k.0));
                let mut oldest: Vec<Key> = pages
                    .iter()
                    .filter(|(id, _)| !excluded.contains(id))
                    .map(|(&id, &t)| (t, id))
                    .collect();
                oldest.sort_unstable();
                oldest.truncate(want);
                let got: Vec<Key> = age.iter_candidates(active).collect();
                prop_assert_eq!(&got, &oldest);
                prop_assert_eq!(age.candidates(), want);
                prop_assert_eq!(age.active(), n);
                let ids: BTreeSet<PageId> = oldest.iter().map(|k| k.1).collect();
                prop_assert_eq!(&joined, &ids, "the pages told to join and leave");
                prop_assert!(age.held() <= 2 * pages.len() + SLACK + 1);
            }
        }
    }
}
