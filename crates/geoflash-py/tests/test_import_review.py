"""Correctness review of ``geoflash import`` and ``geoflash build`` from
geometry files, against GDAL (pyogrio) as the independent reader.

Files are written by GDAL through pyogrio (GeoPackage, FlatGeobuf with and
without its spatial index, GeoJSON, Shapefile, CSV with a WKT column) and by
GeoPandas (GeoParquet in small row groups and pages, WKB and GeoArrow):
points, lines, polygons with holes, multi-geometries, geometry collections
where the format has them, 3D coordinates, measured (M, ZM) coordinates
(GeoPackage blobs written by hand, read by GDAL), coordinates of 1e150,
subnormals and -0.0, non-ASCII attribute and layer names, layers of mixed
geometry types, a GeoPackage of several layers. Each is imported to every
output format; what geoflash wrote must be what GDAL reads from the input:
the ids as documented (the ``id`` column, else the format's default), the
MBRs of the ``.csv`` output exactly, and the geometries (x and y) bit for bit
(equal WKB once GDAL's single-part results and geoflash's multi-part ones of
Shapefile are put the same way). Outputs are imported again (round trip),
and ``build`` finds every object. Null and empty geometries are refused
naming the file and the record, as documented.

Shapefile review findings (each test fails without its fix): a record that
an edit rewrote at the end of the ``.shp`` (its ``.shx`` entry pointing
there) ended the reading, dropping the records after it; a ``.dbf`` record
marked deleted (GDAL leaves it and its shape out) was read as an object.

Prerequisites: geopandas, pyogrio, shapely, pandas, pyarrow and the
``geoflash`` command (as test_osm_import finds it); under ``CI=true`` a
missing one fails the test instead of skipping it.
"""

import importlib
import json
import os
import re
import sqlite3
import struct
import subprocess

import numpy as np
import pytest

from conftest import under_ci
from test_osm_import import geoflash_bin


def _missing(why):
    if under_ci():
        pytest.fail(f"CI={os.environ['CI']}: a test prerequisite is missing: {why}", pytrace=False)
    pytest.skip(why, allow_module_level=True)


def _need(name):
    try:
        return importlib.import_module(name)
    except ImportError as e:  # pragma: no cover - the venv has them
        _missing(f"{name} is not installed ({e}); scripts/python-test.sh installs it")


gpd = _need("geopandas")
pd = _need("pandas")
pyogrio = _need("pyogrio")
shapely = _need("shapely")
_need("pyarrow")
from shapely.geometry import (  # noqa: E402
    GeometryCollection,
    LineString,
    MultiLineString,
    MultiPoint,
    MultiPolygon,
    Point,
    Polygon,
)

OUTPUTS = ("csv", "parquet", "fgb", "geojson")
pytestmark = [
    pytest.mark.filterwarnings("ignore:.crs. was not provided"),
    # pyogrio reads measured geometries without their m (what the comparison wants)
    pytest.mark.filterwarnings("ignore:Measured .M. geometry types are not supported"),
]


@pytest.fixture(scope="module")
def bin_():
    b = geoflash_bin()
    if not b:
        _missing("the geoflash command is not built (cargo build -p geoflash-cli)")
    return b


def geoflash(bin_, *args):
    return subprocess.run([bin_, *map(str, args)], capture_output=True, text=True, timeout=120)


def imported(bin_, src, out, *extra):
    """Imports ``src`` to ``out``; the JSON summary."""
    run = geoflash(bin_, "import", "--input", src, "--out", out, "--json", *extra)
    assert run.returncode == 0, f"{src.name} -> {out.name}: {run.stderr}"
    return json.loads(run.stdout.strip().splitlines()[-1])


def norm(g):
    """x and y only, a multi-geometry of one part as that part (GDAL reads
    a one-part Shapefile polyline as a line, geoflash as a multi-line)."""
    g = shapely.force_2d(g)
    if g.geom_type.startswith("Multi") and len(g.geoms) == 1:
        return g.geoms[0]
    return g


