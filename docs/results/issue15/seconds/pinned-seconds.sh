#!/usr/bin/env bash
# YCSB-B and C out of memory (one shard, 1M records, pool 40M, 8 s after a 1 s warm-up), the
# thread and the model's calibration pinned to each CPU in turn: the table of each run, with
# its cycles per operation second by second and the device's interrupts per CPU.
# Usage: pinned-seconds.sh [ROUNDS]   (env: RINGDB, DB, CPUS="1 0")
set -euo pipefail
rounds=${1:-2}
bin=${RINGDB:-target/release/ringdb}; db=${DB:-/var/tmp/b15/oom}
for r in $(seq "$rounds"); do for w in b c; do for cpu in ${CPUS:-1 0}; do
  echo "== workload $w, CPU $cpu, round $r"
  "$bin" ycsb --db "$db" --distribution uniform --records 1000000 --pool 40M \
    --workload $w --runtime 8s --warmup 1s --cpu "$cpu" 2>/dev/null |
    grep -E "^run:|cycles/op|interrupts|^model|c_tx "
done; done; done
