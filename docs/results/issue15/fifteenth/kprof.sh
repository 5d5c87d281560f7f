#!/usr/bin/env bash
# C (or B) pinned to CPU $2 with perf over seconds 2.5-7.5, and raw randread qd128 on the same CPU, span = pool
w=$1; cpu=$2; tag=$3; pool=${4:-56M}
bin=/work/main/target/release/ringdb
$bin ycsb --db /var/tmp/b15/oom --distribution uniform --records 1000000 --pool $pool --workload $w --runtime 8s --warmup 1s --cpu $cpu --no-model --json --output /tmp/p17/$tag.json >/dev/null 2>&1 &
pid=$!; sleep 2.5; perf record -q -g -e cpu-clock -p $pid -o /tmp/p17/$tag.perf -- sleep 5 >/dev/null 2>&1; wait $pid
$bin io --filename /var/tmp/b15/oom/data.ringdb --rw randread --iodepth 128 --cpus-allowed $cpu --runtime 8s --size 180M --buffer-span $pool --json > /tmp/p17/raw-$tag.json 2>/dev/null &
pid=$!; sleep 2.5; perf record -q -g -e cpu-clock -p $pid -o /tmp/p17/raw-$tag.perf -- sleep 5 >/dev/null 2>&1; wait $pid
