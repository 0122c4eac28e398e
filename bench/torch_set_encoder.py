#!/usr/bin/env python3
"""torch_set_encoder.py: the PyTorch peer of bench/bench_set_encoder.cpp, the AAM set encoder's step.

    python bench/torch_set_encoder.py [--lengths full|aam|half] [--mode eager|compile] [--threads N]
                                      [--steps S] [--warmup K] [--batch B] [--json OUT]

Model as the AAM system writes it: Linear(64, 128) -> nn.TransformerEncoder of 4
nn.TransformerEncoderLayer(d_model 128, nhead 4, dim_feedforward 512, dropout 0, activation gelu,
batch_first, norm_first) with src_key_padding_mask -> LayerNorm -> mean over valid elements ->
Linear(128, 4). Training mode (no nested-tensor fast path, so every padded position is
computed, as a training step does in PyTorch). Step: zero_grad(set_to_none=True), forward,
cross-entropy, backward, clip_grad_norm_(1.0), AdamW(lr 1e-3, weight decay 0.01).
--mode compile: torch.compile(model) (torch >= 2.0); the first step's wall time is reported
apart as compile_s and not timed. Lengths as bench_set_encoder: full (256), aam (20 + 97 i mod 237
for sample i: spread over 20..256) or half (128). GFLOP/s by bench_set_encoder's formula.
"""
import argparse
import json
import resource
import statistics
import time

import torch
import torch.nn as nn

B, T, F, C, L, H, FF, K = 64, 256, 64, 128, 4, 4, 512, 4


class SetEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(F, C)
        layer = nn.TransformerEncoderLayer(C, H, FF, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(C)
        self.head = nn.Linear(C, K)

    def forward(self, x, pad):
        h = self.norm(self.encoder(self.proj(x), src_key_padding_mask=pad))
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        pooled = (h * keep).sum(1) / keep.sum(1)
        return self.head(pooled)


def lengths_of(kind, batch):
    if kind == "full":
        return [T] * batch
    if kind == "half":
        return [T // 2] * batch
    return [20 + (i * 97) % (T - 20 + 1) for i in range(batch)]  # bench_set_encoder's formula


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="aam", choices=["full", "aam", "half"])
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=B)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = SetEncoder().train()
    run = torch.compile(model) if a.mode == "compile" else model
    x = torch.randn(a.batch, T, F)
    y = torch.randint(0, K, (a.batch,))
    lens = torch.tensor(lengths_of(a.lengths, a.batch))
    pad = torch.arange(T).unsqueeze(0) >= lens.unsqueeze(1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(run(x, pad), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    t0 = time.perf_counter()
    loss = step()
    first_s = time.perf_counter() - t0
    times = []
    for i in range(a.warmup + a.steps - 1):
        t0 = time.perf_counter()
        loss = step()
        if i >= a.warmup - 1:
            times.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(times)
    flops = a.batch * T * 3.0 * (2.0 * F * C + L * (8.0 * C * C + 4.0 * C * FF + 4.0 * T * C))
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    out = {"engine": f"torch {torch.__version__} {a.mode}", "lengths": a.lengths, "batch": a.batch,
           "valid_share": float(lens.sum()) / (a.batch * T), "threads": a.threads, "ms_step": med,
           "first_ms": first_s * 1e3, "compile_s": first_s if a.mode == "compile" else 0.0,
           "gflops": flops / (med * 1e6), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "loadavg": load, "loss": loss}
    print(json.dumps(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
