#!/usr/bin/env python3
"""matrix_report.py: turns one bench/matrix.sh run into the speed-switch matrix, Markdown, CSV, chart.

    python3 bench/matrix_report.py RAW_DIR OUT_PREFIX   the table: OUT_PREFIX.md and .csv, the chart
                                                        OUT_PREFIX.svg (bench/plot_svg.py)
    python3 bench/matrix_report.py --run RUN_DIR        one run's line, for matrix.sh's progress

RAW_DIR holds meta.json, peak.json (and peak-end.json), activations-<workload>.json
(bench_step --grad-checkpoint) and runs/<workload>.<config>.<engine>.r<k>/ with run.json
(engine, shape and switches, written by matrix.sh), log.txt and maxrss_kb (/usr/bin/time %M),
plus metrics.jsonl for seqtrain or result.json (bench/torch_matrix.py) for a PyTorch peer.
A seqtrain run's ms/step is the median over its train records after the first `warmup`
steps, each 1000 * batch / samples_per_s (log_every is 1, so a record is one step, data wait
included). Each (workload, config, engine) keeps its fastest round. The table has one row per
seqtrain configuration; each peer adds its ms/step on the same row and seqtrain's speedup over
it. The chart has one group of bars per workload and configuration, one bar per engine (ms/step),
seqtrain's speedup printed on each peer's bar. Standard library only.
"""
import csv
import glob
import json
import os
import re
import statistics
import sys

import plot_svg  # bench/plot_svg.py, beside this script
from report import load_meta_and_peak  # bench/report.py, beside this script

CONFIG_ORDER = ["baseline", "bf16", "loader", "autotune", "ckpt", "all"]
CONFIG_NAME = {
    "baseline": "baseline (fp32, 0 workers, no autotune)",
    "bf16": "mixed precision only (bf16)",
    "loader": "loader only (workers auto)",
    "autotune": "autotune only",
    "ckpt": "gradient checkpointing only",
    "all": "all switches (bf16 + workers auto + autotune)",
}
WORKLOAD_ORDER = ["W1", "W1GRU", "W2"]


def fail(msg):
    sys.exit(f"matrix_report.py: {msg}")


def step_flops(s):
    """FLOPs of one training step, counted as bench/bench_step.cpp counts them."""
    gates = 4 if s["cell"] == "lstm" else 3
    T, N, H = s["lookback"], s["batch"], s["hidden"]
    fwd = sum(2 * T * N * gates * H * ((s["features"] if k == 0 else H) + H) for k in range(s["layers"]))
    return 3 * (fwd + 2 * N * H * s["outputs"])


def load_run(d):
    with open(os.path.join(d, "run.json")) as f:
        run = json.load(f)
    with open(os.path.join(d, "maxrss_kb")) as f:
        run["peak_rss_mb"] = int(f.read().split()[-1]) / 1024.0
    if run["engine"] != "seqtrain":
        with open(os.path.join(d, "result.json")) as f:
            res = json.load(f)
        run.update(ms_per_step=res["ms_per_step"], timed_steps=len(res["ms_all"]), version=res["version"],
                   data_wait_share=None, workers_used=run["workers"])
        return run
    ms, wait_share = [], None
    with open(os.path.join(d, "metrics.jsonl")) as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{d}/metrics.jsonl line {n}: not JSON ({e})")
            if r.get("split") == "train" and r["step"] > run["warmup"] and r.get("samples_per_s"):
                ms.append(1000.0 * run["batch"] / r["samples_per_s"])
            elif r.get("split") == "data":
                wait_share = r.get("data_wait_share")
    if not ms:
        fail(f"{d}/metrics.jsonl has no train record after the {run['warmup']} warm-up steps; raise STEPS")
    run["ms_per_step"] = statistics.median(ms)
    run["timed_steps"] = len(ms)
    run["data_wait_share"] = wait_share
    run["workers_used"] = run["workers"]
    with open(os.path.join(d, "log.txt")) as f:
        m = re.search(r"loader: (\d+) worker", f.read())
    if m and run["workers"] == "auto":
        run["workers_used"] = f"auto = {m.group(1)}"
    return run


