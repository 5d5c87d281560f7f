#!/usr/bin/env bash
# usage: prof.sh TAG WORKLOAD CPU
bin=/work/main/target/release/ringdb; tag=$1; w=$2; cpu=$3
out=/tmp/p17/$tag-$w-$cpu
$bin ycsb --db /var/tmp/b15/oom --distribution uniform --records 1000000 --pool 40M --workload $w --runtime 8s --warmup 1s --cpu $cpu --no-model --json --output $out.json >/dev/null 2>&1 &
pid=$!
sleep 2.5
perf record -q -g -e cpu-clock -p $pid -o $out.perf -- sleep 5 >/dev/null 2>&1
wait $pid
perf script -i $out.perf -F tid,ip,sym 2>/dev/null | python3 /tmp/p17/irqclass.py
python3 -c "
import json; r=json.load(open('$out.json'))['run']; print('$tag $w cpu$cpu', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']), 'r', round(r['reads_per_op'],3), 'w', round(r['writes_per_op'],3))"
