//! `_geoflash.Geometries`: the exact geometries of an index's entries, and
//! the refinement step of shapely 2's `STRtree.query` and `query_nearest`
//! on them, in Rust (the `geo` crate's DE-9IM matrix and distances).
//!
//! `geoflash.Index.query` runs the filter step in the index (one batched
//! traversal over the bounding boxes of all input geometries, each box
//! grown by the distance for `dwithin`), then hands the candidates to
//! [`Geometries::refine`], which keeps the pairs where
//! `predicate(input, tree_geometry)` holds: the input geometry is the
//! first argument, as in shapely (`query(g, predicate="contains")` finds
//! the tree geometries that `g` contains).
use std::collections::HashMap;

use geo::coordinate_position::{CoordPos, CoordinatePosition};
use geo::dimensions::{Dimensions, HasDimensions};
use geo::relate::IntersectionMatrix;
use geo::{
    Area, BoundingRect, Coord, CoordsIter, Distance, Euclidean, Intersects, LineString, Polygon,
    PreparedGeometry, Relate,
};
use geoflash_engine::engine::{from_wkb, window_geometry, Error, Geometry, Result};
use geoflash_engine::geom::Rect;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

use crate::core::Core;
use crate::nearest::{self, Wanted};
use crate::to_py;

/// The predicates of shapely 2's `STRtree.query` (besides None), the one
/// list of their names: Python reads it as `geoflash._geoflash.PREDICATES`.
pub const PREDICATES: [&str; 10] = [
    "intersects",
    "within",
    "contains",
    "overlaps",
    "crosses",
    "touches",
    "covers",
    "covered_by",
    "contains_properly",
    "dwithin",
];

/// Candidates of a bulk refinement from which it runs on every core.
const PARALLEL_CANDIDATES: usize = 20_000;

/// Geometries from which their decoding runs on every core.
const PARALLEL_DECODES: usize = 20_000;

/// `work` of the positions `0..n` in contiguous shares, one thread per
/// core when `parallel` (else one share), the answers in the order of the
/// shares; the first error is returned.
pub(crate) fn on_every_core<T: Send>(
    n: usize,
    parallel: bool,
    work: impl Fn(std::ops::Range<usize>) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let threads = if parallel {
        geoflash_engine::defaults::cores()
    } else {
        1
    };
    if threads == 1 {
        return Ok(vec![work(0..n)?]);
    }
    let share = n.div_ceil(threads).max(1);
    let work = &work;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(share)
            .map(|lo| s.spawn(move || work(lo..(lo + share).min(n))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("a worker thread panicked")))
            })
            .collect()
    })
}

/// A predicate of [`PREDICATES`], `p(input, tree_geometry)`.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Pred {
    Intersects,
    Within,
    Contains,
    Overlaps,
    Crosses,
    Touches,
    Covers,
    CoveredBy,
    ContainsProperly,
    Dwithin(f64),
}

impl Pred {
    /// The predicate called `name` (`distance` for `dwithin`, a finite
    /// number of at least 0).
    fn parse(name: &str, distance: Option<f64>) -> Result<Pred> {
        let p = match name {
            "intersects" => Pred::Intersects,
            "within" => Pred::Within,
            "contains" => Pred::Contains,
            "overlaps" => Pred::Overlaps,
            "crosses" => Pred::Crosses,
            "touches" => Pred::Touches,
            "covers" => Pred::Covers,
            "covered_by" => Pred::CoveredBy,
            "contains_properly" => Pred::ContainsProperly,
            "dwithin" => match distance {
                Some(d) if d.is_finite() && d >= 0.0 => Pred::Dwithin(d),
                Some(d) => {
                    return Err(Error::invalid(format!(
                        "predicate \"dwithin\" needs a finite distance of at least 0, not {d}"
                    )))
                }
                None => {
                    return Err(Error::invalid(
                        "predicate \"dwithin\" needs a distance (distance=...)",
                    ))
                }
            },
            _ => {
                return Err(Error::invalid(format!(
                    "unknown predicate {name:?}: use None or one of {}",
                    PREDICATES.join(", ")
                )))
            }
        };
        Ok(p)
    }

