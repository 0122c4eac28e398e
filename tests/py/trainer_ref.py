"""PyTorch reference for a whole `seqtrain train` run: the metrics records it must reproduce.

Usage: trainer_ref.py CSV INIT OUT [--features a,b] [--targets c] [--lookback L] [--horizon H]
                      [--stride S] [--split f0,f1,f2] [--batch B] [--epochs E] [--lr LR]
                      [--weight-decay WD] [--clip C] [--cell lstm|gru] [--hidden N] [--layers K]

Re-implements, in numpy, what seqtrain's data pipeline does (docs/DATA.md): the CSV's columns
as float32, a chronological split (floor(N*f + 1e-6) rows; the test split takes the rest when
the fractions sum to 1), zscore statistics in float64 over the training rows (population std,
ddof 0; a constant column gets 1), windows of lookback inputs and horizon targets flattened
time-major, consecutive batches without shuffling (the last partial batch kept). Then trains
python/seqtrain_torch's Forecaster from INIT (safetensors) with MSE, clip_grad_norm_ and
torch.optim.AdamW at a constant learning rate, validating after every epoch, and writes OUT as
JSON lines {split, step, epoch, loss, lr}: one train record per optimizer step (log_every=1),
one val record per epoch, and a test record with the best validated weights, like
metrics.jsonl.
"""
import argparse
import copy
import csv
import json
import math

import numpy as np
import torch

from seqtrain_torch.models import Forecaster, load_seqtrain


def read_columns(path, names):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header = [h.strip() for h in rows[0]]
    idx = [header.index(n) for n in names]
    # seqtrain parses each cell as a double and stores it as float32.
    return np.array([[float(r[i]) for i in idx] for r in rows[1:] if r], dtype=np.float64).astype(np.float32)


def split_rows(n, f):
    n0 = min(n, math.floor(n * f[0] + 1e-6))
    n1 = min(n - n0, math.floor(n * f[1] + 1e-6))
    if f[2] == 0:
        n2 = 0
    elif abs(sum(f) - 1.0) <= 1e-9:
        n2 = n - n0 - n1
    else:
        n2 = min(n - n0 - n1, math.floor(n * f[2] + 1e-6))
    return [(0, n0), (n0, n0 + n1), (n0 + n1, n0 + n1 + n2)]


def windows(table, rows, fcols, tcols, lookback, horizon, stride):
    b, e = rows
    count = (e - b - lookback - horizon) // stride + 1 if e - b >= lookback + horizon else 0
    xs = np.stack([table[b + k * stride: b + k * stride + lookback][:, fcols] for k in range(count)])
    ys = np.stack([table[b + k * stride + lookback: b + k * stride + lookback + horizon][:, tcols].reshape(-1)
                   for k in range(count)])
    return torch.from_numpy(xs), torch.from_numpy(ys)


def mean_loss(model, x, y, batch):
    """seqtrain's evaluate(): per-batch mean losses weighted by batch size, over the split."""
    total = 0.0
    with torch.no_grad():
        for b in range(0, len(x), batch):
            n = min(batch, len(x) - b)
            total += n * float(torch.nn.functional.mse_loss(model(x[b:b + n]), y[b:b + n]))
    return total / len(x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("csv"), p.add_argument("init"), p.add_argument("out")
    p.add_argument("--features", default="")
    p.add_argument("--targets", default="")
    p.add_argument("--lookback", type=int, default=64)
    p.add_argument("--horizon", type=int, default=1)
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--split", default="0.8,0.1,0.1")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--cell", default="lstm")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(1)

    features = a.features.split(",")
    targets = a.targets.split(",")
    columns = features + [t for t in targets if t not in features]
    table = read_columns(a.csv, columns)
    splits = split_rows(len(table), [float(v) for v in a.split.split(",")])

    b0, e0 = splits[0]
    train_rows = table[b0:e0].astype(np.float64)
    mean = train_rows.mean(axis=0)
    std = np.sqrt(((train_rows - mean) ** 2).mean(axis=0))
    std[std == 0] = 1.0
    table = ((table.astype(np.float64) - mean) / std).astype(np.float32)

    fcols = [columns.index(c) for c in features]
    tcols = [columns.index(c) for c in targets]
    data = [windows(table, s, fcols, tcols, a.lookback, a.horizon, a.stride) for s in splits]
    (xtr, ytr), (xva, yva), (xte, yte) = data

    model = Forecaster(a.cell, len(features), a.hidden, a.layers, False, 0.0, ytr.shape[1])
    load_seqtrain(a.init, model)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=a.weight_decay)

    records, step, best, best_state = [], 0, math.inf, None
    for epoch in range(a.epochs):
        model.train()
        for b in range(0, len(xtr), a.batch):
            n = min(a.batch, len(xtr) - b)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xtr[b:b + n]), ytr[b:b + n])
            loss.backward()
            if a.clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
            opt.step()
            step += 1
            records.append({"split": "train", "step": step, "epoch": epoch, "loss": float(loss), "lr": a.lr})
        model.eval()
        val = mean_loss(model, xva, yva, a.batch)
        records.append({"split": "val", "step": step, "epoch": epoch, "loss": val, "lr": a.lr})
        if val < best:
            best, best_state = val, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    records.append({"split": "test", "step": step, "epoch": a.epochs - 1, "loss": mean_loss(model, xte, yte, a.batch)})
    with open(a.out, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
