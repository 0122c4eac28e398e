"""PyTorch's quantile loss and monotone quantile output for tests/test_forecast_quality.cpp.
Reads pred.npy [B, m * Q], target.npy [B, m], raw.npy [G, Q], dout.npy [G, Q] and taus.npy [Q]
(float32), and writes ref.json: the pinball loss sum over every forecast and its gradient (through
seqtrain_torch.models.pinball_loss's mean, times the count), and monotone_quantiles' output of
raw and the gradient of sum(out * dout) with respect to raw (autograd, float64)."""
import json
import sys

import numpy as np
import torch

from seqtrain_torch.models import monotone_quantiles, pinball_loss

d = sys.argv[1]
load = lambda name: torch.tensor(np.load(f"{d}/{name}.npy").astype(np.float64))
taus = [float(t) for t in np.load(f"{d}/taus.npy")]
pred = load("pred").requires_grad_(True)
target = load("target")
loss = pinball_loss(pred, target, taus) * pred.numel()
loss.backward()
raw = load("raw").requires_grad_(True)
out = monotone_quantiles(raw, len(taus))
(out * load("dout")).sum().backward()
json.dump({"loss": loss.item(), "grad": pred.grad.flatten().tolist(), "mono": out.detach().flatten().tolist(),
           "mono_grad": raw.grad.flatten().tolist()}, open(f"{d}/ref.json", "w"))