    /// Does `p(input, tree)` hold?
    /// `prepared` is the input prepared for DE-9IM ([`Pred::uses_relate`]).
    /// Cheap tests decide most pairs before the DE-9IM matrix.
    fn holds<'a>(
        self,
        input: &Geometry,
        prepared: Option<&PreparedGeometry<'a, &'a Geometry>>,
        tree: &Geometry,
    ) -> bool {
        match self {
            Pred::Intersects => return input.intersects(tree),
            Pred::Dwithin(d) => return Euclidean.distance(input, tree) <= d,
            // Two areas never cross (DE-9IM: crossing needs a dimension
            // below the other's, or two lines).
            Pred::Crosses if is_area(input) && is_area(tree) => return false,
            _ => {}
        }
        // Each of the others implies that the two share a point.
        if !input.intersects(tree) {
            return false;
        }
        if let Some(answer) = self.point_holds(input, tree) {
            return answer;
        }
        if input == tree {
            return self.matrix_holds(&equal_matrix(input));
        }
        // Two areas whose interiors share a point do not touch: found by a
        // vertex strictly inside the other area, this spares the matrix of
        // most overlapping pairs (the only ones left after the tests
        // above), which `touches` computed for every one.
        if matches!(self, Pred::Touches) && interiors_meet(input, tree) {
            return false;
        }
        // One simple polygon inside the other without their boundaries
        // meeting (most pairs of a join of small polygons with large
        // ones).
        if let Some(n) = nesting(input, tree) {
            return self.nested_holds(n);
        }
        // A vertex of the one that must lie in the other strictly outside
        // it (most pairs whose boundaries cross).
        if self.vertex_rules_out(input, tree) {
            return false;
        }
        match prepared {
            None => self.matrix_holds(&input.relate(tree)),
            Some(prepared) => self.matrix_holds(&prepared.relate(tree)),
        }
    }

    /// Does the predicate hold for two geometries nested as `n`?
    fn nested_holds(self, n: Nesting) -> bool {
        matches!(
            (self, n),
            (Pred::Intersects | Pred::Dwithin(_), _)
                | (
                    Pred::Contains | Pred::Covers | Pred::ContainsProperly,
                    Nesting::TreeInInput
                )
                | (Pred::Within | Pred::CoveredBy, Nesting::InputInTree)
        )
    }

    /// The predicate for a pair of which one is a point, from where the
    /// point lies in the other (interior, boundary, exterior): within and
    /// contains ask for the interior, covered_by and covers for not the
    /// exterior, touches for the boundary, and a point overlaps and
    /// crosses nothing (both need a point of its interior outside the
    /// other). None when neither is a point, or when the point must hold
    /// the other (left to the matrix).
    fn point_holds(self, input: &Geometry, tree: &Geometry) -> Option<bool> {
        let (point, other, point_is_input) = match (input, tree) {
            (Geometry::Point(p), g) => (p, g, true),
            (g, Geometry::Point(p)) => (p, g, false),
            _ => return None,
        };
        let pos = other.coordinate_position(&point.0);
        Some(match (self, point_is_input) {
            (Pred::Touches, _) => pos == CoordPos::OnBoundary,
            (Pred::Overlaps | Pred::Crosses, _) => false,
            (Pred::Within, true) | (Pred::Contains | Pred::ContainsProperly, false) => {
                pos == CoordPos::Inside
            }
            (Pred::CoveredBy, true) | (Pred::Covers, false) => pos != CoordPos::Outside,
            _ => return None,
        })
    }

    /// Is the predicate false because a vertex of the geometry it needs
    /// inside the other lies strictly outside it (contains, covers and
    /// contains_properly need every point of the tree geometry in the
    /// input, within and covered_by every point of the input in the tree
    /// geometry)? False says nothing; geometries of more than
    /// [`NESTING_MAX_COORDS`] coordinates are not tested.
    fn vertex_rules_out(self, input: &Geometry, tree: &Geometry) -> bool {
        let (outer, inner) = match self {
            Pred::Contains | Pred::Covers | Pred::ContainsProperly => (input, tree),
            Pred::Within | Pred::CoveredBy => (tree, input),
            _ => return false,
        };
        outer.coords_count() <= NESTING_MAX_COORDS
            && inner.coords_count() <= NESTING_MAX_COORDS
            && inner
                .coords_iter()
                .any(|c| outer.coordinate_position(&c) == CoordPos::Outside)
    }

    /// Does the DE-9IM matrix `m` of (input, tree) satisfy the predicate?
    fn matrix_holds(self, m: &IntersectionMatrix) -> bool {
        match self {
            Pred::Intersects => m.is_intersects(),
            Pred::Within => m.is_within(),
            Pred::Contains => m.is_contains(),
            Pred::Overlaps => m.is_overlaps(),
            Pred::Crosses => m.is_crosses(),
            Pred::Touches => m.is_touches(),
            Pred::Covers => m.is_covers(),
            Pred::CoveredBy => m.is_coveredby(),
            Pred::ContainsProperly => m.is_contains_properly(),
            Pred::Dwithin(_) => unreachable!("dwithin is decided by distance"),
        }
    }

    /// Does the predicate need a prepared (DE-9IM) input?
    fn uses_relate(self) -> bool {
        !matches!(self, Pred::Intersects | Pred::Dwithin(_))
    }
}

