#!/usr/bin/env bash
# 927437e's build (BASE) against it with capacity.patch applied (NEW: engines hold twice their
# depth in flight; reverted). The patch: docs/results/issue12/twelfth/capacity.patch.
exec "$(dirname "$0")/../../../../scripts/ycsb-oom-ab" "$@"
