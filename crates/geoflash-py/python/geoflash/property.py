"""``rtree.index.Property`` for geoflash: the settings of an index, with
rtree's names, defaults, checks and get/set methods.

``Index(properties=p)`` turns a Property (geoflash's, or rtree's own: only
its attributes are read) into engine options with :func:`tree_options`:

- ``variant``: ``RT_Star`` (the default) is geoflash's R*-tree,
  ``RT_Linear`` and ``RT_Quadratic`` its R-tree with that split;
- ``leaf_capacity`` is the node capacity M of every node (the engine has one
  capacity for leaves and inner nodes; ``index_capacity`` is checked and
  kept, not used);
- ``fill_factor`` sets the minimum fill m = ⌊fill_factor·M⌋ (capped at the
  ⌈M/2⌉ the engine's splits need) and the fill of stream bulk loads;
- ``reinsert_factor`` is the R*-tree's forced-reinsertion share (capped so
  that a node keeps m entries);
- ``pagesize`` is rounded up to the node page: the smallest power of two
  from 512 B to 64 KiB that holds M entries;
- ``dimension`` other than 2 and ``type`` other than ``RT_RTree`` raise
  ``NotImplementedError`` (geoflash indexes 2-D data with R-trees only);
- the other settings (buffering, pools, ``tight_mbr``, ``writethrough``,
  ``split_distribution_factor``, ``near_minimum_overlap_factor``,
  ``tpr_horizon``, ``index_id``, ``dat_extension``/``idx_extension``) are
  accepted, checked as rtree checks them and kept, with no effect: an index
  on disk is one directory, whatever the extensions say.
"""

from __future__ import annotations

import math
import operator
import pprint
from typing import Any, Callable, Dict, Tuple

from ._geoflash import page_capacity
from .exceptions import RTreeError

__all__ = [
    "Property",
    "RT_Memory",
    "RT_Disk",
    "RT_Custom",
    "RT_Linear",
    "RT_Quadratic",
    "RT_Star",
    "RT_RTree",
    "RT_MVRTree",
    "RT_TPRTree",
]

#: ``storage``: in memory, on disk, custom storage callbacks (not implemented).
RT_Memory, RT_Disk, RT_Custom = 0, 1, 2
#: ``variant``: R-tree with linear split, with quadratic split, R*-tree.
RT_Linear, RT_Quadratic, RT_Star = 0, 1, 2
#: ``type``: R-tree, MVR-tree and TPR-tree (the last two not implemented).
RT_RTree, RT_MVRTree, RT_TPRTree = 0, 1, 2

_SMALLEST_PAGE, _LARGEST_PAGE = 512, 65536


def _positive(name: str, value: Any) -> int:
    n = operator.index(value)
    if n <= 0:
        raise RTreeError(f"{name} must be > 0, not {n}")
    return n


def _integer(name: str, value: Any) -> int:
    return operator.index(value)


def _number(name: str, value: Any) -> float:
    # rtree hands the value to a C double: a real number, never a string
    # ("0.5" and b"0.5" are refused there, not parsed).
    if isinstance(value, (str, bytes, bytearray)) or not hasattr(value, "__float__") or isinstance(value, complex):
        raise TypeError(f"{name} must be a real number, not {type(value).__name__}")
    return float(value)


def _flag(name: str, value: Any) -> bool:
    return bool(value)


def _text(name: str, value: Any) -> str:
    # rtree takes str or bytes (a C string), and refuses anything else.
    if isinstance(value, bytes):
        return value.decode()
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str or bytes, not {type(value).__name__}")
    return value


def _any(name: str, value: Any) -> Any:
    return value


def _choice(*valid: int) -> Callable[[str, Any], int]:
    def check(name: str, value: Any) -> int:
        n = operator.index(value)
        if n not in valid:
            raise RTreeError(f"{n} is not a valid {name}: use one of {valid}")
        return n

    return check


