"""Ascend binary dump files (v2: u64 header length, DumpData header, payloads back to back).

`read_dump_file` parses only the header; tensor data are memory-mapped when `Tensor.load()`
is called. It never raises on bad data: a broken file comes back with `problem` set, a tensor
it cannot decode carries its own `problem`. `write_dump_file` writes the same format.
"""
# lazy: engine.sources.dumpproto
from __future__ import annotations

import math
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, TypedDict, cast

import numpy as np

from accuscope.engine.sources import layout
from accuscope.engine.sources.inputfile import not_regular
from accuscope.engine.sources.names import parse_dump_name
from accuscope.engine.sources.oprecord import OpRecord
from accuscope.engine.sources.tensor import INPUT, OUTPUT, Payload, Tensor, read_payload

if TYPE_CHECKING:  # protobuf is imported by the first dump file read or written, not by every command
    from accuscope.engine.sources.dumpproto import DumpDataMessage, OpInputMessage, OpOutputMessage

DTYPE_NAMES = (
    "UNDEFINED FLOAT FLOAT16 INT8 UINT8 INT16 UINT16 INT32 INT64 UINT32 UINT64 BOOL DOUBLE STRING "
    "DUAL_SUB_INT8 DUAL_SUB_UINT8 COMPLEX64 COMPLEX128 QINT8 QINT16 QINT32 QUINT8 QUINT16 RESOURCE "
    "STRING_REF DUAL VARIANT BF16 INT4 UINT1 INT2 UINT2 COMPLEX32 HIFLOAT8 FLOAT8_E5M2 FLOAT8_E4M3FN "
    "FLOAT8_E8M0 FLOAT6_E3M2 FLOAT6_E2M3 FLOAT4_E2M1 FLOAT4_E1M2"
).split()
FORMAT_NAMES = (
    "NCHW NHWC ND NC1HWC0 FRACTAL_Z NC1C0HWPAD NHWC1C0 FSR_NCHW FRACTAL_DECONV C1HWNC0 "
    "FRACTAL_DECONV_TRANSPOSE FRACTAL_DECONV_SP_STRIDE_TRANS NC1HWC0_C04 FRACTAL_Z_C04 CHWN "
    "FRACTAL_DECONV_SP_STRIDE8_TRANS HWCN NC1KHKWHWC0 BN_WEIGHT FILTER_HWCK HASHTABLE_LOOKUP_LOOKUPS "
    "HASHTABLE_LOOKUP_KEYS HASHTABLE_LOOKUP_VALUE HASHTABLE_LOOKUP_OUTPUT HASHTABLE_LOOKUP_HITS "
    "C1HWNCoC0 MD NDHWC FRACTAL_ZZ FRACTAL_NZ NCDHW DHWCN NDC1HWC0 FRACTAL_Z_3D CN NC DHWNC "
    "FRACTAL_Z_3D_TRANSPOSE FRACTAL_ZN_LSTM FRACTAL_Z_G"
).split()

# Ascend data type code -> numpy storage dtype (bf16 is stored as uint16 and widened on load).
STORAGE_DTYPES: dict[int, np.dtype] = {
    code: np.dtype(t).newbyteorder("<")
    for code, t in {
        1: np.float32, 2: np.float16, 3: np.int8, 4: np.uint8, 5: np.int16, 6: np.uint16, 7: np.int32,
        8: np.int64, 9: np.uint32, 10: np.uint64, 11: np.bool_, 12: np.float64, 27: np.uint16,
    }.items()
}
BF16 = 27
_CODE_OF = {np.dtype(np.float32): 1, np.dtype(np.float16): 2, np.dtype(np.int8): 3, np.dtype(np.uint8): 4,
            np.dtype(np.int16): 5, np.dtype(np.uint16): 6, np.dtype(np.int32): 7, np.dtype(np.int64): 8,
            np.dtype(np.uint32): 9, np.dtype(np.uint64): 10, np.dtype(np.bool_): 11, np.dtype(np.float64): 12}
_LEN = struct.Struct("<Q")
MAX_HEADER = 64 << 20  # real headers are kilobytes; a larger claim is damage, not worth the memory
_INT64 = 1 << 63
MAX_RANK = 64


def dtype_name(code: int) -> str:
    return DTYPE_NAMES[code] if 0 <= code < len(DTYPE_NAMES) else f"dtype {code}"


def format_name(code: int) -> str:
    return FORMAT_NAMES[code] if 0 <= code < len(FORMAT_NAMES) else f"format {code}"


