# Shared setup for the benchmark scripts: builds ringdb, prepares the targets.
# Sourced, not run. Needs root for /dev/zram0.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RINGDB="$ROOT/target/release/ringdb"
BENCH_DIR=${BENCH_DIR:-/var/tmp/ringdb-bench}
FILE_TARGET="$BENCH_DIR/2g.dat"
ZRAM=/dev/zram0
# Raw output (JSON, printouts, plots, generated pages) goes here, not into docs/results/: copy the
# tables that matter into docs/results/<topic>.md by hand. Override with RESULTS=DIR.
RESULTS=${RESULTS:-$ROOT/target/results}

build_ringdb() {
  (cd "$ROOT" && cargo build --release -q -p ringdb-cli)
}

need_fio() {
  command -v fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio >/dev/null; }
}

# A 2 GiB file on / (ringdb io fills it on first use).
prepare_file() {
  mkdir -p "$BENCH_DIR"
  "$RINGDB" io --filename "$FILE_TARGET" --size 2G --runtime 100ms --iodepth 1 >/dev/null
}

# /dev/zram0 sized 4 GiB and written once with incompressible data, so reads are real.
prepare_zram() {
  [ -b "$ZRAM" ] || modprobe zram num_devices=1
  if [ "$(cat /sys/block/zram0/disksize)" = 0 ]; then
    echo 4G > /sys/block/zram0/disksize
  fi
  "$RINGDB" io --filename "$ZRAM" --rw write --bs 1M --size 2G --ios 2048 --iodepth 8 >/dev/null
}

describe_machine() {
  echo "- kernel: $(uname -r); CPUs: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
  echo "- memory: $(free -g | awk '/Mem:/{print $2}') GiB; fio: $(fio --version 2>/dev/null)"
  echo "- / is $(findmnt -no FSTYPE /) on $(findmnt -no SOURCE /) (virtio-blk); /dev/zram0: $(cat /sys/block/zram0/comp_algorithm 2>/dev/null | tr -d '\n'), $(($(cat /sys/block/zram0/disksize)/1073741824)) GiB"
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
}
