"""Writes small npy training sets for tests/test_cli_data.cpp.

usage: npy_dataset.py OUT_DIR

OUT_DIR/reg:  X [N, 12, 3] in two train files (float32 and float64), val, test, with
              y [N, 2, 1] a learnable function of the last steps (forecasting).
OUT_DIR/cls:  the same X with y [N] int64 labels in 0..2 from the window means
              (sequence classification).
Both get stats.json (numpy's per-feature mean and population std over the train X) and
train_norm.npy (the train X z-scored with those statistics, float32), the reference the
C++ side must reproduce.
"""
import json
import os
import sys

import numpy as np


def write_set(out, make_y):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    sizes = {"train_0": 160, "train_1": 96, "val": 64, "test": 64}
    xs = {}
    for name, n in sizes.items():
        x = rng.normal(size=(n, 12, 3))
        x[:, :, 1] = x[:, :, 1] * 4.0 + 10.0  # an offset and a spread for z-score to undo
        xs[name] = x
        # One train file in float64: the reader converts dtypes per file.
        np.save(f"{out}/{name}_x.npy", x if name == "train_1" else x.astype(np.float32))
        np.save(f"{out}/{name}_y.npy", make_y(x.astype(np.float32)))
    # seqtrain reads every element as float32 (docs/DATA.md), so the reference starts there too.
    train = np.concatenate([xs["train_0"], xs["train_1"]], axis=0).astype(np.float32).astype(np.float64)
    mean = train.mean(axis=(0, 1))
    std = train.std(axis=(0, 1))
    json.dump({"mean": mean.tolist(), "std": std.tolist()}, open(f"{out}/stats.json", "w"))
    np.save(f"{out}/train_norm.npy", ((train - mean) / std).astype(np.float32))


def regression(x):
    y = 0.8 * x[:, -1, 0] + 0.05 * (x[:, -2, 1] - 10.0)
    return np.stack([y, 0.5 * y], axis=1)[:, :, None].astype(np.float32)


def classification(x):
    s = x[:, :, 0].mean(axis=1) + 0.5 * x[:, :, 2].mean(axis=1)
    return np.digitize(s, [-0.15, 0.15]).astype(np.int64)


if __name__ == "__main__":
    write_set(os.path.join(sys.argv[1], "reg"), regression)
    write_set(os.path.join(sys.argv[1], "cls"), classification)
