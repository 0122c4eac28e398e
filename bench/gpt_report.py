#!/usr/bin/env python3
"""gpt_report.py: the Markdown report of one bench/gpt.sh run (printed to stdout) and its chart.

    python3 bench/gpt_report.py RAW_DIR      also writes RAW_DIR.svg (bench/plot_svg.py): ms/step
                                             per shape and precision, one bar per engine, seqtrain's
                                             speedup on each peer's bar

RAW_DIR holds meta.json, peak.json / peak-end.json (bench_step --workload peak; the higher is
used), runs/<shape>.<precision>.<engine>.json (bench_gpt.cpp, torch_gpt.py), runs/*.guard
("tries disturbed-samples waited-seconds" of gpt.sh's shared-machine guard) and
runs/attention.log. Speedup of seqtrain vs a peer = peer ms/step / seqtrain ms/step on the same
shape and precision.
"""
import glob
import json
import os
import sys

import plot_svg  # bench/plot_svg.py, beside this script

PHASES = ["embed", "layernorm", "attention", "linear", "gelu", "residual", "head", "loss", "clip", "optimizer",
          "zero_grad"]


def write_chart(raw, runs, meta, peak):
    st = [d for (_, _, e), d in runs.items() if e == "seqtrain"]
    seqtrain = f"seqtrain {st[0]['version']}" if st else None  # one name (colour) for every seqtrain bar

    def label(engine, d):
        if engine == "seqtrain":
            return seqtrain
        return f"torch {d['version']} {'PyPI' if engine.startswith('torch-pypi') else 'Debian'} {d['mode']}"
    groups = []
    for shape in ("cpu", "gpu"):
        for prec in ("fp32", "bf16"):
            bars = [(label(e, d), d["ms_per_step"]) for (s, p, e), d in sorted(runs.items(), key=lambda kv: (
                kv[0][2] != "seqtrain", kv[0][2])) if (s, p) == (shape, prec)]
            if not bars:
                continue
            sh = next(d["shape"] for (s, p, _), d in runs.items() if (s, p) == (shape, prec))
            groups.append((f"{shape} (L{sh['layers']} H{sh['heads']} C{sh['n_embd']} T{sh['block']} B{sh['batch']}) "
                           f"{prec}", bars))
    plot_svg.write(raw.rstrip("/") + ".svg", f"GPT training step, seqtrain against PyTorch: {meta['cpu']}, "
                   f"{meta['threads']} threads ({meta['pinned']})", groups, "ms/step",
                   subtitle=f"{meta['date']}; `{meta['command']}` (seqtrain {meta['rev']}); f32 matmul peak "
                            f"{peak:.1f} GFLOP/s; median of the timed steps",
                   reference=seqtrain, ratio_name="seqtrain")


