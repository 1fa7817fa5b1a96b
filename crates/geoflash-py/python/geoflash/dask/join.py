"""Spatial joins of two datasets on the cluster: ``join`` (pairs of ids)
and ``sjoin`` (a GeoDataFrame, as ``geopandas.sjoin``).

``sjoin`` of two GeoDataFrames cuts the left one into Hilbert ranges of
equal counts and sends each, with the right rows whose boxes meet its
extent (grown by the distance), to a task that runs the in-process join
(``geoflash.joins.predicate_pairs``); the client assembles the frame for
``how`` as ``geoflash.sjoin`` does. Below ``local_below`` rows in all it
runs ``geoflash.sjoin`` in this process, which is faster there.

Each side is a ``PartitionedIndex`` (data is first built into a temporary
one). When one side has at most ``broadcast`` objects it is sent whole to
every worker (as Sedona broadcasts the small side) and joined with each
partition of the other side, one task each. Otherwise only the pairs of
partitions whose extents meet (grown by the distance) are joined, one task
per pair, run where the left partition lives with the right partition's
entries shipped to it (as dask-geopandas prunes by ``spatial_partitions``).
Candidates come from the partition's geoflash index, and are refined on
the exact geometries with shapely.

No pair is reported twice: every object lives in exactly one partition
(partitions are not replicated across cell borders), so a pair is found
only by the task of its two objects' partitions. Sedona's reference-point
rule, which removes the duplicates that replication creates, has nothing
to remove here; ``join`` checks this invariant on its answer.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, List, Optional, Tuple

import numpy as np

from .. import joins as _joins
from .._exact import PREDICATES as _QUERY_PREDICATES
from . import progress as _progress
from . import worker
from .building import _is_dask_collection, _is_frame, _is_frame_list, _array_input, build
from .cluster import get_client, worker_addresses
from .partitioned import PartitionedIndex, meets
from .partitioning import HilbertPartitioner, hilbert_keys

#: The predicates of ``join`` and ``sjoin``: those of ``Index.query``.
PREDICATES = tuple(p for p in _QUERY_PREDICATES if p is not None)
#: Rows (left and right together) below which ``sjoin`` joins in this
#: process: on 2 workers of this 2-core machine the cluster was 2.6 to 11
#: times slower from 12,000 to 1,200,000 rows (docs/scaleout.md), where the
#: in-process join already runs on both cores; local_below=0 forces the
#: cluster.
LOCAL_BELOW = 10_000_000


def _count(data: Any) -> int:
    if isinstance(data, PartitionedIndex):
        return len(data)
    if _is_dask_collection(data):
        return int(len(data))
    if _is_frame(data):
        return len(data)
    if _is_frame_list(data):
        return sum(len(f) for f in data)
    if isinstance(data, (str, os.PathLike)):
        return -1  # unknown without reading: never broadcast
    return len(_array_input(data, None)[1])


def _crs(data: Any) -> Optional[str]:
    if isinstance(data, PartitionedIndex):
        return data.crs
    if _is_frame_list(data):
        found = {f.crs.to_string() for f in data if f.crs is not None}
        if len(found) > 1:
            raise ValueError("mixed CRS in the input: " + ", ".join(sorted(found)) + " (reproject with to_crs first)")
        return found.pop() if found else None
    crs = getattr(data, "crs", None)
    return None if crs is None else crs.to_string()


def _small_chunk(client: Any, data: Any) -> dict:
    """The whole of a small side as one chunk."""
    if isinstance(data, PartitionedIndex):
        parts = client.gather([data.read_partition(n) for n in range(len(data.partitions))])
        if not parts:
            return worker.array_chunk(np.empty(0, dtype=np.int64), np.empty((0, 4)))
        with_wkb = all(p["wkb"] is not None for p in parts)
        return {
            "ids": np.concatenate([p["ids"] for p in parts]),
            "boxes": np.concatenate([p["boxes"] for p in parts]),
            "wkb": [w for p in parts for w in p["wkb"]] if with_wkb else None,
            "crs": data.crs,
        }
    if _is_dask_collection(data):
        data = data.compute()
    if _is_frame(data):
        return worker.frame_chunk(data)
    if _is_frame_list(data):  # ids: positions in the frames' concatenation, as build gives them
        chunks, offset = [], 0
        for f in data:
            c = worker.frame_chunk(f)
            chunks.append(worker.offset_chunk(c, offset))
            offset += c["rows"]
        return {
            "ids": np.concatenate([c["ids"] for c in chunks]),
            "boxes": np.concatenate([c["boxes"] for c in chunks]).reshape(-1, 4),
            "wkb": [w for c in chunks for w in c["wkb"]],
            "crs": _crs(data),
        }
    return worker.array_chunk(*_array_input(data, None))


def join(
    left: Any,
    right: Any,
    predicate: str = "intersects",
    distance: Optional[float] = None,
    *,
    client: Any = None,
    broadcast: int = 100_000,
    partitions: Optional[int] = None,
    by: str = "hilbert",
    workdir: Any = None,
    timeout: float = 10.0,
    progress: bool = True,
) -> np.ndarray:
    """The pairs of ids ``(left id, right id)`` whose geometries satisfy
    ``predicate(left, right)``: ``"intersects"``, ``"within"``,
    ``"contains"``, or ``"dwithin"`` (within ``distance``), as a 2×M int64
    array sorted by left id then right id. ``left`` and ``right``: a
    ``PartitionedIndex`` or any data ``geoflash.dask.build`` takes (built
    into temporary partitioned indexes under ``workdir`` with
    ``partitions`` and ``by``, removed after). A side of at most
    ``broadcast`` objects is broadcast (0: never). ``progress``: print on
    standard error how many tasks are done (``geoflash.dask.progress``)."""
    if predicate not in PREDICATES:
        raise ValueError(f"unknown predicate {predicate!r}: use one of {PREDICATES}")
    if predicate == "dwithin":
        if distance is None or not float(distance) >= 0:
            raise ValueError("predicate 'dwithin' needs a distance >= 0")
        d = float(distance)
    elif distance is not None:
        raise ValueError(f"distance is only for predicate 'dwithin', not {predicate!r}")
    else:
        d = 0.0
    lc, rc = _crs(left), _crs(right)
    if lc is not None and rc is not None and lc != rc:
        raise ValueError(f"mixed CRS: the left side is in {lc}, the right side in {rc} (reproject one with to_crs)")
    client = get_client(client, timeout)
    temp = tempfile.mkdtemp(prefix="geoflash-join-", dir=None if workdir is None else os.fspath(workdir))
    try:
        sides = [left, right]
        counts = [_count(left), _count(right)]
        small = None
        known = [c for c in counts if c >= 0]
        if broadcast > 0 and known and min(known) <= broadcast:
            small = int(np.argmin([c if c >= 0 else np.inf for c in counts]))
        for s in range(2):
            if s != small and not isinstance(sides[s], PartitionedIndex):
                sides[s] = build(
                    sides[s], os.path.join(temp, f"side{s}"), partitions, by, client=client, progress=progress
                )
        if small is not None:
            big = sides[1 - small]
            shipped = client.scatter(_small_chunk(client, sides[small]), broadcast=True, hash=False)
            futs = [
                big._submit(n, worker.join_with, shipped, predicate, d, small == 1)
                for n in range(len(big.partitions))
            ]
        else:
            li, ri = sides
            hit = meets(ri._extents, li._extents, d)
            reads = {}
            futs = []
            for p, q in zip(*np.nonzero(hit)):
                if q not in reads:
                    reads[q] = ri.read_partition(int(q))
                futs.append(li._submit(int(p), worker.join_with, reads[q], predicate, d, True))
        found: List[Tuple[np.ndarray, np.ndarray]] = _progress.gather(client, futs, "join: tasks", progress)
    finally:
        client.run(worker.forget_under, temp)
        shutil.rmtree(temp, ignore_errors=True)
    pairs = np.vstack(
        [
            np.concatenate([f[0] for f in found] + [np.empty(0, dtype=np.int64)]),
            np.concatenate([f[1] for f in found] + [np.empty(0, dtype=np.int64)]),
        ]
    ).astype(np.int64)
    pairs = pairs[:, np.lexsort((pairs[1], pairs[0]))]
    if pairs.shape[1] > 1 and (np.diff(pairs, axis=1) == 0).all(axis=0).any():
        raise AssertionError("join found a pair twice: a partition holds an object another also holds")
    return pairs


def _left_parts(left_boxes: np.ndarray, parts: int) -> List[np.ndarray]:
    """The left row positions cut into ``parts`` Hilbert ranges of equal
    counts of their box centres (rows without a box are left out)."""
    ok = np.flatnonzero(np.isfinite(left_boxes).all(axis=1))
    if len(ok) == 0:
        return []
    b = left_boxes[ok]
    cx, cy = (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2
    domain = [float(cx.min()), float(cy.min()), float(cx.max()), float(cy.max())]
    part = HilbertPartitioner.fit(hilbert_keys(b, domain), domain, parts)
    owner = part.assign(b)
    return [ok[owner == p] for p in range(part.count) if (owner == p).any()]


def _part_pairs(
    left_wkb: np.ndarray, right_wkb: np.ndarray, predicate: Optional[str], distance: Any
) -> Tuple[np.ndarray, np.ndarray]:
    """A task of ``sjoin``: the in-process join of one left part and the
    right rows near it (positions within them), given as WKB (shipped as
    bytes: pickling shapely geometries one by one costs more than the join)."""
    import shapely

    return _joins.predicate_pairs(shapely.from_wkb(left_wkb), shapely.from_wkb(right_wkb), predicate, distance)


def sjoin(
    left: Any,
    right: Any,
    how: str = "inner",
    predicate: Optional[str] = "intersects",
    distance: Any = None,
    *,
    lsuffix: str = "left",
    rsuffix: str = "right",
    client: Any = None,
    partitions: Optional[int] = None,
    local_below: int = LOCAL_BELOW,
    timeout: float = 10.0,
    progress: bool = True,
) -> Any:
    """``geopandas.sjoin(left, right, how=how, predicate=predicate,
    distance=distance)`` of two GeoDataFrames, on the cluster: the result
    of ``geoflash.sjoin`` (the same rows, columns and order).

    Below ``local_below`` rows in all (0: never) it is ``geoflash.sjoin``
    in this process. Otherwise the left rows are cut into ``partitions``
    Hilbert ranges (default: twice the number of workers), and each range
    is joined in process on a worker with the right rows whose boxes meet
    its extent (grown by ``distance``); every left row lives in one range,
    so no pair is found twice. ``distance`` (``dwithin``): one number, or
    one per left row (as ``geoflash.sjoin``; each range's extent is grown
    by its own rows' distances). ``progress``: print on standard error how
    many ranges are joined."""
    import shapely

    _joins._check_frames(left, right, how, "sjoin")
    if predicate not in PREDICATES and predicate is not None:
        raise ValueError(f"unknown predicate {predicate!r}: use one of {PREDICATES} or None")
    per_row = None
    if predicate == "dwithin":
        d, per_row = _joins._distances(distance, len(left))
    elif distance is not None:
        raise ValueError(f"distance is only for predicate 'dwithin', not {predicate!r}")
    else:
        d = 0.0
    if len(left) + len(right) < local_below:
        return _joins.sjoin(left, right, how, predicate, lsuffix, rsuffix, distance)
    client = get_client(client, timeout)
    if partitions is None:
        partitions = 2 * max(1, len(worker_addresses(client)))
    lg, rg = _joins._geometries(left), _joins._geometries(right)
    lb = shapely.bounds(lg)
    rb = shapely.bounds(rg)
    lw, rw = shapely.to_wkb(lg), shapely.to_wkb(rg)
    rok = np.isfinite(rb).all(axis=1)
    futs, where = [], []
    for rows in _left_parts(lb, int(partitions)):
        # the range's boxes grown by their distances (one for all, or each row's own)
        grow = d if per_row is None else per_row[rows]
        e = lb[rows]
        x0, y0 = np.nanmin(e[:, 0] - grow), np.nanmin(e[:, 1] - grow)
        x1, y1 = np.nanmax(e[:, 2] + grow), np.nanmax(e[:, 3] + grow)
        near = np.flatnonzero(rok & (rb[:, 0] <= x1) & (rb[:, 2] >= x0) & (rb[:, 1] <= y1) & (rb[:, 3] >= y0))
        if len(near) == 0:
            continue
        dist = None if predicate != "dwithin" else (d if per_row is None else per_row[rows])
        # scattered, not embedded in the task graph (large graphs are slow)
        lpart, rpart = client.scatter([lw[rows], rw[near]], hash=False)
        futs.append(client.submit(_part_pairs, lpart, rpart, predicate, dist, pure=False))
        where.append((rows, near))
    found = _progress.gather(client, futs, "sjoin: ranges", progress)
    empty = np.empty(0, dtype=np.int64)
    li = np.concatenate([rows[f[0]] for (rows, _), f in zip(where, found)] + [empty]).astype(np.int64)
    ri = np.concatenate([near[f[1]] for (_, near), f in zip(where, found)] + [empty]).astype(np.int64)
    joined, _ = _joins.assemble(left, right, li, ri, how, lsuffix, rsuffix)
    return joined
