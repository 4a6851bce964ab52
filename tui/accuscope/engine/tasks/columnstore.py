"""A task's rows as column files, read page by page: the store of a columnar (multi-rank, > ~1M rows) task.

    TASK/columns/meta.json        rows, columns (key, kind), custom, present
    TASK/columns/{i}.npy          a numeric or bool column, memory-mapped when read
    TASK/columns/{i}.txt          a text column: its values as UTF-8, each ended by NUL
    TASK/columns/{i}.off.npy      ... and the byte offset where each value starts (rows + 1)
    TASK/columns/{i}.codes.npy    ... and its dictionary codes (textcodes): each row's int32 code, and
    TASK/columns/{i}.first.npy        the row where each code's value first appears (its text), for a
                                  column of repeating values (op names, types, dtypes; not one of
                                  distinct file names)

It is written by streaming the rank files one after the other (one rank in memory at a time) and
read without loading rows: numeric columns are memory-mapped (copy-on-write: thresholds may set
`fail`), text columns are `PagedText`, which decodes only the rows asked for. The op table reads its
visible rows through them; whole-column work (filtering on text, search, sort by name, the exempt
types) reads the stored codes and decodes only each distinct value's first row.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from accuscope.engine.compare.results import DEFAULT_OF, DEFAULTS, KIND, ResultTable
from accuscope.engine.compare.textcodes import TextCodes
from accuscope.engine.sources.inputfile import json_loads, not_regular
from accuscope.engine.sources.outputfile import not_a_link

COLUMNS_DIR = "columns"
_FORMAT = 1
# A text column keeps codes while its distinct values stay below this many and below half its rows
# (beyond, the values' dictionary would hold most of the column in memory while writing).
MAX_DISTINCT = 1 << 16


class PagedText:
    """A text column on disk that indexes like a 1-d object array: an int gives one str, a slice a
    view, an index or mask array an object array of those rows; anything else decodes it whole."""

    dtype = np.dtype(object)
    ndim = 1

    def __init__(self, data: np.ndarray, offsets: np.ndarray, lo: int = 0, hi: int | None = None,
                 codes: tuple[np.ndarray, np.ndarray] | None = None):
        self._data, self._off = data, offsets
        self._lo, self._hi = lo, len(offsets) - 1 if hi is None else hi
        self._codes = codes  # (codes, first rows) stored with the whole column

    def encoded(self) -> TextCodes | None:
        """The stored dictionary codes of the whole column (textcodes.encode takes them), else None
        (also when they point outside the column: encode then reads the text)."""
        if self._codes is None or self._lo or self._hi != len(self._off) - 1:
            return None
        codes, first = self._codes
        n = len(self)
        if n and (first.min(initial=0) < 0 or first.max(initial=0) >= n or codes.min() < 0
                  or codes.max() >= len(first)):
            self._codes = None
            return None
        return TextCodes(codes, self[first])

    def __len__(self) -> int:
        return self._hi - self._lo

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def size(self) -> int:
        return len(self)

    def _one(self, i: int) -> str:
        a, b = int(self._off[i]), int(self._off[i + 1]) - 1
        return self._data[a:b].tobytes().decode("utf-8", "replace")

    def __getitem__(self, key):
        n = len(self)
        if isinstance(key, (int, np.integer)):
            i = int(key) + (n if key < 0 else 0)
            if not 0 <= i < n:
                raise IndexError(f"row {key} of {n}")
            return self._one(self._lo + i)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step == 1:
                return PagedText(self._data, self._off, self._lo + start, self._lo + max(start, stop))
            key = np.arange(start, stop, step)
        rows = np.asarray(key)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        out = np.empty(len(rows), dtype=object)
        out[:] = [self._one(self._lo + int(i)) for i in rows.tolist()]
        return out

    def tolist(self) -> list[str]:
        if not len(self):
            return []
        a, b = int(self._off[self._lo]), int(self._off[self._hi]) - 1
        return self._data[a:b].tobytes().decode("utf-8", "replace").split("\x00")

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = np.empty(len(self), dtype=object)
        out[:] = self.tolist()
        return out if dtype is None else out.astype(dtype)

    def __iter__(self):
        return iter(self.tolist())

    def copy(self) -> np.ndarray:
        return np.asarray(self)

    def astype(self, dtype, **kwargs) -> np.ndarray:
        return np.asarray(self).astype(dtype, **kwargs)

    def _compare(self, other, op) -> np.ndarray:
        return op(np.asarray(self), np.asarray(other) if isinstance(other, PagedText) else other)

    def __eq__(self, other):  # elementwise, as numpy's
        return self._compare(other, np.equal)

    def __ne__(self, other):
        return self._compare(other, np.not_equal)

    __hash__ = None  # type: ignore[assignment]  # elementwise ==: unhashable, as an ndarray


def write_columns(folder: str | os.PathLike, tables: Iterable[ResultTable]) -> int:
    """Append the tables' rows, one table at a time, as TASK/columns (replaced whole once
    complete); returns the row count. The store holds every column any table has (a plugin's
    metric that only some ranks computed): a table without one gets its missing value there
    (NaN, -1, False or "" as the column's kind says)."""
    folder = Path(folder)
    final = not_a_link(folder / COLUMNS_DIR, "task's columns folder")
    tmp = folder / f".{COLUMNS_DIR}.{os.getpid()}.partial"
    if tmp.is_symlink():  # planted: removed, never followed
        tmp.unlink()
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()  # a new folder (mkdir never follows a link): every file below is written into it
    files: dict[str, tuple] = {}
    coders: dict[str, _Coder] = {}
    layout: list[list[str]] = []
    n, custom, present = 0, [], set()

    def append(key: str, col: np.ndarray, start: int) -> None:
        data, offsets, size, i, _ = files[key]
        if col.dtype == object:
            values = [v.replace("\x00", "?") for v in col.tolist()]
            if key not in coders:
                coders[key] = _Coder(tmp / f"{i}.codes.raw")
            coders[key].add(values, start)
            raw = ("\x00".join(values) + "\x00").encode("utf-8") if values else b""
            ends = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == 0) + 1 + size[0]
            offsets.write(ends.astype(np.int64).tobytes())
            data.write(raw)
            size[0] += len(raw)
        elif key == "index":  # numbered through the whole task, as ResultTable.concat does
            data.write(np.arange(start, start + len(col), dtype=np.int64).tobytes())
        else:
            data.write(np.ascontiguousarray(col).tobytes())

    try:
        for table in tables:
            custom += [c for c in table.custom if c not in custom]
            present |= table.present
            for key in list(KIND) + table.custom:
                col = table.columns.get(key)
                if col is None or key in files:
                    continue
                i = len(layout)
                text = col.dtype == object
                layout.append([key, "text" if text else str(col.dtype)])
                files[key] = (open(tmp / f"{i}.txt" if text else tmp / f"{i}.raw", "wb"),
                              open(tmp / f"{i}.off.raw", "wb") if text else None, [0], i, col.dtype)
                if n:  # a column the tables before did not have
                    append(key, _missing(key, col.dtype, n), 0)
            for key, (*_, dtype) in files.items():
                col = table.columns.get(key)
                append(key, _missing(key, dtype, len(table)) if col is None else col, n)
            n += len(table)
        for key, (data, offsets, _, i, _) in files.items():
            data.close()
            if offsets is not None:
                offsets.close()
                ends = np.fromfile(tmp / f"{i}.off.raw", dtype=np.int64)
                np.save(tmp / f"{i}.off.npy", np.concatenate(([0], ends)).astype(np.int64))
                (tmp / f"{i}.off.raw").unlink()
                coders[key].finish(tmp / f"{i}.codes.npy", tmp / f"{i}.first.npy")
            else:
                kind = dict(layout)[key]
                np.save(tmp / f"{i}.npy", np.fromfile(tmp / f"{i}.raw", dtype=kind))
                (tmp / f"{i}.raw").unlink()
        meta = {"format": _FORMAT, "rows": n, "columns": layout, "custom": custom, "present": sorted(present)}
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    finally:
        for coder in coders.values():
            coder.close()
        for data, offsets, *_ in files.values():
            data.close()
            if offsets is not None:
                offsets.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return n


