"""A nanoGPT-compatible GPT: the PyTorch mirror of seqtrain's ``model.type: gpt``.

The architecture and the parameter names are those of Karpathy's nanoGPT (model.py), so a
seqtrain GPT ``model.safetensors`` loads into ``GPT`` with ``load_state_dict(strict=True)``
(``seqtrain_torch.load_seqtrain``), and a nanoGPT ``ckpt.pt``'s ``model`` state_dict loads too
(``GPT.load_nanogpt_state_dict`` strips what torch.compile and torch < 2 add). Works with
torch 1.13 (explicit masked-softmax attention) and 2.x (``F.scaled_dot_product_attention``
when present; ``use_sdpa=False`` forces the explicit path, which computes the same function).

Checked by hand against nanoGPT's model.py (commit 3adf61e1) under torch 1.13 and 2.15: with the
same torch.manual_seed the two build bit-identical initial weights, and given the same weights
they give identical logits, loss, gradients, optimizer groups and generate() samples (nanoGPT is
not vendored; tests/py/gpt_selftest.py checks against a plain reference instead).

Architecture (pre-LN; dropout p everywhere it appears)::

    x = drop(wte(idx) + wpe(arange(T)))                        idx: [B, T] int64, T <= block_size
    for each block h.i:
        x = x + attn(ln_1(x))      attn: c_attn -> q, k, v split along the last dim in that order,
                                   n_head heads of n_embd/n_head; softmax(q k^T / sqrt(hs) + causal
                                   mask) -> attn dropout -> @ v -> heads concatenated -> c_proj
                                   -> resid dropout
        x = x + mlp(ln_2(x))       mlp: c_fc (4*n_embd) -> exact GELU (erf) -> c_proj -> dropout
    logits = lm_head(ln_f(x))      [B, T, vocab_size], every position
    loss = F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)

LayerNorm: eps 1e-5, weight initialised to ones, bias (when ``bias``) to zeros. Linear layers
are y = x W^T + b with W of shape [out, in], as in PyTorch.

Parameter names and shapes (C = n_embd, V = vocab_size, L = n_layer; the state_dict order)::

    transformer.wte.weight              [V, C]        token embedding; TIED: the same tensor as lm_head.weight
    transformer.wpe.weight              [block_size, C]
    for i in 0 .. L-1:
    transformer.h.{i}.ln_1.weight       [C]
    transformer.h.{i}.ln_1.bias         [C]           only when bias
    transformer.h.{i}.attn.c_attn.weight  [3C, C]     rows 0..C-1 give q, C..2C-1 k, 2C..3C-1 v;
    transformer.h.{i}.attn.c_attn.bias    [3C]        within each, head j owns rows j*hs .. (j+1)*hs-1
    transformer.h.{i}.attn.c_proj.weight  [C, C]
    transformer.h.{i}.attn.c_proj.bias    [C]
    transformer.h.{i}.ln_2.weight       [C]
    transformer.h.{i}.ln_2.bias         [C]
    transformer.h.{i}.mlp.c_fc.weight   [4C, C]
    transformer.h.{i}.mlp.c_fc.bias     [4C]
    transformer.h.{i}.mlp.c_proj.weight [C, 4C]
    transformer.h.{i}.mlp.c_proj.bias   [C]
    transformer.ln_f.weight             [C]
    transformer.ln_f.bias               [C]           only when bias
    lm_head.weight                      [V, C]        TIED to transformer.wte.weight; lm_head has no bias

  Every ``*.bias`` is present exactly when ``bias`` is true (nanoGPT's ``bias`` flag covers the
  Linear layers and the LayerNorms alike). The causal mask is not a parameter: nanoGPT under
  torch < 2 registers it as a persistent buffer ``transformer.h.{i}.attn.bias``; here it is a
  non-persistent buffer, so the state_dict is the same under torch 1.13 and 2.x.

The tied head in safetensors: ``state_dict()`` yields the tied tensor under both names, and a
seqtrain GPT ``model.safetensors`` stores BOTH keys, ``transformer.wte.weight`` and
``lm_head.weight``, each with the full [V, C] data, byte-identical. That is what
``load_state_dict(strict=True)`` needs, and what ``save_seqtrain`` writes (it writes the
state_dict as is). ``load_seqtrain`` refuses (RuntimeError, like a strict load's other refusals)
a file whose copies of a tied tensor differ, since one would silently overwrite the other.
``named_parameters()`` lists the tied tensor once, as ``transformer.wte.weight``; its gradient
is the sum of the embedding's and the head's.

Initialisation (nanoGPT's): every Linear and Embedding weight ~ N(0, 0.02), Linear biases 0,
LayerNorm weight 1 / bias 0, then every ``c_proj.weight`` (attn and mlp) ~ N(0, 0.02/sqrt(2L)).

Optimizer groups (nanoGPT's ``configure_optimizers``): weight decay on every parameter with
dim >= 2 (all Linear weights, and the embeddings wte (= lm_head) and wpe), none on the rest
(biases, LayerNorm weights). Note this differs from seqtrain's ``train.optimizer.decay:
matrices``, which exempts embeddings.
"""