def bf16_to_float32(raw: np.ndarray) -> np.ndarray:
    """bf16 is the upper half of a float32: widen the bits, reinterpret."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


def read_header(path: str) -> tuple[DumpDataMessage, int, int]:
    """(header message, offset of the first payload, file size). Raises ValueError with the reason."""
    why = not_regular(path)
    if why:
        raise ValueError(why)
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise ValueError(f"file of {size} bytes is too short for a dump header")
        (hlen,) = _LEN.unpack(head)
        if hlen > size - 8:
            raise ValueError(f"header length {hlen} exceeds the file size ({size} bytes): not a v2 dump or truncated")
        if hlen > MAX_HEADER:
            raise ValueError(f"header length {hlen} exceeds {MAX_HEADER >> 20} MiB: not a v2 dump")
        raw = fh.read(hlen)
    from google.protobuf.message import DecodeError

    from accuscope.engine.sources.dumpproto import DumpData
    msg = DumpData()
    try:
        msg.ParseFromString(raw)
    except DecodeError as exc:
        raise ValueError(f"header is not a valid DumpData message ({exc})") from None
    return msg, 8 + hlen, size


def read_dump_file(path: str | os.PathLike, original_name: str | None = None) -> OpRecord:
    """Parse one dump file's header. `original_name` is the real file name for numeric names."""
    path = os.fspath(path)
    base = original_name or os.path.basename(path)
    parsed = parse_dump_name(base)
    df = OpRecord(path=path, name=parsed,
                  op_type=parsed.op_type if parsed else "",
                  op_name=parsed.op_name if parsed else base)
    try:
        msg, offset, size = read_header(path)
    except (OSError, ValueError) as exc:
        df.problem = str(exc)
        return df
    df.version, df.dump_time = msg.version, msg.dump_time
    if msg.op_name:
        df.op_name = msg.op_name
    df.attrs = {a.name: a.value for a in msg.attr}
    sections = [(INPUT, msg.input), (OUTPUT, msg.output), (None, msg.buffer), (None, msg.space)]
    total = sum(item.size for _, items in sections for item in items)
    inline = any(item.data for _, items in sections for item in items)
    if inline:
        df.problem = "payload stored inside the header (legacy dump format): not supported"
        return df
    if offset + total != size:
        what = "truncated" if offset + total > size else "has trailing bytes"
        df.problem = (f"{what}: header {offset - 8} bytes + payloads {total} bytes + 8 = {offset + total}"
                      f" bytes, but the file has {size}")
        return df
    for io, items in ((INPUT, msg.input), (OUTPUT, msg.output)):
        out = df.inputs if io == INPUT else df.outputs
        for i, item in enumerate(items):
            out.append(_tensor(df, io, i, item, path, offset))
            offset += item.size
    return df


class _TensorFields(TypedDict):
    """The Tensor fields every tensor of a dump file is made with."""

    op: str
    io: str
    index: int
    source: str
    op_type: str
    dtype_name: str
    format: str
    storage_shape: tuple[int, ...]
    original_op: tuple[str, int] | None
    timestamp: int


def _tensor(df: OpRecord, io: str, index: int, item: OpInputMessage, path: str, offset: int) -> Tensor:
    storage = tuple(int(d) for d in item.shape.dim)
    original = tuple(int(d) for d in item.original_shape.dim) if item.HasField("original_shape") else None
    huge = [d for d in storage + (original or ()) if d >= _INT64]
    fmt = format_name(item.format)
    code = item.data_type
    orig_op = None
    if io == OUTPUT and item.HasField("original_op") and (op := cast("OpOutputMessage", item).original_op).name:
        orig_op = (op.name, int(op.output_index))
    sdtype = STORAGE_DTYPES.get(code)
    name = "bfloat16" if code == BF16 else sdtype.name if sdtype is not None else dtype_name(code).lower()
    common: _TensorFields = dict(op=df.op_name, io=io, index=index, source=path, op_type=df.op_type,
                                 dtype_name=name, format=fmt, storage_shape=storage,
                                 original_op=orig_op, timestamp=df.timestamp)
    if huge:
        return Tensor(dtype=None, shape=storage, problem=f"impossible dimension {huge[0]}", **common)
    if max(len(storage), len(original or ())) > MAX_RANK:
        return Tensor(dtype=None, shape=(), problem=f"rank {max(len(storage), len(original or ()))} "
                      f"(numpy holds at most {MAX_RANK} dimensions)", **common)
    if sdtype is None:
        return Tensor(dtype=None, shape=original or storage, problem=f"unsupported dtype {dtype_name(code)}", **common)
    count = math.prod(storage)
    if count * sdtype.itemsize != item.size:
        return Tensor(dtype=None, shape=original or storage, problem=(
            f"size {item.size} bytes does not match shape {list(storage)} of {dtype_name(code)}"
            f" ({count * sdtype.itemsize} bytes)"), **common)
    payload = Payload(path, offset, int(item.size), sdtype, storage)
    return stored_tensor(payload, fmt, original, code == BF16, **common)


