#!/usr/bin/python3
"""Checks the bench reports' charts (bench/plot_svg.py) on data this test makes itself.

Why: every bench script that writes Markdown writes <prefix>.svg beside it, and a chart nobody
opens drifts (a bar per engine lost, a ratio printed against the wrong engine, an unescaped
label that makes the file invalid XML). So this test
  1. calls plot_svg.chart directly: linear and log scales, missing values, higher-is-better
     ratios, a label with XML's special characters; the SVG must parse and hold one rect.bar and
     one text.value per value, one text.speedup per ratio, one text.group per group, one legend
     entry per series, the bars' widths in the values' order;
  2. writes a tiny raw directory of bench/run.sh (bench_step and torch_step JSON), of
     bench/matrix.sh (run.json, metrics.jsonl, result.json, maxrss_kb) and of bench/gpt.sh
     (bench_gpt and torch_gpt JSON), runs bench/report.py, bench/matrix_report.py and
     bench/gpt_report.py on them as the bench scripts do, and checks each <prefix>.svg the same
     way, with the speedups the fixture's numbers give.
With --results DIR (e.g. bench/results, not tracked in git) it also copies every run.sh,
matrix.sh and gpt.sh raw directory found there into a temp directory, rebuilds its reports and
checks the charts against the rows of the rebuilt Markdown/CSV. Exit 0 = pass.
Usage: bench_plot_check.py [--source REPO] [--results DIR] [--keep]
"""
import argparse
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

PYTHON = "/usr/bin/python3"
SVG = "{http://www.w3.org/2000/svg}"
failures = []


def check(cond, where, msg):
    if not cond:
        failures.append(where)
        print(f"FAIL {where}: {msg}", flush=True)
    return cond


def elements(path_or_text, is_text=False):
    """{class: [element, ...]} of an SVG, which must parse as XML."""
    root = ET.fromstring(path_or_text) if is_text else ET.parse(path_or_text).getroot()
    assert root.tag == SVG + "svg", root.tag
    out = {}
    for el in root.iter():
        for c in (el.get("class") or "").split():
            out.setdefault(c, []).append(el)
    return root, out


def text_of(el):
    return "".join(el.itertext())


def check_counts(where, svg, bars, ratios, groups, series, title_has=None, ratio_texts=None):
    try:
        root, by = elements(svg)
    except (ET.ParseError, OSError) as e:
        return check(False, where, f"{svg} is not valid SVG/XML: {e}")
    n = lambda c: len(by.get(c, []))  # noqa: E731
    check(n("bar") == bars, where, f"{n('bar')} bars, expected {bars}")
    check(n("value") == bars, where, f"{n('value')} value labels, expected {bars}")
    check(n("speedup") == ratios, where, f"{n('speedup')} speedup labels, expected {ratios}")
    check(n("group") == groups, where, f"{n('group')} group labels, expected {groups}")
    check(n("legend") == series and n("swatch") == series, where,
          f"{n('legend')} legend entries / {n('swatch')} swatches, expected {series}")
    check(n("tick") >= 2 and n("axis") == 1, where, f"{n('tick')} tick labels, {n('axis')} axis titles")
    title = " ".join(text_of(e) for e in by.get("title", []))
    if title_has:
        check(title_has in title, where, f"title {title!r} does not name {title_has!r}")
    if ratio_texts is not None:
        got = sorted(text_of(e) for e in by.get("speedup", []))
        check(got == sorted(ratio_texts), where, f"speedup labels {got}, expected {sorted(ratio_texts)}")
    return by


def run(argv, cwd=None):
    p = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


