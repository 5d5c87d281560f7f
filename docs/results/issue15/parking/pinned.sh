#!/usr/bin/env bash
# YCSB-B and C out of memory (one shard, 1M records, pool 40M, 8 s after a 1 s warm-up), the
# database's thread and the model's calibration pinned to each CPU in turn, the model beside
# each run. On the VM this was built on the device's completions interrupt CPU 1 only, and the
# kernel charges interrupt time to whatever task it interrupts (no IRQ_TIME_ACCOUNTING).
# Usage: pinned.sh [ROUNDS]   (env: RINGDB, DB, CPUS="1 0", OUT)
set -euo pipefail
rounds=${1:-3}
bin=${RINGDB:-target/release/ringdb}; db=${DB:-/var/tmp/b15/oom}; out=${OUT:-/tmp/pinned}
mkdir -p "$out"
for r in $(seq "$rounds"); do for w in b c; do for cpu in ${CPUS:-1 0}; do
  "$bin" ycsb --db "$db" --distribution uniform --records 1000000 --pool 40M --json \
    --workload $w --runtime 8s --warmup 1s --cpu "$cpu" --output "$out/$w-cpu$cpu-$r.json" \
    >/dev/null 2>&1
  python3 -c "
import json; d=json.load(open('$out/$w-cpu$cpu-$r.json')); r=d['run']; m=d['model']; c=m['costs']
print('$w cpu$cpu $r', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']), 'cpu', round(r['cpu_pct']),
      'c_read', round(c['c_read']), 'verify', round(c['c_checksum_read']),
      'predicted', round(m['predicted_cycles_per_op']), 'ratio', round(m['measured_over_predicted'], 3))"
done; done; done
