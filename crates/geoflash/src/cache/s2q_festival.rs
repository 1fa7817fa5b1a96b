//! Simplified 2Q as FESTIval implements it for eFIND's read buffer
//! (`efind/efind_read_buffer_s2q.c`; the eFIND paper's S2Q, seed
//! `efind-framework.txt` §6.3: "S2Q caches the most recent accessed pages
//! in an LRU queue, and stores identifiers of frequently accessed pages in
//! a FIFO queue ... S2Q can employ our RQ for its management").
//!
//! It differs from Johnson & Shasha's simplified 2Q ([`super::s2q`]),
//! whose `A1` is a FIFO of resident pages:
//! - `Am`, an LRU of the resident pages, is the whole cache; a hit moves
//!   the page to its front;
//! - `A1` is a FIFO of page ids, without their pages. A missed page whose
//!   id is not in `A1` is not cached ([`ReplacementPolicy::admit`]
//!   declines it): its id enters `A1` (the oldest id leaves a full `A1`).
//!   A missed page whose id is in `A1` is admitted: its id leaves `A1` and
//!   the page enters the front of `Am`, `Am`'s least recently used pages
//!   making room for it;
//! - a resident page rewritten by a flush
//!   ([`ReplacementPolicy::rewrite`]) keeps its place in `Am` (FESTIval
//!   does not count it as an access), and while it grows it is not its own
//!   victim as long as another page is resident;
//! - a page larger than the whole budget is never cached (the
//!   [`Cache`](super::Cache) hands it back before the policy sees it:
//!   FESTIval leaves `A1` alone too).
//!
//! FESTIval's `A1` is eFIND's read queue RQ of its temporal control (it
//! refuses S2Q without temporal control on reads), whose length varies in
//! FESTIval (10 ids at least, else a share of the buffered pages); eFIND's
//! store in geoflash gives it the fixed length of its RQ, `temporal_queues`
//! (64 by default), and uses `A1` as its RQ
//! ([`PolicyKind::keeps_read_queue`](super::PolicyKind::keeps_read_queue)).
//! A page deleted leaves `A1` too (its id may come back as another page;
//! FESTIval leaves a deleted page where it is).
use super::{EntryMeta, LinkedSet, ReplacementPolicy};
use crate::storage::PageId;

/// FESTIval's simplified 2Q; see the module documentation.
#[derive(Debug, Clone)]
pub struct S2qFestival {
    /// The resident pages, most recently used at the front.
    am: LinkedSet,
    /// Ids of pages missed once, newest at the front.
    a1: LinkedSet,
    /// How many ids `A1` holds at most.
    a1_len: usize,
    /// The page the last rewrite changed in place, until the next other
    /// call: the victims that make room for its growth are other pages.
    rewritten: Option<PageId>,
}

impl S2qFestival {
    /// The length of `A1` when none is given: eFIND's default RQ length
    /// (`temporal_queues`).
    pub const DEFAULT_A1_LEN: usize = 64;

    /// An empty policy whose `A1` holds `a1_len` ids (at least one).
    pub fn new(a1_len: usize) -> Self {
        S2qFestival {
            am: LinkedSet::new(),
            a1: LinkedSet::new(),
            a1_len: a1_len.max(1),
            rewritten: None,
        }
    }

    /// `A1` and `Am`, front (newest) to back.
    #[cfg(test)]
    pub(crate) fn queues(&self) -> (Vec<PageId>, Vec<PageId>) {
        (self.a1.to_vec(), self.am.to_vec())
    }
}

