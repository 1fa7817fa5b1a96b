"""Bad input raises RTreeError (a ValueError), device trouble DeviceError (an
OSError), damaged data CorruptIndexError (an OSError), all of them
GeoflashErrors; stats, flushing and threads."""

import os
import shutil
import threading

import numpy as np
import pytest

import geoflash
from conftest import random_boxes

NAN = float("nan")


@pytest.mark.parametrize("coords", [
    (NAN, 0, 1, 1), (2, 0, 1, 1), (0, 2, 1, 1), (1, 2, 3), (), ("a", 0, 1, 1), None,
])
def test_bad_coordinates(coords):
    idx = geoflash.Index()
    for call in (lambda: idx.insert(1, coords), lambda: list(idx.intersection(coords)),
                 lambda: idx.count(coords), lambda: list(idx.nearest(coords)),
                 lambda: idx.delete(1, coords)):
        with pytest.raises(geoflash.RTreeError):
            call()
    assert len(idx) == 0


_NOT_COORDINATES = {
    "str": lambda: "1234", "str-point": lambda: "12", "bytes": lambda: b"ab", "bytes-box": lambda: b"abcd",
    "bytearray": lambda: bytearray(b"ab"), "memoryview": lambda: memoryview(b"abcd"),
    "tuple-of-str": lambda: ("1", "2", "3", "4"), "list-with-str": lambda: ["1", 2],
    "tuple-with-bytes": lambda: (b"1", 2, 3, 4), "list-with-bytearray": lambda: [0, 0, bytearray(b"1"), 1],
    "numpy-str": lambda: (np.str_("1"), 2, 3, 4), "numpy-str-array": lambda: np.array(["1", "2", "3", "4"]),
    "iterator-of-str": lambda: iter(["0", "0", "1", "1"]), "none-item": lambda: (None, 1, 2, 3),
    "object-item": lambda: [object(), 1], "none": lambda: None, "int": lambda: 5,
}


@pytest.mark.parametrize("make", list(_NOT_COORDINATES.values()), ids=list(_NOT_COORDINATES))
@pytest.mark.parametrize("interleaved", [True, False])
def test_text_and_bytes_are_not_coordinates(make, interleaved):
    """Strings are never parsed as numbers and bytes never read as their
    byte values (``b"ab"`` was the point (97, 98)): coordinates that are
    not a sequence of real numbers raise InvalidCoordinatesError, a
    TypeError (as rtree's) and an RTreeError, naming the argument, on
    every way in."""
    idx = geoflash.Index(interleaved=interleaved)
    idx.insert(1, (0, 0, 1, 1))
    for call in (
        lambda c: idx.insert(2, c), lambda c: idx.insert(2, c, obj="x"),
        lambda c: idx.add(2, c), lambda c: list(idx.intersection(c)),
        lambda c: list(idx.contains(c)), lambda c: idx.count(c),
        lambda c: list(idx.nearest(c)), lambda c: list(idx.nearest(c, 0)),
        lambda c: idx.delete(1, c), lambda c: idx.update(1, c),
        lambda c: geoflash.Index([(2, c, None)], interleaved=interleaved),
    ):
        with pytest.raises(TypeError, match="coordinates") as e:
            call(make())
        assert isinstance(e.value, geoflash.InvalidCoordinatesError)
        assert isinstance(e.value, geoflash.RTreeError)
    assert len(idx) == 1 and list(idx.intersection((0, 0, 1, 1))) == [1]


def test_every_kind_of_real_number_is_a_coordinate():
    """What is a number stays one: ints, bools, NumPy scalars and arrays,
    Decimal, Fraction, anything with ``__float__`` or ``__index__``, in a
    list, a tuple or any other sequence or iterable."""
    from decimal import Decimal
    from fractions import Fraction

    class Index:  # only __index__, as float() takes since Python 3.8
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    forms = [
        lambda: (0, 0, 1, 1), lambda: [0.0, 0.0, 1.0, 1.0], lambda: (False, False, True, True),
        lambda: (np.int64(0), np.float32(0), np.uint8(1), np.float64(1)), lambda: np.array([0, 0, 1, 1]),
        lambda: np.array([0.0, 0.0, 1.0, 1.0], dtype=np.float32),
        lambda: (Decimal(0), Decimal("0.0"), Fraction(1), 1), lambda: (Index(0), Index(0), Index(1), Index(1)),
        lambda: iter([0, 0, 1, 1]), lambda: (np.array(0.0), 0, 1, 1), lambda: range(0, 2),
    ]
    for form in forms:
        idx = geoflash.Index()
        idx.insert(1, form())
        idx.insert(2, form(), obj="x")
        assert sorted(idx.intersection(form())) == [1, 2], form()
        assert idx.count(form()) == 2 and sorted(idx.nearest(form())) == [1, 2]
        assert idx.bounds in ([0, 0, 1, 1], [0, 1, 0, 1]), form()
    idx = geoflash.Index()
    idx.insert(1, (Fraction(1, 2), Decimal("0.25")))  # a point
    assert idx.bounds == [0.5, 0.25, 0.5, 0.25]


