#!/usr/bin/env python3
"""Data-parallel training under mpirun against the one-process run (docs/DISTRIBUTED.md).

Each --case runs the seqtrain binary, once alone and under `mpirun -np N` (one thread a rank,
--oversubscribe, --allow-run-as-root), on tiny synthetic jobs with dropout on, and compares
what the runs wrote: every step's logged loss (train.log_every 1) and the final weights
(checkpoints/last/model.safetensors). Cases:
  equal_lstm_2, equal_lstm_4, equal_gpt_2  N ranks follow the one-process run (1e-5 relative)
  deterministic        two 2-rank runs with runtime.deterministic are bit-identical, and so is
                       one without the overlap's buckets (SEQTRAIN_MPI_BUCKET_KB=0)
  sigterm              SIGTERM to one rank: every rank stops at the same step with a resumable
                       `last`; the resumed run (2 ranks) ends as the uninterrupted one
  kill_rank            SIGKILL of one rank: every rank exits non-zero; --resume with 1 rank ends
                       as the uninterrupted run
  zero_lstm, zero_gpt  train.zero: 1 (ZeRO stage 1) on 2 and on 4 ranks follows the one-process run
                       (1e-5 relative, every step's loss and the final weights); its bucketed
                       reduce-scatter equals the unbucketed one bit for bit
  zero_resume          SIGTERM to one rank of a 4-rank train.zero run; --resume on 1 rank with
                       train.zero: 0 ends as the uninterrupted one-process run (whole checkpoints)
  resume_unshared      a 2-rank run stopped by SIGTERM resumes on 2 ranks where rank 1's working
                       directory has no run directory (another machine without a shared
                       filesystem): it gets the config and checkpoint from rank 0 by broadcast
                       and ends as the uninterrupted run
  ema_resume           train.ema_decay on 2 ranks follows the one-process run (the averaged weights
                       and the val/test losses they score); stopped by SIGTERM to rank 1 and resumed
                       on 2 ranks, where only rank 0 reads the average and the trained weights beside
                       it, it still ends as the uninterrupted one-process run
  zero_sgd             train.zero with SGD: one error naming the key and the fix, nothing written
  bad_input            more ranks than a global batch's samples; configs that differ across
                       ranks; a rank that cannot read its data: one error from rank 0, non-zero
                       exit, no checkpoint written
Exit 77 (skipped) where mpirun is missing.
"""
import argparse
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

# 4 KB gradient buckets (the default is 256 KB): these tiny models' gradients then travel in
# several buckets that start under the backward, so every case runs the overlap's bucketed sum.
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,vader", OMPI_MCA_rmaps_base_oversubscribe="1", SEQTRAIN_MPI_BUCKET_KB="4")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader"]
TOL = 1e-5


def lstm_config(src, steps=50, extra=()):
    return [os.path.join(src, "examples/forecast.yaml"),
            "--set", "data.synthetic.rows=1200", "--set", "data.lookback=16", "--set", "data.horizon=2",
            "--set", "model.hidden=16", "--set", "model.layers=2", "--set", "model.dropout=0.2",
            "--set", "train.batch_size=30", "--set", "train.log_every=1", "--set", f"train.max_steps={steps}",
            "--set", "train.epochs=100", "--set", "train.early_stopping.patience=0",
            "--set", "train.schedule.name=constant", "--set", "runtime.threads=1", *extra]


# The GPT cases' text, written here once per machine rather than read from a doc: these runs are
# chaotic enough (below) that any edit of the text moves both trajectories and, with them, how
# far two summation orders drift apart in 50 steps; a fixed text keeps that a property of the code.
def gpt_corpus():
    path = os.path.join(tempfile.gettempdir(), "seqtrain_mpi_gpt_corpus_v1.txt")
    if not os.path.exists(path):
        rng = random.Random(1)
        words = ("the model reads each window of steps and writes one forecast per target while the loader "
                 "fills the next batch a rank sums its gradients in buckets under the backward and every "
                 "rank holds the same bits after the step").split()
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 14))).capitalize() + "."
                 for _ in range(1500)]
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)  # atomic: parallel cases may write it at once, with the same bytes
    return path


