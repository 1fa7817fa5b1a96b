#!/usr/bin/env python3
"""Build by insertion on a file: geoflash builds against SQLite's R*Tree, in
one run, alternating, median of N (issue 15's last target: the default
durable build of 200,000 uniform rectangles at <= 0.5x SQLite's wall time).

    benchmarks/build_vs_sqlite.py --data u200k.csv --workdir /tmp/bvs \
        --bin now=target/release/geoflash --bin before=/path/to/old/geoflash \
        [--reps 3] [--geoflash-args "--durability none"] [--sqlite-cache-kib 1048576]

SQLite: Python's sqlite3, `CREATE VIRTUAL TABLE t USING rtree(...)`, every
row inserted in one transaction (default page cache, or `--sqlite-cache-kib`
for `PRAGMA cache_size`: give it geoflash's memory budget to compare at
equal memory), as the peer benchmark does. geoflash: `geoflash build --input DATA --index DIR --json` with its
defaults (plus --geoflash-args). Wall time is measured around each process
or call, and CPU time (user + system) beside it: SQLite's is this process's
own (`time.process_time`), geoflash's the child's (`getrusage`), so a ratio of
CPU medians still compares the two when the machine is busy. Syncs and bytes
come from geoflash's own counters.
"""
import argparse
import csv
import json
import os
import resource
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import time


def sqlite_build(rows, db, cache_kib=None):
    if os.path.exists(db):
        os.remove(db)
    t = time.perf_counter()
    cpu = time.process_time()
    c = sqlite3.connect(db)
    if cache_kib:
        c.execute(f"PRAGMA cache_size=-{int(cache_kib)}")
    c.execute("CREATE VIRTUAL TABLE t USING rtree(id, minx, maxx, miny, maxy)")
    with c:
        c.executemany("INSERT INTO t VALUES (?,?,?,?,?)", rows)
    c.close()
    return time.perf_counter() - t, time.process_time() - cpu, os.path.getsize(db)


def children_cpu():
    """User + system CPU seconds of the waited-for children so far."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def geoflash_build(binary, data, index, extra):
    shutil.rmtree(index, ignore_errors=True)
    t = time.perf_counter()
    cpu = children_cpu()
    out = subprocess.run(
        [binary, "build", "--input", data, "--index", index, "--json", *extra],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    wall = time.perf_counter() - t
    stats = json.loads(out.strip().splitlines()[-1])
    return wall, children_cpu() - cpu, stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="CSV id,minx,miny,maxx,maxy")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH of a geoflash binary")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--geoflash-args", default="")
    ap.add_argument(
        "--sqlite-cache-kib", type=int, default=None, help="SQLite's page cache in KiB (default: its own, 2,000 KiB)"
    )
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    with open(a.data) as f:
        r = csv.reader(f)
        next(r)
        rows = [(int(x[0]), float(x[1]), float(x[3]), float(x[2]), float(x[4])) for x in r]
    bins = [b.split("=", 1) for b in a.bin]
    extra = shlex.split(a.geoflash_args)
    walls = {"sqlite": []}
    cpus = {"sqlite": []}
    info = {}
    for _ in range(a.reps):
        w, c, size = sqlite_build(rows, os.path.join(a.workdir, "s.db"), a.sqlite_cache_kib)
        walls["sqlite"].append(w)
        cpus["sqlite"].append(c)
        info["sqlite"] = f"{size / 1e6:.1f} MB file"
        for name, path in bins:
            w, c, s = geoflash_build(path, a.data, os.path.join(a.workdir, name), extra)
            walls.setdefault(name, []).append(w)
            cpus.setdefault(name, []).append(c)
            info[name] = (
                f"syncs {s.get('syncs')}, {s.get('bytes_written', 0) / 1e6:.1f} MB written, "
                f"log pages {s.get('log_pages_written')}, cpu {s.get('cpu_time_ns', 0) / 1e9:.2f} s"
            )
    base = statistics.median(walls["sqlite"])
    base_cpu = statistics.median(cpus["sqlite"])
    print(
        f"{'system':<12} {'median s':>9} {'x SQLite':>9} {'CPU s':>7} {'x SQLite':>9}  "
        "wall runs; last run"
    )
    for name, ws in walls.items():
        m = statistics.median(ws)
        c = statistics.median(cpus[name])
        runs = " ".join(f"{w:.2f}" for w in ws)
        print(
            f"{name:<12} {m:>9.2f} {m / base:>9.2f} {c:>7.2f} {c / base_cpu:>9.2f}  "
            f"{runs}; {info[name]}"
        )


if __name__ == "__main__":
    main()
