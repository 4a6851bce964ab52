"""A call that must end: run in a forked child under a time limit and a memory limit, so that a parser
that hangs on its input (or allocates what a count in it claims) fails the test, never the machine."""
from __future__ import annotations

import multiprocessing
import pickle
import resource
from collections.abc import Callable
from typing import Any

SECONDS = 60.0  # generous: each such call returns in well under a second
MEMORY = 1 << 30  # address space the child may add to what it inherits


def ends(fn: Callable[..., Any], *args: Any, seconds: float = SECONDS) -> Any:
    """`fn(*args)` in a forked child: what it returns, or the exception it raised, raised here;
    AssertionError when it has not returned after `seconds` (the child is killed) or died."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_run, args=(send, fn, args), daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(seconds):
            raise AssertionError(f"{getattr(fn, '__qualname__', fn)} did not return within {seconds:.0f} s")
        try:
            ok, value = receive.recv()
        except EOFError:
            child.join()
            raise AssertionError(f"{getattr(fn, '__qualname__', fn)} died (exit {child.exitcode})") from None
    finally:
        child.kill()
        child.join()
    if ok:
        return value
    raise value


def _run(send, fn: Callable[..., Any], args: tuple) -> None:
    with open("/proc/self/status") as fh:
        size = next(int(line.split()[1]) << 10 for line in fh if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (size + MEMORY, size + MEMORY))
    try:
        result: tuple[bool, Any] = (True, fn(*args))
    except BaseException as exc:  # noqa: BLE001  # the test re-raises it
        result = (False, exc)
    try:
        pickle.loads(pickle.dumps(result))
    except Exception as exc:  # noqa: BLE001  # an answer that does not come back as it is
        result = (False, AssertionError(f"{result[1]!r} (does not pickle: {exc})"))
    send.send(result)
