"""The exception of the ``rtree`` API: ``geoflash.RTreeError``.

geoflash raises it for bad input: invalid or inverted bounds, wrong
coordinate counts, empty bulk-load streams, bad properties and options, and
the use of a closed index. When the ``rtree`` package can be imported, the
class subclasses ``rtree.exceptions.RTreeError``, so code written for rtree
(``except rtree.exceptions.RTreeError``) catches geoflash's errors
unchanged; it always subclasses ``ValueError`` as well, which geoflash
raised for the same errors before.
"""

from __future__ import annotations

from typing import Tuple, Type

__all__ = ["RTreeError"]


def _bases() -> Tuple[Type[Exception], ...]:
    try:
        from rtree.exceptions import RTreeError as RtreeError
    except Exception:  # rtree not installed, or its libspatialindex missing
        return (ValueError,)
    return (RtreeError, ValueError)


class RTreeError(*_bases()):  # type: ignore[misc]
    """Bad input to a geoflash index (a ``ValueError``, and rtree's
    ``RTreeError`` when rtree is installed)."""