import inspect
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["GPTConfig", "GPT", "LayerNorm", "CausalSelfAttention", "MLP", "Block", "gpt_param_shapes"]

_HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True  # biases in Linear layers and LayerNorms

    def __post_init__(self):
        for f in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"GPTConfig.{f} must be at least 1, got {getattr(self, f)}")
        if self.n_embd % self.n_head != 0:
            raise ValueError(f"GPTConfig.n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig.dropout must be in [0, 1), got {self.dropout}")


def gpt_param_shapes(config):
    """The state_dict names and shapes, in order, that GPT(config) has (tied head under both names)."""
    C, V = config.n_embd, config.vocab_size
    out = [("transformer.wte.weight", (V, C)), ("transformer.wpe.weight", (config.block_size, C))]

    def lin(name, o, i):
        out.append((name + ".weight", (o, i)))
        if config.bias:
            out.append((name + ".bias", (o,)))

    def ln(name):
        out.append((name + ".weight", (C,)))
        if config.bias:
            out.append((name + ".bias", (C,)))

    for i in range(config.n_layer):
        p = f"transformer.h.{i}."
        ln(p + "ln_1")
        lin(p + "attn.c_attn", 3 * C, C)
        lin(p + "attn.c_proj", C, C)
        ln(p + "ln_2")
        lin(p + "mlp.c_fc", 4 * C, C)
        lin(p + "mlp.c_proj", C, 4 * C)
    ln("transformer.ln_f")
    out.append(("lm_head.weight", (V, C)))
    return out


