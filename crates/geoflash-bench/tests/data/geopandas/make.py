"""Writes the GeoPandas fixtures of this folder (see ../README.md): the same
objects as GeoParquet with every compression codec (WKB encoding), as
GeoArrow-encoded GeoParquet (one file per geometry type: the encoding takes
one type per column), and as GeoPackage (four layers), with ``expected.csv``
(id, the geometry as hexadecimal WKB, which keeps every bit, and as WKT
for a reader) for the tests to compare against.

    python make.py            # in this folder, with geopandas >= 1.0 and pyogrio
"""

import csv
from pathlib import Path

import geopandas as gpd
import shapely
from shapely.geometry import LineString, MultiLineString, MultiPoint, MultiPolygon, Point, Polygon

HERE = Path(__file__).resolve().parent
THIRD = 1.0 / 3.0
AWK = 0.1 + 0.2  # 0.30000000000000004


def objects():
    """(id, geometry) with awkward coordinates, grouped by geometry type."""
    hole = [(1.0, 0.5), (3.0, 0.5), (3.0, 2.5), (1.0, 0.5)]
    return {
        "point": [(1, Point(AWK, -THIRD)), (2, Point(-180.0, 90.0)), (3, Point(1e-300, 2.5e-308))],
        "linestring": [(10, LineString([(0.0, 0.0), (AWK, 1.0), (2.0, -THIRD)])), (11, LineString([(5.0, 5.0), (6.0, 6.0)]))],
        "polygon": [
            (20, Polygon([(0.0, 0.0), (4.0, 0.0), (4.0, 4.0), (0.0, AWK), (0.0, 0.0)], [hole])),
            (21, Polygon([(10.0, 10.0), (11.0, 10.0), (11.0, 11.0 + THIRD), (10.0, 10.0)])),
        ],
        "multipoint": [(30, MultiPoint([(0.0, 0.0), (THIRD, AWK)]))],
        "multilinestring": [(40, MultiLineString([[(0.0, 0.0), (1.0, 1.0)], [(2.0, 2.0), (3.0, AWK), (4.0, 4.0)]]))],
        "multipolygon": [
            (
                50,
                MultiPolygon(
                    [
                        Polygon([(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 0.0)]),
                        Polygon([(5.0, 5.0), (8.0, 5.0), (8.0, 8.0), (5.0, 8.0), (5.0, 5.0)], [[(6.0, 6.0), (7.0, 6.0), (7.0, 7.0), (6.0, 6.0)]]),
                    ]
                ),
            )
        ],
    }


def frame(pairs):
    return gpd.GeoDataFrame({"id": [i for i, _ in pairs], "name": [f"o{i}" for i, _ in pairs]}, geometry=[g for _, g in pairs])


def main():
    by_type = objects()
    every = [o for pairs in by_type.values() for o in pairs]
    with open(HERE / "expected.csv", "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["id", "wkb", "wkt"])
        for i, g in every:
            w.writerow([i, shapely.to_wkb(g, hex=True), shapely.to_wkt(g)])
    for codec in ["snappy", "zstd", "gzip", "brotli", "lz4", "none"]:
        frame(every).to_parquet(HERE / f"wkb-{codec}.parquet", compression=None if codec == "none" else codec)
    for kind, pairs in by_type.items():
        frame(pairs).to_parquet(HERE / f"geoarrow-{kind}.parquet", geometry_encoding="geoarrow", compression="zstd")
    gpkg = HERE / "layers.gpkg"
    gpkg.unlink(missing_ok=True)
    # one layer per kind of geometry, as pyogrio writes a layer that mixes
    # polygons and multipolygons (or lines and multilines) as multi only;
    # "other" mixes kinds that are kept (a layer of type GEOMETRY)
    layers = {
        "buildings": by_type["polygon"],
        "roads": by_type["linestring"],
        "places": by_type["point"],
        "other": by_type["multipoint"] + by_type["multilinestring"] + by_type["multipolygon"],
    }
    for layer, pairs in layers.items():
        # (GDAL warns that no CRS is given: the workbench's coordinates have none)
        frame(pairs).to_file(gpkg, layer=layer, driver="GPKG", engine="pyogrio")

if __name__ == "__main__":
    main()
