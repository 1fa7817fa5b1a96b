"""``rtree.index.Property`` for geoflash: the settings of an index, with
rtree's names, defaults, checks and get/set methods, and two of geoflash's
own (``kind`` and ``kind_options``) for the index kinds rtree has no names
for.

``Index(properties=p)`` turns a Property (geoflash's, or rtree's own: only
its attributes are read) into engine options with :func:`tree_options`:

- ``kind`` (geoflash only): the index kind, one of ``geoflash.KINDS``; None
  (the default, and rtree's Property) is the one ``variant`` names.
  ``variant`` and ``kind`` are one setting for the R-tree kinds: setting
  ``variant`` makes an ``"rtree"`` or ``"rstar"`` kind None again, and
  setting kind ``"rstar"`` (``"rtree"``) sets variant ``RT_Star`` (an
  R-tree split) when it names the other; for the other kinds ``variant``
  has no effect;
- ``kind_options`` (geoflash only): a read-only mapping of ``Index``
  keyword arguments for what rtree's settings cannot say (the kind's own
  settings: ``hilbert_domain``, the FOR-tree's ``fortree_*`` and
  ``buffer``, the grid files' ``grid_*`` and ``buffer``; an R-tree's
  ``split="exponential"``; an R*-tree's ``reinsert_percent=0``), passed
  when the index is of ``kind`` (a ``kind=`` keyword naming another kind
  leaves them out);
- ``variant``: ``RT_Star`` (the default) is geoflash's R*-tree,
  ``RT_Linear`` and ``RT_Quadratic`` its R-tree with that split;
- ``leaf_capacity`` is the node capacity M of every node (the engine has one
  capacity for leaves and inner nodes; ``index_capacity`` is checked and
  kept, not used); the grid files have buckets of a page instead;
- ``fill_factor`` sets the minimum fill m = ⌊fill_factor·M⌋ (capped at the
  ⌈M/2⌉ the engine's splits need) and the fill of stream bulk loads;
- ``reinsert_factor`` is the R*-tree's forced-reinsertion share, in the
  engine's whole percents: rounded, at least 1 % (0 % would turn forced
  reinsertion off, which no factor rtree accepts asks for), and capped so
  that a node keeps m entries;
- ``pagesize`` is rounded up to the node page: the smallest power of two
  from 512 B to 64 KiB that holds M entries (of the kind: the Hilbert
  R-tree's and the xBR+-tree's are 8 bytes larger);
- ``dimension`` other than 2 and ``type`` other than ``RT_RTree`` raise
  ``NotImplementedError`` (geoflash indexes 2-D data with R-trees only);
- the other settings (buffering, pools, ``tight_mbr``, ``writethrough``,
  ``split_distribution_factor``, ``near_minimum_overlap_factor``,
  ``tpr_horizon``, ``index_id``, ``dat_extension``/``idx_extension``) are
  accepted, checked as rtree checks them and kept, with no effect: an index
  on disk is one directory, whatever the extensions say.

A Property describes the tree, not where it is kept: the store, its
buffer, the device and the node placement (an sHR-tree is an R*-tree whose
internal nodes a hybrid device keeps on its fast tier) are ``Index``
keywords of their own. :func:`from_manifest` makes the Property describing
an existing index (``idx.properties``), which creates that kind of index
again with the same settings.
"""

from __future__ import annotations

