"""PyTorch `.pt` tensor files (the zip `torch.save` writes) read WITHOUT torch and without running
anything from the file, in bounded time and memory.

A `.pt` is a zip: `{name}/data.pkl` (a pickle describing the tensor), `{name}/data/{key}` (each
storage's raw little-endian bytes, stored uncompressed), `{name}/byteorder`, `{name}/version`. The
pickle of one tensor calls `torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
requires_grad, backward_hooks)`, the storage being a persistent id `('storage', torch.FloatStorage,
key, location, numel)` and the hooks an empty `collections.OrderedDict`. A file may hold more than
one tensor (`contents`): dicts, lists and tuples of them (a module's tuple of outputs), a state_dict
(an OrderedDict, its `_metadata` set by BUILD and dropped here: BUILD applies to nothing else), an
nn.Parameter (`_rebuild_parameter` around the tensor), plain values beside them (numbers, strings,
None); `describe` and `load` read a file of one tensor (msprobe's).

Two gates keep the file from running code: every opcode of the pickle is checked against the few a
tensor's pickle uses before unpickling starts (`pickletools.genops` only parses), and the unpickler
resolves only the allowed globals, each to a function of ours that builds a plain description
(never torch's, never the named object). Anything else is refused with `PtError` naming the opcode
or the global.

Bounds, so that a small hostile file can neither hang the reader nor blow up its memory:
- the pickle: data.pkl is read with an explicit bound of PKL_LIMIT bytes (the size the zip's
  directory states is not trusted), and the same pre-pass that checks the opcodes simulates the
  pickle's stack: a memo get may fetch only a name, number, class, storage or rebuilt tensor (a
  leaf: each use of it is one opcode of the bounded pickle), never a tuple, list, dict or what
  another call built, so what the pickle builds is a tree (no shared parts: no 2^40-element "DAG"
  of tuples that hashing or printing would walk) no deeper than MAX_DEPTH, of at most ENTRY_LIMIT
  leaves read. Messages never format an object the file built (they name its type and length) and
  clip the names they quote.
- the zip: every member is read with an explicit limit (`byteorder` BYTEORDER_LIMIT bytes);
  only members stored or deflated are opened, never encrypted or other methods, and a storage
  must be stored (torch.save never compresses one: a deflated storage is refused, so no inflation
  at all); it is memory-mapped, after checking that it holds the pickle's elements inside the file.
- views: torch.save writes a view as its storage plus (offset, size, stride), so a view without
  repeats (contiguous, permuted, sliced) is never larger than its storage, while one repeating
  elements (stride 0 as `expand()` makes, overlapping strides) may be any size over a small
  storage, and reading it means copying it. Such a copy is made only when it is at most
  VIEW_FACTOR times the storage's bytes, or VIEW_MIN_BYTES whatever the storage: a 64 MB
  broadcast mask over a small storage reads; a 593-byte file claiming a 256 MB (or 2^31 element)
  view is a `PtError` naming the shape and the storage's size. Memory for one tensor is so at
  most max(4 x its storage, 64 MB), plus the float32 widening of bfloat16.

Every failure, of the zip (bad data, CRC, a missing member, method, encryption, names) or of the
pickle, is a `PtError` (a ValueError) with the reason: the caller makes it a problem on that one
tensor, never a failure of the whole dump.
"""
from __future__ import annotations

import io
import lzma
import math
import os
import pickle
import pickletools
import struct
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import cast

import numpy as np

from accuscope.engine.sources.ascend import bf16_to_float32
from accuscope.engine.sources.tensor import Payload, Tensor, read_payload

