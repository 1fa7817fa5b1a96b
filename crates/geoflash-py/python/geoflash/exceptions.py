"""geoflash's exceptions: one base, ``geoflash.GeoflashError``, and a class
per kind of error of the engine (``geoflash::ErrorKind``).

====================================  =========================================
class                                 raised for
====================================  =========================================
``GeoflashError``                     the base of every class below (and of
                                      ``geoflash.dask``'s); an interrupted
                                      operation
``RTreeError`` (a ``ValueError``)     bad input: bounds, coordinate counts,
                                      empty bulk-load streams, properties and
                                      options, the use of a closed index
``CorruptIndexError`` (``OSError``)   damage: checksums, magic numbers or
                                      layouts that do not verify, a newer
                                      format, an index needing recovery
``DeviceError`` (``OSError``)         I/O and device failures, with the OS
                                      error number when there is one
``ResultsStoreError``                 the workbench's results database
(``OSError`` and ``ValueError``)
====================================  =========================================

``RTreeError`` is the exception of the ``rtree`` API: when the ``rtree``
package can be imported, it subclasses ``rtree.exceptions.RTreeError`` too,
so code written for rtree (``except rtree.exceptions.RTreeError``) catches
geoflash's errors unchanged; it always subclasses ``ValueError``, which
geoflash raised for the same errors before. Without rtree every class is
the same but for that one base: ``except geoflash.GeoflashError`` catches
them all either way.

A ``DeviceError`` with an OS error number is also of the built-in class
Python gives that number (``FileNotFoundError``, ``NotADirectoryError``,
``PermissionError``…), as a plain ``OSError`` would be.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple, Type

__all__ = [
    "GeoflashError",
    "RTreeError",
    "CorruptIndexError",
    "DeviceError",
    "ResultsStoreError",
]


class GeoflashError(Exception):
    """The base of every exception geoflash defines: ``except
    geoflash.GeoflashError`` catches each of them, whether or not ``rtree``
    is installed."""


def _rtree_bases() -> Tuple[Type[Exception], ...]:
    try:
        from rtree.exceptions import RTreeError as RtreeError
    except Exception:  # rtree not installed, or its libspatialindex missing
        return ()
    return (RtreeError,)


class RTreeError(GeoflashError, *_rtree_bases(), ValueError):  # type: ignore[misc]
    """Bad input to a geoflash index (a ``ValueError``, and rtree's
    ``RTreeError`` when rtree is installed)."""


class CorruptIndexError(GeoflashError, OSError):
    """The index's data on the device or in its directory does not decode
    (bad checksum, magic or layout, a newer format, an id map older than
    the index), or needs a writer's recovery first."""


class DeviceError(GeoflashError, OSError):
    """An I/O or device failure: an operating-system error (``errno`` set
    when the OS gave one), a full or crashed device, a store that failed
    earlier and refuses changes until reopened."""


class ResultsStoreError(GeoflashError, OSError, ValueError):
    """The workbench's results database failed: not a database, a schema
    newer than this geoflash, a statement it refused. A ``ValueError`` as
    well, which geoflash raised for these before."""


#: ``DeviceError`` subclasses by the built-in ``OSError`` subclass of an errno.
_DEVICE_ERRORS: Dict[Type[OSError], Type[DeviceError]] = {}


def _device_error(errno: Optional[int], message: str, filename: Optional[str]) -> DeviceError:
    """The ``DeviceError`` of an OS error number: of the built-in class
    Python maps ``errno`` to as well (``OSError(2, …)`` is a
    ``FileNotFoundError``), so that code catching those keeps working. The
    extension module raises device errors through this function."""
    if errno is None:
        return DeviceError(message)
    builtin = type(OSError(errno, message))
    if builtin is OSError:
        return DeviceError(errno, message, filename)
    cls = _DEVICE_ERRORS.get(builtin)
    if cls is None:
        body = {"__module__": __name__, "__doc__": DeviceError.__doc__}
        cls = _DEVICE_ERRORS[builtin] = type(builtin.__name__, (DeviceError, builtin), body)
    return cls(errno, message, filename)
