"""`accuscope serve [--port 8000] [--host 127.0.0.1]`: the app in a browser, through textual-serve."""
from __future__ import annotations

import argparse
import html
import ipaddress
import json
import re
import secrets
import shlex
import socket
from pathlib import Path
from string import Template
from typing import Any

from ..app.main import default_workspace
from ..engine.compare.lifetime import module_command
from ..engine.sources.tensor import SourceError
from ..exitcode import ExitCode
from .common import err, out, show

LOOPBACK = "127.0.0.1"
# A browser terminal's largest size. The page's terminal fills the window at a 16 px font: 213 x 51 cells on a
# 1080p screen, 426 x 102 on a 4K one (measured in Chromium); 500 x 200 leaves room for a tall or zoomed-out
# window and costs the app 2 MB (54.5 MB at 80 x 24, 56.4 MB at 500 x 200). Unbounded, one resize to
# 30000 x 30000 (900M cells) grew the app to 1.15 GB in 10 s. A bigger window shows the app in its top-left part.
MAX_COLUMNS, MAX_ROWS = 500, 200
REFUSED = "accuscope serve: open the address serve printed, with its ?token=..., to use the app"

# The page: textual-serve's own script, stylesheet and font (served from the package's static folder by
# this server), the terminal and the two notices the script shows. textual-serve's template also links
# Google's font service (every page load would tell Google who opened the app); nothing here names
# another host.
PAGE = Template("""<!DOCTYPE html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>${title}</title>
    <link rel="stylesheet" href="${static}css/xterm.css" />
    <script src="${static}js/textual.js"></script>
    <style>
      @font-face { font-family: "Roboto Mono"; src: url("${static}fonts/RobotoMono-VariableFont_wght.ttf"); }
      @font-face { font-family: "Roboto Mono"; font-style: italic;
                   src: url("${static}fonts/RobotoMono-Italic-VariableFont_wght.ttf"); }
      body { background: #0c181f; }
      .notice { position: absolute; width: 100vw; height: 100vh; display: flex; align-items: center;
                justify-content: center; z-index: 10; font-family: "Roboto Mono", monospace;
                color: rgba(255, 255, 255, 0.95); }
      .notice div { padding: 32px 64px; background: #12232d; text-align: center; }
      .notice button { margin: 16px auto 0; padding: 16px 32px; display: block; border: none; color: inherit;
                       background: #5e0ba7; font-family: inherit; cursor: pointer; }
      body.-first-byte .opening, .closed, #start { display: none; }
      body.-closed .closed, #start.-delay { display: flex; }
      body .textual-terminal { opacity: 0; }
      body.-first-byte .textual-terminal { opacity: 1; transition: opacity 0.3s ease-out; }
    </style>
    <script>
      function restart() {  /* the same address (its token kept), without textual's "delay" */
        const url = new URL(window.location.href);
        url.searchParams.delete("delay");
        window.location.href = url.pathname + url.search;
      }
    </script>
  </head>
  <body>
    <div class="notice opening"><div>${title}<button type="button" onclick="restart()" id="start">Start</button></div></div>
    <div class="notice closed"><div>Session ended.<button type="button" onclick="restart()">Restart</button></div></div>
    <div id="terminal" class="textual-terminal" data-session-websocket-url="${websocket}" data-font-size="16"></div>
  </body>
</html>
""")


