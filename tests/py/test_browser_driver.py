#!/usr/bin/python3
# Self-test of tests/py/browser.py (the CDP headless-chromium driver) against a tiny page
# served from a thread.  Run: /usr/bin/python3 tests/py/test_browser_driver.py
# Exit 0 = pass, 77 = skipped (no chromium), anything else = failure.
import http.server
import json
import os
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import Browser, BrowserError, chromium_path  # noqa: E402

PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>driver self-test</title></head>
<body>
<button id="go" onclick="setTimeout(function () {
  var d = document.createElement('div'); d.id = 'late'; d.textContent = 'arrived';
  document.body.appendChild(d); }, 300)">go</button>
<pre id="data">loading</pre>
<script>
fetch('/api/data').then(function (r) { return r.json(); })
  .then(function (j) { window.apiData = j;
    document.getElementById('data').textContent = JSON.stringify(j); });
</script>
</body></html>
"""
API = {"items": [1, 2, 3], "name": "seqtrain", "ok": True}


class Handler(http.server.BaseHTTPRequestHandler):
    cookies_seen = []

    def do_GET(self):
        Handler.cookies_seen.append(self.headers.get("Cookie"))
        if self.path == "/":
            body, ctype = PAGE, "text/html; charset=utf-8"
        elif self.path == "/api/data":
            body, ctype = json.dumps(API).encode(), "application/json"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); treat it as gone
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def group_members(pgid):
    """pids still in chromium's process group (renderers, zygotes, ...)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(d))
    return out


def main():
    if not chromium_path():
        print("SKIP: chromium not installed")
        return 77
    t0 = time.monotonic()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % srv.server_address[1]
    step = "launch"
    try:
        with Browser(timeout=20) as b, tempfile.TemporaryDirectory() as tmp:
            pid, profile_dir = b.pid, b._tmp
            step = "set_cookie"
            b.set_cookie("session", "abc123", base + "/")
            step = "goto"
            b.goto(base + "/")
            check(b.eval("document.title") == "driver self-test", "title mismatch")
            check(Handler.cookies_seen and Handler.cookies_seen[0] == "session=abc123",
                  "cookie not sent: %r" % Handler.cookies_seen[:1])
            check(b.eval("[window.innerWidth, window.innerHeight]") == [1280, 900],
                  "viewport %r != [1280, 900]" % b.eval("[innerWidth, innerHeight]"))

            step = "fetch + wait_for"
            got = b.wait_for("window.apiData", what="JSON fetch result")
            check(got == API, "fetched %r != %r" % (got, API))

            step = "click + delayed element"
            check(b.eval("document.getElementById('late')") is None, "element present early")
            t = time.monotonic()
            b.eval("document.getElementById('go').click()")
            txt = b.wait_for("document.getElementById('late')?.textContent",
                             timeout=5, what="#late after click")
            dt = time.monotonic() - t
            check(txt == "arrived", "late text %r" % txt)
            check(dt >= 0.25, "delayed element arrived after %.2fs (< its 0.3s delay)" % dt)

            step = "structured eval"
            v = b.eval("({a: 1, b: [1, 'x', null, true], c: {d: 2.5}})")
            check(v == {"a": 1, "b": [1, "x", None, True], "c": {"d": 2.5}}, "dict %r" % v)
            check(b.eval("undefined") is None, "undefined -> None")
            check(b.eval("new Promise(r => setTimeout(() => r(42), 50))") == 42, "promise")

            step = "eval exception"
            try:
                b.eval("(function () { throw new Error('boom-eval'); })()")
                raise AssertionError("eval of a throwing expression did not raise")
            except BrowserError as e:
                check("boom-eval" in str(e), "exception text missing: %s" % e)
            try:
                b.eval("Promise.reject(new TypeError('boom-async'))")
                raise AssertionError("rejected promise did not raise")
            except BrowserError as e:
                check("boom-async" in str(e), "rejection text missing: %s" % e)

            step = "wait_for timeout"
            t = time.monotonic()
            try:
                b.wait_for("window.neverSet", timeout=0.5, what="the never-set flag")
                raise AssertionError("wait_for did not time out")
            except BrowserError as e:
                check("the never-set flag" in str(e), "wait_for message: %s" % e)
            check(time.monotonic() - t < 3, "wait_for(timeout=0.5) took %.1fs"
                  % (time.monotonic() - t))

            step = "console errors"
            check(b.errors == [], "unexpected errors before console test: %r" % b.errors)
            b.eval("console.error('bad thing', 7); console.log('fine')")
            b.eval("setTimeout(() => { throw new Error('uncaught-x'); }, 0)")
            b.wait_for("new Promise(r => setTimeout(() => r(true), 50))")
            check(any("bad thing 7" in e for e in b.errors), "console.error missing: %r"
                  % b.errors)
            check(any("uncaught-x" in e for e in b.errors), "uncaught exc missing: %r"
                  % b.errors)
            check(len(b.errors) == 2, "expected 2 errors, got %r" % b.errors)

            step = "screenshot"
            b.eval("document.body.style.height = '2000px'")
            for full, want in ((False, (1280, 900)), (True, (1280, 2016))):
                png = os.path.join(tmp, "shot%d.png" % full)
                b.screenshot(png, full_page=full)
                with open(png, "rb") as f:
                    data = f.read()
                check(data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG: %r" % data[:8])
                check(len(data) > 100, "PNG too small (%d bytes)" % len(data))
                size = struct.unpack(">II", data[16:24])  # IHDR width, height
                check(size == want, "screenshot(full_page=%s) is %r, want %r"
                      % (full, size, want))
            check(sorted(os.listdir(tmp)) == ["shot0.png", "shot1.png"],
                  "leftover temp files: %r" % os.listdir(tmp))

            step = "goto again"
            b.goto(base + "/")
            check(b.eval("document.getElementById('late')") is None, "page not reloaded")
            step = "navigation error"
            try:
                b.goto("http://127.0.0.1:1/")
                raise AssertionError("goto to a closed port did not raise")
            except BrowserError as e:
                check("ERR_" in str(e), "navigation error text: %s" % e)

        step = "close"
        deadline = time.monotonic() + 5
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        check(not pid_alive(pid), "chromium pid %d still alive after close()" % pid)
        check(not group_members(pid), "chromium children left: %r" % group_members(pid))
        check(not os.path.exists(profile_dir), "temp dir %s not removed" % profile_dir)
        b.close()  # idempotent
    except (AssertionError, BrowserError) as e:
        print("FAIL [%s]: %s" % (step, e))
        return 1
    finally:
        srv.shutdown()
        srv.server_close()
    print("OK: browser driver self-test passed in %.1fs" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