/// The polygons of an area (a polygon or multipolygon, as WKB gives
/// them), or None for another kind of geometry.
fn areal_parts(g: &Geometry) -> Option<&[Polygon]> {
    match g {
        Geometry::Polygon(p) => Some(std::slice::from_ref(p)),
        Geometry::MultiPolygon(mp) => Some(&mp.0),
        _ => None,
    }
}

/// Is `g` a polygon or multipolygon whose every part has positive area?
/// Its interior is then two-dimensional, and so is the intersection of
/// that interior with the other geometry's interior or exterior, whatever
/// that geometry is: the dimension the DE-9IM predicates read for it.
fn is_area(g: &Geometry) -> bool {
    areal_parts(g)
        .is_some_and(|parts| !parts.is_empty() && parts.iter().all(|p| p.unsigned_area() > 0.0))
}

/// Does a vertex of a part of positive area of `b` lie strictly inside
/// `a` (in its interior, not on its boundary)?
fn vertex_inside(a: &Geometry, b: &[Polygon]) -> bool {
    b.iter()
        .filter(|p| p.unsigned_area() > 0.0)
        .flat_map(|p| p.coords_iter())
        .any(|c: Coord| a.coordinate_position(&c) == CoordPos::Inside)
}

/// A sufficient test that the interiors of two areas intersect (false
/// says nothing): a vertex of one lies in the other's interior. That
/// interior is open, so a disc around the vertex lies in it, and the
/// vertex is on the boundary of a part of positive area of the first,
/// whose interior comes arbitrarily close (for valid polygons, the
/// semantics shapely's predicates have): the disc holds interior points of
/// both. False for geometries that are not both areas.
fn interiors_meet(a: &Geometry, b: &Geometry) -> bool {
    let (Some(pa), Some(pb)) = (areal_parts(a), areal_parts(b)) else {
        return false;
    };
    vertex_inside(a, pb) || vertex_inside(b, pa)
}

/// Which of two intersecting geometries lies in the other's interior
/// (see [`nesting`]).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Nesting {
    /// The tree geometry lies in the input's interior.
    TreeInInput,
    /// The input lies in the tree geometry's interior.
    InputInTree,
}

/// Rings of at most this many coordinates each are compared segment by
/// segment in [`nesting`]; larger ones go to the DE-9IM matrix, whose
/// sweep costs less than all pairs of their segments.
const NESTING_MAX_COORDS: usize = 64;

/// For two intersecting polygons of positive area without holes whose
/// boundaries do not meet, the one that lies in the other's interior; None
/// otherwise (other geometries, holes, large rings, meeting boundaries).
/// Valid polygons (the semantics shapely's predicates have): a boundary
/// that does not meet the other's lies wholly inside it or wholly outside;
/// a vertex strictly inside tells which, and a polygon without holes holds
/// all that its boundary encloses.
fn nesting(input: &Geometry, tree: &Geometry) -> Option<Nesting> {
    let (Geometry::Polygon(a), Geometry::Polygon(b)) = (input, tree) else {
        return None;
    };
    let simple = |p: &Polygon| {
        p.interiors().is_empty()
            && p.exterior().0.len() <= NESTING_MAX_COORDS
            && p.unsigned_area() > 0.0
    };
    if !(simple(a) && simple(b)) || a.exterior().intersects(b.exterior()) {
        return None;
    }
    let inside = |outer: &Polygon, inner: &Polygon| {
        inner
            .exterior()
            .0
            .first()
            .is_some_and(|c| outer.coordinate_position(c) == CoordPos::Inside)
    };
    if inside(a, b) {
        Some(Nesting::TreeInInput)
    } else if inside(b, a) {
        Some(Nesting::InputInTree)
    } else {
        None
    }
}

