"""Queries on exact geometries with shapely 2's ``STRtree`` semantics:
``Index.query(geometry, predicate=..., distance=...)``,
``Index.query_nearest`` and ``Index.nearest`` of a geometry.

The filter step runs in the index (one batched traversal over the
bounding boxes of all the input geometries), the refinement in Rust
(``_geoflash.Geometries``: exact tests and GEOS's distance formulas),
both in one call each for any number of inputs.

The answers are shapely's (``STRtree``'s) to the last pair: the Rust
refinement decides what exact tests decide (where a point lies, whether
segments meet) and measures distances with GEOS's own formulas
(``distance.rs``); every pair whose answer needs the DE-9IM matrix it
hands back, and GEOS decides it here (``_refine_here``: shapely's
predicate of the prepared input, as ``STRtree.query`` evaluates it). So
are the candidates of the geometries that only GEOS reads as shapely
does (``_Tree``): those of an id that several entries hold (rtree's
duplicate ids; the Rust refinement keeps one geometry per id), those of
a GeometryCollection (the ``geo`` crate's DE-9IM matrix of a collection
panics on overlapping parts), and those of a geometry that GEOS finds
invalid (``shapely.is_valid``: zero-length lines, collapsed or
self-intersecting rings, bow-ties, spikes; GEOS answers something for
them, and ``STRtree`` gives that answer), an input or an entry.
Coordinates that are NaN, infinite or beyond ±1e150 (the index's range,
``MAX_COORD``) are refused (``RTreeError``) before anything is refined.
"""

from __future__ import annotations

import math
import struct
import threading
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from ._geoflash import PREDICATES as _NATIVE_PREDICATES
from ._geoflash import MAX_COORD as _MAX_COORD
from ._geoflash import Geometries as _Geometries
from .exceptions import RTreeError

#: The predicates of ``STRtree.query`` (None: the bounding-box test alone),
#: the names from the extension module (``predicates.rs``), their one source.
PREDICATES = (None,) + tuple(_NATIVE_PREDICATES)

# The box test that each predicate implies, as the index reads it
# (``predicate(window, entry box)``): an input that contains or covers an
# entry contains its box; one within or covered by an entry is within its box.
_FILTER = {
    "contains": "contains",
    "covers": "contains",
    "contains_properly": "contains",
    "within": "within",
    "covered_by": "within",
}
_WORLD = (-np.inf, -np.inf, np.inf, np.inf)
#: ``MAX_COORD`` as the errors write it: ±1e150
_RANGE = "±" + f"{_MAX_COORD:.0e}".replace("e+", "e")


