"""Pair every NPU-side tensor with its golden tensor, or say why there is none.

Rules, strongest first, each recorded on the pair (`how`):
1. `fusion`: the NPU side's offline model says which framework ops a device op was fused from
   (`_datadump_origin_*`; inputs traced back through layout-only ops);
2. `original_op`: the Ascend dump header names the framework op;
3. `tensor`: the graph tensor name, from the tensor itself (npz key, Polygraphy output) or from the
   side's own graph (an ONNX value name survives conversions that rename every node: quantizers
   rename Conv/MatMul nodes but keep their output tensor names);
4. `name`: identical op names (raw, or as file names spell them), through the framework graph's
   tensor names where one is given (an OpenVINO IR's BatchNormalization folded into its convolution is
   folds.py's, before these: the convolution's output against the reference's made into what it computes);
5. `mapping`: the user's mapping file, for renames no rule can know.
Two msprobe dumps of different implementations (MindSpore against PyTorch, renamed layers) take
crossmap.py's rules first where given (msprobe's mapping files, the API table, `--match structure`).
There is no fuzzy or positional fallback unless asked for (`--match structure`, every pair marked
with its confidence): a tensor without a proven counterpart stays unpaired,
with the reason.
"""
# lazy: engine.compare.crossmap, engine.compare.folds, engine.graphs.onnxgraph, engine.sides.registry,
# lazy: engine.sources.msprobe, engine.sources.tpumlir
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from accuscope.engine.compare import gcpause
from accuscope.engine.compare.pair import DEVICE_ONLY, Pair
from accuscope.engine.graphs.optypes import (
    CONVERTER_OWN,
    CONVERTER_TYPES,
    INPUT_TYPES,
    QLINEAR,
    QUANTIZED_SUFFIX,
    walk_back,
)
from accuscope.engine.sides.side import Side
from accuscope.engine.sources import kinds
from accuscope.engine.sources.golden import GoldenDump
from accuscope.engine.sources.names import parse_tensor_name
from accuscope.engine.sources.oprecord import OpRecord
from accuscope.engine.sources.tensor import INPUT, OUTPUT, SourceError, Tensor

if TYPE_CHECKING:  # crossmap is imported where its rules apply (msprobe dumps, mapping files), not for every pair;
    # graphs.graph with a model, the Ascend reader (npudump) with an Ascend dump
    from accuscope.engine.compare.crossmap import CrossPairs
    from accuscope.engine.graphs.graph import Graph, Node
    from accuscope.engine.sources.npudump import NpuDump

FEW = 0.5  # a comparison using less than this share of the reference (golden) tensors is suspect


@dataclass
class Mapping:
    pairs: list[Pair] = field(default_factory=list)
    unmatched_golden: list[Tensor] = field(default_factory=list)
    # a golden tensor made from another (an OpenVINO IR's folded BatchNormalization: folds.py), by id -> that one's
    made_from: dict[int, int] = field(default_factory=dict)

    def used(self, pairs: list[Pair]) -> set[int]:
        """The golden tensors (by id) `pairs` compare against, and those their golden tensors were made from."""
        ids = {id(p.golden) for p in pairs if p.golden is not None}
        return ids | {self.made_from[i] for i in ids if i in self.made_from} if self.made_from else ids

    @property
    def matched(self) -> list[Pair]:
        return [p for p in self.pairs if p.golden is not None]

    @property
    def unmatched_npu(self) -> list[Pair]:
        return [p for p in self.pairs if p.golden is None]


def as_side(source: Side | NpuDump | GoldenDump) -> Side:
    if isinstance(source, Side):
        return source
    from accuscope.engine.sides.registry import capabilities
    kind = source.kind if isinstance(source, GoldenDump) else kinds.ASCEND
    return Side(source, kind, capabilities(kind))