PKL_LIMIT = 1 << 20  # a tensor's pickle is ~200 bytes; a megabyte is not one
BYTEORDER_LIMIT = 16  # "little" or "big"
MAX_DEPTH = 32  # nesting of what the pickle builds; a tensor's is 3
INDEX_LIMIT = 1 << 62  # offsets, sizes, strides and element counts past this are no tensor's
VIEW_FACTOR, VIEW_MIN_BYTES = 4, 64 << 20  # a view repeating elements: its copy's bound
CLIP = 80  # characters of a name from the file quoted in a message
# storage class name -> (storage dtype, dtype name); bfloat16 is kept as uint16 and widened on load
STORAGES: dict[str, tuple[np.dtype, str]] = {
    "FloatStorage": (np.dtype("<f4"), "float32"), "DoubleStorage": (np.dtype("<f8"), "float64"),
    "HalfStorage": (np.dtype("<f2"), "float16"), "BFloat16Storage": (np.dtype("<u2"), "bfloat16"),
    "LongStorage": (np.dtype("<i8"), "int64"), "IntStorage": (np.dtype("<i4"), "int32"),
    "ShortStorage": (np.dtype("<i2"), "int16"), "CharStorage": (np.dtype("i1"), "int8"),
    "ByteStorage": (np.dtype("u1"), "uint8"), "BoolStorage": (np.dtype("?"), "bool"),
}
# the opcodes a torch.save pickle of tensors (and dicts/lists/tuples of them) is made of, by what
# each does to the stack (the pre-pass simulates it: _check_pickle)
_ATOMS = frozenset({"GLOBAL", "BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT", "NEWTRUE", "NEWFALSE", "NONE",
                    "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "SHORT_BINSTRING", "BINSTRING"})
_POPS = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}
OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "STACK_GLOBAL", "BINPERSID", "REDUCE", "TUPLE", "EMPTY_TUPLE", "EMPTY_LIST",
    "EMPTY_DICT", "APPEND", "APPENDS", "SETITEM", "SETITEMS", "LIST", "DICT", "BINPUT", "LONG_BINPUT", "MEMOIZE",
    "BINGET", "LONG_BINGET", "BUILD", *_ATOMS, *_POPS,
})
# what can go wrong reading a zip member with the zipfile module, besides our own PtError
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, KeyError, IndexError, ValueError,
               NotImplementedError, RuntimeError, zlib.error, lzma.LZMAError, struct.error, OverflowError)


class PtError(ValueError):
    """The file is not a tensor `torch.save` wrote, or holds something this reader refuses."""


def _clip(text: str, limit: int = CLIP) -> str:
    """A text from the file (a name, a key) as a message quotes it: at most `limit` characters."""
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def _what(value) -> str:
    """What a value the file built is, without formatting it (its repr may be anything)."""
    kind = "dict" if isinstance(value, dict) else type(value).__name__  # a state_dict: our OrderedDict stand-in
    try:
        return f"a {kind} of {len(value)} items" if isinstance(value, (tuple, list, dict)) else f"a {kind}"
    except Exception:  # noqa: BLE001 - a len() of ours that fails: the type is enough
        return f"a {kind}"


def _reason(exc: BaseException) -> str:
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"{name}: {_clip(str(exc), 2 * CLIP)}"


def _shape_text(dims: tuple[int, ...]) -> str:
    return _clip("[" + ", ".join(map(str, dims)) + "]", 2 * CLIP)


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


def _index(value) -> bool:
    return type(value) is int and 0 <= value < INDEX_LIMIT


def _rebuild_tensor(storage, offset, size, stride, *_rest) -> PtTensor:
    if not isinstance(storage, _Storage):
        raise PtError(f"_rebuild_tensor_v2 with {_what(storage)} where the storage goes")
    if not (type(size) in (tuple, list) and type(stride) in (tuple, list) and len(size) == len(stride) <= 64
            and _index(offset) and all(map(_index, size)) and all(map(_index, stride))):
        raise PtError(f"_rebuild_tensor_v2 with offset {_what(offset)}, size {_what(size)}, stride {_what(stride)}: "
                      "not a tensor view (an offset and two tuples of as many non-negative ints)")
    shape, numel = tuple(size), math.prod(size)
    if numel and offset + sum((d - 1) * s for d, s in zip(shape, stride)) >= storage.numel:
        raise PtError(f"shape {_shape_text(shape)} stride {_shape_text(stride)} at offset {offset} reaches past the "
                      f"storage's {storage.numel} elements")
    itemsize = storage.dtype.itemsize
    bound = max(VIEW_FACTOR * storage.numel * itemsize, VIEW_MIN_BYTES)
    if numel * itemsize > bound:  # only a view repeating elements can be larger than its storage
        raise PtError(f"a view of shape {_shape_text(shape)} (stride {_shape_text(stride)}) over a storage of "
                      f"{storage.numel} elements repeats them: its {numel * itemsize:,} bytes are more than the "
                      f"{bound:,} read for such a view ({VIEW_FACTOR}x the storage, at least "
                      f"{VIEW_MIN_BYTES >> 20} MB)")
    return PtTensor(storage, offset, shape, tuple(stride))


