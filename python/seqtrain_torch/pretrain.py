"""seqtrain's masked pretrainer (train.task masked_pretrain) as a PyTorch module, with the names
seqtrain saves, so a pretraining run's model.safetensors loads with load_state_dict(strict=True).

The encoder is the classifier's own (rnn.* for lstm/gru; input_proj, pos_embed, encoder.* for the
transformer), so its weights move to a classifier unchanged; pretraining adds mask_token [F]
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

from .transformer import sinusoid_table, _without_bias


class MaskedPretrainer(nn.Module):
    def __init__(self, type, input_size, hidden, layers=1, bidirectional=False, lookback=1, heads=4, dropout=0.0,
                 positions="auto", patch_size=1, bias=True, mask_fill="token", std_penalty=0.0):
        super().__init__()
        self.type, self.input_size, self.patch_size, self.std_penalty = type, input_size, patch_size, std_penalty
        if type in ("lstm", "gru"):
            cells = {"lstm": nn.LSTM, "gru": nn.GRU}
            self.rnn = cells[type](input_size, hidden, num_layers=layers, batch_first=True,
                                   dropout=dropout if layers > 1 else 0.0, bidirectional=bidirectional)
            width = hidden * (2 if bidirectional else 1)
        elif type == "transformer":
            self.positions = "learned" if positions == "auto" else positions
            self.input_proj = nn.Linear(patch_size * input_size, hidden)
            tokens = lookback // patch_size
            if self.positions == "learned":
                self.pos_embed = nn.Embedding(tokens, hidden)
            elif self.positions == "sinusoidal":
                self.register_buffer("pos_table", sinusoid_table(tokens, hidden), persistent=False)
            self.dropout = nn.Dropout(dropout)
            args = dict(d_model=hidden, nhead=heads, dim_feedforward=4 * hidden, dropout=dropout,
                        activation="gelu", batch_first=True, norm_first=True)
            if bias:
                layer, norm = nn.TransformerEncoderLayer(**args), nn.LayerNorm(hidden)
            else:
                layer, norm = _without_bias(nn.TransformerEncoderLayer, **args), _without_bias(nn.LayerNorm, hidden)
            self.encoder = nn.TransformerEncoder(layer, layers, norm=norm, enable_nested_tensor=False)
            width = hidden
        else:
            raise ValueError(f"type must be lstm, gru or transformer, got {type!r}")
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
        B, T, F = x.shape
        if self.type in ("lstm", "gru"):
            if lengths is None:
                return self.rnn(x)[0]
            packed = nn.utils.rnn.pack_padded_sequence(x, torch.as_tensor(lengths).cpu(), batch_first=True,
                                                       enforce_sorted=False)
            return nn.utils.rnn.pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=T)[0]
        h = self.input_proj(x.reshape(B, T // self.patch_size, self.patch_size * F))
        N = h.shape[1]
        if self.positions == "learned":
            h = h + self.pos_embed.weight[:N]
        elif self.positions == "sinusoidal":
            h = h + self.pos_table[:N].to(h.dtype)
        pad = torch.arange(N)[None, :] >= self.valid_rows(lengths, B, T)[:, None]
        return self.encoder(self.dropout(h), src_key_padding_mask=pad if lengths is not None else None)

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
                            spec.get("bias", True), spec.get("mask_fill", "token"), spec.get("std_penalty", 0.0))
