"""The timing helper the Python benchmark scripts share."""

import statistics
import time


def median_time(f, repeats):
    """Call ``f`` once to warm up, then ``repeats`` times.

    Returns ``(median seconds, every run's seconds, the last result)``.
    """
    f()
    times = []
    out = None
    for _ in range(repeats):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times, out
