"""`accuscope serve`: the app in a real browser (headless Chromium through Playwright) over textual-serve,
read back by replaying the terminal bytes the page received into a terminal emulator (pyte); its door
(the secret it prints) and the terminal size it allows, through aiohttp's client against the real server."""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit

import aiohttp
import pytest
from PIL import Image

from accuscope.engine.demo.workspace import MAIN, TASKS
from browser import chromium
from support.narrow import present

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


@contextlib.contextmanager
def served(workspace, *args):
    """A running `accuscope serve` on a free port: (port, the secret its first line printed, the server)."""
    port = free_port()
    server = start("--port", port, "--workspace", workspace, *args)
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        found = re.search(r"serving the app on http://[^/ ]+/\?token=([\w-]+) ", first)
        assert found, (first, server.poll() is None or server.communicate())
        wait_until(lambda: listening(port) or server.poll() is not None, "the server listening")
        assert server.poll() is None, server.communicate()
        yield port, found[1], server
    finally:
        if server.returncode is None:
            stop(server)


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
    with served(demo_ws) as (port, token, server):
        hint = server.stdout.readline()  # the line after the address
        terminal = Terminal()
        requested: list[str] = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.on("websocket", terminal.attach)
            page.on("websocket", lambda ws: requested.append(ws.url))
            page.on("request", lambda request: requested.append(request.url))
            page.goto(f"http://127.0.0.1:{port}/?token={token}")
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
        out, err = stop(server)
    lines = screen.splitlines()
    assert f"accuscope › tasks › {MAIN.name}" in lines[0]
    row = next(line for line in lines if line.lstrip("✗? ").startswith("5 /block1/conv1/Conv/block1/relu1/Relu"))
    assert "Conv2D" in row and "out:0" in row and "0.956174" in row
    assert "60/68 rows fail" in screen
    image = Image.open(io.BytesIO(shot)).convert("L")
    assert image.size == (1280, 800)
    colors = image.getcolors(256)
    assert colors is not None and len(colors) > 8, "the page is blank"  # text, table and chart in several shades
    assert server.returncode == 0, err
    assert f"ssh -L {port}:127.0.0.1:{port}" in hint and hint.endswith(f"then open http://127.0.0.1:{port}/?token={token}\n")
    # the page, its script, stylesheet, font and websocket: nothing from another host (no font service)
    assert f"ws://127.0.0.1:{port}/ws/{token}?width=" in " ".join(requested)
    assert {urlsplit(url).netloc for url in requested} - {""} == {f"127.0.0.1:{port}"}, requested


async def status(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def handshake(url: str, origin: str | None = None) -> int:
    """The status of a websocket handshake at `url` (101: opened), with that Origin header or none."""
    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url, origin=origin) as ws:
                await ws.close()
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


def test_serve_opens_the_page_only_with_its_secret(demo_ws):
    with served(demo_ws) as (port, token, _):
        page = f"http://127.0.0.1:{port}/"
        assert asyncio.run(status(page))[0] == 403
        assert asyncio.run(status(page + "?token="))[0] == 403
        assert asyncio.run(status(page + "?token=" + token[:-1]))[0] == 403
        assert asyncio.run(status(page + "?token=" + token + "x"))[0] == 403
        code, text = asyncio.run(status(page + "?token=" + token))
    assert code == 200 and f'data-session-websocket-url="ws://127.0.0.1:{port}/ws/{token}"' in text


def test_serve_page_names_no_other_host(demo_ws):
    """No font service, CDN or anything else: every address the page names is the server's own."""
    with served(demo_ws) as (port, token, _):
        code, text = asyncio.run(status(f"http://127.0.0.1:{port}/?token={token}"))
    assert code == 200
    addresses = re.findall(r"(?:https?|wss?)://[^\s\"'<>()]+", text)
    assert addresses and all(urlsplit(a).netloc == f"127.0.0.1:{port}" for a in addresses), addresses


def test_serve_opens_a_websocket_only_with_its_secret(demo_ws):
    with served(demo_ws) as (port, token, _):
        own = f"http://127.0.0.1:{port}"
        for url in (f"ws://127.0.0.1:{port}/ws", f"ws://127.0.0.1:{port}/ws/x",
                    f"ws://127.0.0.1:{port}/ws/{token[:-1]}", f"ws://127.0.0.1:{port}/ws/{token}x",
                    f"ws://127.0.0.1:{port}/ws?token={token}"):
            for origin in (None, own, "http://evil.example", "null"):
                assert asyncio.run(handshake(url, origin)) == 403, (url, origin)
        with_secret = f"ws://127.0.0.1:{port}/ws/{token}"
        assert asyncio.run(handshake(with_secret, "http://evil.example")) == 403  # another site's page
        assert asyncio.run(handshake(with_secret, own)) == 101
        assert asyncio.run(handshake(with_secret)) == 101


