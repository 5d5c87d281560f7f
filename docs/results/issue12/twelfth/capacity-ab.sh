#!/usr/bin/env bash
# scripts/shards-vs-io alternated between the build before the twelfth session's change (BASE:
# the engine holds as many requests in flight as its queue depth) and after it (NEW: twice the
# depth, bounded by the CQ; the adaptive batching still aims at the depth).
# Usage: capacity-ab.sh [ROUNDS]   (env: BASE, NEW, DIR, RUNTIME as scripts/shards-vs-io)
# The change itself was reverted; it is kept as capacity.patch beside this script (apply it
# to 927437e and build it as NEW to repeat the comparison).
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
