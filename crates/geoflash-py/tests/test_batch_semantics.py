"""``Index.batch()`` with threads, read-only indexes and ``close()``, and
``RtreeContainer.delete`` of a box the object does not have (mends from a
review: a change from another thread was taken into the open batch and not
durable when it returned; a read-only plain index opened a batch; closing
inside a batch made its end raise; a delete that deleted nothing still
counted the object down)."""

import signal
import subprocess
import sys
import textwrap
import pytest

import geoflash


# The stores whose single operations are durable by themselves (`sync`).
@pytest.mark.parametrize("store", ["efind", "fast"])
def test_a_change_from_another_thread_waits_for_the_open_batch_and_is_durable(tmp_path, store):
    path = str(tmp_path / "i")
    # The batch's thread stays inside its batch until told; the main
    # thread's `sync` insert must wait for the batch to end, then be
    # durable on its own: a SIGKILL right after it returns keeps it.
    script = textwrap.dedent(
        f"""
        import os, signal, threading, time, geoflash
        idx = geoflash.Index({path!r}, store={store!r}, durability="sync")
        idx.insert(1, (0, 0, 1, 1), obj="one")
        inside, release = threading.Event(), threading.Event()
        def batch():
            with idx.batch():
                idx.insert(2, (2, 2, 3, 3), obj="two")
                inside.set()
                release.wait()
        t = threading.Thread(target=batch)
        t.start()
        inside.wait()
        threading.Timer(0.3, release.set).start()
        start = time.monotonic()
        idx.insert(3, (4, 4, 5, 5), obj="three")
        waited = time.monotonic() - start
        print("waited", waited, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == -signal.SIGKILL, out.stderr
    waited = float(out.stdout.split()[1])
    assert waited >= 0.25, f"the insert did not wait for the batch: {waited:.3f} s"
    idx = geoflash.Index(path, readonly=True)
    found = sorted((it.id, it.object) for it in idx.intersection((-1, -1, 10, 10), objects=True))
    assert (3, "three") in found, found
    idx.close()


def test_a_read_only_index_refuses_a_batch(tmp_path):
    path = str(tmp_path / "p")
    idx = geoflash.Index(path, store="plain")
    idx.insert(1, (0, 0, 1, 1))
    idx.close()
    ro = geoflash.Index(path, readonly=True)
    with pytest.raises(geoflash.RTreeError, match="read-only"):
        with ro.batch():
            pass
    ro.close()


def test_closing_inside_a_batch_keeps_its_changes_and_the_bodys_error(tmp_path):
    path = str(tmp_path / "c")
    idx = geoflash.Index(path)
    with pytest.raises(KeyError, match="the body's own"):
        with idx.batch():
            idx.insert(1, (0, 0, 1, 1))
            idx.close()
            raise KeyError("the body's own")
    idx = geoflash.Index(path)
    assert list(idx.intersection((-1, -1, 2, 2))) == [1]
    with idx.batch():
        idx.insert(2, (2, 2, 3, 3))
        idx.close()
    idx = geoflash.Index(path, readonly=True)
    assert sorted(idx.intersection((-1, -1, 5, 5))) == [1, 2]
    idx.close()


def test_a_container_delete_at_a_box_the_object_does_not_have_changes_nothing():
    c = geoflash.RtreeContainer()
    a, b = object(), object()
    c.insert(a, (0, 0, 1, 1))
    c.insert(b, (5, 5, 6, 6))
    c.delete(a, (10, 10, 11, 11))  # not a's box: nothing deleted
    assert list(c.intersection((-1, -1, 2, 2))) == [a]
    c.delete(a, (0, 0, 1, 1))
    assert list(c.intersection((-1, -1, 2, 2))) == []
    assert list(c.intersection((4, 4, 7, 7))) == [b]
    with pytest.raises(IndexError):
        c.delete(a, (0, 0, 1, 1))
