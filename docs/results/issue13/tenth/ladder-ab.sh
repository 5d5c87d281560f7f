#!/bin/bash
# Alternates fbdf76b's build (base) with this session's (new): TPC-C ladder steps posix and +async, W=1 and W=6, file on /.
for round in 1 2; do
  for build in base new; do
    if [ $build = base ]; then bin=../base-target/release/ringdb; else bin=target/release/ringdb; fi
    $bin tpcc --ladder --path /var/tmp/tpcc-file --duration 8s --warmup 2s --cpu 0 --warehouses-out 6 --steps posix,+async --json docs/results/issue13/tenth/ladder-w6-$build-$round.json > docs/results/issue13/tenth/ladder-w6-$build-$round.txt 2>docs/results/issue13/tenth/ladder-w6-$build-$round.err
  done
done
