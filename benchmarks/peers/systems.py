"""The systems the peer benchmark compares, each behind one small adapter.

Every adapter answers the same questions on the same data (``ids``: int64
array, ``boxes``: N×4 float64 array ``minx, miny, maxx, maxy``):

- ``build(path, ids, boxes, bulk)``: make a durable index at ``path`` (a
  directory the adapter owns) by inserting one object at a time
  (``bulk=False``) or by the system's bulk load (``bulk=True``); returns
  when the index is durable (committed, closed or checkpointed). An adapter
  without a bulk load raises :class:`Unsupported`.
- ``open(path)`` → handle; ``windows(handle, boxes)`` → list of id arrays
  (objects intersecting each window, touching counts);
  ``knn(handle, points, k)`` → list of distance arrays (the distances of the
  first ``k`` answers, nearest first); ``close(handle)``.
- ``size(path)``: bytes the index occupies on disk.

In-memory systems (``persistent = False``) build and query in one process.

The adapters use each system the way its documentation tells a user to,
with exact answers: SQLite's R*Tree stores 32-bit floats rounded outwards,
so its candidates are checked against the exact coordinates kept in
auxiliary columns; PostGIS checks ``ST_Intersects`` after its float4 ``&&``
filter; DuckDB's RTREE index serves ``ST_Intersects`` on the envelopes.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sqlite3
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np


class Unsupported(Exception):
    """The system has no such operation (shown as "—" in the report)."""


def dir_size(path: str) -> int:
    """Disk space of every regular file under ``path`` (or of ``path``
    itself): allocated blocks, as ``du`` counts them, so that sparse files
    (geoflash's log regions, trimmed after a checkpoint) count what they hold."""

    def used(p: str) -> int:
        st = os.stat(p)
        return st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size

    if os.path.isfile(path):
        return used(path)
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if os.path.isfile(p) and not os.path.islink(p):
                total += used(p)
    return total


def box_distances(boxes: np.ndarray, x: float, y: float) -> np.ndarray:
    """Euclidean distance from point ``(x, y)`` to each box (0 inside)."""
    dx = np.maximum(np.maximum(boxes[:, 0] - x, 0.0), x - boxes[:, 2])
    dy = np.maximum(np.maximum(boxes[:, 1] - y, 0.0), y - boxes[:, 3])
    return np.hypot(dx, dy)


def nearest_distances(nearest, points, k, boxes_by_id):
    """Distances of the first ``k`` ids ``nearest(x, y)`` yields for each
    point, ascending (ties past the k-th, which rtree's API returns, dropped)."""
    out = []
    for x, y in points.tolist():
        got = np.fromiter(nearest(x, y), dtype=np.int64)[:k]
        out.append(np.sort(box_distances(boxes_by_id[got], x, y)))
    return out


def batch_distances(ids, counts, points, k, boxes_by_id):
    """As :func:`nearest_distances`, for a batch kNN answer: ``ids`` of
    every point's neighbours one point after the other, ``counts`` per point."""
    out = []
    start = 0
    for (x, y), c in zip(points.tolist(), counts.tolist()):
        got = ids[start : start + min(c, k)]
        start += c
        out.append(np.sort(box_distances(boxes_by_id[got], x, y)))
    return out


class System:
    """Base of the adapters: a name, a variant label and capabilities."""

    name = "?"
    persistent = True
    has_knn = True
    #: The Python modules the adapter uses: the driver leaves the system out
    #: when one is missing (or fails under ``--strict``), and the worker
    #: imports them before it measures anything, since importing a library
    #: is a program's start-up, not part of building or querying an index.
    modules: Tuple[str, ...] = ()

    def __init__(self, variant: str = "default", **options):
        self.variant = variant
        self.options = options

    @property
    def label(self) -> str:
        """Name and variant as shown in tables."""
        return self.name if self.variant == "default" else f"{self.name} ({self.variant})"

    def load(self) -> None:
        """Imports :attr:`modules`, outside every measurement."""
        for m in self.modules:
            importlib.import_module(m)

    def prepare(self, path: str) -> None:
        """Work before a measured build that a user does once, not per index."""

    def size(self, path: str) -> int:
        return dir_size(path)

    def close(self, handle) -> None:
        close = getattr(handle, "close", None)
        if close is not None:
            close()


# --- geoflash ----------------------------------------------------------------


class Geoflash(System):
    """geoflash through its Python package (``geoflash.Index``)."""

    name = "geoflash"
    modules = ("geoflash",)

    def build(self, path, ids, boxes, bulk):
        import geoflash

        if bulk:
            idx = geoflash.Index.from_arrays(ids, boxes, path=path, **self.options)
        else:
            idx = geoflash.Index(path, **self.options)
            ins = idx.insert
            # One batch, durable at its end: what SQLite's one transaction is.
            with idx.batch():
                for i, b in zip(ids.tolist(), boxes.tolist()):
                    ins(i, b)
        idx.close()

    def open(self, path):
        import geoflash

        return geoflash.Index(path, readonly=True)

    def windows(self, handle, qs):
        offsets, found = handle.intersection_batch(qs)
        return [found[offsets[i] : offsets[i + 1]] for i in range(len(qs))]

    def windows_loop(self, handle, qs):
        return [np.fromiter(handle.intersection(tuple(q)), dtype=np.int64) for q in qs]

    def knn(self, handle, points, k, boxes_by_id):
        # One call for the batch, as windows go through intersection_batch.
        offsets, ids, _ = handle.nearest_batch(np.hstack([points, points]), k)
        return batch_distances(ids, np.diff(offsets), points, k, boxes_by_id)


class GeoflashMemory(Geoflash):
    """geoflash in memory (``geoflash.Index()`` without a path)."""

    persistent = False

    def build(self, path, ids, boxes, bulk):
        import geoflash

        if bulk:
            return geoflash.Index.from_arrays(ids, boxes, **self.options)
        idx = geoflash.Index(**self.options)
        ins = idx.insert
        for i, b in zip(ids.tolist(), boxes.tolist()):
            ins(i, b)
        return idx


# --- SQLite R*Tree -----------------------------------------------------------


class Sqlite(System):
    """SQLite's R*Tree module (Python's ``sqlite3``), one transaction per build.

    The R*Tree keeps 32-bit floats rounded outwards; auxiliary columns keep
    the exact coordinates, which the query checks (as a user who needs exact
    answers does). SQLite has no bulk load and no kNN.
    """

    name = "sqlite-rtree"
    has_knn = False

    def _db(self, path):
        return os.path.join(path, "index.sqlite")

    def build(self, path, ids, boxes, bulk):
        if bulk:
            raise Unsupported("SQLite's R*Tree has no bulk load")
        os.makedirs(path, exist_ok=True)
        con = self._cache(sqlite3.connect(self._db(path)))
        con.execute(
            "CREATE VIRTUAL TABLE rt USING rtree(id, minx, maxx, miny, maxy,"
            " +ex0 REAL, +ex1 REAL, +ey0 REAL, +ey1 REAL)"
        )
        with con:
            con.executemany(
                "INSERT INTO rt VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    (i, b[0], b[2], b[1], b[3], b[0], b[2], b[1], b[3])
                    for i, b in zip(ids.tolist(), boxes.tolist())
                ),
            )
        con.close()

    def open(self, path):
        return self._cache(sqlite3.connect(f"file:{self._db(path)}?mode=ro", uri=True))

    def _cache(self, con):
        """``con`` with the page cache of option ``cache_kib`` (SQLite's
        default, 2,000 KiB, without it)."""
        cache = self.options.get("cache_kib")
        if cache:
            con.execute(f"PRAGMA cache_size=-{int(cache)}")
        return con

    def windows(self, con, qs):
        sql = (
            "SELECT id FROM rt WHERE maxx >= ?1 AND minx <= ?3 AND maxy >= ?2 AND miny <= ?4"
            " AND ex1 >= ?1 AND ex0 <= ?3 AND ey1 >= ?2 AND ey0 <= ?4"
        )
        return [
            np.fromiter((r[0] for r in con.execute(sql, tuple(q))), dtype=np.int64)
            for q in qs.tolist()
        ]

    windows_loop = windows


