"""The workbench from Python: run workloads and read results stores as
pandas DataFrames.

    import geoflash.bench
    df = geoflash.bench.run("workloads/efind-vs-fast.toml", "r.sqlite", scale="smoke")
    df.groupby(["index_name", "step_kind"])["sim_time_ns"].median()
    all_rows = geoflash.bench.load("r.sqlite")   # or "postgresql://user@host/db"

A workload is a TOML file (see docs/workbench.md) or the same structure
as a dict (``{"name": ..., "dataset": [...], "index": [...], "step":
[...]}``). Every row is one execution step of one configuration with every
metric of the engine's ``Stats`` record and the configuration's columns
(the results store's ``results_full`` view).
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from typing import Iterable, Mapping, Optional, Union

from . import _geoflash
from .exceptions import ResultsStoreError

__all__ = ["run", "load"]


def load(
    results: Union[str, os.PathLike],
    *,
    workload: Optional[str] = None,
    scale: Optional[str] = None,
):
    """Every result row of the results store ``results`` as a
    ``pandas.DataFrame`` (the ``results_full`` view: configuration columns
    and every metric), in the order they were recorded; only those of
    workload ``workload`` and scale ``scale`` when given. ``results`` is an
    SQLite file, or a PostgreSQL URL (``postgresql://user@host/db``; the
    password in the URL or in ``PGPASSWORD``). Raises
    ``FileNotFoundError`` when the file does not exist, ``OSError`` when
    the server cannot be reached and ``geoflash.ResultsStoreError`` (a
    ``ValueError``) when it is not a results store."""
    import pandas as pd

    path = os.fspath(results)
    if _geoflash.bench_location(path)[1]:
        out = json.loads(_geoflash.bench_rows(path, workload, scale))
        return pd.DataFrame(out["rows"], columns=out["columns"])
    if not os.path.isfile(path):
        raise FileNotFoundError(f"results store {path} does not exist")
    where, params = [], []
    for column, value in (("workload", workload), ("scale", scale)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = "SELECT * FROM results_full" + (" WHERE " + " AND ".join(where) if where else "")
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            return pd.read_sql_query(sql + " ORDER BY result_id", con, params=params)
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as e:
        raise ResultsStoreError(f"{path} is not a geoflash results store: {e}") from None


def run(
    workload: Union[str, os.PathLike, Mapping],
    results: Optional[Union[str, os.PathLike]] = None,
    *,
    scale: str = "small",
    force: bool = False,
    only: Iterable[str] = (),
    workdir: Optional[Union[str, os.PathLike]] = None,
):
    """Runs ``workload`` (a TOML file or a dict of the same structure) at
    ``scale`` (``"smoke"``, ``"small"`` or ``"full"``) and returns the rows
    of that workload and scale in the results store as a
    ``pandas.DataFrame``.

    ``results``: the results store, an SQLite file (created if missing; a
    temporary file when ``None``, its path in ``df.attrs["results"]``) or a
    PostgreSQL URL (its tables created if missing). Configurations
    already complete in it are skipped unless ``force``. ``only`` restricts
    the run to index configurations by name, as ``geoflash bench --index``
    (``"efind"``, ``"efind[page_size=4KiB]"``, ``"*[page_size=4KiB]"``).
    ``df.attrs["summary"]`` holds the run summary (configurations executed
    and skipped, failures). The GIL is released while it runs.
    """
    if results is None:
        fd, results = tempfile.mkstemp(prefix="geoflash-bench-", suffix=".sqlite")
        os.close(fd)
        os.unlink(results)
    if isinstance(workload, Mapping):
        text, from_json = json.dumps(workload), True
    else:
        text, from_json = os.fspath(workload), False
    out = json.loads(
        _geoflash.bench_run(
            text,
            os.fspath(results),
            scale=scale,
            from_json=from_json,
            force=force,
            only=list(only),
            workdir=None if workdir is None else os.fspath(workdir),
        )
    )
    df = load(results, workload=out["workload"], scale=out["scale"])
    df.attrs["results"] = os.fspath(results)
    df.attrs["summary"] = out["summary"]
    return df