/// The DE-9IM matrix of a geometry with itself: interiors meet in its
/// dimension, boundaries in theirs, nothing else but the exteriors. GEOS
/// gives it for identical geometries even when they are invalid (OSM
/// buildings with self-touching rings), where a computed matrix differs.
fn equal_matrix(g: &Geometry) -> IntersectionMatrix {
    let code = |d: Dimensions| match d {
        Dimensions::Empty => 'F',
        Dimensions::ZeroDimensional => '0',
        Dimensions::OneDimensional => '1',
        Dimensions::TwoDimensional => '2',
    };
    let (i, b) = (code(g.dimensions()), code(g.boundary_dimensions()));
    format!("{i}FFF{b}FFF2")
        .parse()
        .unwrap_or_else(|_| g.relate(g))
}

/// Are `a` and `b` equal as point sets (shapely's `equals`)? Only when
/// their bounding rectangles are.
fn equal(a: &Geometry, b: &Geometry) -> bool {
    a == b || (a.bounding_rect() == b.bounding_rect() && a.relate(b).is_equal_topo())
}

/// Native-endian 8-byte values of `bytes` (`what` names the buffer in
/// the error when its length is not a multiple of 8).
fn words(bytes: &[u8], what: &str) -> Result<Vec<[u8; 8]>> {
    let rows = bytes.chunks_exact(8);
    if !rows.remainder().is_empty() {
        return Err(Error::invalid(format!(
            "{what} buffer of {} bytes is not a whole number of 8-byte values",
            bytes.len()
        )));
    }
    Ok(rows
        .map(|c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            a
        })
        .collect())
}

/// Native-endian int64 values.
fn int64s(bytes: &[u8], what: &str) -> Result<Vec<i64>> {
    Ok(words(bytes, what)?
        .into_iter()
        .map(i64::from_ne_bytes)
        .collect())
}

/// Native-endian float64 values.
pub(crate) fn float64s(bytes: &[u8], what: &str) -> Result<Vec<f64>> {
    Ok(words(bytes, what)?
        .into_iter()
        .map(f64::from_ne_bytes)
        .collect())
}

/// The positions of `keys` (native int64, each in `0..bound`) in the
/// order of their keys, equal keys in their order (a stable sort): one
/// counting pass, where a comparison sort of a join's million pairs took a
/// twentieth of the join. Native int64.
#[pyfunction]
pub(crate) fn stable_order_by_key<'py>(
    py: Python<'py>,
    keys: &[u8],
    bound: usize,
) -> PyResult<Bound<'py, PyByteArray>> {
    let order = py
        .allow_threads(|| -> Result<Vec<i64>> {
            let keys = int64s(keys, "key")?;
            let mut start = vec![0usize; bound + 1];
            for &k in &keys {
                let slot = usize::try_from(k)
                    .ok()
                    .filter(|&k| k < bound)
                    .ok_or_else(|| Error::invalid(format!("key {k} is not in 0..{bound}")))?;
                start[slot + 1] += 1;
            }
            for i in 0..bound {
                start[i + 1] += start[i];
            }
            let mut order = vec![0i64; keys.len()];
            for (position, &k) in keys.iter().enumerate() {
                let at = &mut start[k as usize];
                order[*at] = position as i64;
                *at += 1;
            }
            Ok(order)
        })
        .map_err(to_py)?;
    Ok(out_bytes(py, &order, i64::to_ne_bytes))
}

/// A `bytearray` of native-endian values (NumPy's `frombuffer` reads it
/// without a copy, writable).
pub(crate) fn out_bytes<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    values: &[T],
    f: impl Fn(T) -> [u8; N],
) -> Bound<'py, PyByteArray> {
    let mut buf = Vec::with_capacity(values.len() * N);
    for v in values {
        buf.extend_from_slice(&f(*v));
    }
    PyByteArray::new_bound(py, &buf)
}