class LayerNorm(nn.Module):
    """LayerNorm over the last dim with an optional bias (nn.LayerNorm always has one in torch 1.13)."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config, use_sdpa=None):
        super().__init__()
        C = config.n_embd
        self.n_head, self.n_embd, self.dropout = config.n_head, C, config.dropout
        self.c_attn = nn.Linear(C, 3 * C, bias=config.bias)
        self.c_proj = nn.Linear(C, C, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.use_sdpa = _HAS_SDPA if use_sdpa is None else bool(use_sdpa)
        if self.use_sdpa and not _HAS_SDPA:
            raise ValueError("use_sdpa=True needs torch >= 2.0 (F.scaled_dot_product_attention)")
        # Not persistent: the mask is no parameter and must not appear in the state_dict.
        mask = torch.tril(torch.ones(config.block_size, config.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, config.block_size, config.block_size), persistent=False)

    def split_heads(self, x):
        """[B, T, 3C] from c_attn -> q, k, v each [B, n_head, T, hs]."""
        B, T, _ = x.shape
        q, k, v = x.split(self.n_embd, dim=2)
        hs = self.n_embd // self.n_head
        return tuple(t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.split_heads(self.c_attn(x))
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                               dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()  # exact (erf), as nanoGPT
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config, use_sdpa=None):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, config.bias)
        self.attn = CausalSelfAttention(config, use_sdpa)
        self.ln_2 = LayerNorm(config.n_embd, config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's GPT. ``GPT(GPTConfig(...))`` or ``GPT(vocab_size=..., block_size=..., ...)``."""

    def __init__(self, config=None, use_sdpa=None, **kwargs):
        super().__init__()
        if config is None:
            config = GPTConfig(**kwargs)
        elif kwargs:
            raise TypeError("give either a GPTConfig or keyword arguments, not both")
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config, use_sdpa) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # Weight tying: one Parameter under both names (the head's, as nanoGPT assigns it).
        self.transformer.wte.weight = self.lm_head.weight
        self.reset_parameters()

    @property
    def use_sdpa(self):
        return self.transformer.h[0].attn.use_sdpa if len(self.transformer.h) else False

    @use_sdpa.setter
    def use_sdpa(self, value):
        if value and not _HAS_SDPA:
            raise ValueError("use_sdpa=True needs torch >= 2.0 (F.scaled_dot_product_attention)")
        for blk in self.transformer.h:
            blk.attn.use_sdpa = bool(value)

    def reset_parameters(self):
        """nanoGPT's init: N(0, 0.02) weights, zero biases, c_proj weights N(0, 0.02/sqrt(2*n_layer))."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            elif isinstance(m, LayerNorm):
                nn.init.ones_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * self.config.n_layer))

    def get_num_params(self, non_embedding=True):
        """Parameter count (the tied tensor once); without the position embedding by default, as nanoGPT."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.transformer.wpe.weight.numel() if non_embedding else n

    def forward(self, idx, targets=None):
        """idx [B, T] int64 -> (logits [B, T, V], loss or None).

        Unlike nanoGPT, the logits cover every position also when targets is None (nanoGPT then
        returns only the last position's, [B, 1, V]); ``generate`` reads the last one."""
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence of length {T} is longer than block_size {self.config.block_size}")
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    def optim_groups(self, weight_decay):
        """nanoGPT's two AdamW parameter groups: decay on dim >= 2, none on the rest."""
        params = [p for p in self.parameters() if p.requires_grad]
        return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]

    def optim_group_names(self):
        """(decayed names, not decayed names) as named_parameters() names them (tied tensor once)."""
        named = [(n, p) for n, p in self.named_parameters() if p.requires_grad]
        return [n for n, p in named if p.dim() >= 2], [n for n, p in named if p.dim() < 2]

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type="cpu"):
        """torch.optim.AdamW over optim_groups, fused on CUDA when this torch has it (as nanoGPT)."""
        extra = {}
        if device_type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters:
            extra["fused"] = True
        return torch.optim.AdamW(self.optim_groups(weight_decay), lr=learning_rate, betas=tuple(betas), **extra)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        """Appends max_new_tokens sampled tokens to idx [B, T] (cropped to the last block_size for
        context). temperature 0 picks the argmax; top_k keeps only the k likeliest tokens."""
        for _ in range(max_new_tokens):
            ctx = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
            logits, _ = self(ctx)
            logits = logits[:, -1, :]
            if temperature == 0:
                nxt = logits.argmax(dim=-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, min(int(top_k), logits.size(-1)))
                    logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
                nxt = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1, generator=generator)
            idx = torch.cat((idx, nxt), dim=1)
        return idx

    def load_nanogpt_state_dict(self, state_dict, strict=True):
        """Loads a nanoGPT checkpoint's ``model`` state_dict: drops the ``_orig_mod.`` prefix that
        torch.compile adds and the causal-mask buffers (``...attn.bias`` of shape [1, 1, n, n])
        that nanoGPT under torch < 2 saves."""
        sd = {}
        for k, v in state_dict.items():
            if k.startswith("_orig_mod."):
                k = k[len("_orig_mod."):]
            if k.endswith(".attn.bias") and v.dim() == 4:
                continue
            sd[k] = v
        return self.load_state_dict(sd, strict=strict)
