#!/usr/bin/env bash
# usage: finalab.sh ROUNDS POOL CPUS WORKLOADS BIN... : model on, alternating binaries
rounds=$1; pool=$2; cpus=$3; ws=$4; shift 4
for r in $(seq $rounds); do for w in $ws; do for cpu in $cpus; do for bin in "$@"; do
  out=/tmp/p17/final/$(basename $bin)-$w-$cpu-$pool-$r.json
  pin=""; [ "$cpu" != none ] && pin="--cpu $cpu"
  $bin ycsb --db /var/tmp/b15/oom --distribution uniform --records 1000000 --pool $pool --json \
    --workload $w --runtime 8s --warmup 1s $pin --output $out >/dev/null 2>&1
  python3 -c "
import json; d=json.load(open('$out')); r=d['run']; m=d['model']; c=m['costs']; l=r['lat_us']
print('$(basename $bin) $w cpu=$cpu pool=$pool r$r', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']), 'enters/op', round(r['enters_per_op'],3), 'p50', round(l['p50']), 'p99', round(l['p99']), 'c_read', round(c['c_read']), 'verify', round(c['c_checksum_read']), 'pred', round(m['predicted_cycles_per_op']), 'irq', round(m.get('interrupt_term_cycles') or 0), 'ratio', round(m['measured_over_predicted'],3))"
done; done; done; done