# 1. The chart itself.
def check_chart(plot_svg):
    groups = [("W1 <fp32> & more", [("seqtrain", 100.0), ("torch A", 250.0), ('torch "B"', 4000.0)]),
              ("W2", [("seqtrain", 400.0), ("torch A", None), ('torch "B"', 20000.0)]),
              ("W3 (no seqtrain)", [("torch A", 50.0)])]
    svg = plot_svg.chart("Machine <X> & Y", groups, "ms/step", reference="seqtrain", subtitle="a & b")
    _, by = elements(svg, is_text=True)
    n = lambda c: len(by.get(c, []))  # noqa: E731
    check(n("bar") == 6 and n("value") == 6, "chart", f"{n('bar')} bars / {n('value')} values, expected 6")
    got = sorted(text_of(e) for e in by.get("speedup", []))
    check(got == ["seqtrain 2.50x", "seqtrain 40.00x", "seqtrain 50.00x"], "chart", f"speedups {got}")
    check(n("group") == 3 and n("legend") == 3, "chart", f"{n('group')} groups, {n('legend')} legend entries")
    check(text_of(by["legend"][0]) == "seqtrain", "chart", "the reference is not first in the legend")
    check("log scale" in text_of(by["axis"][0]), "chart", "a 400x span was not drawn on a log scale")
    widths = [float(b.get("width")) for b in by["bar"]]
    check(widths[0] < widths[1] < widths[2], "chart", f"W1's bar widths {widths[:3]} not in the values' order")
    check(any("<X>" in text_of(e) for e in by["title"]), "chart", "the title's special characters were lost")

    hib = plot_svg.chart("acc", [("GunPoint", [("fine-tuned", 0.9), ("scratch", 0.6)])], "accuracy",
                         reference="fine-tuned", lower_is_better=False)
    _, by = elements(hib, is_text=True)
    check([text_of(e) for e in by.get("speedup", [])] == ["fine-tuned 1.50x"], "chart", "higher-is-better ratio")
    check("log scale" not in text_of(by["axis"][0]), "chart", "a 1.5x span drawn on a log scale")
    ticks = [text_of(e) for e in by["tick"]]
    check(ticks[0] == "0", "chart", f"a linear axis starting at {ticks[0]}, not 0")
    none = plot_svg.chart("t", [("g", [("a", 1.0), ("b", 2.0)])], "s")
    check("speedup" not in elements(none, is_text=True)[1], "chart", "ratios printed without a reference")
    try:
        plot_svg.chart("t", [("g", [("a", None)])], "s")
        check(False, "chart", "no values did not raise")
    except ValueError:
        pass


# 2. The report scripts on fixtures.
def step_json(workload, engine, version, ms, peer_tag=None):
    d = {"workload": workload, "engine": "seqtrain" if engine == "seqtrain" else "torch", "version": version,
         "ms_per_step": ms, "samples_per_s": 256000.0 / ms, "gflops": 46.0 / ms * 1000, "peak_rss_mb": 300.0,
         "rss_start_mb": 8.0, "steps": 5, "warmup": 2, "step": {"involuntary_switches": 3}}
    if engine == "seqtrain":
        d.update(rnn_impl="fused", precision="fp32", onednn="2.6.3", isa="avx512_bf16 (test)", autotune_on=True,
                 profile={"phase_ms_median": {k: 1.0 for k in ("head_forward", "loss", "head_backward", "dtop_fill",
                                                               "rnn_forward", "rnn_backward", "clip", "optimizer",
                                                               "zero_grad")},
                          "rnn_forward_overhead_ms": 0.0, "rnn_backward_overhead_ms": 0.0},
                 rnn={"gflops": 100.0}, primitive={"forward_ms": 1.0, "backward_ms": 2.0, "layers": []})
    return d


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f)


def peak_json(g):
    return {"peak_gflops": g, "threads": 2, "peak": {"matmul_gflops": g, "sgemm_gflops": g}}


def check_step_report(bench, tmp):
    raw = os.path.join(tmp, "step-fixture")
    write_json(os.path.join(raw, "meta.json"), {
        "date": "fixture", "threads": 2, "pinned": "cores 0-1", "cpu": "Test CPU 9000", "nproc": 2,
        "load_before": "0", "load_after": "0", "command": "bench/run.sh", "isa_cap": "none",
        "peers": {"torch-debian": "Debian python3-torch, /usr/bin/python3", "torch-pypi": "PyPI, bench/.venv"}})
    write_json(os.path.join(raw, "peak.json"), peak_json(200.0))
    runs = {("W1", "seqtrain", 1): 100.0, ("W1", "seqtrain", 2): 110.0, ("W1", "torch-debian", 1): 5000.0,
            ("W1", "torch-pypi", 1): 200.0, ("W2", "seqtrain", 1): 400.0, ("W2", "torch-pypi", 1): 600.0}
    for (w, e, r), ms in runs.items():
        version = {"seqtrain": "abc1234", "torch-debian": "1.13.0a0", "torch-pypi": "2.15.0"}[e]
        write_json(os.path.join(raw, "runs", f"{w}.{e}.r{r}.json"), step_json(w, e, version, ms))
    rc, out = run([PYTHON, os.path.join(bench, "report.py"), raw, raw])
    if not check(rc == 0, "report.py", f"exit {rc}:\n{out[-3000:]}"):
        return
    check(os.path.exists(raw + ".md") and os.path.exists(raw + ".csv"), "report.py", "no .md/.csv")
    check_counts("report.py", raw + ".svg", bars=5, ratios=3, groups=2, series=3, title_has="Test CPU 9000",
                 ratio_texts=["seqtrain 50.00x", "seqtrain 2.00x", "seqtrain 1.50x"])


