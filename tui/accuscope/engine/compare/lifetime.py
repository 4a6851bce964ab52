"""Helper processes that never outlive accuscope, and telling whether a recorded process still runs.

Worker and plugin-host processes are forked by accuscope itself (the CLI) or by multiprocessing's
fork server (the app: see process_context); a SIGKILL of accuscope does not reach them and their
queues never close: without care they wait forever.
`die_with_parent` (run first thing in every helper) asks Linux to kill the helper when its parent
goes (PR_SET_PDEATHSIG; the fork server exits when accuscope does) and, everywhere, watches
accuscope's pid from a thread and exits once it is gone.

No Python accuscope starts reads code from the folder it was started in. `python -c` and `python -m`
put that folder first on sys.path, so a `struct.py` or `numpy.py` lying there would run in the fork
server, its resource tracker, spawned workers (Dask's) and the app `serve` starts. `safe_helpers()`
makes every interpreter multiprocessing starts run with -P (3.11+); 3.10 has no -P (nor
PYTHONSAFEPATH), so there a first `-c` drops that sys.path entry ('' for -c) before the command
multiprocessing gives runs (the site-packages, user site and PYTHONPATH entries stay; `site` has
run before the entry is added). `module_command` does the same for `python -m`. The environment is
left alone: commands of the user's that accuscope runs (`precision --check`) see theirs unchanged.
"""
# lazy: engine.sources.tensor
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

_PR_SET_PDEATHSIG = 1
WATCH_SECONDS = 0.5


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    except OSError:
        return False
    return True


def die_with_parent(main_pid: int) -> None:
    """Make this helper process end when accuscope (pid `main_pid`) ends, however it ends."""
    if sys.platform.startswith("linux"):
        import ctypes.util  # in the helper only: ctypes.util brings subprocess and tempfile to every importer
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if not pid_alive(main_pid):  # it ended before the request above was in place
        os._exit(1)

    def watch() -> None:
        while pid_alive(main_pid) and os.getppid() != 1:
            time.sleep(WATCH_SECONDS)
        os._exit(1)
    threading.Thread(target=watch, daemon=True, name="accuscope-parent-watch").start()



