"""The `accuscope` command: argparse front door; each subcommand lives in accuscope.commands.

Ctrl+C (SIGINT) and SIGTERM end a command with exit 130 and the one line `interrupted`, at any
moment from the first line of this module on: `_take_signals_early` takes them before anything is
imported (in the `accuscope` program only: not in a test, nor in a helper that re-runs the script as
`__mp_main__`); `main` then makes them KeyboardInterrupt (a running task is marked cancelled) and
imports the rest (argparse, rich, the command's engine: most of the first half second) inside its
handler; once the command has returned, a signal ends the process at once. A signal whose
KeyboardInterrupt lands where Python cannot raise it (a __del__, an import-system callback) is
delivered again a millisecond later, and one that C code turned into another error (an extension's
import) still ends the command as interrupted, never as a bug. A signal before Python
runs this module (the interpreter's own start) ends it as it ends any program: killed by it.
(No `from __future__ import annotations` here: it is an import, before the signals are taken.)"""
# lazy: app.main, commands, commands.common, engine.sources.tensor, engine.tasks.task, exitcode
import os
import sys

INTERRUPTED = 130  # ExitCode.INTERRUPTED, without importing enum before the signals are taken


def _startup(signum, frame):
    try:
        os.write(2, b"interrupted\n")
    except OSError:
        pass
    raise SystemExit(INTERRUPTED)  # out of any import under way, with no traceback


def _the_program() -> bool:
    """Whether this process is the `accuscope` program: its script or `python -m accuscope`, run as
    __main__ (a worker re-running the script for multiprocessing runs it as __mp_main__)."""
    main = sys.modules.get("__main__")
    if getattr(main, "__name__", None) != "__main__":
        return False
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        return spec.name == "accuscope.__main__"
    name = os.path.basename(getattr(main, "__file__", None) or "")
    return name in ("accuscope", "accuscope.exe", "accuscope-script.py")


def _take_signals_early() -> tuple[int, ...]:
    """The signals given to `_startup` (SIGINT unless this process was started with it ignored)."""
    if not _the_program():
        return ()
    import _signal  # the C module: `signal` imports enum first, which a signal could interrupt
    taken = tuple(s for s in (_signal.SIGINT, _signal.SIGTERM) if _signal.getsignal(s) != _signal.SIG_IGN)
    for s in taken:
        _signal.signal(s, _startup)
    return taken


_EARLY = _take_signals_early()

import gc  # noqa: E402 - after the signals are taken
import signal  # noqa: E402

# Before numpy loads: one BLAS thread. accuscope spreads work over processes itself; OpenBLAS
# threads on its chunk-sized dot products made the in-process comparison 1.35x slower (measured).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


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


