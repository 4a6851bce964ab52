"""First contact with a file named by the user or found in a dump folder: regular files only.

A FIFO or device named like a dump would block a reader forever, and a symlink loop named
`x.npy` fails only when opened: both are found here with `os.stat`, which never blocks. The
structure inside is bounded here too: JSON text nested past the interpreter's stack (`json_loads`)
and folder trees nested past any dump layout (`walk`) are errors a reader reports, never a
RecursionError.

Every path an option names (a mapping file, a layout, a model, an input .npy, a plugin folder, a
task's own files) is opened here, by one checked opener: `user_path` (it is there, a regular file or
a folder as meant, within a size limit; os.stat only), `open_user_file` (the same, then opened without
waiting on a FIFO and fstat'd again: a file swapped for a FIFO after the check never blocks) and
`read_user_file` (its bytes, or its UTF-8 text). Each failure is a SourceError naming the path.
"""
from __future__ import annotations

import errno
import io
import json
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, overload

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
    what = _file_type(mode)
    return f"is {what}, not a regular file; skipped" if what else "not a regular file; skipped"


def _file_type(mode: int) -> str:
    for test, what in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISREG, "a file")):
        if test(mode):
            return what
    return ""


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


def user_path(path: str | os.PathLike, what: str, *, folder: bool = False, limit: int | None = None,
              missing: str = "") -> str:
    """`path`, an input the user named (or a task's own file), checked with os.stat, which never blocks:
    it is there (else SourceError `missing`, by default `PATH: no such WHAT`), it is a regular file (a
    folder where `folder`; a FIFO or device would block its reader, or feed it for ever) and it holds at
    most `limit` bytes (None: any size). Every SourceError names the path."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise SourceError(missing or f"{path}: no such {what}") from None
        raise SourceError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    if folder:
        if not stat.S_ISDIR(st.st_mode):
            raise SourceError(f"{path}: is {_file_type(st.st_mode) or 'no folder'}, not a folder (the {what})")
        return path
    _check_file(path, what, st, limit)
    return path


def _check_file(path: str, what: str, st: os.stat_result, limit: int | None) -> None:
    why = mode_problem(st.st_mode)
    if why:
        raise SourceError(f"{path}: {why.removesuffix('; skipped')} (the {what})")
    if limit is not None and st.st_size > limit:
        raise SourceError(f"{path}: {st.st_size:,} bytes, more than a {what} holds ({limit:,} at most)")


def open_user_file(path: str | os.PathLike, what: str, *, limit: int | None = None, missing: str = "") -> io.BufferedReader:
    """`path` checked as `user_path` checks a file, opened for reading in binary: opened without waiting
    (O_NONBLOCK: a FIFO put in its place after the check does not block the open) and checked again on the
    open descriptor, so what is read is the regular file the check saw."""
    path = user_path(path, what, limit=limit, missing=missing)
    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as exc:
        raise SourceError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        _check_file(path, what, os.fstat(fd), limit)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@overload
def read_user_file(path: str | os.PathLike, what: str, limit: int, *, text: Literal[True] = ...,
                   missing: str = "") -> str: ...


@overload
def read_user_file(path: str | os.PathLike, what: str, limit: int, *, text: Literal[False],
                   missing: str = "") -> bytes: ...


def read_user_file(path: str | os.PathLike, what: str, limit: int, *, text: bool = True,
                   missing: str = "") -> str | bytes:
    """The content of a file the user named (`open_user_file`'s checks; at most `limit` bytes, a file grown
    past it since the check refused too): UTF-8 text, or the bytes where not `text`. SourceError naming the
    path for anything wrong, text that is not UTF-8 included (with where it stops being)."""
    with open_user_file(path, what, limit=limit, missing=missing) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise SourceError(f"{os.fspath(path)}: cannot read the {what} ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise SourceError(f"{os.fspath(path)}: more than {limit:,} bytes, more than a {what} holds")
    if not text:
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SourceError(f"{os.fspath(path)}:{line}: the {what} is not UTF-8 text (byte {exc.start:,}: "
                          f"{data[exc.start:exc.start + 1]!r})") from None


def json_loads(text: str | bytes):
    """json.loads whose every failure is a ValueError: text that is not JSON (json.JSONDecodeError),
    an integer past Python's digit limit, bad UTF-8 (UnicodeDecodeError), and nesting deeper than
    the interpreter's stack allows (json raises RecursionError: a document nested a few thousand
    deep is a few kilobytes)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


