"""geoflash: a flash-aware spatial index with the ``rtree`` package's API.

>>> import geoflash
>>> idx = geoflash.Index()                      # in memory (plain store on "mem:")
>>> idx.insert(7, (0.0, 0.0, 1.0, 1.0), obj={"name": "a"})
>>> idx.insert(7, (5.0, 5.0))                   # duplicate ids and points are fine
>>> sorted(idx.intersection((0.5, 0.5, 6.0, 6.0)))
[7, 7]
>>> [it.object for it in idx.intersection((0, 0, 1, 1), objects=True)]
[{'name': 'a'}]
>>> list(idx.nearest((4.0, 4.0), 1))
[7]

An index on disk is a directory (``geoflash.Index("roads.idx")``) that later
opens again with the same call. See ``docs/python.md`` for the whole API,
the stores and devices, and how ids and objects are kept.
"""

from __future__ import annotations

import json
import operator
import os
import pickle
from typing import Any, Iterable, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from ._geoflash import Core as _Core
from ._geoflash import DEFAULTS as _DEFAULTS
from ._geoflash import CorruptIndexError, __version__, parse_size

__all__ = ["Index", "Item", "CorruptIndexError", "DEFAULTS", "parse_size", "__version__"]

#: The product defaults of new indexes (``store``, ``buffer``, ``device``, and
#: ``memory_*`` for an index without a path; ``papers_*``: the papers' settings).
DEFAULTS = dict(_DEFAULTS)

_MANIFEST = "manifest.json"
_EMPTY_BOUNDS = [
    1.7976931348623157e308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    -1.7976931348623157e308,
]
_PREDICATES = ("intersects", "contains", "within")


def _resolve_defaults(path: Any, store: Optional[str], buffer: Any, device: Optional[str]) -> dict:
    """The store, buffer and device a new index gets when not given: the
    product defaults of ``geoflash::defaults`` (chosen by the peer benchmark,
    docs/benchmarks.md): on disk eFIND with 64 MiB through the OS page cache
    (``file?direct=false``); in memory the plain store on ``mem:`` keeping up
    to 1 GiB of decoded nodes. The papers' settings are
    ``buffer="512KiB", device="file"``."""
    where = "memory_" if path is None else ""
    return dict(
        store=_DEFAULTS[where + "store"] if store is None else store,
        buffer=_DEFAULTS[where + "buffer"] if buffer is None else buffer,
        device=_DEFAULTS[where + "device"] if device is None else device,
    )


class Item:
    """An entry found with ``objects=True``: its ``id``, its ``object``
    (unpickled, or None) and its ``bounds`` in ``rtree``'s non-interleaved
    order ``[minx, maxx, miny, maxy]`` (``bbox`` is interleaved)."""

    __slots__ = ("id", "object", "bounds")

    def __init__(self, id: int, object: Any, bounds: Sequence[float]) -> None:
        self.id = id
        self.object = object
        self.bounds = list(bounds)

    @property
    def bbox(self) -> list:
        """``[minx, miny, maxx, maxy]``."""
        b = self.bounds
        return [b[0], b[2], b[1], b[3]]

    def __lt__(self, other: "Item") -> bool:
        return self.id < other.id

    def __gt__(self, other: "Item") -> bool:
        return self.id > other.id

    def __repr__(self) -> str:
        return f"Item(id={self.id!r}, object={self.object!r}, bbox={self.bbox!r})"


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, bytes, os.PathLike))


def _as_int(value: Any, what: str = "id") -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer, not {type(value).__name__}") from None


