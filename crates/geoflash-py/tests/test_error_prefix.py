"""A bad row of a box array says "invalid input:" once: the row's error
wrapped the rectangle's, prefix and all ("invalid input: row 1: invalid
input: rectangle (3, 0, 1, 1) is inverted")."""

import numpy as np
import pytest

import geoflash

NAN = float("nan")


@pytest.mark.parametrize("boxes,why", [
    (np.array([[0, 0, 1, 1], [3, 0, 1, 1]], dtype=float), "is inverted"),
    (np.array([[0, 0, 1, 1], [0, NAN, 1, 1]]), "not finite"),
])
def test_a_bad_row_says_invalid_input_once(boxes, why):
    idx = geoflash.Index.from_arrays(None, np.array([[0, 0, 1, 1], [2, 2, 3, 3]], dtype=float))
    calls = [
        lambda: geoflash.Index.from_arrays(None, boxes),
        lambda: idx.intersection_batch(boxes),
        lambda: idx.update_batch(np.array([0, 1]), boxes),
    ]
    for call in calls:
        with pytest.raises(geoflash.RTreeError) as e:
            call()
        msg = str(e.value)
        assert msg.count("invalid input:") == 1, msg
        assert "row 1: rectangle" in msg and why in msg, msg
