"""geoflash.sjoin and sjoin_nearest (geoflash/joins.py) against a
brute-force oracle: every (left, right) pair tested with shapely's own
predicate functions and distances. Seeded random loops (the test
environment has no hypothesis); the seeds scale with
GEOFLASH_PROPTEST_CASES.

Found by the review of joins.py:
- ``dwithin`` with one distance per left row grew each left box by its
  distance without the margin the one-distance path (``_exact._grow``)
  has: a pair at exactly the distance whose box test rounded the other way
  was lost (the same pair was found with the same distance given once);
- a GeometryCollection on either side panicked in the Rust refinement or
  answered otherwise than shapely (fixed in _exact.py, checked here
  through the join);
- a NaN inside a geometry (shapely's bounds leave it out) was joined
  silently, with answers depending on which side was indexed.
"""

import os

import numpy as np
import pytest

geopandas = pytest.importorskip("geopandas")
shapely = pytest.importorskip("shapely")

import geoflash  # noqa: E402
from geoflash.joins import nearest_pairs, predicate_pairs  # noqa: E402
from test_exact_review import geometries, holds, usable  # noqa: E402

CASES = max(4, int(os.environ.get("GEOFLASH_PROPTEST_CASES", "64")) // 4)
PREDICATES = [None] + list(geoflash._geoflash.PREDICATES)


def oracle_pairs(left, right, predicate, distance=None):
    """Sorted (left, right) positions of every pair for which
    ``predicate(left, right)`` holds (distance: one, or one per left)."""
    out = []
    for i, a in enumerate(left):
        if not usable(a):
            continue
        d = None if distance is None else float(np.broadcast_to(distance, (len(left),))[i])
        out += [(i, j) for j, b in enumerate(right) if usable(b) and holds(predicate, a, b, d)]
    return out


def oracle_nearest(left, right, max_distance=None, exclusive=False):
    out = []
    for i, a in enumerate(left):
        if not usable(a):
            continue
        found = [(float(shapely.distance(a, b)), j) for j, b in enumerate(right)
                 if usable(b) and not (exclusive and shapely.equals(a, b))]
        found = [f for f in found if max_distance is None or f[0] <= max_distance]
        if found:
            m = min(f[0] for f in found)
            out += [(i, j, d) for d, j in sorted(found) if d == m]
    return out


@pytest.mark.parametrize("seed", range(CASES))
def test_join_pairs_match_brute_force(seed):
    """Every predicate, dwithin with one distance and one per left row,
    and nearest pairs, with either side the larger (the index is built
    over the larger and asked the converse predicate), empty sides,
    copies, touching and collinear geometries and multi-parts. Not
    GeometryCollections: GEOS 3.14 answers ``contains(a, b)`` and
    ``within(b, a)`` differently for some (see
    test_joins_with_collections_answer_as_shapely)."""
    rng = np.random.default_rng(2000 + seed)
    left = geometries(rng, int(rng.integers(0, 40)), collections=False)
    right = geometries(rng, int(rng.integers(0, 40)), collections=False)
    for a, b in ((left, right), (right, left)):
        for predicate in PREDICATES:
            distances = [None]
            if predicate == "dwithin":
                distances = [float(rng.integers(0, 3)), rng.integers(0, 3, len(a)).astype(float)]
            for d in distances:
                l, r = predicate_pairs(a, b, predicate, d)
                assert list(zip(l.tolist(), r.tolist())) == oracle_pairs(a, b, predicate, d), (seed, predicate, d)
        for max_distance, exclusive in ((None, False), (1.5, False), (None, True)):
            want = oracle_nearest(a, b, max_distance, exclusive)
            l, r, dist = nearest_pairs(a, b, max_distance, exclusive)
            got = list(zip(l.tolist(), r.tolist()))
            assert got == [(i, j) for i, j, _ in want], (seed, max_distance, exclusive)
            assert np.allclose(dist, [d for _, _, d in want])
            # each right geometry with its nearest left ones (how="right")
            l, r, dist = nearest_pairs(a, b, max_distance, exclusive, index_left=True)
            want = oracle_nearest(b, a, max_distance, exclusive)
            assert sorted(zip(r.tolist(), l.tolist())) == sorted((i, j) for i, j, _ in want)


def test_large_joins_match_shapely():
    """Inputs past the bulk thresholds (2,048 inputs: the box filter on a
    thread of its own; 20,000 candidates: the refinement on every core),
    valid boxes and points with integer corners, against shapely's
    predicates on the candidate pairs of a brute-force box test."""
    rng = np.random.default_rng(11)

    def make(n):
        lo = rng.integers(0, 250, (n, 2))
        g = shapely.box(lo[:, 0], lo[:, 1], lo[:, 0] + rng.integers(1, 4, n), lo[:, 1] + rng.integers(1, 4, n))
        points = rng.random(n) < 0.3
        g[points] = shapely.points(lo[points])
        return g

    left, right = make(12000), make(9000)
    lb, rb = shapely.bounds(left), shapely.bounds(right)
    # every pair whose boxes meet, grown by 1 for dwithin, by a sweep on x
    order = np.argsort(rb[:, 0])
    cand_l, cand_r = [], []
    for i in range(len(left)):
        hi = np.searchsorted(rb[order, 0], lb[i, 2] + 1, "right")
        js = order[:hi]
        js = js[(rb[js, 2] >= lb[i, 0] - 1) & (rb[js, 1] <= lb[i, 3] + 1) & (rb[js, 3] >= lb[i, 1] - 1)]
        cand_l.append(np.full(len(js), i))
        cand_r.append(js)
    cand_l, cand_r = np.concatenate(cand_l), np.concatenate(cand_r)
    for predicate in ("intersects", "touches", "within", "contains", "dwithin"):
        kw = {"distance": 1.0} if predicate == "dwithin" else {}
        fn = (lambda a, b: shapely.dwithin(a, b, 1.0)) if predicate == "dwithin" else getattr(shapely, predicate)
        keep = fn(left[cand_l], right[cand_r])
        want = sorted(zip(cand_l[keep].tolist(), cand_r[keep].tolist()))
        for a, b, flip in ((left, right, False), (right, left, True)):
            l, r = predicate_pairs(a, b, predicate, kw.get("distance"))
            got = sorted(zip(r.tolist(), l.tolist())) if flip else list(zip(l.tolist(), r.tolist()))
            if flip and predicate in ("within", "contains"):
                continue  # the converse: checked the first way round
            assert got == want, (predicate, flip, len(got), len(want))
    per_row = rng.integers(0, 2, len(left)).astype(float)
    l, r = predicate_pairs(left, right, "dwithin", per_row)
    keep = shapely.dwithin(left[cand_l], right[cand_r], per_row[cand_l])
    assert list(zip(l.tolist(), r.tolist())) == sorted(zip(cand_l[keep].tolist(), cand_r[keep].tolist()))


def test_dwithin_at_exactly_the_distance_answers_as_geopandas():
    """A pair at distance d where the box test ``x1 + d >= x2`` rounds
    below while ``x2 - x1 <= d`` (shapely's distance) holds: GeoPandas'
    ``sjoin`` (STRtree's candidates: the right boxes meeting each left box
    grown by d) leaves it out, and finds it the other way round, with one
    distance or one per row. (An earlier review kept it both ways, taking
    shapely's ``dwithin`` for the oracle; the degenerate-geometry review
    took GeoPandas' answers.)"""
    x1, d, x2 = -9.932126670142608, 8.026120310743533, -1.9060063593990753
    assert x2 - x1 <= d and x1 + d < x2  # the rounding of the case
    a, b = shapely.Point(x1, 0.0), shapely.Point(x2, 0.0)
    assert shapely.dwithin(a, b, d)
    left = geopandas.GeoDataFrame({"l": [0, 1]}, geometry=[a, a])
    right = geopandas.GeoDataFrame({"r": [0]}, geometry=[b])
    for distance in (d, np.array([d, d])):
        assert len(geopandas.sjoin(left, right, predicate="dwithin", distance=distance)) == 0
        assert len(geoflash.sjoin(left, right, predicate="dwithin", distance=distance)) == 0
    # the other way round (the larger side indexed by geoflash)
    assert len(geopandas.sjoin(right, left, predicate="dwithin", distance=d)) == 2
    assert len(geoflash.sjoin(right, left, predicate="dwithin", distance=d)) == 2
    l, r = predicate_pairs(np.array([b], dtype=object), np.array([a, a], dtype=object), "dwithin", [d])
    assert l.tolist() == [0, 0] and r.tolist() == [0, 1]
    l, r = predicate_pairs(np.array([a, a], dtype=object), np.array([b], dtype=object), "dwithin", [d, 0.5])
    assert l.tolist() == [] and r.tolist() == []


def test_joins_with_collections_answer_as_shapely():
    W = shapely.from_wkt
    left = geopandas.GeoDataFrame({"l": range(4)}, geometry=[
        W("GEOMETRYCOLLECTION (POLYGON ((0 3, 4 3, 4 7, 0 7, 0 3)), POLYGON ((1 6, 5 6, 5 10, 1 10, 1 6)))"),
        W("GEOMETRYCOLLECTION (POLYGON ((10 0, 10 1, 9 1, 9 0, 10 0)), POINT (-4 3))"),
        shapely.box(2, 4, 3, 5),
        shapely.Point(3, 9),
    ])
    right = geopandas.GeoDataFrame({"r": range(3)}, geometry=[
        W("MULTILINESTRING ((-4 3, -3 4))"),
        W("GEOMETRYCOLLECTION (MULTIPOINT ((2 9), (3 9)))"),
        shapely.box(1, 1, 6, 8),
    ])
    lg, rg = np.asarray(left.geometry.values), np.asarray(right.geometry.values)
    for predicate in PREDICATES:
        if predicate == "dwithin":
            continue
        for how in ("inner", "left", "right"):
            got = geoflash.sjoin(left, right, how=how, predicate=predicate)
            pairs = sorted(zip(got["l"].dropna().astype(int), got["r"].dropna().astype(int)))
            if how == "inner":
                assert pairs == oracle_pairs(lg, rg, predicate), predicate
    near = geoflash.sjoin_nearest(left, right, distance_col="d", exclusive=True)
    assert list(zip(near["l"], near["r"])) == [(i, j) for i, j, _ in oracle_nearest(lg, rg, None, True)]


def test_non_finite_coordinates_in_a_join_are_refused_with_a_clear_error():
    nan, inf = float("nan"), float("inf")
    good = [shapely.box(0, 0, 2, 2), shapely.Point(1, 1), shapely.LineString([(0, 0), (3, 3)])]
    with np.errstate(invalid="ignore"):
        bads = [shapely.LineString([(0, 0), (nan, 1), (2, 2)]), shapely.Polygon([(0, 0), (1, nan), (1, 1), (0, 0)]),
                shapely.Point(nan, nan), shapely.Point(inf, 0)]
    for bad in bads:
        for side in ("left", "right"):
            lg = good + [bad] if side == "left" else good
            rg = good + [bad] if side == "right" else good[:2]
            left = geopandas.GeoDataFrame({"a": range(len(lg))}, geometry=lg)
            right = geopandas.GeoDataFrame({"b": range(len(rg))}, geometry=rg)
            name = f"{side}_df row 3"
            for predicate in ("intersects", "within", "touches", "dwithin"):
                kw = {"distance": 1.0} if predicate == "dwithin" else {}
                with pytest.raises(geoflash.RTreeError, match=f"{name} .*(NaN|infinite)"):
                    geoflash.sjoin(left, right, predicate=predicate, **kw)
            with pytest.raises(geoflash.RTreeError, match=f"{name} .*(NaN|infinite)"):
                geoflash.sjoin(left, right, predicate="dwithin", distance=np.ones(len(left)))
            for how in ("inner", "right"):
                with pytest.raises(geoflash.RTreeError, match=f"{name} .*(NaN|infinite)"):
                    geoflash.sjoin_nearest(left, right, how=how)
