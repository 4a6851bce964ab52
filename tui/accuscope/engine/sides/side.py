"""One side of a comparison, whatever wrote it: ops in execution order, each with its tensors.

"NPU" and "golden" are roles, not formats: an Ascend dump, an `accuscope dump` npy folder, an npz,
a Polygraphy RunResults file may stand on either side. Each format's reader yields tensors (or,
for Ascend dumps, dumped ops); `Side` gives every one of them the same face:

    side.ops                 ops in execution order (`OpRecord`: op_name, op_type, inputs, outputs)
    side.tensors             every tensor the source holds
    side.find(op, io, k)     a tensor by op name (raw or as written in file names)
    side.find_tensor(name)   a tensor by graph tensor name (ONNX value name, npz key, Polygraphy output)
    side.find_op(name)       an op by name
    side.graph               the side's own model graph when it carries one (an `accuscope dump`
                             folder holds its model.onnx), else None
    side.modules             the module hierarchy of a training dump as a Graph for the graph pane
                             (msprobe's construct.json: modules as groups of calls), else None;
                             it groups the ops, it does not order or name them as `graph` does
    side.problems            what could not be read, file by file
    side.caps                what its format declares it does (its Format's Capabilities, as the registry
                             gives them)
"""
# lazy: engine.graphs.modulescope
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING

from accuscope.engine.sources.golden import GoldenDump
from accuscope.engine.sources.inputfile import json_loads
from accuscope.engine.sources.oprecord import OpRecord
from accuscope.engine.sources.tensor import INPUT, OUTPUT, Problem, Tensor, sanitize

if TYPE_CHECKING:  # graphs.graph is imported with a model (graph_loader), npudump with an Ascend dump
    from accuscope.engine.graphs.graph import Graph, Node
    from accuscope.engine.sides.capabilities import Capabilities
    from accuscope.engine.sources.npudump import NpuDump

OWN_MODELS = ("model.onnx", "model.xml", "model.tflite")  # `accuscope dump` leaves the model it ran beside its
# npy files (onnxruntime's: the ONNX file; OpenVINO's: the IR, its .bin beside it; LiteRT's: the .tflite)
DUMP_JSON = "dump.json"  # and what it ran and skipped
UNREACHABLE_LIMIT = 16 << 20  # bytes of that dump.json read: `accuscope dump` writes a few KB