def test_a_second_open_in_this_process_names_this_process_and_the_path(tmp_path):
    """A directory open for writing in this process (created, bulk-loaded
    or opened) refuses a second geoflash.Index(path), read-only too, and
    overwrite=True, saying this process holds it and naming the path; it
    used to blame "another process" for an index this process created (the
    engine took its lock on the build's staging directory, renamed since).
    One opened read-only refuses a writer the same way, and takes more
    readers. Another process's lock is still another process's."""
    import subprocess
    import sys

    makers = {
        "created": lambda p: geoflash.Index(p),
        "bulk-loaded": lambda p: geoflash.Index.from_arrays(None, np.zeros((3, 4)), p),
        "stream-loaded": lambda p: geoflash.Index(p, [(1, (0, 0, 1, 1), None)], store="plain"),
        "opened": lambda p: (geoflash.Index(p).close(), geoflash.Index(p))[1],
    }
    for how, make in makers.items():
        path = str(tmp_path / how)
        first = make(path)
        for kw in ({}, {"readonly": True}, {"overwrite": True}):
            with pytest.raises(geoflash.RTreeError) as e:
                geoflash.Index(path, **kw)
            msg = str(e.value)
            assert path in msg and "this process, which already has it open for writing" in msg, (how, kw, msg)
            assert "another process" not in msg
        first.close()
        geoflash.Index(path).close()  # free once closed
        reader = geoflash.Index(path, readonly=True)
        geoflash.Index(path, readonly=True).close()  # readers share it
        for kw in ({}, {"overwrite": True}):
            with pytest.raises(geoflash.RTreeError, match="this process, which has it open read-only") as e:
                geoflash.Index(path, **kw)
            assert path in str(e.value) and "another process" not in str(e.value)
        reader.close()
    # Held by another process: that process is blamed.
    path = str(tmp_path / "created")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, geoflash; i = geoflash.Index(sys.argv[1]); print('ready', flush=True); sys.stdin.read()", path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(geoflash.RTreeError, match="another process") as e:
            geoflash.Index(path)
        assert "this process" not in str(e.value)
    finally:
        holder.communicate("", timeout=60)


@pytest.mark.parametrize("coords", [(0, 0, float("inf"), 1), (0, 0, 1e300, 1), (-1e151, 0, 0, 0)])
def test_boxes_beyond_the_range_are_windows_not_entries(coords):
    """Stored boxes stay finite (magnitude at most 1e150); query windows may
    reach beyond, and no entry has such a box to delete."""
    idx = geoflash.Index()
    idx.insert(1, (0, 0, 1, 1))
    with pytest.raises(geoflash.RTreeError, match="not finite or exceeds"):
        idx.insert(2, coords)
    assert list(idx.intersection(coords)) == [1]
    assert idx.count(coords) == 1 and list(idx.nearest(coords)) == [1]
    idx.delete(1, coords)
    assert len(idx) == 1


def test_bad_ids_and_counts():
    idx = geoflash.Index()
    for bad in (1.5, "7", None):
        with pytest.raises(ValueError, match="integer"):
            idx.insert(bad, (0, 0, 1, 1))
    with pytest.raises(ValueError, match="num_results"):
        list(idx.nearest((0, 0), 1.5))
    idx.insert(np.int64(3), (0, 0, 1, 1))  # NumPy integers are ids
    assert list(idx.intersection((0, 0, 1, 1))) == [3]


