//! A two-tier device: a small fast tier (3D XPoint-like) in front of a slow
//! tier (flash), as in Ch. 4 of Fevgas' thesis (H-Grid, sHR-tree).
//!
//! The logical pages are those of the slow tier (`capacity()` is its
//! capacity). A **placement map** says which pages live on the fast tier,
//! each in a slot of its own; every other page lives on the slow tier under
//! its own number. Three ways put a page on the fast tier:
//! - a **hint** ([`PageDevice::hint_tier`]) from the layer above: the page
//!   moves to the hinted tier at its next write (a whole-page write, so no
//!   copy is needed); this is how stores place tree nodes
//!   ([`crate::store::placement`]) and how H-Grid places hot pages;
//! - [`HybridDevice::with_fast_range`]: pages below a bound go to the fast
//!   tier at their first write;
//! - [`HybridDevice::place`] moves a page at once, copying its contents.
//!
//! The fast tier holds at most `fast_pages` pages (its capacity, or less with
//! [`HybridDevice::with_fast_pages`] / the spec's `&fast_pages=N`). When it is
//! full a page meant for it stays on the slow tier — the graceful fallback the
//! thesis assumes — and is counted in [`HybridDevice::fallbacks`]. A trim
//! frees the page's fast slot.
//!
//! **Across processes** the map is kept durable on a small device of its
//! own ([`HybridDevice::with_map`], [`super::tier_map`]; an index directory's
//! `tiers.map`): saved at each [`sync`](PageDevice::sync) after a change,
//! once both tiers are synced, as one of two alternating checksummed copies,
//! and loaded at open, so a reopened index finds its pages where they were.
//! A slot freed since the last save is reused only after the next one, so a
//! crash leaves the saved map consistent with the tiers. A tier whose
//! contents become durable only when its owner saves them (a simulator,
//! whose image an index directory saves at checkpoints) needs the map
//! saved with them instead ([`MapSaves::WithOwner`]): the owner takes a
//! snapshot ([`HybridIo::map_to_save`]), saves it with the tiers' state,
//! and reports the save ([`HybridIo::map_saved`]). Without a map device
//! the map lives in its process (memory tiers, tests).
//!
//! A page that moves to the fast tier leaves its old copy on the slow one
//! until nothing names it: trimmed after its write without a durable map,
//! after the next save of the map with one (a simulated slow tier would
//! otherwise keep collecting dead pages).
//!
//! A batch is split into its fast and slow parts, each submitted to its tier
//! as one batch, the slow part first; a part that fails undoes the placement
//! changes it needed, so each page of a failed batch reads its old contents
//! or its new ones. Counters: host counters of the hybrid device itself, and
//! per tier in [`HybridDevice::tier_stats`]; the simulator counters (when a
//! tier is simulated) add both tiers' NAND counts and simulated times (the
//! tiers are driven one after the other).
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use super::tier_map::{TierGeometry, TierMapStore};
pub use super::Tier;
use super::{Counted, DeviceExt, DeviceGeometry, DeviceStats, PageDevice, PageId, SimCounters};
use crate::{Error, Result};

/// The spec of a 3D XPoint-like tier on the flash simulator: read 7 µs,
/// write 18 µs (Intel Optane, Table 4.1 of the thesis); see the `xpoint`
/// preset of [`FlashSimConfig`](super::flashsim::FlashSimConfig).
#[cfg(test)]
pub const XPOINT_SPEC: &str = "flashsim:preset=xpoint";

/// Part of a batch for one tier: `(index in the batch, page on the tier)`.
type Parts = Vec<(usize, u64)>;

#[derive(Debug, Default)]
struct Inner {
    slot: HashMap<PageId, u64>,
    free_slots: Vec<u64>,
    next_slot: u64,
    fast_limit: u64,
    fast_range: u64,
    /// Pending hints: the tier each page goes to at its next write.
    hint: HashMap<PageId, Tier>,
    refused: HashSet<PageId>,
    fallbacks: u64,
    /// The durable map, when the device keeps one.
    persist: Option<Persist>,
}

/// The durable side of the placement map ([`HybridDevice::with_map`]).
#[derive(Debug)]
struct Persist {
    store: Arc<TierMapStore>,
    /// Generation of the newest saved copy.
    generation: u64,
    /// The map changed since it was last saved.
    dirty: bool,
    /// Slots freed since the last save: the saved map may still name them,
    /// so they are neither reused nor (for pages that moved to the slow
    /// tier) trimmed until the next save.
    released: Vec<u64>,
    /// Pages that took a fast slot since the last save, with the slot:
    /// their slow-tier copies are what the saved map names until the next
    /// save, and are trimmed once a saved map places them on the fast tier.
    moved: Vec<(PageId, u64)>,
    /// When the map is saved.
    saves: MapSaves,
}

internal! {
    /// When a [`HybridDevice`] saves its durable map.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum MapSaves {
        /// At every [`sync`](PageDevice::sync) after a change, once both
        /// tiers are synced: tiers whose contents a sync makes durable (files).
        AtSync,
        /// When the owner of the tiers' state saves it
        /// ([`HybridIo::map_to_save`], [`HybridIo::map_saved`]): tiers whose
        /// contents are durable only then (simulators, saved as images at
        /// checkpoints). A map saved at syncs would name slots whose
        /// contents the saved state does not hold.
        WithOwner,
    }
}

/// A snapshot of the placement map for its owner to save
/// ([`HybridIo::map_to_save`]).
#[derive(Debug, Clone)]
pub struct MapToSave {
    /// The geometry the map is written for.
    pub geometry: TierGeometry,
    /// Its generation (one past the last saved).
    pub generation: u64,
    /// Page → fast slot.
    pub slots: BTreeMap<PageId, u64>,
    /// Slots released before the snapshot, freed once it is saved.
    released: usize,
    /// Pages moved to the fast tier before the snapshot, whose slow copies
    /// are trimmed once it is saved.
    moved: usize,
}

internal! {
    /// How [`HybridDevice::with_map`] treats the map device.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum MapOpen {
        /// A new device: every page on the slow tier; an empty map is saved at once.
        Create,
        /// An existing device: the saved map is loaded (it must exist).
        Open,
    }
}

/// A device of two tiers (see the module docs), counted.
pub type HybridDevice = Counted<HybridIo>;

internal! {
    /// The two tiers behind a [`HybridDevice`] and their placement map, uncounted.
    pub struct HybridIo {
        fast: Arc<dyn PageDevice>,
        slow: Arc<dyn PageDevice>,
        inner: Mutex<Inner>,
        /// Held through a save of the map, so two syncs never write one region at once.
        saving: Mutex<()>,
    }
}

impl std::fmt::Debug for HybridIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl HybridDevice {
    /// A hybrid of `fast` and `slow` (same page size) with every page on the
    /// slow tier until placed; the whole fast tier is usable.
    pub fn new(fast: Arc<dyn PageDevice>, slow: Arc<dyn PageDevice>) -> Result<Self> {
        if fast.page_size() != slow.page_size() {
            return Err(Error::invalid(format!(
                "hybrid device tiers have different page sizes ({} and {})",
                fast.page_size(),
                slow.page_size()
            )));
        }
        let inner = Inner {
            fast_limit: fast.capacity(),
            ..Inner::default()
        };
        Ok(Counted::wrap(HybridIo {
            fast,
            slow,
            inner: Mutex::new(inner),
            saving: Mutex::new(()),
        }))
    }

    /// Places pages `0..n` on the fast tier when first written (as far as it has room).
    #[cfg(test)]
    pub fn with_fast_range(self, n: u64) -> Self {
        self.lock().fast_range = n;
        self
    }