# --- libspatialindex (rtree) -------------------------------------------------


class Rtree(System):
    """libspatialindex through the ``rtree`` package, disk index."""

    name = "rtree"
    modules = ("rtree",)

    def _props(self):
        import rtree

        p = rtree.index.Property()
        for k, v in self.options.items():
            setattr(p, k, v)
        return p

    def build(self, path, ids, boxes, bulk):
        import rtree

        os.makedirs(path, exist_ok=True)
        base = os.path.join(path, "rt")
        if bulk:
            stream = ((i, tuple(b), None) for i, b in zip(ids.tolist(), boxes.tolist()))
            idx = rtree.index.Index(base, stream, properties=self._props())
        else:
            idx = rtree.index.Index(base, properties=self._props())
            ins = idx.insert
            for i, b in zip(ids.tolist(), boxes.tolist()):
                ins(i, b)
        idx.close()

    def open(self, path):
        import rtree

        return rtree.index.Index(os.path.join(path, "rt"), properties=self._props())

    def windows(self, handle, qs):
        if hasattr(handle, "intersection_v"):
            found, counts = handle.intersection_v(
                np.ascontiguousarray(qs[:, :2]), np.ascontiguousarray(qs[:, 2:])
            )
            ends = np.cumsum(counts)
            starts = ends - counts
            return [found[s:e] for s, e in zip(starts, ends)]
        return self.windows_loop(handle, qs)

    def windows_loop(self, handle, qs):
        return [np.fromiter(handle.intersection(tuple(q)), dtype=np.int64) for q in qs.tolist()]

    def knn(self, handle, points, k, boxes_by_id):
        if hasattr(handle, "nearest_v"):
            pts = np.ascontiguousarray(points, dtype=np.float64)
            ids, counts = handle.nearest_v(pts, pts, num_results=k)
            return batch_distances(ids, counts, points, k, boxes_by_id)
        return nearest_distances(lambda x, y: handle.nearest((x, y, x, y), k), points, k, boxes_by_id)


