"""In-process spatial joins of two GeoDataFrames with GeoPandas' output:
``geoflash.sjoin`` (``geopandas.sjoin``) and ``geoflash.sjoin_nearest``
(``geopandas.sjoin_nearest``).

The pairs come from a geoflash index over one side, queried with every
geometry of the other in one call (``Index.query`` and
``Index.query_nearest``: one batched box filter in the index and the exact
test in Rust, the GIL released); the frame is assembled with pandas as
GeoPandas assembles it: the same rows, columns (``index_right`` or
``index_left``, suffixes on shared names), index and dtypes. Rows come
sorted by left position then right position (by right then left for
``how="right"``); GeoPandas leaves the order within one input geometry's
matches to its tree.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from . import _exact
from ._exact import PREDICATES
from ._geoflash import stable_order_by_key as _stable_order_by_key
from .spatial_index import Index

# How GeoPandas' sjoin decides predicate(left, right): with STRtree over
# the right geometries queried with the left ones (the left geometry
# prepared), but for "within", which it asks as "contains" of the right
# geometry prepared over the left ones. GEOS's prepared predicates of
# invalid geometries are not each other's converse (a collapsed polygon
# within a spiked one, whose prepared converse finds it is not): where GEOS
# decides a pair, it is asked the way GeoPandas asks it (_exact.query's
# ``converse``).

#: The values of ``how``.
HOWS = ("inner", "left", "right")
#: ``q`` of each predicate ``p`` for which ``p(a, b) == q(b, a)``
#: (``contains_properly`` has none among the predicates; ``dwithin`` is its
#: own, but GeoPandas' candidates of it are not symmetric: see
#: ``predicate_pairs``).
_CONVERSE = {
    None: None,
    "intersects": "intersects",
    "overlaps": "overlaps",
    "crosses": "crosses",
    "touches": "touches",
    "within": "contains",
    "contains": "within",
    "covers": "covered_by",
    "covered_by": "covers",
}


def _check_frames(left: Any, right: Any, how: str, what: str) -> None:
    """GeoPandas' checks of ``sjoin``'s inputs: two GeoDataFrames, a known
    ``how``, and a warning when their CRS differ."""
    import geopandas

    for side, name in ((left, "left_df"), (right, "right_df")):
        if not isinstance(side, geopandas.GeoDataFrame):
            raise ValueError(f"'{name}' should be GeoDataFrame, got {type(side)}")
    if how not in HOWS:
        raise ValueError(f'`how` was "{how}" but is expected to be in {list(HOWS)}')
    if not left.crs == right.crs:
        warnings.warn(
            f"CRS mismatch between the CRS of left geometries and the CRS of right geometries in {what}.\n"
            "Use `to_crs()` to reproject one of the input geometries to match the CRS of the other.\n\n"
            f"Left CRS: {left.crs}\nRight CRS: {right.crs}\n",
            UserWarning,
            stacklevel=3,
        )


def _geometries(frame: Any) -> np.ndarray:
    """The frame's active geometries as an object array of shapely ones."""
    return np.asarray(frame.geometry.values, dtype=object)


def _distances(distance: Any, n: int) -> Tuple[Optional[float], Optional[np.ndarray]]:
    """``distance`` of ``dwithin``: one number, or one per left row."""
    if distance is None:
        raise ValueError("predicate 'dwithin' needs a distance: sjoin(..., predicate='dwithin', distance=d)")
    if np.ndim(distance) == 0:
        d = float(distance)
        if not (np.isfinite(d) and d >= 0):
            raise ValueError(f"distance must be a finite number of at least 0, not {distance!r}")
        return d, None
    per_row = np.asarray(distance, dtype=np.float64)
    if per_row.ndim != 1 or len(per_row) != n:
        raise ValueError(
            f"distance must be one number or one per left row ({n}), not an array of shape {per_row.shape}"
        )
    if not (np.isfinite(per_row) & (per_row >= 0)).all():
        raise ValueError("every distance must be a finite number of at least 0")
    return None, per_row


def _names(sides: Tuple[str, str]) -> Tuple[Callable[[int], str], Callable[[int], str]]:
    """How errors name a row of each side (``sides``: the two names)."""
    return (lambda i: f"{sides[0]} row {i}"), (lambda i: f"{sides[1]} row {i}")


