"""Queries on exact geometries with shapely 2's ``STRtree`` semantics:
``Index.query(geometry, predicate=..., distance=...)``,
``Index.query_nearest`` and ``Index.nearest`` of a geometry.

The filter step runs in the index (one batched traversal over the
bounding boxes of all the input geometries), the refinement in Rust
(``_geoflash.Geometries``: the ``geo`` crate's DE-9IM matrix and
distances), both in one call each for any number of inputs.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from ._geoflash import PREDICATES as _NATIVE_PREDICATES
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


def _grow(boxes: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``boxes`` (N×4) grown by ``d`` (N) on every side, and a little more
    so that rounding in the subtraction loses no entry at distance ``d``
    (extra candidates are refined away)."""
    scale = np.max(np.abs(boxes), axis=1)
    pad = d * (1 + 1e-9) + scale * 1e-12
    return np.ascontiguousarray(boxes + np.outer(pad, [-1.0, -1.0, 1.0, 1.0]))


#: shapely's type id of a polygon.
_POLYGON = 3


def _encode(geoms: np.ndarray, rings: bool = True) -> Tuple[List[Optional[bytes]], Optional[bytes], Optional[bytes]]:
    """The geometries as Rust reads them (``_geoflash.Geometries`` and the
    refinement's inputs): with ``rings``, the polygons of one ring as their
    coordinates (``counts``, native int64 per geometry, 0 for the others,
    and ``coords``, native float64 x, y pairs: reading shapely's
    coordinates costs about half of writing WKB), points as None (Rust
    takes a point from its box) and every other geometry as WKB.
    ``counts`` and ``coords`` are None when no geometry is such a polygon
    (always without ``rings``: the nearest searches, which pick inputs
    from the list, take WKB only)."""
    import shapely

    types = shapely.get_type_id(geoms)
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
    other = types != 0
    other[simple] = False
    if other.any():
        out[other] = shapely.to_wkb(geoms[other], output_dimension=2)
    if not len(simple):
        return out.tolist(), None, None
    coords = np.ascontiguousarray(shapely.get_coordinates(geoms[simple]), dtype=np.float64)
    return out.tolist(), counts.tobytes(), coords.tobytes()


def tree_geometries(index: Any) -> _Geometries:
    """The exact geometries of the index's entries (built on first use and
    kept until the index changes): the shapely geometries given to
    ``from_geoseries`` in memory, the object heap's on disk, and the box of
    an entry inserted without one."""
    cached = getattr(index, "_exact", None)
    if cached is not None:
        return cached
    keys, ids_b, rects = index._core.query_keys(*_WORLD, "intersects")
    ids = np.frombuffer(ids_b, dtype=np.int64)
    geoms = getattr(index, "_geoms", None)
    if geoms is None:
        index._exact = _Geometries(ids_b, index._core.wkb(keys), rects)
        return index._exact
    # shapely reads geometries about 2.5x faster in their own (memory)
    # order than in the index's: the known ones go to Rust by row, each
    # with the box of its first entry; entries without one keep their box.
    boxes = np.frombuffer(rects, dtype=np.float64).reshape(-1, 4)
    known = (ids >= 0) & (ids < len(geoms))
    entry_of = np.full(len(geoms), -1, dtype=np.int64)
    at = np.flatnonzero(known)[::-1]
    entry_of[ids[at]] = at
    rows = np.flatnonzero(entry_of >= 0)
    wkbs, counts, coords = _encode(geoms[rows])
    unknown = np.flatnonzero(~known)
    if len(unknown):
        wkbs += [None] * len(unknown)
        if counts is not None:
            counts += bytes(8 * len(unknown))
    ids_b = np.concatenate([rows, ids[unknown]]).astype(np.int64).tobytes()
    rects = np.concatenate([boxes[entry_of[rows]], boxes[unknown]]).tobytes()
    index._exact = _Geometries(ids_b, wkbs, rects, counts, coords)
    return index._exact


class _Inputs:
    """The input geometries of a query: a scalar or a 1-D array, the
    missing and empty ones left out (they match nothing, as in shapely)."""

    def __init__(self, geometry: Any) -> None:
        import shapely

        self.scalar = isinstance(geometry, shapely.Geometry)
        geoms = np.array([geometry], dtype=object) if self.scalar else np.asarray(geometry, dtype=object)
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
        self._wkbs: Optional[List[Optional[bytes]]] = None
        self._encoded: Optional[Tuple[List[Optional[bytes]], Optional[bytes], Optional[bytes]]] = None

    def __len__(self) -> int:
        """How many inputs are kept (neither missing nor empty)."""
        return len(self._kept)

    @property
    def wkbs(self) -> List[Optional[bytes]]:
        """The WKB of each kept input, None for a point (its box is the
        point, see _encode); written on first use: the box test
        alone (``predicate=None``) needs none."""
        if self._wkbs is None:
            self._wkbs = _encode(self._kept, rings=False)[0]
        return self._wkbs

    @property
    def encoded(self) -> Tuple[List[Optional[bytes]], Optional[bytes], Optional[bytes]]:
        """The kept inputs as the refinement reads them (see _encode:
        polygons of one ring as coordinates), written on first use."""
        if self._encoded is None:
            self._encoded = _encode(self._kept)
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


