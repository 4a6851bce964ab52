"""accuscope through its real entry point, in a fresh interpreter, with a wide console and no colour."""
from __future__ import annotations

import os
import resource
import subprocess
import sys

ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def accuscope(*args, timeout: float = 600, memory: int | None = None, cwd: str | os.PathLike | None = None,
              **env: str) -> subprocess.CompletedProcess:
    """`accuscope ARGS` in a fresh interpreter (`env`: more environment), its output captured; a run
    longer than `timeout` seconds is a hang (a model conversion and its advice take minutes on a
    loaded 2-core machine). `memory`: its address space capped at that many bytes (RLIMIT_AS), so that
    a run allocating without bound fails as a MemoryError instead of taking the machine's memory. `cwd`: the
    folder it runs in (a documented line's relative paths)."""
    def cap() -> None:
        if memory is not None:  # it is: cap runs only when memory is given
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    return subprocess.run([sys.executable, "-m", "accuscope", *map(str, args)],
                          capture_output=True, text=True, env={**ENV, **env}, timeout=timeout, cwd=cwd,
                          preexec_fn=cap if memory else None)
