//! The id → rectangle locator of an [`Index`](super::Index), which
//! [`Index::update_by_id`](super::Index::update_by_id) uses to find the
//! rectangle an object has now: the structures find a record by its
//! rectangle (the R-tree family descends only where the rectangle fits), not
//! by its id. The map keeps each rectangle in single precision, rounded
//! outward (it contains the record's); the structure then finds the record
//! within it and gives its exact rectangle
//! ([`SpatialIndex::find_record`](crate::SpatialIndex::find_record)).
//!
//! The map is built lazily, by one query over the whole plane (every page of
//! the index read once, counted like any query), at the first update by id
//! after the index was created or opened; then [`Index::insert`],
//! [`Index::delete`], [`Index::update`] and `update_by_id` (and the object
//! operations) keep it in step. It is dropped, to be rebuilt at the next
//! update by id, when an operation fails for another reason than bad input
//! (a refusal changes nothing, and rebuilding the map after each, say a
//! move onto another object's point in a grid file, cost a read of the
//! whole index), and it is trusted only while its size equals the index's
//! record count (anything that changes records another way, such as a
//! FOR-tree changed through its lock, changes the count, or leaves a stale
//! rectangle: an update by id whose record the structure does not find
//! within the map's rectangle rebuilds the map and looks again). It is kept
//! outside the store's node budget: while
//! the ids are dense (ids `0..N`, as bulk loads and Python give them) an
//! array indexed by id of a four-`f32` rectangle and a `u32` hint, 20
//! bytes a record and one memory access per lookup (it took 40 with exact
//! rectangles and `u64` hints); otherwise a hash table of the same with the
//! `u64` key, 32-byte buckets, about 40–70 bytes a record ([`Places`]).
//! The table hashes keys with the page ids' multiplicative hasher
//! ([`IdMap`]): record keys are the index's own, and SipHash was a visible
//! share of an update by id.
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
use crate::geom::{Rect, MAX_COORD};
use crate::page_id::IdMap;
use crate::Result;

/// No hint of where a record is (also kept for a page past the hints'
/// range).
const NOWHERE: u32 = u32::MAX;

/// The hint of a free slot of a dense map: no record has this id.
const ABSENT: u32 = u32::MAX - 1;

/// A rectangle in single precision rounded outward, so that it contains
/// the rectangle it was made from: 16 bytes where the exact one takes 32.
/// The structure gives the exact rectangle of the record it finds there
/// ([`SpatialIndex::find_record`](crate::SpatialIndex::find_record)).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Approx([f32; 4]);

impl Approx {
    /// The smallest rectangle of `f32` corners that contains `r` (a
    /// coordinate past `f32`'s range becomes an infinity, widened back to
    /// [`MAX_COORD`]).
    fn of(r: &Rect) -> Approx {
        Approx([down(r.min_x()), down(r.min_y()), up(r.max_x()), up(r.max_y())])
    }

    /// The rectangle, in double precision; it contains the one it was
    /// made from.
    fn rect(&self) -> Rect {
        let [a, b, c, d] = self.0.map(widen);
        Rect::from_valid(a, b, c, d)
    }
}

/// The largest `f32` at most `v`.
fn down(v: f64) -> f32 {
    let f = v as f32;
    if f64::from(f) > v {
        f.next_down()
    } else {
        f
    }
}

/// The smallest `f32` at least `v`.
fn up(v: f64) -> f32 {
    let f = v as f32;
    if f64::from(f) < v {
        f.next_up()
    } else {
        f
    }
}

/// `v` in double precision, an infinity taken as the largest coordinate
/// a rectangle may have (every coordinate lies within it).
fn widen(v: f32) -> f64 {
    f64::from(v).clamp(-MAX_COORD, MAX_COORD)
}

/// The rectangle the map keeps for `r` (it contains `r`; for tests).
#[cfg(test)]
pub(super) fn kept_rect(r: &Rect) -> Rect {
    Approx::of(r).rect()
}

/// A record's rectangle, approximately, and the hint of where it is
/// (`NOWHERE`: none; `ABSENT`: a free slot of a dense map): 20 bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Located {
    rect: Approx,
    near: u32,
}

impl Located {
    /// A free slot of a dense map.
    fn free() -> Located {
        Located {
            rect: Approx([0.0; 4]),
            near: ABSENT,
        }
    }

