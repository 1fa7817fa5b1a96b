#!/usr/bin/env python3
"""The build by insertion from Python against SQLite's R*Tree at equal
memory, each build in a fresh process, alternated, medians (issue 47,
item 2: the Python build at <= 0.3x SQLite's time).

    .venv-peers/bin/python benchmarks/python_build_vs_sqlite.py --data u1m.csv --workdir /tmp/pbs \
        [--reps 5] [--sqlite-cache-kib 1048576] [--site NAME=DIR ...]

geoflash: `Index(path)` with its defaults, one `with idx.batch():` around a
loop of `insert(id, [minx, miny, maxx, maxy])`, closed; the installed
package, or each `--site` directory (an unpacked wheel) on `PYTHONPATH` in
turn. SQLite: Python's `sqlite3`, `CREATE VIRTUAL TABLE ... USING rtree`
with the exact coordinates as auxiliary columns, one transaction of
`executemany` (what the peer benchmark runs), `PRAGMA cache_size` set to
`--sqlite-cache-kib` (give it geoflash's budget: 1 GiB on a machine of
8 GiB or more). Both convert the NumPy rows with `tolist()` inside the
timed region, as the peer benchmark does. Wall and CPU time (all threads)
are measured in the worker around the build.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

WORKER = r"""
import json, os, shutil, sys, time
import numpy as np
kind, data, out, cache = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
boxes = np.loadtxt(data, delimiter=",", skiprows=1, ndmin=2, usecols=range(1, 5))
ids = np.arange(len(boxes), dtype=np.int64)
shutil.rmtree(out, ignore_errors=True)
if kind == "sqlite":
    import sqlite3
    os.makedirs(out)
    db = os.path.join(out, "index.sqlite")
    t, cpu = time.perf_counter(), time.process_time()
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA cache_size=-{cache}")
    con.execute("CREATE VIRTUAL TABLE rt USING rtree(id, minx, maxx, miny, maxy,"
                " +ex0 REAL, +ex1 REAL, +ey0 REAL, +ey1 REAL)")
    with con:
        con.executemany("INSERT INTO rt VALUES (?,?,?,?,?,?,?,?,?)",
                        ((i, b[0], b[2], b[1], b[3], b[0], b[2], b[1], b[3])
                         for i, b in zip(ids.tolist(), boxes.tolist())))
    con.close()
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    held = sqlite3.connect(db).execute("SELECT count(*) FROM rt").fetchone()[0]
else:
    import geoflash
    t, cpu = time.perf_counter(), time.process_time()
    idx = geoflash.Index(out)
    ins = idx.insert
    with idx.batch():
        for i, b in zip(ids.tolist(), boxes.tolist()):
            ins(i, b)
    idx.close()
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    held = len(geoflash.Index(out, readonly=True))
if held != len(ids):
    raise SystemExit(f"{kind}: the index holds {held} of the {len(ids)} records")
print(json.dumps({"wall": wall, "cpu": cpu}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="CSV id,minx,miny,maxx,maxy")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sqlite-cache-kib", type=int, default=1 << 20)
    ap.add_argument("--site", action="append", default=[], help="NAME=DIR of an unpacked geoflash wheel")
    a = ap.parse_args()
    systems = [("sqlite", "sqlite", None)]
    systems += [("geoflash", s.split("=", 1)[0], s.split("=", 1)[1]) for s in a.site] or [("geoflash", "geoflash", None)]
    os.makedirs(a.workdir, exist_ok=True)
    runs = {name: [] for _, name, _ in systems}
    for _ in range(a.reps):
        for kind, name, site in systems:
            env = dict(os.environ)
            if site:
                env["PYTHONPATH"] = site
            out = os.path.join(a.workdir, name)
            p = subprocess.run([sys.executable, "-c", WORKER, kind, a.data, out, str(a.sqlite_cache_kib)],
                               env=env, capture_output=True, text=True)
            if p.returncode:
                raise SystemExit(f"python_build_vs_sqlite: {name} failed: {p.stderr.strip()}")
            runs[name].append(json.loads(p.stdout.strip().splitlines()[-1]))
    sq_wall = statistics.median(r["wall"] for r in runs["sqlite"])
    sq_cpu = statistics.median(r["cpu"] for r in runs["sqlite"])
    print("| system | median wall s | ÷ SQLite | median CPU s | ÷ SQLite | wall runs |")
    print("|---|---:|---:|---:|---:|---|")
    for name, rs in runs.items():
        wall = statistics.median(r["wall"] for r in rs)
        cpu = statistics.median(r["cpu"] for r in rs)
        walls = " ".join(f"{r['wall']:.2f}" for r in rs)
        print(f"| {name} | {wall:.2f} | {wall / sq_wall:.2f} | {cpu:.2f} | {cpu / sq_cpu:.2f} | {walls} |")


if __name__ == "__main__":
    main()
