"""geoflash.Property against rtree.index.Property (the oracle, when the
rtree package is installed): what each accepts and refuses when a setting
is set and when an index is created with it, and the Property that
describes an index creating that kind of index again.

Found by the review of property.py: libspatialindex checks the reinsert
factor whatever the variant, the split distribution factor and the
near-minimum-overlap factor at index creation (geoflash's documentation
says those are "checked as rtree checks them" but they were not); strings
were read as numbers for the real-valued settings, and anything at all
for the text ones, which rtree refuses; and the Property describing an
R-tree (linear or quadratic split) index could not create an index.
"""

import itertools
import math

import numpy as np
import pytest

import geoflash
from geoflash import index as gindex
from geoflash.exceptions import RTreeError

rindex = pytest.importorskip("rtree.index")


def created(module, kw):
    """'ok' when an index in memory is created with Property(**kw) and takes
    an insert, else 'refused' (any exception)."""
    try:
        idx = module.Index(properties=module.Property(**kw))
        idx.insert(1, (0.0, 0.0, 1.0, 1.0))
        return "ok"
    except Exception:  # noqa: BLE001 - either library's error for a bad setting
        return "refused"


# Settings that libspatialindex checks when an index is created.
CREATION_CASES = (
    [dict(variant=v, fill_factor=f, reinsert_factor=r)
     for v, f, r in itertools.product(
         (gindex.RT_Linear, gindex.RT_Quadratic, gindex.RT_Star),
         (0.1, 0.3, 0.5),
         (0.0, 0.001, 0.3, 0.99, 1.0, 1.5, -0.2),
     )]
    + [dict(split_distribution_factor=s) for s in (0.0, 1e-9, 0.4, 0.6, 0.999, 1.0, -1.0, 7.0)]
    + [dict(near_minimum_overlap_factor=n, leaf_capacity=lc, index_capacity=ic)
       for n, lc, ic in ((1, 10, 10), (10, 10, 10), (11, 10, 10), (11, 12, 10), (11, 10, 12),
                         (32, 100, 100), (100, 100, 100), (101, 100, 100), (1000, 100, 100))]
)


@pytest.mark.parametrize("kw", CREATION_CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_index_creation_accepts_and_refuses_what_rtree_does(kw):
    assert created(geoflash.index, kw) == created(rindex, kw), kw


def test_refused_settings_raise_rtree_error_naming_the_setting():
    for kw, name in (
        (dict(variant=gindex.RT_Linear, fill_factor=0.4, reinsert_factor=1.0), "reinsert_factor"),
        (dict(variant=gindex.RT_Quadratic, fill_factor=0.4, reinsert_factor=0.0), "reinsert_factor"),
        (dict(split_distribution_factor=1.0), "split_distribution_factor"),
        (dict(near_minimum_overlap_factor=101), "near_minimum_overlap_factor"),
    ):
        with pytest.raises(RTreeError, match=name):
            geoflash.Index(properties=geoflash.Property(**kw))


def test_property_setters_refuse_what_rtree_refuses():
    """A string is not a number (rtree refuses "0.5" for fill_factor), and
    the text settings take str or bytes only; every refusal is a
    TypeError, as geoflash's integer settings already raise, and the
    setting keeps its value."""
    reals = ("fill_factor", "reinsert_factor", "split_distribution_factor", "tpr_horizon")
    texts = ("filename", "dat_extension", "idx_extension")
    for name, value in itertools.product(reals, ("0.5", b"0.5", "abc", None, 1j, [0.5])):
        if value is None:
            continue  # None is "not set" in initialize_from_dict, and refused by both setters
        for module in (rindex, gindex):
            p = module.Property()
            before = getattr(p, name)
            with pytest.raises(Exception):
                setattr(p, name, value)
            assert getattr(p, name) == before
        p = gindex.Property()
        with pytest.raises(TypeError, match=name):
            setattr(p, name, value)
    for name, value in itertools.product(texts, (5, 1.5, True, ["a"])):
        for module in (rindex, gindex):
            with pytest.raises(Exception):
                setattr(module.Property(), name, value)
        with pytest.raises(TypeError, match=name):
            setattr(gindex.Property(), name, value)
    # what both accept reads back the same
    for name, value in itertools.product(reals, (0.25, 3, True, np.float32(0.5), np.int64(2))):
        a, b = rindex.Property(), gindex.Property()
        setattr(a, name, value)
        setattr(b, name, value)
        assert math.isclose(float(getattr(a, name)), float(getattr(b, name))), (name, value)
    for name, value in itertools.product(texts, ("x", b"y", "")):
        a, b = rindex.Property(), gindex.Property()
        setattr(a, name, value)
        setattr(b, name, value)
        assert getattr(a, name) == getattr(b, name), (name, value)


@pytest.mark.parametrize("options", [
    dict(),
    dict(kind="rtree"),
    dict(kind="rtree", split="linear"),
    dict(kind="rtree", split="quadratic", page_size=512),
    dict(kind="rstar", max_entries=10, min_entries=5),
    dict(kind="rtree", max_entries=9, min_entries=4),
    dict(properties=dict(variant=gindex.RT_Linear, fill_factor=0.5, leaf_capacity=31, index_capacity=31)),
])
def test_the_property_describing_an_index_creates_one_again(options, tmp_path):
    """``Index(properties=idx.properties)`` works, as in rtree, and creates
    the same tree kind and capacity (an R-tree whose minimum fill is above
    half its capacity, as the engine's default ⌈M/2⌉ of an odd M, is
    described with rtree's largest fill for its variant, 0.5)."""
    if "properties" in options:
        options = dict(properties=gindex.Property(**options["properties"]))
    for path in (None, str(tmp_path / "a")):
        first = geoflash.Index(path, **options) if path else geoflash.Index(**options)
        first.insert(1, (0, 0, 1, 1))
        p = first.properties
        kind = first.manifest["kind"]
        again = geoflash.Index(properties=p)
        assert again.manifest["kind"] == first.manifest["kind"]
        assert again.manifest["index"]["max_entries"] == first.manifest["index"]["max_entries"]
        assert again.manifest["index"].get("split") == first.manifest["index"].get("split")
        m, big_m = again.manifest["index"]["min_entries"], again.manifest["index"]["max_entries"]
        assert 2 <= m <= (big_m + 1) // 2
        # and so does the one of the directory opened again
        if path:
            first.close()
            reopened = geoflash.Index(path, readonly=True)
            assert geoflash.Index(properties=reopened.properties).manifest["kind"] == kind
            reopened.close()
        # rtree takes the same Property values
        values = {k: v for k, v in p.as_dict().items() if k not in ("filename", "index_id", "storage")}
        rindex.Index(properties=rindex.Property(**values))