# name: (rtree's default, check, description). The defaults are those of
# libspatialindex as rtree 1.x reports them for a new Property.
_FIELDS: Dict[str, Tuple[Any, Callable[[str, Any], Any], str]] = {
    "buffering_capacity": (10, _positive, "Buffering capacity (kept, no effect)."),
    "custom_storage_callbacks": (None, _any, "Custom storage callbacks (not implemented)."),
    "custom_storage_callbacks_size": (0, _integer, "Size of the custom storage callbacks (kept)."),
    "dat_extension": ("dat", _text, "Extension of rtree's data file (kept; an index is one directory)."),
    "dimension": (2, _positive, "Number of dimensions; geoflash indexes 2."),
    "filename": ("", _text, "The index's path (set by ``Index(path)``)."),
    "fill_factor": (0.7, _number, "Minimum node fill (and bulk-load fill) as a share of M."),
    "idx_extension": ("idx", _text, "Extension of rtree's index file (kept; an index is one directory)."),
    "index_capacity": (100, _positive, "Capacity of inner nodes (checked and kept; M is leaf_capacity)."),
    "index_id": (None, _integer, "First node id (kept, no effect)."),
    "index_pool_capacity": (100, _positive, "Index pool capacity (kept, no effect)."),
    "leaf_capacity": (100, _positive, "Node capacity M."),
    "near_minimum_overlap_factor": (32, _positive, "Near-minimum-overlap factor (kept, no effect)."),
    "overwrite": (True, _flag, "Replace an existing index (``Index(path, overwrite=True)``)."),
    "pagesize": (4096, _positive, "Page size in bytes, rounded up to a node page holding M entries."),
    "point_pool_capacity": (500, _positive, "Point pool capacity (kept, no effect)."),
    "region_pool_capacity": (1000, _positive, "Region pool capacity (kept, no effect)."),
    "reinsert_factor": (0.3, _number, "R*-tree forced-reinsertion share of M."),
    "split_distribution_factor": (0.4, _number, "Split distribution factor (kept, no effect)."),
    "storage": (RT_Disk, _choice(RT_Memory, RT_Disk, RT_Custom), "RT_Memory or RT_Disk (set by Index)."),
    "tight_mbr": (True, _flag, "Tight bounding rectangles (geoflash's always are)."),
    "tpr_horizon": (20.0, _number, "TPR-tree horizon (the TPR-tree is not implemented)."),
    "type": (RT_RTree, _choice(RT_RTree, RT_MVRTree, RT_TPRTree), "RT_RTree (others not implemented)."),
    "variant": (RT_Star, _choice(RT_Linear, RT_Quadratic, RT_Star), "RT_Linear, RT_Quadratic or RT_Star."),
    "writethrough": (False, _flag, "Write-through caching (kept, no effect)."),
}


