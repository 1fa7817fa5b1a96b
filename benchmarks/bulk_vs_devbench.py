#!/usr/bin/env python3
"""Bulk-load throughput against the device's sequential-write throughput, in
one run (issue 15's bulk-load target: a bulk load writes at >= 50 % of
`devbench --pattern seq-write` on the same file).

    benchmarks/bulk_vs_devbench.py --bin target/release/geoflash \
        --data u200k.csv --workdir /tmp/bvd [--reps 3] [--bulk str] \
        [--device-mode buffered|direct]

Per repetition, alternating: `geoflash build --input DATA --index DIR --bulk
B --json` (the default store and device; `--device-mode direct` adds
`--device file` with O_DIRECT, as the papers' settings do), and `geoflash
devbench --device file:WORKDIR/dev.dat?direct=… --pattern seq-write --count
N --batch 256` with N the pages the build wrote, so both write the same
bytes to the same filesystem. The build's throughput is the bytes it wrote
to its devices over its whole wall time (reading and sorting the input
included, as a user waits for it); devbench's is its own report. Medians.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import time


def last_json(out):
    """The JSON summary a geoflash command prints as its last line."""
    return json.loads(out.strip().splitlines()[-1])


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="geoflash binary")
    ap.add_argument("--data", required=True, help="CSV id,minx,miny,maxx,maxy")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bulk", default="str", help="str or hilbert")
    ap.add_argument("--device-mode", choices=["buffered", "direct"], default="buffered")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    direct = a.device_mode == "direct"
    index = os.path.join(a.workdir, "idx")
    dev = os.path.join(a.workdir, "dev.dat")
    builds, benches = [], []
    last = None
    for _ in range(a.reps):
        shutil.rmtree(index, ignore_errors=True)
        extra = ["--device", "file"] if direct else []
        t = time.perf_counter()
        s = last_json(
            run([a.bin, "build", "--input", a.data, "--index", index, "--bulk", a.bulk,
                 "--json", *extra])
        )
        wall = time.perf_counter() - t
        written = s["bytes_written"]
        builds.append(written / wall / 1e6)
        page = s.get("page_size", 4096)
        pages = max(1, written // page)
        if os.path.exists(dev):
            os.remove(dev)
        d = last_json(
            run([a.bin, "devbench", "--device", f"file:{dev}?direct={str(direct).lower()}",
                 "--pattern", "seq-write", "--count", str(pages), "--batch", "256",
                 "--page-size", str(page), "--region", str(pages * page), "--json"])
        )
        benches.append(d["mb_per_sec"])
        last = (s, d, wall)
    s, d, wall = last
    b, q = statistics.median(builds), statistics.median(benches)
    print(f"bulk load ({a.bulk}, {a.device_mode}): {b:.1f} MB/s median "
          f"[{' '.join(f'{x:.1f}' for x in builds)}]; last run {wall:.2f} s, "
          f"{s['bytes_written'] / 1e6:.1f} MB written, syncs {s.get('syncs')}")
    print(f"devbench seq-write: {q:.1f} MB/s median [{' '.join(f'{x:.1f}' for x in benches)}]")
    print(f"bulk load / seq-write: {b / q:.2f}")


if __name__ == "__main__":
    main()
