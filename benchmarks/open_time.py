"""Time to open an index from Python: ``geoflash.Index(path)`` then
``close()``, REPEATS times in one process; prints the median, the fastest
and the slowest open (docs/benchmarks.md, "Opening an index from Python").

    .venv/bin/python benchmarks/open_time.py INDEX_DIR [REPEATS] [LABEL]
"""

import statistics
import sys
import time

import geoflash


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    path = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 21
    label = sys.argv[3] if len(sys.argv) > 3 else path
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        idx = geoflash.Index(path)
        ts.append(time.perf_counter() - t0)
        idx.close()
    print(f"{label}: open median {1e3 * statistics.median(ts):.2f} ms"
          f" (min {1e3 * min(ts):.2f}, max {1e3 * max(ts):.2f}, {repeats} opens)")


if __name__ == "__main__":
    main()
