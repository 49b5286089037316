"""A small Chrome DevTools Protocol driver for the browser tests: headless Chromium over a websocket.

Why CDP and not Selenium or Playwright: Playwright downloads its own browser builds at install time
(no internet here), and Selenium needs a chromedriver whose version matches the browser exactly
plus its own dependency tree. CDP is what both speak underneath; Debian's `chromium` serves it
itself, and the `websockets` client (already pinned in requirements.lock) is the only library
needed. The handful of commands the tests use (navigate, evaluate, set an input's files,
screenshot, viewport, key presses) are stable parts of the protocol.

Each call sends one command and reads messages until its answer; events in between are dropped.
A navigation is awaited by marking the current `window` and waiting until a loaded document
without the mark is in place.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


class CdpError(RuntimeError):
    """A command the browser refused, or a page script that threw."""


def chromium_path() -> str | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium with one page (tab), driven over CDP."""

    def __init__(self, profile: Path, *, width: int = 1280, height: int = 900) -> None:
        executable = chromium_path()
        if executable is None:
            raise FileNotFoundError("no chromium on PATH (Debian: apt-get install chromium)")
        profile.mkdir(parents=True, exist_ok=True)
        port_file = profile / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)  # a previous run's port, not this browser's
        args = [
            executable,
            "--headless=new",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        if os.geteuid() == 0:  # Chromium refuses to run as root inside its sandbox
            args.insert(1, "--no-sandbox")
        self._process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
            if time.monotonic() > deadline or self._process.poll() is not None:
                self._process.kill()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        try:
            self._ws: ClientConnection = connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=30)
        except OSError:
            self._process.kill()
            raise
        self._ids = itertools.count(1)
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self._session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)[
            "sessionId"
        ]
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.set_viewport(width, height)

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True) -> dict[str, Any]:
        """One command; its result (or `CdpError`)."""
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        self._ws.send(json.dumps(message))
        while True:
            reply = json.loads(self._ws.recv(timeout=60))
            if reply.get("id") == ident:
                if "error" in reply:
                    raise CdpError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise CdpError(f"{expression[:80]}: {result['exceptionDetails'].get('exception', result)}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15.0) -> Any:
        """Poll `expression` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {timeout}s: {expression}")
            time.sleep(0.05)

    def _mark(self) -> None:
        self.evaluate("window.__cdp_old_page = true")

    def _wait_new_page(self, timeout: float = 30.0) -> None:
        self.wait_for("window.__cdp_old_page === undefined && document.readyState === 'complete'", timeout)

    def goto(self, url: str) -> None:
        self._mark()
        self.send("Page.navigate", {"url": url})
        self._wait_new_page()

    def click_and_wait(self, selector: str) -> None:
        """Click the element (a link or a submit button) and wait for the page it loads."""
        self._mark()
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")
        self._wait_new_page()

    def set_files(self, selector: str, paths: list[Path]) -> None:
        """Choose files in an `<input type=file>`, as the user's file dialog would."""
        root = self.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        node = self.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        if not node:
            raise CdpError(f"no element {selector!r}")
        self.send("DOM.setFileInputFiles", {"nodeId": node, "files": [str(p) for p in paths]})

    def press(self, key: str, code: str, key_code: int) -> None:
        """One key press (down and up) on the focused element."""
        for kind in ("keyDown", "keyUp"):
            self.send(
                "Input.dispatchKeyEvent",
                {
                    "type": kind,
                    "key": key,
                    "code": code,
                    "windowsVirtualKeyCode": key_code,
                    "text": "\r" if key == "Enter" and kind == "keyDown" else "",
                },
            )

    def type_text(self, text: str) -> None:
        self.send("Input.insertText", {"text": text})

    def set_viewport(self, width: int, height: int, *, mobile: bool = False) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
        )

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        with contextlib.suppress(CdpError, ConnectionClosed, TimeoutError):  # gone already: waited for below
            self.send("Browser.close", session=False)
        self._ws.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
