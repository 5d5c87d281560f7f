#!/usr/bin/env bash
# The YCSB ladder's asynchronous steps (100% updates, file on `/`), alternated between the build
# before the twelfth session (BASE: an engine holds its depth in flight) and after it (NEW:
# twice the depth). Usage: ladder-ab.sh [ROUNDS]   (env: BASE, NEW, TARGET)
# The change itself was reverted; it is kept as capacity.patch beside this script (apply it
# to 927437e and build it as NEW to repeat the comparison).
set -euo pipefail
rounds=${1:-2}
base=${BASE:-/var/tmp/base-target/release/ringdb}; new=${NEW:-target/release/ringdb}
target=${TARGET:-/tmp/b15/ladder-base.ringdb}
for round in $(seq "$rounds"); do
  for build in base new; do
    bin=$base; [ "$build" = new ] && bin=$new
    echo "round $round, $build:"
    "$bin" ladder --target "$target" --runtime 4s --warmup 1s --steps +async,+batch-submit,libaio-async \
      | grep -E "^\s*(step|\+async|\+batch-submit|libaio-async)"
  done
done
