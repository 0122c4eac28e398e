"""PyTorch reference for tests/test_loss.cpp: reads pred.npy and target.npy from a directory,
computes the torch.nn loss (mean reduction) and its gradient with respect to pred in float64.

usage: loss_ref.py mse DIR | mae DIR | huber DIR DELTA | cross_entropy DIR IGNORE_INDEX
writes loss_ref.npy (shape [1]) and grad_ref.npy (pred's shape).
Cross-entropy takes logits [..., C] and targets [...]; they are flattened to [N, C] and [N],
which is what seqtrain does for sequence outputs.
"""
import os
import sys

import numpy as np
import torch


def main(argv):
    torch.set_num_threads(1)
    kind, d = argv[0], argv[1]
    pred = torch.from_numpy(np.load(os.path.join(d, "pred.npy"))).double().requires_grad_(True)
    target = torch.from_numpy(np.load(os.path.join(d, "target.npy")))
    if kind == "mse":
        loss = torch.nn.MSELoss()(pred, target.double())
    elif kind == "mae":
        loss = torch.nn.L1Loss()(pred, target.double())
    elif kind == "huber":
        loss = torch.nn.HuberLoss(delta=float(argv[2]))(pred, target.double())
    elif kind == "cross_entropy":
        c = pred.shape[-1]
        loss = torch.nn.CrossEntropyLoss(ignore_index=int(argv[2]))(pred.reshape(-1, c), target.reshape(-1).long())
    else:
        sys.exit("unknown loss " + kind)
    loss.backward()
    np.save(os.path.join(d, "loss_ref.npy"), loss.detach().reshape(1).numpy())
    np.save(os.path.join(d, "grad_ref.npy"), pred.grad.numpy())


if __name__ == "__main__":
    main(sys.argv[1:])
