//! ARC, the Adaptive Replacement Cache (Megiddo & Modha, FAST 2003), in bytes.
//!
//! Resident lists `T1` (seen once recently) and `T2` (seen at least twice),
//! ghost lists `B1` and `B2` (ids recently evicted from `T1` and `T2`), and a
//! target `p` for the bytes of `T1` that adapts to the workload:
//! - hit in `T1` or `T2`: move to the front of `T2`;
//! - miss remembered in `B1`: `p` grows by `max(|B2| / |B1|, 1)` times the
//!   page's size (recency pays; the ratio exact, not rounded to whole
//!   pages), the page enters `T2`;
//! - miss remembered in `B2`: `p` shrinks likewise (frequency pays), the page
//!   enters `T2`;
//! - other miss: the page enters `T1`; ghosts are trimmed so that
//!   `T1 + B1` stays within the budget `c` and everything within `2c`;
//! - victim (the paper's REPLACE): the back of `T1` (remembered in `B1`)
//!   when `T1` holds more than `p` bytes, or exactly `p` and the last miss
//!   was remembered in `B2`; otherwise the back of `T2` (remembered in `B2`).
//!   As in the paper, where REPLACE runs before the missed page enters `T1`
//!   or `T2`, the victims chosen right after a miss neither count that page
//!   in `T1` nor choose it while another page is resident.
//!
//! Sizes are bytes instead of the paper's page counts, so that a buffer of
//! mixed node sizes adapts the same way; a page counts at least one byte,
//! so that the ghost lists stay bounded whatever the sizes. `c` follows the
//! cache's budget ([`set_capacity`](ReplacementPolicy::set_capacity)).
use super::{EntryMeta, IdMap, LinkedSet, ReplacementPolicy};
use crate::storage::PageId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    T1,
    T2,
    B1,
    B2,
}

/// ARC; see the module documentation.
#[derive(Debug, Clone)]
pub struct Arc {
    t1: LinkedSet,
    t2: LinkedSet,
    b1: LinkedSet,
    b2: LinkedSet,
    /// Where each known id is, and its size.
    place: IdMap<(List, usize)>,
    bytes: [usize; 4],
    /// Target bytes of `T1`.
    p: usize,
    /// The budget `c` in bytes.
    c: usize,
    resident: usize,
    /// The page of the last miss and whether it was remembered in `B2`,
    /// until the next access or removal (the paper's `x` of REPLACE).
    incoming: Option<(PageId, bool)>,
}

impl Arc {
    /// ARC for a cache of `budget` bytes.
    pub fn new(budget: usize) -> Self {
        Arc {
            t1: LinkedSet::new(),
            t2: LinkedSet::new(),
            b1: LinkedSet::new(),
            b2: LinkedSet::new(),
            place: IdMap::default(),
            bytes: [0; 4],
            p: 0,
            c: budget,
            resident: 0,
            incoming: None,
        }
    }

    /// The current target bytes of `T1`.
    #[cfg(test)]
    pub fn target_t1(&self) -> usize {
        self.p
    }

    fn list_mut(&mut self, l: List) -> &mut LinkedSet {
        match l {
            List::T1 => &mut self.t1,
            List::T2 => &mut self.t2,
            List::B1 => &mut self.b1,
            List::B2 => &mut self.b2,
        }
    }

    fn idx(l: List) -> usize {
        match l {
            List::T1 => 0,
            List::T2 => 1,
            List::B1 => 2,
            List::B2 => 3,
        }
    }

    fn unlink(&mut self, id: PageId) -> Option<(List, usize)> {
        let (l, size) = self.place.remove(&id)?;
        self.list_mut(l).remove(id);
        self.bytes[Self::idx(l)] -= size;
        if matches!(l, List::T1 | List::T2) {
            self.resident -= 1;
        }
        Some((l, size))
    }

