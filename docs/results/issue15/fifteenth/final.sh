#!/usr/bin/env bash
# usage: final.sh ROUNDS POOL BIN: B and C unpinned, on CPU 0 and CPU 1, model on; data 1M records (51,143 pages)
rounds=$1; pool=$2; bin=$3
for r in $(seq $rounds); do for w in b c; do for cpu in none 0 1; do
  out=/tmp/p17/final/$w-$cpu-$pool-$r.json
  pin=""; [ "$cpu" != none ] && pin="--cpu $cpu"
  $bin ycsb --db /var/tmp/b15/oom --distribution uniform --records 1000000 --pool $pool --json \
    --workload $w --runtime 8s --warmup 1s $pin --output $out >/dev/null 2>&1
  python3 -c "
import json; d=json.load(open('$out')); r=d['run']; m=d['model']; c=m['costs']
print('$w cpu=$cpu pool=$pool r$r', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']), 'reads/op', round(r['reads_per_op'],3), 'c_read', round(c['c_read']), 'verify', round(c['c_checksum_read']), 'pred', round(m['predicted_cycles_per_op']), 'ratio', round(m['measured_over_predicted'],3), 'on_irq', m.get('on_interrupt_cpu'))"
done; done; done
