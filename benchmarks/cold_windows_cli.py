"""Cold batches of windows from the command line, two binaries alternated,
with the device's QD64 random-read rate measured in the same run
(docs/benchmarks.md, "Cold windows at device depth"). Needs root: every
query runs in a new process after ``sync; echo 3 > /proc/sys/vm/drop_caches``.

    python3 benchmarks/cold_windows_cli.py --before OLD_BINARY --after NEW_BINARY \\
        --index i1000000 --index i10000000 --windows w3.csv --windows w5.csv \\
        --device-file dev.dat [--rounds 3]

Each round first measures ``geoflash devbench --pattern random-read --batch
64 --no-prefill`` on DEVICE_FILE (a file of at least 1 GiB, written
beforehand) buffered and with O_DIRECT, then runs ``geoflash query --index I
--windows W --json -q`` for every index and windows file with both
binaries, alternating which goes first. Prints per case the results, the
pages read, the device batches and the medians of the wall times
(``wall_time_ns``), and the device's medians.
"""

import argparse
import json
import statistics as st
import subprocess


def drop_caches():
    subprocess.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True, check=True)


def last_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the binary measured as 'before'")
    ap.add_argument("--after", required=True, help="the binary measured as 'after'")
    ap.add_argument("--index", action="append", required=True, help="an index directory (repeatable)")
    ap.add_argument("--windows", action="append", required=True, help="a windows CSV (repeatable)")
    ap.add_argument("--device-file", required=True, help="a file of at least 1 GiB for devbench")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    bins = {"before": a.before, "after": a.after}
    rows, dev = {}, {"false": [], "true": []}
    for r in range(a.rounds):
        for direct in dev:
            drop_caches()
            d = last_json([a.after, "devbench", "--device", f"file:{a.device_file}?direct={direct}",
                           "--pattern", "random-read", "--count", "20000", "--batch", "64",
                           "--region", "1GiB", "--no-prefill", "--json", "-q"])
            dev[direct].append(d["ops_per_sec"])
        for index in a.index:
            for windows in a.windows:
                for name in ("before", "after") if r % 2 == 0 else ("after", "before"):
                    drop_caches()
                    d = last_json([bins[name], "query", "--index", index, "--windows", windows, "--json", "-q"])
                    s = d["stats"]
                    results = sum(w["count"] for w in d["windows"])
                    rows.setdefault((index, windows, name), []).append(
                        (s["wall_time_ns"] / 1e6, s["pages_read"], s["read_batches"], results))
    for (index, windows, name), v in sorted(rows.items()):
        ms = st.median(x[0] for x in v)
        pages, batches, results = v[0][1], st.median(x[2] for x in v), v[0][3]
        print(f"{index} {windows} {name:6} results {results} pages {pages} batches {batches} "
              f"ms {ms:.2f} runs {[round(x[0], 2) for x in v]} pages/s {pages / ms * 1000:,.0f}")
    for direct, v in dev.items():
        print(f"devbench QD64 direct={direct}: median {st.median(v):,.0f} pages/s, runs {[round(x) for x in v]}")


if __name__ == "__main__":
    main()
