#!/usr/bin/python3
"""Masked pretraining's loss and gradients in float64 torch (python/seqtrain_torch/pretrain.py),
for tests/test_pretrain.cpp: DIR holds spec.json (seqtrain's ModelSpec), params.safetensors,
x.npy [B, T, F], mask.npy [B, T, F] and optionally lengths.npy [B]; writes out.npy (the
reconstruction), loss.npy (the masked MSE plus the weighted std penalty, as seqtrain's training
loss) and grad_<name>.npy for every parameter.
Usage: pretrain_ref.py DIR"""
import json
import os
import sys

import numpy as np
import torch

from seqtrain_torch import read_file
from seqtrain_torch.pretrain import from_spec


def main():
    d = sys.argv[1]
    arrays, _ = read_file(os.path.join(d, "params.safetensors"))
    with open(os.path.join(d, "spec.json"), encoding="utf-8") as f:
        module = from_spec(json.load(f))
    module.load_state_dict({k: torch.from_numpy(v) for k, v in arrays.items()}, strict=True)
    module = module.double().train()
    x = torch.from_numpy(np.load(os.path.join(d, "x.npy"))).double()
    mask = torch.from_numpy(np.load(os.path.join(d, "mask.npy"))).double()
    path = os.path.join(d, "lengths.npy")
    lengths = torch.from_numpy(np.load(path)).long() if os.path.exists(path) else None
    loss = module.loss(x, mask, lengths)
    loss.backward()
    np.save(os.path.join(d, "out.npy"), module(x, mask, lengths)[0].detach().numpy())
    np.save(os.path.join(d, "loss.npy"), np.array([loss.item()]))
    for k, p in module.named_parameters():
        np.save(os.path.join(d, f"grad_{k}.npy"), p.grad.numpy() if p.grad is not None else np.zeros(p.shape))


if __name__ == "__main__":
    main()