def register(p) -> None:
    p.description = ("Serve the app over HTTP: every browser tab that opens the page gets its own "
                     "app (a process started as `accuscope --workspace WS`, with the rights of the "
                     "user who runs serve). It prints the address to open: it holds a secret made at "
                     "start-up (?token=...), without which the page and its websocket are refused. It "
                     "listens on 127.0.0.1 only unless --host is given; "
                     "from a laptop, tunnel to it: ssh -L 8000:127.0.0.1:8000 SERVER. Needs "
                     "textual-serve (pip install 'accuscope[serve]'). Ctrl+C stops it. Exit 2: "
                     "textual-serve missing or the port cannot be used.")
    p.add_argument("--port", type=int, default=8000, help="TCP port to listen on (default 8000)")
    p.add_argument("--host", default=LOOPBACK,
                   help="address to listen on (default 127.0.0.1: only this machine, e.g. through an ssh "
                        "tunnel); on another address the secret travels in plain HTTP")
    p.add_argument("--public-url", metavar="URL",
                   help="the address the browser uses to reach the server, when not http://HOST:PORT (a tunnel "
                        "to another local port, a reverse proxy)")
    p.add_argument("--workspace", default=argparse.SUPPRESS,  # absent: the global --workspace stays
                   help="workspace the app lists (default: $ACCUSCOPE_WORKSPACE, else ~/.local/share/accuscope)")
    p.set_defaults(handler=run)


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def app_command(workspace: Path) -> str:
    """The shell command textual-serve starts for each browser session: this Python, this accuscope,
    the folder serve was started in kept off sys.path (`python -m` would put it first)."""
    return shlex.join(module_command("accuscope", "--workspace", str(workspace)))


def run(args) -> int:
    try:
        from textual_serve.server import Server
    except ImportError:
        raise SourceError("accuscope serve needs textual-serve: pip install 'accuscope[serve]' "
                          "(or pip install textual-serve)") from None
    if not 0 < args.port < 65536:
        raise SourceError(f"--port {args.port}: not a TCP port (1-65535)")
    workspace = Path(args.workspace or default_workspace()).expanduser().absolute()
    try:
        workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SourceError(f"workspace {workspace}: {exc.strerror or exc}") from None
    _check_port(args.host, args.port)
    host = socket.gethostname() if unspecified(args.host) else args.host
    url = (args.public_url or f"http://{'[' + host + ']' if ':' in host else host}:{args.port}").rstrip("/")
    token = secrets.token_urlsafe()
    if not loopback(args.host):
        err.print(f"[bold yellow]⚠ warning:[/] listening on {show(args.host)}: plain HTTP: anyone who can watch "
                  f"the traffic to port {args.port} can read the secret in the address below and get the app "
                  "with your rights (it reads and writes files, runs comparisons and models). Prefer the "
                  "default 127.0.0.1 and an ssh tunnel.", soft_wrap=True)
    out.print(f"serving the app on [bold]{show(entry(url, token))}[/] (workspace {show(str(workspace))}); "
              "Ctrl+C stops it", soft_wrap=True)
    if loopback(args.host):
        out.print(f"from another machine: ssh -L {args.port}:127.0.0.1:{args.port} {show(socket.gethostname())}, "
                  f"then open {entry(f'http://127.0.0.1:{args.port}', token)}", soft_wrap=True)
    guarded(Server, token)(app_command(workspace), host=args.host, port=args.port, title="accuscope",
                           public_url=url).serve()
    return ExitCode.OK


def entry(url: str, token: str) -> str:
    """The page's address with the secret that opens it."""
    return f"{url}/?token={token}"


def terminal_size(width: Any, height: Any) -> tuple[int, int]:
    """A browser terminal's size in cells, within MAX_COLUMNS x MAX_ROWS (at least 1x1; what is not a
    number counts as 80x24, a terminal's usual size). Any value the browser sent: JSON or a query string."""
    def cells(value: Any, usual: int, most: int) -> int:
        try:
            return max(1, min(int(value), most))
        except (TypeError, ValueError, OverflowError):
            return usual
    return cells(width, 80, MAX_COLUMNS), cells(height, 24, MAX_ROWS)


