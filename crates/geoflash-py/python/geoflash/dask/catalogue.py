"""The partition catalogue: ``catalogue.json`` in a partitioned index's
directory, naming every partition's index with its extent and count.

    {"format": "geoflash-partitioned", "version": 2,
     "build": "9f3c…", "generation": 4,
     "count": N, "extent": [minx, miny, maxx, maxy], "crs": "EPSG:4326" | null,
     "geometries": true, "index_options": {...},
     "partitioner": {"by": "hilbert", ...},
     "partitions": [{"id": 0, "path": "part-00000", "host": "node1",
                     "worker": "tcp://…", "count": n, "extent": [...]}, ...],
     "checksum": "sha256:…"}

A partition's ``path`` is relative to the catalogue's directory (shared by
every worker, or the same machine) or absolute on the machine ``host``
(a worker's local disk). Empty partitions are not written by a build.

Version 2 (this code) adds:

- ``build``: a random id drawn by each build, and ``generation``, raised by
  every write. Workers key the partitions they keep open by both, so a
  rebuild at the same path, or a changed catalogue, never answers from an
  index opened before; a writer refuses to write when the catalogue's
  build or generation changed since it read it (another writer's work).
- ``checksum``: the SHA-256 of the catalogue's canonical JSON (its keys
  sorted, no spaces, without ``checksum``), verified on every read: a
  damaged catalogue raises ``CatalogueError`` naming the file.
- a partition may carry ``"pending": true`` (an insert into it began and
  was not confirmed: its extent already covers the new entries, its count
  may be short; the next open counts its index) and ``"new": true`` (the
  partition was created by that insert and its directory may not exist).

Version 1 catalogues (no build, generation nor checksum) are still read:
their build id is taken from the file's own SHA-256, and the next write
stores them as version 2.

Writers hold an exclusive ``flock`` on ``catalogue.lock`` in the
directory for the whole of a build, insert, delete or split: one writer at
a time. The catalogue is replaced durably: written to a temporary file of
a unique name, synced, renamed over ``catalogue.json``, then the directory
synced.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
import uuid
from typing import Any, Dict, Iterator, List, Optional

from ..exceptions import GeoflashError

FORMAT = "geoflash-partitioned"
#: The catalogue format this code writes.
VERSION = 2
#: The versions it reads (1: without build, generation and checksum).
READS = (1, 2)
FILE = "catalogue.json"
LOCK = "catalogue.lock"


class CatalogueError(GeoflashError, ValueError):
    """A partition catalogue that is missing, malformed, damaged (its
    checksum does not match), of another format version, names a partition
    index that does not exist, or was changed by another writer."""


def catalogue_path(path: Any) -> str:
    """The catalogue file of the partitioned index directory ``path``."""
    return os.path.join(os.fsdecode(os.fspath(path)), FILE)


def partition_dir(root: str, part: Dict[str, Any]) -> str:
    """The directory of a partition's index (``path`` resolved against the
    catalogue's directory)."""
    return os.path.normpath(os.path.join(root, part["path"]))


def new_build_id() -> str:
    """A random id for a new build."""
    return uuid.uuid4().hex


def cache_key(cat: Dict[str, Any]) -> str:
    """What workers key the partitions they keep open by: the catalogue's
    build and generation."""
    return f"{cat['build']}.{cat['generation']}"


