"""First contact with a file named by the user or found in a dump folder: regular files only.

A FIFO or device named like a dump would block a reader forever, and a symlink loop named
`x.npy` fails only when opened: both are found here with `os.stat`, which never blocks.
"""
from __future__ import annotations

import os
import stat

from accuscope.engine.sources.tensor import SourceError


def not_regular(path: str) -> str:
    """Why `path` cannot be read as a data file ("" when it is a readable regular file)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return ""
    for test, what in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return f"is {what}, not a regular file; skipped"
    return "not a regular file; skipped"


def require_regular(path: str) -> None:
    """SourceError unless `path` is a regular file that can be stat'ed."""
    why = not_regular(path)
    if why:
        raise SourceError(f"{path}: {why.removesuffix('; skipped')}")
