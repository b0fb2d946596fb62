"""Headless Chromium driven over the Chrome DevTools Protocol, for the HTML report's tests
and benchmark. Standard library only: the protocol runs over a pipe
(--remote-debugging-pipe: JSON messages ending in a NUL byte on file descriptors 3 and 4).

    with Browser() as browser:                  # None-safe: find_chromium() first
        page = browser.open("file:///tmp/report.html", width=1400, height=1000)
        page.evaluate("document.title")
        page.click("#flame g.f")                # a real mouse click at the element
        png = page.screenshot()                 # PNG bytes
        page.requests                           # every network request the page made

Not thread-safe; one page at a time.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import zlib

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    """The Chromium binary: $PROTON_CHROMIUM, else the first of CANDIDATES on PATH."""
    given = os.environ.get("PROTON_CHROMIUM")
    if given:
        return given if os.path.exists(given) else shutil.which(given)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, binary=None, timeout=60.0) -> None:
        self.binary = binary or find_chromium()
        if not self.binary:
            raise BrowserError("no Chromium found (install Debian's chromium package)")
        self.timeout = timeout
        self._next = 0
        self._events = []
        self._buffer = b""
        self._profile = tempfile.mkdtemp(prefix="proton_chromium_")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire():  # in the child: the protocol on fds 3 (commands) and 4 (replies)
            r, w = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        args = [
            self.binary,
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--mute-audio",
            f"--user-data-dir={self._profile}",
            "about:blank",
        ]
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,
            close_fds=False,  # fds 3 and 4, made by wire(), must stay open through exec
        )
        os.close(to_child_r)
        os.close(from_child_w)
        os.set_blocking(self._from_child, False)

    # ------------------------------------------------------------------ protocol
    def send(self, method, params=None, session=None, timeout=None) -> dict:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for reply in self._read(deadline):
                if reply.get("id") == self._next:
                    if "error" in reply:
                        raise BrowserError(f"{method}: {reply['error'].get('message')}")
                    return reply.get("result", {})
                self._events.append(reply)

    def _read(self, deadline):
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer in time")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise BrowserError("Chromium closed the DevTools pipe")
                self._buffer += chunk
        *messages, self._buffer = self._buffer.split(b"\0")
        return [json.loads(m) for m in messages if m]

    def wait_event(self, method, session=None, timeout=None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for k, e in enumerate(self._events):
                if e.get("method") == method and (session is None or e.get("sessionId") == session):
                    del self._events[k]
                    return e.get("params", {})
            self._events += self._read(deadline)

    def events(self, method, session=None) -> list:
        return [
            e.get("params", {})
            for e in self._events
            if e.get("method") == method and (session is None or e.get("sessionId") == session)
        ]

    # ------------------------------------------------------------------ pages
    def open(self, url, width=1400, height=1000, ready="window.protonReport") -> Page:
        """A new tab showing url, with network events recorded from before it loads; waits
        until the expression `ready` is truthy."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, session, target)
        for domain in ("Network", "Page", "Runtime"):
            self.send(f"{domain}.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        started = time.monotonic()
        self.send("Page.navigate", {"url": url}, session=session)
        page.wait_for(ready)
        page.wall_s = time.monotonic() - started
        return page

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                try:
                    self.send("Browser.close", timeout=5)
                except (BrowserError, OSError):
                    pass
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        finally:
            for fd in (self._to_child, self._from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    def __init__(self, browser: Browser, session: str, target: str) -> None:
        self.browser, self.session, self.target = browser, session, target
        self.wall_s = None

    def send(self, method, params=None):
        return self.browser.send(method, params, session=self.session)

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})

    def evaluate(self, expression):
        """The expression's value (JSON-serialisable), awaiting a promise."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = (details.get("exception") or {}).get("description") or details.get("text")
            raise BrowserError(f"{expression[:80]}: {text}")
        return result["result"].get("value")

    def wait_for(self, expression, timeout=None) -> None:
        deadline = time.monotonic() + (timeout or self.browser.timeout)
        while not self.evaluate(f"!!({expression})"):
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression}")
            time.sleep(0.02)

    def box(self, selector, index=0):
        """(x, y) of the centre of the index-th element matching selector, in the viewport,
        scrolled into view first."""
        found = self.evaluate(
            f"""(() => {{ const e = document.querySelectorAll({json.dumps(selector)})[{index}];
            if (!e) return null; e.scrollIntoView({{block: "center", inline: "center"}});
            const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()"""
        )
        if found is None:
            raise BrowserError(f"no element {selector} [{index}]")
        return found

    def mouse(self, kind, x, y, button="left", clicks=1):
        self.send(
            "Input.dispatchMouseEvent",
            {"type": kind, "x": x, "y": y, "button": button, "clickCount": clicks},
        )

    def click(self, selector, index=0) -> None:
        x, y = self.box(selector, index)
        self.click_at(x, y)

    def click_at(self, x, y) -> None:
        self.mouse("mouseMoved", x, y, button="none", clicks=0)
        self.mouse("mousePressed", x, y)
        self.mouse("mouseReleased", x, y)

    def hover(self, selector, index=0) -> None:
        x, y = self.box(selector, index)
        self.mouse("mouseMoved", x, y, button="none", clicks=0)

    def type(self, selector, text) -> None:
        """Focuses the element, selects its text and types over it."""
        self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.focus(); e.select(); }})()"
        )
        self.send("Input.insertText", {"text": text})

    def screenshot(self, full_page=False) -> bytes:
        params = {"format": "png", "captureBeyondViewport": full_page}
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])

    @property
    def requests(self) -> list:
        """URLs of every request the page made (Network.requestWillBeSent), the page's own
        document included."""
        return [
            e["request"]["url"]
            for e in self.browser.events("Network.requestWillBeSent", self.session)
            if "request" in e
        ]

    def console_errors(self) -> list:
        out = []
        for e in self.browser.events("Runtime.exceptionThrown", self.session):
            details = e.get("exceptionDetails", {})
            out.append((details.get("exception") or {}).get("description") or details.get("text"))
        return out


# ---------------------------------------------------------------------- PNG
def png_pixels(data: bytes):
    """(width, height, rows of bytes, bytes per pixel) of an 8-bit RGB or RGBA PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    depth, color, interlace = header[8], header[9], header[12]
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError("only 8-bit, non-interlaced RGB/RGBA PNGs are decoded")
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        _unfilter(kind, line, previous, bpp)
        rows.append(bytes(line))
        previous = line
    return width, height, rows, bpp


def _unfilter(kind, line, prev, bpp) -> None:
    n = len(line)
    if kind == 0:
        return
    if kind == 1:
        for i in range(bpp, n):
            line[i] = (line[i] + line[i - bpp]) & 0xFF
    elif kind == 2:
        for i in range(n):
            line[i] = (line[i] + prev[i]) & 0xFF
    elif kind == 3:
        for i in range(n):
            left = line[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
    elif kind == 4:
        for i in range(n):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[i] = (line[i] + pred) & 0xFF
    else:
        raise ValueError(f"bad PNG filter {kind}")


def distinct_colors(png: bytes, step=2) -> int:
    """How many distinct RGB colours a PNG holds (every step-th pixel of every step-th row)."""
    width, height, rows, bpp = png_pixels(png)
    seen = set()
    for y in range(0, height, step):
        row = rows[y]
        for x in range(0, width * bpp, bpp * step):
            seen.add(row[x : x + 3])
    return len(seen)
