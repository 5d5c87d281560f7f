#!/usr/bin/env bash
# usage: ladderab.sh ROUNDS TARGET CPU BIN... : the ladder's asynchronous steps, binaries alternated
rounds=$1; target=$2; cpu=$3; shift 3
pin=""; [ "$cpu" != none ] && pin="--cpu $cpu"
for r in $(seq $rounds); do for bin in "$@"; do
  echo "round $r $(basename $bin):"
  $bin ladder --target $target --runtime 4s --warmup 1s $pin --steps +async,+batch-submit,+regbufs,libaio-async --json --output /tmp/p17/ladder-$(basename $bin)-$(basename $target)-$r.json 2>/dev/null >/dev/null
  python3 - <<PY
import json
d=json.load(open('/tmp/p17/ladder-$(basename $bin)-$(basename $target)-$r.json'))
rows=d.get('steps') or d.get('rows') or d
for s in rows:
    if not isinstance(s,dict): continue
    print('   %-14s tx/s %7.0f  cyc/tx %6.0f  pred %6.0f  enters/tx %.3f  p50 %5.0f us  p99 %6.0f us  io/raw %.2f  iowq %d' % (s['name'], s['tps'], s['cycles_per_tx'], s['predicted_cycles_per_tx'], s['enters_per_tx'], s['lat_us_p50'], s['lat_us_p99'], s['ios_vs_raw'], s['iowq_workers']))
PY
done; done