def _missing(key: str, dtype: np.dtype, n: int) -> np.ndarray:
    """`n` rows of column `key` (of `dtype`) that a table did not have: the column's missing value."""
    kind = KIND.get(key) or {"O": "text", "f": "float", "b": "bool"}.get(dtype.kind, "int")
    return np.full(n, DEFAULT_OF.get(key, DEFAULTS[kind]), dtype=dtype)


class _Coder:
    """A text column's codes while write_columns streams it: the distinct values seen so far and the
    row each first appeared at; given up (no files) past MAX_DISTINCT values."""

    def __init__(self, path: Path):
        self.path, self.file = path, open(path, "wb")
        self.index: dict[str, int] | None = {}
        self.first: list[int] = []

    def add(self, values: list[str], start: int) -> None:
        if self.index is None:
            return
        index, known = self.index, len(self.index)
        codes = np.array([index.setdefault(v, len(index)) for v in values], dtype=np.int32)
        if len(index) > known:
            new = np.flatnonzero(codes >= known)  # rows holding values new in this part, and where
            self.first += (start + new[np.unique(codes[new], return_index=True)[1]]).tolist()
        if len(index) > MAX_DISTINCT and len(index) > (start + len(values)) // 2:
            self.index, self.first = None, []
            return
        self.file.write(codes.tobytes())

    def finish(self, codes_path: Path, first_path: Path) -> None:
        self.file.close()
        if self.index is not None:
            np.save(codes_path, np.fromfile(self.path, dtype=np.int32))
            np.save(first_path, np.asarray(self.first, dtype=np.int64))
        self.path.unlink(missing_ok=True)

    def close(self) -> None:
        self.file.close()