_SHARED = threading.local()  # .memo: folder -> its listing or the OSError listing it raised, inside `shared_listings`


@contextmanager
def shared_listings() -> Iterator[None]:
    """Within this block (in this thread) each folder is listed once: `listing` (and so `walk`) answer a
    folder listed before from memory. The format sniffs of one detection run in one: each of them looks
    at the folder's names (Ascend, msprobe, MindSpore, ATB before the npy folder's), and a folder of
    20,000 files took a listing of its own for each (~10 ms). Nested blocks share the outermost's."""
    if getattr(_SHARED, "memo", None) is not None:
        yield
        return
    _SHARED.memo = {}
    try:
        yield
    finally:
        _SHARED.memo = None


def listing(folder: str) -> tuple[list[str], list[str]]:
    """(subfolder names, other names) of `folder` in listing order, as `walk` yields them (links to
    folders are folders; an entry whose type cannot be read is not); OSError when it cannot be listed.
    Fresh lists each call (callers sort and prune them); inside `shared_listings`, one listing."""
    _names, dirs, files = _listed(folder)
    return list(dirs), list(files)


def folder_names(folder: str) -> list[str]:
    """Every name in `folder` in listing order (os.listdir's); OSError when it cannot be listed.
    Inside `shared_listings`, the one listing `listing` and `walk` share."""
    return list(_listed(folder)[0])


def _listed(folder: str) -> tuple[list[str], list[str], list[str]]:
    memo = getattr(_SHARED, "memo", None)
    if memo is None:
        return _list(folder)
    found = memo.get(folder)
    if found is None:
        try:
            found = _list(folder)
        except OSError as exc:
            found = exc
        memo[folder] = found
    if isinstance(found, OSError):
        raise found
    return found


def _list(folder: str) -> tuple[list[str], list[str], list[str]]:
    names: list[str] = []
    dirs: list[str] = []
    files: list[str] = []
    with os.scandir(folder) as it:
        for entry in it:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            names.append(entry.name)
            (dirs if is_dir else files).append(entry.name)
    return names, dirs, files


WALK_DEPTH = 64  # folder levels `walk` goes below its top: dump layouts use a dozen at most


def walk(top: str | os.PathLike, max_depth: int = WALK_DEPTH):
    """os.walk(top) top-down without following links, errors skipped, as a loop (os.walk recurses
    once per level: a tree a thousand deep raises RecursionError) that does not go below
    `max_depth` levels under `top` (the folders there are yielded with their names in `dirs`,
    not entered). Like os.walk, pruning or reordering `dirs` steers the walk."""
    stack = [(os.fspath(top), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            dirs, files = listing(folder)
        except OSError:
            continue
        yield folder, dirs, files
        if depth < max_depth:
            below = [os.path.join(folder, d) for d in dirs]
            stack.extend((p, depth + 1) for p in reversed(below) if not os.path.islink(p))


JSON_LIMIT = 1 << 28  # bytes of a JSON document read whole (task.json of 10,000 ranks: a few MB)


def read_json_object(path: Path, missing: str, limit: int = JSON_LIMIT) -> dict:
    """A JSON file holding an object (read through `read_user_file`); SourceError saying `missing`, or what is
    wrong with it."""
    data = read_user_file(path, "JSON file", limit, text=False, missing=missing)
    try:
        doc = json_loads(data)
    except ValueError as e:  # not JSON, not UTF-8, nested too deeply, an integer of 5,000 digits
        raise SourceError(f"{path}: unreadable: {e}") from None
    if not isinstance(doc, dict):
        raise SourceError(f"{path}: expected a JSON object, found {type(doc).__name__}")
    return doc
