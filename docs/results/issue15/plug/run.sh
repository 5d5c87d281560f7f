#!/usr/bin/env bash
# 927437e's build (BASE) against d92b7d4's (NEW: the adaptive batching holds one or two requests
# at the end of a pass while the device is busy). Printout: run.txt (two series of 4), JSON: json/.
exec "$(dirname "$0")/../../../../scripts/ycsb-oom-ab" "$@"