class RtreeMemory(Rtree):
    """libspatialindex in memory."""

    persistent = False

    def build(self, path, ids, boxes, bulk):
        import rtree

        if bulk:
            stream = ((i, tuple(b), None) for i, b in zip(ids.tolist(), boxes.tolist()))
            return rtree.index.Index(stream, properties=self._props())
        idx = rtree.index.Index(properties=self._props())
        ins = idx.insert
        for i, b in zip(ids.tolist(), boxes.tolist()):
            ins(i, b)
        return idx


# --- DuckDB spatial ----------------------------------------------------------


def _duckdb_connect(path: str):
    import duckdb
    import duckdb_extension_spatial

    ext = os.path.join(
        os.path.dirname(duckdb_extension_spatial.__file__),
        "extensions",
        "v" + duckdb.__version__,
        "spatial.duckdb_extension",
    )
    if not os.path.exists(ext):
        raise RuntimeError(
            f"duckdb {duckdb.__version__} has no matching spatial extension in {ext}:"
            " install duckdb and duckdb-extension-spatial of the same version"
        )
    con = duckdb.connect(path)
    con.execute(f"LOAD '{ext}'")
    return con


class Duckdb(System):
    """DuckDB's persistent RTREE index (``CREATE INDEX ... USING RTREE``).

    Bulk: the table is filled, then the index created on it. By insertion:
    the index exists first and rows arrive in batches of 1,000 through one
    transaction (a row at a time through Python would measure the client).
    DuckDB has no kNN operator served by the index.
    """

    name = "duckdb"
    modules = ("duckdb", "duckdb_extension_spatial")
    has_knn = False

    def load(self):
        super().load()
        _frame({})  # imports pyarrow (or pandas), which the build hands its rows through

    def _db(self, path):
        return os.path.join(path, "index.duckdb")

    def build(self, path, ids, boxes, bulk):
        os.makedirs(path, exist_ok=True)
        con = self._limit(_duckdb_connect(self._db(path)))
        con.execute("CREATE TABLE t(id BIGINT, geom GEOMETRY)")
        table = {
            "id": ids,
            "x0": boxes[:, 0],
            "y0": boxes[:, 1],
            "x1": boxes[:, 2],
            "y1": boxes[:, 3],
        }
        if bulk:
            con.register("src", _frame(table))
            con.execute("INSERT INTO t SELECT id, ST_MakeEnvelope(x0, y0, x1, y1) FROM src")
            con.execute("CREATE INDEX t_rtree ON t USING RTREE (geom)")
        else:
            con.execute("CREATE INDEX t_rtree ON t USING RTREE (geom)")
            con.execute("BEGIN")
            step = 1000
            for s in range(0, len(ids), step):
                part = {k: v[s : s + step] for k, v in table.items()}
                con.register("src", _frame(part))
                con.execute("INSERT INTO t SELECT id, ST_MakeEnvelope(x0, y0, x1, y1) FROM src")
                con.unregister("src")
            con.execute("COMMIT")
        con.execute("CHECKPOINT")
        con.close()

    def open(self, path):
        return self._limit(_duckdb_connect(self._db(path)))

    def _limit(self, con):
        """``con`` with the ``memory_limit`` of option ``memory_kib``
        (DuckDB's default, 80 % of the machine's memory, without it)."""
        kib = self.options.get("memory_kib")
        if kib:
            con.execute(f"SET memory_limit='{int(kib)}KiB'")
        return con

    def windows(self, con, qs):
        # Literal constants: DuckDB plans its RTREE index scan only for a
        # constant envelope, not for a prepared statement's parameters.
        return [
            np.asarray(
                [r[0] for r in con.execute(
                    "SELECT id FROM t WHERE ST_Intersects(geom, ST_MakeEnvelope({!r}, {!r}, {!r}, {!r}))".format(*q)
                ).fetchall()],
                dtype=np.int64,
            )
            for q in qs.tolist()
        ]

    windows_loop = windows


