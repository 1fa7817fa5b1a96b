"""``build``: a partitioned index from a GeoDataFrame, a dask-geopandas
frame, a file pattern, a list of GeoDataFrames, or NumPy arrays.

The input is cut into chunks on the workers; the client gathers only the
chunks' summaries and the centres' Hilbert keys (or centres, for KD) to
fit the partitioner; every chunk is split by partition on its worker and
each partition's pieces are bulk-loaded into its own geoflash index by one
task (Dask runs it where most of its pieces are).
"""

from __future__ import annotations

import glob
import operator
import os
import shutil
import sys
import uuid
from typing import Any, Dict, List, Optional

import numpy as np

from ..spatial_index import _int64_ids
from . import catalogue, worker
from . import progress as _progress
from .cluster import get_client, worker_addresses
from .partitioning import HilbertPartitioner, KDPartitioner


def _is_dask_collection(data: Any) -> bool:
    return hasattr(data, "to_delayed") and hasattr(data, "npartitions")


def _is_frame(data: Any) -> bool:
    # Without geopandas imported, data cannot be one of its frames (plain
    # arrays need no geopandas).
    geopandas = sys.modules.get("geopandas")
    return geopandas is not None and isinstance(data, (geopandas.GeoDataFrame, geopandas.GeoSeries))


def _array_input(data: Any, ids: Any) -> tuple:
    if isinstance(data, tuple) and len(data) == 2 and ids is None:
        ids, data = data
    b = np.asarray(data)
    if b.ndim != 2 or b.shape[1] != 4:
        raise ValueError(f"boxes must be an N×4 array, not of shape {b.shape}")
    if not np.issubdtype(b.dtype, np.number) or np.issubdtype(b.dtype, np.complexfloating):
        raise ValueError(f"boxes must be real numbers, not {b.dtype}")
    b = np.ascontiguousarray(b, dtype=np.float64)
    if np.isnan(b).any():
        raise ValueError("boxes must not hold NaN")
    if ((b[:, 0] > b[:, 2]) | (b[:, 1] > b[:, 3])).any():
        raise ValueError("boxes must be (minx, miny, maxx, maxy) with min <= max")
    if ids is None:
        return np.arange(len(b), dtype=np.int64), b
    return _checked_ids(ids, len(b), ""), b


def _frame_ids(data: Any, ids: Any) -> np.ndarray:
    """The ids given for the rows of a GeoDataFrame or GeoSeries: one
    unique integer per row."""
    return _checked_ids(ids, len(data), " (one per row)")


def _checked_ids(ids: Any, n: int, per: str) -> np.ndarray:
    """``ids`` as ``n`` unique int64 ids, or ``ValueError`` saying why not
    (``per`` completes the expected shape in the message)."""
    i = np.asarray(ids)
    if i.ndim != 1 or len(i) != n:
        raise ValueError(f"ids must be a 1-D array of {n} integers{per}, not of shape {i.shape}")
    if len(i) and i.dtype != object and not np.issubdtype(i.dtype, np.integer):
        raise ValueError(f"ids must be integers, not {i.dtype}")
    # int64 without wrapping: an id beyond it raises OverflowError naming it.
    i = _int64_ids(i) if len(i) else i.astype(np.int64)
    if len(np.unique(i)) != len(i):
        raise ValueError("ids must be unique: every object is found, updated and joined by its id")
    return i


def _is_frame_list(data: Any) -> bool:
    return isinstance(data, list) and bool(data) and all(_is_frame(d) for d in data)


def _check_ids_input(data: Any, ids: Any) -> None:
    """``ids=`` is used for arrays of boxes and a GeoDataFrame or
    GeoSeries; refused for the other inputs (their ids are positions in
    the whole input) and when ``data`` is ``(ids, boxes)`` already."""
    if ids is None:
        return
    if isinstance(data, tuple) and len(data) == 2:
        raise ValueError("ids given twice: data is (ids, boxes) and ids= is given too")
    kind = None
    if isinstance(data, (str, os.PathLike)):
        kind = "a file pattern"
    elif _is_dask_collection(data):
        kind = "a dask-geopandas frame"
    elif _is_frame_list(data):
        kind = "a list of GeoDataFrames"
    if kind is not None:
        raise ValueError(
            f"ids= is for arrays of boxes and a GeoDataFrame or GeoSeries, not {kind}, "
            f"whose ids are the rows' positions in the whole input"
        )


