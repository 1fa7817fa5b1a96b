"""Exact duplicates of an entry of ``from_geoseries``: an entry inserted
with the id and exactly the box of a row's entry has no stored geometry
and counts as its box, the row's own entry as the row's geometry, in
memory as in a directory (docs/python.md, "An entry added with
``insert()``...").

The defect (found by a review): in memory such a duplicate counted as the
row's geometry too, so an input meeting the box but not the geometry was
not matched by it, and one meeting the geometry matched it twice (in a
directory only the row's entry has a geometry in the object heap). And
after ``delete(id, box)`` removed one of the two (which one is the
index's choice, as in rtree), in memory the one left counted as its box
even when it was the row's own entry, which a directory keeps with its
geometry; a pickled index in memory lost which of them is the row's.

Every test runs the exact queries (``query`` with each predicate, one
input and an array of them, ``dwithin``; ``query_nearest`` and
``nearest`` of a geometry) and compares them with a brute-force oracle:
shapely over the index's own list of entries, each entry its row's
geometry when it is the row's (stored without an object) and its box
when it was inserted (stored with an object saying so).
"""

import pickle

import numpy as np
import pytest

import geoflash

shapely = pytest.importorskip("shapely")

from conftest import generated_geometries  # noqa: E402

WORLD = (-1e300, -1e300, 1e300, 1e300)
PREDICATES = [p for p in geoflash._geoflash.PREDICATES if p != "dwithin"]
#: (predicate, distance) of the queries compared; dwithin at two distances
QUERIES = [(p, None) for p in PREDICATES] + [("dwithin", 0.0), ("dwithin", 1.5)]


def rows():
    """The rows of from_geoseries: generated boxes, triangles, lines and
    points with integer coordinates, a polygon with a hole, a
    MultiPolygon and a GeometryCollection (the collections are refined
    with shapely, the others in Rust)."""
    geoms = list(generated_geometries(np.random.default_rng(7), 400))
    geoms += [
        shapely.Polygon([(2, 2), (12, 2), (12, 12), (2, 12)], [[(4, 4), (10, 4), (10, 10), (4, 10)]]),
        shapely.MultiPolygon([shapely.box(0, 0, 2, 2), shapely.box(6, 6, 8, 8)]),
        shapely.GeometryCollection([shapely.Point(20, 1), shapely.Polygon([(14, 0), (18, 0), (14, 4)])]),
    ]
    return np.array(geoms, dtype=object)


ROWS = rows()
BOUNDS = shapely.bounds(ROWS)
#: the rows given an exact duplicate (every third), and a second one (every ninth)
DUPLICATED = np.arange(0, len(ROWS), 3)
TWICE = np.arange(0, len(ROWS), 9)
#: a row deleted and inserted again with its box twice, and a row given
#: an entry with another box
AGAIN, MOVED = 1, 2


def box_of(r):
    return tuple(float(v) for v in BOUNDS[r])


def box_geometry(b):
    """An entry's box as a geometry: a point, a line when one side is 0,
    else a rectangle."""
    (x0, y0, x1, y1) = (float(v) for v in b)
    if x0 == x1 and y0 == y1:
        return shapely.Point(x0, y0)
    if x0 == x1 or y0 == y1:
        return shapely.LineString([(x0, y0), (x1, y1)])
    return shapely.box(x0, y0, x1, y1)


def inputs():
    """Generated geometries, the boxes of the duplicated rows (equal to
    their duplicates: ``exclusive``), and for each of those rows the
    corner of its box, which meets the box and not a triangle's
    geometry, and the centre of its box."""
    boxes = BOUNDS[DUPLICATED]
    return np.concatenate(
        [
            generated_geometries(np.random.default_rng(11), 120),
            np.array([box_geometry(b) for b in boxes], dtype=object),
            shapely.points(boxes[:, 2:]),
            shapely.points((boxes[:, :2] + boxes[:, 2:]) / 2),
        ]
    )


INPUTS = inputs()


def build(mode, tmp_path):
    """An index of ROWS in memory or in a directory, with small pages
    (several levels, so duplicates land in other leaves than their row's
    entry), then the duplicates and the other inserted entries."""
    path = None if mode == "memory" else str(tmp_path / "idx")
    idx = geoflash.Index.from_geoseries(ROWS, path, page_size=512)
    for r in DUPLICATED:
        idx.insert(int(r), box_of(r), obj=("dup", int(r), 0))
    for r in TWICE:
        idx.insert(int(r), box_of(r), obj=("dup", int(r), 1))
    idx.delete(AGAIN, box_of(AGAIN))
    idx.insert(AGAIN, box_of(AGAIN), obj=("again", AGAIN, 0))
    idx.insert(AGAIN, box_of(AGAIN), obj=("again", AGAIN, 1))
    idx.insert(MOVED, (30.0, 30.0, 31.0, 33.0), obj=("moved", MOVED))
    return idx


def modes(tmp_path):
    """(mode, index) for an index in memory, then one in a directory."""
    for mode in ("memory", "directory"):
        yield mode, build(mode, tmp_path / mode)


def entries(idx):
    """The oracle's entries: (ids, geometries), from the index's list of
    its entries: a row's own entry (no object) is the row's geometry, an
    inserted one (with an object) its box."""
    items = list(idx.intersection(WORLD, objects=True))
    ids = np.array([it.id for it in items], dtype=np.int64)
    geoms = np.array([ROWS[it.id] if it.object is None else box_geometry(it.bbox) for it in items], dtype=object)
    return ids, geoms


