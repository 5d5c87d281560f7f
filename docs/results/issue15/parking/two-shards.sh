#!/usr/bin/env bash
# 2-shard YCSB-B out of memory (64 tasks per shard, 1M records, pool 64M: the database
# scripts/shards-vs-io makes), two builds alternated, with what /proc/diskstats says of the
# device over seconds 3..7 of each run: reads/s, writes/s, the requests at the device (aqu) and
# the time per read. BASE: the build before the parking fix; NEW: after it.
# Usage: two-shards.sh [ROUNDS]   (env: BASE, NEW, DB=/var/tmp/svi, DEV=vda)
set -euo pipefail
rounds=${1:-3}
base=${BASE:?set BASE to the baseline ringdb}; new=${NEW:-target/release/ringdb}
db=${DB:-/var/tmp/svi}; dev=${DEV:-vda}
args=(ycsb --db "$db" --records 1000000 --value-size 128 --pool 64M --durability off
      --distribution uniform --tasks 64 --workload b --runtime 8s --no-model --json)
stats() { awk -v d="$dev" '$3==d {print $4, $8, $7, $14}' /proc/diskstats; }
for r in $(seq "$rounds"); do for b in base new; do
  bin=$base; [ "$b" = new ] && bin=$new
  out=$(mktemp)
  "$bin" "${args[@]}" > "$out" 2>/dev/null &
  pid=$!
  sleep 3; read -r r0 w0 rt0 q0 < <(stats)
  sleep 4; read -r r1 w1 rt1 q1 < <(stats)
  wait "$pid"
  python3 - "$out" "$b" "$r" $((r1 - r0)) $((w1 - w0)) $((rt1 - rt0)) $((q1 - q0)) <<'PY'
import json, sys
out, build, rnd, reads, writes, read_ms, queue_ms = sys.argv[1:]
run = json.load(open(out))["run"]
reads, writes, read_ms, queue_ms = int(reads), int(writes), int(read_ms), int(queue_ms)
print(f"{build} {rnd}: {run['ops_per_s']:,.0f} ops/s  cyc/op {run['cycles_per_op']:,.0f}  p50 {run['lat_us']['p50']:.0f} us  "
      f"device: reads {reads / 4:,.0f}/s writes {writes / 4:,.0f}/s  at the device "
      f"{queue_ms / 4000:.1f}  per read {read_ms / max(reads, 1) * 1000:.0f} us")
PY
  rm -f "$out"
done; done
