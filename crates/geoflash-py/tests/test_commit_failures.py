"""A commit that fails (a log write or sync refused by the device: ENOSPC,
EIO) leaves the index uncertain: the engine holds in memory changes its
log may not have, and the record map may disagree with the tree. The
index then answers nothing more, queries included, until it is closed and
opened again, and nothing acknowledged before or after is lost.

The failure is injected without privileges by ``RLIMIT_FSIZE``: a write
that would grow a file past the limit fails with EFBIG (``SIGXFSZ``
ignored), as a full file system fails it with ENOSPC. Each scenario runs in
a child process (the limit and the signal are the process's), which ends
with ``os._exit``: a crash, nothing more written."""
import errno
import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import geoflash

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ as Linux has them"
)

WORLD = (-1e9, -1e9, 1e9, 1e9)

# What every scenario shares: `fail_growing(name)` limits file sizes to
# that file's size (its next append fails), `attempt` records an outcome.
PRELUDE = """
import json, os, resource, signal, sys
import geoflash
path = sys.argv[1]
WORLD = (-1e9, -1e9, 1e9, 1e9)
out = {"acknowledged": []}
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
SOFT, HARD = resource.getrlimit(resource.RLIMIT_FSIZE)

def fail_growing(name):
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(os.path.join(path, name)), HARD))

def no_limit():
    resource.setrlimit(resource.RLIMIT_FSIZE, (SOFT, HARD))

def attempt(name, call):
    try:
        out[name] = ["ok", call()]
    except geoflash.GeoflashError as e:
        out[name] = [type(e).__name__, str(e)]
"""


