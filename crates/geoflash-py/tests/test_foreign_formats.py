"""`geoflash import` of files that GeoPandas writes (issue 46): GeoParquet
with each compression codec GeoPandas offers (WKB encoding), GeoParquet
with the GeoArrow encodings (``geometry_encoding="geoarrow"``, one geometry
type per file), and GeoPackage through pyogrio/GDAL (several layers, one
chosen with ``--layer``). The objects geoflash writes back as GeoParquet
(WKB) must be GeoPandas' geometries, bit for bit (equal WKB), with the ids
of the ``id`` column. A multi-layer GeoPackage without ``--layer`` is an
error listing the layers.

The test runs the ``geoflash`` command, found as test_osm_import finds it.
"""

import subprocess

import geopandas as gpd
import numpy as np
import pytest
import shapely
from shapely.geometry import LineString, MultiLineString, MultiPoint, MultiPolygon, Point, Polygon

from test_osm_import import geoflash_bin


def geometries(rng, n):
    """n geometries of each type, with random (not round) coordinates."""
    out = {k: [] for k in ("point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon")}
    for _ in range(n):
        x, y = rng.uniform(-170, 170), rng.uniform(-80, 80)
        s = rng.uniform(1e-6, 0.5)
        box = [(x, y), (x + s, y), (x + s, y + s), (x, y + s), (x, y)]
        hole = [(x + s / 4, y + s / 4), (x + s / 2, y + s / 4), (x + s / 2, y + s / 2), (x + s / 4, y + s / 4)]
        far = [(px + 1.0, py) for px, py in box]
        out["point"].append(Point(x, y))
        out["linestring"].append(LineString(rng.uniform(-1, 1, (int(rng.integers(2, 6)), 2)) + (x, y)))
        out["polygon"].append(Polygon(box, [hole] if rng.random() < 0.5 else []))
        out["multipoint"].append(MultiPoint(rng.uniform(-1, 1, (3, 2)) + (x, y)))
        out["multilinestring"].append(MultiLineString([box[:3], far[:2]]))
        out["multipolygon"].append(MultiPolygon([Polygon(box, [hole]), Polygon(far)]))
    return out


def frame(geoms, first_id):
    ids = np.arange(first_id, first_id + len(geoms), dtype=np.int64)
    return gpd.GeoDataFrame({"id": ids, "name": [f"o{i}" for i in ids]}, geometry=geoms)


def import_file(path, out, *extra):
    bin_ = geoflash_bin()
    assert bin_, "the geoflash command is not built (cargo build -p geoflash-cli)"
    return subprocess.run([bin_, "import", "--input", str(path), "--out", str(out), *extra], capture_output=True, text=True, timeout=300)


def assert_same(path, out, want, *extra):
    run = import_file(path, out, *extra)
    assert run.returncode == 0, run.stdout + run.stderr
    got = gpd.read_parquet(out)
    assert list(got["id"]) == list(want["id"])
    for i, a, b in zip(want["id"], shapely.to_wkb(want.geometry.values), shapely.to_wkb(got.geometry.values)):
        assert a == b, f"{path.name}: object {i}: {shapely.from_wkb(a)} != {shapely.from_wkb(b)}"


@pytest.fixture(scope="module")
def data():
    return geometries(np.random.default_rng(46), 200)


@pytest.mark.parametrize("codec", ["snappy", "zstd", "gzip", "brotli", "lz4", None])
def test_geoparquet_codecs(tmp_path, data, codec):
    every = frame([g for gs in data.values() for g in gs], 1)
    src = tmp_path / f"in-{codec}.parquet"
    every.to_parquet(src, compression=codec)
    assert_same(src, tmp_path / "out.parquet", every)


@pytest.mark.parametrize("kind", ["point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon"])
def test_geoparquet_geoarrow(tmp_path, data, kind):
    df = frame(data[kind], 1000)
    src = tmp_path / f"{kind}.parquet"
    df.to_parquet(src, geometry_encoding="geoarrow", compression="zstd")
    assert_same(src, tmp_path / "out.parquet", df)


@pytest.mark.parametrize("kind", ["point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon"])
def test_geoparquet_geoarrow_interleaved(tmp_path, data, kind):
    """Interleaved GeoArrow coordinates (one ``fixed_size_list<xy>[2]`` per
    vertex) from a real encoder: GeoPandas' ``to_arrow(geometry_encoding=
    "geoarrow", interleaved=True)`` (its ``to_parquet`` writes the separated
    layout, which the GeoParquet 1.1 specification asks for). pyarrow writes
    the table with the GeoParquet metadata (encoding named after the
    GeoArrow type, as GeoPandas names it). GDAL's Parquet driver
    (``GEOMETRY_ENCODING=GEOARROW_INTERLEAVED``) is not in pyogrio's wheel,
    and DuckDB writes WKB."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    df = frame(data[kind], 1000)
    table = pa.table(df.to_arrow(geometry_encoding="geoarrow", interleaved=True))
    field = table.schema.field("geometry")
    assert pa.types.is_fixed_size_list(_leaf_list(field.type)), field.type
    encoding = field.metadata[b"ARROW:extension:name"].decode().removeprefix("geoarrow.")
    geo = {
        "version": "1.1.0",
        "primary_column": "geometry",
        "columns": {"geometry": {"encoding": encoding, "geometry_types": [type(data[kind][0]).__name__]}},
    }
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"geo": json.dumps(geo).encode()})
    src = tmp_path / f"{kind}-interleaved.parquet"
    pq.write_table(table, src, compression="zstd")
    assert_same(src, tmp_path / "out.parquet", df)


def _leaf_list(t):
    """The innermost list type of a GeoArrow type (its vertices)."""
    import pyarrow as pa

    while pa.types.is_list(t) or pa.types.is_large_list(t):
        t = t.value_type
    return t


def test_geopackage_layers(tmp_path, data):
    src = tmp_path / "layers.gpkg"
    layers = {
        "buildings": frame(data["polygon"], 1),
        "roads": frame(data["linestring"], 1),
        "other": frame(data["multipoint"] + data["multilinestring"] + data["multipolygon"], 5000),
    }
    for name, df in layers.items():
        df.set_crs("EPSG:4326").to_file(src, layer=name, driver="GPKG", engine="pyogrio")
    for name, df in layers.items():
        assert_same(src, tmp_path / f"{name}.parquet", df, "--layer", name)
    run = import_file(src, tmp_path / "x.parquet")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "3 feature layers (buildings, other, roads)" in run.stderr and "--layer" in run.stderr
    # what GeoPandas reads back is what geoflash reads
    back = gpd.read_file(src, layer="other", engine="pyogrio")
    assert_same(src, tmp_path / "other2.parquet", back, "--layer", "other")
