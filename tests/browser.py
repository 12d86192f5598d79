"""A real headless Chromium for tests, driven over the DevTools protocol (websocket-client): open a page, and get
what it logged as errors (console errors, uncaught exceptions, failed loads, refused by its content security
policy), its navigation timing, a value it computes, and a screenshot of the whole page."""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import websocket

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--remote-debugging-address=127.0.0.1",
         "--remote-debugging-port=0"]


def chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if found is None:
        if os.environ.get("JOBAWARE_REQUIRE_BROWSER") == "1":
            pytest.fail("JOBAWARE_REQUIRE_BROWSER=1 but no chromium (apt-get install chromium)")
        pytest.skip("chromium is not installed (Debian package 'chromium'); set JOBAWARE_REQUIRE_BROWSER=1 to fail")
    return found


class Browser:
    """One headless Chromium with one page; `close()` ends it (and its children: it runs in a session of its own)."""

    def __init__(self, folder: Path, width: int = 1400, height: int = 1000):
        profile = folder / "profile"
        self.process = subprocess.Popen([chromium(), *FLAGS, f"--user-data-dir={profile}",
                                         f"--window-size={width},{height}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=open(folder / "chromium.log", "wb"),
                                        start_new_session=True)
        self.ids, self.events = itertools.count(1), []
        try:
            port = self._port(profile / "DevToolsActivePort")
            page = self._until(lambda: [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=5).json()
                                        if t["type"] == "page"], 30, "a page target")[0]
            self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    def _port(self, path: Path) -> int:
        return self._until(lambda: path.is_file() and path.read_text().split("\n")[0].isdigit() and
                           int(path.read_text().split("\n")[0]), 30, "the DevTools port")

    def _until(self, check, seconds: float, what: str):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode} before {what}")
            try:
                found = check()
            except (httpx.HTTPError, OSError, ValueError):
                found = None
            if found:
                return found
            time.sleep(0.1)
        raise TimeoutError(f"no {what} within {seconds:.0f} s")

    def call(self, method: str, **params) -> dict:
        """One DevTools command's result; the events that come meanwhile are kept (`events`)."""
        number = next(self.ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def _event(self, name: str, seconds: float) -> dict:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for event in self.events:
                if event.get("method") == name:
                    return event
            self.socket.settimeout(max(0.1, deadline - time.monotonic()))
            self.events.append(json.loads(self.socket.recv()))
        raise TimeoutError(f"no {name} within {seconds:.0f} s")

    def open(self, url: str, seconds: float = 60) -> None:
        """Navigate to `url` and wait for its load event."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        self._event("Page.loadEventFired", seconds)
        self.call("Runtime.evaluate", expression="1")  # the events of the load are in

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def errors(self) -> list[str]:
        """What the page logged as errors: console errors, uncaught exceptions, log entries of level error
        (failed loads, refused by the content security policy), failed requests."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(f"console: {[a.get('value') for a in params.get('args', [])]}")
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Network.loadingFailed":
                found.append(f"load failed: {params.get('errorText')}")
        return found

    def timing(self) -> dict[str, float]:
        """The navigation's timing (milliseconds from its start): the response's first and last byte, the DOM
        parsed, the load event's end."""
        entry = json.loads(self.evaluate("JSON.stringify(performance.getEntriesByType('navigation')[0])"))
        return {name: entry[name] for name in ("responseStart", "responseEnd", "domContentLoadedEventEnd",
                                               "loadEventEnd")}

    def screenshot(self, path: Path) -> Path:
        """The whole page (beyond the window) as a PNG."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        socket = getattr(self, "socket", None)
        if socket is not None:
            socket.close()
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(10)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