def build_parser():
    """The parser; a subcommand's parser is made and filled with its options only when argparse meets
    its name: only the command given is imported (`accuscope --help` lists them all from COMMANDS)."""
    import argparse

    from . import __version__
    from .commands import COMMANDS, options

    class _Commands(argparse._SubParsersAction):
        """Each command listed (its `--help` line, as add_parser's `help=` makes it) and accepted as a
        choice, its parser made when it is the one given: sixteen empty parsers, each with its help
        formatter and terminal-size check, were 13M instructions of every command (2% of a one-pair
        compare, callgrind)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            for command in COMMANDS:
                self._choices_actions.append(self._ChoicesPseudoAction(command.name, (), command.help))
                self._name_parser_map[command.name] = None  # made by __call__

        def __call__(self, parser, namespace, values, option_string=None):
            if values and self.choices.get(values[0], parser) is None:
                made = self._name_parser_map[values[0]] = self._parser_class(prog=f"{self._prog_prefix} {values[0]}")
                options(values[0], made)
            super().__call__(parser, namespace, values, option_string)

    parser = argparse.ArgumentParser(
        prog="accuscope",
        description="Compare a converted / lower-precision network's dumps with the original's, operator by "
                    "operator. Without a command: the app, on the task browser of the workspace.",
    )
    parser.add_argument("--version", action="version", version=f"accuscope {__version__}")
    parser.add_argument("--workspace", help="folder whose tasks the app lists (default: $ACCUSCOPE_WORKSPACE, "
                                            "else ~/.local/share/accuscope)")
    parser.add_argument("--debug", action="store_true", help="on an internal error, show the Python traceback")
    parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands)
    return parser


def _app(args) -> int:
    from .app.main import run as run_app
    return run_app(args.workspace)


_signalled = False  # whether Ctrl+C or SIGTERM came during this command


def _interrupt(signum, frame):
    """Ctrl+C and SIGTERM: KeyboardInterrupt (a running task is marked cancelled, its result kept),
    remembered: C code running when it lands may turn it into another error (an extension module's
    import says ImportError), which is then still an interruption, not a bug."""
    global _signalled
    _signalled = True
    raise KeyboardInterrupt


_ALARM = (signal.SIGALRM,) if hasattr(signal, "setitimer") else ()  # not on Windows


def _unraisable(unraisable) -> None:
    """sys.unraisablehook: a KeyboardInterrupt raised where Python cannot raise (a weakref callback of
    the import system, a __del__) would be printed and lost; it is delivered again, at once, where it
    can be raised. Anything else: as Python says it."""
    if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        # a millisecond later by SIGALRM (its handler: _interrupt): raised now, it would land in this hook
        # again; if it lands in such a place once more, this hook asks again
        if _ALARM:
            signal.setitimer(signal.ITIMER_REAL, 0.001)
        return
    sys.__unraisablehook__(unraisable)


def _done(signum, frame):
    os._exit(INTERRUPTED)  # the command has returned and its output is flushed: nothing left to cancel


def main(argv: list[str] | None = None) -> int:
    """Exit codes: see ExitCode. A SourceError (or a place that cannot be written) is 2 with its
    one-line message; any other exception is 3 with one line saying it is a bug (--debug: traceback);
    Ctrl+C or SIGTERM, 130 with the line `interrupted`."""
    global _signalled
    _signalled = False
    hook, sys.unraisablehook = sys.unraisablehook, _unraisable
    try:
        try:
            signal.signal(signal.SIGTERM, _interrupt)
            for sig in _ALARM:
                signal.signal(sig, _interrupt)  # a lost interruption delivered again (_unraisable)
            if signal.SIGINT in _EARLY:
                signal.signal(signal.SIGINT, _interrupt)
            return _run(argv)
        except KeyboardInterrupt:
            _say("interrupted")
            return INTERRUPTED
    except KeyboardInterrupt:  # a second one while saying so
        return INTERRUPTED
    finally:
        sys.unraisablehook = hook
        if argv is None:  # the program itself (its script, python -m): a signal from here on ends it
            gc.freeze()  # the exit's last collection skips what is left (it walked every object: 5% of a small compare)
            _flush()
            for sig in (signal.SIGINT, signal.SIGTERM, *_ALARM):
                if signal.getsignal(sig) != signal.SIG_IGN:
                    signal.signal(sig, _done)


def _run(argv: list[str] | None) -> int:
    args = None
    # The cyclic collector off while the command's modules import: they make ~80,000 objects and no
    # garbage, and its young-generation walks over them were 8-12% of importing the app (measured). On
    # again before the command runs; the app turns it on after its first frame (app.AccuscopeApp).
    collecting = gc.isenabled()
    gc.disable()
    try:
        args = build_parser().parse_args(argv)
        if collecting and not (args.command is None or getattr(args, "app", False)):
            gc.enable()
        if args.command is None:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the app handles its own signals
        return int(args.handler(args) if args.command is not None else _app(args))
    except BrokenPipeError:  # the reader went away (`accuscope show T | head`): not a failure of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        from .exitcode import ExitCode
        return ExitCode.PIPE_CLOSED
    except Exception as exc:  # noqa: BLE001 - the one place every failure ends
        if _signalled:  # the signal's KeyboardInterrupt, turned into this by C code it interrupted
            raise KeyboardInterrupt from None
        from . import __version__
        from .commands.common import err, show
        from .exitcode import ExitCode
        known = _known(exc)
        if known is not None:
            err.print(f"[bold red]error:[/] {show(known)}", soft_wrap=True)
            return ExitCode.UNUSABLE
        debug = args is not None and args.debug
        if debug:
            err.print_exception()
        err.print(f"[bold red]internal error:[/] {show(type(exc).__name__)}: {show(exc)} - this is a bug "
                  f"in accuscope {__version__}; please report it {_report_to()} "
                  f"({'with the traceback above' if debug else 'run again with --debug for the traceback'})",
                  soft_wrap=True)
        return ExitCode.INTERNAL
    finally:
        if collecting:
            gc.enable()


def _known(exc: Exception) -> Exception | None:
    """The user's problem `exc` says (a SourceError, a place that cannot be written), or None for a bug.
    An engine that cannot be imported (a broken numpy) is a bug to report, not a second traceback."""
    try:
        from .engine.sources.tensor import SourceError
        from .engine.tasks.task import unwritable
    except ImportError:
        return None
    return exc if isinstance(exc, SourceError) else unwritable(exc, getattr(exc, "filename", None) or "")


def _say(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


if __name__ == "__main__":
    sys.exit(main())
