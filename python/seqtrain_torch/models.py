"""PyTorch modules that mirror seqtrain's models, parameter for parameter.

A seqtrain ``model.safetensors`` holds exactly the state_dict of the matching module here, so
``load_seqtrain(path, module)`` (``load_state_dict(strict=True)`` underneath) gives a PyTorch
model that predicts what seqtrain predicts, and ``save_seqtrain(module, path)`` hands weights
trained in PyTorch back to seqtrain. Works with torch 1.13 and 2.x.

Parameter names (the contract with seqtrain's C++ models):

Forecaster (seqtrain model type ``lstm`` / ``gru``)::

    rnn.weight_ih_l{k}[_reverse]   [G*hidden, in_k]   in_0 = input_size, in_k = hidden*dirs
    rnn.weight_hh_l{k}[_reverse]   [G*hidden, hidden]
    rnn.bias_ih_l{k}[_reverse]     [G*hidden]
    rnn.bias_hh_l{k}[_reverse]     [G*hidden]
    head.weight                    [output_size, hidden*dirs]
    head.bias                      [output_size]

  G = 4 for LSTM (gate order i, f, g, o) and 3 for GRU (r, z, n), PyTorch's own order;
  dirs = 2 when bidirectional. The forecast reads the RNN output at the last time step,
  ``out[:, -1, :]`` (for a bidirectional RNN that is [forward, backward] there, the backward
  half having seen only the last step), applies dropout, then ``head``.

MLPForecaster (seqtrain model type ``mlp``)::

    body.{3*j}.weight   j = 0: [hidden, lookback*input_size]; j >= 1: [hidden, hidden]
    body.{3*j}.bias     [hidden]                                  for j in 0 .. layers-1
    head.weight         [output_size, hidden]
    head.bias           [output_size]

  ``body`` is nn.Sequential(Linear, ReLU, Dropout, Linear, ReLU, Dropout, ...): ReLU and
  Dropout occupy indices 3j+1 and 3j+2, so the Linear layers are body.0, body.3, body.6, ...
  The window [B, T, F] is flattened time-major: feature f of step t is column t*F + f.

CharLM (seqtrain model type ``char_lstm`` / ``char_gru``; ``lstm`` / ``gru`` with data.source text)::

    embed.weight                 [vocab, embed_size]
    rnn.weight_ih_l{k}           [G*hidden, in_k]   in_0 = embed_size, in_k = hidden
    rnn.weight_hh_l{k}, rnn.bias_ih_l{k}, rnn.bias_hh_l{k}   as for Forecaster
    head.weight                  [vocab, hidden]
    head.bias                    [vocab]

  Token ids [B, T] -> embedding -> RNN (never bidirectional) -> dropout -> head at every step:
  logits [B, T, vocab]; the loss is F.cross_entropy(logits.view(-1, vocab), y.view(-1)).
  The vocabulary itself (id -> character) is the checkpoint's vocab.json (and state.json's "vocab").

GPT (seqtrain model type ``gpt``): nanoGPT's names, ``transformer.wte.weight``, ``transformer.wpe.weight``,
``transformer.h.{i}.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}.*``, ``transformer.ln_f.*``,
``lm_head.weight``; the full list with shapes, the architecture and how the tied head
(lm_head.weight = transformer.wte.weight) is stored are in gpt.py's docstring. In short: the file
holds both tied keys with byte-identical data; load_seqtrain refuses a file whose copies differ.

TransformerEncoder (seqtrain model type ``transformer``): ``input_proj.*``, ``cls_token`` (pooling cls),
``pos_embed.weight`` (learned positions), torch's ``encoder.layers.{i}.{self_attn,linear1,linear2,norm1,norm2}.*``
and ``encoder.norm.*``, ``head.*``; the list with shapes and the forward are in transformer.py's docstring.

Tied parameters in general: a module whose state_dict holds one tensor under several names
(weight tying) is saved with every name, each with the full data; load_seqtrain checks that the
file's copies are bit-identical before loading (RuntimeError otherwise).
"""

import torch
from torch import nn

from .safetensors_io import read_file, save_file

__all__ = ["CharLM", "Forecaster", "MLPForecaster", "from_spec", "load_exported", "load_seqtrain", "save_seqtrain",
           "tied_groups"]


