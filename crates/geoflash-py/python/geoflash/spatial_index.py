"""``geoflash.Index``: a 2-D spatial index with the API of ``rtree.index.Index``.

The class follows rtree's documented behaviour (``tests/test_rtree_compat.py``
and ``tests/test_rtree_api.py`` compare answers, array layouts and exception
classes with rtree itself); ``docs/python.md`` has the table of rtree's
names with geoflash's status per name. Beyond rtree, an index pickles (in
memory by content, on disk by path), is a context manager, takes NumPy
arrays (``from_arrays``, ``intersection_batch``) and shapely geometries
(``from_geoseries``, ``query``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import operator
import os
import pickle
import warnings
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._geoflash import GRID_KINDS as _GRID_KINDS
from ._geoflash import KINDS as _KINDS
from ._geoflash import SETTINGS as _SETTINGS
from ._geoflash import Core as _Core
from ._geoflash import box_of as _box_of
from . import _exact
from .exceptions import InvalidCoordinatesError, InvalidIdError, RTreeError
from .property import RT_Disk, RT_Memory, describe, from_manifest, page_size_for, tree_options

__all__ = ["Index", "Item", "Rtree"]

_MANIFEST = "manifest.json"
_EMPTY_BOUNDS = [
    1.7976931348623157e308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    -1.7976931348623157e308,
]
# Every stored box lies inside it (the engine clamps query windows to it).
_WORLD = (-np.inf, -np.inf, np.inf, np.inf)
_PREDICATES = ("intersects", "contains", "within")
#: The keyword arguments that change what a Property says of a tree.
_TREE_KEYS = frozenset(("max_entries", "min_entries", "min_fill", "reinsert_percent", "reinsert", "split"))


#: The grid files (GFFM, LB-Grid, the Grid File, H-Grid): point indexes with
#: a bucket layer of their own instead of a node store (no ``store`` key),
#: as the engine names them. The defaults of a new index (store, buffer,
#: device; ``geoflash.DEFAULTS``) are the engine's too: it applies those of
#: an index in memory when there is no path, and keeps a FOR-tree or a
#: grid file on the plain store unless told otherwise.
GRID_KINDS = _GRID_KINDS
#: Every name the ``kind`` option takes, as the engine names them.
KINDS = _KINDS
#: Every keyword argument of ``Index`` that sets up a new index, with what
#: it does (the engine's one table of settings, as ``geoflash build --help``
#: prints it); aliases such as ``reinsert`` are also taken.
SETTINGS = _SETTINGS


#: Rows per chunk a bulk load hands to the core (see :func:`bulk_chunks`).
BULK_CHUNK_ROWS = 1 << 16


def bulk_chunks(ids: np.ndarray, boxes: np.ndarray) -> Iterator[Tuple[bytes, bytes]]:
    """``ids`` (int64) and ``boxes`` (N×4 float64) as the core's bulk load
    takes them: byte strings of :data:`BULK_CHUNK_ROWS` rows at a time, each
    freed before the next is made, so the copies out of NumPy reuse a few
    MB instead of the input's size in fresh memory. Arrays of different
    lengths give chunks the core refuses."""
    rows = max(len(ids), len(boxes))
    for i in range(0, rows, BULK_CHUNK_ROWS):
        yield ids[i : i + BULK_CHUNK_ROWS].tobytes(), boxes[i : i + BULK_CHUNK_ROWS].tobytes()


class Item:
    """An entry found with ``objects=True``: its ``id``, its ``object``
    (decoded by the index's ``loads``, or None) and its ``bounds`` in
    ``rtree``'s non-interleaved order ``[minx, maxx, miny, maxy]`` (``bbox``
    is interleaved)."""

    __slots__ = ("id", "object", "bounds")

    def __init__(self, id: Optional[int], object: Any, bounds: Sequence[float]) -> None:
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


def _is_shapely_geometry(value: Any) -> bool:
    """Is ``value`` a shapely 2 geometry (without importing shapely)?"""
    return type(value).__module__.startswith("shapely")


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, bytes, os.PathLike))


def _is_custom_storage(value: Any) -> bool:
    """rtree's ``ICustomStorage`` (geoflash's placeholder or rtree's own)."""
    return hasattr(value, "registerCallbacks") and hasattr(type(value), "hasData")


def _is_empty_sequence(value: Any) -> bool:
    """An empty list or tuple (rtree builds an empty index from it)."""
    return isinstance(value, (list, tuple)) and len(value) == 0


def _as_int(value: Any, what: str = "id") -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise RTreeError(f"{what} must be an integer, not {type(value).__name__}") from None


#: The range of the ids geoflash stores (int64, as rtree's).
_ID_MIN, _ID_MAX = -(1 << 63), (1 << 63) - 1


def _out_of_range(id_: int, where: str = "") -> OverflowError:
    return OverflowError(
        f"id {id_}{where} is outside the range of ids, int64 "
        f"[-2**63, 2**63 - 1]: it would not come back as the same id"
    )


def _stores_geometry(id_: int, row: Optional[int] = None) -> RTreeError:
    """The refusal of ``update`` for an entry that stores an exact geometry,
    in the words of the core's for an index in a directory (``row``: the
    row of ``update_batch``)."""
    at = "" if row is None else f"row {row}: "
    return RTreeError(
        f"invalid input: {at}id {id_}: its entry stores an exact geometry (from_geoseries), "
        "whose box is that geometry's bounds and cannot move apart from it: delete the "
        "entry and insert it again instead (an inserted entry has no geometry and counts as its box)"
    )


def _as_id(value: Any) -> int:
    """An id: an integer (``__index__``) in the int64 range. Anything else
    raises InvalidIdError (an RTreeError, a TypeError and rtree's
    ``ctypes.ArgumentError``); an integer beyond the range raises
    OverflowError naming it (it would wrap to another id)."""
    try:
        i = operator.index(value)
    except TypeError:
        raise InvalidIdError(f"id must be an integer, not {type(value).__name__}") from None
    if not _ID_MIN <= i <= _ID_MAX:
        raise _out_of_range(i)
    return i


