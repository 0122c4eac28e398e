#!/usr/bin/env python3
"""The tracer's cost on the GPT example's step, paired on/off (and against a base binary).
Run by bench/trace.sh; prints Markdown."""
import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile


def text(path):
    rng = random.Random(0)
    names = ["ROMEO", "JULIET", "HAMLET", "OPHELIA", "PORTIA"]
    words = "the and of to my thou thee love death night sweet lord what is this that shall be not".split()
    with open(path, "w") as f:
        while f.tell() < 400_000:
            f.write("%s:\n%s.\n\n" % (rng.choice(names), " ".join(rng.choice(words) for _ in range(rng.randint(6, 14)))))


def ms_per_step(binary, data, out, steps, threads, profile):
    cmd = [binary, "train", "examples/shakespeare_gpt.yaml", "--out", out, "--overwrite", "--quiet",
           "--set", "data.path=" + data, "--set", "train.max_steps=%d" % (steps + 5), "--set", "train.eval_every=0u",
           "--set", "train.log_every=5", "--set", "train.schedule.warmup_steps=5",
           "--set", "runtime.threads=%d" % threads]
    if profile:
        cmd.append("--profile=%d" % steps)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    t = {}
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r["split"] == "train":
                t[r["step"]] = r["time_s"]
    return 1000 * (t[steps + 5] - t[5]) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--base")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="seqtrain_trace_bench_")
    data = os.path.join(work, "play.txt")
    text(data)
    engines = [("trace on", a.binary, True), ("trace off", a.binary, False)]
    if a.base:
        engines.append(("no tracer (base)", a.base, False))
    runs = {name: [] for name, _, _ in engines}
    ms_per_step(a.binary, data, os.path.join(work, "warm"), 20, a.threads, False)
    for k in range(a.pairs):
        order = engines if k % 2 == 0 else engines[::-1]
        for name, binary, prof in order:
            runs[name].append(ms_per_step(binary, data, os.path.join(work, "run"), a.steps, a.threads, prof))
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
    print("# The tracer's cost: GPT example step (%d steps traced, %d threads, %s)\n" % (a.steps, a.threads, model))
    print("| run | ms/step (each pair) | median |\n|---|---|---|")
    for name, _, _ in engines:
        print("| %s | %s | %.2f |" % (name, ", ".join("%.2f" % v for v in runs[name]), statistics.median(runs[name])))
    off = statistics.median(runs["trace off"])
    print("\ntrace on vs off: %+.2f%% (target: at most +3%%)" % (100 * (statistics.median(runs["trace on"]) / off - 1)))
    if a.base:
        print("trace off vs no tracer: %+.2f%% (target: no measurable change)" %
              (100 * (off / statistics.median(runs["no tracer (base)"]) - 1)))


if __name__ == "__main__":
    main()
