"""Small batches of windows from Python: geoflash's in-memory
``Index.intersection_batch`` against shapely 2's ``STRtree.query`` on the
same boxes (docs/benchmarks.md, "A batch call's fixed cost").

Reads a dataset CSV (``id,minx,miny,maxx,maxy``, e.g. from ``geoflash
generate``), loads it with ``Index.from_arrays`` and ``STRtree``, and times,
for W windows of PERCENT % of the extent (default 100 of 0.001 %; seed 5)
and for the first window alone: the call by itself, and the call with the
answer split per window as the peer benchmark does (geoflash: slices of
the ids by offsets; shapely: its pairs sorted by window, then the same
slices). Medians of REPEATS calls after a warm-up; both sides must find
the same number of pairs.

    .venv/bin/python benchmarks/batch_call.py DATA.csv [W] [PERCENT] [REPEATS]
"""

import sys

import numpy as np
import shapely

import geoflash
from timing import median_time


def windows(boxes, count, percent):
    lo, hi = boxes[:, :2].min(axis=0), boxes[:, 2:].max(axis=0)
    side = (percent / 100.0) ** 0.5 * (hi - lo)
    rng = np.random.default_rng(5)
    corner = lo + rng.random((count, 2)) * (hi - lo - side)
    return np.hstack([corner, corner + side])


def read_dataset(doc):
    """The ids and boxes (N×4, C-contiguous) of the dataset CSV named by
    the first argument (``id,minx,miny,maxx,maxy``); without one, exits
    printing ``doc``."""
    if len(sys.argv) < 2:
        raise SystemExit(doc)
    data = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1, ndmin=2)
    return data[:, 0].astype(np.int64), np.ascontiguousarray(data[:, 1:5])


def exact_indexes(boxes):
    """``Index.from_geoseries`` of the boxes as polygons (in memory) and
    shapely's ``STRtree`` of the same polygons."""
    polygons = shapely.box(*boxes.T)
    return geoflash.Index.from_geoseries(polygons), shapely.STRtree(polygons)


def main():
    ids, boxes = read_dataset(__doc__)
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    percent = float(sys.argv[3]) if len(sys.argv) > 3 else 0.001
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 301
    idx = geoflash.Index.from_arrays(ids, boxes)
    tree = shapely.STRtree(shapely.box(*boxes.T))
    print(f"{len(ids):,} boxes of {sys.argv[1]}, windows of {percent} %, medians of {repeats} calls (µs)")
    print(f"{'windows':>8}{'pairs':>8}{'geoflash call':>15}{'split':>8}{'shapely call':>14}{'split':>8}{'÷ shapely':>11}")
    for qs in (windows(boxes, count, percent), windows(boxes, count, percent)[:1]):
        geoms = shapely.box(*qs.T)

        def ours_split():
            offsets, found = idx.intersection_batch(qs)
            return [found[offsets[i]:offsets[i + 1]] for i in range(len(qs))]

        def theirs_split():
            pairs = tree.query(geoms, predicate="intersects")
            order = np.argsort(pairs[0], kind="stable")
            bounds = np.searchsorted(pairs[0][order], np.arange(len(qs) + 1))
            found = ids[pairs[1][order]]
            return [found[bounds[i]:bounds[i + 1]] for i in range(len(qs))]

        ours, _, _ = median_time(lambda: idx.intersection_batch(qs), repeats)
        ours_s, _, a = median_time(ours_split, repeats)
        theirs, _, _ = median_time(lambda: tree.query(geoms, predicate="intersects"), repeats)
        theirs_s, _, b = median_time(theirs_split, repeats)
        if [sorted(x.tolist()) for x in a] != [sorted(x.tolist()) for x in b]:
            raise SystemExit("the answers differ")
        pairs = sum(len(x) for x in a)
        print(f"{len(qs):>8}{pairs:>8}{ours * 1e6:>15.1f}{ours_s * 1e6:>8.1f}{theirs * 1e6:>14.1f}"
              f"{theirs_s * 1e6:>8.1f}{ours_s / theirs_s:>11.2f}")


if __name__ == "__main__":
    main()
