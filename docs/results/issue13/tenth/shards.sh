#!/bin/bash
# TPC-C with warehouses over shards: --shards 1 vs --shards 2 on the same data, file on /.
bin=target/release/ringdb
out=docs/results/issue13/tenth; mkdir -p $out
# In memory: W=4 (620 MB) in a 1 GiB pool, loaded first by:
#   $bin tpcc --path /var/tmp/tpcc-s$s --shards $s --warehouses 4 --pool 1G --duration 1s
# (each run reopens the database, so it starts with a cold pool: ~1 fault per transaction).
for round in 1 2; do
  for s in 1 2; do
    $bin tpcc --path /var/tmp/tpcc-s$s --pool 1G --duration 10s --json $out/mem-s$s-r$round.json > $out/mem-s$s-r$round.txt 2>&1
  done
done
# Out of memory: W=6 (1.1 GB on disk) in a 256 MiB pool (4.3x).
for s in 1 2; do
  rm -rf /var/tmp/tpcc6-s$s
  $bin tpcc --path /var/tmp/tpcc6-s$s --shards $s --warehouses 6 --pool 256M --duration 2s > $out/load6-s$s.txt 2>&1
done
for round in 1 2; do
  for s in 1 2; do
    $bin tpcc --path /var/tmp/tpcc6-s$s --pool 256M --duration 10s --json $out/oom-s$s-r$round.json > $out/oom-s$s-r$round.txt 2>&1
  done
done
