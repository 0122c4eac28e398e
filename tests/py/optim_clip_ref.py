"""Reference for seqtrain's clip_grad_norm: torch.nn.utils.clip_grad_norm_ (L2).

Reads DIR/grads.npy (flat, n) and splits it into parameters of the sizes given by --sizes
(they must sum to n), as a model's gradient buffer holds several tensors back to back. Writes
DIR/clipped.npy (the gradients afterwards, flat) and DIR/norm.npy (the returned total norm).
"""
import argparse
import os

import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--max_norm", type=float, required=True)
    ap.add_argument("--sizes", required=True, help="comma-separated parameter sizes")
    a = ap.parse_args()

    g = np.load(os.path.join(a.dir, "grads.npy")).astype(np.float32)
    sizes = [int(s) for s in a.sizes.split(",")]
    assert sum(sizes) == g.size, "sizes do not cover the gradient buffer"
    params, start = [], 0
    for s in sizes:
        p = torch.nn.Parameter(torch.zeros(s))
        p.grad = torch.from_numpy(g[start:start + s].copy())
        params.append(p)
        start += s
    norm = torch.nn.utils.clip_grad_norm_(params, a.max_norm)
    clipped = np.concatenate([p.grad.numpy() for p in params])
    np.save(os.path.join(a.dir, "clipped.npy"), clipped)
    np.save(os.path.join(a.dir, "norm.npy"), np.array([float(norm)], dtype=np.float64))


if __name__ == "__main__":
    main()
