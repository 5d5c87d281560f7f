#!/usr/bin/env bash
# scripts/shards-vs-io alternated between the build before this session's ring depth change
# (BASE: ring depth = tasks) and after it (NEW: 2 x tasks). Usage: shards-vs-io-ab.sh [ROUNDS]
# (env: BASE, NEW, DIR, RUNTIME as scripts/shards-vs-io)
set -euo pipefail
rounds=${1:-3}
base=${BASE:-/var/tmp/base-target/release/ringdb}; new=${NEW:-target/release/ringdb}
dir=${DIR:-/var/tmp/svi}
for round in $(seq "$rounds"); do
  for build in base new; do
    bin=$base; [ "$build" = new ] && bin=$new
    echo "round $round, $build:"
    RINGDB=$bin RUNTIME=${RUNTIME:-8s} scripts/shards-vs-io "$dir" | grep '^YCSB'
  done
done
