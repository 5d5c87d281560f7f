#!/usr/bin/env bash
# usage: statrun.sh WORKLOAD CPU  -> /proc/stat cpu lines' deltas over seconds 2.5-7.5 of a run
w=$1; cpu=$2
${BIN:-/tmp/p17/ringdb-new} ycsb --db /var/tmp/b15/oom --distribution uniform --records 1000000 --pool 56M --workload $w --runtime 8s --warmup 1s --cpu $cpu --no-model --json --output /tmp/p17/st-$w-$cpu.json >/dev/null 2>&1 &
pid=$!
sleep 2.5
grep -E '^cpu[01] ' /proc/stat > /tmp/p17/s0; cat /proc/$pid/task/*/stat 2>/dev/null | awk '{u+=$14; s+=$15} END {print u, s}' > /tmp/p17/t0
sleep 5
grep -E '^cpu[01] ' /proc/stat > /tmp/p17/s1; cat /proc/$pid/task/*/stat 2>/dev/null | awk '{u+=$14; s+=$15} END {print u, s}' > /tmp/p17/t1
wait $pid
python3 - <<PY
a=[l.split() for l in open('/tmp/p17/s0')]; b=[l.split() for l in open('/tmp/p17/s1')]
names=['user','nice','system','idle','iowait','irq','softirq','steal']
for x,y in zip(a,b):
    d=[int(q)-int(p) for p,q in zip(x[1:9],y[1:9])]
    print(x[0], ' '.join(f'{n}={v}' for n,v in zip(names,d)))
t0=list(map(int,open('/tmp/p17/t0').read().split())); t1=list(map(int,open('/tmp/p17/t1').read().split()))
print('process utime+stime ticks', t1[0]-t0[0], t1[1]-t0[1])
import json; r=json.load(open('/tmp/p17/st-$w-$cpu.json'))['run']; print('$w cpu$cpu', round(r['ops_per_s']), 'cyc/op', round(r['cycles_per_op']))
PY
python3 - <<PY
a=[l.split() for l in open('/tmp/p17/s0')]; b=[l.split() for l in open('/tmp/p17/s1')]
import json; r=json.load(open('/tmp/p17/st-$w-$cpu.json'))['run']
for x,y in zip(a,b):
    d=[int(q)-int(p) for p,q in zip(x[1:9],y[1:9])]
    user,nice,system,idle,iowait,irq,softirq,steal=d
    nonidle=user+nice+system+irq+softirq
    if x[0]=='cpu$cpu':
        t0=list(map(int,open('/tmp/p17/t0').read().split())); t1=list(map(int,open('/tmp/p17/t1').read().split()))
        thread=(t1[0]-t0[0])+(t1[1]-t0[1])
        charge=softirq*min(1.0,thread/max(nonidle,1))
        ghz=2.45e9
        print('softirq charged to the thread: %.1f%% of 5 s, %.0f cycles/op' % (charge, charge/100*ghz/(r['ops_per_s'])))
PY
