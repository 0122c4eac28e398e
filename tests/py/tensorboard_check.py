#!/usr/bin/python3
"""TensorBoard's own reader on seqtrain's events files (ctest TensorBoardReader).

Why: tests/test_tensorboard.cpp reads the files with a reader written to the same notes as the
writer; this reads them with the code people use, TensorBoard's EventAccumulator (CRC checks,
file order, SessionLog purging and all), so a misreading of the format on both sides still fails.

It trains a small examples/forecast.yaml run with runtime.tensorboard on, resumes it with more
epochs, and asserts that the scalars EventAccumulator loads from the run directory are exactly
metrics.jsonl's (every tag's steps in order, values within float32 rounding), across the
resume.

TensorBoard is not a Debian package: it is installed from PyPI into a venv kept in
$SEQTRAIN_TB_VENV or ~/.cache/seqtrain/tensorboard-venv (made once, reused). When that venv
cannot be made (no network), the test is skipped: exit 77 with the reason.

Usage: tensorboard_check.py --binary BUILD/seqtrain --source REPO
       (inside the venv: tensorboard_check.py --read RUN_DIR, which does the comparison)
"""
import argparse
import fcntl
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
SHORT = ["--set", "data.synthetic.rows=3000", "--set", "data.lookback=24", "--set", "data.horizon=4",
         "--set", "model.hidden=16", "--set", "train.batch_size=64", "--set", "train.log_every=5",
         "--set", "train.schedule.warmup_steps=5", "--set", "train.early_stopping.patience=0",
         "--set", "runtime.threads=1", "--set", "runtime.tensorboard=true"]

# metrics.jsonl train-record field -> tag (docs/OBSERVABILITY.md's list, written out again here)
TRAIN_TAGS = {"loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm",
              "samples_per_s": "train/samples_per_s", "tokens_per_s": "train/tokens_per_s",
              "loss_scale": "train/loss_scale", "skipped_steps": "train/skipped_steps",
              "gpu_util": "gpu/utilization", "gpu_mem_mb": "gpu/memory_used_mib", "gpu_power_w": "gpu/power_w"}
NOT_SCALARS = {"split", "step", "epoch", "time_s"}


def venv_dir():
    return os.environ.get("SEQTRAIN_TB_VENV") or os.path.join(os.path.expanduser("~"), ".cache", "seqtrain",
                                                               "tensorboard-venv")


def tensorboard_python():
    """The venv's python with tensorboard importable, made on first use; None and a reason when
    it cannot be made."""
    venv = venv_dir()
    py = os.path.join(venv, "bin", "python")
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    with open(venv + ".lock", "w") as lock:  # one maker at a time (ctest -j)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(venv, ".complete")):
            return py, None
        shutil.rmtree(venv, ignore_errors=True)
        steps = [["/usr/bin/python3", "-m", "venv", venv],
                 [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "tensorboard"],
                 [py, "-c", "from tensorboard.backend.event_processing import event_accumulator"]]
        for argv in steps:
            try:
                r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
            except subprocess.TimeoutExpired:
                return None, f"`{' '.join(argv)}` timed out"
            if r.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
                return None, f"`{' '.join(argv)}` failed (exit {r.returncode}): {r.stdout.strip()[-800:]}"
        open(os.path.join(venv, ".complete"), "w").close()
        return py, None


def flatten(obj, prefix, out):
    for k, v in obj.items():
        if isinstance(v, bool) or v is None or isinstance(v, (str, list)):
            continue
        if isinstance(v, dict):
            flatten(v, prefix + k + "/", out)
        else:
            out[prefix + k] = float(v)


def expected(records):
    """{tag: [(step, value), ...]} as metrics.jsonl's records say."""
    out = {}
    for rec in records:
        split, values = rec["split"], {}
        if split == "train":
            for k, v in rec.items():
                if k in NOT_SCALARS:
                    continue
                if k not in TRAIN_TAGS:
                    raise AssertionError(f"train records gained {k!r}: give it a TensorBoard tag")
                values[TRAIN_TAGS[k]] = float(v)
        elif split == "data":
            values["train/data_wait_share"] = float(rec["data_wait_share"])
        else:
            flatten({k: v for k, v in rec.items() if k not in NOT_SCALARS | {"lr", "samples_per_s"}}, split + "/", values)
        for tag, v in values.items():
            out.setdefault(tag, []).append((rec["step"], v))
    return out


def read(run):
    """Inside the venv: EventAccumulator's scalars against metrics.jsonl."""
    from tensorboard.backend.event_processing import event_accumulator
    acc = event_accumulator.EventAccumulator(run, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    with open(os.path.join(run, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    want = expected(records)
    got = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    problems = []
    if set(got) != set(want):
        problems.append(f"tags: TensorBoard has {sorted(got)}, metrics.jsonl gives {sorted(want)}")
    for tag in sorted(set(got) & set(want)):
        g, w = got[tag], want[tag]
        if [s for s, _ in g] != [s for s, _ in w]:
            problems.append(f"{tag}: steps {[s for s, _ in g]} != metrics.jsonl's {[s for s, _ in w]}")
            continue
        for (step, a), (_, b) in zip(g, w):
            if not math.isclose(a, b, rel_tol=2 ** -23, abs_tol=1e-37):
                problems.append(f"{tag} at step {step}: {a!r} != {b!r}")
    train = [s for s, _ in got.get("train/loss", [])]
    if len(train) < 4 or train != sorted(set(train)):
        problems.append(f"train/loss steps {train}: want several, increasing, none twice")
    for p in problems:
        print("FAIL", p)
    print(f"{len(got)} tags, {sum(map(len, got.values()))} points, {len(records)} metrics.jsonl records")
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary")
    ap.add_argument("--source")
    ap.add_argument("--read")
    args = ap.parse_args()
    if args.read:
        return read(args.read)

    py, why = tensorboard_python()
    if py is None:
        print(f"SKIP: TensorBoard cannot be installed into {venv_dir()}: {why}")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="seqtrain_tb_") as tmp:
        run = os.path.join(tmp, "run")
        config = os.path.join(args.source, "examples", "forecast.yaml")
        for argv in ([args.binary, "train", config, *SHORT, "--set", "train.epochs=2", "--quiet", "--out", run],
                     [args.binary, "train", "--resume", run, "--set", "train.epochs=4", "--quiet"]):
            r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
            if r.returncode != 0:
                print(f"FAIL `{' '.join(argv)}` exited {r.returncode}:\n{r.stdout}")
                return 1
        files = sorted(f for f in os.listdir(run) if "tfevents" in f)
        if len(files) != 2:
            print(f"FAIL want two events files (the run's and its resume's), found {files}")
            return 1
        return subprocess.run([py, os.path.abspath(__file__), "--read", run]).returncode


if __name__ == "__main__":
    sys.exit(main())
