"""The peer benchmark's results: a SQLite store, Markdown tables and a plot."""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Dict, List, Optional

METRICS = ["wall_s", "cpu_s", "bytes_written", "size_bytes", "open_s", "cold_s", "warm_s", "mismatches"]
DASH = "—"


def save(path: str, run: dict, rows: List[dict]) -> None:
    """Appends one run to ``peer_runs`` and its measurements to ``peer_results``."""
    con = sqlite3.connect(path)
    with con:
        con.execute(
            "CREATE TABLE IF NOT EXISTS peer_runs (run_id INTEGER PRIMARY KEY, started TEXT, host TEXT,"
            " scale TEXT, n INTEGER, python TEXT)"
        )
        con.execute(
            "CREATE TABLE IF NOT EXISTS peer_results (run_id INTEGER REFERENCES peer_runs(run_id),"
            " dataset TEXT, n INTEGER, system TEXT, phase TEXT, built_by TEXT, wall_s REAL, cpu_s REAL,"
            " bytes_written INTEGER, size_bytes INTEGER, open_s REAL, cold_s REAL, warm_s REAL,"
            " mismatches INTEGER, error TEXT)"
        )
        cur = con.execute(
            "INSERT INTO peer_runs (started, host, scale, n, python) VALUES (?,?,?,?,?)",
            (run["started"], run["host"], run["scale"], run["n"], run["python"]),
        )
        rid = cur.lastrowid
        run["run_id"] = rid
        for r in rows:
            con.execute(
                "INSERT INTO peer_results VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (rid, r["dataset"], r["n"], r["system"], r["phase"], r.get("built_by"))
                + tuple(r.get(m) for m in METRICS)
                + (r.get("error"),),
            )
    con.close()


def _index(rows: List[dict]) -> Dict[str, Dict[str, Dict[str, dict]]]:
    out: Dict[str, Dict[str, Dict[str, dict]]] = {}
    for r in rows:
        out.setdefault(r["dataset"], {}).setdefault(r["system"], {})[r["phase"]] = r
    return out


def _fmt(v, scale=1.0, digits=1) -> str:
    if v is None:
        return DASH
    return f"{v * scale:,.{digits}f}"


COLUMNS = [
    ("insert s", "build insert", "wall_s", 1.0, 2),
    ("insert MB written", "build insert", "bytes_written", 1e-6, 1),
    ("bulk s", "build bulk", "wall_s", 1.0, 2),
    ("bulk MB written", "build bulk", "bytes_written", 1e-6, 1),
    ("index MB", None, "size_bytes", 1e-6, 1),
]


def _query_phases(systems: Dict[str, Dict[str, dict]]) -> List[str]:
    seen = []
    for phases in systems.values():
        for p in phases:
            if (p.startswith("windows") or p == "knn") and p not in seen:
                seen.append(p)
    return sorted(seen, key=lambda p: (p == "knn", float(p.split()[1].rstrip("%")) if p != "knn" else 0))