def _int64_ids(ids: np.ndarray) -> np.ndarray:
    """A 1-D array of integer ids (any integer dtype, or Python integers in
    an object array) as contiguous int64, without wrapping: an id outside
    the int64 range (a uint64 above 2**63 - 1 would become a negative id)
    raises OverflowError naming it and its position."""
    if ids.dtype == object:
        return np.array([_as_id(v) for v in ids], dtype=np.int64)
    if not np.issubdtype(ids.dtype, np.integer):
        raise RTreeError(f"ids must be integers, not {ids.dtype}")
    if ids.dtype.kind == "u" and ids.dtype.itemsize >= 8 and ids.size:
        over = np.flatnonzero(ids > np.uint64(_ID_MAX))
        if len(over):
            p = int(over[0])
            raise _out_of_range(int(ids[p]), f" (position {p})")
    return np.ascontiguousarray(ids, dtype=np.int64)


#: Containers whose items are characters or bytes, never coordinates:
#: ``float()`` would parse ``"1"`` and iterating ``b"ab"`` gives 97 and 98.
_TEXT = (str, bytes, bytearray, memoryview)


def _box_of_other(coordinates: Any, interleaved: bool) -> Tuple[float, float, float, float]:
    """The coordinates that ``_box_of`` (the extension's reading of a list or
    tuple of 2 or 4 real numbers) does not take: another sequence or
    iterable of them (a NumPy array, a generator), or else the error.
    Text and bytes, and items that are not real numbers, raise
    :class:`InvalidCoordinatesError` (a ``TypeError`` and an ``RTreeError``)
    naming the argument; a wrong count raises ``RTreeError``, or
    ``NotImplementedError`` for 3-D and higher."""
    what = type(coordinates).__name__
    if isinstance(coordinates, np.ndarray) and coordinates.ndim == 1:
        # Its numbers as Python's in one call (strings stay strings).
        items = coordinates.tolist()
    elif isinstance(coordinates, _TEXT):
        raise InvalidCoordinatesError(
            f"coordinates must be a sequence of 2 or 4 real numbers, not {what} {coordinates!r:.60}"
        )
    else:
        try:
            items = tuple(coordinates)
        except TypeError:
            raise InvalidCoordinatesError(
                f"coordinates must be a sequence of 2 or 4 real numbers, not {what}"
            ) from None
    box = _box_of(items, interleaved)
    if box is not None:
        return box
    for i, v in enumerate(items):
        # A real number is what the extension takes (the same test as above).
        if _box_of((v, v), True) is None:
            raise InvalidCoordinatesError(
                f"coordinates must be real numbers: item {i} of the {what} is "
                f"{type(v).__name__} {v!r:.60}"
            )
    n = len(items)
    if n % 2 == 0 and n > 4:
        raise NotImplementedError(
            f"geoflash indexes 2-D data only: {n} coordinates (3-D and higher) are not implemented"
        )
    raise RTreeError(f"coordinates must be 2 numbers (a point) or 4 (a box), not {n}")


def _real_array(value: Any, what: str) -> np.ndarray:
    a = np.asarray(value)
    if not np.issubdtype(a.dtype, np.number) or np.issubdtype(a.dtype, np.complexfloating):
        raise RTreeError(f"{what} must be real numbers, not {a.dtype}")
    return a


def _v_arrays(mins: Any, maxs: Any) -> Tuple[np.ndarray, np.ndarray]:
    """rtree's ``_prepare_v_arrays``: (n, 2) float64 arrays of the windows'
    minima and maxima (a 1-D pair is one window)."""
    if mins is maxs:
        mins = maxs = np.atleast_2d(_real_array(mins, "mins")).astype(np.float64)
    else:
        mins = np.atleast_2d(_real_array(mins, "mins")).astype(np.float64)
        maxs = np.atleast_2d(_real_array(maxs, "maxs")).astype(np.float64)
    if mins.ndim != 2 or maxs.ndim != 2:
        raise ValueError("mins/maxs must have 2 dimensions: (n, d)")
    if mins.shape != maxs.shape:
        raise ValueError("mins and maxs shapes not equal")
    if mins.shape[1] != 2:
        if mins.shape[1] > 2:
            raise NotImplementedError(
                f"geoflash indexes 2-D data only: windows of {mins.shape[1]} dimensions "
                "(3-D and higher) are not implemented"
            )
        raise RTreeError(f"mins/maxs must have 2 columns (x, y), not {mins.shape[1]}")
    return mins, maxs


