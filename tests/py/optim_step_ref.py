"""Reference optimizer trajectories from torch.optim for tests/test_optim.cpp.

Reads DIR/params0.npy (n,), DIR/grads.npy (steps, n) and DIR/lrs.npy (steps,), runs
torch.optim.AdamW or torch.optim.SGD for `steps` steps (setting the group's lr before each,
as a scheduler would), and writes DIR/params_torch.npy (steps, n: the parameters after every
step) and DIR/state_<name>.npy for every per-parameter state tensor after the last step.
"""
import argparse
import os

import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--opt", choices=["adamw", "sgd"], required=True)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight_decay", type=float, default=None)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--dampening", type=float, default=0.0)
    ap.add_argument("--nesterov", type=int, default=0)
    a = ap.parse_args()

    p0 = np.load(os.path.join(a.dir, "params0.npy"))
    grads = np.load(os.path.join(a.dir, "grads.npy"))
    lrs = np.load(os.path.join(a.dir, "lrs.npy"))
    param = torch.nn.Parameter(torch.from_numpy(p0.astype(np.float32)))

    if a.opt == "adamw":
        kw = {} if a.weight_decay is None else {"weight_decay": a.weight_decay}
        opt = torch.optim.AdamW([param], lr=float(lrs[0]), betas=(a.beta1, a.beta2), eps=a.eps,
                                foreach=False, **kw)
    else:
        kw = {} if a.weight_decay is None else {"weight_decay": a.weight_decay}
        opt = torch.optim.SGD([param], lr=float(lrs[0]), momentum=a.momentum, dampening=a.dampening,
                              nesterov=bool(a.nesterov), foreach=False, **kw)

    traj = np.zeros_like(grads, dtype=np.float32)
    for k in range(grads.shape[0]):
        opt.param_groups[0]["lr"] = float(lrs[k])
        param.grad = torch.from_numpy(grads[k].astype(np.float32).copy())
        opt.step()
        traj[k] = param.detach().numpy()
    np.save(os.path.join(a.dir, "params_torch.npy"), traj)
    for name, value in opt.state[param].items():
        if torch.is_tensor(value) and value.numel() == param.numel():
            np.save(os.path.join(a.dir, "state_%s.npy" % name), value.detach().numpy().astype(np.float32))


if __name__ == "__main__":
    main()
