"""One geometry per call from Python: geoflash's ``Index.query`` and
``Index.query_nearest`` of a shapely geometry against shapely 2's
``STRtree`` on the same boxes (docs/benchmarks.md, "A query of one
geometry").

Reads a dataset CSV (``id,minx,miny,maxx,maxy``, e.g. from ``geoflash
generate``), builds ``Index.from_geoseries`` of the boxes as polygons (in
memory, so the exact predicates refine real geometries) and ``STRtree``
of the same polygons, then calls each W times in a loop, one geometry a
call (W windows of PERCENT % of the extent, default 1,000 of 0.001 %,
and their lower-left corners as points for the nearest searches; seed 5):
``query(box, predicate=None)``, ``query(box, predicate="intersects")``
and ``query_nearest(point)``. Prints the median time per call over
REPEATS loops; both sides must give the same ids for every geometry.

    .venv/bin/python benchmarks/one_geometry.py DATA.csv [W] [PERCENT] [REPEATS]
"""

import sys

import numpy as np
import shapely

from batch_call import exact_indexes, read_dataset, windows
from timing import median_time


def main():
    _, boxes = read_dataset(__doc__)
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    percent = float(sys.argv[3]) if len(sys.argv) > 3 else 0.001
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 21
    idx, tree = exact_indexes(boxes)
    qs = windows(boxes, count, percent)
    geoms = list(shapely.box(*qs.T))
    points = list(shapely.points(qs[:, :2]))
    calls = [
        ("query(box, predicate=None)", geoms, lambda g: idx.query(g, predicate=None), lambda g: tree.query(g)),
        (
            'query(box, predicate="intersects")',
            geoms,
            lambda g: idx.query(g, predicate="intersects"),
            lambda g: tree.query(g, predicate="intersects"),
        ),
        ("query_nearest(point)", points, lambda g: idx.query_nearest(g), lambda g: tree.query_nearest(g)),
    ]
    print(f"{len(boxes):,} boxes of {sys.argv[1]}, {count} geometries a loop, medians of {repeats} loops (µs per call)")
    print(f"{'call':<36}{'geoflash':>10}{'shapely':>10}{'÷ shapely':>11}")
    for name, inputs, ours, theirs in calls:
        for g in inputs:
            if ours(g).tolist() != np.sort(theirs(g)).tolist():
                raise SystemExit(f"{name}: the answers differ for {g.wkt}")
        t_ours, _, _ = median_time(lambda: [ours(g) for g in inputs], repeats)
        t_theirs, _, _ = median_time(lambda: [theirs(g) for g in inputs], repeats)
        a, b = t_ours / count * 1e6, t_theirs / count * 1e6
        print(f"{name:<36}{a:>10.2f}{b:>10.2f}{a / b:>11.2f}")


if __name__ == "__main__":
    main()
