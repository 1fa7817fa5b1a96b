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
//! dropping the map). It costs about 70 bytes per record (a `u64` key, a
//! four-`f64` rectangle and a `u64` hint in a hash table), outside the
//! store's node budget. The table hashes keys with the page ids'
//! multiplicative hasher ([`IdMap`]): record keys are the index's own, and
//! SipHash was a visible share of an update by id.
//!
//! Beside each rectangle the map keeps a hint of where the record is: the
//! page the structure gave for it when the map was built
//! ([`SpatialIndex::located_records`](crate::SpatialIndex::located_records))
//! or at its last update by id
//! ([`SpatialIndex::update_near`](crate::SpatialIndex::update_near)): for
//! the R-tree family its leaf. The structures
//! find a record by its rectangle, and where leaves overlap that search
//! reads several leaves; with the hint it reads one (an index larger than
//! its memory budget read about three leaves from the device per update
//! without it, issue 43). A hint is only a hint: a record a split or a
//! reinsertion moved is found by the full search, and any other change of
//! the record (insert, delete, update by rectangle) forgets its hint.
//!
//! [`Index::insert`]: super::Index::insert
//! [`Index::delete`]: super::Index::delete
//! [`Index::update`]: super::Index::update
use crate::geom::Rect;
use crate::page_id::IdMap;
use crate::Result;

/// No hint of where a record is.
const NOWHERE: u64 = u64::MAX;

/// A record's rectangle and the hint of where it is (`NOWHERE`: none).
#[derive(Debug, Clone, Copy)]
struct Located {
    rect: Rect,
    near: u64,
}

/// The map of a built locator, as the operations keep it in step.
#[derive(Debug, Default)]
pub(super) struct Places(IdMap<Located>);

impl Places {
    /// Record `id` is at `rect` now, nothing known of where it is stored.
    pub(super) fn insert(&mut self, id: u64, rect: Rect) {
        self.place(id, rect, None);
    }

    /// Record `id` is at `rect` now, stored near page `near` (the hint).
    pub(super) fn place(&mut self, id: u64, rect: Rect, near: Option<u64>) {
        let near = near.unwrap_or(NOWHERE);
        self.0.insert(id, Located { rect, near });
    }

    /// Record `id` is gone.
    pub(super) fn remove(&mut self, id: &u64) {
        self.0.remove(id);
    }
}

/// Where each object of an index is: its id's rectangle (and a hint of its
/// page), once built.
#[derive(Debug, Default)]
pub(super) struct Locator {
    rects: Option<Places>,
}

impl Locator {
    /// The rectangle of `id` and the hint of where it is stored, building
    /// the map with `scan` (every `(id, rectangle, hint)` of the index) first
    /// when it is not built or does not hold `records` entries; `None` when
    /// the index does not hold `id`.
    pub(super) fn find(
        &mut self,
        id: u64,
        records: Option<u64>,
        scan: impl FnOnce() -> Result<Vec<(u64, Rect, Option<u64>)>>,
    ) -> Result<Option<(Rect, Option<u64>)>> {
        let stale = match (&self.rects, records) {
            (Some(m), Some(n)) => m.0.len() as u64 != n,
            (Some(_), None) => false,
            (None, _) => true,
        };
        if stale {
            self.rects = None;
            let map: IdMap<Located> = scan()?
                .into_iter()
                .map(|(id, rect, near)| {
                    let near = near.unwrap_or(NOWHERE);
                    (id, Located { rect, near })
                })
                .collect();
            self.rects = Some(Places(map));
        }
        Ok(self.rects.as_ref().and_then(|m| {
            m.0.get(&id)
                .map(|l| (l.rect, (l.near != NOWHERE).then_some(l.near)))
        }))
    }

    /// Keeps the map in step with an operation that ended with `outcome`:
    /// `apply` on success, the map dropped on failure (rebuilt at the next
    /// use). Nothing to do while the map is not built.
    pub(super) fn track<T>(
        &mut self,
        outcome: &Result<T>,
        apply: impl FnOnce(&mut Places),
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
