"""``rtree.index.RtreeContainer`` for geoflash: an index of Python objects
themselves (the objects are the keys, by identity), in memory only."""

from __future__ import annotations

from typing import Any, Dict, Iterator, Tuple

from .spatial_index import Index, _is_path
from .storage import ICustomStorage


class RtreeContainer(Index):
    """An index whose entries are Python objects, as rtree's
    ``RtreeContainer``: ``insert(obj, coordinates)``, ``delete(obj,
    coordinates)``, ``intersection``/``nearest`` give the objects (or
    ``Item``s with ``bbox=True``, whose ``id`` is None), ``obj in c``,
    ``len(c)`` and ``iter(c)``. Objects are told apart by identity
    (``id(obj)``), not equality. Pickling keeps every object with its boxes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and (_is_path(args[0]) or isinstance(args[0], ICustomStorage)):
            raise ValueError(f"{self.__class__} supports only in-memory indexes")
        self._objects: Dict[int, Tuple[int, object]] = {}
        super().__init__(*args, **kwargs)

    def get_size(self) -> int:
        """The number of entries."""
        return self.count(self.bounds) if len(self._core) else 0

    def __repr__(self) -> str:
        return f"geoflash.RtreeContainer(bounds={self.bounds}, size={self.get_size()})"

    def __contains__(self, obj: object) -> bool:
        return id(obj) in self._objects

    def __len__(self) -> int:
        return sum(count for count, _ in self._objects.values())

    def __iter__(self) -> Iterator[object]:
        return iter([obj for _, obj in self._objects.values()])

    def insert(self, obj: object, coordinates: Any) -> None:  # type: ignore[override]
        """Inserts ``obj`` with the box or point (an object may be inserted several times)."""
        count = self._objects.get(id(obj), (0, obj))[0] + 1
        super().insert(id(obj), coordinates, None)
        self._objects[id(obj)] = (count, obj)

    add = insert  # type: ignore[assignment]

    def delete(self, obj: object, coordinates: Any) -> None:  # type: ignore[override]
        """Deletes one entry of ``obj`` with these coordinates; ``IndexError``
        if the object is not in the container."""
        try:
            count = self._objects[id(obj)][0] - 1
        except KeyError:
            raise IndexError("object is not in the index") from None
        if not self._delete(id(obj), coordinates):
            return  # no entry of obj at these coordinates: nothing deleted
        if count == 0:
            del self._objects[id(obj)]
        else:
            self._objects[id(obj)] = (count, obj)

    def _objects_of(self, found: Iterator[Any], bbox: Any) -> Iterator[Any]:
        if bbox is False:
            return iter([self._objects[i][1] for i in found])
        if bbox is True:
            items = list(found)
            for it in items:
                it.object = self._objects[it.id][1]
                it.id = None
            return iter(items)
        raise ValueError("valid values for the bbox argument are True and False")

    def intersection(self, coordinates: Any, bbox: bool = False) -> Iterator[Any]:  # type: ignore[override]
        """The objects whose boxes intersect the window (``Item``s with ``bbox=True``)."""
        if bbox not in (True, False):
            raise ValueError("valid values for the bbox argument are True and False")
        return self._objects_of(super().intersection(coordinates, bbox), bbox)

    def nearest(self, coordinates: Any, num_results: int = 1, bbox: bool = False) -> Iterator[Any]:  # type: ignore[override]
        """The objects nearest to the point or box, ties included (``Item``s with ``bbox=True``)."""
        if bbox not in (True, False):
            raise ValueError("valid values for the bbox argument are True and False")
        return self._objects_of(super().nearest(coordinates, num_results, bbox), bbox)

    def leaves(self) -> list:
        """``(leaf_id, [objects of its entries], bounds)`` per leaf (rtree's
        own version of this method fails with a KeyError)."""
        return [
            (leaf, [self._objects[i][1] for i in ids], bounds)
            for leaf, ids, bounds in super().leaves()
        ]

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        # Keys are id()s, which do not survive pickling: keep the objects.
        ids, boxes, objs = state.pop("_entries")
        state.pop("_objects")
        state["_members"] = [(self._objects[int(i)][1], b) for i, b in zip(ids, boxes.tolist())]
        return state

    def __setstate__(self, state: dict) -> None:
        members = state.pop("_members")
        super().__setstate__(state)
        self._objects = {}
        for obj, (minx, miny, maxx, maxy) in members:
            self.insert(obj, self._bounds_out([minx, miny, maxx, maxy]))
