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
//!   when `Am` is empty). As the paper's `reclaimfor`, which runs before
//!   the missed page enters `A1`, the victims chosen right after a miss
//!   neither count that page in `A1` nor choose it while another page is
//!   resident.
//!
//! A sequential scan only passes through `A1` and cannot flush `Am`.
use super::{fraction_of, EntryMeta, IdMap, LinkedSet, ReplacementPolicy};
use crate::storage::PageId;

/// The resident queue of a page in either 2Q.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Queue {
    /// `A1` (simplified 2Q) or `A1in` (full 2Q): a FIFO of pages seen once.
    A1,
    /// `Am`: an LRU of pages used again.
    Am,
}

/// The two resident queues both 2Q variants keep, with each resident
/// page's queue and size and the bytes `A1` holds; full 2Q adds its ghost
/// queue beside them.
#[derive(Debug, Clone, Default)]
pub(super) struct Queues {
    a1: LinkedSet,
    am: LinkedSet,
    where_: IdMap<(Queue, usize)>,
    a1_bytes: usize,
    /// The page the last miss put at the front of its queue, until the
    /// next access or removal: the victims chosen for it ignore it.
    incoming: Option<PageId>,
}

impl Queues {
    /// Whether `id` is resident.
    pub(super) fn holds(&self, id: PageId) -> bool {
        self.where_.contains_key(&id)
    }

    /// Puts the missed page of `size` bytes at the front of `queue`.
    pub(super) fn push(&mut self, id: PageId, queue: Queue, size: usize) {
        self.incoming = Some(id);
        match queue {
            Queue::A1 => {
                self.a1.push_front(id);
                self.a1_bytes += size;
            }
            Queue::Am => self.am.push_front(id),
        }
        self.where_.insert(id, (queue, size));
    }

    /// A hit on `id`, now of `size` bytes: a page of `Am` moves to its
    /// front; a page of `A1` moves to the front of `Am` when `promote`,
    /// else stays where it is. Returns whether `id` was resident.
    pub(super) fn hit(&mut self, id: PageId, size: usize, promote: bool) -> bool {
        self.incoming = None;
        // One map lookup (a hit is the common case of a read-mostly cache).
        let Some(slot) = self.where_.get_mut(&id) else {
            return false;
        };
        let (queue, old) = *slot;
        if queue == Queue::A1 && !promote {
            *slot = (Queue::A1, size);
            self.a1_bytes = self.a1_bytes - old + size;
            return true;
        }
        *slot = (Queue::Am, size);
        if queue == Queue::A1 {
            self.a1.remove(id);
            self.a1_bytes -= old;
        }
        self.am.push_front(id);
        true
    }

    /// Removes a resident page; returns its queue and size.
    pub(super) fn forget(&mut self, id: PageId) -> Option<(Queue, usize)> {
        self.incoming = None;
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
        Some((q, size))
    }

    /// Chooses and forgets the victim: the back of `A1` when it holds more
    /// than `a1_limit` bytes (or `Am` is empty), else the back of `Am`.
    /// Returns it with the queue it left and its size.
    ///
    /// Right after a miss this is the paper's `reclaimfor`, which runs
    /// before the missed page enters its queue: that page, at the front of
    /// its queue, neither counts in `A1` nor is chosen while another page
    /// is resident (counted, a page larger than the threshold was its own
    /// victim whenever `A1` was otherwise empty).
    pub(super) fn pop_victim(&mut self, a1_limit: usize) -> Option<(PageId, Queue, usize)> {
        let incoming = self
            .incoming
            .and_then(|id| self.where_.get(&id).map(|&(q, size)| (id, q, size)));
        let a1_bytes = match incoming {
            Some((_, Queue::A1, size)) => self.a1_bytes - size,
            _ => self.a1_bytes,
        };
        // The back of a queue other than the incoming page (which is at
        // its front, so the back only when it is alone there).
        let x = incoming.map(|(id, _, _)| id);
        let other = |list: &LinkedSet| list.tail.filter(|&t| Some(t) != x);
        let id = match (other(&self.a1), other(&self.am)) {
            (Some(a1), Some(am)) => {
                if a1_bytes > a1_limit {
                    a1
                } else {
                    am
                }
            }
            (Some(a1), None) => a1,
            (None, Some(am)) => am,
            (None, None) => x?,
        };
        let (q, size) = self.forget(id)?;
        // Unless it left, the incoming page is still the one the next
        // victims make room for.
        self.incoming = x.filter(|&x| x != id);
        Some((id, q, size))
    }

