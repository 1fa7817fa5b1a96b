"""geoflash.dask.run: a workload's configurations as Dask tasks on a
LocalCluster of 2 worker processes, rows written into the client's SQLite
store or, by the workers themselves, into a PostgreSQL store (a throw-away
server: the pg_url fixture of conftest.py); a worker killed mid-sweep
leaves exactly the rows of an uninterrupted run, and a second run adds
none."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

import geoflash.bench
import geoflash.dask as gd

# Compared between runs: simulated counts are deterministic.
KEY = ["config_key", "step_index", "step_kind", "parameter", "status", "operations",
       "pages_written", "pages_read", "nand_programs", "query_results"]


def workload():
    return {
        "name": "py-dask-sweep",
        "repetitions": 2,
        "dataset": [{"name": "u", "generator": "uniform", "geometry": "box",
                     "count": 4000, "seed": 3, "params": {"max_size": 0.01}}],
        # durability none: group commit also syncs on a timer (not deterministic)
        "index": [{"name": "efind", "kind": "rstar", "store": "efind",
                   "page_size": ["1KiB", "2KiB", "4KiB"], "buffer": "32KiB",
                   "device": "flashsim:preset=seed-tc58", "efind": {"durability": "none"}}],
        "step": [{"kind": "build"},
                 {"kind": "range_queries", "selectivity": ["0.1%", "1%"], "count": 30}],
    }


def rows(df):
    cols = [c for c in KEY if c in df.columns]
    return sorted(map(tuple, df[cols].astype(str).values.tolist()))


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def stored_configurations(db):
    """Configurations with rows in the store ``db`` (an SQLite file or a
    PostgreSQL URL) so far; 0 before the store exists."""
    if str(db).startswith("postgresql://"):
        try:
            return len(configurations(geoflash.bench.load(db)))
        except (OSError, ValueError):
            return 0
    if not os.path.exists(db):
        return 0
    try:
        with sqlite3.connect(db, timeout=30) as con:
            return con.execute("SELECT count(*) FROM configurations").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def sweep_killing_a_worker(client, db, tmp_path):
    """``gd.run`` of the workload into ``db`` while a thread SIGKILLs a
    worker in the middle of a task once the first configuration is stored."""
    killed = {}

    def kill_a_busy_worker():
        deadline = time.monotonic() + 120
        while stored_configurations(db) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        while time.monotonic() < deadline:
            busy = [w for w, tasks in client.processing().items() if tasks]
            if busy:
                pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
                os.kill(pid, signal.SIGKILL)
                killed["worker"] = busy[0]
                return
            time.sleep(0.02)

    t = threading.Thread(target=kill_a_busy_worker)
    t.start()
    df = gd.run(workload(), client=client, results=db, scale="smoke", workdir=tmp_path / "work",
                progress=False)
    t.join()
    assert "worker" in killed, "no worker was busy to kill"
    return df


def test_a_sweep_with_a_killed_worker_has_the_rows_of_an_uninterrupted_one(client, tmp_path):
    ref = geoflash.bench.run(workload(), tmp_path / "ref.sqlite", scale="smoke")
    assert len(ref) == 6 * 3 and (ref["status"] == "ok").all()

    db = str(tmp_path / "dask.sqlite")
    df = sweep_killing_a_worker(client, db, tmp_path)
    assert df.attrs["summary"]["failures"] == []
    assert df.attrs["summary"]["executed"] == 6
    assert rows(df) == rows(ref)
    # every configuration once, complete
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*), count(completed_at) FROM configurations").fetchone() == (6, 6)

    # resumed: nothing left to run, no row added
    again = gd.run(workload(), client=client, results=db, scale="smoke", progress=False)
    assert again.attrs["summary"]["executed"] == 0 and again.attrs["summary"]["skipped_complete"] == 6
    assert rows(again) == rows(ref)


def test_a_partial_store_is_completed_without_duplicates(client, tmp_path):
    db = tmp_path / "r.sqlite"
    # two of the three page sizes run locally first (as an earlier, interrupted sweep)
    geoflash.bench.run(workload(), db, scale="smoke", only=["efind[page_size=1KiB]", "efind[page_size=2KiB]"])
    df = gd.run(workload(), client=client, results=db, scale="smoke", progress=False)
    assert df.attrs["summary"]["executed"] == 2 and df.attrs["summary"]["skipped_complete"] == 4
    ref = geoflash.bench.run(workload(), tmp_path / "ref.sqlite", scale="smoke")
    assert rows(df) == rows(ref)


def test_a_sweep_after_the_steps_changed_replaces_the_stale_configurations(client, tmp_path):
    """The configuration key holds a digest of the steps: a sweep of the
    workload with edited steps runs every configuration again and leaves
    only its own rows (before, the old ones were skipped as complete, and
    a Python-side write would have kept both for a report to pool)."""
    db = tmp_path / "r.sqlite"
    gd.run(workload(), client=client, results=db, scale="smoke", progress=False)
    edited = workload()
    edited["step"][1]["count"] = 20
    df = gd.run(edited, client=client, results=db, scale="smoke", progress=False)
    assert df.attrs["summary"]["executed"] == 6 and df.attrs["summary"]["skipped_complete"] == 0
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM configurations").fetchone()[0] == 6
        ops = {r[0] for r in con.execute("SELECT operations FROM results WHERE step_kind = 'range_queries'")}
    assert ops == {20}


def test_sweep_errors(client, tmp_path):
    with pytest.raises(FileNotFoundError):
        gd.run(tmp_path / "missing.toml", client=client, results=tmp_path / "r.sqlite")
    bad = workload()
    bad["index"][0]["store"] = "tape"
    with pytest.raises(ValueError, match="tape"):
        gd.run(bad, client=client, results=tmp_path / "r.sqlite", scale="smoke")
    # tasks that fail on their workers (the workdir is a file) are reported, nothing is stored
    (tmp_path / "a-file").write_text("")
    df = gd.run(workload(), client=client, results=tmp_path / "f.sqlite", scale="smoke", progress=False,
                retries=0, workdir=tmp_path / "a-file")
    assert len(df.attrs["summary"]["failures"]) == 6 and len(df) == 0


# What names a configuration in results_full (which has no config_key).
CONFIG = ["dataset", "insertion_order", "index_name", "page_size", "store", "device", "repetition"]


def configurations(df):
    """The configurations with rows in ``df``."""
    return set(map(tuple, df[CONFIG].astype(str).values.tolist()))


def per_step(df):
    """Rows per configuration and step."""
    return df.astype({c: str for c in CONFIG}).groupby(CONFIG + ["step_index", "step_kind"]).size().to_dict()


def test_a_sweep_into_postgresql_has_the_rows_of_one_into_sqlite(client, tmp_path, pg_url):
    lite = gd.run(workload(), client=client, results=tmp_path / "r.sqlite", scale="smoke", progress=False)
    pg = gd.run(workload(), client=client, results=pg_url, scale="smoke", progress=False)
    assert lite.attrs["summary"]["failures"] == [] and pg.attrs["summary"]["failures"] == []
    assert pg.attrs["summary"]["executed"] == 6 and pg.attrs["summary"]["rows"] == len(pg) == 6 * 3
    assert pg.attrs["results"] == pg_url
    assert len(configurations(pg)) == 6 and configurations(pg) == configurations(lite)
    assert per_step(pg) == per_step(lite)
    assert rows(pg) == rows(lite)
    # the same columns, read back from PostgreSQL
    assert list(pg.columns) == list(lite.columns)

    # run again: every configuration is complete, nothing is submitted or written
    again = gd.run(workload(), client=client, results=pg_url, scale="smoke", progress=False)
    s = again.attrs["summary"]
    assert (s["executed"], s["skipped_complete"], s["rows"]) == (0, 6, 0)
    assert rows(again) == rows(pg)
    assert len(geoflash.bench.load(pg_url)) == 6 * 3


def test_a_worker_killed_mid_sweep_into_postgresql_leaves_no_duplicate_and_no_gap(client, tmp_path, pg_url):
    ref = geoflash.bench.run(workload(), tmp_path / "ref.sqlite", scale="smoke")
    df = sweep_killing_a_worker(client, pg_url, tmp_path)
    s = df.attrs["summary"]
    assert s["failures"] == []
    # a task retried after its configuration was written counts as complete
    assert s["executed"] + s["skipped_complete"] == 6 and s["executed"] >= 5
    assert rows(df) == rows(ref)
    assert per_step(df) == per_step(ref)


def test_a_retried_task_writes_nothing_once_its_configuration_is_complete(tmp_path, pg_url):
    from geoflash import _geoflash
    from geoflash.dask.sweep import run_one_into

    plan = json.loads(_geoflash.bench_plan(json.dumps(workload()), pg_url, scale="smoke", from_json=True))
    c = plan["configurations"][0]
    args = (json.dumps(workload()), True, "smoke", [], c["position"], c["key"])
    assert run_one_into(*args, pg_url, str(tmp_path)) == 3
    assert run_one_into(*args, pg_url, str(tmp_path)) is None
    # copied straight from a store of its own: the complete copy stays, nothing is added
    one = str(tmp_path / "one.sqlite")
    _geoflash.bench_run(json.dumps(workload()), one, scale="smoke", from_json=True, pick=c["position"])
    assert _geoflash.bench_copy_configuration(one, pg_url, c["key"]) is None
    assert len(geoflash.bench.load(pg_url)) == 3


def test_an_unreachable_postgresql_fails_before_any_task(tmp_path):
    url = "postgresql://bench:hunter2@127.0.0.1:1/results"
    # the scheduler does not exist either: reaching it would be another error
    with pytest.raises(OSError) as e:
        gd.run(workload(), client="tcp://127.0.0.1:9", results=url, scale="smoke", progress=False,
               timeout=2)
    msg = str(e.value)
    assert "postgresql://bench@127.0.0.1:1/results" in msg and "cannot connect" in msg, msg
    assert "hunter2" not in msg


def geoflash_bin():
    """The geoflash command (GEOFLASH_BIN, else the debug or release build)."""
    root = Path(__file__).resolve().parents[3]
    if os.environ.get("GEOFLASH_BIN"):
        return os.environ["GEOFLASH_BIN"]
    for target in (os.environ.get("CARGO_TARGET_DIR"), root / "target"):
        for profile in ("debug", "release"):
            if target and (Path(target) / profile / "geoflash").exists():
                return str(Path(target) / profile / "geoflash")
    return None


def test_the_command_line_runs_a_sweep_on_dask(client, tmp_path):
    bin_ = geoflash_bin()
    assert bin_, "the geoflash command is not built (cargo build -p geoflash-cli)"
    workload = Path(__file__).resolve().parents[3] / "workloads" / "efind-vs-fast.toml"
    only = "efind[page_size=4KiB,device=flashsim:preset=seed-tc58]"
    db = tmp_path / "cli.sqlite"
    env = dict(os.environ, GEOFLASH_PYTHON=sys.executable)
    run = subprocess.run([bin_, "bench", str(workload), "--results", str(db), "--scale", "smoke",
                          "--index", only, "--dask", client.scheduler.address, "--workdir", str(tmp_path / "w")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "executed" in run.stdout
    ref = geoflash.bench.run(workload, tmp_path / "ref.sqlite", scale="smoke", only=[only])
    got = geoflash.bench.load(db)
    assert len(got) == len(ref) > 0
    # the same configurations (results_full names them by their columns)
    cfg = ["index_name", "page_size", "store", "device", "dataset", "insertion_order", "repetition"]
    assert set(map(tuple, got[cfg].astype(str).values.tolist())) == set(
        map(tuple, ref[cfg].astype(str).values.tolist())
    )
    # an unreachable scheduler: a clear error and a non-zero exit
    bad = subprocess.run([bin_, "bench", str(workload), "--results", str(tmp_path / "none.sqlite"),
                          "--scale", "smoke", "--index", only, "--dask", "tcp://127.0.0.1:9"],
                         capture_output=True, text=True, env=dict(env), timeout=120)
    assert bad.returncode != 0 and "cannot reach the Dask scheduler" in bad.stderr, bad.stderr


def test_the_command_line_sweeps_into_postgresql(client, tmp_path, pg_url):
    bin_ = geoflash_bin()
    assert bin_, "the geoflash command is not built (cargo build -p geoflash-cli)"
    workload = Path(__file__).resolve().parents[3] / "workloads" / "efind-vs-fast.toml"
    only = "efind[page_size=4KiB,device=flashsim:preset=seed-tc58]"
    env = dict(os.environ, GEOFLASH_PYTHON=sys.executable)
    url = pg_url.replace("geoflash@", "geoflash:hunter2@")  # trust authentication ignores the password
    run = subprocess.run([bin_, "bench", str(workload), "--results", url, "--scale", "smoke",
                          "--index", only, "--dask", client.scheduler.address, "--workdir", str(tmp_path / "w")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "executed" in run.stdout and pg_url in run.stdout and "hunter2" not in run.stdout
    ref = geoflash.bench.run(workload, tmp_path / "ref.sqlite", scale="smoke", only=[only])
    got = geoflash.bench.load(pg_url)
    assert len(got) == len(ref) > 0
    assert configurations(got) == configurations(ref)