def check_matrix_report(bench, tmp):
    raw = os.path.join(tmp, "matrix-fixture")
    write_json(os.path.join(raw, "meta.json"), {
        "date": "fixture", "rev": "abc1234", "threads": 2, "pinned": "cores 0-1", "cpu": "Test CPU 9000",
        "nproc": 2, "load_before": "0", "load_after": "0", "steps": 4, "warmup": 1, "repeat": 1,
        "torch_workers": 1, "command": "bench/matrix.sh"})
    write_json(os.path.join(raw, "peak.json"), peak_json(200.0))
    shape = {"cell": "lstm", "batch": 256, "lookback": 150, "features": 8, "hidden": 128, "layers": 2, "outputs": 1,
             "workers": "0", "autotune": False, "steps": 4, "warmup": 1}
    for config, engine, ms in (("baseline", "seqtrain", 100.0), ("ckpt", "seqtrain", 130.0),
                               ("baseline", "torch-pypi", 300.0)):
        d = os.path.join(raw, "runs", f"W1.{config}.{engine}.r1")
        write_json(os.path.join(d, "run.json"), dict(shape, workload="W1", config=config, engine=engine, round=1,
                                                     precision="fp32", grad_checkpoint=config == "ckpt"))
        with open(os.path.join(d, "maxrss_kb"), "w") as f:
            f.write("307200\n")
        with open(os.path.join(d, "log.txt"), "w") as f:
            f.write("loader: 0 workers\n")
        if engine == "seqtrain":
            with open(os.path.join(d, "metrics.jsonl"), "w") as f:
                for step in range(1, 6):
                    f.write(json.dumps({"split": "train", "step": step, "samples_per_s": 256000.0 / ms}) + "\n")
        else:
            write_json(os.path.join(d, "result.json"), {"ms_per_step": ms, "ms_all": [ms] * 4, "version": "2.15.0"})
    rc, out = run([PYTHON, os.path.join(bench, "matrix_report.py"), raw, raw])
    if not check(rc == 0, "matrix_report.py", f"exit {rc}:\n{out[-3000:]}"):
        return
    check_counts("matrix_report.py", raw + ".svg", bars=3, ratios=1, groups=2, series=2, title_has="Test CPU 9000",
                 ratio_texts=["seqtrain 3.00x"])


def check_gpt_report(bench, tmp):
    raw = os.path.join(tmp, "gpt-fixture")
    write_json(os.path.join(raw, "meta.json"), {
        "date": "fixture", "rev": "abc1234", "threads": 2, "pinned": "cores 0-1", "cpu": "Test CPU 9000", "nproc": 2,
        "isa": "avx512f", "load_before": "0", "load_after": "0", "command": "bench/gpt.sh"})
    write_json(os.path.join(raw, "peak.json"), peak_json(200.0))
    shape = {"layers": 4, "heads": 4, "n_embd": 128, "block": 64, "batch": 12}
    for prec, engine, ms in (("fp32", "seqtrain", 20.0), ("fp32", "torch-pypi-eager", 40.0),
                             ("fp32", "torch-debian-eager", 800.0), ("bf16", "seqtrain", 16.0),
                             ("bf16", "torch-pypi-compile", 24.0)):
        d = {"version": "abc1234" if engine == "seqtrain" else "2.15.0", "shape": shape, "steps": 20, "warmup": 3,
             "ms_per_step": ms, "tokens_per_s": 768000.0 / ms, "gflops": 4000.0 / ms, "peak_rss_mb": 90.0,
             "onednn": "2.6.3", "isa": "avx512_bf16 (test)", "mode": engine.split("-")[-1],
             "compile_s": 20.0 if engine.endswith("compile") else None}
        write_json(os.path.join(raw, "runs", f"cpu.{prec}.{engine}.json"), d)
    rc, out = run([PYTHON, os.path.join(bench, "gpt_report.py"), raw + "/"])
    if not check(rc == 0, "gpt_report.py", f"exit {rc}:\n{out[-3000:]}"):
        return
    check(out.startswith("# seqtrain GPT step benchmark"), "gpt_report.py", "no Markdown on stdout")
    check_counts("gpt_report.py", raw + ".svg", bars=5, ratios=3, groups=2, series=4, title_has="Test CPU 9000",
                 ratio_texts=["seqtrain 2.00x", "seqtrain 40.00x", "seqtrain 1.50x"])