class Side:
    """A source seen as ops and tensors. `reader` is the format's own object (NpuDump, GoldenDump)
    for format-specific facts (run folders, Opdebug records, versions); `caps` what its format does."""

    def __init__(self, reader: NpuDump | GoldenDump, kind: str, caps: Capabilities, *,
                 graph_loader: Callable[[], Graph | None] | None = None, modules_loader: Callable[[], Graph] | None = None):
        self.reader = reader
        self.caps = caps
        self._modules_loader = modules_loader
        self.path: str = reader.path
        self.kind = kind
        self.problems: list[Problem] = reader.problems
        self._graph_loader = graph_loader
        self.graph_note = ""  # why the side's own model could not be used

    def __repr__(self) -> str:
        return f"Side({self.path!r}, kind={self.kind!r}, {len(self.ops)} ops, {len(self.problems)} problems)"

    @property
    def is_device_dump(self) -> bool:
        """Written by an accelerator's dump tool (device op names, fused ops), not by a framework run: an
        NpuDump, told as the reader that is no GoldenDump (a side of npy files imports no Ascend reader)."""
        return not isinstance(self.reader, GoldenDump)

    @cached_property
    def graph(self) -> Graph | None:
        if self._graph_loader is None:
            return None
        try:
            return self._graph_loader()
        except Exception as exc:  # noqa: BLE001 - the side stays usable without its graph; say why
            self.graph_note = f"its model could not be read ({exc})"
            return None

    @cached_property
    def modules(self) -> Graph | None:
        """The module hierarchy (see the module docstring); SourceError when it cannot be read."""
        return self._modules_loader() if self._modules_loader is not None else None

    @cached_property
    def ops(self) -> list[OpRecord]:
        if not isinstance(self.reader, GoldenDump):
            return list(self.reader.files)
        ops, self.__dict__["_as_read"] = _ops_of(self.reader.tensors, self.graph)
        return ops

    @cached_property
    def _as_read(self) -> dict[int, Tensor]:
        """The tensors `ops` renamed after the side's graph, by id of the one read. Without a graph
        none is, and the ops are not built for it: a golden npy folder's 20,000 tiny tensors, whose
        ops no comparison asks for, took 2 us each."""
        if self.is_device_dump or self.graph is None:
            return {}
        self.ops  # noqa: B018 - names and types come from the graph when the ops are built
        return self.__dict__["_as_read"]

    @property
    def tensors(self) -> list[Tensor]:
        """Every tensor the source holds (not the inputs `ops` derives from their producers)."""
        if not self._as_read:  # no graph renamed any (msprobe, most dumps): a copy of the reader's list
            return list(self.reader.tensors)
        return [self._as_read.get(id(t), t) for t in self.reader.tensors]

    def _seen(self, t: Tensor | None) -> Tensor | None:
        """A reader's tensor as this side shows it (named after its graph)."""
        if t is None:
            return None
        return self._as_read.get(id(t), t)

    @cached_property
    def _index(self) -> dict:
        index: dict = {}
        for op in self.ops:
            for t in op.tensors:
                index.setdefault((op.op_name, t.io, t.index), t)
                index.setdefault((sanitize(op.op_name), t.io, t.index), t)
                if t.tensor_name:
                    index.setdefault(("", "tensor", t.tensor_name), t)
        return index

    @cached_property
    def _ops_by_name(self) -> dict[str, OpRecord]:
        found: dict[str, OpRecord] = {}
        for op in self.ops:
            found.setdefault(op.op_name, op)
            found.setdefault(sanitize(op.op_name), op)
            if op.name is not None:
                found.setdefault(op.name.op_name, op)
        return found

    @cached_property
    def unreachable(self) -> list[tuple[str, str]]:
        """(tensor, why) of tensors the run that wrote this side could not fetch (an `accuscope dump`
        folder lists those inside If/Loop bodies in its dump.json): absent, but not by mistake. A
        dump.json that is the format's own data (msprobe's: up to 100 MB, parsed by its reader) is
        not read again: it lists no such tensors."""
        if self.caps.own_dump_json:
            return []
        skipped = dump_record(self.path).get("skipped")
        if not isinstance(skipped, list):
            return []
        return [(str(e.get("tensor")), str(e.get("reason"))) for e in skipped
                if isinstance(e, dict) and "inside the body" in str(e.get("reason", ""))]

    def use_graph(self, graph: Graph) -> None:
        """Read the side through `graph` (a model given for it): op order, op types, tensor names
        and the inputs of ops (the outputs of their producers) come from it."""
        if "ops" in self.__dict__ or "_as_read" in self.__dict__:
            raise RuntimeError("use_graph must come before the ops or tensors are read")
        self.__dict__["graph"] = graph

    def find(self, op: str, io: str = OUTPUT, index: int = 0) -> Tensor | None:
        if isinstance(self.reader, GoldenDump):
            return self._seen(self.reader.find(op, io, index))
        return self._index.get((op, io, index)) or self._index.get((sanitize(op), io, index))

    def find_tensor(self, name: str) -> Tensor | None:
        """By graph tensor name: a name the reader recorded, else through the side's own graph
        (the producing node's output)."""
        if isinstance(self.reader, GoldenDump):
            found = self._seen(self.reader.find_tensor(name))
            if found is None and self._as_read:  # a name its graph gave (a module's output: modulescope.py)
                found = self._index.get(("", "tensor", name))
        else:
            found = self._index.get(("", "tensor", name))
        if found is None and self.graph is not None:
            hit = self.graph.producer(name)
            if hit is not None:
                found = self.find(hit[0].name, OUTPUT, hit[1])
            elif name in self.graph.inputs:
                found = self.find(name, OUTPUT, 0)  # `accuscope dump` writes network inputs as ops
        return found

    def find_op(self, name: str) -> OpRecord | None:
        return self._ops_by_name.get(name) or self._ops_by_name.get(sanitize(name))

    def versions(self, op: str, io: str = OUTPUT, index: int = 0) -> list[Tensor]:
        if isinstance(self.reader, GoldenDump):
            return [s for t in self.reader.versions(op, io, index) if (s := self._seen(t)) is not None]
        t = self.find(op, io, index)
        return [t] if t is not None else []


_INDEX = attrgetter("index")