def message(text: str) -> tuple[str, Any] | None:
    """A websocket message as the page's script sends it: (its type, its payload), `["stdin", "keys"]`,
    `["resize", {"width": w, "height": h}]`, `["ping", stamp]`, `["blur"]`, `["focus"]`; None for anything
    else (not JSON, nested past the parser's depth, not a list, an unknown type, a payload of another
    shape), which serve drops where textual-serve's own loop ends the session with a traceback."""
    try:
        envelope = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(envelope, list) or not envelope or not isinstance(envelope[0], str):
        return None
    kind, payload = envelope[0], (envelope[1] if len(envelope) > 1 else None)
    shaped = {"stdin": isinstance(payload, str), "ping": isinstance(payload, (str, int, float)),
              "resize": isinstance(payload, dict), "blur": True, "focus": True}
    return (kind, payload) if shaped.get(kind, False) else None


async def converse(websocket, app_service) -> None:
    """The page's messages to the app until the page goes: keys, resizes (within terminal_size), pings
    (answered), blur and focus. Binary frames and malformed messages (message()) are dropped."""
    from aiohttp import WSMsgType
    async for frame in websocket:
        said = message(frame.data) if frame.type == WSMsgType.TEXT else None
        if said is None:
            continue
        kind, payload = said
        if kind == "stdin":
            await app_service.send_bytes(payload.encode("utf-8", "replace"))
        elif kind == "resize":
            await app_service.set_terminal_size(*terminal_size(payload.get("width"), payload.get("height")))
        elif kind == "ping":
            await websocket.send_json(["pong", payload])
        elif kind == "blur":
            await app_service.blur()
        else:
            await app_service.focus()


def guarded(server_class, token: str):
    """textual-serve's Server behind the secret `token`: the page opens only at /?token=TOKEN, its
    websocket only at /ws/TOKEN (the page's own script appends ?width=..&height=.. to the URL it is
    given, so the secret goes in the path), both compared in constant time; a websocket opened by a
    page from another origin is refused even with it. The page is PAGE (nothing on it from another
    host); the terminal's size is bounded by terminal_size, at the handshake and on every resize."""
    from aiohttp import web

    def admits(given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), token.encode())

    class Server(server_class):
        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.router.add_get("/ws/{token}", self.handle_websocket)  # textual-serve's /ws: refused, no token
            return app

        def allowed(self) -> set[str]:
            url = self.public_url.rstrip("/")
            found = {url}
            if loopback(self.host):
                found |= {f"http://{name}:{self.port}" for name in ("127.0.0.1", "localhost", "[::1]")}
            return found

        async def handle_index(self, request: web.Request) -> web.Response:
            if not admits(request.query.get("token")):
                raise web.HTTPForbidden(text=REFUSED)
            base = self.public_url.rstrip("/")
            text = PAGE.substitute(title=html.escape(self.title), static=html.escape(f"{base}/static/"),
                                   websocket=html.escape(re.sub("^http", "ws", base) + f"/ws/{token}"))
            return web.Response(text=text, content_type="text/html",
                                headers={"Referrer-Policy": "no-referrer", "Cache-Control": "no-store"})

        async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
            if not admits(request.match_info.get("token")):
                raise web.HTTPForbidden(text=REFUSED)
            origin = request.headers.get("Origin")
            if origin is not None and origin.rstrip("/") not in self.allowed():
                raise web.HTTPForbidden(text=f"accuscope serve: a page from {origin} may not open the app")
            width, height = terminal_size(request.query.get("width", 80), request.query.get("height", 24))
            bounded = request.rel_url.update_query(width=width, height=height)
            return await super().handle_websocket(request.clone(rel_url=bounded))

        async def on_startup(self, app: web.Application) -> None:
            """Nothing: serve printed the address, with its secret (textual-serve's banner has none)."""

        async def _process_messages(self, websocket: web.WebSocketResponse, app_service) -> None:
            await converse(websocket, app_service)

    return Server


def unspecified(host: str) -> bool:
    """0.0.0.0 or ::, every address of this machine (not one a browser can open)."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _check_port(host: str, port: int) -> None:
    """A clear exit 2 before the server starts when the address cannot be listened on."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise SourceError(f"--host {host}: {exc.strerror or exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise SourceError(f"{host}:{port}: cannot listen there: {exc.strerror or exc}") from None
