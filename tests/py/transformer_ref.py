"""PyTorch (float64) reference for tests/test_transformer_encoder.cpp (and, mode model, for any
family from_spec builds: tests/test_cnn.cpp's cnn, through tests/mirror_parity.h).

Modes, each reading DIR/params.safetensors (seqtrain's parameters under their names), DIR/x.npy,
DIR/dy.npy and, when present, DIR/lengths.npy (each sample's valid steps; the rest is padding),
and writing DIR/y.npy, DIR/dx.npy (attn, layer) and DIR/grad_<name>.npy for every parameter:
  attn   nn.MultiheadAttention(C, heads, batch_first=True), parameters under "self_attn."
  layer  nn.TransformerEncoderLayer(C, heads, 4C, dropout=0, activation="gelu", batch_first=True,
         norm_first=True), parameters under "layer."
  model  seqtrain_torch's mirror from DIR/spec.json (seqtrain's ModelSpec JSON), loaded strict, in
         training mode with dropout 0 (torch's plain path, not its eval fast path), or with --eval in
         eval mode (BatchNorm's running statistics); every buffer after the forward (BatchNorm's
         updated running statistics) to DIR/buf_<name>.npy
"""

import argparse
import json
import os

import numpy as np
import torch
from torch import nn

from seqtrain_torch import from_spec, read_file


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["attn", "layer", "model"])
    ap.add_argument("dir")
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--eval", action="store_true")
    a = ap.parse_args()
    d = a.dir
    arrays, _ = read_file(os.path.join(d, "params.safetensors"))
    x = torch.from_numpy(np.load(os.path.join(d, "x.npy"))).double()
    dy = torch.from_numpy(np.load(os.path.join(d, "dy.npy"))).double()
    lengths_path = os.path.join(d, "lengths.npy")
    lengths = torch.from_numpy(np.load(lengths_path)).long() if os.path.exists(lengths_path) else None

    if a.mode == "model":
        with open(os.path.join(d, "spec.json"), encoding="utf-8") as f:
            module = from_spec(json.load(f))
        prefix = ""
    else:
        C = x.shape[2]
        if a.mode == "attn":
            module, prefix = nn.MultiheadAttention(C, a.heads, batch_first=True), "self_attn."
        else:
            module = nn.TransformerEncoderLayer(C, a.heads, 4 * C, dropout=0.0, activation="gelu", batch_first=True,
                                                norm_first=True)
            prefix = "layer."
    module.load_state_dict({k[len(prefix):]: torch.from_numpy(v) for k, v in arrays.items()}, strict=True)
    module = module.double().train(not a.eval)
    x.requires_grad_(a.mode != "model")

    if a.mode == "model":
        y = module(x, lengths)
    else:
        pad = None
        if lengths is not None:
            pad = torch.arange(x.shape[1])[None, :] >= lengths[:, None]
        if a.mode == "attn":
            y = module(x, x, x, key_padding_mask=pad, need_weights=False)[0]
        else:
            y = module(x, src_key_padding_mask=pad)
    y.backward(dy)
    np.save(os.path.join(d, "y.npy"), y.detach().numpy())
    if a.mode != "model":
        np.save(os.path.join(d, "dx.npy"), x.grad.numpy())
    for k, b in module.named_buffers():
        np.save(os.path.join(d, f"buf_{prefix}{k}.npy"), b.detach().double().numpy())
    for k, p in module.named_parameters():
        np.save(os.path.join(d, f"grad_{prefix}{k}.npy"), p.grad.numpy() if p.grad is not None else np.zeros(p.shape))


if __name__ == "__main__":
    main()
