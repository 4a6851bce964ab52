"""`accuscope mcp [--workspace DIR]`: accuscope as a Model Context Protocol server over stdio, the
tools an agent calls (mcptools.py). Needs the MCP SDK: pip install 'accuscope[mcp]'."""
# lazy: app.main, commands.mcptools
from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..engine.sources.tensor import SourceError
from ..exitcode import ExitCode

INSTALL = "pip install 'accuscope[mcp]'"


def register(p) -> None:
    p.description = ("Serve accuscope to an agent over the Model Context Protocol on stdin/stdout: the tools "
                     "compare, run, advise, show, op, sensitivity, precision and list_tasks, their parameters "
                     "the options of the commands of those names, their results the objects --json prints; "
                     "the workspace's task folders as resources. Every path is under the workspace (relative "
                     "ones are its); a path outside it is refused. Needs " + INSTALL + ". Exit 0: the client "
                     "closed the connection; 2: the SDK is not installed or the workspace cannot be made.")
    p.add_argument("--workspace", default=argparse.SUPPRESS,  # absent: the global --workspace stays
                   help="the folder the server reads and writes under (default: $ACCUSCOPE_WORKSPACE, else "
                        "~/.local/share/accuscope)")
    p.set_defaults(handler=run)


def run(args) -> int:
    try:
        import mcp  # noqa: F401 - the optional extra
    except ImportError as exc:
        raise SourceError(f"accuscope mcp needs the MCP SDK (mcp 2.x), which is not installed here: {INSTALL} "
                          f"({exc})") from None
    from ..app.main import default_workspace
    from .mcptools import build_server
    workspace = Path(args.workspace or default_workspace()).expanduser().absolute()
    try:
        workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SourceError(f"workspace {workspace}: {exc.strerror or exc}") from None
    os.chdir(workspace)  # what a format resolves against the current folder resolves inside it
    build_server(workspace).run("stdio")
    return ExitCode.OK
