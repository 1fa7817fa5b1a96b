//! The GFFM / LB-Grid page buffer: a *hot* list of recently used pages and a
//! *cold* list of dirty pages evicted from it (the thesis calls them HLRU and
//! CLRU; they are named hot/cold here so as not to clash with the
//! height-aware HLRU policy of [`crate::cache`]).
//!
//! [`HotCold::fetch`] is Algorithm 4 (FetchPage) and the private `evict` is
//! Algorithm 5 (Evict): a clean victim leaves at once; a dirty victim moves to
//! the cold list, and when the cold list is full and its least recently used
//! page is dirty, the *whole* cold list is written in one batch
//! ([`PageDevice::write_batch`]) and marked clean. Pages therefore reach the
//! device only in batches of the cold list's size (default 128 pages), apart
//! from [`HotCold::flush_all`] at a checkpoint.
//!
//! Values are decoded pages behind an [`Arc`]: queries keep the values of a
//! prefetched group while later fetches evict them.
//!
//! **Tiers (H-Grid).** Every page carries the [`Tier`] it belongs to (new
//! pages take the buffer's default, [`Tier::Slow`] unless set). There is
//! one cold list — one write buffer — per tier, each flushed as one batch
//! after hinting its pages' tier to the device ([`PageDevice::hint_tier`]),
//! so H-Grid's flash and 3D XPoint write buffers are the two cold lists.
//! [`HotCold::set_tier`] re-tags a resident page and marks it dirty (the
//! thesis' "3DXPoint dirty flag"), so the next flush writes it to its new
//! tier. A lookup searches the hot list, then the cold lists, then the
//! device, which reads each page from the tier it lives on — Algorithm 11's
//! fetch order. With every page on one tier (GFFM, LB-Grid) this is exactly
//! the single cold list of Algorithms 4–5.
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::storage::{PageDevice, PageId, Tier};
use crate::store::overlap::read_decoded;
use crate::{Error, Result};

/// A decoded page that the buffer can write and read back.
pub trait PageValue: Clone + Send + Sync {
    /// Encodes the value as one framed page of `page_size` bytes.
    fn encode(&self, page_size: usize) -> Result<Vec<u8>>;
    /// Decodes page `id`; an error (never a panic) for anything malformed.
    fn decode(id: PageId, page: &[u8]) -> Result<Self>;
}

/// Counters of one buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BufferStats {
    /// Fetches answered from memory (hot or cold list).
    pub hits: u64,
    /// Fetches that read the device.
    pub misses: u64,
    /// Device read batches issued by the buffer.
    pub read_batches: u64,
    /// Batch writes of the cold list (and of checkpoints).
    pub write_batches: u64,
    /// Pages written.
    pub pages_written: u64,
}

#[derive(Debug)]
struct Slot<T> {
    val: Arc<T>,
    dirty: bool,
    hot: bool,
    stamp: u64,
    tier: Tier,
}

/// The cold list of a tier.
fn ti(t: Tier) -> usize {
    match t {
        Tier::Slow => 0,
        Tier::Fast => 1,
    }
}

const TIERS: [Tier; 2] = [Tier::Slow, Tier::Fast];

/// A hot list and a cold list of pages of one kind (see the module docs).
#[derive(Debug)]
pub struct HotCold<T> {
    slots: HashMap<PageId, Slot<T>>,
    hot: BTreeMap<u64, PageId>,
    cold: [BTreeMap<u64, PageId>; 2],
    hot_cap: usize,
    cold_cap: usize,
    clock: u64,
    default_tier: Tier,
    stats: BufferStats,
}

impl<T: PageValue> HotCold<T> {
    /// A buffer of `hot_cap` hot pages and `cold_cap` cold pages (both at least 1).
    pub fn new(hot_cap: usize, cold_cap: usize) -> Result<Self> {
        if hot_cap == 0 || cold_cap == 0 {
            return Err(Error::invalid(format!(
                "a hot/cold buffer needs at least one page in each list (hot {hot_cap}, cold {cold_cap})"
            )));
        }
        Ok(HotCold {
            slots: HashMap::new(),
            hot: BTreeMap::new(),
            cold: [BTreeMap::new(), BTreeMap::new()],
            hot_cap,
            cold_cap,
            clock: 0,
            default_tier: Tier::Slow,
            stats: BufferStats::default(),
        })
    }

