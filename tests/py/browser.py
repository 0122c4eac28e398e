# Minimal headless-Chromium driver for browser tests of pages served by our C++ server.
# Speaks the Chrome DevTools Protocol directly over a websocket (stdlib + Debian's
# python3-websocket), so no Selenium / chromedriver package is needed on Debian.
# Run with /usr/bin/python3.  Usage: with Browser() as b: b.goto(url); b.wait_for("...")
import base64
import collections
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import websocket  # Debian python3-websocket (websocket-client)

__all__ = ["Browser", "BrowserError", "chromium_path"]


class BrowserError(Exception):
    """Any failure driving the browser: launch, protocol, JS exception, timeout."""

    def __init__(self, msg, transient=False):
        super().__init__(msg)
        # True for protocol errors that can go away by themselves (e.g. the page's
        # execution context was replaced by a navigation); wait_for retries those.
        self.transient = transient


def chromium_path():
    """Path of the chromium binary, or None if it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Browser:
    """One headless chromium with one page (tab), driven over CDP.

    Console errors and uncaught page exceptions are appended to self.errors (strings).
    Every wait is bounded by `timeout` seconds and raises BrowserError on expiry.
    """

    def __init__(self, timeout=30.0, window=(1280, 900)):
        self.timeout = float(timeout)
        self.errors = []
        self._events = collections.deque(maxlen=10000)  # undispatched-to-waiter events
        self._next_id = 0
        self._ws = None
        self._proc = None
        self._closed = False
        self._stderr = None
        self._tmp = tempfile.mkdtemp(prefix="seqtrain-chromium-")
        try:
            self._launch(window)
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------- launch
    def _launch(self, window):
        exe = chromium_path()
        if not exe:
            raise BrowserError("chromium not found on PATH (apt-get install chromium)")
        profile = os.path.join(self._tmp, "profile")
        os.mkdir(profile)
        self._stderr_path = os.path.join(self._tmp, "chromium.log")
        self._stderr = open(self._stderr_path, "wb")
        args = [
            exe,
            "--headless=new",
            "--no-sandbox",  # required when running as root
            "--disable-gpu",
            "--remote-debugging-port=0",
            "--user-data-dir=" + profile,
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",  # layout width == window width; stable screenshots
            "--no-proxy-server",  # never route 127.0.0.1 test traffic via an env proxy
            "--window-size=%d,%d" % (int(window[0]), int(window[1])),
            "about:blank",
        ]
        # Own session/process group so close() can reap the renderer/zygote children too.
        self._proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=self._stderr, stderr=self._stderr,
            start_new_session=True)
        deadline = time.monotonic() + self.timeout
        port = self._read_port(profile, deadline)
        ws_url = self._page_ws_url(port, deadline)
        try:
            self._ws = websocket.create_connection(
                ws_url, timeout=max(0.1, deadline - time.monotonic()),
                suppress_origin=True,  # chromium rejects foreign Origin headers
                http_no_proxy=["127.0.0.1", "localhost"])
        except Exception as e:
            raise BrowserError("cannot connect to DevTools websocket %s: %s%s"
                               % (ws_url, e, self._exit_info()))
        self._call("Page.enable")
        self._call("Runtime.enable")
        # --window-size is the outer window: headless=new still subtracts ~140 px of
        # (invisible) browser UI from the height, so pin the viewport explicitly.
        self._call("Emulation.setDeviceMetricsOverride", {
            "width": int(window[0]), "height": int(window[1]),
            "deviceScaleFactor": 1, "mobile": False})

    def _read_port(self, profile, deadline):
        path = os.path.join(profile, "DevToolsActivePort")
        while True:
            self._check_alive("while starting")
            try:
                with open(path) as f:
                    lines = f.read().splitlines()
                if len(lines) >= 2 and lines[0].strip().isdigit():
                    return int(lines[0])
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                raise BrowserError("chromium did not write %s within %.0fs%s"
                                   % (path, self.timeout, self._stderr_tail()))
            time.sleep(0.05)

    def _page_ws_url(self, port, deadline):
        url = "http://127.0.0.1:%d/json/list" % port
        last = None
        while True:
            self._check_alive("while listing targets")
            try:
                with _NO_PROXY.open(url, timeout=max(0.1, deadline - time.monotonic())) as r:
                    targets = json.loads(r.read().decode("utf-8"))
                for t in targets:
                    if (t.get("type") == "page" and t.get("webSocketDebuggerUrl")
                            and not t.get("url", "").startswith("chrome")):
                        return t["webSocketDebuggerUrl"]
                last = "no page target in %s" % [(t.get("type"), t.get("url")) for t in targets]
            except (OSError, ValueError) as e:
                last = e
            if time.monotonic() > deadline:
                raise BrowserError("no DevTools page target at %s (%s)%s"
                                   % (url, last, self._stderr_tail()))
            time.sleep(0.05)

    # ------------------------------------------------------------- diagnostics
    def _stderr_tail(self, n=40):
        try:
            with open(self._stderr_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 16384))
                lines = f.read().decode("utf-8", "replace").splitlines()[-n:]
        except (OSError, AttributeError):
            return ""
        return "\n--- chromium stderr (tail) ---\n" + "\n".join(lines) if lines else ""

    def _exit_info(self, wait=0.0):
        if self._proc is not None and wait > 0:
            try:
                self._proc.wait(timeout=wait)  # connection dropped: did chromium die?
            except subprocess.TimeoutExpired:
                pass
        if self._proc is not None and self._proc.poll() is not None:
            return "\nchromium exited with status %s%s" % (self._proc.returncode,
                                                         self._stderr_tail())
        return ""

    def _check_alive(self, when):
        if self._proc is None or self._proc.poll() is not None:
            raise BrowserError("chromium exited early %s (status %s)%s" % (
                when, None if self._proc is None else self._proc.returncode,
                self._stderr_tail()))

    # ---------------------------------------------------------------- protocol
    def _recv(self, deadline, waiting_for):
        """Receive one message (dict) before deadline; raise BrowserError otherwise."""
        if self._ws is None:
            raise BrowserError("browser is closed")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BrowserError("timed out waiting for %s%s" % (waiting_for, self._exit_info()))
        self._ws.settimeout(remaining)
        try:
            raw = self._ws.recv()
        except websocket.WebSocketTimeoutException:
            raise BrowserError("timed out waiting for %s%s" % (waiting_for, self._exit_info()))
        except (websocket.WebSocketException, OSError) as e:
            raise BrowserError("DevTools connection lost waiting for %s: %r%s"
                               % (waiting_for, e, self._exit_info(wait=1.0)))
        if not raw:
            raise BrowserError("DevTools connection closed waiting for %s%s"
                               % (waiting_for, self._exit_info(wait=1.0)))
        msg = json.loads(raw)
        if "method" in msg and "id" not in msg:
            self._on_event(msg)
        return msg

    def _on_event(self, msg):
        method, p = msg["method"], msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") == "error":
            self.errors.append("console.error: " + " ".join(
                _remote_to_str(a) for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            self.errors.append("exception: " + _exception_text(p.get("exceptionDetails", {})))
        self._events.append(msg)

    def _call(self, method, params=None, timeout=None):
        """Send a command and return its result; events arriving meanwhile are queued."""
        if self._ws is None:
            raise BrowserError("browser is closed")
        self._next_id += 1
        mid = self._next_id
        try:
            self._ws.send(json.dumps({"id": mid, "method": method, "params": params or {}}))
        except (websocket.WebSocketException, OSError) as e:
            raise BrowserError("cannot send %s: %r%s" % (method, e, self._exit_info(wait=1.0)))
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            msg = self._recv(deadline, "reply to " + method)
            if msg.get("id") != mid:
                continue  # event (already queued) or a stale reply to a timed-out call
            if "error" in msg:
                err = msg["error"]
                text = err.get("message", "")
                if err.get("data"):
                    text += " (%s)" % err["data"]
                transient = "context" in text.lower()
                raise BrowserError("%s failed: %s" % (method, text), transient=transient)
            return msg.get("result", {})

    def _wait_event(self, method, deadline, pred=None):
        """Return the first queued-or-arriving event `method` satisfying pred."""
        for ev in list(self._events):
            if ev["method"] == method and (pred is None or pred(ev.get("params", {}))):
                self._events.remove(ev)
                return ev.get("params", {})
        while True:
            msg = self._recv(deadline, "event " + method)
            if msg.get("method") == method and "id" not in msg and (
                    pred is None or pred(msg.get("params", {}))):
                self._events.remove(msg)
                return msg.get("params", {})

    def _drop_events(self, method):
        for ev in [e for e in self._events if e["method"] == method]:
            self._events.remove(ev)

    # --------------------------------------------------------------- public API
    def goto(self, url):
        """Navigate the page to url and wait for its load event."""
        self._drop_events("Page.loadEventFired")
        deadline = time.monotonic() + self.timeout
        r = self._call("Page.navigate", {"url": url})
        if r.get("errorText"):
            raise BrowserError("navigation to %s failed: %s" % (url, r["errorText"]))
        if not r.get("loaderId"):
            return  # same-document (fragment) navigation: no load event follows
        try:
            self._wait_event("Page.loadEventFired", deadline)
        except BrowserError as e:
            raise BrowserError("page %s did not finish loading: %s" % (url, e))

    def eval(self, js, timeout=None):
        """Evaluate a JS expression (promises awaited); return its JSON value."""
        r = self._call("Runtime.evaluate", {
            "expression": js, "awaitPromise": True, "returnByValue": True,
            "userGesture": True}, timeout=timeout)
        if "exceptionDetails" in r:
            raise BrowserError("JS exception in eval(%s): %s"
                               % (_short(js), _exception_text(r["exceptionDetails"])))
        res = r.get("result", {})
        if "value" in res:
            return res["value"]
        if "unserializableValue" in res:  # NaN, Infinity, -0, bigint
            return res["unserializableValue"]
        return None  # undefined

    def wait_for(self, js, timeout=None, what=None):
        """Poll eval(js) every 100 ms until truthy; return that value."""
        timeout = self.timeout if timeout is None else float(timeout)
        deadline = time.monotonic() + timeout
        last = None
        while True:
            remaining = deadline - time.monotonic()
            try:
                last = self.eval(js, timeout=max(0.1, remaining))
                if last:
                    return last
            except BrowserError as e:
                if not e.transient or time.monotonic() >= deadline:
                    raise
                last = "<%s>" % e
            if time.monotonic() + 0.1 > deadline:
                raise BrowserError("timed out after %.1fs waiting for %s (last value: %r)%s"
                                   % (timeout, what or _short(js), last, self._exit_info()))
            time.sleep(0.1)

    def screenshot(self, path, full_page=False):
        """Save a PNG of the viewport (or the whole page) to path, atomically."""
        params = {"format": "png"}
        if full_page:
            m = self._call("Page.getLayoutMetrics")
            size = m.get("cssContentSize") or m.get("contentSize")
            params["clip"] = {"x": 0, "y": 0, "width": size["width"],
                              "height": size["height"], "scale": 1}
            params["captureBeyondViewport"] = True
        data = base64.b64decode(self._call("Page.captureScreenshot", params)["data"])
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".shot-", suffix=".png", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return path

    def set_cookie(self, name, value, url):
        """Set a cookie for url (call before goto to have it sent with the request)."""
        r = self._call("Network.setCookie", {"name": name, "value": value, "url": url})
        if r.get("success") is False:
            raise BrowserError("Network.setCookie %s for %s was rejected" % (name, url))

    @property
    def pid(self):
        return None if self._proc is None else self._proc.pid

    def close(self):
        """Shut chromium down (gracefully, then by force) and delete its profile. Idempotent."""
        if self._closed:
            return
        self._closed = True
        asked = False
        if self._ws is not None and self._proc is not None and self._proc.poll() is None:
            try:
                self._call("Browser.close", timeout=3.0)
                asked = True
            except BrowserError:
                pass  # connection drops as the browser exits, or it is wedged: kill below
        if self._ws is not None:
            try:
                self._ws.close(timeout=1)
            except Exception:
                pass
            self._ws = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5 if asked else 0.2)
            except subprocess.TimeoutExpired:
                self._killpg(signal.SIGTERM)
                try:
                    self._proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    pass
            self._killpg(signal.SIGKILL)  # stray zygote/renderer children, if any
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self._stderr is not None:
            self._stderr.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _killpg(self, sig):
        try:
            os.killpg(self._proc.pid, sig)  # process group == pid (start_new_session)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _short(s, n=120):
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[:n - 3] + "..."


def _remote_to_str(obj):
    if "value" in obj:
        v = obj["value"]
        return v if isinstance(v, str) else json.dumps(v)
    return obj.get("description") or obj.get("unserializableValue") or obj.get("type", "?")


def _exception_text(d):
    exc = d.get("exception") or {}
    text = exc.get("description") or ("value" in exc and str(exc["value"])) or \
        d.get("text") or "exception"
    if d.get("url"):
        text += " (at %s:%d:%d)" % (d["url"], d.get("lineNumber", 0) + 1,
                                    d.get("columnNumber", 0) + 1)
    return text