def residual_index(lookback, period, targets, horizon):
    """model.residual_to's selection: for output h * len(targets) + t, the window step and feature
    whose value the baseline repeats (the same phase `period` steps back; period 1 = last value),
    as seqtrain's ResidualBaseline (models/residual_baseline.h) picks them."""
    steps, feats = [], []
    for h in range(horizon):
        for f in targets:
            steps.append(lookback - period + h % period)
            feats.append(f)
    return torch.tensor(steps), torch.tensor(feats)


class _Residual(nn.Module):
    """Adds the window's own baseline to a forecaster's output (model.residual_to); nothing when
    residual_to is none. No parameters: the index is a buffer outside the state dict."""

    def __init__(self, residual_to="none", period=1, inputs=(), lookback=1, output_size=1, levels=1):
        super().__init__()
        self.active = residual_to != "none"
        self.levels = levels
        if self.active:
            steps, feats = residual_index(lookback, int(period), list(inputs), output_size // (len(inputs) * levels))
            self.register_buffer("steps", steps, persistent=False)
            self.register_buffer("feats", feats, persistent=False)

    def forward(self, x, out):
        if not self.active:
            return out
        # Into each target and step's first quantile level (the later levels are built on it).
        g = out.reshape(out.shape[0], -1, self.levels)
        first = g[:, :, :1] + x[:, self.steps, self.feats].unsqueeze(-1)
        return torch.cat([first, g[:, :, 1:]], dim=-1).reshape(out.shape)


def monotone_quantiles(raw, levels):
    """train.loss quantile's output: per group of `levels` values (innermost), the first as is and
    each next one the previous plus softplus (so they never cross), as seqtrain's QuantileOutput
    (models/quantile_output.h). levels 1 returns raw."""
    if levels <= 1:
        return raw
    g = raw.reshape(*raw.shape[:-1], raw.shape[-1] // levels, levels)
    inc = torch.cat([g[..., :1], nn.functional.softplus(g[..., 1:])], dim=-1)
    return torch.cumsum(inc, dim=-1).reshape(raw.shape)


def pinball_loss(pred, target, quantiles):
    """The quantile loss's mean (seqtrain's train.loss quantile): pred [..., m * Q] holds Q levels
    per target of target [..., m]; max(tau e, (tau - 1) e) with e = y - p, over every forecast."""
    taus = torch.tensor(quantiles, dtype=pred.dtype)
    p = pred.reshape(*target.shape, len(quantiles))
    e = target.unsqueeze(-1) - p
    return torch.max(taus * e, (taus - 1) * e).mean()


class Forecaster(nn.Module):
    """LSTM/GRU stack + linear head on the pooled outputs (+ the window's baseline with
    residual_to: last_value | seasonal_naive, then `lookback` must be given). pooling (seqtrain's
    model.pooling): last (the last valid step's output), mean or max over the valid steps; with
    `lengths` the RNN runs on pack_padded_sequence, as seqtrain stops each sample at its length."""

    def __init__(self, cell, input_size, hidden, layers=1, bidirectional=False, dropout=0.0, output_size=1,
                 residual_to="none", residual_period=1, residual_inputs=(), lookback=1, quantile_levels=1,
                 future_steps=0, pooling="last"):
        super().__init__()
        cells = {"lstm": nn.LSTM, "gru": nn.GRU}
        if cell not in cells:
            raise ValueError(f"cell must be 'lstm' or 'gru', got {cell!r}")
        if pooling not in ("last", "mean", "max"):
            raise ValueError(f"pooling must be 'last', 'mean' or 'max' for an RNN, got {pooling!r}")
        self.cell, self.pooling = cell, pooling
        # PyTorch applies RNN dropout only between layers (and warns when there is just one).
        self.rnn = cells[cell](input_size, hidden, num_layers=layers, batch_first=True,
                               dropout=dropout if layers > 1 else 0.0, bidirectional=bidirectional)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), output_size)
        self.residual = _Residual(residual_to, residual_period, residual_inputs, lookback, output_size, quantile_levels)
        self.quantile_levels = quantile_levels
        # data.future_features: x's rows after the lookback are the known future, read by a
        # bias-free Linear added to the head's output (seqtrain's future_head).
        self.lookback, self.future_steps = lookback, future_steps
        if future_steps:
            self.future_head = nn.Linear(future_steps * input_size, output_size, bias=False)

    def embed(self, x, lengths=None):
        """The pooled RNN output the head reads (before its dropout): [batch, hidden * dirs]."""
        if lengths is not None and self.future_steps:
            raise ValueError("lengths do not combine with future_steps")
        return rnn_embed(self.rnn, x[:, :self.lookback] if self.future_steps else x, lengths, self.pooling)

    def forward(self, x, lengths=None):
        """x: [batch, lookback (+ future_steps), input_size] -> [batch, output_size]. lengths: None
        (every sample runs all steps) or a [batch] int64 tensor of valid steps (1..T)."""
        y = self.head(self.dropout(self.embed(x, lengths)))
        if self.future_steps:
            y = y + self.future_head(x[:, self.lookback:].reshape(x.shape[0], -1))
        return monotone_quantiles(self.residual(x, y), self.quantile_levels)