HOME = b"\x1b[1;1H"
ROW = re.compile(rb"\x1b\[(\d+);1H")
STYLE = re.compile(rb"\x1b\[[\d;]*m")


def screen_size(drawn: bytes, last: int) -> tuple[int, int] | None:
    """The size of the latest full redraw in `drawn` that reached row `last` (None: none yet): its first
    row's length in cells (the header bar, to the right edge) and its last row's number. Textual draws a
    screen as each row after a cursor move to its start, from row 1, then moves the cursor home."""
    for screen in reversed(drawn.split(HOME)):
        if b"\x1b[%d;1H" % last in screen:
            return len(STYLE.sub(b"", screen[:screen.index(b"\n")]).decode()), max(map(int, ROW.findall(screen)))
    return None


async def redraws(port: int, token: str, asked: list[tuple], rows: list[int]) -> list[tuple[int, int]]:
    """The screen sizes the app drew: at the handshake's size asked[0], then after each resize message
    asking asked[1:]; each read once a screen reaching its last row, rows[i], is drawn."""
    (width, height), *resizes = asked
    sizes = []
    url = f"ws://127.0.0.1:{port}/ws/{token}?width={width}&height={height}"
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        for resize, last in zip([None, *resizes], rows):
            if resize is not None:
                await ws.send_str(json.dumps(["resize", {"width": resize[0], "height": resize[1]}]))
            drawn = b""
            while (size := screen_size(drawn, last)) is None:
                message = await ws.receive(timeout=60)
                assert message.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), message
                if message.type == aiohttp.WSMsgType.BINARY:
                    drawn += message.data
            sizes.append(size)
    return sizes


def test_serve_bounds_the_terminal_a_browser_asks_for(demo_ws):
    """A terminal of 30000 x 30000 cells (at the handshake or in a resize message) is drawn at 500 x 200:
    unbounded, the app grew to 1.15 GB in 10 s. A size that is no number is 80 x 24. (Each screen asked
    for after the first is taller than the one before: a redraw of the size before, still arriving after
    the resize, is never taken for the new size.)"""
    with served(demo_ws) as (port, token, _):
        assert asyncio.run(redraws(port, token, [(30000, 30000)], [200])) == [(500, 200)]
        sizes = asyncio.run(redraws(port, token, [("x", None), (100, 30), (30000, 30000)], [24, 30, 200]))
    assert sizes == [(80, 24), (100, 30), (500, 200)]


def test_serve_on_another_host_warns(demo_ws):
    with served(demo_ws, "--host", "0.0.0.0") as (port, _, server):
        out, err = stop(server)
    assert f"warning: listening on 0.0.0.0: plain HTTP: anyone who can watch the traffic to port {port}" \
        in " ".join(err.split())


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


GARBAGE = ["{", "[]", "42", '{"a": 1}', '["resize"]', '["resize", 5]', '["resize", {}]', '["stdin", {"x": 1}]',
           '["nope", 1]', "[" * 100_000 + "]" * 100_000, "[1, 2]", '["ping", {"deep": [[[]]]}]']


async def survives_garbage(port: int, token: str) -> tuple[list, tuple[int, int]]:
    """The first screen drawn; then malformed messages (not JSON, not a list, unknown types, payloads of
    another shape, nesting past the parser's depth) and a binary frame; then a ping and a well-formed
    resize: (the text replies, the size of the screen drawn after the resize)."""
    url = f"ws://127.0.0.1:{port}/ws/{token}?width=80&height=24"
    replies, drawn = [], b""
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        async def until(done) -> None:
            nonlocal drawn
            while not done():
                frame = await ws.receive(timeout=60)
                assert frame.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), frame
                if frame.type == aiohttp.WSMsgType.BINARY:
                    drawn += frame.data
                else:
                    replies.append(json.loads(frame.data))
        await until(lambda: screen_size(drawn, 24) is not None)
        for text in GARBAGE:
            await ws.send_str(text)
        await ws.send_bytes(b"\x00\xff binary")
        await ws.send_str(json.dumps(["ping", "after"]))
        await until(lambda: ["pong", "after"] in replies)
        drawn = b""
        await ws.send_str(json.dumps(["resize", {"width": 100, "height": 30}]))
        await until(lambda: screen_size(drawn, 30) is not None)
        return replies, present(screen_size(drawn, 30))


def test_serve_drops_malformed_websocket_messages(demo_ws):
    """A message the page's script would never send is dropped: the session lives on (answers a ping,
    redraws at a new size) and the server logs no traceback (textual-serve's loop ended the session)."""
    with served(demo_ws) as (port, token, server):
        replies, size = asyncio.run(asyncio.wait_for(survives_garbage(port, token), 120))
        out, err = stop(server)
    assert replies == [["pong", "after"]] and size == (100, 30)
    assert "Traceback" not in out + err
