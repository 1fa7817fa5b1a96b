//! The unlogged mode (issue 47, item 1): between a clean checkpoint and the
//! next, operations are not logged at all; the checkpoint is their only
//! durability point, as for a build that publishes its index at its end.
//!
//! - **Operations** change the write buffer only: no NEW/MOD/DEL/META
//!   record, no COMMIT, no group. `durable_op` stays at the checkpoint's.
//! - **Flushes** (when the write buffer is over budget, and at the
//!   checkpoint) write their pages in place with no page image and no log
//!   sync, except the pages the last checkpoint's state may hold: every page
//!   below the allocator's end when the mode began (the *horizon*). Before
//!   the first write of such a page its *before-image*, the bytes on the
//!   device, is appended as a PAGE_IMAGE record and the log synced. Pages
//!   from the horizon on are unreachable from the checkpoint's root, so
//!   writing, tearing or losing them changes nothing it holds.
//! - **Restart** after a crash in the mode finds the clean checkpoint and
//!   the before-images: it writes the images back (the checkpoint's pages
//!   as they were) and, the images counting as replayed changes, rebuilds
//!   the allocator from the pages reachable from the checkpoint's root. The
//!   store is as it was at the checkpoint, whatever the crash tore.
//! - **The checkpoint** writes every buffered page (before-images first,
//!   as above), syncs the device, then switches the log's superblock to the
//!   new state (a fresh epoch without the images): a crash before the switch
//!   restarts at the previous checkpoint, after it at the new one. The mode
//!   ends there.
//!
//! The before-images take log room: one page per page of the previous
//! state that the mode rewrites. For a new index (an empty tree: one root
//! page) that is one image; the index directory enters the mode only there
//! (see `Index::begin_batch`). The store enters it only from a clean state
//! (nothing since the last checkpoint) with a log format and durability
//! that protect flushes (not the papers' per-change log, not `none`).
use super::EfindStore;
use crate::page_id::IdSet;
use crate::storage::PageId;
use crate::Result;

/// The state of the unlogged mode.
#[derive(Debug, Default)]
pub(super) struct Unlogged {
    /// Pages below this id may belong to the last checkpoint's state: they
    /// get a before-image before their first write in the mode.
    horizon: PageId,
    /// Pages whose before-image is in the log.
    imaged: IdSet,
}

impl EfindStore {
    /// Enters the unlogged mode (see the [module docs](self)) when the store
    /// is clean and its log protects flushes; whether it did.
    pub(super) fn enter_unlogged(&mut self) -> Result<bool> {
        self.check_writable()?;
        self.ops.check_idle("unlogged mode asked")?;
        if self.unlogged.is_some() {
            return Ok(true);
        }
        if !self.first_image() || !self.is_clean() {
            return Ok(false);
        }
        self.unlogged = Some(Unlogged {
            horizon: self.alloc.next_page(),
            imaged: IdSet::default(),
        });
        Ok(true)
    }

    /// Whether operations are unlogged now.
    pub(super) fn is_unlogged(&self) -> bool {
        self.unlogged.is_some()
    }

    /// Leaves the unlogged mode (the checkpoint that ends it is durable).
    pub(super) fn leave_unlogged(&mut self) {
        self.unlogged = None;
    }

    /// Writes `pages` (encoded back to back in `data`, ascending ids) in
    /// place in the unlogged mode: before-images of the pages below the
    /// horizon not imaged yet, logged and synced, then the pages as one
    /// batch with no sync (the checkpoint syncs the device).
    pub(super) fn write_unlogged(&mut self, pages: &[PageId], data: &[u8]) -> Result<()> {
        let ps = self.page_size;
        let need: Vec<PageId> = match self.unlogged.as_ref() {
            Some(u) => pages
                .iter()
                .copied()
                .filter(|&id| id < u.horizon && !u.imaged.contains(&id))
                .collect(),
            None => {
                return Err(crate::Error::invalid(
                    "internal: an unlogged write outside the unlogged mode",
                ))
            }
        };
        if !need.is_empty() {
            let mut before = vec![0u8; need.len() * ps];
            self.device.read_batch(&need, &mut before)?;
            let record = (ps + crate::store::log::record::RECORD_HEADER) as u64;
            self.ensure_room(need.len() as u64 * record)?;
            let images: Vec<(PageId, &[u8])> =
                need.iter().copied().zip(before.chunks_exact(ps)).collect();
            self.log_images(&images)?;
            if let Some(u) = self.unlogged.as_mut() {
                u.imaged.extend(need.iter().copied());
            }
        }
        if pages.is_empty() {
            return Ok(());
        }
        let watch = crate::metrics::Stopwatch::start(self.device.sim_clock_ns());
        self.pages_unsynced = true;
        self.device.write_batch(pages, data)?;
        watch.stop(
            crate::metrics::Phase::Write,
            self.device.sim_clock_ns(),
            &mut self.lock().stats.times,
        );
        Ok(())
    }
}
