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
- Writes (insert, delete, split) hold the writers' lock of the directory
  (``catalogue.locked``) from start to end, and refuse to start when the
  catalogue changed since this object read it. An insert first commits
  a catalogue whose extents cover the new entries, its partitions marked
  ``pending``, so whatever its tasks store is findable even if some fail.
- Opening counts every partition's own index and says so (a
  ``RuntimeWarning``) where the catalogue's count differs.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from collections import defaultdict
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..exceptions import InvalidCoordinatesError, RTreeError
from . import catalogue, worker
from .cluster import get_client, worker_addresses, worker_host

#: The largest coordinate magnitude an index stores (the engine's bound).
MAX_COORDINATE = 1e150


def _num(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    return str(int(v)) if math.isfinite(v) and v == int(v) and abs(v) < 1e15 else repr(float(v))


def _rect(b: Sequence[float]) -> str:
    return "(" + ", ".join(_num(float(v)) for v in b) + ")"


def check_windows(b: np.ndarray, single: bool = False) -> None:
    """Refuses query windows as ``geoflash.Index`` does: a coordinate that
    is NaN, or a min above its max (``RTreeError`` naming the row)."""
    nan = np.isnan(b).any(axis=1)
    inverted = (b[:, 0] > b[:, 2]) | (b[:, 1] > b[:, 3])
    for bad, why in ((nan, "has a coordinate that is not a number"), (inverted, "is inverted (min greater than max)")):
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            row = "" if single else f"row {r}: "
            raise RTreeError(f"invalid input: {row}rectangle {_rect(b[r])} {why}")


def check_entries(b: np.ndarray, ids: np.ndarray) -> None:
    """Refuses boxes an index cannot store before anything is written: a
    coordinate that is not finite or beyond 1e150 in magnitude, or a min
    above its max (``RTreeError`` naming the row and its id)."""
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(b) <= MAX_COORDINATE).all(axis=1)
    inverted = (b[:, 0] > b[:, 2]) | (b[:, 1] > b[:, 3])
    for sel, why in (
        (bad, "has a coordinate that is not finite or exceeds 1e150 in magnitude"),
        (inverted, "is inverted (min greater than max)"),
    ):
        if sel.any():
            r = int(np.flatnonzero(sel)[0])
            raise RTreeError(
                f"invalid input: row {r} (id {int(ids[r])}): rectangle {_rect(b[r])} {why}; nothing was inserted"
            )


def _union(a: Optional[Sequence[float]], b: Sequence[float]) -> List[float]:
    if a is None:
        return [float(v) for v in b]
    return [min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])]


def _within(inner: Sequence[float], outer: Optional[Sequence[float]]) -> bool:
    return outer is not None and (
        outer[0] <= inner[0] and outer[1] <= inner[1] and inner[2] <= outer[2] and inner[3] <= outer[3]
    )


def _mbr(b: np.ndarray) -> List[float]:
    return [float(b[:, 0].min()), float(b[:, 1].min()), float(b[:, 2].max()), float(b[:, 3].max())]


def _reworded(e: BaseException, msg: str) -> BaseException:
    """An exception of ``e``'s class (else ``GeoflashError``) saying ``msg``."""
    from ..exceptions import GeoflashError

    try:
        out = type(e)(msg)
        if str(out) == msg:
            return out
    except Exception:
        pass
    return GeoflashError(msg)


