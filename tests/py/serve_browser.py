#!/usr/bin/env python3
"""The service's page in Debian's headless chromium (issue 36): it loads with no console error,
lists the templates as a form, refuses an invalid value by marking its key, submits a task
from a template, draws its loss curve as it updates, cancels another task from the table,
overlays finished runs, and lists 1,000 tasks. Exit 77 (ctest: skipped) without chromium.

    serve_browser.py --binary build/seqtrain [--screenshot docs/img/serve.png]"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_api as sa  # noqa: E402
from browser import Browser, chromium_path  # noqa: E402


def set_field(b, key, value):
    b.eval("""(() => { const i = document.querySelector('#form input[data-key="%s"]');
              i.value = %r; i.dispatchEvent(new Event('input', {bubbles: true})); return true; })()""" % (key, value))


def points(b, cls):
    return b.eval("(() => { const p = document.querySelector('#curve path.%s'); return p ? Number(p.dataset.points) : 0; })()" % cls)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--screenshot")
    a = ap.parse_args()
    if not chromium_path():
        print("SKIP: chromium is not installed (apt-get install chromium)")
        return 77
    sa.BINARY = os.path.abspath(a.binary)
    root = tempfile.mkdtemp(prefix="seqtrain_serve_page_")
    s = sa.Server(root, "--jobs", "1")
    try:
        with Browser(timeout=60) as b:
            url = "http://127.0.0.1:%d/" % s.port
            b.goto(url)
            b.wait_for("document.querySelectorAll('#template option').length >= 4", what="the templates")
            names = b.eval("[...document.querySelectorAll('#template option')].map(o => o.value)")
            sa.check("lstm_forecaster.yaml" in names and "fnn_baseline.yaml" in names, "templates listed: %s" % names)
            b.eval("(() => { const s = document.querySelector('#template'); s.value = 'lstm_forecaster.yaml';"
                   " s.dispatchEvent(new Event('change')); return true; })()")
            sa.check(b.eval("document.querySelector('#form input[data-key=\"data.lookback\"]').value") == "150",
                     "the form shows the template's lookback")
            sa.check(b.eval("document.querySelectorAll('#form input[data-key]').length") > 100, "every key is in the form")

            # An invalid value: the server's loader refuses it and the page marks the key.
            set_field(b, "train.epochs", "-1")
            b.eval("document.querySelector('#submit').click(), true")
            b.wait_for("document.querySelector('#submit-error').textContent.includes('train.epochs')",
                       what="the loader's error on the page")
            sa.check(b.eval("document.querySelector('#form input[data-key=\"train.epochs\"]').classList.contains('bad')"),
                     "the bad key is marked")
            sa.check(sa.Server.get(s, "/api/tasks")[1] == [], "the invalid task was not queued")

            # A task long enough to watch its curve grow.
            for k, v in {"train.epochs": "40", "data.synthetic.rows": "6000", "model.hidden": "16", "train.log_every": "2",
                         "train.early_stopping.patience": "0"}.items():
                set_field(b, k, v)
            b.eval("document.querySelector('#submit').click(), true")
            b.wait_for("!!document.querySelector('#tasks tr[data-task=\"1\"]')", what="task 1 in the table")
            b.wait_for("(() => { const p = document.querySelector('#curve path.train'); return p && Number(p.dataset.points) >= 2; })()",
                       what="the first points of the curve")
            first = points(b, "train")
            b.wait_for("Number((document.querySelector('#curve path.train') || {dataset: {}}).dataset.points || 0) > %d" % first,
                       what="the curve to update")
            sa.check(s.task(1)["state"] == "running", "the curve updated while the task ran")
            if a.screenshot:
                b.wait_for("Number(document.querySelector('#curve path.train').dataset.points) > 20", what="a fuller curve")

            # Another task, queued behind it (--jobs 1), cancelled from the table.
            tid = s.submit(sa.SMALL)
            b.wait_for("!!document.querySelector('#tasks tr[data-task=\"%d\"] button.cancel')" % tid, what="the cancel button")
            if a.screenshot:
                os.makedirs(os.path.dirname(os.path.abspath(a.screenshot)), exist_ok=True)
                b.eval("document.activeElement.blur(), window.scrollTo(0, 0), document.querySelector('#submit-error').textContent = '', true")
                b.screenshot(a.screenshot)
            b.eval("document.querySelector('#tasks tr[data-task=\"%d\"] button.cancel').click(), true" % tid)
            b.wait_for("document.querySelector('#tasks tr[data-task=\"%d\"]').dataset.state === 'cancelled'" % tid,
                       what="the cancelled state in the table")
            sa.check(s.task(tid)["state"] == "cancelled" and s.task(tid)["launches"] == 0, "cancelled before it ran")

            # Stop the long one, run two short ones and overlay their validation curves.
            s.post("/api/tasks/1/cancel")
            s.wait_state(1, ["cancelled"])
            done = [s.submit(dict(sa.SMALL, **{"model.hidden": h})) for h in ("8", "16")]
            for d in done:
                s.wait_state(d, ["done"])
            for d in done:
                b.wait_for("(() => { const c = document.querySelector('#tasks tr[data-task=\"%d\"] input.pick'); return !!c && !c.disabled; })()" % d,
                           what="task %d pickable" % d)
                b.eval("(() => { const c = document.querySelector('#tasks tr[data-task=\"%d\"] input.pick'); c.checked = true;"
                       " c.dispatchEvent(new Event('change', {bubbles: true})); return true; })()" % d)
            b.eval("document.querySelector('#compare').click(), true")
            b.wait_for("document.querySelectorAll('#curve path.compare').length === 2", what="two overlaid curves")
            sa.check(b.errors == [], "console errors: %s" % b.errors)
    finally:
        s.stop()

    # 1,000 finished tasks: the page lists them all, quickly (the timing is reported; the
    # benchmark bench/serve.sh holds the figure).
    big = sa.root_with_finished_tasks(os.path.join(root, "big"), 1000)
    s = sa.Server(big)
    try:
        with Browser(timeout=60) as b:
            b.goto("http://127.0.0.1:%d/" % s.port)
            b.wait_for("document.querySelector('#tasks').dataset.total === '1000'", what="1000 tasks listed")
            ms = b.eval("(async () => { const t0 = performance.now(); await refresh(); document.body.offsetHeight;"
                        " return performance.now() - t0; })()")
            print("page: listed 1000 finished tasks in %.0f ms (fetch, parse, render and layout)" % ms)
            # Every task is reachable: scrolled to the end, the oldest is in the table.
            b.eval("(() => { const w = document.querySelector('.tablewrap'); w.scrollTop = w.scrollHeight; return true; })()")
            b.wait_for("!!document.querySelector('#tasks tr[data-task=\"1\"]')", what="the oldest task after scrolling")
            sa.check(b.errors == [], "console errors: %s" % b.errors)
    finally:
        s.stop()
        shutil.rmtree(root, ignore_errors=True)
    print("PASS serve_browser")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except sa.Failure as e:
        print("FAIL serve_browser: %s" % e)
        sys.exit(1)