def _check_boxes(geoms: np.ndarray, name: Callable[[int], str]) -> None:
    """Refuses a geometry whose bounds have a NaN or an infinite
    coordinate (``name(i)`` names row ``i``), before an index is built of
    them (the engine's message would name a position among the non-empty
    ones only); a NaN inside one, which the bounds leave out, is refused
    where the geometries are refined."""
    import shapely

    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(shapely.bounds(geoms)).all(axis=1) & ~(shapely.is_missing(geoms) | shapely.is_empty(geoms))
    if bad.any():
        i = int(np.argmax(bad))
        raise _exact._not_finite(name(i), geoms[i])


def _check_coordinates(geoms: np.ndarray, name: Callable[[int], str]) -> None:
    """Refuses a geometry with a NaN or infinite coordinate anywhere, or
    one beyond the index's range (``_exact._check_finite``)."""
    import shapely

    xy, at = shapely.get_coordinates(geoms, return_index=True)
    _exact._check_finite(geoms, xy, at, name)


def predicate_pairs(
    left_geoms: Any,
    right_geoms: Any,
    predicate: Optional[str] = "intersects",
    distance: Any = None,
    sides: Tuple[str, str] = ("left", "right"),
) -> Tuple[np.ndarray, np.ndarray]:
    """The positions ``(l, r)`` of the pairs of ``left_geoms`` and
    ``right_geoms`` (arrays of shapely geometries; missing and empty ones
    match nothing) where ``predicate(left, right)`` holds, sorted by left
    then right position: an index over the larger side queried with all
    the geometries of the other (with the converse predicate when that is
    the left side; over the right side for ``contains_properly`` and
    ``dwithin``). ``predicate``: one of ``Index.query``'s (None: the
    boxes intersect); ``distance`` (``dwithin``): one number or one per
    left geometry. A geometry with a NaN or infinite coordinate (or, where
    refined, one beyond ±1e150) raises
    ``RTreeError`` naming its side (``sides``) and position (one inside a
    geometry whose bounds are finite, only when it is refined: not for the
    bounding-box test of ``predicate=None``)."""
    if predicate not in PREDICATES:
        names = ", ".join(repr(p) for p in PREDICATES)
        raise ValueError(f"unknown predicate {predicate!r}: use one of {names}")
    left_geoms = np.asarray(left_geoms, dtype=object)
    right_geoms = np.asarray(right_geoms, dtype=object)
    if predicate != "dwithin" and distance is not None:
        raise ValueError(f"distance is only for predicate 'dwithin', not {predicate!r}")
    d, per_row = (None, None) if predicate != "dwithin" else _distances(distance, len(left_geoms))
    empty = np.empty(0, dtype=np.int64)
    if len(left_geoms) == 0 or len(right_geoms) == 0:
        return empty, empty
    names = _names(sides)
    if per_row is None and len(left_geoms) > len(right_geoms) and predicate in _CONVERSE:
        # Index the larger side and query with the smaller: fewer windows
        # to traverse for the same pairs, asked with the converse predicate
        # (GEOS deciding a pair as GeoPandas does: see above ``HOWS``). Not
        # dwithin: GeoPandas' candidates are the right boxes meeting each
        # left box grown by the distance, rounded (3.7 - 2.5 is
        # 1.2000000000000002), which the other way round differs.
        _check_boxes(left_geoms, names[0])  # (the query checks the other side)
        index = Index.from_geoseries(left_geoms)
        as_geopandas = None if predicate == "within" else predicate
        try:
            found = _exact.query(index, right_geoms, _CONVERSE[predicate], d, (names[1], names[0]), as_geopandas)
        finally:
            index.close()
        # By right then left position: a stable sort by left alone makes it
        # by left then right (a counting sort in Rust: the keys are positions).
        r, l = found[0], found[1]
        order = np.frombuffer(_stable_order_by_key(l.astype(np.int64).tobytes(), len(left_geoms)), dtype=np.int64)
        return l[order], r[order]
    _check_boxes(right_geoms, names[1])
    index = Index.from_geoseries(right_geoms)
    try:
        if per_row is None:
            as_geopandas = "contains" if predicate == "within" else None
            found = _exact.query(index, left_geoms, predicate, d, names, as_geopandas)
            return found[0], found[1]
        return _dwithin_per_row(index, left_geoms, right_geoms, per_row, names)
    finally:
        index.close()


