"""Index.leaves(): rtree's format, every entry in exactly one leaf, leaf
bounds equal to the union of their entries' boxes, on every store and
device, after deletes and after reopening a directory."""

from collections import Counter

import numpy as np
import pytest

import geoflash
from conftest import make_index, random_boxes

rtree = pytest.importorskip("rtree")


def check_leaves(idx, boxes_by_id=None):
    """The structural checks every answer of leaves() must pass; returns the
    multiset of ids in the leaves."""
    leaves = idx.leaves()
    assert isinstance(leaves, list)
    max_entries = idx.manifest["index"]["max_entries"]
    seen = Counter()
    for leaf in leaves:
        assert isinstance(leaf, tuple) and len(leaf) == 3
        leaf_id, children, bounds = leaf
        assert isinstance(leaf_id, int)
        assert isinstance(children, list) and all(isinstance(c, int) for c in children)
        assert isinstance(bounds, list) and len(bounds) == 4
        assert 1 <= len(children) <= max_entries
        assert bounds[0] <= bounds[2] and bounds[1] <= bounds[3]
        seen.update(children)
        if boxes_by_id is not None:
            b = boxes_by_id[np.asarray(children)]
            want = [b[:, 0].min(), b[:, 1].min(), b[:, 2].max(), b[:, 3].max()]
            assert bounds == want
    ids = [leaf[0] for leaf in leaves]
    assert len(set(ids)) == len(ids), "leaf ids repeat"
    return seen


def test_leaves_of_a_bulk_load_hold_every_id_once(config, tmp_path):
    store, device = config
    rng = np.random.default_rng(11)
    boxes = random_boxes(rng, 3000, integer=False)
    path = None if device == "mem:" else str(tmp_path / "idx")
    idx = geoflash.Index.from_arrays(None, boxes, path, store=store, device=device, page_size=512)
    seen = check_leaves(idx, boxes)
    assert seen == Counter(range(len(boxes)))
    leaves = idx.leaves()
    assert len(leaves) > 10  # small pages: many leaves
    # the leaves' bounds cover the index's bounds exactly
    b = np.array([leaf[2] for leaf in leaves])
    assert [b[:, 0].min(), b[:, 1].min(), b[:, 2].max(), b[:, 3].max()] == idx.bounds
    idx.close()


def test_leaves_with_duplicate_ids_deletes_and_reopen(config, tmp_path):
    store, device = config
    rng = np.random.default_rng(12)
    boxes = random_boxes(rng, 1500)
    ids = rng.integers(-50, 400, size=len(boxes))  # many duplicates, some negative
    idx = make_index(geoflash, tmp_path, store, device)
    for i, b in zip(ids.tolist(), boxes.tolist()):
        idx.insert(i, b)
    assert check_leaves(idx) == Counter(ids.tolist())
    gone = Counter()
    for j in range(0, len(boxes), 3):
        idx.delete(int(ids[j]), boxes[j].tolist())
        gone[int(ids[j])] += 1
    left = Counter(ids.tolist()) - gone
    assert check_leaves(idx) == left
    if device != "mem:":
        before = idx.leaves()
        idx.close()
        again = geoflash.Index(str(tmp_path / "idx"))
        assert again.leaves() == before
        assert check_leaves(again) == left
        again.close()


EMPTY_LEAVES = rtree.index.Index().leaves()  # one empty leaf with rtree's inverted infinite box


def test_leaves_of_an_empty_index():
    idx = geoflash.Index()
    assert idx.leaves() == EMPTY_LEAVES
    idx.insert(3, (1, 2, 3, 4))
    idx.delete(3, (1, 2, 3, 4))
    assert idx.leaves() == EMPTY_LEAVES


def test_leaves_after_deleting_everything_from_a_deep_tree():
    rng = np.random.default_rng(13)
    boxes = random_boxes(rng, 400)
    idx = geoflash.Index(page_size=512)
    for i, b in enumerate(boxes.tolist()):
        idx.insert(i, b)
    for i, b in enumerate(boxes.tolist()):
        idx.delete(i, b)
    assert len(idx) == 0
    assert idx.leaves() == EMPTY_LEAVES


@pytest.mark.parametrize("interleaved", [True, False])
def test_leaves_match_rtree_when_the_tree_is_one_leaf(interleaved):
    """With fewer entries than a node holds, both trees are one leaf: same
    children, and bounds [minx, miny, maxx, maxy] in both whatever the
    coordinate order of the index."""
    rng = np.random.default_rng(14)
    boxes = random_boxes(rng, 30, integer=False)
    ours = geoflash.Index(interleaved=interleaved)
    theirs = rtree.index.Index(interleaved=interleaved)
    for i, b in enumerate(boxes.tolist()):
        coords = b if interleaved else [b[0], b[2], b[1], b[3]]
        ours.insert(i + 100, coords)
        theirs.insert(i + 100, coords)
    (mine,) = ours.leaves()
    (want,) = theirs.leaves()
    assert sorted(mine[1]) == sorted(want[1])
    assert mine[2] == pytest.approx(want[2], abs=0)
    assert mine[2] == [boxes[:, 0].min(), boxes[:, 1].min(), boxes[:, 2].max(), boxes[:, 3].max()]


def test_leaves_cover_the_same_ids_as_rtree():
    rng = np.random.default_rng(15)
    boxes = random_boxes(rng, 5000, integer=False)
    ours = geoflash.Index.from_arrays(None, boxes)
    theirs = rtree.index.Index((np.arange(len(boxes)), boxes[:, :2].copy(), boxes[:, 2:].copy()))
    got = Counter(c for leaf in ours.leaves() for c in leaf[1])
    want = Counter(c for leaf in theirs.leaves() for c in leaf[1])
    assert got == want == Counter(range(len(boxes)))


def test_leaves_on_a_closed_index_raise():
    idx = geoflash.Index()
    idx.close()
    with pytest.raises(ValueError):
        idx.leaves()