class PropertyHandle:
    """The handle of a :class:`Property` (rtree's ``Property.handle``): an
    opaque token, new for each Property and for each unpickled copy, as
    rtree makes a new libspatialindex property object for each."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<geoflash.property.PropertyHandle at {id(self):#x}>"


class Property:
    """Settings of an index, as ``rtree.index.Property``: keyword arguments
    set attributes (``Property(leaf_capacity=50, variant=RT_Quadratic)``);
    every setting has a Python property and ``get_``/``set_`` methods
    (``get_index_type``/``set_index_type`` for ``type``). Invalid values
    raise :class:`geoflash.RTreeError` when set, or when an index is created
    with them (capacities below 4, a fill factor outside (0, 1) for the R*-tree or
    (0, 0.5] for the others, a reinsert or split distribution factor outside
    (0, 1), a near-minimum-overlap factor above a capacity), as in rtree; a
    value of the wrong type (a string for a number, a number for a text)
    raises ``TypeError``."""

    #: The settings ``as_dict`` reports (rtree's list).
    pkeys = tuple(k for k in sorted(_FIELDS) if k != "index_pool_capacity")

    def __init__(self, handle: Any = None, owned: bool = True, **kwargs: Any) -> None:
        self._values: Dict[str, Any] = {}
        #: The property's handle: the one given, else a new one of its own
        #: (rtree's is a libspatialindex property object; geoflash's is an
        #: opaque token that only tells Property objects apart).
        self.handle = PropertyHandle() if handle is None else handle
        self.initialize_from_dict(kwargs)

    def initialize_from_dict(self, state: Dict[str, Any]) -> None:
        """Sets every non-None value of ``state``, then keeps
        ``near_minimum_overlap_factor`` below the capacities, as rtree does."""
        for k, v in state.items():
            if v is not None:
                setattr(self, k, v)
        if "near_minimum_overlap_factor" not in state:
            smallest = min(self.index_capacity, self.leaf_capacity)
            if self.near_minimum_overlap_factor >= smallest:
                self.near_minimum_overlap_factor = smallest // 3 + 1

    def as_dict(self) -> Dict[str, Any]:
        """Every setting of ``pkeys`` (None for an unset ``index_id``)."""
        out = {}
        for k in self.pkeys:
            try:
                out[k] = getattr(self, k)
            except RTreeError:
                out[k] = None
        return out

    def __getstate__(self) -> Dict[str, Any]:
        return self.as_dict()

    def __setstate__(self, state: Dict[str, Any]) -> None:
        """The settings of ``state`` with a new handle, as rtree unpickles."""
        self._values = {}
        self.handle = PropertyHandle()
        self.initialize_from_dict(state)

    def __repr__(self) -> str:
        return repr(self.as_dict())

    def __str__(self) -> str:
        return pprint.pformat(self.as_dict())


def _accessors(name: str, check: Callable[[str, Any], Any], doc: str) -> Tuple[Callable, Callable]:
    default = _FIELDS[name][0]

    def get(self: Property) -> Any:
        value = self._values.get(name, default)
        if value is None and name == "index_id":
            raise RTreeError("Property index_id was not set")
        return value

    def set(self: Property, value: Any) -> None:
        self._values[name] = check(name, value)

    get.__doc__ = f"{doc} (getter)"
    set.__doc__ = f"{doc} (setter)"
    return get, set


for _name, (_default, _check, _doc) in _FIELDS.items():
    _get, _set = _accessors(_name, _check, _doc)
    _method = "index_type" if _name == "type" else _name
    setattr(Property, "get_" + _method, _get)
    setattr(Property, "set_" + _method, _set)
    setattr(Property, _name, property(_get, _set, doc=_doc))


def page_size_for(entries: int, at_least: int) -> int:
    """The smallest node page (a power of two from 512 B to 64 KiB, at least
    ``at_least`` bytes) that holds ``entries`` entries."""
    size = _SMALLEST_PAGE
    while size < min(at_least, _LARGEST_PAGE) or page_capacity(size) < entries:
        if size == _LARGEST_PAGE:
            raise RTreeError(
                f"a node of {entries} entries does not fit the largest page "
                f"({_LARGEST_PAGE} bytes, {page_capacity(size)} entries)"
            )
        size *= 2
    return size


def tree_options(p: Any) -> Tuple[Dict[str, Any], float]:
    """The engine options (``kind``, ``split``, ``page_size``,
    ``max_entries``, ``min_entries``, ``reinsert_percent``) and the bulk-load
    fill of a Property (see the module documentation). Raises
    ``NotImplementedError`` for what geoflash does not do and
    :class:`RTreeError` for values rtree refuses at index creation."""
    if p.dimension < 2:
        raise RTreeError(f"dimension must be greater than 1, not {p.dimension}")
    if p.dimension > 2:
        raise NotImplementedError(
            f"geoflash indexes 2-D data only: dimension={p.dimension} "
            "(3-D and higher) is not implemented"
        )
    if p.type == RT_TPRTree:
        raise NotImplementedError("the TPR-tree (type=RT_TPRTree, moving objects) is not implemented by geoflash")
    if p.type == RT_MVRTree:
        raise NotImplementedError("the MVR-tree (type=RT_MVRTree) is not implemented by geoflash")
    for name in ("leaf_capacity", "index_capacity"):
        if getattr(p, name) < 4:
            raise RTreeError(f"{name} must be at least 4, not {getattr(p, name)}")
    fill = float(p.fill_factor)
    # libspatialindex's ranges: (0, 1) for the R*-tree, (0, 0.5] for the others
    if not (0.0 < fill < 1.0 if p.variant == RT_Star else 0.0 < fill <= 0.5):
        raise RTreeError(f"fill_factor {fill} is out of range: (0, 1) for RT_Star, (0, 0.5] otherwise")
    # libspatialindex checks these whatever the variant, though only the
    # R*-tree reinserts and geoflash keeps the other two without effect.
    reinsert = float(p.reinsert_factor)
    if not 0.0 < reinsert < 1.0:
        raise RTreeError(f"reinsert_factor must be in (0.0, 1.0), not {reinsert}")
    split_factor = float(p.split_distribution_factor)
    if not 0.0 < split_factor < 1.0:
        raise RTreeError(f"split_distribution_factor must be in (0.0, 1.0), not {split_factor}")
    overlap = p.near_minimum_overlap_factor
    if not 1 <= overlap <= min(p.index_capacity, p.leaf_capacity):
        raise RTreeError(
            f"near_minimum_overlap_factor must be from 1 to the smaller of index_capacity and "
            f"leaf_capacity ({min(p.index_capacity, p.leaf_capacity)}), not {overlap}"
        )
    big_m = int(p.leaf_capacity)
    small_m = min(max(2, math.floor(fill * big_m)), (big_m + 1) // 2)
    opts: Dict[str, Any] = dict(
        kind="rstar" if p.variant == RT_Star else "rtree",
        split={RT_Linear: "linear", RT_Quadratic: "quadratic"}.get(p.variant),
        page_size=page_size_for(big_m, int(p.pagesize)),
        max_entries=big_m,
        min_entries=small_m,
    )
    if p.variant == RT_Star:
        # The engine's reinsertion count, max(1, round(M·pct/100)), must leave m entries.
        pct = round(reinsert * 100)
        while pct > 0 and max(1, (big_m * pct + 50) // 100) > big_m + 1 - small_m:
            pct -= 1
        opts["reinsert_percent"] = pct
    return opts, fill


def from_manifest(manifest: Dict[str, Any], path: Any) -> Property:
    """A Property describing an existing index (its manifest)."""
    tree = manifest.get("index", {})
    kind = manifest.get("kind", "rstar")
    variant = RT_Star
    if kind != "rstar":
        variant = RT_Linear if tree.get("split") == "linear" else RT_Quadratic
    big_m = tree.get("max_entries") or _FIELDS["leaf_capacity"][0]
    p = Property(
        leaf_capacity=big_m,
        index_capacity=big_m,
        pagesize=manifest.get("page_size", 4096),
        variant=variant,
        storage=RT_Memory if path is None else RT_Disk,
        filename="" if path is None else path,
        overwrite=False,
    )
    if tree.get("min_entries"):
        # rtree's fill of an R-tree with linear or quadratic split is at most
        # 0.5: a minimum of ⌈M/2⌉ (the engine's default for an odd M) is
        # described by 0.5, so that this Property creates an index again.
        fill = tree["min_entries"] / big_m
        p.fill_factor = fill if variant == RT_Star else min(fill, 0.5)
    elif variant != RT_Star:
        p.fill_factor = 0.5
    if tree.get("reinsert_percent") is not None:
        p.reinsert_factor = tree["reinsert_percent"] / 100
    return p
