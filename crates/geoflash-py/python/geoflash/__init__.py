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

Code written for rtree changes only its import: ``from geoflash import
index`` for ``from rtree import index`` (or ``import geoflash as rtree``,
which also makes ``rtree.exceptions.RTreeError`` geoflash's); every
exception geoflash raises for its own errors derives from
``geoflash.GeoflashError``, whether or not rtree is installed (see
``geoflash.exceptions``). An index on disk is a directory
(``geoflash.Index("roads.idx")``) that later opens again with the same
call. See ``docs/python.md`` for the whole API, the table of rtree's names,
the stores and devices, and how ids and objects are kept.
"""

from __future__ import annotations

from . import exceptions, index
from ._geoflash import DEFAULTS as _DEFAULTS
from ._geoflash import __version__, parse_size
from .container import RtreeContainer
from .exceptions import (
    CorruptIndexError,
    DeviceError,
    GeoflashError,
    InvalidCoordinatesError,
    InvalidIdError,
    ResultsStoreError,
    RTreeError,
)
from .joins import sjoin, sjoin_nearest
from .property import Property
from .spatial_index import GRID_KINDS, KINDS, SETTINGS, Index, Item, Rtree

__all__ = [
    "Index",
    "Rtree",
    "Item",
    "Property",
    "RtreeContainer",
    "GeoflashError",
    "RTreeError",
    "InvalidIdError",
    "InvalidCoordinatesError",
    "CorruptIndexError",
    "DeviceError",
    "ResultsStoreError",
    "DEFAULTS",
    "sjoin",
    "sjoin_nearest",
    "GRID_KINDS",
    "KINDS",
    "SETTINGS",
    "parse_size",
    "index",
    "exceptions",
    "__version__",
]

#: The product defaults of new indexes (``store``, ``buffer``, ``device``, and
#: ``memory_*`` for an index without a path; ``papers_*``: the papers' settings).
DEFAULTS = dict(_DEFAULTS)
