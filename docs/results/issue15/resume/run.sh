#!/bin/bash
# Alternates the build of 0e25610 (base: restarts at the root) and the resume build (new),
# YCSB-B then C, on one loaded database (1M records, 51,143 pages, pool 40M: data 5x the pool).
# Needs both binaries as /tmp/ringdb-base and /tmp/ringdb-new; JSON reports go to $OUT.
OUT=${OUT:-/tmp/s9/y}
mkdir -p "$OUT"
for r in 1 2 3 4; do for w in b c; do for b in base new; do
  /tmp/ringdb-$b ycsb --db /tmp/b15/oom --workload $w --distribution uniform --records 1000000 \
    --pool 40M --runtime 8s --json --output "$OUT/$w-$b-$r.json" >/dev/null 2>&1
  python3 -c "
import json,sys; d=json.load(open('$OUT/$w-$b-$r.json')); r=d['run']; m=d.get('model') or {}
print('$w $b $r', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']), 'cpu', round(r['cpu_pct']), 'reads/op', round(r['reads_per_op'],3), 'predicted', round(m.get('predicted_cycles_per_op',0)), 'restart', round(m.get('restart_cycles', m['costs']['c_restart'])), 'descent', round(m['costs'].get('c_descent',0)), 'ratio', round(m.get('measured_over_predicted'),3))"
done; done; done
