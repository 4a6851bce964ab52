"""One handle for every tensor accuscope reads, whichever side or format it comes from.

A `Tensor` carries what is known without touching the data (op, input/output index, dtype,
shapes, layout) and reads its data only when `load()` is called. Readers never raise on bad
data: a tensor that cannot be decoded carries a `problem` instead, and `load()` raises
`TensorError` with that text.
"""
from __future__ import annotations

import json
import math
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np

INPUT = "input"
OUTPUT = "output"


class TensorError(ValueError):
    """The data of a tensor cannot be produced; the message names the file, the tensor and the reason."""

    def __init__(self, source: str, name: str, reason: str):
        super().__init__(f"{source}: {name}: {reason}")
        self.reason = reason


class SourceError(ValueError):
    """A whole source (folder, file, model) is unusable; the message names the path and the reason."""


# Problem and Payload are NamedTuples (frozen, compared field by field): every command imports this module, a
# frozen dataclass took 1 ms to make (5M instructions of a compare for these two), and a tuple is quicker to build.
class Problem(NamedTuple):
    """Something wrong with one file or entry; the rest of the source still loads."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class Payload(NamedTuple):
    """Where a tensor's storage bytes lie: one contiguous run in a file (for chunked reads)."""

    path: str
    offset: int
    nbytes: int
    dtype: np.dtype
    shape: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Tensor:
    op: str
    io: str
    index: int
    dtype: np.dtype | None
    shape: tuple[int, ...]
    source: str
    op_type: str = ""
    dtype_name: str = ""
    format: str = "ND"
    storage_shape: tuple[int, ...] | None = None
    conversion: str = ""
    original_op: tuple[str, int] | None = None
    tensor_name: str = ""
    timestamp: int | None = None
    problem: str = ""
    payload: Payload | None = None
    # what the dump tool recorded beside (or instead of) the data: msprobe's Max, Min, Mean, Norm
    # and its CRC-32 (md5 mode); a statistics dump has these and no data
    stats: tuple[float | None, float | None, float | None, float | None] | None = None
    checksum: str = ""
    # a non-tensor argument or output as the dump recorded it (msprobe: an int, float, bool, str, None, a
    # list of them), as text (value_text); compared as a value, equal or not, never by metrics
    value: str | None = None
    # what the dump tool itself reported of this tensor against its reference, by metric key (RKNN's
    # error_analysis.txt: rknn_single_cos, rknn_single_euc: the layer alone on golden inputs)
    reported: tuple[tuple[str, float], ...] = ()
    reader: Callable[[], np.ndarray] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """`{op}:{input|output}:{index}`, the TensorIndex convention of the result CSV."""
        return f"{self.op}:{self.io}:{self.index}"

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * (self.dtype.itemsize if self.dtype is not None else 0)

    def load(self, into: np.ndarray | None = None) -> np.ndarray:
        """The data in logical layout (a read-only memory map when no conversion is needed). `into`: a
        C-contiguous array of this shape and dtype: where the reader would read the data from a file as they
        lie (a Payload), they are read straight into it and it is returned (no map, no copy); else the same."""
        if self.value is not None:
            raise TensorError(self.source, self.name, f"a non-tensor {self.dtype_name} value ({self.value}), "
                                                      "compared as a value: no tensor data")
        if self.problem or self.reader is None:
            raise TensorError(self.source, self.name, self.problem or "no data")
        try:
            reader = self.reader
            if into is not None and isinstance(reader, partial) and reader.func is read_payload:
                p = reader.args[0]
                if into.flags.c_contiguous and into.dtype == p.dtype and into.shape == p.shape:
                    return read_payload(p, into)
            return reader()
        except TensorError:
            raise
        except (OSError, ValueError) as exc:
            raise TensorError(self.source, self.name, str(exc)) from exc




_new = object.__new__
_setattr = object.__setattr__