import math
import operator
import pprint
import types
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ._geoflash import KINDS, SETTINGS, page_capacity
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
    raises ``TypeError``.

    Beyond rtree's settings (``pkeys``, ``as_dict``), ``kind`` and
    ``kind_options`` say which kind of index it is (see the module
    documentation); pickling keeps them, and so does ``idx.properties``,
    so that ``Index(properties=idx.properties)`` creates the same kind of
    index (a dictionary of ``as_dict()``, rtree's settings alone, does
    not)."""

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
        """rtree's settings (``as_dict``), then geoflash's own (``kind``
        after ``variant``, which it may set)."""
        state = self.as_dict()
        state["kind"] = self.kind
        state["kind_options"] = dict(self.kind_options)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        """The settings of ``state`` with a new handle, as rtree unpickles."""
        self._values = {}
        self.handle = PropertyHandle()
        self.initialize_from_dict(state)

    def _shown(self) -> Dict[str, Any]:
        """``as_dict``, with ``kind`` and ``kind_options`` when set."""
        out = self.as_dict()
        if self.kind is not None or self.kind_options:
            out["kind"] = self.kind
            out["kind_options"] = dict(self.kind_options)
        return out

    def __repr__(self) -> str:
        return repr(self._shown())

    def __str__(self) -> str:
        return pprint.pformat(self._shown())


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


#: What ``kind_options`` may not hold: what the Property's own settings say.
_OWN_KEYS = {
    "kind": "kind",
    "page_size": "pagesize",
    "max_entries": "leaf_capacity",
    "min_entries": "fill_factor",
    "min_fill": "fill_factor",
}
_NO_OPTIONS: Mapping[str, Any] = types.MappingProxyType({})


def _get_kind(self: Property) -> Optional[str]:
    return self._values.get("kind")


def _set_kind(self: Property, value: Any) -> None:
    if value is None:
        self._values.pop("kind", None)
        return
    kind = _text("kind", value)
    if kind not in KINDS:
        raise RTreeError(f"{kind!r} is not an index kind: use one of {KINDS}")
    # variant and kind are one setting for the two kinds variant names
    if kind == "rstar":
        self._values["variant"] = RT_Star
    elif kind == "rtree" and self.variant == RT_Star:
        self._values["variant"] = RT_Quadratic
    self._values["kind"] = kind


def _set_variant(self: Property, value: Any) -> None:
    self._values["variant"] = _FIELDS["variant"][1]("variant", value)
    if self._values.get("kind") in ("rtree", "rstar"):
        del self._values["kind"]


def _get_kind_options(self: Property) -> Mapping[str, Any]:
    return self._values.get("kind_options", _NO_OPTIONS)


def _set_kind_options(self: Property, value: Any) -> None:
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise TypeError(f"kind_options must be a mapping of Index keyword arguments, not {type(value).__name__}")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or k not in SETTINGS:
            raise RTreeError(f"kind_options: {k!r} is not a keyword argument of Index (geoflash.SETTINGS)")
        if k in _OWN_KEYS:
            raise RTreeError(f"kind_options: {k} is the Property's own setting {_OWN_KEYS[k]}: set that instead")
        out[k] = v
    self._values["kind_options"] = types.MappingProxyType(out)


_get_kind.__doc__ = (
    "(geoflash only) The index kind, one of ``geoflash.KINDS``; None: the one "
    "``variant`` names (``RT_Star``: ``\"rstar\"``, else ``\"rtree\"``) (getter)"
)
_set_kind.__doc__ = (
    "(geoflash only) Sets the index kind (one of ``geoflash.KINDS``, or None for "
    "the one ``variant`` names); ``\"rstar\"`` and ``\"rtree\"`` set ``variant`` to match (setter)"
)
_set_variant.__doc__ = _FIELDS["variant"][2] + " Makes an R-tree or R*-tree ``kind`` None (setter)"
_get_kind_options.__doc__ = (
    "(geoflash only) The kind's own settings as ``Index`` keyword arguments, "
    "a read-only mapping (getter)"
)
_set_kind_options.__doc__ = (
    "(geoflash only) Sets the kind's own settings: a mapping of ``Index`` keyword "
    "arguments other than those the Property's settings give (setter)"
)
setattr(Property, "set_variant", _set_variant)
setattr(Property, "variant", property(getattr(Property, "get_variant"), _set_variant, doc=_FIELDS["variant"][2]))
for _name, _get, _set in (("kind", _get_kind, _set_kind), ("kind_options", _get_kind_options, _set_kind_options)):
    setattr(Property, "get_" + _name, _get)
    setattr(Property, "set_" + _name, _set)
    setattr(Property, _name, property(_get, _set, doc=_get.__doc__))


def page_size_for(entries: int, at_least: int, payload: bool = False) -> int:
    """The smallest node page (a power of two from 512 B to 64 KiB, at least
    ``at_least`` bytes) that holds ``entries`` entries (with ``payload``,
    those of the Hilbert R-tree and the xBR+-tree, 8 bytes larger)."""
    size = _SMALLEST_PAGE
    while size < min(at_least, _LARGEST_PAGE) or page_capacity(size, payload) < entries:
        if size == _LARGEST_PAGE:
            raise RTreeError(
                f"a node of {entries} entries does not fit the largest page "
                f"({_LARGEST_PAGE} bytes, {page_capacity(size, payload)} entries)"
            )
        size *= 2
    return size


#: Kinds with nodes: M is ``leaf_capacity``, the page grown to hold M
#: (the grid files have buckets of their page instead).
_NODE_KINDS = ("rtree", "rstar", "shrtree", "fortree", "hilbert", "xbr")
#: Kinds whose entries are 8 bytes larger (a Hilbert value, a quadrant).
_PAYLOAD_KINDS = ("hilbert", "xbr")
#: The R*-trees: forced reinsertion from ``reinsert_factor``.
_RSTAR_KINDS = ("rstar", "shrtree")


def kind_of(p: Any) -> str:
    """The index kind a Property (geoflash's or rtree's) describes: its
    ``kind``, else the one ``variant`` names."""
    kind = getattr(p, "kind", None)
    if kind is not None:
        return kind
    return "rstar" if p.variant == RT_Star else "rtree"


def _check_rtree_settings(p: Any) -> float:
    """Raises what rtree raises at index creation for the settings of
    ``p`` (``NotImplementedError`` for what geoflash does not do); the fill factor."""
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
    return fill


def reinsert_percent(factor: float, big_m: int, small_m: int) -> int:
    """The engine's forced-reinsertion percentage for rtree's
    ``reinsert_factor`` (in (0, 1)): rounded to a whole percent, at least
    1 (0 would turn forced reinsertion off, which a factor rtree accepts
    does not ask for: 0.001 is 1 %, the engine's least, removing one entry
    of a node of up to 149), and lowered until the engine's reinsertion
    count, max(1, round(M·pct/100)), leaves m entries."""
    pct = max(1, round(factor * 100))
    while pct > 1 and max(1, (big_m * pct + 50) // 100) > big_m + 1 - small_m:
        pct -= 1
    return pct


def tree_options(p: Any, kind: Optional[str] = None) -> Tuple[Dict[str, Any], float]:
    """The engine options (``kind``, ``split``, ``page_size``,
    ``max_entries``, ``min_entries``, ``reinsert_percent``, and the
    ``kind_options``, as each kind takes them) and the bulk-load fill of a
    Property (see the module documentation), for an index of ``kind``
    (default: the Property's; a ``kind=`` keyword of ``Index`` naming
    another leaves ``kind_options`` out). Raises ``NotImplementedError``
    for what geoflash does not do and :class:`RTreeError` for values rtree
    refuses at index creation."""
    fill = _check_rtree_settings(p)
    own = kind_of(p)
    kind = own if kind is None else kind
    big_m = int(p.leaf_capacity)
    small_m = min(max(2, math.floor(fill * big_m)), (big_m + 1) // 2)
    opts: Dict[str, Any] = dict(kind=kind)
    if kind in _NODE_KINDS:
        page = page_size_for(big_m, int(p.pagesize), kind in _PAYLOAD_KINDS)
        opts.update(page_size=page, max_entries=big_m)
        if kind != "xbr":  # (the xBR+-tree has no minimum fill)
            opts["min_entries"] = small_m
    else:
        opts["page_size"] = page_size_for(0, int(p.pagesize))
    if kind == "rtree":
        opts["split"] = {RT_Linear: "linear", RT_Quadratic: "quadratic"}.get(p.variant)
    if kind in _RSTAR_KINDS:
        opts["reinsert_percent"] = reinsert_percent(float(p.reinsert_factor), big_m, small_m)
    if kind == own:
        opts.update(getattr(p, "kind_options", None) or {})
    return opts, fill


def _fill_for(small_m: int, big_m: int) -> float:
    """The smallest fill factor f with ⌊f·M⌋ = m (m/M, or the next float
    above it where the product rounds below m)."""
    fill = small_m / big_m
    while math.floor(fill * big_m) < small_m:
        fill = math.nextafter(fill, 1.0)
    return fill


def _rect(d: Dict[str, float]) -> Tuple[float, float, float, float]:
    """A manifest's rectangle as ``(minx, miny, maxx, maxy)``."""
    return (d["min_x"], d["min_y"], d["max_x"], d["max_y"])


