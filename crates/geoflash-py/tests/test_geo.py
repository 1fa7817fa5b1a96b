"""shapely 2 and GeoPandas interop: from_geoseries / from_geodataframe and
exact-geometry queries, compared with shapely's STRtree on the same data."""

import numpy as np
import pytest

geopandas = pytest.importorskip("geopandas")
shapely = pytest.importorskip("shapely")

import geoflash  # noqa: E402


def random_geometries(rng, n):
    """Thin triangles (whose MBRs mostly hold no geometry), points, lines,
    buffered discs, and a few missing and empty geometries."""
    out = []
    for i in range(n):
        x, y = rng.uniform(0, 100, 2)
        s = rng.uniform(0.5, 6)
        r = i % 5
        if r == 0:
            out.append(shapely.Polygon([(x, y), (x + s, y + s), (x + s, y + s * 0.8)]))
        elif r == 1:
            out.append(shapely.Point(x, y))
        elif r == 2:
            out.append(shapely.LineString([(x, y), (x + s, y - s)]))
        elif r == 3:
            out.append(shapely.Point(x, y).buffer(s / 2))
        else:
            out.append(shapely.box(x, y, x + s, y + s))
    out[3] = None
    out[7] = shapely.Polygon()
    return out


def query_geometries(rng, n):
    qs = []
    for _ in range(n):
        x, y = rng.uniform(0, 100, 2)
        s = rng.uniform(1, 25)
        qs.append(shapely.Polygon([(x, y), (x + s, y), (x + s / 2, y + s)]))
        qs.append(shapely.Point(x, y))
        qs.append(shapely.box(x, y, x + s, y + s / 3))
    return qs


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "directory"])
def test_query_matches_shapely_strtree(on_disk, tmp_path):
    rng = np.random.default_rng(1)
    geoms = random_geometries(rng, 600)
    gdf = geopandas.GeoDataFrame({"name": [f"g{i}" for i in range(len(geoms))]}, geometry=geoms)
    path = str(tmp_path / "geo") if on_disk else None
    idx = geoflash.Index.from_geodataframe(gdf, path, page_size=512)
    assert len(idx) == len(geoms) - 2  # the missing and the empty one are left out
    tree = shapely.STRtree(np.asarray(geoms, dtype=object))
    qs = query_geometries(np.random.default_rng(2), 25)
    for q in qs:
        for pred in ("intersects", "contains", "within", None):
            got = idx.query(q, predicate=pred)
            want = np.sort(tree.query(q, predicate=pred))
            assert got.tolist() == want.tolist(), (q.wkt, pred)
    # results index the frame by position
    hits = idx.query(qs[0])
    assert gdf.iloc[hits]["name"].tolist() == [f"g{i}" for i in hits]
    # an array of geometries gives (input, id) pairs, as STRtree does
    pairs = idx.query(np.asarray(qs[:9], dtype=object), predicate="intersects")
    want = tree.query(np.asarray(qs[:9], dtype=object), predicate="intersects")
    assert sorted(map(tuple, pairs.T.tolist())) == sorted(map(tuple, want.T.tolist()))
    if on_disk:
        idx.close()
        # the geometries are in the directory's object heap: a reopened index refines too
        with geoflash.Index(path) as again:
            for q in qs[:15]:
                got = again.query(q, predicate="intersects")
                assert got.tolist() == np.sort(tree.query(q, predicate="intersects")).tolist()


def test_from_geoseries_counts_entries_without_geometry_as_their_box(tmp_path):
    gs = geopandas.GeoSeries([shapely.Polygon([(0, 0), (10, 10), (10, 9)])])
    idx = geoflash.Index.from_geoseries(gs, str(tmp_path / "g"))
    corner = shapely.box(0, 8, 2, 10)  # inside the triangle's MBR, outside the triangle
    assert idx.query(corner, predicate=None).tolist() == [0]
    assert idx.query(corner).tolist() == []
    idx.insert(5, (0, 8, 1, 9))  # no stored geometry: its box is its geometry
    assert idx.query(corner).tolist() == [5]
    assert idx.query(shapely.Polygon()).tolist() == []
    with pytest.raises(ValueError, match="predicate"):
        idx.query(corner, predicate="bogus")
    with pytest.raises(ValueError, match="shapely geometry"):
        idx.query(["POINT (1 1)"])
