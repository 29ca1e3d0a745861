"""Headless Chromium over the DevTools protocol (--remote-debugging-pipe): load a page, collect
its console errors and network requests, read the DOM, take a screenshot.

Example::

    with Chromium() as browser:
        page = browser.load(Path("report.html"))
        assert not page.errors
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",  # root in a container: the sandbox needs user namespaces we lack
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--remote-debugging-pipe",
)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class Page:
    """What one page load produced."""

    errors: list[str] = field(default_factory=list)  # console errors, exceptions, log errors
    requests: list[str] = field(default_factory=list)  # every URL the page asked for


class Chromium:
    """One headless Chromium process, driven over its DevTools pipe (fds 3 and 4)."""

    def __init__(self, binary: str | None = None, timeout_s: float = 30.0) -> None:
        self.binary = binary or find_chromium()
        if self.binary is None:
            raise RuntimeError("no chromium on PATH: apt-get install -y chromium")
        self.timeout_s = timeout_s
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict[str, Any]] = []

    def __enter__(self) -> Chromium:
        self.profile = tempfile.mkdtemp(prefix="gpufleet-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire() -> None:  # in the child: the pipe must sit on fds 3 (in) and 4 (out)
            # Through high numbers first, in case the pipe's own fds are 3 or 4 crossed over.
            os.dup2(to_browser_r, 103)
            os.dup2(from_browser_w, 104)
            os.dup2(103, 3)
            os.dup2(104, 4)

        self.process = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,
            # Kept open past close_fds, which runs after wire(): 3 and 4 are what Chromium reads.
            pass_fds=(3, 4, to_browser_r, from_browser_w),
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            self.call("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_browser, 65536)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer (events seen meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self._events.append(reply)

    def wait_for(self, method: str, session: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not any(
            e.get("method") == method and e.get("sessionId") == session for e in self._events
        ):
            self._events.append(self._read_message(deadline))

    def load(self, path: Path, *, width: int = 1400) -> tuple[Page, str]:
        """Open ``path``; returns what it did and the session to inspect it with."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=width,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        self._events.clear()
        self.call("Page.navigate", session, url=path.resolve().as_uri())
        self.wait_for("Page.loadEventFired", session)
        time.sleep(0.3)  # let late console messages arrive
        self.call("Runtime.evaluate", session, expression="1")  # drains pending events
        page = Page()
        for event in self._events:
            if event.get("sessionId") != session:
                continue
            params = event.get("params", {})
            method = event.get("method")
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                page.errors.append(
                    "console: " + " ".join(str(a.get("value")) for a in params.get("args", []))
                )
            elif method == "Runtime.exceptionThrown":
                page.errors.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                page.errors.append(f"log: {params['entry'].get('text')}")
            elif method == "Network.requestWillBeSent":
                page.requests.append(params["request"]["url"])
        return page, session

    def evaluate(self, session: str, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, session: str, out: Path) -> None:
        """A PNG of the whole page (beyond the viewport)."""
        data = self.call(
            "Page.captureScreenshot", session, format="png", captureBeyondViewport=True
        )["data"]
        out.write_bytes(base64.b64decode(data))
