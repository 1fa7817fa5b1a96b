"""Progress of ``geoflash.dask``'s builds and joins on standard error.

On a terminal one line is redrawn (``geoflash.dask build: 5/8 partitions``);
otherwise (CI, a log file) a line is printed per finished task, or per
tenth of them when there are more than 20, so that a long run is never
silent for minutes.
"""

from __future__ import annotations

import sys
import time
from typing import Any, List


def gather(client: Any, futures: List[Any], what: str, show: bool = True) -> List[Any]:
    """``client.gather(futures)``, printing to standard error how many of
    them (``what``: ``"build: partitions"``…, the noun last) are done as
    they finish. The first failure raises as ``gather`` raises it."""
    if not show or not futures:
        return client.gather(futures)
    from distributed import as_completed

    stream = sys.stderr
    tty = stream.isatty()
    total = len(futures)
    step = 1 if total <= 20 else max(1, total // 10)
    label, _, noun = what.rpartition(": ")
    start = time.monotonic()
    done = 0
    for fut in as_completed(futures):
        if fut.status == "error":
            break  # gather below raises its exception
        done += 1
        if tty or done % step == 0 or done == total:
            line = f"geoflash.dask {label}: {done}/{total} {noun} ({time.monotonic() - start:.1f} s)"
            stream.write(("\r" + line) if tty else line + "\n")
            stream.flush()
    if tty:
        stream.write("\n")
        stream.flush()
    return client.gather(futures)