    /// Uses at most `n` pages of the fast tier (at most its capacity).
    pub fn with_fast_pages(self, n: u64) -> Self {
        {
            let mut g = self.lock();
            g.fast_limit = n.min(self.fast.capacity());
        }
        self
    }

    /// Keeps the placement map durable on `map` (see `super::tier_map`;
    /// set the fast tier's limit first, [`with_fast_pages`](Self::with_fast_pages):
    /// it sizes the map and must be the same at every open):
    /// loaded now (`MapOpen::Open`) or saved empty now
    /// (`MapOpen::Create`), then saved at every [`sync`](PageDevice::sync)
    /// that follows a change, after both tiers are synced. Until a save, a
    /// slot the saved map may still name is not reused, so a crash leaves
    /// the saved map and the tiers consistent: the pages read what they
    /// held at that save, or what was written to them since on the same tier.
    pub fn with_map(self, map: Arc<dyn PageDevice>, how: MapOpen) -> Result<Self> {
        let store = Arc::new(TierMapStore::new(map, self.map_geometry()?)?);
        let mut persist = Persist {
            store,
            generation: 0,
            dirty: false,
            released: Vec::new(),
            moved: Vec::new(),
            saves: MapSaves::AtSync,
        };
        let mut g = self.lock();
        match how {
            MapOpen::Create => {
                persist.generation = 1;
                persist.store.save(1, &BTreeMap::new())?;
                g.slot.clear();
                g.free_slots.clear();
                g.next_slot = 0;
            }
            MapOpen::Open => {
                let saved = persist.store.load()?.ok_or_else(|| {
                    Error::corrupt(
                        None,
                        format!(
                            "{} holds no placement map: the tiers' pages cannot be found",
                            persist.store.device().describe()
                        ),
                    )
                })?;
                persist.generation = saved.generation;
                let used: HashSet<u64> = saved.slots.values().copied().collect();
                g.next_slot = saved.slots.values().map(|s| s + 1).max().unwrap_or(0);
                let limit = g.fast_limit;
                g.free_slots = (0..g.next_slot.min(limit))
                    .rev()
                    .filter(|s| !used.contains(s))
                    .collect();
                g.slot = saved.slots.into_iter().collect();
            }
        }
        g.persist = Some(persist);
        drop(g);
        Ok(self)
    }

    /// Saves the durable map when `saves` says (set after
    /// [`with_map`](Self::with_map); the default is `MapSaves::AtSync`).
    pub fn saving_map(self, saves: MapSaves) -> Self {
        if let Some(p) = self.lock().persist.as_mut() {
            p.saves = saves;
        }
        self
    }
}

impl HybridIo {
    /// The geometry a placement map of these tiers is written for.
    fn map_geometry(&self) -> Result<TierGeometry> {
        Ok(TierGeometry {
            page_size: u32::try_from(self.page_size())
                .map_err(|_| Error::invalid("page size too large for a placement map"))?,
            slow_capacity: self.slow.capacity(),
            fast_capacity: self.fast.capacity(),
            fast_limit: self.fast_limit(),
        })
    }

    /// A snapshot of the map for its owner to save with the tiers' state
    /// ([`MapSaves::WithOwner`]; `None` without a durable map). The owner
    /// saves it, then calls [`map_saved`](Self::map_saved), with no write
    /// to the device in between.
    pub fn map_to_save(&self) -> Result<Option<MapToSave>> {
        let geometry = self.map_geometry()?;
        let g = self.lock();
        let Some(p) = g.persist.as_ref() else {
            return Ok(None);
        };
        Ok(Some(MapToSave {
            geometry,
            generation: p.generation + 1,
            slots: g.slot.iter().map(|(&p, &s)| (p, s)).collect(),
            released: p.released.len(),
            moved: p.moved.len(),
        }))
    }

    /// The snapshot `saved` ([`map_to_save`](Self::map_to_save)) is durable
    /// with the tiers' state: the slots released before it are free (and
    /// trimmed on the fast tier), and the slow copies of the pages it
    /// places on the fast tier are trimmed.
    pub fn map_saved(&self, saved: &MapToSave) -> Result<()> {
        let released: Vec<u64> = {
            let mut g = self.lock();
            let Some(p) = g.persist.as_mut() else {
                return Ok(());
            };
            p.generation = p.generation.max(saved.generation);
            p.dirty = false;
            let n = saved.released.min(p.released.len());
            let freed: Vec<u64> = p.released.drain(..n).collect();
            let n = saved.moved.min(p.moved.len());
            let moved: Vec<(PageId, u64)> = p.moved.drain(..n).collect();
            g.free_slots.extend(freed.iter().copied());
            self.trim_moved(&g, &moved, Some(&saved.slots))?;
            freed
        };
        if !released.is_empty() {
            self.fast.trim(&released)?;
        }
        Ok(())
    }