def _rebuild_parameter(data, *_rest) -> PtTensor:
    """An nn.Parameter (`torch.save(layer.weight)`): its tensor, read as any other."""
    if not isinstance(data, PtTensor):
        raise PtError(f"_rebuild_parameter with {_what(data)} where the tensor goes")
    return data


class _OrderedDict(OrderedDict):
    """What `collections.OrderedDict` stands for: a tensor's empty hooks, a state_dict. A state_dict's
    pickle ends with BUILD of its `_metadata` (versions of each module), which this drops: nothing
    of the file is set on any object (the pre-pass allows BUILD on nothing else)."""

    def __setstate__(self, _state) -> None:
        pass


class _StorageType:
    def __init__(self, name: str):
        self.name = name


# module, name -> what it is to us; the rebuilds make tensors (a memo get may share them: leaves)
_REBUILDS = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor, ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
             ("torch._utils", "_rebuild_parameter"): _rebuild_parameter}
_GLOBALS: dict[tuple[str, str], object] = {**_REBUILDS, ("collections", "OrderedDict"): _OrderedDict}
_GLOBALS.update({("torch", name): _StorageType(name) for name in STORAGES})


_HINTS = {  # what a refused global of torch's own says of the file
    ("torch._utils", "_rebuild_tensor_v3"): ": a tensor of a dtype without a typed storage, float8, uint16/32/64, is "
                                            "not read; save it as float32",
    ("torch", "Storage"): ": complex and quantized tensors are not read",
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        found = _GLOBALS.get((module, name))
        if found is None:
            hint = _HINTS.get((module, name)) or (_HINTS[("torch", "Storage")] if module == "torch" and
                                                  name.endswith("Storage") else "")
            raise PtError(f"refused global {_clip(module)}.{_clip(name)} (only tensor rebuilds and storage types "
                          f"are read{hint})")
        return found

    def persistent_load(self, pid):
        if not (type(pid) is tuple and len(pid) == 5 and type(pid[0]) is str and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and type(pid[2]) is str and _index(pid[4])):
            raise PtError(f"refused persistent id: {_what(pid)}, not ('storage', a storage type, a key, a location, "
                          "an element count)")
        dtype, name = STORAGES[pid[1].name]
        return _Storage(pid[2], dtype, name, pid[4])


# what a stack entry of the pre-pass holds, besides its depth: a tensor rebuild or OrderedDict (a global), a
# tensor or an OrderedDict those made (by REDUCE), or anything else
_REBUILD, _ODICT, _TENSOR, _DICT, _OTHER = range(5)
_GLOBAL_KINDS = {**{f"{m} {n}": _REBUILD for m, n in _REBUILDS}, "collections OrderedDict": _ODICT}
_MADE_BY = {_REBUILD: _TENSOR, _ODICT: _DICT}


def _check_pickle(data: bytes) -> None:
    """Refuse, before anything is unpickled, an opcode a tensor's pickle does not use, and a pickle
    whose objects would share parts or nest deeper than MAX_DEPTH. The stack is simulated as the C
    unpickler keeps it (marks beside it, never popped below the last one): each entry is the depth
    of what it holds (0 for a name, number, class or storage, 1 + its items' for a container) and
    what it is (`_TENSOR`: a tensor rebuild's result, which a memo get may share, as torch.save writes
    the same tensor saved twice: a leaf, whose every use is one opcode; `_DICT`: an OrderedDict, the
    one object BUILD may be applied to, as a state_dict's pickle does)."""
    stack: list[tuple[int, int]] = []
    marks: list[int] = []
    memo: dict[int, tuple[int, int]] = {}

    def pop(n: int = 1) -> list[tuple[int, int]]:
        if len(stack) - n < (marks[-1] if marks else 0):
            raise PtError(f"broken pickle: stack underflow at byte {pos}")
        items = stack[len(stack) - n:]
        del stack[len(stack) - n:]
        return items

    def to_mark() -> list[tuple[int, int]]:
        if not marks:
            raise PtError(f"broken pickle: no mark at byte {pos}")
        k = marks.pop()
        items = stack[k:]
        del stack[k:]
        return items

    def push(depth: int, kind: int = _OTHER) -> None:
        if depth > MAX_DEPTH:
            raise PtError(f"refused pickle: nests deeper than {MAX_DEPTH} at byte {pos}")
        stack.append((depth, kind))

    def holder(items: list[tuple[int, int]]) -> int:
        return 1 + max((d for d, _ in items), default=0)

    pos: int | None = 0
    try:
        for op, arg, pos in pickletools.genops(data):
            name = op.name
            if name not in OPCODES:
                raise PtError(f"refused pickle opcode {name} at byte {pos} (an object other than tensors and dicts, "
                              "lists, tuples of them, such as a whole module: save its state_dict() instead)")
            if name == "GLOBAL":
                push(0, _GLOBAL_KINDS.get(cast(str, arg), _OTHER))
            elif name in _ATOMS:
                push(0)
            elif name in _POPS:
                push(holder(pop(_POPS[name])))
            elif name == "MARK":
                marks.append(len(stack))
            elif name in ("TUPLE", "LIST", "DICT"):
                push(holder(to_mark()))
            elif name in ("EMPTY_TUPLE", "EMPTY_LIST", "EMPTY_DICT"):
                push(1)
            elif name in ("APPEND", "SETITEM", "APPENDS", "SETITEMS", "BUILD"):
                sizes = {"APPEND": 1, "SETITEM": 2, "BUILD": 1}
                items = pop(sizes[name]) if name in sizes else to_mark()
                depth, kind = pop()[0]
                if name == "BUILD" and kind != _DICT:
                    raise PtError(f"refused pickle: BUILD at byte {pos} on something other than an OrderedDict")
                push(max(depth, holder(items)), kind)
            elif name in ("STACK_GLOBAL", "BINPERSID"):
                pop(2 if name == "STACK_GLOBAL" else 1)
                push(0)
            elif name == "REDUCE":
                items = pop(2)
                push(holder(items), _MADE_BY.get(items[0][1], _OTHER))
            elif name in ("BINPUT", "LONG_BINPUT", "MEMOIZE"):
                if len(stack) <= (marks[-1] if marks else 0):
                    raise PtError(f"broken pickle: a memo put with nothing to put at byte {pos}")
                memo[len(memo) if name == "MEMOIZE" else cast(int, arg)] = stack[-1]
            elif name in ("BINGET", "LONG_BINGET"):
                if arg not in memo:
                    raise PtError(f"broken pickle: memo get of an unset entry at byte {pos}")
                if memo[arg][0] and memo[arg][1] != _TENSOR:
                    raise PtError(f"refused pickle: a memo get of a tuple, list, dict or object at byte {pos} (a "
                                  "tensor's pickle shares only names, numbers, types and tensors)")
                push(*memo[arg])
            elif name == "STOP":
                break
    except PtError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parse failure of the bytes is a broken pickle
        raise PtError(f"not a pickle: {_reason(exc)}") from None


@contextmanager
def _zip(path: str) -> Iterator[zipfile.ZipFile]:
    """The `.pt` opened as a zip; whatever the zipfile module raises on it, there or inside the
    block, becomes a PtError with the reason."""
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise PtError("not a zip (a legacy torch.save file, or not PyTorch at all): not supported") from None
    except _ZIP_ERRORS as exc:
        raise PtError(f"cannot read the zip: {_reason(exc)}") from None
    try:
        with zf:
            yield zf
    except PtError:
        raise
    except _ZIP_ERRORS as exc:
        raise PtError(f"damaged zip: {_reason(exc)}") from None


def _member(zf: zipfile.ZipFile, name: str, *, stored: bool = False) -> zipfile.ZipInfo:
    """A member's entry, refused when missing, encrypted, or compressed with another method than
    deflate (`stored`: than none)."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise PtError(f"no zip member {_clip(name)}") from None
    if info.flag_bits & 0x1:
        raise PtError(f"zip member {_clip(name)} is encrypted")
    if info.compress_type != zipfile.ZIP_STORED and (stored or info.compress_type != zipfile.ZIP_DEFLATED):
        raise PtError(f"zip member {_clip(name)} is compressed (method {info.compress_type}): "
                      + ("torch.save stores storages uncompressed" if stored else "only stored or deflated are read"))
    return info


def _read(zf: zipfile.ZipFile, name: str, limit: int) -> bytes:
    """A member's bytes, at most `limit` of them (never more inflated, whatever the zip states)."""
    info = _member(zf, name)
    if info.file_size > limit:
        raise PtError(f"zip member {_clip(name)} of {info.file_size:,} bytes: more than the {limit:,} read")
    with zf.open(info) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise PtError(f"zip member {_clip(name)} inflates past the {limit:,} bytes read")
    return data


def _archive(zf: zipfile.ZipFile) -> str:
    """The folder inside the zip holding data.pkl (torch names it after the file)."""
    names = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
    if len(names) != 1:
        raise PtError("not a torch.save zip (no single data.pkl)" if not names else "several data.pkl in one zip")
    return names[0][: -len("data.pkl")]


def _unpickled(zf: zipfile.ZipFile) -> tuple[object, str]:
    """What the `.pt` holds, from its pickle only (no data read), and the folder inside the zip holding it."""
    prefix = _archive(zf)
    data = _read(zf, prefix + "data.pkl", PKL_LIMIT)
    order = _read(zf, prefix + "byteorder", BYTEORDER_LIMIT).strip() if prefix + "byteorder" in zf.NameToInfo else b"little"
    if order != b"little":
        raise PtError(f"byteorder {order[:10]!r}: only little-endian files are read")
    _check_pickle(data)
    try:
        return _Unpickler(io.BytesIO(data)).load(), prefix
    except PtError:
        raise
    except Exception as exc:  # noqa: BLE001 - anything the pickle machine raises on a malformed stream
        raise PtError(f"broken pickle: {_reason(exc)}") from None


def describe(path: str) -> PtTensor:
    """The tensor a `.pt` holds, from its pickle only (no data read); PtError with the reason."""
    with _zip(path) as zf:
        found, _prefix = _unpickled(zf)
    if not isinstance(found, PtTensor):
        raise PtError(f"holds {_what(found)}, not one tensor")
    return found


ENTRY_LIMIT = 1 << 16  # tensors and values one file may hold (a large model's state_dict holds a few thousand)


@dataclass(frozen=True)
class PtEntry:
    """One thing a `.pt` holds, at `key`: a tensor (`tensor`, its storage checked to start at `start` in the
    file), a plain value (`value`: a number, a string, a bool, None, an empty list or dict), or neither
    (`problem` says what it is, or why its storage cannot be read)."""

    key: str  # "" for the file's one object; else its dict keys and list positions, dotted: "0", "fc.weight"
    tensor: PtTensor | None = None
    start: int = -1
    value: object = None
    problem: str = ""


_PLAIN = (int, float, bool, str, type(None))


def _key(k, position: int) -> str:
    return str(k) if type(k) in _PLAIN else str(position)


def contents(path: str) -> list[PtEntry]:
    """Every tensor and plain value a `.pt` holds, in the order it holds them: one tensor (key ""), or
    the leaves of dicts, lists and tuples of them (a state_dict, a module's tuple of outputs) keyed by
    their dict keys and list positions, dotted. Each tensor's storage is checked in the same opening of
    the zip (a problem on that entry when it cannot be read). PtError when the file as a whole cannot
    be read (see describe) or holds more than ENTRY_LIMIT leaves."""
    out: list[PtEntry] = []
    with _zip(path) as zf:
        found, prefix = _unpickled(zf)
        stack: list[tuple[str, object]] = [("", found)]  # what it built is a tree no deeper than MAX_DEPTH
        while stack:
            key, value = stack.pop()
            if isinstance(value, dict) and value:
                items = [(_key(k, i), v) for i, (k, v) in enumerate(value.items())]
            elif type(value) in (list, tuple) and value:
                items = [(str(i), v) for i, v in enumerate(cast(list, value))]
            else:
                out.append(_entry(path, zf, prefix, key, value))
                if len(out) > ENTRY_LIMIT:
                    raise PtError(f"holds more than {ENTRY_LIMIT:,} tensors and values")
                continue
            stack.extend((f"{key}.{k}" if key else k, v) for k, v in reversed(items))
    return out


def _entry(path: str, zf: zipfile.ZipFile, prefix: str, key: str, value) -> PtEntry:
    if isinstance(value, PtTensor):
        try:
            return PtEntry(key, value, _storage_start(path, zf, prefix, value))
        except PtError as exc:
            return PtEntry(key, value, problem=str(exc))
    if type(value) in _PLAIN or (type(value) in (list, tuple, dict, _OrderedDict) and not value):
        return PtEntry(key, value=dict(value) if isinstance(value, dict) else value)
    return PtEntry(key, problem=f"holds {_what(value)}, neither a tensor nor a plain value")


def _member_offset(path: str, info: zipfile.ZipInfo) -> int:
    """Where a stored (uncompressed) member's bytes start in the file."""
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        head = fh.read(30)
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise PtError(f"zip member {_clip(info.filename)}: bad local header")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    return info.header_offset + 30 + name_len + extra_len


def _storage_start(path: str, zf: zipfile.ZipFile, prefix: str, t: PtTensor) -> int:
    """Where the tensor's storage starts in the file, checked: a stored member of the open zip holding
    the pickle's elements, all inside the file."""
    name = prefix + "data/" + t.storage.key
    info = _member(zf, name, stored=True)
    need = t.storage.numel * t.storage.dtype.itemsize
    if min(info.file_size, info.compress_size) < need:
        raise PtError(f"storage {_clip(t.storage.key)} holds {info.file_size:,} bytes, the pickle says "
                      f"{t.storage.numel:,} elements of {t.storage.dtype.itemsize}")
    start = _member_offset(path, info)
    size = os.path.getsize(path)
    if start + need > size:
        raise PtError(f"storage {_clip(t.storage.key)} of {need:,} bytes runs past the end of the file ({size:,} bytes)")
    return start


def storage_offset(path: str, t: PtTensor) -> int:
    """Where the tensor's storage starts in the file, checked (_storage_start), the zip opened for it."""
    with _zip(path) as zf:
        return _storage_start(path, zf, _archive(zf), t)


def _payload(path: str, t: PtTensor, start: int) -> Payload:
    itemsize, numel = t.storage.dtype.itemsize, math.prod(t.shape)
    return Payload(path, start + t.offset * itemsize if numel else start, numel * itemsize, t.storage.dtype, t.shape)


def load(path: str) -> np.ndarray:
    """The data of the tensor the file holds as numpy (bfloat16 widened to float32); PtError with the
    reason. Memory: the logical data only (the storage is memory-mapped), bounded by _rebuild_tensor."""
    t = describe(path)
    return load_at(path, t, storage_offset(path, t))


def load_at(path: str, t: PtTensor, start: int) -> np.ndarray:
    """The data of tensor `t` whose storage starts at `start` (as `contents` found them)."""
    if t.contiguous:
        data = read_payload(_payload(path, t, start))
    else:
        item = t.storage.dtype.itemsize
        base = read_payload(Payload(path, start, t.storage.numel * item, t.storage.dtype, (t.storage.numel,)))
        data = np.lib.stride_tricks.as_strided(base[t.offset:], shape=t.shape,
                                               strides=tuple(s * item for s in t.stride)).copy()
    if t.dtype_name == "bfloat16":
        return bf16_to_float32(np.asarray(data))
    return data


def tensor(path: str, t: PtTensor, start: int, **fields) -> Tensor:
    """The Tensor of tensor `t` of the file at `path` (its storage at `start`), its data read when loaded:
    a contiguous tensor of a numpy dtype through its Payload (chunked reads, as an npy file's), any other
    (a strided view, bfloat16 widened to float32) by `load_at`. `fields`: op, io, index and the reader's own."""
    bf16 = t.dtype_name == "bfloat16"
    data = _payload(path, t, start) if t.contiguous and not bf16 else None
    return Tensor(dtype=np.dtype("float32") if bf16 else t.storage.dtype, shape=t.shape, source=path,
                  dtype_name=t.dtype_name, payload=data,
                  reader=partial(read_payload, data) if data is not None else partial(load_at, path, t, start), **fields)
