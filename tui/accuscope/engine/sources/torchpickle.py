"""PyTorch `.pt` tensor files (the zip `torch.save` writes) read WITHOUT torch and without running
anything from the file.

A `.pt` is a zip: `{name}/data.pkl` (a pickle describing the tensor), `{name}/data/{key}` (each
storage's raw little-endian bytes, stored uncompressed), `{name}/byteorder`, `{name}/version`. The
pickle of one tensor calls `torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
requires_grad, backward_hooks)`, the storage being a persistent id `('storage', torch.FloatStorage,
key, location, numel)` and the hooks an empty `collections.OrderedDict`.

Two gates keep the file from running code: every opcode of the pickle is checked against the few a
tensor's pickle uses before unpickling starts (`pickletools.genops` only parses), and the unpickler
resolves only the allowed globals, each to a function of ours that builds a plain description
(never torch's, never the named object). Anything else is refused with `PtError` naming the opcode
or the global. Data are read from the zip member (a memory map when the tensor covers its storage
in C order).
"""
from __future__ import annotations

import io
import math
import pickle
import pickletools
import struct
import zipfile
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from accuscope.engine.sources.ascend import bf16_to_float32
from accuscope.engine.sources.tensor import Payload, read_payload

PKL_LIMIT = 1 << 20  # a tensor's pickle is ~200 bytes; a megabyte is not one
# storage class name -> (storage dtype, dtype name); bfloat16 is kept as uint16 and widened on load
STORAGES: dict[str, tuple[np.dtype, str]] = {
    "FloatStorage": (np.dtype("<f4"), "float32"), "DoubleStorage": (np.dtype("<f8"), "float64"),
    "HalfStorage": (np.dtype("<f2"), "float16"), "BFloat16Storage": (np.dtype("<u2"), "bfloat16"),
    "LongStorage": (np.dtype("<i8"), "int64"), "IntStorage": (np.dtype("<i4"), "int32"),
    "ShortStorage": (np.dtype("<i2"), "int16"), "CharStorage": (np.dtype("i1"), "int8"),
    "ByteStorage": (np.dtype("u1"), "uint8"), "BoolStorage": (np.dtype("?"), "bool"),
}
# the opcodes a torch.save pickle of tensors (and dicts/lists/tuples of them) is made of
OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "GLOBAL", "STACK_GLOBAL", "BINPERSID", "REDUCE", "TUPLE", "TUPLE1",
    "TUPLE2", "TUPLE3", "EMPTY_TUPLE", "EMPTY_LIST", "EMPTY_DICT", "APPEND", "APPENDS", "SETITEM", "SETITEMS",
    "LIST", "DICT", "BINPUT", "LONG_BINPUT", "MEMOIZE", "BINGET", "LONG_BINGET", "BININT", "BININT1",
    "BININT2", "LONG1", "BINFLOAT", "NEWTRUE", "NEWFALSE", "NONE", "BINUNICODE", "SHORT_BINUNICODE",
    "BINUNICODE8", "SHORT_BINSTRING", "BINSTRING",
})


class PtError(ValueError):
    """The file is not a tensor `torch.save` wrote, or holds something this reader refuses."""


@dataclass(frozen=True)
class _Storage:
    key: str
    dtype: np.dtype
    dtype_name: str
    numel: int


@dataclass(frozen=True)
class PtTensor:
    """What the pickle says about the tensor: its storage and the view onto it."""

    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]

    @property
    def dtype_name(self) -> str:
        return self.storage.dtype_name

    @property
    def contiguous(self) -> bool:
        expect, stride = 1, []
        for d in reversed(self.shape):
            stride.append(expect)
            expect *= d
        return tuple(reversed(stride)) == self.stride or math.prod(self.shape) <= 1


def _rebuild_tensor(storage, offset, size, stride, *_rest) -> PtTensor:
    if not isinstance(storage, _Storage):
        raise PtError("_rebuild_tensor_v2 without a storage")
    ints = (offset, *size, *stride)
    if not all(type(v) is int and v >= 0 for v in ints) or len(size) != len(stride) or len(size) > 64:
        raise PtError(f"_rebuild_tensor_v2 with offset {offset!r}, size {size!r}, stride {stride!r}: not a tensor view")
    shape = tuple(size)
    if math.prod(shape) and offset + sum((d - 1) * s for d, s in zip(shape, stride)) >= storage.numel:
        raise PtError(f"shape {list(shape)} stride {list(stride)} at offset {offset} reaches past the "
                      f"storage's {storage.numel} elements")
    return PtTensor(storage, offset, shape, tuple(stride))


