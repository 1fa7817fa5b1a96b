//! [`ObjectIds`]: an exact set of object ids that costs little when the ids
//! are dense (issue 47, item 5).
//!
//! The duplicate check of insertions keeps every id of a tree in memory
//! (see [`super::ids`]). A `HashSet<u64>` takes 9 bytes per bucket at a
//! load of at most 7/8, twice that right after it grows, and both tables
//! at once while it grows: 75 MB for 4,000,000 ids and 450 MB at the
//! moment the set of 16,000,000 grows, outside the store's budget. Ids are
//! usually dense (`0..n` from a generator or a row number, Python's keys):
//! this set splits the ids into chunks of 65,536 consecutive values, as
//! roaring bitmaps do, each chunk a sorted array of 16-bit offsets (2 bytes
//! per id) up to 4,096 ids and a bitmap of 8 KiB above (1 bit per possible
//! id): 4,000,000 consecutive ids take 0.5 MB. Ids spread so thinly that
//! chunks hold fewer than 16 ids on average go back to a plain hash set
//! (one-way, until the set is cleared), where the chunks would cost more.
use std::collections::{HashMap, HashSet};

/// Bits of an id that select its offset inside a chunk.
const CHUNK_BITS: u32 = 16;
/// Ids an array chunk holds before it becomes a bitmap.
const ARRAY_MAX: usize = 4096;
/// Ids below which a bitmap chunk becomes an array again.
const ARRAY_BACK: usize = ARRAY_MAX / 2;
/// Words of a bitmap chunk.
const WORDS: usize = (1 << CHUNK_BITS) / 64;
/// Fewer ids than this per chunk on average (past [`SPARSE_AFTER`] chunks)
/// and the set becomes a hash set.
const MIN_PER_CHUNK: usize = 16;
/// Chunks kept whatever the density (small sets stay chunked).
const SPARSE_AFTER: usize = 1024;

/// The ids of one chunk.
#[derive(Debug, Clone)]
enum Chunk {
    /// Sorted offsets.
    Array(Vec<u16>),
    /// One bit per offset, and how many are set.
    Bits(Box<[u64; WORDS]>, usize),
}

impl Chunk {
    fn contains(&self, low: u16) -> bool {
        match self {
            Chunk::Array(v) => v.binary_search(&low).is_ok(),
            Chunk::Bits(b, _) => b[usize::from(low) / 64] & (1 << (low % 64)) != 0,
        }
    }

    /// Adds `low`; false if it was there.
    fn insert(&mut self, low: u16) -> bool {
        match self {
            Chunk::Array(v) => {
                let Err(at) = v.binary_search(&low) else {
                    return false;
                };
                v.insert(at, low);
                if v.len() > ARRAY_MAX {
                    let mut bits = Box::new([0u64; WORDS]);
                    for &x in v.iter() {
                        bits[usize::from(x) / 64] |= 1 << (x % 64);
                    }
                    *self = Chunk::Bits(bits, v.len());
                }
                true
            }
            Chunk::Bits(b, n) => {
                let (w, bit) = (usize::from(low) / 64, 1u64 << (low % 64));
                if b[w] & bit != 0 {
                    return false;
                }
                b[w] |= bit;
                *n += 1;
                true
            }
        }
    }

