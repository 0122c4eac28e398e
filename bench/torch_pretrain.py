#!/usr/bin/env python3
"""torch_pretrain.py: the PyTorch peer of bench/bench_pretrain.cpp, one masked-pretraining step.

    python bench/torch_pretrain.py [--model bilstm|transformer] [--compile] [--threads N]
                                   [--steps S] [--warmup K] [--batch B] [--std-penalty W]
                                   [--json OUT]

Shape: batch 512, T 105, F 4 (moola's). Models, named as seqtrain names their tensors:
  bilstm       rnn = nn.LSTM(F, 128, 2 layers, bidirectional, batch_first); width D = 256
  transformer  input_proj = Linear(F, 128) + pos_embed (learned, nn.Embedding(T, 128)) ->
               encoder = nn.TransformerEncoder of 4 nn.TransformerEncoderLayer(d_model 128,
               nhead 4, dim_feedforward 512, dropout 0, gelu, batch_first, norm_first) with a
               final LayerNorm (encoder.norm); width D = 128
Both: masked inputs replaced by mask_token [F] (learned); decoder LayerNorm(D) -> Linear(D, D)
-> GELU -> Linear(D, F); loss = masked MSE (squared errors summed over the masked elements /
their count); with --std-penalty W, + W * mean_c relu(1 - std_c), std_c the population std of
encoder output dimension c over the (batch * steps) rows (tests/py/masked_loss_ref.py).
Masking: patch masking at 15%, patches of 8 steps with all features: each sample masks
k = max(1, round(0.15 * T / 8)) of its ceil(T / 8) patches (the last one shorter), chosen
without replacement, drawn each step with vectorised torch ops on the CPU.
Timed step: mask draw, zero_grad(set_to_none=True), forward, loss, backward, AdamW(lr 1e-3,
weight decay 0.01) step. The data are one fixed random batch. --compile: torch.compile(model)
(torch >= 2.0); its first step's wall time is reported apart as compile_s and not timed; a
failure is reported as a JSON line with "error" and exit status 1.
Prints one JSON line (the median ms of the timed steps, torch's version, threads, ...).
"""
import argparse
import json
import math
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn

B, T, F = 512, 105, 4
H = 128                       # LSTM hidden per direction
C, LAYERS, HEADS, FF = 128, 4, 4, 512
RATIO, PATCH = 0.15, 8


class Decoder(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, d)
        self.fc2 = nn.Linear(d, F)

    def forward(self, h):
        return self.fc2(nn.functional.gelu(self.fc1(self.norm(h))))


class BiLstmPretrainer(nn.Module):
    width = 2 * H

    def __init__(self):
        super().__init__()
        self.mask_token = nn.Parameter(torch.zeros(F))
        self.rnn = nn.LSTM(F, H, num_layers=2, bidirectional=True, batch_first=True)
        self.decoder = Decoder(self.width)

    def encode(self, x):
        return self.rnn(x)[0]

    def forward(self, x, mask):
        h = self.encode(torch.where(mask.unsqueeze(-1), self.mask_token, x))
        return self.decoder(h), h


class TransformerPretrainer(BiLstmPretrainer):
    width = C

    def __init__(self):
        nn.Module.__init__(self)
        self.mask_token = nn.Parameter(torch.zeros(F))
        self.input_proj = nn.Linear(F, C)
        self.pos_embed = nn.Embedding(T, C)
        layer = nn.TransformerEncoderLayer(C, HEADS, FF, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, norm=nn.LayerNorm(C), enable_nested_tensor=False)
        self.decoder = Decoder(C)

    def encode(self, x):
        return self.encoder(self.input_proj(x) + self.pos_embed.weight[: x.shape[1]])


def draw_patch_mask(batch, gen):
    """[batch, T] bool: k whole patches of PATCH steps per sample, chosen without replacement."""
    patches = math.ceil(T / PATCH)
    k = max(1, round(RATIO * T / PATCH))
    chosen = torch.rand(batch, patches, generator=gen).argsort(dim=1)[:, :k]
    per_patch = torch.zeros(batch, patches, dtype=torch.bool).scatter_(1, chosen, True)
    return per_patch.repeat_interleave(PATCH, dim=1)[:, :T]


def masked_mse(pred, x, mask):
    m = mask.unsqueeze(-1).to(pred.dtype)
    return ((pred - x) ** 2 * m).sum() / (m.sum() * pred.shape[-1])


def std_penalty(h):
    return torch.relu(1 - torch.std(h.reshape(-1, h.shape[-1]), dim=0, unbiased=False)).mean()


def forward_flops(model, batch):
    """Matmul FLOPs of one forward pass (x3 for a training step)."""
    if isinstance(model, TransformerPretrainer):
        enc = 2.0 * F * C + LAYERS * (8.0 * C * C + 4.0 * C * FF + 4.0 * T * C)
    else:  # two directions per layer, 4 gates of H over [input, h]
        enc = sum(2 * 2.0 * 4 * H * (n_in + H) for n_in in (F, 2 * H))
    d = model.width
    return batch * T * (enc + 2.0 * d * d + 2.0 * d * F)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bilstm", choices=["bilstm", "transformer"])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=B)
    ap.add_argument("--std-penalty", type=float, default=0.0)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(2)
    model = (TransformerPretrainer() if a.model == "transformer" else BiLstmPretrainer()).train()
    mode = "compile" if a.compile else "eager"
    engine = f"torch {torch.__version__} {mode}"

    def report_failure(what, e):
        print(json.dumps({"engine": engine, "model": a.model, "error": f"{what}: {type(e).__name__}: {e}"}))
        sys.exit(1)

    run = model
    if a.compile:
        if not hasattr(torch, "compile"):
            report_failure("torch.compile", RuntimeError(f"needs torch >= 2.0, this is {torch.__version__}"))
        run = torch.compile(model)
    x = torch.randn(a.batch, T, F)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    masked_share = []

    def step():
        mask = draw_patch_mask(a.batch, gen)
        opt.zero_grad(set_to_none=True)
        pred, h = run(x, mask)
        loss = masked_mse(pred, x, mask)
        if a.std_penalty:
            loss = loss + a.std_penalty * std_penalty(h)
        loss.backward()
        opt.step()
        masked_share.append(mask.float().mean().item())
        return loss.item()

    t0 = time.perf_counter()
    try:
        loss = step()
    except Exception as e:  # torch.compile's failures surface at the first call
        if not a.compile:
            raise
        report_failure("torch.compile", e)
    first_s = time.perf_counter() - t0
    times = []
    for i in range(a.warmup + a.steps - 1):
        t0 = time.perf_counter()
        loss = step()
        if i >= a.warmup - 1:
            times.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(times) if times else first_s * 1e3
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    out = {"engine": engine, "model": a.model, "batch": a.batch, "steps_T": T, "features": F,
           "threads": a.threads, "std_penalty": a.std_penalty, "masked_share": statistics.mean(masked_share),
           "ms_step": med, "timed_steps": len(times), "first_ms": first_s * 1e3,
           "compile_s": first_s if a.compile else 0.0, "gflops": 3 * forward_flops(model, a.batch) / (med * 1e6),
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "loadavg": load, "loss": loss}
    print(json.dumps(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
