#!/usr/bin/env python3
"""torch_gpt_train.py: examples/shakespeare_gpt.yaml's training run (nanoGPT's CPU recipe) in PyTorch.

    python bench/torch_gpt_train.py [--text data/shakespeare.txt] [--iters 2000] [--threads 2]
                                    [--compile] [--json OUT]

The same job as `seqtrain train examples/shakespeare_gpt.yaml`, matched to seqtrain's data plan
(src/train/data_plan.cpp plan_text, src/data/text.cpp, src/data/random_text.cpp):
  vocabulary   <unk> = 0, then the text's distinct characters sorted by code point, ids 1.. (85)
  split        n = characters; train = tokens [0, floor(0.9 n)), val = the next floor(0.1 n)
  training     each sample a 64-token window at a uniformly random offset o in
               [0, n_train - 64) (RandomTextSource: begin + below(end - begin - block)),
               targets the next tokens; batches of 12; this script's own RNG (torch seed 0)
  validation   the fixed non-overlapping windows of the val range (stride 64, offsets
               n_train + 64 k), the first 20 batches of 12 (train.eval_iters 20), mean
               cross-entropy over all their targets, after every 250 updates
  model        seqtrain_torch.gpt.GPT: 4 layers, 4 heads, n_embd 128, block 64, bias, dropout 0,
               nanoGPT's init; F.scaled_dot_product_attention on torch 2.x
  optimizer    AdamW(lr 1e-3, betas (0.9, 0.99), eps 1e-8), weight decay 0.1 on 2-D tensors only
  schedule     seqtrain's cosine (src/optim/schedule.cpp): update s < 100 uses 1e-3 (s+1)/100,
               then 1e-4 + 0.9e-3 * 0.5 (1 + cos(pi (s - 100) / 1900))
  clipping     global norm 1.0
Prints one JSON object: the val-loss curve, the train loss per 250-update interval, wall times.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from seqtrain_torch.gpt import GPT, GPTConfig  # noqa: E402

BLOCK, BATCH, LR, MIN_LR, WARMUP, EVAL_EVERY, EVAL_ITERS = 64, 12, 1e-3, 1e-4, 100, 250, 20


def lr_at(step, total):
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    progress = min(1.0, (step - WARMUP) / max(1, total - WARMUP))
    return MIN_LR + (LR - MIN_LR) * 0.5 * (1.0 + math.cos(math.pi * progress))


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--text", default=os.path.join(root, "data", "shakespeare.txt"))
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    t_start = time.perf_counter()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    text = open(a.text, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {c: i + 1 for i, c in enumerate(chars)}  # 0 is <unk>
    V = len(chars) + 1
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = len(data)
    n_train = int(math.floor(n * 0.9 + 1e-6))
    n_val = int(math.floor(n * 0.1 + 1e-6))
    train, val = data[:n_train], data[n_train:n_train + n_val]
    n_windows = (n_val - BLOCK - 1) // BLOCK + 1
    k = min(n_windows, EVAL_ITERS * BATCH)
    starts = torch.arange(k) * BLOCK
    val_x = torch.stack([val[s:s + BLOCK] for s in starts.tolist()])
    val_y = torch.stack([val[s + 1:s + 1 + BLOCK] for s in starts.tolist()])
    arange = torch.arange(BLOCK)

    def get_batch():
        o = torch.randint(0, n_train - BLOCK, (BATCH,))
        idx = o[:, None] + arange[None, :]
        return train[idx], train[idx + 1]

    model = GPT(GPTConfig(block_size=BLOCK, vocab_size=V, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=True))
    opt = model.configure_optimizers(0.1, LR, (0.9, 0.99), "cpu")
    params = list(model.parameters())
    fwd = torch.compile(model) if a.compile else model

    @torch.no_grad()
    def evaluate():
        model.eval()
        tot = 0.0
        for b in range(0, k, BATCH):
            _, loss = fwd(val_x[b:b + BATCH], val_y[b:b + BATCH])
            tot += float(loss) * val_x[b:b + BATCH].numel()
        model.train()
        return tot / val_x.numel()

    t_setup = time.perf_counter() - t_start
    curve, train_curve = [], []
    eval_s = 0.0
    loss_acc, loss_n = 0.0, 0
    t_loop = time.perf_counter()
    for step in range(a.iters):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.iters)
        x, y = get_batch()
        opt.zero_grad(set_to_none=True)
        _, loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        loss_acc += float(loss.detach())
        loss_n += 1
        if (step + 1) % EVAL_EVERY == 0:
            te = time.perf_counter()
            v = evaluate()
            eval_s += time.perf_counter() - te
            curve.append({"updates": step + 1, "val_loss": v, "time_s": time.perf_counter() - t_start})
            train_curve.append({"updates": step + 1, "train_loss": loss_acc / loss_n})
            loss_acc, loss_n = 0.0, 0
            print(f"updates {step + 1}: val {v:.4f}, {time.perf_counter() - t_start:.1f} s", file=sys.stderr)
    loop_s = time.perf_counter() - t_loop
    out = {"engine": "torch", "version": torch.__version__, "python": sys.executable, "compile": a.compile,
           "threads": torch.get_num_threads(), "vocab": V, "tokens": n, "train_tokens": n_train, "val_tokens": n_val,
           "val_windows": k, "iters": a.iters, "val": curve, "train": train_curve, "setup_s": t_setup,
           "loop_s": loop_s, "eval_s": eval_s, "train_s": loop_s - eval_s,
           "total_s": time.perf_counter() - t_start}
    text_out = json.dumps(out, indent=2)
    print(text_out)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text_out + "\n")


if __name__ == "__main__":
    main()
