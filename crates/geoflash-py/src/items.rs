//! The entries of an answer with their objects (`objects=True`), held
//! compactly until Python iterates them.
//!
//! An answer of `n` entries takes 49 bytes an entry and its objects'
//! pickles, packed one after the other: the user id, the box, where the
//! pickle ends and whether there is one. Python makes each entry's
//! `(id, pickle, box)` tuple as it is yielded (and `geoflash.Item` from
//! it), so an answer over a large index is not a list of Python objects
//! (about 600 bytes an entry, measured with `Item`s and small objects).
//! The answer is taken whole, under the index's lock: later changes of
//! the index do not change what it yields.
use geoflash_engine::engine::records::Records;
use geoflash_engine::engine::{Hit, Result};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The entries of a query's answer and their pickled objects, yielded as
/// `(id, pickle or None, (minx, miny, maxx, maxy))` tuples, in the
/// answer's order, once (an iterator). `len()` is the number not yet
/// yielded.
#[pyclass(module = "geoflash._geoflash")]
pub(crate) struct FoundItems {
    /// The user id of each entry.
    ids: Vec<i64>,
    /// The box of each entry: `minx, miny, maxx, maxy`.
    rects: Vec<[f64; 4]>,
    /// Every entry's pickle, one after the other.
    pickles: Vec<u8>,
    /// Where each entry's pickle ends in `pickles` (it starts where the
    /// previous one ends).
    ends: Vec<usize>,
    /// Whether each entry has an object (an entry without one ends where
    /// the previous one does).
    has_object: Vec<bool>,
    /// The next entry to yield.
    next: usize,
}

impl FoundItems {
    /// The entries `hits` with their user ids and objects from `records`.
    pub(crate) fn of(records: &Records, hits: &[Hit]) -> Result<FoundItems> {
        // the pickles' exact size first: a growing buffer would hold up to
        // twice as much (and both buffers while it moves)
        let bytes = hits
            .iter()
            .map(|h| records.obj(h.id).map_or(0, <[u8]>::len))
            .sum();
        let mut found = FoundItems {
            ids: Vec::with_capacity(hits.len()),
            rects: Vec::with_capacity(hits.len()),
            pickles: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(hits.len()),
            has_object: Vec::with_capacity(hits.len()),
            next: 0,
        };
        for h in hits {
            found.ids.push(records.id(h.id)?);
            let r = &h.rect;
            found
                .rects
                .push([r.min_x(), r.min_y(), r.max_x(), r.max_y()]);
            let obj = records.obj(h.id);
            found.pickles.extend_from_slice(obj.unwrap_or_default());
            found.ends.push(found.pickles.len());
            found.has_object.push(obj.is_some());
        }
        Ok(found)
    }
}

/// One entry as Python receives it: (user id, pickled object, box).
type PyItem<'py> = (i64, Option<Bound<'py, PyBytes>>, (f64, f64, f64, f64));

#[pymethods]
impl FoundItems {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> Option<PyItem<'py>> {
        let i = self.next;
        let id = *self.ids.get(i)?;
        self.next += 1;
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p]);
        let pickle =
            self.has_object[i].then(|| PyBytes::new_bound(py, &self.pickles[start..self.ends[i]]));
        let [a, b, c, d] = self.rects[i];
        Some((id, pickle, (a, b, c, d)))
    }

    fn __len__(&self) -> usize {
        self.ids.len() - self.next
    }
}