    /// The pages on the fast tier, in order.
    #[cfg(test)]
    pub fn fast_page_ids(&self) -> Vec<PageId> {
        let mut v: Vec<PageId> = self.lock().slot.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Saves the map if it changed since its last save, then frees the
    /// slots released since (trimming them on the fast tier).
    fn save_map(&self) -> Result<()> {
        let _saving = self.saving.lock().unwrap_or_else(|e| e.into_inner());
        // Snapshot under the lock; the save's I/O runs outside it.
        let (store, generation, slots, released, moved) = {
            let mut g = self.lock();
            let snapshot: BTreeMap<PageId, u64> = g.slot.iter().map(|(&p, &s)| (p, s)).collect();
            let Some(p) = g.persist.as_mut() else {
                return Ok(());
            };
            if !p.dirty || p.saves == MapSaves::WithOwner {
                return Ok(());
            }
            p.dirty = false;
            (
                p.store.clone(),
                p.generation + 1,
                snapshot,
                std::mem::take(&mut p.released),
                std::mem::take(&mut p.moved),
            )
        };
        if let Err(e) = store.save(generation, &slots) {
            let mut g = self.lock();
            if let Some(p) = g.persist.as_mut() {
                p.dirty = true;
                p.released.extend(released);
                p.moved.splice(0..0, moved);
            }
            return Err(e);
        }
        {
            let mut g = self.lock();
            if let Some(p) = g.persist.as_mut() {
                p.generation = generation;
            }
            g.free_slots.extend(released.iter().copied());
            self.trim_moved(&g, &moved, Some(&slots))?;
        }
        if !released.is_empty() {
            self.fast.trim(&released)?;
        }
        Ok(())
    }

    /// A slot no page uses any more: free at once, or (with a durable map)
    /// after the next save. Returns whether the caller may trim it now.
    fn release_slot(g: &mut Inner, slot: u64) -> bool {
        match g.persist.as_mut() {
            Some(p) => {
                p.dirty = true;
                p.released.push(slot);
                false
            }
            None => {
                g.free_slots.push(slot);
                true
            }
        }
    }

    /// Trims the slow-tier copies of `moved` pages that are still in the
    /// fast slot they took (and, after a save, in that slot in the saved
    /// map `saved`): the slow copy is then dead. Called with the lock held
    /// (`g`), so that no write moves such a page back to the slow tier
    /// between the check and the trim.
    fn trim_moved(
        &self,
        g: &Inner,
        moved: &[(PageId, u64)],
        saved: Option<&BTreeMap<PageId, u64>>,
    ) -> Result<()> {
        let mut dead: Vec<PageId> = moved
            .iter()
            .filter(|&&(p, s)| {
                g.slot.get(&p) == Some(&s) && saved.is_none_or(|m| m.get(&p) == Some(&s))
            })
            .map(|&(p, _)| p)
            .collect();
        dead.sort_unstable();
        dead.dedup();
        if dead.is_empty() {
            return Ok(());
        }
        self.slow.trim(&dead)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pages meant for the fast tier that stayed on the slow one because it
    /// was full (each page counted once).
    #[cfg(test)]
    pub fn fallbacks(&self) -> u64 {
        self.lock().fallbacks
    }

    /// Pages on the fast tier.
    #[cfg(test)]
    pub fn fast_pages(&self) -> u64 {
        self.lock().slot.len() as u64
    }

    /// Pages the fast tier may hold.
    pub fn fast_limit(&self) -> u64 {
        self.lock().fast_limit
    }

    /// The tier page `p` lives on now.
    pub fn tier_of(&self, p: PageId) -> Tier {
        if self.lock().slot.contains_key(&p) {
            Tier::Fast
        } else {
            Tier::Slow
        }
    }

    /// The counters of each tier's own device: `(fast, slow)`.
    pub fn tier_stats(&self) -> (DeviceStats, DeviceStats) {
        (self.fast.stats(), self.slow.stats())
    }

    /// A fast slot for `p` if it belongs there and one is free.
    fn fast_slot(&self, g: &mut Inner, p: PageId, want_fast: bool) -> Option<u64> {
        if let Some(&s) = g.slot.get(&p) {
            return Some(s);
        }
        if !want_fast {
            return None;
        }
        let s = match g.free_slots.pop() {
            Some(s) => s,
            None if g.next_slot < g.fast_limit => {
                g.next_slot += 1;
                g.next_slot - 1
            }
            None => {
                if g.refused.insert(p) {
                    g.fallbacks += 1;
                }
                return None;
            }
        };
        g.slot.insert(p, s);
        if let Some(m) = g.persist.as_mut() {
            m.dirty = true;
        }
        Some(s)
    }

    /// Moves page `p` to `tier` now, copying its contents. Returns the tier
    /// it ended on (the slow one if the fast tier is full).
    #[cfg(test)]
    pub fn place(&self, p: PageId, tier: Tier) -> Result<Tier> {
        self.geometry().check_pages(&[p])?;
        let ps = self.page_size();
        let mut g = self.lock();
        g.hint.remove(&p);
        let cur = g.slot.get(&p).copied();
        match (cur, tier) {
            (Some(_), Tier::Fast) | (None, Tier::Slow) => Ok(tier),
            (None, Tier::Fast) => {
                let mut buf = vec![0u8; ps];
                self.slow.read(p, &mut buf)?;
                let Some(s) = self.fast_slot(&mut g, p, true) else {
                    return Ok(Tier::Slow);
                };
                self.fast.write(s, &buf)?;
                Ok(Tier::Fast)
            }
            (Some(s), Tier::Slow) => {
                let mut buf = vec![0u8; ps];
                self.fast.read(s, &mut buf)?;
                self.slow.write(p, &buf)?;
                g.slot.remove(&p);
                if Self::release_slot(&mut g, s) {
                    self.fast.trim(&[s])?;
                }
                Ok(Tier::Slow)
            }
        }
    }

    /// The fast slots writes of `pages` may use ([`PageDevice::reserve`]),
    /// as ranges: those the pages hold, then, for as many pages as may take
    /// one (hinted fast, or below the fast range), the slots handed out
    /// next: the last free ones, the last released ones (free once the map
    /// is saved, and handed out first then) and the tier's next new ones
    /// (one range).
    fn fast_slots_for(&self, pages: &std::ops::Range<PageId>) -> Vec<std::ops::Range<u64>> {
        let g = self.lock();
        let held = g.slot.iter().filter(|(p, _)| pages.contains(p));
        let mut slots: Vec<u64> = held.map(|(_, &s)| s).collect();
        let in_range = pages.end.min(g.fast_range).saturating_sub(pages.start);
        let hinted = g
            .hint
            .iter()
            .filter(|&(p, t)| *t == Tier::Fast && pages.contains(p) && *p >= g.fast_range)
            .count() as u64;
        let room = g.fast_limit.saturating_sub(g.slot.len() as u64);
        let taking = (in_range + hinted).min(room);
        let n = usize::try_from(taking).unwrap_or(usize::MAX);
        slots.extend(g.free_slots.iter().rev().take(n));
        if let Some(p) = &g.persist {
            slots.extend(p.released.iter().rev().take(n));
        }
        let end = g.next_slot.saturating_add(taking).min(g.fast_limit);
        let mut ranges: Vec<std::ops::Range<u64>> = slots.into_iter().map(|s| s..s + 1).collect();
        if g.next_slot < end {
            ranges.push(g.next_slot..end);
        }
        ranges
    }

    /// Splits a read batch by where its pages live: `(index in batch, fast
    /// slot)` and `(index, slow page)`.
    fn split_read(&self, pages: &[PageId]) -> (Parts, Parts) {
        let g = self.lock();
        let (mut f, mut s) = (Vec::new(), Vec::new());
        for (i, &p) in pages.iter().enumerate() {
            match g.slot.get(&p) {
                Some(&slot) => f.push((i, slot)),
                None => s.push((i, p)),
            }
        }
        (f, s)
    }

    /// Splits a write batch, applying pending hints and the fast range: a
    /// page hinted slow leaves its fast slot (the write replaces the whole
    /// page), a page hinted fast takes a slot if one is free. No I/O: the
    /// placement changes are returned with the parts, to be undone if the
    /// write fails ([`HybridIo::undo`]).
    fn split_write(&self, pages: &[PageId]) -> WriteSplit {
        let mut g = self.lock();
        let mut split = WriteSplit::default();
        for (i, &p) in pages.iter().enumerate() {
            let hint = g.hint.remove(&p);
            if hint == Some(Tier::Slow) {
                if let Some(slot) = g.slot.remove(&p) {
                    split.changes.push(Change::Left { page: p, slot });
                    if Self::release_slot(&mut g, slot) {
                        split.trim_now.push(slot);
                    }
                }
            }
            let want = match hint {
                Some(t) => t == Tier::Fast,
                None => p < g.fast_range,
            };
            let held = g.slot.contains_key(&p);
            let next = g.next_slot;
            let slot = self.fast_slot(&mut g, p, want);
            if let (Some(slot), false) = (slot, held) {
                let reused = g.next_slot == next;
                split.changes.push(Change::Took { page: p, slot, reused });
                match g.persist.as_mut() {
                    Some(m) => m.moved.push((p, slot)),
                    None => split.moved.push((p, slot)),
                }
            }
            if let Some(tier) = hint {
                let fast = slot.is_some();
                split.changes.push(Change::Hint { page: p, tier, fast });
            }
            match slot {
                Some(slot) => split.fast.push((i, slot)),
                None => split.slow.push((i, p)),
            }
        }
        split
    }

    /// Undoes the placement changes of a write that failed, newest first:
    /// all of them (`all`: nothing of the batch was written), or those of
    /// its fast part (its slow part was written: the pages that left the
    /// fast tier stay on the slow one). A page that was to move keeps its
    /// old place, which still holds its old contents, and its hint.
    fn undo(&self, changes: &[Change], all: bool) {
        let mut g = self.lock();
        for change in changes.iter().rev() {
            match *change {
                Change::Took { page, slot, reused } => {
                    g.slot.remove(&page);
                    if let Some(m) = g.persist.as_mut() {
                        if let Some(at) = m.moved.iter().rposition(|&e| e == (page, slot)) {
                            m.moved.remove(at);
                        }
                    }
                    if !reused && g.next_slot == slot + 1 {
                        g.next_slot = slot;
                    } else {
                        g.free_slots.push(slot);
                    }
                }
                Change::Left { page, slot } if all => {
                    let list = match g.persist.as_mut() {
                        Some(p) => &mut p.released,
                        None => &mut g.free_slots,
                    };
                    // (A save since may have freed the slot: the page then
                    // stays on the slow tier.)
                    if let Some(at) = list.iter().rposition(|&s| s == slot) {
                        list.remove(at);
                        g.slot.insert(page, slot);
                    }
                }
                Change::Hint { page, tier, fast } if all || fast => {
                    g.hint.entry(page).or_insert(tier);
                }
                Change::Left { .. } | Change::Hint { .. } => {}
            }
        }
    }

    /// Writes one part of a batch to `dev`.
    fn write_part(dev: &dyn PageDevice, part: &Parts, data: &[u8], ps: usize) -> Result<()> {
        if part.is_empty() {
            return Ok(());
        }
        let ids: Vec<PageId> = part.iter().map(|t| t.1).collect();
        let mut tmp = Vec::with_capacity(ids.len() * ps);
        for (i, _) in part {
            tmp.extend_from_slice(data.get(i * ps..(i + 1) * ps).unwrap_or_default());
        }
        dev.write_batch(&ids, &tmp)
    }
}

/// A write batch split by tier ([`HybridIo::split_write`]).
#[derive(Debug, Default)]
struct WriteSplit {
    fast: Parts,
    slow: Parts,
    /// The placement changes, in order.
    changes: Vec<Change>,
    /// Fast slots freed at once (no durable map), to trim once the pages
    /// that left them are on the slow tier.
    trim_now: Vec<u64>,
    /// Pages that took a fast slot (no durable map), whose slow copies are
    /// trimmed once they are on the fast tier.
    moved: Vec<(PageId, u64)>,
}

/// One placement change of a write batch, undone if the write fails.
#[derive(Debug, Clone, Copy)]
enum Change {
    /// `page` took fast slot `slot`, a free one (`reused`) or a new one.
    Took { page: PageId, slot: u64, reused: bool },
    /// `page` left fast slot `slot` for the slow tier.
    Left { page: PageId, slot: u64 },
    /// `page`'s pending hint was applied; `fast`: the page went to the fast part.
    Hint { page: PageId, tier: Tier, fast: bool },
}

fn add_sim(a: Option<SimCounters>, b: Option<SimCounters>) -> Option<SimCounters> {
    match (a, b) {
        (None, None) => None,
        (Some(x), None) | (None, Some(x)) => Some(x),
        (Some(x), Some(y)) => {
            let mut sum = x;
            sum.add(&y);
            // Two devices: the retired blocks of both (`add` keeps the
            // later batch's snapshot of one device), and the erase counts
            // of both tiers' blocks.
            sum.retired_blocks = x.retired_blocks.saturating_add(y.retired_blocks);
            sum.erase_count_min = x.erase_count_min.min(y.erase_count_min);
            sum.erase_count_mean = weighted_mean(&x, &y);
            sum.erase_blocks = x.erase_blocks.saturating_add(y.erase_blocks);
            sum.erase_count_max = x.erase_count_max.max(y.erase_count_max);
            Some(sum)
        }
    }
}

/// The mean erase count over the blocks of two devices: each device's
/// mean weighted by its blocks (the plain mean of the two when neither
/// says how many blocks it has).
fn weighted_mean(x: &SimCounters, y: &SimCounters) -> f64 {
    let blocks = x.erase_blocks.saturating_add(y.erase_blocks);
    if blocks == 0 {
        return (x.erase_count_mean + y.erase_count_mean) / 2.0;
    }
    (x.erase_count_mean * x.erase_blocks as f64 + y.erase_count_mean * y.erase_blocks as f64)
        / blocks as f64
}

impl PageDevice for HybridIo {
    fn geometry(&self) -> DeviceGeometry {
        self.slow.geometry()
    }

    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        let ps = self.page_size();
        let (f, s) = self.split_read(pages);
        for (dev, part) in [(&self.fast, &f), (&self.slow, &s)] {
            if part.is_empty() {
                continue;
            }
            let ids: Vec<PageId> = part.iter().map(|t| t.1).collect();
            let mut tmp = vec![0u8; ids.len() * ps];
            dev.read_batch(&ids, &mut tmp)?;
            for (k, (i, _)) in part.iter().enumerate() {
                if let (Some(dst), Some(src)) = (
                    buf.get_mut(i * ps..(i + 1) * ps),
                    tmp.get(k * ps..(k + 1) * ps),
                ) {
                    dst.copy_from_slice(src);
                }
            }
        }
        Ok(())
    }

    /// The slow part first, then the fast one: a page leaving the fast
    /// tier is on the slow one before its slot is trimmed or taken by
    /// another page of the batch. A part that fails undoes the placement
    /// changes it needed ([`HybridIo::undo`]), so every page reads its old
    /// contents or (where its part was written) its new ones.
    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        let ps = self.page_size();
        let split = self.split_write(pages);
        if let Err(e) = Self::write_part(&*self.slow, &split.slow, data, ps) {
            self.undo(&split.changes, true);
            return Err(e);
        }
        let fast = if split.trim_now.is_empty() {
            Ok(())
        } else {
            self.fast.trim(&split.trim_now)
        };
        if let Err(e) = fast.and_then(|()| Self::write_part(&*self.fast, &split.fast, data, ps)) {
            self.undo(&split.changes, false);
            return Err(e);
        }
        // Without a durable map nothing names the old slow copies of the
        // pages that moved to the fast tier: trimmed now (with a map, once
        // a saved map places them there).
        if split.moved.is_empty() {
            return Ok(());
        }
        let g = self.lock();
        self.trim_moved(&g, &split.moved, None)
    }