def _regular(path: Path) -> Path:
    """`path`, a regular file of the task's column store; ValueError naming it otherwise (a named pipe put in
    its place would block the read for ever: task folders are passed between people)."""
    why = not_regular(str(path))
    if why:
        raise ValueError(f"{path}: {why.removesuffix('; skipped')}")
    return path


def _stored_codes(base: Path, i: int, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """A text column's stored (codes, first rows), or None when it has none or they are not a column
    of its length (what they point at is checked when they are used)."""
    if not (base / f"{i}.codes.npy").exists():
        return None
    codes = np.load(_regular(base / f"{i}.codes.npy"), mmap_mode="r", allow_pickle=False)
    first = np.load(_regular(base / f"{i}.first.npy"), allow_pickle=False)
    if codes.shape != (n,) or codes.dtype != np.int32 or first.ndim != 1 or first.dtype != np.int64:
        raise ValueError(f"{base / f'{i}.codes.npy'}: codes that do not fit the column's {n:,} values")
    return codes, first


def read_columns(folder: str | os.PathLike) -> ResultTable:
    """The table of TASK/columns, paged (nothing read but offsets); ValueError when its files do not
    hold what meta.json claims."""
    base = Path(folder) / COLUMNS_DIR
    meta = json_loads(_regular(base / "meta.json").read_text(encoding="utf-8"))
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        raise ValueError(f"{base / 'meta.json'}: not a column store of format {_FORMAT}")
    n, custom = meta["rows"], list(meta["custom"])
    columns: dict[str, Any] = {}  # PagedText stands in for a text column's ndarray
    for i, (key, kind) in enumerate(meta["columns"]):
        if kind == "text":
            offsets = np.load(_regular(base / f"{i}.off.npy"), mmap_mode="r", allow_pickle=False)
            data = np.memmap(_regular(base / f"{i}.txt"), dtype=np.uint8, mode="r") if offsets[-1] \
                else np.zeros(0, np.uint8)
            if len(offsets) != n + 1 or int(offsets[-1]) != len(data):
                raise ValueError(f"{base / f'{i}.txt'}: holds other than the {n:,} values meta.json claims")
            columns[key] = PagedText(data, offsets, codes=_stored_codes(base, i, n))
        else:
            col = np.load(_regular(base / f"{i}.npy"), mmap_mode="c", allow_pickle=False)
            if col.shape != (n,):
                raise ValueError(f"{base / f'{i}.npy'}: holds {col.size:,} values, not {n:,}")
            columns[key] = col
    for key in KIND:  # a column no rank had (an older file): its defaults
        if key not in columns:
            columns[key] = ResultTable.from_columns({"index": np.zeros(n, dtype=np.int64)}).columns[key]
    return ResultTable(columns, custom, meta["present"])