def read_box_csv(path):
    """The ids and MBRs of a ``.csv`` output, numbers parsed by Python
    (pandas' parser does not take the 300-digit decimals of subnormals)."""
    df = pd.read_csv(path, dtype=str)
    ids = [int(v) for v in df["id"]]
    boxes = np.array([[float(v) for v in df[c]] for c in ("minx", "miny", "maxx", "maxy")]).T
    return ids, boxes.reshape(len(ids), 4)


def read_output(path):
    """The ids and geometries of a geometry output, read by GDAL (GeoPandas
    for GeoParquet)."""
    df = gpd.read_parquet(path) if path.suffix == ".parquet" else pyogrio.read_dataframe(path)
    return [int(v) for v in df["id"]], list(df.geometry.values)


def assert_imported_as(bin_, src, ids, geoms, tmp, *extra, outputs=OUTPUTS):
    """``src`` imported to every output holds ``ids`` with ``geoms`` (what
    GDAL reads from ``src``), in that order; a geometry collection is refused
    by the FlatGeobuf output, as documented."""
    collections = any(g.geom_type == "GeometryCollection" for g in geoms)
    want_boxes = shapely.bounds(np.array([shapely.force_2d(g) for g in geoms], dtype=object))
    for ext in outputs:
        out = tmp / f"{src.stem}-{len(extra)}.out.{ext}"
        if ext == "fgb" and collections:
            run = geoflash(bin_, "import", "--input", src, "--out", out, *extra)
            assert run.returncode == 2 and "geometry collection" in run.stderr, run.stderr
            continue
        summary = imported(bin_, src, out, *extra)
        assert summary["count"] == len(ids) and summary["skipped"] == 0, (src.name, ext, summary)
        if ext == "csv":
            got_ids, boxes = read_box_csv(out)
            assert got_ids == list(ids), (src.name, ext)
            bad = np.nonzero(~(boxes == want_boxes).all(axis=1))[0]
            assert not len(bad), f"{src.name} -> csv: object {ids[bad[0]]}: MBR {boxes[bad[0]]} != {want_boxes[bad[0]]}"
            continue
        got_ids, got = read_output(out)
        assert got_ids == list(ids), (src.name, ext)
        for i, a, b in zip(ids, geoms, got):
            a, b = norm(a), norm(b)
            assert shapely.to_wkb(a) == shapely.to_wkb(b), f"{src.name} -> {ext}: object {i}: {a} != {b}"


def ring(x, y, s, clockwise=False):
    r = [(x, y), (x + s, y), (x + s, y + s), (x, y + s), (x, y)]
    return r[::-1] if clockwise else r


def mixed(rng, n):
    """n geometries of the six simple types in turn, random coordinates up
    to 1e6, polygons with holes."""
    out = []
    for i in range(n):
        x, y = rng.uniform(-1e6, 1e6, 2)
        s = rng.uniform(1e-7, 50)
        k = i % 6
        if k == 0:
            out.append(Point(x, y))
        elif k == 1:
            out.append(LineString(rng.uniform(-s, s, (int(rng.integers(2, 7)), 2)) + (x, y)))
        elif k == 2:
            out.append(Polygon(ring(x, y, s), [ring(x + s / 4, y + s / 4, s / 4, True)]))
        elif k == 3:
            out.append(MultiPoint(rng.uniform(-s, s, (3, 2)) + (x, y)))
        elif k == 4:
            out.append(MultiLineString([rng.uniform(-s, s, (2, 2)) + (x, y), rng.uniform(-s, s, (3, 2)) + (x, y)]))
        else:
            out.append(MultiPolygon([Polygon(ring(x, y, s), [ring(x + s / 4, y + s / 4, s / 4, True)]),
                                     Polygon(ring(x + 2 * s, y, s))]))
    return out


EXTREMES = [
    Point(-1e150, 1e150),
    Point(5e-324, -5e-324),
    Point(-0.0, 0.0),
    LineString([(1e-300, -1e-300), (-123456789.123456789, 987654321.987654321)]),
    Point(0.1 + 0.2, 1 / 3),
    Polygon([(-179.99999999, -89.9999999), (179.9999999, -89.99999), (0, 89.99999999), (-179.99999999, -89.9999999)]),
]
COLLECTION = GeometryCollection([Point(100, 100), LineString([(0, 0), (-7, 8)]), Polygon(ring(0, 0, 1))])


