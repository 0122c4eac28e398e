"""The mirror of seqtrain's convolutional encoder (model type ``cnn``), name for name.

seqtrain's models/cnn_encoder.h is this module's forward, layer for layer (Wang et al. 2017's FCN
with LayerNorm over the channels in place of BatchNorm by default; the paper's BatchNorm with
``norm="batch"``, seqtrain's ``model.norm: batch``), so a seqtrain model.safetensors loads with
``load_state_dict(strict=True)`` and gives the same outputs::

    convs.{i}.weight / .bias    [hidden, C_in, k_i] / [hidden]   nn.Conv1d(C_in, hidden, k_i, padding="same")
                                                                 C_in = input_size for i = 0, else hidden
    norms.{i}.weight / .bias    [hidden]                         nn.LayerNorm(hidden) at every step, or
                                                                 nn.BatchNorm1d(hidden) (norm="batch", + its
                                                                 running_mean, running_var, num_batches_tracked)
    head.weight / .bias         [output_size, hidden]

  h = x                                          [B, T, input_size]
  for each i: h = dropout(relu(norms[i](convs[i](h))))   (the conv over time, channels last outside it)
  y = head(pool(h))                              pooling mean (seqtrain's default for cnn) | last | max

With ``lengths`` [B] (each sample's valid steps; the rest is padding at the end) every conv's input
is zero at the padded steps, so nothing there reaches a valid step, and the pooling reads the valid
steps only. seqtrain's dropout masks are its own, so outputs agree with dropout off (eval mode).

BatchNorm sees the valid steps only: they are gathered into [n, hidden] rows, normalised by torch's
BatchNorm1d (batch statistics and a running-statistics update in train mode, the running statistics
in eval mode), and scattered back; padded steps hold 0.
"""

import torch
from torch import nn

from .models import _Residual, monotone_quantiles, pool_steps

__all__ = ["CNN", "CNNEncoderBody"]


class CNN(nn.Module):
    def __init__(self, input_size, hidden, kernel_sizes=(8, 5, 3), dropout=0.0, output_size=1, pooling="mean",
                 lookback=1, residual_to="none", residual_period=1, residual_inputs=(), quantile_levels=1, head=True,
                 norm="layer"):
        super().__init__()
        if norm not in ("layer", "batch"):
            raise ValueError(f"norm must be layer or batch for a cnn, got {norm!r}")
        if not kernel_sizes or any(int(k) < 1 for k in kernel_sizes):
            raise ValueError(f"kernel_sizes must be a non-empty list of sizes >= 1, got {list(kernel_sizes)!r}")
        if pooling not in ("last", "mean", "max"):
            raise ValueError(f"pooling must be last, mean or max for a cnn, got {pooling!r}")
        self.input_size, self.pooling, self.norm = input_size, pooling, norm
        self.convs = nn.ModuleList(nn.Conv1d(input_size if i == 0 else hidden, hidden, int(k), padding="same")
                                   for i, k in enumerate(kernel_sizes))
        self.norms = nn.ModuleList((nn.BatchNorm1d(hidden) if norm == "batch" else nn.LayerNorm(hidden))
                                   for _ in kernel_sizes)
        self.dropout = nn.Dropout(dropout)
        if head:  # head=False: the encoder alone (CNNEncoderBody)
            self.head = nn.Linear(hidden, output_size)
            self.residual = _Residual(residual_to, residual_period, residual_inputs, lookback, output_size,
                                      quantile_levels)
        self.quantile_levels = quantile_levels

    def steps(self, x, lengths=None):
        """Every step's last block output [B, T, hidden] and the valid steps [B]."""
        B, T, F = x.shape
        if F != self.input_size:
            raise ValueError(f"expected [batch, steps, {self.input_size}], got {list(x.shape)}")
        valid = torch.full((B,), T, dtype=torch.long) if lengths is None else \
            torch.as_tensor(lengths, dtype=torch.long)
        pad = (torch.arange(T)[None, :] >= valid[:, None])[:, :, None]
        keep = ~pad[:, :, 0]
        h = x
        for conv, norm in zip(self.convs, self.norms):
            h = conv(h.masked_fill(pad, 0).transpose(1, 2)).transpose(1, 2)
            if self.norm == "batch":  # over the valid steps alone, gathered as [n, hidden] rows
                h = h.new_zeros(h.shape).masked_scatter(keep[:, :, None], norm(h[keep]))
            else:
                h = norm(h)
            h = self.dropout(torch.relu(h))
        return h, valid

    def embed(self, x, lengths=None):
        """The pooled output the head reads: [B, hidden]."""
        h, valid = self.steps(x, lengths)
        return pool_steps(h, valid, self.pooling)

    def forward(self, x, lengths=None):
        """x [B, T, input_size], lengths [B] or None -> [B, output_size]."""
        y = self.head(self.embed(x, lengths))
        return monotone_quantiles(self.residual(x, y), self.quantile_levels)


class CNNEncoderBody(CNN):
    """CNN without its head: convs.* and norms.*, as ``seqtrain export RUN --encoder`` writes them."""

    def __init__(self, input_size, hidden, kernel_sizes=(8, 5, 3), dropout=0.0, pooling="mean", norm="layer"):
        super().__init__(input_size, hidden, kernel_sizes=kernel_sizes, dropout=dropout, pooling=pooling, head=False,
                         norm=norm)

    def forward(self, x, lengths=None):
        return self.embed(x, lengths)
