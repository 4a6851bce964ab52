"""`accuscope serve`: the app in a real browser (headless Chromium through Playwright) over textual-serve,
read back by replaying the terminal bytes the page received into a terminal emulator (pyte)."""
from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from PIL import Image

from accuscope.engine.demo.workspace import MAIN, TASKS
from browser import chromium

ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "accuscope", "serve", *map(str, args)], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until(condition, what: str, timeout: float = 60.0, pause=lambda: time.sleep(0.1)):
    """Poll `condition` (`pause` between polls: a page's wait, so that its events are delivered)."""
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"never saw {what}"
        pause()
    return found


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def stop(server: subprocess.Popen) -> tuple[str, str]:
    server.send_signal(signal.SIGINT)
    try:
        return server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()


class Terminal:
    """What the page's terminal shows: the bytes it received, replayed into an emulator of its size."""

    def __init__(self):
        self.received: list[bytes] = []
        self.size: dict | None = None

    def attach(self, ws) -> None:
        ws.on("framereceived", lambda f: self.received.append(f) if isinstance(f, bytes) else None)
        ws.on("framesent", self._sent)

    def _sent(self, frame) -> None:
        message = json.loads(frame) if isinstance(frame, str) else None
        if isinstance(message, list) and message and message[0] == "resize":
            self.size = message[1]

    def text(self) -> str:
        import pyte
        if self.size is None:
            return ""
        screen = pyte.Screen(self.size["width"], self.size["height"])
        stream = pyte.ByteStream(screen)
        for chunk in list(self.received):
            stream.feed(chunk)
        return "\n".join(line.rstrip() for line in screen.display)


def test_serve_shows_the_demo_task_in_a_browser(demo_ws, tmp_path):
    executable = chromium()
    from playwright.sync_api import sync_playwright
    port = free_port()
    server = start("--port", port, "--workspace", demo_ws)
    try:
        wait_until(lambda: listening(port) or server.poll() is not None, "the server listening")
        assert server.poll() is None, server.communicate()
        terminal = Terminal()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.on("websocket", terminal.attach)
            page.goto(f"http://127.0.0.1:{port}/")
            page_pause = lambda: page.wait_for_timeout(100)  # noqa: E731
            wait_until(lambda: MAIN.name in terminal.text(), "the task browser", pause=page_pause)
            assert f"{len(TASKS)} tasks" in terminal.text()
            page.locator(".xterm").first.click()
            page.keyboard.press("Enter")  # the newest task, the demo's main one, is selected
            wait_until(lambda: "CosineSimilarity by row" in terminal.text(), "the task's table and chart",
                       pause=page_pause)
            screen = terminal.text()
            shot = page.screenshot()
            browser.close()
    finally:
        out, err = stop(server)
    lines = screen.splitlines()
    assert f"accuscope › tasks › {MAIN.name}" in lines[0]
    row = next(line for line in lines if line.lstrip("✗? ").startswith("5 /block1/conv1/Conv/block1/relu1/Relu"))
    assert "Conv2D" in row and "out:0" in row and "0.956174" in row
    assert "60/68 rows fail" in screen
    image = Image.open(io.BytesIO(shot)).convert("L")
    assert image.size == (1280, 800)
    assert len(image.getcolors(256)) > 8, "the page is blank"  # text, table and chart in several shades
    assert server.returncode == 0, err
    assert f"http://127.0.0.1:{port}" in out and f"ssh -L {port}:127.0.0.1:{port}" in out


def test_serve_refuses_a_websocket_from_another_site(demo_ws):
    import asyncio

    import aiohttp
    port = free_port()
    server = start("--port", port, "--workspace", demo_ws)

    async def handshake(origin: str) -> int:
        async with aiohttp.ClientSession() as session:
            try:
                async with session.ws_connect(f"http://127.0.0.1:{port}/ws", origin=origin) as ws:
                    await ws.close()
                    return 101
            except aiohttp.WSServerHandshakeError as exc:
                return exc.status
    try:
        wait_until(lambda: listening(port) or server.poll() is not None, "the server listening")
        assert asyncio.run(handshake("http://evil.example")) == 403
        assert asyncio.run(handshake(f"http://127.0.0.1:{port}")) == 101
    finally:
        stop(server)


def test_serve_on_another_host_warns(demo_ws):
    port = free_port()
    server = start("--port", port, "--host", "0.0.0.0", "--workspace", demo_ws)
    try:
        wait_until(lambda: listening(port) or server.poll() is not None, "the server listening")
    finally:
        out, err = stop(server)
    assert "warning: listening on 0.0.0.0: anyone who can reach port" in " ".join(err.split())


def test_serve_on_a_busy_port_is_exit_2():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "accuscope", "serve", "--port", str(port)], env=ENV,
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert f"127.0.0.1:{port}: cannot listen there" in r.stderr and "Traceback" not in r.stderr


def test_serve_without_textual_serve_says_how_to_install(tmp_path):
    blocker = tmp_path / "sitecustomize.py"  # this interpreter, with textual_serve made unimportable
    blocker.write_text("import sys\nsys.modules['textual_serve'] = None\n")
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path), ENV.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "accuscope", "serve"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr
    assert "accuscope serve needs textual-serve: pip install 'accuscope[serve]'" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("port", ["0", "70000"])
def test_serve_rejects_a_port_out_of_range(port):
    r = subprocess.run([sys.executable, "-m", "accuscope", "serve", "--port", port], env=ENV, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "not a TCP port" in r.stderr