def one_run(d):
    r = load_run(d)
    print(f"   {r['ms_per_step']:.1f} ms/step (median of {r['timed_steps']}), peak RSS {r['peak_rss_mb']:.0f} MB, "
          f"workers {r['workers_used']}")


def fmt(x, spec, none="—"):
    return none if x is None else format(x, spec)


def engine_label(r, meta):
    if r["engine"] == "seqtrain":
        return f"seqtrain {meta['rev']}"
    source = {"torch-debian": "Debian", "torch-pypi": "PyPI"}.get(r["engine"], r["engine"])
    return f"torch {r['version']} ({source})"


def write_chart(prefix, rows, peers, by_engine, meta, peak):
    """ms/step per workload and configuration, one bar per engine."""
    groups = []
    for r in rows:
        bars = [(engine_label(r, meta), r["ms_per_step"])]
        for p in peers:
            o = by_engine.get((r["workload"], r["config"], p))
            if o is not None:
                bars.append((engine_label(o, meta), o["ms_per_step"]))
        name = CONFIG_NAME.get(r["config"], r["config"]).split(" (")[0]
        groups.append((f"{r['workload']} {name} ({r['precision']})", bars))
    plot_svg.write(prefix + ".svg", f"Speed-switch matrix, seqtrain train against PyTorch: {meta['cpu']}, "
                   f"{meta['threads']} threads ({meta['pinned']})", groups, "ms/step",
                   subtitle=f"{meta['date']}; `{meta['command']}`; f32 matmul peak {peak:.1f} GFLOP/s; "
                            "each bar the fastest round's median step",
                   reference=f"seqtrain {meta['rev']}", ratio_name="seqtrain")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--run":
        return one_run(sys.argv[2])
    if len(sys.argv) != 3:
        fail("usage: matrix_report.py RAW_DIR OUT_PREFIX | --run RUN_DIR")
    raw, prefix = sys.argv[1], sys.argv[2]
    meta, best = load_meta_and_peak(raw)
    if best is None:
        fail(f"{raw} has no peak.json")
    peak = best["peak_gflops"]

    groups = {}
    for d in sorted(glob.glob(os.path.join(raw, "runs", "*"))):
        r = load_run(d)
        groups.setdefault((r["workload"], r["config"], r["engine"]), []).append(r)
    if not groups:
        fail(f"{raw}/runs holds no runs")
    rows = []
    for runs in groups.values():
        best = min(runs, key=lambda r: r["ms_per_step"])
        best["runs"] = len(runs)
        best["slowest"] = max(r["ms_per_step"] for r in runs)
        rows.append(best)
    rank = lambda seq, x: seq.index(x) if x in seq else len(seq)
    rows.sort(key=lambda r: (rank(WORKLOAD_ORDER, r["workload"]), rank(CONFIG_ORDER, r["config"])))
    peers = sorted({r["engine"] for r in rows} - {"seqtrain"})
    by_engine = {(r["workload"], r["config"], r["engine"]): r for r in rows}
    rows = [r for r in rows if r["engine"] == "seqtrain"]
    by = {(r["workload"], r["config"]): r for r in rows}

    act = {}
    for w in {r["workload"] for r in rows}:
        p = os.path.join(raw, f"activations-{w}.json")
        if os.path.exists(p):
            with open(p) as f:
                act[w] = json.load(f)

    def activation(r):  # bench_step's fp32 model without and with checkpointing: those two rows
        a = act.get(r["workload"])
        if a is None or r["config"] not in ("baseline", "ckpt"):
            return None
        return a["activation_mb"] if r["grad_checkpoint"] else a["activation_mb_without_ckpt"]

    header = ["workload", "configuration", "precision", "data.workers", "autotune", "grad_checkpoint",
              "runs (slowest ms/step)", "ms/step", "speedup vs baseline", "samples/s", "GFLOP/s", "% of peak",
              "peak RSS MB", "data wait %", "activation MB (fp32, bench_step)"]
    for p in peers:
        header += [f"{p} ms/step", f"{p} peak RSS MB", f"speedup vs {p}"]
    table = []
    for r in rows:
        base = by.get((r["workload"], "baseline"))
        gflops = step_flops(r) / r["ms_per_step"] / 1e6
        table.append([
            r["workload"], CONFIG_NAME.get(r["config"], r["config"]), r["precision"], r["workers_used"],
            str(r["autotune"]).lower(), str(r["grad_checkpoint"]).lower(),
            f"{r['runs']} ({r['slowest']:.0f})", f"{r['ms_per_step']:.1f}",
            "—" if base is None else f"{base['ms_per_step'] / r['ms_per_step']:.2f}x",
            f"{1000.0 * r['batch'] / r['ms_per_step']:.1f}", f"{gflops:.1f}", f"{100.0 * gflops / peak:.1f}",
            f"{r['peak_rss_mb']:.0f}", fmt(None if r["data_wait_share"] is None else 100 * r["data_wait_share"], ".2f"),
            fmt(activation(r), ".1f"),
        ])
        for p in peers:
            o = by_engine.get((r["workload"], r["config"], p))
            if o is None:
                table[-1] += ["—", "—", "—"]
            else:
                table[-1] += [f"{o['ms_per_step']:.1f}", f"{o['peak_rss_mb']:.0f}",
                              f"{o['ms_per_step'] / r['ms_per_step']:.2f}x"]

    with open(prefix + ".csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(header)
        wr.writerows(table)

    lines = [f"# seqtrain speed-switch matrix, {meta['date']}", "",
             f"Command: `{meta['command']}` (seqtrain {meta['rev']}).",
             f"CPU: {meta['cpu']}, {meta['nproc']} cores; {meta['threads']} threads, pinned: {meta['pinned']}; "
             f"load average {meta['load_before']} before, {meta['load_after']} after.",
             f"Measured f32 matmul peak: {peak:.1f} GFLOP/s (bench_step --workload peak, higher of start and end).",
             f"Each run: a fresh `seqtrain train` process, {meta['warmup']} warm-up + {meta['steps']} timed steps "
             f"(median ms/step); {meta['repeat']} round(s), fastest kept. Peak RSS: /usr/bin/time, whole process.",
             ]
    for p in peers:
        some = next(o for k, o in by_engine.items() if k[2] == p)
        lines.append(f"{p}: torch {some['version']}, bench/torch_matrix.py, {some['warmup']} warm-up + "
                     f"{some['steps']} timed steps; rows with no PyTorch equivalent show —; its loader rows use "
                     f"DataLoader num_workers {meta.get('torch_workers', '?')}.")
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in table]
    lines.append("")
    # The targets, computed from the rows above (issue 5, "Speed and memory").
    for w in sorted({r["workload"] for r in rows}, key=lambda w: rank(WORKLOAD_ORDER, w)):
        base, bf16, ckpt = by.get((w, "baseline")), by.get((w, "bf16")), by.get((w, "ckpt"))
        if base and bf16:
            s = base["ms_per_step"] / bf16["ms_per_step"]
            lines.append(f"- {w}: bf16 speedup over fp32 {s:.2f}x (target ≥ 1.7x: {'met' if s >= 1.7 else 'missed'}).")
        if base and ckpt:
            extra = 100.0 * (ckpt["ms_per_step"] / base["ms_per_step"] - 1)
            line = f"- {w}: gradient checkpointing changes step time by {extra:+.1f}% (target ≤ +35%: " \
                   f"{'met' if extra <= 35 else 'missed'})"
            a = act.get(w)
            if a is not None:
                saved = a["activation_saved_pct"]
                line += f", saves {saved:.1f}% of activation memory ({a['activation_mb_without_ckpt']:.1f} -> " \
                        f"{a['activation_mb']:.1f} MB; target ≥ 40%: {'met' if saved >= 40 else 'missed'})"
            line += f"; peak RSS {base['peak_rss_mb']:.0f} -> {ckpt['peak_rss_mb']:.0f} MB."
            lines.append(line)
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    write_chart(prefix, rows, peers, by_engine, meta, peak)


if __name__ == "__main__":
    main()
