#!/usr/bin/env python3
"""Renders cclab's HTML report in headless Chromium and fails on a
JavaScript error, a network request (the page must be self-contained) or a
blank figure.

By default it makes its own reports on the virtual-time link (fast and
deterministic): a sweep of three algorithms with two repetitions (one panel
per run, error bars in the scatter) and one run of two flows (one panel per
flow). Each page is loaded through the DevTools protocol over a pipe
(--remote-debugging-pipe: no websocket library needed, Python's standard
library only); console errors, uncaught exceptions and failed loads are
collected; the table's sort script is clicked; every figure is checked in
the DOM (data lines and points drawn in colour, one per panel at least) and
in a screenshot of its box (enough non-white and coloured pixels). Before
that, a self-test breaks a copy of a page (a thrown error, an emptied
figure) and makes sure both are caught, so the checks can fail.

Without Chromium it runs scripts/ensure-chromium.sh; if that cannot install
it, it prints why and exits 0 (SKIPPED), or 1 with --require or under CI
(the CI variable set, as CI systems do).

Usage:
  scripts/test-report-chromium.py [--cclab PATH] [--report PAGE.html ...]
      [--screenshots DIR] [--keep DIR] [--require]
"""

import argparse
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROWSERS = ["chromium", "chromium-browser", "google-chrome-stable", "google-chrome"]


def log(msg):
    print(f"test-report-chromium: {msg}", file=sys.stderr, flush=True)


# --- finding the browser -------------------------------------------------


def find_browser():
    env = os.environ.get("CHROMIUM")
    if env:
        return shutil.which(env)
    for b in BROWSERS:
        p = shutil.which(b)
        if p:
            return p
    return None


def ensure_browser():
    """The browser's path, or (None, why)."""
    p = find_browser()
    if p:
        return p, None
    r = subprocess.run([os.path.join(ROOT, "scripts", "ensure-chromium.sh")],
                       capture_output=True, text=True)
    p = find_browser()
    if p:
        return p, None
    why = (r.stderr.strip() or r.stdout.strip() or "ensure-chromium.sh failed").splitlines()
    return None, why[-1]


# --- PNG decoding (screenshots) -------------------------------------------