# 3. Existing results (--results).
def check_results(bench, results, tmp):
    done = 0
    for raw in sorted(glob.glob(os.path.join(results, "step-*/"))):
        name = os.path.basename(raw.rstrip("/"))
        if not os.path.exists(os.path.join(raw, "meta.json")):
            continue
        dst = os.path.join(tmp, name)
        shutil.copytree(raw, dst)
        rc, out = run([PYTHON, os.path.join(bench, "report.py"), dst, dst])
        if not check(rc == 0, name, f"report.py exit {rc}:\n{out[-2000:]}"):
            continue
        rows = list(csv.reader(open(dst + ".csv")))[1:]  # workload, engine, ...: one bar each
        seqtrain = lambda r: r[1].startswith("seqtrain")  # noqa: E731
        with_ref = {r[0] for r in rows if seqtrain(r)}
        check_counts(name, dst + ".svg", bars=len(rows), ratios=sum(1 for r in rows if not seqtrain(r) and r[0] in with_ref),
                     groups=len({r[0] for r in rows}), series=len({"seqtrain" if seqtrain(r) else r[1] for r in rows}))
        done += 1
    for raw in sorted(glob.glob(os.path.join(results, "matrix-*/"))):
        name = os.path.basename(raw.rstrip("/"))
        dst = os.path.join(tmp, name)
        shutil.copytree(raw, dst)
        rc, out = run([PYTHON, os.path.join(bench, "matrix_report.py"), dst, dst])
        if not check(rc == 0, name, f"matrix_report.py exit {rc}:\n{out[-2000:]}"):
            continue
        rows = list(csv.reader(open(dst + ".csv")))
        header, rows = rows[0], rows[1:]
        peer_cols = [i for i, h in enumerate(header) if h.endswith(" ms/step") and h != "ms/step"]
        peer_bars = sum(1 for r in rows for i in peer_cols if r[i] != "—")
        check_counts(name, dst + ".svg", bars=len(rows) + peer_bars, ratios=peer_bars, groups=len(rows),
                     series=1 + len({header[i] for i in peer_cols for r in rows if r[i] != "—"}))
        done += 1
    for raw in sorted(glob.glob(os.path.join(results, "gpt-2*/"))):
        name = os.path.basename(raw.rstrip("/"))
        if not os.path.exists(os.path.join(raw, "meta.json")):
            continue
        dst = os.path.join(tmp, name)
        shutil.copytree(raw, dst)
        rc, out = run([PYTHON, os.path.join(bench, "gpt_report.py"), dst])
        if not check(rc == 0, name, f"gpt_report.py exit {rc}:\n{out[-2000:]}"):
            continue
        keys = [os.path.basename(p)[:-5].split(".") for p in glob.glob(os.path.join(dst, "runs", "*.*.*.json"))]
        groups = {(s, p) for s, p, _ in keys}
        with_ref = {(s, p) for s, p, e in keys if e == "seqtrain"}
        check_counts(name, dst + ".svg", bars=len(keys), ratios=sum(1 for s, p, e in keys
                                                                     if e != "seqtrain" and (s, p) in with_ref),
                     groups=len(groups), series=len({e for _, _, e in keys}))
        done += 1
    print(f"--results: {done} raw directories of {results} rebuilt and their charts checked", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."),
                    help="the repository (bench/ is read from it)")
    ap.add_argument("--results", help="also rebuild and check the raw directories under this results directory")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    args = ap.parse_args()
    bench = os.path.join(os.path.abspath(args.source), "bench")
    sys.path.insert(0, bench)
    import plot_svg
    tmp = tempfile.mkdtemp(prefix="bench_plot_check_")
    try:
        check_chart(plot_svg)
        check_step_report(bench, tmp)
        check_matrix_report(bench, tmp)
        check_gpt_report(bench, tmp)
        if args.results:
            check_results(bench, os.path.abspath(args.results), tmp)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"bench_plot_check: {len(failures)} failure(s): {', '.join(failures)}")
        return 1
    print("bench_plot_check: every chart parsed, with its bars, values, speedups, groups and legend")
    return 0


if __name__ == "__main__":
    sys.exit(main())