    /// The hint, if the map keeps one.
    fn hint(&self) -> Option<u64> {
        (self.near != NOWHERE).then_some(u64::from(self.near))
    }
}

/// Ids a dense map may hold beyond twice its records before it turns into
/// a hash map (so a few records with small ids stay dense).
const DENSE_SLACK: u64 = 1024;

/// The map of a built locator, as the operations keep it in step: an array
/// indexed by id while the ids are dense (below twice the records, plus
/// [`DENSE_SLACK`]: ids `0..N`, as bulk loads and the Python package give
/// them), 20 bytes a record and one memory access per lookup; else a hash
/// map (32-byte buckets, about 40–70 bytes a record, two accesses). Both
/// answer alike
/// (`places_tests` checks them against each other).
#[derive(Debug)]
pub(super) enum Places {
    /// `slots[id]`; `len` of them hold records.
    Dense { slots: Vec<Located>, len: usize },
    /// By id.
    Sparse(IdMap<Located>),
}

impl Default for Places {
    fn default() -> Places {
        Places::Sparse(IdMap::default())
    }
}

impl Places {
    /// The map of the records `scan` gives to its visitor one at a time
    /// (`(id, rectangle, hint)`, ids unique), `records` of them expected:
    /// built as they come, never held first (a list of them took 56 bytes a
    /// record beside the map), dense while the ids are dense for that
    /// many records (ids `0..records`, in any order).
    fn scanned(
        records: Option<u64>,
        scan: impl FnOnce(&mut dyn FnMut(u64, Rect, Option<u64>)) -> Result<()>,
    ) -> Result<Places> {
        let expected = records.and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
        let mut places = Places::Dense {
            slots: Vec::with_capacity(expected),
            len: 0,
        };
        scan(&mut |id, rect, near| places.place_among(id, rect, near, expected))?;
        Ok(places)
    }

    /// How many records the map holds.
    fn len(&self) -> usize {
        match self {
            Places::Dense { len, .. } => *len,
            Places::Sparse(map) => map.len(),
        }
    }

    /// Where record `id` is, if the map holds it.
    fn get(&self, id: u64) -> Option<&Located> {
        match self {
            Places::Dense { slots, .. } => usize::try_from(id)
                .ok()
                .and_then(|i| slots.get(i))
                .filter(|l| l.near != ABSENT),
            Places::Sparse(map) => map.get(&id),
        }
    }

    /// Record `id` is at `rect` now, nothing known of where it is stored.
    pub(super) fn insert(&mut self, id: u64, rect: Rect) {
        self.place(id, rect, None);
    }

    /// Record `id` is at `rect` now, stored near page `near` (the hint).
    pub(super) fn place(&mut self, id: u64, rect: Rect, near: Option<u64>) {
        self.place_among(id, rect, near, 0);
    }

    /// [`place`](Self::place) in a map that will hold at least `records`
    /// records (a dense map stays dense for ids that many records make
    /// dense, though it holds fewer yet).
    fn place_among(&mut self, id: u64, rect: Rect, near: Option<u64>, records: usize) {
        let l = Located {
            rect: Approx::of(&rect),
            near: near
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n < ABSENT)
                .unwrap_or(NOWHERE),
        };
        match self {
            Places::Dense { slots, len } => {
                let i = id as usize;
                if i >= slots.len() {
                    if !dense_enough(id, (*len + 1).max(records)) {
                        self.make_sparse();
                        return self.place(id, rect, near);
                    }
                    slots.resize(i + 1, Located::free());
                }
                if let Some(slot) = slots.get_mut(i) {
                    *len += usize::from(slot.near == ABSENT);
                    *slot = l;
                }
            }
            Places::Sparse(map) => {
                map.insert(id, l);
            }
        }
    }

    /// Record `id` is gone.
    pub(super) fn remove(&mut self, id: &u64) {
        match self {
            Places::Dense { slots, len } => {
                if let Some(slot) = slots.get_mut(*id as usize) {
                    if slot.near != ABSENT {
                        *slot = Located::free();
                        *len -= 1;
                    }
                }
            }
            Places::Sparse(map) => {
                map.remove(id);
            }
        }
    }

    /// Turns a dense map into a hash map of the same records.
    fn make_sparse(&mut self) {
        if let Places::Dense { slots, .. } = self {
            let map: IdMap<Located> = slots
                .iter()
                .enumerate()
                .filter(|(_, l)| l.near != ABSENT)
                .map(|(i, l)| (i as u64, *l))
                .collect();
            *self = Places::Sparse(map);
        }
    }
}