def decode_png(data):
    """(width, height, channels, rows) of an 8-bit, non-interlaced RGB or
    RGBA PNG; rows are bytes objects."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", None
    while pos < len(data):
        (n,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG: depth {depth}, colour type {ctype}")
            ch = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw, stride, rows, prev = zlib.decompress(idat), w * ch, [], bytearray(w * ch)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, ch, rows


def ink(png):
    """Fraction of pixels that are not (nearly) white."""
    w, h, ch, rows = decode_png(png)
    dark = 0
    for row in rows:
        dark += sum(1 for r, g, b in zip(row[0::ch], row[1::ch], row[2::ch]) if min(r, g, b) < 235)
    return dark / max(1, w * h)


# --- the DevTools protocol over a pipe ------------------------------------


class Browser:
    def __init__(self, exe, profile):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def fds():
            import fcntl
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [exe, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking",
                "--hide-scrollbars", "--mute-audio", f"--user-data-dir={profile}",
                "about:blank"]
        self.proc = subprocess.Popen(args, preexec_fn=fds, close_fds=False,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buf, self.next_id, self.events, self.session = b"", 0, [], None

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.to_browser, self.from_browser):
            try:
                os.close(fd)
            except OSError:
                pass

    def _read(self, timeout):
        """One message, or None after `timeout` seconds."""
        end = time.monotonic() + timeout
        while b"\0" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                return None
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                err = self.proc.stderr.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"the browser closed its pipe; its stderr ends:\n{err}")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=True, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        while True:
            m = self._read(max(0.0, end - time.monotonic()))
            if m is None:
                raise TimeoutError(f"{method}: no answer in {timeout} s")
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, name, timeout=30):
        end = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == name:
                    return self.events.pop(i)
            m = self._read(max(0.0, end - time.monotonic()))
            if m is None:
                raise TimeoutError(f"no {name} in {timeout} s")
            self.events.append(m)

    def drain(self, seconds):
        end = time.monotonic() + seconds
        while (m := self._read(max(0.0, end - time.monotonic()))) is not None:
            self.events.append(m)


# --- checking a page ------------------------------------------------------

FIGURES_JS = r"""
(() => {
  // Frame colours (axes, grid) are light greys; white is the background.
  // Everything else is data: algorithm colours, including dark greys.
  const data = c => {
    const m = /^#?([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(c || '');
    if (!m) return false;
    const v = [1, 2, 3].map(i => parseInt(m[i], 16));
    return !(v[0] === v[1] && v[1] === v[2] && v[0] >= 0x90);
  };
  return JSON.stringify(Array.from(document.querySelectorAll('figure.fig')).map(f => {
    const svg = f.querySelector('svg');
    const r = svg ? svg.getBoundingClientRect() : {x: 0, y: 0, width: 0, height: 0};
    // A data line runs along the time axis (drop ticks and leader lines
    // are short; axes and grid are frame-coloured).
    const wide = p => p.getBBox().width >= 10;
    const lines = svg ? Array.from(svg.querySelectorAll('polyline'))
        .filter(p => data(p.getAttribute('stroke')) && wide(p)).length : 0;
    const dots = svg ? Array.from(svg.querySelectorAll('circle'))
        .filter(c => data(c.getAttribute('fill'))).length : 0;
    return {id: f.id, panels: parseInt(f.dataset.panels || '0'), x: r.x + window.scrollX,
            y: r.y + window.scrollY, width: r.width, height: r.height, lines, dots};
  }));
})()
"""

SORT_JS = r"""
(() => {
  const t = document.querySelector('table.sortable');
  if (!t) return 'no sortable table';
  const th = t.tHead.rows[0].cells[2];
  th.click();
  const vals = Array.from(t.tBodies[0].rows).map(r => parseFloat(r.cells[2].getAttribute('data-v')));
  for (let i = 1; i < vals.length; i++) if (vals[i - 1] > vals[i]) return 'not sorted after a click: ' + vals;
  th.click();
  const back = Array.from(t.tBodies[0].rows).map(r => parseFloat(r.cells[2].getAttribute('data-v')));
  for (let i = 1; i < back.length; i++) if (back[i - 1] < back[i]) return 'not sorted descending after a second click: ' + back;
  return 'ok';
})()
"""


def js_problems(events):
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("uncaught: " + (d.get("exception", {}).get("description") or d.get("text", "?")))
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console.error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append("log: " + p["entry"].get("text", ""))
        elif m == "Network.requestWillBeSent":
            url = p.get("request", {}).get("url", "")
            if not url.startswith(("file:", "data:", "about:")):
                out.append("network request (the page must be self-contained): " + url)
    return out


def check_page(exe, page, shots=None, profile=None):
    """Problems found on `page` (empty: it passes)."""
    problems = []
    b = Browser(exe, profile)
    try:
        target = b.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        b.session = b.call("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)["sessionId"]
        for dom in ("Runtime", "Log", "Page", "Network"):
            b.call(f"{dom}.enable")
        b.call("Emulation.setDeviceMetricsOverride", {"width": 1100, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        b.call("Page.navigate", {"url": "file://" + os.path.abspath(page)})
        b.wait_event("Page.loadEventFired", timeout=60)
        b.drain(0.5)
        sort = b.call("Runtime.evaluate", {"expression": SORT_JS, "returnByValue": True})["result"].get("value")
        if sort != "ok":
            problems.append(f"table sorting: {sort}")
        figs = json.loads(b.call("Runtime.evaluate", {"expression": FIGURES_JS, "returnByValue": True})["result"]["value"])
        b.drain(0.3)
        problems += js_problems(b.events)
        if len(figs) < 5:
            problems.append(f"{len(figs)} figure(s) on the page, expected 5 (scatter, cwnd, rtt, goodput, queue)")
        for f in figs:
            problems += check_figure(b, f, shots)
        if shots:
            full = b.call("Page.captureScreenshot", {"format": "png", "clip": {"x": 0, "y": 0, "width": 1100, "height": 900, "scale": 1}})
            with open(os.path.join(shots, "page.png"), "wb") as out:
                out.write(__import__("base64").b64decode(full["data"]))
    finally:
        b.close()
    return problems


def screenshot(b, f, scale):
    import base64
    clip = {"x": f["x"], "y": f["y"], "width": f["width"], "height": f["height"], "scale": scale}
    return base64.b64decode(b.call("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})["data"])


def check_figure(b, f, shots):
    """Problems of one figure: too small, fewer data lines (or scatter
    points) than panels, or a screenshot of its box nearly all white."""
    name, out = f["id"], []
    if f["width"] < 100 or f["height"] < 100:
        return [f"{name}: drawn {f['width']:.0f}x{f['height']:.0f} px"]
    want = max(1, f["panels"])
    drawn = f["dots"] if name == "fig-scatter" else f["lines"]
    if drawn < want:
        out.append(f"{name}: {drawn} data line(s) or point(s) drawn for {want} panel(s)")
    if shots:
        with open(os.path.join(shots, name + ".png"), "wb") as o:
            o.write(screenshot(b, f, 1))
    dark = ink(screenshot(b, f, 0.5))
    if dark < 0.005:
        out.append(f"{name}: blank ({dark:.2%} of its pixels are not white)")
    return out


# --- making reports ---------------------------------------------------------


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        log("failed: " + " ".join(cmd) + "\n" + r.stdout[-2000:] + r.stderr[-4000:])
        sys.exit(1)
    return r


def make_reports(cclab, work):
    sweep = os.path.join(work, "sweep.toml")
    with open(sweep, "w") as f:
        f.write(f'scenario = "{ROOT}/scenarios/default.toml"\nrepetitions = 2\nseed = 1\n'
                '[grid]\n"flows.0.cc" = ["cubic", "vegas", "bbr2"]\n"duration" = ["3s"]\n'
                '"link.loss" = ["0.2%"]\n')
    run([cclab, "sweep", sweep, "--link", "sim", "--quiet", "--out", os.path.join(work, "sweep")])
    run([cclab, "report", os.path.join(work, "sweep"), "--out", os.path.join(work, "sweep.html")])
    run([cclab, "run", "--link", "sim", "--quiet", "--cc", "cubic", "--cc", "westwood+",
         "--duration", "3s", "--repetitions", "1", "--rate", "10mbit", "--rtt", "30ms",
         "--out", os.path.join(work, "flows")])
    run([cclab, "report", os.path.join(work, "flows"), "--out", os.path.join(work, "flows.html")])
    return [os.path.join(work, "sweep.html"), os.path.join(work, "flows.html")]


def broken_copy(page, work):
    """A copy with an uncaught error and its first figure emptied."""
    with open(page) as f:
        html = f.read()
    start = html.index("<svg", html.index('<figure class="fig"'))
    end = html.index("</svg>", start)
    head_end = html.index(">", start) + 1
    html = html[:head_end] + html[end:]
    html = html.replace("</body>", "<script>throw new Error('self-test');</script></body>")
    out = os.path.join(work, "broken.html")
    with open(out, "w") as f:
        f.write(html)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cclab", help="cclab binary (default: build target/release/cclab)")
    ap.add_argument("--report", action="append", help="check this page instead of making reports")
    ap.add_argument("--screenshots", help="save screenshots (page top and each figure) of the first page here")
    ap.add_argument("--keep", help="work in this directory and keep it")
    ap.add_argument("--require", action="store_true",
                    help="fail instead of skipping without Chromium (the default under CI, when CI is set)")
    a = ap.parse_args()
    t0 = time.monotonic()
    exe, why = ensure_browser()
    require = a.require or os.environ.get("CI", "") not in ("", "0", "false", "FALSE", "False")
    if not exe:
        if require:
            log(f"FAILED: cannot run{' under CI' if not a.require else ''}: no Chromium: {why}")
            return 1
        log(f"SKIPPED: no Chromium: {why} (under CI=true this is a failure)")
        return 0
    work = a.keep or tempfile.mkdtemp(prefix="cclab-report-test-")
    os.makedirs(work, exist_ok=True)
    try:
        pages = a.report
        if not pages:
            cclab = a.cclab
            if not cclab:
                run(["./scripts/ws-build.sh"], cwd=ROOT)
                cclab = os.path.join(ROOT, "target", "release", "cclab")
            pages = make_reports(cclab, work)
        profile = os.path.join(work, "profile")
        caught = check_page(exe, broken_copy(pages[0], work), profile=profile)
        if not any("self-test" in p for p in caught) or not any("blank" in p for p in caught):
            log("FAIL: the self-test's broken page was not caught: " + "; ".join(caught))
            return 1
        log(f"self-test: a broken copy of the page is caught ({len(caught)} problem(s))")
        failed = False
        for i, page in enumerate(pages):
            shots = a.screenshots if i == 0 else None
            if shots:
                os.makedirs(shots, exist_ok=True)
            problems = check_page(exe, page, shots, profile=profile)
            for p in problems:
                log(f"FAIL: {page}: {p}")
            failed |= bool(problems)
            if not problems:
                log(f"ok: {page}")
        log(f"{'FAILED' if failed else 'passed'} in {time.monotonic() - t0:.1f} s ({os.path.basename(exe)})")
        return 1 if failed else 0
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
