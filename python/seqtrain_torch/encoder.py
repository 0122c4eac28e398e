"""Encoders alone: the part of a seqtrain model its head reads, as ``seqtrain export RUN --encoder
FILE.safetensors`` writes it, name for name (the classifier's names without ``head.*``)::

    RNNEncoder (family lstm / gru)          rnn.weight_ih_l{k}[_reverse], rnn.weight_hh_l{k}..., as Forecaster
    TransformerEncoderBody (transformer)    input_proj.*, cls_token, pos_embed.weight, encoder.layers.{i}.*,
                                            encoder.norm.*, as TransformerEncoder
    CNNEncoderBody (cnn)                    convs.{i}.*, norms.{i}.*, as cnn.py's CNN

``embed(x, lengths=None)`` (also ``forward``) returns the pooled vector [B, C] exactly as seqtrain's
Model::embed and ``seqtrain embed`` compute it (model.pooling last | mean | max | cls over each
sample's valid steps; x z-scored as the run's inputs). ``load_encoder(path)`` builds the module
from the file's ``__metadata__`` (format "seqtrain.encoder": family, input_size, lookback,
hidden, layers, bidirectional, heads, patch_size, positions, pooling, bias; cnn: norm, kernel_sizes as
"8,5,3") and loads the tensors
with ``load_state_dict(strict=True)``, in eval mode.
"""

import torch
from torch import nn

from .cnn import CNNEncoderBody
from .models import _as_bool, rnn_embed
from .safetensors_io import read_file
from .transformer import TransformerEncoder

__all__ = ["RNNEncoder", "TransformerEncoderBody", "CNNEncoderBody", "encoder_from_metadata", "load_encoder"]

ENCODER_FORMAT = "seqtrain.encoder"


class RNNEncoder(nn.Module):
    """An LSTM/GRU stack under Forecaster's names (rnn.*), pooled as seqtrain pools it."""

    def __init__(self, cell, input_size, hidden, layers=1, bidirectional=False, dropout=0.0, pooling="last"):
        super().__init__()
        cells = {"lstm": nn.LSTM, "gru": nn.GRU}
        if cell not in cells:
            raise ValueError(f"cell must be 'lstm' or 'gru', got {cell!r}")
        if pooling not in ("last", "mean", "max"):
            raise ValueError(f"pooling must be 'last', 'mean' or 'max' for an RNN, got {pooling!r}")
        self.cell, self.pooling = cell, pooling
        self.rnn = cells[cell](input_size, hidden, num_layers=layers, batch_first=True,
                               dropout=dropout if layers > 1 else 0.0, bidirectional=bidirectional)

    def embed(self, x, lengths=None):
        """x [B, T, input_size], lengths [B] or None -> [B, hidden * directions]."""
        return rnn_embed(self.rnn, x, lengths, self.pooling)

    def forward(self, x, lengths=None):
        return self.embed(x, lengths)


class TransformerEncoderBody(TransformerEncoder):
    """TransformerEncoder without its head: input_proj, cls_token, positions, encoder layers, final norm."""

    def __init__(self, input_size, lookback, hidden, layers=1, heads=4, dropout=0.0, positions="auto",
                 pooling="last", patch_size=1, bias=True):
        super().__init__(input_size, lookback, hidden, layers=layers, heads=heads, dropout=dropout,
                         positions=positions, pooling=pooling, patch_size=patch_size, bias=bias, head=False)

    def forward(self, x, lengths=None):
        return self.embed(x, lengths)


def encoder_from_metadata(md):
    """The (untrained) encoder module a ``seqtrain export --encoder`` file's metadata describes."""
    if md.get("format") != ENCODER_FORMAT:
        raise ValueError(f"not a seqtrain encoder (metadata format {md.get('format')!r}, expected "
                         f"{ENCODER_FORMAT!r}); write one with `seqtrain export RUN --encoder FILE.safetensors`")
    family = md.get("family")
    common = dict(input_size=int(md["input_size"]), hidden=int(md["hidden"]), layers=int(md["layers"]),
                  pooling=md.get("pooling", "last"))
    if family in ("lstm", "gru"):
        return RNNEncoder(family, bidirectional=_as_bool(md.get("bidirectional", "false")), **common)
    if family == "transformer":
        return TransformerEncoderBody(lookback=int(md["lookback"]), heads=int(md["heads"]),
                                      positions=md.get("positions", "auto"), patch_size=int(md.get("patch_size", 1)),
                                      bias=_as_bool(md.get("bias", "true")), **common)
    if family == "cnn":
        return CNNEncoderBody(common["input_size"], common["hidden"], pooling=common["pooling"],
                              kernel_sizes=[int(k) for k in md["kernel_sizes"].split(",")],
                              norm=md.get("norm", "layer"))
    raise ValueError(f"unknown encoder family {family!r}; expected lstm, gru, transformer or cnn")


def load_encoder(path):
    """The encoder of a ``seqtrain export RUN --encoder`` file, weights loaded strictly, in eval mode."""
    arrays, md = read_file(path)
    try:
        module = encoder_from_metadata(md)
    except (KeyError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from e
    module.load_state_dict({k: torch.from_numpy(v) for k, v in arrays.items()}, strict=True)
    return module.eval()
