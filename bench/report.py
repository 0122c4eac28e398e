#!/usr/bin/env python3
"""report.py: turns the JSON files of one bench/run.sh run into a Markdown table, a CSV and a chart.

    python3 bench/report.py RAW_DIR OUT_PREFIX

RAW_DIR holds peak.json (and peak-end.json), meta.json and runs/<workload>.<engine>.r<k>.json
(bench_step.cpp and torch_step.py output, one per round). Each (workload, engine) row is its
fastest round (lowest median ms/step); "runs" gives how many rounds and the slowest one's
ms/step. Writes OUT_PREFIX.md, OUT_PREFIX.csv and OUT_PREFIX.svg (ms/step per workload and
engine, seqtrain's speedup on each peer's bar; bench/plot_svg.py). Speedup vs a peer is
peer ms/step / this row's ms/step, on the same workload.
"""
import csv
import glob
import json
import os
import sys

import plot_svg  # bench/plot_svg.py, beside this script

ORDER = ["W1", "W1GRU", "W2"]


def load(raw):
    groups = {}
    for path in sorted(glob.glob(os.path.join(raw, "runs", "*.json"))):
        workload, tag, _ = os.path.basename(path)[:-5].split(".")
        with open(path) as f:
            d = json.load(f)
        d["_tag"] = tag
        groups.setdefault((workload, tag), []).append(d)
    rows = []
    for runs in groups.values():
        best = min(runs, key=lambda d: d["ms_per_step"])
        best["_runs"] = len(runs)
        best["_slowest"] = max(d["ms_per_step"] for d in runs)
        rows.append(best)
    rows.sort(key=lambda d: (ORDER.index(d["workload"]) if d["workload"] in ORDER else 99, d["_tag"] != "seqtrain", d["_tag"]))
    return rows


def engine_name(d, meta):
    if d["engine"] == "seqtrain":
        if "rnn_impl" not in d:  # written before bench_step recorded its kernels
            return f"seqtrain {d['version']} (default RNN kernels; oneDNN {d['onednn']})"
        ckpt = ", grad checkpoint" if d.get("grad_checkpoint") else ""
        tuned = ", autotune" if d.get("autotune_on") else ""
        isa = f"; kernels {d['isa'].split(' ')[0]}" if "isa" in d else ""
        return f"seqtrain {d['version']} ({d['rnn_impl']} RNN{tuned}, {d['precision']}{ckpt}; oneDNN {d['onednn']}{isa})"
    label = meta.get("peers", {}).get(d["_tag"], d["_tag"])
    cap = f"; ATen {d['cpu_capability']}" if "cpu_capability" in d else ""
    return f"torch {d['version']} ({label}{cap})"


def load_meta_and_peak(raw):
    """RAW_DIR's meta.json, and the higher of its peak.json / peak-end.json measurements (a peak
    is a best case), or None when neither exists. Shared with matrix_report.py."""
    with open(os.path.join(raw, "meta.json")) as f:
        meta = json.load(f)
    peaks = []
    for name in ("peak.json", "peak-end.json"):
        if os.path.exists(os.path.join(raw, name)):
            with open(os.path.join(raw, name)) as f:
                peaks.append(json.load(f))
    return meta, max(peaks, key=lambda p: p["peak_gflops"]) if peaks else None


def short_name(d, meta):
    """The engine as the chart's legend names it: seqtrain and its commit, torch, its version and source."""
    if d["engine"] == "seqtrain":
        return f"seqtrain {d['version']}"
    label = meta.get("peers", {}).get(d["_tag"], d["_tag"])
    return f"torch {d['version']} ({label.split(',')[0]})"


def write_chart(prefix, rows, meta, peak):
    groups = []
    for w in dict.fromkeys(d["workload"] for d in rows):
        groups.append((w, [(short_name(d, meta), d["ms_per_step"]) for d in rows if d["workload"] == w]))
    st = next((d for d in rows if d["engine"] == "seqtrain"), None)
    isa = f", ISA cap {meta['isa_cap']}" if meta.get("isa_cap", "none") != "none" else ""
    plot_svg.write(prefix + ".svg", f"Training step, seqtrain against PyTorch: {meta['cpu']}, {meta['threads']} threads"
                   f" ({meta['pinned']}){isa}", groups, "ms/step",
                   subtitle=f"{meta['date']}; `{meta['command']}`; f32 matmul peak {peak['peak_gflops']:.1f} GFLOP/s; "
                            "each bar the fastest round's median step",
                   reference=short_name(st, meta) if st else None, ratio_name="seqtrain")


