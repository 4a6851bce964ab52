"""Pair every NPU-side tensor with its golden tensor, or say why there is none.

Sources of truth, strongest first: the offline model's fusion attributes (`_datadump_origin_*`,
inputs traced back through layout-only ops), the dump header's `original_op`, identical op names
(both sides from the same framework, optionally through an ONNX graph's tensor names). There is
no fuzzy or positional fallback: a tensor without a proven counterpart stays unmatched.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ascend import DumpFile
from .golden import GoldenDump
from .graph import Graph, Node
from .npudump import NpuDump
from .tensor import INPUT, OUTPUT, Tensor

LAYOUT_ONLY = {"TransData", "TransDataRNN", "Cast"}
DEVICE_ONLY = "*"


@dataclass(frozen=True)
class Pair:
    npu: Tensor
    golden: Tensor | None
    op: DumpFile
    ground_truth: str  # golden op names joined by ",", or "*" for a device-only op
    how: str  # "fusion", "original_op", "name", or "" when unmatched
    reason: str = ""  # why golden is None


@dataclass
class Mapping:
    pairs: list[Pair] = field(default_factory=list)
    unmatched_golden: list[Tensor] = field(default_factory=list)

    @property
    def matched(self) -> list[Pair]:
        return [p for p in self.pairs if p.golden is not None]

    @property
    def unmatched_npu(self) -> list[Pair]:
        return [p for p in self.pairs if p.golden is None]


def map_tensors(npu: NpuDump, golden: GoldenDump, graph: Graph | None = None) -> Mapping:
    mapper = _Mapper(golden, graph)
    mapping = Mapping([p for df in npu.files for p in mapper.pairs_of(df)])
    used = {id(p.golden) for p in mapping.pairs if p.golden is not None}
    mapping.unmatched_golden = [t for t in golden.tensors if id(t) not in used]
    return mapping


class _Mapper:
    def __init__(self, golden: GoldenDump, graph: Graph | None):
        self.golden = golden
        self.graph = graph
        self.om = graph if graph is not None and graph.kind == "om" else None

    def pairs_of(self, df: DumpFile) -> list[Pair]:
        node = self._om_node(df)
        if node is not None:
            return self._by_fusion(df, node)
        return [self._by_header_or_name(df, t) for t in df.tensors]

    def _om_node(self, df: DumpFile) -> Node | None:
        if self.om is None:
            return None
        return self.om.node(df.op_name) or (self.om.node(df.name.op_name) if df.name else None)

    # ---------------------------------------------------------- fusion attributes

    def _by_fusion(self, df: DumpFile, node: Node) -> list[Pair]:
        truth = _ground_truth(node)
        pairs = []
        for t in df.tensors:
            if truth == DEVICE_ONLY:
                pairs.append(Pair(t, None, df, truth, "", "device-only op: no framework counterpart"))
                continue
            if t.io == OUTPUT:
                origin, where = self._origin(node, t.index), f"{node.name}:output:{t.index}"
            else:
                origin, where = self._input_origin(node, t.index)
            if origin is None:
                pairs.append(Pair(t, None, df, truth, "", where))
                continue
            g = self._golden_output(*origin)
            reason = "" if g else f"no golden tensor {origin[0]}:output:{origin[1]} (from fusion attributes)"
            pairs.append(Pair(t, g, df, truth, "fusion" if g else "", reason))
        return pairs

    def _origin(self, node: Node, j: int) -> tuple[str, int] | None:
        """The framework (op, output index) that output j of a device op stands for."""
        if j < len(node.origins) and node.origins[j] is not None:
            return node.origins[j]
        if node.fused is None or node.type in ("Data", "RefData"):
            return (node.name, j)  # the op kept its framework name
        if len(node.fused) == 1:
            return (node.fused[0], j)
        return None

    def _input_origin(self, node: Node, i: int) -> tuple[tuple[str, int] | None, str]:
        """Trace input i back through layout-only ops (those without a golden tensor of their own)."""
        if i >= len(node.inputs):
            return None, f"input {i} of {node.name} is not in the model graph"
        tensor = node.inputs[i]
        seen = set()
        while True:
            found = self.om.producer(tensor)
            if tensor in self.om.weights:
                return None, f"input {i} of {node.name} is a weight ({tensor.split(':')[0]}): no golden dump of weights"
            if found is None:
                return None, f"input {i} of {node.name}: producer of {tensor} not in the model graph"
            producer, j = found
            if producer.type not in LAYOUT_ONLY or not producer.inputs or producer.name in seen:
                break
            origin = self._origin(producer, j)
            if origin is not None and self._golden_output(*origin) is not None:
                break  # a framework Cast with its own golden tensor: compare against it
            seen.add(producer.name)
            tensor = producer.inputs[0]
        origin = self._origin(producer, j)
        if origin is None:
            return None, f"input {i} of {node.name}: producer {producer.name} has no framework counterpart"
        return origin, ""

    # ---------------------------------------------------------- header and names

    def _by_header_or_name(self, df: DumpFile, t: Tensor) -> Pair:
        if t.original_op is not None:
            g = self._golden_output(*t.original_op)
            if g is not None:
                return Pair(t, g, df, t.original_op[0], "original_op")
        if t.io == OUTPUT:
            g = self._golden_output(df.op_name, t.index)
        else:
            g = self.golden.find(df.op_name, INPUT, t.index) or self._golden_of_graph_input(df.op_name, t.index)
        if g is not None:
            return Pair(t, g, df, df.op_name, "name")
        hint = f" or {t.original_op[0]}:output:{t.original_op[1]} (original_op)" if t.original_op else ""
        return Pair(t, None, df, df.op_name, "", f"no golden tensor named {df.op_name}:{t.io}:{t.index}{hint}")

    def _golden_output(self, op: str, j: int) -> Tensor | None:
        g = self.golden.find(op, OUTPUT, j)
        if g is None and self.graph is not None:
            node = self.graph.node(op)
            if node is not None and j < len(node.outputs):
                g = self.golden.find_tensor(node.outputs[j])
        if g is None:
            g = self.golden.find_tensor(op) if j == 0 else None
        return g

    def _golden_of_graph_input(self, op: str, i: int) -> Tensor | None:
        """Input i of an op, as the output of its producer in a framework graph."""
        if self.graph is None or self.om is not None:
            return None
        node = self.graph.node(op)
        if node is None or i >= len(node.inputs):
            return None
        found = self.graph.producer(node.inputs[i])
        if found is None:
            return self.golden.find_tensor(node.inputs[i]) or self.golden.find(node.inputs[i], OUTPUT, 0)
        return self._golden_output(found[0].name, found[1])


def _ground_truth(node: Node) -> str:
    if node.fused is None:
        return node.name
    return ",".join(node.fused) if node.fused else DEVICE_ONLY