/// Whether ids up to `top` are dense enough among `records` records for an
/// array indexed by id.
fn dense_enough(top: u64, records: usize) -> bool {
    top < (records as u64).saturating_mul(2).saturating_add(DENSE_SLACK)
}

/// Where each object of an index is: its id's rectangle (and a hint of its
/// page), once built.
#[derive(Debug, Default)]
pub(super) struct Locator {
    rects: Option<Places>,
}

impl Locator {
    /// A rectangle that contains `id`'s (its own, rounded outward to
    /// single precision) and the hint of where it is stored, building
    /// the map with `scan` (every `(id, rectangle, hint)` of the index) first
    /// when it is not built or does not hold `records` entries; `None` when
    /// the index does not hold `id`.
    pub(super) fn find(
        &mut self,
        id: u64,
        records: Option<u64>,
        scan: impl FnOnce(&mut dyn FnMut(u64, Rect, Option<u64>)) -> Result<()>,
    ) -> Result<Option<(Rect, Option<u64>)>> {
        let stale = match (&self.rects, records) {
            (Some(m), Some(n)) => m.len() as u64 != n,
            (Some(_), None) => false,
            (None, _) => true,
        };
        if stale {
            self.rects = None;
            self.rects = Some(Places::scanned(records, scan)?);
        }
        Ok(self.rects.as_ref().and_then(|m| {
            m.get(id)
                .map(|l| (l.rect.rect(), l.hint()))
        }))
    }

    /// The page hints the map holds for `ids` (none while it is not built;
    /// ids it does not hold, or holds without a hint, give none), read in
    /// one pass so that their memory latencies overlap.
    pub(super) fn hints(&self, ids: &[u64]) -> Vec<u64> {
        let Some(m) = self.rects.as_ref() else {
            return Vec::new();
        };
        let near: Vec<u32> = ids
            .iter()
            .map(|&id| m.get(id).map_or(NOWHERE, |l| l.near))
            .collect();
        near.into_iter()
            .filter(|&n| n != NOWHERE)
            .map(u64::from)
            .collect()
    }

