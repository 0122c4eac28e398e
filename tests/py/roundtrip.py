"""PyTorch side of the weights round trip.

Usage: roundtrip.py DIR from_torch|from_seqtrain KIND INPUT LOOKBACK HIDDEN LAYERS BIDIR OUT
from_torch:    builds the model with PyTorch's own init (seed 0), writes DIR/model.safetensors,
               DIR/x.npy and DIR/y_torch.npy.
from_seqtrain: loads DIR/model.safetensors (strict) and writes DIR/y_torch.npy for DIR/x.npy.
"""
import sys

import numpy as np
import torch

from seqtrain_torch.models import Forecaster, MLPForecaster, load_seqtrain, save_seqtrain

d, mode, kind = sys.argv[1], sys.argv[2], sys.argv[3]
inp, lookback, hidden, layers, bidir, out = (int(v) for v in sys.argv[4:10])
torch.manual_seed(0)
if kind == "mlp":
    model = MLPForecaster(inp, lookback, hidden, layers, 0.0, out)
else:
    model = Forecaster(kind, inp, hidden, layers, bool(bidir), 0.0, out)
model.eval()
if mode == "from_torch":
    save_seqtrain(model, f"{d}/model.safetensors")
    x = torch.randn(7, lookback, inp)
    np.save(f"{d}/x.npy", x.numpy())
else:
    load_seqtrain(f"{d}/model.safetensors", model)
    x = torch.from_numpy(np.load(f"{d}/x.npy"))
with torch.no_grad():
    np.save(f"{d}/y_torch.npy", model(x).numpy())
