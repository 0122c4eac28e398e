"""PyTorch reference for one forecaster forward/backward.

Usage: forecaster_ref.py DIR CELL LAYERS BIDIR OUTPUT_SIZE HIDDEN [POOLING]
Reads DIR/model.safetensors (seqtrain's names), DIR/x.npy [N,T,C], DIR/dy.npy [N,out] and, when
present, DIR/lengths.npy [N] (each sample's valid steps: the mirror packs the sequences);
computes y = model(x, lengths) and the gradients of sum(dy * y) in float64; writes DIR/y.npy and
DIR/grads.safetensors (one tensor per parameter name).
"""
import os
import sys

import numpy as np
import torch

from seqtrain_torch.models import Forecaster, load_seqtrain
from seqtrain_torch.safetensors_io import save_file

d, cell, layers, bidir, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5])
x = torch.from_numpy(np.load(f"{d}/x.npy")).double()
dy = torch.from_numpy(np.load(f"{d}/dy.npy")).double()
pooling = sys.argv[7] if len(sys.argv) > 7 else "last"
lengths = torch.from_numpy(np.load(f"{d}/lengths.npy")).long() if os.path.exists(f"{d}/lengths.npy") else None
model = Forecaster(cell, x.shape[2], int(sys.argv[6]), layers, bidir, 0.0, out, pooling=pooling)
load_seqtrain(f"{d}/model.safetensors", model)
model = model.double()
y = model(x, lengths)
(y * dy).sum().backward()
np.save(f"{d}/y.npy", y.detach().numpy())
save_file({n: p.grad.numpy().astype(np.float64) for n, p in model.named_parameters()}, f"{d}/grads.safetensors")
