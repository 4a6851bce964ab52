"""Golden (framework-side) dumps: npy folders, npz files, raw .bin/.bmrt and Polygraphy RunResults.

`open_golden` reads only what it needs to list tensors (npy headers, file sizes); data are read
when `Tensor.load()` is called. A source that is unusable as a whole raises `SourceError`; a single
bad file or entry becomes a `Problem` (and a `Tensor` carrying that problem) while the rest loads.
Nothing is ever unpickled: object arrays are refused from their header, before any data is read.
"""
from __future__ import annotations

import math
import os
import zipfile
from dataclasses import dataclass
from functools import partial
from typing import IO, Callable, Sequence

import numpy as np
from numpy.lib import format as npformat

from . import polygraphy
from .names import parse_golden_name, read_mapping_csv
from .tensor import OUTPUT, Payload, Problem, SourceError, Tensor, read_payload, sanitize

RAW_SUFFIXES = (".bin", ".bmrt", ".dat")
PICKS = ("newest", "oldest")
_Key = tuple[str, str, int]


class GoldenDump:
    """The tensors of one golden source, one chosen version per (op, io, index)."""

    def __init__(self, path: str, kind: str, entries: Sequence[Tensor], problems: list[Problem],
                 pick: str = "newest"):
        self.path = path
        self.kind = kind
        self.problems = problems
        self._versions: dict[_Key, list[Tensor]] = {}
        for t in entries:
            self._versions.setdefault((t.op, t.io, t.index), []).append(t)
        for group in self._versions.values():  # newest first; undated files count as oldest
            group.sort(key=lambda t: -1 if t.timestamp is None else t.timestamp, reverse=True)
        chosen = 0 if pick == "newest" else -1
        self._chosen = {key: group[chosen] for key, group in self._versions.items()}
        self.tensors: list[Tensor] = list(self._chosen.values())
        # Dump writers sanitize op names in file names: look ops up through sanitize() on both sides.
        self._clean: dict[_Key, _Key] = {}
        for op, io_, index in self._versions:
            self._clean.setdefault((sanitize(op), io_, index), (op, io_, index))
        self._by_tensor_name = {t.tensor_name: t for t in self.tensors if t.tensor_name}

    def _key(self, op: str, io_: str, index: int) -> _Key | None:
        key = (op, io_, index)
        return key if key in self._versions else self._clean.get((sanitize(op), io_, index))

    def versions(self, op: str, io: str = OUTPUT, index: int = 0) -> list[Tensor]:
        """Every dumped version of a tensor, newest first (empty when the op is not in the dump)."""
        key = self._key(op, io, index)
        return list(self._versions[key]) if key else []

    def find(self, op: str, io: str = OUTPUT, index: int = 0) -> Tensor | None:
        """The chosen version for an op name, raw (`conv1/relu`) or as in file names (`conv1_relu`)."""
        key = self._key(op, io, index)
        return self._chosen[key] if key else None

    def find_tensor(self, tensor_name: str) -> Tensor | None:
        """By graph tensor name (npz key, Polygraphy output name); npy folders carry none."""
        return self._by_tensor_name.get(tensor_name)

    def __repr__(self) -> str:
        return (f"GoldenDump({self.path!r}, kind={self.kind!r}, {len(self.tensors)} tensors, "
                f"{len(self.problems)} problems)")


def open_golden(path: str | os.PathLike, *, shape: Sequence[int] | int | None = None, dtype=None,
                pick: str = "newest", runner: str | None = None, iteration: int = 0) -> GoldenDump:
    """Open a golden dump, its kind detected from the path.

    `shape`/`dtype` are needed (only) for raw .bin/.bmrt/.dat files; `runner`/`iteration` select a
    Polygraphy run (default: first runner, iteration 0); `pick` chooses among several timestamps.
    """
    path = os.fspath(path)
    if pick not in PICKS:
        raise ValueError(f"pick must be one of {PICKS}, not {pick!r}")
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file or folder")
    lower = path.lower()
    if os.path.isdir(path) and polygraphy.is_run_results(path):  # `polygraphy run --save-outputs DIR`
        kind, (entries, problems) = "polygraphy", polygraphy.read(path, runner, iteration)
    elif os.path.isdir(path):
        kind, (entries, problems) = "npy", _read_npy_folder(path)
    elif lower.endswith(".npz"):
        kind, (entries, problems) = "npz", _read_npz(path)
    elif lower.endswith(RAW_SUFFIXES):
        kind, (entries, problems) = "bin", _read_raw(path, shape, dtype)
    elif lower.endswith(".json"):
        kind, (entries, problems) = "polygraphy", polygraphy.read(path, runner, iteration)
    else:
        hint = "; open the folder that holds it" if lower.endswith(".npy") else ""
        raise SourceError(f"{path}: unknown golden file type (expected a folder of .npy files, .npz, "
                          f".bin/.bmrt/.dat, or Polygraphy RunResults .json){hint}")
    return GoldenDump(path, kind, entries, problems, pick)


# --- shared: npy headers and Tensor construction -------------------------------------------------

@dataclass(frozen=True)
class _NpyHeader:
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran: bool
    offset: int  # where the data start in the npy stream

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _npy_header(fh: IO[bytes], size: int) -> _NpyHeader:
    """Parse an npy header without reading data; refuse object arrays and streams too short for the data."""
    version = npformat.read_magic(fh)
    # Version 3 differs from 2 only in allowing utf-8 field names.
    read = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
    shape, fortran, dtype = read(fh)
    if dtype.hasobject:
        raise ValueError("holds Python objects (object dtype); refusing to unpickle")
    head = _NpyHeader(np.dtype(dtype), tuple(int(n) for n in shape), bool(fortran), fh.tell())
    if size < head.offset + head.nbytes:
        raise ValueError(f"truncated: header promises {head.nbytes} data bytes, only "
                         f"{max(size - head.offset, 0)} present")
    return head


