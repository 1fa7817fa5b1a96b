"""What runs on the Dask workers: turning input pieces into chunks of
(ids, boxes, geometries), splitting chunks by partition, building a
partition's index, and the per-partition queries. Opened partitions are
kept open (read-only) per worker process, by directory, with the key of
the catalogue they were opened for (its build id and generation:
``catalogue.cache_key``); a task for another key reopens the partition, so
a rebuild at the same path or a changed catalogue is never answered from
an index opened before.

Query tasks take a partition as ``(directory, key)`` (a bare directory:
key None).

A *chunk* is a dict ``{"ids": int64[N], "boxes": float64[N, 4],
"wkb": list of N WKB bytes or None, "crs": str or None}`` (a chunk of a
frame also has ``"rows"``: its rows, with those left out).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import Index
from .._geoflash import Core as _Core
from ..spatial_index import bulk_chunks

_OPEN: Dict[str, Tuple[Optional[str], Index]] = {}
_LOCK = threading.Lock()

#: A partition as query tasks get it: its directory and the catalogue's key.
PartRef = Any


def _ref(part: PartRef) -> Tuple[str, Optional[str]]:
    if isinstance(part, (tuple, list)):
        return str(part[0]), part[1]
    return str(part), None


def _raise_naming(directory: str, e: BaseException) -> None:
    """Raises ``e`` with the partition's directory in its message."""
    out = _naming(directory, e)
    if out is e:
        raise e
    raise out from e


def _naming(directory: str, e: BaseException) -> BaseException:
    """``e`` with the partition's directory in front of its message (the
    same class where it takes a message, else a ``GeoflashError``)."""
    from ..exceptions import GeoflashError

    if directory in str(e):
        return e
    msg = f"partition {directory}: {e}"
    try:
        out = type(e)(msg)
    except Exception:
        out = GeoflashError(msg)
    if str(out) != msg:
        out = GeoflashError(msg)
    return out


def _crs_name(crs: Any) -> Optional[str]:
    return None if crs is None else crs.to_string()


