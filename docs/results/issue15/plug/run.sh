#!/bin/bash
# Alternates the build of 927437e (BASE: the adaptive batching flushes whatever is queued at the
# end of a pass) and this one (NEW: one or two wait while the device is busy), YCSB-B then C, one shard, on one loaded database (1M records, pool 40M: data
# 5x the pool), with the model printed beside each run. Usage: run.sh [ROUNDS]
# (env: BASE, NEW, DB, OUT)
set -euo pipefail
rounds=${1:-4}
base=${BASE:-/var/tmp/base-target/release/ringdb}; new=${NEW:-target/release/ringdb}
db=${DB:-/var/tmp/b15/oom}; out=${OUT:-/tmp/issue15-plug}; mkdir -p "$out"
args=(--db "$db" --distribution uniform --records 1000000 --pool 40M --json)
[ -e "$db" ] || "$new" ycsb "${args[@]}" --load --workload c --runtime 1s > /dev/null 2>&1
for r in $(seq "$rounds"); do for w in b c; do for b in base new; do
  bin=$base; [ "$b" = new ] && bin=$new
  "$bin" ycsb "${args[@]}" --workload $w --runtime 8s --output "$out/$w-$b-$r.json" >/dev/null 2>&1
  python3 -c "
import json; d=json.load(open('$out/$w-$b-$r.json')); r=d['run']; m=d.get('model') or {}
print('$w $b $r', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']), 'cpu', round(r['cpu_pct']),
      'reads/op', round(r['reads_per_op'], 3), 'enters/op', round(r.get('enters_per_op', 0), 3),
      'p50', round(r['lat_us']['p50']), 'predicted', round(m.get('predicted_cycles_per_op', 0)),
      'ratio', round(m.get('measured_over_predicted', 0), 3))"
done; done; done
