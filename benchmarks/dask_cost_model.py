#!/usr/bin/env python3
"""Checks the cost model of docs/scaleout.md against the measurements of
``benchmarks/dask_scaling.py`` (its ``--out`` JSON files, one per data size).

Model, per operation: the wall time of ``n`` objects on ``W`` workers is

    T(n, W) = a + b * n / W + c * n

``a`` the fixed cost (task submission, scheduler round trips, one task per
partition), ``b * n / W`` the work the workers share (Hilbert keys,
splitting, bulk loads, index probes, refinement), ``c * n`` what does not
shrink with workers (the client: generating and shipping the data,
gathering and concatenating answers; on one machine also the cores the
workers share). ``a``, ``b`` and ``c`` are fitted by least squares (non
negative) on the points of ``--fit`` sizes and the prediction is checked
on every point, the held-out sizes included:

    python benchmarks/dask_cost_model.py m1.json m3.json m10.json --fit 1000000,3000000

Windows, kNN and the join scale with their own inputs too (queries,
the other side), which the benchmark keeps fixed across sizes.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def points(files):
    """(operation, n, workers, seconds) of every run in the files."""
    out = []
    for f in files:
        with open(f) as fh:
            d = json.load(fh)
        for r in d["runs"]:
            for op, s in r["seconds"].items():
                out.append((op, int(d["count"]), int(r["workers"]), float(s)))
    return out


def fit(rows):
    """Non-negative least squares for (a, b, c) of T = a + b n/W + c n
    (n in millions), by trying every subset of free coefficients."""
    X = np.array([[1.0, n / 1e6 / w, n / 1e6] for _, n, w, _ in rows])
    y = np.array([s for *_, s in rows])
    best = None
    for mask in range(1, 8):
        cols = [i for i in range(3) if mask >> i & 1]
        coef, *_ = np.linalg.lstsq(X[:, cols], y, rcond=None)
        if (coef < 0).any():
            continue
        full = np.zeros(3)
        full[cols] = coef
        err = float(np.sum((X @ full - y) ** 2))
        if best is None or err < best[0]:
            best = (err, full)
    return best[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="dask_scaling.py --out files")
    ap.add_argument("--fit", default=None, help="sizes (counts) to fit on, comma separated (default: all)")
    a = ap.parse_args()
    pts = points(a.files)
    fit_sizes = None if a.fit is None else {int(x) for x in a.fit.split(",")}
    print("| operation | a s | b s per M objects per worker | c s per M objects | n | workers | measured s | model s | error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for op in sorted({p[0] for p in pts}):
        rows = [p for p in pts if p[0] == op]
        train = [p for p in rows if fit_sizes is None or p[1] in fit_sizes]
        ca, cb, cc = fit(train)
        for _, n, w, s in sorted(rows, key=lambda p: (p[1], p[2])):
            m = ca + cb * n / 1e6 / w + cc * n / 1e6
            err = (m - s) / s
            held = "" if fit_sizes is None or n in fit_sizes else " (held out)"
            worst = max(worst, abs(err)) if held else worst
            print(f"| {op} | {ca:.2f} | {cb:.2f} | {cc:.2f} | {n:,}{held} | {w} | {s:.2f} | {m:.2f} | {err:+.0%} |")
    if fit_sizes is not None:
        print(f"\nlargest error on held-out sizes: {worst:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