class Index:
    """A 2-D spatial index with the ``rtree.index.Index`` API.

    ``Index(path=None, stream=None, *, kind="rstar", split=None,
    page_size=4096, store=None, buffer=None, device=None,
    durability="group", interleaved=True, readonly=False, bulk="str",
    fill=1.0, **store_params)``

    - ``path``: an index directory; ``None`` keeps the index in this process.
      A directory that already holds an index is opened (the other
      options are then those it was created with).
    - ``stream``: an iterable of ``(id, coordinates, obj)`` bulk-loaded into a
      new index (``bulk`` = ``"str"`` or ``"hilbert"`` at fill factor ``fill``).
    - ``kind``: ``"rtree"``, ``"rstar"`` or ``"hilbert"``; ``split``:
      ``"linear"``, ``"quadratic"`` (default) or ``"exponential"``. A
      Hilbert R-tree maps ``hilbert_domain=(minx, miny, maxx, maxy)`` onto
      its curve (objects outside it are clamped): required for an index
      built by insertion, the data's extent by default for a bulk load
      (a stream, ``from_arrays``, ``from_geoseries``).
    - ``store``: ``"efind"``, ``"fast"`` or ``"plain"``; ``buffer``: its memory
      budget (``"512KiB"`` or bytes); ``device``: a device string of the
      command line (``"file"``, ``"file?direct=false"``, ``"mem:"``,
      ``"flashsim:preset=seed-tc58"``, ...). Defaults (``geoflash.DEFAULTS``,
      chosen by the peer benchmark): with a path eFIND, ``"64MiB"``,
      ``"file?direct=false"`` (the OS page cache); without one the plain
      store on ``"mem:"`` with ``"1GiB"`` (no log to write). The papers'
      settings are ``buffer="512KiB", device="file"`` (direct I/O).
    - ``store_params``: ``max_entries``, ``min_entries``, ``reinsert_percent``,
      ``buffer_policy``, eFIND's ``read_buffer_percent``,
      ``flush_percent``, ``flush_policy``, ``temporal_control``, FAST's
      ``fast_policy`` (``"fast"``, ``"fast-star"``, ``"flush-all"``,
      ``"random"``), and ``flush_unit``, ``log_capacity`` and ``log_format``
      (``"first-image"``, the default, or the papers' ``"per-change"``) of
      either.
    - ``interleaved``: coordinates as ``(minx, miny, maxx, maxy)`` (True) or
      ``(minx, maxx, miny, maxy)`` (False); a point ``(x, y)`` is accepted
      everywhere.
    """

    def __init__(
        self,
        *args: Any,
        kind: str = "rstar",
        split: Optional[str] = None,
        page_size: int = 4096,
        store: Optional[str] = None,
        buffer: Union[str, int, None] = None,
        device: Optional[str] = None,
        durability: str = "group",
        interleaved: bool = True,
        readonly: bool = False,
        bulk: str = "str",
        fill: float = 1.0,
        **store_params: Any,
    ) -> None:
        self.interleaved = bool(interleaved)
        self._geoms: Optional[np.ndarray] = None
        path: Any = None
        stream: Any = None
        if len(args) > 2:
            raise ValueError("Index takes at most two positional arguments: path and stream")
        if len(args) == 1:
            if args[0] is None or _is_path(args[0]):
                path = args[0]
            else:
                stream = args[0]
        elif len(args) == 2:
            path, stream = args
        if path is not None:
            path = os.fsdecode(os.fspath(path))
        options = dict(
            kind=kind,
            split=split,
            page_size=page_size,
            durability=durability,
            **_resolve_defaults(path, store, buffer, device),
            **store_params,
        )
        if path is not None and os.path.isfile(os.path.join(path, _MANIFEST)):
            if stream is not None:
                raise ValueError(f"{path} already holds an index: a stream builds a new one")
            self._core = _Core.open(path, readonly)
        elif readonly:
            raise ValueError(
                f"{path!r} holds no index to open read-only"
                if path is not None
                else "an index in memory cannot be read-only"
            )
        elif stream is not None:
            ids, boxes, objs = self._consume(stream)
            self._core = _Core.bulk(
                path, options, ids.tobytes(), boxes.tobytes(), objs, bulk, float(fill)
            )
        else:
            self._core = _Core.create(path, options)

    # ----------------------------------------------------------------- helpers

    def _box(self, coordinates: Any) -> Tuple[float, float, float, float]:
        """Coordinates as ``(minx, miny, maxx, maxy)``."""
        try:
            c = [float(v) for v in coordinates]
        except (TypeError, ValueError) as e:
            raise ValueError(f"coordinates must be 2 or 4 numbers: {e}") from None
        if len(c) == 2:
            return (c[0], c[1], c[0], c[1])
        if len(c) != 4:
            raise ValueError(
                f"coordinates must be 2 numbers (a point) or 4 (a box), not {len(c)}"
            )
        if self.interleaved:
            return (c[0], c[1], c[2], c[3])
        return (c[0], c[2], c[1], c[3])

    def _bounds_out(self, b: Sequence[float]) -> list:
        """A box in the index's coordinate order."""
        if self.interleaved:
            return [b[0], b[1], b[2], b[3]]
        return [b[0], b[2], b[1], b[3]]

    def _consume(self, stream: Iterable) -> Tuple[np.ndarray, np.ndarray, Optional[list]]:
        ids, boxes, objs = [], [], []
        any_obj = False
        for n, item in enumerate(stream):
            try:
                id_, coords, obj = item
            except (TypeError, ValueError):
                raise ValueError(
                    f"stream item {n} is not an (id, coordinates, obj) triple"
                ) from None
            ids.append(_as_int(id_))
            boxes.append(self._box(coords))
            if obj is not None:
                any_obj = True
                objs.append(pickle.dumps(obj))
            else:
                objs.append(None)
        return (
            np.asarray(ids, dtype=np.int64).reshape(-1),
            np.asarray(boxes, dtype=np.float64).reshape(-1, 4),
            objs if any_obj else None,
        )

    def _items(self, raw: list, objects: Any) -> Iterator[Any]:
        if objects == "raw":
            return iter([None if o is None else pickle.loads(o) for _, o, _ in raw])
        return iter(
            [
                Item(i, None if o is None else pickle.loads(o), [b[0], b[2], b[1], b[3]])
                for i, o, b in raw
            ]
        )

    # ------------------------------------------------------------ construction

    @classmethod
    def from_arrays(
        cls,
        ids: Any,
        boxes: Any,
        path: Any = None,
        **options: Any,
    ) -> "Index":
        """A new index bulk-loaded from NumPy arrays: ``ids`` (N integers, or
        None for ``0..N-1``) and ``boxes`` (N×4 ``minx, miny, maxx, maxy``
        float64), without a Python loop. ``options`` are those of ``Index``."""
        b = np.asarray(boxes)
        if b.ndim != 2 or b.shape[1] != 4:
            raise ValueError(f"boxes must be an N×4 array, not of shape {b.shape}")
        if not np.issubdtype(b.dtype, np.number) or np.issubdtype(b.dtype, np.complexfloating):
            raise ValueError(f"boxes must be real numbers, not {b.dtype}")
        b = np.ascontiguousarray(b, dtype=np.float64)
        if ids is None:
            i = np.arange(len(b), dtype=np.int64)
        else:
            i = np.asarray(ids)
            if i.ndim != 1 or len(i) != len(b):
                raise ValueError(f"ids must be a 1-D array of {len(b)} integers, not of shape {i.shape}")
            if not np.issubdtype(i.dtype, np.integer):
                raise ValueError(f"ids must be integers, not {i.dtype}")
            i = np.ascontiguousarray(i, dtype=np.int64)
        return cls._with_core(
            options,
            lambda path, opts, bulk, fill: _Core.bulk(
                path, opts, i.tobytes(), b.tobytes(), None, bulk, fill
            ),
            path,
        )

    @classmethod
    def _with_core(cls, options: dict, make: Any, path: Any) -> "Index":
        self = cls.__new__(cls)
        self.interleaved = bool(options.pop("interleaved", True))
        self._geoms = None
        bulk = options.pop("bulk", "str")
        fill = float(options.pop("fill", 1.0))
        if path is not None:
            path = os.fsdecode(os.fspath(path))
        opts = dict(kind="rstar", page_size=4096, durability="group")
        opts.update(options)
        opts.update(
            _resolve_defaults(path, opts.get("store"), opts.get("buffer"), opts.get("device"))
        )
        self._core = make(path, opts, bulk, fill)
        return self

    @classmethod
    def from_geoseries(cls, geoseries: Any, path: Any = None, **options: Any) -> "Index":
        """A new index of the geometries of a GeoSeries (or any array of
        shapely 2 geometries), bulk-loaded from their vectorised bounds.
        Ids are the positions (``gdf.iloc[ids]``); missing and empty
        geometries are left out. The exact geometries serve
        ``query(geom, predicate)``: kept in memory for an index without a
        path, in the directory's object heap (WKB) otherwise."""
        import shapely

        values = getattr(geoseries, "values", geoseries)
        geoms = np.asarray(values, dtype=object)
        if geoms.ndim != 1:
            raise ValueError(f"expected a 1-D sequence of geometries, not shape {geoms.shape}")
        ok = ~(shapely.is_missing(geoms) | shapely.is_empty(geoms))
        positions = np.flatnonzero(ok).astype(np.int64)
        kept = geoms[ok]
        if path is None:
            boxes = np.ascontiguousarray(shapely.bounds(kept), dtype=np.float64).reshape(-1, 4)
            self = cls._with_core(
                options,
                lambda p, opts, bulk, fill: _Core.bulk(
                    p, opts, positions.tobytes(), boxes.tobytes(), None, bulk, fill
                ),
                None,
            )
            self._geoms = geoms
            return self
        wkbs = list(shapely.to_wkb(kept, output_dimension=2))
        return cls._with_core(
            options,
            lambda p, opts, bulk, fill: _Core.bulk_geometries(
                p, opts, positions.tobytes(), wkbs, bulk, fill
            ),
            path,
        )

    @classmethod
    def from_geodataframe(cls, gdf: Any, path: Any = None, **options: Any) -> "Index":
        """``from_geoseries(gdf.geometry, ...)``: ids are row positions."""
        return cls.from_geoseries(gdf.geometry, path, **options)

    # ------------------------------------------------------------- rtree API

    def insert(self, id: int, coordinates: Any, obj: Any = None) -> None:
        """Inserts an entry with ``id`` (duplicates allowed) and the box or
        point; ``obj`` is pickled and returned by ``objects=True`` queries."""
        box = self._box(coordinates)
        data = None if obj is None else pickle.dumps(obj)
        self._core.insert(_as_int(id), *box, data)

    add = insert

    def delete(self, id: int, coordinates: Any) -> None:
        """Deletes one entry with ``id`` and exactly these coordinates
        (nothing happens if there is none, as in ``rtree``)."""
        self._core.delete(_as_int(id), *self._box(coordinates))

    def intersection(self, coordinates: Any, objects: Any = False) -> Iterator[Any]:
        """Ids (or ``Item``s with ``objects=True``, the objects with
        ``objects="raw"``) of the entries intersecting the box (touching counts)."""
        return self._range(coordinates, "intersects", objects)

    def contains(self, coordinates: Any, objects: Any = False) -> Iterator[Any]:
        """Ids (or items) of the entries lying inside the box, as ``rtree``'s ``contains``."""
        return self._range(coordinates, "contains", objects)

    def _range(self, coordinates: Any, predicate: str, objects: Any) -> Iterator[Any]:
        box = self._box(coordinates)
        if objects:
            return self._items(self._core.query_items(*box, predicate), objects)
        return iter(self._core.query(*box, predicate))

    def count(self, coordinates: Any) -> int:
        """Number of entries intersecting the box."""
        return self._core.count(*self._box(coordinates), "intersects")

    def nearest(self, coordinates: Any, num_results: int = 1, objects: Any = False) -> Iterator[Any]:
        """Ids (or items) of the ``num_results`` entries nearest to the point
        or box, nearest first; entries tied with the last are returned too,
        as ``rtree`` does."""
        k = _as_int(num_results, "num_results")
        if k < 0:
            raise ValueError(f"num_results must be at least 0, not {k}")
        box = self._box(coordinates)
        if objects:
            return self._items(self._core.nearest(*box, k, True, True), objects)
        return iter(self._core.nearest(*box, k, True, False))

    @property
    def bounds(self) -> list:
        """The MBR of all entries in the index's coordinate order (``rtree``'s
        inverted infinite box when empty)."""
        b = self._core.bounds()
        return self._bounds_out(_EMPTY_BOUNDS if b is None else b)

    def get_bounds(self, coordinate_interleaved: Optional[bool] = None) -> list:
        """The bounds, interleaved or not (default: the index's order)."""
        b = self._core.bounds()
        b = _EMPTY_BOUNDS if b is None else list(b)
        inter = self.interleaved if coordinate_interleaved is None else coordinate_interleaved
        return b if inter else [b[0], b[2], b[1], b[3]]

    def leaves(self) -> list:
        """The leaf nodes, as ``rtree``'s ``Index.leaves()``: a list of
        ``(leaf_id, [ids of its entries], [minx, miny, maxx, maxy])``, one
        per leaf node of the tree, left to right (an empty list for an empty
        index). ``leaf_id`` is the node's page number; the bounds are the
        union of the entries' boxes, always ``[minx, miny, maxx, maxy]`` as
        in ``rtree`` (mins, then maxs, whatever ``interleaved`` says). Every
        entry is in exactly one leaf."""
        return [(leaf, ids, list(b)) for leaf, ids, b in self._core.leaves()]

    def __len__(self) -> int:
        return len(self._core)

    def __repr__(self) -> str:
        if self._core.closed:
            return "geoflash.Index(closed)"
        return f"geoflash.Index(path={self._core.path!r}, bounds={self.bounds}, size={len(self)})"

    # ----------------------------------------------------------- NumPy batch

    def intersection_batch(self, boxes: Any, predicate: str = "intersects") -> Tuple[np.ndarray, np.ndarray]:
        """Range queries of N boxes (N×4 ``minx, miny, maxx, maxy``) in one
        traversal with the GIL released. Returns ``(offsets, ids)``: int64
        arrays where the answer of box ``i`` is ``ids[offsets[i]:offsets[i+1]]``."""
        if predicate not in _PREDICATES:
            raise ValueError(f"unknown predicate {predicate!r}: use one of {_PREDICATES}")
        b = np.asarray(boxes)
        if b.ndim != 2 or b.shape[1] != 4:
            raise ValueError(f"boxes must be an N×4 array, not of shape {b.shape}")
        if not np.issubdtype(b.dtype, np.number) or np.issubdtype(b.dtype, np.complexfloating):
            raise ValueError(f"boxes must be real numbers, not {b.dtype}")
        b = np.ascontiguousarray(b, dtype=np.float64)
        offsets, ids = self._core.query_batch(b.tobytes(), predicate)
        return (np.frombuffer(offsets, dtype=np.int64).copy(), np.frombuffer(ids, dtype=np.int64).copy())

    # ------------------------------------------------------ exact geometries

    def query(self, geometry: Any, predicate: Optional[str] = "intersects") -> np.ndarray:
        """Ids of the entries whose geometry satisfies
        ``predicate(geometry, entry)`` exactly, as shapely's
        ``STRtree.query``: ``"intersects"``, ``"contains"`` (entries inside
        ``geometry``), ``"within"`` (entries containing it), or None for the
        bounding-box test only. The MBR filter runs in the index, the exact
        test on the stored geometries (entries inserted without one count
        as their box). For an index built by ``from_geoseries`` the ids are
        positions (``gdf.iloc[ids]``). An array of geometries gives a 2×M
        array of (input position, id) pairs."""
        import shapely

        if predicate is not None and predicate not in _PREDICATES:
            raise ValueError(f"unknown predicate {predicate!r}: use one of {_PREDICATES} or None")
        if isinstance(geometry, shapely.Geometry):
            return self._query_one(shapely, geometry, predicate)
        geoms = np.asarray(geometry, dtype=object)
        if geoms.ndim != 1:
            raise ValueError("geometry must be a shapely geometry or a 1-D array of them")
        left, right = [], []
        for i, g in enumerate(geoms):
            found = self._query_one(shapely, g, predicate)
            left.append(np.full(len(found), i, dtype=np.int64))
            right.append(found)
        if not left:
            return np.empty((2, 0), dtype=np.int64)
        return np.vstack([np.concatenate(left), np.concatenate(right)])

    def _query_one(self, shapely: Any, geom: Any, predicate: Optional[str]) -> np.ndarray:
        if not isinstance(geom, shapely.Geometry):
            raise ValueError(f"expected a shapely geometry, not {type(geom).__name__}")
        if shapely.is_empty(geom):
            return np.empty(0, dtype=np.int64)
        box = tuple(float(v) for v in shapely.bounds(geom))
        keys_b, ids_b, rects_b = self._core.query_keys(*box, predicate or "intersects")
        ids = np.frombuffer(ids_b, dtype=np.int64)
        if predicate is None or len(ids) == 0:
            return np.sort(ids)
        if self._geoms is not None:
            cands = self._geoms[ids]
        else:
            wkbs = self._core.wkb(keys_b)
            cands = np.empty(len(wkbs), dtype=object)
            missing = [i for i, w in enumerate(wkbs) if w is None]
            present = [i for i, w in enumerate(wkbs) if w is not None]
            if present:
                cands[present] = shapely.from_wkb([wkbs[i] for i in present])
            if missing:
                r = np.frombuffer(rects_b, dtype=np.float64).reshape(-1, 4)[missing]
                cands[missing] = shapely.box(r[:, 0], r[:, 1], r[:, 2], r[:, 3])
        mask = getattr(shapely, predicate)(geom, cands)
        return np.sort(ids[np.asarray(mask, dtype=bool)])

    # ------------------------------------------------------------- lifecycle

    @property
    def stats(self) -> dict:
        """Device and store counters since the index was opened (the
        engine's ``Stats`` record: pages read and written, buffer hits,
        NAND programs and erases on a simulated device, ...)."""
        return json.loads(self._core.stats_json())

    @property
    def properties(self) -> dict:
        """The index's manifest: kind, page size, device, tree and store parameters."""
        return json.loads(self._core.manifest_json())

    @property
    def path(self) -> Optional[str]:
        """The index directory, or None for an index in memory."""
        p = self._core.path
        return None if p is None else os.fspath(p)

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._core.closed

    def flush(self) -> None:
        """Makes everything durable (``checkpoint()``)."""
        self._core.checkpoint()

    def checkpoint(self) -> None:
        """Writes the id map and every buffered node and syncs the device;
        the index needs no recovery after it."""
        self._core.checkpoint()

    def close(self) -> None:
        """Checkpoints and closes the index; any later use raises ValueError."""
        self._core.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