/// Polygons of one ring given as their coordinates rather than as WKB
/// (what shapely's `get_coordinates` and `get_num_coordinates` return,
/// without writing and reading WKB): geometry `i` is the ring of
/// `counts[i]` coordinates that follows those of the geometries before
/// it, or is given otherwise when `counts[i]` is 0.
#[derive(Default)]
struct Rings {
    /// x, y of every ring's coordinates, ring after ring.
    coords: Vec<f64>,
    /// Per geometry, its first coordinate (one more: the end); empty when
    /// no geometry is given this way.
    starts: Vec<usize>,
}

impl Rings {
    /// The rings of `n` geometries from `counts` (native int64, one per
    /// geometry) and `coords` (native float64 x, y pairs); none when
    /// neither is given.
    fn new(counts: Option<&[u8]>, coords: Option<&[u8]>, n: usize) -> Result<Rings> {
        let (counts, coords) = match (counts, coords) {
            (None, None) => return Ok(Rings::default()),
            (Some(a), Some(b)) => (int64s(a, "coordinate count")?, float64s(b, "coordinate")?),
            _ => {
                return Err(Error::invalid(
                    "coordinate counts and coordinates go together: give both or neither",
                ))
            }
        };
        if counts.len() != n {
            return Err(Error::invalid(format!(
                "{} coordinate counts for {n} geometries (expected one each)",
                counts.len()
            )));
        }
        let mut starts = Vec::with_capacity(n + 1);
        let mut at = 0usize;
        starts.push(at);
        for &c in &counts {
            let c = usize::try_from(c)
                .map_err(|_| Error::invalid(format!("negative coordinate count {c}")))?;
            at = at.saturating_add(c);
            starts.push(at);
        }
        if at.checked_mul(2) != Some(coords.len()) {
            return Err(Error::invalid(format!(
                "the coordinate counts add up to {at} coordinates but {} values were given \
                 (expected x, y of each)",
                coords.len()
            )));
        }
        Ok(Rings { coords, starts })
    }

    /// Geometry `i` as a polygon of one ring, if it is given this way.
    fn polygon(&self, i: usize) -> Option<Geometry> {
        let (a, b) = (*self.starts.get(i)?, *self.starts.get(i + 1)?);
        if a == b {
            return None;
        }
        let ring: Vec<Coord> = self.coords[2 * a..2 * b]
            .chunks_exact(2)
            .map(|c| Coord { x: c[0], y: c[1] })
            .collect();
        Some(Geometry::Polygon(Polygon::new(
            LineString::from(ring),
            vec![],
        )))
    }
}

/// Geometry `i` of a batch as Python hands it over: its WKB when given,
/// else its ring when `rings` has one, else its box (`boxes`: native
/// float64 rows, a point or a degenerate box as what it is). `what` names
/// the geometry in errors.
fn decode(
    wkb: Option<&[u8]>,
    rings: &Rings,
    boxes: &[f64],
    i: usize,
    what: impl Fn() -> String,
) -> Result<Geometry> {
    if let Some(w) = wkb {
        return from_wkb(w, &what());
    }
    if let Some(p) = rings.polygon(i) {
        return Ok(p);
    }
    let b = boxes
        .get(4 * i..4 * i + 4)
        .ok_or_else(|| Error::invalid(format!("{} has neither WKB nor a box", what())))?;
    let r = Rect::new(b[0], b[1], b[2], b[3]).map_err(|e| match e {
        Error::InvalidInput(m) => Error::invalid(format!("{}: {m}", what())),
        e => e,
    })?;
    Ok(window_geometry(&r))
}

/// The input geometries of a bulk query: the WKB of each, borrowed from
/// its `bytes` object (extracting a `Vec<u8>` would read a Python int per
/// byte), or None for one that is its box (a point: no WKB to write and
/// read) or one given as a ring ([`Rings`]), and the inputs' boxes
/// (native float64 rows).
struct Inputs<'a> {
    wkbs: Vec<Option<&'a [u8]>>,
    boxes: Vec<f64>,
    rings: Rings,
}

