"""One command-line query (or kNN) run by several geoflash binaries in
turn, each run in a new process, alternating which goes first; prints per
binary the pages read, device batches, results and the median of the
engine's ``wall_time_ns`` with every run (docs/benchmarks.md, "Cold
windows and kNN at device depth").

    python3 benchmarks/cli_ab.py --bin old=geoflash-058aedb --bin new=target/release/geoflash \\
        --cache cold --rounds 15 -- query --index i1m --windows w0.1%.csv

``--cache cold`` drops the index's files from the OS page cache before
every run (``posix_fadvise(POSIX_FADV_DONTNEED)``, no root needed): a cold
device. ``--cache warm`` runs each binary once first and evicts nothing:
the index's pages are in the page cache, the process is new (its own
memory is fresh), as for a command-line user on a machine with memory.
Everything after ``--`` is the geoflash command; it must take ``--index``
and ``--json``.
"""

import argparse
import json
import statistics as st
import subprocess

from cold_windows_cli import evict


def run(binary, command):
    """The engine's stats of one run of `command` by `binary`."""
    out = subprocess.run([binary, *command, "--json", "-q"], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["stats"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, metavar="NAME=PATH", help="a binary (repeatable)")
    ap.add_argument("--cache", choices=["cold", "warm"], required=True, help="evict the index before each run, or not")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the geoflash command")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if "--index" not in command:
        ap.error("the command needs --index DIR")
    index = command[command.index("--index") + 1]
    bins = []
    for spec in args.bin:
        name, sep, path = spec.partition("=")
        if not sep:
            ap.error(f"--bin {spec}: expected NAME=PATH")
        bins.append((name, path))
    if args.cache == "warm":
        for _, path in bins:
            run(path, command)
    walls = {name: [] for name, _ in bins}
    shape = {}
    for r in range(args.rounds):
        for name, path in bins if r % 2 == 0 else bins[::-1]:
            if args.cache == "cold":
                evict(index)
            s = run(path, command)
            walls[name].append(s["wall_time_ns"] / 1e6)
            shape[name] = (s["pages_read"], s["read_batches"], s["query_results"])
    for name, v in walls.items():
        pages, batches, results = shape[name]
        runs = " ".join(f"{x:.2f}" for x in sorted(v))
        print(f"{name}: pages {pages} batches {batches} results {results} median {st.median(v):.2f} ms; runs {runs}")
    if len({(pages, results) for pages, _, results in shape.values()}) > 1:
        raise SystemExit("the binaries read different pages or gave different answers")


if __name__ == "__main__":
    main()