@pytest.fixture(scope="module")
def frame():
    """The mixed data set: every simple type, the extremes, a 3D polygon
    with a hole and a collection; ids a permutation, non-ASCII columns."""
    rng = np.random.default_rng(2024)
    geoms = mixed(rng, 90) + EXTREMES + [
        shapely.from_wkt("POLYGON Z ((0 0 1, 10 0 1, 10 10 2, 0 10 1, 0 0 1), (2 2 5, 2 4 5, 4 4 5, 2 2 5))"),
        COLLECTION,
    ]
    ids = rng.permutation(len(geoms)).astype(np.int64) * 7 + 3
    return gpd.GeoDataFrame({"id": ids, "名前": [f"ä{i}" for i in ids], "größe": np.arange(len(ids)) / 3},
                            geometry=geoms)


@pytest.mark.parametrize("driver,ext,options", [
    ("GPKG", "gpkg", {}),
    ("FlatGeobuf", "fgb", {}),
    ("FlatGeobuf", "fgb", {"SPATIAL_INDEX": "NO"}),
    ("GeoJSON", "geojson", {}),
    ("CSV", "csv", {"GEOMETRY": "AS_WKT"}),
], ids=["gpkg", "fgb-indexed", "fgb", "geojson", "csv-wkt"])
def test_gdal_files_import_as_gdal_reads_them(bin_, tmp_path, frame, driver, ext, options):
    """A mixed layer written by GDAL: geoflash's objects are GDAL's, in
    GDAL's order (a FlatGeobuf with its spatial index holds them sorted)."""
    src = tmp_path / f"mixed.{ext}"
    if driver == "FlatGeobuf":
        # its writer takes no mix of 2D and 3D: every geometry 3D (z 0 where it had none)
        frame = frame.set_geometry(shapely.force_3d(frame.geometry.values, 0.0))
    frame.to_file(src, driver=driver, engine="pyogrio", **options)
    back = pyogrio.read_dataframe(src)
    assert len(back) == len(frame)
    assert_imported_as(bin_, src, [int(v) for v in back["id"]], list(back.geometry.values), tmp_path)
    # without an id column: the feature id GDAL gives (GeoPackage), else positions
    if ext in ("gpkg", "fgb"):
        src = tmp_path / f"noid.{ext}"
        frame.drop(columns=["id"]).to_file(src, driver=driver, engine="pyogrio", **options)
        back = pyogrio.read_dataframe(src, fid_as_index=True)
        want = list(back.index) if ext == "gpkg" else list(range(len(back)))
        assert_imported_as(bin_, src, want, list(back.geometry.values), tmp_path, outputs=("csv", "parquet"))


@pytest.mark.parametrize("encoding", ["WKB", "geoarrow"])
def test_geoparquet_row_groups_and_pages(bin_, tmp_path, frame, encoding):
    """GeoParquet in row groups of 7 rows and pages of 256 bytes (WKB with
    every type and the extremes; GeoArrow one type per file)."""
    if encoding == "WKB":
        src = tmp_path / "rg.parquet"
        frame.to_parquet(src, row_group_size=7, data_page_size=256, compression="zstd")
        assert_imported_as(bin_, src, list(frame["id"]), list(frame.geometry.values), tmp_path)
        return
    for k, kind in enumerate(["point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon"]):
        part = frame.iloc[k:90:6].reset_index(drop=True)
        src = tmp_path / f"{kind}.parquet"
        part.to_parquet(src, geometry_encoding="geoarrow", row_group_size=4, data_page_size=128)
        assert_imported_as(bin_, src, list(part["id"]), list(part.geometry.values), tmp_path,
                           outputs=("csv", "parquet"))


@pytest.mark.parametrize("kind", ["point", "line", "polygon", "multipoint", "multiline", "multipolygon", "pointz",
                                  "polygonz"])
