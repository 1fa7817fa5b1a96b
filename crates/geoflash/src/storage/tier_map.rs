//! The durable placement map of a [`HybridDevice`](super::hybrid::HybridDevice):
//! which logical pages live in which slot of the fast tier, kept on a small
//! device of its own (in an index directory, the file `tiers.map`) so a
//! hybrid index keeps its tier placement across processes.
//!
//! # Layout and crash safety
//! The map device holds two **copies**, each in a region of
//! [`TierMapStore::region_pages`] pages (enough for a map of every page
//! the fast tier may hold: the map device's apparent size is 32 bytes per
//! such page, of which only what the map holds is ever written). A save
//! writes the whole map, with a generation one higher than the newest
//! copy, into the *other* region and syncs the device (the newest copy is
//! never overwritten before that sync); then it writes the same copy into
//! the first region as a **mirror** and syncs again, so that a save that
//! returned left two durable copies of its map (one more sync of the small
//! map device per save; before, the mirror waited for the next save's
//! sync, and a crash then damage to the newest copy let the previous map
//! stand for the newer one). A copy is:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `GFTIERMP` |
//! | 8..12 | format version (1), little-endian |
//! | 12..16 | CRC-32C of bytes `16..end` |
//! | 16..24 | generation |
//! | 24..28 | page size of the tiers |
//! | 28..32 | zero |
//! | 32..40 | slow tier capacity (pages) |
//! | 40..48 | fast tier capacity (pages) |
//! | 48..56 | entries `n` |
//! | 56..64 | pages the fast tier may hold (its limit) |
//! | 64..64 + 16n | `n` × (page, fast slot), each a little-endian `u64` |
//!
//! Loading reads both copies and keeps the valid one with the higher
//! generation. One copy failing its checksum is one of two things, and in
//! both the other copy is the map to use:
//! - a crash during a save tore the new copy: the save's sync never
//!   returned, so the device's [`sync`](super::PageDevice::sync) that ran
//!   it did not either, and no store acknowledged anything on that map;
//!   the other copy is the previous save, the last committed placement
//!   (the slots freed since it are reused only after a save, and a page
//!   that moved tiers since keeps its old content where that map says it
//!   is: the stores' own recovery sees the writes since as lost, as after
//!   any crash), never a mix;
//! - damage to one copy after the save returned (its mirror synced, also
//!   when a crash follows): the other copy is the same map.
//!
//! A crash during the mirror's write, then damage to the newest copy, leaves
//! the previous map: the save had not returned, so it is the first case.
//! Two damaged copies, or a map written for tiers
//! of another size, are clear errors: the pages on the fast tier could not
//! be found without it, so there is no silent fallback.
use std::collections::BTreeMap;
use std::sync::Arc;

use super::{PageDevice, PageId};
use crate::{Error, Result};

const MAGIC: &[u8; 8] = b"GFTIERMP";
const VERSION: u32 = 1;
const HEADER: usize = 64;
const ENTRY: usize = 16;

/// The geometry the map was written for; a map is only loaded onto tiers of
/// the same geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierGeometry {
    /// Page size of both tiers.
    pub page_size: u32,
    /// Pages of the slow tier (the hybrid device's logical pages).
    pub slow_capacity: u64,
    /// Pages of the fast tier (its slots).
    pub fast_capacity: u64,
    /// Pages the fast tier may hold (at most `fast_capacity`): the most
    /// entries a map has, which sizes its copies.
    pub fast_limit: u64,
}

/// One saved copy of the map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedMap {
    /// Generation (the newest copy has the highest).
    pub generation: u64,
    /// Page → fast slot.
    pub slots: BTreeMap<PageId, u64>,
}

/// The two copies of a placement map on a device of their own.
#[derive(Debug)]
pub struct TierMapStore {
    device: Arc<dyn PageDevice>,
    geometry: TierGeometry,
    region_pages: u64,
}

impl TierMapStore {
    /// Pages of `map_page_size` bytes one copy needs for a fast tier that
    /// holds at most `fast_limit` pages; the map device needs twice as many.
    pub fn region_pages(fast_limit: u64, map_page_size: usize) -> u64 {
        let bytes = HEADER as u64 + ENTRY as u64 * fast_limit;
        bytes.div_ceil(map_page_size.max(1) as u64)
    }

    /// The map of tiers of `geometry` on `device`, which must hold both copies.
    pub fn new(device: Arc<dyn PageDevice>, geometry: TierGeometry) -> Result<Self> {
        let region_pages = Self::region_pages(geometry.fast_limit, device.page_size());
        if device.capacity() < 2 * region_pages {
            return Err(Error::invalid(format!(
                "the placement map device {} holds {} pages; a fast tier holding {} pages needs {}",
                device.describe(),
                device.capacity(),
                geometry.fast_limit,
                2 * region_pages
            )));
        }
        Ok(TierMapStore {
            device,
            geometry,
            region_pages,
        })
    }

    /// The map device.
    pub fn device(&self) -> &Arc<dyn PageDevice> {
        &self.device
    }

