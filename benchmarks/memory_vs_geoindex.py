#!/usr/bin/env python3
"""In memory, one run: geoflash (`Index.from_arrays`, its defaults, or the
page sizes given) against geo-index (`geoindex_rs`) and rtree
(libspatialindex in memory) on N uniform boxes of side 0.001 in the unit
square: bulk load, 100 kNN (k = 10) one call per point and as one batch
(`nearest_batch`, rtree's `nearest_v`), 100 windows of 0.001/0.01/0.1 %
(geoflash's `intersection_batch` against geo-index's `search` per window)
and, per page size, the same through `intersection_batch`. Medians;
answers checked.

    .venv-peers/bin/python benchmarks/memory_vs_geoindex.py [--count 1000000] \
        [--page-sizes 2048,4096] [--reps 7]

Needs the release build of the Python package and the peers
(`make bench-peers` sets up .venv-peers).
"""
import argparse
import statistics
import time

import numpy as np
import rtree
from geoindex_rs import rtree as gi

import geoflash


def median_time(fn, reps):
    """Median wall time of `reps` calls of `fn`."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--page-sizes", default="", help="comma-separated page sizes for the per-page-size rows")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--k", type=int, default=10)
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    lo = rng.uniform(0, 1, (a.count, 2))
    boxes = np.hstack([lo, lo + 0.001])
    ids = np.arange(a.count, dtype=np.int64)
    pts = rng.uniform(0, 1, (100, 2))
    pts4 = np.hstack([pts, pts])
    k = a.k

    def gi_build():
        b = gi.RTreeBuilder(a.count)
        b.add(*[np.ascontiguousarray(boxes[:, i]) for i in range(4)])
        return b.finish()

    print(f"bulk load, {a.count} boxes: geoflash {median_time(lambda: geoflash.Index.from_arrays(ids, boxes), 5):.3f} s,"
          f" geo-index {median_time(gi_build, 5):.3f} s")
    g, t = geoflash.Index.from_arrays(ids, boxes), gi_build()
    r = rtree.index.Index(((int(i), tuple(b), None) for i, b in zip(ids, boxes)))
    rows = [
        ("geoflash nearest, a call per point", lambda: [list(g.nearest((x, y), k)) for x, y in pts.tolist()]),
        ("geoflash nearest_batch", lambda: g.nearest_batch(pts4, k)),
        ("geo-index neighbors, a call per point",
         lambda: [np.asarray(gi.neighbors(t, x, y, max_results=k)) for x, y in pts.tolist()]),
        ("rtree nearest_v", lambda: r.nearest_v(pts, pts, num_results=k)),
        ("rtree nearest, a call per point", lambda: [list(r.nearest((x, y, x, y), k)) for x, y in pts.tolist()]),
    ]
    for name, fn in rows:
        print(f"100 kNN (k={k}), {name}: {median_time(fn, 2 * a.reps + 1) * 1e3:.3f} ms")
    # The answers agree: geoflash's k nearest (ties included) hold geo-index's.
    offsets, found, _ = g.nearest_batch(pts4, k)
    for i, (x, y) in enumerate(pts.tolist()):
        theirs = set(np.asarray(gi.neighbors(t, x, y, max_results=k)).tolist())
        mine = set(found[offsets[i]:offsets[i + 1]].tolist())
        assert len(theirs) != k or theirs <= mine, f"point {i}: {sorted(theirs - mine)}"
    windows = {}
    for sel in (1e-5, 1e-4, 1e-3):
        side = np.sqrt(sel)
        c = rng.uniform(0, 1 - side, (100, 2))
        windows[sel] = np.hstack([c, c + side])
    gi_wins = [median_time(lambda: [np.asarray(gi.search(t, *row)) for row in w.tolist()], 2 * a.reps + 1)
               for w in windows.values()]
    g_wins = [median_time(lambda: g.intersection_batch(w), 2 * a.reps + 1) for w in windows.values()]
    print("100 windows 0.001/0.01/0.1 %: geoflash intersection_batch "
          + " / ".join(f"{x * 1e3:.3f}" for x in g_wins) + " ms, geo-index search, a call per window "
          + " / ".join(f"{x * 1e3:.3f}" for x in gi_wins) + " ms, ratio "
          + " / ".join(f"{x / y:.2f}" for x, y in zip(g_wins, gi_wins)))
    # The answers agree: the same ids per window.
    for w in windows.values():
        offsets, found = g.intersection_batch(w)
        for i, row in enumerate(w.tolist()):
            theirs = sorted(np.asarray(gi.search(t, *row)).tolist())
            assert sorted(found[offsets[i]:offsets[i + 1]].tolist()) == theirs, f"window {i}"
    for ps in [int(p) for p in a.page_sizes.split(",") if p]:
        build = median_time(lambda: geoflash.Index.from_arrays(ids, boxes, page_size=ps), 5)
        h = geoflash.Index.from_arrays(ids, boxes, page_size=ps)
        knn = median_time(lambda: h.nearest_batch(pts4, k), 2 * a.reps + 1)
        wins = [median_time(lambda: h.intersection_batch(w), 2 * a.reps + 1) for w in windows.values()]
        print(f"page {ps}: bulk {build:.3f} s, 100 kNN {knn * 1e3:.3f} ms, 100 windows 0.001/0.01/0.1 %: "
              + " / ".join(f"{w * 1e3:.3f}" for w in wins) + " ms")


if __name__ == "__main__":
    main()