def test_shapefiles_import_as_gdal_reads_them(bin_, tmp_path, frame, kind):
    """One Shapefile per geometry type (GDAL writes one-part lines and
    polygons as such, reads multi-part ones as multi-geometries); ids from
    the ``id`` field, else the record numbers from 1."""
    k = {"point": 0, "line": 1, "polygon": 2, "multipoint": 3, "multiline": 4, "multipolygon": 5}
    if kind.endswith("z"):
        part = frame.iloc[k[kind[:-1]]:90:6].copy()
        part["geometry"] = shapely.force_3d(part.geometry.values, 4.5)
    else:
        part = frame.iloc[k[kind]:90:6]
    src = tmp_path / f"{kind}.shp"
    part.to_file(src, engine="pyogrio")
    back = pyogrio.read_dataframe(src)
    assert_imported_as(bin_, src, [int(v) for v in back["id"]], list(back.geometry.values), tmp_path)
    src = tmp_path / f"{kind}-noid.shp"
    part.drop(columns=["id"]).to_file(src, engine="pyogrio")
    back = pyogrio.read_dataframe(src)
    assert_imported_as(bin_, src, list(range(1, len(back) + 1)), list(back.geometry.values), tmp_path,
                       outputs=("csv", "parquet"))


def test_measured_geopackage_geometries(bin_, tmp_path):
    """M and ZM geometries (GeoPackage blobs of ISO WKB, which pyogrio
    cannot write): x and y as GDAL reads them, M and Z dropped."""
    wkts = ["POINT M (1.5 2.5 3.5)", "LINESTRING M (0 0 1, 1.25 -1 2, 3 3 3)",
            "POLYGON M ((0 0 1, 10 0 1, 10 10 1, 0 10 1, 0 0 1), (2 2 5, 2 4 5, 4 4 5, 2 2 5))",
            "MULTIPOINT M ((1 1 1), (2 2 2))", "MULTILINESTRING M ((0 0 1, 1 1 1), (4 4 4, -5 5 5))",
            "MULTIPOLYGON M (((0 0 0, 1 0 0, 1 1 0, 0 0 0)), ((5 5 5, 6 5 5, 6 6 5, 5 5 5)))",
            "GEOMETRYCOLLECTION M (POINT M (1 2 3), LINESTRING M (0 0 1, 5 5 2))"]
    for dims in ("M", "ZM"):
        # ZM: a z of 9 before each m
        texts = wkts if dims == "M" else [
            re.sub(r"(-?[\d.]+) (-?[\d.]+) (-?[\d.]+)", r"\1 \2 9 \3", w.replace(" M ", " ZM ")) for w in wkts]
        for n, g in enumerate(shapely.from_wkt(texts)):
            # one geometry type per layer (GDAL has no type for a mixed measured layer)
            assert shapely.has_m(g)
            src = tmp_path / f"measured-{dims}-{n}.gpkg"
            flat = gpd.GeoDataFrame({"id": [70 + n]}, geometry=[shapely.force_2d(g)])
            flat.to_file(src, driver="GPKG", layer="t", engine="pyogrio", SPATIAL_INDEX="NO")
            blob = b"GP\x00\x01" + struct.pack("<i", 0) + shapely.to_wkb(g, flavor="iso", output_dimension=4)
            con = sqlite3.connect(src)
            con.execute("UPDATE t SET geom = ?", (blob,))
            con.execute("UPDATE gpkg_geometry_columns SET m = 1, z = ?", (int(dims == "ZM"),))
            con.commit()
            con.close()
            back = pyogrio.read_dataframe(src)
            assert shapely.get_coordinates(back.geometry.values[0]).tobytes() == \
                shapely.get_coordinates(g).tobytes(), (dims, n)
            assert_imported_as(bin_, src, [70 + n], list(back.geometry.values), tmp_path,
                               outputs=("csv", "parquet", "geojson"))


def test_geopackage_layers_with_non_ascii_names(bin_, tmp_path, frame):
    src = tmp_path / "layers.gpkg"
    layers = {"straßen": frame.iloc[1:90:6], "Häuser": frame.iloc[2:90:6], "gemischt 混合": frame.iloc[:40]}
    for name, part in layers.items():
        part.to_file(src, driver="GPKG", layer=name, engine="pyogrio")
    pyogrio.write_dataframe(pd.DataFrame({"a": [1, 2]}), src, layer="attributes only", driver="GPKG")
    run = geoflash(bin_, "import", "--input", src, "--out", tmp_path / "x.csv")
    assert run.returncode == 2 and "3 feature layers" in run.stderr and "--layer" in run.stderr, run.stderr
    for name in layers:
        back = pyogrio.read_dataframe(src, layer=name)
        assert_imported_as(bin_, src, [int(v) for v in back["id"]], list(back.geometry.values), tmp_path,
                           "--layer", name, outputs=("csv", "parquet"))