    fn sync(&self) -> Result<()> {
        self.fast.sync()?;
        self.slow.sync()?;
        // The map last: it names only pages whose contents are durable
        // (unless its owner saves it with the tiers' state).
        self.save_map()
    }

    fn trim(&self, pages: &[PageId]) -> Result<()> {
        // A trimmed page leaves the fast tier; both copies read as zeros.
        let mut slots = Vec::new();
        {
            let mut g = self.lock();
            for p in pages {
                g.hint.remove(p);
                if let Some(s) = g.slot.remove(p) {
                    // The page above is trimmed: its old slot may read
                    // zeros at once, but is reused only after a map save.
                    Self::release_slot(&mut g, s);
                    slots.push(s);
                }
            }
        }
        if !slots.is_empty() {
            self.fast.trim(&slots)?;
        }
        self.slow.trim(pages)
    }

    /// Reserves what writes of `pages` may take: the slow tier's pages of
    /// the whole range (each page may live there, or fall back to it when
    /// the fast tier is full) and the fast slots of
    /// [`HybridIo::fast_slots_for`].
    fn reserve(&self, pages: std::ops::Range<PageId>) -> Result<()> {
        let slots = self.fast_slots_for(&pages);
        self.slow.reserve(pages)?;
        for range in slots {
            self.fast.reserve(range)?;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "hybrid(fast={}; slow={}; fast_pages={})",
            self.fast.describe(),
            self.slow.describe(),
            self.fast_limit()
        )
    }
}

impl DeviceExt for HybridIo {
    /// No I/O counters of its own (see [`Counted`]; each tier is counted):
    /// the tiers' simulator counters, added up.
    fn stats(&self) -> DeviceStats {
        DeviceStats {
            sim: add_sim(self.fast.stats().sim, self.slow.stats().sim),
            ..DeviceStats::default()
        }
    }

