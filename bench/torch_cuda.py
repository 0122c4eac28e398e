#!/usr/bin/env python3
"""torch_cuda.py: the PyTorch peer of bench/bench_cuda.cpp, the same training steps on a GPU.

    python3 bench/torch_cuda.py --workload W1|moola|gpt [--mode fp32|amp_bf16|amp_fp16]
                                [--compile] [--steps S] [--warmup K]

Workloads as bench_cuda: W1 (LSTM 128 x 2 over [256, 150, 8]), moola (BiLSTM 128 x 2 over
[512, 105, 4]), each with Linear on the last step's output and MSE; gpt (nanoGPT's
shakespeare_char GPU recipe through seqtrain_torch.gpt: batch 64, block 256, 6 x 6 x 384, no
biases, dropout 0.2, vocabulary 65). AdamW lr 1e-3 (fused where this torch has it), clipping at 1,
torch.backends.cudnn.benchmark = True, TF32 allowed for matmuls and cuDNN (torch's defaults for
cuDNN, set for matmuls as nanoGPT does). amp_bf16 / amp_fp16: torch.autocast("cuda") around
forward and loss; amp_fp16 with a GradScaler (the AMP recipe). --compile: torch.compile(model).
Timing: S steps after K warm-up ones, torch.cuda.synchronize() before and after; the loss is not
read in the loop (no .item()). Prints one JSON line.
"""
import argparse
import contextlib
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


class Forecaster(nn.Module):
    def __init__(self, features, hidden, layers, bidirectional):
        super().__init__()
        self.rnn = nn.LSTM(features, hidden, layers, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), 1)

    def forward(self, x, y):
        out, _ = self.rnn(x)
        pred = self.head(out[:, -1])
        return pred, F.mse_loss(pred.float(), y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="W1", choices=["W1", "moola", "gpt"])
    ap.add_argument("--mode", default="fp32", choices=["fp32", "fp32_strict", "amp_bf16", "amp_fp16"])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    # fp32_strict: no TF32 anywhere, the arithmetic of seqtrain's runtime.precision fp32.
    torch.backends.cuda.matmul.allow_tf32 = a.mode != "fp32_strict"
    torch.backends.cudnn.allow_tf32 = a.mode != "fp32_strict"
    torch.manual_seed(1234)
    if a.workload == "gpt":
        from seqtrain_torch.gpt import GPT, GPTConfig
        B, T, L, C, V = 64, 256, 6, 384, 65
        model = GPT(GPTConfig(block_size=T, vocab_size=V, n_layer=L, n_head=6, n_embd=C, dropout=0.2,
                              bias=False)).to(dev)
        x = torch.randint(0, V, (B, T), device=dev)
        y = torch.roll(x.reshape(-1), -1).reshape(B, T)
        flops = B * T * (6.0 * (12.0 * L * C * C + V * C) + 12.0 * L * T * C)
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
        betas = (0.9, 0.99)
    else:
        moola = a.workload == "moola"
        B, T, Fe, H = (512, 105, 4, 128) if moola else (256, 150, 8, 128)
        dirs = 2 if moola else 1
        model = Forecaster(Fe, H, 2, moola).to(dev)
        x = torch.randn(B, T, Fe, device=dev)
        y = torch.randn(B, 1, device=dev)
        fwd = sum(dirs * 2.0 * T * B * 4 * H * ((Fe if l == 0 else dirs * H) + H) for l in range(2)) + 2.0 * B * dirs * H
        flops = 3.0 * fwd
        groups = model.parameters()
        betas = (0.9, 0.999)
    kw = {"fused": True} if "fused" in torch.optim.AdamW.__init__.__code__.co_varnames else {}
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=betas, **kw)
    fwd_model = torch.compile(model) if a.compile else model
    dtype = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(a.mode)
    ctx = (lambda: torch.autocast("cuda", dtype=dtype)) if dtype else contextlib.nullcontext
    scaler = torch.cuda.amp.GradScaler() if a.mode == "amp_fp16" else None
    params = list(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        with ctx():
            _, loss = fwd_model(x, y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
        return loss

    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t) * 1e3 / a.steps
    out = {"engine": "torch", "version": torch.__version__, "gpu": torch.cuda.get_device_name(0),
           "workload": a.workload, "mode": a.mode, "compile": a.compile, "batch": B, "steps": a.steps,
           "warmup": a.warmup, "warmup_s": warm_s, "ms_per_step": ms, "flops_per_step": flops,
           "tflops": flops / ms / 1e9, "last_loss": float(loss)}
    print(json.dumps(out))
    print(f"torch_cuda: {a.workload} {a.mode}{' compile' if a.compile else ''}: {ms:.2f} ms/step, "
          f"{flops / ms / 1e9:.1f} TFLOP/s", file=sys.stderr)


if __name__ == "__main__":
    main()
