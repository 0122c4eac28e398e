#!/usr/bin/env python3
"""pretrain_val.py: how examples/ucr_finetune.yaml's recipe was chosen, without the test split.

Carves validation splits out of a UCR set's *training* series (scripts/fetch_ucr.sh), stratified
by class, and runs the pretrain-then-fine-tune pair (and, with --scratch, the same classifier
from scratch) on each: the fold's training series are the only ones pretraining and fine-tuning
see, its validation series stand in for the test split (data.npy.test_*), so the accuracy
summary.json reports is the validation accuracy. Prints each run's accuracy and loss and the
mean (min-max, population std) over folds x seeds; the test split is never read.

  --split halves   4 folds: two stratified halvings of the training series (numpy seeds 1000,
                   1001), each half validating the model trained on the other (GunPoint: 25/25).
                   The hard proxy: the recipe was chosen on it.
  --split 5fold    stratified 5-fold (numpy seed 123; GunPoint: 40/10), near the ceiling.

  /usr/bin/python3 bench/pretrain_val.py --seeds 0,1 --scratch
  /usr/bin/python3 bench/pretrain_val.py --ft "model.dropout=0 train.optimizer.weight_decay=0.01" --pre "train.masking.mask_ratio=0.25"

--pre / --ft are space-separated key=value overrides for the pretraining / fine-tuning configs
(the from-scratch arm takes --ft's too). --keep-pre reuses each fold's and seed's pretraining run
in --runs when it finished with the same --pre and binary (pre_args.txt beside it says which):
trials of fine-tuning settings alone then skip the pretraining they share. Runs go to --runs (default /dev/shm/seqtrain_pretrain_val:
on tmpfs the checkpoints' fsyncs cost nothing), two at a time with runtime.threads=1.
"""
import argparse
import concurrent.futures as cf
import json
import os
import shutil
import statistics
import subprocess

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_splits(ds_dir, kind, out):
    x = np.load(f"{ds_dir}/train_x.npy")
    y = np.load(f"{ds_dir}/train_y.npy")
    folds = []  # (train indices, val indices)
    if kind == "halves":
        for rep in range(2):
            rng = np.random.default_rng(1000 + rep)
            half = [[], []]
            for c in np.unique(y):
                idx = rng.permutation(np.where(y == c)[0])
                half[0] += list(idx[: len(idx) // 2])
                half[1] += list(idx[len(idx) // 2:])
            folds += [(half[0], half[1]), (half[1], half[0])]
    else:
        rng = np.random.default_rng(123)
        parts = [[] for _ in range(5)]
        for c in np.unique(y):
            for i, j in enumerate(rng.permutation(np.where(y == c)[0])):
                parts[i % 5].append(j)
        for k in range(5):
            folds.append((sorted(set(range(len(y))) - set(parts[k])), parts[k]))
    dirs = []
    for k, (t, v) in enumerate(folds):
        d = f"{out}/splits/{kind}{k}"
        os.makedirs(d, exist_ok=True)
        t, v = np.array(sorted(t)), np.array(sorted(v))
        np.save(f"{d}/train_x.npy", x[t])
        np.save(f"{d}/train_y.npy", y[t])
        np.save(f"{d}/val_x.npy", x[v])
        np.save(f"{d}/val_y.npy", y[v])
        dirs.append(d)
    return dirs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="GunPoint")
    ap.add_argument("--split", choices=["halves", "5fold"], default="halves")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--pre", default="")
    ap.add_argument("--ft", default="")
    ap.add_argument("--scratch", action="store_true", help="also the same classifier from scratch")
    ap.add_argument("--bin", default=f"{ROOT}/build/seqtrain")
    ap.add_argument("--runs", default="/dev/shm/seqtrain_pretrain_val")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep-pre", action="store_true", help="reuse finished pretraining runs of the same --pre")
    a = ap.parse_args()
    ds_dir = f"{ROOT}/data/ucr/{a.dataset}"
    if not os.path.exists(f"{ds_dir}/train_x.npy"):
        raise SystemExit(f"pretrain_val: {ds_dir}/train_x.npy missing: run bash scripts/fetch_ucr.sh")
    dirs = make_splits(ds_dir, a.split, a.runs)

    def sets(s):
        return sum((["--set", kv] for kv in s.split()), [])

    def train(*args):
        p = subprocess.run([a.bin, "train", *args, "--set", "runtime.threads=1", "--quiet"], cwd=ROOT,
                           capture_output=True, text=True)
        if p.returncode:
            raise SystemExit(f"pretrain_val: {' '.join(args)}\n{p.stderr[-2000:]}")

    def result(run):
        s = json.load(open(f"{run}/summary.json"))
        return s["test_accuracy"], s["test_loss"]

    def job(fold, seed):
        d = dirs[fold]
        data = [f"data.npy.train_x={d}/train_x.npy", f"data.npy.train_y={d}/train_y.npy",
                f"data.npy.test_x={d}/val_x.npy", f"data.npy.test_y={d}/val_y.npy"]
        tag = f"{a.runs}/{a.split}{fold}-seed{seed}"
        pre_args = f"{os.path.getmtime(a.bin)} data.npy.train_x={d}/train_x.npy seed={seed} {a.pre}"
        marker = f"{tag}-pre/pre_args.txt"
        keep = a.keep_pre and os.path.exists(f"{tag}-pre/summary.json") and os.path.exists(marker) \
            and open(marker).read() == pre_args
        for r in ("ft", "sc") if keep else ("pre", "ft", "sc"):
            shutil.rmtree(f"{tag}-{r}", ignore_errors=True)
        if not keep:
            train("examples/ucr_pretrain.yaml", *sets(f"data.npy.train_x={d}/train_x.npy seed={seed} {a.pre}"),
                  "--out", f"{tag}-pre")
            with open(marker, "w") as f:
                f.write(pre_args)
        train("examples/ucr_finetune.yaml", *sets(" ".join(data) + f" seed={seed} model.encoder_from={tag}-pre {a.ft}"),
              "--out", f"{tag}-ft")
        row = {"fold": fold, "seed": seed, "fine-tuned": result(f"{tag}-ft")}
        if a.scratch:
            train("examples/ucr_finetune.yaml",
                  *sets(" ".join(data) + f" seed={seed} model.encoder_from= train.freeze_encoder_epochs=0 "
                        f"train.encoder_lr_scale=1 {a.ft}"), "--out", f"{tag}-sc")
            row["from scratch"] = result(f"{tag}-sc")
        return row

    jobs = [(f, int(s)) for s in a.seeds.split(",") for f in range(len(dirs))]
    rows = []
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        for row in ex.map(lambda fs: job(*fs), jobs):
            print(json.dumps(row), flush=True)
            rows.append(row)
    for arm in ("fine-tuned", "from scratch"):
        acc = [r[arm][0] for r in rows if arm in r]
        loss = [r[arm][1] for r in rows if arm in r]
        if acc:
            print(f"{arm}: validation accuracy {statistics.mean(acc):.3f} ({min(acc):.3f}-{max(acc):.3f}, "
                  f"{statistics.pstdev(acc):.3f}), loss {statistics.mean(loss):.4f} over {len(acc)} runs "
                  f"({a.dataset}, {a.split})")


if __name__ == "__main__":
    main()
