"""The first batch of windows after opening an index from Python (cold: the
store's buffers empty, the file in the OS page cache) against the same batch
repeated in the same process (warm), as the peer benchmark's ``cold`` and
``warm`` columns measure them (docs/benchmarks.md, "Cold windows").

    .venv/bin/python benchmarks/cold_windows.py INDEX_DIR [N] [REPEATS] [PERCENT]

Builds INDEX_DIR first when it does not exist: N uniform boxes (default
1,000,000; sides up to 0.001 of the unit square, seed 7) inserted one by
one inside one ``batch()``, as the peer benchmark's geoflash row builds.
Then, REPEATS times (default 40): open the index read-only, time one
``intersection_batch`` of 100 square windows of PERCENT % of the unit square
(default 0.001; seed 11) as ``cold``, then five more as ``warm`` (their
median), close. Prints the medians over the repetitions of the open, the
cold batch and the warm batch, and cold / warm.
"""

import os
import statistics
import sys
import time

import numpy as np

import geoflash


def build(path, n):
    rng = np.random.default_rng(7)
    x, y = rng.random(n), rng.random(n)
    w, h = rng.random(n) * 0.001, rng.random(n) * 0.001
    boxes = np.stack([x, y, x + w, y + h], axis=1).tolist()
    idx = geoflash.Index(path)
    with idx.batch():
        for i, b in enumerate(boxes):
            idx.insert(i, b)
    idx.close()


def windows(percent):
    rng = np.random.default_rng(11)
    side = (percent / 100.0) ** 0.5
    x, y = rng.random(100) * (1 - side), rng.random(100) * (1 - side)
    return np.stack([x, y, x + side, y + side], axis=1)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    percent = float(sys.argv[4]) if len(sys.argv) > 4 else 0.001
    if not os.path.exists(path):
        build(path, n)
    qs = windows(percent)
    opens, colds, warms = [], [], []
    answers = set()
    for _ in range(repeats):
        t = time.perf_counter()
        idx = geoflash.Index(path, readonly=True)
        opens.append(time.perf_counter() - t)
        t = time.perf_counter()
        offsets, found = idx.intersection_batch(qs)
        colds.append(time.perf_counter() - t)
        answers.add(len(found))
        ws = []
        for _ in range(5):
            t = time.perf_counter()
            offsets, found = idx.intersection_batch(qs)
            ws.append(time.perf_counter() - t)
            answers.add(len(found))
        warms.append(statistics.median(ws))
        idx.close()
    if len(answers) != 1:
        raise SystemExit(f"the passes disagree: {sorted(answers)} results")
    cold, warm = statistics.median(colds), statistics.median(warms)
    print(f"{path}: {answers.pop()} results; open {1e3 * statistics.median(opens):.2f} ms,"
          f" cold {1e3 * cold:.2f} ms, warm {1e3 * warm:.2f} ms, cold/warm {cold / warm:.1f}"
          f" (medians of {repeats})")


if __name__ == "__main__":
    main()