def _frame(table: Dict[str, np.ndarray]):
    """A pyarrow table when pyarrow is installed, else a dict DuckDB scans."""
    try:
        import pyarrow as pa

        return pa.table(table)
    except ImportError:  # pragma: no cover - duckdb also scans pandas
        import pandas as pd

        return pd.DataFrame(table)


# --- PostGIS -----------------------------------------------------------------


class Postgis(System):
    """PostGIS GiST on a throw-away cluster (``pgtemp``), fsync on.

    Bulk: ``COPY`` then ``CREATE INDEX ... USING GIST``; by insertion: the
    index exists first and rows arrive through ``COPY`` in one transaction
    (each row updates the index as it arrives). The bytes written are those
    of the server's processes (read from ``/proc/PID/io``), after a
    ``CHECKPOINT`` so the data files count too.
    """

    name = "postgis"
    modules = ("psycopg",)

    def __init__(self, variant="default", cluster=None, **options):
        super().__init__(variant, **options)
        self.cluster = cluster

    def _db(self, path):
        return "b" + os.path.basename(os.path.normpath(path)).replace("-", "_").lower()

    def prepare(self, path):
        """A fresh database with PostGIS (not measured: a user's one-time setup)."""
        import psycopg

        db = self._db(path)
        with psycopg.connect(self.cluster.url("postgres"), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {db}")
            admin.execute(f"CREATE DATABASE {db}")
        with psycopg.connect(self.cluster.url(db), autocommit=True) as con:
            con.execute("CREATE EXTENSION IF NOT EXISTS postgis")
        self.checkpoint()

    def build(self, path, ids, boxes, bulk):
        import psycopg

        os.makedirs(path, exist_ok=True)
        db = self._db(path)
        with psycopg.connect(self.cluster.url(db)) as con:
            con.execute("CREATE TABLE t(id bigint, geom geometry(Polygon))")
            if not bulk:
                con.execute("CREATE INDEX t_gist ON t USING GIST (geom)")
            with con.cursor().copy("COPY t (id, geom) FROM STDIN") as cp:
                for i, b in zip(ids.tolist(), boxes.tolist()):
                    x0, y0, x1, y1 = b
                    cp.write_row(
                        (
                            i,
                            f"POLYGON(({x0!r} {y0!r},{x0!r} {y1!r},{x1!r} {y1!r},{x1!r} {y0!r},{x0!r} {y0!r}))",
                        )
                    )
            if bulk:
                con.execute("CREATE INDEX t_gist ON t USING GIST (geom)")
            con.commit()
        with open(os.path.join(path, "database"), "w") as f:
            f.write(db)

    def checkpoint(self):
        import psycopg

        with psycopg.connect(self.cluster.url("postgres"), autocommit=True) as con:
            con.execute("CHECKPOINT")

    def open(self, path):
        import psycopg

        return psycopg.connect(self.cluster.url(self._db(path)), autocommit=True)

    def windows(self, con, qs):
        sql = "SELECT id FROM t WHERE ST_Intersects(geom, ST_MakeEnvelope(%s, %s, %s, %s))"
        out = []
        for q in qs.tolist():
            out.append(np.asarray([r[0] for r in con.execute(sql, q).fetchall()], dtype=np.int64))
        return out

    windows_loop = windows

    def knn(self, con, points, k, boxes_by_id):
        sql = (
            "SELECT ST_Distance(geom, ST_MakePoint(%s, %s)) FROM t"
            " ORDER BY geom <-> ST_MakePoint(%s, %s) LIMIT %s"
        )
        out = []
        for x, y in points.tolist():
            rows = con.execute(sql, (x, y, x, y, k)).fetchall()
            out.append(np.sort(np.asarray([r[0] for r in rows], dtype=np.float64)))
        return out

    def size(self, path):
        import psycopg

        with psycopg.connect(self.cluster.url(self._db(path))) as con:
            (n,) = con.execute("SELECT pg_total_relation_size('t')").fetchone()
        return int(n)


# --- in memory only ----------------------------------------------------------


class ShapelyStrtree(System):
    """shapely 2's ``STRtree`` (a packed tree, built once, bulk only)."""

    name = "shapely-strtree"
    modules = ("shapely",)
    persistent = False
    has_knn = True

    def build(self, path, ids, boxes, bulk):
        import shapely

        if not bulk:
            raise Unsupported("STRtree cannot insert")
        geoms = shapely.box(boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3])
        tree = shapely.STRtree(geoms)
        return (tree, ids)

    def windows(self, handle, qs):
        import shapely

        tree, ids = handle
        pairs = tree.query(shapely.box(qs[:, 0], qs[:, 1], qs[:, 2], qs[:, 3]), predicate="intersects")
        order = np.argsort(pairs[0], kind="stable")
        q, t = pairs[0][order], pairs[1][order]
        bounds = np.searchsorted(q, np.arange(len(qs) + 1))
        return [ids[t[bounds[i] : bounds[i + 1]]] for i in range(len(qs))]

    windows_loop = windows

    def knn(self, handle, points, k, boxes_by_id):
        raise Unsupported("STRtree.query_nearest returns only the nearest (and its ties)")

    def close(self, handle):
        pass


