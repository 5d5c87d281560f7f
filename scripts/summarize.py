#!/usr/bin/env python3
"""Turns the JSON lines of `ringdb io --compare-fio --repeat N --json` into markdown tables."""
import json
import statistics
import sys


def rows(path):
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                yield json.loads(line)


def spread(xs):
    return f"{min(xs):.2f}..{max(xs):.2f}" if xs else "-"


def fio_compare(path):
    print("| target | config | QD | ringdb IOPS | fio IOPS | IOPS ratio (median) | per-pair range | "
          "ringdb cyc/IO | fio cyc/IO | cyc ratio | ringdb p50/p99 us | fio p50/p99 us | enters/IO |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for d in rows(path):
        r, f = d["ringdb"], d["fio"]
        print(f"| {r['target']} | {r['label']} | {r['iodepth']} | {r['iops']:.0f} | {f['iops']:.0f} | "
              f"**{d['ratio_iops']:.3f}** | {spread(d['ratio_iops_per_pair'])} | "
              f"{r['cycles_per_io']:.0f} | {f['cycles_per_io']:.0f} | {d['ratio_cycles_per_io']:.3f} | "
              f"{r['lat_us']['p50']:.1f}/{r['lat_us']['p99']:.1f} | {f['lat_us']['p50']:.1f}/{f['lat_us']['p99']:.1f} | "
              f"{r['enters_per_io']:.3f} |")
    print()
    print("IOPS and cycles/IO are the median run of the alternating repeats; the per-pair range is the"
          " spread of ringdb/fio IOPS over the pairs (run-to-run noise). cycles/IO = whole-process CPU"
          " time (io-wq and SQPOLL threads included, for fio measured over its process tree) x TSC rate / I/Os.")


def seed001(path):
    print("| target | row | tool | IOPS | MiB/s | p50 us | p99 us | p99.9 us | CPU % (whole) | CPU % (submitter) | cycles/IO | enters/IO | iowq |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for d in rows(path):
        for tool in ("ringdb", "fio"):
            r = d[tool]
            e = r.get("enters_per_io")
            w = r.get("iowq_workers")
            print(f"| {r['target']} | {d['row']} | {tool} | {r['iops']:.0f} | {r['mib_s']:.1f} | "
                  f"{r['lat_us']['p50']:.1f} | {r['lat_us']['p99']:.1f} | {r['lat_us']['p999']:.1f} | "
                  f"{r['cpu_pct']:.1f} | {r['cpu_submitter_pct']:.1f} | {r['cycles_per_io']:.0f} | "
                  f"{'-' if e is None else f'{e:.3f}'} | {'-' if w is None else w} |")
        print(f"| | | ratio ringdb/fio | **{d['ratio_iops']:.3f}** (pairs {spread(d['ratio_iops_per_pair'])}) | | | | | | | "
              f"{d['ratio_cycles_per_io']:.3f} | | |")


if __name__ == "__main__":
    {"fio-compare": fio_compare, "seed001": seed001}[sys.argv[1]](sys.argv[2])