impl<'a> Inputs<'a> {
    /// The inputs of `wkbs` and `boxes` (needed where a WKB is None).
    fn new(wkbs: &'a [Option<Bound<'_, PyBytes>>], boxes: Option<&[u8]>) -> Result<Inputs<'a>> {
        let boxes = float64s(boxes.unwrap_or_default(), "input box")?;
        Ok(Inputs {
            wkbs: wkbs
                .iter()
                .map(|w| w.as_ref().map(|b| b.as_bytes()))
                .collect(),
            boxes,
            rings: Rings::default(),
        })
    }

    /// The inputs whose WKB is None given as rings by `counts` and
    /// `coords` where they are (see [`Rings`]).
    fn with_rings(mut self, counts: Option<&[u8]>, coords: Option<&[u8]>) -> Result<Self> {
        self.rings = Rings::new(counts, coords, self.wkbs.len())?;
        Ok(self)
    }

    /// How many inputs.
    fn len(&self) -> usize {
        self.wkbs.len()
    }

    /// Input `i`, decoded ([`decode`]).
    fn geometry(&self, i: usize) -> Result<Geometry> {
        decode(self.wkbs[i], &self.rings, &self.boxes, i, || {
            format!("input geometry {i}")
        })
    }

    /// Every input, decoded.
    fn geometries(&self) -> Result<Vec<Geometry>> {
        (0..self.len()).map(|i| self.geometry(i)).collect()
    }
}

/// The candidate ranges of each input: `offsets` (len(inputs) + 1
/// non-decreasing values ending at `n_ids`) as index ranges.
fn ranges(offsets: &[i64], n_inputs: usize, n_ids: usize) -> Result<Vec<std::ops::Range<usize>>> {
    if offsets.len() != n_inputs + 1 {
        return Err(Error::invalid(format!(
            "{} offsets for {n_inputs} input geometries (expected {})",
            offsets.len(),
            n_inputs + 1
        )));
    }
    let mut out = Vec::with_capacity(n_inputs);
    for w in offsets.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a < 0 || b < a || b as usize > n_ids {
            return Err(Error::invalid(format!(
                "bad candidate offsets {a}..{b} for {n_ids} candidates"
            )));
        }
        out.push(a as usize..b as usize);
    }
    Ok(out)
}

/// Where each id's geometry is: a table indexed by id when the ids are
/// small non-negative numbers (row positions, as `from_geoseries` gives:
/// no hashing per candidate), else a hash map.
enum Slots {
    /// `table[id]` is the position, `usize::MAX` for an id without one.
    Table(Vec<usize>),
    /// Any ids.
    Map(HashMap<i64, usize>),
}

impl Slots {
    /// The slots of `ids` (position `i` holds `ids[i]`; the first of
    /// duplicates wins).
    fn new(ids: &[i64]) -> Slots {
        let small = ids
            .iter()
            .all(|&id| id >= 0 && (id as u64) < 2 * ids.len() as u64 + 1024);
        if small {
            let len = ids.iter().map(|&id| id as usize + 1).max().unwrap_or(0);
            let mut table = vec![usize::MAX; len];
            for (i, &id) in ids.iter().enumerate() {
                if table[id as usize] == usize::MAX {
                    table[id as usize] = i;
                }
            }
            return Slots::Table(table);
        }
        let mut map = HashMap::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            map.entry(id).or_insert(i);
        }
        Slots::Map(map)
    }

    /// The position of `id`'s geometry.
    fn get(&self, id: i64) -> Option<usize> {
        match self {
            Slots::Table(t) => usize::try_from(id)
                .ok()
                .and_then(|i| t.get(i).copied())
                .filter(|&i| i != usize::MAX),
            Slots::Map(m) => m.get(&id).copied(),
        }
    }
}

/// The exact geometries of an index's entries by user id (internal: used
/// by `geoflash.Index.query` and `query_nearest`). An entry stored without
/// a geometry counts as its box (a line or a point when the box is
/// degenerate).
#[pyclass(module = "geoflash._geoflash", frozen)]
pub struct Geometries {
    /// Position in `geoms` of each id (the first geometry of a duplicate id).
    slot: Slots,
    geoms: Vec<Geometry>,
}

impl Geometries {
    /// The geometry of entry `id`.
    fn get(&self, id: i64) -> Result<&Geometry> {
        self.slot
            .get(id)
            .map(|i| &self.geoms[i])
            .ok_or_else(|| Error::invalid(format!("no geometry for entry {id}")))
    }