    /// New pages (and pages read from the device) belong to `tier`.
    pub fn with_default_tier(mut self, tier: Tier) -> Self {
        self.default_tier = tier;
        self
    }

    /// Moves resident page `id` to `tier`: it is marked dirty so the next
    /// flush of that tier's write buffer writes it there. Returns false if
    /// the page is not resident or already on `tier`.
    pub fn set_tier(&mut self, dev: &dyn PageDevice, id: PageId, tier: Tier) -> Result<bool> {
        let Some(s) = self.slots.get(&id) else {
            return Ok(false);
        };
        if s.tier == tier {
            return Ok(false);
        }
        let (hot, stamp, old) = (s.hot, s.stamp, s.tier);
        if !hot {
            // Into the other tier's write buffer, which may have to flush first.
            self.cold[ti(old)].remove(&stamp);
            if self.cold[ti(tier)].len() >= self.cold_cap {
                self.flush_cold(dev, tier)?;
                self.drop_cold_lru(tier);
            }
            self.cold[ti(tier)].insert(stamp, id);
        }
        if let Some(s) = self.slots.get_mut(&id) {
            s.tier = tier;
            s.dirty = true;
        }
        Ok(true)
    }

    /// Counters.
    pub fn stats(&self) -> BufferStats {
        self.stats
    }

    /// Pages resident (hot, cold — both tiers' cold lists).
    #[cfg(test)]
    pub fn resident(&self) -> (usize, usize) {
        (self.hot.len(), self.cold.iter().map(BTreeMap::len).sum())
    }

    /// The value of resident page `id`, without touching the lists.
    pub fn peek(&self, id: PageId) -> Option<&T> {
        self.slots.get(&id).map(|s| &*s.val)
    }

