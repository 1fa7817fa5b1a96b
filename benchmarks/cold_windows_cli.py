"""Cold batches of windows and of kNN points from the command line, two
binaries alternated, with the device's QD64 random-read rate measured in
the same run (docs/benchmarks.md, "Cold windows and kNN at device depth").

    python3 benchmarks/cold_windows_cli.py --before OLD_BINARY --after NEW_BINARY \\
        --index i1000000 --index i10000000 --windows w3.csv --windows w5.csv \\
        --points p.csv --k 10 --device-file dev.dat [--rounds 5]

Before every run the files it reads are dropped from the page cache
(``posix_fadvise(POSIX_FADV_DONTNEED)`` on each file of the index, and on
DEVICE_FILE before ``devbench``): the index is cold, the binary is not (as
for a user whose program is running). No root needed.

Each round first measures ``geoflash devbench --pattern random-read --batch
64 --no-prefill`` on DEVICE_FILE (a file of at least 1 GiB, written
beforehand) buffered and with O_DIRECT, then runs ``geoflash query --index I
--windows W --json -q`` and ``geoflash knn --index I --points P --k K --json
-q`` for every index, windows and points file with both binaries,
alternating which goes first. Prints per case the results, the pages read,
the device batches, the medians of the wall times (``wall_time_ns``), the
pages read per second and their ratio to the device's QD64 rates. With
``fio`` on the PATH each round also measures fio's random 4 KiB reads at a
steady queue depth of 64 (io_uring, 20,000 of them), buffered and direct.
"""

import argparse
import json
import os
import shutil
import statistics as st
import subprocess


def evict(path):
    """Drops the file at `path` (every file of it, for a directory) from the page cache."""
    files = [os.path.join(path, f) for f in os.listdir(path)] if os.path.isdir(path) else [path]
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def last_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def device_rate(binary, device_file, direct):
    evict(device_file)
    d = last_json([binary, "devbench", "--device", f"file:{device_file}?direct={direct}",
                   "--pattern", "random-read", "--count", "20000", "--batch", "64",
                   "--region", "1GiB", "--no-prefill", "--json", "-q"])
    return d["ops_per_sec"]


def fio_rate(device_file, direct):
    """fio's random 4 KiB reads at a steady queue depth of 64 (io_uring),
    20,000 of them as devbench does: I/Os per second, or None without fio."""
    if shutil.which("fio") is None:
        return None
    evict(device_file)
    out = subprocess.run(["fio", "--name=qd64", f"--filename={device_file}", "--rw=randread",
                          "--bs=4k", "--iodepth=64", "--ioengine=io_uring", f"--direct={int(direct == 'true')}",
                          "--number_ios=20000", "--size=1G", "--output-format=json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["jobs"][0]["read"]["iops"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the binary measured as 'before'")
    ap.add_argument("--after", required=True, help="the binary measured as 'after'")
    ap.add_argument("--index", action="append", required=True, help="an index directory (repeatable)")
    ap.add_argument("--windows", action="append", default=[], help="a windows CSV (repeatable)")
    ap.add_argument("--points", action="append", default=[], help="a CSV of kNN points x,y (repeatable)")
    ap.add_argument("--k", type=int, default=10, help="neighbours per kNN point")
    ap.add_argument("--device-file", required=True, help="a file of at least 1 GiB for devbench")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    bins = {"before": a.before, "after": a.after}
    cases = [("windows", w, ["query", "--windows", w]) for w in a.windows]
    cases += [("knn", p, ["knn", "--points", p, "--k", str(a.k)]) for p in a.points]
    rows, dev, fio = {}, {"false": [], "true": []}, {"false": [], "true": []}
    for r in range(a.rounds):
        for direct in dev:
            dev[direct].append(device_rate(a.after, a.device_file, direct))
            rate = fio_rate(a.device_file, direct)
            if rate is not None:
                fio[direct].append(rate)
        for index in a.index:
            for kind, name, args in cases:
                for b in ("before", "after") if r % 2 == 0 else ("after", "before"):
                    evict(index)
                    d = last_json([bins[b], *args[:1], "--index", index, *args[1:], "--json", "-q"])
                    s = d["stats"]
                    rows.setdefault((index, name, b), []).append(
                        (s["wall_time_ns"] / 1e6, s["pages_read"], s["read_batches"], s["query_results"]))
    qd = {direct: st.median(v) for direct, v in dev.items()}
    for direct, v in dev.items():
        print(f"devbench QD64 direct={direct}: median {qd[direct]:,.0f} pages/s, runs {[round(x) for x in v]}")
    for direct, v in fio.items():
        if v:
            print(f"fio QD64 direct={direct}: median {st.median(v):,.0f} IOPS, runs {[round(x) for x in v]}")
    fio_direct = st.median(fio["true"]) if fio["true"] else None
    for (index, name, b), v in sorted(rows.items()):
        ms = st.median(x[0] for x in v)
        pages, batches, results = v[0][1], st.median(x[2] for x in v), v[0][3]
        rate = pages / ms * 1000
        print(f"{index} {name} {b:6} results {results} pages {pages} batches {batches} ms {ms:.2f} "
              f"runs {[round(x[0], 2) for x in v]} pages/s {rate:,.0f} "
              f"= {rate / qd['false']:.0%} of buffered, {rate / qd['true']:.0%} of O_DIRECT devbench QD64"
              + (f", {rate / fio_direct:.0%} of fio's O_DIRECT QD64" if fio_direct else ""))


if __name__ == "__main__":
    main()
