//! The id → rectangle locator of an [`Index`](super::Index), which
//! [`Index::update_by_id`](super::Index::update_by_id) uses to find the
//! rectangle an object has now: the structures find a record by its
//! rectangle (the R-tree family descends only where the rectangle fits), not
//! by its id.
//!
//! The map is built lazily, by one query over the whole plane (every page of
//! the index read once, counted like any query), at the first update by id
//! after the index was created or opened; then [`Index::insert`],
//! [`Index::delete`], [`Index::update`] and `update_by_id` (and the object
//! operations) keep it in step. It is dropped, to be rebuilt at the next
//! update by id, when an operation fails, and it is trusted only while its
//! size equals the index's record count (anything that changes records
//! another way, such as a FOR-tree changed through its lock, changes the
//! count, or leaves a stale rectangle which the structure then refuses,
//! dropping the map). It costs about 60 bytes per record (a `u64` key and a
//! four-`f64` rectangle in a hash table), outside the store's node budget.
//! The table hashes keys with the page ids' multiplicative hasher
//! ([`IdMap`]): record keys are the index's own, and SipHash was a visible
//! share of an update by id.
//!
//! [`Index::insert`]: super::Index::insert
//! [`Index::delete`]: super::Index::delete
//! [`Index::update`]: super::Index::update
use crate::geom::Rect;
use crate::page_id::IdMap;
use crate::Result;

/// Where each object of an index is: its id's rectangle, once built.
#[derive(Debug, Default)]
pub(super) struct Locator {
    rects: Option<IdMap<Rect>>,
}

impl Locator {
    /// The rectangle of `id`, building the map with `scan` (every `(id,
    /// rectangle)` of the index) first when it is not built or does not
    /// hold `records` entries; `None` when the index does not hold `id`.
    pub(super) fn find(
        &mut self,
        id: u64,
        records: Option<u64>,
        scan: impl FnOnce() -> Result<Vec<(u64, Rect)>>,
    ) -> Result<Option<Rect>> {
        let stale = match (&self.rects, records) {
            (Some(m), Some(n)) => m.len() as u64 != n,
            (Some(_), None) => false,
            (None, _) => true,
        };
        if stale {
            self.rects = None;
            let map: IdMap<Rect> = scan()?.into_iter().collect();
            self.rects = Some(map);
        }
        Ok(self.rects.as_ref().and_then(|m| m.get(&id).copied()))
    }

    /// Keeps the map in step with an operation that ended with `outcome`:
    /// `apply` on success, the map dropped on failure (rebuilt at the next
    /// use). Nothing to do while the map is not built.
    pub(super) fn track<T>(
        &mut self,
        outcome: &Result<T>,
        apply: impl FnOnce(&mut IdMap<Rect>),
    ) {
        match (outcome, self.rects.as_mut()) {
            (Ok(_), Some(m)) => apply(m),
            (Ok(_), None) => {}
            (Err(_), _) => self.rects = None,
        }
    }

    /// Drops the map (rebuilt at the next use).
    pub(super) fn forget(&mut self) {
        self.rects = None;
    }

    /// True when the map is built (for tests).
    #[cfg(test)]
    pub(super) fn is_built(&self) -> bool {
        self.rects.is_some()
    }
}
