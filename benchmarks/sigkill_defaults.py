#!/usr/bin/env python3
"""SIGKILL campaign on a build with the product defaults: `geoflash build
--input DATA --index WORK/idx --ack-every 10000` killed at a random moment,
then `geoflash recover` and a query of everything. Each trial must recover
exactly a prefix of the input (ids 0..k-1, as `geoflash generate` writes
them) that holds every acknowledged insertion.

    python3 benchmarks/sigkill_defaults.py target/release/geoflash u1m.csv WORK \
        [--trials 12] [--seed 5] [--after 2.0 --before 9.0] \
        [--build-args "--buffer 512KiB --device file --log-capacity 2MiB"]

`--build-args` adds options to every build (a small budget and log make
the build flush, compact and re-encode its log while it is killed).

Exits 1 if any trial fails. The crash tests of `make test` and `make
test-long` set small budgets of their own; this exercises the default one
(docs/benchmarks.md, "The default memory budget").
"""
import argparse
import json
import random
import shlex
import shutil
import subprocess
import sys
import threading
import time


def trial(bin_, data, idx, wait, extra=()):
    shutil.rmtree(idx, ignore_errors=True)
    p = subprocess.Popen([bin_, "build", "--input", data, "--index", idx, "--ack-every", "10000", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    acked = [0]

    def read():
        for line in p.stdout:
            if line.startswith("acked "):
                acked[0] = int(line.split()[1])

    t = threading.Thread(target=read)
    t.start()
    time.sleep(wait)
    p.kill()
    p.wait()
    t.join()
    r = subprocess.run([bin_, "recover", "--index", idx, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        return acked[0], None, f"recover failed: {r.stderr[-300:]}"
    q = subprocess.run([bin_, "query", "--index", idx, "--window", "-1e150,-1e150,1e150,1e150", "--ids", "--json"],
                       capture_output=True, text=True, check=True)
    ids = sorted(json.loads(q.stdout.strip().splitlines()[-1])["windows"][0]["ids"])
    k = len(ids)
    if ids != list(range(k)):
        return acked[0], k, "not a prefix of the input"
    if k < acked[0]:
        return acked[0], k, "lost acknowledged insertions"
    return acked[0], k, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bin")
    ap.add_argument("data")
    ap.add_argument("work")
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--after", type=float, default=2.0)
    ap.add_argument("--before", type=float, default=9.0)
    ap.add_argument("--build-args", default="", help="options added to every build")
    a = ap.parse_args()
    extra = shlex.split(a.build_args)
    rng = random.Random(a.seed)
    failed = 0
    for i in range(a.trials):
        acked, k, why = trial(a.bin, a.data, f"{a.work}/idx", rng.uniform(a.after, a.before), extra)
        print(f"trial {i}: acknowledged {acked}, recovered {k}: {why or 'ok'}", flush=True)
        failed += why is not None
    print(f"{a.trials - failed} of {a.trials} trials recovered every acknowledged insertion as a prefix")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
