#!/usr/bin/env python3
"""torch_gpt.py: the PyTorch peer of bench/bench_gpt.cpp, the same GPT training step in PyTorch.

    python bench/torch_gpt.py --shape cpu|gpu [--batch B] [--precision fp32|bf16] [--mode eager|compile]
                              [--threads N] [--steps S] [--warmup K] [--peak-gflops G] [--vocab V] [--json OUT]

Model: seqtrain_torch.gpt.GPT (nanoGPT's architecture and names; F.scaled_dot_product_attention
with is_causal=True where torch has it, torch >= 2.0, else the explicit masked softmax), bias on,
dropout 0, vocabulary 85 (as bench_gpt). Shapes as bench_gpt: cpu = 4 layers, 4 heads, n_embd
128, block 64, batch 12; gpu = 6 layers, 6 heads, n_embd 384, block 256, batch 64.
Step, the way nanoGPT's train.py writes it on a CPU: zero_grad(set_to_none=True), forward with
the loss (cross-entropy over every position), backward, clip_grad_norm_(1.0), AdamW over
nanoGPT's two groups (lr 1e-3, betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on dim >= 2).
--precision bf16: torch.autocast("cpu", dtype=torch.bfloat16) around forward and loss (as
nanoGPT's ctx); NOTE autocast runs the Linear layers and the head in bf16 too, seqtrain's bf16
only the attention products.
--mode compile: torch.compile(model) (default inductor backend, torch >= 2.0); the optimizer
and clipping stay eager as in nanoGPT. Compile time = the first step's wall time (it includes
tracing and compiling forward and backward) and is reported apart ("compile_s"); the warm-up
steps after it are not timed either.
Reported as bench_gpt does: median ms/step of S steps after K warm-up steps, tokens/s, GFLOP/s by
the same formula, tokens * (6 * (12 L C^2 + V C) + 12 L T C), % of the given f32 peak.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from seqtrain_torch.gpt import GPT, GPTConfig  # noqa: E402

SHAPES = {"cpu": dict(layers=4, heads=4, embd=128, block=64, batch=12),
          "gpu": dict(layers=6, heads=6, embd=384, block=256, batch=64)}


def step_flops(s, V):
    L, C, T = s["layers"], s["embd"], s["block"]
    tokens = s["batch"] * T
    return tokens * (6.0 * (12.0 * L * C * C + V * C) + 12.0 * L * T * C)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="cpu", choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--peak-gflops", type=float, default=0.0)
    ap.add_argument("--vocab", type=int, default=85)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    s = dict(SHAPES[a.shape])
    if a.batch > 0:
        s["batch"] = a.batch
    if a.mode == "compile" and not hasattr(torch, "compile"):
        sys.exit(f"torch_gpt.py: torch {torch.__version__} has no torch.compile")
    load_before = loadavg()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    x = torch.randint(1, a.vocab, (s["batch"], s["block"]), dtype=torch.long)
    y = torch.roll(x.reshape(-1), -1).reshape(x.shape)
    rss_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    model = GPT(GPTConfig(block_size=s["block"], vocab_size=a.vocab, n_layer=s["layers"], n_head=s["heads"],
                          n_embd=s["embd"], dropout=0.0, bias=True))
    model.train()
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
    params = [p for p in model.parameters()]
    fwd = torch.compile(model) if a.mode == "compile" else model
    if a.precision == "bf16":
        ctx = lambda: torch.autocast(device_type="cpu", dtype=torch.bfloat16)  # noqa: E731
    else:
        import contextlib
        ctx = contextlib.nullcontext

    times, first_s = [], 0.0
    loss_sum = 0.0
    switches = 0
    for i in range(1 + a.warmup + a.steps):  # step 0: compile (or the first eager step), not timed
        if i == 1 + a.warmup:
            switches = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with ctx():
            _, loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        loss_sum += float(loss.detach())
        if i == 0:
            first_s = dt
        elif i > a.warmup:
            times.append(dt * 1e3)
    switches = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw - switches
    ms = statistics.median(times)
    flops = step_flops(s, a.vocab)
    gflops = flops / ms / 1e6
    sdpa = hasattr(torch.nn.functional, "scaled_dot_product_attention")
    out = {
        "engine": "torch",
        "version": torch.__version__,
        "python": sys.executable,
        "mode": a.mode,
        "attention": "F.scaled_dot_product_attention(is_causal=True)" if sdpa else "explicit masked softmax",
        "cpu_capability": (torch.backends.cpu.get_cpu_capability()
                           if hasattr(torch.backends, "cpu") and hasattr(torch.backends.cpu, "get_cpu_capability")
                           else "n/a"),
        "shape_name": a.shape,
        "shape": dict(layers=s["layers"], heads=s["heads"], n_embd=s["embd"], block=s["block"], batch=s["batch"],
                      vocab=a.vocab),
        "precision": a.precision,
        "threads": torch.get_num_threads(),
        "steps": a.steps,
        "warmup": a.warmup,
        "ms_per_step": ms,
        "ms_all": times,
        "first_step_s": first_s,
        "compile_s": first_s - ms / 1e3 if a.mode == "compile" else None,
        "involuntary_switches": switches,
        "load_before": load_before,
        "load_after": loadavg(),
        "mean_loss": loss_sum / (1 + a.warmup + a.steps),
        "params": sum(p.numel() for p in params),
        "tokens_per_s": s["batch"] * s["block"] / (ms / 1e3),
        "flops_per_step": flops,
        "gflops": gflops,
        "peak_gflops": a.peak_gflops,
        "pct_peak": 100.0 * gflops / a.peak_gflops if a.peak_gflops > 0 else None,
        "rss_start_mb": rss_start,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }
    text = json.dumps(out, indent=2)
    print(text)
    print(f"torch_gpt: torch {torch.__version__} {a.mode} {a.shape} batch {s['batch']} {a.precision}: "
          f"{ms:.1f} ms/step, {out['tokens_per_s']:.0f} tokens/s, {gflops:.1f} GFLOP/s"
          + (f", compile {out['compile_s']:.1f} s" if a.mode == "compile" else ""), file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
