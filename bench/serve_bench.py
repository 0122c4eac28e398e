#!/usr/bin/env python3
"""The service's overhead on a task's wall time (paired with the same run by hand) and the time
to list 1,000 finished tasks. Run by bench/serve.sh; prints Markdown, and with --svg PATH writes
the chart of the pairs (bench/plot_svg.py: each pair's two wall times, the overhead on the
service task's bar)."""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
import serve_api as sa  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_svg  # noqa: E402  bench/plot_svg.py


def by_hand(binary, config, out, threads):
    t0 = time.perf_counter()
    subprocess.run([binary, "train", config, "--out", out, "--threads", str(threads), "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def by_service(server, threads):
    st, t = server.post("/api/tasks", {"template": "quickstart.yaml", "overrides": {}})
    assert st == 201, t
    t = server.wait_state(t["id"], ["done", "failed"], timeout=1800)
    assert t["state"] == "done", t
    return t["ended_s"] - t["created_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--svg", help="also write the chart of the pairs here")
    a = ap.parse_args()
    sa.BINARY = os.path.abspath(a.binary)
    work = tempfile.mkdtemp(prefix="seqtrain_serve_bench_")
    root = os.path.join(work, "root")
    os.makedirs(os.path.join(root, "templates"))
    shutil.copy(a.config, os.path.join(root, "templates", "quickstart.yaml"))
    server = sa.Server(root, "--jobs", "1", "--threads", str(a.threads))
    rows = []
    try:
        by_hand(sa.BINARY, a.config, os.path.join(work, "warm"), a.threads)  # page cache, autotune files
        for k in range(a.pairs):
            hand_out = os.path.join(work, "hand%d" % k)
            if k % 2 == 0:
                h = by_hand(sa.BINARY, a.config, hand_out, a.threads)
                s = by_service(server, a.threads)
            else:
                s = by_service(server, a.threads)
                h = by_hand(sa.BINARY, a.config, hand_out, a.threads)
            rows.append((h, s))
    finally:
        server.stop()
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
    print("# seqtrain serve: overhead and task list (%s)\n" % time.strftime("%Y-%m-%d"))
    print("CPU: %s; %d threads per run; config %s; %s\n" % (model, a.threads, a.config,
          subprocess.run([sa.BINARY, "--version"], capture_output=True, text=True).stdout.splitlines()[0]))
    print("| pair | by hand (s) | as a service task (s) | overhead |\n|---|---|---|---|")
    for k, (h, s) in enumerate(rows):
        print("| %d | %.3f | %.3f | %+.2f%% |" % (k, h, s, 100 * (s / h - 1)))
    overheads = [100 * (s / h - 1) for h, s in rows]
    print("\nmedian overhead %+.2f%%, mean %+.2f%% (target: under 1%%)\n" % (statistics.median(overheads),
                                                                            statistics.mean(overheads)))
    if a.svg:
        plot_svg.write(a.svg, "The training service's overhead, %s by hand and as a service task: %s, %d threads"
                       % (os.path.basename(a.config), model, a.threads),
                       [("pair %d" % k, [("by hand (seqtrain train)", h), ("as a service task", s)])
                        for k, (h, s) in enumerate(rows)], "wall time s", reference="by hand (seqtrain train)",
                       ratio_label=lambda r: "overhead %+.2f%%" % (100 * (r - 1)), value_fmt=lambda v: "%.3f" % v,
                       note="On the service task's bar: its wall time over the same run's by hand, minus one",
                       subtitle="%s; median overhead %+.2f%% (target: under 1%%)" % (time.strftime("%Y-%m-%d"),
                                                                                   statistics.median(overheads)))

    # 1,000 finished tasks.
    big = sa.root_with_finished_tasks(os.path.join(work, "big"), 1000)
    s = sa.Server(big)
    try:
        api = []
        for _ in range(20):
            t0 = time.perf_counter()
            st, body = s.get("/api/tasks")
            api.append(1000 * (time.perf_counter() - t0))
            assert st == 200 and len(body) == 1000
        print("GET /api/tasks with 1,000 finished tasks: median %.1f ms, max %.1f ms (20 requests)" %
              (statistics.median(api), max(api)))
        from browser import Browser, chromium_path
        if chromium_path():
            with Browser(timeout=60) as b:
                b.goto("http://127.0.0.1:%d/" % s.port)
                b.wait_for("document.querySelector('#tasks').dataset.total === '1000'")
                page = [b.eval("(async () => { const t0 = performance.now(); await refresh(); document.body.offsetHeight;"
                               " return performance.now() - t0; })()") for _ in range(10)]
            print("\nthe page lists them (fetch, parse, render, layout; headless chromium): median %.0f ms, max %.0f ms "
                  "(10 refreshes; target: under 200 ms)" % (statistics.median(page), max(page)))
    finally:
        s.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
