"""ATB tensor dumps (MindIE / ATB LLM inference, `msprobe` ATB dump, msit llm dump).

Layout of a dump (one folder per device and process, one per execution round, i.e. token):

    {device}_{pid}/{round}/{id}_{Layer}/{id}_{Operation}/.../{before|after}/{in|out}tensor{K}.bin

Every level of the layer tree has its own `before` (tensors as the op starts) and `after` (as it
ends) folders; `after` is what a comparison wants and the default. Each `.bin` file is an ASCII
header of `key=value` lines (`$Version=1.0`, `format=2`, `dtype=1`, `dims=1,128,4096`, ...)
closed by the line `$End=1`, then the raw little-endian data. dtype codes (ATB/aclDataType):
0 float32, 1 float16, 2 int8, 3 int32, 9 int64, 12 bool, 27 bfloat16 (kept as uint16 and widened
to float32 on load); format codes are the Ascend ones (2 ND, 3 NC1HWC0, 29 FRACTAL_NZ ...), a
device layout being converted to the logical one as for Ascend dumps. A header with `data=PATH`
keeps its data elsewhere (not supported). Facts from msprobe's ATB compare (`TensorBinFile` in
mindstudio-probe) and the msit-llm dump docs.

The header is parsed from the first `HEADER_LIMIT` bytes only; the data are memory-mapped on load.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accuscope.engine.sources import kinds, sniffs
from accuscope.engine.sources.ascend import format_name, stored_tensor
from accuscope.engine.sources.inputfile import walk
from accuscope.engine.sources.names import natural_key
from accuscope.engine.sources.tensor import INPUT, OUTPUT, Payload, Problem, SourceError, Tensor

KIND = kinds.ATB
# the sniff and the layout facts it shares with the reader: sources/sniffs.py (the registry sniffs without this module)
sniff = sniffs.atb
HEADER_LIMIT, END, WHEN, _TENSOR_FILE = sniffs.ATB_HEADER_LIMIT, sniffs.ATB_END, sniffs.ATB_WHEN, sniffs.ATB_TENSOR_FILE
DTYPES: dict[int, tuple[np.dtype, str]] = {
    0: (np.dtype("<f4"), "float32"), 1: (np.dtype("<f2"), "float16"), 2: (np.dtype("i1"), "int8"),
    3: (np.dtype("<i4"), "int32"), 9: (np.dtype("<i8"), "int64"), 12: (np.dtype("?"), "bool"),
    27: (np.dtype("<u2"), "bfloat16"),
}
BF16 = 27
_NUMBERED = re.compile(r"(\d+)_(.+)")


@dataclass
class BinHeader:
    fields: dict[str, str] = field(default_factory=dict)
    offset: int = 0  # where the data start


def read_header(path: str) -> BinHeader:
    """The `key=value` header of one tensor file; ValueError with the reason when it is not one."""
    with open(path, "rb") as fh:
        head = fh.read(HEADER_LIMIT)
    end = head.find(END)
    if end < 0 or not (head.startswith(END) or head[end - 1:end] == b"\n"):
        found = "no header" if not head.startswith(b"$") else f"no $End=1 line in the first {HEADER_LIMIT} bytes"
        raise ValueError(f"not an ATB tensor file: {found}")
    out = BinHeader(offset=end + len(END))
    for number, line in enumerate(head[:end].split(b"\n"), 1):
        if not line:
            continue
        key, sep, value = line.partition(b"=")
        if not sep:
            raise ValueError(f"header line {number} is not key=value: {line[:60]!r}")
        try:
            out.fields[key.decode("ascii")] = value.decode("ascii")
        except UnicodeDecodeError:
            raise ValueError(f"header line {number} is not ASCII") from None
    return out


def read_file(path: str, *, op: str = "", io: str = OUTPUT, index: int = 0, op_type: str = "") -> Tensor:
    """One tensor file as a Tensor; a bad header or a size mismatch becomes the tensor's problem."""
    common: dict[str, Any] = dict(op=op or os.path.splitext(os.path.basename(path))[0], io=io, index=index, source=path,
                  op_type=op_type)
    try:
        head = read_header(path)
        size = os.path.getsize(path)
    except (OSError, ValueError) as exc:
        return Tensor(dtype=None, shape=(), problem=str(exc), **common)
    f = head.fields
    if "data" in f:
        return Tensor(dtype=None, shape=(), problem=f"data kept in another file ({f['data']}): not supported", **common)
    missing = [key for key in ("dtype", "dims") if key not in f]
    if missing:
        return Tensor(dtype=None, shape=(), problem=f"header has no {' or '.join(k + '=' for k in missing)} line",
                      **common)
    try:
        code = int(f["dtype"])
        fmt_code = int(f.get("format", "2"))
        dims = tuple(int(d) for d in f["dims"].split(",") if d.strip() != "")
    except ValueError:
        return Tensor(dtype=None, shape=(), problem=(f"header dtype={f.get('dtype')!r} format={f.get('format')!r} "
                                                     f"dims={f.get('dims')!r}: not integers"), **common)
    if code not in DTYPES:
        return Tensor(dtype=None, shape=dims, problem=f"unsupported dtype code {code}", **common)
    if any(d < 0 for d in dims):
        return Tensor(dtype=None, shape=dims, problem=f"negative dims {list(dims)}", **common)
    storage_dtype, name = DTYPES[code]
    nbytes = math.prod(dims) * storage_dtype.itemsize
    if size - head.offset != nbytes:
        return Tensor(dtype=None, shape=dims, problem=(
            f"dims {list(dims)} of {name} need {nbytes} data bytes, the file has {size - head.offset} "
            f"after its {head.offset}-byte header"), **common)
    fmt = format_name(fmt_code)
    payload = Payload(path, head.offset, nbytes, storage_dtype, dims)
    return stored_tensor(payload, fmt, None, code == BF16, dtype_name=name, format=fmt, storage_shape=dims,
                         **common)



