#!/usr/bin/env bash
# usage: final.sh ROUNDS BIN ; runs B and C on CPU 1, CPU 0 and unpinned, model on
rounds=$1; bin=$2
for r in $(seq $rounds); do for w in b c; do for cpu in 1 0 none; do
  out=/tmp/p16/final-$w-$cpu-$r.json
  pin=""; [ "$cpu" != none ] && pin="--cpu $cpu"
  $bin ycsb --db /var/tmp/b15/oom --distribution uniform --records 1000000 --pool 40M --json \
    --workload $w --runtime 8s --warmup 1s $pin --output $out >/dev/null 2>&1
  python3 -c "
import json; d=json.load(open('$out')); r=d['run']; m=d['model']; c=m['costs']; i=d.get('device_interrupts') or {}
print('$w cpu=$cpu $r', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']), 'c_read', round(c['c_read']), 'verify', round(c['c_checksum_read']),
      'pred', round(m['predicted_cycles_per_op']), 'ratio', round(m['measured_over_predicted'],3), 'irq/op', round(i.get('total',0)/max(r['ops'],1),4), 'irq', i.get('per_cpu'))"
done; done; done
