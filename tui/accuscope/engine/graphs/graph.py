"""One model-graph type for ONNX models, Ascend offline models (atc JSON) and Caffe prototxts.

The comparison views need the same questions answered whatever the model source: which op
produced a tensor, who consumes it, in which order ops run, what a device op was fused from.
Loaders (`onnxgraph`, `omgraph`, `caffegraph`, ...; each declared on its format's entry in sides.registry,
which picks one by the format it detects) turn their format into `Node`s; `Graph` builds the tensor lookups once.
Tensor ids are plain strings; a weight has no producer.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accuscope.engine.graphs.capabilities import NOT_DECLARED, ModelCapabilities
from accuscope.engine.sources.tensor import SourceError

Shape = tuple  # dims are ints, None where unknown (symbolic or dynamic)


@dataclass(eq=False)
class Node:
    """One operator. Per-output lists are padded to `len(outputs)`, `input_shapes` to `len(inputs)`.

    Compared by identity so nodes can be dict keys and set members.
    """

    name: str
    type: str
    index: int
    seq_id: int
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    output_shapes: list[Shape | None] = field(default_factory=list)
    output_dtypes: list[str | None] = field(default_factory=list)
    input_shapes: list[Shape | None] = field(default_factory=list)
    input_dtypes: list[str | None] = field(default_factory=list)
    fused: list[str] | None = None
    origins: list[tuple[str, int] | None] = field(default_factory=list)
    subgraph: str = ""

    def __post_init__(self) -> None:
        for name, count in (("output_shapes", len(self.outputs)), ("output_dtypes", len(self.outputs)),
                            ("origins", len(self.outputs)), ("input_shapes", len(self.inputs)),
                            ("input_dtypes", len(self.inputs))):
            values = getattr(self, name)
            values.extend([None] * (count - len(values)))


@dataclass(eq=False)
class Graph:
    """A model's operators in execution order plus tensor lookups built once at construction.

    `notes` says what the loader could not do (e.g. shape inference failed), for the user to see;
    `label` what the graph is a view of, said beside its name (a merged TP/PP run: `merged TP=2 x PP=2`).
    `kind` is a model kind from `sources.kinds`; `caps` what its format declares it is (set by
    sides.registry as it loads the graph). What a graph is to the comparison, the views and the exports
    is asked of the properties below (`is_device`, `converted`, `cuttable`, `runnable`), which read
    `caps`, never the kind's name.
    """

    name: str
    kind: str
    path: str
    nodes: list[Node]
    inputs: list[str]
    outputs: list[str]
    weights: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    label: str = ""
    caps: ModelCapabilities = NOT_DECLARED
    _by_name: dict[str, Node] = field(init=False, repr=False)
    _producer: dict[str, tuple[Node, int]] = field(init=False, repr=False)
    _consumers: dict[str, list[tuple[Node, int]]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name, self._producer, self._consumers = {}, {}, {}
        for node in self.nodes:
            self._by_name.setdefault(node.name, node)
            for j, tensor in enumerate(node.outputs):
                self._producer.setdefault(tensor, (node, j))
            for i, tensor in enumerate(node.inputs):
                self._consumers.setdefault(tensor, []).append((node, i))

    @property
    def is_device(self) -> bool:
        """An Ascend device graph (atc's offline-model JSON, a GE graph dump): its ops are fused from a
        framework model's (`Node.fused`, `origins`), so names a user knows and an export come from that
        framework graph; its op ids are the dump's sequence, and it describes an Ascend dump."""
        return self.caps.device_graph

    @property
    def converted(self) -> bool:
        """A converted model, the candidate (NPU) side's: a device graph, tpu-mlir's .mlir, an OpenVINO IR or a
        .tflite. Any other model is a framework model and names the reference (golden) side's tensors."""
        return self.caps.converted

    @property
    def cuttable(self) -> bool:
        """A framework graph an export can cut into a submodel (ONNX, Caffe)."""
        return self.caps.cuttable

    @property
    def runnable(self) -> bool:
        """An ONNX graph: its submodels run here (onnxruntime), its nodes carry Model Explorer's data."""
        return self.caps.runnable

    def node(self, name: str) -> Node | None:
        return self._by_name.get(name)

    def producer(self, tensor: str) -> tuple[Node, int] | None:
        """(node, output index); None for network inputs, weights and unknown tensors."""
        return self._producer.get(tensor)

    def consumers(self, tensor: str) -> list[tuple[Node, int]]:
        """(node, input position) in execution order."""
        return list(self._consumers.get(tensor, ()))

    @property
    def output_nodes(self) -> list[Node]:
        """Nodes producing a network output, in the order of `outputs`, each once."""
        found: dict[int, Node] = {}
        for tensor in self.outputs:
            hit = self._producer.get(tensor)
            if hit:
                found.setdefault(id(hit[0]), hit[0])
        return list(found.values())


def read_text(p: Path) -> str:
    """The file's text, or SourceError saying why it cannot be read."""
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SourceError(f"{p}: not a text file (byte {e.start} is not UTF-8)") from e
    except OSError as e:
        raise SourceError(f"{p}: cannot read ({e.strerror or e})") from e


def unique_names(names: Iterable[str | None], fallbacks: Iterable[str]) -> list[str]:
    """Give every node a non-empty name no other node has.

    Given names are kept first (the first holder of a duplicate keeps it); a missing name
    becomes its fallback, and a clash gets `_1`, `_2`, ... appended.
    """
    names, fallbacks = list(names), list(fallbacks)
    taken = {n for n in names if n}
    result, seen = [], set()
    for name, fallback in zip(names, fallbacks):
        base = name if name and name not in seen else (name or fallback)
        candidate, k = base, 0
        while candidate in seen or (candidate != name and candidate in taken):
            k += 1
            candidate = f"{base}_{k}"
        seen.add(candidate)
        result.append(candidate)
    return result


def stable_topo_order(nodes: list[Node], available: set[str],
                      needs: Callable[[Node], Iterable[str]] = lambda n: n.inputs) -> tuple[list[Node], bool]:
    """Order nodes so every tensor a node `needs` is produced before it, keeping list order among ties.

    Tensors produced by no node count as available. Returns (ordered, was_already_ordered);
    nodes stuck in a cycle are appended in list order rather than lost.
    """
    produced_by: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for t in node.outputs:
            produced_by.setdefault(t, i)
    deps = [{produced_by[t] for t in needs(node) if t not in available and t in produced_by} - {i}
            for i, node in enumerate(nodes)]
    if all(d < i for i, ds in enumerate(deps) for d in ds):
        return list(nodes), True
    waiting = [len(ds) for ds in deps]
    users: list[list[int]] = [[] for _ in nodes]
    for i, ds in enumerate(deps):
        for d in ds:
            users[d].append(i)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    placed = set(order)
    order += [i for i in range(len(nodes)) if i not in placed]
    return [nodes[i] for i in order], False


def fill_input_shapes(nodes: list[Node], known: dict[str, Shape | None],
                      known_dtypes: dict[str, str | None] | None = None) -> None:
    """Fill unknown input shapes and dtypes from the producing node's output or from `known`
    (network inputs, weights)."""
    shapes, dtypes = dict(known), dict(known_dtypes or {})
    for node in nodes:
        for tensor, shape, dtype in zip(node.outputs, node.output_shapes, node.output_dtypes):
            if shape is not None:
                shapes.setdefault(tensor, shape)
            if dtype is not None:
                dtypes.setdefault(tensor, dtype)
    for node in nodes:
        node.input_shapes = [s if s is not None else shapes.get(t) for t, s in zip(node.inputs, node.input_shapes)]
        node.input_dtypes = [d if d is not None else dtypes.get(t) for t, d in zip(node.inputs, node.input_dtypes)]


_DTYPES = {
    "FLOAT": "float32", "FLOAT32": "float32", "FLOAT16": "float16", "DOUBLE": "float64", "FLOAT64": "float64",
    "BF16": "bfloat16", "BFLOAT16": "bfloat16", "INT8": "int8", "UINT8": "uint8", "INT16": "int16",
    "UINT16": "uint16", "INT32": "int32", "UINT32": "uint32", "INT64": "int64", "UINT64": "uint64",
    "BOOL": "bool", "STRING": "str", "COMPLEX64": "complex64", "COMPLEX128": "complex128",
}


def dtype_name(name: str | None) -> str | None:
    """Numpy-style dtype name from ONNX ("FLOAT16") or Ascend ("DT_FLOAT16") spellings; unknown ones lowercased."""
    if not name:
        return None
    key = name.upper().removeprefix("DT_")
    if key in ("UNDEFINED", "DT_UNDEFINED"):
        return None
    return _DTYPES.get(key, key.lower())


def tensor_summary(dtype: str | None, shape: Iterable[Any] | None) -> str:
    """How a tensor-valued attribute is shown: its type and shape, never its data."""
    dims = "?" if shape is None else ",".join("?" if d is None else str(d) for d in shape)
    return f"<tensor {dtype or '?'}[{dims}]>"
