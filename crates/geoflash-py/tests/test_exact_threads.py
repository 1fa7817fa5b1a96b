"""Exact queries (``query`` with a predicate, ``query_nearest``,
``nearest`` of a geometry) from several threads while another thread
changes the index.

Found by a review: the exact geometries are read once and cached until the
index changes, and a reader that had read them before another thread's
change stored them after it, so the cache stayed stale for good (every
later ``query_nearest`` failed with "no geometry for entry 5000", and an
entry moved by ``update`` would have been refined at its old box); while
the writer ran, about a third of the readers' calls failed the same way.
"""

import threading
import time

import numpy as np
import pytest

shapely = pytest.importorskip("shapely")

import geoflash  # noqa: E402


def _writer(idx, points, boxes):
    """Inserts boxes without geometry (ids 5000 + i), moves some of them
    with ``update``, and deletes some rows' points (their entries hold the
    geometry); ``boxes`` and ``points`` end as the index's final state."""
    for i in range(600):
        b = (float(i % 90), 1.0 + i % 7, float(i % 90) + 1.5, 2.5 + i % 7)
        idx.insert(5000 + i, b)
        boxes[5000 + i] = b
        if i % 3 == 2:
            j = 5000 + i // 2
            moved = (boxes[j][0] + 3.0, boxes[j][1] + 40.0, boxes[j][2] + 3.0, boxes[j][3] + 40.0)
            idx.update(j, moved)
            boxes[j] = moved
        if i % 4 == 0:
            row = 4 * i
            idx.delete(row, points[row].bounds)
            del points[row]
        time.sleep(0.0002)  # the readers run between the changes


@pytest.mark.parametrize("where", ["memory", "directory"])
def test_exact_queries_while_another_thread_writes(tmp_path, where):
    rng = np.random.default_rng(1)
    geoms = shapely.points(rng.uniform(0, 100, (2400, 2)))
    idx = geoflash.Index.from_geoseries(geoms, None if where == "memory" else str(tmp_path / "t"))
    points = dict(enumerate(geoms))
    boxes = {}
    errors = []

    def reader(seed):
        r = np.random.default_rng(seed)
        for _ in range(100):
            try:
                x, y = r.uniform(0, 100, 2)
                idx.query_nearest(shapely.Point(x, y))
                idx.query(shapely.box(x, y, x + 8, y + 8), predicate="intersects")
                list(idx.nearest(shapely.box(1, 1, 3, 3), 3))
            except Exception as e:  # every error is a failure of the test
                errors.append(repr(e))

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(3)]
    threads.append(threading.Thread(target=_writer, args=(idx, points, boxes)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # the final state, as STRtree sees it
    ids = np.array(list(points) + list(boxes), dtype=np.int64)
    tree = shapely.STRtree(np.array(list(points.values()) + [shapely.box(*b) for b in boxes.values()], dtype=object))
    inputs = shapely.points(np.random.default_rng(2).uniform(0, 100, (300, 2)))
    windows = shapely.box(*np.hstack([shapely.get_coordinates(inputs), shapely.get_coordinates(inputs) + 6]).T)
    got = idx.query_nearest(inputs)
    want = tree.query_nearest(inputs)
    assert sorted(zip(got[0].tolist(), got[1].tolist())) == sorted(zip(want[0].tolist(), ids[want[1]].tolist()))
    got = idx.query(windows, predicate="intersects")
    want = tree.query(windows, predicate="intersects")
    assert sorted(zip(got[0].tolist(), got[1].tolist())) == sorted(zip(want[0].tolist(), ids[want[1]].tolist()))
    idx.close()


def test_changes_held_back_wait_and_resume():
    """``Core.hold_changes`` makes a change from another thread wait until
    ``release_changes``; the holding thread's own reads go on."""
    idx = geoflash.Index.from_geoseries(shapely.points(np.arange(10.0), np.zeros(10)))
    done = threading.Event()
    idx._core.hold_changes()
    writer = threading.Thread(target=lambda: (idx.insert(99, (5.0, 5.0, 6.0, 6.0)), done.set()))
    writer.start()
    assert not done.wait(0.3)  # held back (a bound, not a measure)
    assert len(idx) == 10 and idx.query_nearest(shapely.Point(5, 5)).tolist() == [5]
    idx._core.release_changes()
    writer.join()
    assert done.is_set() and len(idx) == 11
    idx.close()


def test_the_geometries_are_kept_across_batches_and_checkpoints_not_changes(tmp_path):
    """Batches and checkpoints change no entry: the exact geometries read
    for one query serve the next (reading them is O(n)); an insert, a
    delete or an update makes the next query read them again."""
    geoms = shapely.points(np.arange(50.0), np.zeros(50))
    idx = geoflash.Index.from_geoseries(geoms, str(tmp_path / "t"))
    idx.query_nearest(shapely.Point(3, 1))
    kept = idx._exact
    with idx.batch():
        pass
    idx.checkpoint()
    assert idx.query_nearest(shapely.Point(3, 1)).tolist() == [3] and idx._exact is kept
    for change in (
        lambda: idx.insert(100, (3.0, 0.5, 3.0, 0.5)),
        lambda: idx.update(100, (60.0, 0.0, 60.0, 0.0)),
        lambda: idx.delete(100, (60.0, 0.0, 60.0, 0.0)),
    ):
        change()
        idx.query_nearest(shapely.Point(3, 1))
        assert idx._exact is not kept
        kept = idx._exact
    assert idx.query_nearest(shapely.Point(3, 1)).tolist() == [3]
    idx.close()