def test_ids_beyond_int64_are_refused_naming_the_id():
    """Issue 44, item 13: a NumPy uint64 id of 2**64 - 1 used to come back
    as -1; every way in refuses an id outside int64 with an OverflowError
    naming it, and the int64 extremes round-trip."""
    big = 2**64 - 1
    boxes = np.array([[0, 0, 1, 1], [2, 2, 3, 3]], dtype=np.float64)
    with pytest.raises(OverflowError, match=f"id {big} \\(position 1\\)"):
        geoflash.Index.from_arrays(np.array([5, big], dtype=np.uint64), boxes)
    with pytest.raises(OverflowError, match=f"id {2**64}"):
        geoflash.Index.from_arrays(np.array([5, 2**64], dtype=object), boxes)
    with pytest.raises(OverflowError, match=f"id {2**63} \\(position 0\\)"):
        geoflash.Index((np.array([2**63, 1], dtype=np.uint64), boxes[:, :2], boxes[:, 2:]))
    with pytest.raises(OverflowError, match=f"id {big}"):
        geoflash.Index([(big, (0, 0, 1, 1), None)])
    idx = geoflash.Index()
    for bad in (np.uint64(big), big, 2**63, -(2**63) - 1):
        with pytest.raises(OverflowError, match=f"id {int(bad)}"):
            idx.insert(bad, (0, 0, 1, 1))
        with pytest.raises(OverflowError, match=f"id {int(bad)}"):
            idx.insert(bad, (0, 0, 1, 1), obj="x")
        with pytest.raises(OverflowError, match=f"id {int(bad)}"):
            idx.delete(bad, (0, 0, 1, 1))
    assert len(idx) == 0
    # uint64 ids within int64 and the int64 extremes come back as given.
    ok = geoflash.Index.from_arrays(np.array([2**63 - 1, 7], dtype=np.uint64), boxes)
    assert sorted(ok.intersection((0, 0, 3, 3))) == [7, 2**63 - 1]
    idx.insert(-(2**63), (0, 0, 1, 1))
    idx.insert(np.uint64(2**63 - 1), (2, 2, 3, 3))
    assert sorted(idx.intersection((0, 0, 3, 3))) == [-(2**63), 2**63 - 1]


@pytest.mark.parametrize("ids,boxes,match", [
    (None, np.zeros((3, 3)), "N×4"),
    (None, np.zeros(4), "N×4"),
    (None, np.array([["a", "b", "c", "d"]]), "real numbers"),
    (None, np.zeros((2, 4), dtype=complex), "real numbers"),
    (np.arange(3), np.zeros((2, 4)), "1-D array of 2"),
    (np.array([0.5, 1.5]), np.zeros((2, 4)), "integers"),
    (None, np.array([[0, 0, 1, 1], [0, NAN, 1, 1]]), "row 1"),
    (None, np.array([[0, 0, 1, 1], [3, 0, 1, 1]]), "row 1.*inverted"),
])
def test_bad_arrays(ids, boxes, match):
    with pytest.raises(ValueError, match=match):
        geoflash.Index.from_arrays(ids, boxes)
    idx = geoflash.Index.from_arrays(None, np.zeros((1, 4)))
    if ids is None:
        with pytest.raises(ValueError, match=match):
            idx.intersection_batch(boxes)
    with pytest.raises(ValueError, match="predicate"):
        idx.intersection_batch(np.zeros((1, 4)), predicate="overlaps")


@pytest.mark.parametrize("kw,match", [
    ({"store": "tape"}, "unknown store"),
    ({"kind": "quadtree"}, "unknown index kind"),
    ({"split": "random"}, "unknown split"),
    ({"buffer": "12XB"}, "unknown unit"),
    ({"page_size": 3000}, "power of two"),
    ({"device": "tape:"}, "unknown device"),
    ({"durability": "sometimes"}, "durability"),
    ({"colour": "red"}, "unknown index option"),
    ({"store": "plain", "flush_percent": 10}, "applies to store"),
    ({"flush_policy": "lifo"}, "flush policy"),
    ({"read_buffer_percent": 100}, "exceeds 99"),
    ({"buffer_policy": "mru"}, "buffer policy"),
])
def test_bad_options(kw, match):
    with pytest.raises(ValueError, match=match):
        geoflash.Index(**kw)