def end_pool(pool) -> None:
    """End a ProcessPoolExecutor now, on Ctrl+C, SIGTERM or a closed generator: kill its workers and
    shut it down without waiting. Its `with` exit then joins a manager thread that finds the workers
    gone, instead of waiting for pairs in flight (or, interrupted while a worker was starting, for a
    worker that never answers: a hang at exit seen once in a signal test)."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError, ValueError):  # already reaped or closed
            process.kill()
    pool.shutdown(wait=False, cancel_futures=True)

# 3.10: `python [flags] -c DROP -c CMD [args]`: sys.argv is ['-c', '-c', CMD, args]; drop sys.path[0]
# ('' for -c), then run CMD with sys.argv ['-c', args] as `python -c CMD args` would have it
_DROP_CWD = ("import sys; sys.path[:1] = [p for p in sys.path[:1] if p]; _accuscope_cmd = sys.argv[2]; "
             "del sys.argv[1:3]; exec(_accuscope_cmd)")
_RUN_MODULE = ("import runpy, sys; sys.path[:1] = [p for p in sys.path[:1] if p]; "
               "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")
_install = threading.Lock()


def _has_safe_path(version: tuple[int, ...] | None = None) -> bool:
    return (version or sys.version_info) >= (3, 11)


def safe_flags(flags: list[str], version: tuple[int, ...] | None = None) -> list[str]:
    """Interpreter flags that keep the start folder off sys.path, added to `flags` (those before the
    `-c CMD` multiprocessing appends)."""
    if _has_safe_path(version):
        return flags if "-P" in flags or "-I" in flags else [*flags, "-P"]
    return [*flags, "-c", _DROP_CWD]


def safe_helpers() -> None:
    """Make every Python that multiprocessing starts from here on (fork server, resource tracker,
    spawn workers; Dask's LocalCluster goes through the same) run with the safe path: its command
    line is `[executable] + util._args_from_interpreter_flags() + ['-c', CMD, ...]` (3.10 to 3.13),
    so the flags gain -P (or, on 3.10, the `-c` that drops the start folder). Idempotent."""
    from multiprocessing import util
    with _install:
        original = util._args_from_interpreter_flags  # type: ignore[attr-defined]
        if getattr(original, "accuscope_safe", False):
            return

        def flags() -> list[str]:
            return safe_flags(original())
        setattr(flags, "accuscope_safe", True)  # noqa: B010 - an attribute functions do not declare
        util._args_from_interpreter_flags = flags  # type: ignore[attr-defined]


def module_command(module: str, *args: str, version: tuple[int, ...] | None = None) -> list[str]:
    """`python -m module args` for this interpreter, the start folder kept off sys.path."""
    if _has_safe_path(version):
        return [sys.executable, "-P", "-m", module, *args]
    return [sys.executable, "-c", _RUN_MODULE, module, *args]  # 3.10 has no "-P": _RUN_MODULE drops '' first


_daemonic = threading.Lock()


@contextlib.contextmanager
def children_allowed() -> Iterator[None]:
    """Let a daemonic process start a helper: a Dask worker is one (its nanny starts it so), and
    multiprocessing refuses it children (`daemonic processes are not allowed to have children`)
    because a daemonic process is ended without joining them, which would leave them orphaned.
    accuscope's helpers end with their parent (die_with_parent), so the flag is lifted around the
    start (restored after)."""
    from multiprocessing import current_process
    # the flag lives in BaseProcess's private `_config` dict, which typeshed does not declare
    config = current_process()._config  # type: ignore[attr-defined]
    with _daemonic:  # every start: a thread must not read the flag another has lifted
        daemon = config.get("daemon")
        if daemon:
            config["daemon"] = False
        try:
            yield
        finally:
            if daemon:
                config["daemon"] = daemon


def process_context():
    """The multiprocessing context helpers are started from: fork where this process runs no other
    thread (the CLI: a helper starts in milliseconds with the engine already imported, where the fork
    server first imports it, 0.2-0.3 s), else the fork server, engine preloaded (the app's threads
    make fork unsafe: a lock one of them holds stays locked in the child)."""
    from multiprocessing import get_all_start_methods, get_context
    safe_helpers()
    if threading.active_count() == 1 and "fork" in get_all_start_methods():
        return get_context("fork")
    _start_process_services()
    return get_context("forkserver")


def _start_process_services() -> None:
    """multiprocessing's resource tracker hands sys.stderr's file descriptor to its process; a host
    that replaces sys.stderr (Textual captures it: fileno() -1) makes that fail, so the services
    start with the real stderr in place."""
    from multiprocessing import forkserver, resource_tracker
    saved = sys.stderr
    try:
        try:
            usable = saved is not None and saved.fileno() >= 0
        except (AttributeError, OSError, ValueError):
            usable = False
        if not usable and sys.__stderr__ is not None:
            sys.stderr = sys.__stderr__
        resource_tracker.ensure_running()
        forkserver.set_forkserver_preload(["accuscope.engine.compare.comparison"])  # helpers fork with the engine imported
        try:
            forkserver.ensure_running()
        except OSError as exc:  # its socket lies in TMPDIR/pymp-XXXXXXXX/: past 108 bytes for a TMPDIR over ~75
            if "too long" not in str(exc):
                raise
            import tempfile

            from accuscope.engine.sources.tensor import SourceError
            folder = tempfile.gettempdir()
            raise SourceError(f"the temporary folder {folder} ({len(folder)} characters) is too long a path for the "
                              "socket helper processes are started through: set TMPDIR to a shorter one") from None
    finally:
        sys.stderr = saved