def main():
    raw = sys.argv[1]
    meta = json.load(open(os.path.join(raw, "meta.json")))
    peaks = [json.load(open(os.path.join(raw, n))) for n in ("peak.json", "peak-end.json")
             if os.path.exists(os.path.join(raw, n))]
    pk = max(peaks, key=lambda p: p["peak_gflops"])
    peak = pk["peak_gflops"]
    runs = {}
    for path in sorted(glob.glob(os.path.join(raw, "runs", "*.json"))):
        shape, prec, engine = os.path.basename(path)[:-5].split(".")
        d = json.load(open(path))
        g = path[:-5] + ".guard"
        d["_guard"] = open(g).read().split() if os.path.exists(g) else ["?", "?", "?"]
        runs[(shape, prec, engine)] = d

    def name(engine, d):
        if engine == "seqtrain":
            return f"seqtrain {d['version']} (oneDNN {d['onednn']}; {d['isa'].split(' ')[0]})"
        who = "PyPI" if engine.startswith("torch-pypi") else "Debian"
        return f"torch {d['version']} {who} {d['mode']}"

    print(f"# seqtrain GPT step benchmark, {meta['date']}\n")
    print(f"Machine: {meta['cpu']}, {meta['nproc']} CPUs, ISA flags: {meta['isa']}; threads {meta['threads']} "
          f"(pinned: {meta['pinned']}); load average before/after: {meta['load_before']} / {meta['load_after']}  ")
    print(f"f32 matmul peak (2048^3, best of 20, higher of start and end): **{peak:.1f} GFLOP/s** "
          f"(dnnl_sgemm {pk['peak']['sgemm_gflops']:.1f}, dnnl::matmul {pk['peak']['matmul_gflops']:.1f}"
          + (f"; bf16 GEMM {pk['peak']['bf16_gemm_gflops']:.1f}" if pk['peak'].get('bf16_gemm_gflops') else "")
          + ")  ")
    print(f"Command: `{meta['command']}` (seqtrain {meta['rev']})  ")
    print("FLOPs/step = tokens * (6 * (12 L C^2 + V C) + 12 L T C) (nanoGPT's estimate_mfu convention, "
          "attention over the full T x T). Guard: tries = runs made (a run that saw other work on the "
          "machine is repeated), busy = 1-s samples of the kept run that saw a foreign compiler or "
          "runnable process (as busy/total where recorded), wait = seconds waited for other compilers to finish first.\n")
    hdr = ["shape", "prec", "engine", "steps", "ms/step", "tokens/s", "GFLOP/s", "% of f32 peak", "compile s",
           "peak RSS MB", "ctx sw", "guard: tries, busy samples, wait", "seqtrain speedup", "bf16 / own fp32"]
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    shapes = [s for s in ("cpu", "gpu") if any(k[0] == s for k in runs)]
    for shape in shapes:
        for prec in ("fp32", "bf16"):
            st = runs.get((shape, prec, "seqtrain"))
            for (s2, p2, engine), d in runs.items():
                if (s2, p2) != (shape, prec):
                    continue
                sh = d["shape"]
                label = f"{shape} (L{sh['layers']} H{sh['heads']} C{sh['n_embd']} T{sh['block']} B{sh['batch']})"
                speed = "—"
                if st is not None and d is not st:
                    speed = f"**{d['ms_per_step'] / st['ms_per_step']:.2f}x**"
                own = runs.get((shape, "fp32", engine))
                bf = f"{own['ms_per_step'] / d['ms_per_step']:.2f}x" if prec == "bf16" and own else "—"
                comp = f"{d['compile_s']:.1f}" if d.get("compile_s") is not None else "—"
                t1 = os.path.join(raw, "runs", f"{shape}.{prec}.{engine}.try1")
                if d.get("compile_s") is not None and os.path.exists(t1) and d["_guard"][0] != "1":
                    comp = f"{json.load(open(t1))['compile_s']:.1f} (warm {d['compile_s']:.1f})"
                sw = (d.get("step") or d).get("involuntary_switches", "?")
                g = d["_guard"]
                print("| " + " | ".join([
                    label, prec, name(engine, d), f"{d['steps']}+{d['warmup']}", f"{d['ms_per_step']:.1f}",
                    f"{d['tokens_per_s']:.0f}", f"{d['gflops']:.1f}", f"{100 * d['gflops'] / peak:.1f}", comp,
                    f"{d['peak_rss_mb']:.0f}", str(sw), f"{g[0]}, {g[1]}, {g[2]} s", speed, bf]) + " |")

    print("\n## Where seqtrain's step goes (per phase, median ms of the profile steps; forward + backward)\n")
    print("The model rebuilt from its layers as models/gpt.cpp wires them, a clock around each call "
          "(bench/bench_gpt.cpp). linear = c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj; attention = the "
          "flash kernel alone; head = the tied lm_head GEMMs.\n")
    hdr = ["shape", "prec", "step ms", "profile sum ms"] + PHASES + ["linear GFLOP/s (% peak)",
                                                                     "attention GFLOP/s causal (% peak)"]
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for shape in shapes:
        for prec in ("fp32", "bf16"):
            d = runs.get((shape, prec, "seqtrain"))
            if not d or "profile" not in d:
                continue
            pr = d["profile"]
            ph = pr["phases"]
            tot = pr["sum_ms_median"]
            cells = [f"{ph[p]['ms']:.2f} ({100 * ph[p]['ms'] / tot:.0f}%)" for p in PHASES]
            lin = pr["linear_flops"] / ph["linear"]["ms"] / 1e6
            att = pr["attention_flops_causal"] / ph["attention"]["ms"] / 1e6
            print("| " + " | ".join([shape, prec, f"{d['ms_per_step']:.1f}", f"{tot:.1f}"] + cells +
                                   [f"{lin:.0f} ({100 * lin / peak:.0f}%)", f"{att:.0f} ({100 * att / peak:.0f}%)"])
                  + " |")
    print("\nForward / backward split (ms):\n")
    print("| shape | prec | " + " | ".join(PHASES) + " |")
    print("|" + "---|" * (len(PHASES) + 2))
    for shape in shapes:
        for prec in ("fp32", "bf16"):
            d = runs.get((shape, prec, "seqtrain"))
            if not d or "profile" not in d:
                continue
            ph = d["profile"]["phases"]
            print("| " + " | ".join([shape, prec] + [f"{ph[p]['forward_ms']:.2f} / {ph[p]['backward_ms']:.2f}"
                                                     for p in PHASES]) + " |")
    write_chart(raw, runs, meta, peak)
    att = os.path.join(raw, "runs", "attention.log")
    if os.path.exists(att):
        print("\n## Attention micro-benchmark (build/bench_attention, causal FLOPs incl. the backward's recompute)\n")
        print("```")
        print(open(att).read().rstrip())
        print("```")


if __name__ == "__main__":
    main()
