#!/usr/bin/env python3
"""The tracer's cost on the GPT example's step, paired on/off (and against a base binary).
Run by bench/trace.sh; prints Markdown."""
import argparse
import json
import os
import random
import resource
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
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # The run's CPU seconds (every thread): unlike the wall clock, the other processes of a
    # busy machine do not add to it.
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    t = {}
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r["split"] == "train":
                t[r["step"]] = r["time_s"]
    return 1000 * (t[steps + 5] - t[5]) / steps, 1000 * cpu_s / (steps + 5)


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
    cpu = {name: [] for name, _, _ in engines}
    ms_per_step(a.binary, data, os.path.join(work, "warm"), 20, a.threads, False)
    for k in range(a.pairs):
        order = engines if k % 2 == 0 else engines[::-1]
        for name, binary, prof in order:
            wall, cpu_ms = ms_per_step(binary, data, os.path.join(work, "run"), a.steps, a.threads, prof)
            runs[name].append(wall)
            cpu[name].append(cpu_ms)
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in lscpu.splitlines() if l.startswith("Model name")), "?")
    print("# The tracer's cost: GPT example step (%d steps traced, %d threads, %s)\n" % (a.steps, a.threads, model))
    print("| run | wall ms/step over the window (each pair) | median | CPU ms/step, whole run (each pair) | median |")
    print("|---|---|---|---|---|")
    for name, _, _ in engines:
        print("| %s | %s | %.2f | %s | %.2f |" % (name, ", ".join("%.2f" % v for v in runs[name]), statistics.median(runs[name]),
                                               ", ".join("%.2f" % v for v in cpu[name]), statistics.median(cpu[name])))
    for label, table in (("wall", runs), ("CPU", cpu)):
        off = statistics.median(table["trace off"])
        print("\n%s: trace on vs off %+.2f%% (target: at most +3%%)" % (label, 100 * (statistics.median(table["trace on"]) / off - 1)))
        if a.base:
            print("%s: trace off vs no tracer %+.2f%% (target: no measurable change)" %
                  (label, 100 * (off / statistics.median(table["no tracer (base)"]) - 1)))


if __name__ == "__main__":
    main()
