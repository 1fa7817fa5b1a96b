#!/usr/bin/env bash
# The workbench tier of `make bench`: every shipped workload
# (workloads/*.toml, or those named as arguments) at a scale (default
# small; GEOFLASH_BENCH_SCALE=smoke|small|full) with the release CLI, each
# into its own SQLite results store and report under $BENCH_DIR (default
# bench-results/, gitignored). Runs are resumable: configurations already
# complete in a store are skipped, so an interrupted `make bench` picks up
# where it stopped. Exits non-zero if a workload fails.
set -euo pipefail
cd "$(dirname "$0")/.."

SCALE=${GEOFLASH_BENCH_SCALE:-small}
OUT=${BENCH_DIR:-bench-results}
BIN=target/release/geoflash
mkdir -p "$OUT/work"
cargo build --release -p geoflash-cli
if (($#)); then files=("$@"); else files=(workloads/*.toml); fi
status=0
for w in "${files[@]}"; do
    name=$(basename "$w" .toml)
    db="$OUT/$name-$SCALE.sqlite"
    echo "== $name ($SCALE) -> $db" >&2
    start=$(date +%s)
    if "$BIN" bench "$w" --scale "$SCALE" --results "$db" --workdir "$OUT/work"; then
        "$BIN" report --results "$db" --out "$OUT/$name-$SCALE-report" >/dev/null
        echo "== $name: $(( $(date +%s) - start )) s; report in $OUT/$name-$SCALE-report/index.html" >&2
    else
        echo "== $name FAILED" >&2
        status=1
    fi
done
exit $status
