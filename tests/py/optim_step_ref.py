"""Reference optimizer trajectories from torch.optim for tests/test_optim.cpp.

Reads DIR/params0.npy (n,), DIR/grads.npy (steps, n) and DIR/lrs.npy (steps,), runs
torch.optim.AdamW or torch.optim.SGD for `steps` steps (setting the group's lr before each,
as a scheduler would), and writes DIR/params_torch.npy (steps, n: the parameters after every
step) and DIR/state_<name>.npy for every per-parameter state tensor after the last step.

With --layout FILE (JSON [[name, offset, shape], ...] covering the flat vector), the vector is
cut into one Parameter per tensor, grouped as nanoGPT does: weight decay for tensors of 2+
dimensions that are not embeddings (name starting with "embed"), a weight_decay 0 group for
the rest. Trajectories and state are written back flat, in the layout's order.

With --groups FILE (JSON [{offset, n, lr_scale, weight_decay (null: the optimizer's),
frozen_from, frozen_to}, ...] covering the flat vector), each entry is one Parameter in a param
group of its own: lr = the step's lr * lr_scale, its weight_decay when given, and during steps
[frozen_from, frozen_to) requires_grad False with no gradient, so torch skips it and its
per-parameter `step` does not advance.

With --ema DECAY (--groups only), torch.optim.swa_utils.AveragedModel over those parameters with
the EMA avg_fn decay * ema + (1 - decay) * p is updated after every step (its first update
copies the weights), and DIR/ema_torch.npy (steps, n) holds the average after every step.
"""
import argparse
import json
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
    ap.add_argument("--layout", default=None)
    ap.add_argument("--groups", default=None)
    ap.add_argument("--ema", type=float, default=None)
    a = ap.parse_args()
    if a.groups is not None:
        return run_groups(a)

    p0 = np.load(os.path.join(a.dir, "params0.npy"))
    grads = np.load(os.path.join(a.dir, "grads.npy"))
    lrs = np.load(os.path.join(a.dir, "lrs.npy"))
    flat = torch.from_numpy(p0.astype(np.float32))
    if a.layout is None:
        layout = [["all", 0, [p0.shape[0]]]]
    else:
        with open(a.layout) as f:
            layout = json.load(f)
    params, decay, no_decay = [], [], []
    for name, offset, shape in layout:
        n = int(np.prod(shape))
        p = torch.nn.Parameter(flat[offset:offset + n].clone().reshape(shape))
        params.append((offset, n, p))
        (decay if a.layout is None or (len(shape) >= 2 and not name.startswith("embed")) else no_decay).append(p)

    kw = {} if a.weight_decay is None else {"weight_decay": a.weight_decay}
    groups = [{"params": decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    if a.opt == "adamw":
        opt = torch.optim.AdamW(groups, lr=float(lrs[0]), betas=(a.beta1, a.beta2), eps=a.eps, foreach=False, **kw)
    else:
        opt = torch.optim.SGD(groups, lr=float(lrs[0]), momentum=a.momentum, dampening=a.dampening,
                              nesterov=bool(a.nesterov), foreach=False, **kw)

    traj = np.zeros_like(grads, dtype=np.float32)
    for k in range(grads.shape[0]):
        for g in opt.param_groups:
            g["lr"] = float(lrs[k])
        for offset, n, p in params:
            p.grad = torch.from_numpy(grads[k, offset:offset + n].astype(np.float32).copy()).reshape(p.shape)
        opt.step()
        for offset, n, p in params:
            traj[k, offset:offset + n] = p.detach().numpy().reshape(-1)
    np.save(os.path.join(a.dir, "params_torch.npy"), traj)
    first = params[0][2]
    names = [k for k, v in opt.state[first].items() if k != "step" and torch.is_tensor(v) and v.numel() == first.numel()]
    for name in names:
        out = np.zeros(p0.shape[0], dtype=np.float32)
        for offset, n, p in params:
            out[offset:offset + n] = opt.state[p][name].detach().numpy().reshape(-1)
        np.save(os.path.join(a.dir, "state_%s.npy" % name), out)


def run_groups(a):
    p0 = np.load(os.path.join(a.dir, "params0.npy"))
    grads = np.load(os.path.join(a.dir, "grads.npy"))
    lrs = np.load(os.path.join(a.dir, "lrs.npy"))
    with open(a.groups) as f:
        spec = json.load(f)
    flat = torch.from_numpy(p0.astype(np.float32))
    params, groups = [], []
    for g in spec:
        p = torch.nn.Parameter(flat[g["offset"]:g["offset"] + g["n"]].clone())
        params.append((g, p))
        group = {"params": [p], "lr": float(lrs[0]) * g["lr_scale"]}
        if g.get("weight_decay") is not None:
            group["weight_decay"] = g["weight_decay"]
        groups.append(group)
    kw = {} if a.weight_decay is None else {"weight_decay": a.weight_decay}
    if a.opt == "adamw":
        opt = torch.optim.AdamW(groups, lr=float(lrs[0]), betas=(a.beta1, a.beta2), eps=a.eps, foreach=False, **kw)
    else:
        opt = torch.optim.SGD(groups, lr=float(lrs[0]), momentum=a.momentum, dampening=a.dampening,
                              nesterov=bool(a.nesterov), foreach=False, **kw)
    traj = np.zeros_like(grads, dtype=np.float32)
    ema_traj = np.zeros_like(grads, dtype=np.float32)
    averaged = None
    if a.ema is not None:
        from torch.optim.swa_utils import AveragedModel
        decay = a.ema
        averaged = AveragedModel(torch.nn.ParameterList([p for _, p in params]),
                                 avg_fn=lambda e, p, n: decay * e + (1 - decay) * p)
    for k in range(grads.shape[0]):
        for (g, p), group in zip(params, opt.param_groups):
            group["lr"] = float(lrs[k]) * g["lr_scale"]
            frozen = g.get("frozen_from", 0) <= k < g.get("frozen_to", 0)
            p.requires_grad_(not frozen)
            o = g["offset"]
            p.grad = None if frozen else torch.from_numpy(grads[k, o:o + g["n"]].astype(np.float32).copy())
        opt.step()
        for g, p in params:
            traj[k, g["offset"]:g["offset"] + g["n"]] = p.detach().numpy()
        if averaged is not None:
            averaged.update_parameters(torch.nn.ParameterList([p for _, p in params]))
            for (g, _), e in zip(params, averaged.module.parameters()):
                ema_traj[k, g["offset"]:g["offset"] + g["n"]] = e.detach().numpy()
    np.save(os.path.join(a.dir, "params_torch.npy"), traj)
    if averaged is not None:
        np.save(os.path.join(a.dir, "ema_torch.npy"), ema_traj)
    steps = np.zeros(len(params), dtype=np.float64)
    for i, (g, p) in enumerate(params):
        st = opt.state[p]
        steps[i] = float(st["step"]) if "step" in st else 0.0
        for name, v in st.items():
            if name == "step" or not torch.is_tensor(v) or v.numel() != p.numel():
                continue
            path = os.path.join(a.dir, "state_%s.npy" % name)
            out = np.load(path) if os.path.exists(path) else np.zeros(p0.shape[0], dtype=np.float32)
            out[g["offset"]:g["offset"] + g["n"]] = v.detach().numpy()
            np.save(path, out)
    np.save(os.path.join(a.dir, "steps.npy"), steps)


if __name__ == "__main__":
    main()