def test_closed_index_and_misuse(tmp_path):
    idx = geoflash.Index(str(tmp_path / "c"))
    idx.insert(1, (0, 0, 1, 1))
    idx.close()
    idx.close()  # closing twice is harmless
    for call in (lambda: idx.insert(2, (0, 0, 1, 1)), lambda: list(idx.intersection((0, 0, 1, 1))),
                 lambda: len(idx), lambda: idx.bounds, lambda: idx.stats, lambda: idx.flush(),
                 lambda: idx.intersection_batch(np.zeros((1, 4)))):
        with pytest.raises(ValueError, match="closed"):
            call()
    assert repr(idx) == "geoflash.Index(closed)"
    with pytest.raises(ValueError, match="already holds an index"):
        geoflash.Index(str(tmp_path / "c"), iter([(1, (0, 0, 1, 1), None)]))
    with pytest.raises(ValueError, match="already holds an index"):
        geoflash.Index.from_arrays(None, np.zeros((1, 4)), str(tmp_path / "c"))
    with pytest.raises(ValueError, match="no index to open read-only"):
        geoflash.Index(str(tmp_path / "nothing"), readonly=True)
    with pytest.raises(ValueError, match="triple"):
        geoflash.Index(iter([(1, (0, 0, 1, 1))]))
    with pytest.raises(ValueError, match="at most two"):
        geoflash.Index(None, [], 3)
    with pytest.raises(ValueError, match="device other than"):
        geoflash.Index(device="file")


def test_device_errors_are_oserrors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(OSError) as e:
        geoflash.Index(str(blocker / "idx"))
    assert not isinstance(e.value, geoflash.CorruptIndexError)
    assert e.value.errno is not None  # the OS error number is kept (NotADirectoryError here)


def _built(tmp_path, name="d", n=300, **kw):
    path = str(tmp_path / name)
    idx = geoflash.Index(path, page_size=512, device="file?direct=false", **kw)
    for i, b in enumerate(random_boxes(np.random.default_rng(0), n)):
        idx.insert(i % 50, tuple(b), obj=i)
    idx.close()
    return path


def test_corrupt_id_map_and_pages(tmp_path):
    path = _built(tmp_path)
    records = os.path.join(path, "pyrecords.dat")
    data = bytearray(open(records, "rb").read())
    data[40] ^= 0xFF
    open(records, "wb").write(bytes(data))
    with pytest.raises(geoflash.CorruptIndexError, match="checksum"):
        geoflash.Index(path)
    assert issubclass(geoflash.CorruptIndexError, OSError)

    path = _built(tmp_path, "p", store="plain")
    pages = os.path.join(path, "pages.dat")
    size = os.path.getsize(pages)
    with open(pages, "r+b") as f:  # scramble every page but the header page
        for off in range(512, size, 512):
            f.seek(off + 40)
            f.write(b"\xA5" * 64)
    with pytest.raises(geoflash.CorruptIndexError):
        idx = geoflash.Index(path)
        list(idx.intersection((0, 0, 100, 100)))


def test_a_python_writer_killed_mid_stream_can_be_opened_again(tmp_path):
    """Issue 44, item 4 as found: a writer killed with SIGKILL after inserts
    past its last checkpoint; the next open recovers and repairs it, and
    readers see the result."""
    import signal
    import subprocess
    import sys

    path = _built(tmp_path)
    code = f"""
import os, signal, geoflash
idx = geoflash.Index({path!r})
for i in range(5000):
    idx.insert(10_000 + i, (i % 90, i % 70, i % 90 + 1, i % 70 + 1))
os.kill(os.getpid(), signal.SIGKILL)
"""
    r = subprocess.run([sys.executable, "-c", code])
    assert r.returncode == -signal.SIGKILL
    # The first writable open recovers both logs: the 300 entries built and
    # a prefix of the 5,000 inserts (what the store's group commit had made
    # durable; the id map's log holds every insert); readers then see it too.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        idx = geoflash.Index(path)
    rw = sorted(idx.intersection((-1e9, -1e9, 1e9, 1e9)))
    idx.close()
    built = [i for i in rw if i < 50]
    extra = [i for i in rw if i >= 10_000]
    assert len(built) == 300 and len(built) + len(extra) == len(rw)
    assert extra == list(range(10_000, 10_000 + len(extra)))
    with geoflash.Index(path, readonly=True) as idx:
        assert sorted(idx.intersection((-1e9, -1e9, 1e9, 1e9))) == rw