class GeoIndex(System):
    """geo-index (``geoindex-rs``): a packed Hilbert R-tree, bulk only."""

    name = "geo-index"
    modules = ("geoindex_rs", "geoindex_rs.rtree")
    persistent = False

    def build(self, path, ids, boxes, bulk):
        from geoindex_rs import rtree as gi

        if not bulk:
            raise Unsupported("geo-index is a static packed tree")
        b = gi.RTreeBuilder(len(ids))
        cols = [np.ascontiguousarray(boxes[:, i]) for i in range(4)]
        b.add(*cols)
        return (b.finish(), ids)

    def windows(self, handle, qs):
        from geoindex_rs import rtree as gi

        tree, ids = handle
        return [ids[np.asarray(gi.search(tree, *q))] for q in qs.tolist()]

    windows_loop = windows

    def knn(self, handle, points, k, boxes_by_id):
        from geoindex_rs import rtree as gi

        tree, ids = handle
        out = []
        for x, y in points.tolist():
            got = np.asarray(gi.neighbors(tree, x, y, max_results=k))[:k]
            out.append(np.sort(box_distances(boxes_by_id[ids[got]], x, y)))
        return out

    def close(self, handle):
        pass


def parse_variant(text: str) -> Geoflash:
    """``NAME:key=value,key=value`` → an extra geoflash configuration on
    disk (``mem-NAME:...`` in memory); values are ``geoflash.Index``
    keyword arguments (numbers are converted, the rest stay strings)."""
    name, _, rest = text.partition(":")
    if not name or not rest:
        raise ValueError(f"--geoflash-variant {text!r}: expected NAME:key=value,...")
    opts = {}
    for kv in rest.split(","):
        k, eq, v = kv.partition("=")
        if not eq:
            raise ValueError(f"--geoflash-variant {text!r}: {kv!r} is not key=value")
        try:
            opts[k.strip()] = int(v) if v.strip().isdigit() else float(v) if v.replace(".", "", 1).isdigit() else v
        except ValueError:
            opts[k.strip()] = v
    if name.startswith("mem-"):
        return GeoflashMemory(name[4:] + ", memory", **opts)
    return Geoflash(name, **opts)


