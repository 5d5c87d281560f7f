#!/usr/bin/env bash
# usage: ab.sh ROUNDS CPU label=bin ...  (env W="b c")
rounds=$1; cpu=$2; shift 2
for r in $(seq $rounds); do for w in ${W:-b c}; do for spec in "$@"; do
  label=${spec%%=*}; bin=${spec#*=}
  out=/tmp/p16/ab-$label-$w-$cpu-$r.json
  $bin ycsb --db /var/tmp/b15/oom --distribution uniform --records 1000000 --pool 40M --json \
    --workload $w --runtime 8s --warmup 1s --cpu $cpu --output $out ${EXTRA:-} >/dev/null 2>&1
  python3 -c "
import json; d=json.load(open('$out')); r=d['run']; m=d.get('model') or {}
print('$label $w cpu$cpu $r', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']), 'enters/op', round(r['enters_per_op'],3), 'p50', round(r['lat_us']['p50']),
      'ratio', round(m.get('measured_over_predicted',0), 3), 'pred', round(m.get('predicted_cycles_per_op',0)))"
done; done; done
