//! Full 2Q (Johnson & Shasha, VLDB 1994, section 2.2).
//!
//! Three queues: `A1in`, a resident FIFO of pages seen once; `A1out`, a
//! *ghost* FIFO of the ids of pages evicted from `A1in` (no values); `Am`, a
//! resident LRU of pages referenced again after leaving `A1in`.
//! - hit in `Am`: move to the front of `Am`;
//! - hit in `A1in`: nothing (correlated references do not promote);
//! - miss on a page remembered in `A1out`: it enters `Am`;
//! - other miss: it enters `A1in`;
//! - victim: when `A1in` holds more than `Kin` bytes (or `Am` is empty) the
//!   back of `A1in`, whose id moves to the front of `A1out` (trimmed to
//!   `Kout` bytes of the pages it remembers); otherwise the back of `Am`.
//!   As the paper's `reclaimfor`, which runs before the missed page enters
//!   `A1in` or `Am`, the victims chosen right after a miss neither count
//!   that page in `A1in` nor choose it while another page is resident.
//!
//! Sizes are in bytes of the budget, the paper's page counts scaled by the
//! page sizes: defaults `Kin` = 25% and `Kout` = 50% of the budget, as the
//! paper recommends (shares of the budget follow
//! [`set_capacity`](ReplacementPolicy::set_capacity)). A ghost counts at
//! least one byte, so that `A1out` stays bounded by `Kout` ids whatever
//! the sizes.
use super::s2q::{Queue, Queues};
use super::{fraction_of, EntryMeta, IdMap, LinkedSet, ReplacementPolicy};
use crate::storage::PageId;

/// Full 2Q; see the module documentation.
#[derive(Debug, Clone)]
pub struct TwoQ {
    /// `A1in` (as [`Queue::A1`]) and `Am`.
    queues: Queues,
    a1out: LinkedSet,
    ghost_size: IdMap<usize>,
    a1out_bytes: usize,
    kin: usize,
    kout: usize,
    /// `Kin` and `Kout` as shares of the budget, when given as such.
    fractions: Option<(f64, f64)>,
}

impl TwoQ {
    /// Default share of the budget for `A1in`.
    pub const DEFAULT_KIN: f64 = 0.25;
    /// Default share of the budget remembered by `A1out`.
    pub const DEFAULT_KOUT: f64 = 0.50;

    /// Full 2Q for a cache of `budget` bytes with `Kin` = 25%, `Kout` = 50%.
    pub fn new(budget: usize) -> Self {
        Self::with_fractions(budget, Self::DEFAULT_KIN, Self::DEFAULT_KOUT)
    }

    /// Full 2Q with `Kin` and `Kout` as fractions (0 to 1) of `budget`.
    pub fn with_fractions(budget: usize, kin: f64, kout: f64) -> Self {
        TwoQ {
            fractions: Some((kin, kout)),
            ..Self::with_sizes(fraction_of(budget, kin), fraction_of(budget, kout))
        }
    }

    /// Full 2Q with `Kin` and `Kout` in bytes (whatever the budget).
    pub fn with_sizes(kin_bytes: usize, kout_bytes: usize) -> Self {
        TwoQ {
            queues: Queues::default(),
            a1out: LinkedSet::new(),
            ghost_size: IdMap::default(),
            a1out_bytes: 0,
            kin: kin_bytes,
            kout: kout_bytes,
            fractions: None,
        }
    }

    fn forget_ghost(&mut self, id: PageId) -> bool {
        match self.ghost_size.remove(&id) {
            Some(size) => {
                self.a1out.remove(id);
                self.a1out_bytes -= size;
                true
            }
            None => false,
        }
    }

    fn remember_ghost(&mut self, id: PageId, size: usize) {
        let size = size.max(1);
        self.a1out.push_front(id);
        self.ghost_size.insert(id, size);
        self.a1out_bytes += size;
        self.trim_ghosts();
    }

    /// Trims `A1out` to `Kout` bytes.
    fn trim_ghosts(&mut self) {
        while self.a1out_bytes > self.kout {
            let Some(old) = self.a1out.pop_back() else {
                break;
            };
            if let Some(s) = self.ghost_size.remove(&old) {
                self.a1out_bytes -= s;
            }
        }
    }

