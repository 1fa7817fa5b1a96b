"""The rest of rtree's API, with rtree itself as the oracle: the names of
rtree.index, Property, Index(properties=...), objects on every query, stream
and array bulk loads, objects on disk, leaves, nearest with ties and its
counts 0 and -1, intersection_v / nearest_v (same array layout), get_size,
a & b and a | b, RtreeContainer, the RTreeError hierarchy, result paging,
unbounded windows, overwrite, dumps/loads overrides, pickling (in memory by
content, on disk by path, through multiprocessing), and NotImplementedError
for what geoflash does not do."""

import ctypes
import json
import math
import multiprocessing
import pickle
from collections import Counter

import numpy as np
import pytest
import rtree
from rtree import index as rindex

import geoflash
from geoflash import index as gindex
from conftest import SCALE, random_boxes

N = int(1000 * SCALE)
INF = math.inf
# Errors either library raises for the same bad input: geoflash's RTreeError
# is not rtree's (its bases do not depend on whether rtree is installed).
RTreeError = (rtree.exceptions.RTreeError, geoflash.RTreeError)


def both(**kw):
    """A geoflash index and an rtree index made with the same arguments."""
    return gindex.Index(**kw), rindex.Index(**kw)


def fill_both(a, b, rng, n=N, interleaved=True, objects=True):
    """The same entries (duplicate ids, points, objects) in a and b; returns the boxes."""
    boxes = random_boxes(rng, n)
    ids = rng.integers(0, n // 2, size=n)
    for i, box in zip(ids.tolist(), boxes.tolist()):
        coords = box if interleaved else [box[0], box[2], box[1], box[3]]
        obj = {"id": i, "x": box[0]} if objects else None
        a.insert(i, coords, obj=obj)
        b.insert(i, coords, obj=obj)
    return boxes


def item_key(it):
    return (it.id, json.dumps(it.object, sort_keys=True), tuple(it.bbox), tuple(it.bounds))


def windows(rng, k=30):
    return [tuple(w) for w in random_boxes(rng, k, max_size=30, points=0.1).tolist()]


# ------------------------------------------------------------------ names


def test_every_public_name_of_rtree_index_exists():
    """rtree.index's public names, and those of its Index and Property
    classes, are in geoflash.index; only ctypes internals are left out."""
    internals = {"Handle", "IndexHandle", "IndexStreamHandle", "IndexArrayHandle", "PropertyHandle",
                 "InvalidHandleException", "CustomStorageCallbacks", "core", "ctypes", "id_type",
                 "major_version", "minor_version", "patch_version"}
    for name in rindex.__all__ + ["Item", "RtreeContainer", "RTreeError", "RT_Memory", "RT_Disk",
                                  "RT_Custom", "RT_Linear", "RT_Quadratic", "RT_Star", "RT_RTree",
                                  "RT_MVRTree", "RT_TPRTree", "ICustomStorage", "CustomStorage",
                                  "CustomStorageBase"]:
        assert name not in internals
        assert hasattr(gindex, name), name
        if name.startswith("RT_"):
            assert getattr(gindex, name) == getattr(rindex, name), name
    missing = {n for n in dir(rindex.Index) if not n.startswith("_")} - set(dir(gindex.Index))
    assert missing == {"get_coordinate_pointers"}  # ctypes pointers of rtree's C calls
    assert {n for n in dir(rindex.Property) if not n.startswith("_")} <= set(dir(gindex.Property))
    assert gindex.Rtree is gindex.Index and geoflash.Rtree is geoflash.Index
    assert gindex.Index.deinterleave([0, 10, 1, 11]) == rindex.Index.deinterleave([0, 10, 1, 11])
    assert gindex.Index.interleave([0, 1, 10, 11, 2, 12]) == rindex.Index.interleave([0, 1, 10, 11, 2, 12])


def test_exception_hierarchy():
    assert geoflash.RTreeError.__bases__ == (geoflash.GeoflashError, ValueError)
    assert not issubclass(geoflash.RTreeError, rtree.exceptions.RTreeError)
    assert geoflash.exceptions.RTreeError is geoflash.RTreeError is gindex.RTreeError
    ours, theirs = both()
    for idx in (ours, theirs):
        with pytest.raises(RTreeError):  # invalid bounds
            idx.insert(1, (1, 1, 0, 0))
        with pytest.raises(RTreeError):
            list(idx.intersection((5, 0, 4, 1)))
        with pytest.raises(RTreeError):  # empty stream
            type(idx)(iter([]))
        # a None id: the bounds are checked first, then the id (rtree's
        # ctypes.ArgumentError, "argument 2: TypeError: wrong type")
        with pytest.raises(RTreeError):
            idx.add(None, (0.0, 0.0, -1.0, 1.0))
        with pytest.raises(ctypes.ArgumentError):
            idx.add(None, (1, 1))
    with pytest.raises(TypeError, match="id must be an integer, not NoneType"):
        ours.insert(None, (1, 1))
    with pytest.raises(geoflash.InvalidIdError):
        ours.delete("7", (1, 1))
    assert issubclass(geoflash.InvalidIdError, geoflash.RTreeError)
    ours.close()
    theirs.close()
    for idx in (ours, theirs):  # a closed index
        with pytest.raises(RTreeError):
            list(idx.intersection((0, 0, 1, 1)))
    with pytest.raises(geoflash.RTreeError, match="unknown index option"):  # bad options
        geoflash.Index(colour="red")


# --------------------------------------------------------------- Property


def test_property_defaults_checks_and_pickling():
    assert gindex.Property().as_dict() == rindex.Property().as_dict()
    assert gindex.Property.pkeys == rindex.Property.pkeys
    for kw in ({"dimension": 0}, {"pagesize": 0}, {"leaf_capacity": 0}, {"index_capacity": -1},
               {"variant": 7}, {"type": 5}, {"storage": 5}, {"buffering_capacity": 0},
               {"near_minimum_overlap_factor": 0}, {"point_pool_capacity": 0}):
        for cls in (gindex.Property, rindex.Property):
            with pytest.raises(RTreeError):
                cls(**kw)
    for kw in ({"leaf_capacity": 10, "index_capacity": 12}, {"fill_factor": 3, "filename": b"abc"},
               {"overwrite": 0, "tight_mbr": 0, "dat_extension": "d", "idx_extension": "i"}):
        assert gindex.Property(**kw).as_dict() == rindex.Property(**kw).as_dict(), kw
    p = gindex.Property(leaf_capacity=20, variant=gindex.RT_Linear)
    p.set_index_type(gindex.RT_RTree)
    assert p.get_leaf_capacity() == 20 and p.get_index_type() == 0 and p.get_variant() == 0
    assert pickle.loads(pickle.dumps(p)).as_dict() == p.as_dict()
    # as rtree's: every Property has a handle, an unpickled copy a new one
    for cls in (gindex.Property, rindex.Property):
        q = cls()
        copy = pickle.loads(pickle.dumps(q))
        assert q.handle is not None and copy.handle is not None and copy.handle != q.handle
        assert copy.as_dict() == q.as_dict()
    with pytest.raises(RTreeError):
        gindex.Property().index_id
    assert "leaf_capacity" in repr(p) and "leaf_capacity" in str(p)


@pytest.mark.parametrize("props", [
    {},
    {"variant": rindex.RT_Linear, "leaf_capacity": 8, "index_capacity": 8, "fill_factor": 0.4},
    {"variant": rindex.RT_Quadratic, "leaf_capacity": 20, "index_capacity": 20, "fill_factor": 0.3},
    {"variant": rindex.RT_Star, "leaf_capacity": 10, "index_capacity": 10, "reinsert_factor": 0.9,
     "fill_factor": 0.9, "pagesize": 100},
    {"leaf_capacity": 1000, "index_capacity": 1000, "pagesize": 1000},
])
@pytest.mark.parametrize("interleaved", [True, False])
def test_index_with_properties_answers_like_rtree(props, interleaved):
    ours = gindex.Index(properties=gindex.Property(**props), interleaved=interleaved)
    theirs = rindex.Index(properties=rindex.Property(**props), interleaved=interleaved)
    rng = np.random.default_rng(1)
    fill_both(ours, theirs, rng, interleaved=interleaved)
    assert len(ours) == len(theirs) and ours.bounds == theirs.bounds
    for w in windows(rng):
        w = w if interleaved else (w[0], w[2], w[1], w[3])
        assert sorted(ours.intersection(w)) == sorted(theirs.intersection(w))
        assert sorted(ours.nearest(w, 3)) == sorted(theirs.nearest(w, 3))
    # the Property describes the index; M is the leaf capacity
    p = ours.properties
    assert p.storage == rindex.RT_Memory == theirs.properties.storage
    assert ours.manifest["index"]["max_entries"] == p.leaf_capacity
    assert ours.manifest["page_size"] >= p.pagesize or ours.manifest["page_size"] == 65536
    if props.get("variant", rindex.RT_Star) == rindex.RT_Star:
        assert ours.manifest["kind"] == "rstar"


@pytest.mark.parametrize("props", [
    {"fill_factor": 0.0}, {"fill_factor": 1.0}, {"fill_factor": 1.5}, {"leaf_capacity": 3},
    {"index_capacity": 2}, {"reinsert_factor": 2.0}, {"dimension": 1},
    {"variant": rindex.RT_Quadratic}, {"variant": rindex.RT_Linear, "fill_factor": 0.6},
])
def test_bad_properties_raise_rtree_errors_at_creation(props):
    for module in (gindex, rindex):
        p = module.Property(**props)
        with pytest.raises(RTreeError):
            module.Index(properties=p)


def test_what_geoflash_does_not_do_raises_not_implemented():
    cases = [
        (lambda: geoflash.Index(properties=geoflash.Property(dimension=3)), "3-D"),
        (lambda: geoflash.Index(properties=geoflash.Property(type=gindex.RT_TPRTree)), "TPR-tree"),
        (lambda: geoflash.Index(properties=geoflash.Property(type=gindex.RT_MVRTree)), "MVR-tree"),
        (lambda: geoflash.Index(gindex.CustomStorage()), "custom storage"),
        (lambda: geoflash.Index(rindex.CustomStorage()), "custom storage"),
        (lambda: geoflash.Index().insert(1, (0, 0, 0, 1, 1, 1)), "3-D"),
        (lambda: geoflash.Index().intersection_v(np.zeros((1, 3)), np.ones((1, 3))), "3-D"),
    ]
    for call, feature in cases:
        with pytest.raises(NotImplementedError, match=feature):
            call()
    # as in rtree, a Property holds any dimension; the index refuses it
    p = gindex.Property(dimension=3)
    assert p.dimension == 3 and p.as_dict()["dimension"] == 3
    p.dimension = 4
    assert p.get_dimension() == 4


# ------------------------------------------------------- objects and streams


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("on_disk", [False, True])
def test_objects_on_every_query(interleaved, on_disk, tmp_path):
    args = (str(tmp_path / "g"),) if on_disk else ()
    ours = gindex.Index(*args, interleaved=interleaved)
    theirs = rindex.Index(*((str(tmp_path / "r"),) if on_disk else ()), interleaved=interleaved)
    rng = np.random.default_rng(2)
    fill_both(ours, theirs, rng, interleaved=interleaved)
    if on_disk:  # objects stored on disk come back after reopening
        ours.close()
        theirs.close()
        ours = gindex.Index(str(tmp_path / "g"), interleaved=interleaved)
        theirs = rindex.Index(str(tmp_path / "r"), interleaved=interleaved)
    for w in windows(rng, 15):
        w = w if interleaved else (w[0], w[2], w[1], w[3])
        for method in ("intersection", "contains"):
            got = sorted(map(item_key, getattr(ours, method)(w, objects=True)))
            assert got == sorted(map(item_key, getattr(theirs, method)(w, objects=True))), method
            raw = Counter(json.dumps(o, sort_keys=True) for o in getattr(ours, method)(w, objects="raw"))
            assert raw == Counter(json.dumps(o, sort_keys=True) for o in getattr(theirs, method)(w, objects="raw"))
        q = w[:2] if interleaved else (w[0], w[2])
        got = sorted(map(item_key, ours.nearest(q, 4, objects=True)))
        assert got == sorted(map(item_key, theirs.nearest(q, 4, objects=True)))
        assert sorted(map(json.dumps, ours.nearest(q, 4, objects="raw"))) == \
            sorted(map(json.dumps, theirs.nearest(q, 4, objects="raw")))
    ours.close()


@pytest.mark.parametrize("interleaved", [True, False])
def test_stream_and_array_bulk_loads_with_objects(interleaved, tmp_path):
    rng = np.random.default_rng(3)
    boxes = random_boxes(rng, N)
    coords = boxes if interleaved else boxes[:, [0, 2, 1, 3]]
    items = [(i % 97, tuple(c), ("obj", i)) for i, c in enumerate(coords.tolist())]
    theirs = rindex.Index(iter(items), interleaved=interleaved)
    built = [
        gindex.Index(iter(items), interleaved=interleaved),
        gindex.Index(str(tmp_path / "s"), iter(items), interleaved=interleaved,
                     properties=gindex.Property(leaf_capacity=16, index_capacity=16, fill_factor=0.5)),
    ]
    for ours in built:
        assert len(ours) == len(theirs)
        for w in windows(np.random.default_rng(4)):
            w = w if interleaved else (w[0], w[2], w[1], w[3])
            assert sorted(map(item_key, ours.intersection(w, objects=True))) == \
                sorted(map(item_key, theirs.intersection(w, objects=True)))
    # fill_factor 0.5 of 16: the bulk load packs 8 entries per leaf
    assert max(len(leaf[1]) for leaf in built[1].leaves()) == 8
    for ours in built:
        ours.close()
    # arrays: (ids, mins, maxs), as rtree's array bulk load
    ids = np.arange(N) * 3 - 50
    ours = gindex.Index((ids, boxes[:, :2], boxes[:, 2:]), interleaved=interleaved)
    theirs = rindex.Index((ids, boxes[:, :2].copy(), boxes[:, 2:].copy()), interleaved=interleaved)
    for w in windows(np.random.default_rng(5)):
        w = w if interleaved else (w[0], w[2], w[1], w[3])
        assert sorted(ours.intersection(w)) == sorted(theirs.intersection(w))
    # an empty list builds an empty index, an empty iterator is an error
    for module in (gindex, rindex):
        assert len(module.Index([])) == 0
        with pytest.raises(RTreeError):
            module.Index(iter([]))
    with pytest.raises(ValueError):
        gindex.Index((ids[:3], boxes[:2, :2], boxes[:2, 2:]))


def test_delete_count_bounds_and_leaves_match_rtree():
    ours, theirs = both()
    rng = np.random.default_rng(6)
    boxes = fill_both(ours, theirs, rng, objects=False)
    for idx in (ours, theirs):
        for j in range(0, len(boxes), 4):
            idx.delete(j, boxes[j].tolist())  # mostly absent ids: nothing happens
        idx.delete(99999, (0, 0, 1, 1))
    assert len(ours) == len(theirs)
    assert ours.bounds == theirs.bounds
    assert ours.get_bounds(coordinate_interleaved=False) == theirs.get_bounds(coordinate_interleaved=False)
    for w in windows(rng):
        assert ours.count(w) == theirs.count(w)
    assert Counter(c for leaf in ours.leaves() for c in leaf[1]) == \
        Counter(c for leaf in theirs.leaves() for c in leaf[1])
    assert gindex.Index().leaves() == rindex.Index().leaves()  # one empty leaf
    assert gindex.Index().bounds == rindex.Index().bounds


def test_get_size_is_deprecated_as_in_rtree():
    ours, theirs = both()
    for idx in (ours, theirs):
        idx.insert(1, (0, 0, 1, 1))
        with pytest.warns(DeprecationWarning):
            assert idx.get_size() == 1


# ------------------------------------------------------------------ nearest


def test_nearest_ties_objects_and_counts_zero_and_negative():
    ours, theirs = both()
    # a grid of points and unit boxes: many equal distances
    k = 0
    for x in range(12):
        for y in range(12):
            c = (x, y) if (x + y) % 2 else (x, y, x + 1, y + 1)
            ours.insert(k % 40, c, obj=k)
            theirs.insert(k % 40, c, obj=k)
            k += 1
    rng = np.random.default_rng(7)
    queries = [(5, 5), (0.5, 0.5), (3, 4, 6, 6), (-3, -3), (20, 20, 21, 22), (4.5, 7.5)]
    queries += [tuple(q) for q in rng.integers(-2, 14, size=(20, 2)).tolist()]
    for q in queries:
        for n in (0, 1, 2, 5, 13, -1, -7):
            got = sorted(ours.nearest(q, n, objects="raw"))
            want = sorted(theirs.nearest(q, n, objects="raw"))
            assert got == want, (q, n)
            assert sorted(ours.nearest(q, n)) == sorted(theirs.nearest(q, n)), (q, n)
        # nearest first: the distances of the answer do not decrease
        found = list(ours.nearest(q, 10, objects=True))
        d = [math.dist(*[(max(min(q[0], it.bbox[2]), it.bbox[0]), max(min(q[1], it.bbox[3]), it.bbox[1])), q[:2]])
             for it in found] if len(q) == 2 else []
        assert d == sorted(d)


def test_intersection_v_and_nearest_v_same_layout_as_rtree():
    ours, theirs = both()
    rng = np.random.default_rng(8)
    fill_both(ours, theirs, rng, objects=False)
    w = random_boxes(rng, 60, max_size=20, points=0.3)
    mins, maxs = w[:, :2].copy(), w[:, 2:].copy()
    mins[5] = maxs[5] + 1  # inverted: the entries spanning the gap, in both
    mins[6], maxs[6] = (-INF, -INF), (INF, INF)  # an unbounded one finds everything
    g_ids, g_counts = ours.intersection_v(mins, maxs)
    r_ids, r_counts = theirs.intersection_v(mins, maxs)
    assert g_ids.dtype == r_ids.dtype == np.int64 and g_counts.dtype == r_counts.dtype == np.uint64
    assert g_counts.tolist() == r_counts.tolist() and len(g_ids) == len(r_ids)
    assert g_counts[6] == len(ours)
    splits = np.cumsum(g_counts)[:-1].astype(int)
    for a, b in zip(np.split(g_ids, splits), np.split(r_ids, splits)):
        assert sorted(a) == sorted(b)
    mins[5] = maxs[5]
    mins[6], maxs[6] = (0, 0), (0, 0)
    for kw in ({}, {"num_results": 3}, {"num_results": 0}, {"num_results": 4, "strict": True},
               {"num_results": 5, "return_max_dists": True},
               {"num_results": 6, "max_dists": rng.uniform(0, 8, len(mins)), "return_max_dists": True}):
        got, want = ours.nearest_v(mins, maxs, **kw), theirs.nearest_v(mins, maxs, **kw)
        assert len(got) == len(want)
        assert got[0].dtype == np.int64 and got[1].dtype == np.uint64
        assert got[1].tolist() == want[1].tolist(), kw
        if len(got) == 3:
            assert got[2].dtype == np.float64
            assert np.allclose(got[2], want[2], rtol=1e-12, atol=0), kw
        splits = np.cumsum(got[1])[:-1].astype(int)
        for i, (a, b) in enumerate(zip(np.split(got[0], splits), np.split(want[0], splits))):
            if kw.get("strict"):  # which of the tied entries is cut is the tree's choice
                q = (mins[i, 0], mins[i, 1], maxs[i, 0], maxs[i, 1])
                allowed = set(ours.nearest(q, kw["num_results"]))
                assert set(a.tolist()) <= allowed
            else:
                assert sorted(a) == sorted(b), (kw, i)
    # a 1-D pair is one window; argument errors as in rtree
    assert ours.intersection_v(np.zeros(2), np.full(2, 50.0))[1].tolist() == \
        theirs.intersection_v(np.zeros(2), np.full(2, 50.0))[1].tolist()
    for idx in (ours, theirs):
        with pytest.raises(ValueError):
            idx.intersection_v(np.zeros((2, 2)), np.zeros((3, 2)))
        with pytest.raises(ValueError):
            idx.nearest_v(mins, maxs, num_results=-1)
        with pytest.raises(ValueError):
            idx.nearest_v(mins, maxs, max_dists=np.ones(3))


# --------------------------------------------------------- & | container


@pytest.mark.parametrize("interleaved", [True, False])
def test_intersection_and_union_of_indexes(interleaved):
    rng = np.random.default_rng(9)
    g1, r1 = both(interleaved=interleaved)
    g2, r2 = both(interleaved=interleaved)
    fill_both(g1, r1, rng, n=200, interleaved=interleaved)
    fill_both(g2, r2, rng, n=150, interleaved=interleaved)
    for op in ("__and__", "__or__"):
        got, want = getattr(g1, op)(g2), getattr(r1, op)(r2)
        assert isinstance(got, gindex.Index) and got.interleaved == interleaved
        assert len(got) == len(want)

        def key(it, with_id):
            return ((it.id if with_id else None), tuple(it.bbox), json.dumps(it.object, sort_keys=True))

        world = (-INF, -INF, INF, INF) if interleaved else (-INF, INF, -INF, INF)
        gi = list(got.intersection(world, objects=True))
        ri = list(want.intersection(want.bounds, objects=True))
        with_id = op == "__or__"  # & numbers the pairs in tree order
        assert Counter(key(it, with_id) for it in gi) == Counter(key(it, with_id) for it in ri)
        if op == "__and__":
            assert sorted(it.id for it in gi) == list(range(len(gi)))
    with pytest.raises(AssertionError):
        g1 & gindex.Index(interleaved=not interleaved)


def test_rtree_container_matches_rtree():
    ours, theirs = gindex.RtreeContainer(), rindex.RtreeContainer()
    objs = [object() for _ in range(50)] + ["a", "b"]
    rng = np.random.default_rng(10)
    boxes = random_boxes(rng, 80).tolist()
    placed = []
    for j, b in enumerate(boxes):
        o = objs[j % len(objs)]
        ours.insert(o, b)
        theirs.insert(o, b)
        placed.append((o, b))
    for o, b in placed[::5]:
        ours.delete(o, b)
        theirs.delete(o, b)
    assert len(ours) == len(theirs) and ours.get_size() == theirs.get_size()
    assert Counter(map(id, ours)) == Counter(map(id, theirs))
    assert all((o in ours) == (o in theirs) for o in objs)
    for w in windows(rng, 10):
        assert Counter(map(id, ours.intersection(w))) == Counter(map(id, theirs.intersection(w)))
        got = Counter((id(it.object), it.id, tuple(it.bbox)) for it in ours.intersection(w, bbox=True))
        assert got == Counter((id(it.object), it.id, tuple(it.bbox)) for it in theirs.intersection(w, bbox=True))
        assert Counter(map(id, ours.nearest(w[:2], 3))) == Counter(map(id, theirs.nearest(w[:2], 3)))
    for c in (ours, theirs):
        with pytest.raises(IndexError):
            c.delete(object(), (0, 0, 1, 1))
        with pytest.raises(ValueError):
            list(c.intersection((0, 0, 1, 1), bbox="x"))
        with pytest.raises(ValueError):
            type(c)("some/path")
    assert Counter(id(o) for leaf in ours.leaves() for o in leaf[1]) == \
        Counter(map(id, ours.intersection((-INF, -INF, INF, INF))))
    # pickled, the container keeps its objects (with their boxes)
    again = pickle.loads(pickle.dumps(ours))
    assert len(again) == len(ours)
    world = (-INF, -INF, INF, INF)
    assert len(list(again.intersection(world))) == len(list(ours.intersection(world)))
    assert Counter(x for x in again if isinstance(x, str)) == Counter(x for x in ours if isinstance(x, str))


# ------------------------------------------------ behaviour that used to differ


def test_unbounded_windows():
    ours, theirs = both()
    rng = np.random.default_rng(11)
    fill_both(ours, theirs, rng, objects=False)
    for w in [(-INF, -INF, INF, INF), (-INF, 20, 50, INF), (30, -INF, INF, 40), (-1e300, -1e300, 1e300, 1e300)]:
        assert sorted(ours.intersection(w)) == sorted(theirs.intersection(w)), w
        assert sorted(ours.contains(w)) == sorted(theirs.contains(w)), w
        assert ours.count(w) == theirs.count(w), w
    assert sorted(ours.nearest((-INF, -INF, INF, INF), 3)) == sorted(theirs.nearest((-INF, -INF, INF, INF), 3))
    offsets, ids = ours.intersection_batch(np.array([[-INF, -INF, INF, INF]]))
    assert len(ids) == len(ours)
    # stored boxes stay finite (rtree would store an infinite box)
    with pytest.raises(RTreeError, match="not finite"):
        ours.insert(1, (0, 0, INF, 1))
    with pytest.raises(RTreeError):
        list(ours.intersection((float("nan"), 0, 1, 1)))
    ours.delete(1, (0, 0, INF, 1))  # no entry has that box: nothing happens
    assert len(ours) == len(theirs)


def test_overwrite(tmp_path):
    g, r = str(tmp_path / "g"), str(tmp_path / "r")
    for module, path in ((gindex, g), (rindex, r)):
        idx = module.Index(path)
        idx.insert(1, (0, 0, 1, 1), obj="old")
        idx.close()
        again = module.Index(path)  # opened
        assert len(again) == 1
        again.close()
        fresh = module.Index(path, overwrite=True)  # replaced
        assert len(fresh) == 0
        fresh.insert(2, (5, 5, 6, 6))
        fresh.close()
        assert list(module.Index(path).intersection((0, 0, 10, 10))) == [2]
    # a new path with overwrite=True is simply created; a locked index is not removed
    with gindex.Index(str(tmp_path / "new"), overwrite=True) as idx:
        assert len(idx) == 0
        with pytest.raises(RTreeError, match="locked"):
            gindex.Index(str(tmp_path / "new"), overwrite=True)
    with pytest.raises(RTreeError):
        gindex.Index(g, overwrite=True, readonly=True)


class JSONIndex(gindex.Index):
    """rtree's documented way to store objects another way."""

    def dumps(self, obj):
        return json.dumps(obj).encode("ascii")

    def loads(self, string):
        return json.loads(string.decode("ascii"))


class RJSONIndex(rindex.Index):
    def dumps(self, obj):
        return json.dumps(obj).encode("ascii")

    def loads(self, string):
        return json.loads(string.decode("ascii"))


def test_dumps_and_loads_overrides_are_used(tmp_path):
    path = str(tmp_path / "j")
    ours, theirs = JSONIndex(path), RJSONIndex()
    stored = {"nums": [23, 45], "letters": "abcd"}
    for idx in (ours, theirs):
        idx.insert(1, (0, 1, 0, 1), stored)
        idx.insert(2, (3, 3), [1, 2])
    assert list(ours.nearest((0, 0), 1, objects="raw")) == list(theirs.nearest((0, 0), 1, objects="raw")) == [stored]
    ours.close()
    # the directory holds the JSON bytes: a plain Index cannot unpickle them...
    with gindex.Index(path) as plain, pytest.raises(pickle.UnpicklingError):
        list(plain.intersection((0, 0, 5, 5), objects="raw"))
    # ...and the subclass reads them back, from a stream bulk load too
    with JSONIndex(path) as again:
        assert sorted(map(json.dumps, again.intersection((0, 0, 5, 5), objects="raw"))) == \
            sorted(map(json.dumps, [stored, [1, 2]]))
    bulk = JSONIndex(iter([(1, (0, 0, 1, 1), stored)]))
    assert [it.object for it in bulk.intersection((0, 0, 1, 1), objects=True)] == [stored]


def test_result_limit_and_offset_as_rtree():
    ours, theirs = both()
    rng = np.random.default_rng(12)
    fill_both(ours, theirs, rng, n=300)
    full = list(ours.intersection((0, 0, 100, 100)))
    unpaged = sorted(ours.nearest((50, 50), 12))
    for limit_call, offset_call in [(0, 0), (0, 3), (5, 0), (5, 3), (4, 250), (1000, 10), (3, 0)]:
        for idx in (ours, theirs):
            idx.set_result_limit(limit_call)
            idx.set_result_offset(offset_call)
        assert ours.get_result_limit() == theirs.get_result_limit() == ours.result_limit
        assert ours.get_result_offset() == theirs.get_result_offset() == ours.result_offset
        for w in windows(np.random.default_rng(13), 10):
            # the windows are large: the pages are full and cut the same answers
            a, b = list(ours.intersection(w)), list(theirs.intersection(w))
            assert len(a) == len(b), (limit_call, offset_call)
            assert ours.count(w) == theirs.count(w)
            assert len(list(ours.contains(w, objects="raw"))) == len(list(theirs.contains(w, objects="raw")))
            na, nb = list(ours.nearest(w[:2], 7)), list(theirs.nearest(w[:2], 7))
            assert len(na) == len(nb)
        # libspatialindex's limit (set_result_offset) and offset (set_result_limit)
        want = full[limit_call:limit_call + offset_call] if offset_call else full
        assert list(ours.intersection((0, 0, 100, 100))) == want
    ours.set_result_offset(0)
    theirs.set_result_offset(0)
    assert sorted(ours.nearest((50, 50), 12)) == sorted(theirs.nearest((50, 50), 12)) == unpaged


# ---------------------------------------------------------------- pickling


def _answers(idx):
    w = (10, 10, 70, 70)
    return (len(idx), sorted(idx.intersection(w)),
            sorted(map(item_key, idx.intersection(w, objects=True))),
            sorted(idx.nearest((30, 30), 5)))


def _answers_in_child(blob):
    return _answers(pickle.loads(blob))


@pytest.mark.parametrize("store", ["plain", "efind"])
def test_pickling_in_memory_by_content(store):
    ours = gindex.Index(store=store, device="mem:", page_size=512, interleaved=False)
    theirs = rindex.Index(interleaved=False)
    fill_both(ours, theirs, np.random.default_rng(14), interleaved=False)
    again = pickle.loads(pickle.dumps(ours))
    assert again.interleaved is False and again.path is None
    assert _answers(again) == _answers(ours)
    assert again.manifest["store"]["kind"] == store
    assert sorted(map(item_key, again.intersection((0, 100, 0, 100), objects=True))) == \
        sorted(map(item_key, theirs.intersection((0, 100, 0, 100), objects=True)))
    again.insert(-1, (1, 2, 1, 2))  # a working, independent index
    assert len(again) == len(ours) + 1
    sub = JSONIndex()
    sub.insert(3, (0, 0, 1, 1), {"a": [1]})
    back = pickle.loads(pickle.dumps(sub))
    assert type(back) is JSONIndex and list(back.intersection((0, 0, 1, 1), objects="raw")) == [{"a": [1]}]
    empty = pickle.loads(pickle.dumps(gindex.Index()))
    assert len(empty) == 0


def test_pickling_on_disk_by_path(tmp_path):
    path = str(tmp_path / "d")
    ours = gindex.Index(path, page_size=512)
    fill_both(ours, rindex.Index(), np.random.default_rng(15))
    want = _answers(ours)
    blob = pickle.dumps(ours)  # checkpointed; the pickle holds the path, not the entries
    assert len(blob) < 2000
    ours.close()
    again = pickle.loads(blob)
    assert again.path == path and _answers(again) == want
    again.close()
    ro = gindex.Index(path, readonly=True)
    copy = pickle.loads(pickle.dumps(ro))  # read-only: many readers at a time
    assert _answers(copy) == want
    with pytest.raises(RTreeError):
        copy.insert(1, (0, 0, 1, 1))


def test_multiprocessing_sends_indexes(tmp_path):
    """What Dask and multiprocessing do: pickle the index to other processes."""
    mem = JSONIndex()
    ref = RJSONIndex()
    fill_both(mem, ref, np.random.default_rng(16))
    path = str(tmp_path / "mp")
    disk = gindex.Index(path)
    fill_both(disk, rindex.Index(), np.random.default_rng(17))
    disk.close()
    disk = gindex.Index(path, readonly=True)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.map(_answers_in_child, [pickle.dumps(mem), pickle.dumps(disk), pickle.dumps(disk)])
    assert results[0] == _answers(mem)
    assert results[1] == results[2] == _answers(disk)
    assert results[0][2] == sorted(map(item_key, ref.intersection((10, 10, 70, 70), objects=True)))


def test_context_manager_and_close(tmp_path):
    with gindex.Index(str(tmp_path / "c")) as idx:
        idx.insert(1, (0, 0, 1, 1))
        assert idx.valid()
    assert idx.closed and not idx.valid()
    with pytest.raises(RTreeError):
        len(idx)
    idx.close()  # harmless (rtree raises OSError on a second close)
    with pytest.raises(RTreeError, match="closed"):
        pickle.dumps(idx)
    with gindex.Index(str(tmp_path / "c")) as again:
        assert len(again) == 1


class _Seq:
    """A sequence that is neither a list nor a tuple (the checked path)."""

    def __init__(self, values):
        self.values = list(values)

    def __iter__(self):
        return iter(self.values)


class _ListOfFloats(list):
    """A list subclass: also taken by the checked path."""


@pytest.mark.parametrize("interleaved", [True, False])
def test_insert_fast_path_and_checked_path_store_the_same(interleaved):
    """``insert`` with an integer id and a list or tuple of numbers takes one
    call into the core; every other accepted form (numpy ids and arrays,
    other sequences) goes through the Python checks. Both must store the
    same boxes and give the same answers. (Strings that parse as numbers
    are refused: test_errors.py::test_text_and_bytes_are_not_coordinates.)"""
    rng = np.random.default_rng(5)
    boxes = random_boxes(rng, 300)
    forms = [
        lambda b: list(b),
        lambda b: tuple(b),
        lambda b: np.asarray(b),
        lambda b: _Seq(b),
        lambda b: _ListOfFloats(b),
        lambda b: [np.float64(v) for v in b],
    ]
    ids = [lambda i: i, lambda i: np.int64(i), lambda i: True if i == 1 else i]
    results = []
    for form in forms:
        for make_id in ids:
            idx = geoflash.Index(interleaved=interleaved)
            for i, b in enumerate(boxes):
                coords = b if interleaved else [b[0], b[2], b[1], b[3]]
                idx.insert(make_id(i), form(coords))
            idx.insert(10_000, form([25.5, 50.5]))  # a point, either order
            w = (10, 10, 60, 70) if interleaved else (10, 60, 10, 70)
            p = (25.5, 50.5, 25.5, 50.5) if interleaved else (25.5, 25.5, 50.5, 50.5)
            results.append(
                (
                    sorted(idx.intersection(w)),
                    sorted(idx.intersection(p)),
                    [round(v, 12) for v in idx.bounds],
                    len(idx),
                )
            )
    assert all(r == results[0] for r in results)
    assert results[0][1] == [10_000] and len(results[0][0]) > 10


def test_insert_errors_are_the_same_on_every_path():
    idx = geoflash.Index()
    for bad_id in (1.5, "7", None):
        with pytest.raises(geoflash.RTreeError, match="id must be an integer"):
            idx.insert(bad_id, [0.0, 0.0, 1.0, 1.0])
    for coords in ([0.0, 0.0, 1.0], (0.0,), ["x", 0.0, 1.0, 1.0], [None, 0, 1, 1]):
        with pytest.raises(geoflash.RTreeError):
            idx.insert(1, coords)
    with pytest.raises(NotImplementedError):
        idx.insert(1, [0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    with pytest.raises(OverflowError):
        idx.insert(2**70, [0.0, 0.0, 1.0, 1.0])
    for box in ([1.0, 0.0, 0.0, 1.0], [math.nan, 0.0, 1.0, 1.0]):  # inverted, NaN
        raised = []
        for form in (list, tuple, np.asarray):
            with pytest.raises(Exception) as e:
                idx.insert(1, form(box))
            raised.append((type(e.value), str(e.value)))
        assert raised[0] == raised[1] == raised[2]
    assert len(idx) == 0