def _level(path: str, start: str) -> list[str]:
    rel = os.path.relpath(path, start)
    return [] if rel == "." else rel.split(os.sep)


def rounds(path: str) -> list[str]:
    """Round folders (`{device}_{pid}/{round}`: a numeric name over `{id}_{Layer}` folders) under
    `path`, relative to it ("." when `path` is one), in natural order."""
    found = []
    for root, dirs, _files in walk(path):
        dirs.sort(key=natural_key)
        if os.path.basename(root) in WHEN:
            dirs[:] = []
        elif os.path.basename(os.path.normpath(root)).isdigit() and any(_NUMBERED.fullmatch(d) for d in dirs):
            found.append(os.path.relpath(root, path))
            dirs[:] = []
    return found


def read(path: str, *, round: str | None = None, when: str = "after", **_options) -> tuple[list[Tensor], list[Problem]]:
    """The tensors of one round (default: the first found), `when` ("after" default, or "before")
    each op ran, in execution order: a layer's inputs, its children, then its outputs."""
    path = os.fspath(path)
    if when not in WHEN:
        raise SourceError(f"{path}: when must be one of {', '.join(WHEN)}, not {when!r}")
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file or folder")
    if os.path.isfile(path):
        t = read_file(path)
        if t.problem:
            raise SourceError(f"{path}: {t.problem}")
        return [t], []
    found = rounds(path)
    if round is not None:
        if round not in found and not os.path.isdir(os.path.join(path, round)):
            raise SourceError(f"{path}: round {round!r} not found; rounds: {', '.join(found) or 'none'}")
        chosen = os.path.join(path, round)
    elif found:
        chosen = os.path.normpath(os.path.join(path, found[0]))
    else:
        chosen = path
    entries: list[tuple[tuple, Tensor]] = []
    for folder, _dirs, files in walk(chosen):
        if os.path.basename(folder) != when:
            continue
        ops = _level(folder, chosen)[:-1]
        op = "/".join(ops) or os.path.basename(chosen)
        last = _NUMBERED.fullmatch(ops[-1]) if ops else None
        # a layer's inputs come before its children, its outputs after them
        steps = tuple((0, tuple(natural_key(p))) for p in ops)
        for name in files:
            m = _TENSOR_FILE.fullmatch(name)
            if m:
                io = INPUT if m.group(1) == "in" else OUTPUT
                t = read_file(os.path.join(folder, name), op=op, io=io, index=int(m.group(2)),
                              op_type=last.group(2) if last else "")
                entries.append((steps + ((-1 if io == INPUT else 1,),), t))
    if not entries:
        raise SourceError(f"{path}: no ATB tensor files ({{in|out}}tensorK.bin under {when}/ folders)")
    entries.sort(key=lambda e: (e[0], e[1].index))
    tensors = [t for _, t in entries]
    problems = [Problem(t.source, t.problem) for t in tensors if t.problem]
    return tensors, problems


def describe(path: str, tensors: list[Tensor], *, round: str | None = None, when: str = "after", **_options) -> list[str]:
    """Lines for `inspect`: which round of how many, and which side of each op was read."""
    found = rounds(path) if os.path.isdir(path) else []
    shown = round or (found[0] if found else os.path.basename(path))
    lines = [f"round {shown}" + (f" of {len(found)} (choose with --option round=NAME)" if len(found) > 1 else "")
             + f" · tensors as each op {'ended' if when == 'after' else 'started'} ({when}/)"]
    layers = {t.op.split("/")[0] for t in tensors}
    lines.append(f"ops {len({t.op for t in tensors}):,} under {len(layers)} top-level layer(s)")
    return lines

