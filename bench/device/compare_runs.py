#!/usr/bin/env python3
"""compare_runs.py: do two seqtrain runs agree? Reads each run's metrics.jsonl and compares the
train losses logged at the same steps (and the last validation loss) by relative difference.

    python3 bench/device/compare_runs.py RUN_A RUN_B --rtol 1e-3 --label "forecast cuda vs cpu"

Prints one line: PASS/FAIL, the label, the steps compared and the largest relative difference;
exits 1 on FAIL (or when the runs share no logged step).
"""
import argparse
import json
import os
import sys


def losses(run):
    train, val = {}, None
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("loss") is None:
                continue
            if r.get("split") == "train":
                train[r["step"]] = r["loss"]
            elif r.get("split") == "val":
                val = r["loss"]
    return train, val


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rtol", type=float, required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("--last-only", action="store_true", help="compare only the last shared step (resume checks)")
    a = ap.parse_args()
    ta, va = losses(a.a)
    tb, vb = losses(a.b)
    steps = sorted(set(ta) & set(tb))
    if a.last_only:
        steps = steps[-1:]
    if not steps:
        print(f"FAIL {a.label}: no shared logged step ({sorted(ta)[:5]} vs {sorted(tb)[:5]})")
        return 1
    worst, at = 0.0, None
    for s in steps:
        d = abs(ta[s] - tb[s]) / max(abs(tb[s]), 1e-12)
        if d > worst or d != d:
            worst, at = d, s
    vd = abs(va - vb) / max(abs(vb), 1e-12) if va is not None and vb is not None else None
    ok = worst <= a.rtol and (vd is None or vd <= a.rtol)
    print(f"{'PASS' if ok else 'FAIL'} {a.label}: {len(steps)} steps to {steps[-1]}, max rel diff {worst:.2e}"
          f" (step {at}: {ta.get(at)} vs {tb.get(at)}), last val rel diff "
          f"{'n/a' if vd is None else f'{vd:.2e}'}, rtol {a.rtol:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
