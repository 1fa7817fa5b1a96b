"""rtree's custom storage classes, so that code importing them runs; an
index given one raises ``NotImplementedError`` (geoflash stores pages on its
own devices: a directory, ``mem:``, ``flashsim:``, ...)."""

from __future__ import annotations

from typing import Any

__all__ = ["ICustomStorage", "CustomStorageBase", "CustomStorage"]

_WHY = (
    "custom storage (rtree's ICustomStorage callbacks) is not implemented by geoflash: "
    "give a directory path, or a device string (device=...)"
)


class ICustomStorage:
    """rtree's interface of custom storage managers (not implemented)."""

    NoError = 0
    InvalidPageError = 1
    IllegalStateError = 2
    EmptyPage = -0x1
    NewPage = -0x1

    def registerCallbacks(self, properties: Any) -> None:
        """Always raises ``NotImplementedError``."""
        raise NotImplementedError(_WHY)

    def clear(self) -> None:
        """Always raises ``NotImplementedError``."""
        raise NotImplementedError(_WHY)

    hasData = property(lambda self: False)


class CustomStorageBase(ICustomStorage):
    """rtree's base of custom storage on raw buffers (not implemented)."""


class CustomStorage(ICustomStorage):
    """rtree's base of custom storage on bytes (not implemented)."""
