"""Type stubs of the extension module geoflash._geoflash (internal: use geoflash.Index)."""

from os import PathLike
from typing import Any, Dict, List, Optional, Tuple, Union

__version__: str

_Box = Tuple[float, float, float, float]
_Item = Tuple[int, Optional[bytes], _Box]
_Path = Union[str, "PathLike[str]"]

class CorruptIndexError(OSError):
    """The index's data does not decode (checksum, magic, layout, newer format, stale id map)."""

DEFAULTS: dict[str, str]
def parse_size(text: str) -> int: ...
def bench_run(
    workload: str,
    results: _Path,
    scale: str = "small",
    from_json: bool = False,
    force: bool = False,
    only: List[str] = ...,
    workdir: Optional[_Path] = None,
    pick: Optional[int] = None,
) -> str: ...
def bench_plan(
    workload: str,
    results: _Path,
    scale: str = "small",
    from_json: bool = False,
    only: List[str] = ...,
) -> str: ...

class Core:
    @staticmethod
    def create(path: Optional[_Path], options: Dict[str, Any]) -> "Core": ...
    @staticmethod
    def bulk(
        path: Optional[_Path],
        options: Dict[str, Any],
        ids: bytes,
        boxes: bytes,
        objs: Optional[List[Optional[bytes]]] = None,
        method: str = "str",
        fill: float = 1.0,
    ) -> "Core": ...
    @staticmethod
    def bulk_geometries(
        path: _Path,
        options: Dict[str, Any],
        ids: bytes,
        wkbs: List[bytes],
        method: str = "str",
        fill: float = 1.0,
    ) -> "Core": ...
    @staticmethod
    def open(path: _Path, readonly: bool = False) -> "Core": ...
    def insert(
        self, id: int, minx: float, miny: float, maxx: float, maxy: float, obj: Optional[bytes] = None
    ) -> None: ...
    def delete(self, id: int, minx: float, miny: float, maxx: float, maxy: float) -> bool: ...
    def query(self, minx: float, miny: float, maxx: float, maxy: float, predicate: str) -> List[int]: ...
    def count(self, minx: float, miny: float, maxx: float, maxy: float, predicate: str) -> int: ...
    def query_keys(
        self, minx: float, miny: float, maxx: float, maxy: float, predicate: str
    ) -> Tuple[bytes, bytes, bytes]: ...
    def query_items(
        self, minx: float, miny: float, maxx: float, maxy: float, predicate: str
    ) -> List[_Item]: ...
    def query_batch(self, boxes: bytes, predicate: str = "intersects") -> Tuple[bytes, bytes]: ...
    def nearest(
        self,
        minx: float,
        miny: float,
        maxx: float,
        maxy: float,
        k: int,
        ties: bool = True,
        items: bool = False,
    ) -> Union[List[int], List[_Item]]: ...
    def wkb(self, keys: bytes) -> List[Optional[bytes]]: ...
    def has_geometries(self) -> bool: ...
    def bounds(self) -> Optional[_Box]: ...
    def leaves(self) -> List[Tuple[int, List[int], _Box]]: ...
    def __len__(self) -> int: ...
    def checkpoint(self) -> None: ...
    def begin_batch(self) -> None: ...
    def end_batch(self, succeeded: bool) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> Optional[str]: ...
    @property
    def readonly(self) -> bool: ...
    def manifest_json(self) -> str: ...
    def stats_json(self) -> str: ...
