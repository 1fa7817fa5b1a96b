#!/usr/bin/env bash
# 50,000 insertions into a bulk-loaded 1,000,000-entry index, per memory
# budget and log format (issue 15's "flushing that scales with memory").
# Usage: insert_scaling.sh GEOFLASH_BIN WORKDIR
set -euo pipefail
B=$1; W=$2; mkdir -p "$W"; cd "$W"
[ -f base.csv ] || "$B" generate --distribution uniform --geometry box --count 1000000 --seed 7 --max-size 0.001 --out base.csv >/dev/null
if [ ! -f more.csv ]; then
  "$B" generate --distribution uniform --geometry box --count 50000 --seed 8 --max-size 0.001 --out m0.csv >/dev/null
  awk -F, 'NR==1{print;next}{$1=$1+1000000; print}' OFS=, m0.csv > more.csv
fi
for store in ${STORES:-efind fast}; do
for fmt in per-change first-image; do
  for buf in 512KiB 64MiB 256MiB; do
    rm -rf idx
    "$B" build --input base.csv --index idx --bulk str --store $store --buffer $buf --log-format $fmt --json >/dev/null
    s=$(date +%s.%N)
    out=$("$B" insert --index idx --input more.csv --json | tail -1)
    e=$(date +%s.%N)
    echo "$out" | python3 -c "import json,sys; d=json.load(sys.stdin); print('$store $fmt $buf', 'wall=%.2f' % ($e-$s), 'flush_ns=%.2fs' % (d.get('wall_flush_ns',0)/1e9), 'log_ns=%.2fs' % (d.get('wall_log_ns',0)/1e9), 'bytes=%d' % d['bytes_written'], 'syncs=%d' % d['syncs'], 'flushes=%d' % d.get('flushes',0), 'compactions=%d' % d.get('compactions',0), 'images=%d' % d.get('page_images',0))"
  done
done
done
