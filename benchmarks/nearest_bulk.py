"""The exact nearest search of many points in one call from Python:
geoflash's ``Index.query_nearest(points)`` against shapely 2's
``STRtree.query_nearest`` on the same boxes (docs/benchmarks.md, "A
query of one geometry").

Reads a dataset CSV (``id,minx,miny,maxx,maxy``, e.g. from ``geoflash
generate``), builds ``Index.from_geoseries`` of the boxes as polygons (in
memory) and ``STRtree`` of the same polygons, then asks each for the
nearest entries of M random points in the data's extent (seed 3), for M
in SIZES (default 100, 1,000 and 10,000), medians of REPEATS calls; both
sides must give the same (point, entry) pairs.

    .venv/bin/python benchmarks/nearest_bulk.py DATA.csv [REPEATS] [SIZES]
"""

import sys

import numpy as np
import shapely

from batch_call import exact_indexes, read_dataset
from timing import median_time


def main():
    _, boxes = read_dataset(__doc__)
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    sizes = [int(s) for s in sys.argv[3].split(",")] if len(sys.argv) > 3 else [100, 1000, 10000]
    idx, tree = exact_indexes(boxes)
    rng = np.random.default_rng(3)
    lo, hi = boxes[:, :2].min(axis=0), boxes[:, 2:].max(axis=0)
    print(f"{len(boxes):,} boxes of {sys.argv[1]}, medians of {repeats} calls")
    print(f"{'points':>8}{'geoflash ms':>13}{'shapely ms':>12}{'÷ shapely':>11}")
    for m in sizes:
        points = shapely.points(lo + rng.random((m, 2)) * (hi - lo))
        ours, _, got = median_time(lambda: idx.query_nearest(points), repeats)
        theirs, _, want = median_time(lambda: tree.query_nearest(points), repeats)
        if sorted(map(tuple, got.T.tolist())) != sorted(map(tuple, want.T.tolist())):
            raise SystemExit(f"{m} points: the answers differ")
        print(f"{m:>8}{ours * 1e3:>13.2f}{theirs * 1e3:>12.2f}{ours / theirs:>11.2f}")


if __name__ == "__main__":
    main()
