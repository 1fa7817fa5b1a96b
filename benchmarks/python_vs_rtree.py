#!/usr/bin/env python3
"""geoflash against the ``rtree`` package (libspatialindex), from Python.

On ``--count`` random rectangles (seeded NumPy: lower corners uniform in the
unit square, sides uniform in [0, ``--side``]) it measures, in one run:

- bulk construction: ``geoflash.Index.from_arrays`` against rtree's stream
  bulk load ``rtree.index.Index(generator)`` and, where it works, rtree's
  array bulk load ``rtree.index.Index((ids, mins, maxs))``; in memory and on
  disk (geoflash: eFIND store on device ``file`` in a temporary directory,
  closed at the end so it is durable, and two variants that show where its
  time goes: ``durability="none"`` and ``file?direct=false``; rtree:
  ``rtree.index.Index(path, ...)``, closed as well);
- one-by-one insert loops (a Python loop on both sides, over the first
  ``--insert-count`` rectangles as tuples prepared beforehand) in memory and
  on disk (a new index directory with geoflash's defaults, closed at the end
  so the result is durable; rtree ``Index(path)``, closed as well), each
  also inside ``with index.batch():`` for geoflash;
- ``--queries`` window queries (squares of side ``--window``): geoflash's
  ``intersection_batch`` and a loop of ``intersection``, rtree's loop of
  ``intersection`` and its ``intersection_v`` when the installed version has it;
- ``--queries`` ``nearest(point, k)`` calls in a loop.

Queries run on every index: in memory and on disk (the disk indexes are
reopened first, so they start with empty buffers; geoflash on ``file``
with direct I/O, which bypasses the OS page cache, and on
``file?direct=false``, which reads through it as rtree's disk index does).
Builds and inserts are repeated ``--repeat`` times, query measurements
``--query-repeat`` times (each with a fresh set of query boxes, the same for
both libraries, so later repetitions do not just hit what earlier ones
cached); the table shows the medians and the ratio rtree ÷ geoflash (above
1: geoflash is faster). Before timing, the answers of both libraries are
compared (as multisets of ids) on every index.

    python benchmarks/python_vs_rtree.py                   # 1,000,000 rectangles, 3 repetitions
    python benchmarks/python_vs_rtree.py --count 100000 --repeat 3
    python benchmarks/python_vs_rtree.py --markdown        # the table as Markdown too

Run it against the release build of the package (``pip install
./crates/geoflash-py``, or ``GEOFLASH_PY_PROFILE=release bash
scripts/python-test.sh -k nothing`` for the test venv), never the ``dev``
profile of the test tier. Results: docs/benchmarks.md, "Python: geoflash vs rtree".
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable, List, Optional

import numpy as np

import geoflash
import rtree


# geoflash indexes in memory: (name, options of from_arrays). The first is
# the default (geoflash.DEFAULTS: the plain store on mem:, keeping up to
# 1 GiB of decoded nodes); the second the default before the peer benchmark
# (eFIND on mem: with 512 KiB, which holds a small part of a large tree, so
# most node visits decode a page).
MEMORY = [
    ("plain on mem:, 1 GiB (default)", {}),
    ("eFIND on mem:, buffer='512KiB'", {"store": "efind", "buffer": "512KiB"}),
]
# geoflash builds on disk: (name, options of from_arrays). The first is the
# default configuration (eFIND store, group commit, direct I/O); the others
# show where the time of the first goes.
DISK_BUILDS = [
    ("eFIND on file (direct I/O), 512 KiB", {"device": "file", "buffer": "512KiB"}),
    ("eFIND on file, 512 KiB, durability='none'", {"device": "file", "buffer": "512KiB", "durability": "none"}),
    ("eFIND on file?direct=false, 512 KiB", {"device": "file?direct=false", "buffer": "512KiB"}),
    ("default (eFIND on file?direct=false, 64 MiB)", {}),
]
# geoflash indexes on disk that answer the queries: (name, position in
# DISK_BUILDS of the build reopened). rtree's disk index reads through the OS
# page cache; "file" bypasses it (O_DIRECT), "file?direct=false" does not.
DISK_QUERIES = [
    ("eFIND on file (direct I/O), 512 KiB", 0),
    ("eFIND on file?direct=false, 512 KiB", 2),
    ("default (eFIND on file?direct=false, 64 MiB)", 3),
]


class Times:
    """Wall-clock and CPU times (seconds) of the repetitions of one measurement."""

    def __init__(self) -> None:
        self.wall: List[float] = []
        self.cpu: List[float] = []

    def add(self, wall: float, cpu: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)

    def median_ms(self, cpu: bool = False) -> float:
        return statistics.median(self.cpu if cpu else self.wall) * 1000.0


def timed(times: Times, fn: Callable[[], object]) -> object:
    """Runs fn once, adding its wall-clock and CPU time (this process, all
    threads) to times; returns what fn returns."""
    gc.collect()
    c, t = time.process_time(), time.perf_counter()
    out = fn()
    times.add(time.perf_counter() - t, time.process_time() - c)
    return out


def make_boxes(rng: np.random.Generator, n: int, side: float) -> np.ndarray:
    lo = rng.uniform(0.0, 1.0, size=(n, 2))
    return np.ascontiguousarray(np.hstack([lo, lo + rng.uniform(0.0, side, size=(n, 2))]))


def make_windows(rng: np.random.Generator, n: int, side: float) -> np.ndarray:
    lo = rng.uniform(0.0, 1.0 - side, size=(n, 2))
    return np.ascontiguousarray(np.hstack([lo, lo + side]))


def fmt(v: Optional[float], spec: str = ",.1f") -> str:
    return "–" if v is None else format(v, spec)


class Table:
    """Rows: measurement, rtree variant and times, geoflash variant and
    times; the ratios rtree ÷ geoflash of the median wall-clock and CPU times."""

    HEAD = ("measurement", "rtree", "ms", "geoflash", "ms", "rtree ÷ geoflash", "(CPU time)")

    def __init__(self) -> None:
        self.rows: list = []

    def add(self, what: str, rt_name: str, rt: Optional[Times], gf_name: str, gf: Times) -> None:
        row = {
            "measurement": what,
            "rtree": rt_name,
            "rtree_ms": None if rt is None else rt.median_ms(),
            "rtree_cpu_ms": None if rt is None else rt.median_ms(cpu=True),
            "rtree_wall_s": None if rt is None else rt.wall,
            "rtree_cpu_s": None if rt is None else rt.cpu,
            "geoflash": gf_name,
            "geoflash_ms": gf.median_ms(),
            "geoflash_cpu_ms": gf.median_ms(cpu=True),
            "geoflash_wall_s": gf.wall,
            "geoflash_cpu_s": gf.cpu,
        }
        row["ratio"] = None if rt is None else row["rtree_ms"] / row["geoflash_ms"]
        row["cpu_ratio"] = (
            None if rt is None or row["geoflash_cpu_ms"] <= 0 else row["rtree_cpu_ms"] / row["geoflash_cpu_ms"]
        )
        self.rows.append(row)
        print(
            f"  {what}: rtree {rt_name} {fmt(row['rtree_ms'])} ms, geoflash {gf_name} "
            f"{fmt(row['geoflash_ms'])} ms, rtree/geoflash {fmt(row['ratio'], '.2f')} "
            f"(CPU time {fmt(row['cpu_ratio'], '.2f')})",
            flush=True,
        )

    def cells(self, r: dict) -> tuple:
        return (
            r["measurement"],
            r["rtree"],
            fmt(r["rtree_ms"]),
            r["geoflash"],
            fmt(r["geoflash_ms"]),
            fmt(r["ratio"], ".2f"),
            fmt(r["cpu_ratio"], ".2f"),
        )

    def text(self) -> str:
        lines = [self.HEAD] + [self.cells(r) for r in self.rows]
        widths = [max(len(l[i]) for l in lines) for i in range(len(self.HEAD))]
        out = []
        for j, l in enumerate(lines):
            out.append(
                "  ".join(c.rjust(w) if i in (2, 4, 5, 6) else c.ljust(w) for i, (c, w) in enumerate(zip(l, widths)))
            )
            if j == 0:
                out.append("  ".join("-" * w for w in widths))
        return "\n".join(out)

    def markdown(self) -> str:
        out = [
            "| measurement | rtree | rtree (ms) | geoflash | geoflash (ms) | rtree ÷ geoflash | same, CPU time |",
            "|---|---|---:|---|---:|---:|---:|",
        ]
        for r in self.rows:
            c = self.cells(r)
            out.append(f"| {c[0]} | {c[1]} | {c[2]} | {c[3]} | {c[4]} | {c[5]}× | {c[6]}× |")
        return "\n".join(out)


def multiset(ids) -> list:
    return sorted(int(i) for i in ids)


# One-by-one insert loops: (where, geoflash variant, in a batch). "disk" runs
# in a new index directory with the product defaults (eFIND, 64 MiB,
# file?direct=false) and closes it at the end, so the loop's result is
# durable; "batch" wraps the loop in ``with index.batch():`` (one checkpoint
# at its end instead of group commits). rtree's disk index is closed as well.
INSERT_LOOPS = [
    ("memory", "plain on mem: (default)", False),
    ("memory", "plain on mem:, in index.batch()", True),
    ("disk", "default (eFIND on file?direct=false, 64 MiB)", False),
    ("disk", "default, in index.batch()", True),
]


def insert_all(idx, rows: list) -> None:
    """Inserts rows[i] with id i, one call per row (the loop both libraries run)."""
    ins = idx.insert
    for i, b in enumerate(rows):
        ins(i, b)


def insert_loop(rows: list, path: Optional[str], batch: bool, make: Callable[[Optional[str]], object]) -> Callable[[], object]:
    """The timed body of one insert-loop repetition: a new index from
    ``make(path)``, every row inserted (inside ``index.batch()`` when
    ``batch``), the index closed (durable on disk); checks the count."""

    def run():
        idx = make(path)
        if batch:
            with idx.batch():
                insert_all(idx, rows)
        else:
            insert_all(idx, rows)
        n = len(idx) if isinstance(idx, geoflash.Index) else idx.get_size()
        idx.close()
        if n != len(rows):
            raise SystemExit(f"insert loop: {n} entries after {len(rows)} inserts")

    return run


def insert_loops(table: "Table", rows: list, repeat: int, tmp_root: Optional[str]) -> None:
    """The rows of ``INSERT_LOOPS`` (the disk ones only when ``tmp_root`` is
    given) against rtree's loop in memory and on disk; in each repetition
    every variant runs once, one after the other."""
    wheres = ["memory"] + ([] if tmp_root is None else ["disk"])
    loops = [l for l in INSERT_LOOPS if l[0] in wheres]
    print(f"one-by-one insert loop of {len(rows):,} rectangles, {' and '.join(wheres)}", flush=True)
    rt_t = {w: Times() for w in wheres}
    gf_t = {name: Times() for _, name, _ in loops}
    for rep in range(repeat):
        for where in wheres:
            path = None if where == "memory" else os.path.join(tmp_root, f"ins-rt-{rep}")
            timed(rt_t[where], insert_loop(rows, path, False, lambda p: rtree.index.Index() if p is None else rtree.index.Index(p)))
        for j, (where, name, batch) in enumerate(loops):
            path = None if where == "memory" else os.path.join(tmp_root, f"ins-gf{j}-{rep}")
            timed(gf_t[name], insert_loop(rows, path, batch, lambda p: geoflash.Index(p)))
    for where, name, _ in loops:
        what = f"{len(rows):,} inserts one by one, {where}"
        table.add(what, "loop of insert" + ("" if where == "memory" else ", Index(path)"), rt_t[where], f"loop of insert, {name}", gf_t[name])


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1_000_000, help="rectangles (default 1,000,000)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per measurement; the median is reported (default 3)")
    ap.add_argument(
        "--query-repeat",
        type=int,
        default=11,
        help="repetitions of each query measurement, each with fresh query boxes (default 11: "
        "100 queries take milliseconds, so more samples are cheap and steady the median)",
    )
    ap.add_argument("--insert-count", type=int, default=None, help="rectangles of the one-by-one insert loop (default: --count)")
    ap.add_argument("--queries", type=int, default=100, help="window and nearest queries per repetition (default 100)")
    ap.add_argument("--k", type=int, default=10, help="neighbours per nearest query (default 10)")
    ap.add_argument("--side", type=float, default=0.001, help="largest side of a rectangle (default 0.001)")
    ap.add_argument("--window", type=float, default=0.01, help="side of the query windows (default 0.01)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--tmp", default=None, help="directory for the disk indexes (default: a new temporary directory)")
    ap.add_argument("--skip-disk", action="store_true", help="in-memory indexes only")
    ap.add_argument("--skip-insert", action="store_true", help="no one-by-one insert loop")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown too")
    ap.add_argument("--json", default=None, help="write the rows (every repetition) as JSON to this file")
    args = ap.parse_args(argv)
    if min(args.count, args.repeat, args.query_repeat, args.queries) < 1:
        ap.error("--count, --repeat, --query-repeat and --queries must be at least 1")
    n_ins = args.count if args.insert_count is None else min(args.insert_count, args.count)

    has_v = hasattr(rtree.index.Index, "intersection_v")
    print(
        f"geoflash {geoflash.__version__}, rtree {rtree.__version__} "
        f"(libspatialindex {rtree.core.rt.SIDX_Version().decode() if hasattr(rtree.core.rt, 'SIDX_Version') else '?'}), "
        f"numpy {np.__version__}, Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    print(
        f"{args.count:,} rectangles (side ≤ {args.side}), {args.repeat} repetitions of builds and inserts, "
        f"{args.query_repeat} of {args.queries} queries (windows of side {args.window}, k = {args.k}); "
        f"rtree intersection_v: {'yes' if has_v else 'no (not in this rtree version)'}",
        flush=True,
    )

    rng = np.random.default_rng(args.seed)
    boxes = make_boxes(rng, args.count, args.side)
    ids = np.arange(args.count, dtype=np.int64)
    mins = np.ascontiguousarray(boxes[:, :2])
    maxs = np.ascontiguousarray(boxes[:, 2:])
    windows = [make_windows(rng, args.queries, args.window) for _ in range(args.query_repeat)]
    points = [rng.uniform(0.0, 1.0, size=(args.queries, 2)) for _ in range(args.query_repeat)]
    table = Table()
    tmp_root = tempfile.mkdtemp(prefix="geoflash-vs-rtree-", dir=args.tmp)
    t_start = time.perf_counter()

    def stream():
        for i, b in enumerate(boxes.tolist()):
            yield (i, b, None)

    try:
        # ------------------------------------------------------------ memory build
        print("bulk construction in memory", flush=True)
        gf_t = {name: Times() for name, _ in MEMORY}
        rt_s, rt_a = Times(), Times()
        rt_array_error = None
        for _ in range(args.repeat):
            for name, opts in MEMORY:
                timed(gf_t[name], lambda: geoflash.Index.from_arrays(ids, boxes, **opts))
            timed(rt_s, lambda: rtree.index.Index(stream()))
            if rt_array_error is None:
                try:
                    timed(rt_a, lambda: rtree.index.Index((ids, mins, maxs)))
                except Exception as e:  # older libspatialindex: no array bulk load
                    rt_array_error = f"{type(e).__name__}: {e}"
        for name, _ in MEMORY:
            table.add("bulk construction, memory", "stream Index(generator)", rt_s, f"from_arrays, {name}", gf_t[name])
            if rt_array_error is None:
                table.add(
                    "bulk construction, memory", "arrays Index((ids, mins, maxs))", rt_a, f"from_arrays, {name}", gf_t[name]
                )
        if rt_array_error is not None:
            print(f"  rtree array bulk load failed: {rt_array_error}", flush=True)

        # (where, rtree index, [(geoflash variant, geoflash index)])
        groups = [
            (
                "memory",
                rtree.index.Index(stream()),
                [(name, geoflash.Index.from_arrays(ids, boxes, **opts)) for name, opts in MEMORY],
            )
        ]

        # ------------------------------------------------------------ disk build
        if not args.skip_disk:
            print("bulk construction on disk (built, then closed)", flush=True)
            rt_t = Times()
            gf_t = {name: Times() for name, _ in DISK_BUILDS}
            for rep in range(args.repeat):
                rpath = os.path.join(tmp_root, f"rt-{rep}")
                timed(rt_t, lambda: rtree.index.Index(rpath, stream()).close())
                for j, (name, opts) in enumerate(DISK_BUILDS):
                    gdir = os.path.join(tmp_root, f"gf{j}-{rep}")
                    timed(gf_t[name], lambda: geoflash.Index.from_arrays(ids, boxes, path=gdir, **opts).close())
            for name, _ in DISK_BUILDS:
                table.add("bulk construction, disk", "Index(path, generator)", rt_t, f"from_arrays(path), {name}", gf_t[name])
            rt_disk = rtree.index.Index(os.path.join(tmp_root, "rt-0"))
            assert rt_disk.get_size() == args.count
            rdu = sum(os.path.getsize(os.path.join(tmp_root, f)) for f in os.listdir(tmp_root) if f.startswith("rt-0."))
            print(f"  rtree files {rdu / 2**20:.1f} MiB", flush=True)
            gf_disk = []
            for name, j in DISK_QUERIES:
                gdir = os.path.join(tmp_root, f"gf{j}-0")
                idx = geoflash.Index(gdir)  # reopened: empty buffers
                assert len(idx) == args.count
                du = sum(os.path.getsize(os.path.join(gdir, f)) for f in os.listdir(gdir))
                print(f"  geoflash directory ({name}, device {idx.manifest['device']}) {du / 2**20:.1f} MiB", flush=True)
                gf_disk.append((name, idx))
            groups.append(("disk", rt_disk, gf_disk))

        # ------------------------------------------------------------ answers agree
        for where, rt, variants in groups:
            w = windows[0]
            rt_win = [multiset(rt.intersection(tuple(q))) for q in w]
            rt_nn = [multiset(rt.nearest(tuple(p), args.k)) for p in points[0]]
            if has_v:
                vids, counts = rt.intersection_v(np.ascontiguousarray(w[:, :2]), np.ascontiguousarray(w[:, 2:]))
                if [int(c) for c in counts] != [len(a) for a in rt_win] or multiset(vids) != multiset(
                    i for a in rt_win for i in a
                ):
                    raise SystemExit(f"{where}: rtree's intersection_v differs from its intersection")
            for name, gf in variants:
                off, got = gf.intersection_batch(w)
                for i, q in enumerate(w):
                    if multiset(got[off[i] : off[i + 1]]) != rt_win[i] or multiset(gf.intersection(tuple(q))) != rt_win[i]:
                        raise SystemExit(f"{where}, {name}: window {i} answers differ between geoflash and rtree")
                    if multiset(gf.nearest(tuple(points[0][i]), args.k)) != rt_nn[i]:
                        raise SystemExit(f"{where}, {name}: nearest {i} answers differ between geoflash and rtree")
        print("answers agree (windows and nearest, every index)", flush=True)

        # ------------------------------------------------------------ queries
        # In each repetition every index of a group answers the same queries,
        # one after the other, so a burst of load hits all of them alike.
        for where, rt, variants in groups:
            print(f"{args.queries} window and nearest queries, {where}", flush=True)
            rt_loop, rt_v, rt_nn = Times(), Times(), Times()
            gf_loop = {name: Times() for name, _ in variants}
            gf_batch = {name: Times() for name, _ in variants}
            gf_nn = {name: Times() for name, _ in variants}
            for rep in range(args.query_repeat):
                w = windows[rep]
                wt = [tuple(q) for q in w.tolist()]
                wmin, wmax = np.ascontiguousarray(w[:, :2]), np.ascontiguousarray(w[:, 2:])
                pts = [tuple(p) for p in points[rep].tolist()]
                timed(rt_loop, lambda: [list(rt.intersection(q)) for q in wt])
                if has_v:
                    timed(rt_v, lambda: rt.intersection_v(wmin, wmax))
                timed(rt_nn, lambda: [list(rt.nearest(p, args.k)) for p in pts])
                for name, gf in variants:
                    timed(gf_loop[name], lambda: [list(gf.intersection(q)) for q in wt])
                    timed(gf_batch[name], lambda: gf.intersection_batch(w))
                    timed(gf_nn[name], lambda: [list(gf.nearest(p, args.k)) for p in pts])
            for name, _ in variants:
                what = f"{args.queries} window queries, {where}"
                table.add(what, "loop of intersection", rt_loop, f"loop of intersection, {name}", gf_loop[name])
                table.add(what, "loop of intersection", rt_loop, f"intersection_batch, {name}", gf_batch[name])
                if has_v:
                    table.add(what, "intersection_v", rt_v, f"intersection_batch, {name}", gf_batch[name])
            for name, _ in variants:
                what = f"{args.queries} nearest(k={args.k}), {where}"
                table.add(what, "loop of nearest", rt_nn, f"loop of nearest, {name}", gf_nn[name])
        for _, rt, variants in groups:
            rt.close()
            for _, gf in variants:
                gf.close()
        del groups

        # ------------------------------------------------------------ inserts
        if not args.skip_insert:
            insert_loops(table, boxes[:n_ins].tolist(), args.repeat, None if args.skip_disk else tmp_root)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)

    print()
    print(
        f"medians of {args.repeat} repetitions (queries: {args.query_repeat}); {args.count:,} rectangles; "
        f"total {time.perf_counter() - t_start:.0f} s; load average at end {os.getloadavg()[0]:.2f}"
    )
    print(table.text())
    if args.markdown:
        print()
        print(table.markdown())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "count": args.count,
                    "repeat": args.repeat,
                    "query_repeat": args.query_repeat,
                    "insert_count": n_ins,
                    "queries": args.queries,
                    "k": args.k,
                    "geoflash": geoflash.__version__,
                    "rtree": rtree.__version__,
                    "rows": table.rows,
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
