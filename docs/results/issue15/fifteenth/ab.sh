#!/usr/bin/env bash
# usage: ab.sh ROUNDS WORKLOADS CPUS POOL BIN...  (no model) alternates the binaries
rounds=$1; ws=$2; cpus=$3; pool=$4; shift 4
for r in $(seq $rounds); do for w in $ws; do for cpu in $cpus; do for bin in "$@"; do
  pin=""; [ "$cpu" != none ] && pin="--cpu $cpu"
  $bin ycsb --db /var/tmp/b15/oom --distribution uniform --records 1000000 --pool $pool --workload $w --runtime 6s --warmup 1s $pin --no-model --json --output /tmp/p17/ab.json >/dev/null 2>&1
  python3 -c "
import json; d=json.load(open('/tmp/p17/ab.json')); r=d['run']; l=r.get('lat_us') or {}
print('$(basename $bin)', '$w', 'cpu=$cpu', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']), 'enters/op', round(r['enters_per_op'],3), 'p50', round(l.get('p50',0)), 'p99', round(l.get('p99',0)), 'p999', round(l.get('p999',0)))"
done; done; done; done