class _StorageType:
    def __init__(self, name: str):
        self.name = name


_GLOBALS = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
            ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
            ("collections", "OrderedDict"): OrderedDict}
_GLOBALS.update({("torch", name): _StorageType(name) for name in STORAGES})


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        found = _GLOBALS.get((module, name))
        if found is None:
            raise PtError(f"refused global {module}.{name} (only tensor rebuilds and storage types are read)")
        return found

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str) and type(pid[4]) is int):
            raise PtError(f"refused persistent id {str(pid)[:80]} (not a storage)")
        dtype, name = STORAGES[pid[1].name]
        return _Storage(pid[2], dtype, name, pid[4])


def _check_opcodes(data: bytes) -> None:
    try:
        for op, _arg, pos in pickletools.genops(data):
            if op.name not in OPCODES:
                raise PtError(f"refused pickle opcode {op.name} at byte {pos}")
    except PtError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parse failure of the bytes is a broken pickle
        raise PtError(f"not a pickle: {exc}") from None


def _archive(zf: zipfile.ZipFile) -> str:
    """The folder inside the zip holding data.pkl (torch names it after the file)."""
    names = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
    if len(names) != 1:
        raise PtError("not a torch.save zip (no single data.pkl)" if not names else "several data.pkl in one zip")
    return names[0][: -len("data.pkl")]


def describe(path: str) -> PtTensor:
    """The tensor a `.pt` holds, from its pickle only (no data read); PtError with the reason."""
    try:
        with zipfile.ZipFile(path) as zf:
            prefix = _archive(zf)
            info = zf.getinfo(prefix + "data.pkl")
            if info.file_size > PKL_LIMIT:
                raise PtError(f"data.pkl of {info.file_size} bytes is too large for a tensor")
            data = zf.read(info)
            order = zf.read(prefix + "byteorder").strip() if prefix + "byteorder" in zf.namelist() else b"little"
    except zipfile.BadZipFile:
        raise PtError("not a zip (a legacy torch.save file, or not PyTorch at all): not supported") from None
    except (OSError, KeyError, EOFError) as exc:
        raise PtError(f"cannot read the zip: {exc}") from None
    if order != b"little":
        raise PtError(f"byteorder {order[:10]!r}: only little-endian files are read")
    _check_opcodes(data)
    try:
        found = _Unpickler(io.BytesIO(data)).load()
    except PtError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything the pickle machine raises on a malformed stream
        raise PtError(f"broken pickle: {exc}") from None
    if not isinstance(found, PtTensor):
        raise PtError(f"holds a {type(found).__name__}, not one tensor")
    return found


def _member_offset(path: str, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """Where a stored (uncompressed) member's bytes start in the file."""
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        head = fh.read(30)
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise PtError(f"zip member {info.filename}: bad local header")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    return info.header_offset + 30 + name_len + extra_len


def payload(path: str, t: PtTensor) -> Payload | None:
    """Where the tensor's bytes lie in the file, when it covers its storage contiguously from the
    start of a stored member (torch.save writes storages uncompressed); else None."""
    if not t.contiguous:
        return None
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(_archive(zf) + "data/" + t.storage.key)
        if info.compress_type != zipfile.ZIP_STORED:
            return None
        itemsize = t.storage.dtype.itemsize
        if info.file_size < (t.offset + math.prod(t.shape)) * itemsize:
            raise PtError(f"storage {t.storage.key} holds {info.file_size} bytes, the tensor needs more")
        start = _member_offset(path, zf, info) + t.offset * itemsize
    return Payload(path, start, math.prod(t.shape) * itemsize, t.storage.dtype, t.shape)


def load(path: str) -> np.ndarray:
    """The tensor's data as numpy (bfloat16 widened to float32); PtError with the reason."""
    t = describe(path)
    p = payload(path, t)
    if p is not None:
        data = read_payload(p)
    else:
        with zipfile.ZipFile(path) as zf:
            raw = zf.read(_archive(zf) + "data/" + t.storage.key)
        base = np.frombuffer(raw, dtype=t.storage.dtype)
        if base.size < t.storage.numel:
            raise PtError(f"storage {t.storage.key} holds {base.size} elements, the pickle says {t.storage.numel}")
        item = base.itemsize
        data = np.lib.stride_tricks.as_strided(base[t.offset:], shape=t.shape,
                                               strides=tuple(s * item for s in t.stride)).copy()
    if t.dtype_name == "bfloat16":
        return bf16_to_float32(np.asarray(data))
    return data