@pytest.mark.parametrize("driver,ext", [("GPKG", "gpkg"), ("FlatGeobuf", "fgb"), ("GeoJSON", "geojson"),
                                        ("ESRI Shapefile", "shp"), ("Parquet", "parquet")])
def test_null_and_empty_geometries_are_refused_naming_the_record(bin_, tmp_path, driver, ext):
    """As documented: a record without geometry, or with an empty one, is an
    error naming the file and the record (exit code 2), never a dropped
    record."""
    write = (lambda df, p: df.to_parquet(p)) if ext == "parquet" else (
        lambda df, p: df.to_file(p, driver=driver, engine="pyogrio", **({"SPATIAL_INDEX": "NO"} if ext == "fgb" else {})))
    cases = [None, Point(), LineString(), Polygon(), MultiPolygon()]
    if ext != "shp":
        cases.append(GeometryCollection())
    for n, g in enumerate(cases):
        df = gpd.GeoDataFrame({"id": np.array([5, 6, 7], dtype=np.int64)}, geometry=[Point(0, 0), g, Point(2, 2)])
        src = tmp_path / f"hole{n}.{ext}"
        write(df, src)
        run = geoflash(bin_, "import", "--input", src, "--out", tmp_path / "o.csv")
        assert run.returncode == 2, (g, run.stdout, run.stderr)
        record = "record 2" if ext == "shp" else "row 1" if ext == "parquet" else "feature 1"
        assert src.name in run.stderr and record in run.stderr and "id 6" in run.stderr, (g, run.stderr)


def test_round_trips_and_build(bin_, tmp_path, frame):
    """GeoPackage -> each output (Hilbert order) -> GeoParquet: the same
    objects; ``build`` from each finds every id."""
    simple = frame[frame.geometry.geom_type != "GeometryCollection"]
    src = tmp_path / "rt.gpkg"
    simple.to_file(src, driver="GPKG", engine="pyogrio")
    back = pyogrio.read_dataframe(src).set_index("id")
    for ext in ("geojson", "fgb", "parquet"):
        mid = tmp_path / f"rt.{ext}"
        imported(bin_, src, mid, "--order", "hilbert")
        last = tmp_path / f"rt-{ext}.parquet"
        imported(bin_, mid, last)
        got_ids, got = read_output(last)
        assert sorted(got_ids) == sorted(back.index)
        for i, g in zip(got_ids, got):
            assert shapely.to_wkb(norm(back.geometry[i])) == shapely.to_wkb(norm(g)), (ext, i)
        idx = tmp_path / f"idx-{ext}"
        run = geoflash(bin_, "build", "--input", mid, "--index", idx, "--device", "file?direct=false", "--bulk", "str")
        assert run.returncode == 0, run.stderr
        run = geoflash(bin_, "query", "--index", idx, "--window=-1e150,-1e150,1e150,1e150", "--ids", "--json")
        assert run.returncode == 0, run.stderr
        found = json.loads(run.stdout.strip().splitlines()[-1])["windows"][0]["ids"]
        assert sorted(found) == sorted(back.index), ext


def _points_shapefile(path, with_id):
    cols = {"id": np.array([10, 20, 30], dtype=np.int64)} if with_id else {"name": ["a", "b", "c"]}
    gpd.GeoDataFrame(cols, geometry=[Point(1, 1), Point(2, 2), Point(3, 3)]).to_file(path, engine="pyogrio")