def geoflash_budget_kib() -> int:
    """geoflash's default memory budget on this machine, in KiB
    (``geoflash.DEFAULTS["buffer"]``, which follows the machine's memory)."""
    import geoflash

    text = geoflash.DEFAULTS["buffer"]
    for unit, kib in (("KiB", 1), ("MiB", 1 << 10), ("GiB", 1 << 20)):
        if text.endswith(unit) and text[: -len(unit)].isdigit():
            return int(text[: -len(unit)]) * kib
    raise ValueError(f"geoflash's default buffer {text!r} is not a whole number of KiB, MiB or GiB")


def make_systems(
    cluster=None,
    only: Optional[List[str]] = None,
    variants: Sequence[str] = (),
    exclude: Sequence[str] = (),
    equal_memory: bool = False,
) -> List[System]:
    """Every configuration the benchmark runs, in table order.

    ``only`` keeps the labels that start with one of its prefixes;
    ``exclude`` leaves out the labels it names exactly;
    ``variants`` adds geoflash configurations (:func:`parse_variant`);
    ``equal_memory`` gives SQLite's page cache and DuckDB's memory limit
    geoflash's default budget (PostgreSQL's ``shared_buffers`` is the
    cluster's: :class:`pgtemp.TempCluster`).
    """
    kib = geoflash_budget_kib() if equal_memory else None
    systems: List[System] = [
        Geoflash("default"),
        Geoflash(
            "papers",
            store="efind",
            buffer="512KiB",
            device="file",
            durability="none",
            reinsert_percent=30,
        ),
        *[parse_variant(v) for v in variants if not v.startswith("mem-")],
        Sqlite("default", **({"cache_kib": kib} if kib else {})),
        Rtree("default"),
        Rtree("buffer 128", buffering_capacity=128),
        Duckdb("default", **({"memory_kib": kib} if kib else {})),
    ]
    if cluster is not None:
        systems.append(Postgis("default", cluster=cluster))
    systems += [
        GeoflashMemory("memory"),
        *[parse_variant(v) for v in variants if v.startswith("mem-")],
        RtreeMemory("memory"),
        ShapelyStrtree("memory"),
        GeoIndex("memory"),
    ]
    excluded = set(exclude)
    unknown = excluded - {s.label for s in systems} - {"postgis"}
    if unknown:
        raise ValueError(f"--exclude: no system labelled {', '.join(sorted(unknown))}")
    if only:
        systems = [s for s in systems if any(s.label.startswith(p) for p in only)]
    return [s for s in systems if s.label not in excluded]


def remove(path: str) -> None:
    """Deletes an index directory if it exists."""
    shutil.rmtree(path, ignore_errors=True)
