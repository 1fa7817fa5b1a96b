#!/usr/bin/env bash
# The demo, on embedded defaults (issue: "make demo"):
#  1. the eFIND paper's main experiment, workloads/efind-vs-fast.toml, at
#     small scale (50,000 OSM-like buildings, in session and random order)
#     with 4 KiB pages: eFIND against FAST* and the plain R-tree with LRU,
#     durability none and group, on the simulated TC58 NAND and on a real
#     file with O_DIRECT, 3 runs each; results in DIR/results.db, the
#     report with plots in DIR/report/index.html, and the headline table
#     (gains of eFIND over FAST) printed here;
#  2. a short tour of the command line on an eFIND index of 100,000 boxes;
#  3. the device itself: random 4 KiB reads at batch 1 and 64.
set -euo pipefail
dir=${1:-demo}
bin=target/release/geoflash
rm -rf "$dir"
mkdir -p "$dir/work"
say() { echo; echo "== $*"; }

direct=true
if ! "$bin" devbench --device "file:$dir/probe.dat?direct=true" --pattern seq-write --count 1 --region 4KiB >/dev/null 2>&1; then
    echo "(O_DIRECT is not supported in $dir; the real-file runs use buffered I/O)"
    direct=false
fi
rm -f "$dir/probe.dat"

workload=workloads/efind-vs-fast.toml
if [ "$direct" = false ]; then
    sed 's/"file"\]/"file?direct=false"]/' workloads/efind-vs-fast.toml > "$dir/efind-vs-fast.toml"
    workload="$dir/efind-vs-fast.toml"
fi
say "efind-vs-fast at small scale, 4 KiB pages, flash simulator and real file (a few minutes; progress on stderr)"
"$bin" bench "$workload" --scale small --index '*[page_size=4KiB]' \
    --results "$dir/results.db" --workdir "$dir/work"
say "report: $dir/report/index.html; headline: gains (t_FAST - t_eFIND) / t_FAST, medians of 3 runs"
echo "(simulated time on flashsim, wall time on the real file; build = construction by insertion)"
"$bin" report --results "$dir/results.db" --out "$dir/report" --baseline fast --headline efind \
    --metric sim_time_ns --metric wall_time_ns --metric pages_written --metric pages_read --metric nand_erases
rm -rf "$dir/work"

say "a tour of the command line: 100,000 building-like boxes, an eFIND R*-tree on a real file"
"$bin" generate --distribution buildings --geometry box --count 100000 --seed 7 --order sessions --out "$dir/buildings.csv"
"$bin" windows --input "$dir/buildings.csv" --selectivity 0.01% --count 100 --seed 7 --out "$dir/windows.csv"
"$bin" build --input "$dir/buildings.csv" --index "$dir/rstar" --store efind --device "file?direct=$direct"
"$bin" inspect --index "$dir/rstar"
"$bin" verify --index "$dir/rstar"
say "100 range queries at 0.01% of the extent (counts of the first five windows)"
"$bin" query --index "$dir/rstar" --windows "$dir/windows.csv" | head -5
say "the 5 nearest buildings to the centre of the square"
"$bin" knn --index "$dir/rstar" --point 0.5,0.5 --k 5

run() { say "geoflash devbench $*"; "$bin" devbench "$@"; }
run --device "file:$dir/devbench.dat?direct=$direct" --pattern random-read --count 20000 --batch 1
# The same file again: --overwrite (devbench refuses to write over a file that holds data).
run --device "file:$dir/devbench.dat?direct=$direct" --pattern random-read --count 20000 --batch 64 --overwrite
rm -f "$dir/devbench.dat"