def rnn_steps(rnn, x, lengths=None):
    """An RNN's every output over x [batch, T, F] and the lengths [batch]: with `lengths` ([batch]
    int64, 1..T) it runs on pack_padded_sequence, as seqtrain stops each sample at its length (the
    outputs after it are zeros)."""
    if lengths is None:
        out, _ = rnn(x)
        return out, torch.full((x.shape[0],), out.shape[1], dtype=torch.int64)
    lengths = torch.as_tensor(lengths, dtype=torch.int64)
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, _ = nn.utils.rnn.pad_packed_sequence(rnn(packed)[0], batch_first=True, total_length=x.shape[1])
    return out, lengths


def rnn_embed(rnn, x, lengths, pooling):
    """rnn_steps' outputs pooled as seqtrain's model.pooling: last (the last valid step's output),
    mean or max over the valid steps."""
    out, lengths = rnn_steps(rnn, x, lengths)
    if pooling == "last":
        return out[torch.arange(out.shape[0]), lengths - 1]
    if pooling == "mean":
        return out.sum(1) / lengths[:, None].to(out.dtype)  # padded steps are zeros
    padding = torch.arange(out.shape[1])[None, :] >= lengths[:, None]  # [batch, T]
    return out.masked_fill(padding[:, :, None], float("-inf")).max(1).values


def pool_steps(h, valid, pooling):
    """h [B, N, C] pooled over each sample's first valid[b] rows as seqtrain's model.pooling:
    last (the last valid row), mean or max; the rows after them never enter."""
    B, N = h.shape[0], h.shape[1]
    if pooling == "last":
        return h[torch.arange(B), valid - 1]
    pad = torch.arange(N)[None, :] >= valid[:, None]
    if pooling == "mean":
        return h.masked_fill(pad[:, :, None], 0).sum(1) / valid[:, None].to(h.dtype)
    return h.masked_fill(pad[:, :, None], float("-inf")).max(dim=1).values


class MLPForecaster(nn.Module):
    """Flattened window -> (Linear, ReLU, Dropout) x layers -> linear head."""

    def __init__(self, input_size, lookback, hidden, layers=1, dropout=0.0, output_size=1,
                 residual_to="none", residual_period=1, residual_inputs=(), quantile_levels=1, future_steps=0):
        super().__init__()
        if layers < 1:
            raise ValueError(f"layers must be at least 1, got {layers}")
        self.input_size, self.lookback = input_size, lookback + future_steps  # the known future's rows too
        mods = []
        for j in range(layers):
            mods += [nn.Linear(self.lookback * input_size if j == 0 else hidden, hidden), nn.ReLU(), nn.Dropout(dropout)]
        self.body = nn.Sequential(*mods)
        self.head = nn.Linear(hidden, output_size)
        self.residual = _Residual(residual_to, residual_period, residual_inputs, lookback, output_size, quantile_levels)
        self.quantile_levels = quantile_levels

    def forward(self, x):
        """x: [batch, lookback (+ future steps), input_size] -> [batch, output_size]."""
        if tuple(x.shape[1:]) != (self.lookback, self.input_size):
            raise ValueError(f"expected input [batch, {self.lookback}, {self.input_size}], got {list(x.shape)}")
        out = self.residual(x, self.head(self.body(x.reshape(x.shape[0], -1))))
        return monotone_quantiles(out, self.quantile_levels)


