#!/usr/bin/env bash
# per-second CPU (ticks) of a ycsb run, beside its per-second ops. usage: series.sh W CPU TAG
w=$1; cpu=$2; tag=$3
/work/main/target/release/ringdb ycsb --db /var/tmp/b15/oom --distribution uniform --records 1000000 --pool 40M --workload $w --runtime 10s --cpu $cpu --no-model --json --output /tmp/p16/s-$tag.json >/dev/null 2>&1 &
sleep 0.3; pid=$(pgrep -f "output /tmp/p16/s-$tag.json" | head -1)
: > /tmp/p16/s-$tag.ticks
while kill -0 $pid 2>/dev/null; do awk '{print $14+$15}' /proc/$pid/stat >> /tmp/p16/s-$tag.ticks 2>/dev/null; date +%s.%N >> /tmp/p16/s-$tag.t; sleep 0.5; done
wait
python3 - <<PY
import json
r=json.load(open('/tmp/p16/s-$tag.json'))['run']
t=[int(x) for x in open('/tmp/p16/s-$tag.ticks') if x.strip()]
d=[ (t[i+2]-t[i])*4e-3 for i in range(0,len(t)-2,2)]  # cpu secs per 1s window (HZ=250 -> 4ms ticks? clk_tck=100)
print('$tag', '$w', 'ops/s', [round(x/1000) for x in r['per_second']], 'cyc/op', round(r['cycles_per_op']), 'verify', round(r.get('verification_cycles_per_read') or 0))
print('   cpu ticks/s', [t[i+2]-t[i] for i in range(0,len(t)-2,2)])
PY