def _ops_of(tensors: list[Tensor], graph: Graph | None) -> tuple[list[OpRecord], dict[int, Tensor]]:
    """Group a tensor list into ops, in the reader's order (dump time, then file order).

    With the side's graph: ops in the graph's execution order (network inputs first), op types,
    tensor names, and, for ops whose inputs were not dumped (a framework run dumps outputs only),
    each input as the tensor its producer wrote, so the op's inputs can be compared and fed to
    re-runs like those of a device dump. Also returns each renamed tensor by id of the one read."""
    grouped: dict[str, OpRecord] = {}
    for t in tensors:
        op = grouped.get(t.op)
        if op is None:
            op = grouped[t.op] = OpRecord(path=t.source, name=None, op_name=t.op, op_type=t.op_type,
                                          dump_time=t.timestamp or 0)
        (op.inputs if t.io == INPUT else op.outputs).append(t)
    if graph is None:
        for op in grouped.values():
            if len(op.inputs) > 1:
                op.inputs.sort(key=_INDEX)
            if len(op.outputs) > 1:
                op.outputs.sort(key=_INDEX)
        return list(grouped.values()), {}
    ops, renamed = [], {}

    def rename(t: Tensor, **changes) -> Tensor:
        new = replace(t, **changes)
        renamed[id(t)] = new
        return new

    for name in graph.inputs:
        op = grouped.get(name) or grouped.get(sanitize(name))
        if op is not None:
            op.op_type = op.op_type or "Data"
            op.outputs = [rename(t, tensor_name=t.tensor_name or name) if t.index == 0 else t for t in op.outputs]
            ops.append(op)
    written = {id(op) for op in ops}
    node_of: dict[int, Node] = {}
    modules = _module_ops(grouped, graph, written)
    for node in graph.nodes:
        op = grouped.get(node.name) or grouped.get(sanitize(node.name))
        module = modules.get(node.outputs[0]) if op is None and modules and node.outputs else None
        if module is not None:
            op = grouped[module]
        if op is None or id(op) in written:
            continue
        written.add(id(op))
        node_of[id(op)] = node
        if module is None:  # a module keeps its path: the name its hook wrote, what the user looks for
            op.op_name = node.name  # file names spell it sanitized; the graph has it as the model does
        op.op_type = op.op_type or node.type
        op.outputs = sorted((rename(t, op=op.op_name, op_type=op.op_type,
                                    tensor_name=t.tensor_name or (node.outputs[t.index] if t.index < len(node.outputs) else ""))
                             for t in op.outputs), key=lambda t: t.index)
        op.inputs = [rename(t, op=op.op_name, op_type=op.op_type) for t in op.inputs]
        ops.append(op)
    produced = {t.tensor_name: t for op in ops for t in op.outputs if t.tensor_name}
    for op in ops:
        of_op = node_of.get(id(op))
        if op.inputs or of_op is None:
            op.inputs.sort(key=lambda t: t.index)
            continue
        op.inputs = [replace(produced[v], op=op.op_name, io=INPUT, index=i, op_type=op.op_type)
                     for i, v in enumerate(of_op.inputs) if v in produced]
    return ops + [op for op in grouped.values() if id(op) not in written], renamed


def _module_ops(grouped: dict[str, OpRecord], graph: Graph, written: set[int]) -> dict[str, str]:
    """An ONNX tensor -> the module (a key of `grouped`) whose output it holds, where the ops are named by
    module path (a folder of forward hooks) and `graph` is the model's `torch.onnx.export` (modulescope.py);
    {} where every op is a node or an input of the graph."""
    names = [name for name, op in grouped.items() if id(op) not in written and graph.node(name) is None
             and graph.node(sanitize(name)) is None]
    if not names:
        return {}
    from accuscope.engine.graphs.modulescope import module_outputs
    return {tensor: module for module, tensor in module_outputs(graph, names).tensor.items()}


def dump_record(path: str) -> dict:
    """What an `accuscope dump` folder's dump.json says of the run (the runtime, what was skipped, the
    quantized tensors and their grids), {} where there is none, or none readable (not JSON, nested too
    deeply, over UNREACHABLE_LIMIT: another tool's dump.json)."""
    doc = os.path.join(path, DUMP_JSON) if os.path.isdir(path) else None
    if doc is None or not os.path.isfile(doc):
        return {}
    try:
        if os.path.getsize(doc) > UNREACHABLE_LIMIT:
            return {}
        with open(doc, encoding="utf-8") as fh:
            found = json_loads(fh.read())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def own_model(path: str) -> str | None:
    """The model file a dump folder carries (an `accuscope dump` folder keeps model.onnx, model.xml or model.tflite)."""
    if not os.path.isdir(path):
        return None
    return next((c for name in OWN_MODELS if os.path.isfile(c := os.path.join(path, name))), None)