    /// Removes `low`; false if it was not there.
    fn remove(&mut self, low: u16) -> bool {
        match self {
            Chunk::Array(v) => match v.binary_search(&low) {
                Ok(at) => {
                    v.remove(at);
                    true
                }
                Err(_) => false,
            },
            Chunk::Bits(b, n) => {
                let (w, bit) = (usize::from(low) / 64, 1u64 << (low % 64));
                if b[w] & bit == 0 {
                    return false;
                }
                b[w] &= !bit;
                *n -= 1;
                if *n < ARRAY_BACK {
                    let v = (0..=u16::MAX).filter(|&x| b[usize::from(x) / 64] & (1 << (x % 64)) != 0);
                    *self = Chunk::Array(v.collect());
                }
                true
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            Chunk::Array(v) => v.len(),
            Chunk::Bits(_, n) => *n,
        }
    }

    fn ids(&self, high: u64) -> Box<dyn Iterator<Item = u64> + '_> {
        let base = high << CHUNK_BITS;
        match self {
            Chunk::Array(v) => Box::new(v.iter().map(move |&x| base | u64::from(x))),
            Chunk::Bits(b, _) => Box::new(
                (0..=u16::MAX)
                    .filter(|&x| b[usize::from(x) / 64] & (1 << (x % 64)) != 0)
                    .map(move |x| base | u64::from(x)),
            ),
        }
    }
}

/// An exact set of object ids, compact when they are dense (see the
/// [module docs](self)).
#[derive(Debug, Clone, Default)]
pub(crate) struct ObjectIds {
    /// Chunk number (`id >> 16`) -> its ids, while the set is chunked.
    chunks: HashMap<u64, Chunk>,
    /// Every id, once the ids proved too sparse for chunks.
    sparse: Option<HashSet<u64>>,
    len: usize,
}

fn split(id: u64) -> (u64, u16) {
    // The low 16 bits fit in u16 by construction.
    (id >> CHUNK_BITS, (id & 0xffff) as u16)
}

impl ObjectIds {
    /// An empty set.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Number of ids.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether `id` is in the set.
    pub(crate) fn contains(&self, id: &u64) -> bool {
        if let Some(s) = &self.sparse {
            return s.contains(id);
        }
        let (high, low) = split(*id);
        self.chunks.get(&high).is_some_and(|c| c.contains(low))
    }

    /// Adds `id`; false if it was there.
    pub(crate) fn insert(&mut self, id: u64) -> bool {
        let added = match &mut self.sparse {
            Some(s) => s.insert(id),
            None => {
                let (high, low) = split(id);
                self.chunks
                    .entry(high)
                    .or_insert_with(|| Chunk::Array(Vec::new()))
                    .insert(low)
            }
        };
        if added {
            self.len += 1;
            if self.sparse.is_none()
                && self.chunks.len() > SPARSE_AFTER
                && self.len < MIN_PER_CHUNK * self.chunks.len()
            {
                self.go_sparse();
            }
        }
        added
    }

    /// Removes `id`; false if it was not there.
    pub(crate) fn remove(&mut self, id: &u64) -> bool {
        let removed = match &mut self.sparse {
            Some(s) => s.remove(id),
            None => {
                let (high, low) = split(*id);
                match self.chunks.get_mut(&high) {
                    Some(c) => {
                        let removed = c.remove(low);
                        if c.len() == 0 {
                            self.chunks.remove(&high);
                        }
                        removed
                    }
                    None => false,
                }
            }
        };
        if removed {
            self.len -= 1;
        }
        removed
    }

    /// Heap bytes the set holds, about: the tables' buckets (a key, a
    /// value and a control byte each, at their capacity) and the chunks'
    /// arrays and bitmaps. For tests that check a set stays small.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let table = |cap: usize, entry: usize| cap * (entry + 1);
        let chunks: usize = self
            .chunks
            .values()
            .map(|c| match c {
                Chunk::Array(v) => v.capacity() * size_of::<u16>(),
                Chunk::Bits(..) => size_of::<[u64; WORDS]>(),
            })
            .sum();
        let sparse = self
            .sparse
            .as_ref()
            .map_or(0, |s| table(s.capacity(), size_of::<u64>()));
        table(self.chunks.capacity(), size_of::<(u64, Chunk)>()) + chunks + sparse
    }

    /// Whether the ids are kept in a hash set (too sparse for chunks).
    #[cfg(test)]
    fn is_sparse(&self) -> bool {
        self.sparse.is_some()
    }

    /// Every id, in no particular order.
    #[cfg(test)]
    fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match &self.sparse {
            Some(s) => Box::new(s.iter().copied()),
            None => Box::new(self.chunks.iter().flat_map(|(&h, c)| c.ids(h))),
        }
    }

    fn go_sparse(&mut self) {
        let chunks = std::mem::take(&mut self.chunks);
        let mut s = HashSet::with_capacity(self.len);
        for (h, c) in &chunks {
            s.extend(c.ids(*h));
        }
        self.sparse = Some(s);
    }
}