def _grow(boxes: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``boxes`` (N×4) grown by ``d`` (N) on every side, and a little more
    so that rounding in the subtraction loses no entry at distance ``d``
    (extra candidates are refined away)."""
    scale = np.max(np.abs(boxes), axis=1)
    pad = d * (1 + 1e-9) + scale * 1e-12
    return np.ascontiguousarray(boxes + np.outer(pad, [-1.0, -1.0, 1.0, 1.0]))


#: shapely's type ids of a point, a linear ring, a polygon, a multi-point,
#: a multi-polygon and a GeometryCollection.
_POINT, _LINEARRING, _POLYGON, _MULTIPOINT, _MULTIPOLYGON, _COLLECTION = 0, 2, 3, 4, 6, 7


def _invalid(geoms: np.ndarray, types: np.ndarray) -> np.ndarray:
    """Which of ``geoms`` (shapely's type ids ``types``, -1 for None) GEOS
    finds invalid (``shapely.is_valid``), whose pairs GEOS decides
    (``_Tree``, ``_Inputs.special``). Points and multi-points are valid
    with finite coordinates (checked elsewhere), and collections go to
    GEOS anyway: none of them is tested."""
    import shapely

    out = np.zeros(len(geoms), dtype=bool)
    test = np.flatnonzero((types > _POINT) & (types != _MULTIPOINT) & (types != _COLLECTION))
    if len(test):
        out[test] = ~np.asarray(shapely.is_valid(geoms[test]), dtype=bool)
    return out


def _tested_here(types: np.ndarray, counts: Optional[bytes], rows: Optional[np.ndarray] = None) -> np.ndarray:
    """Which geometries (shapely's type ids ``types``; ``counts``: the
    ring coordinate counts of every geometry from :func:`_encode`, None
    when none is a ring; ``rows``: the positions of ``types`` among them,
    all by default) are tested for validity here with shapely rather than
    in Rust (``validity.rs``, which tests points, lines and the polygons
    given as one ring): linear rings (WKB reads them as lines),
    multi-polygons and polygons with holes."""
    if counts is None:
        ring = np.zeros(len(types), dtype=bool)
    else:
        ring = np.frombuffer(counts, dtype=np.int64) > 0
        ring = ring if rows is None else ring[rows]
    return (types == _LINEARRING) | (types == _MULTIPOLYGON) | ((types == _POLYGON) & ~ring)


def _without_empty_parts(geoms: np.ndarray) -> np.ndarray:
    """``geoms`` with the empty members of their multi-geometries and
    collections left out (the same point sets, and GEOS's answers for them
    are the same: tested): GEOS 3.14's prepared ``contains`` of a polygon
    crashes the interpreter on a multi-point or multi-line string with an
    empty member that touches its boundary (so does ``STRtree.query``),
    and without them it answers. The others are returned as they are."""
    import shapely

    types = shapely.get_type_id(geoms)
    multi = np.flatnonzero(types >= _MULTIPOINT)
    if not len(multi):
        return geoms
    parts, at = shapely.get_parts(geoms[multi], return_index=True)
    empty = np.asarray(shapely.is_empty(parts), dtype=bool)
    if not empty.any():
        return geoms
    out = geoms.copy()
    make = {4: shapely.multipoints, 5: shapely.multilinestrings, 6: shapely.multipolygons}
    for i in np.unique(at[empty]):
        # (some member is not empty: the geometry is not, see _Inputs)
        members = _without_empty_parts(parts[(at == i) & ~empty])
        out[multi[i]] = make.get(int(types[multi[i]]), shapely.geometrycollections)(list(members))
    return out


def _prepared(geoms: np.ndarray) -> np.ndarray:
    """Prepared copies of ``geoms`` (shapely's type ids and empty members
    as :func:`_without_empty_parts` leaves them): ``STRtree.query``
    evaluates a predicate on the prepared input, and GEOS's prepared
    predicates differ from the others on some invalid geometries (a line
    of two equal points is farther than any distance from everything for
    the prepared ``dwithin``). Copies, so that the caller's geometries stay
    as they were."""
    import shapely

    # (the identity transform makes new geometries of the same kinds and
    # coordinates: WKB would turn a LinearRing into a LineString)
    out = shapely.transform(_without_empty_parts(geoms), lambda xy: xy)
    shapely.prepare(out)
    return out


def _not_finite(what: str, geometry: Any) -> RTreeError:
    """The error for a geometry with a NaN or infinite coordinate, or one
    beyond the index's range where it is refined."""
    import shapely

    text = shapely.to_wkt(geometry, trim=True, rounding_precision=6)
    if len(text) > 120:
        text = text[:117] + "..."
    return RTreeError(
        f"{what} has a coordinate that is NaN, infinite or beyond {_RANGE} (the index's range): {text}"
    )


def _check_finite(geoms: np.ndarray, coords: np.ndarray, index: np.ndarray, name: Callable[[int], str]) -> None:
    """Raises the error of the first of ``geoms`` with a coordinate of
    ``coords`` (those of ``shapely.get_coordinates(geoms,
    return_index=True)``, ``index`` the geometry of each) that is NaN,
    infinite or beyond ±``MAX_COORD`` (where the refinement's distances
    and orientation tests would overflow: a review found a line at 1e200
    at distance 0 from a point 5 away); ``name(i)`` names geometry ``i``
    in the message."""
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(coords) <= _MAX_COORD).all(axis=1)
    if bad.any():
        i = int(index[np.argmax(bad)])
        raise _not_finite(name(i), geoms[i])


def _encode(
    geoms: np.ndarray,
    rings: bool = True,
    name: Optional[Callable[[int], str]] = None,
    types: Optional[np.ndarray] = None,
) -> Tuple[List[Optional[bytes]], Optional[bytes], Optional[bytes]]:
    """The geometries as Rust reads them (``_geoflash.Geometries`` and the
    refinement's inputs): with ``rings``, the polygons of one ring as their
    coordinates (``counts``, native int64 per geometry, 0 for the others,
    and ``coords``, native float64 x, y pairs: reading shapely's
    coordinates costs about half of writing WKB), points as None (Rust
    takes a point from its box) and every other geometry as WKB.
    ``counts`` and ``coords`` are None when no geometry is such a polygon
    (always without ``rings``: the nearest searches, which pick inputs
    from the list, take WKB only).

    A geometry with a coordinate that is NaN, infinite or beyond
    ±``MAX_COORD`` raises ``RTreeError``, ``name(i)`` naming geometry ``i`` (shapely's bounds leave a NaN out,
    and the Rust refinement would panic on it or answer anything); a
    point's coordinates are its box's, which the caller checks."""
    import shapely

    name = name or (lambda i: f"geometry {i}")
    if types is None and len(geoms) == 1 and isinstance(geoms[0], shapely.Geometry) and not geoms[0].is_empty:
        return _encode_one(geoms[0], rings, name)
    types = shapely.get_type_id(geoms) if types is None else types
    simple = np.flatnonzero(types == _POLYGON) if rings else np.empty(0, dtype=np.intp)
    counts = np.zeros(len(geoms), dtype=np.int64)
    if len(simple):
        polygons = geoms[simple]
        n = shapely.get_num_coordinates(polygons)
        # An empty polygon has no ring to give (WKB says it is empty).
        keep = (n > 0) & (shapely.get_num_interior_rings(polygons) == 0)
        simple = simple[keep]
        counts[simple] = n[keep]
    out = np.full(len(geoms), None, dtype=object)
    other = types != _POINT
    other[simple] = False
    if other.any():
        rows = np.flatnonzero(other & (types >= 0))
        xy, at = shapely.get_coordinates(geoms[rows], return_index=True)
        _check_finite(geoms, xy, rows[at], name)
        out[other] = shapely.to_wkb(geoms[other], output_dimension=2)
    if not len(simple):
        return out.tolist(), None, None
    coords, at = shapely.get_coordinates(geoms[simple], return_index=True)
    _check_finite(geoms, coords, simple[at], name)
    coords = np.ascontiguousarray(coords, dtype=np.float64)
    return out.tolist(), counts.tobytes(), coords.tobytes()


def _finite(values: np.ndarray) -> bool:
    """Whether every one of ``values`` is finite: in Python for a few (one
    NumPy reduction costs about 1 µs), with NumPy for more."""
    if values.size <= 64:
        return all(map(math.isfinite, values.ravel().tolist()))
    return bool(np.isfinite(values).all())


def _in_range(values: np.ndarray) -> bool:
    """Whether every one of ``values`` is a number of magnitude at most
    ``MAX_COORD`` (see :func:`_check_finite`), as :func:`_finite` reads them."""
    if values.size <= 64:
        return all(abs(v) <= _MAX_COORD for v in values.ravel().tolist())
    with np.errstate(invalid="ignore"):
        return bool((np.abs(values) <= _MAX_COORD).all())


def _encode_one(
    geometry: Any, rings: bool, name: Callable[[int], str]
) -> Tuple[List[Optional[bytes]], Optional[bytes], Optional[bytes]]:
    """:func:`_encode` of one geometry that is neither missing nor empty,
    in scalar calls (about 1 µs each where ``_encode``'s array calls add
    up to 15 µs for one geometry; a query of one geometry is dominated
    by them). The same rules, the same output."""
    import shapely

    kind = geometry.geom_type
    if kind == "Point":
        return [None], None, None
    coords = shapely.get_coordinates(geometry)
    if not _in_range(coords):
        raise _not_finite(name(0), geometry)
    if rings and kind == "Polygon" and shapely.get_num_interior_rings(geometry) == 0:
        # shapely's coordinates are a fresh C-contiguous float64 array
        return [None], struct.pack("=q", len(coords)), coords.tobytes()
    return [shapely.to_wkb(geometry, output_dimension=2)], None, None


def _box_geometries(rects: np.ndarray) -> np.ndarray:
    """The geometry of entries stored without one: each box as the Rust
    refinement reads it (``window_geometry``: a point, a line when one side
    is 0, else a rectangle)."""
    import shapely

    out = np.empty(len(rects), dtype=object)
    wide, high = rects[:, 2] > rects[:, 0], rects[:, 3] > rects[:, 1]
    area, point = wide & high, ~wide & ~high
    line = ~area & ~point
    out[area] = shapely.box(rects[area, 0], rects[area, 1], rects[area, 2], rects[area, 3])
    out[point] = shapely.points(rects[point, :2])
    if line.any():
        out[line] = shapely.linestrings(rects[line].reshape(-1, 2, 2))
    return out


def _wkb_kinds(wkbs: List[Optional[bytes]]) -> np.ndarray:
    """The geometry type code of each of ``wkbs`` (ISO or extended WKB:
    1 point … 7 GeometryCollection; 0 for None), read from its header."""
    none = b"\x01\x00\x00\x00\x00"  # (type 0: no geometry)
    heads = b"".join([w[:5] if w is not None and len(w) >= 5 else none for w in wkbs])
    head = np.frombuffer(heads, dtype=np.uint8).reshape(-1, 5)
    kind = np.where(
        head[:, 0] == 1,
        np.ascontiguousarray(head[:, 1:]).view("<u4").ravel(),
        np.ascontiguousarray(head[:, 1:]).view(">u4").ravel(),
    )
    return (kind & 0x0FFFFFFF) % 1000


def _rust_invalid(rust: _Geometries, tested_here: np.ndarray) -> np.ndarray:
    """The ids of the geometries of ``rust`` (a ``_geoflash.Geometries``)
    that GEOS finds invalid among those it tests, or that are nearly
    degenerate (``validity.rs``: a vertex within rounding of a segment of
    its own, where GEOS's matrix goes astray), and ``tested_here``: those
    found invalid here (see :func:`_tested_here`)."""
    return np.union1d(np.frombuffer(rust.geos_ids(), dtype=np.int64), tested_here)


class _Tree:
    """The exact geometries of an index's entries.

    ``rust`` (a ``_geoflash.Geometries``, by id) refines the candidates of
    every id but those of ``special`` (sorted ids): ids that several
    entries hold (the Rust side keeps one geometry per id, the first), and
    those of GeometryCollections and of geometries GEOS finds invalid.
    Their candidates, and those of the inputs of these kinds
    (``_Inputs.special``), are refined here with shapely, each entry with
    its own geometry (:meth:`entries`, :meth:`geometries`)."""

    def __init__(
        self,
        rust: _Geometries,
        core: Any,
        changes: int,
        ids: np.ndarray,
        keys: np.ndarray,
        rects: np.ndarray,
        special: np.ndarray,
        geoms: Optional[np.ndarray],
        has_geometry: Optional[np.ndarray],
    ) -> None:
        self.rust = rust
        self.special = special
        self._core = core
        #: the index's ``Core.changes`` when these were read: they are its
        #: geometries while it has not changed since
        self.changes = changes
        self._ids, self._keys, self._rects = ids, keys, rects
        # in memory: the shapely geometries of from_geoseries, and which
        # entries have their row's (the others count as their box)
        self._geoms, self._has_geometry = geoms, has_geometry
        self._order: Optional[np.ndarray] = None
        self._regular: Optional[int] = None

    def __len__(self) -> int:
        return len(self._ids)

    def regular(self) -> int:
        """How many entries the Rust refinement decides (of ids not special)."""
        if self._regular is None:
            self._regular = len(self._ids) - int(self.is_special(self._ids).sum())
        return self._regular

    def is_special(self, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` are refined here (see the class)."""
        if not len(self.special):
            return np.zeros(len(ids), dtype=bool)
        return np.isin(ids, self.special)

    def entries(self, ids: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Every entry of each of ``ids``: (entry positions, the position
        in ``ids`` each belongs to), grouped by ``ids`` in their order."""
        if self._order is None:
            self._order = np.argsort(self._ids, kind="stable")
        by_id = self._ids[self._order]
        lo = np.searchsorted(by_id, ids, "left")
        counts = np.searchsorted(by_id, ids, "right") - lo
        owner = np.repeat(np.arange(len(ids)), counts)
        first = np.cumsum(counts) - counts
        at = np.repeat(lo - first, counts) + np.arange(int(counts.sum()))
        return self._order[at], owner

    def geometries(self, entries: np.ndarray) -> np.ndarray:
        """The shapely geometries of the entries at positions ``entries``:
        its row's for an entry of ``from_geoseries`` in memory, the object
        heap's in a directory, else its box."""
        import shapely

        out = np.empty(len(entries), dtype=object)
        if self._geoms is not None:
            has = self._has_geometry[entries]
            out[has] = self._geoms[self._ids[entries[has]]]
        elif len(entries):
            wkbs = self._core.wkb(np.ascontiguousarray(self._keys[entries]).tobytes())
            out[:] = shapely.from_wkb(np.array(wkbs + [None], dtype=object)[:-1])
            has = np.array([w is not None for w in wkbs], dtype=bool)
        else:
            has = np.zeros(0, dtype=bool)
        out[~has] = _box_geometries(self._rects[entries[~has]])
        return out


#: How the errors name a geometry by its position: the inputs of a query,
#: and the entries of an index built by ``from_geoseries`` in memory (the
#: joins name the rows of their frames).
Names = Tuple[Callable[[int], str], Callable[[int], str]]
_NAMES: Names = (
    lambda i: f"input geometry {i}",
    lambda i: f"entry {i} (row {i} of the geometries the index was built from)",
)


def tree_geometries(index: Any, names: Names = _NAMES) -> _Tree:
    """The exact geometries of the index's entries (built on first use and
    kept until the index changes): the shapely geometries given to
    ``from_geoseries`` in memory, the object heap's on disk, and the box of
    an entry stored without one (in memory also of an entry inserted
    under a row's id, even with its geometry's box, beside the row's own
    entry or once that was deleted: the object heap has no geometry for
    those; ``update`` refuses to move an entry that has one)."""
    import shapely

    core = index._core
    cached = getattr(index, "_exact", None)
    if cached is not None and cached._core is core and cached.changes == core.changes:
        return cached
    changes, keys_b, ids_b, rects, dropped = core.snapshot()
    ids = np.frombuffer(ids_b, dtype=np.int64)
    keys = np.frombuffer(keys_b, dtype=np.uint64)
    boxes = np.frombuffer(rects, dtype=np.float64).reshape(-1, 4)
    unique, count = np.unique(ids, return_counts=True)
    several = unique[count > 1]
    geoms = getattr(index, "_geoms", None)
    if geoms is None:
        wkbs = index._core.wkb(keys_b)
        rust = _Geometries(ids_b, wkbs, rects)
        # polygons with holes and multi-polygons: read with shapely to be
        # tested (Rust tests the others)
        kinds = _wkb_kinds(wkbs)
        at = np.flatnonzero(np.isin(ids, np.frombuffer(rust.untested_ids(), dtype=np.int64)) & (kinds != _COLLECTION))
        read = shapely.from_wkb(np.array([wkbs[i] for i in at] + [None], dtype=object)[:-1])
        invalid = _rust_invalid(rust, ids[at][~np.asarray(shapely.is_valid(read), dtype=bool)])
        special = np.union1d(np.union1d(several, ids[kinds == _COLLECTION]), invalid).astype(np.int64)
        index._exact = _Tree(rust, core, changes, ids, keys, boxes, special, None, None)
        return index._exact
    # An entry has its row's geometry while the row's entry is there
    # (``_held`` less the dropped rows: not deleted; update refuses to move it) and its box is
    # that geometry's (from_geoseries made it so; an entry inserted under
    # the row's id with another box is not it); any other counts as its
    # box. shapely reads geometries about 2.5x faster in their own
    # (memory) order than in the index's: they are read by row.
    known = (ids >= 0) & (ids < len(geoms))
    held = getattr(index, "_held", None)
    if held is not None:
        known[known] = held_rows(held, dropped)[ids[known]]
    at = np.flatnonzero(known)
    at = at[np.argsort(ids[at], kind="stable")]
    with np.errstate(invalid="ignore"):
        same = np.all(shapely.bounds(geoms[ids[at]]) == boxes[at], axis=1)
    known[at[~same]] = False
    if len(several):
        # An exact duplicate of a row's entry (its id and box, inserted
        # later) is not it: of the entries of a row that pass, only the
        # row's own holds the geometry (see _holder), as in a directory
        # only the row's entry has one in the object heap.
        dup = np.flatnonzero(known & np.isin(ids, several))
        known[dup] = False
        known[_holder(dup, ids, keys)] = True
    # The known ones go to Rust by row, each with the box of its first
    # entry; entries without one keep their box.
    entry_of = np.full(len(geoms), -1, dtype=np.int64)
    at = np.flatnonzero(known)[::-1]
    entry_of[ids[at]] = at
    rows = np.flatnonzero(entry_of >= 0)
    types = shapely.get_type_id(geoms[rows])
    wkbs, counts, coords = _encode(geoms[rows], name=lambda i: names[1](int(rows[i])), types=types)
    here = np.flatnonzero(_tested_here(types, counts))
    invalid_here = rows[here][_invalid(geoms[rows[here]], types[here])]
    unknown = np.flatnonzero(~known)
    if len(unknown):
        wkbs += [None] * len(unknown)
        if counts is not None:
            counts += bytes(8 * len(unknown))
    rust_ids = np.concatenate([rows, ids[unknown]]).astype(np.int64).tobytes()
    rust_rects = np.concatenate([boxes[entry_of[rows]], boxes[unknown]]).tobytes()
    rust = _Geometries(rust_ids, wkbs, rust_rects, counts, coords)
    special = np.union1d(np.union1d(several, rows[types == _COLLECTION]), _rust_invalid(rust, invalid_here))
    index._exact = _Tree(rust, core, changes, ids, keys, boxes, special.astype(np.int64), geoms, known)
    return index._exact


def _holder(entries: np.ndarray, ids: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Of the entry positions ``entries`` (``ids`` and record ``keys`` of
    every entry), the one of the smallest key of each id: of the entries
    of a row of ``from_geoseries`` in memory with the row's id and its
    geometry's box, the row's own (the bulk load gave it its key, and
    every entry added later gets a larger one; a pickled index keeps their
    order, see :func:`in_key_order`), the one that holds the row's
    geometry while the row is held (``Index._held``)."""
    order = entries[np.lexsort((keys[entries], ids[entries]))]
    first = np.ones(len(order), dtype=bool)
    first[1:] = ids[order[1:]] != ids[order[:-1]]
    return order[first]


def delete_row_entry(index: Any, id_: int, box: Tuple[float, float, float, float]) -> bool:
    """``Index.delete(id_, box)`` in memory where ``box`` is the bounds of
    row ``id_``'s geometry (``from_geoseries``) and the row holds it:
    deletes one entry with ``id_`` and ``box`` (which one, when several
    have them, is the index's choice, as in rtree), and when that is the
    row's own entry (:func:`_holder`: the one of the smallest key) the row
    no longer holds its geometry, as in a directory the object heap keeps
    the geometry of the row's entry while it is there. Both in one change
    of the core (``Core.delete_row``, ``Core.dropped_rows``): a review
    found that readers between the two (another thread's exact query, a
    pickle) saw a state that never was, and that two threads deleting a
    row's two entries could leave it holding its geometry with no entry.
    Returns whether an entry was deleted."""
    return bool(index._core.delete_row(id_, *box))


def held_rows(held: np.ndarray, dropped: bytes) -> np.ndarray:
    """Which rows of ``from_geoseries`` hold their geometry: of ``held``
    (those that had one), all but the ``dropped`` ones (native int64,
    from ``Core.snapshot`` or ``Core.dropped_rows``)."""
    rows = np.frombuffer(dropped, dtype=np.int64)
    rows = rows[(rows >= 0) & (rows < len(held))]
    if not len(rows):
        return held
    out = held.copy()
    out[rows] = False
    return out


def in_key_order(core: Any, items: List[Any]) -> List[Any]:
    """``items``, every entry of the index as ``core.query_items`` of the
    whole plane lists them, in the order of their record keys (the order
    in which they were added), for a pickled index in memory: bulk-loaded
    again in that order, the entries get keys in the same order, so the
    row's own entry keeps the smallest key of its duplicates
    (:func:`_holder`). ``items`` as they are if the index's answer of
    ``query_keys`` does not list the same ids (it lists the same entries,
    in the same order, for an index that has not changed between them)."""
    keys_b, ids_b, _ = core.query_keys(*_WORLD, "intersects")
    ids = np.frombuffer(ids_b, dtype=np.int64)
    if len(ids) != len(items) or not np.array_equal(ids, [item[0] for item in items]):
        return items
    order = np.argsort(np.frombuffer(keys_b, dtype=np.uint64), kind="stable")
    return [items[j] for j in order]


class _Inputs:
    """The input geometries of a query: a scalar or a 1-D array, the
    missing and empty ones left out (they match nothing, as in shapely)."""

    def __init__(self, geometry: Any, names: Names = _NAMES) -> None:
        import shapely

        self._names = names
        self.scalar = isinstance(geometry, shapely.Geometry)
        self._wkbs: Optional[List[Optional[bytes]]] = None
        self._encoded: Optional[Tuple[List[Optional[bytes]], Optional[bytes], Optional[bytes]]] = None
        if self.scalar:
            self._one(geometry)
            return
        geoms = np.asarray(geometry, dtype=object)
        if geoms.ndim != 1:
            raise RTreeError("geometry must be a shapely geometry or a 1-D array of them")
        bad = ~(shapely.is_geometry(geoms) | shapely.is_missing(geoms))
        if bad.any():
            raise RTreeError(
                f"expected a shapely geometry or None, not {type(geoms[np.argmax(bad)]).__name__}"
            )
        ok = ~(shapely.is_missing(geoms) | shapely.is_empty(geoms))
        self.count = len(geoms)
        self.positions = np.flatnonzero(ok).astype(np.int64)
        self._kept = geoms[ok]
        self.boxes = np.ascontiguousarray(shapely.bounds(self._kept), dtype=np.float64).reshape(-1, 4)
        # a NaN or infinite coordinate: refused (a NaN inside a geometry,
        # which its bounds leave out, when it is encoded for refinement)
        finite = np.isfinite(self.boxes).all(axis=1)
        if not finite.all():
            i = int(np.argmax(~finite))
            raise _not_finite(self._name(i), self._kept[i])
        self._types = shapely.get_type_id(self._kept)
        #: the inputs refined with shapely (see _Tree): GeometryCollections,
        #: and those found invalid (:meth:`find_invalid`)
        self.special = self._types == _COLLECTION
        #: whether any input is one
        self.any_special = bool(self.special.any())
        self._tested = np.zeros(len(self._kept), dtype=bool)

    def _one(self, geometry: Any) -> None:
        """The inputs of one shapely geometry, in scalar calls (the array
        calls of ``__init__`` cost about 1 µs each, most of a query of one
        geometry): the same attributes."""
        import shapely

        self.count = 1
        kept = not geometry.is_empty
        self.positions = np.zeros(int(kept), dtype=np.int64)
        self._kept = np.empty(int(kept), dtype=object)
        self.special = np.zeros(int(kept), dtype=bool)
        self.any_special = False
        self._tested_one = True  # (a Python bool: _tested's NumPy calls cost a µs each)
        self._kind = ""
        if not kept:
            self.boxes = np.empty((0, 4), dtype=np.float64)
            return
        self._kept[0] = geometry
        self.boxes = shapely.bounds(geometry).reshape(1, 4)
        if not _finite(self.boxes):
            raise _not_finite(self._name(0), geometry)
        self._kind = kind = geometry.geom_type
        self.any_special = kind == "GeometryCollection"
        self.special[0] = self.any_special
        # points and multi-points are valid; the others are tested when
        # they have candidates (find_invalid)
        self._tested_one = kind in ("Point", "MultiPoint", "GeometryCollection")

    def find_invalid(self, rows: Optional[np.ndarray] = None, everything: bool = False) -> None:
        """Marks as ``special`` the inputs of ``rows`` (positions among the
        kept ones; all by default) that GEOS finds invalid: their pairs are
        refined with shapely (see :func:`_invalid`). Each input is tested
        once, and only when asked for (a query tests those with
        candidates). Without ``everything`` only those that the Rust
        refinement does not test (:func:`_tested_here`, read from
        :attr:`encoded`; it sends the pairs of the others it finds invalid
        to GEOS); the nearest searches, which do not test, ask for every one."""
        if self.scalar:
            if self._tested_one:
                return
            self._tested_one = True
            kind = self._kind
            if everything or kind in ("LinearRing", "MultiPolygon") or (kind == "Polygon" and self.encoded[1] is None):
                if not self._kept[0].is_valid:
                    self.special[0] = self.any_special = True
            return
        if self._tested.all():
            return
        rows = np.arange(len(self._kept)) if rows is None else rows
        rows = rows[~self._tested[rows]]
        self._tested[rows] = True
        if not everything:
            rows = rows[_tested_here(self._types[rows], self.encoded[1], rows)]
        bad = rows[_invalid(self._kept[rows], self._types[rows])]
        if len(bad):
            self.special[bad] = True
            self.any_special = True

    def __len__(self) -> int:
        """How many inputs are kept (neither missing nor empty)."""
        return len(self._kept)

    def _name(self, i: int) -> str:
        """Kept input ``i`` as an error message names it."""
        return "the input geometry" if self.scalar else self._names[0](int(self.positions[i]))

    @property
    def kept(self) -> np.ndarray:
        """The kept inputs (shapely geometries)."""
        return self._kept

    def check_range(self) -> None:
        """Raises the error of the first input whose box has a coordinate
        beyond ±``MAX_COORD``: a point's coordinates are its box, which the
        refinement reads (a review found a point beyond it named "input
        geometry 0: rectangle …" by the Rust decoder where the other errors
        of one geometry say "the input geometry", and a point without
        candidates taken)."""
        if not _in_range(self.boxes):
            with np.errstate(invalid="ignore"):
                i = int(np.argmax(~(np.abs(self.boxes) <= _MAX_COORD).all(axis=1)))
            raise _not_finite(self._name(i), self._kept[i])

    def check_measurable(self) -> None:
        """Raises the error of the first input whose distances the
        refinement cannot measure: a coordinate NaN, infinite or beyond
        ±``MAX_COORD`` (points included, whose box is their WKB; and
        collections, which shapely measures without a check)."""
        self.check_range()
        self.wkbs  # written once per inputs; raises for a NaN inside one

    @property
    def wkbs(self) -> List[Optional[bytes]]:
        """The WKB of each kept input, None for a point (its box is the
        point, see _encode); written on first use: the box test
        alone (``predicate=None``) needs none."""
        if self._wkbs is None:
            self._wkbs = _encode(self._kept, rings=False, name=self._name)[0]
        return self._wkbs

    @property
    def encoded(self) -> Tuple[List[Optional[bytes]], Optional[bytes], Optional[bytes]]:
        """The kept inputs as the refinement reads them (see _encode:
        polygons of one ring as coordinates), written on first use."""
        if self._encoded is None:
            # (the encoder checks the coordinates of all but points)
            if not self.scalar or self._kind == "Point":
                self.check_range()
            self._encoded = _encode(self._kept, name=self._name)
        return self._encoded

    def pairs(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """The answer in shapely's layout: the entry ids for a scalar input,
        a 2×M array of (input position, entry id) for an array."""
        if self.scalar:
            return right
        return np.vstack([self.positions[left], right]).astype(np.int64)

    def sorted_pairs(self, found: np.ndarray) -> np.ndarray:
        """:meth:`pairs` of ``found``, a writable 2×M int64 array of (kept
        input position, entry id) pairs, in place: the positions become
        those of the inputs given (unchanged when none was left out)."""
        if self.scalar:
            return found[1]
        if len(self.positions) != self.count:
            found[0] = self.positions[found[0]]
        return found


def consistently(index: Any, run: Callable[[], Any]) -> Any:
    """``run()``, which reads the index in several calls (its exact
    geometries, cached between changes, then the box filter and the
    refinement): its answer when no change came between its first call
    and its last; else ``run()`` again with changes from other threads
    held back (``Core.hold_changes``), so that every call reads one state
    of the index. A change between the calls could otherwise give the
    filter entries the geometries do not know (an error) or knew with
    another box (a wrong answer)."""
    core = index._core
    start = core.changes
    try:
        out = run()
    except RTreeError:
        if core.changes == start:
            raise
    else:
        if core.changes == start:
            return out
    core.hold_changes()
    try:
        return run()
    finally:
        core.release_changes()


def _distance(predicate: Optional[str], distance: Any) -> Optional[float]:
    """The checked ``distance`` of ``dwithin`` (None for the others)."""
    if predicate != "dwithin":
        return None
    if distance is None:
        raise RTreeError('predicate "dwithin" needs a distance: query(geometry, predicate="dwithin", distance=d)')
    if np.ndim(distance) != 0:
        raise RTreeError("distance must be one number for all the input geometries")
    d = float(distance)
    if not (np.isfinite(d) and d >= 0):
        raise RTreeError(f'predicate "dwithin" needs a finite distance of at least 0, not {distance!r}')
    return d


def query(
    index: Any,
    geometry: Any,
    predicate: Optional[str],
    distance: Any,
    names: Names = _NAMES,
    converse: Optional[str] = None,
) -> np.ndarray:
    """``Index.query``: see its docstring (``names``: see ``Names``).
    ``converse``: a join asks ``predicate(input, entry)`` for
    ``converse(entry, input)`` (an index over its left side): GEOS then
    decides the pairs it decides as ``converse`` of the prepared entry, as
    GeoPandas' ``sjoin`` would (prepared predicates of invalid geometries
    are not always each other's converse)."""
    if predicate not in PREDICATES:
        valid = ", ".join(repr(p) for p in PREDICATES)
        raise RTreeError(f"unknown predicate {predicate!r}: use one of {valid}")
    d = _distance(predicate, distance)
    inputs = _Inputs(geometry, names)
    empty = np.empty(0, dtype=np.int64)
    if len(inputs) == 0 or len(index) == 0:
        return inputs.pairs(empty, empty)
    boxes = inputs.boxes
    if d is not None:
        boxes = _grow(boxes, np.full(len(boxes), d))
    if predicate is None:
        # The pairs come from Rust sorted and in shapely's layout.
        found = np.frombuffer(index._core.query_pairs(boxes.tobytes(), "intersects"), dtype=np.int64)
        return inputs.sorted_pairs(found.reshape(2, -1))
    return consistently(index, lambda: _refined(index, inputs, boxes, predicate, d, names, converse))


def _refined(
    index: Any,
    inputs: _Inputs,
    boxes: np.ndarray,
    predicate: str,
    d: Optional[float],
    names: Names,
    converse: Optional[str] = None,
) -> np.ndarray:
    """:func:`query` with an exact predicate: the box filter of ``boxes``
    (the inputs' boxes, grown by ``d`` for dwithin), then the refinement."""
    # The box filter runs in Rust without the GIL: on a thread of its own
    # while this one writes the WKB of the entries (on first use) and of the
    # inputs, which shapely writes holding the GIL.
    candidates = _overlapped(len(inputs), index._core.query_batch, boxes.tobytes(), _FILTER.get(predicate, "intersects"))
    tree, (wkbs, counts, coords) = tree_geometries(index, names), inputs.encoded
    offsets_b, ids_b = candidates()
    offsets, ids = np.frombuffer(offsets_b, dtype=np.int64), np.frombuffer(ids_b, dtype=np.int64)
    if inputs.scalar:
        if len(ids):
            inputs.find_invalid()
    else:
        inputs.find_invalid(np.flatnonzero(offsets[1:] > offsets[:-1]))
    here = _here(tree, inputs, offsets, ids)
    if here is not None:
        offsets, ids, (left, right) = _without(offsets, ids, here)
    found_b, to_geos_b = tree.rust.refine(
        wkbs, offsets.tobytes(), ids.tobytes(), predicate, d, inputs.boxes.tobytes(), counts, coords
    )
    found = np.frombuffer(found_b, dtype=np.int64).reshape(2, -1)
    more = []
    if here is not None:
        more.append(_refine_here(tree, inputs, left, right, predicate, d, converse))
    if len(to_geos_b):
        to_geos = np.frombuffer(to_geos_b, dtype=np.int64).reshape(2, -1)
        more.append(_refine_here(tree, inputs, to_geos[0], to_geos[1], predicate, d, converse, True))
    if more:
        found = np.concatenate([found] + more, axis=1)
        found = found[:, np.lexsort((found[1], found[0]))]
    return inputs.sorted_pairs(found)


def _here(tree: _Tree, inputs: _Inputs, offsets: np.ndarray, ids: np.ndarray) -> Optional[np.ndarray]:
    """Which candidates (``ids``, the answer of input ``i`` at
    ``offsets[i]:offsets[i+1]``) are refined here with shapely: those of a
    special id of the tree, and every one of a collection given as an
    input; None when there is none."""
    if not len(tree.special) and not inputs.any_special:
        return None
    here = tree.is_special(ids)
    if inputs.any_special:
        here |= np.repeat(inputs.special, np.diff(offsets))
    return here if here.any() else None


def _without(
    offsets: np.ndarray, ids: np.ndarray, drop: np.ndarray
) -> Tuple[np.ndarray, np.ndarray, Tuple[np.ndarray, np.ndarray]]:
    """The candidates (``offsets``, ``ids``) without those of ``drop``
    (a mask of ``ids``), and the dropped ones as (input position, id)."""
    keep = ~drop
    kept_before = np.concatenate([[0], np.cumsum(keep)]).astype(np.int64)
    left = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    return kept_before[offsets], np.ascontiguousarray(ids[keep]), (left[drop], ids[drop])


def _holds(predicate: str, a: np.ndarray, b: np.ndarray, d: Any) -> np.ndarray:
    """``predicate(a[i], b[i])`` for each i as ``STRtree.query`` decides it:
    with shapely's (GEOS's) predicate of ``a[i]`` prepared (``a``: prepared
    copies, :func:`_prepared`), dwithin at ``d`` (one distance or one per
    pair) for the pairs among its candidates (the box of ``b[i]`` meets
    that of ``a[i]`` grown by ``d`` as STRtree rounds it: ``x_min - d``, …;
    a pair exactly ``d`` apart can fall outside); empty members of ``b``
    left out (see :func:`_without_empty_parts`)."""
    import shapely

    b = _without_empty_parts(b)
    if predicate == "dwithin":
        p, q = shapely.bounds(a).reshape(-1, 4), shapely.bounds(b).reshape(-1, 4)
        near = (q[:, 0] <= p[:, 2] + d) & (q[:, 2] >= p[:, 0] - d) & (q[:, 1] <= p[:, 3] + d) & (q[:, 3] >= p[:, 1] - d)
        return near & np.asarray(shapely.dwithin(a, b, d), dtype=bool)
    return np.asarray(getattr(shapely, predicate)(a, b), dtype=bool)


def _refine_here(
    tree: _Tree,
    inputs: _Inputs,
    left: np.ndarray,
    right: np.ndarray,
    predicate: str,
    d: Optional[float],
    converse: Optional[str] = None,
    distinct: bool = False,
) -> np.ndarray:
    """The pairs (input position, id) among the candidates ``left``,
    ``right`` for which ``predicate`` holds, decided with shapely as
    ``STRtree.query`` decides them (:func:`_holds`; as ``converse`` of the
    entry and the input when given, see :func:`query`): one per entry of
    the id that satisfies it (an id is listed once per entry whose box
    passed the filter, and an entry satisfying the predicate passes it),
    as a 2×M int64 array sorted by input then id. ``distinct``: the
    candidates are distinct pairs sorted by input then id already (those
    the Rust refinement leaves to GEOS)."""
    if distinct:
        pairs = np.stack([left, right], axis=1)
    else:
        pairs = np.unique(np.stack([left, right], axis=1), axis=0).reshape(-1, 2)
    entries, owner = tree.entries(pairs[:, 1])
    at = pairs[owner, 0]  # by input: each input's prepared copy made once
    first = np.concatenate([[True], at[1:] != at[:-1]])
    a, b = inputs.kept[at], tree.geometries(entries)
    if converse is None:
        ok = _holds(predicate, _prepared(a[first])[np.cumsum(first) - 1], b, d)
    else:
        ok = _holds(converse, _prepared(b), a, d)
    return np.ascontiguousarray(pairs[owner[ok]].T, dtype=np.int64).reshape(2, -1)


#: Inputs from which a bulk query runs its box filter on a thread of its own.
_OVERLAP_INPUTS = 2048


def _overlapped(n: int, f: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Starts ``f(*args)`` (a Rust call that releases the GIL) and returns
    a function that waits for its result (raising its exception): on a
    thread of its own for ``n`` inputs of at least ``_OVERLAP_INPUTS``,
    at once below (a thread costs more than it saves there)."""
    if n < _OVERLAP_INPUTS:
        result = f(*args)
        return lambda: result
    out: List[Any] = []

    def run() -> None:
        try:
            out.append((True, f(*args)))
        except BaseException as e:  # handed to the caller, raised there
            out.append((False, e))

    thread = threading.Thread(target=run, name="geoflash-filter", daemon=True)
    thread.start()

    def wait() -> Any:
        thread.join()
        ok, value = out[0]
        if not ok:
            raise value
        return value

    return wait


def nearest_pairs(
    index: Any,
    inputs: _Inputs,
    k: int,
    all_matches: bool,
    exclusive: bool,
    max_distance: Optional[float],
    names: Names = _NAMES,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``k`` entries nearest to each input by exact distance (ties by
    id; with ``all_matches`` every entry tied with the k-th): (positions
    in ``inputs.wkbs``, entry ids, distances), by input then distance.

    First the k entries nearest by box give each input a bound, the k-th
    smallest of their exact distances (an entry's box is never farther
    than the entry); then every entry whose box lies within the bound is
    a candidate, refined by exact distance. ``exclusive`` leaves out
    entries equal to the input; when that leaves fewer than k, the box
    search is repeated with 4 times as many.

    The entries of the tree's special ids, and the collections given as
    inputs (see ``_Tree``), are measured here with shapely: the Rust
    search runs without them, and the answers of both are merged (the
    k-th distance of the merged answers is at most that of the Rust
    search's, so the entries within the latter are enough)."""
    inputs.check_measurable()
    tree = tree_geometries(index, names)
    k = min(k, len(tree))  # k above the number of entries: every entry
    inputs.find_invalid(everything=True)
    here = inputs.special
    if not len(tree.special) and not inputs.any_special:
        everything = np.arange(len(inputs))
        return _nearest_in_rust(index, tree, inputs, everything, k, all_matches, exclusive, max_distance)[:3]
    # The Rust search over the others: its k nearest and ties, or all of
    # them when they are fewer (k nearest of every entry are among those).
    k_rust = min(k, tree.regular())
    rows = np.flatnonzero(~here) if k_rust else np.empty(0, dtype=np.int64)
    left, right, dist, bound = _nearest_in_rust(index, tree, inputs, rows, k_rust, True, exclusive, max_distance)
    radius = np.full(len(inputs), np.inf)
    radius[rows] = np.where(k_rust < k, np.inf, bound)
    radius[here] = _bounds_here(index, tree, inputs, np.flatnonzero(here), k, exclusive)
    if max_distance is not None:
        radius = np.minimum(radius, max_distance)
    more = _nearest_here(index, tree, inputs, radius, exclusive, max_distance)
    left, right, dist = (np.concatenate(pair) for pair in zip((left, right, dist), more))
    return _first_k(left, right, dist, k, all_matches)


def _nearest_in_rust(
    index: Any,
    tree: _Tree,
    inputs: _Inputs,
    rows: np.ndarray,
    k: int,
    all_matches: bool,
    exclusive: bool,
    max_distance: Optional[float],
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`nearest_pairs` of the inputs ``rows`` over the entries the
    Rust refinement decides (all but the tree's special ids), and the
    bound of each of ``rows`` (its k-th distance among those entries, or
    ``max_distance`` when smaller; inf when they are fewer than k): both
    steps in one Rust call (``Geometries.nearest_in``, ``nearest.rs``)."""
    everything = len(rows) == len(inputs)
    wkbs = inputs.wkbs if everything else [inputs.wkbs[i] for i in rows]
    boxes = inputs.boxes if everything else inputs.boxes[rows]
    left_b, right_b, dist_b, bound_b = tree.rust.nearest_in(
        index._core, wkbs, boxes.tobytes(), tree.special.tobytes(), k, all_matches, exclusive, max_distance
    )
    left = np.frombuffer(left_b, dtype=np.int64)
    return (
        left if everything else rows[left],
        np.frombuffer(right_b, dtype=np.int64),
        np.frombuffer(dist_b, dtype=np.float64),
        np.frombuffer(bound_b, dtype=np.float64),
    )


def _measure_here(
    tree: _Tree, inputs: _Inputs, left: np.ndarray, right: np.ndarray, exclusive: bool
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distance from input ``left[i]`` to each entry of id
    ``right[i]`` (each pair once), with shapely: (input positions, ids,
    distances), one per entry; ``exclusive`` leaves out entries equal to
    their input."""
    import shapely

    pairs = np.unique(np.stack([left, right], axis=1), axis=0).reshape(-1, 2)
    entries, owner = tree.entries(pairs[:, 1])
    a, b = inputs.kept[pairs[owner, 0]], tree.geometries(entries)
    dist = np.asarray(shapely.distance(a, b), dtype=np.float64)
    if exclusive:
        keep = ~np.asarray(shapely.equals(a, b), dtype=bool)
        owner, dist = owner[keep], dist[keep]
    return pairs[owner, 0], pairs[owner, 1], dist


def _bounds_here(index: Any, tree: _Tree, inputs: _Inputs, rows: np.ndarray, k: int, exclusive: bool) -> np.ndarray:
    """For the inputs ``rows`` refined here (collections), the k-th exact
    distance among the entries of their k nearest boxes (4 times as many
    when exclusive leaves fewer), an upper bound of their k-th nearest
    entry's distance; inf when there are fewer than k."""
    bound = np.full(len(rows), np.inf)
    todo = np.arange(len(rows))
    kk = k
    while len(todo):
        offsets, ids, _ = index._core.nearest_batch(inputs.boxes[rows[todo]].tobytes(), kk, True)
        offsets, ids = np.frombuffer(offsets, dtype=np.int64), np.frombuffer(ids, dtype=np.int64)
        which = np.repeat(np.arange(len(todo)), np.diff(offsets))
        at, _, dist = _measure_here(tree, inputs, rows[todo][which], ids, exclusive)
        # the k-th smallest distance of each input (inf when fewer than k)
        order = np.lexsort((dist, at))
        at, dist = at[order], dist[order]
        first = np.searchsorted(at, rows[todo], "left")
        enough = np.searchsorted(at, rows[todo], "right") - first >= k
        bound[todo[enough]] = dist[first[enough] + k - 1]
        if kk >= len(index):
            break
        todo = todo[np.isinf(bound[todo])]
        kk *= 4
    return bound


def _nearest_here(
    index: Any, tree: _Tree, inputs: _Inputs, radius: np.ndarray, exclusive: bool, max_distance: Optional[float]
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries measured here within ``radius`` of each input (inf:
    any): every entry for a collection given as an input, those of the
    tree's special ids for the others; (input positions, ids, distances)."""
    empty = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64))
    sel = np.arange(len(inputs)) if len(tree.special) else np.flatnonzero(inputs.special)
    if len(sel) == 0:
        return empty
    windows = np.ascontiguousarray(_grow(inputs.boxes[sel], np.where(np.isinf(radius[sel]), 0.0, radius[sel])))
    windows[np.isinf(radius[sel])] = _WORLD
    offsets, ids = index._core.query_batch(windows.tobytes(), "intersects")
    offsets, ids = np.frombuffer(offsets, dtype=np.int64), np.frombuffer(ids, dtype=np.int64)
    left = sel[np.repeat(np.arange(len(sel)), np.diff(offsets))]
    take = tree.is_special(ids) | inputs.special[left]
    if not take.any():
        return empty
    left, right, dist = _measure_here(tree, inputs, left[take], ids[take], exclusive)
    if max_distance is not None:
        keep = dist <= max_distance
        left, right, dist = left[keep], right[keep], dist[keep]
    return left, right, dist


def _first_k(
    left: np.ndarray, right: np.ndarray, dist: np.ndarray, k: int, all_matches: bool
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of the pairs (input, id, distance), the k nearest of each input
    (ties by id) and, with ``all_matches``, every one as near as the k-th:
    sorted by input, distance, then id."""
    order = np.lexsort((right, dist, left))
    left, right, dist = left[order], right[order], dist[order]
    if len(left) == 0:
        return left.astype(np.int64), right.astype(np.int64), dist.astype(np.float64)
    starts = np.flatnonzero(np.concatenate([[True], left[1:] != left[:-1]]))
    sizes = np.diff(np.concatenate([starts, [len(left)]]))
    rank = np.arange(len(left)) - np.repeat(starts, sizes)
    if all_matches:
        kth = np.where(sizes >= k, dist[np.minimum(starts + k - 1, len(left) - 1)], np.inf)
        keep = dist <= np.repeat(kth, sizes)
    else:
        keep = rank < k
    return left[keep].astype(np.int64), right[keep].astype(np.int64), dist[keep]


def query_nearest(
    index: Any,
    geometry: Any,
    max_distance: Optional[float],
    return_distance: bool,
    exclusive: bool,
    all_matches: bool,
    names: Names = _NAMES,
) -> Any:
    """``Index.query_nearest``: see its docstring (``names``: see ``Names``)."""
    if max_distance is not None:
        if np.ndim(max_distance) != 0:
            raise RTreeError("max_distance must be one number")
        max_distance = float(max_distance)
        if not max_distance > 0:
            raise RTreeError(f"max_distance must be greater than 0, not {max_distance!r}")
    inputs = _Inputs(geometry, names)
    if len(inputs) == 0 or len(index) == 0:
        left = right = np.empty(0, dtype=np.int64)
        dist = np.empty(0, dtype=np.float64)
    else:
        left, right, dist = consistently(
            index,
            lambda: _prescreened(
                index,
                inputs,
                max_distance,
                nearest_pairs(index, inputs, 1, bool(all_matches), bool(exclusive), max_distance, names),
            ),
        )
    out = inputs.pairs(left, right)
    return (out, dist) if return_distance else out


def _prescreened(
    index: Any, inputs: _Inputs, max_distance: Optional[float], found: Tuple[np.ndarray, np.ndarray, np.ndarray]
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``found`` (input positions, ids, distances) without the inputs that
    ``STRtree.query_nearest`` leaves unanswered with ``max_distance``: it
    first looks for an entry whose box meets the input's box grown by
    ``max_distance`` (``x_min - max_distance``, … as doubles round), and
    answers nothing without one. An entry within ``max_distance`` has such
    a box unless rounding put it outside, so only inputs whose nearest
    entry lies about ``max_distance`` away are tested."""
    left, right, dist = found
    if max_distance is None or not len(left):
        return found
    boxes = inputs.boxes[left]
    scale = np.maximum(np.abs(boxes).max(axis=1), max_distance)
    rows = np.unique(left[dist >= max_distance - 1e-13 * scale])
    if not len(rows):
        return found
    m = max_distance
    b = inputs.boxes[rows]
    grown = np.ascontiguousarray(np.stack([b[:, 0] - m, b[:, 1] - m, b[:, 2] + m, b[:, 3] + m], axis=1))
    offsets, _ = index._core.query_batch(grown.tobytes(), "intersects")
    none = rows[np.diff(np.frombuffer(offsets, dtype=np.int64)) == 0]
    if not len(none):
        return found
    keep = ~np.isin(left, none)
    return left[keep], right[keep], dist[keep]


def nearest_ids(index: Any, geometry: Any, k: int) -> np.ndarray:
    """``Index.nearest`` of a shapely geometry: the ids of the ``k``
    entries nearest by exact distance and every one tied with the k-th,
    nearest first (ties by id)."""
    inputs = _Inputs(geometry)
    if len(inputs) == 0 or len(index) == 0 or k == 0:
        return np.empty(0, dtype=np.int64)
    return consistently(index, lambda: nearest_pairs(index, inputs, k, True, False, None))[1]
