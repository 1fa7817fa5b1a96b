"""Reading scattered pages of a file in the OS page cache: one `pread` a
page against a fresh read-only mapping touched once a page (what a cold
first pass would cost through either), as docs/benchmarks.md ("Cold
windows and the open, from Python") quotes it.

    python3 benchmarks/page_access.py FILE [PAGES] [REPEATS]

Each repetition draws PAGES page numbers (default 300, about what 100
windows of 0.001 % read on 1,000,000 boxes) and times reading them with
`os.pread` (4 KiB each), then, with a new draw, mapping the file, reading
one byte of each page and unmapping it. Prints the medians per page over
REPEATS (default 200). The file should be in the page cache (read it
once first); both sides pay Python's per-call cost, which a loop over
`range` alone measures and which is subtracted.
"""
import mmap
import os
import random
import statistics
import sys
import time

PAGE = 4096


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    pages = size // PAGE
    if pages == 0:
        raise SystemExit(f"{path} holds no whole page")
    rng = random.Random(1)
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    loop, reads, maps = [], [], []
    for _ in range(reps):
        ids = [rng.randrange(pages) * PAGE for _ in range(n)]
        t = time.perf_counter()
        for off in ids:
            pass
        loop.append(time.perf_counter() - t)
        t = time.perf_counter()
        for off in ids:
            os.pread(fd, PAGE, off)
        reads.append(time.perf_counter() - t)
        ids = [rng.randrange(pages) * PAGE for _ in range(n)]
        t = time.perf_counter()
        m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        for off in ids:
            m[off]
        m.close()
        maps.append(time.perf_counter() - t)
    os.close(fd)
    base = statistics.median(loop)
    per = lambda xs: 1e9 * (statistics.median(xs) - base) / n
    print(f"{path}: {pages} pages; {n} scattered pages, medians of {reps}: "
          f"pread {per(reads):.0f} ns a page, fresh mapping {per(maps):.0f} ns a page")


if __name__ == "__main__":
    main()
