"""PyTorch reference for tests/test_loss.cpp: for each case directory given, reads pred.npy,
target.npy and spec.txt ("<loss> <arg>"), computes the torch.nn loss (mean reduction) and its
gradient with respect to pred in float64, and writes loss_ref.npy (shape [1]) and grad_ref.npy.

usage: loss_ref.py CASE_DIR [CASE_DIR ...]
spec.txt: "mse 1", "mae 1", "huber DELTA" or "cross_entropy IGNORE_INDEX".
Cross-entropy takes logits [..., C] and targets [...], flattened to [N, C] and [N] as seqtrain
does for sequence outputs.
"""
import os
import sys

import numpy as np
import torch


def run_case(d):
    with open(os.path.join(d, "spec.txt")) as f:
        kind, arg = f.read().split()
    pred = torch.from_numpy(np.load(os.path.join(d, "pred.npy"))).double().requires_grad_(True)
    target = torch.from_numpy(np.load(os.path.join(d, "target.npy")))
    if kind == "mse":
        loss = torch.nn.MSELoss()(pred, target.double())
    elif kind == "mae":
        loss = torch.nn.L1Loss()(pred, target.double())
    elif kind == "huber":
        loss = torch.nn.HuberLoss(delta=float(arg))(pred, target.double())
    elif kind == "cross_entropy":
        c = pred.shape[-1]
        loss = torch.nn.CrossEntropyLoss(ignore_index=int(arg))(pred.reshape(-1, c), target.reshape(-1).long())
    else:
        sys.exit("unknown loss " + kind)
    loss.backward()
    np.save(os.path.join(d, "loss_ref.npy"), loss.detach().reshape(1).numpy())
    np.save(os.path.join(d, "grad_ref.npy"), pred.grad.numpy())


def main(dirs):
    torch.set_num_threads(1)
    for d in dirs:
        run_case(d)


if __name__ == "__main__":
    main(sys.argv[1:])
