"""The `accuscope` command: argparse front door; each subcommand lives in accuscope.commands."""
from __future__ import annotations

import argparse
import os
import signal
import sys

# Before numpy loads: one BLAS thread. accuscope spreads work over processes itself; OpenBLAS
# threads on its chunk-sized dot products made the in-process comparison 1.35x slower (measured).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from . import __version__
from .commands import COMMANDS, options
from .commands.common import err, show
from .exitcode import ExitCode


def _report_to() -> str:
    """Where to report a bug: the package's issue tracker URL when its metadata names one."""
    from importlib.metadata import PackageNotFoundError, metadata
    try:
        urls = metadata("accuscope").get_all("Project-URL") or []
    except PackageNotFoundError:
        urls = []
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() in ("issues", "bug tracker", "tracker"):
            return f"at {url.strip()}"
    return "to the accuscope maintainers (the issue tracker of wherever you installed it from)"


class _Commands(argparse._SubParsersAction):
    """The subcommands, each parser filled with its options only when argparse meets its name: only
    the command given is imported (`accuscope --help` lists them all from COMMANDS)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if values and values[0] in self.choices:
            options(values[0], self.choices[values[0]])
        super().__call__(parser, namespace, values, option_string)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="accuscope",
        description="Compare a converted / lower-precision network's dumps with the original's, operator by "
                    "operator. Without a command: the app, on the task browser of the workspace.",
    )
    parser.add_argument("--version", action="version", version=f"accuscope {__version__}")
    parser.add_argument("--workspace", help="folder whose tasks the app lists (default: $ACCUSCOPE_WORKSPACE, "
                                            "else ~/.local/share/accuscope)")
    parser.add_argument("--debug", action="store_true", help="on an internal error, show the Python traceback")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands)
    for command in COMMANDS:
        sub.add_parser(command.name, help=command.help)
    return parser


def _app(args) -> int:
    from .app.main import run as run_app
    return run_app(args.workspace)


def _terminate(signum, frame):
    raise KeyboardInterrupt  # SIGTERM cancels like Ctrl+C: the task is marked cancelled, its result kept


def main(argv: list[str] | None = None) -> int:
    """Exit codes: see ExitCode. A SourceError (or a place that cannot be written) is 2 with its
    one-line message; any other exception is 3 with one line saying it is a bug (--debug: traceback)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is not None:
        signal.signal(signal.SIGTERM, _terminate)  # the app handles its own signals
    try:
        return int(args.handler(args) if args.command is not None else _app(args))
    except KeyboardInterrupt:
        err.print("interrupted")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # the reader went away (`accuscope show T | head`): not a failure of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        return ExitCode.PIPE_CLOSED
    except Exception as exc:  # noqa: BLE001 - the one place every failure ends
        from .engine.sources.tensor import SourceError
        from .engine.tasks.task import unwritable
        known = exc if isinstance(exc, SourceError) else unwritable(exc, getattr(exc, "filename", None) or "")
        if known is not None:
            err.print(f"[bold red]error:[/] {show(known)}", soft_wrap=True)
            return ExitCode.UNUSABLE
        if args.debug:
            err.print_exception()
        err.print(f"[bold red]internal error:[/] {show(type(exc).__name__)}: {show(exc)} - this is a bug "
                  f"in accuscope {__version__}; please report it {_report_to()} "
                  f"({'with the traceback above' if args.debug else 'run again with --debug for the traceback'})",
                  soft_wrap=True)
        return ExitCode.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