    fn link_front(&mut self, id: PageId, l: List, size: usize) {
        self.list_mut(l).push_front(id);
        self.bytes[Self::idx(l)] += size;
        self.place.insert(id, (l, size));
        if matches!(l, List::T1 | List::T2) {
            self.resident += 1;
        }
    }

    fn drop_back(&mut self, l: List) -> bool {
        match self.list_mut(l).pop_back() {
            Some(id) => {
                if let Some((_, size)) = self.place.remove(&id) {
                    self.bytes[Self::idx(l)] -= size;
                }
                true
            }
            None => false,
        }
    }

    fn trim_ghosts(&mut self) {
        let [t1, t2, _, _] = self.bytes;
        while self.bytes[2] > 0 && t1 + self.bytes[2] > self.c {
            if !self.drop_back(List::B1) {
                break;
            }
        }
        while self.bytes[3] > 0
            && t1 + t2 + self.bytes[2] + self.bytes[3] > self.c.saturating_mul(2)
        {
            if !self.drop_back(List::B2) {
                break;
            }
        }
    }

    #[cfg(test)]
    fn lists(&self) -> [Vec<PageId>; 4] {
        [
            self.t1.to_vec(),
            self.t2.to_vec(),
            self.b1.to_vec(),
            self.b2.to_vec(),
        ]
    }
}

/// `size · num / den` (`den > 0`), rounded down, at most `usize::MAX`.
fn scaled(size: usize, num: usize, den: usize) -> usize {
    let v = size as u128 * num as u128 / den.max(1) as u128;
    usize::try_from(v).unwrap_or(usize::MAX)
}

