"""What one Python commit costs (issue 43, item 1; docs/benchmarks.md,
"The record map in the store's log").

Usage: python commit_cost.py N COMMITS MOVES METHOD DIR

N uniform boxes (seed 7) built by ``Index.from_arrays(path=DIR)`` and
reopened, then COMMITS commits (``with idx.batch():``) of MOVES moves of
distinct objects by at most 0.05 % of the extent, each by METHOD:
``update_batch`` (the record map does not change) or ``delete_insert``
(``delete(id, old)`` + ``insert(id, new)``: a REMOVE and an ADD of the
record map). Prints one JSON line: the median and mean per commit of the
wall time (ms), the kernel's ``write_bytes`` (``/proc/self/io``), the
growth of ``pyrecords.log`` (0 where the map's changes go to the store's
log) and the engine's counters (``Index.stats``: log bytes, log syncs,
device syncs, device bytes written). Count the process's ``fdatasync``
calls with ``strace -f -c -e trace=fsync,fdatasync``."""
import json
import os
import shutil
import sys
import time

import numpy as np
import geoflash

n, commits, per, method, d = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
rng = np.random.default_rng(7)
x = rng.uniform(0, 1000, n)
y = rng.uniform(0, 1000, n)
s = rng.uniform(0.0, 0.5, n)
boxes = np.column_stack([x, y, x + s, y + s])
ids = np.arange(n, dtype=np.int64)
shutil.rmtree(d, ignore_errors=True)
idx = geoflash.Index.from_arrays(ids, boxes, path=d)
idx.close()
idx = geoflash.Index(d)

def wb():
    for line in open("/proc/self/io"):
        if line.startswith("write_bytes"):
            return int(line.split()[1])

def st():
    s = idx.stats
    return {k: s.get(k, 0) or 0 for k in ("log_bytes", "log_syncs", "syncs", "bytes_written")}

def plog():
    try:
        return os.path.getsize(os.path.join(d, "pyrecords.log"))
    except OSError:
        return 0

rows = []
for c in range(commits):
    pick = rng.choice(n, per, replace=False)
    step = rng.uniform(-0.5, 0.5, (per, 2))
    old = boxes[pick].copy()
    new = old.copy()
    new[:, [0, 2]] += step[:, :1]
    new[:, [1, 3]] += step[:, 1:]
    s0, w0, p0 = st(), wb(), plog()
    t = time.perf_counter()
    with idx.batch():
        if method == "update_batch":
            idx.update_batch(ids[pick], new)
        else:
            dl, ins = idx.delete, idx.insert
            for i, o, b in zip(ids[pick].tolist(), old.tolist(), new.tolist()):
                dl(i, o)
                ins(i, b)
    ms = (time.perf_counter() - t) * 1e3
    s1, w1, p1 = st(), wb(), plog()
    boxes[pick] = new
    rows.append(dict(ms=ms, write_bytes=w1 - w0, pyrecords_log=p1 - p0,
                     **{k: s1[k] - s0[k] for k in s0}))
idx.close()
keys = list(rows[0])
med = {k: float(np.median([r[k] for r in rows])) for k in keys}
mean = {k: float(np.mean([r[k] for r in rows])) for k in keys}
print(json.dumps(dict(n=n, commits=commits, per=per, method=method, median=med, mean=mean)))
