#!/usr/bin/env python3
"""The R*-tree's forced-reinsertion percentage: what it costs the build by
insertion and what it buys the queries, from the command line, one run.

    .venv-peers/bin/python benchmarks/reinsert_sweep.py --data u1m.csv \
        --bin target/release/geoflash --workdir /tmp/rs [--percents 0,5,10,15,20,30] [--reps 3]

For each percentage, `geoflash build --reinsert-percent P` with the other
defaults (one batch, durable at its end), `--reps` times, the percentages
alternated, median wall time; then, on the last index of each, the exact
node reads (`--json` `node_reads`, no timing noise) of 1,000 windows of
0.001 %, 0.01 % and 0.1 % of the data's extent and of 1,000 kNN queries
(k = 10), windows and points drawn with seed 42 over that extent. Every
index must answer alike: the same ids for each window, the same k
distances for each point (ties may name other ids). Build times are the
command's wall time, start-up and CSV parsing included.
"""
import argparse
import csv
import json
import os
import random
import shutil
import statistics
import subprocess
import time

SELECTIVITIES = [0.00001, 0.0001, 0.001]


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"reinsert_sweep: {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def extent(path):
    lo = [float("inf")] * 2
    hi = [float("-inf")] * 2
    with open(path) as f:
        rows = csv.reader(f)
        next(rows)
        for row in rows:
            x0, y0, x1, y1 = map(float, row[1:5])
            lo = [min(lo[0], x0), min(lo[1], y0)]
            hi = [max(hi[0], x1), max(hi[1], y1)]
    return lo, hi


def query_files(data, work):
    (x0, y0), (x1, y1) = extent(data)
    w, h = x1 - x0, y1 - y0
    rng = random.Random(42)
    files = {}
    for s in SELECTIVITIES:
        side_x, side_y = w * s ** 0.5, h * s ** 0.5
        path = os.path.join(work, f"windows-{s}.csv")
        with open(path, "w") as f:
            f.write("minx,miny,maxx,maxy\n")
            for _ in range(1000):
                a = x0 + rng.random() * (w - side_x)
                b = y0 + rng.random() * (h - side_y)
                f.write(f"{a!r},{b!r},{a + side_x!r},{b + side_y!r}\n")
        files[f"{s * 100:g} %"] = path
    points = os.path.join(work, "points.csv")
    with open(points, "w") as f:
        f.write("x,y\n")
        for _ in range(1000):
            f.write(f"{x0 + rng.random() * w!r},{y0 + rng.random() * h!r}\n")
    return files, points


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="CSV id,minx,miny,maxx,maxy")
    ap.add_argument("--bin", required=True, help="the geoflash command")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--percents", default="0,5,10,15,20,30")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    percents = [int(p) for p in a.percents.split(",")]
    os.makedirs(a.workdir, exist_ok=True)
    windows, points = query_files(a.data, a.workdir)
    walls = {p: [] for p in percents}
    for _ in range(a.reps):
        for p in percents:
            ix = os.path.join(a.workdir, f"ix-{p}")
            shutil.rmtree(ix, ignore_errors=True)
            t = time.perf_counter()
            run([a.bin, "build", "--input", a.data, "--index", ix, "--reinsert-percent", str(p), "-q", "--json"])
            walls[p].append(time.perf_counter() - t)
    base = statistics.median(walls[max(percents)])
    head = ["reinsert %", "build s", f"÷ {max(percents)} %"] + [f"windows {k} nodes" for k in windows] + ["kNN nodes", "pages.dat MB"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    answers = {}

    def same(key, answer, p):
        if answers.setdefault(key, answer) != answer:
            raise SystemExit(f"reinsert_sweep: {p} % answers {key} differently from {percents[0]} %")

    for p in percents:
        ix = os.path.join(a.workdir, f"ix-{p}")
        cells = [str(p), f"{statistics.median(walls[p]):.2f}", f"{statistics.median(walls[p]) / base:.2f}"]
        for k, path in windows.items():
            j = run([a.bin, "query", "--index", ix, "--windows", path, "--ids", "-q", "--json"])
            same(f"windows {k}", [sorted(w["ids"]) for w in j["windows"]], p)
            cells.append(f"{j['stats']['node_reads']:,}")
        j = run([a.bin, "knn", "--index", ix, "--points", points, "--k", "10", "-q", "--json"])
        same("kNN", [[n["distance"] for n in q["neighbors"]] for q in j["points"]], p)
        cells.append(f"{j['stats']['node_reads']:,}")
        cells.append(f"{os.path.getsize(os.path.join(ix, 'pages.dat')) / 1e6:.1f}")
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