def test_index_built_without_python_is_read_by_record_key(tmp_path):
    """A directory without pyrecords.dat (built by the command line): ids are
    the record keys; deletes work, inserts are refused with a clear message.
    (The plain store: on eFIND and FAST the store's log names the map's
    snapshot, whose loss is damage.)"""
    path = _built(tmp_path, "cli", n=100, store="plain")
    ids = sorted(geoflash.Index(path).intersection((0, 0, 100, 100)))
    os.remove(os.path.join(path, "pyrecords.dat"))
    with geoflash.Index(path) as idx:
        keys = sorted(idx.intersection((0, 0, 100, 100)))
        assert keys == list(range(100)) and ids != keys
        with pytest.raises(ValueError, match="built outside Python"):
            idx.insert(5, (0, 0, 1, 1))
        box = next(it.bbox for it in idx.intersection((0, 0, 100, 100), objects=True) if it.id == 42)
        idx.delete(42, box)
        assert 42 not in set(idx.intersection((0, 0, 100, 100)))


def test_stats_flush_and_properties(tmp_path):
    idx = geoflash.Index(str(tmp_path / "s"), device="flashsim:preset=seed-tc58", page_size=2048)
    for i, b in enumerate(random_boxes(np.random.default_rng(1), 500)):
        idx.insert(i, tuple(b))
    idx.flush()
    s = idx.stats
    assert isinstance(s, dict) and s["device_simulated"] is True
    assert s["nand_programs"] > 0 and s["pages_written"] > 0
    p = idx.manifest
    assert p["page_size"] == 2048 and p["store"]["kind"] == "efind"
    assert p["device"].startswith("flashsim:")
    assert idx.path == str(tmp_path / "s")
    idx.checkpoint()
    idx.close()
    with geoflash.Index(str(tmp_path / "s")) as again:
        assert len(again) == 500


def test_durability_modes_build_the_same_index(tmp_path):
    rng = np.random.default_rng(2)
    boxes = random_boxes(rng, 300)
    answers = []
    for mode in ("sync", "group", "group:8,5", "none"):
        with geoflash.Index(str(tmp_path / mode.replace(":", "_").replace(",", "_")),
                            durability=mode, page_size=512, device="file?direct=false") as idx:
            assert idx.manifest["store"]["efind"]["durability"] is not None
            for i, b in enumerate(boxes):
                idx.insert(i, tuple(b))
            answers.append(sorted(idx.intersection((10, 10, 60, 60))))
    assert all(a == answers[0] for a in answers) and answers[0]


def test_a_batch_syncs_once_and_survives_a_reopen(tmp_path):
    boxes = random_boxes(np.random.default_rng(5), 2000)
    path = str(tmp_path / "b")
    idx = geoflash.Index(path, durability="sync", page_size=1024, device="file?direct=false")
    for i, b in enumerate(boxes[:100]):
        idx.insert(i, tuple(b))
    per_op = idx.stats["log_syncs"]
    assert per_op >= 100  # sync: one log sync per insertion
    with idx.batch():
        for i, b in enumerate(boxes[100:], start=100):
            idx.insert(i, tuple(b))
        in_batch = idx.stats["log_syncs"] - per_op
        with pytest.raises(ValueError, match="already open"):
            with idx.batch():
                pass
    assert in_batch < 50, in_batch  # 1,900 insertions, no sync of their own
    # A failing block: the error passes through, the mode is restored.
    with pytest.raises(RuntimeError, match="stop"):
        with idx.batch():
            idx.insert(5000, (0, 0, 1, 1))
            raise RuntimeError("stop")
    before = idx.stats["log_syncs"]
    idx.insert(5001, (0, 0, 1, 1))
    assert idx.stats["log_syncs"] > before  # `sync` again
    idx.close()
    with geoflash.Index(path) as again:
        assert len(again) == 2002
        assert sorted(again.intersection((0, 0, 1, 1))) == sorted(
            [i for i, b in enumerate(boxes) if b[0] <= 1 and b[1] <= 1] + [5000, 5001])