def stored_tensor(payload: Payload, fmt: str, original: tuple | None, bf16: bool, **common) -> Tensor:
    """A tensor whose storage bytes are `payload`, laid out as `fmt` (an Ascend format name): the
    logical shape, conversion and reader planned as for dump files; bf16 (stored as uint16) is
    widened to float32 on load. `common`: the other Tensor fields (op, io, index, source ...)."""
    dtype = np.dtype(np.float32) if bf16 else payload.dtype
    logical, conversion, problem = _plan_layout(fmt, payload.shape, original)
    if problem:
        return Tensor(dtype=dtype, shape=payload.shape, payload=payload, problem=problem, **common)
    reader = partial(_load, payload, bf16, fmt if fmt in layout.CONVERTED else "", logical)
    return Tensor(dtype=dtype, shape=logical, conversion=conversion, payload=payload, reader=reader, **common)


def _plan_layout(fmt: str, storage: tuple, original: tuple | None) -> tuple[tuple, str, str]:
    """(logical shape, conversion label, problem) for a tensor stored as `fmt`."""
    if fmt in layout.CONVERTED:
        target = layout.CONVERTED[fmt]
        if storage and storage[-1] == 0:
            return storage, "", f"{fmt} storage shape {list(storage)} has a block size (C0) of 0"
        if not original:
            return layout.logical_shape_guess(fmt, storage), f"{fmt}->{target} {UNCROPPED}", ""
        try:
            layout.check(fmt, storage, original)
        except layout.LayoutError as exc:
            return storage, "", str(exc)
        return original, f"{fmt}->{target}", ""
    if original and math.prod(original) == math.prod(storage):
        return original, "", ""
    note = "" if fmt in layout.PLAIN_FORMATS or not original else f"{fmt} kept as stored (no conversion)"
    return storage, note, ""


UNCROPPED = "(uncropped: no original_shape)"


def crop_to(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A tensor dumped in a padded format without its original_shape, cropped to `shape` (its
    golden counterpart's) when the storage fits it, so the pair compares instead of failing on
    the padding; any other tensor unchanged."""
    shape = tuple(shape)
    if not t.conversion.endswith(UNCROPPED) or t.payload is None or t.storage_shape is None or shape == t.shape:
        return t
    try:
        layout.check(t.format, t.storage_shape, shape)
    except layout.LayoutError:
        return t
    return replace(t, shape=shape, reader=partial(_load, t.payload, t.dtype_name == "bfloat16", t.format, shape),
                   conversion=f"{t.format}->{layout.CONVERTED[t.format]} (cropped to the golden shape: no original_shape)")


def _load(payload: Payload, bf16: bool, fmt: str, logical: tuple) -> np.ndarray:
    data = read_payload(payload)
    if bf16:
        data = bf16_to_float32(data)
    if fmt:
        return layout.to_logical(data, fmt, logical)
    return data.reshape(logical)


# ---------------------------------------------------------------- writing


@dataclass
class DumpTensor:
    """A logical array to write, with the storage format and mapping facts to record."""

    data: np.ndarray
    format: str = "ND"
    original_op: tuple[str, int] | None = None
    bf16: bool = False
    c0: int = 16


def build_header(op_name: str, inputs: Sequence[DumpTensor], outputs: Sequence[DumpTensor],
                 dump_time: int = 0, version: str = "2.0") -> tuple[DumpDataMessage, list[bytes]]:
    """The header message and the payload bytes, in file order (inputs then outputs)."""
    from accuscope.engine.sources.dumpproto import DumpData
    msg = DumpData(version=version, dump_time=dump_time, op_name=op_name)
    payloads = []
    for io, items in ((INPUT, inputs), (OUTPUT, outputs)):
        for t in items:
            arr = np.asarray(t.data)
            stored = layout.to_storage(arr, t.format, t.c0)
            if t.bf16:
                code = BF16
                stored = (np.ascontiguousarray(stored, dtype=np.float32).view(np.uint32) >> 16).astype("<u2")
            else:
                code = _CODE_OF[stored.dtype.newbyteorder("=")]
                stored = stored.astype(stored.dtype.newbyteorder("<"), copy=False)
            raw = np.ascontiguousarray(stored).tobytes()
            item = (msg.input if io == INPUT else msg.output).add()
            item.data_type = code
            item.format = FORMAT_NAMES.index(t.format)
            item.shape.dim.extend(stored.shape)
            item.original_shape.dim.extend(arr.shape)
            item.size = len(raw)
            if io == OUTPUT and t.original_op:
                op = cast("OpOutputMessage", item).original_op
                op.name, op.output_index = t.original_op
            payloads.append(raw)
    return msg, payloads


def write_dump_file(path: str | os.PathLike, op_name: str, inputs: Sequence[DumpTensor] = (),
                    outputs: Sequence[DumpTensor] = (), dump_time: int = 0) -> None:
    msg, payloads = build_header(op_name, inputs, outputs, dump_time)
    write_raw(path, msg, payloads)


def write_raw(path: str | os.PathLike, msg: DumpDataMessage, payloads: Sequence[bytes]) -> None:
    """Write a header message and its payloads (deterministic: same inputs, same bytes)."""
    header = msg.SerializeToString(deterministic=True)
    with open(path, "wb") as fh:
        fh.write(_LEN.pack(len(header)))
        fh.write(header)
        for raw in payloads:
            fh.write(raw)
