"""The Ascend dump header schema (`toolkit.dumpdata`), built in code from the wire facts.

Building the descriptor here instead of shipping protoc output keeps us independent of the
protoc/protobuf version pairing. Enums are plain ints on the wire; their names live in
`ascend.py`, so unknown values stay readable instead of failing the parse.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, MutableSequence
from typing import Protocol, TypeVar

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_TYPES = {
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
    "uint64": _F.TYPE_UINT64,
    "uint32": _F.TYPE_UINT32,
    "int32": _F.TYPE_INT32,
}

# message -> [(field name, number, type or message name, repeated)]
SCHEMA: dict[str, list[tuple[str, int, str, bool]]] = {
    "Shape": [("dim", 1, "uint64", True)],
    "DimRange": [("dim_start", 1, "uint64", False), ("dim_end", 2, "uint64", False)],
    "OriginalOp": [
        ("name", 1, "string", False),
        ("output_index", 2, "uint32", False),
        ("data_type", 3, "int32", False),
        ("format", 4, "int32", False),
    ],
    "OpOutput": [
        ("data_type", 1, "int32", False),
        ("format", 2, "int32", False),
        ("shape", 3, "Shape", False),
        ("original_op", 4, "OriginalOp", False),
        ("data", 5, "bytes", False),
        ("size", 6, "uint64", False),
        ("original_shape", 7, "Shape", False),
        ("sub_format", 8, "int32", False),
        ("address", 9, "uint64", False),
        ("dim_range", 10, "DimRange", True),
        ("offset", 11, "uint64", False),
    ],
    "OpInput": [
        ("data_type", 1, "int32", False),
        ("format", 2, "int32", False),
        ("shape", 3, "Shape", False),
        ("data", 4, "bytes", False),
        ("size", 5, "uint64", False),
        ("original_shape", 6, "Shape", False),
        ("sub_format", 7, "int32", False),
        ("address", 8, "uint64", False),
        ("offset", 9, "uint64", False),
    ],
    "OpBuffer": [("buffer_type", 1, "int32", False), ("data", 2, "bytes", False), ("size", 3, "uint64", False)],
    "OpAttr": [("name", 1, "string", False), ("value", 2, "string", False)],
    "Workspace": [("type", 1, "int32", False), ("data", 2, "bytes", False), ("size", 3, "uint64", False)],
    "DumpData": [
        ("version", 1, "string", False),
        ("dump_time", 2, "uint64", False),
        ("output", 3, "OpOutput", True),
        ("input", 4, "OpInput", True),
        ("buffer", 5, "OpBuffer", True),
        ("op_name", 6, "string", False),
        ("attr", 7, "OpAttr", True),
        ("space", 8, "Workspace", True),
    ],
}
PACKAGE = "toolkit.dumpdata"


def _build() -> dict[str, type]:
    fdp = descriptor_pb2.FileDescriptorProto(name="accuscope_dump_data.proto", package=PACKAGE, syntax="proto3")
    for msg_name, fields in SCHEMA.items():
        msg = fdp.message_type.add(name=msg_name)
        for fname, number, ftype, repeated in fields:
            f = msg.field.add(name=fname, number=number)
            f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
            if ftype in _TYPES:
                f.type = _TYPES[ftype]
            else:
                f.type = _F.TYPE_MESSAGE
                f.type_name = f".{PACKAGE}.{ftype}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
        for name in SCHEMA
    }


# The messages as accuscope reads and writes them (the classes are built at run time, so the
# type checker sees them through these; the fields as in SCHEMA)
_M = TypeVar("_M", covariant=True)


class Repeated(Protocol[_M]):
    """A repeated message field."""

    def __iter__(self) -> Iterator[_M]: ...

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> _M: ...

    def add(self) -> _M: ...


class ShapeMessage(Protocol):
    dim: MutableSequence[int]


class OriginalOpMessage(Protocol):
    name: str
    output_index: int
    data_type: int
    format: int


class PayloadMessage(Protocol):
    """What every section's item has: its bytes in the header (legacy) and their size in the file."""

    data: bytes
    size: int


class OpInputMessage(PayloadMessage, Protocol):
    data_type: int
    format: int
    shape: ShapeMessage
    original_shape: ShapeMessage

    def HasField(self, name: str, /) -> bool: ...


class OpOutputMessage(OpInputMessage, Protocol):
    original_op: OriginalOpMessage


class OpAttrMessage(Protocol):
    name: str
    value: str


class DumpDataMessage(Protocol):
    version: str
    dump_time: int
    op_name: str
    output: Repeated[OpOutputMessage]
    input: Repeated[OpInputMessage]
    buffer: Repeated[PayloadMessage]
    attr: Repeated[OpAttrMessage]
    space: Repeated[PayloadMessage]

    def ParseFromString(self, serialized: bytes, /) -> int: ...

    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...


_CLASSES = _build()
DumpData: Callable[..., DumpDataMessage] = _CLASSES["DumpData"]  # the fields as keywords
OpInput = _CLASSES["OpInput"]
OpOutput = _CLASSES["OpOutput"]