def _dwithin_per_row(
    index: Index,
    left_geoms: np.ndarray,
    right_geoms: np.ndarray,
    d: np.ndarray,
    names: Tuple[Callable[[int], str], Callable[[int], str]],
) -> Tuple[np.ndarray, np.ndarray]:
    """``dwithin`` with a distance per left geometry: the index's boxes
    within each left box grown by its distance (and the margin of
    ``_exact._grow``: without it a pair at exactly the distance was lost
    when the box test rounded the other way), refined by shapely as
    ``STRtree.query`` refines them (``_exact._holds``)."""
    import shapely

    _check_coordinates(left_geoms, names[0])
    _check_coordinates(right_geoms, names[1])
    ok = np.flatnonzero(~(shapely.is_missing(left_geoms) | shapely.is_empty(left_geoms)))
    empty = np.empty(0, dtype=np.int64)
    if len(ok) == 0 or len(index) == 0:
        return empty, empty
    boxes = _exact._grow(np.asarray(shapely.bounds(left_geoms[ok]), dtype=np.float64), d[ok])
    offsets, ids = index.intersection_batch(boxes)
    lpos = np.repeat(ok, np.diff(offsets))
    # as STRtree.query decides dwithin (geopandas' sjoin): the left
    # geometry prepared (see _exact._holds)
    prepared = np.empty(len(left_geoms), dtype=object)
    prepared[ok] = _exact._prepared(left_geoms[ok])
    keep = _exact._holds("dwithin", prepared[lpos], right_geoms[ids], d[lpos])
    lpos, rpos = lpos[keep], ids[keep]
    order = np.lexsort((rpos, lpos))
    return lpos[order].astype(np.int64), rpos[order].astype(np.int64)