def markdown(run: dict, rows: List[dict]) -> str:
    """Per dataset: every system's builds and queries, then ratios to geoflash."""
    lines = [
        f"# Peer benchmark ({run['scale']}, {run['n']:,} objects per generated dataset; {run['started']}, {run['host']})",
        "",
        "Times are medians where repeated; cold = first pass in a new process after opening, warm = median of later passes;"
        f" queries are {run.get('queries', 100)} per row (ms for all of them). MB written: the kernel's count (`/proc/PID/io`), the server's for PostGIS."
        f" {DASH}: the system has no such operation."
        + (f" In-memory rows: the median of {run['memory_processes']} fresh processes."
           if run.get("memory_processes", 1) > 1 else ""),
        "",
    ]
    if run.get("memory"):
        lines += [run["memory"], ""]
    for ds, systems in _index(rows).items():
        qphases = _query_phases(systems)
        head = ["system"] + [c[0] for c in COLUMNS]
        for q in qphases:
            head += [f"{q} cold ms", f"{q} warm ms"]
        head.append("answers")
        n = next(iter(next(iter(systems.values())).values()))["n"]
        lines += [f"## {ds} ({n:,} objects)", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for sysname, phases in systems.items():
            cells = [sysname]
            for _label, phase, metric, scale, digits in COLUMNS:
                if phase is None:
                    src = phases.get("build bulk") or phases.get("build insert") or {}
                else:
                    src = phases.get(phase, {})
                cells.append(_fmt(src.get(metric), scale, digits))
            for q in qphases:
                r = phases.get(q, {})
                cells += [_fmt(r.get("cold_s"), 1e3, 2), _fmt(r.get("warm_s"), 1e3, 2)]
            errors = [f"{p}: {r['error']}" for p, r in phases.items() if r.get("error")]
            wrong = sum(r.get("mismatches") or 0 for r in phases.values())
            cells.append("error: " + "; ".join(errors) if errors else ("ok" if not wrong else f"{wrong} WRONG"))
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", *ratio_table(systems, qphases), ""]
    return "\n".join(lines) + "\n"


def ratio_table(systems: Dict[str, Dict[str, dict]], qphases: List[str]) -> List[str]:
    """geoflash's default (disk) and memory configurations ÷ each peer (below 1: geoflash better)."""
    out = []
    for ours in ("geoflash", "geoflash (memory)"):
        mine = systems.get(ours)
        if not mine:
            continue
        cols = [("insert s", "build insert", "wall_s"), ("insert bytes", "build insert", "bytes_written"),
                ("bulk s", "build bulk", "wall_s"), ("bulk bytes", "build bulk", "bytes_written")]
        for q in qphases:
            cols += [(f"{q} cold", q, "cold_s"), (f"{q} warm", q, "warm_s")]
        out += [f"{ours} ÷ peer (below 1: {ours} is better)", "",
                "| peer | " + " | ".join(c[0] for c in cols) + " |", "|" + "---|" * (len(cols) + 1)]
        in_memory = ours.endswith("(memory)")
        for peer, phases in systems.items():
            # disk against disk, memory against memory
            if peer.startswith("geoflash") or peer.endswith("(memory)") != in_memory:
                continue
            cells = []
            for _l, phase, metric in cols:
                a = mine.get(phase, {}).get(metric)
                b = phases.get(phase, {}).get(metric)
                cells.append(f"{a / b:.2f}" if a is not None and b else DASH)
            if all(c == DASH for c in cells):
                continue
            out.append(f"| {peer} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def plot(rows: List[dict], path: str) -> Optional[str]:
    """Grouped bars per dataset: build times and 0.01 % windows (cold, warm)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    data = _index(rows)
    if not data:
        return None
    panels = [("build insert", "wall_s", "build by insertion (s)"), ("build bulk", "wall_s", "bulk load (s)"),
              ("windows 0.01%", "cold_s", "100 windows 0.01 %, cold (ms)"),
              ("windows 0.01%", "warm_s", "100 windows 0.01 %, warm (ms)")]
    fig, axes = plt.subplots(len(data), len(panels), figsize=(4.2 * len(panels), 3.2 * len(data)), squeeze=False)
    palette = ["#0072B2", "#56B4E9", "#E69F00", "#009E73", "#F0E442", "#D55E00", "#CC79A7", "#000000",
               "#999999", "#882255", "#44AA99", "#117733"]
    for i, (ds, systems) in enumerate(data.items()):
        names = list(systems)
        for j, (phase, metric, title) in enumerate(panels):
            ax = axes[i][j]
            scale = 1e3 if metric != "wall_s" else 1.0
            vals = [(systems[s].get(phase, {}).get(metric) or 0) * scale for s in names]
            ax.barh(range(len(names)), vals, color=[palette[k % len(palette)] for k in range(len(names))])
            ax.set_yticks(range(len(names)))
            ax.set_yticklabels(names if j == 0 else [""] * len(names), fontsize=7)
            ax.invert_yaxis()
            ax.set_title(f"{ds}: {title}", fontsize=8)
            ax.tick_params(axis="x", labelsize=7)
            ax.set_xscale("symlog", linthresh=0.01)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


MOVING_METRICS = ["method", "commit", "queries_per_commit", "moves", "groups", "queries", "build_s", "moving_s",
                  "moving_cpu_s", "updates_per_s", "loop_bytes", "close_bytes", "bytes_per_update",
                  "bytes_per_update_close", "wal_bytes", "query_during_s", "query_idle_s", "mismatches",
                  "size_before", "size_after", "engine", "error"]


def save_moving(path: str, run: dict, rows: List[dict]) -> None:
    """The moving-objects rows (``moving.py``) into ``moving_results`` of
    the run ``save`` recorded (``run["run_id"]``); ``engine`` is geoflash's
    counters as JSON."""
    con = sqlite3.connect(path)
    with con:
        con.execute(
            "CREATE TABLE IF NOT EXISTS moving_results (run_id INTEGER REFERENCES peer_runs(run_id),"
            " dataset TEXT, n INTEGER, system TEXT, method TEXT, commit_size INTEGER, queries_per_commit INTEGER,"
            " moves INTEGER, groups_ INTEGER, queries INTEGER, build_s REAL, moving_s REAL, moving_cpu_s REAL,"
            " updates_per_s REAL, loop_bytes INTEGER, close_bytes INTEGER, bytes_per_update REAL,"
            " bytes_per_update_close REAL, wal_bytes INTEGER, query_during_s REAL, query_idle_s REAL,"
            " mismatches INTEGER, size_before INTEGER, size_after INTEGER, engine TEXT, error TEXT)"
        )
        for r in rows:
            vals = [r.get(m) for m in MOVING_METRICS]
            eng = MOVING_METRICS.index("engine")
            vals[eng] = json.dumps(vals[eng]) if vals[eng] is not None else None
            con.execute(
                f"INSERT INTO moving_results VALUES ({','.join('?' * (4 + len(MOVING_METRICS)))})",
                [run.get("run_id"), r["dataset"], r["n"], r["system"]] + vals,
            )
    con.close()


MOVING_BASE = "sqlite-rtree"


def moving_markdown(rows: List[dict]) -> str:
    """The section "Moving objects": per dataset every system's rates,
    bytes and query latencies, ratios against SQLite's R*Tree, and
    geoflash's own counters per update."""
    if not rows:
        return ""
    r0 = rows[0]
    lines = [
        "## Moving objects",
        "",
        f"{r0.get('moves', 0):,} moves of {r0['n']:,} objects (each by at most 0.05 % of the extent in x and y,"
        f" same size), committed in groups of {r0['commit']:,}, {r0['queries_per_commit']} windows of 0.01 % after"
        " each commit. updates/s: moves ÷ wall time of the commits (queries excluded). B/update: the kernel's"
        " `write_bytes` over the moving loop (PostGIS: its server processes and the client), then including the"
        " close (checkpoints). Query µs: median of one window between commits, and of the same windows on the"
        " idle index after the moves. Every answer checked against a brute-force oracle.",
        "",
    ]
    by_ds: Dict[str, List[dict]] = {}
    for r in rows:
        by_ds.setdefault(r["dataset"], []).append(r)
    for ds, rs in by_ds.items():
        lines += [f"### {ds} ({rs[0]['n']:,} objects)", "",
                  "| system | method | updates/s | B/update | B/update incl. close | query µs between commits"
                  " | query µs idle | index MB after | answers |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in rs:
            if r.get("error"):
                lines.append(f"| {r['system']} | {r.get('method') or DASH} | " + " | ".join([DASH] * 6)
                             + f" | error: {r['error']} |")
                continue
            wrong = r.get("mismatches") or 0
            lines.append(
                f"| {r['system']} | {r['method']} | {_fmt(r['updates_per_s'], 1, 0)} | {_fmt(r['bytes_per_update'], 1, 0)}"
                f" | {_fmt(r['bytes_per_update_close'], 1, 0)} | {_fmt(r['query_during_s'], 1e6, 0)}"
                f" | {_fmt(r['query_idle_s'], 1e6, 0)} | {_fmt(r['size_after'], 1e-6, 1)}"
                f" | {'ok' if not wrong else f'{wrong} WRONG'} |")
        pg = [r for r in rs if r.get("wal_bytes") is not None]
        for r in pg:
            lines += ["", f"{r['system']}: {r['wal_bytes'] / r['moves']:,.0f} B of WAL per update"
                          f" (`pg_current_wal_lsn()` difference over the moving loop)."]
        base = next((r for r in rs if r["system"] == MOVING_BASE and not r.get("error")), None)
        if base:
            lines += ["", f"÷ {MOVING_BASE} (updates/s: above 1 is faster; bytes and µs: below 1 is better)", "",
                      "| system | updates/s | B/update | B/update incl. close | query between commits | query idle |",
                      "|---|---|---|---|---|---|"]
            for r in rs:
                if r is base or r.get("error"):
                    continue
                cells = []
                for m in ("updates_per_s", "bytes_per_update", "bytes_per_update_close", "query_during_s",
                          "query_idle_s"):
                    a, b = r.get(m), base.get(m)
                    cells.append(f"{a / b:.2f}" if a is not None and b else DASH)
                lines.append(f"| {r['system']} | " + " | ".join(cells) + " |")
        eng = [r for r in rs if r.get("engine")]
        if eng:
            lines += ["", "geoflash's counters per update over the moving loop (`Index.stats` differences)", "",
                      "| system | device B written | syncs | log syncs | log B | flushed nodes | updates in place"
                      " | NAND programs | NAND erases |", "|---|---|---|---|---|---|---|---|---|"]
            for r in eng:
                e, m = r["engine"], r["moves"]
                sim = r.get("device_simulated")
                cells = [_fmt(e.get(k, 0) / m, 1, d) for k, d in
                         (("bytes_written", 0), ("syncs", 4), ("log_syncs", 4), ("log_bytes", 0), ("flushed_nodes", 3))]
                cells.append(_fmt(e["updates_in_place"] / m, 1, 3) if "updates_in_place" in e else DASH)
                cells += [_fmt(e.get(k, 0) / m, 1, 3) if sim else DASH for k in ("nand_programs", "nand_erases")]
                lines.append(f"| {r['system']} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def load(path: str) -> List[dict]:
    """Every measurement of a results store, as dicts (newest run last)."""
    con = sqlite3.connect(path)
    con.row_factory = sqlite3.Row
    rows = [dict(r) for r in con.execute("SELECT * FROM peer_results ORDER BY run_id")]
    con.close()
    return rows


if __name__ == "__main__":  # print the newest run of a store as JSON lines
    import sys

    for r in load(sys.argv[1]):
        print(json.dumps(r))
