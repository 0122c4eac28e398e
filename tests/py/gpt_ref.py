"""PyTorch reference for seqtrain's GPT (model.type: gpt), through seqtrain_torch.gpt.GPT.

Usage: gpt_ref.py MODE DIR [model options] [mode options]

The model: DIR/model.safetensors (or --weights FILE) loads with strict=True (both tied keys,
transformer.wte.weight and lm_head.weight, byte-identical; see python/seqtrain_torch/gpt.py).
Its sizes come, later ones overriding earlier ones, from
  1. the weights file itself: vocab_size, n_embd (wte), block_size (wpe), n_layer (the
     transformer.h.{i} present), bias (whether transformer.ln_f.bias is present);
  2. DIR/config.json when present, or --config FILE: a JSON object with nanoGPT's names
     vocab_size, block_size, n_layer, n_head, n_embd, bias (other keys are ignored);
  3. --vocab V --block T --n-layer L --n-head H --n-embd C --bias 0|1.
n_head cannot be read from the weights and must come from 2 or 3. Dropout is always 0.

MODE grad   Reads DIR/idx.npy and DIR/targets.npy ([B, T] ids; int64, or floats holding
            integers); in --dtype (float64 by default, or float32) computes
              logits  = model(idx)                                   [B, T, V]
              loss    = F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)
            and its gradient; writes DIR/logits.npy, DIR/loss.npy (shape [1]) and
            DIR/grad_<name>.npy for every state_dict name (so the tied tensor's gradient, the sum
            of the embedding's and the head's, is written twice: grad_transformer.wte.weight.npy
            and grad_lm_head.weight.npy, identical), all in --dtype; plus the same gradients in
            DIR/grads.safetensors.
MODE train  Reads DIR/batches_idx.npy and DIR/batches_tgt.npy ([N, B, T]) and runs --steps
            (default N) optimizer steps in --dtype (float32 by default), step s on batch s:
              zero_grad; loss = as above; backward;
              clip_grad_norm_(model.parameters(), --clip)       (--clip 0: no clipping; the tied
                                                                  tensor counts once)
              lr = schedule(s); AdamW step
            AdamW: betas (--beta1 0.9, --beta2 0.99), eps --eps 1e-8, two param groups as
            nanoGPT's configure_optimizers: --weight-decay 0.1 on parameters with dim >= 2
            (every Linear weight, wte = lm_head and wpe), 0 on the rest.
            --schedule constant (default): lr = --lr.
            --schedule cosine: seqtrain's (src/optim/schedule.h), W = --warmup, T = --total:
              s < W: lr * (s + 1) / W; else lr_min + (lr - lr_min) (1 + cos(pi p)) / 2,
              p = min(1, (s - W) / max(1, T - W)); lr_min = --min-lr.
            --schedule nanogpt: nanoGPT's get_lr with warmup_iters = W, lr_decay_iters = T:
              s < W: lr * (s + 1) / (W + 1); s > T: lr_min;
              else lr_min + (lr - lr_min) (1 + cos(pi (s - W) / (T - W))) / 2.
            Writes DIR/losses.npy [steps] (float64, the loss before each step), DIR/lrs.npy
            [steps] (the lr of each step) and DIR/final.safetensors (save_seqtrain: both tied keys).
MODE init   Builds GPT with nanoGPT's init from torch.manual_seed(--seed) and the sizes given by
            config.json / the flags (all of vocab, block, n_layer, n_head, n_embd needed), and
            writes DIR/model.safetensors (or --weights FILE).

Exit status 0 on success; 2 for bad arguments; anything else is a failure (traceback on stderr).
"""

import argparse
import json
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn.functional as F

from seqtrain_torch.gpt import GPT, GPTConfig
from seqtrain_torch.models import load_seqtrain, save_seqtrain
from seqtrain_torch.safetensors_io import load_file, save_file

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def usage_error(msg):
    print(f"gpt_ref.py: {msg}", file=sys.stderr)
    sys.exit(2)


def sizes_from_weights(path):
    arrays = load_file(path)
    out = {}
    if "transformer.wte.weight" in arrays:
        out["vocab_size"], out["n_embd"] = arrays["transformer.wte.weight"].shape
    if "transformer.wpe.weight" in arrays:
        out["block_size"] = arrays["transformer.wpe.weight"].shape[0]
    layers = {int(m.group(1)) for k in arrays for m in [re.match(r"transformer\.h\.(\d+)\.", k)] if m}
    if layers:
        out["n_layer"] = max(layers) + 1
    out["bias"] = "transformer.ln_f.bias" in arrays
    return out