    /// Whether `id` is remembered in the ghost queue `A1out`.
    #[cfg(test)]
    pub fn is_ghost(&self, id: PageId) -> bool {
        self.ghost_size.contains_key(&id)
    }

    #[cfg(test)]
    fn queues(&self) -> (Vec<PageId>, Vec<PageId>, Vec<PageId>) {
        let (a1in, am) = self.queues.lists();
        (a1in, self.a1out.to_vec(), am)
    }
}

impl ReplacementPolicy for TwoQ {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        "2q"
    }

    fn insert(&mut self, id: PageId, meta: EntryMeta) {
        if self.queues.holds(id) {
            self.access(id, meta);
            return;
        }
        let queue = if self.forget_ghost(id) {
            Queue::Am
        } else {
            Queue::A1
        };
        self.queues.push(id, queue, meta.size);
    }

    /// A hit in `A1in` does not promote (correlated references).
    fn access(&mut self, id: PageId, meta: EntryMeta) {
        self.queues.hit(id, meta.size, false);
    }

    fn remove(&mut self, id: PageId) -> bool {
        self.forget_ghost(id);
        self.queues.forget(id).is_some()
    }

    fn pop_victim(&mut self) -> Option<PageId> {
        let (id, queue, size) = self.queues.pop_victim(self.kin)?;
        if queue == Queue::A1 {
            self.remember_ghost(id, size);
        }
        Some(id)
    }

    fn set_capacity(&mut self, budget: usize) {
        if let Some((kin, kout)) = self.fractions {
            self.kin = fraction_of(budget, kin);
            self.kout = fraction_of(budget, kout);
            self.trim_ghosts();
        }
    }

    #[cfg(test)]
    fn resident(&self) -> Vec<PageId> {
        self.queues.resident()
    }

    #[cfg(test)]
    fn ghosts(&self) -> Vec<PageId> {
        self.a1out.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::{meta, scan_survivors};

    #[test]
    fn reference_behaviour() {
        // Kin = 1 page, Kout = 2 pages (all pages of size 1).
        let mut p = TwoQ::with_sizes(1, 2);
        p.insert(1, meta(1));
        p.insert(2, meta(1));
        // A hit in A1in does nothing.
        p.access(1, meta(1));
        assert_eq!(p.queues(), (vec![2, 1], vec![], vec![]));
        // A1in above Kin: its back (1) goes to the ghost queue.
        assert_eq!(p.pop_victim(), Some(1));
        assert!(!p.contains(1) && p.is_ghost(1));
        // A miss on a ghost enters Am.
        p.insert(1, meta(1));
        assert_eq!(p.queues(), (vec![2], vec![], vec![1]));
        // J&S's reclaimfor ran before 1 entered Am, which was empty: A1in's
        // back goes, though A1in is not above Kin.
        assert_eq!(p.pop_victim(), Some(2));
        assert!(p.is_ghost(2));
        p.insert(3, meta(1));
        // A1in holds nothing besides 3, not above Kin = 1: Am's back is the
        // victim, not ghosted.
        assert_eq!(p.pop_victim(), Some(1));
        assert!(!p.is_ghost(1));
        for id in 4..=6 {
            p.insert(id, meta(1));
        }
        // Besides 6, A1in = [5, 4, 3] is above Kin until it holds one page.
        assert_eq!(p.pop_victim(), Some(3));
        assert_eq!(p.pop_victim(), Some(4));
        assert_eq!(p.pop_victim(), Some(5));
        // Kout = 2: only the two most recent ghosts are remembered.
        assert_eq!(p.queues(), (vec![6], vec![5, 4], vec![]));
        assert!(p.remove(6));
        assert!(!p.remove(5), "a ghost is not resident");
        assert!(!p.is_ghost(5), "a removed ghost is forgotten");
        assert!(p.is_empty());
    }

    #[test]
    fn resists_a_scan() {
        // Hot pages 0..4: used, evicted into A1out by a few cold pages,
        // used again (promoted to Am), then a long scan.
        let (lru, policy) = scan_survivors(Box::new(TwoQ::new(8)), &[0..4, 50..58, 0..4]);
        assert_eq!((lru, policy), (0, 4));
    }
}
