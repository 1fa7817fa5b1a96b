#!/usr/bin/env bash
# The demo: the same random 4 KiB write and read patterns on the flash
# simulator (the seeds' TC58 NAND), the 7,200 RPM disk model, and a real file
# with O_DIRECT at batch 1 and batch 64.
set -euo pipefail
dir=${1:-target/demo}
mkdir -p "$dir"
bin=target/release/geoflash
run() { echo; echo "== geoflash devbench $*"; "$bin" devbench "$@"; }

run --device "flashsim:preset=seed-tc58" --pattern random-write --count 200000 --batch 16
run --device "flashsim:preset=nvme" --pattern random-write --count 200000 --batch 16
run --device "hddsim:preset=7200rpm" --pattern random-read --count 2000
run --device "hddsim:preset=7200rpm" --pattern random-write --count 2000
direct=true
if ! "$bin" devbench --device "file:$dir/probe.dat?direct=true" --pattern seq-write --count 1 --region 4KiB >/dev/null 2>&1; then
    echo "(O_DIRECT is not supported in $dir; using buffered I/O)"
    direct=false
fi
rm -f "$dir/probe.dat"
run --device "file:$dir/devbench.dat?direct=$direct" --pattern random-read --count 20000 --batch 1
run --device "file:$dir/devbench.dat?direct=$direct" --pattern random-read --count 20000 --batch 64
rm -f "$dir/devbench.dat"