    /// The sum of the tiers' simulated clocks (each tier advances its own).
    fn sim_clock_ns(&self) -> Option<u64> {
        match (self.fast.sim_clock_ns(), self.slow.sim_clock_ns()) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        }
    }

    /// Resets the tiers' counters.
    fn reset_stats(&self) {
        self.fast.reset_stats();
        self.slow.reset_stats();
    }

    /// What the tier each page lives on now says of its place there. A
    /// rollback journal asks before a page's first change since its last
    /// commit, and (in an index directory) commits only together with a
    /// saved map (`index_dir/images.rs`), so a page then lives where that
    /// map places it: pages change tiers only at their own writes and
    /// trims, and a slot released since the map's save is neither reused
    /// nor trimmed before the next one.
    fn overwrites_durable(&self, pages: &[PageId]) -> Vec<bool> {
        let (f, s) = self.split_read(pages);
        let mut out = vec![true; pages.len()];
        for (dev, part) in [(&self.fast, &f), (&self.slow, &s)] {
            let ids: Vec<PageId> = part.iter().map(|t| t.1).collect();
            for ((i, _), answer) in part.iter().zip(dev.overwrites_durable(&ids)) {
                if let Some(o) = out.get_mut(*i) {
                    *o = answer;
                }
            }
        }
        out
    }

    fn tiers(&self) -> Option<super::TierReport> {
        let (fast, slow) = self.tier_stats();
        let g = self.lock();
        Some(super::TierReport {
            fast,
            slow,
            fast_pages: g.slot.len() as u64,
            fast_limit: g.fast_limit,
            fallbacks: g.fallbacks,
        })
    }

    fn page_tier(&self, page: PageId) -> Option<Tier> {
        Some(self.tier_of(page))
    }

    fn hint_tier(&self, pages: &[PageId], tier: Tier) -> Result<()> {
        self.geometry().check_pages(pages)?;
        let mut g = self.lock();
        for &p in pages {
            g.hint.insert(p, tier);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::mem::MemDevice;

    fn hybrid(fast_cap: u64, range: u64) -> (HybridDevice, Arc<MemDevice>, Arc<MemDevice>) {
        let f = Arc::new(MemDevice::new(512, fast_cap).unwrap());
        let s = Arc::new(MemDevice::new(512, 100).unwrap());
        let h = HybridDevice::new(f.clone(), s.clone())
            .unwrap()
            .with_fast_range(range);
        (h, f, s)
    }

    fn page(v: u8) -> Vec<u8> {
        vec![v; 512]
    }

    /// A tier of 16 memory pages of 512 bytes whose writes to pages `>=
    /// full_at` fail with `DeviceFull`.
    fn failing_tier(full_at: u64) -> Arc<dyn PageDevice> {
        use crate::storage::faulty::{FaultPlan, FaultyDevice};
        let plan = FaultPlan::none().full_at_page(full_at);
        Arc::new(FaultyDevice::new(MemDevice::new(512, 16).unwrap(), plan))
    }

    /// A page moving to the fast tier whose fast write fails keeps its old
    /// contents where they are (before: it was mapped to a slot that never
    /// received them and read zeros), and its hint stays pending.
    #[test]
    fn a_failed_move_to_the_fast_tier_keeps_the_old_contents() {
        let slow = Arc::new(MemDevice::new(512, 16).unwrap());
        let h = HybridDevice::new(failing_tier(0), slow).unwrap();
        h.write(5, &page(1)).unwrap();
        h.hint_tier(&[5], Tier::Fast).unwrap();
        assert!(h.write(5, &page(2)).is_err());
        let mut buf = page(9);
        h.read(5, &mut buf).unwrap();
        assert!(buf == page(1) || buf == page(2), "page 5 reads {}", buf[0]);
        assert_eq!((h.tier_of(5), h.fast_pages()), (Tier::Slow, 0));
    }

    /// A page moving to the slow tier whose slow write fails keeps its
    /// fast slot and contents (before: the slot was released and trimmed
    /// before the slow write, and the page read zeros).
    #[test]
    fn a_failed_move_to_the_slow_tier_keeps_the_old_contents() {
        let fast = Arc::new(MemDevice::new(512, 16).unwrap());
        let h = HybridDevice::new(fast, failing_tier(5)).unwrap();
        h.hint_tier(&[5, 6], Tier::Fast).unwrap();
        h.write_batch(&[5, 6], &[page(1), page(3)].concat()).unwrap();
        assert_eq!(h.tier_of(5), Tier::Fast);
        // 5 leaves the fast tier and 7 takes the slot it frees, in one
        // batch whose slow part fails.
        h.hint_tier(&[5], Tier::Slow).unwrap();
        h.hint_tier(&[7], Tier::Fast).unwrap();
        assert!(h
            .write_batch(&[5, 7], &[page(2), page(4)].concat())
            .is_err());
        let mut buf = vec![9u8; 3 * 512];
        h.read_batch(&[5, 6, 7], &mut buf).unwrap();
        let got = |i: usize| buf[i * 512];
        assert!(got(0) == 1 || got(0) == 2, "page 5 reads {}", got(0));
        assert_eq!(got(1), 3);
        assert!(got(2) == 0 || got(2) == 4, "page 7 reads {}", got(2));
    }

    /// A page that moves from the slow tier to the fast one leaves no copy
    /// on the slow tier (before: its old copy stayed mapped there, and a
    /// simulated slow tier's garbage collector kept copying dead data).
    /// Here half of a nearly full slow tier moves to the fast tier, then
    /// the other half is overwritten at random: before the fix the slow
    /// tier mapped all 384 pages for the 192 living there, and GC copied
    /// 1,950 pages instead of 188.
    #[test]
    fn pages_moved_to_the_fast_tier_leave_no_copy_on_a_simulated_slow_tier() {
        use crate::storage::flashsim::FlashSim;
        use rand::{Rng, SeedableRng};
        let run = |trim_moved: bool| {
            let slow = Arc::new(
                FlashSim::from_params("page_size=512&ppb=8&blocks=64&op=0.25", 512).unwrap(),
            );
            let fast = Arc::new(MemDevice::new(512, 256).unwrap());
            let h = HybridDevice::new(fast, slow.clone()).unwrap();
            let cap = h.capacity();
            let all: Vec<PageId> = (0..cap).collect();
            h.write_batch(&all, &vec![1u8; all.len() * 512]).unwrap();
            let moved: Vec<PageId> = (0..cap / 2).collect();
            h.hint_tier(&moved, Tier::Fast).unwrap();
            h.write_batch(&moved, &vec![2u8; moved.len() * 512]).unwrap();
            if trim_moved {
                slow.trim(&moved).unwrap();
            }
            slow.reset_stats();
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
            for _ in 0..5000 {
                h.write(rng.gen_range(cap / 2..cap), &page(3)).unwrap();
            }
            let sim = slow.stats().sim.unwrap();
            (slow.detail().mapped_flash_pages, sim.gc_copies, cap / 2)
        };
        let (mapped, copies, on_slow) = run(false);
        let (_, copies_trimmed, _) = run(true);
        assert_eq!(mapped, on_slow);
        assert_eq!(copies, copies_trimmed);
    }

    /// With a durable map the old slow copy of a page that moved to the
    /// fast tier stays until a saved map places the page there (a crash
    /// before reads it from the slow tier), and is trimmed at that save.
    #[test]
    fn a_moved_pages_slow_copy_lives_until_the_map_is_saved() {
        let (fast, slow) = tiers();
        let map: Arc<dyn PageDevice> = Arc::new(map_device());
        let h = persisted(&fast, &slow, map.clone(), MapOpen::Create).unwrap();
        h.write(7, &tagged(7, 1)).unwrap();
        h.sync().unwrap();
        h.hint_tier(&[7], Tier::Fast).unwrap();
        h.write(7, &tagged(7, 2)).unwrap();
        let mut buf = vec![0u8; 512];
        slow.read(7, &mut buf).unwrap();
        assert_eq!(buf, tagged(7, 1), "the slow copy before the save");
        drop(h);
        // A crash before the save: the saved map places 7 on the slow tier.
        let h = persisted(&fast, &slow, map.clone(), MapOpen::Open).unwrap();
        h.read(7, &mut buf).unwrap();
        assert_eq!(buf, tagged(7, 1));
        h.hint_tier(&[7], Tier::Fast).unwrap();
        h.write(7, &tagged(7, 3)).unwrap();
        h.sync().unwrap();
        slow.read(7, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0), "the slow copy after the save");
        drop(h);
        let h = persisted(&fast, &slow, map, MapOpen::Open).unwrap();
        h.read(7, &mut buf).unwrap();
        assert_eq!(buf, tagged(7, 3));
        assert_eq!(h.tier_of(7), Tier::Fast);
    }

    /// The simulator columns of a hybrid add both tiers' retired blocks
    /// (two devices), though `SimCounters::add` keeps one device's later
    /// snapshot.
    #[test]
    fn hybrid_stats_add_both_tiers_retired_blocks() {
        let tier = |retired| SimCounters {
            retired_blocks: retired,
            erase_count_max: 9,
            ..SimCounters::default()
        };
        let sum = add_sim(Some(tier(2)), Some(tier(3))).unwrap();
        assert_eq!(sum.retired_blocks, 5);
    }

    /// The mean erase count of a hybrid of two simulators is the mean over
    /// both tiers' blocks, not the mean of the two tiers' means: a fast
    /// tier of 8 blocks erased 10 times each and a slow tier of 56 blocks
    /// erased twice average 3 erases a block (the two means' mean is 6).
    #[test]
    fn hybrid_erase_count_mean_is_over_both_tiers_blocks() {
        let tier = |mean, blocks| SimCounters {
            erase_count_mean: mean,
            erase_blocks: blocks,
            erase_count_max: 10,
            ..SimCounters::default()
        };
        let sum = add_sim(Some(tier(10.0, 8)), Some(tier(2.0, 56))).unwrap();
        assert_eq!(sum.erase_count_mean, 3.0);
        assert_eq!(sum.erase_blocks, 64);
        // The simulator reports its blocks.
        let d = crate::storage::flashsim::FlashSim::from_params(
            "page_size=512&ppb=8&blocks=64&op=0.2",
            512,
        )
        .unwrap();
        assert_eq!(d.stats().sim.unwrap().erase_blocks, 64);
    }

    /// `reserve` reaches both tiers: the slow tier's pages of the range,
    /// and the fast slots its pages hold or will take (a page hinted fast),
    /// so that a log on a hybrid of files never finds the file system full
    /// in the middle of a batch (before: nothing was reserved).
    #[test]
    fn reserve_reaches_the_slow_pages_and_the_fast_slots_writes_will_take() {
        use crate::storage::file::{FileDevice, FileDeviceOptions, IoEngine};
        use std::os::unix::fs::MetadataExt;
        let base = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tmp");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(&base).unwrap();
        let ps = 4096;
        let open = |name: &str| -> Arc<dyn PageDevice> {
            let opts = FileDeviceOptions {
                direct: false,
                engine: IoEngine::Psync,
                capacity_pages: 0,
                read_only: false,
            };
            Arc::new(FileDevice::open(&dir.path().join(name), ps, opts).unwrap())
        };
        let h = HybridDevice::new(open("fast"), open("slow"))
            .unwrap()
            .with_fast_pages(8);
        let blocks = |name: &str| std::fs::metadata(dir.path().join(name)).unwrap().blocks() * 512;
        // Whether this file system allocates ahead at all.
        open("probe").reserve(0..4).unwrap();
        if blocks("probe") == 0 {
            let what = "fallocate on the test directory's file system";
            if let Err(e) = crate::testenv::prerequisite_missing(what) {
                panic!("{e}");
            }
            return;
        }
        h.hint_tier(&[3], Tier::Fast).unwrap();
        h.write(3, &vec![7u8; ps]).unwrap();
        assert_eq!(h.tier_of(3), Tier::Fast);
        h.hint_tier(&[20], Tier::Fast).unwrap();
        let fast_before = blocks("fast");
        h.reserve(0..32).unwrap();
        assert!(blocks("slow") >= 32 * ps as u64, "slow tier: {} bytes", blocks("slow"));
        assert!(fast_before < 2 * ps as u64);
        assert!(blocks("fast") >= 2 * ps as u64, "fast tier: {} bytes", blocks("fast"));
        // The reserved pages read as before and the hinted page goes fast.
        let mut buf = vec![0u8; ps];
        h.read(3, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 7));
        h.write(20, &vec![9u8; ps]).unwrap();
        assert_eq!(h.tier_of(20), Tier::Fast);
        assert_eq!(h.fast_slots_for(&(20..21)), vec![1..2]);
    }

    /// A rollback journal over a hybrid asks which pages' places a sync
    /// makes durable: those on a memory tier (a file's stand-in here) are,
    /// those on a simulated tier are not (its image is restored whole), so
    /// a journal saves before-images of the first alone; a page counts
    /// where it lives now, whatever its hint.
    #[test]
    fn pages_on_a_simulated_tier_need_no_before_image() {
        use crate::storage::flashsim::FlashSim;
        let sim: Arc<dyn PageDevice> = Arc::new(FlashSim::from_params("", 512).unwrap());
        let mem: Arc<dyn PageDevice> = Arc::new(MemDevice::new(512, 100).unwrap());
        for (fast, slow, fast_durable) in [(mem.clone(), sim.clone(), true), (sim, mem, false)] {
            let h = HybridDevice::new(fast, slow).unwrap();
            h.hint_tier(&[0, 1], Tier::Fast).unwrap();
            for p in 0..4 {
                h.write(p, &page(p as u8)).unwrap();
            }
            // Page 2 moves to the fast tier at its next write: not yet.
            h.hint_tier(&[2], Tier::Fast).unwrap();
            let d = fast_durable;
            assert_eq!(h.overwrites_durable(&[3, 0, 2, 1]), vec![!d, d, !d, d]);
        }
    }

    #[test]
    fn pages_go_to_their_tier_and_read_back() {
        let (h, f, s) = hybrid(4, 6);
        let ids: Vec<u64> = (0..10).collect();
        let data: Vec<u8> = ids.iter().flat_map(|&i| page(i as u8 + 1)).collect();
        h.write_batch(&ids, &data).unwrap();
        // Pages 0..4 fit the fast tier; 4 and 5 were meant for it and fell back.
        assert_eq!(h.fast_pages(), 4);
        assert_eq!(h.fallbacks(), 2);
        assert_eq!(f.stats().io.pages_written, 4);
        assert_eq!(s.stats().io.pages_written, 6);
        assert_eq!(
            (f.stats().io.write_batches, s.stats().io.write_batches),
            (1, 1)
        );
        let mut buf = vec![0u8; 10 * 512];
        h.read_batch(&ids, &mut buf).unwrap();
        assert_eq!(buf, data);
        assert_eq!(h.stats().io.pages_read, 10);
        // Moving pages between tiers keeps their contents.
        assert_eq!(h.place(2, Tier::Slow).unwrap(), Tier::Slow);
        assert_eq!(h.place(8, Tier::Fast).unwrap(), Tier::Fast);
        assert_eq!(h.place(9, Tier::Fast).unwrap(), Tier::Slow);
        assert_eq!(h.tier_of(8), Tier::Fast);
        let mut one = page(0);
        h.read(2, &mut one).unwrap();
        assert_eq!(one, page(3));
        h.read(8, &mut one).unwrap();
        assert_eq!(one, page(9));
        assert!(h.read(100, &mut one).is_err());
        assert!(h.write_batch(&[1], &[0u8; 10]).is_err());
    }

    #[test]
    fn mismatched_page_sizes_are_refused_and_the_xpoint_tier_opens() {
        let f = Arc::new(MemDevice::new(512, 4).unwrap());
        let s = Arc::new(MemDevice::new(1024, 4).unwrap());
        assert!(HybridDevice::new(f, s).is_err());
        let x = crate::storage::spec::DeviceSpec::parse(XPOINT_SPEC)
            .unwrap()
            .open(4096, None)
            .unwrap();
        let n = crate::storage::spec::DeviceSpec::parse("flashsim:preset=nvme")
            .unwrap()
            .open(4096, None)
            .unwrap();
        let h = HybridDevice::new(x, n).unwrap().with_fast_range(8);
        let ids: Vec<u64> = (0..16).collect();
        h.write_batch(&ids, &vec![7u8; 16 * 4096]).unwrap();
        let sim = h.stats().sim.unwrap();
        assert!(sim.sim_time_ns > 0 && sim.nand_programs > 0, "{sim:?}");
        assert!(h.describe().contains("hybrid"));
    }

    #[test]
    fn hints_move_pages_at_their_next_write_and_a_full_tier_falls_back() {
        let f = Arc::new(MemDevice::new(512, 100).unwrap());
        let s = Arc::new(MemDevice::new(512, 100).unwrap());
        let h = HybridDevice::new(f.clone(), s.clone())
            .unwrap()
            .with_fast_pages(2);
        assert_eq!(h.fast_limit(), 2);
        h.write_batch(&[1, 2, 3], &[page(1), page(2), page(3)].concat())
            .unwrap();
        assert_eq!(h.fast_pages(), 0);
        // A hint costs no I/O and moves nothing until the page is written.
        h.hint_tier(&[1, 2, 3], Tier::Fast).unwrap();
        assert_eq!(h.tier_of(1), Tier::Slow);
        let before = (f.stats().io, s.stats().io);
        assert_eq!(before.0.pages_written, 0);
        h.write_batch(&[1, 2, 3], &[page(4), page(5), page(6)].concat())
            .unwrap();
        // Two fit the capped fast tier; the third falls back and is counted.
        assert_eq!(h.fast_pages(), 2);
        assert_eq!(h.fallbacks(), 1);
        let tiers: Vec<Tier> = [1, 2, 3].iter().map(|&p| h.tier_of(p)).collect();
        assert_eq!(tiers, vec![Tier::Fast, Tier::Fast, Tier::Slow]);
        let mut buf = vec![0u8; 3 * 512];
        h.read_batch(&[1, 2, 3], &mut buf).unwrap();
        assert_eq!(buf, [page(4), page(5), page(6)].concat());
        // A slow hint frees the slot at the next write; the freed slot serves another page.
        h.hint_tier(&[1], Tier::Slow).unwrap();
        h.hint_tier(&[3], Tier::Fast).unwrap();
        h.write_batch(&[1, 3], &[page(7), page(8)].concat())
            .unwrap();
        assert_eq!((h.tier_of(1), h.tier_of(3)), (Tier::Slow, Tier::Fast));
        h.read_batch(&[1, 2, 3], &mut buf).unwrap();
        assert_eq!(buf, [page(7), page(5), page(8)].concat());
        // A trim frees the slot and the page reads zeros from either tier.
        h.trim(&[3]).unwrap();
        assert_eq!(h.tier_of(3), Tier::Slow);
        let mut one = page(9);
        h.read(3, &mut one).unwrap();
        assert_eq!(one, page(0));
        // Per-tier counters add up to the hybrid's host counters.
        let (fs, ss) = h.tier_stats();
        assert_eq!(
            fs.io.pages_written + ss.io.pages_written,
            h.stats().io.pages_written
        );
        assert!(h.hint_tier(&[100], Tier::Fast).is_err());
    }

    /// A fresh fast tier (64 pages of 512 bytes) and slow tier (256 pages).
    fn tiers() -> (Arc<MemDevice>, Arc<MemDevice>) {
        (
            Arc::new(MemDevice::new(512, 64).unwrap()),
            Arc::new(MemDevice::new(512, 256).unwrap()),
        )
    }

    /// A hybrid of memory tiers (512-byte pages: 64 fast, 256 slow) whose
    /// map lives on `map`.
    fn persisted(
        fast: &Arc<MemDevice>,
        slow: &Arc<MemDevice>,
        map: Arc<dyn PageDevice>,
        how: MapOpen,
    ) -> Result<HybridDevice> {
        HybridDevice::new(fast.clone(), slow.clone())?.with_map(map, how)
    }

    fn map_device() -> MemDevice {
        let pages = 2 * TierMapStore::region_pages(64, 1024);
        MemDevice::new(1024, pages).unwrap()
    }

    /// A page's content: its id and a version, so a read can tell whose it is.
    fn tagged(p: PageId, version: u64) -> Vec<u8> {
        let mut v = vec![0u8; 512];
        v[..8].copy_from_slice(&p.to_le_bytes());
        v[8..16].copy_from_slice(&version.to_le_bytes());
        v[16..].fill(p as u8 ^ version as u8);
        v
    }

    #[test]
    fn the_map_survives_a_reopen_and_damage_is_a_clear_error() {
        let (fast, slow) = tiers();
        let map: Arc<dyn PageDevice> = Arc::new(map_device());
        let h = persisted(&fast, &slow, map.clone(), MapOpen::Create).unwrap();
        let ids: Vec<PageId> = (0..40).collect();
        h.hint_tier(&ids[..20], Tier::Fast).unwrap();
        let data: Vec<u8> = ids.iter().flat_map(|&p| tagged(p, 1)).collect();
        h.write_batch(&ids, &data).unwrap();
        h.hint_tier(&[3, 4], Tier::Slow).unwrap();
        h.write_batch(&[3, 4], &[tagged(3, 2), tagged(4, 2)].concat())
            .unwrap();
        h.sync().unwrap();
        let before = h.fast_page_ids();
        assert_eq!(before.len(), 18);
        let mut want = vec![0u8; 40 * 512];
        h.read_batch(&ids, &mut want).unwrap();
        drop(h);
        // Another process: the same tiers and map, every page where it was.
        let h = persisted(&fast, &slow, map.clone(), MapOpen::Open).unwrap();
        assert_eq!(h.fast_page_ids(), before);
        let mut got = vec![0u8; 40 * 512];
        h.read_batch(&ids, &mut got).unwrap();
        assert_eq!(got, want);
        // Without a save since the changes, the changes are not in the map.
        h.hint_tier(&[30], Tier::Fast).unwrap();
        h.write(30, &tagged(30, 3)).unwrap();
        drop(h);
        let h = persisted(&fast, &slow, map.clone(), MapOpen::Open).unwrap();
        assert_eq!(h.fast_page_ids(), before);
        drop(h);
        // Tiers of another size, a map device never written, both copies damaged.
        let small = Arc::new(MemDevice::new(512, 32).unwrap());
        let e = persisted(&small, &slow, map.clone(), MapOpen::Open).unwrap_err();
        assert!(e.to_string().contains("written for tiers of"), "{e}");
        let blank: Arc<dyn PageDevice> = Arc::new(map_device());
        let e = persisted(&fast, &slow, blank, MapOpen::Open).unwrap_err();
        assert!(e.to_string().contains("holds no placement map"), "{e}");
        let region = TierMapStore::region_pages(64, 1024);
        for first in [0, region] {
            let mut page = vec![0u8; 1024];
            map.read(first, &mut page).unwrap();
            page[20] ^= 0xff;
            map.write(first, &page).unwrap();
        }
        let e = persisted(&fast, &slow, map, MapOpen::Open).unwrap_err();
        assert!(e.to_string().contains("damaged"), "{e}");
        // A map device too small for the fast tier is refused.
        let tiny: Arc<dyn PageDevice> = Arc::new(MemDevice::new(1024, 1).unwrap());
        assert!(persisted(&fast, &slow, tiny, MapOpen::Create).is_err());
    }

    /// Issue 44: damage to the newest copy of the map after its save must
    /// not let the previous copy place the pages (those moved since would
    /// read their old content, with no error): the save mirrors the copy
    /// over the previous one, so either copy damaged leaves the same map.
    #[test]
    fn a_damaged_copy_of_the_map_leaves_its_mirror() {
        let region = TierMapStore::region_pages(64, 1024);
        for damaged in [0, region] {
            let (fast, slow) = tiers();
            let map: Arc<dyn PageDevice> = Arc::new(map_device());
            let h = persisted(&fast, &slow, map.clone(), MapOpen::Create).unwrap();
            let ids = two_saves_moving_pages_both_ways(&h);
            let placed = h.fast_page_ids();
            let mut want = vec![0u8; ids.len() * 512];
            h.read_batch(&ids, &mut want).unwrap();
            drop(h);
            flip_a_byte_of_map_page(&*map, damaged);
            let h = persisted(&fast, &slow, map, MapOpen::Open).unwrap();
            assert_eq!(h.fast_page_ids(), placed, "map page {damaged} damaged");
            let mut got = vec![0u8; ids.len() * 512];
            h.read_batch(&ids, &mut got).unwrap();
            assert!(got == want, "map page {damaged} damaged: other contents");
        }
    }

    /// Issue 44: a crash right after a save returned, then damage to the
    /// newest copy, let the previous copy place the pages (the mirror was
    /// written without a sync, so the crash could drop it): the save syncs
    /// its mirror, so either copy damaged after the crash leaves the map
    /// the save wrote. Fails without the mirror's sync.
    #[test]
    fn a_crash_after_a_save_then_damage_to_a_copy_leaves_the_saved_map() {
        use crate::storage::faulty::{FaultPlan, FaultyDevice};
        let region = TierMapStore::region_pages(64, 1024);
        for damaged in [0, region] {
            let (fast, slow) = tiers();
            let faulty = Arc::new(FaultyDevice::new(map_device(), FaultPlan::none()));
            let h = persisted(&fast, &slow, faulty.clone(), MapOpen::Create).unwrap();
            two_saves_moving_pages_both_ways(&h);
            let placed = h.fast_page_ids();
            drop(h);
            // The power fails: every unsynced write of the map is lost.
            let map: Arc<dyn PageDevice> = match Arc::try_unwrap(faulty) {
                Ok(d) => Arc::new(d.into_inner()),
                Err(_) => panic!("the map device is still shared"),
            };
            flip_a_byte_of_map_page(&*map, damaged);
            let h = persisted(&fast, &slow, map, MapOpen::Open).unwrap();
            assert_eq!(h.fast_page_ids(), placed, "map page {damaged} damaged");
        }
    }

    /// Writes pages 0..20 (the first ten on the fast tier) and saves, then
    /// moves pages both ways (0, 1 to the slow tier, 15, 16 to the fast)
    /// and saves again; returns the pages written.
    fn two_saves_moving_pages_both_ways(h: &HybridDevice) -> Vec<PageId> {
        let ids: Vec<PageId> = (0..20).collect();
        h.hint_tier(&ids[..10], Tier::Fast).unwrap();
        let data: Vec<u8> = ids.iter().flat_map(|&p| tagged(p, 1)).collect();
        h.write_batch(&ids, &data).unwrap();
        h.sync().unwrap();
        h.hint_tier(&[0, 1], Tier::Slow).unwrap();
        h.hint_tier(&[15, 16], Tier::Fast).unwrap();
        let moved = [0, 1, 15, 16];
        let data: Vec<u8> = moved.iter().flat_map(|&p| tagged(p, 2)).collect();
        h.write_batch(&moved, &data).unwrap();
        h.sync().unwrap();
        ids
    }

    /// Flips one byte of the map device's page `page`.
    fn flip_a_byte_of_map_page(map: &dyn PageDevice, page: PageId) {
        let mut buf = vec![0u8; 1024];
        map.read(page, &mut buf).unwrap();
        buf[40] ^= 0xa5;
        map.write(page, &buf).unwrap();
    }

    /// Crashes the map device at random points of a run of placements,
    /// moves back and forth and syncs: reopening gives the map of the last
    /// completed save or of the save in flight, never a mix, and every page
    /// reads contents written for it (a reused slot would show another
    /// page's).
    #[test]
    fn a_crash_while_saving_leaves_the_old_map_or_the_new_one() {
        use crate::storage::faulty::{FaultPlan, FaultyDevice};
        use rand::{Rng, SeedableRng};
        use std::collections::BTreeSet;
        let (mut olds, mut news) = (0, 0);
        for seed in 0..200u64 {
            let (fast, slow) = tiers();
            let fresh = Arc::new(map_device());
            drop(persisted(&fast, &slow, fresh.clone(), MapOpen::Create).unwrap());
            let fresh = Arc::try_unwrap(fresh).unwrap_or_else(|_| panic!("shared"));
            let faulty = Arc::new(FaultyDevice::new(fresh, FaultPlan::random_crash(seed, 40)));
            let h = persisted(&fast, &slow, faulty.clone(), MapOpen::Open).unwrap();
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut saved: BTreeSet<PageId> = BTreeSet::new();
            let mut in_flight = None;
            for round in 0..20u64 {
                let n = rng.gen_range(1..12);
                let mut ids: Vec<PageId> = (0..n).map(|_| rng.gen_range(0..80)).collect();
                ids.sort_unstable();
                ids.dedup();
                for &p in &ids {
                    let tier = if rng.gen_bool(0.6) {
                        Tier::Fast
                    } else {
                        Tier::Slow
                    };
                    h.hint_tier(&[p], tier).unwrap();
                }
                let data: Vec<u8> = ids.iter().flat_map(|&p| tagged(p, round + 1)).collect();
                h.write_batch(&ids, &data).unwrap();
                if rng.gen_bool(0.2) {
                    let p = rng.gen_range(0..80);
                    h.trim(&[p]).unwrap();
                }
                let now: BTreeSet<PageId> = h.fast_page_ids().into_iter().collect();
                if h.sync().is_err() {
                    in_flight = Some(now);
                    break;
                }
                saved = now;
            }
            drop(h);
            let durable: Arc<dyn PageDevice> = match Arc::try_unwrap(faulty) {
                Ok(f) => Arc::new(f.into_inner()),
                Err(_) => panic!("the map device is still shared"),
            };
            let h = persisted(&fast, &slow, durable, MapOpen::Open).unwrap();
            let got: BTreeSet<PageId> = h.fast_page_ids().into_iter().collect();
            if got == saved {
                olds += 1;
            } else {
                assert_eq!(Some(&got), in_flight.as_ref(), "seed {seed}");
                news += 1;
            }
            for p in 0..80u64 {
                let mut buf = vec![0u8; 512];
                h.read(p, &mut buf).unwrap();
                let owner = u64::from_le_bytes(buf[..8].try_into().unwrap());
                let blank = buf.iter().all(|&b| b == 0);
                assert!(
                    blank || owner == p,
                    "seed {seed}: page {p} holds page {owner}'s data"
                );
                if !blank {
                    let v = u64::from_le_bytes(buf[8..16].try_into().unwrap());
                    assert_eq!(buf, tagged(p, v), "seed {seed}: page {p} is garbage");
                }
            }
        }
        // Both outcomes happen over the seeds.
        assert!(olds > 0 && news > 0, "old {olds}, new {news}");
    }
}