def _run(tmp_path, body):
    path = str(tmp_path / "idx")
    code = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out), flush=True)\nos._exit(0)\n"
    done = subprocess.run(
        [sys.executable, "-c", code, path], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return path, json.loads(done.stdout.strip().splitlines()[-1])


def _durable_ids(path):
    """The ids the index in `path` holds once opened again (after a crash
    the open may warn that it reconciled the id map with the tree)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with geoflash.Index(path) as idx:
            return sorted(idx.intersection(WORLD))


def _refused(outcome):
    kind, message = outcome
    return kind == "DeviceError" and "close it (which writes nothing) and open the directory again" in message


def test_a_failed_batch_commit_on_the_plain_store_answers_nothing_until_reopened(tmp_path):
    """The plain store keeps the id map's changes in its own log
    (``pyrecords.log``), synced first at the end of a batch. When that
    write fails, the index used to answer queries with the batch (which a
    crash loses), let ``flush()`` start the map's log over, and then
    acknowledge later batches it never committed: the engine's batch had
    been left open, so the next one was nested in it and committed
    nothing, and a crash lost it."""
    path, out = _run(tmp_path, """
        idx = geoflash.Index(path, store="plain", page_size=512)
        for i in range(20):
            idx.insert(i, (i, i, i + 1, i + 1))
        idx.flush()
        out["acknowledged"] += list(range(20))
        try:
            with idx.batch():
                idx.insert(100, (0, 0, 1, 1))
                idx.insert(101, (0, 0, 1, 1))
                fail_growing("pyrecords.log")  # the commit's seal frame fails
            out["acknowledged"] += [100, 101]
        except geoflash.DeviceError as e:
            out["commit"] = [e.errno, str(e)]
        finally:
            no_limit()
        attempt("query", lambda: sorted(idx.intersection((0, 0, 1, 1))))
        attempt("len", lambda: len(idx))
        attempt("flush", idx.flush)
        def again():
            with idx.batch():
                idx.insert(200, (0, 0, 1, 1))
            out["acknowledged"].append(200)
        attempt("batch", again)
        attempt("repr", lambda: repr(idx))
    """)
    assert out["commit"][0] == errno.EFBIG and "pyrecords.log" in out["commit"][1], out
    for name in ("query", "len", "flush", "batch"):
        assert _refused(out[name]), (name, out[name])
        assert "pyrecords.log" in out[name][1]  # the failure it follows
    assert out["repr"][0] == "ok" and "failed" in out["repr"][1]
    # The crash kept every acknowledged entry; the failed batch may be there or not.
    ids = _durable_ids(path)
    acknowledged = out["acknowledged"]
    assert set(acknowledged) <= set(ids) <= set(acknowledged) | {100, 101}, (acknowledged, ids)


def test_a_failed_sync_insert_answers_nothing_and_reopens_in_this_process(tmp_path):
    """FAST with ``durability="sync"`` commits each insert in its log, with
    the id map's change. When the log write fails, the engine keeps the
    entry in memory but the map gave its key back: queries then raised
    CorruptIndexError ("the map is older than the index") instead of
    saying what happened. Now every call is refused naming the failure;
    ``close()`` releases the index without writing, and opening it again
    in this process recovers what is durable."""
    path, out = _run(tmp_path, """
        idx = geoflash.Index(path, store="fast", durability="sync", page_size=512)
        for i in range(20):
            idx.insert(i, (i, i, i + 1, i + 1))
        idx.flush()
        out["acknowledged"] += list(range(20))
        fail_growing("log.dat")
        try:
            for i in range(100, 20_000):
                out["failed_id"] = i
                idx.insert(i, (0, 0, 1, 1))
                out["acknowledged"].append(i)
        except geoflash.DeviceError as e:
            out["commit"] = [e.errno, str(e)]
        finally:
            no_limit()
        attempt("query", lambda: len(list(idx.intersection(WORLD))))
        attempt("count", lambda: idx.count((0, 0, 1, 1)))
        attempt("insert", lambda: idx.insert(out["failed_id"], (0, 0, 1, 1)))
        attempt("close", idx.close)
        def reopened():
            with geoflash.Index(path) as again:
                return sorted(again.intersection(WORLD))
        attempt("reopen", reopened)
    """)
    assert out["commit"][0] == errno.EFBIG and "log.dat" in out["commit"][1], out
    for name in ("query", "count", "insert"):
        assert _refused(out[name]), (name, out[name])
    assert out["close"] == ["ok", None]
    acknowledged, failed = out["acknowledged"], out["failed_id"]
    assert out["reopen"][0] == "ok", out["reopen"]
    ids = out["reopen"][1]
    assert set(acknowledged) <= set(ids) <= set(acknowledged) | {failed}
    assert len(ids) == len(set(ids))  # nothing applied twice
    assert ids == _durable_ids(path)


def test_a_batch_that_caught_the_failure_does_not_commit(tmp_path):
    """A block that catches the error of a failed change and goes on: the
    batch's end raises the refusal instead of committing, and the block's
    later changes are refused too."""
    path, out = _run(tmp_path, """
        idx = geoflash.Index(path, store="plain", page_size=512)
        idx.insert(1, (0, 0, 1, 1))
        idx.flush()
        out["acknowledged"].append(1)
        def batch():
            with idx.batch():
                idx.insert(2, (0, 0, 1, 1))
                fail_growing("pyrecords.log")  # the id map's next append fails
                try:
                    idx.insert(3, (0, 0, 1, 1))
                except geoflash.DeviceError as e:
                    out["failed"] = [e.errno, str(e)]
                finally:
                    no_limit()
                attempt("inside", lambda: idx.insert(4, (0, 0, 1, 1)))
            out["acknowledged"] += [2, 4]
        attempt("batch", batch)
    """)
    assert out["failed"][0] == errno.EFBIG, out
    assert _refused(out["inside"]) and _refused(out["batch"]), out
    assert set(_durable_ids(path)) <= {1, 2} and 1 in _durable_ids(path)


def test_a_failed_checkpoint_on_the_plain_store_reopens_the_last_commit_with_its_objects(tmp_path):
    """A checkpoint (``flush()``) of an index whose id map keeps its own
    log (the plain store) used to write the map's snapshot of the next
    generation and start its log over *before* the engine's checkpoint.
    When that checkpoint failed (or the process died in it), the next open
    found a snapshot ahead of the tree, with the log of its changes gone:
    the deletions the tree had not kept were brought back without their
    objects (``None`` instead of the stored object), or, when the open saw
    nothing to repair, the tree's entries were unknown to the map. Now the
    map's log is synced, the engine checkpoints, and only then is the
    snapshot written: the reopened index is the last commit, objects
    included, or the state the checkpoint was making durable."""
    path, out = _run(tmp_path, """
        idx = geoflash.Index(path, store="plain", page_size=512)
        for i in range(300):
            x, y = float(i % 20) * 5, float(i // 20) * 5
            idx.insert(i, (x, y, x + 1, y + 1), obj=("o", i) if i % 10 == 0 else None)
        idx.flush()
        for i in range(0, 300, 10):
            x, y = float(i % 20) * 5, float(i // 20) * 5
            idx.delete(i, (x, y, x + 1, y + 1))
        idx.insert(1000, (0.5, 0.5, 0.6, 0.6), obj="new")
        # Files may grow to 8 KiB: the id map's files fit, the engine's
        # checkpoint (its journal's images of 30 leaves) does not.
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, HARD))
        attempt("flush", idx.flush)
        no_limit()
    """)
    assert out["flush"][0] == "DeviceError" and "journal.dat" in out["flush"][1], out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with geoflash.Index(path) as idx:
            items = sorted(
                ((i.id, i.object) for i in idx.intersection(WORLD, objects=True)),
                key=lambda item: item[0],
            )
    committed = [(i, ("o", i) if i % 10 == 0 else None) for i in range(300)]
    checkpointed = [item for item in committed if item[0] % 10 != 0] + [(1000, "new")]
    assert items in (committed, checkpointed), [item for item in items if item[0] % 10 == 0][:5]


@pytest.mark.parametrize("store", ["plain", "efind"])
def test_a_bulk_load_whose_id_map_cannot_be_written_leaves_no_index_that_answers_other_ids(tmp_path, store):
    """A bulk load (``Index(path, stream)``) whose id map cannot be written
    (here it is larger than the files may grow; a full disk or a crash at
    that moment alike) raises and publishes nothing: the map is written
    in the build's staging directory, before the publish. (Before, the
    engine published the directory first: opened again, it had no
    ``pyrecords.dat`` and read as an index built outside Python, its record
    keys 0, 1, … standing for the ids, the objects gone.) It must be
    absent, or refused naming the map, never answer other ids."""
    path, out = _run(tmp_path, f"""
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, HARD))
        items = [(1000 + i, (i, i, i + 1, i + 1), b"x" * 10_000) for i in range(10)]
        attempt("build", lambda: geoflash.Index(path, iter(items), store={store!r}, page_size=512, buffer="64KiB") and None)
        no_limit()
    """)
    assert out["build"][0] == "DeviceError", out
    if not os.path.exists(os.path.join(path, "manifest.json")):
        return
    try:
        with geoflash.Index(path) as idx:
            ids = sorted(idx.intersection(WORLD))
    except geoflash.GeoflashError as e:
        assert "pyrecords" in str(e)
        return
    assert ids == list(range(1000, 1010)), ids