    /// The refinement of the inputs `share` (positions in `inputs`, WKB):
    /// the pairs (input position, entry id) of their candidates
    /// (`ranges` into `ids`) where `p(input, entry)` holds, by input then
    /// id. Inputs without candidates are not decoded.
    fn refine_share(
        &self,
        p: Pred,
        inputs: &Inputs<'_>,
        ranges: &[std::ops::Range<usize>],
        ids: &[i64],
        share: std::ops::Range<usize>,
    ) -> Result<(Vec<i64>, Vec<i64>)> {
        let (mut left, mut right) = (Vec::new(), Vec::new());
        for i in share {
            let r = ranges[i].clone();
            if r.is_empty() {
                continue;
            }
            let g = inputs.geometry(i)?;
            let mut cands: Vec<i64> = ids[r].to_vec();
            cands.sort_unstable();
            let prepared = p.uses_relate().then(|| PreparedGeometry::from(&g));
            for id in cands {
                if p.holds(&g, prepared.as_ref(), self.get(id)?) {
                    left.push(i as i64);
                    right.push(id);
                }
            }
        }
        Ok((left, right))
    }

    /// The exact distances from `input` to the entries of `ids`
    /// (`f64::NAN` for one `exclusive` leaves out: one equal to the input).
    pub(crate) fn distances(
        &self,
        input: &Geometry,
        ids: &[i64],
        exclusive: bool,
    ) -> Result<Vec<f64>> {
        ids.iter()
            .map(|&id| {
                let t = self.get(id)?;
                let d = Euclidean.distance(input, t);
                Ok(if exclusive && d == 0.0 && equal(input, t) {
                    f64::NAN
                } else {
                    d
                })
            })
            .collect()
    }
}

#[pymethods]
impl Geometries {
    /// The geometries of entries `ids` (native int64): `wkbs[i]` (WKB) or,
    /// where None, the polygon of `counts[i]` coordinates of `coords` when
    /// given and not 0 (see `Rings`), else the box `rects[i]` (native
    /// float64 rows `minx, miny, maxx, maxy`).
    #[new]
    #[pyo3(signature = (ids, wkbs, rects, counts=None, coords=None))]
    fn new(
        py: Python<'_>,
        ids: &[u8],
        wkbs: Vec<Option<Bound<'_, PyBytes>>>,
        rects: &[u8],
        counts: Option<&[u8]>,
        coords: Option<&[u8]>,
    ) -> PyResult<Geometries> {
        let wkbs: Vec<Option<&[u8]>> = wkbs
            .iter()
            .map(|w| w.as_ref().map(|b| b.as_bytes()))
            .collect();
        py.allow_threads(|| -> Result<Geometries> {
            let ids = int64s(ids, "id")?;
            let rects = float64s(rects, "box")?;
            if wkbs.len() != ids.len() || rects.len() != 4 * ids.len() {
                return Err(Error::invalid(format!(
                    "{} ids, {} geometries and {} boxes: expected as many of each",
                    ids.len(),
                    wkbs.len(),
                    rects.len() / 4
                )));
            }
            let rings = Rings::new(counts, coords, ids.len())?;
            let entry = |i: usize| -> Result<Geometry> {
                decode(wkbs[i], &rings, &rects, i, || {
                    format!("geometry of entry {}", ids[i])
                })
            };
            let geoms = on_every_core(ids.len(), ids.len() >= PARALLEL_DECODES, |range| {
                range.map(entry).collect::<Result<Vec<_>>>()
            })?
            .into_iter()
            .flatten()
            .collect();
            Ok(Geometries {
                slot: Slots::new(&ids),
                geoms,
            })
        })
        .map_err(to_py)
    }

    /// Number of geometries.
    fn __len__(&self) -> usize {
        self.geoms.len()
    }