def _canonical(cat: Dict[str, Any]) -> bytes:
    body = {k: v for k, v in cat.items() if k != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def checksum(cat: Dict[str, Any]) -> str:
    """The checksum of a catalogue's canonical JSON (without ``checksum``)."""
    return "sha256:" + hashlib.sha256(_canonical(cat)).hexdigest()


def jsonable(value: Any, what: str) -> Any:
    """``value`` as plain JSON types (NumPy scalars and arrays become
    Python numbers and lists, tuples lists), or ``ValueError`` naming
    ``what`` when it has no JSON form."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"{what} = {v!r}: the catalogue keeps only finite numbers")
        return v
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [jsonable(v, f"{what}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{what}: key {k!r} is not a string (the catalogue is JSON)")
            out[k] = jsonable(v, f"{what}[{k!r}]")
        return out
    raise ValueError(
        f"{what} = {value!r} ({type(value).__name__}) cannot be written to the catalogue (JSON): "
        f"give a number, string, bool, list or dict"
    )


def _sync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:  # some file systems cannot sync a directory
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def write(path: Any, catalogue: Dict[str, Any]) -> None:
    """Writes the catalogue durably: with its checksum, to a temporary file
    of a unique name in the directory, synced, renamed over the catalogue,
    then the directory synced. Serialised before any file is made, so an
    option that is not JSON leaves nothing behind. The caller holds the
    lock (``locked``)."""
    root = os.fsdecode(os.fspath(path))
    catalogue["version"] = VERSION
    catalogue["checksum"] = checksum(catalogue)
    text = json.dumps(catalogue, indent=1, allow_nan=False)
    target = catalogue_path(root)
    tmp = f"{target}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp"
    try:
        with open(tmp, "x") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_dir(root)


@contextlib.contextmanager
def locked(path: Any) -> Iterator[None]:
    """Holds the writers' lock of the directory ``path`` (an exclusive
    ``flock`` on its ``catalogue.lock``, made if missing); raises
    ``CatalogueError`` at once when another writer holds it."""
    root = os.fsdecode(os.fspath(path))
    file = os.path.join(root, LOCK)
    fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CatalogueError(
                f"{root} is being written by another build, insert, delete or split (it holds {file}): "
                f"one writer at a time; open the index again once that writer has finished"
            ) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def is_locked(path: Any) -> bool:
    """Whether a writer holds the lock of the directory ``path`` now."""
    file = os.path.join(os.fsdecode(os.fspath(path)), LOCK)
    try:
        fd = os.open(file, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def leftover_partitions(root: str) -> List[str]:
    """The partition directories (``part-…``) in ``root``."""
    try:
        return sorted(n for n in os.listdir(root) if n.startswith("part-"))
    except OSError:
        return []


def unfinished_build_message(root: str) -> Optional[str]:
    """What to say of a directory holding partitions but no catalogue (None
    when it holds none)."""
    parts = leftover_partitions(root)
    if not parts:
        return None
    if is_locked(root):
        return f"{root} holds partitions but no {FILE} yet: a build is running there"
    return (
        f"{root} holds {len(parts)} partition directories ({parts[0]}…) but no {FILE}: "
        f"an earlier build did not finish; remove the directory and build again"
    )


def read(path: Any, check_local: bool = True) -> Dict[str, Any]:
    """Reads and validates the catalogue of ``path`` (its checksum, its
    version). With ``check_local``, every partition stored under the
    catalogue's directory must hold an index (its ``manifest.json``),
    except one marked ``new`` (its first insert did not finish); partitions
    on other hosts' disks are checked by the worker that opens them."""
    root = os.fsdecode(os.fspath(path))
    file = catalogue_path(root)
    if not os.path.isfile(file):
        unfinished = unfinished_build_message(root)
        if unfinished:
            raise CatalogueError(unfinished)
        raise CatalogueError(f"{root} holds no partitioned index (no {FILE})")
    try:
        with open(file, "rb") as f:
            raw = f.read()
        cat = json.loads(raw)
    except (OSError, ValueError) as e:
        raise CatalogueError(f"{file} is not a partition catalogue: {e}") from None
    if not isinstance(cat, dict) or cat.get("format") != FORMAT:
        raise CatalogueError(f"{file} is not a partition catalogue (format {FORMAT!r} expected)")
    version = cat.get("version")
    if version not in READS:
        raise CatalogueError(
            f"{file} has catalogue version {version!r}; this geoflash reads versions {', '.join(map(str, READS))}"
        )
    if "checksum" in cat:
        try:
            ok = cat["checksum"] == checksum(cat)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise CatalogueError(f"{file} is damaged: its checksum does not match its contents")
    elif version != 1:
        raise CatalogueError(f"{file} is damaged: a version {version} catalogue without its checksum")
    if version == 1:  # older format: identified by its contents
        cat.setdefault("build", "v1-" + hashlib.sha256(raw).hexdigest()[:32])
        cat.setdefault("generation", 0)
    for key in ("build", "generation", "partitions", "count", "extent", "partitioner", "index_options"):
        if key not in cat:
            raise CatalogueError(f"{file}: no {key!r}")
    parts: List[Dict[str, Any]] = cat["partitions"]
    for p in parts:
        for key in ("id", "path", "count", "extent"):
            if key not in p:
                raise CatalogueError(f"{file}: partition {p.get('id', '?')} has no {key!r}")
        if check_local and not os.path.isabs(p["path"]) and not p.get("new"):
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
    build: Optional[str] = None,
) -> Dict[str, Any]:
    """A catalogue of built partitions (each with ``id``, ``path``,
    ``host``, ``count``, ``extent``), at generation 0."""
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
        "build": build or new_build_id(),
        "generation": 0,
        "count": int(sum(p["count"] for p in partitions)),
        "extent": extent,
        "crs": crs,
        "geometries": bool(geometries),
        "index_options": index_options,
        "partitioner": partitioner,
        "partitions": partitions,
    }
