"""Answers identical to the rtree package (libspatialindex) on the same
random data: intersection, contains, nearest (ties included), count, bounds
and len, on every store and device, after inserts and deletes with
duplicate ids, and after reopening."""

import contextlib
import json

import numpy as np
import pytest
import rtree

import geoflash
from conftest import SCALE, make_index, random_boxes

N = int(2000 * SCALE)
QUERIES = int(60 * SCALE)


# An update outside a batch is a commit of its own (a log sync on a file):
# build_both applies the first SINGLE inserts and deletes that way and the
# others in batches, so both paths run without thousands of syncs.
SINGLE = 100
BATCH = 500


def apply_ops(idx, ops, op):
    """op(idx, id, coords) for each of ops: the first SINGLE each a commit,
    the rest in batches of BATCH (rtree's index has no batches)."""
    batch = getattr(idx, "batch", contextlib.nullcontext)
    for i, coords in ops[:SINGLE]:
        op(idx, i, coords)
    for start in range(SINGLE, len(ops), BATCH):
        with batch():
            for i, coords in ops[start : start + BATCH]:
                op(idx, i, coords)


def build_both(geoflash_index, rng, n=N):
    """Inserts the same entries (duplicate ids, points) into a geoflash index
    and an rtree index, then deletes a third of them from both."""
    ref = rtree.index.Index()
    boxes = random_boxes(rng, n)
    ids = rng.integers(0, n // 2, size=n)  # duplicates
    inserts = []
    for i, b in zip(ids, boxes):
        coords = tuple(b[:2]) if b[0] == b[2] and b[1] == b[3] and rng.random() < 0.5 else tuple(b)
        inserts.append((int(i), coords))
    deletes = [(int(ids[j]), tuple(boxes[j])) for j in rng.choice(n, size=n // 3, replace=False)]
    for index in (geoflash_index, ref):
        apply_ops(index, inserts, lambda x, i, c: x.insert(i, c, obj=i * 10))
        apply_ops(index, deletes, lambda x, i, c: x.delete(i, c))
    return ref


def windows(rng, k=QUERIES):
    return random_boxes(rng, k, max_size=30, points=0.1)


def assert_same_answers(idx, ref, rng):
    assert len(idx) == len(ref)
    assert idx.bounds == ref.bounds
    for w in windows(rng):
        w = tuple(w)
        assert sorted(idx.intersection(w)) == sorted(ref.intersection(w)), w
        assert sorted(idx.contains(w)) == sorted(ref.contains(w)), w
        assert idx.count(w) == ref.count(w), w
    for w in windows(rng, QUERIES // 2):
        for k in (1, 3, 10):
            # a point and a box as the query; ties beyond k are returned by both
            for q in (tuple(w[:2]), tuple(w)):
                got, want = list(idx.nearest(q, k)), list(ref.nearest(q, k))
                assert sorted(got) == sorted(want), (q, k)
                assert len(got) >= min(k, len(ref))


def test_same_answers_as_rtree(config, tmp_path):
    store, device = config
    rng = np.random.default_rng(7)
    idx = make_index(geoflash, tmp_path, store, device)
    ref = build_both(idx, rng)
    assert_same_answers(idx, ref, np.random.default_rng(8))
    # objects come back with their entries
    w = (20, 20, 60, 60)
    got = sorted((it.id, it.object, tuple(it.bbox)) for it in idx.intersection(w, objects=True))
    want = sorted((it.id, it.object, tuple(it.bbox)) for it in ref.intersection(w, objects=True))
    assert got == want
    assert sorted(idx.intersection(w, objects="raw")) == sorted(ref.intersection(w, objects="raw"))
    got = sorted((it.id, it.object) for it in idx.nearest((50, 50), 5, objects=True))
    want = sorted((it.id, it.object) for it in ref.nearest((50, 50), 5, objects=True))
    assert got == want
    idx.close()


@pytest.mark.parametrize("how", ["insert", "from_arrays"])
@pytest.mark.parametrize("store", ["plain", "efind"])
def test_ids_equal_to_positions_then_others_match_rtree(how, store, tmp_path):
    # ids 0..n-1 in order (the record map's dense case, no id stored), then
    # ids that break it: repeated, negative, far beyond, equal to their
    # position again; deletes across both parts; answers and objects as
    # rtree's before and after reopening.
    rng = np.random.default_rng(31)
    n = N // 2
    boxes = random_boxes(rng, n)
    path = str(tmp_path / "dense")
    ref = rtree.index.Index()
    if how == "insert":
        idx = geoflash.Index(path, store=store, page_size=512)
        for i, b in enumerate(boxes):
            idx.insert(i, tuple(b))
    else:
        idx = geoflash.Index.from_arrays(np.arange(n, dtype=np.int64), boxes, path=path, store=store, page_size=512)
    for i, b in enumerate(boxes):
        ref.insert(i, tuple(b))
    more = random_boxes(rng, 200)
    later = [3, -7, n + 1, n + 2, 2**62, -(2**63), 0] + [n + 7 + j for j in range(193)]
    for j, (i, b) in enumerate(zip(later, more)):
        obj = f"o{j}" if j % 3 == 0 else None
        idx.insert(i, tuple(b), obj=obj)
        ref.insert(i, tuple(b), obj=obj)
    for j in list(rng.choice(n, size=n // 4, replace=False)) + [n + 3, n + 10, n + 11]:
        pos = int(j)
        i, b = (pos, boxes[pos]) if pos < n else (later[pos - n], more[pos - n])
        idx.delete(i, tuple(b))
        ref.delete(i, tuple(b))
    assert_same_answers(idx, ref, np.random.default_rng(32))
    w = tuple(float(v) for v in more[0])
    want = sorted((it.id, str(it.object)) for it in ref.intersection(w, objects=True))
    assert sorted((it.id, str(it.object)) for it in idx.intersection(w, objects=True)) == want
    idx.close()
    with geoflash.Index(path) as again:
        assert_same_answers(again, ref, np.random.default_rng(33))
        assert sorted((it.id, str(it.object)) for it in again.intersection(w, objects=True)) == want
        again.insert(n + 500, (1.0, 1.0, 2.0, 2.0))
        ref.insert(n + 500, (1.0, 1.0, 2.0, 2.0))
        assert sorted(again.intersection((1.5, 1.5, 1.5, 1.5))) == sorted(ref.intersection((1.5, 1.5, 1.5, 1.5)))


@pytest.mark.parametrize("config", [c for c in __import__("conftest").CONFIGS if c[1] != "mem:"],
                         ids=lambda c: f"{c[0]}-{c[1].split(':')[0]}")
def test_reopen_after_close_answers_identically(config, tmp_path):
    store, device = config
    rng = np.random.default_rng(11)
    idx = make_index(geoflash, tmp_path, store, device)
    ref = build_both(idx, rng, n=N // 2)
    path = idx.path
    idx.close()
    assert idx.closed
    with geoflash.Index(path) as again:
        assert again.manifest["store"]["kind"] == store
        assert_same_answers(again, ref, np.random.default_rng(12))
        # and it stays writable: more entries, another reopen
        again.insert(-5, (1.5, 1.5, 2.5, 2.5), obj="new")
        ref.insert(-5, (1.5, 1.5, 2.5, 2.5), obj="new")
    with geoflash.Index(path) as again:
        assert_same_answers(again, ref, np.random.default_rng(13))
        assert [it.object for it in again.intersection((2, 2, 2, 2), objects=True)
                if it.id == -5] == ["new"]


@pytest.mark.parametrize("store", ["plain", "efind", "fast"])
def test_read_only_reopen(store, tmp_path):
    rng = np.random.default_rng(21)
    path = str(tmp_path / "ro")
    idx = geoflash.Index(path, store=store, page_size=512)
    ref = build_both(idx, rng, n=N // 4)
    idx.close()
    ro = geoflash.Index(path, readonly=True)
    assert_same_answers(ro, ref, np.random.default_rng(22))
    with pytest.raises(ValueError, match="read-only"):
        ro.insert(1, (0, 0, 1, 1))
    with pytest.raises(ValueError, match="read-only"):
        ro.delete(1, (0, 0, 1, 1))
    ro.close()


def test_interleaved_false_and_delete_semantics():
    idx = geoflash.Index(interleaved=False)
    ref = rtree.index.Index(interleaved=False)
    for i, c in enumerate([(0, 10, 0, 10), (2, 3, 2, 3), (5, 5, 5, 5), (0, 10, 0, 10)]):
        idx.insert(i % 3, c)
        ref.insert(i % 3, c)
    assert idx.bounds == ref.bounds == [0.0, 10.0, 0.0, 10.0]
    assert idx.get_bounds(coordinate_interleaved=True) == ref.get_bounds(coordinate_interleaved=True)
    for w in [(1, 4, 1, 4), (0, 10, 0, 10), (10, 11, 10, 11)]:
        assert sorted(idx.intersection(w)) == sorted(ref.intersection(w))
        assert sorted(idx.contains(w)) == sorted(ref.contains(w))
    got = [it.bounds for it in idx.intersection((2, 3, 2, 3), objects=True) if it.id == 1]
    want = [it.bounds for it in ref.intersection((2, 3, 2, 3), objects=True) if it.id == 1]
    assert got == want == [[2.0, 3.0, 2.0, 3.0]]
    # deleting an absent entry (wrong id or wrong box) changes nothing, as in rtree
    idx.delete(7, (0, 10, 0, 10))
    idx.delete(0, (0, 9, 0, 10))
    assert len(idx) == 4
    idx.delete(0, (0, 10, 0, 10))  # one of the two (id 0 and id 0 % 3 == 0)
    ref.delete(0, (0, 10, 0, 10))
    assert sorted(idx.intersection((0, 10, 0, 10))) == sorted(ref.intersection((0, 10, 0, 10)))


def test_empty_index_matches_rtree():
    idx, ref = geoflash.Index(), rtree.index.Index()
    assert idx.bounds == ref.bounds
    assert len(idx) == len(ref) == 0
    assert list(idx.intersection((0, 0, 1, 1))) == []
    assert list(idx.nearest((0, 0), 3)) == []
    assert idx.count((0, 0, 1, 1)) == 0


def test_stream_construction_matches_rtree(tmp_path):
    rng = np.random.default_rng(3)
    boxes = random_boxes(rng, N // 2)
    items = [(int(i % 97), tuple(b), {"row": i}) for i, b in enumerate(boxes)]
    ref = rtree.index.Index(iter(items))
    for idx in (geoflash.Index(iter(items)), geoflash.Index(str(tmp_path / "s"), iter(items), bulk="hilbert")):
        assert len(idx) == len(ref)
        for w in windows(np.random.default_rng(4)):
            assert sorted(idx.intersection(tuple(w))) == sorted(ref.intersection(tuple(w)))
        got = sorted(it.object["row"] for it in idx.intersection((0, 0, 30, 30), objects=True))
        want = sorted(it.object["row"] for it in ref.intersection((0, 0, 30, 30), objects=True))
        assert got == want
        idx.close()
    # the streamed directory index reopens with its objects
    with geoflash.Index(str(tmp_path / "s")) as again:
        assert sorted(o["row"] for o in again.intersection((0, 0, 30, 30), objects="raw")) == want


def test_numpy_bulk_and_batch_queries_match_rtree(tmp_path):
    rng = np.random.default_rng(5)
    boxes = random_boxes(rng, N, integer=False)
    ids = rng.integers(-1000, 1000, size=N)  # negative and duplicate ids
    ref = rtree.index.Index()
    for i, b in zip(ids, boxes):
        ref.insert(int(i), tuple(b))
    for idx in (
        geoflash.Index.from_arrays(ids, boxes),
        geoflash.Index.from_arrays(ids, boxes, str(tmp_path / "a"), store="plain", page_size=1024),
        geoflash.Index.from_arrays(ids, boxes, kind="rtree", bulk="hilbert", fill=0.7),
    ):
        assert len(idx) == N
        qs = windows(np.random.default_rng(6))
        offsets, found = idx.intersection_batch(qs)
        assert offsets.dtype == found.dtype == np.int64
        assert len(offsets) == len(qs) + 1 and offsets[0] == 0 and offsets[-1] == len(found)
        for j, w in enumerate(qs):
            want = sorted(ref.intersection(tuple(w)))
            assert sorted(found[offsets[j]:offsets[j + 1]].tolist()) == want
            assert sorted(idx.intersection(tuple(w))) == want
        offsets, found = idx.intersection_batch(qs, predicate="contains")
        for j, w in enumerate(qs):
            assert sorted(found[offsets[j]:offsets[j + 1]].tolist()) == sorted(ref.contains(tuple(w)))
        # kNN of the same windows and of points, ties included as rtree's
        pts = np.vstack([qs, np.hstack([qs[:, :2], qs[:, :2]])])
        offsets, found, dists = idx.nearest_batch(pts, 4)
        assert offsets.dtype == found.dtype == np.int64 and dists.dtype == np.float64
        assert len(offsets) == len(pts) + 1 and offsets[-1] == len(found) == len(dists)
        for j, q in enumerate(pts):
            got, d = found[offsets[j]:offsets[j + 1]], dists[offsets[j]:offsets[j + 1]]
            assert sorted(got.tolist()) == sorted(ref.nearest(tuple(q), 4)), j
            gap_x = np.maximum(np.maximum(q[0] - boxes[:, 2], boxes[:, 0] - q[2]), 0.0)
            gap_y = np.maximum(np.maximum(q[1] - boxes[:, 3], boxes[:, 1] - q[3]), 0.0)
            brute = np.sort(np.sqrt(gap_x * gap_x + gap_y * gap_y))
            assert d.tolist() == brute[:len(d)].tolist() and np.all(np.diff(d) >= 0)
        strict = idx.nearest_batch(pts, 4, ties=False)[0]
        assert np.diff(strict).tolist() == [4] * len(pts)
        assert idx.nearest_batch(pts, 0)[0].tolist() == [0] * (len(pts) + 1)
        # the bulk-loaded index takes inserts afterwards
        idx.insert(5, (1, 1, 2, 2))
        assert len(idx) == N + 1
        idx.close()
    # ids default to positions; other integer dtypes are accepted
    idx = geoflash.Index.from_arrays(None, boxes[:10])
    assert sorted(idx.intersection((0, 0, 100, 100))) == list(range(10))
    idx = geoflash.Index.from_arrays(np.arange(10, dtype=np.int32), boxes[:10].astype(np.float32))
    assert len(idx) == 10
    offsets, found = idx.intersection_batch(np.empty((0, 4)))
    assert offsets.tolist() == [0] and len(found) == 0


def test_every_kind_and_split_answers_like_rtree():
    rng = np.random.default_rng(9)
    boxes = random_boxes(rng, N // 2)
    ref = rtree.index.Index()
    for i, b in enumerate(boxes):
        ref.insert(i, tuple(b))
    for kw in ({"kind": "rtree", "split": "linear"}, {"kind": "rtree", "split": "quadratic"},
               {"kind": "rtree", "split": "exponential", "max_entries": 8},
               {"kind": "rstar", "buffer": 16384, "buffer_policy": "lru", "reinsert_percent": 0},
               {"store": "efind", "flush_percent": 30, "flush_unit": 2, "flush_policy": "mha",
                "read_buffer_percent": 40, "temporal_control": False},
               {"store": "fast", "fast_policy": "fast", "flush_unit": 3, "buffer": 8192},
               {"store": "fast", "fast_policy": "flush-all", "durability": "sync"},
               # Hilbert R-trees: a domain covering the data, and one that clamps
               {"kind": "hilbert", "hilbert_domain": (0, 0, 110, 110)},
               {"kind": "hilbert", "hilbert_domain": (20.0, 20.0, 60.0, 50.0), "store": "plain"}):
        idx = geoflash.Index(page_size=512, **kw)
        for i, b in enumerate(boxes):
            idx.insert(i, tuple(b))
        for w in windows(np.random.default_rng(10), 20):
            assert sorted(idx.intersection(tuple(w))) == sorted(ref.intersection(tuple(w))), kw
            assert sorted(idx.nearest(tuple(w[:2]), 4)) == sorted(ref.nearest(tuple(w[:2]), 4)), kw


def test_hilbert_kind_by_insertion_deletion_and_reopen(tmp_path):
    with pytest.raises(ValueError, match="hilbert_domain"):
        geoflash.Index(kind="hilbert")
    with pytest.raises(ValueError, match="hilbert_domain"):
        geoflash.Index(kind="hilbert", hilbert_domain=(0, 0, 1))
    rng = np.random.default_rng(11)
    path = tmp_path / "h"
    idx = geoflash.Index(str(path), kind="hilbert", hilbert_domain=(0, 0, 100, 100), page_size=1024)
    ref = build_both(idx, rng, N // 2)
    assert_same_answers(idx, ref, np.random.default_rng(12))
    idx.close()
    again = geoflash.Index(str(path))
    assert "hilbert" in json.dumps(again.manifest)
    assert_same_answers(again, ref, np.random.default_rng(13))
    # a bulk load takes the data's extent without being told
    boxes = random_boxes(rng, 500)
    bulk = geoflash.Index.from_arrays(np.arange(500), boxes.astype(np.float64), kind="hilbert")
    w = (10.0, 10.0, 40.0, 40.0)
    want = [i for i, b in enumerate(boxes) if b[0] <= w[2] and b[2] >= w[0] and b[1] <= w[3] and b[3] >= w[1]]
    assert sorted(bulk.intersection(w)) == want


def test_batch_ids_of_positional_ids_after_deletes_and_inserts():
    """Ids 0..N-1 from positions (keys equal ids: no lookup per hit), then
    deletes and an insert with another id: every answer still maps keys to
    the right ids, against brute force."""
    rng = np.random.default_rng(12)
    boxes = random_boxes(rng, 400, integer=False)
    idx = geoflash.Index.from_arrays(None, boxes)
    qs = windows(np.random.default_rng(13))

    def check(live):
        offsets, found = idx.intersection_batch(qs)
        for j, w in enumerate(qs):
            want = sorted(i for i, b in live.items()
                          if b[0] <= w[2] and w[0] <= b[2] and b[1] <= w[3] and w[1] <= b[3])
            assert sorted(found[offsets[j]:offsets[j + 1]].tolist()) == want
            assert sorted(idx.intersection(tuple(w))) == want

    live = {i: tuple(b) for i, b in enumerate(boxes)}
    check(live)
    for i in range(0, 400, 7):
        idx.delete(i, live.pop(i))
    check(live)
    idx.insert(-5, (1.0, 1.0, 2.0, 2.0))
    live[-5] = (1.0, 1.0, 2.0, 2.0)
    check(live)
