"""MindSpore static-graph kernel dumps (msprobe `level: L2`, MindSpore asynchronous dump as npy).

Layout (facts from the MindSpore "Using Dump in the Graph Mode" tutorial and msprobe's
MindSpore data-dump guide):

    {dump_path}/rank_{i}/{net or timestamp}/step_{k}/{OpType}.{op}.{task}.{stream}.{timestamp}.{input|output}.{idx}.{format}.{dtype}.npy

One npy file per tensor, holding the data as the device stored them: `format` (NC1HWC0,
FRACTAL_NZ, DefaultFormat ...) drives the same layout conversion as Ascend dumps (`layout.py`);
`dtype` names the device type. bfloat16 and int4 have no numpy type and are kept raw: bfloat16 as
uint16 (widened to float32 on load), int4 packed two values a byte (refused with a message: the
logical shape is not recorded). Names too long for the file system are numeric and restored
through the folder's `mapping.csv`. Several ranks and steps: `rank`/`step` options pick one
(default: the first of each).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from accuscope.engine.sources import kinds, sniffs
from accuscope.engine.sources.ascend import stored_tensor
from accuscope.engine.sources.inputfile import walk
from accuscope.engine.sources.names import read_mapping_csv
from accuscope.engine.sources.npyfile import npy_header
from accuscope.engine.sources.tensor import INPUT, Payload, Problem, SourceError, Tensor

KIND = kinds.MINDSPORE
# the sniff and the layout facts it shares with the reader: sources/sniffs.py (the registry sniffs without this module)
sniff = sniffs.mindspore
_RANK, _STEP = sniffs.MINDSPORE_RANK, sniffs.MINDSPORE_STEP
# format names in file names that are a plain logical order
_PLAIN = {"DefaultFormat": "ND"}
PACKED = {"int4": "int4 data are stored packed two values a byte without their logical shape: not decoded"}


@dataclass(frozen=True)
class KernelName:
    op_type: str
    op_name: str
    task_id: int
    stream_id: int
    timestamp: int
    io: str
    index: int
    format: str
    dtype: str


def parse_kernel_name(name: str) -> KernelName | None:
    """`{OpType}.{op}.{task}.{stream}.{timestamp}.{input|output}.{idx}.{format}.{dtype}.npy`; None otherwise."""
    fields = sniffs.kernel_name_fields(name)
    return KernelName(*fields) if fields is not None else None


def steps(path: str) -> list[tuple[int | None, int | None, str]]:
    """(rank, step, folder) of every folder holding kernel npy files, ranks then steps in number order."""
    found = []
    for root, dirs, files in walk(path):
        dirs.sort()
        mapping = read_mapping_csv(root) if "mapping.csv" in files else {}
        if any(parse_kernel_name(mapping.get(f, f)) for f in files):
            parts = os.path.relpath(root, path).split(os.sep)
            base = os.path.basename(os.path.abspath(path))
            rank = _number(_RANK, [base] + parts)
            step = _number(_STEP, [base] + parts)
            found.append((rank, step, root))
    return sorted(found, key=lambda f: (f[0] if f[0] is not None else -1, f[1] if f[1] is not None else -1, f[2]))


def _number(pattern: re.Pattern, parts: list[str]) -> int | None:
    hits = [int(m.group(1)) for p in parts if (m := pattern.fullmatch(p))]
    return hits[-1] if hits else None


def read(path: str, *, rank: int | None = None, step: int | None = None, **_options) -> tuple[list[Tensor], list[Problem]]:
    """The tensors of one rank's step, in execution order (timestamp, then task id)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file or folder")
    if os.path.isfile(path):
        name = parse_kernel_name(os.path.basename(path))
        if name is None:
            raise SourceError(f"{path}: not a MindSpore kernel dump file ({{OpType}}.{{op}}.{{task}}.{{stream}}."
                              "{timestamp}.{input|output}.{idx}.{format}.{dtype}.npy)")
        t = _tensor(path, name)
        return [t], [Problem(path, t.problem)] if t.problem else []
    found = steps(path)
    if not found:
        raise SourceError(f"{path}: no MindSpore kernel dump files (rank_N/.../step_N/"
                          "OpType.op.task.stream.timestamp.input|output.idx.format.dtype.npy)")
    chosen = [f for f in found if (rank is None or f[0] == rank) and (step is None or f[1] == step)]
    if not chosen:
        have = ", ".join(f"rank {r} step {s}" for r, s, _ in found[:12])
        raise SourceError(f"{path}: no dump for rank {rank} step {step}; found: {have}")
    folder = chosen[0][2]
    mapping = read_mapping_csv(folder)
    named = []
    for fname in os.listdir(folder):
        parsed = parse_kernel_name(mapping.get(fname, fname))
        if parsed:
            named.append((parsed, os.path.join(folder, fname)))
    named.sort(key=lambda item: (item[0].timestamp, item[0].task_id, item[0].io != INPUT, item[0].index))
    tensors = [_tensor(source, name) for name, source in named]
    return tensors, [Problem(t.source, t.problem) for t in tensors if t.problem]


def _tensor(path: str, name: KernelName) -> Tensor:
    fmt = _PLAIN.get(name.format, name.format)
    common: dict[str, Any] = dict(op=name.op_name, io=name.io, index=name.index, source=path, op_type=name.op_type,
                  dtype_name=name.dtype, format=fmt, timestamp=name.timestamp)
    try:
        with open(path, "rb") as fh:
            head = npy_header(fh, os.path.getsize(path))
    except (OSError, ValueError, EOFError) as exc:
        return Tensor(dtype=None, shape=(), problem=f"not a readable npy file: {exc}", **common)
    if name.dtype in PACKED:
        return Tensor(dtype=head.dtype, shape=head.shape, storage_shape=head.shape, problem=PACKED[name.dtype],
                      **common)
    bf16 = name.dtype == "bfloat16"
    if bf16 and head.dtype.itemsize != 2:
        if head.dtype.kind == "f":  # already widened by the writer
            bf16 = False
        else:
            return Tensor(dtype=None, shape=head.shape, problem=f"bfloat16 stored as {head.dtype}: expected 2-byte "
                          "raw values", **common)
    if head.fortran:
        return Tensor(dtype=head.dtype, shape=head.shape, problem="Fortran-ordered npy: not a device dump", **common)
    # bf16 bits may come under any 2-byte numpy type (uint16, int16, float16): read them as uint16
    storage_dtype = np.dtype(np.uint16).newbyteorder(head.dtype.byteorder) if bf16 else head.dtype
    payload = Payload(path, head.offset, head.nbytes, storage_dtype, head.shape)
    return stored_tensor(payload, fmt, None, bf16, storage_shape=head.shape, **common)


def describe(path: str, tensors: list[Tensor], *, rank: int | None = None, step: int | None = None,
             **_options) -> list[str]:
    """Lines for `inspect`: which rank and step of those present, and the device formats seen."""
    found = steps(path) if os.path.isdir(path) else []
    ranks = sorted({r for r, _, _ in found if r is not None})
    chosen = next((f for f in found if (rank is None or f[0] == rank) and (step is None or f[1] == step)), None)
    lines = []
    if chosen:
        lines.append(f"rank {chosen[0]} step {chosen[1]} ({len(ranks)} rank(s), {len(found)} step folder(s); "
                     "choose with rank=/step=)")
    packed = sum(1 for t in tensors if t.dtype_name in PACKED)
    if packed:
        lines.append(f"{packed} int4 tensor(s) kept packed (not compared)")
    return lines

