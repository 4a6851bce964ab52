"""The `accuscope` command: argparse front door; each subcommand lives in accuscope.commands."""
from __future__ import annotations

import argparse
import os
import sys

# Before numpy loads: one BLAS thread. accuscope spreads work over processes itself; OpenBLAS
# threads on its chunk-sized dot products made the in-process comparison 1.35x slower (measured).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from rich.console import Console
from rich.markup import escape

from . import __version__
from .commands import COMMANDS
from .engine.tensor import SourceError

EXIT_OK, EXIT_FINDINGS, EXIT_UNUSABLE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accuscope",
        description="Compare a converted / lower-precision network's dumps with the original's, operator by "
                    "operator. Without a command: the app, on the task browser of the workspace.",
    )
    parser.add_argument("--version", action="version", version=f"accuscope {__version__}")
    parser.add_argument("--workspace", help="folder whose tasks the app lists (default: $ACCUSCOPE_WORKSPACE, "
                                            "else ~/.local/share/accuscope)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        from .app.main import run as run_app
        run_app(args.workspace)
        return EXIT_OK
    console = Console(stderr=True, highlight=False)
    try:
        return args.handler(args)
    except SourceError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        console.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