@pytest.mark.parametrize("with_id", [False, True])
def test_shapefile_record_rewritten_at_the_end_is_read_in_its_place(bin_, tmp_path, with_id):
    """Review finding: record 2 rewritten at the end of the ``.shp`` (its
    ``.shx`` entry pointing there, as an edit that grows a shape leaves it)
    ended the reading: record 3 was lost (silently without an id field)."""
    src = tmp_path / "moved.shp"
    _points_shapefile(src, with_id)
    shp, shx = bytearray(src.read_bytes()), bytearray(src.with_suffix(".shx").read_bytes())
    offset, length = struct.unpack(">ii", shx[108:116])
    record = bytearray(shp[offset * 2:offset * 2 + 8 + length * 2])
    record[12:28] = struct.pack("<dd", 2.5, 7.5)
    shx[108:112] = struct.pack(">i", len(shp) // 2)
    shp += record
    shp[24:28] = struct.pack(">i", len(shp) // 2)
    src.write_bytes(bytes(shp))
    src.with_suffix(".shx").write_bytes(bytes(shx))
    back = pyogrio.read_dataframe(src)
    assert [g.wkt for g in back.geometry] == ["POINT (1 1)", "POINT (2.5 7.5)", "POINT (3 3)"]
    ids = [10, 20, 30] if with_id else [1, 2, 3]
    assert_imported_as(bin_, src, ids, list(back.geometry.values), tmp_path, outputs=("csv", "parquet"))


@pytest.mark.parametrize("with_id", [False, True])
def test_shapefile_deleted_dbf_record_is_refused(bin_, tmp_path, with_id):
    """Review finding: a ``.dbf`` record marked deleted, which GDAL leaves
    out with its shape, was read as an object (without an id field) or
    paired the shapes with the next records' ids; it is refused naming the
    ``.dbf`` and the record."""
    src = tmp_path / "deleted.shp"
    _points_shapefile(src, with_id)
    dbf = bytearray(src.with_suffix(".dbf").read_bytes())
    header, size = struct.unpack("<HH", dbf[8:12])
    dbf[header + size] = ord("*")
    src.with_suffix(".dbf").write_bytes(bytes(dbf))
    assert len(pyogrio.read_dataframe(src)) == 2
    run = geoflash(bin_, "import", "--input", src, "--out", tmp_path / "o.csv")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "deleted.dbf: record 2 is marked deleted" in run.stderr, run.stderr

def test_osm_pbf_coordinates_are_those_of_osmium_and_gdal(bin_, tmp_path):
    """Review finding: OSM node coordinates were 1e-9 × nanodegrees (the
    ``osmpbf`` crate's ``lon()``), one unit in the last place away from the
    coordinate for many nodes (10.002000200000001 for 10.0020002); osmium,
    GDAL and pyrosm give the double nearest to the decimal value. pyosmium
    writes open ``building`` ways (lines, object id 2 × way id), whose
    coordinates must be osmium's and GDAL's bit for bit."""
    osmium = _need("osmium")
    rng = np.random.default_rng(7)
    src = tmp_path / "coords.osm.pbf"
    w = osmium.SimpleWriter(str(src))
    lons = rng.integers(-1_800_000_000, 1_800_000_001, 300)
    lats = rng.integers(-900_000_000, 900_000_001, 300)
    for i, (x, y) in enumerate(zip(lons, lats)):
        w.add_node(osmium.osm.mutable.Node(id=i + 1, location=(x / 1e7, y / 1e7), version=1))
    for k in range(100):
        w.add_way(osmium.osm.mutable.Way(id=k + 1, nodes=[3 * k + 1, 3 * k + 2, 3 * k + 3],
                                         tags={"building": "yes"}, version=1))
    w.close()

    class Locations(osmium.SimpleHandler):
        def __init__(self):
            super().__init__()
            self.at = {}

        def node(self, n):
            self.at[n.id] = (n.location.lon, n.location.lat)

    osm = Locations()
    osm.apply_file(str(src))
    gdal = pyogrio.read_dataframe(src, layer="lines")
    gdal = dict(zip((int(v) for v in gdal["osm_id"]), gdal.geometry.values))
    out = tmp_path / "coords.parquet"
    assert imported(bin_, src, out)["count"] == 100
    got = gpd.read_parquet(out)
    for oid, g in zip(got["id"], got.geometry.values):
        way = int(oid) // 2
        want = np.array([osm.at[3 * (way - 1) + j] for j in (1, 2, 3)])
        assert shapely.get_coordinates(g).tobytes() == want.tobytes(), (way, shapely.get_coordinates(g), want)
        assert shapely.get_coordinates(gdal[way]).tobytes() == want.tobytes(), way
