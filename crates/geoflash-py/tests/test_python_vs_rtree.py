"""A smoke run of benchmarks/python_vs_rtree.py at a tiny count: every index
(in memory and on disk) answers the windows and nearest queries as rtree
does (the harness exits with an error otherwise), every measurement of the
table is present with positive times, and the insert loops leave as many
entries as they inserted."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "python_vs_rtree.py"


def test_python_vs_rtree_smoke_run(tmp_path):
    out = tmp_path / "rows.json"
    cmd = [
        sys.executable, str(SCRIPT), "--count", "3000", "--insert-count", "1500", "--repeat", "1",
        "--query-repeat", "2", "--queries", "15", "--markdown", "--json", str(out), "--tmp", str(tmp_path),
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "answers agree (windows and nearest, every index)" in run.stdout
    data = json.loads(out.read_text())
    assert (data["count"], data["insert_count"], data["queries"]) == (3000, 1500, 15)
    rows = data["rows"]
    what = {r["measurement"] for r in rows}
    for must in (
        "bulk construction, memory",
        "bulk construction, disk",
        "15 window queries, memory",
        "15 window queries, disk",
        "15 nearest(k=10), memory",
        "15 nearest(k=10), disk",
        "1,500 inserts one by one, memory",
        "1,500 inserts one by one, disk",
    ):
        assert must in what, (must, sorted(what))
    loops = [r["geoflash"] for r in rows if r["measurement"].startswith("1,500 inserts")]
    assert sum("index.batch()" in name for name in loops) == 2, loops
    assert len(loops) == 4, loops
    for r in rows:
        assert r["geoflash_ms"] > 0 and r["rtree_ms"] > 0 and r["ratio"] > 0, r
        assert len(r["geoflash_wall_s"]) >= 1
    # the Markdown table has one line per row
    assert run.stdout.count("× |") >= 2 * len(rows)
    # the disk indexes lived in --tmp and were removed afterwards
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("geoflash-vs-rtree-")]
