#!/usr/bin/env python3
"""The cost of the Python wrapper's `insert`, in one process: the
`geoflash.Index.insert` of the installed package against the body it had
before session 24 (`_box`, `_as_int`, `_pickled`, then `Core.insert`) and
against `Core.insert` called directly with four floats; 200,000 uniform
boxes in memory, five repetitions alternating, medians.

    python3 benchmarks/python_insert_overhead.py
"""
import time

import numpy as np

import geoflash
from geoflash.spatial_index import _as_int
rng = np.random.default_rng(1)
n = 200_000
lo = rng.uniform(0, 1, size=(n, 2)); boxes = np.hstack([lo, lo + rng.uniform(0, 0.001, size=(n, 2))]).tolist()
ids = list(range(n))
def fast():
    idx = geoflash.Index(); ins = idx.insert
    t = time.perf_counter()
    for i, b in zip(ids, boxes): ins(i, b)
    return time.perf_counter() - t
def old_method():
    # the old Index.insert body as a method call (what users ran before)
    idx = geoflash.Index()
    def ins(id, coordinates, obj=None):
        box = idx._box(coordinates)
        idx._core.insert(_as_int(id), *box, idx._pickled(obj))
    t = time.perf_counter()
    for i, b in zip(ids, boxes): ins(i, b)
    return time.perf_counter() - t
def core_only():
    idx = geoflash.Index(); core = idx._core
    t = time.perf_counter()
    for i, b in zip(ids, boxes): core.insert(i, b[0], b[1], b[2], b[3], None)
    return time.perf_counter() - t
res = {k: [] for k in ['fast', 'old_method', 'core_only']}
for r in range(5):
    for k, f in [('fast', fast), ('old_method', old_method), ('core_only', core_only)]:
        res[k].append(f())
for k, v in res.items():
    print(k, 'median %.3f s' % sorted(v)[2], '%.2f us/insert' % (sorted(v)[2] / n * 1e6), [round(x, 3) for x in v])