impl FromIterator<u64> for ObjectIds {
    fn from_iter<I: IntoIterator<Item = u64>>(ids: I) -> Self {
        let mut s = ObjectIds::new();
        for id in ids {
            s.insert(id);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dense_ids_stay_in_chunks_and_bitmaps() {
        let mut s = ObjectIds::new();
        for id in 0..200_000u64 {
            assert!(s.insert(id));
        }
        assert!(!s.insert(77));
        assert!(!s.is_sparse());
        assert_eq!(s.len(), 200_000);
        assert!(s.chunks.values().all(|c| matches!(c, Chunk::Bits(..)) || c.len() <= ARRAY_MAX));
        assert!(s.contains(&199_999) && !s.contains(&200_000));
        // Emptying a bitmap chunk turns it back into an array, then removes it.
        for id in 0..65_536u64 {
            assert!(s.remove(&id));
        }
        assert!(!s.remove(&5));
        assert!(!s.chunks.contains_key(&0));
        assert_eq!(s.len(), 200_000 - 65_536);
    }

    #[test]
    fn heap_bytes_counts_chunks_and_the_hash_set() {
        assert_eq!(ObjectIds::new().heap_bytes(), 0);
        // 200,000 dense ids: three full bitmaps and a small array, about
        // 0.1 byte an id (a HashSet<u64> takes 9 to 18).
        let dense: ObjectIds = (0..200_000u64).collect();
        let b = dense.heap_bytes();
        assert!((3 * 8192..40_000).contains(&b), "{b}");
        // Sparse ids: at least the hash set's 9 bytes an id.
        let spread: ObjectIds = (0..5_000u64).map(|i| i << 32).collect();
        assert!(spread.is_sparse());
        assert!(spread.heap_bytes() >= 9 * 5_000, "{}", spread.heap_bytes());
    }

    #[test]
    fn spread_ids_go_to_a_hash_set() {
        let mut s = ObjectIds::new();
        for i in 0..5_000u64 {
            s.insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        assert!(s.is_sparse());
        assert_eq!(s.len(), 5_000);
        assert!(s.contains(&0x9e37_79b9_7f4a_7c15));
        assert!(s.remove(&0x9e37_79b9_7f4a_7c15));
        assert!(!s.contains(&0x9e37_79b9_7f4a_7c15));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            crate::testenv::proptest_cases()
        ))]
        /// The set answers as a `HashSet` under any insertions and removals
        /// (ids clustered in a few chunks so that arrays become bitmaps and back).
        #[test]
        fn matches_a_hash_set(ops in prop::collection::vec((any::<bool>(), 0u64..3, 0u64..6000, any::<bool>()), 1..3000)) {
            let mut s = ObjectIds::new();
            let mut oracle = HashSet::new();
            for (add, chunk, low, far) in ops {
                let id = if far { (chunk << 40) | low } else { (chunk << 16) | (low * 10 % 65_536) };
                if add {
                    prop_assert_eq!(s.insert(id), oracle.insert(id));
                } else {
                    prop_assert_eq!(s.remove(&id), oracle.remove(&id));
                }
                prop_assert_eq!(s.len(), oracle.len());
                prop_assert_eq!(s.contains(&id), oracle.contains(&id));
            }
            let mut got: Vec<u64> = s.iter().collect();
            got.sort_unstable();
            let mut want: Vec<u64> = oracle.into_iter().collect();
            want.sort_unstable();
            prop_assert_eq!(got, want);
        }
    }
}
