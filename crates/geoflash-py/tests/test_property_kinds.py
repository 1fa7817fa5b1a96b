"""Three defects of the Python package found by a review, each with the
test that failed before its fix:

1. ``update(id, box)`` on an entry that stores an exact geometry
   (``from_geoseries``) was refused by an index in a directory (its box is
   the geometry's bounds: the object heap keeps the geometry by the
   entry) but accepted in memory, where the entry then silently lost its
   geometry; and in memory an entry deleted and inserted again with its
   geometry's box got the geometry back, which a directory's never does.
   Both modes now refuse the update with the same ``RTreeError`` naming
   the id, and an inserted entry counts as its box in both.
2. ``Property`` could not describe a Hilbert R-tree, a FOR-tree, an
   xBR+-tree or a grid file (nor an R-tree's exponential split), so
   ``Index(properties=idx.properties)`` silently created an R-tree; nor
   did ``idx.properties`` follow a ``kind=`` keyword or an index opened
   in its directory. ``Property.kind`` and ``Property.kind_options`` now
   carry the kind and its settings.
3. A ``reinsert_factor`` below 0.005 became 0 % (forced reinsertion off),
   and the Property of that index (``reinsert_factor`` 0.0) was refused
   when used again; factors now count at least 1 %, and the round trip
   creates the same index.
"""

import pickle

import numpy as np
import pytest

import geoflash
from geoflash import index as gindex
from geoflash.exceptions import RTreeError

shapely = pytest.importorskip("shapely")

#: A triangle whose box (0, 0, 4, 4) holds points the triangle does not.
TRIANGLE = shapely.Polygon([(0, 0), (4, 0), (0, 4)])
HYBRID = "hybrid:fast=(mem:);slow=(mem:)"
#: The hybrid device of an index in a directory (one of mem: tiers lives
#: only in its process).
HYBRID_FILES = "hybrid:fast=(file?direct=false);slow=(file?direct=false)"


def geometries():
    return np.array(
        [shapely.Point(0, 0), TRIANGLE, None, shapely.LineString([(5, 5), (6, 6)])],
        dtype=object,
    )


def both_modes(tmp_path):
    """An index of geometries() in memory, then one in a directory."""
    yield "memory", geoflash.Index.from_geoseries(geometries())
    yield "directory", geoflash.Index.from_geoseries(geometries(), str(tmp_path / "d"))


# ------------------------------------------------ 1. update of a geometry


def test_update_refuses_an_entry_with_a_geometry_in_memory_as_in_a_directory(tmp_path):
    messages = {}
    for mode, idx in both_modes(tmp_path):
        with pytest.raises(RTreeError) as e:
            idx.update(1, (10, 10, 11, 11))
        messages[mode] = str(e.value)
        assert "id 1" in str(e.value) and "exact geometry" in str(e.value), mode
        # nothing moved: the triangle is where it was, and still refined as one
        assert sorted(idx.intersection((9, 9, 12, 12))) == [], mode
        assert idx.query(shapely.box(3, 3, 3.5, 3.5)).tolist() == [], mode
        assert idx.query(shapely.box(0.5, 0.5, 1, 1)).tolist() == [1], mode
        idx.close()
    assert messages["memory"] == messages["directory"]


def test_update_batch_refuses_the_row_of_an_entry_with_a_geometry_in_both_modes(tmp_path):
    """The rows before it applied, the rest not, the error naming the row
    (as for any row update_batch refuses)."""
    messages = {}
    for mode, idx in both_modes(tmp_path):
        idx.insert(7, (50, 50, 51, 51))
        idx.insert(8, (60, 60, 61, 61))
        ids = np.array([7, 3, 8])
        boxes = np.array([[70, 70, 71, 71], [80, 80, 81, 81], [90, 90, 91, 91]], dtype=float)
        with pytest.raises(RTreeError) as e:
            idx.update_batch(ids, boxes)
        messages[mode] = str(e.value)
        assert "row 1: id 3" in str(e.value), mode
        assert sorted(idx.intersection((69, 69, 72, 72))) == [7], mode  # applied
        assert sorted(idx.intersection((5, 5, 6, 6))) == [3], mode  # refused
        assert sorted(idx.intersection((60, 60, 61, 61))) == [8], mode  # not reached
        idx.close()
    assert messages["memory"] == messages["directory"]


def test_an_entry_inserted_again_counts_as_its_box_and_moves_in_both_modes(tmp_path):
    """Deleted with its geometry's box and inserted again with the same
    box, the entry has no geometry (a directory's object heap dropped it
    with the delete): a window inside the box but outside the triangle
    finds it, and update moves it."""
    for mode, idx in both_modes(tmp_path):
        idx.delete(1, (0, 0, 4, 4))
        assert len(idx) == 2, mode
        idx.insert(1, (0, 0, 4, 4))
        assert idx.query(shapely.box(3, 3, 3.5, 3.5)).tolist() == [1], mode
        idx.update(1, (20, 20, 21, 21))
        assert sorted(idx.intersection((19, 19, 22, 22))) == [1], mode
        assert idx.query(shapely.box(20.5, 20.5, 22, 22)).tolist() == [1], mode
        # the entries that kept their geometry are still refused
        with pytest.raises(RTreeError, match="id 3"):
            idx.update(3, (30, 30, 31, 31))
        idx.close()


