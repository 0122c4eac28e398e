"""seqtrain's masked pretrainer (train.task masked_pretrain) as a PyTorch module, with the names
seqtrain saves, so a pretraining run's model.safetensors loads with load_state_dict(strict=True).

The encoder is the classifier's own (rnn.* for lstm/gru; input_proj, pos_embed, encoder.* for the
transformer; convs.*, norms.* for the cnn), so its weights move to a classifier unchanged; pretraining adds mask_token [F]
(fill "token") and the decoder: LayerNorm -> Linear(C, C) -> GELU -> Linear(C, patch_size * F).

  x_in = where(mask, mask_token, x)          (fill "zero": 0)
  h    = encoder(x_in, lengths)              [B, N, C], every step (token)
  out  = decoder(h).reshape(B, T, F)
  loss = sum(mask * (out - x)^2) / sum(mask) + std_penalty * mean_c relu(1 - sqrt(var_c + 1e-4))
with var_c the population variance of h's dimension c over the valid rows (steps, or tokens) of
the batch, the penalty counted in training only (as seqtrain does).
"""
from collections import OrderedDict

import torch
from torch import nn

from .encoder import CNNEncoderBody, RNNEncoder, TransformerEncoderBody
from .models import rnn_steps


class MaskedPretrainer(nn.Module):
    def __init__(self, type, input_size, hidden, layers=1, bidirectional=False, lookback=1, heads=4, dropout=0.0,
                 positions="auto", patch_size=1, bias=True, mask_fill="token", std_penalty=0.0, pooling="mean",
                 kernel_sizes=(8, 5, 3), norm="layer"):
        super().__init__()
        self.type, self.input_size, self.patch_size, self.std_penalty = type, input_size, patch_size, std_penalty
        if type in ("lstm", "gru"):
            body = RNNEncoder(type, input_size, hidden, layers, bidirectional, dropout, pooling)
            width = hidden * (2 if bidirectional else 1)
        elif type == "transformer":
            body = TransformerEncoderBody(input_size, lookback, hidden, layers, heads, dropout, positions, pooling,
                                          patch_size, bias)
            width = hidden
        elif type == "cnn":
            body = CNNEncoderBody(input_size, hidden, kernel_sizes, dropout, pooling, norm)
            width = hidden
        else:
            raise ValueError(f"type must be lstm, gru, transformer or cnn, got {type!r}")
        # The encoder module's layers under its own names (rnn.*; input_proj, pos_embed, encoder.*), as
        # seqtrain keeps them, so they load into the classifier's encoder unchanged.
        self.body = [body]  # a plain list: not a submodule, so no "body." prefix in the state_dict
        for name, child in body.named_children():
            self.add_module(name, child)
        if mask_fill == "token":
            self.mask_token = nn.Parameter(torch.zeros(input_size))
        self.decoder = nn.Sequential(OrderedDict(norm=nn.LayerNorm(width), fc1=nn.Linear(width, width),
                                                 act=nn.GELU(), fc2=nn.Linear(width, patch_size * input_size)))

    def valid_rows(self, lengths, B, T):
        """Each sample's valid rows of h [B]: steps for an RNN, tokens (a patch with any valid step)."""
        if lengths is None:
            return torch.full((B,), T // self.patch_size, dtype=torch.long)
        return (torch.as_tensor(lengths, dtype=torch.long) + self.patch_size - 1) // self.patch_size

    def encode(self, x, lengths=None):
        """x [B, T, F] -> h [B, N, C] (padded rows: an RNN's zeros, a transformer's whatever)."""
        if self.type in ("lstm", "gru"):
            return rnn_steps(self.rnn, x, lengths)[0]
        if self.type == "cnn":
            return self.body[0].steps(x, lengths)[0]
        return self.body[0].tokens(x, lengths)[0]

    def embed(self, x, lengths=None):
        """Each sample's pooled encoder output [B, C], as `seqtrain embed` writes it."""
        return self.body[0].embed(x, lengths)

    def forward(self, x, mask=None, lengths=None):
        """x [B, T, F], mask [B, T, F] (1 = masked) -> (reconstruction [B, T, F], h [B, N, C])."""
        if mask is not None:
            fill = self.mask_token if hasattr(self, "mask_token") else torch.zeros(self.input_size, dtype=x.dtype)
            x = torch.where(mask > 0, fill.to(x.dtype).expand_as(x), x)
        h = self.encode(x, lengths)
        return self.decoder(h).reshape(x.shape), h

    def penalty(self, h, lengths=None):
        """mean over dimensions of relu(1 - std) over the valid rows of h (the weight not applied)."""
        B, N, C = h.shape
        valid = torch.arange(N)[None, :] < self.valid_rows(lengths, B, N * self.patch_size)[:, None]
        rows = h[valid]
        std = torch.sqrt(rows.var(dim=0, unbiased=False) + 1e-4)
        return torch.relu(1 - std).mean()

    def loss(self, x, mask, lengths=None, training=True):
        """The masked MSE (+ the weighted penalty in training): what seqtrain's train loss reports."""
        out, h = self(x, mask, lengths)
        m = mask.to(out.dtype)
        loss = ((out - x) ** 2 * m).sum() / m.sum()
        if training and self.std_penalty > 0:
            loss = loss + self.std_penalty * self.penalty(h, lengths)
        return loss


def from_spec(spec):
    """A MaskedPretrainer from seqtrain's model spec (state.json's model_spec, or config.json)."""
    return MaskedPretrainer(spec["type"], spec["input_size"], spec["hidden"], spec.get("layers", 1),
                            spec.get("bidirectional", False), spec.get("lookback", 1), spec.get("heads", 4),
                            spec.get("dropout", 0.0), spec.get("positions", "auto"), spec.get("patch_size", 1),
                            spec.get("bias", True), spec.get("mask_fill", "token"), spec.get("std_penalty", 0.0),
                            spec.get("pooling", "mean"), spec.get("kernel_sizes", (8, 5, 3)), spec.get("norm", "layer"))
