//! Least recently used.
use super::{EntryMeta, LinkedSet, ReplacementPolicy};
use crate::storage::PageId;

/// LRU: the victim is the page whose last use is the oldest.
#[derive(Debug, Default, Clone)]
pub struct Lru {
    list: LinkedSet,
}

impl Lru {
    /// An empty LRU policy.
    pub fn new() -> Self {
        Self::default()
    }
}

impl ReplacementPolicy for Lru {
    #[cfg(test)]
    fn name(&self) -> &'static str {
        "lru"
    }

    fn insert(&mut self, id: PageId, _meta: EntryMeta) {
        self.list.push_front(id);
    }

    fn access(&mut self, id: PageId, _meta: EntryMeta) {
        if self.list.contains(id) {
            self.list.push_front(id);
        }
    }

    fn remove(&mut self, id: PageId) -> bool {
        self.list.remove(id)
    }

    fn pop_victim(&mut self) -> Option<PageId> {
        self.list.pop_back()
    }

    #[cfg(test)]
    fn resident(&self) -> Vec<PageId> {
        self.list.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::meta;

    #[test]
    fn evicts_least_recently_used() {
        let mut p = Lru::new();
        for i in 1..=3 {
            p.insert(i, meta(1));
        }
        p.access(1, meta(1));
        assert_eq!(p.pop_victim(), Some(2));
        p.access(3, meta(1));
        assert_eq!(p.pop_victim(), Some(1));
        assert!(p.contains(3));
        assert!(p.remove(3));
        assert_eq!(p.pop_victim(), None);
        // Access of a non-resident page does not make it resident.
        p.access(9, meta(1));
        assert!(p.is_empty());
    }
}