    /// Keeps the map in step with an operation that ended with `outcome`:
    /// `apply` on success; nothing on a refusal of bad input
    /// ([`Error::is_user_error`](crate::Error::is_user_error)), which
    /// changes nothing (as the rollback journal relies on: `Index::change`);
    /// the map dropped on any other failure (rebuilt at the next use).
    /// Nothing to do while the map is not built.
    pub(super) fn track<T>(
        &mut self,
        outcome: &Result<T>,
        apply: impl FnOnce(&mut Places),
    ) {
        match (outcome, self.rects.as_mut()) {
            (Ok(_), Some(m)) => apply(m),
            (Ok(_), None) => {}
            (Err(e), _) if e.is_user_error() => {}
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

    /// Every `(id, rectangle, hint)` the map holds, ascending id; `None`
    /// while it is not built (for tests).
    #[cfg(test)]
    pub(super) fn entries(&self) -> Option<Vec<(u64, Rect, Option<u64>)>> {
        let mut all: Vec<(u64, Rect, Option<u64>)> = match self.rects.as_ref()? {
            Places::Dense { slots, .. } => slots
                .iter()
                .enumerate()
                .filter(|(_, l)| l.near != ABSENT)
                .map(|(i, l)| (i as u64, l.rect.rect(), l.hint()))
                .collect(),
            Places::Sparse(map) => map
                .iter()
                .map(|(&id, l)| (id, l.rect.rect(), l.hint()))
                .collect(),
        };
        all.sort_unstable_by_key(|e| e.0);
        Some(all)
    }

    /// Whether the built map is the array indexed by id (for tests).
    #[cfg(test)]
    pub(super) fn is_dense(&self) -> bool {
        matches!(self.rects, Some(Places::Dense { .. }))
    }
}

#[cfg(test)]
mod places_tests {
    use super::*;
    use proptest::prelude::*;

    /// What a map answers for every id up to `top`.
    fn answers(p: &Places, top: u64) -> Vec<Option<(u32, [u32; 4])>> {
        (0..=top)
            .map(|id| p.get(id).map(|l| (l.near, l.rect.0.map(f32::to_bits))))
            .collect()
    }

    /// The map of `records`, given one at a time.
    fn of(records: Vec<(u64, Rect, Option<u64>)>) -> Places {
        let n = records.len() as u64;
        let scanned = Places::scanned(Some(n), |visit| {
            for (id, r, near) in records {
                visit(id, r, near);
            }
            Ok(())
        });
        scanned.unwrap_or_else(|e| panic!("{e}"))
    }

    fn rect(v: u16) -> Rect {
        let x = f64::from(v);
        Rect::new(x, x, x + 1.0, x + 2.0).unwrap_or_else(|_| Rect::world())
    }

    #[derive(Debug, Clone)]
    enum Op {
        Place(u64, u16, Option<u64>),
        Remove(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Mostly small ids (dense), sometimes far ones (a dense map turns sparse).
        let id = prop_oneof![8 => 0u64..300, 1 => 0u64..100_000];
        prop_oneof![
            3 => (id.clone(), any::<u16>(), prop::option::of(0u64..1000))
                .prop_map(|(i, r, n)| Op::Place(i, r, n)),
            1 => id.prop_map(Op::Remove),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// Built from the same records and changed by the same operations,
        /// the dense form (when the ids allow it) and the hash map answer
        /// alike for every id and hold as many records.
        #[test]
        fn the_dense_map_answers_as_the_hash_map(
            ids in prop::collection::btree_set(0u64..400, 0..200),
            ops in prop::collection::vec(op(), 0..120),
        ) {
            let records: Vec<(u64, Rect, Option<u64>)> = ids
                .iter()
                .map(|&id| (id, rect(id as u16), (id % 3 == 0).then_some(id * 7)))
                .collect();
            let mut dense = of(records.clone());
            let mut sparse = Places::Sparse(IdMap::default());
            for (id, r, near) in &records {
                sparse.place(*id, *r, *near);
            }
            let is_dense = matches!(dense, Places::Dense { .. });
            prop_assert!(records.is_empty() || is_dense, "ids below 400 make a dense map");
            for op in &ops {
                match *op {
                    Op::Place(id, r, near) => {
                        dense.place(id, rect(r), near);
                        sparse.place(id, rect(r), near);
                    }
                    Op::Remove(id) => {
                        dense.remove(&id);
                        sparse.remove(&id);
                    }
                }
                prop_assert_eq!(dense.len(), sparse.len());
            }
            prop_assert_eq!(answers(&dense, 100_000), answers(&sparse, 100_000));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// The kept rectangle contains the record's, and each corner is the
        /// nearest `f32` outward (the next one inward would cut the
        /// record's), also past `f32`'s range.
        #[test]
        fn a_kept_rectangle_is_the_tightest_f32_one_around_the_record(
            xs in prop::array::uniform4(prop_oneof![
                4 => -1e7f64..1e7,
                1 => -1e150f64..1e150,
                1 => prop::sample::select(vec![0.0, -0.0, 1e-300, f64::from(f32::MAX), 1e39]),
            ]),
        ) {
            let r = Rect::new(xs[0].min(xs[2]), xs[1].min(xs[3]), xs[0].max(xs[2]), xs[1].max(xs[3]))
                .unwrap();
            let kept = kept_rect(&r);
            prop_assert!(kept.contains(&r), "{kept:?} does not contain {r:?}");
            let a = Approx::of(&r).0;
            let (lo, hi) = ([r.min_x(), r.min_y()], [r.max_x(), r.max_y()]);
            for i in 0..2 {
                prop_assert!(a[i] == f32::NEG_INFINITY || f64::from(a[i].next_up()) > lo[i]);
                prop_assert!(a[i + 2] == f32::INFINITY || f64::from(a[i + 2].next_down()) < hi[i]);
            }
        }
    }

    #[test]
    fn far_ids_make_a_dense_map_sparse_and_keep_every_record() {
        let mut p = of((0..10).map(|i| (i, rect(i as u16), None)).collect());
        assert!(matches!(p, Places::Dense { .. }));
        p.place(1 << 40, rect(7), Some(3));
        assert!(matches!(p, Places::Sparse(_)));
        assert_eq!(p.len(), 11);
        assert_eq!(p.get(1 << 40).map(|l| l.near), Some(3));
        assert_eq!(p.get(4).map(|l| l.rect.rect()), Some(rect(4)));
        assert!(matches!(of(vec![(1 << 40, rect(1), None)]), Places::Sparse(_)));
    }
}
