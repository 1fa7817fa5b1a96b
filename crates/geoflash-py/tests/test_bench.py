"""geoflash.bench: workloads run from Python into a results store read as DataFrames."""

import os
import pathlib

import pytest

import geoflash
import geoflash.bench

WORKLOADS = pathlib.Path(__file__).resolve().parents[3] / "workloads"


def small_workload(store="efind"):
    return {
        "name": "py-bench",
        "repetitions": 2,
        "dataset": [{"name": "u", "generator": "uniform", "geometry": "box",
                     "count": 1500, "seed": 3, "params": {"max_size": 0.01}}],
        # durability none: group commit also syncs on a timer, which makes
        # the simulated counts vary between repetitions
        "index": [{"name": store, "kind": "rstar", "store": store, "page_size": ["1KiB", "2KiB"],
                   "buffer": "32KiB", "device": "flashsim:preset=seed-tc58",
                   store: {"durability": "none"}}],
        "step": [{"kind": "build"},
                 {"kind": "range_queries", "selectivity": ["0.1%", "1%"], "count": 20}],
    }


def test_run_a_dict_workload_and_load_it_back(tmp_path):
    db = tmp_path / "r.sqlite"
    df = geoflash.bench.run(small_workload(), db, scale="smoke")
    # 2 page sizes x 2 repetitions x (build + 2 selectivities)
    assert len(df) == 2 * 2 * 3
    assert set(df["step_kind"]) == {"build", "range_queries"}
    assert (df["status"] == "ok").all()
    build = df[df["step_kind"] == "build"]
    assert (build["operations"] == 1500).all() and (build["pages_written"] > 0).all()
    assert (build["nand_programs"] > 0).all()
    # simulated counts are deterministic: the two repetitions agree
    by_page = build.groupby("page_size")["pages_written"].nunique()
    assert (by_page == 1).all()
    assert df.attrs["summary"]["executed"] == 4 and not df.attrs["summary"]["failures"]
    # load reads the same rows; a second run skips what is complete
    assert len(geoflash.bench.load(db)) == len(df)
    again = geoflash.bench.run(small_workload(), db, scale="smoke")
    assert again.attrs["summary"]["skipped_complete"] == 4
    assert len(again) == len(df)


def test_run_a_shipped_workload_file_subset(tmp_path):
    df = geoflash.bench.run(WORKLOADS / "efind-vs-fast.toml", tmp_path / "r.sqlite", scale="smoke",
                            only=["*[page_size=4KiB,device=flashsim:preset=seed-tc58]"])
    assert set(df["store"]) == {"plain", "efind", "fast"}
    assert (df["status"] == "ok").all()
    assert os.path.isfile(df.attrs["results"])


def test_bad_workloads_and_stores(tmp_path):
    bad = small_workload()
    bad["index"][0]["store"] = "tape"
    with pytest.raises(ValueError, match="tape"):
        geoflash.bench.run(bad, tmp_path / "r.sqlite", scale="smoke")
    with pytest.raises(ValueError):
        geoflash.bench.run(small_workload(), tmp_path / "r.sqlite", scale="huge")
    with pytest.raises(FileNotFoundError, match="missing.toml"):
        geoflash.bench.run(tmp_path / "missing.toml", tmp_path / "r.sqlite")
    with pytest.raises(FileNotFoundError):
        geoflash.bench.load(tmp_path / "none.sqlite")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database" * 100)
    with pytest.raises(ValueError):
        geoflash.bench.load(junk)
