"""`accuscope serve [--port 8000] [--host 127.0.0.1]`: the app in a browser, through textual-serve."""
from __future__ import annotations

import argparse
import ipaddress
import shlex
import socket
from pathlib import Path

from ..app.main import default_workspace
from ..engine.compare.lifetime import module_command
from ..engine.sources.tensor import SourceError
from ..exitcode import ExitCode
from .common import err, out, show

LOOPBACK = "127.0.0.1"


def register(p) -> None:
    p.description = ("Serve the app over HTTP: every browser tab that opens the page gets its own "
                     "app (a process started as `accuscope --workspace WS`, with the rights of the "
                     "user who runs serve). It listens on 127.0.0.1 only unless --host is given; "
                     "from a laptop, tunnel to it: ssh -L 8000:127.0.0.1:8000 SERVER. Needs "
                     "textual-serve (pip install 'accuscope[serve]'). Ctrl+C stops it. Exit 2: "
                     "textual-serve missing or the port cannot be used.")
    p.add_argument("--port", type=int, default=8000, help="TCP port to listen on (default 8000)")
    p.add_argument("--host", default=LOOPBACK,
                   help="address to listen on (default 127.0.0.1: only this machine, e.g. through an ssh "
                        "tunnel); another address lets anyone who reaches the port use the app")
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
    url = args.public_url or f"http://{'[' + host + ']' if ':' in host else host}:{args.port}"
    if not loopback(args.host):
        err.print(f"[bold yellow]⚠ warning:[/] listening on {show(args.host)}: anyone who can reach port "
                  f"{args.port} gets the app with your rights (it reads and writes files, runs comparisons and "
                  "models); there is no login. Prefer the default 127.0.0.1 and an ssh tunnel.", soft_wrap=True)
    out.print(f"serving the app on [bold]{show(url)}[/] (workspace {show(str(workspace))}); Ctrl+C stops it",
              soft_wrap=True)
    if loopback(args.host):
        out.print(f"from another machine: ssh -L {args.port}:127.0.0.1:{args.port} {show(socket.gethostname())}, "
                  f"then open http://127.0.0.1:{args.port}", soft_wrap=True)
    same_origin(Server)(app_command(workspace), host=args.host, port=args.port, title="accuscope",
                        public_url=url).serve()
    return ExitCode.OK


def same_origin(server_class):
    """textual-serve's Server, refusing a websocket opened by a page from another origin: any site
    the user visits could otherwise reach ws://127.0.0.1:PORT and drive the app."""
    from aiohttp import web

    class Server(server_class):
        def allowed(self) -> set[str]:
            url = self.public_url.rstrip("/")
            found = {url}
            if loopback(self.host):
                found |= {f"http://{name}:{self.port}" for name in ("127.0.0.1", "localhost", "[::1]")}
            return found

        async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
            origin = request.headers.get("Origin")
            if origin is not None and origin.rstrip("/") not in self.allowed():
                raise web.HTTPForbidden(text=f"accuscope serve: a page from {origin} may not open the app")
            return await super().handle_websocket(request)

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
