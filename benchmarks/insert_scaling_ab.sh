#!/usr/bin/env bash
# 50,000 insertions into a bulk-loaded 1,000,000-entry eFIND index per memory
# budget, two binaries alternated (the first of each pair swaps every rep),
# each run on a fresh copy of one pristine index per budget (built by BEFORE).
# Usage: insert_scaling_ab.sh REPS BEFORE_BIN AFTER_BIN WORKDIR
# Env: BUFS (default "512KiB 64MiB 256MiB"), FMT (log format at creation;
# default: the CLI's), COUNT (base entries, default 1000000).
set -euo pipefail
REPS=$1; BEFORE=$2; AFTER=$3; W=$4; COUNT=${COUNT:-1000000}
mkdir -p "$W"; cd "$W"
[ -f base.csv ] || "$BEFORE" generate --distribution uniform --geometry box --count "$COUNT" --seed 7 --max-size 0.001 --out base.csv >/dev/null
if [ ! -f more.csv ]; then
  "$BEFORE" generate --distribution uniform --geometry box --count 50000 --seed 8 --max-size 0.001 --out m0.csv >/dev/null
  awk -F, -v n="$COUNT" 'NR==1{print;next}{$1=$1+n; print}' OFS=, m0.csv > more.csv
fi
BUFS=${BUFS:-512KiB 64MiB 256MiB}
for buf in $BUFS; do
  p="pristine${FMT:+-$FMT}-$buf"
  [ -d "$p" ] || "$BEFORE" build --input base.csv --index "$p" --bulk str --store efind --buffer "$buf" ${FMT:+--log-format $FMT} >/dev/null
done
for rep in $(seq 1 "$REPS"); do
  for buf in $BUFS; do
    pair="before after"; [ $((rep % 2)) = 0 ] && pair="after before"
    for which in $pair; do
      B=$([ "$which" = before ] && echo "$BEFORE" || echo "$AFTER")
      rm -rf idx; cp -a "pristine${FMT:+-$FMT}-$buf" idx
      s=$(date +%s.%N)
      out=$("$B" insert --index idx --input more.csv --json | tail -1)
      e=$(date +%s.%N)
      echo "$out" | python3 -c "import json,sys; d=json.load(sys.stdin); print('$rep ${FMT:-default} $buf $which', 'wall=%.2f' % ($e-$s), 'flush_ns=%.2f' % (d.get('wall_flush_ns',0)/1e9), 'bytes=%d' % d['bytes_written'], 'flushes=%d' % d.get('flushes',0), 'flushed_nodes=%d' % d.get('flushed_nodes',0))"
    done
  done
done
rm -rf idx
