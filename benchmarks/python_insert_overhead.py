#!/usr/bin/env python3
"""The cost of the Python wrapper's `insert`, in one process: the
`geoflash.Index.insert` of the installed package against the body it had
before session 24 (`_box`, `_as_int`, `_pickled`, then `Core.insert`) and
against `Core.insert` called directly with four floats; 200,000 uniform
boxes in memory, five repetitions alternating, medians.

    python3 benchmarks/python_insert_overhead.py
"""
import statistics
import time

import numpy as np

import geoflash
from geoflash.spatial_index import _as_int

N = 200_000


def data():
    rng = np.random.default_rng(1)
    lo = rng.uniform(0, 1, size=(N, 2))
    boxes = np.hstack([lo, lo + rng.uniform(0, 0.001, size=(N, 2))]).tolist()
    return list(range(N)), boxes


def timed(ids, boxes, make_insert):
    idx = geoflash.Index()
    ins = make_insert(idx)
    t = time.perf_counter()
    for i, b in zip(ids, boxes):
        ins(i, b)
    return time.perf_counter() - t


def now(idx):
    return idx.insert


def before(idx):
    def ins(id, coordinates, obj=None):
        box = idx._box(coordinates)
        idx._core.insert(_as_int(id), *box, idx._pickled(obj))

    return ins


def core_only(idx):
    core = idx._core
    return lambda i, b: core.insert(i, b[0], b[1], b[2], b[3], None)


def main():
    ids, boxes = data()
    ways = {"insert now": now, "insert before": before, "Core.insert": core_only}
    runs = {k: [] for k in ways}
    for _ in range(5):
        for k, f in ways.items():
            runs[k].append(timed(ids, boxes, f))
    for k, v in runs.items():
        m = statistics.median(v)
        print(f"{k:14} {m / N * 1e6:.2f} us per insertion (median of {[round(x, 3) for x in v]} s)")


if __name__ == "__main__":
    main()
