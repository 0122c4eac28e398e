"""Reference learning rates from torch.optim.lr_scheduler for tests/test_optim_schedule.cpp.

  step     StepLR(step_size, gamma) stepped once per optimizer step; writes the lr in force at
           each of --steps optimizer steps.
  cosine   LambdaLR with seqtrain's warmup + cosine formula written independently here.
  plateau  ReduceLROnPlateau fed DIR/metrics.npy (float64) one value per call; writes the lr
           after each call.
Output: DIR/lrs.npy (float64).
"""
import argparse
import math
import os

import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--kind", choices=["step", "cosine", "plateau"], required=True)
    ap.add_argument("--base_lr", type=float, required=True)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--step_size", type=int, default=1)
    ap.add_argument("--gamma", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--total", type=int, default=1)
    ap.add_argument("--min_lr", type=float, default=0.0)
    ap.add_argument("--plateau_args", default="", help="extra ReduceLROnPlateau kwargs, k=v,k=v")
    a = ap.parse_args()

    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=a.base_lr)
    lrs = []
    if a.kind in ("step", "cosine"):
        if a.kind == "step":
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=a.step_size, gamma=a.gamma)
        else:
            def factor(step):
                if step < a.warmup:
                    return (step + 1) / a.warmup
                progress = min(1.0, (step - a.warmup) / max(1, a.total - a.warmup))
                lr = a.min_lr + (a.base_lr - a.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))
                return lr / a.base_lr
            sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        for _ in range(a.steps):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
    else:
        kw = {}
        for item in filter(None, a.plateau_args.split(",")):
            k, v = item.split("=")
            kw[k] = v if k in ("mode", "threshold_mode") else (int(v) if k in ("patience", "cooldown") else float(v))
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
        for m in np.load(os.path.join(a.dir, "metrics.npy")):
            sched.step(float(m))
            lrs.append(opt.param_groups[0]["lr"])
    np.save(os.path.join(a.dir, "lrs.npy"), np.array(lrs, dtype=np.float64))


if __name__ == "__main__":
    main()