def _chunk_futures(client: Any, data: Any, ids: Any, chunks: int) -> tuple:
    """Futures of the input's chunks, and whether their ids are local
    positions (to be offset) or final.

    Every ``scatter`` here and in ``join`` passes ``hash=False``: with
    content-hashed keys, scattering data equal to that of a call whose
    futures are being released races with the release, and the scheduler
    cancels the new tasks for "lost dependencies" (seen in CI: the same
    boxes built twice in a row failed about once in 60)."""
    if isinstance(data, (str, os.PathLike)):
        files = sorted(glob.glob(os.fspath(data)))
        if not files:
            raise FileNotFoundError(f"no file matches {os.fspath(data)}")
        return [client.submit(worker.read_file_chunk, f, pure=False) for f in files], True
    if _is_dask_collection(data):
        parts = client.compute(data.to_delayed())
        return [client.submit(worker.frame_chunk, f) for f in parts], True
    if _is_frame_list(data):
        return [client.submit(worker.frame_chunk, f) for f in client.scatter(data, hash=False)], True
    if _is_frame(data):
        n = len(data)
        cuts = np.linspace(0, n, max(1, min(chunks, n)) + 1).astype(int)
        pieces = [data.iloc[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
        scattered = client.scatter(pieces, hash=False)
        if ids is None:
            return [client.submit(worker.frame_chunk, f) for f in scattered], True
        given = _frame_ids(data, ids)
        id_pieces = client.scatter([given[a:b] for a, b in zip(cuts[:-1], cuts[1:])], hash=False)
        return [client.submit(worker.frame_chunk, f, i) for f, i in zip(scattered, id_pieces)], False
    i, b = _array_input(data, ids)
    cuts = np.linspace(0, len(b), max(1, min(chunks, len(b))) + 1).astype(int)
    pieces = [worker.array_chunk(i[a:c], b[a:c]) for a, c in zip(cuts[:-1], cuts[1:])]
    return client.scatter(pieces, hash=False), False


def _check_crs(summaries: List[Dict[str, Any]]) -> Optional[str]:
    found = sorted({str(s["crs"]) for s in summaries if s["count"]}) or sorted({str(s["crs"]) for s in summaries})
    if len(found) > 1:
        raise ValueError(
            "mixed CRS in the input: " + ", ".join(found) + " (reproject with to_crs first)"
        )
    return None if not found or found[0] == "None" else found[0]


def build(
    data: Any,
    path: Any,
    partitions: Optional[int] = None,
    by: str = "hilbert",
    *,
    client: Any = None,
    ids: Any = None,
    local_dir: Any = None,
    chunks: Optional[int] = None,
    timeout: float = 10.0,
    progress: bool = True,
    **index_options: Any,
) -> "PartitionedIndex":  # noqa: F821
    """Builds a partitioned index in the directory ``path`` and returns it
    opened (see ``docs/scaleout.md``).

    ``data``: a GeoDataFrame or GeoSeries (ids are row positions, as
    ``geoflash.Index.from_geodataframe``; exact geometries are kept), a
    dask-geopandas frame (ids are positions in the whole frame), a file
    pattern (``"tiles/*.parquet"``: ids are positions in the sorted files'
    concatenation), a list of GeoDataFrames (likewise), an N×4 array of
    boxes (ids ``0..N-1``), or ``(ids, boxes)`` (unique integer ids).
    ``ids``: unique integer ids for an N×4 array of boxes or for the rows
    of a GeoDataFrame or GeoSeries (refused for the other inputs).
    ``partitions``: how many (default: twice the number of workers);
    ``by``: ``"hilbert"`` (ranges of equal counts along the Hilbert curve)
    or ``"kd"`` (k-d median splits). ``local_dir``: build every partition
    on its worker's own disk under this directory instead of under
    ``path`` (then queries run on that worker). ``index_options`` are those
    of ``geoflash.Index`` (``kind``, ``page_size``, ``store``, ``buffer``,
    ``device``, ``bulk``, ``fill``, ...). ``client``: see
    ``geoflash.dask.get_client``. ``progress``: print on standard error
    how many partitions are built (``geoflash.dask.progress``).

    The options are checked for the catalogue (JSON; NumPy scalars become
    Python numbers) before anything is built. The build holds the
    directory's writers' lock (``catalogue.lock``) to its end; a build
    that fails removes the partitions it wrote. A directory holding
    partitions but no catalogue (a build that was killed) is refused,
    saying so."""
    from .partitioned import PartitionedIndex

    if by not in ("hilbert", "kd"):
        raise ValueError(f"by must be 'hilbert' or 'kd', not {by!r}")
    root = os.path.abspath(os.fsdecode(os.fspath(path)))
    options = {k: catalogue.jsonable(v, f"index option {k}") for k, v in index_options.items()}
    _check_ids_input(data, ids)
    if os.path.exists(catalogue.catalogue_path(root)):
        raise ValueError(f"{root} already holds a partitioned index")
    unfinished = catalogue.unfinished_build_message(root)
    if unfinished:
        raise ValueError(unfinished)
    client = get_client(client, timeout)
    if partitions is None:
        partitions = 2 * max(1, len(worker_addresses(client)))
    if not isinstance(partitions, (int, np.integer)) or partitions < 1:
        raise ValueError(f"partitions must be a positive integer, not {partitions!r}")
    os.makedirs(root, exist_ok=True)
    with catalogue.locked(root):
        if os.path.exists(catalogue.catalogue_path(root)):  # another build finished meanwhile
            raise ValueError(f"{root} already holds a partitioned index")
        _build(client, data, ids, root, int(partitions), by, local_dir, chunks, progress, options)
    return PartitionedIndex(root, client=client)


def _build(
    client: Any,
    data: Any,
    ids: Any,
    root: str,
    partitions: int,
    by: str,
    local_dir: Any,
    chunks: Optional[int],
    progress: bool,
    options: Dict[str, Any],
) -> None:
    """The build, under the directory's lock: writes the partitions, then
    the catalogue."""
    chunk_futs, local_ids = _chunk_futures(client, data, ids, chunks or int(partitions))
    summaries = client.gather([client.submit(worker.chunk_summary, c) for c in chunk_futs])
    crs = _check_crs(summaries)
    if local_ids:
        offsets = np.concatenate([[0], np.cumsum([s["rows"] for s in summaries])[:-1]])
        chunk_futs = [client.submit(worker.offset_chunk, c, int(o)) for c, o in zip(chunk_futs, offsets)]
    geometries = all(s["geometries"] for s in summaries)
    exts = [s["centre_extent"] for s in summaries if s["centre_extent"] is not None]
    if not exts:
        catalogue.write(root, catalogue.new({"by": by}, [], crs, geometries, options))
        return
    domain = [min(e[0] for e in exts), min(e[1] for e in exts), max(e[2] for e in exts), max(e[3] for e in exts)]
    if by == "hilbert":
        keys = np.concatenate(client.gather([client.submit(worker.hilbert_chunk_keys, c, domain) for c in chunk_futs]))
        part = HilbertPartitioner.fit(keys, domain, int(partitions))
    else:
        pts = np.concatenate(client.gather([client.submit(worker.chunk_centres, c) for c in chunk_futs]))
        part = KDPartitioner.fit(pts, int(partitions))
    described = part.to_dict()
    splits = [client.submit(worker.split_chunk, c, described) for c in chunk_futs]
    if local_dir is None:
        where = [f"part-{p:05d}" for p in range(part.count)]
    else:
        base = os.path.join(os.path.abspath(os.fspath(local_dir)), f"{os.path.basename(root)}-{uuid.uuid4().hex[:12]}")
        where = [os.path.join(base, f"part-{p:05d}") for p in range(part.count)]
    built = []
    try:
        for p in range(part.count):
            pieces = [client.submit(operator.getitem, s, p) for s in splits]
            directory = os.path.join(root, where[p])
            built.append(client.submit(worker.build_partition, directory, pieces, options, pure=False))
        results = _progress.gather(client, built, "build: partitions", progress)
        parts = [dict(id=p, path=where[p], **r) for p, r in enumerate(results) if r["count"]]
        catalogue.write(root, catalogue.new(described, parts, crs, geometries, options))
    except Exception:  # (an interrupt leaves them: the next build names them)
        _remove_partitions(client, built, root, where, local_dir is not None)
        raise


def _remove_partitions(client: Any, built: List[Any], root: str, where: List[str], local: bool) -> None:
    """After a failed build: waits for its partition tasks to end, then
    removes what they wrote (best effort: a directory left behind is
    named by the next build's error)."""
    try:
        from distributed import wait

        wait(built)
        if local:
            base = os.path.dirname(where[0])
            client.run(worker.forget_under, base)
            client.run(worker.remove_tree, base)
        else:
            client.run(worker.forget_under, root)
            for w in where:
                shutil.rmtree(os.path.join(root, w), ignore_errors=True)
    except Exception:
        pass