def test_a_pickled_index_in_memory_keeps_which_entries_have_a_geometry():
    idx = geoflash.Index.from_geoseries(geometries())
    idx.delete(1, (0, 0, 4, 4))
    idx.insert(1, (0, 0, 4, 4))
    copy = pickle.loads(pickle.dumps(idx))
    with pytest.raises(RTreeError, match="id 0"):
        copy.update(0, (1, 1, 1, 1))
    assert copy.query(shapely.box(3, 3, 3.5, 3.5)).tolist() == [1]
    copy.update(1, (20, 20, 21, 21))
    assert sorted(copy.intersection((19, 19, 22, 22))) == [1]


# ------------------------------------------- 2. Property of every kind


def tree_of(idx):
    """What a manifest says of the tree: kind, page size and parameters."""
    m = idx.manifest
    return m["kind"], m["page_size"], m["index"]


KIND_CASES = [
    dict(kind="hilbert", hilbert_domain=(0, 0, 100, 100)),
    dict(kind="hilbert", hilbert_domain=(-5, 0, 50, 10), max_entries=20, min_entries=8, page_size=2048),
    dict(kind="fortree", buffer="1MiB", fortree_write_read_ratio=3.5, fortree_original_root_counter=True),
    dict(kind="fortree", max_entries=30, min_entries=10),
    dict(kind="xbr", hilbert_domain=(0, 0, 100, 100)),
    dict(kind="xbr", hilbert_domain=(0, 0, 1, 1), max_entries=40, page_size=8192),
    dict(kind="grid", hilbert_domain=(0, 0, 100, 100), buffer="1MiB", grid_queries="plain", page_size=1024),
    dict(kind="gffm", hilbert_domain=(0, 0, 100, 100), buffer=1 << 20, grid_cold_pages=3, grid_dir_share=0.5),
    dict(kind="lbgrid", hilbert_domain=(0, 0, 100, 100), buffer="2MiB"),
    dict(kind="hgrid", hilbert_domain=(0, 0, 100, 100), device=HYBRID, grid_s=2.0, grid_special=True),
    dict(kind="rtree", split="exponential", max_entries=10),
    dict(kind="rtree", split="linear", max_entries=20, min_entries=10),
    dict(kind="rstar", reinsert_percent=0),
    dict(kind="rstar", max_entries=40, min_entries=12, reinsert_percent=25),
]


