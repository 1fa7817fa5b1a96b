//! The page identifier every layer shares: devices address pages by it,
//! stores hand it out for nodes, and index algorithms keep it in their
//! entries without knowing which device is below (DESIGN.md's layering).

/// Number of a page on a device (page 0 is the first).
pub type PageId = u64;

/// A fast hasher for page ids (Fibonacci hashing; page ids come from the
/// store's allocator, not from an adversary, so no DoS-resistant hashing).
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A hash map keyed by page id with [`IdHasher`].
pub type IdMap<V> = std::collections::HashMap<PageId, V, std::hash::BuildHasherDefault<IdHasher>>;

/// A hash set of page ids with [`IdHasher`].
pub type IdSet = std::collections::HashSet<PageId, std::hash::BuildHasherDefault<IdHasher>>;
