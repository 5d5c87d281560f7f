#!/bin/bash
# TPC-C over shards with a log (fdatasync, group commit): --shards 1 vs --shards 2, file on /.
# Needs across-batch-log.patch (main refuses a log on several shards).
bin=target/release/ringdb
out=docs/results/issue13/tenth
for s in 1 2; do
  rm -rf /var/tmp/tpcc4l-s$s
  $bin tpcc --path /var/tmp/tpcc4l-s$s --shards $s --warehouses 4 --pool 1G --durability fdatasync --duration 1s > /dev/null 2>&1
done
for round in 1 2; do
  for s in 1 2; do
    $bin tpcc --path /var/tmp/tpcc4l-s$s --pool 1G --durability fdatasync --duration 10s --json $out/log-s$s-r$round.json > /tmp/s10/log-s$s-r$round.txt 2>&1
  done
done
