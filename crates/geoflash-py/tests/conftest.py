"""Shared fixtures: random data sets and the index configurations under test."""

import os

import numpy as np
import pytest

# Every store on every device kind: (store, device). "file" is the index
# directory's own file (direct I/O where the file system allows it).
CONFIGS = [
    ("efind", "mem:"),
    ("plain", "mem:"),
    ("efind", "file"),
    ("plain", "file"),
    ("efind", "flashsim:preset=seed-tc58"),
    ("plain", "flashsim:preset=seed-tc58"),
    ("fast", "mem:"),
    ("fast", "file"),
    ("fast", "flashsim:preset=seed-tc58"),
]

# Data size of the comparisons against rtree (scaled by GEOFLASH_PY_SCALE).
SCALE = float(os.environ.get("GEOFLASH_PY_SCALE", "1"))


def config_id(c):
    return f"{c[0]}-{c[1].split(':')[0]}"


@pytest.fixture(params=CONFIGS, ids=config_id)
def config(request):
    return request.param


def make_index(geoflash, tmp_path, store, device, **kw):
    """A new index with `store` on `device`: in memory for mem:, else in a directory."""
    kw.setdefault("page_size", 512)  # small pages: trees several levels deep
    if device == "mem:":
        return geoflash.Index(store=store, device=device, **kw)
    return geoflash.Index(str(tmp_path / "idx"), store=store, device=device, **kw)


def random_boxes(rng, n, extent=100, max_size=8, integer=True, points=0.2):
    """n boxes in [0, extent]², a share of them points; integer corners make
    ties (equal distances, touching edges) frequent."""
    lo = rng.uniform(0, extent, size=(n, 2))
    size = rng.uniform(0, max_size, size=(n, 2))
    size[rng.random(n) < points] = 0
    if integer:
        lo = np.floor(lo)
        size = np.floor(size)
    return np.hstack([lo, lo + size])