def build_config(a, weights, need_file=True):
    sizes = sizes_from_weights(weights) if need_file else {}
    cfg_path = a.config or os.path.join(a.dir, "config.json")
    if a.config or os.path.exists(cfg_path):
        with open(cfg_path) as f:
            j = json.load(f)
        for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "bias"):
            if k in j:
                sizes[k] = j[k]
    for k, v in (("vocab_size", a.vocab), ("block_size", a.block), ("n_layer", a.n_layer), ("n_head", a.n_head),
                 ("n_embd", a.n_embd), ("bias", a.bias)):
        if v is not None:
            sizes[k] = v
    missing = [k for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd") if k not in sizes]
    if missing:
        usage_error(f"model size(s) {missing} not given (config.json or --vocab/--block/--n-layer/"
                    f"--n-head/--n-embd)")
    b = sizes.get("bias", True)
    b = b if isinstance(b, bool) else str(b).lower() in ("1", "true", "yes", "on")
    return GPTConfig(block_size=int(sizes["block_size"]), vocab_size=int(sizes["vocab_size"]),
                     n_layer=int(sizes["n_layer"]), n_head=int(sizes["n_head"]), n_embd=int(sizes["n_embd"]),
                     dropout=0.0, bias=b)


def load_ids(path):
    a = np.load(path)
    if a.dtype.kind == "f":
        if not np.all(a == np.round(a)):
            usage_error(f"{path} holds non-integer ids")
    return torch.from_numpy(a.astype(np.int64))


def lr_at(a, s):
    W, T, lr, lo = a.warmup, a.total, a.lr, a.min_lr
    if a.schedule == "constant":
        return lr
    if a.schedule == "cosine":
        if s < W:
            return lr * (s + 1) / W
        p = min(1.0, (s - W) / max(1, T - W))
        return lo + (lr - lo) * (1.0 + math.cos(math.pi * p)) / 2
    # nanogpt
    if s < W:
        return lr * (s + 1) / (W + 1)
    if s > T:
        return lo
    return lo + (lr - lo) * (1.0 + math.cos(math.pi * (s - W) / max(1, T - W))) / 2


def main():
    ap = argparse.ArgumentParser(description="PyTorch reference for seqtrain's GPT; see the module docstring")
    ap.add_argument("mode", choices=["grad", "train", "init"])
    ap.add_argument("dir")
    ap.add_argument("--weights", help="model file (default DIR/model.safetensors)")
    ap.add_argument("--config", help="JSON file with the sizes (default DIR/config.json when present)")
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--block", type=int)
    ap.add_argument("--n-layer", type=int)
    ap.add_argument("--n-head", type=int)
    ap.add_argument("--n-embd", type=int)
    ap.add_argument("--bias", type=int, choices=[0, 1])
    ap.add_argument("--dtype", choices=sorted(DTYPES), help="grad: float64 by default; train: float32")
    ap.add_argument("--use-sdpa", type=int, choices=[0, 1], help="attention path (default: sdpa when torch has it)")
    # train
    ap.add_argument("--steps", type=int)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.99)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--schedule", choices=["constant", "cosine", "nanogpt"], default="constant")
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--total", type=int, default=0)
    ap.add_argument("--min-lr", type=float, default=0.0)
    # init
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.schedule == "cosine" and a.warmup > 0 and a.total < a.warmup:
        ap.error("--total must be at least --warmup")

    torch.set_num_threads(1)
    d = a.dir
    weights = a.weights or os.path.join(d, "model.safetensors")
    use_sdpa = None if a.use_sdpa is None else bool(a.use_sdpa)

    if a.mode == "init":
        torch.manual_seed(a.seed)
        model = GPT(build_config(a, weights, need_file=False), use_sdpa=use_sdpa)
        save_seqtrain(model, weights, metadata={"writer": "gpt_ref.py"})
        return 0

    torch.manual_seed(0)
    model = GPT(build_config(a, weights), use_sdpa=use_sdpa)
    load_seqtrain(weights, model)

    if a.mode == "grad":
        model = model.to(DTYPES[a.dtype or "float64"])
        model.eval()  # dropout is 0 anyway
        idx, tgt = load_ids(os.path.join(d, "idx.npy")), load_ids(os.path.join(d, "targets.npy"))
        logits, loss = model(idx, tgt)
        loss.backward()
        np.save(os.path.join(d, "logits.npy"), logits.detach().numpy())
        np.save(os.path.join(d, "loss.npy"), np.array([loss.item()], dtype=logits.detach().numpy().dtype))
        grads = {}
        for name, p in model.state_dict(keep_vars=True).items():
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            grads[name] = g.detach().numpy()
            np.save(os.path.join(d, f"grad_{name}.npy"), grads[name])
        save_file(grads, os.path.join(d, "grads.safetensors"))
        return 0

    # train
    model = model.to(DTYPES[a.dtype or "float32"])
    model.train()
    X = load_ids(os.path.join(d, "batches_idx.npy"))
    Y = load_ids(os.path.join(d, "batches_tgt.npy"))
    if X.dim() != 3 or X.shape != Y.shape:
        usage_error(f"batches_idx {list(X.shape)} and batches_tgt {list(Y.shape)} must both be [N, B, T]")
    steps = X.shape[0] if a.steps is None else a.steps
    if steps > X.shape[0]:
        usage_error(f"--steps {steps} but only {X.shape[0]} batches")
    opt = torch.optim.AdamW(model.optim_groups(a.weight_decay), lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    losses, lrs = [], []
    for s in range(steps):
        lr = lr_at(a, s)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        _, loss = model(X[s], Y[s])
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        losses.append(loss.item())
        lrs.append(lr)
    np.save(os.path.join(d, "losses.npy"), np.array(losses, dtype=np.float64))
    np.save(os.path.join(d, "lrs.npy"), np.array(lrs, dtype=np.float64))
    save_seqtrain(model, os.path.join(d, "final.safetensors"), metadata={"writer": "gpt_ref.py"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
