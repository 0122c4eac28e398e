"""PyTorch reference for tests/test_layers.cpp: reads a case's inputs (.npy) from a directory,
runs the matching torch.nn layer forward and backward in float64, writes the results back.

usage: layers_ref.py linear DIR       x, weight, bias, dy       -> y_ref, dx_ref, dweight_ref, dbias_ref
       layers_ref.py embedding DIR    ids, weight, dy           -> y_ref, dweight_ref
       layers_ref.py act DIR          x, dy -> y_KIND_ref, dx_KIND_ref for every KIND in
                                      relu tanh sigmoid gelu (exact erf) gelu_tanh
       layers_ref.py conv1d DIR       x [B, T, C_in], weight [C_out, C_in, k], bias, dy [B, T, C_out],
                                      lengths (optional: each sample's valid steps)
                                      -> y_ref, dx_ref, dweight_ref, dbias_ref: nn.Conv1d(padding="same")
                                      over the steps, its input zeroed at padded steps (seqtrain's mask)
       layers_ref.py batch_norm DIR   xs [S, B, T, C] and dys (S training steps), weight, bias, running_mean,
                                      running_var, lengths (optional) -> for each step s: y{s}_ref, dx{s}_ref,
                                      dweight{s}_ref, dbias{s}_ref of nn.BatchNorm1d(C) in train mode on
                                      the valid steps gathered as [n, C] rows (0 at padded steps); then
                                      running_mean_ref, running_var_ref, num_batches_tracked_ref, and
                                      y_eval_ref, dx_eval_ref (eval mode on xs[0], dys[0])
The layers are real torch.nn modules loaded through load_state_dict(strict=True) from the
names seqtrain registered, so a parameter-name or shape mismatch fails here too.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def load(d, name, dtype=torch.float64):
    return torch.from_numpy(np.load(os.path.join(d, name + ".npy"))).to(dtype)


def save(d, name, t):
    np.save(os.path.join(d, name + "_ref.npy"), t.detach().to(torch.float64).numpy())


def linear(d):
    x = load(d, "x").requires_grad_(True)
    w, b, dy = load(d, "weight"), load(d, "bias"), load(d, "dy")
    layer = torch.nn.Linear(w.shape[1], w.shape[0]).double()
    layer.load_state_dict({"weight": w, "bias": b}, strict=True)
    y = layer(x)
    y.backward(dy)
    save(d, "y", y)
    save(d, "dx", x.grad)
    save(d, "dweight", layer.weight.grad)
    save(d, "dbias", layer.bias.grad)


def embedding(d):
    ids = load(d, "ids", torch.int64)
    w, dy = load(d, "weight"), load(d, "dy")
    layer = torch.nn.Embedding(w.shape[0], w.shape[1]).double()
    layer.load_state_dict({"weight": w}, strict=True)
    y = layer(ids)
    y.backward(dy)
    save(d, "y", y)
    save(d, "dweight", layer.weight.grad)


ACTS = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "gelu": lambda x: F.gelu(x, approximate="none"),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


def act(d):
    dy = load(d, "dy")
    for kind, f in ACTS.items():
        x = load(d, "x").requires_grad_(True)
        y = f(x)
        y.backward(dy)
        save(d, "y_" + kind, y)
        save(d, "dx_" + kind, x.grad)


def conv1d(d):
    x = load(d, "x").requires_grad_(True)
    w, b, dy = load(d, "weight"), load(d, "bias"), load(d, "dy")
    layer = torch.nn.Conv1d(w.shape[1], w.shape[0], w.shape[2], padding="same").double()
    layer.load_state_dict({"weight": w, "bias": b}, strict=True)
    xin = x
    if os.path.exists(os.path.join(d, "lengths.npy")):
        pad = torch.arange(x.shape[1])[None, :] >= load(d, "lengths", torch.int64)[:, None]
        xin = x.masked_fill(pad[:, :, None], 0)
    y = layer(xin.transpose(1, 2)).transpose(1, 2)  # channels last outside, as seqtrain's layers
    y.backward(dy)
    for name, t in (("y", y), ("dx", x.grad), ("dweight", layer.weight.grad), ("dbias", layer.bias.grad)):
        save(d, name, t)


def batch_norm(d):
    xs, dys = load(d, "xs"), load(d, "dys")
    S, B, T, C = xs.shape
    layer = torch.nn.BatchNorm1d(C).double()
    state = {k: load(d, k) for k in ("weight", "bias", "running_mean", "running_var")}
    state["num_batches_tracked"] = torch.tensor(0, dtype=torch.long)
    layer.load_state_dict(state, strict=True)
    keep = torch.ones(B, T, dtype=torch.bool)
    if os.path.exists(os.path.join(d, "lengths.npy")):
        keep = torch.arange(T)[None, :] < load(d, "lengths", torch.int64)[:, None]

    def step(x, dy):
        x = x.clone().requires_grad_(True)
        layer.zero_grad()
        y = x.new_zeros(x.shape).masked_scatter(keep[:, :, None], layer(x[keep]))
        y.backward(dy)
        return y, x.grad

    for s in range(S):
        y, dx = step(xs[s], dys[s])
        for name, t in (("y", y), ("dx", dx), ("dweight", layer.weight.grad), ("dbias", layer.bias.grad)):
            save(d, f"{name}{s}", t)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        save(d, name, getattr(layer, name))
    layer.eval()
    y, dx = step(xs[0], dys[0])
    save(d, "y_eval", y)
    save(d, "dx_eval", dx)


def main(argv):
    torch.set_num_threads(1)
    if argv[0] == "linear":
        linear(argv[1])
    elif argv[0] == "embedding":
        embedding(argv[1])
    elif argv[0] == "act":
        act(argv[1])
    elif argv[0] == "conv1d":
        conv1d(argv[1])
    elif argv[0] == "batch_norm":
        batch_norm(argv[1])
    else:
        sys.exit("unknown case " + argv[0])


if __name__ == "__main__":
    main(sys.argv[1:])
