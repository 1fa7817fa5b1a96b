#!/usr/bin/env python3
"""The object heap's cost, command line against command line: a build by
insertion of N triangles from GeoJSON, then an insert of N/4 more into the
built index (default settings: eFIND, one batch each), per binary, the
binaries alternated. Prints wall seconds, peak RSS, bytes the process wrote
(getrusage's blocks written, 512 bytes each) and the index's files, and
checks that every binary answers the same refined windows.

    python3 benchmarks/object_heap.py OUT_DIR N ROUNDS BINARY...
"""
import json
import os
import random
import subprocess
import sys
import time


def triangles(path, n, start, seed):
    rng = random.Random(seed)
    feats = []
    for i in range(n):
        x, y, s = rng.uniform(0, 1000), rng.uniform(0, 1000), rng.uniform(0.1, 2)
        ring = [[x, y], [x + s, y + 0.3 * s], [x + 0.4 * s, y + s], [x, y]]
        feats.append({"type": "Feature", "id": start + i, "properties": {},
                      "geometry": {"type": "Polygon", "coordinates": [ring]}})
    with open(path, "w") as f:
        json.dump({"type": "FeatureCollection", "features": feats}, f)


def run(cmd):
    """Runs `cmd`; returns (wall s, peak RSS MB as the command measured it
    (`--json`'s `peak_rss_bytes`, 0 without it), MB written, stdout)."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read().decode()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{cmd} failed with status {status}")
    rss = 0.0
    if "--json" in cmd:
        rss = json.loads(out.strip().splitlines()[-1]).get("peak_rss_bytes", 0) / 1e6
    return wall, rss, usage.ru_oublock * 512 / 1e6, out


def main():
    out, n, rounds, binaries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    os.makedirs(out, exist_ok=True)
    base, more = os.path.join(out, "base.geojson"), os.path.join(out, "more.geojson")
    triangles(base, n, 0, 7)
    triangles(more, n // 4, 10 * n, 8)
    windows = os.path.join(out, "windows.csv")
    with open(windows, "w") as f:
        f.write("minx,miny,maxx,maxy\n")
        rng = random.Random(9)
        for _ in range(50):
            x, y = rng.uniform(0, 990), rng.uniform(0, 990)
            f.write(f"{x},{y},{x + 10},{y + 10}\n")
    answers = {}
    for r in range(rounds):
        for b in binaries:
            ix = os.path.join(out, f"ix-{os.path.basename(b)}")
            subprocess.run(["rm", "-rf", ix], check=True)
            build = run([b, "build", "--input", base, "--index", ix, "--json"])
            insert = run([b, "insert", "--input", more, "--index", ix, "--json"])
            files = {f: os.path.getsize(os.path.join(ix, f)) / 1e6
                     for f in ("pages.dat", "log.dat", "objects.dat") if os.path.exists(os.path.join(ix, f))}
            q = run([b, "query", "--index", ix, "--windows", windows, "--refine"])[3]
            answers.setdefault(b, q)
            if answers[b] != q or q != answers[binaries[0]]:
                sys.exit(f"{b}: the refined answers differ")
            print(f"round {r} {b}: build {build[0]:.2f} s, {build[1]:.0f} MB RSS, {build[2]:.1f} MB written; "
                  f"insert {insert[0]:.2f} s, {insert[1]:.0f} MB RSS, {insert[2]:.1f} MB written; "
                  + ", ".join(f"{k} {v:.1f} MB" for k, v in files.items()), flush=True)


if __name__ == "__main__":
    main()
