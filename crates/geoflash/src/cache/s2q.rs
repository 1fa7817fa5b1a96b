//! Simplified 2Q (Johnson & Shasha, "2Q: A Low Overhead High Performance
//! Buffer Management Replacement Algorithm", VLDB 1994, section 2.1).
//!
//! Two resident queues: `A1`, a FIFO of pages used once since they entered,
//! and `Am`, an LRU of pages used again while in `A1` or `Am`.
//! - hit in `Am`: move to the front of `Am`;
//! - hit in `A1`: move to the front of `Am` (the page proved it is hot);
//! - miss: the page enters at the front of `A1`;
//! - victim: the back of `A1` when `A1` holds more than its threshold (by
//!   default 25% of the budget, in bytes), else the back of `Am` (or `A1`
//!   when `Am` is empty).
//!
//! A sequential scan only passes through `A1` and cannot flush `Am`.
use super::{fraction_of, EntryMeta, IdMap, LinkedSet, ReplacementPolicy};
use crate::storage::PageId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queue {
    A1,
    Am,
}

/// Simplified 2Q; see the module documentation.
#[derive(Debug, Clone)]
pub struct S2q {
    a1: LinkedSet,
    am: LinkedSet,
    where_: IdMap<(Queue, usize)>,
    a1_bytes: usize,
    threshold: usize,
}

impl S2q {
    /// Default share of the budget for `A1`.
    pub const DEFAULT_A1_FRACTION: f64 = 0.25;

    /// Simplified 2Q for a cache of `budget` bytes with the default `A1` threshold (25%).
    pub fn new(budget: usize) -> Self {
        Self::with_threshold(fraction_of(budget, Self::DEFAULT_A1_FRACTION))
    }

    /// Simplified 2Q whose `A1` queue may hold `a1_bytes` before it gives up victims first.
    pub fn with_threshold(a1_bytes: usize) -> Self {
        S2q {
            a1: LinkedSet::new(),
            am: LinkedSet::new(),
            where_: IdMap::default(),
            a1_bytes: 0,
            threshold: a1_bytes,
        }
    }

    fn forget(&mut self, id: PageId) -> Option<Queue> {
        let (q, size) = self.where_.remove(&id)?;
        match q {
            Queue::A1 => {
                self.a1.remove(id);
                self.a1_bytes -= size;
            }
            Queue::Am => {
                self.am.remove(id);
            }
        }
        Some(q)
    }

    #[cfg(test)]
    fn queues(&self) -> (Vec<PageId>, Vec<PageId>) {
        (self.a1.to_vec(), self.am.to_vec())
    }
}

impl ReplacementPolicy for S2q {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        "s2q"
    }

    fn insert(&mut self, id: PageId, meta: EntryMeta) {
        if self.where_.contains_key(&id) {
            self.access(id, meta);
            return;
        }
        self.a1.push_front(id);
        self.a1_bytes += meta.size;
        self.where_.insert(id, (Queue::A1, meta.size));
    }

    fn access(&mut self, id: PageId, meta: EntryMeta) {
        // One map lookup (a hit is the common case of a read-mostly cache).
        let Some(slot) = self.where_.get_mut(&id) else {
            return;
        };
        let (queue, size) = *slot;
        *slot = (Queue::Am, meta.size);
        if queue == Queue::A1 {
            self.a1.remove(id);
            self.a1_bytes -= size;
        }
        self.am.push_front(id);
    }

    fn remove(&mut self, id: PageId) -> bool {
        self.forget(id).is_some()
    }

    fn pop_victim(&mut self) -> Option<PageId> {
        let id = if self.a1_bytes > self.threshold || self.am.is_empty() {
            self.a1.back_or(&self.am)
        } else {
            self.am.back_or(&self.a1)
        }?;
        self.forget(id);
        Some(id)
    }

    #[cfg(test)]
    fn contains(&self, id: PageId) -> bool {
        self.where_.contains_key(&id)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.where_.len()
    }
}

impl LinkedSet {
    /// The back of `self`, else the back of `other`.
    pub(crate) fn back_or(&self, other: &LinkedSet) -> Option<PageId> {
        self.tail.or(other.tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::meta;
    use crate::cache::{Cache, Lru};

    #[test]
    fn reference_behaviour() {
        // A1 threshold of 2 pages of size 1.
        let mut p = S2q::with_threshold(2);
        for i in 1..=3 {
            p.insert(i, meta(1));
        }
        assert_eq!(p.queues(), (vec![3, 2, 1], vec![]));
        // Second use moves a page from A1 to Am.
        p.access(2, meta(1));
        assert_eq!(p.queues(), (vec![3, 1], vec![2]));
        // A1 holds 2 pages: not above the threshold, so Am gives the victim.
        assert_eq!(p.pop_victim(), Some(2));
        p.insert(4, meta(1));
        p.access(4, meta(1));
        p.insert(5, meta(1));
        // A1 = [5, 3, 1] is above the threshold: its oldest page goes (FIFO).
        assert_eq!(p.pop_victim(), Some(1));
        // A hit in A1 does not reorder A1 but promotes.
        p.access(3, meta(1));
        assert_eq!(p.queues(), (vec![5], vec![3, 4]));
        assert!(p.remove(4));
        assert_eq!(p.len(), 2);
    }

    /// A sequential scan flushes an LRU cache's hot pages but not 2Q's.
    #[test]
    fn resists_a_scan() {
        fn hot_survivors(mut c: Cache<()>) -> usize {
            // Pages 0..4 are hot: used twice.
            for _ in 0..2 {
                for id in 0..4 {
                    if c.get(id).is_none() {
                        c.insert(id, (), meta(1));
                    }
                }
            }
            // Scan of 100 pages used once.
            for id in 100..200 {
                if c.get(id).is_none() {
                    c.insert(id, (), meta(1));
                }
            }
            (0..4).filter(|&id| c.contains(id)).count()
        }
        assert_eq!(
            hot_survivors(Cache::with_policy(Box::new(Lru::new()), 8)),
            0
        );
        assert_eq!(
            hot_survivors(Cache::with_policy(Box::new(S2q::new(8)), 8)),
            4
        );
    }
}
