"""Issue 15 log formats: 200,000 rectangles built by insertion, per-change, first-image and compact, eFIND and FAST, with SQLite R*Tree in the same run (docs/benchmarks.md, "Log formats").

Usage: python3 benchmarks/log_formats.py GEOFLASH_BIN DATA.csv WORKDIR REPS [FORMATS]

FORMATS is a comma-separated list (default per-change,first-image,compact).

Writes WORKDIR/results.json (one row per build) and prints the geoflash rows.
SQLite's kernel_write_bytes is /proc/self/io's write_bytes: it counts a page
once per dirtying in the OS page cache, so it is not comparable with
geoflash's device counters (every page written).
"""
import csv
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time

bin_, data, work, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
formats = (sys.argv[5] if len(sys.argv) > 5 else "per-change,first-image,compact").split(",")
os.makedirs(work, exist_ok=True)

def io_bytes():
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (l.split(": ") for l in f.read().splitlines())}

def sqlite_build(rows, cache_kib):
    d = os.path.join(work, "sqlite")
    shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
    before = io_bytes()["write_bytes"]
    t = time.perf_counter()
    con = sqlite3.connect(os.path.join(d, "i.sqlite"))
    if cache_kib:
        con.execute(f"PRAGMA cache_size=-{cache_kib}")
    con.execute("CREATE VIRTUAL TABLE rt USING rtree(id, minx, maxx, miny, maxy)")
    with con:
        con.executemany("INSERT INTO rt VALUES (?,?,?,?,?)", rows)
    con.close()
    os.sync()
    wall = time.perf_counter() - t
    return wall, io_bytes()["write_bytes"] - before

rows = []
with open(data) as f:
    r = csv.reader(f); next(r)
    for i, a, b, c, d in r:
        rows.append((int(i), float(a), float(c), float(b), float(d)))

configs = [
    ("defaults (64MiB, page cache)", []),
    ("papers' memory (512KiB, direct)", ["--buffer", "512KiB", "--device", "file"]),
]
out = []
for rep in range(reps):
    for cache in (None, 512):
        wall, wb = sqlite_build(rows, cache)
        out.append(dict(system=f"sqlite-rtree cache={cache or 'default'}", rep=rep, wall=wall, kernel_write_bytes=wb))
    for store in ("efind", "fast"):
        for label, extra in configs:
            for fmt in formats:
                idx = os.path.join(work, "idx")
                shutil.rmtree(idx, ignore_errors=True)
                t = time.perf_counter()
                p = subprocess.run([bin_, "build", "--input", data, "--index", idx, "--store", store,
                                    "--log-format", fmt, "--json", *extra], capture_output=True, text=True)
                wall = time.perf_counter() - t
                if p.returncode != 0:
                    print(p.stderr, file=sys.stderr); sys.exit(1)
                s = json.loads(p.stdout.strip().splitlines()[-1])
                # reopen: a query process, log pages it reads at open
                q = subprocess.run([bin_, "recover", "--index", idx, "--json"], capture_output=True, text=True)
                info = q.stdout.strip().splitlines()[-1] if q.returncode == 0 else "{}"
                out.append(dict(system=f"geoflash {store} {label}", fmt=fmt, rep=rep, wall=wall,
                                bytes_written=s.get("bytes_written"), index_bytes=s.get("index_bytes"),
                                log_bytes=s.get("log_bytes"), log_pages_written=s.get("log_pages_written"),
                                log_records=s.get("log_records"), page_images=s.get("page_images"),
                                syncs=s.get("syncs"), log_syncs=s.get("log_syncs"), compactions=s.get("compactions"),
                                rewrite=s.get("build_rewrite_factor"), pages_written=s.get("pages_written"),
                                ops=s.get("operations"), info=info[:400]))
                print(json.dumps(out[-1]), flush=True)
json.dump(out, open(os.path.join(work, "results.json"), "w"), indent=1)
