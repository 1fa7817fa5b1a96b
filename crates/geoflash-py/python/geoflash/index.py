"""The names of ``rtree.index``, so that ``from rtree import index`` becomes
``from geoflash import index`` and nothing else changes: ``Index``,
``Rtree``, ``Item``, ``Property``, ``RtreeContainer``, the ``RT_*``
constants and the custom storage classes (not implemented)."""

from __future__ import annotations

from .container import RtreeContainer
from .exceptions import RTreeError
from .property import (
    RT_Custom,
    RT_Disk,
    RT_Linear,
    RT_Memory,
    RT_MVRTree,
    RT_Quadratic,
    RT_RTree,
    RT_Star,
    RT_TPRTree,
    Property,
)
from .spatial_index import Index, Item, Rtree
from .storage import CustomStorage, CustomStorageBase, ICustomStorage

__all__ = [
    "Index",
    "Rtree",
    "Item",
    "Property",
    "RtreeContainer",
    "RTreeError",
    "RT_Memory",
    "RT_Disk",
    "RT_Custom",
    "RT_Linear",
    "RT_Quadratic",
    "RT_Star",
    "RT_RTree",
    "RT_MVRTree",
    "RT_TPRTree",
    "ICustomStorage",
    "CustomStorageBase",
    "CustomStorage",
]
