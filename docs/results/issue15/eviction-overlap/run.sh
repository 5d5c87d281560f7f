#!/bin/bash
# Alternates the binary from the session's start (base: 688f484) and this session's build
# (pf: 3993046), YCSB-B then C, on one loaded database (1M records, 51,143 pages, pool 40M).
for r in 1 2 3 4; do for w in b c; do for b in base pf; do
  /tmp/ringdb-$b ycsb --db /tmp/b15/oom --workload $w --distribution uniform --records 1000000 --pool 40M --runtime 8s --json --output /tmp/s8/y/$w-$b-$r.json >/dev/null 2>&1
done; done; done