    /// True if page `id` is resident and dirty.
    pub fn is_dirty(&self, id: PageId) -> bool {
        self.slots.get(&id).is_some_and(|s| s.dirty)
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Unlinks `id` from its list (the slot stays).
    fn unlink(&mut self, id: PageId) {
        if let Some(s) = self.slots.get(&id) {
            if s.hot {
                self.hot.remove(&s.stamp);
            } else {
                self.cold[ti(s.tier)].remove(&s.stamp);
            }
        }
    }

    /// Puts resident page `id` at the MRU end of the hot list.
    fn move_to_hot_mru(&mut self, id: PageId) {
        self.unlink(id);
        let t = self.tick();
        if let Some(s) = self.slots.get_mut(&id) {
            s.hot = true;
            s.stamp = t;
            self.hot.insert(t, id);
        }
    }

    /// Moves a cold page to the MRU end of the hot list: it leaves the cold
    /// list first, so that making room cannot evict it.
    fn promote(&mut self, dev: &dyn PageDevice, id: PageId) -> Result<()> {
        self.unlink(id);
        self.make_room(dev)?;
        let t = self.tick();
        if let Some(s) = self.slots.get_mut(&id) {
            s.hot = true;
            s.stamp = t;
            self.hot.insert(t, id);
        }
        Ok(())
    }

    /// Makes room for one more hot page (Algorithm 5, as often as needed).
    fn make_room(&mut self, dev: &dyn PageDevice) -> Result<()> {
        while self.hot.len() >= self.hot_cap {
            self.evict(dev)?;
        }
        Ok(())
    }

    /// Algorithm 5 (Evict).
    fn evict(&mut self, dev: &dyn PageDevice) -> Result<()> {
        let Some((&vstamp, &v)) = self.hot.iter().next() else {
            return Ok(());
        };
        let Some((dirty, tier)) = self.slots.get(&v).map(|s| (s.dirty, s.tier)) else {
            self.hot.remove(&vstamp);
            return Ok(());
        };
        if !dirty {
            self.hot.remove(&vstamp);
            self.slots.remove(&v);
            return Ok(());
        }
        let list = ti(tier);
        if self.cold[list].len() >= self.cold_cap {
            if let Some(&cp) = self.cold[list].values().next() {
                if self.is_dirty(cp) {
                    self.flush_cold(dev, tier)?;
                }
                self.drop_cold_lru(tier);
            }
        }
        self.hot.remove(&vstamp);
        let t = self.tick();
        if let Some(s) = self.slots.get_mut(&v) {
            s.hot = false;
            s.stamp = t;
        }
        self.cold[list].insert(t, v);
        Ok(())
    }

    /// Forgets the least recently used page of `tier`'s cold list (it is clean).
    fn drop_cold_lru(&mut self, tier: Tier) {
        if let Some((_, cp)) = self.cold[ti(tier)].pop_first() {
            self.slots.remove(&cp);
        }
    }

    /// Writes every dirty page of `tier`'s cold list in one batch and marks them clean.
    fn flush_cold(&mut self, dev: &dyn PageDevice, tier: Tier) -> Result<()> {
        let ids: Vec<PageId> = self.cold[ti(tier)]
            .values()
            .copied()
            .filter(|id| self.is_dirty(*id))
            .collect();
        self.write_pages(dev, &ids)
    }

    fn write_pages(&mut self, dev: &dyn PageDevice, ids: &[PageId]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let ps = dev.page_size();
        let mut data = Vec::with_capacity(ids.len() * ps);
        let mut by_tier: [Vec<PageId>; 2] = [Vec::new(), Vec::new()];
        for id in ids {
            let s = self.slots.get(id).ok_or_else(|| {
                Error::invalid(format!("grid buffer: page {id} vanished during a flush"))
            })?;
            data.extend_from_slice(&s.val.encode(ps)?);
            by_tier[ti(s.tier)].push(*id);
        }
        for (pages, tier) in by_tier.iter().zip(TIERS) {
            if !pages.is_empty() {
                dev.hint_tier(pages, tier)?;
            }
        }
        dev.write_batch(ids, &data)?;
        self.stats.write_batches += 1;
        self.stats.pages_written += ids.len() as u64;
        for id in ids {
            if let Some(s) = self.slots.get_mut(id) {
                s.dirty = false;
            }
        }
        Ok(())
    }

    /// Algorithm 4 (FetchPage): the page, read from the device if not resident.
    pub fn fetch(&mut self, dev: &dyn PageDevice, id: PageId) -> Result<Arc<T>> {
        if let Some(s) = self.slots.get(&id) {
            let hot = s.hot;
            self.stats.hits += 1;
            if hot {
                self.move_to_hot_mru(id);
            } else {
                self.promote(dev, id)?;
            }
        } else {
            self.stats.misses += 1;
            let mut buf = vec![0u8; dev.page_size()];
            dev.read(id, &mut buf)?;
            self.stats.read_batches += 1;
            let val = T::decode(id, &buf)?;
            self.make_room(dev)?;
            self.insert_hot(id, val, false);
        }
        self.slots
            .get(&id)
            .map(|s| Arc::clone(&s.val))
            .ok_or_else(|| {
                Error::invalid(format!("grid buffer: page {id} not resident after fetch"))
            })
    }

    /// Fetches many pages, reading all missing ones in **one** device batch
    /// (the group read of the thesis). Values are returned in the order of `ids`.
    pub fn fetch_many(&mut self, dev: &dyn PageDevice, ids: &[PageId]) -> Result<Vec<Arc<T>>> {
        let mut out: Vec<Option<Arc<T>>> = Vec::with_capacity(ids.len());
        let mut missing: Vec<PageId> = Vec::new();
        for &id in ids {
            match self.slots.get(&id) {
                Some(s) => {
                    out.push(Some(Arc::clone(&s.val)));
                    self.stats.hits += 1;
                    if s.hot {
                        self.move_to_hot_mru(id);
                    }
                }
                None => {
                    out.push(None);
                    if !missing.contains(&id) {
                        missing.push(id);
                    }
                }
            }
        }
        if !missing.is_empty() {
            // One device batch, each page decoded as the device hands it
            // over (on a file, while the rest is still being read).
            let values = read_decoded(dev, &missing, |page, id| T::decode(id, page))?;
            self.stats.read_batches += 1;
            self.stats.misses += missing.len() as u64;
            let mut decoded: HashMap<PageId, Arc<T>> = HashMap::with_capacity(missing.len());
            for (&id, val) in missing.iter().zip(values) {
                let val = Arc::new(val);
                decoded.insert(id, Arc::clone(&val));
                self.make_room(dev)?;
                self.insert_hot_arc(id, val, false);
            }
            for (slot, &id) in out.iter_mut().zip(ids) {
                if slot.is_none() {
                    *slot = decoded.get(&id).cloned();
                }
            }
        }
        out.into_iter()
            .zip(ids)
            .map(|(v, id)| {
                v.ok_or_else(|| {
                    Error::invalid(format!("grid buffer: page {id} missing from a group read"))
                })
            })
            .collect()
    }

    fn insert_hot(&mut self, id: PageId, val: T, dirty: bool) {
        self.insert_hot_arc(id, Arc::new(val), dirty)
    }

    fn insert_hot_arc(&mut self, id: PageId, val: Arc<T>, dirty: bool) {
        let t = self.tick();
        self.slots.insert(
            id,
            Slot {
                val,
                dirty,
                hot: true,
                stamp: t,
                tier: self.default_tier,
            },
        );
        self.hot.insert(t, id);
    }

    /// Stores a new or changed page as dirty at the MRU end of the hot list.
    pub fn put(&mut self, dev: &dyn PageDevice, id: PageId, val: T) -> Result<()> {
        if let Some(s) = self.slots.get_mut(&id) {
            s.val = Arc::new(val);
            s.dirty = true;
            if s.hot {
                self.move_to_hot_mru(id);
            } else {
                self.promote(dev, id)?;
            }
        } else {
            self.make_room(dev)?;
            self.insert_hot(id, val, true);
        }
        Ok(())
    }

    /// Makes room for `n` more hot pages before they are [staged](Self::stage):
    /// evicts (Algorithm 5) while the hot list would overflow. Eviction only
    /// moves pages to the cold list and writes it, so an error here leaves
    /// every page's value as it was.
    pub fn reserve(&mut self, dev: &dyn PageDevice, n: usize) -> Result<()> {
        while !self.hot.is_empty() && self.hot.len() + n > self.hot_cap {
            self.evict(dev)?;
        }
        Ok(())
    }

    /// [`reserve`](Self::reserve)s room for staging the pages of `ids`
    /// (distinct) that are not in the hot list: the eviction
    /// [`put`](Self::put)ting them would do, done first.
    pub fn reserve_for(&mut self, dev: &dyn PageDevice, ids: &[PageId]) -> Result<()> {
        let n = ids
            .iter()
            .filter(|id| !self.slots.get(id).is_some_and(|s| s.hot))
            .count();
        self.reserve(dev, n)
    }

    /// Stores a new or changed page as dirty at the MRU end of the hot list
    /// without evicting anything: it cannot fail. Without a
    /// [`reserve`](Self::reserve) first, the hot list overshoots until the
    /// next miss or put makes room.
    pub fn stage(&mut self, id: PageId, val: T) {
        self.stage_arc(id, Arc::new(val));
    }

    /// [`stage`](Self::stage) of a shared value.
    pub fn stage_arc(&mut self, id: PageId, val: Arc<T>) {
        if self.slots.contains_key(&id) {
            self.unlink(id);
            let t = self.tick();
            if let Some(s) = self.slots.get_mut(&id) {
                s.val = val;
                s.dirty = true;
                s.hot = true;
                s.stamp = t;
                self.hot.insert(t, id);
            }
        } else {
            self.insert_hot_arc(id, val, true);
        }
    }

    /// Forgets page `id` as [`remove`](Self::remove) does, returning its
    /// value if it was dirty (the device does not hold it), so that
    /// [`stage_arc`](Self::stage_arc) can put it back.
    pub fn take_dirty(&mut self, id: PageId) -> Option<Arc<T>> {
        self.unlink(id);
        self.slots.remove(&id).filter(|s| s.dirty).map(|s| s.val)
    }

    /// Fetches page `id`, applies `f` to it (cloning only if a query still
    /// holds the old value) and marks it dirty.
    pub fn update<R>(
        &mut self,
        dev: &dyn PageDevice,
        id: PageId,
        f: impl FnOnce(&mut T) -> R,
    ) -> Result<R> {
        self.fetch(dev, id)?;
        let s = self.slots.get_mut(&id).ok_or_else(|| {
            Error::invalid(format!("grid buffer: page {id} not resident after fetch"))
        })?;
        s.dirty = true;
        Ok(f(Arc::make_mut(&mut s.val)))
    }

    /// Forgets page `id` without writing it (the page was freed).
    pub fn remove(&mut self, id: PageId) {
        self.unlink(id);
        self.slots.remove(&id);
    }

    /// Writes every dirty page (hot and cold) in batches of the cold list's size.
    pub fn flush_all(&mut self, dev: &dyn PageDevice) -> Result<()> {
        for tier in TIERS {
            let mut ids: Vec<PageId> = self
                .slots
                .iter()
                .filter(|(_, s)| s.dirty && s.tier == tier)
                .map(|(id, _)| *id)
                .collect();
            ids.sort_unstable();
            for chunk in ids.chunks(self.cold_cap) {
                self.write_pages(dev, chunk)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::mem::MemDevice;

    #[derive(Clone, Debug, PartialEq)]
    struct V(u64);
    impl PageValue for V {
        fn encode(&self, page_size: usize) -> Result<Vec<u8>> {
            super::super::codec::frame(
                super::super::codec::PageKind::Bucket,
                &self.0.to_le_bytes(),
                page_size,
            )
        }
        fn decode(id: PageId, page: &[u8]) -> Result<Self> {
            let p =
                super::super::codec::unframe_kind(id, page, super::super::codec::PageKind::Bucket)?;
            let mut r = super::super::codec::Reader::new(p, Some(id));
            Ok(V(r.u64()?))
        }
    }

    #[test]
    fn dirty_pages_leave_only_in_cold_batches() {
        let dev = MemDevice::new(512, 1000).unwrap();
        let mut b: HotCold<V> = HotCold::new(4, 8).unwrap();
        for i in 0..100u64 {
            b.put(&dev, i, V(i * 10)).unwrap();
        }
        let s = dev.stats().io;
        assert!(s.write_batches > 0);
        // Every batch write carried a full cold list.
        assert_eq!(s.pages_written, s.write_batches * 8);
        assert_eq!(b.stats().pages_written, s.pages_written);
        assert!(b.resident().0 <= 4 && b.resident().1 <= 8);
        b.flush_all(&dev).unwrap();
        // Everything reads back, from memory or from the device.
        let mut fresh: HotCold<V> = HotCold::new(4, 8).unwrap();
        for i in 0..100u64 {
            assert_eq!(*fresh.fetch(&dev, i).unwrap(), V(i * 10));
            assert_eq!(*b.fetch(&dev, i).unwrap(), V(i * 10));
        }
    }

    #[test]
    fn fetch_many_reads_missing_pages_in_one_batch() {
        let dev = MemDevice::new(512, 100).unwrap();
        let mut b: HotCold<V> = HotCold::new(16, 4).unwrap();
        for i in 0..10u64 {
            b.put(&dev, i, V(i)).unwrap();
        }
        b.flush_all(&dev).unwrap();
        let mut c: HotCold<V> = HotCold::new(16, 4).unwrap();
        c.fetch(&dev, 3).unwrap();
        dev.reset_stats();
        let vals = c.fetch_many(&dev, &[5, 3, 7, 5, 9]).unwrap();
        assert_eq!(
            vals.iter().map(|v| v.0).collect::<Vec<_>>(),
            vec![5, 3, 7, 5, 9]
        );
        let s = dev.stats().io;
        assert_eq!((s.read_batches, s.pages_read), (1, 3));
    }

    #[test]
    fn cold_page_is_found_again_and_clean_victims_are_dropped() {
        let dev = MemDevice::new(512, 100).unwrap();
        let mut b: HotCold<V> = HotCold::new(2, 2).unwrap();
        b.put(&dev, 1, V(1)).unwrap();
        b.put(&dev, 2, V(2)).unwrap();
        b.put(&dev, 3, V(3)).unwrap(); // 1 goes cold
        assert_eq!(b.resident(), (2, 1));
        assert_eq!(dev.stats().io.pages_written, 0);
        assert_eq!(b.fetch(&dev, 1).unwrap().0, 1); // back to hot without I/O
        assert_eq!(dev.stats().io.pages_read, 0);
        b.update(&dev, 2, |v| v.0 = 22).unwrap();
        b.flush_all(&dev).unwrap();
        b.remove(2);
        assert_eq!(b.fetch(&dev, 2).unwrap().0, 22);
        assert!(HotCold::<V>::new(0, 1).is_err());
    }
}
