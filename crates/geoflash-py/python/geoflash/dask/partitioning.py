"""Spatial partitioners: which partition an object belongs to, by the centre
of its box.

- ``HilbertPartitioner``: ranges of the Hilbert curve (order 16) over the
  extent of the centres, cut so that every range holds the same number of
  objects, as dask-geopandas' ``spatial_shuffle(by="hilbert")`` does; the
  curve is the engine's (``geom::HilbertDomain``, through
  ``geoflash._geoflash.hilbert_keys``), the one its Hilbert R-tree sorts by.
- ``KDPartitioner``: a k-d split of the plane, each cut at the median of the
  centres along the wider axis of the cell, as Sedona's KDB partitioning.

Every object goes to exactly one partition (no replication); a
partition's extent is the MBR of its objects, so objects that straddle a
cell border only widen their partition's extent. Both partitioners are
described by a JSON-able dict kept in the partition catalogue, from which
``from_dict`` rebuilds them (new objects are routed to their owner).
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

#: Order of the Hilbert curve (a 2**16 × 2**16 grid).
HILBERT_LEVEL = 16
#: The curve a catalogue's Hilbert ranges are drawn on (``to_dict``). Those
#: written before it (no "curve") used dask-geopandas' curve.
HILBERT_CURVE = "geoflash-hilbert"


def centres(boxes: np.ndarray) -> np.ndarray:
    """The N×2 centres of N×4 boxes ``minx, miny, maxx, maxy``."""
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    return np.column_stack([(b[:, 0] + b[:, 2]) / 2.0, (b[:, 1] + b[:, 3]) / 2.0])


def hilbert_keys(boxes: np.ndarray, domain: Sequence[float]) -> np.ndarray:
    """The Hilbert values of the boxes' centres on the grid over ``domain``
    (the centres' extent ``minx, miny, maxx, maxy``), computed by the
    engine; centres outside the domain are clamped onto it."""
    from .._geoflash import hilbert_keys as _keys

    b = np.ascontiguousarray(boxes, dtype=np.float64).reshape(-1, 4)
    if len(b) == 0:
        return np.empty(0, dtype=np.uint64)
    minx, miny, maxx, maxy = (float(v) for v in domain)
    # a degenerate axis (all centres on one line) gets a unit width
    dom = (minx, miny, maxx if maxx > minx else minx + 1.0, maxy if maxy > miny else miny + 1.0)
    return np.frombuffer(_keys(b.tobytes(), dom, HILBERT_LEVEL), dtype=np.uint64)


class HilbertPartitioner:
    """Hilbert ranges: partition ``p`` holds the keys from ``starts[p]`` up
    to the next larger start (the lowest start is 0). Starts need not be
    in order: a split appends a partition without renumbering the others."""

    by = "hilbert"

    def __init__(self, domain: Sequence[float], starts: Sequence[int]) -> None:
        self.domain = [float(v) for v in domain]
        self.starts = np.asarray(starts, dtype=np.uint64)

    @property
    def count(self) -> int:
        """The number of partitions."""
        return len(self.starts)

    @classmethod
    def fit(cls, keys: np.ndarray, domain: Sequence[float], partitions: int) -> "HilbertPartitioner":
        """Cuts the sorted ``keys`` into ``partitions`` ranges of equal
        counts (objects with one key stay together, so ranges may be
        fewer when keys repeat)."""
        k = np.sort(np.asarray(keys, dtype=np.uint64))
        n = len(k)
        cuts = set()
        for i in range(1, partitions):
            pos = (i * n) // partitions
            if 0 < pos < n and k[pos] > k[0]:
                cuts.add(int(k[pos]))
        return cls(domain, [0] + sorted(cuts))

    def assign(self, boxes: np.ndarray) -> np.ndarray:
        """The partition of every box."""
        keys = hilbert_keys(boxes, self.domain)
        order = np.argsort(self.starts, kind="stable")
        pos = np.searchsorted(self.starts[order], keys, side="right") - 1
        return order[pos].astype(np.int64)

    def split(self, p: int, boxes: np.ndarray) -> Optional["HilbertPartitioner"]:
        """The partitioner with partition ``p`` (holding ``boxes``) cut at
        the median key of its objects into ``p`` and a new last partition;
        None when all its objects share one key."""
        keys = np.sort(hilbert_keys(boxes, self.domain))
        if len(keys) < 2:
            return None
        cut = keys[len(keys) // 2]
        if cut == keys[0]:
            above = keys[keys > cut]
            if len(above) == 0:
                return None
            cut = above[0]
        return HilbertPartitioner(self.domain, list(self.starts) + [int(cut)])

    def to_dict(self) -> dict:
        """The JSON-able description kept in the catalogue."""
        return {
            "by": self.by,
            "curve": HILBERT_CURVE,
            "domain": self.domain,
            "starts": [int(c) for c in self.starts],
        }


def cut_cell(pts: np.ndarray, cell: List[float], share: float) -> Optional[tuple]:
    """Cuts ``cell`` holding the centres ``pts`` along the axis where they
    spread wider, at the centre below which ``share`` of them lie (moved
    up when that would leave the lower half empty): ``((lower cell, mask),
    (upper cell, mask))``, or None when the centres coincide."""
    if len(pts) < 2:
        return None
    spread = pts.max(axis=0) - pts.min(axis=0)
    axis = 0 if spread[0] >= spread[1] else 1
    if spread[axis] == 0:
        return None
    v = np.sort(pts[:, axis])
    cut = float(v[min(len(v) - 1, int(len(v) * share))])
    if cut == v[0]:
        cut = float(v[v > cut][0])
    lo_cell, hi_cell = list(cell), list(cell)
    lo_cell[axis + 2] = cut
    hi_cell[axis] = cut
    below = pts[:, axis] < cut
    return (lo_cell, below), (hi_cell, ~below)


class KDPartitioner:
    """A k-d split: ``cells[i]`` is the half-open box ``[x0, x1) × [y0, y1)``
    of partition ``i``; the cells tile the plane (the outer ones reach
    infinity)."""

    by = "kd"

    def __init__(self, cells: Sequence[Sequence[float]]) -> None:
        self.cells = np.asarray(cells, dtype=np.float64).reshape(-1, 4)

    @property
    def count(self) -> int:
        """The number of partitions."""
        return len(self.cells)

    @classmethod
    def fit(cls, points: np.ndarray, partitions: int) -> "KDPartitioner":
        """Splits the plane into ``partitions`` cells holding equal shares
        of ``points`` (N×2 centres): each cell is cut at the median along
        the axis where its points spread wider, the halves getting
        ``floor(p/2)`` and ``ceil(p/2)`` of its ``p`` partitions."""
        inf = np.inf
        cells: List[List[float]] = []

        def split(pts: np.ndarray, cell: List[float], p: int) -> None:
            halves = None if p <= 1 else cut_cell(pts, cell, (p // 2) / p)
            if halves is None:
                cells.append(cell)
                return
            (lo_cell, below), (hi_cell, above) = halves
            split(pts[below], lo_cell, p // 2)
            split(pts[above], hi_cell, p - p // 2)

        split(np.asarray(points, dtype=np.float64).reshape(-1, 2), [-inf, -inf, inf, inf], partitions)
        return cls(cells)

    def assign(self, boxes: np.ndarray) -> np.ndarray:
        """The partition of every box (the cell holding its centre)."""
        c = centres(boxes)
        out = np.full(len(c), -1, dtype=np.int64)
        for i, (x0, y0, x1, y1) in enumerate(self.cells):
            inside = (c[:, 0] >= x0) & (c[:, 0] < x1) & (c[:, 1] >= y0) & (c[:, 1] < y1)
            out[inside] = i
        if (out < 0).any():  # NaN centres fall in no cell
            raise ValueError("boxes with NaN coordinates cannot be partitioned")
        return out

    def split(self, p: int, boxes: np.ndarray) -> Optional["KDPartitioner"]:
        """The partitioner with cell ``p`` (holding ``boxes``) cut at the
        median of their centres into ``p`` (the lower half) and a new last
        cell; None when all its centres coincide."""
        halves = cut_cell(centres(boxes), list(self.cells[p]), 0.5)
        if halves is None:
            return None
        (lo_cell, _), (hi_cell, _) = halves
        cells = [list(c) for c in self.cells]
        cells[p] = lo_cell
        return KDPartitioner(cells + [hi_cell])

    def to_dict(self) -> dict:
        """The JSON-able description kept in the catalogue (infinities as None)."""
        return {
            "by": self.by,
            "cells": [[None if not np.isfinite(v) else float(v) for v in c] for c in self.cells],
        }


def from_dict(d: Any) -> Any:
    """The partitioner a catalogue describes."""
    if d.get("by") == "hilbert":
        if d.get("curve") != HILBERT_CURVE:
            raise ValueError(
                f"the Hilbert partitions were drawn on another curve ({d.get('curve') or 'dask-geopandas'}) "
                f"than this geoflash's ({HILBERT_CURVE}): new objects cannot be routed; rebuild the "
                "partitioned index with geoflash.dask.build"
            )
        return HilbertPartitioner(d["domain"], d["starts"])
    if d.get("by") == "kd":
        cells = [
            [(-np.inf if j < 2 else np.inf) if v is None else v for j, v in enumerate(c)]
            for c in d["cells"]
        ]
        return KDPartitioner(cells)
    raise ValueError(f"unknown partitioning {d.get('by')!r}: expected 'hilbert' or 'kd'")
