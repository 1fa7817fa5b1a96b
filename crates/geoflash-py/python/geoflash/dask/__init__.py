"""geoflash on a Dask cluster: partitioned indexes and spatial joins.

    from distributed import Client, LocalCluster
    import geoflash.dask as gd

    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    pidx = gd.build(gdf, "buildings.pidx", partitions=8, by="hilbert", page_size=4096)
    pidx.intersection((0, 0, 10, 10))          # ids, routed by partition extent
    pidx.nearest((5, 5), 3)                    # kNN across partitions, ties included
    pairs = gd.join(pidx, other_gdf, "dwithin", distance=50.0)
    joined = gd.sjoin(gdf, other_gdf, how="left", predicate="touches")   # as geoflash.sjoin
    again = gd.PartitionedIndex("buildings.pidx")   # opened from its catalogue

Everything runs the same on a ``LocalCluster`` and a real cluster
(``client="tcp://scheduler:8786"``). See ``docs/scaleout.md``.
Needs ``dask`` and ``distributed``; GeoDataFrames need ``geopandas``, and
dask-geopandas frames ``dask-geopandas`` (geoflash uses only its public
API: its own Hilbert curve partitions). Builds and joins print their
progress on standard error (``progress=False`` silences them).
"""

from __future__ import annotations

from .building import build
from .catalogue import CatalogueError
from .cluster import WorkerSetupError, get_client
from .join import join, sjoin
from .partitioned import PartitionedIndex
from .sweep import run

__all__ = [
    "build",
    "PartitionedIndex",
    "join",
    "run",
    "sjoin",
    "get_client",
    "CatalogueError",
    "WorkerSetupError",
]
