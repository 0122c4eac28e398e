#!/usr/bin/env python3
"""kernel_table.py: Nsight Compute's CSV (ncu --metrics gpu__time_duration.sum --csv) summed by
kernel name, per step: calls, total microseconds and share, largest first.

    python3 bench/device/kernel_table.py ncu.csv --steps 3
"""
import argparse
import csv
import io
import re
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=1, help="steps the profile covered (totals are divided by it)")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    text = open(a.csv, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        print("kernel_table: no ncu table in", a.csv)
        return
    rows = csv.DictReader(io.StringIO(text[start:]))
    ns, calls = defaultdict(float), defaultdict(int)
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = re.sub(r"\(.*", "", r["Kernel Name"])[:70]
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        ns[name] += v * {"ns": 1, "nsecond": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}.get(unit, 1)
        calls[name] += 1
    total = sum(ns.values())
    print(f"kernels: {sum(calls.values())} launches, {total / 1e3 / a.steps:.1f} us of GPU time per step "
          f"(over {a.steps} steps)")
    for name, v in sorted(ns.items(), key=lambda kv: -kv[1])[: a.top]:
        print(f"{v / 1e3 / a.steps:10.1f} us {100 * v / total:5.1f}% {calls[name] / a.steps:7.1f}x  {name}")


if __name__ == "__main__":
    main()
