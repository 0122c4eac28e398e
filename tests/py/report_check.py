#!/usr/bin/python3
"""`seqtrain report` end to end (issue 37): trains two tiny runs that differ in model.hidden and
train.optimizer.lr, writes their report and loads it in Debian's headless chromium from a
file:// URL, then checks what the page drew against the runs' own files: one train and one val
loss curve per run with as many points as metrics.jsonl has, the metric, lr, throughput and
data-wait charts, a colour per run, the final metrics table (summary.json's values), the
config-difference rows naming exactly the keys that differ, no console error and no resource
fetched. A path that is no run directory is refused (exit 2, nothing written). Exit 77 (ctest:
skipped) without chromium.

    report_check.py --binary build/seqtrain [--screenshot docs/img/report.png]"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import Browser, chromium_path  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "forecast.yaml")
SMALL = ["data.synthetic.rows=3000", "data.lookback=24", "data.horizon=4", "train.batch_size=64",
         "train.log_every=4", "train.epochs=3", "train.early_stopping.patience=0", "runtime.threads=1"]
RUNS = {"small_lr": ["model.hidden=8", "train.optimizer.lr=0.001"],
        "wide_fast": ["model.hidden=16", "train.optimizer.lr=0.004"]}


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)
    print("ok:", msg, flush=True)


def seqtrain(binary, *args):
    return subprocess.run([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def records(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def points(recs, split, field, x="step"):
    return sum(1 for r in recs if r.get("split") == split and isinstance(r.get(field), (int, float))
               and isinstance(r.get(x), (int, float)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--screenshot")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    tmp = tempfile.mkdtemp(prefix="seqtrain_report_")
    try:
        runs = {}
        for name, sets in RUNS.items():
            out = os.path.join(tmp, name)
            argv = ["train", EXAMPLE, "--out", out, "--quiet"]
            for s in SMALL + sets:
                argv += ["--set", s]
            r = seqtrain(binary, *argv)
            check(r.returncode == 0, "trained %s%s" % (name, "" if r.returncode == 0 else ":\n" + r.stdout))
            runs[name] = out
        page = os.path.join(tmp, "report.html")

        # Bad input first: nothing may be written.
        r = seqtrain(binary, "report", runs["small_lr"], tmp + "/nope", "--out", page)
        check(r.returncode == 2 and tmp + "/nope" in r.stdout and "--out directory of a `seqtrain train` run" in r.stdout,
              "a path that is no run directory: exit 2 naming it and the fix (%s)" % r.stdout.strip())
        check(not os.path.exists(page), "nothing written on bad input")

        r = seqtrain(binary, "report", *runs.values(), "--out", page)
        check(r.returncode == 0 and os.path.isfile(page), "report written: " + r.stdout.strip())
        if not chromium_path():
            print("SKIP: chromium is not installed (apt-get install chromium)")
            return 77

        with Browser(timeout=60, window=(1400, 1000)) as b:
            b.goto("file://" + page)
            b.wait_for("document.querySelectorAll('svg.chart').length > 0", what="the charts")
            drawn = b.eval("""[...document.querySelectorAll('svg.chart path[data-series]')].map(p => ({
                chart: p.closest('svg').id, run: p.dataset.run, series: p.dataset.series,
                points: Number(p.dataset.points), color: getComputedStyle(p).stroke,
                length: p.getTotalLength()}))""")

            def of(chart, series):
                return {d["run"]: d for d in drawn if d["chart"] == chart and d["series"] == series}

            train_loss = of("loss", "train_loss")
            check(sorted(train_loss) == sorted(RUNS), "one train loss curve per run: %s" % sorted(train_loss))
            for name, run in runs.items():
                recs = records(run)
                want = points(recs, "train", "loss")
                check(train_loss[name]["points"] == want >= 2 and train_loss[name]["length"] > 0,
                      "%s: train loss drawn through its %d metrics.jsonl points" % (name, want))
                val = of("loss", "val_loss")[name]
                check(val["points"] == points(recs, "val", "loss") == 3, "%s: val loss curve, 3 validations" % name)
                check(of("lr", "train_lr")[name]["points"] == points(recs, "train", "lr"), "%s: lr curve" % name)
                check(of("throughput", "train_samples_per_s")[name]["points"] == points(recs, "train", "samples_per_s"),
                      "%s: throughput curve" % name)
                check(of("data_wait", "data_data_wait_share")[name]["points"] == points(recs, "data", "data_wait_share", "epoch") == 3,
                      "%s: data wait, one point an epoch" % name)
                check(of("val_mae", "val_mae")[name]["points"] == 3, "%s: validation MAE curve" % name)
            colors = {d["color"] for d in train_loss.values()}
            check(len(colors) == 2, "a colour per run: %s" % colors)
            legend = b.eval("[...document.querySelectorAll('#legend li')].map(li => li.dataset.run)")
            check(sorted(legend) == sorted(RUNS), "the legend names both runs")

            rows = b.eval("""Object.fromEntries([...document.querySelectorAll('#final-metrics tbody tr')].map(tr =>
                [tr.dataset.key, [...tr.querySelectorAll('td')].map(td => td.textContent)]))""")
            for i, (name, run) in enumerate(runs.items()):
                with open(os.path.join(run, "summary.json")) as f:
                    summary = json.load(f)
                for key in ("best_val_loss", "test_loss", "test_mae"):
                    check(rows[key][i] == "%.6g" % summary[key], "%s: %s %s in the metrics table" % (name, key, rows[key][i]))
                check(rows["stopped_by"][i] == "epochs" and rows["epochs"][i] == "3", "%s: stopped_by and epochs" % name)

            keys = b.eval("[...document.querySelectorAll('#config-diff tbody tr')].map(tr => tr.dataset.key)")
            check(sorted(keys) == ["model.hidden", "train.optimizer.lr"], "config differences name the differing keys: %s" % keys)
            hidden = b.eval("[...document.querySelectorAll('#config-diff tr[data-key=\"model.hidden\"] td')].map(td => td.textContent)")
            check(hidden == ["8", "16"], "each run's model.hidden: %s" % hidden)

            check(b.eval("performance.getEntriesByType('resource').length") == 0, "no resource fetched: the page is self-contained")
            if a.screenshot:
                b.screenshot(a.screenshot)
            check(b.errors == [], "no console errors: %s" % b.errors)
        print("PASS")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