def as_box(coordinates: Any) -> Tuple[float, float, float, float]:
    """A point ``(x, y)`` or box ``(minx, miny, maxx, maxy)`` as a box.
    Text is not coordinates: ``"1234"``, ``b"ab"`` and ``("1", 2, 3, 4)``
    raise ``InvalidCoordinatesError`` (a ``ValueError`` and a ``TypeError``)
    instead of being read as digits or byte values."""
    text = (str, bytes, bytearray)
    try:
        items = None if isinstance(coordinates, text) else list(coordinates)
    except TypeError as e:
        raise ValueError(f"coordinates must be 2 or 4 numbers: {e}") from None
    if items is None or any(isinstance(v, text) for v in items):
        raise InvalidCoordinatesError(f"coordinates must be 2 or 4 numbers, not text: {coordinates!r}")
    try:
        c = [float(v) for v in items]
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
        self._writer_depth = 0
        self._load(catalogue.read(self.path))
        self.client = get_client(client, timeout)
        self._place()
        if not catalogue.is_locked(self.path):  # a writer at work: its partitions cannot be read now
            self._check_counts()

    def _load(self, cat: Dict[str, Any]) -> None:
        self.catalogue: Dict[str, Any] = cat
        self._key = catalogue.cache_key(cat)
        # pending partitions may hold entries their count does not show yet
        self.partitions: List[Dict[str, Any]] = [p for p in cat["partitions"] if p["count"] > 0 or p.get("pending")]
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

    def _check_counts(self) -> None:
        """Counts every partition's own index: where the catalogue's count
        differs (an insert or delete that did not finish, a catalogue
        older than its partitions), says so in a ``RuntimeWarning`` and
        takes the index's count, and widens an extent that does not cover
        the index's entries. Kept in memory; the next write stores it."""
        if not self.partitions:
            return
        futs = [self._submit(n, worker.partition_state, bool(p.get("new"))) for n, p in enumerate(self.partitions)]
        notes = []
        for p, state in zip(list(self.partitions), self.client.gather(futs)):
            d = catalogue.partition_dir(self.path, p)
            if state is None:  # a new partition whose first insert never made it
                self.catalogue["partitions"].remove(p)
                continue
            unfinished = " (an insert into it did not finish)" if p.get("pending") else ""
            if state["count"] != p["count"]:
                notes.append(f"partition {p['id']} ({d}) holds {state['count']} entries, the catalogue says {p['count']}{unfinished}")
                p["count"] = state["count"]
            if state["extent"] is not None and not _within(state["extent"], p["extent"]):
                notes.append(f"partition {p['id']} ({d}) holds entries outside its extent in the catalogue")
                p["extent"] = _union(p["extent"], state["extent"])
        self.catalogue["count"] = int(sum(p["count"] for p in self.catalogue["partitions"]))
        self.catalogue["extent"] = self._total_extent()
        self._load(self.catalogue)
        self._place()
        if notes:
            warnings.warn(
                f"{catalogue.catalogue_path(self.path)}: " + "; ".join(notes)
                + ": counts and extents are taken from the partitions' indexes (stored by the next write)",
                RuntimeWarning,
                stacklevel=3,
            )

    def _total_extent(self) -> Optional[List[float]]:
        extents = [
            p["extent"] for p in self.catalogue["partitions"]
            if (p["count"] > 0 or p.get("pending")) and p["extent"] is not None
        ]
        return (
            [min(e[0] for e in extents), min(e[1] for e in extents), max(e[2] for e in extents), max(e[3] for e in extents)]
            if extents
            else None
        )

    def _submit(self, n: int, fn: Any, *args: Any) -> Any:
        """Runs ``fn((partition n's directory, catalogue key), *args)`` on its worker."""
        return self.client.submit(
            fn,
            (self._dirs[n], self._key),

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
        (ids of window ``i`` are ``ids[offsets[i]:offsets[i+1]]``, ascending).
        A window with a NaN or a min above its max raises ``RTreeError``
        naming its row, as ``geoflash.Index`` does."""
        b = as_boxes(boxes)
        check_windows(b)
        return self._windows(b, predicate)

    def _windows(self, b: np.ndarray, predicate: str) -> Tuple[np.ndarray, np.ndarray]:
        if predicate not in ("intersects", "contains"):
            raise ValueError(f"predicate must be 'intersects' or 'contains', not {predicate!r}")
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
        (``predicate="contains"``: lying inside the box). A box with a NaN
        or a min above its max raises ``RTreeError``, as ``geoflash.Index``
        does."""
        b = np.array([as_box(coordinates)])
        check_windows(b, single=True)
        _, ids = self._windows(b, predicate)
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
        check_windows(b)
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

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Holds the writers' lock of the directory for a write (nested
        writes, as an insert's splits, hold it once), after checking that
        the catalogue on disk is still the one this object read (same
        build, same generation): else ``CatalogueError``, and nothing is
        written."""
        if self._writer_depth:
            self._writer_depth += 1
            try:
                yield
            finally:
                self._writer_depth -= 1
            return
        with catalogue.locked(self.path):
            disk = catalogue.read(self.path, check_local=False)
            mine = (self.catalogue["build"], self.catalogue["generation"])
            theirs = (disk["build"], disk["generation"])
            if mine != theirs:
                what = (
                    "rebuilt since this PartitionedIndex read it"
                    if mine[0] != theirs[0]
                    else f"written by another writer since this PartitionedIndex read it (generation {mine[1]} then, {theirs[1]} now)"
                )
                raise catalogue.CatalogueError(
                    f"{catalogue.catalogue_path(self.path)} was {what}: nothing was written; "
                    f"open it again (geoflash.dask.PartitionedIndex(path)) and redo the change"
                )
            self._remove_unnamed_partitions()
            self._writer_depth = 1
            try:
                yield
            finally:
                self._writer_depth = 0

    def _remove_unnamed_partitions(self) -> None:
        """Removes the partition directories (``part-…``) in the catalogue's
        directory that the catalogue does not name: a split killed before
        its catalogue write leaves its two new halves, one killed after it
        the old partition. Only a writer holding the lock calls it, so no
        build, insert or split is running. Directories on workers' own
        disks (absolute partition paths elsewhere) are not looked at."""
        import shutil

        named = {catalogue.partition_dir(self.path, p) for p in self.catalogue["partitions"]}
        for name in catalogue.leftover_partitions(self.path):
            directory = os.path.normpath(os.path.join(self.path, name))
            if directory not in named and os.path.isdir(directory):
                shutil.rmtree(directory, ignore_errors=True)

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
        """Writes the catalogue (the writer holds the lock) with the
        partitions' counts and extents, as the next generation; durable
        when it returns (``catalogue.write``)."""
        assert self._writer_depth, "a catalogue write outside _writing()"
        parts = self.catalogue["partitions"]
        self.catalogue["count"] = int(sum(p["count"] for p in parts))
        self.catalogue["extent"] = self._total_extent()
        self.catalogue["generation"] = int(self.catalogue["generation"]) + 1
        catalogue.write(self.path, self.catalogue)
        self._load(self.catalogue)
        self._place()

    def insert_batch(self, ids: Any, boxes: Any, split_above: Optional[int] = None) -> None:
        """Inserts N entries (ids, N×4 boxes or N×2 points), each into the
        partition that owns its centre (the catalogue's partitioner), one
        task per partition; a partition the partitioner owns but that was
        empty is created. Ids must stay unique (not checked). With
        ``split_above``, every partition holding more entries is then split
        (``split``).

        Every box is checked (finite, at most 1e150 in magnitude, min <=
        max) before anything is written: a bad one raises ``RTreeError``
        naming its row and id. Then a catalogue whose partitions' extents
        cover the new boxes, those partitions marked ``pending``, is
        committed before the tasks run, so that entries a task stores are
        findable whatever happens next. When a task fails, the partitions
        that succeeded get their new counts, all of them stay ``pending``,
        and the error (naming the partition's directory) is raised; running
        the same ``insert_batch`` again skips the entries a pending
        partition already holds (same id and box), so none is stored twice."""
        from distributed import wait

        from ..spatial_index import _int64_ids
        from .partitioning import from_dict

        b = as_boxes(boxes)
        i = np.asarray(ids)
        if i.ndim != 1 or len(i) != len(b) or (len(i) and not np.issubdtype(i.dtype, np.integer)):
            raise ValueError(f"ids must be a 1-D array of {len(b)} integers")
        i = _int64_ids(i) if len(i) else i.astype(np.int64)
        check_entries(b, i)
        with self._writing():
            if len(b):
                self._insert_checked(i, b, wait, from_dict)
            if split_above is not None:
                for p in list(self.catalogue["partitions"]):
                    if p["count"] > split_above:
                        self.split(p["id"])

    def _insert_checked(self, i: np.ndarray, b: np.ndarray, wait: Any, from_dict: Any) -> None:
        owner = from_dict(self.catalogue["partitioner"]).assign(b)
        workers = worker_addresses(self.client)
        plan = []
        for pid in (int(v) for v in np.unique(owner)):
            sel = owner == pid
            entry = self._entry(pid)
            if entry is None:
                where = workers[pid % len(workers)]
                entry = {
                    "id": pid, "path": self._new_path(f"part-{pid:05d}"), "count": 0, "extent": None,
                    "host": worker_host(where), "worker": where, "new": True,
                }
                self.catalogue["partitions"].append(entry)
            retry = bool(entry.get("pending"))  # an earlier insert into it did not finish
            entry["extent"] = _union(entry["extent"], _mbr(b[sel]))
            entry["pending"] = True
            plan.append((entry, sel, bool(entry.get("new")), retry))
        self._commit()  # from here, every entry a task stores is findable
        options = self.catalogue["index_options"]
        futs = [
            self._write_task(entry, worker.insert_into, i[sel], b[sel], options, create, retry)
            for entry, sel, create, retry in plan
        ]
        wait(futs)
        failed = []
        for (entry, _, _, _), fut in zip(plan, futs):
            if fut.status == "finished":
                entry.update(fut.result())
                entry.pop("new", None)
            else:
                failed.append((entry, fut.exception()))
        if not failed:
            for entry, _, _, _ in plan:
                entry.pop("pending", None)
        self._commit()
        if failed:
            entry, err = failed[0]
            stored = [e["id"] for e, _, _, _ in plan if all(e is not f for f, _ in failed)]
            raise _reworded(
                err,
                f"insert_batch: {len(failed)} of {len(plan)} partition tasks failed, the first "
                f"(partition {entry['id']}): {err}. Entries stored (in partitions {stored} and maybe part "
                f"of the failed ones) stay findable; their partitions are marked pending in the "
                f"catalogue, and running the same insert_batch again stores each missing entry once",
            ) from err

    def insert(self, id: int, coordinates: Any) -> None:
        """Inserts one entry (see ``insert_batch``)."""
        self.insert_batch(np.array([id], dtype=np.int64), np.array([as_box(coordinates)]))

    def delete_batch(self, ids: Any, boxes: Any) -> int:
        """Deletes entries by id and exact box from their owning
        partitions; returns how many were found. When a task fails, the
        partitions that succeeded get their new counts in the catalogue
        and the error (naming the partition's directory) is raised;
        deleting again finds the entries left."""
        from distributed import wait

        from .partitioning import from_dict

        b = as_boxes(boxes)
        i = np.asarray(ids, dtype=np.int64).reshape(-1)
        if len(i) != len(b):
            raise ValueError(f"{len(i)} ids for {len(b)} boxes")
        with self._writing():
            owner = from_dict(self.catalogue["partitioner"]).assign(b)
            plan = []
            for pid in (int(v) for v in np.unique(owner)):
                entry = self._entry(pid)
                if entry is None or (entry["count"] == 0 and not entry.get("pending")):
                    continue
                sel = owner == pid
                plan.append((entry, self._write_task(entry, worker.delete_from, i[sel], b[sel])))
            wait([f for _, f in plan])
            deleted = 0
            failed = []
            for entry, fut in plan:
                if fut.status != "finished":
                    failed.append((entry, fut.exception()))
                    continue
                res = fut.result()
                deleted += res.pop("deleted")
                if res["extent"] is None:
                    res["extent"] = entry["extent"]
                entry.update(res)
            self._commit()
            if failed:
                entry, err = failed[0]
                raise _reworded(
                    err, f"delete_batch: {len(failed)} of {len(plan)} partition tasks failed, the first (partition {entry['id']}): {err}"
                ) from err
        return deleted

    def delete(self, id: int, coordinates: Any) -> bool:
        """Deletes one entry with ``id`` and exactly this box; True if found."""
        return self.delete_batch(np.array([id]), np.array([as_box(coordinates)])) == 1

    def split(self, pid: int) -> bool:
        """Splits partition ``pid`` in two at the median of its objects
        (Hilbert: their median key; KD: their median centre along the wider
        axis of the spread): the partitioner gets a new partition, both
        halves are bulk-loaded into new directories, the catalogue is
        rewritten (durably) to name them, then the old directory is
        removed. False when its objects cannot be told apart (one key or
        centre)."""
        from .partitioning import from_dict

        with self._writing():
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
            pending = {"pending": True} if entry.get("pending") else {}
            entry.update(built[0], path=halves[0][1])
            entry.pop("new", None)
            self.catalogue["partitions"].append(dict(built[1], id=new_id, path=halves[1][1], **pending))
            self.catalogue["partitioner"] = refined.to_dict()
            self._commit()  # durable (file and directory synced) before the old directory goes
            self.client.gather(self.client.submit(worker.remove_directory, old_dir, workers=[built[0]["worker"]], pure=False))
            return True
