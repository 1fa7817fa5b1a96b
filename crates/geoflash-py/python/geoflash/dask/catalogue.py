"""The partition catalogue: ``catalogue.json`` in a partitioned index's
directory, naming every partition's index with its extent and count.

    {"format": "geoflash-partitioned", "version": 1,
     "count": N, "extent": [minx, miny, maxx, maxy], "crs": "EPSG:4326" | null,
     "geometries": true, "index_options": {...},
     "partitioner": {"by": "hilbert", ...},
     "partitions": [{"id": 0, "path": "part-00000", "host": "node1",
                     "count": n, "extent": [...]}, ...]}

A partition's ``path`` is relative to the catalogue's directory (shared by
every worker, or the same machine) or absolute on the machine ``host``
(a worker's local disk). Extents of empty partitions are absent: empty
partitions are not written.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from ..exceptions import GeoflashError

FORMAT = "geoflash-partitioned"
#: The catalogue format this code writes and reads.
VERSION = 1
FILE = "catalogue.json"


class CatalogueError(GeoflashError, ValueError):
    """A partition catalogue that is missing, malformed, of another format
    version, or names a partition index that does not exist."""


def catalogue_path(path: Any) -> str:
    """The catalogue file of the partitioned index directory ``path``."""
    return os.path.join(os.fsdecode(os.fspath(path)), FILE)


def partition_dir(root: str, part: Dict[str, Any]) -> str:
    """The directory of a partition's index (``path`` resolved against the
    catalogue's directory)."""
    return os.path.normpath(os.path.join(root, part["path"]))


def write(path: Any, catalogue: Dict[str, Any]) -> None:
    """Writes the catalogue atomically (a temporary file renamed over it)."""
    target = catalogue_path(path)
    tmp = target + ".tmp"
    with open(tmp, "w") as f:
        json.dump(catalogue, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def read(path: Any, check_local: bool = True) -> Dict[str, Any]:
    """Reads and validates the catalogue of ``path``. With ``check_local``,
    every partition stored under the catalogue's directory must hold an
    index (its ``manifest.json``); partitions on other hosts' disks are
    checked by the worker that opens them."""
    root = os.fsdecode(os.fspath(path))
    file = catalogue_path(root)
    if not os.path.isfile(file):
        raise CatalogueError(f"{root} holds no partitioned index (no {FILE})")
    try:
        with open(file) as f:
            cat = json.load(f)
    except (OSError, ValueError) as e:
        raise CatalogueError(f"{file} is not a partition catalogue: {e}") from None
    if not isinstance(cat, dict) or cat.get("format") != FORMAT:
        raise CatalogueError(f"{file} is not a partition catalogue (format {FORMAT!r} expected)")
    if cat.get("version") != VERSION:
        raise CatalogueError(
            f"{file} has catalogue version {cat.get('version')!r}; this geoflash reads version {VERSION}"
        )
    parts: List[Dict[str, Any]] = cat.get("partitions", [])
    for p in parts:
        for key in ("id", "path", "count", "extent"):
            if key not in p:
                raise CatalogueError(f"{file}: partition {p.get('id', '?')} has no {key!r}")
        if check_local and not os.path.isabs(p["path"]):
            d = partition_dir(root, p)
            if not os.path.isfile(os.path.join(d, "manifest.json")):
                raise CatalogueError(
                    f"{file}: partition {p['id']} points at {d}, which holds no geoflash index"
                )
    return cat


def new(
    partitioner: Dict[str, Any],
    partitions: List[Dict[str, Any]],
    crs: Optional[str],
    geometries: bool,
    index_options: Dict[str, Any],
) -> Dict[str, Any]:
    """A catalogue of built partitions (each with ``id``, ``path``,
    ``host``, ``count``, ``extent``)."""
    extents = [p["extent"] for p in partitions]
    extent = (
        [
            min(e[0] for e in extents),
            min(e[1] for e in extents),
            max(e[2] for e in extents),
            max(e[3] for e in extents),
        ]
        if extents
        else None
    )
    return {
        "format": FORMAT,
        "version": VERSION,
        "count": int(sum(p["count"] for p in partitions)),
        "extent": extent,
        "crs": crs,
        "geometries": bool(geometries),
        "index_options": index_options,
        "partitioner": partitioner,
        "partitions": partitions,
    }
