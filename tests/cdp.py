"""A minimal Chrome DevTools Protocol client over --remote-debugging-pipe.

The pipe transport needs no websocket library and no open port: Chromium reads
NUL-terminated JSON commands from fd 3 and writes replies and events to fd 4.
Used by the report tests to open a page in a real headless Chromium and record
every network request, console message and exception it causes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

#: Flags for headless Chromium as root in a container, with no background traffic.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--hide-scrollbars",
)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class CDPError(RuntimeError):
    pass


class Chromium:
    """One headless browser; `call` sends a command, `events` holds what it reported."""

    def __init__(self, executable: str, profile: Path, timeout: float = 60.0):
        self.timeout = timeout
        self.events: list[dict] = []
        self._ids = 0
        self._replies: queue.Queue = queue.Queue()
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # Park the child's ends above 3 and 4 so the dup2 calls below cannot collide.
        high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD_CLOEXEC, 10)
        high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_child_r)
        os.close(from_child_w)

        def wire_pipes() -> None:  # runs in the child, before exec
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.log = (profile / "chromium.log").open("wb")
        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe"],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            close_fds=False,  # fds are non-inheritable by default; only 3 and 4 pass
            preexec_fn=wire_pipes,
        )
        os.close(high_r)
        os.close(high_w)
        self._out = os.fdopen(to_child_w, "wb", buffering=0)
        self._in = os.fdopen(from_child_r, "rb", buffering=0)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = self._in.read(65536)
            if not chunk:
                self._replies.put(None)
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    self._replies.put(message)
                else:
                    self.events.append(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._ids += 1
        message: dict = {"id": self._ids, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._out.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                reply = self._replies.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise CDPError(f"no reply to {method} within {self.timeout}s") from None
            if reply is None:
                raise CDPError(f"chromium closed the pipe during {method}")
            if reply["id"] == self._ids:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def wait_for(self, method: str, session: str | None = None) -> dict:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for e in self.events:
                if e.get("method") == method and (session is None or e.get("sessionId") == session):
                    return e
            time.sleep(0.05)
        raise CDPError(f"no {method} event within {self.timeout}s")

    def open_page(self, url: str, width: int = 1280, height: int = 900) -> str:
        """Open `url` in a new tab with every reporting domain on; returns the session id."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        self.call("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired", session)
        return session

    def evaluate(self, session: str, expression: str):
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=session,
        )
        if "exceptionDetails" in result:
            raise CDPError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, session: str, path: Path, full_page: bool = True) -> Path:
        import base64

        params: dict = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
            params["captureBeyondViewport"] = True
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": size["width"],
                "height": min(size["height"], 16000),
                "scale": 1,
            }
        data = self.call("Page.captureScreenshot", params, session=session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def requests(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions, and browser log errors
        (CSP violations and failed loads are reported there)."""
        out = []
        for e in self.events:
            method, p = e.get("method"), e.get("params", {})
            if method == "Runtime.consoleAPICalled" and p.get("type") in (
                "error",
                "warning",
                "assert",
            ):
                out.append(f"console.{p['type']}: {[a.get('value') for a in p.get('args', [])]}")
            elif method == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails']}")
            elif method == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                entry = p["entry"]
                out.append(f"log {entry['level']} ({entry.get('source')}): {entry.get('text')}")
        return out

    def close(self) -> None:
        with contextlib.suppress(CDPError):
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        self._reader.join(timeout=10)  # ends at EOF, once chromium has exited
        self._in.close()
        self.log.close()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
