"""The index kinds beyond the R-tree family through the Python API: the
grid files (``grid``, ``gffm``, ``lbgrid``, ``hgrid``) and the xBR+-tree
(points), the FOR-tree (boxes). Answers are checked against a brute-force
scan, in memory and on disk, after a reopen too; what a kind does not take
(a node store for a grid file, a box in a point index, a bulk load of a grid
file) is refused with a message that says why."""
import math

import numpy as np
import pytest

import geoflash
from geoflash import RTreeError

DOMAIN = (0.0, 0.0, 100.0, 100.0)
HYBRID = "hybrid:fast=(file?direct=false);slow=(file?direct=false)"


def distinct_points(rng, n):
    """n distinct points with integer coordinates in the domain."""
    cells = rng.choice(101 * 101, size=n, replace=False)
    return np.stack([cells // 101, cells % 101], axis=1).astype(np.float64)


def brute_window(points, live, w):
    return sorted(
        i for i in live if w[0] <= points[i][0] <= w[2] and w[1] <= points[i][1] <= w[3]
    )


def kth_distance(points, live, q, k):
    d = sorted(math.hypot(points[i][0] - q[0], points[i][1] - q[1]) for i in live)
    return d[k - 1]


def make(kind, path, **kw):
    if kind == "hgrid":
        kw.setdefault("device", HYBRID)
    if path is None:
        return geoflash.Index(kind=kind, hilbert_domain=DOMAIN, page_size=1024, **kw)
    return geoflash.Index(str(path), kind=kind, hilbert_domain=DOMAIN, page_size=1024, **kw)


def check_answers(idx, points, live, rng):
    assert len(idx) == len(live)
    assert idx.count((-1, -1, 101, 101)) == len(live)
    xs = [points[i][0] for i in live]
    ys = [points[i][1] for i in live]
    assert idx.bounds == [min(xs), min(ys), max(xs), max(ys)]
    for _ in range(25):
        x, y = rng.uniform(0, 90, size=2)
        w = (x, y, x + rng.uniform(0, 20), y + rng.uniform(0, 20))
        assert sorted(idx.intersection(w)) == brute_window(points, live, w)
    for k in (1, 5):
        q = tuple(rng.uniform(0, 100, size=2))
        got = list(idx.nearest(q, k))
        assert len(got) >= k
        kth = kth_distance(points, live, q, k)
        # Every answer lies within the k-th distance (ties may add more).
        for i in got:
            assert math.hypot(points[i][0] - q[0], points[i][1] - q[1]) <= kth + 1e-9


POINT_KINDS = ["grid", "gffm", "lbgrid", "hgrid", "xbr"]


# H-Grid needs a hybrid device of two files, so a directory.
CASES = [(k, d) for k in POINT_KINDS for d in (False, True) if d or k != "hgrid"]


@pytest.mark.parametrize(
    "kind,on_disk", CASES, ids=[f"{k}-{'disk' if d else 'memory'}" for k, d in CASES]
)
def test_point_kinds_answer_as_a_scan_and_reopen(kind, on_disk, tmp_path):
    rng = np.random.default_rng(7)
    points = distinct_points(rng, 1500)
    path = tmp_path / kind if on_disk else None
    idx = make(kind, path)
    for i, (x, y) in enumerate(points):
        idx.insert(i, (x, y))
    live = set(range(len(points)))
    for i in range(0, len(points), 7):
        idx.delete(i, tuple(points[i]))
        live.discard(i)
    check_answers(idx, points, live, rng)
    assert idx.manifest["kind"] == kind
    if not on_disk:
        return
    idx.close()
    again = geoflash.Index(str(path))
    assert again.manifest["kind"] == kind
    check_answers(again, points, live, rng)
    again.insert(len(points), (0.5, 0.5))
    live.add(len(points))
    points = np.vstack([points, [0.5, 0.5]])
    check_answers(again, points, live, rng)


@pytest.mark.parametrize("kind", ["grid", "gffm", "lbgrid", "xbr"])
def test_point_kinds_refuse_boxes(kind):
    idx = make(kind, None)
    with pytest.raises(RTreeError, match="point"):
        idx.insert(1, (1, 1, 2, 2))


@pytest.mark.parametrize("kind", ["grid", "gffm", "lbgrid"])
def test_grid_files_refuse_a_store_a_bulk_load_and_a_missing_domain(kind, tmp_path):
    with pytest.raises(RTreeError, match="store"):
        make(kind, None, store="efind")
    with pytest.raises(RTreeError, match="hilbert_domain"):
        geoflash.Index(kind=kind)
    with pytest.raises(RTreeError, match="build it by insertion"):
        geoflash.Index(((i, (i, i, i, i), None) for i in range(10)), kind=kind)
    # Their own keys are taken (and refused on the trees).
    idx = make(kind, tmp_path / "q", grid_queries="batched", grid_cold_pages=8)
    idx.insert(1, (3, 4))
    assert list(idx.intersection((0, 0, 10, 10))) == [1]
    with pytest.raises(RTreeError, match="grid"):
        geoflash.Index(kind="rstar", grid_queries="batched")


def test_hgrid_needs_a_hybrid_device(tmp_path):
    with pytest.raises(RTreeError, match="hybrid"):
        geoflash.Index(str(tmp_path / "h"), kind="hgrid", hilbert_domain=DOMAIN, device="file")


@pytest.mark.parametrize("store", [None, "plain"])
def test_fortree_answers_as_a_scan(store, tmp_path):
    rng = np.random.default_rng(3)
    lo = np.floor(rng.uniform(0, 95, size=(800, 2)))
    boxes = np.hstack([lo, lo + np.floor(rng.uniform(0, 5, size=(800, 2)))])
    idx = geoflash.Index(str(tmp_path / "f"), kind="fortree", store=store, page_size=1024)
    for i, b in enumerate(boxes):
        idx.insert(i, tuple(b))
    for _ in range(20):
        x, y = rng.uniform(0, 90, size=2)
        w = (x, y, x + 10, y + 10)
        want = [
            i
            for i, b in enumerate(boxes)
            if b[0] <= w[2] and w[0] <= b[2] and b[1] <= w[3] and w[1] <= b[3]
        ]
        assert sorted(idx.intersection(w)) == want
        assert idx.count(w) == len(want)
    assert idx.bounds == [*boxes[:, :2].min(axis=0), *boxes[:, 2:].max(axis=0)]
    idx.close()
    again = geoflash.Index(str(tmp_path / "f"))
    assert again.manifest["kind"] == "fortree"
    assert len(again) == len(boxes)


def test_fortree_refuses_a_logged_store(tmp_path):
    with pytest.raises(RTreeError, match="plain store"):
        geoflash.Index(str(tmp_path / "f"), kind="fortree", store="efind")


def test_kinds_and_defaults_come_from_the_engine(tmp_path):
    """The kind names and the defaults of a new index are the engine's: an
    index in memory gets the memory store on ``mem:`` (the plain store
    with ``DEFAULTS["memory_buffer"]`` when given a buffer policy, and with
    the buffer given), one on disk eFIND with ``DEFAULTS["buffer"]``; a
    FOR-tree and a grid file keep the plain store either way; every name
    of ``KINDS`` makes an index."""
    assert set(geoflash.GRID_KINDS) == {"grid", "gffm", "lbgrid", "hgrid"}
    assert set(geoflash.GRID_KINDS) < set(geoflash.KINDS)
    assert {"rtree", "rstar", "hilbert", "fortree", "xbr", "shrtree"} < set(geoflash.KINDS)
    size = geoflash.parse_size
    d = geoflash.DEFAULTS
    m = geoflash.Index().manifest
    assert (m["store"], m["device"]) == ({"kind": d["memory_store"]}, d["memory_device"])
    assert d["memory_store"] == "memory"
    m = geoflash.Index(buffer_policy="lru").manifest
    assert (m["store"]["kind"], m["store"]["buffer_bytes"], m["device"]) == (
        "plain", size(d["memory_buffer"]), d["memory_device"])
    m = geoflash.Index(buffer="64KiB").manifest
    assert (m["store"]["kind"], m["store"]["buffer_bytes"]) == ("plain", 65536)
    with pytest.raises(ValueError, match="memory"):
        geoflash.Index(str(tmp_path / "m"), store="memory")
    m = geoflash.Index(str(tmp_path / "disk")).manifest
    assert (m["store"]["kind"], m["store"]["buffer_bytes"]) == ("efind", size(d["buffer"]))
    assert m["device"].startswith(d["device"])  # the manifest names the I/O engine too
    for path in (None, tmp_path / "f"):
        m = geoflash.Index(path and str(path), kind="fortree").manifest
        assert (m["kind"], m["store"]["kind"]) == ("fortree", "plain")
    m = make("gffm", None).manifest
    assert (m["kind"], m["store"]["kind"]) == ("gffm", "plain")
    for kind in geoflash.KINDS:
        kw = {"device": "hybrid:fast=(mem:);slow=(mem:)"} if kind in ("hgrid", "shrtree") else {}
        idx = geoflash.Index(kind=kind, hilbert_domain=DOMAIN, **kw)
        idx.insert(1, (3, 4))
        assert list(idx.intersection((0, 0, 10, 10))) == [1], kind


def test_settings_lists_every_keyword_of_a_new_index_with_its_help():
    """``geoflash.SETTINGS`` is the engine's table: each key is a keyword
    ``Index`` takes (a value it cannot take is refused naming that key), an
    unknown keyword is refused listing them, and a setting added to the
    table, ``temporal_queues``, reaches the store without a change here."""
    s = geoflash.SETTINGS
    assert {"kind", "store", "buffer", "flush_percent", "temporal_queues"} <= set(s)
    assert all(isinstance(v, str) and v for v in s.values())
    assert "durability group" in s["group_commit"]  # keys spelled as keys
    for key in s:
        if key in ("crs", "units"):
            continue  # free text
        with pytest.raises(ValueError, match=key):
            geoflash.Index(**{key: "%%"})
    with pytest.raises(ValueError, match="temporal_queues"):
        geoflash.Index(colour="red")
    m = geoflash.Index(store="efind", buffer="1MiB", temporal_queues=8).manifest
    tc = m["store"]["efind"]["temporal_control"]
    assert (tc["rq_capacity"], tc["wq_capacity"]) == (8, 8)
