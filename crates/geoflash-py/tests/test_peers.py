"""A smoke run of the peer benchmark (benchmarks/peers): every system builds,
answers and is checked against the brute-force oracle on a small dataset,
and the results store, Markdown table and plot are written; the
moving-objects phase (``--moving``: 2,000 objects moved in commits of 1,000
with windows between them, benchmarks/peers/moving.py) runs as well.

The harness exits 1 when any system answers differently from the oracle;
under CI=true (strict) a missing peer, server or failed phase fails it too.
"""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "benchmarks" / "peers" / "run.py"


def geoflash_bin():
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "geoflash"
        if p.exists():
            return str(p)
    return None


def run_harness(tmp_path, *args):
    """Runs the harness at smoke scale with ``args`` into ``tmp_path``;
    its output folder once it has exited 0, and its standard output."""
    bin_ = geoflash_bin()
    assert bin_, "the geoflash command is not built (cargo build -p geoflash-cli)"
    out = tmp_path / "out"
    cmd = [sys.executable, str(RUN), "--scale", "smoke", "--warm-repeat", "1", "--out", str(out),
           "--workdir", str(tmp_path / "work"), "--geoflash-bin", bin_, *args]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    return out, run.stdout


def test_peer_benchmark_smoke_run(tmp_path):
    strict = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    out, stdout = run_harness(
        tmp_path, "--count", "1500", "--datasets", "uniform,helsinki", "--queries", "20",
        "--exclude", "rtree (buffer 128)", "--moving", *(["--strict"] if strict else []),
    )
    assert "WRONG" not in stdout
    md = (out / "results.md").read_text()
    assert "## uniform (1,500 objects)" in md
    assert "geoflash ÷ peer" in md
    # the header says what memory each system had: here each peer's default
    assert "Memory, each peer with its own default" in md and "SQLite's page cache 2,000 KiB" in md
    con = sqlite3.connect(out / "results.sqlite")
    rows = con.execute("SELECT system, phase, mismatches, error FROM peer_results").fetchall()
    systems = {r[0] for r in rows}
    for must in ("geoflash", "geoflash (memory)", "sqlite-rtree", "rtree", "rtree (memory)", "duckdb",
                 "shapely-strtree (memory)", "geo-index (memory)"):
        assert must in systems, (must, sorted(systems))
    assert "rtree (buffer 128)" not in systems  # --exclude
    if strict:
        assert "postgis" in systems
        assert not [r for r in rows if r[3]], [r for r in rows if r[3]]
    # every query phase was checked against the oracle and agreed
    checked = [r for r in rows if r[1].startswith("windows") or r[1] == "knn"]
    assert checked and all(r[2] == 0 for r in checked if r[3] is None)
    # builds measured the bytes the kernel counts
    (written,) = con.execute(
        "SELECT bytes_written FROM peer_results WHERE system='geoflash' AND phase='build insert' AND dataset='uniform'"
    ).fetchone()
    assert written and written > 0
    assert (out / "peers.png").stat().st_size > 10_000
    # moving objects: every system moved every object of both datasets, and
    # every answer between the commits and on the idle index agreed
    assert "## Moving objects" in md and "÷ sqlite-rtree" in md
    moved = con.execute("SELECT dataset, system, method, moves, updates_per_s, bytes_per_update, mismatches,"
                        " error FROM moving_results").fetchall()
    assert {r[0] for r in moved} == {"uniform", "buildings-random"}
    names = {r[1] for r in moved}
    for must in ("sqlite-rtree", "sqlite-rtree (cache 256 MiB)", "rtree", "duckdb", "geoflash", "geoflash (fast)",
                 "geoflash (plain)", "geoflash (TC58 sim)"):
        assert must in names, (must, sorted(names))
    if strict:
        assert "postgis" in names
        assert not [r for r in moved if r[7]], [r for r in moved if r[7]]
    ok = [r for r in moved if r[7] is None]
    assert ok and all(r[3] == 2000 and r[4] > 0 and r[6] == 0 for r in ok), ok
    # this package has Index.update_batch: a commit's moves in one call
    assert {r[2] for r in ok if r[1] == "geoflash"} == {"update_batch"}
    (eng,) = con.execute("SELECT engine FROM moving_results WHERE system='geoflash (TC58 sim)' LIMIT 1").fetchone()
    assert json.loads(eng)["nand_programs"] > 0


def test_equal_memory_gives_the_peers_geoflashs_budget_and_says_so(tmp_path):
    """``--equal-memory``: SQLite's page cache and DuckDB's memory limit are
    geoflash's default budget, and the report's header says what each had."""
    import re

    out, _ = run_harness(
        tmp_path, "--count", "500", "--datasets", "uniform", "--queries", "5",
        "--systems", "geoflash,sqlite-rtree,duckdb", "--exclude", "geoflash (papers)", "--no-postgis", "--equal-memory",
    )
    md = (out / "results.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("Memory,"))
    assert "(--equal-memory)" in line, line
    budget = re.search(r"geoflash's default budget ([\d,]+) KiB", line)
    cache = re.search(r"SQLite's page cache ([\d,]+) KiB", line)
    assert budget and cache and budget.group(1) == cache.group(1), line
    kib = int(budget.group(1).replace(",", ""))
    assert kib >= 256 * 1024, line  # geoflash's budget is at least 256 MiB
    assert "DuckDB's memory_limit" in line and "2,000 KiB" not in line, line
    con = sqlite3.connect(out / "results.sqlite")
    systems = {r[0] for r in con.execute("SELECT system FROM peer_results WHERE error IS NULL")}
    assert {"geoflash", "sqlite-rtree", "duckdb"} <= systems, systems