def test_a_batch_split_among_the_cores_answers_as_brute_force(tmp_path):
    """Enough windows for `intersection_batch` to share them among the
    process's cores (2,048 windows a thread): the answer of each window in
    its place, as brute force gives it, in memory and on disk."""
    rng = np.random.default_rng(21)
    boxes = random_boxes(rng, 3000, integer=False)
    windows = random_boxes(np.random.default_rng(22), 5000, max_size=20)
    for path in (None, str(tmp_path / "t")):
        idx = geoflash.Index.from_arrays(None, boxes, path, page_size=1024)
        offsets, ids = idx.intersection_batch(windows)
        assert len(offsets) == len(windows) + 1
        for j in range(0, len(windows), 7):
            w = windows[j]
            want = np.flatnonzero((boxes[:, 0] <= w[2]) & (boxes[:, 2] >= w[0])
                                  & (boxes[:, 1] <= w[3]) & (boxes[:, 3] >= w[1]))
            assert sorted(ids[offsets[j]:offsets[j + 1]].tolist()) == want.tolist(), j
        idx.close()


def test_queries_from_many_threads_agree_with_one(tmp_path):
    rng = np.random.default_rng(3)
    boxes = random_boxes(rng, 3000, integer=False)
    idx = geoflash.Index.from_arrays(None, boxes, str(tmp_path / "t"), page_size=1024)
    windows = random_boxes(np.random.default_rng(4), 200, max_size=20)
    want = idx.intersection_batch(windows)
    results = [None] * 4
    errors = []

    def run(k):
        try:
            results[k] = (idx.intersection_batch(windows),
                          [sorted(idx.intersection(tuple(w))) for w in windows[:50]])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for (offsets, ids), singles in results:
        assert offsets.tolist() == want[0].tolist() and ids.tolist() == want[1].tolist()
        for j, s in enumerate(singles):
            assert s == sorted(want[1][want[0][j]:want[0][j + 1]].tolist())
    idx.close()
    shutil.rmtree(tmp_path / "t")


def _subclasses_of_geoflash_error(module):
    """The exception classes ``module`` defines, each checked to derive from
    ``geoflash.GeoflashError``."""
    classes = [c for c in vars(module).values()
               if isinstance(c, type) and issubclass(c, BaseException) and c.__module__ == module.__name__]
    assert classes, module
    for c in classes:
        assert issubclass(c, geoflash.GeoflashError), c
    return classes


def test_every_geoflash_exception_derives_from_geoflash_error(tmp_path):
    """Issue 45, item 4: one base for every exception geoflash defines, and
    the exception of each kind of engine error is of its class."""
    assert {c.__name__ for c in _subclasses_of_geoflash_error(geoflash.exceptions)} >= {
        "GeoflashError", "RTreeError", "CorruptIndexError", "DeviceError", "ResultsStoreError"}
    for name in ("RTreeError", "CorruptIndexError", "DeviceError", "ResultsStoreError"):
        assert getattr(geoflash, name) is getattr(geoflash.exceptions, name)
    assert issubclass(geoflash.RTreeError, ValueError)
    assert issubclass(geoflash.ResultsStoreError, (OSError, ValueError))
    # Bad input (from the engine and from the Python layer).
    with pytest.raises(geoflash.GeoflashError) as e:
        geoflash.Index(store="tape")
    assert type(e.value) is geoflash.RTreeError
    with pytest.raises(geoflash.RTreeError):
        geoflash.Index().insert(1, (2, 0, 1, 1))
    # I/O: a DeviceError that is also the built-in class of its errno.
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(geoflash.DeviceError) as e:
        geoflash.Index(str(blocker / "idx"))
    assert isinstance(e.value, NotADirectoryError) and e.value.errno is not None
    # Damage.
    path = _built(tmp_path, "damaged")
    records = os.path.join(path, "pyrecords.dat")
    data = bytearray(open(records, "rb").read())
    data[40] ^= 0xFF
    open(records, "wb").write(bytes(data))
    with pytest.raises(geoflash.GeoflashError) as e:
        geoflash.Index(path)
    assert type(e.value) is geoflash.CorruptIndexError
    # The results database (from the engine, and from geoflash.bench.load).
    from geoflash import bench

    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database " * 100)
    workload = {"name": "w", "dataset": [{"name": "u", "generator": "uniform", "geometry": "box", "count": 50}],
                "index": [{"name": "r", "store": "plain", "device": "mem:"}], "step": [{"kind": "build"}]}
    with pytest.raises(geoflash.ResultsStoreError, match="junk.sqlite.*not a database"):
        bench.run(workload, junk, scale="smoke")
    with pytest.raises(geoflash.ResultsStoreError, match="junk.sqlite"):
        bench.load(junk)


