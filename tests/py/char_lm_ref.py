"""PyTorch reference for one CharLM forward/backward.

Usage: char_lm_ref.py DIR CELL LAYERS BIDIR VOCAB HIDDEN
Reads DIR/model.safetensors (seqtrain's names), DIR/x.npy [N,T] (ids as float32) and
DIR/dy.npy [N,T,V]; computes logits = model(x) and the gradients of sum(dy * logits) in
float64; writes DIR/y.npy and DIR/grads.safetensors (one tensor per parameter name).
"""
import sys

import numpy as np
import torch

from seqtrain_torch.models import CharLM, load_seqtrain
from seqtrain_torch.safetensors_io import save_file

d, cell, layers, bidir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
vocab, hidden = int(sys.argv[5]), int(sys.argv[6])
ids = torch.from_numpy(np.load(f"{d}/x.npy")).long()
dy = torch.from_numpy(np.load(f"{d}/dy.npy")).double()
model = CharLM(cell, vocab, hidden, layers, bidir, 0.0)
load_seqtrain(f"{d}/model.safetensors", model)
model = model.double()
y = model(ids)
(y * dy).sum().backward()
np.save(f"{d}/y.npy", y.detach().numpy())
save_file({n: p.grad.numpy().astype(np.float64) for n, p in model.named_parameters()}, f"{d}/grads.safetensors")
