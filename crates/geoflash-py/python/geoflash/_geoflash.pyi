"""Type stubs of the extension module geoflash._geoflash (internal: use geoflash.Index)."""

from os import PathLike
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

__version__: str

_Box = Tuple[float, float, float, float]
_Item = Tuple[int, Optional[bytes], _Box]
_Path = Union[str, "PathLike[str]"]

DEFAULTS: dict[str, str]
KINDS: Tuple[str, ...]
GRID_KINDS: Tuple[str, ...]
SETTINGS: dict[str, str]
PREDICATES: Tuple[str, ...]
def box_of(coordinates: Any, interleaved: bool) -> Optional[_Box]: ...
def hilbert_keys(boxes: bytes, domain: _Box, order: int = 16) -> bytearray: ...
def parse_size(text: str) -> int: ...
def stable_order_by_key(keys: bytes, bound: int) -> bytearray: ...
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
def bench_is_complete(results: str, key: str) -> bool: ...
def bench_copy_configuration(source: str, results: str, key: str) -> Optional[int]: ...
def bench_rows(results: str, workload: Optional[str] = None, scale: Optional[str] = None) -> str: ...
def bench_location(results: str) -> Tuple[str, bool]: ...

class Core:
    @staticmethod
    def create(path: Optional[_Path], options: Dict[str, Any]) -> "Core": ...
    @staticmethod
    def bulk(
        path: Optional[_Path],
        options: Dict[str, Any],
        rows: int,
        chunks: Iterable[Tuple[bytes, bytes]],
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
    def insert_plain(self, id: Any, coordinates: Any, interleaved: bool) -> bool: ...
    def delete(self, id: int, minx: float, miny: float, maxx: float, maxy: float) -> bool: ...
    def update(self, id: int, minx: float, miny: float, maxx: float, maxy: float) -> None: ...
    def update_batch(self, ids: bytes, boxes: bytes) -> int: ...
    def query(self, minx: float, miny: float, maxx: float, maxy: float, predicate: str) -> List[int]: ...
    def count(self, minx: float, miny: float, maxx: float, maxy: float, predicate: str) -> int: ...
    def query_keys(
        self, minx: float, miny: float, maxx: float, maxy: float, predicate: str
    ) -> Tuple[bytes, bytes, bytes]: ...
    def query_items(
        self, minx: float, miny: float, maxx: float, maxy: float, predicate: str
    ) -> List[_Item]: ...
    def query_batch(self, boxes: bytes, predicate: str = "intersects") -> Tuple[bytearray, bytearray]: ...
    def query_pairs(self, boxes: bytes, predicate: str = "intersects") -> bytearray: ...
    def nearest_batch(self, boxes: bytes, k: int, ties: bool = True) -> Tuple[bytearray, bytearray, bytearray]: ...
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
    @property
    def failed(self) -> Optional[str]: ...
    def manifest_json(self) -> str: ...
    def stats_json(self) -> str: ...

class Geometries:
    """Exact geometries of an index's entries by id (see geoflash._exact)."""

    def __init__(
        self,
        ids: bytes,
        wkbs: List[Optional[bytes]],
        rects: bytes,
        counts: Optional[bytes] = None,
        coords: Optional[bytes] = None,
    ) -> None: ...
    def __len__(self) -> int: ...
    def refine(
        self,
        inputs: List[Optional[bytes]],
        offsets: bytes,
        ids: bytes,
        predicate: str,
        distance: Optional[float] = None,
        boxes: Optional[bytes] = None,
        counts: Optional[bytes] = None,
        coords: Optional[bytes] = None,
    ) -> bytearray: ...
    def kth_distance(
        self,
        inputs: List[Optional[bytes]],
        offsets: bytes,
        ids: bytes,
        k: int,
        exclusive: bool,
        boxes: Optional[bytes] = None,
    ) -> bytearray: ...
    def nearest(
        self,
        inputs: List[Optional[bytes]],
        offsets: bytes,
        ids: bytes,
        k: int,
        all_matches: bool,
        exclusive: bool,
        max_distance: Optional[float] = None,
        boxes: Optional[bytes] = None,
    ) -> Tuple[bytearray, bytearray, bytearray]: ...
