"""First contact with a file named by the user or found in a dump folder: regular files only.

A FIFO or device named like a dump would block a reader forever, and a symlink loop named
`x.npy` fails only when opened: both are found here with `os.stat`, which never blocks. The
structure inside is bounded here too: JSON text nested past the interpreter's stack (`json_loads`)
and folder trees nested past any dump layout (`walk`) are errors a reader reports, never a
RecursionError.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from accuscope.engine.sources.tensor import SourceError


def not_regular(path: str) -> str:
    """Why `path` cannot be read as a data file ("" when it is a readable regular file)."""
    return regular_size(path)[0]


def regular_size(path: str) -> tuple[str, int]:
    """(why `path` cannot be read as a data file or "", its size): not_regular and the size from one stat."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}", 0
    why = mode_problem(st.st_mode)
    return why, 0 if why else st.st_size


def mode_problem(mode: int) -> str:
    """Why a file of this `st_mode` cannot be read as a data file ("" for a regular file)."""
    if stat.S_ISREG(mode):
        return ""
    for test, what in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return f"is {what}, not a regular file; skipped"
    return "not a regular file; skipped"


class NotRegular(OSError):
    """A file found to be no regular file only once opened (it changed after its folder was listed):
    skipped with the reason, as `regular_size` says it."""


OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
"""How a file that should be regular is opened: never waiting on a FIFO, never taking a terminal."""


def require_regular(path: str) -> None:
    """SourceError unless `path` is a regular file that can be stat'ed."""
    why = not_regular(path)
    if why:
        raise SourceError(f"{path}: {why.removesuffix('; skipped')}")


def json_loads(text: str | bytes):
    """json.loads whose every failure is a ValueError: text that is not JSON (json.JSONDecodeError),
    an integer past Python's digit limit, bad UTF-8 (UnicodeDecodeError), and nesting deeper than
    the interpreter's stack allows (json raises RecursionError: a document nested a few thousand
    deep is a few kilobytes)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


WALK_DEPTH = 64  # folder levels `walk` goes below its top: dump layouts use a dozen at most


def walk(top: str | os.PathLike, max_depth: int = WALK_DEPTH):
    """os.walk(top) top-down without following links, errors skipped, as a loop (os.walk recurses
    once per level: a tree a thousand deep raises RecursionError) that does not go below
    `max_depth` levels under `top` (the folders there are yielded with their names in `dirs`,
    not entered). Like os.walk, pruning or reordering `dirs` steers the walk."""
    stack = [(os.fspath(top), 0)]
    while stack:
        folder, depth = stack.pop()
        dirs: list[str] = []
        files: list[str] = []
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
        except OSError:
            continue
        yield folder, dirs, files
        if depth < max_depth:
            below = [os.path.join(folder, d) for d in dirs]
            stack.extend((p, depth + 1) for p in reversed(below) if not os.path.islink(p))


def read_json_object(path: Path, missing: str) -> dict:
    """A JSON file holding an object; SourceError saying `missing`, or what is wrong with it."""
    if not path.is_file():
        raise SourceError(missing)
    try:
        doc = json_loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # not JSON, not UTF-8, nested too deeply, an integer of 5,000 digits
        raise SourceError(f"{path}: unreadable: {e}") from None
    if not isinstance(doc, dict):
        raise SourceError(f"{path}: expected a JSON object, found {type(doc).__name__}")
    return doc