impl ReplacementPolicy for Arc {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        "arc"
    }

    fn insert(&mut self, id: PageId, meta: EntryMeta) {
        let size = meta.size.max(1);
        match self.place.get(&id).map(|&(l, _)| l) {
            Some(List::T1 | List::T2) => self.access(id, meta),
            Some(List::B1) => {
                // δ1 = |B2| / |B1| pages when B2 is the larger, else 1.
                let [_, _, b1, b2] = self.bytes;
                let delta = if b1 >= b2 { size } else { scaled(size, b2, b1) };
                self.p = self.c.min(self.p.saturating_add(delta));
                self.unlink(id);
                self.link_front(id, List::T2, size);
                self.incoming = Some((id, false));
            }
            Some(List::B2) => {
                // δ2 = |B1| / |B2| pages when B1 is the larger, else 1.
                let [_, _, b1, b2] = self.bytes;
                let delta = if b2 >= b1 { size } else { scaled(size, b1, b2) };
                self.p = self.p.saturating_sub(delta);
                self.unlink(id);
                self.link_front(id, List::T2, size);
                self.incoming = Some((id, true));
            }
            None => {
                // Case IV makes room in the history before x enters T1:
                // (A) when x would overflow L1 = T1 + B1 beyond c, B1's LRU
                // end goes (T1's, when T1 alone fills L1, goes in REPLACE
                // and is not remembered); (B) otherwise, when everything
                // would exceed 2c, B2's.
                let [t1, t2, _, _] = self.bytes;
                let l1 = |b: &[usize; 4]| t1.saturating_add(b[2]).saturating_add(size);
                if l1(&self.bytes) > self.c {
                    while self.bytes[2] > 0 && l1(&self.bytes) > self.c {
                        if !self.drop_back(List::B1) {
                            break;
                        }
                    }
                } else {
                    let all = |b: &[usize; 4]| l1(b).saturating_add(t2).saturating_add(b[3]);
                    while self.bytes[3] > 0 && all(&self.bytes) > self.c.saturating_mul(2) {
                        if !self.drop_back(List::B2) {
                            break;
                        }
                    }
                }
                self.link_front(id, List::T1, size);
                self.incoming = Some((id, false));
            }
        }
    }

    fn access(&mut self, id: PageId, meta: EntryMeta) {
        self.incoming = None;
        if let Some(&(List::T1 | List::T2, _)) = self.place.get(&id) {
            self.unlink(id);
            self.link_front(id, List::T2, meta.size.max(1));
        }
    }

    fn remove(&mut self, id: PageId) -> bool {
        self.incoming = None;
        matches!(self.unlink(id), Some((List::T1 | List::T2, _)))
    }

    fn pop_victim(&mut self) -> Option<PageId> {
        // REPLACE(x, p), x the page of the last miss (at the front of T1
        // or T2): it does not count in T1, and is the victim only when no
        // other page is resident.
        let x = self.incoming.map(|(id, _)| id);
        let x_in_b2 = self.incoming.is_some_and(|(_, b2)| b2);
        let mut t1 = self.bytes[0];
        if let Some(&(List::T1, size)) = x.and_then(|id| self.place.get(&id)) {
            t1 -= size;
        }
        let other = |list: &LinkedSet| list.tail.is_some_and(|t| Some(t) != x);
        let (in_t1, in_t2) = (other(&self.t1), other(&self.t2));
        let from = if in_t1 && (t1 > self.p || (x_in_b2 && t1 == self.p) || !in_t2) {
            List::T1
        } else if in_t2 {
            List::T2
        } else {
            match x.and_then(|id| self.place.get(&id)) {
                Some(&(l @ (List::T1 | List::T2), _)) => l,
                _ => return None,
            }
        };
        let ghost = if from == List::T1 { List::B1 } else { List::B2 };
        let id = self.list_mut(from).back_or(&LinkedSet::new())?;
        if Some(id) == x {
            self.incoming = None;
        }
        let (_, size) = self.unlink(id)?;
        self.link_front(id, ghost, size);
        self.trim_ghosts();
        Some(id)
    }

    fn set_capacity(&mut self, budget: usize) {
        self.c = budget;
        self.p = self.p.min(budget);
        self.trim_ghosts();
    }

    #[cfg(test)]
    fn resident(&self) -> Vec<PageId> {
        [&self.t1, &self.t2].iter().flat_map(|l| l.to_vec()).collect()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.resident
    }

    #[cfg(test)]
    fn ghosts(&self) -> Vec<PageId> {
        [&self.b1, &self.b2].iter().flat_map(|l| l.to_vec()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::{meta, scan_survivors};

    #[test]
    fn reference_behaviour() {
        // c = 4 pages of size 1.
        let mut a = Arc::new(4);
        for id in 1..=4 {
            a.insert(id, meta(1));
        }
        a.access(2, meta(1));
        assert_eq!(a.lists(), [vec![4, 3, 1], vec![2], vec![], vec![]]);
        // T1 (3 bytes) > p (0): T1's back goes to B1.
        assert_eq!(a.pop_victim(), Some(1));
        assert_eq!(a.lists()[2], vec![1]);
        assert!(!a.contains(1));
        // A miss remembered in B1 raises p and enters T2.
        a.insert(1, meta(1));
        assert_eq!(a.target_t1(), 1);
        assert_eq!(a.lists(), [vec![4, 3], vec![1, 2], vec![], vec![]]);
        assert_eq!(a.pop_victim(), Some(3));
        // T1 is at its target p: T2's back goes to B2.
        assert_eq!(a.pop_victim(), Some(2));
        assert_eq!(a.lists(), [vec![4], vec![1], vec![3], vec![2]]);
        // A miss remembered in B2 lowers p and enters T2.
        a.insert(2, meta(1));
        assert_eq!(a.target_t1(), 0);
        assert_eq!(a.lists(), [vec![4], vec![2, 1], vec![3], vec![]]);
        // p = 0 and the last miss was in B2: T1 gives the victim.
        assert_eq!(a.pop_victim(), Some(4));
        assert_eq!(a.len(), 2);
        assert!(a.remove(2));
        assert!(!a.remove(3), "ghosts are not resident");
    }

    #[test]
    fn resists_a_scan() {
        let (lru, policy) = scan_survivors(Box::new(Arc::new(8)), &[0..4, 0..4, 0..4]);
        assert_eq!((lru, policy), (0, 4));
    }
}
