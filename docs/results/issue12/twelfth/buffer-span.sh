#!/usr/bin/env bash
# How the device's throughput depends on how much memory the buffers span: `ringdb io`
# randread, 2 jobs x QD 64, on a copy of a shard's data file, with each job's buffers spread
# over SPANS (256K = one buffer per request in flight, fio's layout), alternated over ROUNDS.
# /proc/diskstats is sampled over seconds 3-7 of each run.
# Usage: buffer-span.sh [ROUNDS]   (env: FILE, SPANS, RINGDB)
set -euo pipefail
rounds=${1:-3}
file=${FILE:-/var/tmp/svi/io-target.dat}; bin=${RINGDB:-target/release/ringdb}
spans=${SPANS:-256K 8M 32M 128M}
size=$(stat -c %s "$file")
for round in $(seq "$rounds"); do
  for span in $spans; do
    "$bin" io --filename "$file" --size "$size" --rw randread --iodepth 64 --numjobs 2 \
      --runtime 8s --buffer-span "$span" --json --output /tmp/buffer-span.json >/dev/null &
    pid=$!
    sleep 3; a=$(awk '$3=="vda"' /proc/diskstats); sleep 4; b=$(awk '$3=="vda"' /proc/diskstats)
    wait $pid
    python3 - "$round" "$span" "$a" "$b" <<'PY'
import json, sys
round_, span = sys.argv[1], sys.argv[2]
a = [int(x) for x in sys.argv[3].split()[3:]]; b = [int(x) for x in sys.argv[4].split()[3:]]
reads, read_ms, queue_ms = b[0] - a[0], b[3] - a[3], b[10] - a[10]
r = json.load(open("/tmp/buffer-span.json"))
print(f"round {round_} span {span:>5}: {r['iops']:>9,.0f} IOPS  p50 {r['lat_us']['p50']:7.1f} us  "
      f"device: {queue_ms / 4000:.1f} in flight, {read_ms / max(reads, 1) * 1000:.0f} us per read")
PY
  done
done
