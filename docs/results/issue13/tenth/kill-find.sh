#!/bin/bash
# Loads TPC-C (small, W=2) over 2 shards with a log, runs 32 tasks, SIGKILLs the run at 1.1 s,
# then checks; stops at the first failure (its output in /tmp/kf.out). Needs
# across-batch-log.patch applied (main refuses a log on several shards).
bin=target/release/ringdb
for i in $(seq 1 ${1:-30}); do
  d=/tmp/kf
  rm -rf $d $d.pre
  $bin tpcc --path $d --small --shards 2 --warehouses 2 --tasks 32 --durability fdatasync --duration 1s > /dev/null 2>&1
  $bin tpcc --path $d --small --tasks 32 --durability fdatasync --duration 60s > /dev/null 2>&1 &
  pid=$!
  sleep 1.1
  kill -9 $pid; wait $pid 2>/dev/null
  cp -a $d $d.pre
  out=$($bin tpcc --path $d --small --check 2>&1)
  if echo "$out" | grep -q "checks: passed"; then echo "i=$i ok $(echo "$out" | grep -c 'applied:') applied"; else echo "i=$i FAILED"; echo "$out" > /tmp/kf.out; break; fi
done