# No biases (nanoGPT's bias=False): the attention's key bias has a zero gradient in exact
# arithmetic, and AdamW turns the rounding noise there into lr-sized steps of either sign, which
# no two summation orders reproduce. lr 5e-4: at nanoGPT's 1e-3 this tiny GPT's training is chaotic
# enough that float-rounding differences grow past 1e-5 within 50 steps in any two orders.
def gpt_config(src, steps=50, extra=()):
    return [os.path.join(src, "examples/char_lm.yaml"), "--set", f"data.path={gpt_corpus()}",
            "--set", "model.type=gpt", "--set", "model.layers=2", "--set", "model.heads=2", "--set", "model.hidden=32",
            "--set", "model.dropout=0.1", "--set", "model.bias=false", "--set", "data.block_size=32", "--set", "data.stride=16",
            "--set", "train.batch_size=10", "--set", "train.log_every=1", "--set", f"train.max_steps={steps}",
            "--set", "train.eval_every=25u", "--set", "train.eval_iters=4", "--set", "train.optimizer.lr=5e-4",
            "--set", "train.early_stopping.patience=0", "--set", "runtime.threads=1", *extra]


def run(cmd, timeout=120, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env or MPI_ENV)


def train(binary, cfg, out, ranks=0, resume=False, check=True, env_extra=None):
    args = ["train", "--resume", out] if resume else ["train", *cfg, "--out", out]
    cmd = ([*MPIRUN, "-np", str(ranks), binary] if ranks else [binary]) + args + ["--quiet"]
    env = MPI_ENV if ranks else {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    env = dict(env, **(env_extra or {}))
    p = run(cmd, env=env)
    if check and p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def train_losses(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return [(r["step"], r["loss"]) for r in recs if r.get("split") == "train"]


def eval_losses(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    return [(r["split"], r["step"], r["loss"]) for r in recs if r.get("split") in ("val", "test")]


def weights(out, tag="last"):
    path = os.path.join(out, "checkpoints", tag, "model.safetensors")
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out_t = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        out_t[name] = np.frombuffer(data[base + a:base + b], dtype=np.float32)
    return out_t


def close(a, b, what):
    if isinstance(a, list):
        if len(a) != len(b):
            sys.exit(f"FAIL: {what}: {len(a)} records against {len(b)}")
        for x, y in zip(a, b):
            if x[:-1] != y[:-1] or abs(x[-1] - y[-1]) > TOL * max(abs(y[-1]), 1e-12):
                sys.exit(f"FAIL: {what}: {x} against {y} (tolerance {TOL} relative)")
        return
    if a.keys() != b.keys():
        sys.exit(f"FAIL: {what}: tensors {sorted(a)} against {sorted(b)}")
    for k in a:
        scale = max(float(np.abs(b[k]).max()), 1e-12)
        err = float(np.abs(a[k] - b[k]).max()) / scale
        if err > TOL:
            sys.exit(f"FAIL: {what}: tensor {k} differs by {err:.3g} of its largest value (tolerance {TOL})")


def compare(one, many, what):
    close(train_losses(many), train_losses(one), what + ": train losses")
    close(eval_losses(many), eval_losses(one), what + ": val/test losses")
    close(weights(many), weights(one), what + ": final weights")


def equal_case(binary, src, tmp, model, ranks):
    cfg = (lstm_config if model == "lstm" else gpt_config)(src)
    train(binary, cfg, os.path.join(tmp, "one"))
    train(binary, cfg, os.path.join(tmp, "many"), ranks=ranks)
    if len(train_losses(os.path.join(tmp, "one"))) != 50:
        sys.exit("FAIL: the one-process run did not log 50 steps")
    compare(os.path.join(tmp, "one"), os.path.join(tmp, "many"), f"{model}, {ranks} ranks")
    print(f"ok: {model}: {ranks} ranks follow one process over 50 steps (dropout on)")


def zero_case(binary, src, tmp, model):
    make = lstm_config if model == "lstm" else gpt_config
    one = os.path.join(tmp, "one")
    train(binary, make(src), one)
    if len(train_losses(one)) != 50:
        sys.exit("FAIL: the one-process run did not log 50 steps")
    for ranks in (2, 4):
        many = os.path.join(tmp, f"zero{ranks}")
        p = train(binary, make(src, extra=["--set", "train.zero=1"]), many, ranks=ranks)
        compare(one, many, f"{model}, train.zero 1, {ranks} ranks")
        print(f"ok: {model}: train.zero on {ranks} ranks follows one process over 50 steps (dropout on)")
    # The reduce-scatter in 4 KB buckets under the backward (buckets straddle the 4 ranks' slices)
    # and in one call after it: the same bits (deterministic: no timed kernel choice between them).
    cfg = make(src, extra=["--set", "train.zero=1", "--set", "runtime.deterministic=true"])
    bucketed, flat = os.path.join(tmp, "zero4det"), os.path.join(tmp, "zero4flat")
    train(binary, cfg, bucketed, ranks=4)
    train(binary, cfg, flat, ranks=4, env_extra={"SEQTRAIN_MPI_BUCKET_KB": "0"})
    wb, wf = weights(bucketed), weights(flat)
    if train_losses(flat) != train_losses(bucketed) or any(wb[k].tobytes() != wf[k].tobytes() for k in wb):
        sys.exit(f"FAIL: {model}: train.zero's bucketed reduce-scatter and the single one differ")
    print(f"ok: {model}: train.zero's bucketed (4 KB) and unbucketed reduce-scatters are bit-identical")


def zero_resume_case(binary, src, tmp):
    steps = 400
    cfg = lstm_config(src, steps=steps)
    full, cut = os.path.join(tmp, "full"), os.path.join(tmp, "cut")
    train(binary, cfg, full)
    rc, err = start_and_hit(binary, cfg + ["--set", "train.zero=1"], cut, 4, signal.SIGTERM, after_steps=10)
    if rc == 0:
        sys.exit(f"FAIL: SIGTERM to one rank of 4: mpirun exited 0\n{err}")
    with open(os.path.join(cut, "checkpoints", "last", "state.json")) as f:
        stopped = json.load(f)["updates"]
    if not 10 <= stopped < steps:
        sys.exit(f"FAIL: the stop's checkpoint is at step {stopped}")
    # The checkpoint holds every element of AdamW's moments, gathered from the 4 shards.
    w = weights(cut)
    n = sum(a.size for a in w.values())
    with open(os.path.join(cut, "checkpoints", "last", "optimizer.safetensors"), "rb") as f:
        data = f.read()
    header = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
    for moment in ("exp_avg.", "exp_avg_sq."):
        held = sum((v["data_offsets"][1] - v["data_offsets"][0]) // 4 for k, v in header.items()
                   if k.startswith(moment))
        if held != n:
            sys.exit(f"FAIL: the zero checkpoint's {moment}* hold {held} values, the model {n} parameters")
    p = run([binary, "train", "--resume", cut, "--set", "train.zero=0", "--quiet"],
            env={k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))})
    if p.returncode != 0:
        sys.exit(f"FAIL: --resume on 1 rank exited {p.returncode}\n{p.stderr}")
    compare(full, cut, f"train.zero on 4 ranks stopped at step {stopped}, resumed alone without it")
    print(f"ok: a 4-rank train.zero checkpoint (step {stopped}) resumed on 1 rank equals the uninterrupted run")


def resume_unshared_case(binary, src, tmp):
    steps = 400
    cfg = lstm_config(src, steps=steps)
    full = os.path.join(tmp, "full")
    here, there = os.path.join(tmp, "here"), os.path.join(tmp, "there")
    os.makedirs(here)
    os.makedirs(there)
    cut = os.path.join(here, "run")
    train(binary, cfg, full)
    rc, err = start_and_hit(binary, cfg, cut, 2, signal.SIGTERM, after_steps=10)
    if rc == 0:
        sys.exit(f"FAIL: SIGTERM to one rank: mpirun exited 0\n{err}")
    # "run" is relative: rank 0 finds it in `here`; rank 1, started in `there`, sees nothing.
    p = run([*MPIRUN, "-np", "1", "-wdir", here, binary, "train", "--resume", "run", "--quiet", ":",
             "-np", "1", "-wdir", there, binary, "train", "--resume", "run", "--quiet"])
    if p.returncode != 0:
        sys.exit(f"FAIL: the resume with rank 1 away from the run directory exited {p.returncode}\n{p.stderr}")
    if os.listdir(there):
        sys.exit(f"FAIL: rank 1 wrote {os.listdir(there)} into its working directory")
    compare(full, cut, "resumed on 2 ranks, rank 1 without the run directory")
    print("ok: rank 1 resumed from rank 0's broadcast without seeing the run directory; equals the uninterrupted run")


def ema_resume_case(binary, src, tmp):
    steps = 400
    cfg = lstm_config(src, steps=steps, extra=["--set", "train.ema_decay=0.9"])
    full, many, cut = os.path.join(tmp, "full"), os.path.join(tmp, "many"), os.path.join(tmp, "cut")
    train(binary, cfg, full)
    train(binary, cfg, many, ranks=2)
    compare(full, many, "train.ema_decay on 2 ranks")
    rc, err = start_and_hit(binary, cfg, cut, 2, signal.SIGTERM, after_steps=10)
    if rc == 0:
        sys.exit(f"FAIL: SIGTERM to one rank: mpirun exited 0\n{err}")
    with open(os.path.join(cut, "checkpoints", "last", "state.json")) as f:
        state = json.load(f)
    if not 10 <= state["updates"] < steps or not state.get("raw_weights"):
        sys.exit(f"FAIL: the stop's checkpoint: step {state['updates']}, raw_weights {state.get('raw_weights')}")
    train(binary, None, cut, ranks=2, resume=True)
    compare(full, cut, f"train.ema_decay, stopped at step {state['updates']}, resumed on 2 ranks")
    print(f"ok: train.ema_decay on 2 ranks follows one process; stopped at step {state['updates']} and resumed "
          "on 2 ranks it ends as the uninterrupted run")


def zero_sgd_case(binary, src, tmp):
    for ranks in (0, 2):
        out = os.path.join(tmp, f"sgd{ranks}")
        cfg = lstm_config(src, extra=["--set", "train.zero=1", "--set", "train.optimizer.name=sgd"])
        cmd = ([*MPIRUN, "-np", str(ranks), binary] if ranks else [binary]) + ["train", *cfg, "--out", out]
        p = run(cmd, env=MPI_ENV if ranks else {k: v for k, v in os.environ.items()
                                                 if not k.startswith(("OMPI_", "PMIX_"))})
        errors = [line for line in p.stderr.splitlines() if line.startswith("seqtrain: error:")]
        if p.returncode == 0 or len(errors) != 1 or not all(
                w in errors[0] for w in ("train.zero", "sgd", "train.zero: 0", "adamw")):
            sys.exit(f"FAIL: train.zero with sgd on {ranks or 1} process(es): exit {p.returncode}\n{p.stderr}")
        if os.path.exists(out):
            sys.exit(f"FAIL: {out} was created by a run refused at load")
        print(f"ok: {errors[0][:160]}")


def deterministic_case(binary, src, tmp):
    cfg = lstm_config(src, extra=["--set", "runtime.deterministic=true"])
    a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
    train(binary, cfg, a, ranks=2)
    train(binary, cfg, b, ranks=2)
    if train_losses(a) != train_losses(b):
        sys.exit("FAIL: two deterministic 2-rank runs logged different losses")
    wa, wb = weights(a), weights(b)
    for k in wa:
        if wa[k].tobytes() != wb[k].tobytes():
            sys.exit(f"FAIL: two deterministic 2-rank runs differ in {k}")
    print("ok: two deterministic 2-rank runs are bit-identical")
    # The overlap's buckets only cut the sum: one all-reduce after the backward gives the same bits.
    flat = os.path.join(tmp, "flat")
    train(binary, cfg, flat, ranks=2, env_extra={"SEQTRAIN_MPI_BUCKET_KB": "0"})
    wf = weights(flat)
    if train_losses(flat) != train_losses(a) or any(wa[k].tobytes() != wf[k].tobytes() for k in wa):
        sys.exit("FAIL: the bucketed gradient sum and the single all-reduce differ")
    print("ok: bucketed (4 KB) and unbucketed gradient sums are bit-identical")


def rank_pids(mpirun_pid):
    """The ranks mpirun started on this machine, in rank order (their OMPI_COMM_WORLD_RANK)."""
    ranks = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if ppid == mpirun_pid and b"OMPI_COMM_WORLD_RANK" in env:
            ranks[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(pid)
    return [ranks[r] for r in sorted(ranks)]


def start_and_hit(binary, cfg, out, ranks, sig, after_steps):
    """Starts an mpirun training, waits until it has logged `after_steps` steps, sends `sig` to
    rank 1 only and returns mpirun's exit code (bounded wait)."""
    cmd = [*MPIRUN, "-np", str(ranks), binary, "train", *cfg, "--out", out, "--quiet"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=MPI_ENV)
    metrics = os.path.join(out, "metrics.jsonl")
    deadline = time.time() + 60
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(metrics) and len(train_losses(out)) >= after_steps:
            break
        time.sleep(0.05)
    if p.poll() is not None:
        sys.exit(f"FAIL: the run ended before it could be signalled:\n{p.stderr.read()}")
    pids = rank_pids(p.pid)
    if len(pids) != ranks:
        p.kill()
        sys.exit(f"FAIL: found {len(pids)} rank processes of mpirun, expected {ranks}")
    os.kill(pids[1], sig)
    try:
        _, err = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        sys.exit("FAIL: the job hung after one rank was signalled")
    return p.returncode, err


def sigterm_case(binary, src, tmp):
    steps = 400
    cfg = lstm_config(src, steps=steps)
    full, cut = os.path.join(tmp, "full"), os.path.join(tmp, "cut")
    train(binary, cfg, full, ranks=2)
    rc, err = start_and_hit(binary, cfg, cut, 2, signal.SIGTERM, after_steps=10)
    if rc == 0:
        sys.exit(f"FAIL: SIGTERM to one rank: mpirun exited 0\n{err}")
    with open(os.path.join(cut, "checkpoints", "last", "state.json")) as f:
        stopped = json.load(f)["updates"]
    if not 10 <= stopped < steps:
        sys.exit(f"FAIL: the stop's checkpoint is at step {stopped}")
    with open(os.path.join(cut, "summary.json")) as f:
        summary = json.load(f)
    if summary["stopped_by"] != "signal" or summary["steps"] != stopped:
        sys.exit(f"FAIL: summary after SIGTERM: {summary}")
    train(binary, None, cut, ranks=2, resume=True)
    compare(full, cut, f"stopped at step {stopped} by SIGTERM to rank 1, resumed on 2 ranks")
    print(f"ok: SIGTERM to rank 1 stopped both ranks at step {stopped}; the resumed run equals the uninterrupted one")


def kill_rank_case(binary, src, tmp):
    steps = 400
    cfg = lstm_config(src, steps=steps, extra=["--set", "train.checkpoint_every=20u"])
    full, cut = os.path.join(tmp, "full"), os.path.join(tmp, "cut")
    train(binary, cfg, full)
    rc, err = start_and_hit(binary, cfg, cut, 2, signal.SIGKILL, after_steps=45)
    if rc == 0:
        sys.exit("FAIL: SIGKILL of one rank: mpirun exited 0")
    # The last whole checkpoint survives; the resume on another rank count (1) finishes as the
    # uninterrupted run.
    train(binary, None, cut, ranks=0, resume=True)
    compare(full, cut, "killed rank 1 of 2, resumed alone")
    print("ok: SIGKILL of rank 1 ended every rank non-zero; --resume on 1 rank equals the uninterrupted run")


def bad_input_case(binary, src, tmp):
    def expect_error(cmd, words, out):
        p = run(cmd)
        if p.returncode == 0:
            sys.exit(f"FAIL: {' '.join(cmd)} exited 0")
        errors = [line for line in p.stderr.splitlines() if line.startswith("seqtrain: error:")]
        if len(errors) != 1 or not all(w in errors[0] for w in words):
            sys.exit(f"FAIL: expected one error naming {words}, got:\n{p.stderr}")
        if os.path.exists(os.path.join(out, "checkpoints")):
            sys.exit(f"FAIL: {out} holds checkpoints after a failed start")
        print(f"ok: {errors[0][:160]}")

    out = os.path.join(tmp, "few")
    expect_error([*MPIRUN, "-np", "4", binary, "train", *lstm_config(src, extra=["--set", "train.batch_size=3"]),
                  "--out", out], ["train.batch_size", "4 ranks"], out)
    out = os.path.join(tmp, "differ")
    cfg = lstm_config(src)
    expect_error([*MPIRUN, "-np", "1", binary, "train", *cfg, "--out", out, ":",
                  "-np", "1", binary, "train", *cfg, "--set", "train.optimizer.lr=0.1", "--out", out],
                 ["rank 1", "config differs"], out)
    out = os.path.join(tmp, "nodata")
    csv = os.path.join(tmp, "series.csv")
    subprocess.run([binary, "data", "export", os.path.join(src, "examples/forecast.yaml"), "--set",
                    "data.synthetic.rows=1200", "--out", csv], check=True, capture_output=True)
    base = lstm_config(src, extra=["--set", "data.source=csv"])
    expect_error([*MPIRUN, "-np", "1", binary, "train", *base, "--set", f"data.path={csv}", "--out", out, ":",
                  "-np", "1", binary, "train", *base, "--set", f"data.path={csv}.missing", "--out", out],
                 ["rank 1", ".missing"], out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--case", required=True)
    a = ap.parse_args()
    if not shutil.which("mpirun"):
        print("skipped: no mpirun (apt-get install openmpi-bin libopenmpi-dev)")
        return 77
    binary = os.path.abspath(a.binary)
    with tempfile.TemporaryDirectory() as tmp:
        if a.case.startswith("equal_"):
            _, model, ranks = a.case.split("_")
            equal_case(binary, a.source, tmp, model, int(ranks))
        elif a.case in ("zero_lstm", "zero_gpt"):
            zero_case(binary, a.source, tmp, a.case.split("_")[1])
        elif a.case == "zero_resume":
            zero_resume_case(binary, a.source, tmp)
        elif a.case == "resume_unshared":
            resume_unshared_case(binary, a.source, tmp)
        elif a.case == "ema_resume":
            ema_resume_case(binary, a.source, tmp)
        elif a.case == "zero_sgd":
            zero_sgd_case(binary, a.source, tmp)
        elif a.case == "deterministic":
            deterministic_case(binary, a.source, tmp)
        elif a.case == "sigterm":
            sigterm_case(binary, a.source, tmp)
        elif a.case == "kill_rank":
            kill_rank_case(binary, a.source, tmp)
        elif a.case == "bad_input":
            bad_input_case(binary, a.source, tmp)
        else:
            sys.exit(f"unknown case {a.case}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
