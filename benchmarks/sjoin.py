"""In-process spatial joins: geoflash.sjoin against geopandas.sjoin on the
same GeoDataFrames (docs/benchmarks.md, "Python: spatial joins").

Left: N random points (``--left points``) or polygons (boxes and
triangles, sides up to 0.2 % of the unit square); right: M random
polygons (sides up to 1 %); a float and a string column on each side.
Each join runs REPEATS times after a warm-up; the time is the median, and
both answers must hold the same (left, right) pairs. ``--nearest``:
geoflash.sjoin_nearest against geopandas.sjoin_nearest instead (PREDICATE
is not used; the distances must agree too).

    .venv/bin/python benchmarks/sjoin.py [--left points|polygons] [--nearest] [N] [M] [REPEATS] [HOW] [PREDICATE]
"""

import argparse

import geopandas
import numpy as np
import shapely

import geoflash
from timing import median_time


def polygons(rng, n, size):
    x, y = rng.uniform(0, 1, (2, n))
    w, h = rng.uniform(size / 20, size, (2, n))
    boxes = shapely.box(x, y, x + w, y + h)
    tri = shapely.polygons(
        np.stack([np.stack([x, y], 1), np.stack([x + w, y], 1), np.stack([x + w / 2, y + h], 1), np.stack([x, y], 1)], 1)
    )
    return np.where(rng.uniform(size=n) < 0.5, boxes, tri)


def frame(rng, geoms, prefix):
    n = len(geoms)
    return geopandas.GeoDataFrame(
        {f"{prefix}_value": rng.random(n), "name": np.char.add(prefix, np.arange(n).astype(str)), "geometry": geoms},
        crs="EPSG:3857",
    )


def pairs(joined, how):
    """The (left, right) row ids of a join's matched rows, sorted."""
    if how == "right":
        lid, rid = joined["index_left"].to_numpy(), joined.index.to_numpy()
    else:
        lid, rid = joined.index.to_numpy(), joined["index_right"].to_numpy()
    ok = ~(np.isnan(lid.astype(float)) | np.isnan(rid.astype(float)))
    p = np.stack([lid[ok].astype(np.int64), rid[ok].astype(np.int64)])
    return p[:, np.lexsort((p[1], p[0]))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--left", choices=["points", "polygons"], default="points")
    ap.add_argument("--nearest", action="store_true", help="sjoin_nearest instead of sjoin")
    ap.add_argument("n", type=int, nargs="?", default=1_000_000)
    ap.add_argument("m", type=int, nargs="?", default=100_000)
    ap.add_argument("repeats", type=int, nargs="?", default=3)
    ap.add_argument("how", nargs="?", default="inner")
    ap.add_argument("predicate", nargs="?", default="intersects")
    a = ap.parse_args()
    rng = np.random.default_rng(46)
    if a.left == "points":
        lg = shapely.points(rng.uniform(0, 1, (a.n, 2)))
    else:
        lg = polygons(rng, a.n, 0.002)
    left = frame(rng, lg, "l")
    right = frame(rng, polygons(rng, a.m, 0.01), "r")
    if a.nearest:
        kw, name = dict(how=a.how, distance_col="dist"), "sjoin_nearest"
    else:
        kw, name = dict(how=a.how, predicate=a.predicate), "sjoin"
    t_gp, runs_gp, want = median_time(lambda: getattr(geopandas, name)(left, right, **kw), a.repeats)
    t_gf, runs_gf, got = median_time(lambda: getattr(geoflash, name)(left, right, **kw), a.repeats)
    assert len(got) == len(want), (len(got), len(want))
    assert np.array_equal(pairs(got, a.how), pairs(want, a.how)), "the joins differ"
    if a.nearest:
        assert np.allclose(np.sort(got["dist"].to_numpy()), np.sort(want["dist"].to_numpy())), "distances differ"
    what = "nearest" if a.nearest else f"predicate={a.predicate}"
    print(f"left {a.n:,} {a.left}, right {a.m:,} polygons, how={a.how}, {what}: {len(got):,} rows")
    print(f"geopandas.{name:14s} median {t_gp:.4f} s  runs {[round(t, 4) for t in runs_gp]}")
    print(f"geoflash.{name:15s} median {t_gf:.4f} s  runs {[round(t, 4) for t in runs_gf]}")
    print(f"speed-up {t_gp / t_gf:.2f}x")


if __name__ == "__main__":
    main()