def originals(idx, rs):
    """How many of the rows ``rs`` still have their own entry."""
    return sum(it.object is None and it.id in set(rs.tolist()) for it in idx.intersection(WORLD, objects=True))


def expected_pairs(ids, geoms, predicate, distance):
    """(input, id) of every input and entry satisfying the predicate, one
    per entry, sorted by input then id: a 2×M array."""
    i, e = np.meshgrid(np.arange(len(INPUTS)), np.arange(len(geoms)), indexing="ij")
    i, e = i.ravel(), e.ravel()
    if predicate == "dwithin":
        ok = shapely.dwithin(INPUTS[i], geoms[e], distance)
    else:
        ok = getattr(shapely, predicate)(INPUTS[i], geoms[e])
    left, right = i[ok], ids[e[ok]]
    order = np.lexsort((right, left))
    return np.vstack([left[order], right[order]])


def check_queries(idx, label):
    """query of each predicate, with the array of inputs and with single
    inputs (those that meet a box of a duplicated row), against the oracle."""
    ids, geoms = entries(idx)
    for predicate, distance in QUERIES:
        want = expected_pairs(ids, geoms, predicate, distance)
        got = idx.query(INPUTS, predicate=predicate, distance=distance)
        assert got.tolist() == want.tolist(), (label, predicate, distance)
        for i in range(len(INPUTS) - 2 * len(DUPLICATED), len(INPUTS), 7):
            one = idx.query(INPUTS[i], predicate=predicate, distance=distance)
            assert one.tolist() == want[1][want[0] == i].tolist(), (label, predicate, distance, i)


def expected_nearest(ids, geoms, max_distance=None, exclusive=False, all_matches=True):
    """query_nearest's answer: (input, id) pairs, distances; by input,
    distance, then id; one pair per entry."""
    left, right, dist = [], [], []
    for i, g in enumerate(INPUTS):
        d = shapely.distance(g, geoms)
        if exclusive:
            d[shapely.equals(g, geoms)] = np.inf
        if max_distance is not None:
            d[d > max_distance] = np.inf
        if not np.isfinite(d).any():
            continue
        near = np.flatnonzero(d == d.min())
        near = near[np.argsort(ids[near], kind="stable")]
        if not all_matches:
            near = near[:1]
        left += [i] * len(near)
        right += ids[near].tolist()
        dist += d[near].tolist()
    return [left, right], dist


def expected_k_nearest(ids, geoms, g, k):
    """nearest(g, k): the ids of the k nearest entries and every one tied
    with the k-th, nearest first, ties by id."""
    d = shapely.distance(g, geoms)
    order = np.lexsort((ids, d))
    kth = d[order[min(k, len(order)) - 1]]
    return ids[order[d[order] <= kth]].tolist()


def check_nearest(idx, label):
    """query_nearest (every option) and nearest of a geometry against the oracle."""
    ids, geoms = entries(idx)
    cases = [
        dict(),
        dict(all_matches=False),
        dict(exclusive=True),
        dict(max_distance=1.0),
        dict(max_distance=2.5, exclusive=True),
    ]
    for kw in cases:
        want, want_dist = expected_nearest(ids, geoms, **kw)
        got, got_dist = idx.query_nearest(INPUTS, return_distance=True, **kw)
        assert got.tolist() == want, (label, kw)
        np.testing.assert_allclose(got_dist, want_dist, rtol=1e-12, err_msg=f"{label} {kw}")
    for i in range(len(INPUTS) - 2 * len(DUPLICATED), len(INPUTS), 5):
        for k in (1, 3):
            want = expected_k_nearest(ids, geoms, INPUTS[i], k)
            assert list(idx.nearest(INPUTS[i], k)) == want, (label, i, k)


def delete_duplicated_rows(idx):
    """Deletes one entry of each duplicated row's id and box (the index
    picks which); the row's own entry or a duplicate is left."""
    before = len(idx)
    for r in DUPLICATED:
        idx.delete(int(r), box_of(r))
    assert len(idx) == before - len(DUPLICATED)


def test_queries_count_an_exact_duplicate_as_its_box_and_the_row_entry_as_its_geometry(tmp_path):
    for mode, idx in modes(tmp_path):
        check_queries(idx, mode)
        idx.close()


def test_nearest_searches_measure_each_duplicate_entry_to_what_it_counts_as(tmp_path):
    for mode, idx in modes(tmp_path):
        check_nearest(idx, mode)
        idx.close()


def test_after_deleting_one_of_the_duplicates_the_entry_left_keeps_what_it_counts_as(tmp_path):
    for mode, idx in modes(tmp_path):
        delete_duplicated_rows(idx)
        # the data exercises both outcomes: rows whose own entry was the
        # one deleted, and rows whose own entry is left with its geometry
        kept = originals(idx, DUPLICATED)
        assert 0 < kept < len(DUPLICATED), (mode, kept)
        check_queries(idx, mode)
        check_nearest(idx, mode)
        if mode == "directory":
            path = idx.path
            idx.close()
            idx = geoflash.Index(path)
            assert originals(idx, DUPLICATED) == kept
            check_queries(idx, "directory reopened")
            check_nearest(idx, "directory reopened")
        idx.close()


def test_a_pickled_index_in_memory_keeps_which_duplicate_is_the_row_entry(tmp_path):
    idx = build("memory", tmp_path)
    copy = pickle.loads(pickle.dumps(idx))
    check_queries(copy, "pickled")
    delete_duplicated_rows(copy)
    kept = originals(copy, DUPLICATED)
    assert 0 < kept < len(DUPLICATED), kept
    check_queries(copy, "pickled, after the deletes")
    check_nearest(copy, "pickled, after the deletes")