def query(index: Any, geometry: Any, predicate: Optional[str], distance: Any) -> np.ndarray:
    """``Index.query``: see its docstring."""
    if predicate not in PREDICATES:
        names = ", ".join(repr(p) for p in PREDICATES)
        raise RTreeError(f"unknown predicate {predicate!r}: use one of {names}")
    d = _distance(predicate, distance)
    inputs = _Inputs(geometry)
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
    # The box filter runs in Rust without the GIL: on a thread of its own
    # while this one writes the WKB of the entries (on first use) and of the
    # inputs, which shapely writes holding the GIL.
    candidates = _overlapped(len(inputs), index._core.query_batch, boxes.tobytes(), _FILTER.get(predicate, "intersects"))
    tree, (wkbs, counts, coords) = tree_geometries(index), inputs.encoded
    offsets_b, ids_b = candidates()
    found = tree.refine(wkbs, bytes(offsets_b), bytes(ids_b), predicate, d, inputs.boxes.tobytes(), counts, coords)
    return inputs.sorted_pairs(np.frombuffer(found, dtype=np.int64).reshape(2, -1))


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
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``k`` entries nearest to each input by exact distance (ties by
    id; with ``all_matches`` every entry tied with the k-th): (positions
    in ``inputs.wkbs``, entry ids, distances), by input then distance.

    First the k entries nearest by box give each input a bound, the k-th
    smallest of their exact distances (an entry's box is never farther
    than the entry); then every entry whose box lies within the bound is
    a candidate, refined by exact distance. ``exclusive`` leaves out
    entries equal to the input; when that leaves fewer than k, the box
    search is repeated with 4 times as many."""
    n = len(inputs)
    ex = tree_geometries(index)
    total = len(index)
    bound = np.full(n, np.inf)
    todo = np.arange(n)
    kk = k
    while len(todo):
        offsets, ids, _ = index._core.nearest_batch(inputs.boxes[todo].tobytes(), kk, True)
        found = np.frombuffer(
            ex.kth_distance(
                [inputs.wkbs[i] for i in todo], bytes(offsets), bytes(ids), k, exclusive, inputs.boxes[todo].tobytes()
            ),
            dtype=np.float64,
        )
        bound[todo] = found
        if kk >= total:
            break
        todo = todo[np.isinf(found)]
        kk *= 4
    limit = bound if max_distance is None else np.minimum(bound, max_distance)
    sel = np.flatnonzero(np.isfinite(limit))
    if len(sel) == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, np.empty(0, dtype=np.float64)
    windows = _grow(inputs.boxes[sel], limit[sel])
    offsets, ids = index._core.query_batch(windows.tobytes(), "intersects")
    left_b, right_b, dist_b = ex.nearest(
        [inputs.wkbs[i] for i in sel],
        bytes(offsets),
        bytes(ids),
        k,
        all_matches,
        exclusive,
        max_distance,
        inputs.boxes[sel].tobytes(),
    )
    return (
        sel[np.frombuffer(left_b, dtype=np.int64)],
        np.frombuffer(right_b, dtype=np.int64),
        np.frombuffer(dist_b, dtype=np.float64),
    )


def query_nearest(
    index: Any,
    geometry: Any,
    max_distance: Optional[float],
    return_distance: bool,
    exclusive: bool,
    all_matches: bool,
) -> Any:
    """``Index.query_nearest``: see its docstring."""
    if max_distance is not None:
        if np.ndim(max_distance) != 0:
            raise RTreeError("max_distance must be one number")
        max_distance = float(max_distance)
        if not max_distance > 0:
            raise RTreeError(f"max_distance must be greater than 0, not {max_distance!r}")
    inputs = _Inputs(geometry)
    if len(inputs) == 0 or len(index) == 0:
        left = right = np.empty(0, dtype=np.int64)
        dist = np.empty(0, dtype=np.float64)
    else:
        left, right, dist = nearest_pairs(index, inputs, 1, bool(all_matches), bool(exclusive), max_distance)
    out = inputs.pairs(left, right)
    return (out, dist) if return_distance else out


def nearest_ids(index: Any, geometry: Any, k: int) -> np.ndarray:
    """``Index.nearest`` of a shapely geometry: the ids of the ``k``
    entries nearest by exact distance and every one tied with the k-th,
    nearest first (ties by id)."""
    inputs = _Inputs(geometry)
    if len(inputs) == 0 or len(index) == 0 or k == 0:
        return np.empty(0, dtype=np.int64)
    return nearest_pairs(index, inputs, k, True, False, None)[1]