impl ReplacementPolicy for S2qFestival {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        "s2q-festival"
    }

    fn admit(&mut self, id: PageId, _meta: EntryMeta) -> bool {
        self.rewritten = None;
        if self.a1.remove(id) {
            return true;
        }
        self.a1.push_front(id);
        while self.a1.len() > self.a1_len {
            self.a1.pop_back();
        }
        false
    }

    fn remembered(&self, id: PageId) -> bool {
        self.a1.contains(id)
    }

    fn insert(&mut self, id: PageId, meta: EntryMeta) {
        if self.am.contains(id) {
            self.access(id, meta);
        } else {
            self.rewritten = None;
            // A page made resident without an offer (`Cache::insert_pinned`)
            // is no longer only remembered.
            self.a1.remove(id);
            self.am.push_front(id);
        }
    }

    fn access(&mut self, id: PageId, _meta: EntryMeta) {
        self.rewritten = None;
        if self.am.contains(id) {
            self.am.push_front(id);
        }
    }

    fn rewrite(&mut self, id: PageId, _meta: EntryMeta) {
        self.rewritten = self.am.contains(id).then_some(id);
    }

    fn remove(&mut self, id: PageId) -> bool {
        self.rewritten = None;
        self.a1.remove(id);
        self.am.remove(id)
    }

    fn pop_victim(&mut self) -> Option<PageId> {
        let back = self.am.tail?;
        let id = match self.rewritten {
            Some(x) if x == back => self.am.before(back).unwrap_or(back),
            _ => back,
        };
        self.am.remove(id);
        if self.rewritten == Some(id) {
            self.rewritten = None;
        }
        Some(id)
    }

    #[cfg(test)]
    fn resident(&self) -> Vec<PageId> {
        self.am.to_vec()
    }

    #[cfg(test)]
    fn ghosts(&self) -> Vec<PageId> {
        self.a1.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::meta;
    use crate::cache::Cache;

    #[test]
    fn reference_behaviour() {
        let mut p = S2qFestival::new(2);
        // First offers are declined; their ids enter A1 (FIFO of 2).
        for id in 1..=3 {
            assert!(!p.admit(id, meta(1)));
        }
        assert_eq!(p.queues(), (vec![3, 2], vec![]));
        assert!(!p.remembered(1) && p.remembered(2));
        // A second offer while in A1 is admitted; the id leaves A1.
        assert!(p.admit(2, meta(1)));
        p.insert(2, meta(1));
        assert_eq!(p.queues(), (vec![3], vec![2]));
        assert!(p.admit(3, meta(1)));
        p.insert(3, meta(1));
        assert_eq!(p.queues(), (vec![], vec![3, 2]));
        // A hit moves the page to Am's front; the victim is Am's back.
        p.access(2, meta(1));
        assert_eq!(p.queues(), (vec![], vec![2, 3]));
        // A rewrite does not reorder, and the rewritten page is not its
        // own victim while another is resident.
        p.rewrite(3, meta(1));
        assert_eq!(p.queues(), (vec![], vec![2, 3]));
        assert_eq!(p.pop_victim(), Some(2));
        assert_eq!(p.pop_victim(), Some(3));
        assert_eq!(p.pop_victim(), None);
        // Removal forgets an id in A1.
        assert!(!p.admit(7, meta(1)));
        assert!(!p.remove(7));
        assert!(!p.remembered(7));
    }

    /// Through a cache: a page read once is handed back (not cached), read
    /// twice it is cached; a rewrite keeps its LRU place.
    #[test]
    fn cached_on_the_second_read() {
        let mut c: Cache<u32> = Cache::with_policy(Box::new(S2qFestival::new(8)), 2);
        assert_eq!(c.insert(1, 10, meta(1)), vec![(1, 10)]);
        assert!(!c.contains(1));
        assert!(c.insert(1, 11, meta(1)).is_empty());
        assert_eq!(c.peek(1), Some(&11));
        for id in [2, 2] {
            c.insert(id, 20, meta(1));
        }
        // Am = [2, 1]: rewriting 1 (its LRU end) with a larger page evicts 2, not 1.
        assert_eq!(c.rewrite(1, 12, meta(2)), vec![(2, 20)]);
        assert_eq!(c.peek(1), Some(&12));
    }
}
