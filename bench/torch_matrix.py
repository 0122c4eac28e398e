#!/usr/bin/env python3
"""torch_matrix.py: the PyTorch side of bench/matrix.sh, one configuration of the matrix per process.

    python3 bench/torch_matrix.py --csv FILE --cell lstm|gru --batch N --lookback T --hidden H
                                  --layers L --threads K --steps S --warmup W
                                  [--precision fp32|bf16] [--workers M] --json OUT

The way a PyTorch user writes the same job: the CSV (every column a feature, the last one the
target) z-scored, a Dataset of windows over it, a DataLoader (batch N, no shuffle, num_workers
M, drop_last), nn.LSTM/nn.GRU -> last time step -> nn.Linear, MSE, clip_grad_norm_(1.0),
AdamW(lr=1e-3). The switches' PyTorch equivalents: --precision bf16 runs forward and loss
under torch.autocast("cpu", dtype=torch.bfloat16) (fp32 master weights, as in seqtrain);
--workers M is DataLoader(num_workers=M). Autotuning and gradient checkpointing have no
row here. A step's time runs from asking the loader for the batch to the end of
optimizer.step(), so it includes any wait for data; ms/step is the median after W warm-up
steps. Peak RSS is measured outside (matrix.sh wraps this process in /usr/bin/time).
"""
import argparse
import csv
import json
import statistics
import sys
import time

import torch
from torch import nn


class Windows(torch.utils.data.Dataset):
    def __init__(self, table, lookback):
        self.table, self.lookback = table, lookback

    def __len__(self):
        return self.table.shape[0] - self.lookback

    def __getitem__(self, i):
        x = self.table[i:i + self.lookback]
        return x, self.table[i + self.lookback, -1:]


class Forecaster(nn.Module):
    def __init__(self, cell, features, hidden, layers):
        super().__init__()
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(features, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def read_table(path):
    with open(path, newline="") as f:
        rows = csv.reader(f)
        next(rows)  # header
        table = torch.tensor([[float(v) for v in row] for row in rows], dtype=torch.float32)
    mean, std = table.mean(0), table.std(0).clamp_min(1e-12)
    return (table - mean) / std


def main():
    p = argparse.ArgumentParser()
    for name in ("csv", "cell", "json"):
        p.add_argument("--" + name, required=True)
    for name in ("batch", "lookback", "hidden", "layers", "threads", "steps", "warmup"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--workers", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    table = read_table(a.csv)
    need = (a.warmup + a.steps) * a.batch + a.lookback
    if table.shape[0] < need:
        sys.exit(f"torch_matrix.py: {a.csv} has {table.shape[0]} rows; {a.warmup + a.steps} batches need {need}")
    loader = torch.utils.data.DataLoader(Windows(table, a.lookback), batch_size=a.batch, shuffle=False,
                                         num_workers=a.workers, drop_last=True)
    model = Forecaster(a.cell, table.shape[1], a.hidden, a.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    bf16 = a.precision == "bf16"

    ms, batches = [], iter(loader)
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        x, y = next(batches)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model(x).float(), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= a.warmup:
            ms.append(1000.0 * (time.perf_counter() - t0))
    final_loss = float(loss)
    del batches  # stops the workers before the process exits

    with open(a.json, "w") as f:
        json.dump({"engine": "torch", "version": torch.__version__, "precision": a.precision, "workers": a.workers,
                   "threads": a.threads, "steps": a.steps, "warmup": a.warmup, "ms_per_step": statistics.median(ms),
                   "ms_all": ms, "loss": final_loss}, f, indent=2)


if __name__ == "__main__":
    main()
