"""Bulk ``query`` of many geometries: geoflash.Index against shapely 2's
STRtree on the same data (docs/python.md, "shapely and GeoPandas").

Tree: N random polygons (boxes and triangles, sides up to 2 % of the unit
square); inputs: M random polygons of the same kind. Each side answers the
bulk query of all M inputs in one call; the time is the median of REPEATS
runs after a warm-up, and the pairs must be identical.

    .venv/bin/python benchmarks/strtree_bulk_query.py [N] [M] [REPEATS]
"""

import sys

import numpy as np
import shapely

import geoflash
from timing import median_time


def polygons(rng, n):
    x, y = rng.uniform(0, 1, (2, n))
    w, h = rng.uniform(0.001, 0.02, (2, n))
    boxes = shapely.box(x, y, x + w, y + h)
    tri = np.array([shapely.Polygon([(a, b), (a + c, b), (a + c / 2, b + d)]) for a, b, c, d in zip(x, y, w, h)])
    return np.where(rng.uniform(size=n) < 0.5, boxes, tri)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    m = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    rng = np.random.default_rng(46)
    tree_geoms, inputs = polygons(rng, n), polygons(rng, m)
    tree = shapely.STRtree(tree_geoms)
    idx = geoflash.Index.from_geoseries(tree_geoms)
    idx.query(inputs[:1], predicate="intersects")  # the geometries reach Rust once
    print(f"tree {n:,} polygons, {m:,} input polygons, median of {repeats}")
    print(f"{'predicate':<18}{'pairs':>9}{'STRtree ms':>12}{'geoflash ms':>13}{'speed':>8}")
    for predicate in (None, "intersects", "contains", "within", "touches", "covers", "dwithin"):
        kw = {"distance": 0.005} if predicate == "dwithin" else {}
        ts, _, want = median_time(lambda: tree.query(inputs, predicate=predicate, **kw), repeats)
        tg, _, got = median_time(lambda: idx.query(inputs, predicate=predicate, **kw), repeats)
        same = sorted(map(tuple, want.T.tolist())) == sorted(map(tuple, got.T.tolist()))
        if not same:
            raise SystemExit(f"{predicate}: the pairs differ")
        print(f"{str(predicate):<18}{got.shape[1]:>9,}{ts * 1e3:>12.1f}{tg * 1e3:>13.1f}{ts / tg:>7.2f}x")


if __name__ == "__main__":
    main()