def _tensor(op: str, source: str, *, io: str = OUTPUT, index: int = 0, dtype: np.dtype | None = None,
            shape: Sequence[int] = (), **fields) -> Tensor:
    """Every golden tensor is plain ND data in logical layout."""
    return Tensor(op=op, io=io, index=index, dtype=dtype, shape=tuple(shape), source=source,
                  dtype_name=dtype.name if dtype is not None else "", format="ND", **fields)


def _npy_tensor(op: str, source: str, problems: list[Problem], open_stream: Callable[[], IO[bytes]],
                size: int, reader: Callable[[], np.ndarray], *, label: str = "", mapped: bool = False,
                **fields) -> Tensor:
    """A Tensor from an npy stream's header; a broken header becomes a Problem and a tensor carrying it.

    `mapped`: the stream is a plain file, so C-ordered data get a Payload for chunked reads.
    """
    try:
        with open_stream() as fh:
            head = _npy_header(fh, size)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        message = f"{label}: {exc}" if label else str(exc)
        problems.append(Problem(source, message))
        return _tensor(op, source, problem=message, **fields)
    payload = None
    if mapped and not head.fortran:
        payload = Payload(source, head.offset, head.nbytes, head.dtype, head.shape)
    return _tensor(op, source, dtype=head.dtype, shape=head.shape, payload=payload, reader=reader, **fields)


# --- npy folder ----------------------------------------------------------------------------------

def _read_npy_folder(folder: str) -> tuple[list[Tensor], list[Problem]]:
    """MindStudio/msit naming `[input_]{op}.{index}.{timestamp}.npy`; `mapping.csv` restores long names."""
    with os.scandir(folder) as it:
        files = sorted(e.name for e in it if e.is_file() and e.name.lower().endswith(".npy"))
    if not files:
        raise SourceError(f"{folder}: {_why_no_npy(folder)}")
    mapping = read_mapping_csv(folder)
    named = []
    for fname in files:
        original = mapping.get(fname) or mapping.get(fname[:-4]) or fname
        named.append((parse_golden_name(original), os.path.join(folder, fname)))
    named.sort(key=lambda item: (item[0].timestamp or 0, item[1]))  # execution order where dated
    entries, problems = [], []
    for name, source in named:
        entries.append(_npy_tensor(
            name.op_name, source, problems, partial(open, source, "rb"), os.path.getsize(source),
            partial(_load_npy, source),
            mapped=True, io=name.io, index=name.index, timestamp=name.timestamp))
    return entries, problems


def _load_npy(path: str) -> np.ndarray:
    return np.load(path, mmap_mode="r", allow_pickle=False)


def _why_no_npy(folder: str) -> str:
    """Explain an npy-less folder; point at subfolders that do hold npy files (they are not scanned)."""
    found: list[str] = []
    for root, _dirs, names in os.walk(folder):
        if root != folder and any(n.lower().endswith(".npy") for n in names):
            found.append(os.path.relpath(root, folder))
            if len(found) == 3:
                break
    if found:
        return (f"no .npy files directly in this folder (subfolders are not scanned); .npy files found in "
                f"{', '.join(found)}: open one of those")
    if not os.listdir(folder):
        return "empty folder"
    return "no .npy files in this folder"


# --- npz -----------------------------------------------------------------------------------------

def _read_npz(path: str) -> tuple[list[Tensor], list[Problem]]:
    """One tensor per member, key = tensor name; only member headers are read at open time."""
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise SourceError(f"{path}: not a readable npz file: {exc}") from exc
    entries, problems = [], []
    with zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            if not info.filename.endswith(".npy"):
                problems.append(Problem(path, f"{info.filename}: not an npy member, skipped"))
                continue
            key = info.filename[:-4]
            entries.append(_npy_tensor(key, path, problems, partial(zf.open, info), info.file_size,
                                       partial(_load_npz_member, path, info.filename),
                                       label=key, tensor_name=key))
    if not entries and not problems:
        raise SourceError(f"{path}: npz file holds no arrays")
    return entries, problems


def _load_npz_member(path: str, member: str) -> np.ndarray:
    try:
        with zipfile.ZipFile(path) as zf, zf.open(member) as fh:
            return npformat.read_array(fh, allow_pickle=False)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise ValueError(f"damaged npz member {member}: {exc}") from exc


# --- raw binary ----------------------------------------------------------------------------------

def _read_raw(path: str, shape, dtype) -> tuple[list[Tensor], list[Problem]]:
    """Bare little-endian values; the file carries no shape or dtype, so the caller must give both."""
    if shape is None or dtype is None:
        raise SourceError(f"{path}: a raw binary file needs both shape and dtype")
    try:
        dt = np.dtype(dtype).newbyteorder("<")
        dims = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    except (TypeError, ValueError) as exc:
        raise SourceError(f"{path}: bad shape {shape!r} or dtype {dtype!r}: {exc}") from exc
    if dt.hasobject or any(n < 0 for n in dims):
        raise SourceError(f"{path}: unusable shape {dims} or dtype {dt}")
    nbytes = math.prod(dims) * dt.itemsize
    size = os.path.getsize(path)
    if size != nbytes:
        raise SourceError(f"{path}: file holds {size} bytes but shape {dims} of {dt.name} needs {nbytes}")
    payload = Payload(path, 0, nbytes, dt, dims)
    op = os.path.splitext(os.path.basename(path))[0]
    return [_tensor(op, path, dtype=dt, shape=dims, payload=payload, reader=partial(read_payload, payload))], []
