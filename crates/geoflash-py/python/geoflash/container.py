"""``rtree.index.RtreeContainer`` for geoflash: an index of Python objects
themselves (the objects are the keys, by identity), in memory only."""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterator, Tuple

from .spatial_index import Index, _is_path
from .storage import ICustomStorage


class RtreeContainer(Index):
    """An index whose entries are Python objects, as rtree's
    ``RtreeContainer``: ``insert(obj, coordinates)``, ``delete(obj,
    coordinates)``, ``intersection``/``nearest`` give the objects (or
    ``Item``s with ``bbox=True``, whose ``id`` is None), ``obj in c``,
    ``len(c)`` and ``iter(c)``. Objects are told apart by identity
    (``id(obj)``), not equality. Pickling keeps every object with its boxes.

    Threads: the objects' table (object, and how many entries it has) is
    changed after the index, under a lock of its own that is never held
    across a call into the index (a change there may wait for another
    thread's batch); a query from another thread meanwhile leaves out an
    object whose entry it found but whose table row is not there (not
    yet inserted, or just deleted), as the state before or after that
    change would."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and (_is_path(args[0]) or isinstance(args[0], ICustomStorage)):
            raise ValueError(f"{self.__class__} supports only in-memory indexes")
        self._objects: Dict[int, Tuple[int, object]] = {}
        self._table = threading.Lock()
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
        super().insert(id(obj), coordinates, None)
        self._count(obj, 1)

    add = insert  # type: ignore[assignment]

    def delete(self, obj: object, coordinates: Any) -> None:  # type: ignore[override]
        """Deletes one entry of ``obj`` with these coordinates; ``IndexError``
        if the object is not in the container."""
        if id(obj) not in self._objects:
            raise IndexError("object is not in the index")
        if not self._delete(id(obj), coordinates):
            return  # no entry of obj at these coordinates: nothing deleted
        self._count(obj, -1)

    def _count(self, obj: object, change: int) -> None:
        """Adds ``change`` to the entries ``obj`` has in the table, the row
        gone at 0 (below 0 for a moment when another thread's insert of
        ``obj`` is in the index but not yet counted)."""
        with self._table:
            count = self._objects.get(id(obj), (0, obj))[0] + change
            if count == 0:
                self._objects.pop(id(obj), None)
            else:
                self._objects[id(obj)] = (count, obj)

    def _known(self, ids: Any) -> list:
        """The objects of ``ids`` that the table has (see the class: a row
        another thread is adding or removing may not be there)."""
        rows = map(self._objects.get, ids)
        return [row[1] for row in rows if row is not None]

    def _objects_of(self, found: Iterator[Any], bbox: Any) -> Iterator[Any]:
        if bbox is False:
            return iter(self._known(found))
        if bbox is True:
            items = []
            for it in found:
                row = self._objects.get(it.id)
                if row is not None:
                    it.object, it.id = row[1], None
                    items.append(it)
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
        return [(leaf, self._known(ids), bounds) for leaf, ids, bounds in super().leaves()]

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        # Keys are id()s, which do not survive pickling: keep the objects.
        ids, boxes, objs = state.pop("_entries")
        state.pop("_objects")
        state.pop("_table")
        rows = map(self._objects.get, ids.tolist())
        state["_members"] = [(row[1], b) for row, b in zip(rows, boxes.tolist()) if row is not None]
        return state

    def __setstate__(self, state: dict) -> None:
        members = state.pop("_members")
        super().__setstate__(state)
        self._objects = {}
        self._table = threading.Lock()
        for obj, (minx, miny, maxx, maxy) in members:
            self.insert(obj, self._bounds_out([minx, miny, maxx, maxy]))
