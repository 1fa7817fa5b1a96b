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
``InvalidIdError`` (an ``RTreeError``, an id that is not an integer (``None``,
``TypeError`` and                     a float, a string)
``ctypes.ArgumentError``)
``InvalidCoordinatesError`` (an       coordinates that are not a sequence of
``RTreeError`` and a ``TypeError``)   real numbers (``None``, a ``str`` or
                                      ``bytes``, an item that is not a
                                      number, such as ``"1"`` or ``b"1"``)
``CorruptIndexError`` (``OSError``)   damage: checksums, magic numbers or
                                      layouts that do not verify, a newer
                                      format, an index needing recovery
``DeviceError`` (``OSError``)         I/O and device failures, with the OS
                                      error number when there is one
``ResultsStoreError``                 the workbench's results database
(``OSError`` and ``ValueError``)
====================================  =========================================

``RTreeError`` is the exception of the ``rtree`` API, under rtree's name:
code written for rtree changes only its import (``import geoflash as
rtree``, or ``from geoflash.exceptions import RTreeError``). Its bases are
the same whether or not the ``rtree`` package is installed:
``GeoflashError`` and ``ValueError`` (which geoflash raised for the same
errors before), never rtree's own class, so ``except
rtree.exceptions.RTreeError`` does not catch geoflash's errors.
``InvalidIdError`` is what rtree raises for an id that is not an integer
(``idx.insert(None, box)``): ``ctypes.ArgumentError``, whose message says
``TypeError``; it is a ``TypeError`` and an ``RTreeError`` too.
``InvalidCoordinatesError`` is likewise the ``TypeError`` rtree raises for
coordinates that are not numbers (``"must be real number, not str"``),
and an ``RTreeError``, which geoflash raised for them before.

A ``DeviceError`` with an OS error number is also of the built-in class
Python gives that number (``FileNotFoundError``, ``NotADirectoryError``,
``PermissionError``…), as a plain ``OSError`` would be.
"""

from __future__ import annotations

import ctypes
from typing import Dict, Optional, Type

__all__ = [
    "GeoflashError",
    "RTreeError",
    "InvalidIdError",
    "InvalidCoordinatesError",
    "CorruptIndexError",
    "DeviceError",
    "ResultsStoreError",
]


class GeoflashError(Exception):
    """The base of every exception geoflash defines: ``except
    geoflash.GeoflashError`` catches each of them, whether or not ``rtree``
    is installed."""


class RTreeError(GeoflashError, ValueError):
    """Bad input to a geoflash index (a ``ValueError``); the same class
    whether or not the ``rtree`` package is installed."""


class InvalidIdError(RTreeError, ctypes.ArgumentError, TypeError):
    """An id that is not an integer (``None``, a float, a string): an
    ``RTreeError`` like other bad input, and the ``TypeError`` and
    ``ctypes.ArgumentError`` that rtree raises for it (``except
    ctypes.ArgumentError`` in code written for rtree catches it)."""


class InvalidCoordinatesError(RTreeError, TypeError):
    """Coordinates that are not a sequence of real numbers: ``None``, a
    ``str`` or ``bytes`` (``"1234"``, ``b"ab"``: never read as digits or
    byte values), or an item that is not a number (``("1", 2, 3, 4)``).
    The ``TypeError`` rtree raises for them, and an ``RTreeError`` like
    other bad input."""


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
