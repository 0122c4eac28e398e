#!/usr/bin/env python3
"""The training service's HTTP API, through the binary (issue 36): submit, list, live events,
files; queueing beyond --jobs in order; cancel; kill -9 of the server mid-task, restart, resume,
and the same final weights as an uninterrupted run; the token on every route; path attacks,
oversized and malformed bodies and invalid configs refused with a 4xx and no change; a port in
use, a root that is a file, a corrupt database, a broken template, a resume without a
checkpoint; event streams capped below the thread pool.

    serve_api.py --binary build/seqtrain --case NAME   (or --case all)
Each case starts its own server on a free loopback port in its own temporary root."""
import argparse
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

BINARY = None
# Small, quick tasks: a 16-unit LSTM on 3000 synthetic rows (~1 s an epoch on one thread).
SMALL = {"data.synthetic.rows": "3000", "model.hidden": "16", "train.epochs": "3", "train.schedule.warmup_steps": "2"}


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


class Server:
    """One `seqtrain serve` process on a free port."""

    def __init__(self, root, *extra, expect_start=True):
        self.root = root
        self.args = [BINARY, "serve", "--root", root, "--port", "0"] + list(extra)
        for flag in ("--jobs", "--threads"):  # one task at a time, on one thread, unless told
            if flag not in extra:
                self.args += [flag, "1"]
        self.token = None
        if "--token" in extra:
            self.token = extra[list(extra).index("--token") + 1]
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.port = None
        if expect_start:
            line = self.proc.stdout.readline()
            if "listening on" not in line:
                raise Failure("server did not start: %r %s" % (line, self.stderr()))
            self.port = int(line.split("http://")[1].split("/")[0].rsplit(":", 1)[1])

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def request(self, method, path, body=None, headers=None, token=True, raw_body=None, timeout=30):
        h = {"Host": "127.0.0.1:%d" % self.port}
        if body is not None:
            raw_body = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        if token and self.token:
            h["Authorization"] = "Bearer " + self.token
        h.update(headers or {})
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)  # the path exactly as given
        if raw_body is not None:
            h.setdefault("Content-Length", str(len(raw_body)))
        for k, v in h.items():
            c.putheader(k, v)
        c.endheaders()
        if raw_body is not None:
            c.send(raw_body)
        r = c.getresponse()
        data = r.read()
        c.close()
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = data
        return r.status, parsed

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body if body is not None else {}, **kw)

    def submit(self, overrides=None, template="lstm_forecaster.yaml"):
        s, t = self.post("/api/tasks", {"template": template, "overrides": overrides or SMALL})
        check(s == 201, "submit answered %s %s" % (s, t))
        return t["id"]

    def task(self, tid):
        s, t = self.get("/api/tasks/%d" % tid)
        check(s == 200, "GET task %d answered %s %s" % (tid, s, t))
        return t

    def wait_state(self, tid, states, timeout=240):
        deadline = time.time() + timeout
        while time.time() < deadline:
            t = self.task(tid)
            if t["state"] in states:
                return t
            time.sleep(0.2)
        raise Failure("task %d did not reach %s in %d s (now %s: %s)" % (tid, states, timeout, t["state"], t["error"]))

    def stop(self, sig=signal.SIGTERM, timeout=90):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=timeout)
        return self.proc.returncode


def events(server, tid, timeout=240):
    """Reads the task's server-sent events until `end`; returns [(event, data)]."""
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    h = {"Authorization": "Bearer " + server.token} if server.token else {}
    c.request("GET", "/api/tasks/%d/events" % tid, headers=h)
    r = c.getresponse()
    check(r.status == 200, "events answered %d" % r.status)
    check(r.getheader("Content-Type", "").startswith("text/event-stream"), "events are not text/event-stream")
    out, event, deadline = [], None, time.time() + timeout
    while time.time() < deadline:
        line = r.fp.readline().decode()
        if not line:
            break
        line = line.rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            out.append((event, line[6:]))
            if event == "end":
                break
    c.close()
    return out


