//! Height-aware LRU (FESTIval's "hierarchical LRU").
//!
//! FESTIval's eFIND read buffer (`efind_read_buffer_hlru.c`) keeps nodes
//! high in the tree: to make room for a node of height `h` it evicts, in
//! LRU order, only nodes of height `<= h`. geoflash's definition, which
//! needs no knowledge of the incoming node and runs in O(log h):
//!
//! **The victim is the least recently used page among the resident pages of
//! the lowest height.** Pages are kept in one LRU list per height; a page's
//! height is refreshed on every access (a node whose level changed moves to
//! its new list).
//!
//! So leaves go first (in LRU order), then level-1 nodes, and the root is
//! evicted last. The difference from FESTIval: FESTIval may evict a recently
//! used leaf before an older leaf's parent only when the incoming node is a
//! parent, and it refuses to admit a node when evicting lower nodes would not
//! make room; geoflash always admits (a store must be able to hold the nodes
//! it is writing) and always evicts the lowest level first.
use std::collections::BTreeMap;

use super::{EntryMeta, IdMap, LinkedSet, ReplacementPolicy};
use crate::storage::PageId;

/// Height-aware LRU; see the module documentation.
#[derive(Debug, Default, Clone)]
pub struct Hlru {
    by_height: BTreeMap<u16, LinkedSet>,
    height_of: IdMap<u16>,
}

impl Hlru {
    /// An empty HLRU policy.
    pub fn new() -> Self {
        Self::default()
    }

    fn unlink(&mut self, id: PageId) -> bool {
        let Some(h) = self.height_of.remove(&id) else {
            return false;
        };
        if let Some(list) = self.by_height.get_mut(&h) {
            list.remove(id);
            if list.is_empty() {
                self.by_height.remove(&h);
            }
        }
        true
    }

    fn link_front(&mut self, id: PageId, height: u16) {
        self.by_height.entry(height).or_default().push_front(id);
        self.height_of.insert(id, height);
    }
}

impl ReplacementPolicy for Hlru {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        "hlru"
    }

    fn insert(&mut self, id: PageId, meta: EntryMeta) {
        self.unlink(id);
        self.link_front(id, meta.height);
    }

    fn access(&mut self, id: PageId, meta: EntryMeta) {
        if self.unlink(id) {
            self.link_front(id, meta.height);
        }
    }

    fn remove(&mut self, id: PageId) -> bool {
        self.unlink(id)
    }

    fn pop_victim(&mut self) -> Option<PageId> {
        let mut lowest = self.by_height.first_entry()?;
        let id = lowest.get_mut().pop_back();
        if lowest.get().is_empty() {
            lowest.remove();
        }
        if let Some(id) = id {
            self.height_of.remove(&id);
        }
        id
    }

    #[cfg(test)]
    fn resident(&self) -> Vec<PageId> {
        self.height_of.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(height: u16) -> EntryMeta {
        EntryMeta { height, size: 1 }
    }

    #[test]
    fn lowest_height_first_then_lru() {
        let mut p = Hlru::new();
        p.insert(100, m(2)); // root
        p.insert(10, m(1));
        p.insert(11, m(1));
        p.insert(1, m(0));
        p.insert(2, m(0));
        p.access(1, m(0));
        // Leaves first, least recently used first.
        assert_eq!(p.pop_victim(), Some(2));
        assert_eq!(p.pop_victim(), Some(1));
        // The root is older than every level-1 node but outlives them.
        p.access(10, m(1));
        assert_eq!(p.pop_victim(), Some(11));
        assert_eq!(p.pop_victim(), Some(10));
        assert_eq!(p.pop_victim(), Some(100));
        assert_eq!(p.pop_victim(), None);
    }

    #[test]
    fn height_refreshed_on_access() {
        let mut p = Hlru::new();
        p.insert(1, m(0));
        p.insert(2, m(0));
        // Page 1 became an internal node (e.g. reused page).
        p.access(1, m(3));
        assert_eq!(p.len(), 2);
        assert_eq!(p.pop_victim(), Some(2));
        assert!(p.remove(1));
        assert!(!p.contains(1));
        assert!(p.is_empty());
    }
}