    /// Writes `slots` as generation `generation` into its region (the one
    /// the previous generation does not use), syncs the map device, then
    /// writes the same copy over the previous generation's as its mirror
    /// and syncs again (see the [module docs](self)).
    pub fn save(&self, generation: u64, slots: &BTreeMap<PageId, u64>) -> Result<()> {
        let ps = self.device.page_size();
        let len = HEADER + ENTRY * slots.len();
        let pages = len.div_ceil(ps);
        let mut buf = vec![0u8; pages * ps];
        buf[0..8].copy_from_slice(MAGIC);
        buf[8..12].copy_from_slice(&VERSION.to_le_bytes());
        buf[16..24].copy_from_slice(&generation.to_le_bytes());
        buf[24..28].copy_from_slice(&self.geometry.page_size.to_le_bytes());
        buf[32..40].copy_from_slice(&self.geometry.slow_capacity.to_le_bytes());
        buf[40..48].copy_from_slice(&self.geometry.fast_capacity.to_le_bytes());
        buf[48..56].copy_from_slice(&(slots.len() as u64).to_le_bytes());
        buf[56..64].copy_from_slice(&self.geometry.fast_limit.to_le_bytes());
        for (i, (page, slot)) in slots.iter().enumerate() {
            let at = HEADER + i * ENTRY;
            buf[at..at + 8].copy_from_slice(&page.to_le_bytes());
            buf[at + 8..at + 16].copy_from_slice(&slot.to_le_bytes());
        }
        let crc = crc32c::crc32c(&buf[16..len]);
        buf[12..16].copy_from_slice(&crc.to_le_bytes());
        let region = |r: u64| -> Vec<PageId> {
            let first = r * self.region_pages;
            (first..first + pages as u64).collect()
        };
        self.device.write_batch(&region(generation % 2), &buf)?;
        self.device.sync()?;
        // The mirror: a later damage to one copy leaves the other (see the
        // module docs), also after a crash once this returns.
        self.device.write_batch(&region(1 - generation % 2), &buf)?;
        self.device.sync()
    }

    /// The newest valid copy; `None` when neither region was ever written.
    pub fn load(&self) -> Result<Option<SavedMap>> {
        let mut problems = Vec::new();
        let mut unsupported = Vec::new();
        let mut best: Option<SavedMap> = None;
        for region in 0..2u64 {
            match self.read_copy(region) {
                Ok(None) => {}
                Ok(Some(m)) => {
                    if best.as_ref().is_none_or(|b| m.generation > b.generation) {
                        best = Some(m);
                    }
                }
                // Tiers of another size: say so, whatever the other copy holds.
                Err(e @ Error::InvalidInput(_)) => return Err(e),
                // The version field is outside the checksum: a valid other
                // copy stands (both copies hold the same save); with none,
                // the map is of a newer format.
                Err(e @ Error::UnsupportedVersion { .. }) => unsupported.push(e),
                Err(e) => problems.push(format!("copy {region}: {e}")),
            }
        }
        match best {
            Some(m) => Ok(Some(m)),
            None if problems.is_empty() => match unsupported.into_iter().next() {
                Some(newer) => Err(newer),
                None => Ok(None),
            },
            None => Err(Error::corrupt(
                None,
                format!(
                    "the placement map on {} is damaged ({}): the pages on the fast tier cannot be found",
                    self.device.describe(),
                    problems.join("; ")
                ),
            )),
        }
    }

    /// Reads and checks the copy in `region` (`None`: never written).
    fn read_copy(&self, region: u64) -> Result<Option<SavedMap>> {
        let ps = self.device.page_size();
        let first = region * self.region_pages;
        let mut head = vec![0u8; ps];
        self.device.read(first, &mut head)?;
        if head.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        let bad = |what: String| Error::corrupt(Some(first), what);
        if &head[0..8] != MAGIC {
            return Err(bad("not a placement map (bad magic)".into()));
        }
        let u32_at =
            |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]));
        let u64_at =
            |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
        let version = u32_at(&head, 8);
        Error::check_version("placement map", version, VERSION, VERSION)?;
        let n = u64_at(&head, 48);
        if n > self.geometry.fast_limit {
            return Err(bad(format!(
                "{n} entries for a fast tier holding at most {} pages",
                self.geometry.fast_limit
            )));
        }
        let len = HEADER + ENTRY * n as usize;
        let pages = len.div_ceil(ps);
        let mut buf = vec![0u8; pages * ps];
        let ids: Vec<PageId> = (first..first + pages as u64).collect();
        self.device.read_batch(&ids, &mut buf)?;
        let crc = u32_at(&buf, 12);
        if crc32c::crc32c(&buf[16..len]) != crc {
            return Err(bad("checksum mismatch (a torn or damaged copy)".into()));
        }
        let found = TierGeometry {
            page_size: u32_at(&buf, 24),
            slow_capacity: u64_at(&buf, 32),
            fast_capacity: u64_at(&buf, 40),
            fast_limit: u64_at(&buf, 56),
        };
        if found != self.geometry {
            return Err(Error::invalid(format!(
                "the placement map was written for tiers of {} (at most {} used) + {} pages of {} bytes, but the tiers given have {} (at most {} used) + {} pages of {} bytes",
                found.fast_capacity,
                found.fast_limit,
                found.slow_capacity,
                found.page_size,
                self.geometry.fast_capacity,
                self.geometry.fast_limit,
                self.geometry.slow_capacity,
                self.geometry.page_size
            )));
        }
        let mut slots = BTreeMap::new();
        let mut used = std::collections::HashSet::new();
        for i in 0..n as usize {
            let at = HEADER + i * ENTRY;
            let (page, slot) = (u64_at(&buf, at), u64_at(&buf, at + 8));
            if page >= found.slow_capacity || slot >= found.fast_capacity || !used.insert(slot) {
                return Err(bad(format!(
                    "entry {i} (page {page}, slot {slot}) is out of range or repeated"
                )));
            }
            if slots.insert(page, slot).is_some() {
                return Err(bad(format!("page {page} is mapped twice")));
            }
        }
        Ok(Some(SavedMap {
            generation: u64_at(&buf, 16),
            slots,
        }))
    }
}