class CharLM(nn.Module):
    """Character language model: embedding -> LSTM/GRU -> linear head at every time step."""

    def __init__(self, cell, vocab, embed_size, hidden, layers=1, dropout=0.0):
        super().__init__()
        cells = {"lstm": nn.LSTM, "gru": nn.GRU}
        if cell not in cells:
            raise ValueError(f"cell must be 'lstm' or 'gru', got {cell!r}")
        self.cell = cell
        self.embed = nn.Embedding(vocab, embed_size)
        self.rnn = cells[cell](embed_size, hidden, num_layers=layers, batch_first=True,
                               dropout=dropout if layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids, state=None):
        """ids: [batch, T] int64 -> (logits [batch, T, vocab], rnn state)."""
        out, state = self.rnn(self.embed(ids), state)
        return self.head(self.dropout(out)), state


def from_spec(spec):
    """Builds the mirror of a seqtrain ModelSpec given as a dict (keys as in the config's model
    section: type, input_size, lookback, hidden, layers, bidirectional, dropout, output_size;
    char_lstm / char_gru also take vocab_size (the vocabulary's size) and embed_size).

    gpt takes either nanoGPT's names (vocab_size, block_size, n_layer, n_head, n_embd, dropout,
    bias) or seqtrain's ModelSpec names (vocab_size, lookback = block_size, layers = n_layer,
    heads = n_head, hidden = n_embd, dropout, bias), so config.json's "model_spec" and "torch"
    of a ``seqtrain export`` both work; a key given under both names must agree.

    transformer takes input_size, lookback, hidden, layers, heads, dropout, output_size, positions,
    pooling, patch_size and bias (transformer.py); its forward takes optional lengths. cnn takes
    input_size, lookback, hidden, kernel_sizes, norm, dropout, output_size and pooling (cnn.py)."""
    kind = spec.get("type", "lstm")
    common = dict(hidden=int(spec.get("hidden", 64)), layers=int(spec.get("layers", 1)),
                  dropout=float(spec.get("dropout", 0.0)), output_size=int(spec.get("output_size", 1)))
    residual = dict(residual_to=spec.get("residual_to", "none"), residual_period=int(spec.get("residual_period", 1)),
                    residual_inputs=[int(i) for i in spec.get("residual_inputs", [])],
                    quantile_levels=int(spec.get("quantile_levels", 1)), future_steps=int(spec.get("future_steps", 0)))
    if kind in ("lstm", "gru"):
        return Forecaster(kind, int(spec.get("input_size", 1)), bidirectional=bool(spec.get("bidirectional", False)),
                          lookback=int(spec.get("lookback", 1)), pooling=spec.get("pooling", "last"), **residual,
                          **common)
    if kind == "mlp":
        return MLPForecaster(int(spec.get("input_size", 1)), int(spec.get("lookback", 1)), **residual, **common)
    if kind in ("char_lstm", "char_gru"):
        return CharLM(kind[5:], int(spec["vocab_size"]), int(spec.get("embed_size", 32)), common["hidden"],
                      common["layers"], common["dropout"])
    if kind == "gpt":
        from .gpt import GPT, GPTConfig
        return GPT(GPTConfig(block_size=_gpt_key(spec, "block_size", "lookback", None),
                             vocab_size=int(spec["vocab_size"]),
                             n_layer=_gpt_key(spec, "n_layer", "layers", 1), n_head=_gpt_key(spec, "n_head", "heads", 1),
                             n_embd=_gpt_key(spec, "n_embd", "hidden", 32), dropout=float(spec.get("dropout", 0.0)),
                             bias=_as_bool(spec.get("bias", True))))
    if kind == "cnn":
        from .cnn import CNN
        residual.pop("future_steps")
        common.pop("layers")
        return CNN(int(spec.get("input_size", 1)), lookback=int(spec.get("lookback", 1)),
                   kernel_sizes=[int(k) for k in spec.get("kernel_sizes", [8, 5, 3])],
                   pooling=spec.get("pooling", "mean"), norm=spec.get("norm", "layer"), **residual, **common)
    if kind == "transformer":
        from .transformer import TransformerEncoder
        residual.pop("future_steps")
        return TransformerEncoder(int(spec.get("input_size", 1)), int(spec.get("lookback", 1)),
                                  heads=int(spec.get("heads", 4)), positions=spec.get("positions", "auto"),
                                  pooling=spec.get("pooling", "last"), patch_size=int(spec.get("patch_size", 1)),
                                  bias=_as_bool(spec.get("bias", True)), **residual, **common)
    raise ValueError(f"unknown model type {kind!r}; expected lstm, gru, mlp, char_lstm, char_gru, gpt, transformer or cnn")


