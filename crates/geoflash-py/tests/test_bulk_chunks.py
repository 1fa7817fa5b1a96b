"""Bulk loads hand their rows to the core in chunks (``bulk_chunks``): an
index loaded in many chunks holds every row once, with its id, box and
object, as the brute-force answer says; bad rows are reported by their
position in the whole input, not in their chunk."""

import numpy as np
import pytest

import geoflash
from geoflash import spatial_index


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 7 rows, so that a small load crosses many of them."""
    monkeypatch.setattr(spatial_index, "BULK_CHUNK_ROWS", 7)


def brute(boxes, ids, w):
    x0, y0, x1, y1 = w
    hit = (boxes[:, 0] <= x1) & (boxes[:, 2] >= x0) & (boxes[:, 1] <= y1) & (boxes[:, 3] >= y0)
    return sorted(ids[hit].tolist())


@pytest.mark.parametrize("path", [False, True])
def test_a_load_in_many_chunks_holds_every_row(small_chunks, tmp_path, path):
    rng = np.random.default_rng(5)
    lo = rng.uniform(0, 100, size=(250, 2))
    boxes = np.hstack([lo, lo + rng.uniform(0, 4, size=(250, 2))])
    ids = rng.permutation(10_000)[:250].astype(np.int64)
    where = str(tmp_path / "i") if path else None
    idx = geoflash.Index.from_arrays(ids, boxes, where, page_size=512)
    assert len(idx) == 250
    for w in [(0, 0, 100, 100), (10, 10, 30, 20), (50, 50, 50, 50), (-5, -5, -1, -1)]:
        assert sorted(idx.intersection(w)) == brute(boxes, ids, w), w
    offsets, found = idx.intersection_batch(boxes[:40])
    for i in range(40):
        assert sorted(found[offsets[i] : offsets[i + 1]].tolist()) == brute(boxes, ids, boxes[i])


def test_objects_of_a_streamed_load_stay_with_their_rows(small_chunks):
    rows = [(i * 3, (i, i, i + 0.5, i + 0.5), f"obj{i}") for i in range(60)]
    idx = geoflash.Index(iter(rows))
    got = sorted((it.id, it.object) for it in idx.intersection((0, 0, 100, 100), objects=True))
    assert got == [(i * 3, f"obj{i}") for i in range(60)]


def test_a_bad_row_in_a_later_chunk_is_named_by_its_input_position(small_chunks):
    boxes = np.tile([0.0, 0.0, 1.0, 1.0], (30, 1))
    boxes[23] = [2.0, 0.0, 1.0, 1.0]
    with pytest.raises(geoflash.RTreeError, match="row 23"):
        geoflash.Index.from_arrays(None, boxes)


def test_chunks_of_different_lengths_are_refused(small_chunks):
    boxes = np.zeros((20, 4))
    ids = np.arange(20, dtype=np.int64)
    chunks = spatial_index.bulk_chunks(ids[:15], boxes)
    core = geoflash._geoflash.Core
    with pytest.raises(geoflash.RTreeError, match="ids for"):
        geoflash.Index._with_core(
            {}, lambda self, p: core.bulk(p, self._options, 20, chunks, None, *self._bulk), None
        )
