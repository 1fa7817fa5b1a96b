"""The memory a range query's answer takes in Python: ``intersection`` and
``contains`` hold their answer as native int64 ids (8 bytes an entry
found) and make each ``int`` as it is yielded, so an answer over a large
index costs a few bytes a record, not a list of Python ints (40 bytes
each) beside the engine's hits (40 bytes each) as before.

Measured in a child process from its peak resident set (``VmHWM``, reset
through ``/proc/self/clear_refs``): Linux only, which CI is."""

import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    import geoflash

    def status(field):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise SystemExit(f"no {field} in /proc/self/status")

    n, path = int(sys.argv[1]), sys.argv[2]
    rng = np.random.default_rng(7)
    lo = rng.random((n, 2)) * 1000.0
    geoflash.Index.from_arrays(None, np.hstack([lo, lo + rng.random((n, 2))]), path=path).close()
    idx = geoflash.Index(path, buffer=4 << 20)
    world = (-1e9, -1e9, 1e9, 1e9)
    # every page read once: the read buffer at its budget before measuring
    assert idx.count(world) == n
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError as e:
        raise SystemExit(f"cannot reset the peak resident set: {e}")
    base = status("VmRSS")
    answer = idx.intersection(world)
    first = next(answer)
    held = status("VmHWM") - base
    rest = sorted([first, *answer])
    assert rest == list(range(n)), "wrong answer"
    print(held)
    """
)


@pytest.mark.skipif(
    not sys.platform.startswith("linux") and os.environ.get("CI") != "true",
    reason="reads /proc/self/status (Linux)",
)
def test_an_intersection_holds_its_answer_at_a_few_bytes_a_record(tmp_path):
    n = 300_000
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), str(tmp_path / "idx")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    held = int(out.stdout.split()[-1])
    # 8 bytes an id in the engine, 8 in the buffer Python iterates (with
    # the allocator's slack): 17 B measured; the list of ints beside the
    # engine's hits took about 48.
    assert held <= 24 * n, f"the answer took {held / n:.1f} bytes a record"


def test_a_large_answer_pages_as_a_small_one():
    """An answer over 4,096 ids (a buffer of int64) is paged by the
    result offset and limit as a list is (rtree 1.x's swapped names:
    ``set_result_offset`` sets the limit, ``set_result_limit`` the offset)."""
    import geoflash

    idx = geoflash.Index()
    for i in range(6000):
        idx.insert(i, (i % 97, i // 97, i % 97 + 0.5, i // 97 + 0.5))
    world = (-1e9, -1e9, 1e9, 1e9)
    full = list(idx.intersection(world))
    assert sorted(full) == list(range(6000))
    assert all(type(i) is int for i in full[:10])
    idx.set_result_offset(100)
    idx.set_result_limit(4500)
    assert list(idx.intersection(world)) == full[4500:4600]
    assert list(idx.contains(world)) == full[4500:4600]
