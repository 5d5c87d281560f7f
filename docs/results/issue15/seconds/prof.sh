#!/usr/bin/env bash
# usage: prof.sh BIN TAG WORKLOAD CPU
set -e
bin=$1; tag=$2; w=$3; cpu=$4
out=/tmp/p16/$tag-$w
$bin ycsb --db /var/tmp/b15/oom --distribution uniform --records 1000000 --pool 40M --workload $w --runtime 8s --warmup 1s --cpu $cpu --no-model --json --output $out.json >/dev/null 2>&1 &
pid=$!
sleep 2.5   # open + warm-up
perf record -q -e cpu-clock -p $pid -o $out.perf -- sleep 5 >/dev/null 2>&1
wait $pid
python3 -c "
import json; r=json.load(open('$out.json'))['run']; print('$tag $w', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']), 'r', round(r['reads_per_op'],3), 'w', round(r['writes_per_op'],3))"
