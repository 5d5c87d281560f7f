#!/usr/bin/env bash
# usage: unpinned.sh ROUNDS label=bin ... ; B and C unpinned, model on, alternated
rounds=$1; shift
for r in $(seq $rounds); do for w in b c; do for spec in "$@"; do
  label=${spec%%=*}; bin=${spec#*=}
  out=/tmp/p16/unp-$label-$w-$r.json
  $bin ycsb --db /var/tmp/b15/oom --distribution uniform --records 1000000 --pool 40M --json \
    --workload $w --runtime 8s --warmup 1s --output $out >/dev/null 2>&1
  python3 -c "
import json; d=json.load(open('$out')); r=d['run']; m=d['model']; c=m['costs']
opc=r.get('ops_per_cpu') or []; share=m.get('on_interrupt_cpu')
print('$label $w $r', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']), 'c_read', round(c['c_read']),
      'pred', round(m['predicted_cycles_per_op']), 'ratio', round(m['measured_over_predicted'],3), 'ops_per_cpu', opc, 'on_irq', None if share is None else round(share,2))"
done; done; done
