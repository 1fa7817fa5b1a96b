"""Exact queries (``Index.query``, ``query_nearest``, ``nearest`` of a
shapely geometry: geoflash/_exact.py) against a brute-force oracle: every
pair of an input geometry and an *entry* tested with shapely's own
predicate functions and distances (no index on the oracle's side). Seeded
random loops (the test environment has no hypothesis); the seeds scale
with GEOFLASH_PROPTEST_CASES.

Found by the review of _exact.py:
- an id held by several entries (rtree's duplicate ids) was refined with
  the geometry of one of them only: an entry inserted under the id of
  another was missed, and ``query_nearest`` answered with the wrong
  distance; in an index in memory built by ``from_geoseries``, an entry
  moved by ``update`` or deleted and inserted again kept the geometry of
  its row (the directory's object heap has none for it: it counts as its
  box there, as documented);
- a GeometryCollection (an input or an entry) made the Rust refinement
  panic (``PanicException``: "topology position conflict") or answer
  otherwise than shapely;
- a coordinate that is NaN inside a geometry (shapely's bounds leave it
  out) was taken, and answered or panicked ("NaN coordinates are not
  supported"); an infinite input gave no error or one naming NaN;
- ``nearest(geometry, k)`` with k above the number of entries found none.
"""

import os

import numpy as np
import pytest

shapely = pytest.importorskip("shapely")

import geoflash  # noqa: E402

