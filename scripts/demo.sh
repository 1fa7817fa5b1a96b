#!/usr/bin/env bash
# The demo, on embedded defaults: a building-like dataset indexed by the
# R*-tree on the disk-based plain store, once on the simulated TC58 NAND
# flash of the seeds and once on a real file with O_DIRECT, followed by 100
# range queries at 0.01% selectivity and a kNN query; eFIND against the
# plain store on random insertion order; then the device benchmark on the
# simulators and on the real file (batch 1 against 64).
set -euo pipefail
dir=${1:-target/demo}
bin=target/release/geoflash
rm -rf "$dir"
mkdir -p "$dir"
say() { echo; echo "== $*"; }

say "generate 100,000 building-like boxes (hierarchical Thomas clusters, OSM-like insertion sessions)"
"$bin" generate --distribution buildings --geometry box --count 100000 --seed 7 --order sessions --out "$dir/buildings.csv"
"$bin" windows --input "$dir/buildings.csv" --selectivity 0.01% --count 100 --seed 7 --out "$dir/windows.csv"

direct=true
if ! "$bin" devbench --device "file:$dir/probe.dat?direct=true" --pattern seq-write --count 1 --region 4KiB >/dev/null 2>&1; then
    echo "(O_DIRECT is not supported in $dir; using buffered I/O)"
    direct=false
fi
rm -f "$dir/probe.dat"

say "R*-tree, plain store, 512 KiB S2Q buffer, 4 KiB pages, on the simulated TC58 NAND (flashsim:preset=seed-tc58)"
"$bin" build --input "$dir/buildings.csv" --index "$dir/rstar-flashsim" --store plain --device "flashsim:preset=seed-tc58"

say "the same on a real file with O_DIRECT=$direct"
"$bin" build --input "$dir/buildings.csv" --index "$dir/rstar-file" --store plain --device "file?direct=$direct"
"$bin" inspect --index "$dir/rstar-file"
"$bin" verify --index "$dir/rstar-file"

say "100 range queries at 0.01% of the extent (counts of the first five windows)"
"$bin" query --index "$dir/rstar-file" --windows "$dir/windows.csv" | head -5
say "the 5 nearest buildings to the centre of the square"
"$bin" knn --index "$dir/rstar-file" --point 0.5,0.5 --k 5

say "eFIND and FAST against the plain store on simulated flash: 30,000 boxes in random order (page writes, NAND programs)"
"$bin" generate --distribution buildings --geometry box --count 30000 --seed 8 --order random --out "$dir/random.csv"
for store in plain efind fast; do
    echo "-- --store $store"
    "$bin" build --input "$dir/random.csv" --index "$dir/random-$store" --store "$store" --device "flashsim:preset=seed-tc58"
done

say "STR bulk load of the same data (each page written once)"
"$bin" build --input "$dir/buildings.csv" --index "$dir/rstar-str" --store plain --bulk str --device "file?direct=$direct"

run() { say "geoflash devbench $*"; "$bin" devbench "$@"; }
run --device "flashsim:preset=seed-tc58" --pattern random-write --count 100000 --batch 16
run --device "flashsim:preset=nvme" --pattern random-write --count 100000 --batch 16
run --device "hddsim:preset=7200rpm" --pattern random-read --count 2000
run --device "file:$dir/devbench.dat?direct=$direct" --pattern random-read --count 20000 --batch 1
run --device "file:$dir/devbench.dat?direct=$direct" --pattern random-read --count 20000 --batch 64
rm -f "$dir/devbench.dat"
