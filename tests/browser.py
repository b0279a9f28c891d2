"""A small headless-Chromium driver over the DevTools protocol, for tests that must see a page as a reader does.

Chromium is started with a fresh profile and `--remote-debugging-port=0`; the port it picked is read from the
DevToolsActivePort file it writes. One websocket to the browser carries every command; pages are attached as
flat sessions. The driver records console errors, uncaught exceptions, error log entries and every network
request the page makes, so a test can assert a page drew its charts, logged nothing bad and fetched nothing.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
    "--remote-debugging-port=0", "--window-size=1280,1800",
)


class BrowserError(RuntimeError):
    """Chromium could not be started or did not answer in time."""


def find_chromium() -> str | None:
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


@dataclass
class Page:
    """A tab attached as a flat session; collects what the page reports while the test drives it."""

    browser: Chromium
    session: str
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    loaded: bool = False

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def on_event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append("exception: " + str(details.get("exception", {}).get("description")
                                                   or details.get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [a.get("value", a.get("description", "")) for a in params.get("args", [])]
            self.errors.append("console.error: " + " ".join(map(str, args)))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))
        elif method == "Page.loadEventFired":
            self.loaded = True

    def navigate(self, url: str, timeout: float = 60) -> None:
        """Open `url` and wait for its load event."""
        self.loaded = False
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise BrowserError(f"cannot open {url}: {result['errorText']}")
        self.browser.pump_until(lambda: self.loaded, timeout, f"load event of {url}")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"evaluating {expression!r} threw: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 60, poll_s: float = 0.2) -> Any:
        """Poll a JS condition until it is truthy; the poll interval is not a readiness guess, the condition is."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout:g} s waiting for {expression!r}")
            self.browser.pump(poll_s)

    def pick_files(self, selector: str, paths: list[Path]) -> None:
        """Choose files in a file input, as a reader picking them in the dialog does (its change event fires)."""
        root = self.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        node = self.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        if not node:
            raise BrowserError(f"no element matches {selector!r}")
        self.send("DOM.setFileInputFiles", {"nodeId": node, "files": [str(p) for p in paths]})

    def screenshot(self, path: Path, width: int = 1280, height: int = 1800) -> Path:
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        data = self.send("Page.captureScreenshot", {"format": "png"}, timeout=60)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path


class Chromium:
    """Headless Chromium for the duration of a `with` block; stopped by its pid on exit."""

    def __init__(self, binary: str | None = None, start_timeout: float = 60) -> None:
        self.binary = binary or find_chromium()
        if not self.binary:
            raise BrowserError("chromium not found (install the Debian package `chromium`)")
        self.start_timeout = start_timeout
        self.profile = Path(tempfile.mkdtemp(prefix="loadtest-chromium-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.ws: websocket.WebSocket | None = None
        self.ids = itertools.count(1)
        self.pages: dict[str, Page] = {}
        self.stderr_path = self.profile / "stderr.log"

    def __enter__(self) -> Chromium:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        profile = self.profile / "profile"
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [self.binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.start_timeout
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.process.poll() is not None:
                raise BrowserError(f"chromium exited with code {self.process.returncode}: "
                                   f"{self.stderr_path.read_text(errors='replace')[-800:]}")
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium wrote no DevToolsActivePort within {self.start_timeout:g} s")
            time.sleep(0.1)  # polling for a file chromium writes once it listens
        port, path = port_file.read_text().splitlines()[:2]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=30,
                                              suppress_origin=True)

    def new_page(self) -> Page:
        """A fresh tab with Runtime, Log, Network and Page events on."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        self.pages[session] = page
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        return page

    def _dispatch(self, message: dict[str, Any]) -> None:
        page = self.pages.get(message.get("sessionId", ""))
        if page is not None and "method" in message:
            page.on_event(message)

    def _receive(self, timeout: float) -> dict[str, Any] | None:
        assert self.ws is not None
        self.ws.settimeout(max(0.01, timeout))
        try:
            return json.loads(self.ws.recv())
        except websocket.WebSocketTimeoutException:
            return None

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 30) -> dict[str, Any]:
        """Send one command and wait for its answer, dispatching events that arrive meanwhile."""
        if self.ws is None:
            raise BrowserError("chromium is not running")
        ident = next(self.ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            answer = self._receive(remaining)
            if answer is None:
                continue
            if answer.get("id") == ident:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error'].get('message')}")
                return answer.get("result", {})
            self._dispatch(answer)
        raise BrowserError(f"{method}: no answer within {timeout:g} s")

    def pump(self, seconds: float) -> None:
        """Dispatch events for up to `seconds`."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            message = self._receive(remaining)
            if message is not None:
                self._dispatch(message)

    def pump_until(self, condition: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError(f"timed out after {timeout:g} s waiting for the {what}")
            message = self._receive(min(remaining, 1.0))
            if message is not None:
                self._dispatch(message)

    def stop(self) -> None:
        """Close the browser politely, then by its pid; remove the profile."""
        if self.ws is not None:
            with contextlib.suppress(OSError, websocket.WebSocketException):
                self.ws.send(json.dumps({"id": next(self.ids), "method": "Browser.close"}))
            self.ws.close()
            self.ws = None
        if self.process is not None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.terminate()
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=10)
            # helpers (zygote, renderers) share the session chromium was started in; leave none behind
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process = None
        shutil.rmtree(self.profile, ignore_errors=True)
