"""PyTorch reference for a short fp32 training run.

Usage: train_ref.py DIR CELL LAYERS HIDDEN STEPS LR CLIP
Reads DIR/init.safetensors, DIR/x.npy [S,B,T,C], DIR/y.npy [S,B,out]; runs S steps of
MSE + clip_grad_norm_ + AdamW(weight_decay=0.01) in float32, like seqtrain's TrainStep;
writes DIR/losses.npy and DIR/final.safetensors.
"""
import sys

import numpy as np
import torch

from seqtrain_torch.models import Forecaster, load_seqtrain, save_seqtrain

d, cell, layers, hidden, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
lr, clip = float(sys.argv[6]), float(sys.argv[7])
torch.set_num_threads(1)
X = torch.from_numpy(np.load(f"{d}/x.npy"))
Y = torch.from_numpy(np.load(f"{d}/y.npy"))
model = Forecaster(cell, X.shape[3], hidden, layers, False, 0.0, Y.shape[2])
load_seqtrain(f"{d}/init.safetensors", model)
opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
losses = []
for s in range(steps):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(X[s]), Y[s])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    losses.append(loss.item())
np.save(f"{d}/losses.npy", np.array(losses, dtype=np.float64))
save_seqtrain(model, f"{d}/final.safetensors")