@pytest.mark.parametrize("options", KIND_CASES, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("where", ["memory", "directory"])
def test_the_property_of_an_index_creates_the_same_kind_again(options, where, tmp_path):
    path = None if where == "memory" else str(tmp_path / "a")
    # a device is not the Property's to describe: H-Grid's is given again
    device = {"device": HYBRID} if "device" in options else {}
    if path is not None and device:
        options = dict(options, device=HYBRID_FILES)
    first = geoflash.Index(path, **options)
    first.insert(1, (1, 1, 1, 1))
    want = tree_of(first)
    p = first.properties
    for q in (p, pickle.loads(pickle.dumps(p))):
        again = geoflash.Index(properties=q, **device)
        assert tree_of(again) == want
        again.close()
    assert p.kind == want[0]
    if path is not None:
        first.close()
        opened = geoflash.Index(path, readonly=True)
        assert tree_of(geoflash.Index(properties=opened.properties, **device)) == want
        opened.close()


def test_a_property_without_the_device_its_kind_needs_is_refused_not_changed():
    """An H-Grid needs a hybrid device, which a Property does not describe:
    without one the new index is refused, never made of another kind."""
    p = geoflash.Index(kind="hgrid", hilbert_domain=(0, 0, 1, 1), device=HYBRID).properties
    with pytest.raises(RTreeError, match="hybrid"):
        geoflash.Index(properties=p)


def test_the_property_given_follows_a_kind_keyword(tmp_path):
    """``Index(properties=p, kind=...)`` makes that kind; ``idx.properties``
    (p itself) says so, with the kind's settings, and creates it again."""
    p = geoflash.Property(leaf_capacity=50, index_capacity=50)
    idx = geoflash.Index(properties=p, kind="hilbert", hilbert_domain=(0, 0, 10, 10))
    assert idx.properties is p and p.kind == "hilbert"
    assert dict(p.kind_options) == {"hilbert_domain": (0.0, 0.0, 10.0, 10.0)}
    assert tree_of(geoflash.Index(properties=p)) == tree_of(idx)
    # store parameters that change the tree count too
    q = geoflash.Property()
    idx = geoflash.Index(properties=q, max_entries=20, min_entries=6, reinsert_percent=0)
    assert q.leaf_capacity == 20 and q.kind_options["reinsert_percent"] == 0
    assert tree_of(geoflash.Index(properties=q)) == tree_of(idx)
    # rtree's own Property cannot name the kind: the index's replaces it
    rindex = pytest.importorskip("rtree.index")
    r = rindex.Property()
    idx = geoflash.Index(properties=r, kind="xbr", hilbert_domain=(0, 0, 1, 1))
    assert isinstance(idx.properties, geoflash.Property) and idx.properties.kind == "xbr"
    assert tree_of(geoflash.Index(properties=idx.properties)) == tree_of(idx)
    r = rindex.Property()
    assert geoflash.Index(properties=r).properties is r  # an R*-tree: it describes it


def test_the_property_given_to_open_a_directory_describes_the_index_there(tmp_path):
    path = str(tmp_path / "h")
    made = geoflash.Index(path, kind="hilbert", hilbert_domain=(0, 0, 10, 10), max_entries=30)
    want = tree_of(made)
    made.close()
    p = geoflash.Property(variant=gindex.RT_Linear, fill_factor=0.3)
    opened = geoflash.Index(path, properties=p)
    assert opened.properties is p
    assert (p.kind, p.leaf_capacity) == ("hilbert", 30)
    opened.close()
    assert tree_of(geoflash.Index(properties=p)) == want


def test_kind_and_variant_are_one_setting_for_the_r_tree_kinds():
    p = geoflash.Property(kind="rstar", fill_factor=0.4)
    assert p.variant == gindex.RT_Star
    p.variant = gindex.RT_Linear  # variant chooses again
    assert p.kind is None
    assert geoflash.Index(properties=p).manifest["index"]["split"] == "linear"
    p = geoflash.Property(fill_factor=0.4)
    p.kind = "rtree"
    assert p.variant == gindex.RT_Quadratic
    assert geoflash.Index(properties=p).manifest["kind"] == "rtree"
    p = geoflash.Property(kind="fortree")
    p.variant = gindex.RT_Quadratic  # no effect on the FOR-tree's kind
    assert p.kind == "fortree"
    # rtree's settings are rtree's: as_dict and pkeys leave geoflash's out
    assert "kind" not in p.as_dict() and "kind" not in geoflash.Property.pkeys
    assert "'kind': 'fortree'" in repr(p)


def test_a_kind_built_from_a_property_by_hand():
    """The page grows to hold M entries of the kind (the Hilbert R-tree's
    and the xBR+-tree's are larger); kind_options carry the kind's own
    settings."""
    p = geoflash.Property(kind="xbr", kind_options=dict(hilbert_domain=(0, 0, 1, 1)))
    idx = geoflash.Index(properties=p)
    assert tree_of(idx)[:2] == ("xbr", 8192) and idx.manifest["index"]["max_entries"] == 100
    p = geoflash.Property(kind="hilbert", leaf_capacity=84, index_capacity=84,
                          kind_options=dict(hilbert_domain=(0, 0, 1, 1)))
    assert tree_of(geoflash.Index(properties=p))[:2] == ("hilbert", 4096)
    p = geoflash.Property(kind="grid", kind_options=dict(hilbert_domain=(0, 0, 1, 1), buffer="1MiB"))
    assert geoflash.Index(properties=p).manifest["kind"] == "grid"


def test_kind_and_kind_options_refuse_what_no_index_takes():
    with pytest.raises(RTreeError, match="not an index kind"):
        geoflash.Property(kind="quadtree")
    with pytest.raises(TypeError):
        geoflash.Property(kind=3)
    with pytest.raises(RTreeError, match="leaf_capacity"):
        geoflash.Property(kind_options={"max_entries": 3})
    with pytest.raises(RTreeError, match="colour"):
        geoflash.Property(kind_options={"colour": "red"})
    with pytest.raises(TypeError, match="mapping"):
        geoflash.Property(kind_options=[("buffer", 1)])
    p = geoflash.Property(kind_options={"buffer": 4096})
    with pytest.raises(TypeError):
        p.kind_options["buffer"] = 1  # read-only: assign a new mapping


# --------------------------------------------- 3. tiny reinsert factors


@pytest.mark.parametrize("factor", [0.001, 0.004, 0.0049, 0.005, 0.0051, 0.012])
def test_a_tiny_reinsert_factor_round_trips(factor, tmp_path):
    """rtree accepts any factor in (0, 1); so does geoflash, at least 1 %
    (0 % would turn forced reinsertion off). The Property given reads back
    as rtree's does; the Property describing the index creates it again,
    in memory and from a directory."""
    rindex = pytest.importorskip("rtree.index")
    theirs = rindex.Index(properties=rindex.Property(reinsert_factor=factor))
    p = geoflash.Property(reinsert_factor=factor)
    for path in (None, str(tmp_path / "r")):
        idx = geoflash.Index(path, properties=p)
        assert idx.properties.reinsert_factor == theirs.properties.reinsert_factor == factor
        pct = idx.manifest["index"]["reinsert_percent"]
        assert pct == max(1, round(factor * 100))
        described = geoflash.property.from_manifest(idx.manifest, path)
        assert 0 < described.reinsert_factor < 1
        assert geoflash.Index(properties=described).manifest["index"]["reinsert_percent"] == pct
        idx.close()
        if path is not None:
            opened = geoflash.Index(path, readonly=True)
            again = geoflash.Index(properties=opened.properties)
            assert again.manifest["index"]["reinsert_percent"] == pct
            opened.close()
