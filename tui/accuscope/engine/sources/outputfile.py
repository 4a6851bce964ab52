"""Every file accuscope writes: a fresh temporary file beside the target, renamed over it when complete.

Task folders and output folders are passed between people, so a name there may already be a
symlink pointing anywhere (`--out DIR/tensors.json -> ~/.bashrc`). Nothing here opens the target
name: the content goes to a new file created with O_CREAT|O_EXCL|O_NOFOLLOW in the same folder
(never a file or link already there), and `os.replace` puts it at the name, replacing whatever
entry is there (a planted link is replaced, never followed). Readers see the old file or the new
one, never half of one. The new file gets the permissions of a file created normally (0666 less
the user's umask, applied by the kernel), not mkstemp's 0600.
"""
from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from accuscope.engine.sources.inputfile import mode_problem
from accuscope.engine.sources.tensor import SourceError

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) \
    | getattr(os, "O_BINARY", 0)
_STEM_BYTES = 180  # of the target's name in the temporary name: names stay under the 255-byte limit


def fresh_file(path: str | os.PathLike, suffix: str = ".tmp") -> tuple[int, Path]:
    """(fd open for writing, its path): a new empty file `.{name}.{random}{suffix}` beside `path`. SourceError
    when `path` is a FIFO, a device or a socket: renamed over, `--out /dev/zero.html` run as root replaced the
    device node with a report (a link is replaced, as said above; a folder refuses the rename itself)."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        mode = 0
    if mode and not (stat.S_ISREG(mode) or stat.S_ISLNK(mode) or stat.S_ISDIR(mode)):
        raise SourceError(f"{path}: {mode_problem(mode).removesuffix('; skipped')}: not replaced by what accuscope "
                          "writes (give a file name)")
    stem = path.name.encode()[:_STEM_BYTES].decode("utf-8", "ignore")
    for _ in range(100):
        tmp = path.with_name(f".{stem}.{os.urandom(4).hex()}{suffix}")
        try:
            return os.open(tmp, _FLAGS, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: no free temporary name for {path.name}")


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str | None = None) -> Iterator[Path]:
    """Yield the path of a fresh empty file beside `path` (for writers that take a name: onnx.save);
    rename it over `path` only if the block succeeds, else remove it. The temporary name ends in
    `path`'s suffix unless `suffix` is given (writers that go by the suffix: onnx, numpy)."""
    fd, tmp = fresh_file(path, f".tmp{Path(path).suffix}" if suffix is None else suffix)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8",
                newline: str | None = None, suffix: str = ".tmp") -> Iterator[IO]:
    """Yield an open file (mode "w" or "wb") on a fresh file beside `path`; rename it over `path`
    only if the block succeeds, else remove it."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file writes a new file: mode 'w' or 'wb', not {mode!r}")
    fd, tmp = fresh_file(path, suffix)
    try:
        with (os.fdopen(fd, "wb") if mode == "wb" else
              os.fdopen(fd, "w", encoding=encoding, newline=newline)) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    """`Path.write_text`, through a fresh file renamed over `path`."""
    with atomic_file(path, "w", encoding=encoding) as fh:
        fh.write(text)


def not_a_link(path: str | os.PathLike, what: str = "folder") -> Path:
    """`path`, unless it is a symlink: then SourceError naming it. For the folders accuscope writes
    inside a task folder (exports/, ranks/): task folders are passed between people, and a planted
    link would carry the writes to wherever it points."""
    path = Path(path)
    if path.is_symlink():
        raise SourceError(f"{path}: the {what} is a symbolic link (to {os.readlink(path)}); not writing through "
                          "it: remove the link or choose another place")
    return path


def open_append(path: str | os.PathLike, encoding: str = "utf-8") -> IO:
    """`open(path, "a")` that never follows a symlink at `path` (OSError ELOOP instead): for logs
    appended line by line, which a rename cannot replace."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0), 0o666)
    return os.fdopen(fd, "a", encoding=encoding)


def ours(folder: str | os.PathLike, marker: str, kind: str, also: tuple[str, ...] = ()) -> bool:
    """Whether the output folder `folder` already holds one of ours (its `marker` file is there: it may be
    replaced); False when it is missing or empty (or holds only the names in `also`). SourceError when
    it is a file, or holds other things and no marker: accuscope never writes into a folder that is not
    its own."""
    path = Path(folder)
    try:
        if path.exists() and not path.is_dir():
            raise SourceError(f"{path}: exists and is not a folder")
        if not path.is_dir():
            return False
        if (path / marker).exists():
            return True
        if any(p.name not in also for p in path.iterdir()):
            raise SourceError(f"{path}: exists, is not empty and holds no {marker}: not writing into a folder that "
                              f"is not {kind}; choose another --out")
    except OSError as exc:
        raise SourceError(f"{path}: {exc.strerror or exc}") from None
    return False