@gcpause.paused
def map_tensors(npu: Side | NpuDump, golden: Side | GoldenDump, graph: Graph | None = None, *,
                npu_graph: Graph | None = None, golden_graph: Graph | None = None,
                user_map: dict[str, str] | None = None, cross: CrossPairs | None = None) -> Mapping:
    """Pair the tensors of two sides. `graph` is the one model of the older interface: an offline
    model belongs to the NPU side, any other model to the golden (framework) side. Each side's
    own graph (`Side.graph`) is used where no graph is given for it. `cross`: what crossmap's rules
    decided for two msprobe sides of different implementations (taken before any rule here)."""
    npu, golden = as_side(npu), as_side(golden)
    if graph is not None:
        if graph.is_device:
            npu_graph = npu_graph or graph
        else:
            golden_graph = golden_graph or graph
    mapper = _Mapper(golden, npu_graph or npu.graph, golden_graph or golden.graph, user_map or {}, cross)
    mapping = Mapping([p for df in npu.ops for p in mapper.pairs_of(df)])
    if npu.kind == golden.kind and npu.caps.pairs_calls:
        mapping.pairs = _equal_counts(mapping.pairs, golden)
    if mapper.folds is not None:
        mapping.made_from = mapper.folds.made_from
    used = mapping.used(mapping.pairs)
    mapping.pairs = _converter_own(mapping.pairs, golden, used, npu_graph or npu.graph, golden_graph or golden.graph)
    mapping.unmatched_golden = [t for t in golden.tensors if id(t) not in used]
    return mapping


def _equal_counts(pairs: list[Pair], golden: Side) -> list[Pair]:
    """msprobe's rule: a call pairs with its counterpart only when both hold as many input tensors
    and as many output tensors; otherwise each tensor of the call is a row saying so, unpaired."""
    from accuscope.engine.compare.crossmap import RULES as CROSS_RULES  # msprobe dumps only
    from accuscope.engine.sources import msprobe
    counterpart = {p.npu.op: p.golden.op for p in pairs if p.golden is not None and p.how not in CROSS_RULES}
    if not counterpart:
        return pairs
    wanted = set(counterpart.values())  # only the calls paired here are counted (crossmap's are most)
    theirs = msprobe.counts(t for t in golden.tensors if t.op in wanted)
    ours = msprobe.counts(p.npu for p in pairs if p.npu.op in counterpart)

    def count(table: dict, op: str) -> tuple[int, int]:
        return table.get((op, INPUT), 0), table.get((op, OUTPUT), 0)

    differ = {op: other for op, other in counterpart.items() if count(ours, op) != count(theirs, other)}
    if not differ:
        return pairs
    out = []
    for p in pairs:
        other = differ.get(p.npu.op)
        if other is not None and p.how not in CROSS_RULES:  # crossmap's rules said which slots pair
            (n_in, n_out), (m_in, m_out) = count(ours, p.npu.op), count(theirs, other)
            p = Pair(p.npu, None, p.op, p.ground_truth, "", (
                f"{p.npu.op} has {n_in} input and {n_out} output tensors, golden {other} {m_in} and {m_out}: "
                "msprobe pairs a call only when the counts match (a changed signature, another framework version)"))
        out.append(p)
    return out


def _converter_own(pairs: list[Pair], golden: Side, used: set[int], npu_graph: Graph | None,
                   golden_graph: Graph | None) -> list[Pair]:
    """Unpaired NPU tensors that are the converter's own (device-only, never unpaired), where no
    reference graph could tell (`_Mapper._not_in_reference` does when there is one): a tensor whose
    value name the reference run does not hold, when that run names every tensor by its value and most
    of them were paired (Polygraphy's `--onnx-outputs mark all` on both sides: the candidate holds the
    reference's tensors, and the quantize/dequantize/cast outputs its converter added), or when the
    candidate's own model says a converter's op made it (a quantize, dequantize or cast node)."""
    if golden.caps.pairs_calls:  # a framework run's calls (two runs of one training program): no converter inserted anything
        return pairs
    named = bool(golden.tensors) and all(t.tensor_name for t in golden.tensors)
    complete = named and golden_graph is None and len(used) >= FEW * len(golden.tensors)
    values = {t.tensor_name for t in golden.tensors} if named else set()
    if not complete and npu_graph is None:
        return pairs
    out = []
    for p in pairs:
        value = p.npu.tensor_name
        if p.golden is None and p.ground_truth != DEVICE_ONLY and value and value not in values:
            found = npu_graph.producer(value) if npu_graph is not None and not npu_graph.is_device else None
            if found is not None and found[0].type in CONVERTER_TYPES:
                p = Pair(p.npu, None, p.op, DEVICE_ONLY, "", f"inserted by the conversion: {value} is the output "
                                                            f"of a {found[0].type} node of the candidate's model")
            elif complete:
                p = Pair(p.npu, None, p.op, DEVICE_ONLY, "", f"only in the candidate: {value} is not in the reference "
                                                            "run, whose tensors were paired (a tensor the conversion "
                                                            "added; or one the reference run did not record)")
        out.append(p)
    return out


