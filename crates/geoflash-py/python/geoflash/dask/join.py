"""Spatial joins of two datasets on the cluster: ``join`` (pairs of ids)
and ``sjoin`` (a GeoDataFrame, as ``geopandas.sjoin``).

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

from . import worker
from .building import _is_dask_collection, _is_frame, _array_input, build
from .cluster import get_client
from .partitioned import PartitionedIndex, meets

PREDICATES = ("intersects", "within", "contains", "dwithin")


def _count(data: Any) -> int:
    if isinstance(data, PartitionedIndex):
        return len(data)
    if _is_dask_collection(data):
        return int(len(data))
    if _is_frame(data):
        return len(data)
    if isinstance(data, (str, os.PathLike)):
        return -1  # unknown without reading: never broadcast
    return len(_array_input(data, None)[1])


def _crs(data: Any) -> Optional[str]:
    if isinstance(data, PartitionedIndex):
        return data.crs
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
) -> np.ndarray:
    """The pairs of ids ``(left id, right id)`` whose geometries satisfy
    ``predicate(left, right)``: ``"intersects"``, ``"within"``,
    ``"contains"``, or ``"dwithin"`` (within ``distance``), as a 2×M int64
    array sorted by left id then right id. ``left`` and ``right``: a
    ``PartitionedIndex`` or any data ``geoflash.dask.build`` takes (built
    into temporary partitioned indexes under ``workdir`` with
    ``partitions`` and ``by``, removed after). A side of at most
    ``broadcast`` objects is broadcast (0: never)."""
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
                sides[s] = build(sides[s], os.path.join(temp, f"side{s}"), partitions, by, client=client)
        if small is not None:
            big = sides[1 - small]
            shipped = client.scatter(_small_chunk(client, sides[small]), broadcast=True)
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
        found: List[Tuple[np.ndarray, np.ndarray]] = client.gather(futs)
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


def sjoin(left: Any, right: Any, predicate: str = "intersects", distance: Optional[float] = None, **options: Any) -> Any:
    """``geopandas.sjoin(left, right, how="inner", predicate=...)`` of two
    GeoDataFrames computed by ``join`` on the cluster: the left rows (with
    their index and geometry) of every pair, the right index in
    ``index_right`` and the right columns (names in both get ``_left`` and
    ``_right``). ``options`` are those of ``join``."""
    import geopandas

    for side, what in ((left, "left"), (right, "right")):
        if not isinstance(side, geopandas.GeoDataFrame):
            raise ValueError(f"sjoin takes two GeoDataFrames; the {what} side is a {type(side).__name__} (use join)")
    li, ri = join(left, right, predicate, distance, **options)
    out = left.iloc[li]
    rcols = [c for c in right.columns if c != right.geometry.name]
    both = set(rcols) & set(c for c in left.columns if c != left.geometry.name)
    out = out.rename(columns={c: f"{c}_left" for c in both})
    out = geopandas.GeoDataFrame(out, geometry=left.geometry.name, crs=left.crs)
    out["index_right"] = right.index.values[ri]
    for c in rcols:
        out[f"{c}_right" if c in both else c] = right[c].values[ri]
    return out
