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


def generated_geometries(rng, n):
    """n shapely geometries: boxes, triangles, lines (2 or 3 points) and
    points with integer coordinates in [0, 24], and a few copies of earlier
    ones (touching boundaries, shared edges, equal geometries and tied
    distances are frequent)."""
    import shapely

    out = []
    while len(out) < n:
        x, y = rng.integers(0, 20, 2)
        kind = rng.integers(0, 5)
        if kind == 0:
            w, h = rng.integers(1, 5, 2)
            out.append(shapely.box(x, y, x + w, y + h))
        elif kind == 1:
            pts = [(x, y)] + [tuple(p) for p in rng.integers(0, 25, (2, 2))]
            t = shapely.Polygon(pts)
            if t.area > 0:
                out.append(t)
        elif kind == 2:
            pts = [(x, y)] + [tuple(p) for p in rng.integers(0, 25, (rng.integers(1, 3), 2))]
            line = shapely.LineString(pts)
            if line.length > 0 and shapely.is_valid(line) and shapely.is_simple(line):
                out.append(line)
        elif kind == 3:
            out.append(shapely.Point(x, y))
        elif out:
            out.append(out[rng.integers(0, len(out))])
    return np.array(out, dtype=object)


def under_ci():
    """True under CI (``CI`` set to anything but empty, ``0`` or ``false``,
    as geoflash::testenv reads it): a missing prerequisite fails there."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def _pgtemp():
    """benchmarks/peers/pgtemp.py: the throw-away PostgreSQL server recipe
    of the workbench's pg_cluster.rs, in Python."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "peers" / "pgtemp.py"
    spec = importlib.util.spec_from_file_location("geoflash_pgtemp", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def pg_cluster():
    """A throw-away PostgreSQL server on loopback for this test session
    (benchmarks/peers/pgtemp.py), stopped and removed at the end. Without
    the server binaries the tests that use it are skipped with the reason,
    and fail under CI."""
    pgtemp = _pgtemp()
    bindir = pgtemp.find_bindir()
    if bindir is None or not os.path.isfile(os.path.join(bindir, "initdb")):
        why = ("PostgreSQL server binaries (initdb, pg_ctl) not found in $GEOFLASH_PG_BIN, on PATH or in "
               "/usr/lib/postgresql/*/bin; install the Debian package postgresql (scripts/setup.sh does)")
        if under_ci():
            pytest.fail(f"CI={os.environ['CI']}: a test prerequisite is missing: {why}")
        pytest.skip(why)
    cluster = pgtemp.TempCluster(bindir)
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(pg_cluster, request):
    """The URL of a new, empty database of the session's PostgreSQL server."""
    import re
    import subprocess

    name = "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:50] + "_" + os.urandom(3).hex()
    # the server's own directory (PATH may hold links to initdb and pg_ctl only)
    bindir = os.path.dirname(os.path.realpath(os.path.join(pg_cluster.bindir, "initdb")))
    subprocess.run(
        [os.path.join(bindir, "createdb"), "-h", "127.0.0.1", "-p", str(pg_cluster.port),
         "-U", "geoflash", name],
        check=True, capture_output=True, text=True,
    )
    return pg_cluster.url(name)
