#!/bin/bash
# TPC-C over shards with a log (fdatasync, group commit): --shards 1 vs --shards 2, file on /,
# W=4 in a 1 GiB pool, 128 tasks, 10 s, alternated; loads the databases when missing.
# Usage: durable.sh [ROUNDS]   (env: BIN, DATA, OUT)
set -euo pipefail
rounds=${1:-2}
bin=${BIN:-target/release/ringdb}; data=${DATA:-/var/tmp}; out=${OUT:-docs/results/issue13/eleventh}
for s in 1 2; do
  [ -e "$data/tpcc4l-s$s" ] || "$bin" tpcc --path "$data/tpcc4l-s$s" --shards $s --warehouses 4 \
    --pool 1G --durability fdatasync --duration 1s > /dev/null 2>&1
done
for round in $(seq "$rounds"); do
  for s in 1 2; do
    "$bin" tpcc --path "$data/tpcc4l-s$s" --pool 1G --durability fdatasync --duration 10s \
      --json "$out/log-s$s-r$round.json" > "$out/log-s$s-r$round.txt" 2>&1
    echo "shards $s round $round: $(grep -h 'tx/s' "$out/log-s$s-r$round.txt" | head -1)"
    grep -h 'checks:' "$out/log-s$s-r$round.txt"
  done
done