    #[cfg(test)]
    pub(super) fn resident(&self) -> Vec<PageId> {
        self.where_.keys().copied().collect()
    }

    /// `A1` and `Am`, front to back.
    #[cfg(test)]
    pub(super) fn lists(&self) -> (Vec<PageId>, Vec<PageId>) {
        (self.a1.to_vec(), self.am.to_vec())
    }
}

/// Simplified 2Q; see the module documentation.
#[derive(Debug, Clone)]
pub struct S2q {
    queues: Queues,
    threshold: usize,
    /// The threshold's share of the budget, when given as one.
    fraction: Option<f64>,
}

impl S2q {
    /// Default share of the budget for `A1`.
    pub const DEFAULT_A1_FRACTION: f64 = 0.25;

    /// Simplified 2Q for a cache of `budget` bytes with the default `A1` threshold (25%).
    pub fn new(budget: usize) -> Self {
        S2q {
            fraction: Some(Self::DEFAULT_A1_FRACTION),
            ..Self::with_threshold(fraction_of(budget, Self::DEFAULT_A1_FRACTION))
        }
    }

    /// Simplified 2Q whose `A1` queue may hold `a1_bytes` before it gives
    /// up victims first (whatever the budget).
    pub fn with_threshold(a1_bytes: usize) -> Self {
        S2q {
            queues: Queues::default(),
            threshold: a1_bytes,
            fraction: None,
        }
    }

    #[cfg(test)]
    fn queues(&self) -> (Vec<PageId>, Vec<PageId>) {
        self.queues.lists()
    }
}

impl ReplacementPolicy for S2q {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        "s2q"
    }

    fn insert(&mut self, id: PageId, meta: EntryMeta) {
        if !self.queues.hit(id, meta.size, true) {
            self.queues.push(id, Queue::A1, meta.size);
        }
    }

    fn access(&mut self, id: PageId, meta: EntryMeta) {
        self.queues.hit(id, meta.size, true);
    }

    fn remove(&mut self, id: PageId) -> bool {
        self.queues.forget(id).is_some()
    }

    fn pop_victim(&mut self) -> Option<PageId> {
        self.queues.pop_victim(self.threshold).map(|(id, _, _)| id)
    }

    fn set_capacity(&mut self, budget: usize) {
        if let Some(f) = self.fraction {
            self.threshold = fraction_of(budget, f);
        }
    }

    #[cfg(test)]
    fn resident(&self) -> Vec<PageId> {
        self.queues.resident()
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
        // Right after 5's miss, A1 holds 2 pages besides 5 (J&S's
        // reclaimfor runs before 5 enters): Am gives the victim.
        assert_eq!(p.queues(), (vec![5, 3, 1], vec![4]));
        assert_eq!(p.pop_victim(), Some(4));
        p.insert(6, meta(1));
        // A1 = [6, 5, 3, 1] holds 3 pages besides 6, above the threshold:
        // its oldest page goes (FIFO).
        assert_eq!(p.pop_victim(), Some(1));
        // A hit in A1 does not reorder A1 but promotes.
        p.access(3, meta(1));
        assert_eq!(p.queues(), (vec![6, 5], vec![3]));
        assert!(p.remove(5));
        assert_eq!(p.len(), 2);
        // A1 = [6] is not above the threshold: Am's back.
        assert_eq!(p.pop_victim(), Some(3));
        p.insert(7, meta(1));
        // Not the page just missed while another is resident; then it.
        assert_eq!(p.pop_victim(), Some(6));
        assert_eq!(p.pop_victim(), Some(7));
        assert_eq!(p.pop_victim(), None);
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