def replaced(t: Tensor, **changes) -> Tensor:
    """`dataclasses.replace(t, **changes)` built without the frozen `__init__`, as `file_tensor` builds: t's
    attributes copied, the changes set (5x faster: a TP merge makes one per merged tensor, `compare.shards`)."""
    new = _new(Tensor)
    attributes = new.__dict__
    attributes.update(t.__dict__)
    attributes.update(changes)
    return new


def file_tensor(op: str, io: str, index: int, dtype: np.dtype, shape: tuple[int, ...], source: str, dtype_name: str,
                payload: Payload | None, reader: Callable[[], np.ndarray], timestamp: int | None) -> Tensor:
    """`Tensor(op=op, ..., timestamp=timestamp)`, every other field at its default: a tensor with its file's data,
    one a file of a folder of 20,000 small npy files.

    Built without the frozen `__init__`'s 21 `object.__setattr__` calls: only these fields are in the instance's
    dict, the rest read from the class (a dataclass keeps each field's default there). The dict is a new one of
    its own, not the class's shared keys: a row reads its tensors' fields dozens of times, and a shared-key
    dict made visible (as `t.__dict__` makes it) is read by the generic lookup, twice the instructions of a
    plain dict's cached one: 15k instructions a small pair's row fewer in all, for 100 bytes more a tensor."""
    t = _new(Tensor)
    _setattr(t, "__dict__", {"op": op, "io": io, "index": index, "dtype": dtype, "shape": shape, "source": source,
                             "dtype_name": dtype_name, "timestamp": timestamp, "payload": payload, "reader": reader})
    return t


def recorded_tensor(op: str, io: str, index: int, shape: tuple[int, ...], source: str, op_type: str,
                    dtype_name: str, tensor_name: str, stats: tuple | None, checksum: str, problem: str) -> Tensor:
    """`Tensor(op=op, ..., dtype=None, problem=problem)`, built without the frozen `__init__` as `file_tensor`
    builds: a tensor a dump records by its statistics alone (msprobe's statistics mode). These are many (500k
    for 100k calls) and each read a few times, so they keep the class's shared keys (232 bytes a tensor, not
    336): a store a field into the instance's dict, 3,000 instructions a tensor fewer than one
    `dict.update(zip(names, values))`, which was half the time of the setattr calls."""
    t = _new(Tensor)
    attributes = t.__dict__
    attributes["op"] = op
    attributes["io"] = io
    attributes["index"] = index
    attributes["dtype"] = None
    attributes["shape"] = shape
    attributes["source"] = source
    attributes["op_type"] = op_type
    attributes["dtype_name"] = dtype_name
    attributes["tensor_name"] = tensor_name
    attributes["stats"] = stats
    attributes["checksum"] = checksum
    attributes["problem"] = problem
    return t


SMALL_PAYLOAD = 256 << 10  # read at most this many bytes with one pread; map larger payloads


def read_payload(p: Payload, into: np.ndarray | None = None) -> np.ndarray:
    """A payload's data, read-only: up to SMALL_PAYLOAD bytes read with one pread (mapping a tiny
    tensor costs ten times its read: the mmap call and numpy's memmap set-up), larger ones memory-
    mapped; empty tensors get an empty array (mmap cannot map 0 bytes). `into` (C-contiguous, p.nbytes
    bytes): whatever the size, the bytes read straight into it, and it returned (a TP merge's shards
    read into their place in the merged tensor: `compare.shards.load_merged`)."""
    if p.nbytes == 0:
        return np.empty(p.shape, dtype=p.dtype) if into is None else into
    if into is None and p.nbytes > SMALL_PAYLOAD:
        return _mapped(p)
    fd = os.open(p.path, os.O_RDONLY)
    try:
        if into is None:
            raw = os.pread(fd, p.nbytes, p.offset)
            done = len(raw)
        else:
            os.lseek(fd, p.offset, os.SEEK_SET)
            view, done = into.data.cast("B"), 0
            while done < p.nbytes and (got := os.readv(fd, [view[done:]])):
                done += got
    finally:
        os.close(fd)
    if done < p.nbytes:
        raise ValueError(f"file ends before the tensor's last byte ({done} of {p.nbytes} bytes at {p.offset})")
    return np.frombuffer(raw, dtype=p.dtype).reshape(p.shape) if into is None else into


