"""The mirror of seqtrain's transformer encoder (model type ``transformer``), name for name.

seqtrain's models/transformer_encoder.h is this module's forward, layer for layer, so a seqtrain
model.safetensors loads with ``load_state_dict(strict=True)`` and gives the same outputs::

    input_proj.weight / .bias              [hidden, patch_size * input_size] / [hidden]
    cls_token                              [1, 1, hidden]                (pooling "cls" only)
    pos_embed.weight                       [tokens, hidden]              (positions "auto" / "learned")
    encoder.layers.{i}.self_attn.in_proj_weight / in_proj_bias   [3 hidden, hidden] / [3 hidden]
    encoder.layers.{i}.self_attn.out_proj.weight / .bias
    encoder.layers.{i}.linear1.* [4 hidden, hidden], linear2.* [hidden, 4 hidden]
    encoder.layers.{i}.norm1.*, norm2.*    LayerNorm(hidden)
    encoder.norm.weight / .bias            the final LayerNorm
    head.weight / .bias                    [output_size, hidden]

tokens = lookback / patch_size (+ 1 with the cls token). The layers are torch's own
nn.TransformerEncoderLayer(norm_first=True, activation="gelu", batch_first=True) in an
nn.TransformerEncoder with the final norm. Inputs x [B, T, F] with optional ``lengths`` [B]
(each sample's valid steps; the rest is padding at the end): patch j is padding exactly when all
of its steps are; padded tokens are masked as keys (src_key_padding_mask) and never pooled.
Sinusoidal positions are a fixed buffer outside the state dict. seqtrain's dropout masks are its
own, so outputs agree with dropout off (eval mode, or dropout 0).
"""

import math

import torch
from torch import nn

from .models import _Residual, monotone_quantiles, pool_steps

__all__ = ["TransformerEncoder", "sinusoid_table"]


def sinusoid_table(tokens, dim):
    """pe[t, 2i] = sin(t w_i), pe[t, 2i+1] = cos(t w_i), w_i = 10000^(-2i/dim): computed in
    float64 and stored as float32, as seqtrain's nn/positions.cpp."""
    pe = torch.zeros(tokens, dim, dtype=torch.float64)
    t = torch.arange(tokens, dtype=torch.float64)[:, None]
    for c in range(dim):
        w = math.pow(10000.0, -float(c - c % 2) / dim)
        pe[:, c] = torch.sin(t[:, 0] * w) if c % 2 == 0 else torch.cos(t[:, 0] * w)
    return pe.float()


def _without_bias(cls, *args, **kwargs):
    """torch >= 2.1 builds LayerNorm / TransformerEncoderLayer without biases; older ones cannot."""
    try:
        return cls(*args, bias=False, **kwargs)
    except TypeError as e:
        raise ValueError(f"model.bias false needs torch >= 2.1 for {cls.__name__}(bias=False) "
                         f"(this is torch {torch.__version__})") from e


class TransformerEncoder(nn.Module):
    def __init__(self, input_size, lookback, hidden, layers=1, heads=4, dropout=0.0, output_size=1,
                 positions="auto", pooling="last", patch_size=1, bias=True, residual_to="none", residual_period=1,
                 residual_inputs=(), quantile_levels=1, head=True):
        super().__init__()
        if lookback % patch_size:
            raise ValueError(f"patch_size {patch_size} does not divide lookback {lookback}")
        if pooling not in ("last", "mean", "max", "cls"):
            raise ValueError(f"pooling must be last, mean, max or cls, got {pooling!r}")
        positions = "learned" if positions == "auto" else positions
        if positions not in ("learned", "sinusoidal", "none"):
            raise ValueError(f"positions must be auto, learned, sinusoidal or none, got {positions!r}")
        self.input_size, self.patch_size, self.pooling, self.positions = input_size, patch_size, pooling, positions
        tokens = lookback // patch_size + (pooling == "cls")
        self.input_proj = nn.Linear(patch_size * input_size, hidden)
        if pooling == "cls":
            self.cls_token = nn.Parameter(torch.zeros(1, 1, hidden))
        if positions == "learned":
            self.pos_embed = nn.Embedding(tokens, hidden)
        elif positions == "sinusoidal":
            self.register_buffer("pos_table", sinusoid_table(tokens, hidden), persistent=False)
        self.dropout = nn.Dropout(dropout)
        layer_args = dict(d_model=hidden, nhead=heads, dim_feedforward=4 * hidden, dropout=dropout,
                          activation="gelu", batch_first=True, norm_first=True)
        if bias:
            layer, norm = nn.TransformerEncoderLayer(**layer_args), nn.LayerNorm(hidden)
        else:
            layer, norm = _without_bias(nn.TransformerEncoderLayer, **layer_args), _without_bias(nn.LayerNorm, hidden)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=norm, enable_nested_tensor=False)
        if head:  # head=False: the encoder alone (encoder.py's TransformerEncoderBody)
            self.head = nn.Linear(hidden, output_size)
            self.residual = _Residual(residual_to, residual_period, residual_inputs, lookback, output_size,
                                      quantile_levels)
        self.quantile_levels = quantile_levels

    def valid_tokens(self, lengths, batch, steps):
        """Each sample's valid tokens [B] (a patch counts when any of its steps is valid)."""
        n = torch.full((batch,), steps // self.patch_size, dtype=torch.long) if lengths is None else \
            (torch.as_tensor(lengths, dtype=torch.long) + self.patch_size - 1) // self.patch_size
        return n + (self.pooling == "cls")

    def forward(self, x, lengths=None):
        """x [B, T, input_size] (T a multiple of patch_size), lengths [B] or None -> [B, output_size]."""
        y = self.head(self.embed(x, lengths))
        return monotone_quantiles(self.residual(x, y), self.quantile_levels)

    def tokens(self, x, lengths=None):
        """Every token's final-norm output [B, N, hidden], the valid tokens [B] and the padding [B, N]."""
        B, T, F = x.shape
        if F != self.input_size or T % self.patch_size:
            raise ValueError(f"expected [batch, a multiple of {self.patch_size} steps, {self.input_size}], "
                             f"got {list(x.shape)}")
        h = self.input_proj(x.reshape(B, T // self.patch_size, self.patch_size * F))
        if self.pooling == "cls":
            h = torch.cat([self.cls_token.expand(B, -1, -1), h], dim=1)
        N = h.shape[1]
        if self.positions == "learned":
            h = h + self.pos_embed.weight[:N]
        elif self.positions == "sinusoidal":
            h = h + self.pos_table[:N].to(h.dtype)
        valid = self.valid_tokens(lengths, B, T)
        pad = torch.arange(N)[None, :] >= valid[:, None]
        h = self.encoder(self.dropout(h), src_key_padding_mask=pad if lengths is not None else None)
        return h, valid, pad

    def embed(self, x, lengths=None):
        """The pooled final-norm output the head reads: [B, hidden]."""
        h, valid, _ = self.tokens(x, lengths)
        return h[:, 0] if self.pooling == "cls" else pool_steps(h, valid, self.pooling)
