"""One measured phase of the peer benchmark, in a process of its own.

The driver (``run.py``) starts ``python worker.py SPEC_JSON`` for every
phase so that each query phase starts cold (a new process that opens the
index again; the OS page cache is left as it is, as for a user who starts a
new program) and so that ``/proc/self/io`` counts only this phase's writes.
The worker prints one JSON object on its last line of standard output.

Phases (``spec["phase"]``):

- ``build``: a persistent system builds its index by insertion or bulk load;
  measures wall and CPU time, bytes written (the kernel's ``write_bytes``,
  plus the server's for PostGIS) and the index size.
- ``windows``: opens the index and answers the windows of one selectivity:
  the first pass is ``cold``, then ``warm_repeat`` passes give the ``warm``
  median; the answers are checked against a brute-force oracle.
- ``knn``: the same for kNN at ``k``.
- ``memory``: an in-memory system builds (bulk and by insertion, where it
  can) and answers every window set and the kNN points, warm, on the
  bulk-loaded index (the other one is released first).

Before it measures anything the worker imports the system's modules
(``System.load``): importing a library is a program's start-up, not part of
building or querying an index.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import systems as peers  # noqa: E402
from pgtemp import ClusterRef  # noqa: E402


def written_bytes() -> int:
    """This process's ``write_bytes`` from ``/proc/self/io`` (0 where absent)."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Meter:
    """Wall time, CPU time and bytes written over a ``with`` block."""

    def __init__(self, cluster=None):
        self.cluster = cluster

    def __enter__(self):
        self.w0, self.c0, self.b0 = time.perf_counter(), cpu_seconds(), written_bytes()
        self.s0 = self.cluster.written_bytes() if self.cluster else 0
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.w0
        self.cpu = cpu_seconds() - self.c0
        self.bytes = written_bytes() - self.b0

    def server_bytes(self) -> int:
        return (self.cluster.written_bytes() - self.s0) if self.cluster else 0


def oracle_windows(boxes, ids, qs):
    """Ids intersecting each window (touching counts), by brute force."""
    out = []
    for q in qs:
        m = (boxes[:, 0] <= q[2]) & (boxes[:, 2] >= q[0]) & (boxes[:, 1] <= q[3]) & (boxes[:, 3] >= q[1])
        out.append(np.sort(ids[m]))
    return out


def oracle_knn(boxes, points, k):
    """The ``k`` smallest box distances of each point, ascending."""
    out = []
    for x, y in points.tolist():
        d = peers.box_distances(boxes, x, y)
        kk = min(k, len(d))
        out.append(np.sort(np.partition(d, kk - 1)[:kk]) if kk else d[:0])
    return out


def mismatches_windows(got, want):
    return sum(1 for g, w in zip(got, want) if not np.array_equal(np.sort(np.asarray(g, dtype=np.int64)), w))


def mismatches_knn(got, want):
    return sum(1 for g, w in zip(got, want) if len(g) != len(w) or not np.allclose(g, w, rtol=0, atol=1e-9))


def timed_passes(fn, repeat):
    """(first answer, seconds of the first pass, median seconds of ``repeat`` more)."""
    t = time.perf_counter()
    first = fn()
    cold = time.perf_counter() - t
    warm = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        warm.append(time.perf_counter() - t)
    return first, cold, (statistics.median(warm) if warm else None)


def find_system(spec, cluster):
    for s in peers.make_systems(cluster=cluster, variants=spec.get("variants", []),
                                equal_memory=spec.get("equal_memory", False)):
        if s.label == spec["system"]:
            return s
    raise SystemExit(f"worker: unknown system {spec['system']!r}")


def main(spec):
    cluster = ClusterRef(**spec["pg"]) if spec.get("pg") else None
    system = find_system(spec, cluster)
    system.load()
    data = np.load(spec["data"])
    ids, boxes = data["ids"], data["boxes"]
    phase = spec["phase"]
    out = {"system": system.label, "phase": phase}
    if phase == "build":
        system.prepare(spec["path"])
        meter = Meter(cluster)
        with meter:
            system.build(spec["path"], ids, boxes, spec["bulk"])
        if isinstance(system, peers.Postgis):
            system.checkpoint()
        out.update(
            wall_s=meter.wall,
            cpu_s=meter.cpu,
            bytes_written=meter.bytes + meter.server_bytes(),
            size_bytes=system.size(spec["path"]),
        )
        return out
    if phase in ("windows", "knn"):
        t = time.perf_counter()
        handle = system.open(spec["path"])
        out["open_s"] = time.perf_counter() - t
        try:
            out.update(run_queries(system, handle, spec, ids, boxes))
        finally:
            system.close(handle)
        return out
    if phase == "memory":
        return run_memory(system, spec, ids, boxes, out)
    raise SystemExit(f"worker: unknown phase {phase!r}")


def run_queries(system, handle, spec, ids, boxes):
    repeat = spec["warm_repeat"]
    if spec["phase"] == "windows":
        qs = np.load(spec["windows"])
        got, cold, warm = timed_passes(lambda: system.windows(handle, qs), repeat)
        want = oracle_windows(boxes, ids, qs)
        return dict(cold_s=cold, warm_s=warm, mismatches=mismatches_windows(got, want), answers=int(sum(len(w) for w in want)))
    points = np.load(spec["points"])
    k = spec["k"]
    by_id = boxes_by_id(ids, boxes)
    got, cold, warm = timed_passes(lambda: system.knn(handle, points, k, by_id), repeat)
    return dict(cold_s=cold, warm_s=warm, mismatches=mismatches_knn(got, oracle_knn(boxes, points, k)))


def boxes_by_id(ids, boxes):
    """A lookup table id → box (ids are 0..N-1 in the benchmark's data)."""
    table = np.full((int(ids.max()) + 1 if len(ids) else 0, 4), np.nan)
    table[ids] = boxes
    return table


def run_memory(system, spec, ids, boxes, out):
    builds = {}
    handle = None
    bulk_only = spec.get("builds") == "bulk"
    for bulk in (True, False):
        if bulk_only and not bulk and handle is not None:
            break  # the bulk load ran: the build by insertion is not asked for
        meter = Meter()
        try:
            with meter:
                h = system.build(None, ids, boxes, bulk)
        except peers.Unsupported:
            continue
        builds["bulk" if bulk else "insert"] = dict(wall_s=meter.wall, cpu_s=meter.cpu)
        if handle is None:
            handle = h  # the bulk-loaded index when there is one
        else:
            system.close(h)  # one index alive while the queries are timed
        h = None
    out["builds"] = builds
    queries = {}
    repeat = max(1, spec["warm_repeat"])
    for name, path in spec["window_sets"].items():
        qs = np.load(path)
        got, _cold, warm = timed_passes(lambda: system.windows(handle, qs), repeat)
        queries[name] = dict(warm_s=warm, mismatches=mismatches_windows(got, oracle_windows(boxes, ids, qs)))
    if system.has_knn:
        points = np.load(spec["points"])
        by_id = boxes_by_id(ids, boxes)
        try:
            got, _cold, warm = timed_passes(lambda: system.knn(handle, points, spec["k"], by_id), repeat)
            queries["knn"] = dict(warm_s=warm, mismatches=mismatches_knn(got, oracle_knn(boxes, points, spec["k"])))
        except peers.Unsupported:
            pass
    out["queries"] = queries
    return out


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    try:
        result = main(spec)
    except Exception as e:  # reported to the driver, which records the failure
        if not isinstance(e, peers.Unsupported):  # an operation the system lacks is no failure
            traceback.print_exc()
        result = {"system": spec.get("system"), "phase": spec.get("phase"), "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(result))