def nearest_pairs(
    left_geoms: Any,
    right_geoms: Any,
    max_distance: Optional[float] = None,
    exclusive: bool = False,
    index_left: bool = False,
    sides: Tuple[str, str] = ("left", "right"),
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The positions ``(l, r)`` and distances of every right geometry
    nearest to each left one (all of those tied at the smallest distance,
    none farther than ``max_distance``, none equal with ``exclusive``),
    as ``geopandas.sjoin_nearest`` finds them; with ``index_left`` the
    other way round (every left geometry nearest to each right one, as
    for ``how="right"``). Sorted by the queried side's position, then
    distance, then the other's position. A NaN or infinite coordinate
    (or one beyond ±1e150) raises ``RTreeError`` naming its side (``sides``) and position."""
    left_geoms = np.asarray(left_geoms, dtype=object)
    right_geoms = np.asarray(right_geoms, dtype=object)
    empty = np.empty(0, dtype=np.int64)
    if len(left_geoms) == 0 or len(right_geoms) == 0:
        return empty, empty, np.empty(0, dtype=np.float64)
    names = _names(sides)
    tree, inputs = (left_geoms, right_geoms) if index_left else (right_geoms, left_geoms)
    _check_boxes(tree, names[0] if index_left else names[1])  # (the query checks the other side)
    index = Index.from_geoseries(tree)
    try:
        found, dist = _exact.query_nearest(
            index, inputs, max_distance, True, exclusive, True, names[::-1] if index_left else names
        )
    finally:
        index.close()
    q, t = found[0], found[1]
    return (t, q, dist) if index_left else (q, t, dist)


def _reset_index(frame: Any, suffix: str, other: Any) -> Tuple[Any, List[Any]]:
    """``frame.reset_index()`` with GeoPandas' names for unnamed index
    levels (``index_left``, ``index_right``; ``index_left0``... for the
    levels of a MultiIndex) and the names of the index columns."""
    names = list(frame.index.names)
    out = frame.reset_index()
    columns = list(out.columns)
    for i, name in enumerate(names):
        if name is not None:
            continue
        # reset_index names an unnamed level "index" (or "level_i" for a
        # MultiIndex or when "index" is taken): keep the level number.
        label = f"index_{suffix}" if str(columns[i]) == "index" else f"index_{suffix}{str(columns[i]).split('_')[1]}"
        if label in frame.columns or label in other.columns:
            raise ValueError(f"'{label}' cannot be a column name in the frames being joined")
        columns[i] = label
    out.columns = columns
    return out, columns[: len(names)]


def _suffixed(left: Sequence[Any], right: Sequence[Any], lsuffix: str, rsuffix: str, lgeom: Any, rgeom: Any) -> Tuple[list, list]:
    """The column names with the suffixes on the names both sides have
    (a side's own geometry column keeps its name), as GeoPandas names them."""
    shared = set(left) & set(right)
    if not shared:
        return list(left), list(right)
    if not lsuffix and not rsuffix:
        raise ValueError(f"columns overlap but no suffix specified: {sorted(map(str, shared))}")

    def rename(x: Any, suffix: str, geom: Any) -> Any:
        return f"{x}_{suffix}" if x in shared and x != geom and suffix is not None else x

    return [rename(c, lsuffix, lgeom) for c in left], [rename(c, rsuffix, rgeom) for c in right]


def _take(frame: Any, positions: np.ndarray) -> Any:
    """The rows at ``positions`` of a frame with a RangeIndex, a row of
    missing values where the position is -1, on a new RangeIndex."""
    import pandas as pd

    if len(positions) and positions.min() < 0:
        out = frame.reindex(positions)  # -1 is no label: its row is missing values
    else:
        out = frame.take(positions)
    out.index = pd.RangeIndex(len(positions))
    return out


def _with_missing(keep: np.ndarray, other: np.ndarray, count: int, extra: Optional[np.ndarray]) -> tuple:
    """``keep`` (sorted positions of the side whose rows all stay) with
    every absent position ``0..count-1`` inserted in order, paired with -1
    in ``other`` (and NaN in ``extra``)."""
    # A mask, not setdiff1d: that one hashes or sorts both arrays (a third
    # of a left join of 1 M rows).
    present = np.zeros(count, dtype=bool)
    present[keep] = True
    missing = np.flatnonzero(~present)
    at = np.searchsorted(keep, missing)
    keep = np.insert(keep, at, missing)
    other = np.insert(other, at, -1)
    if extra is not None:
        extra = np.insert(extra, at, np.nan)
    return keep, other, extra


def _in_order(first: np.ndarray, then: np.ndarray) -> bool:
    """Are the pairs ``(first, then)`` sorted by ``first`` then ``then``
    already (as the joins give them)? One pass, where sorting them again
    took a tenth of a large join."""
    if len(first) < 2:
        return True
    a, b = first[:-1], first[1:]
    return bool(np.all((a < b) | ((a == b) & (then[:-1] <= then[1:]))))


def assemble(
    left: Any,
    right: Any,
    l_idx: np.ndarray,
    r_idx: np.ndarray,
    how: str = "inner",
    lsuffix: str = "left",
    rsuffix: str = "right",
    distances: Optional[np.ndarray] = None,
    on_attribute: Optional[List[str]] = None,
) -> Tuple[Any, Optional[np.ndarray]]:
    """The joined GeoDataFrame of the pairs of row positions
    ``(l_idx, r_idx)`` of ``left`` and ``right``, as GeoPandas assembles
    it for ``how``: ``inner`` and ``left`` keep the left index and
    geometry (``left`` also every unmatched left row, with missing right
    values), ``right`` the right ones; the other side's index becomes a
    column (``index_right`` or ``index_left`` when unnamed), names both
    sides have get the suffixes. Returns it with ``distances`` in its row
    order (NaN for unmatched rows)."""
    import geopandas
    import pandas as pd

    l_idx = np.asarray(l_idx, dtype=np.int64)
    r_idx = np.asarray(r_idx, dtype=np.int64)
    if on_attribute:
        right = right.drop(columns=on_attribute)
    geometry = left.geometry.name if how != "right" else right.geometry.name
    if how in ("inner", "left"):
        right = right.drop(columns=right.geometry.name)
    else:
        left = left.drop(columns=left.geometry.name)
    lgeom = getattr(left, "_geometry_column_name", None) if how != "right" else None
    rgeom = getattr(right, "_geometry_column_name", None) if how == "right" else None
    lnames = left.index.names
    rnames = right.index.names
    left_r, lindex = _reset_index(left, lsuffix, right)
    right_r, rindex = _reset_index(right, rsuffix, left_r)
    lcols, rcols = _suffixed(list(left_r.columns), list(right_r.columns), lsuffix, rsuffix, lgeom, rgeom)
    left_r.columns = lcols
    right_r.columns = rcols
    lindex, rindex = lcols[: len(lindex)], rcols[: len(rindex)]
    if distances is not None:
        distances = np.asarray(distances, dtype=np.float64)
    first, then = (r_idx, l_idx) if how == "right" else (l_idx, r_idx)
    if not _in_order(first, then):
        order = np.lexsort((then, first))
        l_idx, r_idx = l_idx[order], r_idx[order]
        if distances is not None:
            distances = distances[order]
    if how == "left":
        l_idx, r_idx, distances = _with_missing(l_idx, r_idx, len(left_r), distances)
    elif how == "right":
        r_idx, l_idx, distances = _with_missing(r_idx, l_idx, len(right_r), distances)
    joined = pd.concat([_take(left_r, l_idx), _take(right_r, r_idx)], axis=1)
    joined = joined.set_index(lindex if how != "right" else rindex)
    # the index keeps its (suffixed) column names; unnamed levels stay unnamed
    original = lnames if how != "right" else rnames
    joined.index.names = [None if o is None else n for o, n in zip(original, joined.index.names)]
    joined = geopandas.GeoDataFrame(joined, geometry=geometry)
    return joined, distances


def sjoin(
    left_df: Any,
    right_df: Any,
    how: str = "inner",
    predicate: Optional[str] = "intersects",
    lsuffix: str = "left",
    rsuffix: str = "right",
    distance: Any = None,
    on_attribute: Any = None,
) -> Any:
    """``geopandas.sjoin`` computed with a geoflash index: the rows of
    ``left_df`` and ``right_df`` (GeoDataFrames) whose geometries satisfy
    ``predicate(left, right)``.

    ``how``: ``"inner"`` (matched pairs; the left index and geometry),
    ``"left"`` (every left row, missing right values where none matches),
    ``"right"`` (every right row; the right index and geometry).
    ``predicate``: ``"intersects"``, ``"within"``, ``"contains"``,
    ``"overlaps"``, ``"crosses"``, ``"touches"``, ``"covers"``,
    ``"covered_by"``, ``"contains_properly"``, ``"dwithin"`` (with
    ``distance``: one number or one per left row) or None (the bounding
    boxes intersect). The other side's index becomes the column
    ``index_right`` (``index_left`` for ``how="right"``) unless named;
    column names both sides have get ``_left`` and ``_right``
    (``lsuffix``, ``rsuffix``). ``on_attribute``: column name(s) whose
    values must also be equal. Rows are sorted by left then right
    position (right then left for ``how="right"``)."""
    _check_frames(left_df, right_df, how, "sjoin")
    attrs = _attributes(on_attribute, left_df, right_df)
    sides = ("left_df", "right_df")
    l_idx, r_idx = predicate_pairs(_geometries(left_df), _geometries(right_df), predicate, distance, sides)
    if attrs:
        keep = np.ones(len(l_idx), dtype=bool)
        for a in attrs:
            keep &= np.asarray(left_df[a].values[l_idx] == right_df[a].values[r_idx], dtype=bool)
        l_idx, r_idx = l_idx[keep], r_idx[keep]
    joined, _ = assemble(left_df, right_df, l_idx, r_idx, how, lsuffix, rsuffix, on_attribute=attrs)
    return joined


def _attributes(on_attribute: Any, left: Any, right: Any) -> List[Any]:
    """``on_attribute`` as a list of column names both frames have (not
    their active geometry)."""
    if on_attribute is None:
        return []
    attrs = list(on_attribute) if isinstance(on_attribute, (list, tuple)) else [on_attribute]
    for a in attrs:
        where = [n for n, f in (("left", left), ("right", right)) if a not in f]
        if where:
            side = "both of the dataframes" if len(where) == 2 else f"the {where[0]} dataframe"
            raise ValueError(f"Expected column {a} is missing from {side}.")
        if a in (left.geometry.name, right.geometry.name):
            raise ValueError("Active geometry column cannot be used as an input for on_attribute parameter.")
    return attrs


def sjoin_nearest(
    left_df: Any,
    right_df: Any,
    how: str = "inner",
    max_distance: Optional[float] = None,
    lsuffix: str = "left",
    rsuffix: str = "right",
    distance_col: Optional[str] = None,
    exclusive: bool = False,
) -> Any:
    """``geopandas.sjoin_nearest`` computed with a geoflash index: each
    left row with the right rows nearest to its geometry (every one tied
    at the smallest distance; for ``how="right"`` each right row with its
    nearest left rows), by exact planar distance. ``max_distance``
    (greater than 0): no match farther; ``exclusive``: no match equal to
    the geometry; ``distance_col``: the name of a column of the
    distances. ``how``, the columns and suffixes as in ``sjoin``."""
    _check_frames(left_df, right_df, how, "sjoin_nearest")
    for frame in (left_df, right_df):
        if frame.crs is not None and frame.crs.is_geographic:
            warnings.warn(
                "Geometry is in a geographic CRS. Results from 'sjoin_nearest' are likely incorrect. "
                "Use 'GeoSeries.to_crs()' to re-project geometries to a projected CRS before this operation.\n",
                UserWarning,
                stacklevel=2,
            )
    l_idx, r_idx, dist = nearest_pairs(
        _geometries(left_df), _geometries(right_df), max_distance, exclusive, how == "right", ("left_df", "right_df")
    )
    joined, dist = assemble(left_df, right_df, l_idx, r_idx, how, lsuffix, rsuffix, distances=dist)
    if distance_col is not None:
        joined[distance_col] = dist
    return joined
