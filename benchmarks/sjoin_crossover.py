"""Where the distributed join pays: geoflash.dask.sjoin (every left range
joined in process on a worker of a LocalCluster) against geoflash.sjoin in
this process, on the data of benchmarks/sjoin.py (left N points, right N/5
polygons), for growing N (docs/scaleout.md, "Spatial joins").

Each join runs REPEATS times after a warm-up; times are medians, and the
two frames must be equal.

    .venv/bin/python benchmarks/sjoin_crossover.py [WORKERS] [REPEATS] N...
"""

import sys
from pathlib import Path

import numpy as np
import shapely
from distributed import Client, LocalCluster
from geopandas.testing import assert_geodataframe_equal

sys.path.insert(0, str(Path(__file__).parent))
import sjoin as data  # noqa: E402
from timing import median_time  # noqa: E402

import geoflash  # noqa: E402
import geoflash.dask as gd  # noqa: E402


def main():
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    sizes = [int(n) for n in sys.argv[3:]] or [10_000, 100_000, 1_000_000]
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            print(f"{workers} workers x 1 thread; left N points, right N/5 polygons; median of {repeats}")
            print("| N | in process | on the cluster | cluster / in process |")
            print("|---:|---:|---:|---:|")
            for n in sizes:
                rng = np.random.default_rng(46)
                left = data.frame(rng, shapely.points(rng.uniform(0, 1, (n, 2))), "l")
                right = data.frame(rng, data.polygons(rng, max(1, n // 5), 0.01), "r")
                t_in, _, want = median_time(lambda: geoflash.sjoin(left, right), repeats)
                t_d, _, got = median_time(
                    lambda: gd.sjoin(left, right, client=client, local_below=0, progress=False), repeats
                )
                assert_geodataframe_equal(got, want)
                print(f"| {n:,} | {t_in:.3f} s | {t_d:.3f} s | {t_d / t_in:.2f} |", flush=True)


if __name__ == "__main__":
    main()