def main():
    raw, prefix = sys.argv[1], sys.argv[2]
    meta, peak = load_meta_and_peak(raw)
    rows = load(raw)
    peers = sorted({d["_tag"] for d in rows if d["engine"] != "seqtrain"})
    by = {(d["workload"], d["_tag"]): d for d in rows}

    header = ["workload", "engine", "steps", "runs (slowest ms/step)", "ms/step", "samples/s", "GFLOP/s", "% of peak", "peak RSS MB",
              "RSS after start-up MB", "ctx switches"]
    header += [f"speedup vs {p}" for p in peers]
    table = []
    for d in rows:
        line = [d["workload"], engine_name(d, meta), f"{d['steps']}+{d['warmup']}",
                f"{d['_runs']} ({d['_slowest']:.0f})", f"{d['ms_per_step']:.1f}", f"{d['samples_per_s']:.1f}",
                f"{d['gflops']:.2f}", f"{100 * d['gflops'] / peak['peak_gflops']:.1f}", f"{d['peak_rss_mb']:.0f}", f"{d['rss_start_mb']:.0f}",
                str((d.get("step") or d).get("involuntary_switches", "?"))]
        for p in peers:
            other = by.get((d["workload"], p))
            line.append("—" if other is None or other is d else f"{other['ms_per_step'] / d['ms_per_step']:.2f}x")
        table.append(line)

    with open(prefix + ".csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(header)
        wr.writerows(table)

    md = [f"# seqtrain step benchmark, {meta['date']}", "",
          f"Machine: {meta['cpu']}, {meta['nproc']} CPUs; threads {meta['threads']} "
          f"(pinned: {meta['pinned']}); OMP_WAIT_POLICY {meta.get('omp_wait_policy', 'unset')}; "
          f"ISA cap: {meta.get('isa_cap', 'none')}; "
          f"load average before/after: {meta['load_before']} / {meta['load_after']}",
          f"f32 matmul peak (2048^3, best of 20 runs, higher of start and end, {peak['threads']} threads): {peak['peak_gflops']:.1f} GFLOP/s "
          f"(dnnl::matmul {peak['peak']['matmul_gflops']:.1f}, dnnl_sgemm {peak['peak']['sgemm_gflops']:.1f})",
          f"Command: `{meta['command']}`; each row is the fastest of its runs; "
          "steps = timed + warm-up; ms/step is the median of the timed steps; ctx switches = "
          "involuntary context switches during the timed steps (other jobs taking the cores)", "",
          "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(r) + " |" for r in table]

    md += ["", "## seqtrain: RNN layers alone and where the step's time goes (medians, ms)", "",
           "RNN fwd/bwd: seqtrain's RnnStack (its configured kernels) inside the step, rebuilt from its "
           "layers. oneDNN prim: oneDNN 2.6's RNN primitive alone on the same shapes, weights pre-packed "
           "(a reference; with rnn_impl onednn the difference is nn/rnn.cpp's packing).", "",
           "| workload | step | RNN fwd | RNN bwd | RNN GFLOP/s | RNN % of peak | oneDNN prim fwd (reference) "
           "| oneDNN prim bwd (reference) | RNN fwd − prim fwd | RNN bwd − prim bwd | head+loss+dtop | clip | AdamW | zero_grad |",
           "|" + "---|" * 14]
    for d in rows:
        if d["engine"] != "seqtrain":
            continue
        ph = d["profile"]["phase_ms_median"]
        small = ph["head_forward"] + ph["loss"] + ph["head_backward"] + ph["dtop_fill"]
        md.append("| " + " | ".join([
            d["workload"], f"{d['ms_per_step']:.1f}", f"{ph['rnn_forward']:.1f}", f"{ph['rnn_backward']:.1f}",
            f"{d['rnn']['gflops']:.2f}", f"{100 * d['rnn']['gflops'] / peak['peak_gflops']:.1f}",
            f"{d['primitive']['forward_ms']:.1f}", f"{d['primitive']['backward_ms']:.1f}",
            f"{d['profile']['rnn_forward_overhead_ms']:.1f}", f"{d['profile']['rnn_backward_overhead_ms']:.1f}",
            f"{small:.2f}", f"{ph['clip']:.2f}", f"{ph['optimizer']:.2f}", f"{ph['zero_grad']:.2f}"]) + " |")
        for lay in d["primitive"]["layers"]:
            md.append(f"|   {d['workload']} layer {lay['layer']} (C={lay['C']}) | | | | | | "
                      f"{lay['forward_ms']:.1f} ({lay['forward_gflops']:.1f} GFLOP/s) | "
                      f"{lay['backward_ms']:.1f} ({lay['backward_gflops']:.1f} GFLOP/s) | | | | | | |")
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    write_chart(prefix, rows, meta, peak)
    print("\n".join(md))


if __name__ == "__main__":
    main()
