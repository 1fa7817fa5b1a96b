#!/usr/bin/env python3
"""Memory of an index in memory, one process: geoflash ``Index.from_arrays``
(its in-memory defaults, or the options given) on N boxes of the peer
benchmark's generators (uniform boxes of side 0.001 in the unit square, or
``geoflash generate --distribution buildings`` through the CLI), then 100
windows of 0.1 % and 100 kNN (k = 10), then a count over the whole extent,
which reads every node (a store that decodes nodes into a cache holds them
all decoded then).

Prints one JSON line: the process's resident set before the load (the
interpreter, NumPy and the input arrays), its peak (``VmHWM``) and resident
set after the load, after the queries and after the whole count, and per
entry the growth of each over the resident set before the load. Run it under ``/usr/bin/time -v`` for
the kernel's own peak of the whole process.

    .venv-peers/bin/python benchmarks/memory_rss.py [--count 1000000] \
        [--dataset uniform|buildings --geoflash-bin target/release/geoflash] \
        [--option store=plain ...]
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np

import geoflash


def status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS, VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise SystemExit(f"memory_rss: no {field} in /proc/self/status")


def boxes_of(dataset: str, n: int, bin_: str) -> np.ndarray:
    """N boxes (N x 4, minx miny maxx maxy) of `dataset`."""
    if dataset == "uniform":
        rng = np.random.default_rng(1)
        lo = rng.uniform(0, 1, (n, 2))
        return np.hstack([lo, lo + 0.001])
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "data.csv")
        subprocess.run([bin_, "generate", "--distribution", dataset, "--geometry", "box",
                        "--count", str(n), "--seed", "1", "--out", out], check=True,
                       capture_output=True)
        return np.loadtxt(out, delimiter=",", skiprows=1, usecols=(1, 2, 3, 4))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--dataset", default="uniform", choices=["uniform", "buildings"])
    ap.add_argument("--geoflash-bin", default="target/release/geoflash",
                    help="the geoflash command (generates the buildings)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="an Index keyword argument (e.g. store=plain)")
    a = ap.parse_args()
    opts = dict(o.split("=", 1) for o in a.option)
    boxes = np.ascontiguousarray(boxes_of(a.dataset, a.count, a.geoflash_bin))
    ids = np.arange(len(boxes), dtype=np.int64)
    n = len(boxes)
    before = status_kib("VmRSS")
    t = time.perf_counter()
    idx = geoflash.Index.from_arrays(ids, boxes, **opts)
    load_s = time.perf_counter() - t
    after_load = (status_kib("VmRSS"), status_kib("VmHWM"))
    lo, hi = boxes[:, :2].min(axis=0), boxes[:, 2:].max(axis=0)
    rng = np.random.default_rng(2)
    side = (hi - lo) * np.sqrt(0.001)
    corners = lo + rng.uniform(0, 1, (100, 2)) * (hi - lo - side)
    windows = np.hstack([corners, corners + side])
    found = sum(len(list(idx.intersection(tuple(w)))) for w in windows)
    pts = lo + rng.uniform(0, 1, (100, 2)) * (hi - lo)
    near = sum(len(list(idx.nearest(tuple(p), 10))) for p in pts)
    after_queries = (status_kib("VmRSS"), status_kib("VmHWM"))
    counted = idx.count((lo[0], lo[1], hi[0], hi[1]))
    after_all = (status_kib("VmRSS"), status_kib("VmHWM"))
    per = lambda kib: round((kib - before) * 1024 / n, 1)
    print(json.dumps({
        "dataset": a.dataset, "n": n, "options": opts,
        "store": idx.manifest["store"]["kind"], "load_s": round(load_s, 3),
        "rss_before_mib": round(before / 1024, 1),
        "rss_after_load_mib": round(after_load[0] / 1024, 1),
        "peak_after_load_mib": round(after_load[1] / 1024, 1),
        "rss_after_queries_mib": round(after_queries[0] / 1024, 1),
        "rss_after_count_mib": round(after_all[0] / 1024, 1),
        "peak_mib": round(after_all[1] / 1024, 1),
        "load_peak_bytes_per_entry": per(after_load[1]),
        "held_bytes_per_entry_after_queries": per(after_queries[0]),
        "held_bytes_per_entry_after_count": per(after_all[0]),
        "peak_bytes_per_entry": per(after_all[1]),
        "windows_found": found, "knn_found": near, "counted": counted,
    }))


if __name__ == "__main__":
    main()