def frame_chunk(frame: Any, ids: Optional[np.ndarray] = None) -> Dict[str, Any]:
    """A chunk of a GeoDataFrame or GeoSeries piece (ids: its row positions
    from 0 unless given; missing and empty geometries are left out)."""
    import shapely

    geoms = np.asarray(getattr(frame, "geometry", frame).values, dtype=object)
    ok = ~(shapely.is_missing(geoms) | shapely.is_empty(geoms))
    pos = np.arange(len(geoms), dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
    kept = geoms[ok]
    return {
        "ids": pos[ok],
        "boxes": np.ascontiguousarray(shapely.bounds(kept), dtype=np.float64).reshape(-1, 4),
        "wkb": list(shapely.to_wkb(kept, output_dimension=2)),
        "crs": _crs_name(getattr(frame, "crs", None)),
        "rows": len(geoms),
    }


def read_file_chunk(path: str) -> Dict[str, Any]:
    """A chunk of a file GeoPandas reads (GeoParquet by its extension, else
    any format of ``geopandas.read_file``)."""
    import geopandas

    if path.endswith((".parquet", ".geoparquet")):
        frame = geopandas.read_parquet(path)
    else:
        frame = geopandas.read_file(path)
    return frame_chunk(frame)


def array_chunk(ids: np.ndarray, boxes: np.ndarray) -> Dict[str, Any]:
    """A chunk of NumPy ids and boxes (no geometries: the boxes are exact)."""
    return {"ids": ids, "boxes": boxes, "wkb": None, "crs": None}


def chunk_summary(chunk: Dict[str, Any]) -> Dict[str, Any]:
    """Count, CRS and the extent of the box centres of a chunk."""
    b = chunk["boxes"]
    if len(b) == 0:
        ext = None
    else:
        cx = (b[:, 0] + b[:, 2]) / 2.0
        cy = (b[:, 1] + b[:, 3]) / 2.0
        ext = [float(cx.min()), float(cy.min()), float(cx.max()), float(cy.max())]
    return {
        "count": int(len(b)),
        "rows": int(chunk.get("rows", len(b))),
        "crs": chunk["crs"],
        "centre_extent": ext,
        "geometries": chunk["wkb"] is not None,
    }


def offset_chunk(chunk: Dict[str, Any], offset: int) -> Dict[str, Any]:
    """The chunk with ``offset`` added to its ids (local positions become
    positions in the whole dataset)."""
    out = dict(chunk)
    out["ids"] = np.asarray(chunk["ids"], dtype=np.int64) + np.int64(offset)
    return out


def hilbert_chunk_keys(chunk: Dict[str, Any], domain: Sequence[float]) -> np.ndarray:
    """The Hilbert keys of a chunk's box centres."""
    from .partitioning import hilbert_keys

    return hilbert_keys(chunk["boxes"], domain)


def chunk_centres(chunk: Dict[str, Any]) -> np.ndarray:
    """The N×2 box centres of a chunk."""
    from .partitioning import centres

    return centres(chunk["boxes"])


def take(chunk: Dict[str, Any], sel: np.ndarray) -> Dict[str, Any]:
    """The rows ``sel`` of a chunk."""
    rows = np.flatnonzero(sel) if np.asarray(sel).dtype == bool else np.asarray(sel, dtype=np.int64)
    wkb = chunk["wkb"]
    return {
        "ids": chunk["ids"][rows],
        "boxes": chunk["boxes"][rows],
        "wkb": None if wkb is None else [wkb[i] for i in rows],
        "crs": chunk["crs"],
    }


def split_chunk(chunk: Dict[str, Any], partitioner: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The chunk split into one piece per partition."""
    from .partitioning import from_dict

    part = from_dict(partitioner)
    owner = part.assign(chunk["boxes"]) if len(chunk["boxes"]) else np.empty(0, dtype=np.int64)
    return [take(chunk, owner == p) for p in range(part.count)]


def _here() -> str:
    from distributed import get_worker

    from .cluster import worker_host

    try:
        return get_worker().address
    except ValueError:  # not on a worker (run in the client's process)
        return "local://" + os.uname().nodename


def build_partition(directory: str, pieces: List[Dict[str, Any]], options: Dict[str, Any]) -> Dict[str, Any]:
    """Bulk-loads the pieces of one partition into a new index in
    ``directory``; returns its count, extent and where it was built."""
    from .cluster import worker_host

    ids = np.concatenate([p["ids"] for p in pieces]).astype(np.int64)
    if len(ids) == 0:
        return {"count": 0}
    boxes = np.ascontiguousarray(np.concatenate([p["boxes"] for p in pieces]), dtype=np.float64).reshape(-1, 4)
    with_geoms = all(p["wkb"] is not None for p in pieces) and any(len(p["ids"]) for p in pieces)
    os.makedirs(os.path.dirname(directory) or ".", exist_ok=True)
    opts = dict(options)
    if with_geoms:
        wkbs = [w for p in pieces for w in p["wkb"]]
        if any(w is None for w in wkbs):  # entries inserted without a geometry: their box
            import shapely

            wkbs = [shapely.to_wkb(shapely.box(*boxes[i])) if w is None else w for i, w in enumerate(wkbs)]
        idx = Index._with_core(
            opts,
            lambda self, path: _Core.bulk_geometries(path, self._options, ids.tobytes(), wkbs, *self._bulk),
            directory,
        )
    else:
        idx = Index._with_core(
            opts,
            lambda self, path: _Core.bulk(path, self._options, len(boxes), bulk_chunks(ids, boxes), None, *self._bulk),
            directory,
        )
    idx.close()
    where = _here()
    return {
        "count": int(len(ids)),
        "extent": [float(boxes[:, 0].min()), float(boxes[:, 1].min()), float(boxes[:, 2].max()), float(boxes[:, 3].max())],
        "host": worker_host(where),
        "worker": where,
    }


def open_partition(part: PartRef) -> Index:
    """The partition's index, opened read-only once per worker process and
    catalogue key (an index opened for another key is closed and the
    partition opened again)."""
    directory, key = _ref(part)
    stale = None
    with _LOCK:
        found = _OPEN.get(directory)
        if found is not None and found[0] == key and not found[1].closed:
            return found[1]
        if found is not None:
            stale = found[1]
            del _OPEN[directory]
            _ENTRIES.pop(directory, None)
        if stale is not None and not stale.closed:
            stale.close()
        if not os.path.isfile(os.path.join(directory, "manifest.json")):
            from .catalogue import CatalogueError

            raise CatalogueError(
                f"the partition index {directory} does not exist on {_here()}"
            )
        try:
            idx = Index(directory, readonly=True)
        except Exception as e:
            _raise_naming(directory, e)
        _OPEN[directory] = (key, idx)
        return idx


def forget_partition(directory: str) -> None:
    """Closes the worker's handle on a partition (before it is written)."""
    with _LOCK:
        found = _OPEN.pop(directory, None)
        _ENTRIES.pop(directory, None)
    if found is not None and not found[1].closed:
        found[1].close()


def partition_state(part: PartRef, may_be_missing: bool = False) -> Optional[Dict[str, Any]]:
    """What a partition's own index holds: its count and extent (None
    when ``may_be_missing`` and its directory holds no index: a new
    partition whose first insert did not finish)."""
    directory, _ = _ref(part)
    if may_be_missing and not os.path.isfile(os.path.join(directory, "manifest.json")):
        return None
    idx = open_partition(part)
    b = idx._core.bounds()
    return {"count": len(idx), "extent": None if b is None else [float(v) for v in b]}


def window_batch(directory: PartRef, qpos: np.ndarray, boxes: np.ndarray, predicate: str) -> Tuple[np.ndarray, np.ndarray]:
    """The answers of the windows ``boxes`` in one partition, as (query
    position, id) pairs."""
    offsets, ids = open_partition(directory).intersection_batch(boxes, predicate)
    return np.repeat(qpos, np.diff(offsets)), ids


def box_distances(rects: np.ndarray, q: Sequence[float]) -> np.ndarray:
    """Euclidean distances between the N×4 ``rects`` and the box ``q`` (0
    where they meet), as the single index computes them for kNN."""
    dx = np.maximum(np.maximum(q[0] - rects[:, 2], rects[:, 0] - q[2]), 0.0)
    dy = np.maximum(np.maximum(q[1] - rects[:, 3], rects[:, 1] - q[3]), 0.0)
    return np.sqrt(dx * dx + dy * dy)


def nearest_batch(directory: PartRef, qpos: np.ndarray, boxes: np.ndarray, k: int) -> List[Tuple[int, np.ndarray, np.ndarray]]:
    """The ``k`` nearest entries (with ties) of one partition to each query
    box: ``(query position, ids, distances)``."""
    offsets, ids, dists = open_partition(directory).nearest_batch(boxes, k)
    return [
        (int(q), ids[offsets[i]:offsets[i + 1]], dists[offsets[i]:offsets[i + 1]])
        for i, q in enumerate(qpos)
    ]


def geometry_query(directory: PartRef, geometry: Any, predicate: Optional[str]) -> np.ndarray:
    """Ids of one partition's entries satisfying ``predicate(geometry, entry)``."""
    return open_partition(directory).query(geometry, predicate)


def read_partition(directory: PartRef) -> Dict[str, Any]:
    """Every entry of a partition as a chunk (WKB where stored)."""
    idx = open_partition(directory)
    b = idx._core.bounds()
    if b is None:
        empty = np.empty(0, dtype=np.int64)
        return {"ids": empty, "boxes": np.empty((0, 4)), "wkb": [] if idx._core.has_geometries() else None, "crs": None}
    keys, ids, rects = idx._core.query_keys(*b, "intersects")
    wkb = idx._core.wkb(keys) if idx._core.has_geometries() else None
    return {
        "ids": np.frombuffer(ids, dtype=np.int64).copy(),
        "boxes": np.frombuffer(rects, dtype=np.float64).reshape(-1, 4).copy(),
        "wkb": wkb,
        "crs": None,
    }


class _Entries:
    """A partition's entries as a join refines against them: its ids
    sorted, the positions sorting them, its boxes, whether box arithmetic
    decides the predicates for it (``boxes_are_exact``), and its shapely
    geometries, built on first use."""

    def __init__(self, chunk: Dict[str, Any]) -> None:
        self.order = np.argsort(chunk["ids"], kind="stable")
        self.sorted_ids = chunk["ids"][self.order]
        self.boxes = chunk["boxes"]
        self.exact_boxes = boxes_are_exact(chunk)
        self._chunk = chunk
        self._geoms: Optional[np.ndarray] = None

    def geometries(self) -> np.ndarray:
        if self._geoms is None:
            self._geoms = chunk_geometries(self._chunk)
        return self._geoms


_ENTRIES: Dict[str, Tuple[Optional[str], _Entries]] = {}


def boxes_are_exact(chunk: Dict[str, Any]) -> bool:
    """Whether every geometry of ``chunk`` is its box (no WKB) with a
    positive width and height: a closed rectangle, for which box arithmetic
    decides intersects, within and contains exactly as shapely decides them
    on the polygon (degenerate boxes are not polygons to shapely)."""
    b = chunk["boxes"]
    wkb = chunk["wkb"]
    if wkb is not None and any(w is not None for w in wkb):
        return False
    return bool(np.all(b[:, 2] > b[:, 0]) and np.all(b[:, 3] > b[:, 1]))


#: The predicates ``box_predicate`` decides on rectangles of positive area.
_BOX_RULES = ("intersects", "within", "contains")


def box_predicate(predicate: str, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``predicate(left[i], right[i])`` for pairs of closed rectangles with
    a positive area (N×4 arrays ``minx, miny, maxx, maxy``): intersects,
    within or contains."""
    if predicate == "within":
        left, right = right, left
        predicate = "contains"
    if predicate == "contains":
        return ((left[:, 0] <= right[:, 0]) & (right[:, 2] <= left[:, 2])
                & (left[:, 1] <= right[:, 1]) & (right[:, 3] <= left[:, 3]))
    if predicate == "intersects":
        return ((left[:, 0] <= right[:, 2]) & (right[:, 0] <= left[:, 2])
                & (left[:, 1] <= right[:, 3]) & (right[:, 1] <= left[:, 3]))
    raise ValueError(f"no box rule for predicate {predicate!r}")


def forget_under(prefix: str) -> int:
    """Closes this worker's handles on every partition under ``prefix``
    (run on every worker with ``client.run`` before the directory goes)."""
    prefix = os.path.join(os.path.abspath(prefix), "")
    with _LOCK:
        gone = [d for d in _OPEN if d.startswith(prefix)]
        for d in list(_ENTRIES):
            if d.startswith(prefix):
                del _ENTRIES[d]
    for d in gone:
        forget_partition(d)
    return len(gone)


def chunk_geometries(chunk: Dict[str, Any]) -> np.ndarray:
    """The chunk's shapely geometries (its boxes where it has none)."""
    import shapely

    b = chunk["boxes"]
    geoms = shapely.box(b[:, 0], b[:, 1], b[:, 2], b[:, 3]) if len(b) else np.empty(0, dtype=object)
    if chunk["wkb"] is not None:
        have = [i for i, w in enumerate(chunk["wkb"]) if w is not None]
        if have:
            geoms[have] = shapely.from_wkb([chunk["wkb"][i] for i in have])
    return np.asarray(geoms, dtype=object)


def _partition_entries(part: PartRef) -> _Entries:
    """A partition's entries (read once per worker process and catalogue key)."""
    directory, key = _ref(part)
    with _LOCK:
        found = _ENTRIES.get(directory)
    if found is not None and found[0] == key:
        return found[1]
    entries = _Entries(read_partition(part))
    with _LOCK:
        _ENTRIES[directory] = (key, entries)
    return entries


def join_with(
    directory: PartRef,
    other: Dict[str, Any],
    predicate: str,
    distance: float,
    index_is_left: bool,
) -> Tuple[np.ndarray, np.ndarray]:
    """The pairs ``(left id, right id)`` of one partition (left when
    ``index_is_left``) and the chunk ``other`` (the other side) that
    satisfy ``predicate(left, right)`` (``"dwithin"``: within
    ``distance``): candidates from the partition's index (the other side's
    boxes grown by ``distance``), refined on the exact geometries. Where
    both sides are plain rectangles of positive area
    (``boxes_are_exact``), intersects, within and contains are refined
    by box arithmetic in NumPy, which decides them as shapely does without
    building a polygon per pair; the other predicates (``"touches"``,
    ``"covers"``…) by shapely's function of that name."""
    import shapely

    empty = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
    if len(other["ids"]) == 0:
        return empty
    idx = open_partition(directory)
    grown = other["boxes"] + np.array([-distance, -distance, distance, distance])
    offsets, cand = idx.intersection_batch(grown, "intersects")
    if len(cand) == 0:
        return empty
    opos = np.repeat(np.arange(len(grown)), np.diff(offsets))
    entries = _partition_entries(directory)
    ipos = entries.order[np.searchsorted(entries.sorted_ids, cand)]
    if predicate in _BOX_RULES and entries.exact_boxes and boxes_are_exact(other):
        ib, ob = entries.boxes[ipos], other["boxes"][opos]
        lb, rb = (ib, ob) if index_is_left else (ob, ib)
        mask = box_predicate(predicate, lb, rb)
    else:
        og = chunk_geometries(other)[opos]
        ig = entries.geometries()[ipos]
        lg, rg = (ig, og) if index_is_left else (og, ig)
        if predicate == "dwithin":
            mask = shapely.dwithin(lg, rg, distance)
        else:
            mask = getattr(shapely, predicate)(lg, rg)
    mask = np.asarray(mask, dtype=bool)
    oid = other["ids"][opos][mask]
    iid = cand[mask]
    return (iid, oid) if index_is_left else (oid, iid)


def _where_built(idx: Index) -> Dict[str, Any]:
    from .cluster import worker_host

    where = _here()
    b = idx._core.bounds()
    return {
        "count": len(idx),
        "extent": None if b is None else [float(v) for v in b],
        "host": worker_host(where),
        "worker": where,
    }


def _holds(idx: Index, i: int, box: Sequence[float]) -> bool:
    """Whether the index holds the entry ``i`` with exactly this box."""
    _, ids, rects = idx._core.query_keys(*box, "intersects")
    ids = np.frombuffer(ids, dtype=np.int64)
    if not (ids == i).any():
        return False
    rects = np.frombuffer(rects, dtype=np.float64).reshape(-1, 4)
    return bool((rects[ids == i] == np.asarray(box, dtype=np.float64)).all(axis=1).any())


def insert_into(
    directory: str,
    ids: np.ndarray,
    boxes: np.ndarray,
    options: Dict[str, Any],
    create: bool = False,
    retry: bool = False,
) -> Dict[str, Any]:
    """Inserts entries into a partition; returns its new count and
    extent. ``create``: the partition is new in the catalogue (its first
    insert), so its directory may hold no index yet: one is made with the
    catalogue's index options. Otherwise a directory without an index is
    refused (the catalogue names a partition that is gone: writing a new
    one there would drop what it held). ``retry``: an earlier insert into
    it did not finish, so entries (id and exact box) it already holds are
    skipped rather than stored twice. Errors name the directory."""
    try:
        forget_partition(directory)
        if os.path.isfile(os.path.join(directory, "manifest.json")):
            idx = Index(directory)
        elif create:
            os.makedirs(os.path.dirname(directory) or ".", exist_ok=True)
            opts = {k: v for k, v in options.items() if k not in ("bulk", "fill")}
            idx = Index(directory, **opts)
        else:
            from .catalogue import CatalogueError

            raise CatalogueError(
                f"the catalogue names partition {directory}, which holds no geoflash index on {_here()}: "
                f"it was removed (by a split or by hand) after this catalogue was read; open the index again"
            )
        try:
            for i, b in zip(ids, boxes):
                box = tuple(float(v) for v in b)
                if retry and _holds(idx, int(i), box):
                    continue
                idx.insert(int(i), box)
            return _where_built(idx)
        finally:
            idx.close()
    except Exception as e:
        _raise_naming(directory, e)


def delete_from(directory: str, ids: np.ndarray, boxes: np.ndarray) -> Dict[str, Any]:
    """Deletes entries (by id and exact box) from a partition; returns its
    new count and how many were found. Errors name the directory."""
    try:
        forget_partition(directory)
        if not os.path.isfile(os.path.join(directory, "manifest.json")):
            from .catalogue import CatalogueError

            raise CatalogueError(f"the catalogue names partition {directory}, which holds no geoflash index on {_here()}")
        idx = Index(directory)
        try:
            deleted = sum(bool(idx._core.delete(int(i), *(float(v) for v in b))) for i, b in zip(ids, boxes))
            out = _where_built(idx)
            out["deleted"] = int(deleted)
            return out
        finally:
            idx.close()
    except Exception as e:
        _raise_naming(directory, e)


def split_partition(
    directory: str, partitioner: Dict[str, Any], halves: Sequence[Tuple[int, str]], options: Dict[str, Any]
) -> List[Dict[str, Any]]:
    """Rebuilds partition ``directory`` as two new indexes: for each
    ``(partition, new directory)`` of ``halves``, its entries that
    ``partitioner`` gives to that partition, bulk-loaded. The old
    directory is left for the client to remove once the catalogue names
    the new ones."""
    from .partitioning import from_dict

    try:
        forget_partition(directory)
        chunk = read_partition((directory, "split"))
        forget_partition(directory)
        owner = from_dict(partitioner).assign(chunk["boxes"])
        out = []
        for p, new_dir in halves:
            out.append(build_partition(new_dir, [take(chunk, owner == p)], options))
        return out
    except Exception as e:
        _raise_naming(directory, e)


def remove_directory(directory: str) -> None:
    """Removes a partition directory no catalogue names any more."""
    import shutil

    forget_partition(directory)
    shutil.rmtree(directory, ignore_errors=True)


def remove_tree(directory: str) -> None:
    """Removes a directory tree of this worker's disk, if there (after a
    failed build)."""
    import shutil

    shutil.rmtree(directory, ignore_errors=True)
