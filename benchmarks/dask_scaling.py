#!/usr/bin/env python3
"""Scaling of geoflash.dask on a LocalCluster of 1, 2, ... worker processes
(1 thread each): build a partitioned index of ``buildings`` boxes
(``geoflash generate``), answer a batch of windows and of kNN queries, and
join it with a second dataset; per worker count the wall time of each
operation, the scaling ratio against one worker, and where the time goes
(the workers' task time by function, from Dask's task stream, against the
wall time: the rest is the client, the scheduler and transfers).

    python benchmarks/dask_scaling.py --count 1000000 --workers 1,2 \
        --geoflash-bin target/release/geoflash --out dask-scaling.json

Answers are checked: every worker count must give the same windows, kNN
and join answers as the first (and the windows those of one geoflash index
in this process). See docs/scaleout.md for the cost model.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np


def generate(bin_: str, distribution: str, n: int, seed: int, work: str) -> np.ndarray:
    csv = os.path.join(work, f"{distribution}-{n}-{seed}.csv")
    subprocess.run([bin_, "generate", "--distribution", distribution, "--geometry", "box", "--count", str(n),
                    "--seed", str(seed), "--out", csv], check=True, capture_output=True)
    table = np.loadtxt(csv, delimiter=",", skiprows=1, ndmin=2)
    return np.ascontiguousarray(table[:, 1:5], dtype=np.float64)


def windows(boxes: np.ndarray, count: int, selectivity: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x0, y0, x1, y1 = boxes[:, 0].min(), boxes[:, 1].min(), boxes[:, 2].max(), boxes[:, 3].max()
    side = np.sqrt(selectivity * (x1 - x0) * (y1 - y0))
    lo = np.column_stack([rng.uniform(x0, x1 - side, count), rng.uniform(y0, y1 - side, count)])
    return np.hstack([lo, lo + side])


def _warm() -> None:
    """Imports what the tasks import (run on every worker before timing)."""
    import dask_geopandas.hilbert_distance  # noqa: F401
    import geoflash.dask.worker  # noqa: F401
    import shapely  # noqa: F401


def task_seconds(stream) -> dict:
    """Seconds of compute in the workers' tasks, by function name."""
    out = defaultdict(float)
    for t in stream:
        name = t["key"][0] if isinstance(t["key"], tuple) else t["key"]
        # a key is the function's name, then "-" and a token or a uuid
        name = re.match(r"[A-Za-z_]+", str(name)).group(0) if re.match(r"[A-Za-z_]+", str(name)) else str(name)
        for s in t["startstops"]:
            if s["action"] == "compute":
                out[name] += s["stop"] - s["start"]
    return dict(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1_000_000, help="buildings boxes")
    ap.add_argument("--join-count", type=int, default=200_000, help="boxes of the join's other side (uniform)")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--partitions-per-worker", type=int, default=4)
    ap.add_argument("--windows", type=int, default=10_000)
    ap.add_argument("--selectivity", type=float, default=1e-4)
    ap.add_argument("--knn", type=int, default=2_000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--geoflash-bin", default="target/release/geoflash")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out", default=None, help="JSON file of the measurements")
    a = ap.parse_args()

    from distributed import Client, LocalCluster, get_task_stream

    import geoflash
    import geoflash.dask as gd

    work = tempfile.mkdtemp(prefix="dask-scaling-", dir=a.workdir)
    data = generate(a.geoflash_bin, "buildings", a.count, 1, work)
    other = generate(a.geoflash_bin, "uniform", a.join_count, 2, work)
    wins = windows(data, a.windows, a.selectivity, 3)
    rng = np.random.default_rng(4)
    knn = np.column_stack([rng.uniform(data[:, 0].min(), data[:, 2].max(), a.knn),
                           rng.uniform(data[:, 1].min(), data[:, 3].max(), a.knn)])

    # one geoflash index in this process: the baseline and the windows' oracle
    t = time.perf_counter()
    single = geoflash.Index.from_arrays(None, data)
    base = {"build": time.perf_counter() - t}
    t = time.perf_counter()
    s_off, s_ids = single.intersection_batch(wins)
    base["windows"] = time.perf_counter() - t
    print(f"one index in-process: build {base['build']:.2f} s, {a.windows} windows {base['windows']:.2f} s", flush=True)

    rows = []
    first = None
    for n in [int(w) for w in a.workers.split(",")]:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            times, where = {}, {}
            # A long-lived cluster has its imports done: warm the workers
            # (geoflash, and dask-geopandas for the Hilbert keys, about 2 s
            # per process) and report that apart.
            t = time.perf_counter()
            client.run(_warm)
            warm = time.perf_counter() - t
            path = os.path.join(work, f"pidx-{n}")
            with get_task_stream(client) as ts:
                t = time.perf_counter()
                pidx = gd.build(data, path, partitions=n * a.partitions_per_worker, client=client)
                times["build"] = time.perf_counter() - t
            where["build"] = task_seconds(ts.data)
            with get_task_stream(client) as ts:
                t = time.perf_counter()
                w_off, w_ids = pidx.intersection_batch(wins)
                times["windows"] = time.perf_counter() - t
            where["windows"] = task_seconds(ts.data)
            with get_task_stream(client) as ts:
                t = time.perf_counter()
                k_off, k_ids, _ = pidx.nearest_batch(knn, a.k)
                times["knn"] = time.perf_counter() - t
            where["knn"] = task_seconds(ts.data)
            with get_task_stream(client) as ts:
                t = time.perf_counter()
                pairs = gd.join(pidx, other, client=client, broadcast=0, partitions=n * a.partitions_per_worker,
                                workdir=work)
                times["join"] = time.perf_counter() - t
            where["join"] = task_seconds(ts.data)
        answers = (w_off, w_ids, k_off, k_ids, pairs)
        for i in range(len(wins)):
            want = np.sort(s_ids[s_off[i]:s_off[i + 1]])
            if not np.array_equal(w_ids[w_off[i]:w_off[i + 1]], want):
                raise SystemExit(f"window {i} answered differently from one geoflash index")
        if first is None:
            first = answers
        elif not all(np.array_equal(x, y) for x, y in zip(first, answers)):
            raise SystemExit(f"{n} workers answered differently from {a.workers.split(',')[0]}")
        row = {"workers": n, "partitions": len(pidx.partitions), "warm_up_seconds": warm, "seconds": times,
               "task_seconds": where,
               "join_pairs": int(pairs.shape[1])}
        rows.append(row)
        print(json.dumps(row), flush=True)

    print(f"\n| workers | build s | {a.windows} windows s | {a.knn} kNN (k={a.k}) s | join s |")
    print("|---|---|---|---|---|")
    for r in rows:
        s = r["seconds"]
        print(f"| {r['workers']} | {s['build']:.2f} | {s['windows']:.2f} | {s['knn']:.2f} | {s['join']:.2f} |")
    if len(rows) > 1:
        ratio = {k: rows[0]["seconds"][k] / rows[-1]["seconds"][k] for k in rows[0]["seconds"]}
        print(f"speed-up {rows[0]['workers']} → {rows[-1]['workers']} workers: "
              + ", ".join(f"{k} {v:.2f}×" for k, v in ratio.items()))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"count": a.count, "join_count": a.join_count, "windows": a.windows,
                       "selectivity": a.selectivity, "knn": a.knn, "k": a.k, "in_process": base, "runs": rows},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