def _kind_settings(kind: str, tree: Dict[str, Any]) -> Dict[str, Any]:
    """The settings of a Hilbert R-tree, a FOR-tree, an xBR+-tree or a grid
    file that its manifest's ``index`` records, as ``Index`` keywords."""
    out: Dict[str, Any] = {}
    if kind == "hilbert":
        extent = (tree.get("hilbert_domain") or {}).get("extent")
        if extent:
            out["hilbert_domain"] = _rect(extent)
    elif kind == "fortree":
        out["buffer"] = tree["buffer_bytes"]
        out["fortree_write_read_ratio"] = tree["write_read_ratio"]
        out["fortree_original_root_counter"] = tree["original_root_counter"]
    elif kind == "xbr":
        out["hilbert_domain"] = _rect(tree["domain"])
    elif "domain" in tree and "batched" in tree:  # a grid file
        out["hilbert_domain"] = _rect(tree["domain"])
        out["buffer"] = tree["buffer_bytes"]
        out["grid_queries"] = "batched" if tree["batched"] else "plain"
        out["grid_dir_share"] = tree["dir_share"]
        for key in ("cold_pages", "s", "special"):
            if tree.get(key) is not None:
                out["grid_" + key] = tree[key]
    return out


def from_manifest(manifest: Dict[str, Any], path: Any) -> Property:
    """A Property describing an existing index (its manifest): its kind,
    capacity, fill, reinsertion and page size, and the kind's own settings
    (``kind_options``), so that it creates that kind of index again."""
    tree = manifest.get("index", {})
    kind = manifest.get("kind", "rstar")
    variant = RT_Star
    options: Dict[str, Any] = {}
    if kind == "rtree":
        split = tree.get("split")
        variant = RT_Linear if split == "linear" else RT_Quadratic
        if split not in (None, "linear", "quadratic"):
            options["split"] = split
    big_m = tree.get("max_entries")
    settings: Dict[str, Any] = dict(
        pagesize=manifest.get("page_size", 4096),
        variant=variant,
        storage=RT_Memory if path is None else RT_Disk,
        filename="" if path is None else path,
        overwrite=False,
    )
    if big_m:
        settings.update(leaf_capacity=big_m, index_capacity=big_m)
    p = Property(**settings)
    if big_m and tree.get("min_entries"):
        # rtree's fill of an R-tree with linear or quadratic split is at most
        # 0.5: a minimum of ⌈M/2⌉ (the engine's default for an odd M) is
        # described by 0.5, so that this Property creates an index again.
        fill = _fill_for(tree["min_entries"], big_m)
        p.fill_factor = fill if variant == RT_Star else min(fill, 0.5)
    elif variant != RT_Star:
        p.fill_factor = 0.5
    pct = tree.get("reinsert_percent")
    if pct:
        p.reinsert_factor = pct / 100
    elif pct == 0 and kind in _RSTAR_KINDS:
        # no forced reinsertion: no reinsert_factor says it
        options["reinsert_percent"] = 0
    options.update(_kind_settings(kind, tree))
    p.kind = kind
    p.kind_options = options
    return p


#: The rtree settings that say what tree an index is.
_TREE_FIELDS = ("variant", "leaf_capacity", "index_capacity", "fill_factor", "reinsert_factor", "pagesize")


def describe(given: Any, index: Property, whole: bool) -> Any:
    """``idx.properties`` of an index created (or opened) with the Property
    ``given``, where ``index`` is :func:`from_manifest` of the index:
    ``given`` itself, with the index's ``kind`` and ``kind_options``
    written into it and, when ``whole`` (keywords changed what ``given``
    said, or the directory already held an index), its tree settings too,
    as rtree's Index keeps the Property it was given. rtree's own
    Property, which cannot name other kinds, is kept only while it
    describes the index; else the index's Property replaces it."""
    if not isinstance(given, Property):
        if whole or kind_of(given) != index.kind or index.kind_options:
            return index
        return given
    if whole:
        for name in _TREE_FIELDS:
            setattr(given, name, getattr(index, name))
        if given.near_minimum_overlap_factor > min(given.leaf_capacity, given.index_capacity):
            given.near_minimum_overlap_factor = index.near_minimum_overlap_factor
        given.kind_options = {}
    given.kind = index.kind
    given.kind_options = {**given.kind_options, **index.kind_options}
    return given
