"""``PartitionedIndex``: queries over the partitions a catalogue names,
each partition's part of a query run as a Dask task on the worker where
the partition lives.

- Windows and points go to the partitions whose extent they meet; a batch
  of windows is grouped per partition, one task each.
- kNN visits partitions in order of their extent's distance to the query,
  one round of tasks at a time (a batch of queries: one task per partition
  per round), and stops once the next partition is farther than the
  current k-th distance. Entries tied at the k-th distance are all
  returned, as ``geoflash.Index.nearest`` does.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import catalogue, worker
from .cluster import get_client, worker_addresses, worker_host


def as_box(coordinates: Any) -> Tuple[float, float, float, float]:
    """A point ``(x, y)`` or box ``(minx, miny, maxx, maxy)`` as a box."""
    try:
        c = [float(v) for v in coordinates]
    except (TypeError, ValueError) as e:
        raise ValueError(f"coordinates must be 2 or 4 numbers: {e}") from None
    if len(c) == 2:
        return (c[0], c[1], c[0], c[1])
    if len(c) != 4:
        raise ValueError(f"coordinates must be 2 numbers (a point) or 4 (a box), not {len(c)}")
    return (c[0], c[1], c[2], c[3])


def as_boxes(boxes: Any) -> np.ndarray:
    """An N×4 (or N×2 points) array as N×4 float64 boxes."""
    b = np.asarray(boxes)
    if b.ndim == 2 and b.shape[1] == 2:
        b = np.hstack([b, b])
    if b.ndim != 2 or b.shape[1] != 4:
        raise ValueError(f"boxes must be an N×4 (or N×2 points) array, not of shape {b.shape}")
    if not np.issubdtype(b.dtype, np.number) or np.issubdtype(b.dtype, np.complexfloating):
        raise ValueError(f"boxes must be real numbers, not {b.dtype}")
    return np.ascontiguousarray(b, dtype=np.float64)


def meets(extents: np.ndarray, boxes: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """N×P: whether box i (grown by ``margin``) meets extent p."""
    return (
        (extents[None, :, 0] <= boxes[:, None, 2] + margin)
        & (extents[None, :, 2] >= boxes[:, None, 0] - margin)
        & (extents[None, :, 1] <= boxes[:, None, 3] + margin)
        & (extents[None, :, 3] >= boxes[:, None, 1] - margin)
    )


class PartitionedIndex:
    """A partitioned index opened from its catalogue (``path``), queried on
    a Dask cluster (``client``: see ``geoflash.dask.get_client``).
    Ids are those given at build time (row positions of a GeoDataFrame)."""

    def __init__(self, path: Any, client: Any = None, timeout: float = 10.0) -> None:
        self.path = os.path.abspath(os.fsdecode(os.fspath(path)))
        self._load(catalogue.read(self.path))
        self.client = get_client(client, timeout)
        self._place()

    def _load(self, cat: Dict[str, Any]) -> None:
        self.catalogue: Dict[str, Any] = cat
        self.partitions: List[Dict[str, Any]] = [p for p in cat["partitions"] if p["count"] > 0]
        self._dirs = [catalogue.partition_dir(self.path, p) for p in self.partitions]
        self._extents = np.array([p["extent"] for p in self.partitions], dtype=np.float64).reshape(-1, 4)
        self._shared = [not os.path.isabs(p["path"]) for p in self.partitions]

    def _place(self) -> None:
        """The worker each partition's tasks run on: the one that built it
        while it lives, else a worker on the partition's host (round robin),
        else (a partition under the catalogue's directory) any worker."""
        workers = worker_addresses(self.client)
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        by_host: Dict[str, List[str]] = defaultdict(list)
        for w in workers:
            by_host[worker_host(w)].append(w)
        self._where: List[str] = []
        for n, p in enumerate(self.partitions):
            if p.get("worker") in workers:
                self._where.append(p["worker"])
                continue
            hosts = by_host.get(p.get("host", ""), [])
            if hosts:
                self._where.append(hosts[n % len(hosts)])
            elif self._shared[n]:
                self._where.append(workers[n % len(workers)])
            else:
                raise catalogue.CatalogueError(
                    f"partition {p['id']} lives on the disk of host {p.get('host')!r}, "
                    f"where no worker of this cluster runs"
                )

    def _submit(self, n: int, fn: Any, *args: Any) -> Any:
        """Runs ``fn(partition n's directory, *args)`` on its worker."""
        return self.client.submit(
            fn,
            self._dirs[n],
            *args,
            workers=[self._where[n]],
            allow_other_workers=self._shared[n],
            pure=False,
        )

    # ------------------------------------------------------------ properties

    def __len__(self) -> int:
        return int(self.catalogue["count"])

    @property
    def bounds(self) -> Optional[List[float]]:
        """The MBR of all entries ``[minx, miny, maxx, maxy]`` (None when empty)."""
        return self.catalogue["extent"]

    @property
    def crs(self) -> Optional[str]:
        """The CRS of the data it was built from (None for arrays)."""
        return self.catalogue["crs"]

    def __repr__(self) -> str:
        return f"geoflash.dask.PartitionedIndex({self.path!r}, partitions={len(self.partitions)}, size={len(self)})"

    # --------------------------------------------------------------- windows

    def intersection_batch(self, boxes: Any, predicate: str = "intersects") -> Tuple[np.ndarray, np.ndarray]:
        """Windows (N×4, or N×2 points) grouped per partition, one task
        each. Returns ``(offsets, ids)`` as ``geoflash.Index.intersection_batch``
        (ids of window ``i`` are ``ids[offsets[i]:offsets[i+1]]``, ascending)."""
        if predicate not in ("intersects", "contains"):
            raise ValueError(f"predicate must be 'intersects' or 'contains', not {predicate!r}")
        b = as_boxes(boxes)
        hit = meets(self._extents, b)
        futs = []
        for n in range(len(self.partitions)):
            qs = np.flatnonzero(hit[:, n])
            if len(qs):
                futs.append(self._submit(n, worker.window_batch, qs, b[qs], predicate))
        found = self.client.gather(futs)
        qpos = np.concatenate([q for q, _ in found] + [np.empty(0, dtype=np.int64)])
        ids = np.concatenate([i for _, i in found] + [np.empty(0, dtype=np.int64)])
        order = np.lexsort((ids, qpos))
        counts = np.bincount(qpos, minlength=len(b))
        return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), ids[order]

    def intersection(self, coordinates: Any, predicate: str = "intersects") -> np.ndarray:
        """Ids (ascending) of the entries meeting the box or point
        (``predicate="contains"``: lying inside the box)."""
        _, ids = self.intersection_batch(np.array([as_box(coordinates)]), predicate)
        return ids

    def count(self, coordinates: Any) -> int:
        """How many entries meet the box or point."""
        return len(self.intersection(coordinates))

    def query(self, geometry: Any, predicate: Optional[str] = "intersects") -> np.ndarray:
        """Ids (ascending) of the entries whose exact geometry satisfies
        ``predicate(geometry, entry)`` (as ``geoflash.Index.query``), from
        the partitions the geometry's bounds meet."""
        import shapely

        if not isinstance(geometry, shapely.Geometry):
            raise ValueError(f"expected a shapely geometry, not {type(geometry).__name__}")
        if shapely.is_empty(geometry):
            return np.empty(0, dtype=np.int64)
        box = np.array([shapely.bounds(geometry)], dtype=np.float64)
        hit = meets(self._extents, box)[0]
        futs = [self._submit(n, worker.geometry_query, geometry, predicate) for n in np.flatnonzero(hit)]
        found = self.client.gather(futs)
        return np.sort(np.concatenate(found + [np.empty(0, dtype=np.int64)]))

    # ------------------------------------------------------------------- kNN

    def nearest_batch(self, boxes: Any, k: int = 1) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ``k`` nearest entries to each query (N×2 points or N×4
        boxes), ties at the k-th distance included. Returns ``(offsets,
        ids, distances)``: query ``i``'s are ``[offsets[i]:offsets[i+1]]``,
        nearest first (equal distances by id)."""
        k = int(k)
        if k < 0:
            raise ValueError(f"k must be at least 0, not {k}")
        b = as_boxes(boxes)
        n_q, n_p = len(b), len(self.partitions)
        dist = np.column_stack([worker.box_distances(b, e) for e in self._extents]) if n_p else np.empty((n_q, 0))
        order = np.argsort(dist, axis=1, kind="stable")
        nxt = np.zeros(n_q, dtype=np.int64)
        kth = np.full(n_q, np.inf)
        cand_ids: List[List[np.ndarray]] = [[] for _ in range(n_q)]
        cand_d: List[List[np.ndarray]] = [[] for _ in range(n_q)]
        if k == 0:
            nxt[:] = n_p
        while True:
            groups: Dict[int, List[int]] = defaultdict(list)
            for q in range(n_q):
                if nxt[q] < n_p:
                    p = int(order[q, nxt[q]])
                    if dist[q, p] > kth[q]:
                        nxt[q] = n_p  # every partition left is farther than the k-th entry
                    else:
                        groups[p].append(q)
                        nxt[q] += 1
            if not groups:
                break
            futs = [self._submit(p, worker.nearest_batch, np.array(qs), b[qs], k) for p, qs in groups.items()]
            for part in self.client.gather(futs):
                for q, ids, d in part:
                    cand_ids[q].append(ids)
                    cand_d[q].append(d)
                    all_d = np.concatenate(cand_d[q])
                    if len(all_d) >= k:
                        kth[q] = np.partition(all_d, k - 1)[k - 1]
        offsets = [0]
        out_ids, out_d = [], []
        for q in range(n_q):
            ids = np.concatenate(cand_ids[q] + [np.empty(0, dtype=np.int64)])
            d = np.concatenate(cand_d[q] + [np.empty(0)])
            keep = d <= kth[q]
            ids, d = ids[keep], d[keep]
            o = np.lexsort((ids, d))
            out_ids.append(ids[o])
            out_d.append(d[o])
            offsets.append(offsets[-1] + len(o))
        return (
            np.asarray(offsets, dtype=np.int64),
            np.concatenate(out_ids + [np.empty(0, dtype=np.int64)]),
            np.concatenate(out_d + [np.empty(0)]),
        )

    def nearest(self, coordinates: Any, num_results: int = 1, return_distance: bool = False) -> Any:
        """Ids of the ``num_results`` entries nearest to the point or box,
        nearest first, entries tied with the last included (as
        ``geoflash.Index.nearest``); with ``return_distance``, ``(ids, distances)``."""
        _, ids, d = self.nearest_batch(np.array([as_box(coordinates)]), num_results)
        return (ids, d) if return_distance else ids

    # ------------------------------------------------------------------ misc

    def read_partition(self, n: int) -> Any:
        """A future of partition ``n``'s entries as a chunk (ids, boxes, WKB)."""
        return self._submit(n, worker.read_partition)

    # --------------------------------------------------------------- updates

    def _entry(self, pid: int) -> Optional[Dict[str, Any]]:
        return next((p for p in self.catalogue["partitions"] if p["id"] == pid), None)

    def _new_path(self, name: str) -> str:
        """Where a new partition directory goes: beside the others."""
        absolute = [p["path"] for p in self.catalogue["partitions"] if os.path.isabs(p["path"])]
        return os.path.join(os.path.dirname(absolute[0]), name) if absolute else name

    def _write_task(self, entry: Dict[str, Any], fn: Any, *args: Any) -> Any:
        """Runs a task that writes partition ``entry`` on its worker, after
        every worker closed its read-only handle on it."""
        directory = catalogue.partition_dir(self.path, entry)
        self.client.run(worker.forget_partition, directory)
        workers = worker_addresses(self.client)
        n = next((i for i, p in enumerate(self.partitions) if p["id"] == entry["id"]), None)
        where = self._where[n] if n is not None else workers[entry["id"] % len(workers)]
        return self.client.submit(fn, directory, *args, workers=[where], pure=False)

    def _commit(self) -> None:
        """Writes the catalogue with the partitions' new counts and extents."""
        parts = self.catalogue["partitions"]
        extents = [p["extent"] for p in parts if p["count"] > 0 and p["extent"] is not None]
        self.catalogue["count"] = int(sum(p["count"] for p in parts))
        self.catalogue["extent"] = (
            [min(e[0] for e in extents), min(e[1] for e in extents), max(e[2] for e in extents), max(e[3] for e in extents)]
            if extents
            else None
        )
        catalogue.write(self.path, self.catalogue)
        self._load(self.catalogue)
        self._place()

    def insert_batch(self, ids: Any, boxes: Any, split_above: Optional[int] = None) -> None:
        """Inserts N entries (ids, N×4 boxes or N×2 points), each into the
        partition that owns its centre (the catalogue's partitioner), one
        task per partition; a partition the partitioner owns but that was
        empty is created. Ids must stay unique (not checked). With
        ``split_above``, every partition holding more entries is then split
        (``split``)."""
        from .partitioning import from_dict

        b = as_boxes(boxes)
        i = np.asarray(ids)
        if i.ndim != 1 or len(i) != len(b) or (len(i) and not np.issubdtype(i.dtype, np.integer)):
            raise ValueError(f"ids must be a 1-D array of {len(b)} integers")
        part = from_dict(self.catalogue["partitioner"])
        owner = part.assign(b)
        futs = {}
        for pid in np.unique(owner):
            entry = self._entry(int(pid))
            if entry is None:
                entry = {"id": int(pid), "path": self._new_path(f"part-{int(pid):05d}"), "count": 0, "extent": None}
                self.catalogue["partitions"].append(entry)
            sel = owner == pid
            futs[int(pid)] = self._write_task(entry, worker.insert_into, i[sel].astype(np.int64), b[sel], self.catalogue["index_options"])
        for pid, res in zip(futs, self.client.gather(list(futs.values()))):
            self._entry(pid).update(res)
        self._commit()
        if split_above is not None:
            for p in list(self.catalogue["partitions"]):
                if p["count"] > split_above:
                    self.split(p["id"])

    def insert(self, id: int, coordinates: Any) -> None:
        """Inserts one entry (see ``insert_batch``)."""
        self.insert_batch(np.array([id], dtype=np.int64), np.array([as_box(coordinates)]))

    def delete_batch(self, ids: Any, boxes: Any) -> int:
        """Deletes entries by id and exact box from their owning
        partitions; returns how many were found."""
        from .partitioning import from_dict

        b = as_boxes(boxes)
        i = np.asarray(ids, dtype=np.int64).reshape(-1)
        if len(i) != len(b):
            raise ValueError(f"{len(i)} ids for {len(b)} boxes")
        owner = from_dict(self.catalogue["partitioner"]).assign(b)
        futs = {}
        for pid in np.unique(owner):
            entry = self._entry(int(pid))
            if entry is None or entry["count"] == 0:
                continue
            sel = owner == pid
            futs[int(pid)] = self._write_task(entry, worker.delete_from, i[sel], b[sel])
        deleted = 0
        for pid, res in zip(futs, self.client.gather(list(futs.values()))):
            deleted += res.pop("deleted")
            if res["extent"] is None:
                res["extent"] = self._entry(pid)["extent"]
            self._entry(pid).update(res)
        self._commit()
        return deleted

    def delete(self, id: int, coordinates: Any) -> bool:
        """Deletes one entry with ``id`` and exactly this box; True if found."""
        return self.delete_batch(np.array([id]), np.array([as_box(coordinates)])) == 1

    def split(self, pid: int) -> bool:
        """Splits partition ``pid`` in two at the median of its objects
        (Hilbert: their median key; KD: their median centre along the wider
        axis of the spread): the partitioner gets a new partition, both
        halves are bulk-loaded into new directories, the catalogue is
        rewritten to name them, then the old directory is removed. False
        when its objects cannot be told apart (one key or centre)."""
        from .partitioning import from_dict

        entry = self._entry(pid)
        if entry is None or entry["count"] < 2:
            return False
        n = next(i for i, p in enumerate(self.partitions) if p["id"] == pid)
        boxes = self.client.gather(self.read_partition(n))["boxes"]
        refined = from_dict(self.catalogue["partitioner"]).split(pid, boxes)
        if refined is None:
            return False
        new_id = refined.count - 1
        tag = os.urandom(4).hex()
        halves = [(pid, self._new_path(f"part-{pid:05d}-{tag}")), (new_id, self._new_path(f"part-{new_id:05d}-{tag}"))]
        old_dir = catalogue.partition_dir(self.path, entry)
        built = self.client.gather(
            self._write_task(
                entry,
                worker.split_partition,
                refined.to_dict(),
                [(p, catalogue.partition_dir(self.path, {"path": d})) for p, d in halves],
                self.catalogue["index_options"],
            )
        )
        entry.update(built[0], path=halves[0][1])
        self.catalogue["partitions"].append(dict(built[1], id=new_id, path=halves[1][1]))
        self.catalogue["partitioner"] = refined.to_dict()
        self._commit()
        self.client.gather(self.client.submit(worker.remove_directory, old_dir, workers=[built[0]["worker"]], pure=False))
        return True
