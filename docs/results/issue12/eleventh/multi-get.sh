#!/usr/bin/env bash
# In-memory YCSB-C uniform on 2 shards: tasks on the shards (the baseline) against 8 client
# threads calling multi_get in batches of 16, alternated, with the build before this session's
# change (BASE) and after it (NEW). Usage: multi-get.sh [ROUNDS]   (env: BASE, NEW, DB, OUT)
set -euo pipefail
rounds=${1:-3}
base=${BASE:-/var/tmp/base-target/release/ringdb}; new=${NEW:-target/release/ringdb}
db=${DB:-/var/tmp/mg/s2}; out=${OUT:-/tmp/multi-get}; mkdir -p "$out"
common=(--db "$db" --workload c --distribution uniform --records 200000 --pool 256M
        --runtime 5s --durability off --json)
[ -e "$db/shards.ringdb" ] || "$new" ycsb "${common[@]}" --shards 2 --load --tasks 128 >/dev/null
line() { python3 -c '
import json, sys; r = json.load(open(sys.argv[1])); run = r["run"]; lat = run["lat_us"]
wake = r.get("wake_up_us") or 0
print("%-20s %12s ops/s  p50 %7.1f us  p99 %7.1f us  %6.0f cyc/op  wake-up %.1f us"
      % (sys.argv[2], format(round(run["ops_per_s"]), ","), lat["p50"], lat["p99"], run["cycles_per_op"], wake))' "$1" "$2"; }
for round in $(seq "$rounds"); do
  echo "round $round"
  for run in base-shard new-shard base-clients new-clients-batch new-clients-normal new-get-batch; do
    case $run in
      base-shard) "$base" ycsb "${common[@]}" --tasks 128 ;;
      new-shard) "$new" ycsb "${common[@]}" --tasks 128 ;;
      base-clients) "$base" ycsb "${common[@]}" --clients 8 --multi-get 16 ;;
      new-clients-batch) "$new" ycsb "${common[@]}" --clients 8 --multi-get 16 --client-sched batch ;;
      new-clients-normal) "$new" ycsb "${common[@]}" --clients 8 --multi-get 16 --client-sched normal ;;
      new-get-batch) "$new" ycsb "${common[@]}" --clients 8 --multi-get 1 --client-sched batch ;;
    esac > "$out/$run-$round.json" 2>/dev/null
    line "$out/$run-$round.json" "$run"
  done
done
