#!/usr/bin/env python3
"""torch_step.py: the PyTorch peer of bench/bench_step.cpp, the same training step in plain PyTorch.

    python3 bench/torch_step.py --workload W1|W2|W1GRU [--threads N] [--steps S] [--warmup K]
                                [--peak-gflops G] [--json OUT]

Model: nn.LSTM / nn.GRU (batch_first) -> output at the last time step -> nn.Linear head.
Step: zero_grad(set_to_none=True), forward, MSELoss, backward, clip_grad_norm_(1.0),
AdamW(lr=1e-3, torch's other defaults), on fixed-seed random data; the way a PyTorch user
writes it, nothing tuned. The loss is read once after the loop (CPU torch runs eagerly, so
no per-step sync is needed to time it).

Reported as bench_step does: the median ms/step of S steps after K warm-up steps, samples/s,
GFLOP/s by the same formula (RNN forward per layer 2*T*N*G*H*(C+H), G = 4 LSTM / 3 GRU,
head 2*N*H*O, backward = 2x forward, step = 3x forward), % of the given f32 matmul peak,
and peak RSS (resource.getrusage ru_maxrss) read right after the step loop.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

import torch
from torch import nn

WORKLOADS = {
    "W1": dict(cell="lstm", batch=256, lookback=150, features=8, hidden=128, layers=2, outputs=1),
    "W1GRU": dict(cell="gru", batch=256, lookback=150, features=8, hidden=128, layers=2, outputs=1),
    "W2": dict(cell="lstm", batch=32, lookback=256, features=128, hidden=512, layers=2, outputs=1),
}


class Forecaster(nn.Module):
    def __init__(self, cell, features, hidden, layers, outputs):
        super().__init__()
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(features, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, outputs)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def step_flops(w):
    gates = 4 if w["cell"] == "lstm" else 3
    t, n, h = w["lookback"], w["batch"], w["hidden"]
    fwd = 0.0
    for k in range(w["layers"]):
        c = w["features"] if k == 0 else h
        fwd += 2.0 * t * n * gates * h * (c + h)
    head = 2.0 * n * h * w["outputs"]
    return 3.0 * (fwd + head)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def involuntary_switches():
    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kilobytes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="W1", choices=sorted(WORKLOADS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--peak-gflops", type=float, default=0.0)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    w = WORKLOADS[a.workload]
    load_before = loadavg()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    x = torch.randn(w["batch"], w["lookback"], w["features"])
    y = torch.randn(w["batch"], w["outputs"])
    rss_start = rss_mb()

    model = Forecaster(w["cell"], w["features"], w["hidden"], w["layers"], w["outputs"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    params = list(model.parameters())

    times = []
    first_ms = 0.0
    loss_sum = torch.zeros(())
    switches = 0
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            switches = involuntary_switches()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        loss_sum += loss.detach()
        ms = (time.perf_counter() - t0) * 1e3
        if i == 0:
            first_ms = ms
        if i >= a.warmup:
            times.append(ms)
    rss_peak = rss_mb()
    switches = involuntary_switches() - switches

    ms = statistics.median(times)
    flops = step_flops(w)
    gflops = flops / ms / 1e6
    out = {
        "engine": "torch",
        "version": torch.__version__,
        "python": sys.executable,
        "mkldnn": torch.backends.mkldnn.is_available(),
        # ATen's kernel level (ATEN_CPU_CAPABILITY caps it); torch 1.13 has no query for it.
        "cpu_capability": (torch.backends.cpu.get_cpu_capability()
                           if hasattr(torch.backends, "cpu") and hasattr(torch.backends.cpu, "get_cpu_capability")
                           else os.environ.get("ATEN_CPU_CAPABILITY", "default")),
        "workload": a.workload,
        "threads": torch.get_num_threads(),
        "shape": w,
        "steps": a.steps,
        "warmup": a.warmup,
        "ms_per_step": ms,
        "ms_all": times,
        "involuntary_switches": switches,
        "load_before": load_before,
        "load_after": loadavg(),
        "first_step_ms": first_ms,
        "mean_loss": float(loss_sum) / (a.warmup + a.steps),
        "params": sum(p.numel() for p in params),
        "samples_per_s": w["batch"] / (ms / 1e3),
        "flops_per_step": flops,
        "gflops": gflops,
        "peak_gflops": a.peak_gflops,
        "pct_peak": 100.0 * gflops / a.peak_gflops if a.peak_gflops > 0 else None,
        "rss_start_mb": rss_start,
        "peak_rss_mb": rss_peak,
        "omp_num_threads_env": os.environ.get("OMP_NUM_THREADS"),
    }
    text = json.dumps(out, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
