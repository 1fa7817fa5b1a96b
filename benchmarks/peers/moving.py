"""The moving-objects phase of the peer benchmark (``run.py --moving``).

N objects are indexed, then moved: M moves, each object chosen at random
and shifted by a random offset of at most 0.05 % of the data's extent in x
and in y (its size unchanged), committed in groups of C moves (the ids of
one group are distinct), and after each commit Q windows of 0.01 % of the
extent are answered. Per system, in a fresh process each
(``python moving.py SPEC_JSON``, as ``worker.py`` for the other phases):

- the initial index: the system's bulk load where it has one (SQLite's
  R*Tree: insertion in one transaction), not part of the measurement;
- the moves: one transaction (or batch) per group of C moves:
  SQLite R*Tree ``UPDATE rt SET minx=?, ... WHERE id=?`` (with its default
  cache, and with ``PRAGMA cache_size`` at 256 MiB); PostGIS one
  ``UPDATE ... FROM unnest(...)`` per group on the GiST-indexed table of the
  peer bench's throw-away cluster (fsync and synchronous commit on); DuckDB
  one ``UPDATE ... FROM`` an Arrow table per group on the RTREE-indexed
  column; libspatialindex (``rtree``, disk) ``delete`` + ``insert`` and
  ``flush()`` per group; geoflash ``with idx.batch():`` per group with
  ``idx.update_batch(ids, new)`` (the group's ids and N×4 boxes in one
  call, as SQLite's ``executemany``) when the Index has it, else
  ``idx.update(id, new)`` per move, else ``delete(id, old)`` +
  ``insert(id, new)`` (the ``method`` column says which);
- updates per second: moves ÷ the wall time of the groups (the queries
  between them excluded);
- bytes written per update: the kernel's ``write_bytes`` (``/proc/self/io``)
  over the moving loop, and again including the close (geoflash's and
  DuckDB's checkpoint, PostGIS's ``CHECKPOINT``, which writes the data pages
  its WAL already covers). For PostGIS the bytes are those of the server's
  live processes (backend, WAL writer, checkpointer: ``/proc/PID/io``) plus
  the client's, and the WAL generated (``pg_current_wal_lsn()`` difference)
  is recorded as well;
- query latency: the median over the windows of one window's time between
  commits, and the median over the same windows again on the idle index
  after the last commit; every answer (between commits and idle) is
  checked against a brute-force oracle on NumPy arrays that follows the
  moves, and a mismatch fails the run;
- geoflash: the engine's counters over the moving loop (``Index.stats``
  differences: device bytes written, syncs, log syncs and bytes, flushes,
  and on the simulated TC58 NAND device NAND programs and erases).

Sizes: ``--scale smoke`` 2,000 objects, ``small`` 100,000, ``full``
1,000,000, ``large`` 10,000,000; M = N moves unless ``--moves``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from typing import List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import systems as peers  # noqa: E402
from pgtemp import ClusterRef  # noqa: E402

SCALES = {"smoke": 2_000, "small": 100_000, "full": 1_000_000, "large": 10_000_000}
DATASETS = ["uniform", "buildings-random"]
MAX_SHIFT = 0.0005  # of the extent's width (height) per move
SELECTIVITY = 0.0001  # windows of 0.01 % of the extent's area
SQLITE_CACHE_KIB = 256 * 1024
#: NAND device of the simulated row (docs/benchmarks.md: one die, 2 KiB pages).
TC58 = "flashsim:preset=seed-tc58"


# --- the workload --------------------------------------------------------------


def make_workload(boxes: np.ndarray, moves: int, commit: int, queries: int, work: str, name: str,
                  seed: int = 11) -> dict:
    """The moves (ids, new boxes; the ids of a group distinct) and the
    windows after each group, written to ``NAME-moving.npz``."""
    rng = np.random.default_rng(seed)
    n = len(boxes)
    x0, y0 = boxes[:, 0].min(), boxes[:, 1].min()
    x1, y1 = boxes[:, 2].max(), boxes[:, 3].max()
    w, h = x1 - x0, y1 - y0
    group = min(commit, n)
    groups = (moves + group - 1) // group
    cur = boxes.copy()
    ids = np.empty(moves, dtype=np.int64)
    new = np.empty((moves, 4), dtype=np.float64)
    for g in range(groups):
        s, e = g * group, min((g + 1) * group, moves)
        pick = rng.choice(n, size=e - s, replace=False)
        d = np.column_stack([rng.uniform(-MAX_SHIFT * w, MAX_SHIFT * w, e - s),
                             rng.uniform(-MAX_SHIFT * h, MAX_SHIFT * h, e - s)])
        moved = cur[pick] + np.hstack([d, d])
        cur[pick] = moved
        ids[s:e] = pick
        new[s:e] = moved
    side_x, side_y = w * np.sqrt(SELECTIVITY), h * np.sqrt(SELECTIVITY)
    cx = rng.uniform(x0, x1 - side_x, groups * queries)
    cy = rng.uniform(y0, y1 - side_y, groups * queries)
    windows = np.column_stack([cx, cy, cx + side_x, cy + side_y]).reshape(groups, queries, 4)
    path = os.path.join(work, f"{name}-moving.npz")
    np.savez(path, ids=ids, new=new, windows=windows, group=np.array([group]))
    return {"path": path, "groups": groups, "group": group}


# --- the systems ---------------------------------------------------------------


class Mover:
    """A peer-bench adapter (``systems.System``) plus the writable handle
    and the moves of one group."""

    def __init__(self, system: peers.System, kind: str):
        self.system = system
        self.kind = kind
        self.method = {"sqlite": "UPDATE", "postgis": "UPDATE", "duckdb": "UPDATE",
                       "rtree": "delete + insert"}.get(kind, "")

    @property
    def label(self) -> str:
        return self.system.label

    def build_open(self, path: str, ids: np.ndarray, boxes: np.ndarray):
        s = self.system
        s.prepare(path)
        if self.kind == "geoflash":
            import geoflash

            idx = geoflash.Index.from_arrays(ids, boxes, path=path, **s.options)
            self.method = ("update_batch" if hasattr(idx, "update_batch")
                           else "update" if hasattr(idx, "update") else "delete + insert")
            return idx
        try:
            s.build(path, ids, boxes, True)
        except peers.Unsupported:
            s.build(path, ids, boxes, False)
        if self.kind == "sqlite":
            import sqlite3

            con = sqlite3.connect(s._db(path), isolation_level=None)
            if s.options.get("cache_kib"):
                con.execute(f"PRAGMA cache_size=-{int(s.options['cache_kib'])}")
            return con
        if self.kind == "postgis":
            import psycopg

            return psycopg.connect(s.cluster.url(s._db(path)), autocommit=True)
        if self.kind == "duckdb":
            return peers._duckdb_connect(s._db(path))
        if self.kind == "rtree":
            return s.open(path)
        raise ValueError(self.kind)

    def move(self, h, ids: np.ndarray, old: np.ndarray, new: np.ndarray) -> None:
        """One group of moves, durable when it returns."""
        if self.kind == "sqlite":
            h.execute("BEGIN")
            h.executemany(
                "UPDATE rt SET minx=?, maxx=?, miny=?, maxy=?, ex0=?, ex1=?, ey0=?, ey1=? WHERE id=?",
                ((b[0], b[2], b[1], b[3], b[0], b[2], b[1], b[3], i) for i, b in zip(ids.tolist(), new.tolist())))
            h.execute("COMMIT")
        elif self.kind == "postgis":
            with h.transaction():
                h.execute(
                    "UPDATE t SET geom = ST_MakeEnvelope(s.x0, s.y0, s.x1, s.y1) FROM"
                    " unnest(%s::bigint[], %s::float8[], %s::float8[], %s::float8[], %s::float8[])"
                    " AS s(id, x0, y0, x1, y1) WHERE t.id = s.id",
                    (ids.tolist(), new[:, 0].tolist(), new[:, 1].tolist(), new[:, 2].tolist(), new[:, 3].tolist()))
        elif self.kind == "duckdb":
            h.register("mv", peers._frame({"id": ids, "x0": new[:, 0], "y0": new[:, 1],
                                           "x1": new[:, 2], "y1": new[:, 3]}))
            h.execute("BEGIN")
            h.execute("UPDATE t SET geom = ST_MakeEnvelope(mv.x0, mv.y0, mv.x1, mv.y1) FROM mv WHERE t.id = mv.id")
            h.execute("COMMIT")
            h.unregister("mv")
        elif self.kind == "rtree":
            for i, o, b in zip(ids.tolist(), old.tolist(), new.tolist()):
                h.delete(i, o)
                h.insert(i, b)
            h.flush()
        elif self.kind == "geoflash":
            with h.batch():
                if self.method == "update_batch":
                    h.update_batch(ids, new)
                elif self.method == "update":
                    up = h.update
                    for i, b in zip(ids.tolist(), new.tolist()):
                        up(i, b)
                else:
                    dl, ins = h.delete, h.insert
                    for i, o, b in zip(ids.tolist(), old.tolist(), new.tolist()):
                        dl(i, o)
                        ins(i, b)
        else:
            raise ValueError(self.kind)

    def windows(self, h, qs):
        return self.system.windows(h, qs)

    def close(self, h) -> None:
        if self.kind == "postgis":
            h.close()
            self.system.checkpoint()
        elif self.kind == "duckdb":
            h.execute("CHECKPOINT")
            h.close()
        else:
            h.close()

    def size(self, path: str) -> int:
        return self.system.size(path)


def make_movers(cluster=None) -> List[Mover]:
    """The systems of the moving phase, in table order."""
    out = [
        Mover(peers.Sqlite("default"), "sqlite"),
        Mover(peers.Sqlite("cache 256 MiB", cache_kib=SQLITE_CACHE_KIB), "sqlite"),
    ]
    if cluster is not None:
        out.append(Mover(peers.Postgis("default", cluster=cluster), "postgis"))
    out += [
        Mover(peers.Rtree("default"), "rtree"),
        Mover(peers.Duckdb("default"), "duckdb"),
        Mover(peers.Geoflash("default"), "geoflash"),
        Mover(peers.Geoflash("fast", store="fast"), "geoflash"),
        Mover(peers.Geoflash("plain", store="plain"), "geoflash"),
        Mover(peers.Geoflash("TC58 sim", device=TC58), "geoflash"),
    ]
    return out


# --- one system, in its own process -----------------------------------------------


STAT_KEYS = ["bytes_written", "pages_written", "syncs", "log_syncs", "log_bytes", "log_records", "flushes",
             "flushed_nodes", "node_writes", "nand_programs", "nand_erases", "gc_copies", "sim_time_ns",
             "updates_in_place", "splits"]


def _stats(idx) -> dict:
    s = idx.stats
    s = s() if callable(s) else s
    if isinstance(s, str):
        s = json.loads(s)
    return s


def oracle(boxes: np.ndarray, q) -> np.ndarray:
    m = (boxes[:, 0] <= q[2]) & (boxes[:, 2] >= q[0]) & (boxes[:, 1] <= q[3]) & (boxes[:, 3] >= q[1])
    return np.nonzero(m)[0]


def _same(got, want) -> bool:
    return np.array_equal(np.sort(np.asarray(got, dtype=np.int64)), want)


def measure(spec: dict) -> dict:
    import worker  # written_bytes, cpu_seconds

    cluster = ClusterRef(**spec["pg"]) if spec.get("pg") else None
    mover = next((m for m in make_movers(cluster) if m.label == spec["system"]), None)
    if mover is None:
        raise SystemExit(f"moving: unknown system {spec['system']!r}")
    mover.system.load()
    data = np.load(spec["data"])
    ids, boxes = data["ids"], data["boxes"].copy()
    wl = np.load(spec["workload"])
    mids, mnew, windows = wl["ids"], wl["new"], wl["windows"]
    group = int(wl["group"][0])
    path = spec["path"]
    peers.remove(path)
    t = time.perf_counter()
    h = mover.build_open(path, ids, boxes)
    out = {"system": mover.label, "method": mover.method, "build_s": time.perf_counter() - t}
    if mover.kind == "postgis":
        mover.system.checkpoint()
    size0 = mover.size(path)
    stats0 = _stats(h) if mover.kind == "geoflash" else None
    wal0 = _pg_lsn(h) if mover.kind == "postgis" else None
    srv0 = cluster.written_bytes() if mover.kind == "postgis" else 0
    b0 = worker.written_bytes()
    c0 = worker.cpu_seconds()
    moving_s = 0.0
    during: List[float] = []
    mismatches = 0
    for g in range(windows.shape[0]):
        s, e = g * group, min((g + 1) * group, len(mids))
        gi, gn = mids[s:e], mnew[s:e]
        old = boxes[gi]
        t = time.perf_counter()
        mover.move(h, gi, old, gn)
        moving_s += time.perf_counter() - t
        boxes[gi] = gn
        for q in windows[g]:
            t = time.perf_counter()
            got = mover.windows(h, q[None, :])[0]
            during.append(time.perf_counter() - t)
            mismatches += not _same(got, oracle(boxes, q))
    cpu = worker.cpu_seconds() - c0
    loop_bytes = worker.written_bytes() - b0
    if mover.kind == "postgis":
        loop_bytes += cluster.written_bytes() - srv0
        out["wal_bytes"] = _pg_wal_diff(h, wal0)
    if stats0 is not None:
        s1 = _stats(h)
        out["engine"] = {k: s1.get(k, 0) - stats0.get(k, 0) for k in STAT_KEYS if k in s1}
        out["device_simulated"] = bool(s1.get("device_simulated"))
    idle: List[float] = []
    for q in windows.reshape(-1, 4):
        t = time.perf_counter()
        got = mover.windows(h, q[None, :])[0]
        idle.append(time.perf_counter() - t)
        mismatches += not _same(got, oracle(boxes, q))
    b1 = worker.written_bytes()
    if mover.kind == "postgis":
        # the server's part of the close: a CHECKPOINT while the measured
        # connection is open (its backend's counters leave the sum when it exits)
        srv1 = cluster.written_bytes()
        mover.system.checkpoint()
        server_close = cluster.written_bytes() - srv1
    mover.close(h)
    close_bytes = worker.written_bytes() - b1 + (server_close if mover.kind == "postgis" else 0)
    moves = len(mids)
    out.update(
        moves=moves,
        groups=int(windows.shape[0]),
        queries=int(windows.shape[0] * windows.shape[1]),
        moving_s=moving_s,
        moving_cpu_s=cpu,
        updates_per_s=moves / moving_s if moving_s else None,
        loop_bytes=loop_bytes,
        close_bytes=close_bytes,
        bytes_per_update=loop_bytes / moves,
        bytes_per_update_close=(loop_bytes + close_bytes) / moves,
        query_during_s=statistics.median(during),
        query_idle_s=statistics.median(idle),
        mismatches=mismatches,
        size_before=size0,
        size_after=mover.size(path),
    )
    return out


def _pg_lsn(con):
    (lsn,) = con.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    return lsn


def _pg_wal_diff(con, lsn0) -> int:
    (d,) = con.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)", (lsn0,)).fetchone()
    return int(d)


# --- the driver's side ----------------------------------------------------------------


def run(make_dataset, bin_: str, work: str, cluster, a, missing) -> List[dict]:
    """Every dataset × system of the moving phase; rows for ``report.save_moving``."""
    n = a.moving_count or SCALES[a.scale]
    moves = a.moves or n
    pg = {"port": cluster.port, "data": cluster.data} if cluster else None
    lineup = [m for m in make_movers(cluster)
              if not any(mod.split(".")[0] in missing for mod in m.system.modules)]
    only = [s for s in a.systems.split(",") if s]
    if only:
        lineup = [m for m in lineup if any(m.label.startswith(p) for p in only)]
    left_out = {s for s in a.exclude.split(",") if s}
    lineup = [m for m in lineup if m.label not in left_out]
    rows = []
    work = os.path.join(work, "moving")  # its own data files (other sizes than the other phases')
    os.makedirs(work, exist_ok=True)
    for ds in [d for d in a.moving_datasets.split(",") if d]:
        data = make_dataset(ds, n, work, bin_)
        boxes = np.load(data)["boxes"]
        wl = make_workload(boxes, moves, a.moving_commit, a.moving_queries, work, ds)
        print(f"== moving objects, {ds}: {len(boxes):,} objects, {moves:,} moves in groups of {wl['group']:,},"
              f" {a.moving_queries} windows after each", file=sys.stderr)
        for m in lineup:
            print(f"   {m.label}", file=sys.stderr)
            path = os.path.join(work, f"moving-{ds}-{m.label}".replace(" ", "_").replace("(", "").replace(")", ""))
            spec = {"system": m.label, "data": data, "workload": wl["path"], "path": path, "pg": pg}
            t = time.perf_counter()
            out = _spawn(spec)
            print(f"      {time.perf_counter() - t:.1f} s" + (f": {out['error']}" if out.get("error") else ""),
                  file=sys.stderr)
            base = {"dataset": ds, "n": len(boxes), "system": m.label, "commit": wl["group"],
                    "queries_per_commit": a.moving_queries}
            rows.append(dict(base, **out))
            peers.remove(path)
    return rows


def _spawn(spec: dict) -> dict:
    r = subprocess.run([sys.executable, os.path.abspath(__file__), json.dumps(spec)], capture_output=True, text=True)
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if not lines:
        return {"error": (r.stderr.strip().splitlines() or ["no output"])[-1]}
    out = json.loads(lines[-1])
    if "error" in out and r.stderr:
        sys.stderr.write(r.stderr)
    return out


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    try:
        result = measure(spec)
    except Exception as e:  # reported to the driver, which records the failure
        traceback.print_exc()
        result = {"system": spec.get("system"), "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(result))
