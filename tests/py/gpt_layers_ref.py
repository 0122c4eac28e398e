"""PyTorch reference for tests/test_gpt_layers.cpp: reads a case's inputs (.npy) from a directory,
runs the matching torch layer forward and backward in float64, writes the results back.

usage: gpt_layers_ref.py layernorm DIR   x, weight, [bias], dy -> y_ref, dx_ref, dweight_ref, [dbias_ref]
       gpt_layers_ref.py attention DIR   meta ([n_head, bias]), x, c_attn.weight, c_proj.weight,
                                         [c_attn.bias, c_proj.bias], attn_factor [B, H, T, T],
                                         resid_factor [B, T, C], dy
                                         -> y_ref, dx_ref, d<param>_ref for every parameter
       gpt_layers_ref.py attention_op DIR  meta ([n_head, causal]), qkv [B, T, 3C], pad [B, T]
                                         (1 = padding key), attn_factor [B, H, T, T], dy
                                         -> y_ref, lse_ref, dqkv_ref (the bare op, tests/test_attention.cpp)
The attention module is nanoGPT's CausalSelfAttention with the attention computed explicitly
(q @ k^T * scale, causal mask, softmax, @ v: torch 1.13 has no usable flash path), loaded
through load_state_dict(strict=True) from the names seqtrain registered. Dropout is applied as
the factors seqtrain drew (0 or 1/(1-p) per element), since the masks are seqtrain's own.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def load(d, name, dtype=torch.float64):
    return torch.from_numpy(np.load(os.path.join(d, name + ".npy"))).to(dtype)


def exists(d, name):
    return os.path.exists(os.path.join(d, name + ".npy"))


def save(d, name, t):
    np.save(os.path.join(d, name + "_ref.npy"), t.detach().to(torch.float64).numpy())


def layernorm(d):
    x = load(d, "x").requires_grad_(True)
    w, dy = load(d, "weight").requires_grad_(True), load(d, "dy")
    b = load(d, "bias").requires_grad_(True) if exists(d, "bias") else None
    if b is not None:  # the module itself, for its state_dict names
        layer = torch.nn.LayerNorm(w.shape[0], eps=1e-5).double()
        layer.load_state_dict({"weight": w.detach(), "bias": b.detach()}, strict=True)
        w, b = layer.weight, layer.bias
    y = F.layer_norm(x, (w.shape[0],), w, b, 1e-5)  # nanoGPT's LayerNorm(ndim, bias)
    y.backward(dy)
    save(d, "y", y)
    save(d, "dx", x.grad)
    save(d, "dweight", w.grad)
    if b is not None:
        save(d, "dbias", b.grad)


class CausalSelfAttention(torch.nn.Module):
    def __init__(self, n_embd, n_head, bias):
        super().__init__()
        self.c_attn = torch.nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = torch.nn.Linear(n_embd, n_embd, bias=bias)
        self.n_head = n_head

    def forward(self, x, attn_factor, resid_factor):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~causal, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = att * attn_factor  # attn_dropout
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y) * resid_factor  # resid_dropout


def attention(d):
    n_head, bias = [int(v) for v in np.load(os.path.join(d, "meta.npy"))]
    x = load(d, "x").requires_grad_(True)
    names = ["c_attn.weight", "c_proj.weight"] + (["c_attn.bias", "c_proj.bias"] if bias else [])
    module = CausalSelfAttention(x.shape[2], n_head, bool(bias)).double()
    module.load_state_dict({n: load(d, n) for n in names}, strict=True)
    y = module(x, load(d, "attn_factor"), load(d, "resid_factor"))
    y.backward(load(d, "dy"))
    save(d, "y", y)
    save(d, "dx", x.grad)
    params = dict(module.named_parameters())
    for n in names:
        save(d, "d" + n, params[n].grad)


def attention_op(d):
    """The Backend's attention op written out: masked_fill(-inf) of the hidden keys (padding,
    and above the diagonal when causal), softmax, dropout factors, @ v. A row that sees no key
    is NaN under torch's softmax; seqtrain defines it as zeros with zero gradients (backend.h),
    so here such rows are left unmasked for the softmax and multiplied by 0."""
    n_head, causal = [int(v) for v in np.load(os.path.join(d, "meta.npy"))]
    qkv = load(d, "qkv").requires_grad_(True)
    pad = load(d, "pad", torch.int64).bool()
    B, T, C3 = qkv.shape
    C, D = C3 // 3, C3 // 3 // n_head
    q, k, v = (t.view(B, T, n_head, D).transpose(1, 2) for t in qkv.split(C, dim=2))
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
    hidden = pad[:, None, None, :].expand(B, n_head, T, T)
    if causal:
        hidden = hidden | ~torch.tril(torch.ones(T, T, dtype=torch.bool))
    empty = hidden.all(dim=-1, keepdim=True)
    lse = torch.logsumexp(att.masked_fill(hidden, float("-inf")), dim=-1)
    att = F.softmax(att.masked_fill(hidden & ~empty, float("-inf")), dim=-1) * (~empty)
    att = att * load(d, "attn_factor")
    y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
    y.backward(load(d, "dy"))
    save(d, "y", y)
    save(d, "lse", lse)
    save(d, "dqkv", qkv.grad)


def main(argv):
    torch.set_num_threads(1)
    if argv[0] == "layernorm":
        layernorm(argv[1])
    elif argv[0] == "attention":
        attention(argv[1])
    elif argv[0] == "attention_op":
        attention_op(argv[1])
    else:
        sys.exit("unknown case " + argv[0])


if __name__ == "__main__":
    main(sys.argv[1:])