def _mapped(p: Payload) -> np.ndarray:
    """The payload memory-mapped read-only: mmap and an array over it (numpy's memmap set-up costs
    2.5x as much: 38 against 15 us a file mapped and unmapped, a pair's serial Python). A file
    shorter than the payload is a ValueError saying so, as a read's."""
    import mmap  # (as numpy imports it: when a payload is first mapped)
    start = p.offset - p.offset % mmap.ALLOCATIONGRANULARITY
    fd = os.open(p.path, os.O_RDONLY)
    try:
        if (size := os.fstat(fd).st_size) < p.offset + p.nbytes:
            raise ValueError(f"file ends before the tensor's last byte ({max(size - p.offset, 0)} of {p.nbytes} "
                             f"bytes at {p.offset})")
        m = mmap.mmap(fd, p.offset - start + p.nbytes, access=mmap.ACCESS_READ, offset=start)
    finally:
        os.close(fd)
    return np.frombuffer(m, dtype=p.dtype, count=p.nbytes // p.dtype.itemsize, offset=p.offset - start).reshape(p.shape)


VALUE_CHARS = 240  # a value's text beyond this is cut, with its length and a CRC-32 of the whole kept


def value_text(value) -> str:
    """A non-tensor value as the row shows and compares it: None, True, 1, 0.1 (repr: every digit),
    "constant" (a string quoted, so "" is a value too), [1, 1] (a list as Python writes it); past
    VALUE_CHARS, its start, its length and a CRC-32 of the whole (two long values still compare)."""
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    else:
        try:
            text = repr(value)
        except RecursionError:
            text = "(nested too deeply)"
    if len(text) <= VALUE_CHARS:
        return text
    return f"{text[:VALUE_CHARS]}… ({len(text):,} chars, crc32 {zlib.crc32(text.encode('utf-8', 'replace')):08x})"


_DUMP_FORM = str.maketrans(dict.fromkeys("./\\ ", "_"))
_WINDOWS_FORM = str.maketrans(dict.fromkeys('<>:"/\\|?*' + "".join(map(chr, range(32))), "_"))
_RESERVED = frozenset(["CON", "PRN", "AUX", "NUL", *(f"{d}{k}" for d in ("COM", "LPT") for k in range(1, 10))])


def sanitize(name: str) -> str:
    """The file-name form of an op name used by every dump writer: `.`, `/`, `\\`, space -> `_` (MindStudio's
    form, `dump_form`), then a name Windows takes too (`windows_safe`)."""
    return windows_safe(dump_form(name))


def dump_form(name: str) -> str:
    """An op name with MindStudio's dump writers' replacements only: `.`, `/`, `\\`, space -> `_` (what their
    readers and accuscope's undo by `sanitize` on both sides; a dump writer keeps the name where `windows_safe`
    changes more of it)."""
    return name.translate(_DUMP_FORM)


def windows_safe(name: str) -> str:
    """`name` as a file name Windows takes too: its illegal characters (`<>:"/\\|?*`, control characters) -> `_`,
    a trailing dot or space -> `_`, a reserved device name (CON, PRN, AUX, NUL, COM1-9, LPT1-9, in any case,
    alone or before a dot) with `_` after it. A name that is safe already stays as it is (so twice is once)."""
    name = name.translate(_WINDOWS_FORM)
    if name.endswith((".", " ")):
        name = f"{name[:-1]}_"
    stem = name.split(".", 1)[0]
    if stem.rstrip(" ").upper() in _RESERVED:
        name = f"{stem}_{name[len(stem):]}"
    return name
