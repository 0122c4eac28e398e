"""PyTorch reference for the character language model (seqtrain_torch.models.CharLM).

Usage: char_lm_ref.py DIR MODE CELL VOCAB EMBED HIDDEN LAYERS
MODE grad:          loads DIR/model.safetensors (strict), DIR/x.npy and DIR/y.npy ([B, T] int64);
                    in float64 computes logits, loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
                    and its gradients; writes DIR/logits.npy, DIR/loss.npy, DIR/grads.safetensors.
MODE from_torch:    builds the model with PyTorch's own init (seed 0), writes DIR/model.safetensors,
                    random ids DIR/x.npy (as float64) and their logits DIR/logits_torch.npy.
MODE from_seqtrain: loads DIR/model.safetensors (strict), writes DIR/logits_torch.npy for DIR/x.npy.
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

from seqtrain_torch.models import CharLM, load_seqtrain, save_seqtrain
from seqtrain_torch.safetensors_io import save_file

d, mode, cell = sys.argv[1], sys.argv[2], sys.argv[3]
vocab, embed, hidden, layers = (int(v) for v in sys.argv[4:8])
torch.manual_seed(0)
model = CharLM(cell, vocab, embed, hidden, layers, 0.0)
model.eval()
if mode == "grad":
    load_seqtrain(f"{d}/model.safetensors", model)
    model = model.double()
    x = torch.from_numpy(np.load(f"{d}/x.npy"))
    y = torch.from_numpy(np.load(f"{d}/y.npy"))
    logits, _ = model(x)
    loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
    loss.backward()
    np.save(f"{d}/logits.npy", logits.detach().numpy())
    np.save(f"{d}/loss.npy", np.array([loss.item()]))
    save_file({n: p.grad.numpy() for n, p in model.named_parameters()}, f"{d}/grads.safetensors")
    sys.exit(0)
if mode == "from_torch":
    save_seqtrain(model, f"{d}/model.safetensors")
    x = torch.randint(0, vocab, (3, 9))
    np.save(f"{d}/x.npy", x.numpy().astype(np.float64))  # the C++ side's npy reader takes floats
elif mode == "from_seqtrain":
    load_seqtrain(f"{d}/model.safetensors", model)
    x = torch.from_numpy(np.load(f"{d}/x.npy")).long()
else:
    sys.exit(f"unknown mode {mode!r}")
with torch.no_grad():
    np.save(f"{d}/logits_torch.npy", model(x)[0].numpy())