CASES = max(4, int(os.environ.get("GEOFLASH_PROPTEST_CASES", "64")) // 2)
PREDICATES = [None] + list(geoflash._geoflash.PREDICATES)
_SHAPELY = {"covered_by": shapely.covered_by, "contains_properly": shapely.contains_properly}


# ----------------------------------------------------------------- the oracle


def box_geometry(b):
    """An entry stored without a geometry: its box as the engine refines it
    (a point, a line, or a rectangle)."""
    minx, miny, maxx, maxy = (float(v) for v in b)
    if minx == maxx and miny == maxy:
        return shapely.Point(minx, miny)
    if minx == maxx or miny == maxy:
        return shapely.LineString([(minx, miny), (maxx, maxy)])
    return shapely.box(minx, miny, maxx, maxy)


def holds(predicate, a, b, distance=None):
    """``predicate(a, b)`` as shapely decides it (None: the boxes meet)."""
    if predicate is None:
        p, q = shapely.bounds(a), shapely.bounds(b)
        return bool(p[0] <= q[2] and q[0] <= p[2] and p[1] <= q[3] and q[1] <= p[3])
    if predicate == "dwithin":
        return bool(shapely.dwithin(a, b, distance))
    return bool(_SHAPELY.get(predicate, getattr(shapely, predicate, None))(a, b))


def usable(g):
    return g is not None and not shapely.is_empty(g)


def oracle_query(inputs, entries, predicate, distance=None):
    """Sorted (input position, id) pairs, one per entry that matches
    (``entries``: (id, geometry) of every entry)."""
    out = []
    for i, a in enumerate(inputs):
        if not usable(a):
            continue
        out += [(i, e) for e, g in entries if holds(predicate, a, g, distance)]
    return sorted(out)


def oracle_nearest(inputs, entries, exclusive=False, max_distance=None):
    """Sorted (input position, id) pairs of the entries at the smallest
    distance of each input (one per entry), and their distances."""
    out = []
    for i, a in enumerate(inputs):
        if not usable(a):
            continue
        found = [(float(shapely.distance(a, g)), e) for e, g in entries
                 if not (exclusive and shapely.equals(a, g))]
        found = [f for f in found if max_distance is None or f[0] <= max_distance]
        if found:
            m = min(f[0] for f in found)
            out += [(i, e, d) for d, e in found if d == m]
    out.sort()
    return [(i, e) for i, e, _ in out], [d for _, _, d in out]


def oracle_knn(a, entries, k):
    """The ids of the k entries nearest to ``a`` and of every one tied with
    the k-th, nearest first, ties by id."""
    found = sorted((float(shapely.distance(a, g)), e) for e, g in entries)
    if k < len(found):
        found = [f for f in found if f[0] <= found[k - 1][0]]
    return [e for _, e in found]


def pairs(answer):
    a = np.asarray(answer)
    return sorted(map(tuple, a.T.tolist()))


# --------------------------------------------------------------- geometries


def one_geometry(rng, collections=True):
    """A random geometry with small integer coordinates (touching
    boundaries, shared edges, collinear segments and equal geometries are
    frequent): boxes, triangles, lines (some collinear), points, polygons
    with a hole, multi-parts, GeometryCollections (some of overlapping
    polygons), empty ones and None."""
    x, y = (int(v) for v in rng.integers(-6, 14, 2))
    kind = int(rng.integers(0, 13 if collections else 10))
    if kind == 0:
        w, h = (int(v) for v in rng.integers(1, 6, 2))
        return shapely.box(x, y, x + w, y + h)
    if kind == 1:
        t = shapely.Polygon([(x, y)] + [tuple(int(v) for v in p) for p in rng.integers(-6, 16, (2, 2))])
        return t if t.area > 0 else shapely.Point(x, y)
    if kind == 2:
        pts = [(x, y)] + [tuple(int(v) for v in p) for p in rng.integers(-6, 16, (int(rng.integers(1, 4)), 2))]
        line = shapely.LineString(pts)
        return line if line.length > 0 else shapely.Point(x, y)
    if kind == 3:
        return shapely.Point(x, y)
    if kind == 4:  # a hole strictly inside (GEOS 3.14 answers wrongly for holes touching the shell)
        w, h = (int(v) for v in rng.integers(3, 8, 2))
        a, b = int(rng.integers(1, w - 1)), int(rng.integers(1, h - 1))
        hole = [(x + a, y + b), (x + a + 1, y + b), (x + a + 1, y + b + 1), (x + a, y + b + 1)]
        return shapely.Polygon([(x, y), (x + w, y), (x + w, y + h), (x, y + h)], [hole])
    if kind == 5:  # collinear vertices, vertical lines
        if rng.random() < 0.5:
            return shapely.LineString([(x, y), (x + 2, y), (x + 4, y)])
        return shapely.LineString([(x, y), (x, y + 3)])
    if kind == 6:
        return shapely.MultiPoint([(x, y), (x + int(rng.integers(0, 4)), y + int(rng.integers(0, 4)))])
    if kind == 7:
        parts = [one_geometry(rng, False) for _ in range(2)]
        lines = [p for p in parts if p is not None and p.geom_type == "LineString" and not p.is_empty]
        return shapely.MultiLineString(lines) if lines else shapely.MultiLineString([[(x, y), (x + 1, y + 1)]])
    if kind == 8:
        return shapely.MultiPolygon([shapely.box(x, y, x + 2, y + 2), shapely.box(x + 3, y, x + 4, y + 3)])
    if kind == 9:
        return [None, shapely.Point(), shapely.Polygon(), shapely.LineString(),
                shapely.from_wkt(f"MULTIPOINT (({x} {y}), EMPTY)")][int(rng.integers(0, 5))]
    if kind == 10:  # overlapping polygons (geo's relate panicked on these)
        return shapely.GeometryCollection([shapely.box(x, y, x + 4, y + 4), shapely.box(x + 1, y + 2, x + 5, y + 6)])
    parts = [g for g in (one_geometry(rng, False) for _ in range(int(rng.integers(1, 4)))) if g is not None]
    return shapely.GeometryCollection(parts)


def geometries(rng, n, collections=True, copies=0.1):
    out = np.empty(n, dtype=object)
    for i in range(n):
        g = one_geometry(rng, collections)
        if i and rng.random() < copies:
            g = out[int(rng.integers(0, i))]
        out[i] = g
    return out


def entries_of(geoms):
    """(id, geometry) of the entries ``from_geoseries`` makes (ids are row
    positions; missing and empty geometries are left out)."""
    return [(i, g) for i, g in enumerate(geoms) if usable(g)]


def check_every_query(idx, inputs, entries, rng, label):
    for predicate in PREDICATES:
        d = float(rng.integers(0, 3)) if predicate == "dwithin" else None
        kw = {"distance": d} if predicate == "dwithin" else {}
        got = pairs(idx.query(inputs, predicate=predicate, **kw))
        assert got == oracle_query(inputs, entries, predicate, d), (label, predicate)
    for exclusive in (False, True):
        for max_distance in (None, 1.5):
            want, want_d = oracle_nearest(inputs, entries, exclusive, max_distance)
            got, got_d = idx.query_nearest(inputs, max_distance=max_distance, exclusive=exclusive,
                                           return_distance=True)
            order = np.lexsort((got_d, got[1], got[0]))
            assert sorted(map(tuple, got.T.tolist())) == want, (label, exclusive, max_distance)
            assert np.allclose(np.asarray(got_d)[order], want_d), (label, exclusive, max_distance)
    for a in inputs[:10]:
        if usable(a):
            for k in (1, 3):
                assert list(idx.nearest(a, k)) == oracle_knn(a, entries, k), (label, k)


# -------------------------------------------------------------------- tests


@pytest.mark.parametrize("seed", range(CASES))
def test_exact_queries_match_brute_force(seed, tmp_path):
    """Every predicate, ``dwithin``, ``query_nearest`` (exclusive, with a
    maximum distance) and ``nearest`` of a geometry, on random geometries
    with holes, multi-parts, GeometryCollections, collinear lines, points,
    copies, empty and missing ones, in memory and in a directory."""
    rng = np.random.default_rng(seed)
    tree = geometries(rng, int(rng.integers(1, 70)))
    inputs = geometries(rng, int(rng.integers(0, 30)))
    entries = entries_of(tree)
    if not entries:
        return
    for path in (None, str(tmp_path / "idx")):
        idx = geoflash.Index.from_geoseries(tree, path, page_size=512)
        check_every_query(idx, inputs, entries, rng, f"seed {seed}, {'directory' if path else 'memory'}")
        idx.close()


@pytest.mark.parametrize("seed", range(max(2, CASES // 2)))
def test_duplicate_ids_refine_every_entry_with_its_own_geometry(seed, tmp_path):
    """Ids may repeat (rtree's rule): each entry is refined with its own
    geometry, and answers list an id once per entry that matches, as
    ``intersection`` does."""
    rng = np.random.default_rng(1000 + seed)
    # boxes inserted under a few ids (every id repeats), some negative
    lo = rng.integers(-10, 10, (60, 2))
    boxes = np.hstack([lo, lo + rng.integers(0, 4, (60, 2))]).astype(float)
    ids = rng.integers(-3, 6, 60)
    inputs = geometries(rng, 25, collections=False)
    plain = geoflash.Index()
    for i, b in zip(ids.tolist(), boxes):
        plain.insert(i, tuple(b))
    entries = [(int(i), box_geometry(b)) for i, b in zip(ids, boxes)]
    check_every_query(plain, inputs, entries, rng, f"seed {seed}, duplicate ids")
    # an index of geometries, with boxes inserted under the ids of its rows
    tree = geometries(rng, 40, collections=False, copies=0)
    for path in (None, str(tmp_path / "g")):
        idx = geoflash.Index.from_geoseries(tree, path, page_size=512)
        entries = entries_of(tree)
        for _ in range(15):
            i = int(rng.integers(0, len(tree)))
            b = np.sort(rng.integers(-6, 14, (2, 2)), axis=0).T.ravel().astype(float)
            idx.insert(i, tuple(b[[0, 2, 1, 3]]))
            entries.append((i, box_geometry(b[[0, 2, 1, 3]])))
        check_every_query(idx, inputs, entries, rng, f"seed {seed}, rows and boxes, {path}")
        idx.close()


def test_the_minimal_duplicate_id_case():
    idx = geoflash.Index()
    idx.insert(1, (0, 0, 1, 1))
    idx.insert(1, (10, 10, 11, 11))
    far = shapely.box(9, 9, 12, 12)
    assert sorted(idx.intersection((9, 9, 12, 12))) == [1]
    assert idx.query(far).tolist() == [1]
    assert idx.query(shapely.box(10.2, 10.2, 10.8, 10.8), predicate="within").tolist() == [1]
    ids, dist = idx.query_nearest(shapely.Point(10.5, 10.5), return_distance=True)
    assert ids.tolist() == [1] and dist.tolist() == [0.0]
    assert idx.query(shapely.box(-1, -1, 12, 12), predicate="contains").tolist() == [1, 1]


def test_moved_entries_of_an_index_of_geometries_count_as_their_box(tmp_path):
    """In memory as in a directory: an entry deleted and inserted again
    under its row's id has no geometry, and ``update`` moves it. (An entry
    that has its geometry is not moved by ``update``: both modes refuse
    it, tests/test_property_kinds.py.)"""
    geoms = np.array([shapely.Point(0, 0), shapely.box(0, 0, 1, 1),
                      shapely.LineString([(5, 5), (6, 6)])], dtype=object)
    for path in (None, str(tmp_path / "d")):
        idx = geoflash.Index.from_geoseries(geoms, path)
        idx.delete(1, (0, 0, 1, 1))
        idx.insert(1, (10, 10, 11, 11))
        assert idx.query(shapely.box(9, 9, 12, 12)).tolist() == [1], path
        assert idx.query(shapely.box(0.2, 0.2, 0.8, 0.8)).tolist() == [], path
        assert idx.query_nearest(shapely.Point(10.5, 10.5)).tolist() == [1], path
        idx.close()
    idx = geoflash.Index.from_geoseries(geoms)
    idx.delete(2, (5, 5, 6, 6))
    idx.insert(2, (5, 5, 6, 6))
    idx.update(2, (20, 20, 21, 22))
    assert idx.query(shapely.box(19, 19, 20.5, 20.5)).tolist() == [2]
    assert idx.query(shapely.Point(20.5, 21.5), predicate="within").tolist() == [2]
    assert idx.query(shapely.box(4, 4, 7, 7)).tolist() == []
    assert list(idx.nearest(shapely.Point(20, 23), 1)) == [2]


def test_geometry_collections_answer_as_shapely_without_a_panic(tmp_path):
    """GeometryCollections of overlapping polygons, of a point and a
    polygon, of lines and points, as inputs and as entries."""
    W = shapely.from_wkt
    tree = np.array([
        W("GEOMETRYCOLLECTION (POLYGON ((0 3, 4 3, 4 7, 0 7, 0 3), (0.5 4, 1 4, 1 5, 0.5 4)),"
          " POLYGON ((1 6, 5 6, 5 10, 1 10, 1 6)))"),
        W("GEOMETRYCOLLECTION (POINT (12 -6), POLYGON ((-2 2, 4 11, 13 1, -2 2)))"),
        W("MULTILINESTRING ((-4 3, -3 4))"),
        W("POLYGON ((12 -5, 17 -5, 17 -2, 12 -2, 12 -5))"),
        shapely.box(2, 4, 3, 5),
    ], dtype=object)
    inputs = np.array([
        W("GEOMETRYCOLLECTION (POLYGON ((10 0, 10 1, 9 1, 9 0, 10 0)), POINT (-4 3))"),
        W("GEOMETRYCOLLECTION (LINESTRING (12 -6, 12 -3), POLYGON ((13 2, 13 3, 12 3, 12 2, 13 2)))"),
        W("GEOMETRYCOLLECTION (MULTIPOINT ((2 9), (3 9)))"),
        W("POLYGON ((2 3, 6 3, 6 7, 2 7, 2 3))"),
        shapely.box(2, 5, 3, 6),
        tree[0],
    ], dtype=object)
    entries = entries_of(tree)
    rng = np.random.default_rng(7)
    for path in (None, str(tmp_path / "gc")):
        idx = geoflash.Index.from_geoseries(tree, path)
        check_every_query(idx, inputs, entries, rng, f"collections, {path}")
        idx.close()


def test_nearest_merges_the_entries_refined_here_with_the_others(tmp_path):
    """``nearest(geometry, k)`` with a collection or a duplicate id among
    the entries and fewer other entries than k: every entry counts."""
    W = shapely.from_wkt
    tree = np.array([shapely.LineString([(4, 0), (4, 4)]), shapely.LineString([(-4, 0), (-4, 4)]),
                     W("GEOMETRYCOLLECTION (POINT (0 1), LINESTRING (0 2, 1 3))")], dtype=object)
    for path in (None, str(tmp_path / "n")):
        idx = geoflash.Index.from_geoseries(tree, path)
        p = shapely.Point(0, 0)
        assert list(idx.nearest(p, 3)) == [2, 0, 1]
        assert list(idx.nearest(p, 2)) == [2, 0, 1]  # 0 and 1 tie at the 2nd distance
        assert list(idx.nearest(p, 1)) == [2]
        idx.close()
    idx = geoflash.Index()
    idx.insert(5, (0, 1, 0, 1))
    idx.insert(5, (3, 0, 3, 0))
    idx.insert(6, (-2, 0, -2, 0))
    assert list(idx.nearest(shapely.Point(0, 0), 3)) == [5, 6, 5]
    assert list(idx.nearest(shapely.Point(0, 0), 2)) == [5, 6]
    ids, dist = idx.query_nearest(shapely.Point(2.5, 0), return_distance=True, all_matches=False)
    assert ids.tolist() == [5] and dist.tolist() == [0.5]


def test_non_finite_coordinates_are_refused_with_a_clear_error(tmp_path):
    nan, inf = float("nan"), float("inf")
    good = np.array([shapely.box(0, 0, 3, 3), shapely.Point(1, 1)], dtype=object)
    idx = geoflash.Index.from_geoseries(good)
    with np.errstate(invalid="ignore"):
        bad_inputs = [
            shapely.LineString([(0, 0), (nan, 1), (2, 2)]),
            shapely.Polygon([(0, 0), (1, nan), (1, 1), (0, 0)]),
            shapely.Point(nan, nan),
            shapely.Point(inf, 0),
            shapely.LineString([(0, 0), (-inf, 1)]),
            # a collection, measured with shapely (found by a review: a
            # nearest search of it alone took the NaN)
            shapely.GeometryCollection([shapely.Point(0, 0), shapely.Point(nan, 2)]),
        ]
    for bad in bad_inputs:
        arr = np.array([shapely.Point(1, 1), None, bad], dtype=object)
        for predicate in [p for p in PREDICATES if p is not None]:
            kw = {"distance": 1.0} if predicate == "dwithin" else {}
            with pytest.raises(geoflash.RTreeError, match=r"input geometry 2 .*(NaN|infinite)"):
                idx.query(arr, predicate=predicate, **kw)
        with pytest.raises(geoflash.RTreeError, match=r"input geometry 2 .*(NaN|infinite)"):
            idx.query_nearest(arr)
        # one geometry, not in an array: the scalar path checks the same
        for predicate in [p for p in PREDICATES if p is not None]:
            kw = {"distance": 1.0} if predicate == "dwithin" else {}
            with pytest.raises(geoflash.RTreeError, match=r"the input geometry .*(NaN|infinite)"):
                idx.query(bad, predicate=predicate, **kw)
        with pytest.raises(geoflash.RTreeError, match=r"the input geometry .*(NaN|infinite)"):
            idx.query_nearest(bad)
        with pytest.raises(geoflash.RTreeError, match=r"(NaN|infinite)"):
            list(idx.nearest(bad, 1))
    # a geometry of an index in memory with a NaN inside (its bounds are
    # finite): refused when the geometries reach the refinement, as a
    # directory refuses it when it is built
    with np.errstate(invalid="ignore"):
        tree = np.array([shapely.box(0, 0, 1, 1), shapely.LineString([(0, 0), (nan, 1), (2, 2)])], dtype=object)
    with pytest.raises(geoflash.RTreeError, match="NaN"):
        geoflash.Index.from_geoseries(tree, str(tmp_path / "nan"))
    mem = geoflash.Index.from_geoseries(tree)
    with pytest.raises(geoflash.RTreeError, match=r"1 .*(NaN|infinite)"):
        mem.query(shapely.box(0, 0, 3, 3), predicate="intersects")
    with pytest.raises(geoflash.RTreeError, match=r"1 .*(NaN|infinite)"):
        mem.query_nearest(shapely.Point(5, 5))


def test_a_point_beyond_the_coordinate_range_is_refused_naming_the_input():
    """A point input of a nearest search beyond ±1e150 (the engine's
    coordinate range): an error naming the input (found by a review: the
    message named a rectangle only)."""
    idx = geoflash.Index.from_geoseries(np.array([shapely.box(0, 0, 3, 3), shapely.Point(1, 1)], dtype=object))
    with pytest.raises(geoflash.RTreeError, match=r"input geometry 1 has a coordinate .*beyond ±1e150"):
        idx.query_nearest(np.array([shapely.Point(0, 0), shapely.Point(1e200, 0)], dtype=object))
    with pytest.raises(geoflash.RTreeError, match=r"the input geometry has a coordinate .*beyond ±1e150"):
        idx.query_nearest(shapely.Point(1e200, 0))
    # a line beyond the range, refined (found by the same review: the geo
    # crate's distance overflowed, and the line was at distance 0 from
    # entries 5 and 95 away)
    pts = geoflash.Index.from_geoseries(np.array([shapely.Point(0, 0), shapely.Point(0, 100)], dtype=object))
    line = shapely.LineString([(-1e200, 5), (1e200, 5)])
    for g, name in ((line, "the input geometry"), (np.array([shapely.Point(0, 0), line], dtype=object), "input geometry 1")):
        with pytest.raises(geoflash.RTreeError, match=f"{name} has a coordinate .*beyond"):
            pts.query(g, predicate="dwithin", distance=6)
        with pytest.raises(geoflash.RTreeError, match=f"{name} has a coordinate .*beyond"):
            pts.query_nearest(g)
    # the box test alone takes any window
    assert pts.query(line, predicate=None).tolist() == []


def test_nearest_of_a_geometry_asking_for_more_than_there_are(tmp_path):
    geoms = np.array([shapely.Point(0, 0), shapely.Point(1, 0), shapely.Point(2, 0)], dtype=object)
    for path in (None, str(tmp_path / "k")):
        idx = geoflash.Index.from_geoseries(geoms, path)
        for k in (3, 4, 100):
            assert list(idx.nearest(shapely.Point(0.1, 0), k)) == [0, 1, 2]
            assert list(idx.nearest((0.1, 0), k)) == [0, 1, 2]
        assert list(idx.nearest(shapely.Point(0.1, 0), -1)) == [0, 1, 2]
        idx.close()
