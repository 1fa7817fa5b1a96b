"""Distributed workbench sweeps: ``run`` spreads the configurations ×
repetitions of a workload over a Dask cluster, one task each.

A task runs its one configuration (``geoflash.bench``'s runner with
``pick``) into a throw-away SQLite store on its worker's disk, under
``workdir`` (the worker's temporary directory by default). Then, with an
SQLite results store, it returns the rows and the client writes each
configuration's rows into its store in one transaction as the task
finishes; with a PostgreSQL results store (a ``postgresql://`` URL), the
worker copies its configuration's rows into that database itself, in one
transaction (``_geoflash.bench_copy_configuration``, the workbench's Rust
results store), so a worker killed while writing leaves nothing of it.
Configurations already complete in the store are not submitted, and a
task whose configuration is complete by the time it runs or writes (Dask
retried it after its worker died, or another copy of it finished first)
writes nothing, so retries and sweeps resumed after an interruption never
add rows twice. The workload file is read by the workers at the same path
(a shared file system, or the same machine); a workload given as a dict
travels with the tasks.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
import tempfile
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from .. import _geoflash
from .cluster import get_client

_TABLES = ("runs", "configurations", "results")


def _rows(con: sqlite3.Connection, table: str) -> List[Dict[str, Any]]:
    cur = con.execute(f"SELECT * FROM {table}")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


@contextlib.contextmanager
def _run_alone(
    text: str, from_json: bool, scale: str, only: List[str], position: int, workdir: Optional[str]
) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """Runs configuration ``position`` of the workload on this worker into
    a temporary SQLite results store; yields its path and the run summary
    (the store is removed afterwards). Raises when the configuration failed."""
    if workdir is not None:
        os.makedirs(workdir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="geoflash-sweep-", dir=workdir) as tmp:
        store = os.path.join(tmp, "r.sqlite")
        out = json.loads(
            _geoflash.bench_run(
                text, store, scale=scale, from_json=from_json, only=list(only),
                workdir=tmp, pick=position,
            )
        )
        if out["summary"]["failures"]:
            raise RuntimeError("; ".join(out["summary"]["failures"]))
        yield store, out["summary"]


def run_one(
    text: str, from_json: bool, scale: str, only: List[str], position: int, workdir: Optional[str]
) -> Dict[str, Any]:
    """Runs configuration ``position`` of the workload on this worker into
    a temporary results store and returns its rows (``runs``,
    ``configurations``, ``results`` as lists of column dicts) with the run
    summary. Raises when the configuration failed."""
    with _run_alone(text, from_json, scale, only, position, workdir) as (store, summary):
        with sqlite3.connect(store) as con:
            rows = {t: _rows(con, t) for t in _TABLES}
        con.close()
    rows["summary"] = summary
    return rows


def run_one_into(
    text: str, from_json: bool, scale: str, only: List[str], position: int, key: str,
    results: str, workdir: Optional[str],
) -> Optional[int]:
    """Runs configuration ``position`` (its key ``key``) of the workload on
    this worker and copies its rows into the PostgreSQL results store
    ``results`` in one transaction; returns the number of result rows
    written, or None when the store already holds the configuration
    complete (then nothing is run or written). Raises when the
    configuration failed."""
    if _geoflash.bench_is_complete(results, key):
        return None
    with _run_alone(text, from_json, scale, only, position, workdir) as (store, _):
        return _geoflash.bench_copy_configuration(store, results, key)


def _insert(con: sqlite3.Connection, table: str, row: Dict[str, Any], drop: str) -> int:
    cols = [c for c in row if c != drop]
    cur = con.execute(
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        [row[c] for c in cols],
    )
    return int(cur.lastrowid)


def _key_identity(key: str) -> Optional[Dict[str, Any]]:
    """The configuration a workbench key names, whatever its steps (the
    key without its ``steps`` digest); None for a key that is not the
    workbench's JSON (as the Rust store's ``key_identity``)."""
    try:
        v = json.loads(key)
    except ValueError:
        return None
    if not isinstance(v, dict) or "configuration" not in v:
        return None
    v.pop("steps", None)
    return v


def _drop_superseded(con: sqlite3.Connection, config: Dict[str, Any]) -> None:
    """Deletes, with their results, the configurations of the same workload
    and scale that name the same configuration as ``config`` under another
    key (recorded with other steps, or before keys held them): their rows
    measured another workload, and a report would pool them with these."""
    identity = _key_identity(config["config_key"])
    if identity is None:
        return
    others = con.execute(
        "SELECT config_id, config_key FROM configurations WHERE workload = ? AND scale = ? AND config_key <> ?",
        (config["workload"], config["scale"], config["config_key"]),
    ).fetchall()
    for config_id, key in others:
        if _key_identity(key) == identity:
            con.execute("DELETE FROM results WHERE config_id = ?", (config_id,))
            con.execute("DELETE FROM configurations WHERE config_id = ?", (config_id,))


def store_rows(results: str, rows: Dict[str, Any]) -> bool:
    """Writes one configuration's rows into the SQLite store ``results`` in
    one transaction, unless the store already holds it complete (returns
    False then). An incomplete copy (an interrupted ``geoflash bench``) is
    replaced."""
    (config,) = rows["configurations"]
    con = sqlite3.connect(results, timeout=60)
    try:
        with con:
            found = con.execute(
                "SELECT config_id, completed_at FROM configurations WHERE config_key = ?",
                (config["config_key"],),
            ).fetchone()
            if found is not None and found[1] is not None:
                return False
            if found is not None:
                con.execute("DELETE FROM results WHERE config_id = ?", (found[0],))
                con.execute("DELETE FROM configurations WHERE config_id = ?", (found[0],))
            _drop_superseded(con, config)
            run_ids = {r["run_id"]: _insert(con, "runs", r, "run_id") for r in rows["runs"]}
            config_id = _insert(con, "configurations", dict(config, run_id=run_ids.get(config["run_id"])), "config_id")
            for r in rows["results"]:
                _insert(con, "results", dict(r, run_id=run_ids[r["run_id"]], config_id=config_id), "result_id")
        return True
    finally:
        con.close()


class _Bar:
    """A one-line progress bar on standard error."""

    def __init__(self, total: int, label: str, enabled: bool) -> None:
        self.total, self.done, self.label, self.enabled = total, 0, label, enabled
        self.draw()

    def draw(self) -> None:
        if not self.enabled:
            return
        width = 30
        fill = width * self.done // max(self.total, 1)
        sys.stderr.write(f"\r{self.label} [{'=' * fill}{' ' * (width - fill)}] {self.done}/{self.total} configurations")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    def step(self) -> None:
        self.done += 1
        self.draw()


def run(
    workload: Union[str, os.PathLike, Mapping],
    client: Any = None,
    results: Optional[Union[str, os.PathLike]] = None,
    *,
    scale: str = "small",
    workdir: Optional[Union[str, os.PathLike]] = None,
    only: Iterable[str] = (),
    retries: int = 3,
    progress: bool = True,
    timeout: float = 10.0,
):
    """Runs ``workload`` (a TOML file or a dict, as ``geoflash.bench.run``)
    at ``scale`` on the Dask cluster ``client`` (see
    ``geoflash.dask.get_client``), one task per configuration ×
    repetition, each retried up to ``retries`` times when it fails or its
    worker dies, and returns the workload's rows of the results store
    ``results`` as ``geoflash.bench.run`` does.

    ``results``: an SQLite file (a temporary file when None), into which
    the client writes each configuration's rows as its task finishes; or a
    PostgreSQL URL (``postgresql://user[:password]@host[:port]/db``, the
    workbench's shared store; ``PGPASSWORD`` on every worker when the URL
    has no password), into which every worker writes its configuration's
    rows itself, in one transaction, so a worker killed mid-write leaves
    nothing of it. A server that cannot be reached from the client is an
    ``OSError`` naming the URL without its password, before any task is
    submitted. Configurations already complete in the store are skipped,
    and a retried task whose configuration is complete writes nothing.

    ``workdir``: where the workers put their index directories (their
    temporary directory by default). ``df.attrs["results"]``: the store;
    ``df.attrs["summary"]``: how many configurations were ``executed``,
    ``skipped_complete`` (already in the store) and the ``failures``."""
    from distributed import as_completed

    from .. import bench

    if results is None:
        fd, results = tempfile.mkstemp(prefix="geoflash-sweep-", suffix=".sqlite")
        os.close(fd)
        os.unlink(results)
    results = os.fspath(results)
    shared = _geoflash.bench_location(results)[1]
    if not shared:
        results = os.path.abspath(results)
    if isinstance(workload, Mapping):
        text, from_json = json.dumps(workload), True
    else:
        text, from_json = os.path.abspath(os.fspath(workload)), False
        if not os.path.isfile(text):
            raise FileNotFoundError(f"workload {text} does not exist")
    only = list(only)
    # Opens (creates) the store: an unreachable server fails here, before any task.
    plan = json.loads(_geoflash.bench_plan(text, results, scale=scale, from_json=from_json, only=only))
    todo = [c for c in plan["configurations"] if not c["complete"]]
    summary = {
        "configurations": len(plan["configurations"]),
        "executed": 0,
        "skipped_complete": len(plan["configurations"]) - len(todo),
        "rows": 0,
        "failures": [],
    }
    if todo:
        client = get_client(client, timeout)
        wd = None if workdir is None else os.fspath(workdir)

        def submit(c):
            key = f"geoflash-sweep-{plan['workload']}-{c['position']}-{os.urandom(4).hex()}"
            if shared:
                return client.submit(
                    run_one_into, text, from_json, scale, only, c["position"], c["key"], results, wd,
                    retries=retries, pure=False, key=key,
                )
            return client.submit(
                run_one, text, from_json, scale, only, c["position"], wd,
                retries=retries, pure=False, key=key,
            )

        futs = {submit(c): c for c in todo}
        bar = _Bar(len(todo), plan["workload"], progress)
        for fut in as_completed(futs):
            c = futs[fut]
            try:
                out = fut.result()
            except Exception as e:  # a failed configuration is reported, the sweep goes on
                summary["failures"].append(f"{c['what']}: {type(e).__name__}: {e}")
            else:
                # the rows the worker wrote (PostgreSQL), or the client writes now
                written = out if shared else (len(out["results"]) if store_rows(results, out) else None)
                if written is None:
                    summary["skipped_complete"] += 1
                else:
                    summary["executed"] += 1
                    summary["rows"] += written
            bar.step()
    df = bench.load(results, workload=plan["workload"], scale=plan["scale"])
    df.attrs["results"] = results
    df.attrs["summary"] = summary
    return df


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m geoflash.dask.sweep WORKLOAD --scheduler ADDRESS --results
    FILE|URL [--scale S] [--index NAME]... [--workdir DIR] [--retries N]``: what
    ``geoflash bench --dask`` runs. Exits 1 when a configuration failed."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m geoflash.dask.sweep", description=main.__doc__)
    ap.add_argument("workload")
    ap.add_argument("--scheduler", required=True, help="address of the Dask scheduler (tcp://host:8786)")
    ap.add_argument(
        "--results", required=True,
        help="SQLite results store on this machine, or a PostgreSQL URL every worker writes to",
    )
    ap.add_argument("--scale", default="small")
    ap.add_argument("--index", action="append", default=[], dest="only")
    ap.add_argument("--workdir")
    ap.add_argument("--retries", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=10.0)
    a = ap.parse_args(argv)
    try:
        df = run(
            a.workload, client=a.scheduler, results=a.results, scale=a.scale, workdir=a.workdir,
            only=a.only, retries=a.retries, progress=sys.stderr.isatty(), timeout=a.timeout,
        )
    except (OSError, ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    s = df.attrs["summary"]
    print(
        f"{s['configurations']} configurations: {s['executed']} executed, "
        f"{s['skipped_complete']} already complete, {len(s['failures'])} failed; {s['rows']} rows in {_geoflash.bench_location(a.results)[0]}"
    )
    for f in s["failures"]:
        print(f"failed: {f}", file=sys.stderr)
    return 1 if s["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