def read_mapping_file(path: str) -> dict[str, str]:
    """A user's mapping: `npu_name,golden_name` per line (CSV) or `npu_name: golden_name` (YAML).
    Names are op names (every tensor of the op, index for index) or tensor names `op:output:0`.
    msprobe's mapping files (layer, API, cell, data) are crossmap.load's: a SourceError here."""
    from accuscope.engine.compare import crossmap
    found = crossmap.load(path)
    if found.kind != crossmap.ACCUSCOPE:
        raise SourceError(f"{path}: {found.what}: they pair two msprobe dumps (compare them with it as --mapping)")
    return found.names


class _Mapper:
    def __init__(self, golden: Side, npu_graph: Graph | None, golden_graph: Graph | None, user_map: dict[str, str],
                 cross: CrossPairs | None = None):
        self.golden = golden
        self.cross = cross.by_tensor if cross is not None else {}
        self.graph = golden_graph  # the framework graph: golden tensor names of golden ops
        self.om = npu_graph if npu_graph is not None and npu_graph.is_device else None
        self.npu_graph = npu_graph if self.om is None else None  # e.g. the candidate ONNX model
        self.user_map = user_map
        self.folds = None  # an OpenVINO IR against its ONNX reference: the BatchNormalizations it folded (folds.py)
        if self.npu_graph is not None and self.npu_graph.kind == kinds.OPENVINO_IR and golden_graph is not None \
                and golden_graph.kind in (kinds.ONNX, kinds.OPENVINO_IR):
            from accuscope.engine.compare.folds import BatchNormFolds
            self.folds = BatchNormFolds(self.npu_graph, golden_graph, golden)
        self._initializers: dict | None = None  # the NPU model's, read once a QLinear output needs them
        # NPU against NPU: the golden side is a device dump too; its offline model says which
        # framework op each of its device outputs stands for, the names both sides record
        self.golden_origin: dict[tuple[str, int], tuple[str, int]] = {}
        if golden_graph is not None and golden_graph.is_device and golden.is_device_dump:
            for node in golden_graph.nodes:
                for j in range(len(node.outputs)):
                    origin = self._origin(node, j)
                    if origin is not None:
                        self.golden_origin.setdefault(origin, (node.name, j))

    def pairs_of(self, df: OpRecord) -> list[Pair]:
        node = self._om_node(df)
        if node is not None:
            return self._by_fusion(df, node)
        if self.cross:  # crossmap's pairs as it made them, the rest by the rules here
            cross = self.cross
            return [cross.get(id(t)) or self._pair(df, t) for t in df.inputs + df.outputs]
        return [self._pair(df, t) for t in df.tensors]

    def _om_node(self, df: OpRecord) -> Node | None:
        if self.om is None:
            return None
        return self.om.node(df.op_name) or (self.om.node(df.name.op_name) if df.name else None)

    # ---------------------------------------------------------- fusion attributes

    def _by_fusion(self, df: OpRecord, node: Node) -> list[Pair]:
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
        if node.fused is None or node.type in INPUT_TYPES:
            return (node.name, j)  # the op kept its framework name
        if len(node.fused) == 1:
            return (node.fused[0], j)
        return None

    def _input_origin(self, node: Node, i: int) -> tuple[tuple[str, int] | None, str]:
        """Trace input i back through layout-only ops (those without a golden tensor of their own)."""
        om = self.om  # set: node is one of its nodes
        if i >= len(node.inputs) or om is None:
            return None, f"input {i} of {node.name} is not in the model graph"
        for tensor, found in walk_back(om, node.inputs[i]):
            if tensor in om.weights:
                return None, f"input {i} of {node.name} is a weight ({tensor.split(':')[0]}): no golden dump of weights"
            if found is None:
                return None, f"input {i} of {node.name}: producer of {tensor} not in the model graph"
            producer, j = found
            origin = self._origin(producer, j)
            if origin is not None and self._golden_output(*origin) is not None:
                break  # a framework Cast with its own golden tensor: compare against it
        origin = self._origin(producer, j)
        if origin is None:
            return None, f"input {i} of {node.name}: producer {producer.name} has no framework counterpart"
        return origin, ""

    # ---------------------------------------------------------- header and names

    def _pair(self, df: OpRecord, t: Tensor) -> Pair:
        if df.op_type in CONVERTER_OWN and self.golden.find(df.op_name, t.io, t.index) is None:
            return Pair(t, None, df, DEVICE_ONLY, "", f"inserted by the conversion: {df.op_type} {df.op_name} "
                                                      "stands for no framework op")
        folded = self.folds.pair(df, t) if self.folds is not None else None
        if folded is not None:
            return folded
        if t.original_op is not None:
            g = self._golden_output(*t.original_op)
            if g is not None:
                return Pair(t, g, df, t.original_op[0], "original_op")
        value = self._value_name(df, t)
        if value:  # (most tensors of a folder of npy files have none)
            if value.endswith(QUANTIZED_SUFFIX) and t.io == OUTPUT:  # a QLinear op's output, on its int8 grid
                g = self.golden.find_tensor(value[:-len(QUANTIZED_SUFFIX)])
                dequantized = self._dequantized(df, t) if g is not None else None
                if dequantized is not None and g is not None:
                    return Pair(dequantized, g, df, g.op, "tensor")
            g = self.golden.find_tensor(value) or self._golden_of_value(value)
            if g is not None:
                return Pair(t, g, df, g.op, "tensor")
        if t.io == OUTPUT:
            g = self._golden_output(df.op_name, t.index)
        else:
            g = self.golden.find(df.op_name, INPUT, t.index) or self._golden_of_graph_input(df.op_name, t.index)
            if g is None:
                g = self._through_converter(df.op_name, t.index)
                if g is not None:  # the producer's output, named by the candidate's own model
                    return Pair(t, g, df, g.op, "tensor")
        if g is not None:
            return Pair(t, g, df, df.op_name, "name")
        g = self._by_user_map(df, t)
        if g is not None:
            return Pair(t, g, df, g.op, "mapping")
        if value and self._not_in_reference(df.op_name, value):
            return Pair(t, None, df, DEVICE_ONLY, "", f"inserted by the conversion: neither op {df.op_name} nor "
                                                      f"tensor {value} is in the reference model")
        hint = f" or {t.original_op[0]}:output:{t.original_op[1]} (original_op)" if t.original_op else ""
        hint += f" or tensor {value}" if value and value != df.op_name else ""
        return Pair(t, None, df, df.op_name, "", f"no golden tensor named {df.op_name}:{t.io}:{t.index}{hint}")

    def _dequantized(self, df: OpRecord, t: Tensor) -> Tensor | None:
        """Output `t` of a QLinear op (graphs.optypes.QLINEAR) or QuantizeLinear of the NPU side's own ONNX
        model, named `{tensor}_quantized` as onnxruntime's QOperator format names them, read as
        the float tensor it stands for: (q - zero point) * scale, with the op's own output scale and zero
        point (initializers of that model); None where they are not at hand."""
        graph = self.npu_graph
        node = graph.node(df.op_name) if graph is not None else None
        if node is None or graph is None or node.type not in QLINEAR and node.type != "QuantizeLinear" or t.index:
            return None
        at = QLINEAR[node.type][2] if node.type in QLINEAR else 1  # QuantizeLinear(x, scale, zero point)
        if len(node.inputs) <= at + 1:
            return None
        if self._initializers is None:
            from accuscope.engine.graphs.onnxgraph import small_initializers
            self._initializers = small_initializers(graph.path)
        scale, zero = (self._initializers.get(node.inputs[k]) for k in (at, at + 1))
        if scale is None or zero is None or scale.size != 1 or zero.size != 1:
            return None
        s, z, load = float(scale.reshape(-1)[0]), float(zero.reshape(-1)[0]), t.load
        return replace(t, dtype=np.dtype(np.float32), payload=None, dtype_name="float32",
                       conversion=f"dequantized: (q - {z:g}) * {s:.6g}, {node.type}'s own output scale",
                       reader=lambda: ((load().astype(np.float64) - z) * s).astype(np.float32))

    def _value_name(self, df: OpRecord, t: Tensor) -> str:
        """The graph tensor name of an NPU-side tensor: recorded by its reader, or from its own graph."""
        if t.tensor_name:
            return t.tensor_name
        node = self.npu_graph.node(df.op_name) if self.npu_graph is not None else None
        if node is None:
            return ""
        names = node.outputs if t.io == OUTPUT else node.inputs
        return names[t.index] if t.index < len(names) else ""

    def _not_in_reference(self, op: str, value: str) -> bool:
        """The candidate's own op and tensor, both unknown to the reference graph: a converter's
        addition (a quantize/dequantize pair, an inserted Cast), the counterpart of a device-only op."""
        g = self.graph
        if g is None or g.node(op) is not None:
            return False
        return g.producer(value) is None and value not in g.inputs and value not in g.weights

    def _golden_of_value(self, value: str) -> Tensor | None:
        """A tensor name through the framework graph given with --model (the golden side has none)."""
        if self.graph is None or self.graph is self.golden.graph:
            return None
        hit = self.graph.producer(value)
        return self.golden.find(hit[0].name, OUTPUT, hit[1]) if hit else None

    def _by_user_map(self, df: OpRecord, t: Tensor) -> Tensor | None:
        """The user's line for this tensor (`op:io:k`) or for its op (then index for index); the
        golden name is a tensor name `op:io:k`, an op name, or a graph tensor name."""
        if not self.user_map:
            return None
        target = self.user_map.get(t.name)
        whole_op = target is None
        if target is None:
            target = self.user_map.get(df.op_name)
            if target is None:
                return None
        named = parse_tensor_name(target)
        if named:
            return self.golden.find(*named)
        return self.golden.find(target, t.io, t.index) or (self.golden.find_tensor(target) if not whole_op or
                                                            t.io == OUTPUT and t.index == 0 else None)

    def _golden_output(self, op: str, j: int) -> Tensor | None:
        g = self.golden.find(op, OUTPUT, j)
        if g is None and (op, j) in self.golden_origin:
            g = self.golden.find(*self.golden_origin[(op, j)][:1], OUTPUT, self.golden_origin[(op, j)][1])
        if g is None and self.graph is not None:
            node = self.graph.node(op)
            if node is not None and j < len(node.outputs):
                g = self.golden.find_tensor(node.outputs[j])
        if g is None:
            g = self.golden.find_tensor(op) if j == 0 else None
        return g

    def _through_converter(self, op: str, i: int) -> Tensor | None:
        """Input i of an op of the NPU side's own model, traced back through the converter's own ops
        (tpu-mlir lowering's casts) to the op whose output it is, and that output's golden tensor."""
        graph = self.npu_graph
        node = graph.node(op) if graph is not None else None
        if node is None or graph is None or i >= len(node.inputs):
            return None
        steps = list(walk_back(graph, node.inputs[i]))
        found = steps[-1][1]
        if found is None or found[0].type in CONVERTER_OWN:
            return None
        producer, j = found
        name = producer.outputs[j]
        from accuscope.engine.sources.tpumlir import normalize  # tpu-mlir's reader: only where this runs
        return self._golden_output(producer.name, j) or self.golden.find_tensor(name) \
            or self.golden.find_tensor(normalize(name))

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