class Index:
    """A 2-D spatial index with the ``rtree.index.Index`` API.

    ``Index(*args, properties=None, interleaved=True, overwrite=False,
    pagesize=None, kind=None, split=None, page_size=None, store=None,
    buffer=None, device=None, durability=None, readonly=False,
    bulk="str", fill=None, **store_params)``

    Positional arguments as in rtree: ``Index()``, ``Index(path)``,
    ``Index(stream)``, ``Index(path, stream)``, ``Index((ids, mins, maxs))``
    and ``Index(path, (ids, mins, maxs))``.

    - ``path``: an index directory; ``None`` keeps the index in this process.
      A directory that already holds an index is opened (the other
      options are then those it was created with) unless ``overwrite=True``,
      which replaces it with a new, empty one.
    - ``stream``: an iterable of ``(id, coordinates, obj)`` bulk-loaded into a
      new index (``bulk`` = ``"str"`` or ``"hilbert"`` at fill factor
      ``fill``, default 1.0, or the ``fill_factor`` of ``properties``). An
      empty iterator raises :class:`RTreeError`, an empty list or tuple gives
      an empty index, as in rtree.
    - ``(ids, mins, maxs)``: NumPy arrays (N ids, N×2 minima, N×2 maxima)
      bulk-loaded without a Python loop.
    - ``properties``: a :class:`Property` (or rtree's own): variant,
      capacity, fill factor, page size, and geoflash's ``kind`` and
      ``kind_options``; see ``geoflash.property``. ``pagesize`` sets
      ``properties.pagesize`` (rounded up to a node page). The index's
      ``properties`` describe it (the Property given, with what keywords
      or an existing index changed written into it), so that
      ``Index(properties=idx.properties)`` creates the same kind again.
    - ``kind``: ``"rtree"``, ``"rstar"`` (default) or ``"hilbert"``; ``split``:
      ``"linear"``, ``"quadratic"`` (default) or ``"exponential"``;
      ``page_size``: the node page in bytes (a power of two, 512 to 65536;
      default 4096). They override ``properties`` (a ``kind`` naming
      another kind leaves out its ``kind_options``). A Hilbert R-tree maps
      ``hilbert_domain=(minx, miny, maxx, maxy)`` onto its curve (objects
      outside it are clamped): required for an index built by insertion,
      the data's extent by default for a bulk load. The FOR-tree
      (``"fortree"``, on the plain store, its default: it keeps its own
      buffer) and the xBR+-tree (``"xbr"``, points, on every store). The grid files ``"grid"``, ``"gffm"``, ``"lbgrid"`` and
      ``"hgrid"`` (points; :data:`GRID_KINDS`) are built by insertion over
      ``hilbert_domain``, have no node store (``store`` is refused, ``buffer``
      is their memory budget) and take ``grid_queries`` (``"plain"`` or
      ``"batched"``), ``grid_dir_share``, ``grid_cold_pages``, ``grid_s`` and
      ``grid_special``; H-Grid needs a hybrid device.
    - ``store``: ``"efind"``, ``"fast"`` or ``"plain"``; ``buffer``: its memory
      budget (``"512KiB"`` or bytes); ``device``: a device string of the
      command line (``"file"``, ``"file?direct=false"``, ``"mem:"``,
      ``"flashsim:preset=seed-tc58"``, ...). Defaults (``geoflash.DEFAULTS``,
      chosen by the peer benchmark): with a path eFIND, a budget of an
      eighth of the machine's memory between ``"256MiB"`` and ``"1GiB"``,
      ``"file?direct=false"`` (the OS page cache); without one the plain
      store on ``"mem:"`` with ``"1GiB"`` (no log to write). The papers'
      settings are ``buffer="512KiB", device="file"`` (direct I/O).
    - ``store_params``: ``max_entries``, ``min_entries``, ``reinsert_percent``,
      ``buffer_policy``, eFIND's ``read_buffer_percent``, ``read_buffer_mode``,
      ``flush_percent``, ``flush_policy``, ``temporal_control``, FAST's
      ``fast_policy`` (``"fast"``, ``"fast-star"``, ``"flush-all"``,
      ``"random"``), and ``flush_unit``, ``log_capacity`` and ``log_format``
      (``"compact"``, the default, ``"first-image"`` or the papers'
      ``"per-change"``) of
      either.
    - ``interleaved``: coordinates as ``(minx, miny, maxx, maxy)`` (True) or
      ``(minx, maxx, miny, maxy)`` (False); a point ``(x, y)`` is accepted
      everywhere.

    Query windows may be unbounded (``(-inf, -inf, inf, inf)`` finds
    everything); stored boxes must be finite (magnitude at most 1e150).
    Bad input raises :class:`RTreeError`; 3-D data, the TPR-tree, the
    MVR-tree and custom storage raise ``NotImplementedError``.
    """

    def __init__(
        self,
        *args: Any,
        properties: Any = None,
        interleaved: bool = True,
        overwrite: bool = False,
        pagesize: Optional[int] = None,
        kind: Optional[str] = None,
        split: Optional[str] = None,
        page_size: Optional[int] = None,
        store: Optional[str] = None,
        buffer: Union[str, int, None] = None,
        device: Optional[str] = None,
        durability: Optional[str] = None,
        readonly: bool = False,
        bulk: str = "str",
        fill: Optional[float] = None,
        **store_params: Any,
    ) -> None:
        path, stream, arrays = self._split_args(args)
        tree: dict = {}
        bulk_fill = 1.0
        if properties is not None:
            if pagesize:
                properties.pagesize = int(pagesize)
            tree, bulk_fill = tree_options(properties, kind)
        elif pagesize is not None:
            size = _as_int(pagesize, "pagesize")
            if size <= 0:
                raise RTreeError(f"pagesize must be > 0, not {size}")
            tree["page_size"] = page_size_for(0, size)
        for key, value in (("kind", kind), ("split", split), ("page_size", page_size)):
            if value is not None:
                tree[key] = value
        options = dict(store=store, buffer=buffer, device=device, durability=durability)
        options.update(tree)
        options.update(store_params)
        self._setup(interleaved, options, bulk, bulk_fill if fill is None else float(fill))
        existed = exists = path is not None and os.path.isfile(os.path.join(path, _MANIFEST))
        if exists and overwrite:
            if readonly:
                raise RTreeError("overwrite=True replaces an index: it cannot be read-only")
            _Core.destroy(path)
            exists = False
        if exists:
            if stream is not None or arrays is not None:
                raise RTreeError(f"{path} already holds an index: a stream builds a new one")
            self._core = _Core.open(path, readonly)
        elif readonly:
            raise RTreeError(
                f"{path!r} holds no index to open read-only"
                if path is not None
                else "an index in memory cannot be read-only"
            )
        elif arrays:
            self._core = self._bulk_core(path, *self._from_v_arrays(arrays), None)
        elif stream is not None and not _is_empty_sequence(stream):
            ids, boxes, objs = self._consume(stream)
            if len(ids) == 0:
                raise RTreeError("empty data stream given: a bulk load needs at least one entry")
            self._core = self._bulk_core(path, ids, boxes, objs)
        else:
            self._core = _Core.create(path, options)
        described = from_manifest(self.manifest, path)
        if properties is None:
            properties = described
        else:
            # keywords that change the tree, or an index already there:
            # the Property given no longer says what the index is
            changed = any(v is not None for v in (kind, split, page_size)) or bool(_TREE_KEYS & set(store_params))
            properties = describe(properties, described, changed or existed and not overwrite)
            properties.storage = RT_Memory if path is None else RT_Disk
            if path is not None:
                properties.filename = path
                if existed:
                    properties.overwrite = bool(overwrite)
        self.properties = properties

    def _setup(self, interleaved: bool, options: dict, bulk: str, fill: float) -> None:
        """The Python-side state of a new index object (before its core)."""
        self.interleaved = bool(interleaved)
        self._geoms: Optional[np.ndarray] = None
        # in memory, from_geoseries: which rows had a geometry for their
        # entry to store; less the rows whose own entry was deleted (the
        # core's dropped rows, see _exact.delete_row_entry), those that
        # still store it, as the object heap of a directory holds the
        # geometry of a live entry
        self._held: Optional[np.ndarray] = None
        self._exact = None  # the entries' geometries in Rust (geoflash._exact)
        self._options = options
        self._bulk = (bulk, fill)
        # libspatialindex's result-set limit and offset (0: no paging)
        self._page_limit = 0
        self._page_offset = 0

    @staticmethod
    def _split_args(args: Sequence[Any]) -> Tuple[Optional[str], Any, Any]:
        """(path, stream, arrays) from the positional arguments, as rtree reads them."""
        if len(args) > 2:
            raise RTreeError("Index takes at most two positional arguments: path and stream")
        path: Any = None
        rest: Any = None
        if args:
            first = args[0]
            if first is None or _is_path(first):
                path = first
                rest = args[1] if len(args) > 1 else None
            elif _is_custom_storage(first):
                raise NotImplementedError(
                    "custom storage (rtree's ICustomStorage callbacks) is not implemented by "
                    "geoflash: give a directory path, or a device string (device=...)"
                )
            elif len(args) > 1:
                raise RTreeError("with a stream or arrays, the first argument must be a path")
            else:
                rest = first
        if path is not None:
            path = os.fsdecode(os.fspath(path))
        if isinstance(rest, tuple):
            return path, None, rest
        return path, rest, None

    def _bulk_core(self, path: Optional[str], ids: np.ndarray, boxes: np.ndarray, objs: Optional[list]) -> _Core:
        method, fill = self._bulk
        return _Core.bulk(path, self._options, len(boxes), bulk_chunks(ids, boxes), objs, method, fill)

    def _from_v_arrays(self, arrays: tuple) -> Tuple[np.ndarray, np.ndarray]:
        """``(ids, mins, maxs)`` as rtree's array bulk load takes them."""
        if len(arrays) != 3:
            raise RTreeError("arrays must be a tuple (ids, mins, maxs)")
        ids, mins, maxs = arrays
        mins, maxs = _v_arrays(mins, maxs)
        i = np.asarray(ids)
        if i.dtype != object and not np.issubdtype(i.dtype, np.integer):
            raise RTreeError(f"ids must be integers, not {i.dtype}")
        if i.ndim != 1 or len(i) != len(mins):
            raise ValueError("index and point counts different")
        return (
            _int64_ids(i),
            np.ascontiguousarray(np.hstack([mins, maxs]), dtype=np.float64),
        )

    # ----------------------------------------------------------------- helpers

    def _box(self, coordinates: Any) -> Tuple[float, float, float, float]:
        """Coordinates as ``(minx, miny, maxx, maxy)``: a list or tuple of 2
        or 4 real numbers in one call to the extension (the way of every
        query), anything else by :func:`_box_of_other`, which refuses text,
        bytes and items that are not numbers."""
        box = _box_of(coordinates, self.interleaved)
        if box is None:
            return _box_of_other(coordinates, self.interleaved)
        return box

    def _bounds_out(self, b: Sequence[float]) -> list:
        """A box in the index's coordinate order."""
        if self.interleaved:
            return [b[0], b[1], b[2], b[3]]
        return [b[0], b[2], b[1], b[3]]

    def _pickled(self, obj: Any) -> Optional[bytes]:
        """``dumps(obj)``, None for no object (an empty result counts as none, as in rtree)."""
        if obj is None:
            return None
        data = self.dumps(obj)
        return bytes(data) if len(data) else None

    def _consume(self, stream: Iterable) -> Tuple[np.ndarray, np.ndarray, Optional[list]]:
        ids, boxes, objs = [], [], []
        any_obj = False
        for n, item in enumerate(stream):
            try:
                id_, coords, obj = item
            except (TypeError, ValueError):
                raise RTreeError(
                    f"stream item {n} is not an (id, coordinates, obj) triple"
                ) from None
            ids.append(_as_id(id_))
            boxes.append(self._box(coords))
            data = self._pickled(obj)
            any_obj = any_obj or data is not None
            objs.append(data)
        return (
            np.asarray(ids, dtype=np.int64).reshape(-1),
            np.asarray(boxes, dtype=np.float64).reshape(-1, 4),
            objs if any_obj else None,
        )

    def _load(self, data: Optional[bytes]) -> Any:
        return None if data is None else self.loads(data)

    def _items(self, raw: Iterable[Any], objects: Any) -> Iterator[Any]:
        """The ``Item``s (objects with ``objects="raw"``) of the entries of
        ``raw``, each made as it is yielded: ``raw`` is the core's answer,
        held compactly (49 bytes an entry and the pickles) until then."""
        load = self._load
        if objects == "raw":
            return (load(o) for _, o, _ in raw)
        return (Item(i, load(o), [b[0], b[2], b[1], b[3]]) for i, o, b in raw)

    def _page(self, found: Iterable[Any]) -> Iterator[Any]:
        """The answer after the result-set offset and limit (libspatialindex's
        paging: the offset counts only with a limit)."""
        if not self._page_limit:
            return iter(found)
        return itertools.islice(found, self._page_offset, self._page_offset + self._page_limit)

    def _all_items(self) -> Iterator[Item]:
        """Every entry as an Item (no paging), each made as it is yielded."""
        return self._items(self._core.query_items(*_WORLD, "intersects"), True)

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
        b = _real_array(boxes, "boxes")
        if b.ndim != 2 or b.shape[1] != 4:
            raise RTreeError(f"boxes must be an N×4 array, not of shape {b.shape}")
        b = np.ascontiguousarray(b, dtype=np.float64)
        if ids is None:
            i = np.arange(len(b), dtype=np.int64)
        else:
            i = np.asarray(ids)
            if i.ndim != 1 or len(i) != len(b):
                raise RTreeError(f"ids must be a 1-D array of {len(b)} integers, not of shape {i.shape}")
            i = _int64_ids(i)
        return cls._with_core(options, lambda self, p: self._bulk_core(p, i, b, None), path)

    @classmethod
    def _with_core(cls, options: dict, make: Any, path: Any) -> "Index":
        self = cls.__new__(cls)
        interleaved = options.pop("interleaved", True)
        bulk = options.pop("bulk", "str")
        fill = float(options.pop("fill", 1.0))
        if path is not None:
            path = os.fsdecode(os.fspath(path))
        self._setup(interleaved, dict(options), bulk, fill)
        self._core = make(self, path)
        self.properties = from_manifest(self.manifest, path)
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
            raise RTreeError(f"expected a 1-D sequence of geometries, not shape {geoms.shape}")
        ok = ~(shapely.is_missing(geoms) | shapely.is_empty(geoms))
        positions = np.flatnonzero(ok).astype(np.int64)
        kept = geoms[ok]
        if path is None:
            boxes = np.ascontiguousarray(shapely.bounds(kept), dtype=np.float64).reshape(-1, 4)
            self = cls._with_core(
                options,
                lambda self, p: self._bulk_core(p, positions, boxes, None),
                None,
            )
            self._geoms = geoms
            self._held = np.array(ok, dtype=bool)
            return self
        wkbs = list(shapely.to_wkb(kept, output_dimension=2))
        return cls._with_core(
            options,
            lambda self, p: _Core.bulk_geometries(
                p, self._options, positions.tobytes(), wkbs, *self._bulk
            ),
            path,
        )

    @classmethod
    def from_geodataframe(cls, gdf: Any, path: Any = None, **options: Any) -> "Index":
        """``from_geoseries(gdf.geometry, ...)``: ids are row positions."""
        return cls.from_geoseries(gdf.geometry, path, **options)

    # ------------------------------------------------------------- rtree API

    def dumps(self, obj: Any) -> bytes:
        """Serialises an object stored with an entry (``pickle.dumps``);
        override it with ``loads`` in a subclass to store objects another
        way, as rtree documents."""
        return pickle.dumps(obj)

    def loads(self, string: bytes) -> Any:
        """Decodes what ``dumps`` made (``pickle.loads``)."""
        return pickle.loads(string)

    def insert(self, id: int, coordinates: Any, obj: Any = None) -> None:
        """Inserts an entry with ``id`` (duplicates allowed) and the box or
        point; ``obj`` is stored as ``dumps(obj)`` and returned by
        ``objects=True`` queries."""
        # The common case (an integer id, a list or tuple of numbers, no
        # object) in one call; anything else is checked here as always.
        self._exact = None
        if obj is None and self._core.insert_plain(id, coordinates, self.interleaved):
            return
        box = self._box(coordinates)
        self._core.insert(_as_id(id), *box, self._pickled(obj))

    add = insert

    def delete(self, id: int, coordinates: Any) -> None:
        """Deletes one entry with ``id`` and exactly these coordinates
        (nothing happens if there is none, as in ``rtree``)."""
        self._delete(id, coordinates)

    def _delete(self, id: int, coordinates: Any) -> bool:
        """:meth:`delete`, saying whether an entry was deleted."""
        self._exact = None
        i, box = _as_id(id), self._box(coordinates)
        if self._holds(i):
            import shapely

            # the row's entry has the geometry's box: deleted, it is gone
            # with its geometry (not when an exact duplicate of it is the
            # one deleted), as a directory's delete removes it from the heap
            if tuple(shapely.bounds(self._geoms[i]).tolist()) == tuple(box):
                return _exact.delete_row_entry(self, i, box)
        return bool(self._core.delete(i, *box))

    def _holds(self, id_: int) -> bool:
        """In memory, from_geoseries: does the entry of row ``id_`` still
        store that row's geometry?"""
        held = self._held
        return held is not None and 0 <= id_ < len(held) and bool(held[id_]) and not self._core.row_dropped(id_)

    def _held_now(self) -> Optional[np.ndarray]:
        """In memory, from_geoseries: which rows store their geometry now."""
        if self._held is None:
            return None
        return _exact.held_rows(self._held, self._core.dropped_rows())

    def update(self, id: int, coordinates: Any) -> None:
        """(geoflash only) Moves the entry with ``id`` to the box or point,
        keeping its object, without the old box: the engine finds the entry
        by its id, and rewrites it in its leaf when the new box stays inside
        the leaf's rectangle (otherwise a delete and an insert). As one
        operation, durable like an ``insert``. Raises ``RTreeError`` for an
        id with no entry or with several (use ``delete`` and ``insert`` for
        duplicate ids), and for an entry that stores an exact geometry
        (``from_geoseries``, in memory as in a directory): its box is the
        geometry's bounds, so it cannot move alone; delete it and insert
        a new entry (which has no geometry and counts as its box)."""
        i, box = _as_id(id), self._box(coordinates)
        if self._holds(i):
            raise _stores_geometry(i)
        self._exact = None
        self._core.update(i, *box)

    def intersection(self, coordinates: Any, objects: Any = False) -> Iterator[Any]:
        """Ids (or ``Item``s with ``objects=True``, the objects with
        ``objects="raw"``) of the entries intersecting the box (touching
        counts). The window may be unbounded: ``(-inf, -inf, inf, inf)``
        finds every entry."""
        return self._range(coordinates, "intersects", objects)

    def contains(self, coordinates: Any, objects: Any = False) -> Iterator[Any]:
        """Ids (or items) of the entries lying inside the box, as ``rtree``'s ``contains``."""
        return self._range(coordinates, "contains", objects)

    def _range(self, coordinates: Any, predicate: str, objects: Any) -> Iterator[Any]:
        box = self._box(coordinates)
        if objects:
            return self._page(self._items(self._core.query_items(*box, predicate), objects))
        found = self._core.query(*box, predicate)
        if isinstance(found, bytearray):
            # a large answer: native int64 ids, 8 bytes each, an int made
            # as each is yielded
            found = memoryview(found).cast("q")
        return self._page(found)

    def count(self, coordinates: Any) -> int:
        """Number of entries intersecting the box (paging does not apply)."""
        return self._core.count(*self._box(coordinates), "intersects")

    def nearest(self, coordinates: Any, num_results: int = 1, objects: Any = False) -> Iterator[Any]:
        """Ids (or items) of the ``num_results`` entries nearest to the point
        or box, nearest first; entries tied with the last are returned too.
        As in rtree, ``num_results=0`` returns the entries at distance 0
        (those intersecting the query) and a negative count every entry.
        ``coordinates`` may be a shapely geometry: distances are then exact,
        to the stored geometries (see ``query_nearest``)."""
        k = _as_int(num_results, "num_results")
        if _is_shapely_geometry(coordinates):
            if objects:
                raise RTreeError("nearest of a shapely geometry returns ids: objects=True takes a box or point")
            k = len(self) if k < 0 else k
            return self._page(_exact.nearest_ids(self, coordinates, k).tolist())
        box = self._box(coordinates)
        if k == 0:
            return self._range(coordinates, "intersects", objects)
        if k < 0:
            k = len(self)
        if objects:
            found = self._items(self._core.nearest(*box, k, True, True), objects)
        else:
            found = self._core.nearest(*box, k, True, False)
        return self._page(found)

    def intersection_v(self, mins: Any, maxs: Any) -> Tuple[np.ndarray, np.ndarray]:
        """Range queries of N windows given as ``mins`` and ``maxs`` (N×2
        arrays of ``x, y``), in one traversal with the GIL released, as
        rtree's ``intersection_v``: returns ``(ids, counts)``, int64 ids of
        every window's answer one after the other and uint64 counts per
        window. An inverted window is read as libspatialindex reads it."""
        mins, maxs = _v_arrays(mins, maxs)
        lo, hi = np.minimum(mins, maxs), np.maximum(mins, maxs)
        offsets, ids = self.intersection_batch(np.hstack([lo, hi]))
        counts = np.diff(offsets).astype(np.uint64)
        inverted = np.flatnonzero(np.any(mins > maxs, axis=1))
        if len(inverted) == 0:
            return ids, counts
        # libspatialindex's test per axis, a.min <= window.max and
        # a.max >= window.min, keeps across an inverted axis only the
        # entries spanning the gap from window.max to window.min.
        parts = np.split(ids, offsets[1:-1])
        for i in inverted:
            raw = list(self._core.query_items(lo[i, 0], lo[i, 1], hi[i, 0], hi[i, 1], "intersects"))
            b = np.array([r[2] for r in raw], dtype=np.float64).reshape(-1, 4)
            keep = np.all((b[:, :2] <= maxs[i]) & (b[:, 2:] >= mins[i]), axis=1)
            parts[i] = np.array([r[0] for r in raw], dtype=np.int64)[keep]
            counts[i] = keep.sum()
        return np.concatenate(parts), counts

    def nearest_v(
        self,
        mins: Any,
        maxs: Any,
        *,
        num_results: int = 1,
        max_dists: Any = None,
        strict: bool = False,
        return_max_dists: bool = False,
    ) -> Tuple[np.ndarray, ...]:
        """k-nearest queries of N windows (``mins``, ``maxs``: N×2 arrays),
        as rtree's ``nearest_v``: returns ``(ids, counts)`` (int64 ids by
        ascending distance per window, one window after the other; uint64
        counts), and the distance of each window's furthest neighbour
        (float64, 0 for none) with ``return_max_dists=True``. Entries tied
        with the k-th are included unless ``strict``; ``max_dists`` (N
        distances) keeps only the neighbours within each distance."""
        mins, maxs = _v_arrays(mins, maxs)
        n = len(mins)
        k = _as_int(num_results, "num_results")
        if k < 0:
            raise RTreeError(f"num_results must be at least 0, not {k}")
        limits = None
        if max_dists is not None:
            limits = np.ascontiguousarray(np.atleast_1d(max_dists), dtype=np.float64)
            if limits.ndim != 1:
                raise ValueError("max_dists must have 1 dimension")
            if len(limits) != n:
                raise ValueError(f"max_dists must have length {n}")
        if np.any(mins > maxs):
            raise RTreeError("nearest_v: a window has minimums greater than its maximums")
        boxes = np.hstack([mins, maxs])
        if k == 0:
            offsets, ids = self.intersection_batch(boxes)
            dists = np.zeros(len(ids), dtype=np.float64)
        else:
            offsets, ids, dists = self.nearest_batch(boxes, k, ties=not strict)
        window = np.repeat(np.arange(n), np.diff(offsets))
        if limits is not None:
            keep = dists <= limits[window]
            ids, dists, window = ids[keep], dists[keep], window[keep]
        counts = np.bincount(window, minlength=n).astype(np.uint64)
        furthest = np.zeros(n, dtype=np.float64)
        np.maximum.at(furthest, window, dists)
        if return_max_dists:
            return ids, counts, furthest
        return ids, counts

    def set_result_limit(self, value: int) -> int:
        """As rtree 1.x, which passes this value to libspatialindex's result
        *offset*: the number of results skipped when a limit is set (with
        ``set_result_offset``). geoflash follows rtree so that answers stay
        the same; applies to ``intersection``, ``contains`` and ``nearest``."""
        self._page_offset = self._page_value(value)
        return 0

    def get_result_limit(self) -> int:
        """What ``set_result_limit`` set (libspatialindex's offset, as in rtree)."""
        return self._page_offset

    result_limit = property(get_result_limit, set_result_limit)

    def set_result_offset(self, value: int) -> int:
        """As rtree 1.x, which passes this value to libspatialindex's result
        *limit*: the most results a query returns (0: all)."""
        self._page_limit = self._page_value(value)
        return 0

    def get_result_offset(self) -> int:
        """What ``set_result_offset`` set (libspatialindex's limit, as in rtree)."""
        return self._page_limit

    result_offset = property(get_result_offset, set_result_offset)

    @staticmethod
    def _page_value(value: Any) -> int:
        n = _as_int(value, "a result limit or offset")
        if n < 0:
            raise RTreeError(f"a result limit or offset must be at least 0, not {n}")
        return n

    @property
    def bounds(self) -> list:
        """The MBR of all entries in the index's coordinate order (``rtree``'s
        inverted infinite box when empty)."""
        return self.get_bounds()

    def get_bounds(self, coordinate_interleaved: Optional[bool] = None) -> list:
        """The bounds, interleaved or not (default: the index's order)."""
        b = self._core.bounds()
        b = _EMPTY_BOUNDS if b is None else list(b)
        inter = self.interleaved if coordinate_interleaved is None else coordinate_interleaved
        return list(b) if inter else [b[0], b[2], b[1], b[3]]

    def leaves(self) -> list:
        """The leaf nodes, as ``rtree``'s ``Index.leaves()``: a list of
        ``(leaf_id, [ids of its entries], [minx, miny, maxx, maxy])``, one
        per leaf node of the tree, left to right. ``leaf_id`` is the node's
        page number; the bounds are the union of the entries' boxes, always
        ``[minx, miny, maxx, maxy]`` as in ``rtree`` (mins, then maxs,
        whatever ``interleaved`` says). Every entry is in exactly one leaf.
        An empty index has one empty leaf, ``(0, [], <rtree's inverted
        infinite box>)``, as in rtree."""
        found = [(leaf, ids, list(b)) for leaf, ids, b in self._core.leaves()]
        return found or [(0, [], list(_EMPTY_BOUNDS))]

    def get_size(self) -> int:
        """The number of entries (deprecated in rtree: use ``len``)."""
        warnings.warn("index.get_size() is deprecated, use len(index) instead", DeprecationWarning, stacklevel=2)
        return len(self)

    def valid(self) -> bool:
        """True while the index is open."""
        return not self._core.closed

    def clearBuffer(self) -> None:
        """rtree's buffer flush: writes everything buffered (``flush()``)."""
        self.flush()

    @classmethod
    def deinterleave(cls, interleaved: Sequence[Any]) -> list:
        """``[xmin, ymin, xmax, ymax]`` → ``[xmin, xmax, ymin, ymax]`` (any dimension)."""
        assert len(interleaved) % 2 == 0, "must be a pairwise list"
        d = len(interleaved) // 2
        out = []
        for i in range(d):
            out.extend([interleaved[i], interleaved[i + d]])
        return out

    @classmethod
    def interleave(cls, deinterleaved: Sequence[Any]) -> list:
        """``[xmin, xmax, ymin, ymax]`` → ``[xmin, ymin, xmax, ymax]`` (any dimension)."""
        assert len(deinterleaved) % 2 == 0, "must be a pairwise list"
        return list(deinterleaved[0::2]) + list(deinterleaved[1::2])

    def _check_combinable(self, other: "Index") -> None:
        if self.interleaved != other.interleaved:
            raise AssertionError("both indexes must have the same interleaved setting")
        if self.properties.dimension != other.properties.dimension:
            raise AssertionError("both indexes must have the same dimension")

    def _new_like(self, entries: List[Tuple[int, Any, Any]]) -> "Index":
        """A new in-memory index of ``entries`` ((id, coordinates in this
        index's order, object)), bulk-loaded."""
        if not entries:
            return Index(interleaved=self.interleaved)
        return Index(entries, interleaved=self.interleaved)

    def __and__(self, other: "Index") -> "Index":
        """The intersection of two indexes, as rtree's: a new in-memory index
        with an entry per intersecting pair, ids 0, 1, ... , the
        intersection of the two boxes and the object ``(obj1, obj2)``."""
        self._check_combinable(other)
        entries = []
        for a in self._all_items():
            for b in other._items(other._core.query_items(*a.bbox, "intersects"), True):
                box = [max(a.bbox[0], b.bbox[0]), max(a.bbox[1], b.bbox[1]),
                       min(a.bbox[2], b.bbox[2]), min(a.bbox[3], b.bbox[3])]
                entries.append((len(entries), self._bounds_out(box), (a.object, b.object)))
        return self._new_like(entries)

    def __or__(self, other: "Index") -> "Index":
        """The union of two indexes, as rtree's: a new in-memory index with
        every entry of both (ids, boxes and objects kept)."""
        self._check_combinable(other)
        entries = [
            (it.id, self._bounds_out(it.bbox), it.object)
            for idx in (self, other)
            for it in idx._all_items()
        ]
        return self._new_like(entries)

    def __len__(self) -> int:
        return len(self._core)

    def __repr__(self) -> str:
        if self._core.closed:
            return "geoflash.Index(closed)"
        if self._core.failed is not None:
            return f"geoflash.Index(path={self._core.path!r}, failed: close it and open it again)"
        return f"geoflash.Index(path={self._core.path!r}, bounds={self.bounds}, size={len(self)})"

    # ------------------------------------------------------------- pickling

    def __getstate__(self) -> dict:
        """An index in memory pickles its entries (ids, boxes and stored
        objects as ``dumps`` made them) and options; one on disk is
        checkpointed and pickles its path (and whether it is read-only):
        unpickling reopens the directory, so the sender must have closed it
        or opened it read-only (one writer or many readers at a time)."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("_core", "_exact")}
        path = self._core.path
        if path is None:
            # the entries and the rows that hold their geometry, of one state
            # (a review found a pickle taken while another thread deleted
            # rows that marked rows whose entry it kept as deleted)
            raw, state["_held"] = _exact.consistently(
                self, lambda: (list(self._core.query_items(*_WORLD, "intersects")), self._held_now())
            )
            if self._held is not None:
                # which entry holds a row's geometry follows the keys' order
                raw = _exact.in_key_order(self._core, raw)
            state["_entries"] = (
                np.array([r[0] for r in raw], dtype=np.int64),
                np.array([r[2] for r in raw], dtype=np.float64).reshape(-1, 4),
                [r[1] for r in raw] if any(r[1] is not None for r in raw) else None,
            )
        else:
            readonly = self._core.readonly
            if not readonly:
                self._core.checkpoint()
            state["_reopen"] = (os.fspath(path), readonly)
        return state

    def __setstate__(self, state: dict) -> None:
        entries = state.pop("_entries", None)
        reopen = state.pop("_reopen", None)
        self.__dict__.update(state)
        if "_held" not in state:  # pickled before the index kept it
            self._held = None
            if self._geoms is not None:
                import shapely

                self._held = ~(shapely.is_missing(self._geoms) | shapely.is_empty(self._geoms))
        if reopen is not None:
            self._core = _Core.open(*reopen)
        elif entries is not None and len(entries[0]):
            self._core = self._bulk_core(None, *entries)
        else:
            self._core = _Core.create(None, self._options)

    # ----------------------------------------------------------- NumPy batch

    def intersection_batch(self, boxes: Any, predicate: str = "intersects") -> Tuple[np.ndarray, np.ndarray]:
        """Range queries of N boxes (N×4 ``minx, miny, maxx, maxy``) in one
        traversal with the GIL released. Returns ``(offsets, ids)``: int64
        arrays where the answer of box ``i`` is ``ids[offsets[i]:offsets[i+1]]``.
        Windows may be unbounded."""
        if predicate not in _PREDICATES:
            raise RTreeError(f"unknown predicate {predicate!r}: use one of {_PREDICATES}")
        b = _real_array(boxes, "boxes")
        if b.ndim != 2 or b.shape[1] != 4:
            raise RTreeError(f"boxes must be an N×4 array, not of shape {b.shape}")
        b = np.ascontiguousarray(b, dtype=np.float64)
        offsets, ids = self._core.query_batch(b.tobytes(), predicate)
        return (np.frombuffer(offsets, dtype=np.int64), np.frombuffer(ids, dtype=np.int64))

    def update_batch(self, ids: Any, boxes: Any) -> None:
        """(geoflash only) ``update(ids[i], boxes[i])`` for each row, in one
        call with the GIL released: ``ids`` N integers, ``boxes`` N×4
        ``minx, miny, maxx, maxy`` (a point as a box of no extent), whatever
        the index's ``interleaved``. Each row is one update, as in a loop of
        ``update``: the index finds each entry by its id and rewrites it in
        its leaf when it stays there. Inside ``with idx.batch():`` they are
        durable together at its end. An error at a row (an unknown or
        duplicate id, a bad box, an entry that stores an exact geometry, as
        ``update`` refuses it) raises ``RTreeError`` naming the row, with
        the rows before it applied and the rest not."""
        i = np.asarray(ids)
        if i.ndim != 1:
            raise RTreeError(f"ids must be a 1-D array, not of shape {i.shape}")
        i = _int64_ids(i)
        b = _real_array(boxes, "boxes")
        if b.ndim != 2 or b.shape[1] != 4:
            raise RTreeError(f"boxes must be an N×4 array, not of shape {b.shape}")
        if len(i) != len(b):
            raise RTreeError(f"{len(i)} ids for {len(b)} boxes")
        b = np.ascontiguousarray(b, dtype=np.float64)
        held = self._held_now()
        if held is not None:
            inside = np.flatnonzero((i >= 0) & (i < len(held)))
            refused = inside[held[i[inside]]]
            if len(refused):
                # the rows before it, then its error (as the core refuses it
                # for an index in a directory)
                first = int(refused[0])
                self._exact = None
                self._core.update_batch(i[:first].tobytes(), b[:first].tobytes())
                raise _stores_geometry(int(i[first]), first)
        self._exact = None
        self._core.update_batch(i.tobytes(), b.tobytes())

    def nearest_batch(self, boxes: Any, k: int = 1, ties: bool = True) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """k-nearest queries of N boxes (N×4 ``minx, miny, maxx, maxy``; a
        box of no extent is a point) in one call with the GIL released.
        Returns ``(offsets, ids, distances)``: int64 offsets and ids and
        float64 distances, the answer of box ``i`` at
        ``[offsets[i]:offsets[i+1]]``, nearest first, with every entry tied
        with the k-th unless ``ties=False``. ``k=0`` finds nothing."""
        k = _as_int(k, "k")
        if k < 0:
            raise RTreeError(f"k must be at least 0, not {k}")
        b = _real_array(boxes, "boxes")
        if b.ndim != 2 or b.shape[1] != 4:
            raise RTreeError(f"boxes must be an N×4 array, not of shape {b.shape}")
        b = np.ascontiguousarray(b, dtype=np.float64)
        offsets, ids, dists = self._core.nearest_batch(b.tobytes(), k, bool(ties))
        return (
            np.frombuffer(offsets, dtype=np.int64),
            np.frombuffer(ids, dtype=np.int64),
            np.frombuffer(dists, dtype=np.float64),
        )

    # ------------------------------------------------------ exact geometries

    def query(self, geometry: Any, predicate: Optional[str] = "intersects", distance: Any = None) -> np.ndarray:
        """Ids of the entries whose geometry satisfies
        ``predicate(geometry, entry)``, as shapely 2's ``STRtree.query``
        (the input geometry is the first argument: ``"contains"`` finds the
        entries inside ``geometry``, ``"within"`` those containing it).
        Predicates: ``"intersects"`` (the default here; shapely's is None),
        None (the bounding-box test alone), ``"within"``, ``"contains"``,
        ``"overlaps"``, ``"crosses"``, ``"touches"``, ``"covers"``,
        ``"covered_by"``, ``"contains_properly"``, and ``"dwithin"`` with
        ``distance=d`` (exact distance at most ``d``). The box filter runs in
        the index, the exact test in Rust on the stored geometries (entries
        inserted without one count as their box). For an index built by
        ``from_geoseries`` the ids are positions (``gdf.iloc[ids]``). An
        array of geometries gives a 2×M array of (input position, id)
        pairs, in one call whatever the number of inputs."""
        return _exact.query(self, geometry, predicate, distance)

    def query_nearest(
        self,
        geometry: Any,
        max_distance: Optional[float] = None,
        return_distance: bool = False,
        exclusive: bool = False,
        all_matches: bool = True,
    ) -> Any:
        """The entries nearest to ``geometry`` by exact distance, as shapely
        2's ``STRtree.query_nearest``: every entry at the smallest distance
        (only one of them unless ``all_matches``), none farther than
        ``max_distance`` (greater than 0), none equal to the input with
        ``exclusive``. Ids for one geometry, a 2×M array of (input
        position, id) for an array of them; with ``return_distance`` a
        tuple (that, distances)."""
        return _exact.query_nearest(self, geometry, max_distance, return_distance, exclusive, all_matches)

    # ------------------------------------------------------------- lifecycle

    @property
    def stats(self) -> dict:
        """Device and store counters since the index was opened (the
        engine's ``Stats`` record: pages read and written, buffer hits,
        NAND programs and erases on a simulated device, ...). Single calls
        do not read the CPU clock: ``cpu_index_ns``, ``cpu_filter_ns`` and
        ``cpu_refinement_ns`` count only ``batch()`` blocks, the ``wall_*``
        columns every call."""
        return json.loads(self._core.stats_json())

    @property
    def manifest(self) -> dict:
        """The index's manifest: kind, page size, device, tree and store
        parameters (``properties`` is rtree's :class:`Property`)."""
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

    @contextlib.contextmanager
    def batch(self) -> Iterator["Index"]:
        """Runs the updates of a ``with`` block as one batch, durable
        together when the block ends (a commit: with eFIND or FAST on a file
        the id map's log and the store's log are synced and nodes wait for
        a checkpoint; the plain store and simulated devices checkpoint), as
        the statements of one SQL transaction::

            with idx.batch():
                for i, box in enumerate(boxes):
                    idx.insert(i, box)

        Inside the block the store does not sync a group commit every few
        milliseconds; flushes stay protected against torn writes, and a
        crash inside the block recovers a prefix of it. When the block
        raises, the updates made so far stay in the index but are durable
        only at the next sync or checkpoint. Batches do not nest. While a
        batch is open, changes from other threads wait until it ends (a
        change another thread makes is never taken into the batch), and a
        read-only index refuses to open one.

        When a change or the commit fails with an I/O error (a full disk,
        an error syncing the log), the index in a directory answers no
        further call, queries included (``DeviceError``): what it holds in
        memory may be lost by a crash. ``close()`` it and open the
        directory again, which recovers every acknowledged batch and the
        failed one or not. A block that catches such an error and goes on
        ends by raising instead of committing."""
        self._core.begin_batch()
        ok = False
        try:
            yield self
            ok = True
        finally:
            self._core.end_batch(ok)

    def close(self) -> None:
        """Checkpoints and closes the index; any later use raises
        :class:`RTreeError` (closing again does nothing). An index whose
        change, commit or checkpoint failed (see ``batch``) is released
        without writing anything."""
        self._core.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: rtree's alias of ``Index``.
Rtree = Index