def _gpt_key(spec, nano, seqtrain, default):
    """A GPT size under nanoGPT's name or seqtrain's ModelSpec name (both: they must agree)."""
    have = [k for k in (nano, seqtrain) if k in spec]
    if len(have) == 2 and int(spec[nano]) != int(spec[seqtrain]):
        raise ValueError(f"gpt spec gives {nano}={spec[nano]} and {seqtrain}={spec[seqtrain]}; "
                         f"they name the same size, give one")
    if not have:
        if default is None:
            raise ValueError(f"gpt spec needs {nano} (or seqtrain's {seqtrain})")
        return default
    return int(spec[have[0]])


def load_exported(path):
    """The PyTorch module of a ``seqtrain export`` directory: built from its config.json ("torch",
    else "model_spec") with from_spec, model.safetensors loaded strict (load_seqtrain), in eval
    mode. A text model's vocabulary is path/vocab.json (seqtrain.vocab JSON)."""
    import json
    import os

    cfg_path = os.path.join(path, "config.json")
    with open(cfg_path, encoding="utf-8") as f:
        cfg = json.load(f)
    if not isinstance(cfg, dict) or cfg.get("format") != "seqtrain.export":
        raise ValueError(f"{cfg_path}: not a seqtrain export (expected \"format\": \"seqtrain.export\"); "
                         f"write one with `seqtrain export RUN --out DIR`")
    spec = cfg.get("torch") or cfg.get("model_spec")
    if not isinstance(spec, dict):
        raise ValueError(f"{cfg_path}: has neither a \"torch\" nor a \"model_spec\" object")
    module = from_spec(spec)
    load_seqtrain(os.path.join(path, "model.safetensors"), module, strict=True)
    return module.eval()


def _as_bool(v):
    if isinstance(v, str):
        if v.lower() in ("1", "true", "yes", "on"):
            return True
        if v.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected a boolean, got {v!r}")
    return bool(v)


def tied_groups(module):
    """Lists of state_dict names that hold one and the same tensor (weight tying), e.g.
    [["transformer.wte.weight", "lm_head.weight"]] for GPT; names in state_dict order."""
    by_id = {}
    for name, t in module.state_dict(keep_vars=True).items():
        by_id.setdefault(id(t), []).append(name)
    return [names for names in by_id.values() if len(names) > 1]


def load_seqtrain(path, module, strict=True):
    """Loads a seqtrain model.safetensors into module (strict by default); returns the metadata.
    Tied parameters: the file's copies under each name must be bit-identical (RuntimeError if not)."""
    arrays, metadata = read_file(path)
    for names in tied_groups(module):
        present = [n for n in names if n in arrays]
        for n in present[1:]:
            a, b = arrays[present[0]], arrays[n]
            if a.shape != b.shape or a.dtype != b.dtype or a.tobytes() != b.tobytes():
                raise RuntimeError(f"{path}: '{present[0]}' and '{n}' are one tied parameter in "
                                   f"{type(module).__name__} but the file holds different data for them")
    state = {k: torch.from_numpy(v) for k, v in arrays.items()}
    module.load_state_dict(state, strict=strict)
    return metadata


def save_seqtrain(module, path, metadata=None):
    """Writes module's state_dict as safetensors that seqtrain's load_params accepts; a tied
    tensor is written under each of its names with the same bytes."""
    save_file(dict(module.state_dict()), path, metadata=metadata)
