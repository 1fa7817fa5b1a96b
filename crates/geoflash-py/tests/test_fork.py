"""An index open for writing used across ``os.fork()`` (issue 44, item 5):
the child holds a copy of the parent's index, its directory lock included,
so only the process that opened it writes; the child's writes raise, and
its ``close()`` (or garbage collection) writes nothing, so the parent's
changes are never overwritten."""

import os

import pytest

import geoflash

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _in_child(idx, go, report):
    """The child: waits until the parent closed the index, tries every way
    of writing it, closes its copy and reports what each attempt raised."""
    os.read(go, 1)
    lines = []
    attempts = [
        ("insert", lambda: idx.insert(100_000, (0, 0, 1, 1))),
        ("delete", lambda: idx.delete(1, (1, 1, 2, 2))),
        ("flush", idx.flush),
        ("batch", lambda: idx.batch().__enter__()),
    ]
    for name, attempt in attempts:
        try:
            attempt()
            lines.append(f"{name}: no error")
        except Exception as e:  # noqa: BLE001 - reported to the parent
            lines.append(f"{name}: {type(e).__name__}: {e}")
    try:
        idx.close()
        lines.append("close: ok")
    except Exception as e:  # noqa: BLE001
        lines.append(f"close: {type(e).__name__}: {e}")
    os.write(report, "\n".join(lines).encode())


def test_a_forked_child_cannot_write_and_loses_none_of_the_parents_writes(tmp_path):
    path = str(tmp_path / "idx")
    idx = geoflash.Index(path)
    for i in range(1000):
        idx.insert(i, (i, i, i + 1, i + 1))
    idx.flush()
    go_r, go_w = os.pipe()
    rep_r, rep_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(go_w)
            os.close(rep_r)
            _in_child(idx, go_r, rep_w)
        finally:
            os._exit(0)
    os.close(go_r)
    os.close(rep_w)
    # The parent goes on writing, closes, then lets the child try.
    for i in range(1000, 3000):
        idx.insert(i, (i, i, i + 1, i + 1))
    idx.close()
    os.write(go_w, b"x")
    chunks = []
    while chunk := os.read(rep_r, 65536):
        chunks.append(chunk)
    os.waitpid(pid, 0)
    report = b"".join(chunks).decode()
    lines = dict(line.split(": ", 1) for line in report.splitlines())
    for name in ("insert", "delete", "flush", "batch"):
        msg = lines.get(name, "")
        assert msg.startswith("RTreeError"), report
        assert f"opened for writing by process {os.getpid()}" in msg, report
        assert "forked child" in msg and path in msg, report
    assert lines.get("close") == "ok", report
    again = geoflash.Index(path)
    assert len(again) == 3000
    assert sorted(again.intersection((-1, -1, 4000, 4000))) == list(range(3000))
    again.close()


def test_a_forked_childs_garbage_collection_writes_nothing(tmp_path):
    """The child drops its copy without close(): nothing is checkpointed."""
    path = str(tmp_path / "idx")
    idx = geoflash.Index(path)
    idx.insert(1, (0, 0, 1, 1))
    idx.flush()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(go_w)
            os.read(go_r, 1)
            try:
                idx.insert(2, (0, 0, 1, 1))
            except geoflash.RTreeError:
                pass
            del idx  # Core's drop: no checkpoint in the child
        finally:
            os._exit(0)
    os.close(go_r)
    for i in range(10, 2010):
        idx.insert(i, (i, i, i + 1, i + 1))
    idx.close()
    os.write(go_w, b"x")
    os.waitpid(pid, 0)
    again = geoflash.Index(path)
    assert len(again) == 2001
    again.close()


def test_an_index_in_memory_is_the_childs_own_copy():
    """An index without a directory is the child's own copy: it may write it."""
    idx = geoflash.Index()
    idx.insert(1, (0, 0, 1, 1))
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            idx.insert(2, (0, 0, 1, 1))
            code = 0 if len(idx) == 2 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(idx) == 1