    /// The refinement of a bulk query: `inputs` (WKB of each input
    /// geometry, or None for one that is its box in `boxes`, native
    /// float64 rows: a point), `offsets` and `ids` (native int64: the candidates of
    /// input `i`, entries whose box passed the filter step, at
    /// `ids[offsets[i]:offsets[i+1]]`). Returns (input positions, entry
    /// ids) as one native int64 buffer of `2 × M` values (the M input
    /// positions, then the M ids; NumPy: `frombuffer(...).reshape(2, -1)`),
    /// the pairs where `predicate(input, entry)` holds, by input then by
    /// id. Many candidates are refined on every core, the inputs in
    /// contiguous shares.
    /// `counts` and `coords` give inputs whose WKB is None as rings (see
    /// `Rings`; `_exact._encode` writes all three).
    #[pyo3(signature = (inputs, offsets, ids, predicate, distance=None, boxes=None, counts=None, coords=None))]
    #[allow(clippy::too_many_arguments)] // the Python call's arguments
    fn refine<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<Option<Bound<'py, PyBytes>>>,
        offsets: &[u8],
        ids: &[u8],
        predicate: &str,
        distance: Option<f64>,
        boxes: Option<&[u8]>,
        counts: Option<&[u8]>,
        coords: Option<&[u8]>,
    ) -> PyResult<Bound<'py, PyByteArray>> {
        let p = Pred::parse(predicate, distance).map_err(to_py)?;
        let inputs = Inputs::new(&inputs, boxes)
            .and_then(|i| i.with_rings(counts, coords))
            .map_err(to_py)?;
        let (mut left, right) = py
            .allow_threads(|| -> Result<(Vec<i64>, Vec<i64>)> {
                let ids = int64s(ids, "id")?;
                let ranges = ranges(&int64s(offsets, "offset")?, inputs.len(), ids.len())?;
                // Inputs in contiguous shares, one thread each when there
                // are enough candidates to pay for the threads.
                let parts =
                    on_every_core(inputs.len(), ids.len() >= PARALLEL_CANDIDATES, |share| {
                        self.refine_share(p, &inputs, &ranges, &ids, share)
                    })?;
                let (mut left, mut right) = (Vec::new(), Vec::new());
                for (l, r) in parts {
                    left.extend(l);
                    right.extend(r);
                }
                Ok((left, right))
            })
            .map_err(to_py)?;
        left.extend(right);
        Ok(out_bytes(py, &left, i64::to_ne_bytes))
    }

    /// The exact k-nearest search of `inputs` (WKB, or None for one that
    /// is its box in `boxes`, native float64 rows: a point) in the index
    /// of `core`, over these geometries but those of the `special` ids
    /// (native int64, sorted): per input the `k` entries nearest by exact
    /// distance (ties by id), and with `all_matches` every other one at
    /// the k-th distance; none farther than `max_distance`; with
    /// `exclusive` none equal to the input (see `nearest.rs`). Returns
    /// (input positions, entry ids, distances, each input's bound: its
    /// k-th distance among its k nearest boxes or `max_distance` when
    /// smaller, infinity when fewer than k), native int64, int64,
    /// float64, float64.
    #[pyo3(signature = (core, inputs, boxes, special, k, all_matches, exclusive, max_distance=None))]
    #[allow(clippy::too_many_arguments)] // the Python call's arguments
    #[allow(clippy::type_complexity)]
    fn nearest_in<'py>(
        &self,
        py: Python<'py>,
        core: PyRef<'py, Core>,
        inputs: Vec<Option<Bound<'py, PyBytes>>>,
        boxes: &[u8],
        special: &[u8],
        k: usize,
        all_matches: bool,
        exclusive: bool,
        max_distance: Option<f64>,
    ) -> PyResult<(
        Bound<'py, PyByteArray>,
        Bound<'py, PyByteArray>,
        Bound<'py, PyByteArray>,
        Bound<'py, PyByteArray>,
    )> {
        let want = Wanted {
            k,
            all_matches,
            exclusive,
            max_distance: max_distance.unwrap_or(f64::INFINITY),
        };
        let inputs = Inputs::new(&inputs, Some(boxes)).map_err(to_py)?;
        let found = core.read_index_nogil(py, |index| {
            let geoms = inputs.geometries()?;
            let windows = crate::core::boxes(boxes, true)?;
            let special = int64s(special, "special id")?;
            nearest::search(index, self, &geoms, &windows, &special, want)
        })?;
        Ok((
            out_bytes(py, &found.inputs, i64::to_ne_bytes),
            out_bytes(py, &found.ids, i64::to_ne_bytes),
            out_bytes(py, &found.distances, f64::to_ne_bytes),
            out_bytes(py, &found.bounds, f64::to_ne_bytes),
        ))
    }
}