def test_dask_exceptions_derive_from_geoflash_error():
    pytest.importorskip("dask")
    import geoflash.dask.catalogue
    import geoflash.dask.cluster

    assert geoflash.dask.catalogue.CatalogueError in _subclasses_of_geoflash_error(geoflash.dask.catalogue)
    assert geoflash.dask.cluster.WorkerSetupError in _subclasses_of_geoflash_error(geoflash.dask.cluster)
    assert issubclass(geoflash.dask.catalogue.CatalogueError, ValueError)
    assert issubclass(geoflash.dask.cluster.WorkerSetupError, RuntimeError)


def test_the_hierarchy_is_the_same_without_rtree():
    """With ``rtree`` unimportable, every class still derives from
    GeoflashError and RTreeError is still a ValueError: the same bases as
    with rtree installed (never rtree's own RTreeError)."""
    import subprocess
    import sys

    code = """
import sys
sys.modules["rtree"] = None  # import rtree fails
import geoflash
assert "rtree" not in [c.__module__.split(".")[0] for c in geoflash.RTreeError.__mro__]
print([c.__qualname__ for c in geoflash.InvalidIdError.__mro__])
for name in ("RTreeError", "CorruptIndexError", "DeviceError", "ResultsStoreError"):
    assert issubclass(getattr(geoflash, name), geoflash.GeoflashError), name
assert issubclass(geoflash.RTreeError, ValueError)
try:
    geoflash.Index(store="tape")
except geoflash.GeoflashError as e:
    assert type(e) is geoflash.RTreeError, type(e)
else:
    raise AssertionError("no error")
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    lines = out.stdout.split()
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr
    # the same classes in this process, where rtree may be installed
    assert out.stdout.strip().splitlines()[0] == str([c.__qualname__ for c in geoflash.InvalidIdError.__mro__]), lines
    assert "rtree" not in [c.__module__.split(".")[0] for c in geoflash.RTreeError.__mro__]


def _crc32c(data):
    """CRC-32C (Castagnoli) of `data`, as the engine's files use it."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def _newer_record_map(path):
    """pyrecords.dat as a newer build would write it: version 99 at byte 8,
    the CRC-32C of everything before it in the last four bytes."""
    data = bytearray(open(path, "rb").read())
    data[8:10] = (99).to_bytes(2, "little")
    data[-4:] = _crc32c(bytes(data[:-4])).to_bytes(4, "little")
    open(path, "wb").write(bytes(data))


def _newer_record_log(path):
    """pyrecords.log as a newer build would write it: version 99 at byte 8,
    the header's CRC-32C (of its first 28 bytes) at byte 28."""
    data = bytearray(open(path, "rb").read())
    data[8:10] = (99).to_bytes(2, "little")
    data[28:32] = _crc32c(bytes(data[:28])).to_bytes(4, "little")
    open(path, "wb").write(bytes(data))


def _newer_manifest(path):
    """manifest.json of format 99 (without its checksum, which is optional)."""
    import json

    m = json.load(open(path))
    m["format_version"] = 99
    m.pop("checksum", None)
    json.dump(m, open(path, "w"))


@pytest.mark.parametrize("name, forge, what, store", [
    ("pyrecords.dat", _newer_record_map, "record map", "efind"),
    ("pyrecords.dat", _newer_record_map, "record map", "plain"),
    ("pyrecords.log", _newer_record_log, "record-map log", "plain"),
    ("manifest.json", _newer_manifest, "manifest", "efind"),
])
def test_a_file_of_a_newer_format_is_refused_naming_it(tmp_path, name, forge, what, store):
    """Issue 45, item 4: a file written by a newer geoflash raises a
    GeoflashError (CorruptIndexError, the class of every file this build
    cannot read) naming the file, what carries the version and the version.
    (pyrecords.log is the map's own log of stores without one: plain.)"""
    path = _built(tmp_path, store=store)
    target = os.path.join(path, name)
    assert os.path.exists(target), os.listdir(path)
    forge(target)
    with pytest.raises(geoflash.GeoflashError) as e:
        geoflash.Index(path)
    assert isinstance(e.value, geoflash.CorruptIndexError)
    assert target in str(e.value) and f"{what} format version 99" in str(e.value), str(e.value)