def child_pids(run_dir):
    """seqtrain processes whose command line names this run directory."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cmd = f.read().split(b"\0")
            with open("/proc/%s/stat" % p) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        if any(run_dir.encode() in a for a in cmd) and b"train" in cmd:
            pids.append(int(p))
    return pids


def root_with_finished_tasks(root, n):
    """A server root whose database holds n finished tasks (made by a server, filled directly):
    the long history the page and the API must list quickly."""
    import sqlite3
    Server(root).stop()
    db = sqlite3.connect(os.path.join(root, "tasks.db"))
    now = time.time()
    db.executemany("INSERT INTO tasks (template, overrides, state, created_s, started_s, ended_s, run_s, progress, "
                   "best_name, best, launches) VALUES ('lstm_forecaster.yaml', '{\"train.epochs\": \"3\"}', 'done', "
                   "?, ?, ?, 60, 1, 'val_loss', ?, 1)",
                   [(now - n + i, now - n + 1 + i, now - n + 100 + i, 0.1 + i * 1e-4) for i in range(n)])
    db.commit()
    db.close()
    return root


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---- cases -------------------------------------------------------------------------------------

def case_submit_watch(root):
    s = Server(root)
    try:
        st, tpl = s.get("/api/templates")
        check(st == 200 and {t["name"] for t in tpl} >= {"lstm_forecaster.yaml", "fnn_baseline.yaml", "char_gpt.yaml",
                                                           "set_encoder.yaml"}, "default templates: %s" % tpl)
        lstm = next(t for t in tpl if t["name"] == "lstm_forecaster.yaml")
        f = {x["key"]: x for x in lstm["fields"]}
        check(f["data.lookback"]["value"] == "150" and f["data.lookback"]["in_template"], "lookback 150 in the form")
        check(f["train.batch_size"]["value"] == "256", "batch 256 in the form")
        check(f["train.epochs"]["doc"] and f["train.epochs"]["default"] == "10", "docs and defaults: %s" % f["train.epochs"])
        tid = s.submit()
        ev = events(s, tid)
        kinds = [e for e, _ in ev]
        check(kinds[-1] == "end", "the stream ends with `end`: %s" % kinds[-5:])
        metrics = [json.loads(d) for e, d in ev if e == "metric"]
        check(any(m["split"] == "train" for m in metrics) and any(m["split"] == "val" for m in metrics),
              "train and val metrics streamed")
        check(any("seqtrain:" in d for e, d in ev if e == "log"), "log lines streamed")
        states = [json.loads(d)["state"] for e, d in ev if e == "task"]
        check(states[-1] == "done", "the last task event says done: %s" % states)
        t = s.task(tid)
        check(t["state"] == "done" and t["progress"] == 1 and t["best"] is not None, "done with a best metric: %s" % t)
        check("best" in t["checkpoints"] and "last" in t["checkpoints"], "checkpoints listed: %s" % t["checkpoints"])
        st, lst = s.get("/api/tasks")
        check(st == 200 and [x["id"] for x in lst] == [tid], "the list holds the task")
        run = os.path.join(root, "tasks", str(tid), "run")
        st, body = s.get("/api/tasks/%d/files/metrics.jsonl" % tid)
        with open(os.path.join(run, "metrics.jsonl"), "rb") as fh:
            disk = fh.read()
        check(st == 200 and (body if isinstance(body, bytes) else json.dumps(body).encode()) and
              (body == disk or isinstance(body, (dict, list))), "metrics.jsonl downloads")
        st, w = s.get("/api/tasks/%d/files/checkpoints/best/model.safetensors" % tid)
        with open(os.path.join(run, "checkpoints/best/model.safetensors"), "rb") as fh:
            check(st == 200 and w == fh.read(), "the best weights download byte for byte")
        st, listing = s.get("/api/tasks/%d/files/checkpoints" % tid)
        check(st == 200 and {"best", "last"} <= {x["name"] for x in listing}, "a directory lists: %s" % listing)
    finally:
        s.stop()


def case_queue_order(root):
    s = Server(root, "--jobs", "1")
    try:
        one = dict(SMALL, **{"train.epochs": "1"})
        ids = [s.submit(one) for _ in range(3)]
        peak, seen_running = 0, []
        deadline = time.time() + 240
        while time.time() < deadline:
            st, lst = s.get("/api/tasks")
            running = [t["id"] for t in lst if t["state"] == "running"]
            peak = max(peak, len(running))
            for r in running:
                if r not in seen_running:
                    seen_running.append(r)
            if all(t["state"] == "done" for t in lst):
                break
            time.sleep(0.05)
        check(peak == 1, "at most --jobs 1 task runs at once (saw %d)" % peak)
        ts = [s.task(i) for i in ids]
        check(all(t["state"] == "done" for t in ts), "all done: %s" % [t["state"] for t in ts])
        starts = [t["started_s"] for t in ts]
        check(starts == sorted(starts), "tasks started in submission order: %s" % starts)
        check(all(ts[k + 1]["started_s"] >= ts[k]["ended_s"] - 0.5 for k in range(2)), "each started after the previous ended")
    finally:
        s.stop()


def case_cancel(root):
    s = Server(root, "--jobs", "1")
    try:
        long = dict(SMALL, **{"train.epochs": "200", "train.early_stopping.patience": "0"})
        a = s.submit(long)
        b = s.submit(SMALL)
        s.wait_state(a, ["running"])
        st, t = s.post("/api/tasks/%d/cancel" % b)
        check(st == 200 and t["state"] == "cancelled", "a queued task cancels at once: %s %s" % (st, t))
        deadline = time.time() + 120
        while s.task(a)["progress"] <= 0 and time.time() < deadline:
            time.sleep(0.2)
        st, t = s.post("/api/tasks/%d/cancel" % a)
        check(st == 200, "cancel of a running task: %s %s" % (st, t))
        t = s.wait_state(a, ["cancelled", "failed", "done"], timeout=120)
        check(t["state"] == "cancelled", "the running task ends cancelled: %s" % t)
        check(t["resumable"], "a cancelled task with a checkpoint can be resumed")
        time.sleep(1)
        check(s.task(b)["launches"] == 0, "the cancelled queued task never started")
        st, t = s.post("/api/tasks/%d/cancel" % a)
        check(st == 409, "cancelling a cancelled task is a 409: %s" % st)
        # A resume whose checkpoint is gone: a clear 409, nothing changes.
        shutil.rmtree(os.path.join(root, "tasks", str(a), "run", "checkpoints"))
        st, t = s.post("/api/tasks/%d/resume" % a)
        check(st == 409 and "no checkpoint" in t["error"], "resume without a checkpoint: %s %s" % (st, t))
        check(s.task(a)["state"] == "cancelled", "the task stays cancelled")
    finally:
        s.stop()


def case_kill9_resume(root):
    """Kill -9 the server mid-task, restart: interrupted; resume: the same final weights."""
    exact = dict(SMALL, **{"train.epochs": "8", "data.synthetic.rows": "4000", "train.early_stopping.patience": "0"})
    s = Server(root, "--jobs", "1")
    u = s.submit(exact)
    s.wait_state(u, ["done"])
    i = s.submit(exact)
    deadline = time.time() + 120
    while time.time() < deadline:
        t = s.task(i)
        if t["state"] == "running" and 0.2 < t["progress"] < 0.7:
            break
        time.sleep(0.05)
    check(s.task(i)["state"] == "running", "the second task runs before the kill")
    run_i = os.path.join(root, "tasks", str(i), "run")
    s.proc.kill()  # SIGKILL: no shutdown path runs
    s.proc.wait()
    deadline = time.time() + 60
    while child_pids(run_i) and time.time() < deadline:  # the child got SIGTERM (PDEATHSIG): it stops
        time.sleep(0.1)
    check(not child_pids(run_i), "the training child died with the server")
    s2 = Server(root, "--jobs", "1")
    try:
        t = s2.task(i)
        check(t["state"] == "interrupted" and t["resumable"], "after the restart the task is interrupted: %s" % t)
        st, t = s2.post("/api/tasks/%d/resume" % i)
        check(st == 200 and t["state"] in ("queued", "running"), "resume: %s %s" % (st, t))
        t = s2.wait_state(i, ["done", "failed"])
        check(t["state"] == "done" and t["launches"] == 2, "the resumed task finishes: %s" % t)
        run_u = os.path.join(root, "tasks", str(u), "run")
        for tag in ("last", "best"):
            a = sha(os.path.join(run_u, "checkpoints", tag, "model.safetensors"))
            b = sha(os.path.join(run_i, "checkpoints", tag, "model.safetensors"))
            check(a == b, "%s weights differ between the uninterrupted and the killed-and-resumed run" % tag)
    finally:
        s2.stop()


def case_security(root):
    token = "s3cret-token-123"
    s = Server(root, "--token", token)
    try:
        tid = s.submit(dict(SMALL, **{"train.epochs": "1"}))
        s.wait_state(tid, ["done"])
        routes = [("GET", "/"), ("GET", "/api/templates"), ("GET", "/api/tasks"), ("POST", "/api/tasks"),
                  ("GET", "/api/tasks/%d" % tid), ("POST", "/api/tasks/%d/cancel" % tid),
                  ("POST", "/api/tasks/%d/resume" % tid), ("GET", "/api/tasks/%d/events" % tid),
                  ("GET", "/api/tasks/%d/files/metrics.jsonl" % tid), ("GET", "/api/nothing")]
        for method, path in routes:
            body = {} if method == "POST" else None
            st, _ = s.request(method, path, body=body, token=False)
            check(st == 401, "%s %s without the token answered %d" % (method, path, st))
            st, _ = s.request(method, path, body=body, token=False, headers={"Authorization": "Bearer wrong-token-456"})
            check(st == 401, "%s %s with a wrong token answered %d" % (method, path, st))
        st, page = s.get("/", token=False)
        check(b"token" in page, "the page asks for the token")
        st, _ = s.get("/api/tasks", token=False, headers={"Cookie": "seqtrain_token=" + token})
        check(st == 200, "the page's cookie carries the token")
        st, _ = s.get("/api/tasks")
        check(st == 200, "the token opens the API")

        # Escapes from the root, in any path parameter.
        outside = tempfile.mkdtemp()
        with open(os.path.join(outside, "secret"), "w") as f:
            f.write("secret")
        run = os.path.join(root, "tasks", str(tid), "run")
        os.symlink(os.path.join(outside, "secret"), os.path.join(run, "escape"))
        os.symlink(outside, os.path.join(run, "escdir"))
        before = sorted(os.listdir(root)), s.get("/api/tasks")[1]
        for path in ["/api/tasks/%d/files/../../../tasks.db" % tid, "/api/tasks/%d/files/%%2e%%2e/%%2e%%2e/tasks.db" % tid,
                     "/api/tasks/%d/files//etc/passwd" % tid, "/api/tasks/%d/files/escape" % tid,
                     "/api/tasks/%d/files/escdir/secret" % tid, "/api/tasks/%d/files/checkpoints/../../config.yaml" % tid,
                     "/api/tasks/%d/files/%%2fetc%%2fpasswd" % tid]:
            st, body = s.get(path)
            check(400 <= st < 500, "%s answered %d" % (path, st))
            check(isinstance(body, dict) and body.get("error"), "%s answered with something else than an error: %r" % (path, body))
        bad = [({"template": "../templates/lstm_forecaster.yaml"}, 400, "template"),
               ({"template": "/etc/passwd"}, 400, "template"),
               ({"template": "nope.yaml"}, 404, "template"),
               ({"template": "lstm_forecaster.yaml", "overrides": {"train.epochs": "-1"}}, 400, "train.epochs"),
               ({"template": "lstm_forecaster.yaml", "overrides": {"train.epocs": "2"}}, 400, "train.epocs"),
               ({"template": "lstm_forecaster.yaml", "overrides": {"data.path": "/etc/passwd"}}, 400, "data.path"),
               ({"template": "lstm_forecaster.yaml", "overrides": ["train.epochs=2"]}, 400, None),
               ({"overrides": {}}, 400, None)]
        for body, want, key in bad:
            st, r = s.post("/api/tasks", body)
            check(st == want and r.get("error"), "%s answered %d %s" % (body, st, r))
            if key and key != "template" and key != "data.path":
                check(r.get("key") == key or key in r["error"], "the error names %s: %s" % (key, r))
        st, r = s.request("POST", "/api/tasks", raw_body=b"{not json", headers={"Content-Type": "application/json"})
        check(st == 400 and "JSON" in r["error"], "malformed JSON: %d %s" % (st, r))
        st, r = s.request("POST", "/api/tasks", raw_body=b"x" * (1 << 20), headers={"Content-Type": "application/json"})
        check(st == 413, "an oversized body answered %d" % st)
        st, r = s.request("POST", "/api/tasks", raw_body=b"template=x", headers={"Content-Type": "application/x-www-form-urlencoded"})
        check(st == 415, "a form post answered %d" % st)
        st, r = s.get("/api/tasks/99999")
        check(st == 404, "an unknown task answered %d" % st)
        st, r = s.get("/api/tasks/99999999999999999999999")
        check(st == 400, "an id past int64 answered %d" % st)
        after = sorted(os.listdir(root)), s.get("/api/tasks")[1]
        check(before == after, "bad requests changed the root or the task list")
        shutil.rmtree(outside)
    finally:
        s.stop()
    # Without a token: loopback only, and only requests addressed to it.
    s = Server(root)
    try:
        st, r = s.get("/api/tasks", headers={"Host": "evil.example:80"})
        check(st == 403, "a rebound Host answered %d" % st)
        st, r = s.get("/api/tasks")
        check(st == 200, "loopback Host answered %d" % st)
    finally:
        s.stop()
    p = subprocess.run([BINARY, "serve", "--root", root, "--port", "0", "--host", "0.0.0.0"], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode != 0 and "--token" in p.stderr, "a public --host without a token is refused: %s" % p.stderr)


def case_bad_input(root):
    # A port in use.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    port = sock.getsockname()[1]
    p = subprocess.run([BINARY, "serve", "--root", root, "--port", str(port)], capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "in use" in p.stderr and "--port" in p.stderr, "port in use: %s" % p.stderr)
    sock.close()
    # A root that is a file.
    f = os.path.join(root, "afile")
    with open(f, "w") as fh:
        fh.write("x")
    p = subprocess.run([BINARY, "serve", "--root", f, "--port", "0"], capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "--root" in p.stderr, "a root that is a file: %s" % p.stderr)
    # A corrupt database: a clear error, the file untouched.
    bad = os.path.join(root, "corrupt")
    os.makedirs(bad)
    db = os.path.join(bad, "tasks.db")
    with open(db, "wb") as fh:
        fh.write(b"garbage" * 5000)
    digest = sha(db)
    p = subprocess.run([BINARY, "serve", "--root", bad, "--port", "0"], capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "tasks.db" in p.stderr and "never overwrites" in p.stderr, "corrupt db: %s" % p.stderr)
    check(sha(db) == digest and sorted(os.listdir(bad)) == ["tasks.db"], "the corrupt database was touched")
    # A template with an invalid config is listed as broken, with the loader's message.
    good = os.path.join(root, "good")
    s = Server(good)
    try:
        with open(os.path.join(good, "templates", "broken.yaml"), "w") as fh:
            fh.write("model:\n  hiden: 3\n")
        st, tpl = s.get("/api/templates")
        b = next(t for t in tpl if t["name"] == "broken.yaml")
        check(not b["ok"] and "model.hidden" in b["error"], "broken template: %s" % b)
        check(all(t["ok"] for t in tpl if t["name"] != "broken.yaml"), "the others still load")
        st, r = s.post("/api/tasks", {"template": "broken.yaml"})
        check(st == 400 and "model.hidden" in r["error"], "submitting a broken template: %d %s" % (st, r))
    finally:
        s.stop()


def case_streams(root):
    """Event streams past the cap get 503; the API keeps answering."""
    s = Server(root, "--jobs", "1")
    conns = []
    try:
        long = dict(SMALL, **{"train.epochs": "200", "train.early_stopping.patience": "0"})
        a = s.submit(long)
        b = s.submit(long)  # stays queued: its stream stays open
        refused = 0
        for _ in range(52):
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            c.request("GET", "/api/tasks/%d/events" % b)
            r = c.getresponse()
            if r.status == 503:
                refused += 1
                r.read()
                c.close()
            else:
                conns.append((c, r))
        check(refused >= 1 and len(conns) <= 48, "streams past the cap are refused (%d open, %d refused)" % (len(conns), refused))
        t0 = time.time()
        st, _ = s.get("/api/tasks")
        check(st == 200 and time.time() - t0 < 2, "the API answers with every stream open (%.2f s)" % (time.time() - t0))
        for c, r in conns:
            c.close()
        conns = []
        s.post("/api/tasks/%d/cancel" % b)
        s.post("/api/tasks/%d/cancel" % a)
        s.wait_state(a, ["cancelled"], timeout=120)
    finally:
        for c, r in conns:
            c.close()
        s.stop()


def case_shutdown(root):
    """SIGTERM to the server: its running task writes `last`, is marked interrupted, and resumes."""
    s = Server(root, "--jobs", "1")
    tid = s.submit(dict(SMALL, **{"train.epochs": "200", "train.early_stopping.patience": "0"}))
    deadline = time.time() + 120
    while s.task(tid)["progress"] <= 0 and time.time() < deadline:
        time.sleep(0.2)
    rc = s.stop(signal.SIGTERM)
    check(rc == 0, "the server exits 0 on SIGTERM (%s) %s" % (rc, s.stderr()[-500:]))
    check(not child_pids(os.path.join(root, "tasks", str(tid), "run")), "no child outlives a stopped server")
    s2 = Server(root, "--jobs", "1")
    try:
        t = s2.task(tid)
        check(t["state"] == "interrupted" and t["resumable"], "interrupted after a clean stop: %s" % t)
    finally:
        s2.stop()


CASES = {k[5:]: v for k, v in globals().items() if k.startswith("case_")}


def main():
    global BINARY
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--case", default="all", choices=["all"] + sorted(CASES))
    a = ap.parse_args()
    BINARY = os.path.abspath(a.binary)
    names = sorted(CASES) if a.case == "all" else [a.case]
    failed = 0
    for name in names:
        root = tempfile.mkdtemp(prefix="seqtrain_serve_")
        t0 = time.time()
        try:
            CASES[name](root)
            print("PASS %s (%.1f s)" % (name, time.time() - t0))
        except Exception as e:  # a Failure, or anything unexpected: name the case
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
