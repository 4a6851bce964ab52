"""ONNX model -> Graph.

onnx is an optional extra, so it is imported only when an ONNX file is opened. External weight
files are never read: the graph, names and shapes are all in the model proto, so a model whose
data files are missing or huge still opens quickly. Constant nodes are weights, not operators:
nothing executes them and dumps have nothing to compare.
"""
from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accuscope.engine.graphs.graph import (
    Graph,
    Node,
    dtype_name,
    fill_input_shapes,
    stable_topo_order,
    tensor_summary,
    unique_names,
)
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError

_SMALL_TENSOR = 8  # tensor attributes with at most this many values show them (e.g. ConstantOfShape value)


def need(module: str, purpose: str, extra: str = "onnx"):
    """A module of an optional extra (onnx, onnxruntime: `onnx`; openpyxl: `xlsx`), else a SourceError
    saying how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise SourceError(f"{purpose} needs {module} (pip install 'accuscope[{extra}]'): {exc}") from None


def load_onnx(path: str | Path) -> Graph:
    onnx = need("onnx", "reading ONNX models")
    p = Path(path)
    try:
        model = onnx.load(str(p), load_external_data=False)
    except FileNotFoundError as e:
        raise SourceError(f"{p}: no such file") from e
    except Exception as e:  # protobuf DecodeError and friends: the bytes are not an ONNX model
        raise SourceError(f"{p}: not an ONNX model ({type(e).__name__}: {e})") from e
    if not model.HasField("graph") or not (model.graph.node or model.graph.output):
        raise SourceError(f"{p}: not an ONNX model (no graph in the file)")
    notes: list[str] = []
    types = _tensor_types(onnx, model, notes)
    g = model.graph

    weights = {_s(t.name) for t in g.initializer} | {_s(t.values.name) for t in g.sparse_initializer}
    kept = []
    for position, n in enumerate(g.node):
        if n.op_type == "Constant" and not n.domain:
            weights.update(_s(o) for o in n.output if o)
        else:
            kept.append((position, n))
    names = unique_names((_s(n.name) for _, n in kept), (f"{_s(n.op_type)}_{pos}" for pos, n in kept))
    nodes = [_node(onnx, n, name, types) for (_, n), name in zip(kept, names)]

    inputs = [_s(v.name) for v in g.input if _s(v.name) not in weights]
    nodes, ordered = stable_topo_order(nodes, weights | set(inputs),
                                       lambda n: n.inputs + n.attrs.get("_subgraph_inputs", []))
    if not ordered:
        notes.append("nodes were not in topological order in the file; reordered")
    for i, node in enumerate(nodes):
        node.index, node.seq_id = i, i + 1
    fill_input_shapes(nodes, {t: s for t, (s, _) in types.items()}, {t: d for t, (_, d) in types.items()})
    return Graph(name=_s(g.name) or p.stem, kind=kinds.ONNX, path=str(p), nodes=nodes, inputs=inputs,
                 outputs=[_s(v.name) for v in g.output], weights=weights, notes=notes)


SMALL = 16  # elements: an initializer this small is a scale, a zero point, a shape (small_initializers)


def small_initializers(path: str | Path) -> dict[str, Any]:
    """The model's initializers of at most SMALL elements (quantization scales and zero points) as numpy
    arrays, by name; {} where the model cannot be read."""
    return _initializers(path, lambda t: math.prod(t.dims) <= SMALL, "reading a model's quantization scales")


def named_initializers(path: str | Path, names: set[str]) -> dict[str, Any]:
    """The model's initializers named in `names` (held in the file, not as external data), and the outputs of its
    Constant nodes (`value`; paddle2onnx writes every weight so), as numpy arrays by name; {} where the model
    cannot be read."""
    return _initializers(path, lambda t: t.name in names, "reading a model's initializers", constants=names)


def _initializers(path: str | Path, keep: Callable[[Any], bool], purpose: str,
                  constants: set[str] | None = None) -> dict[str, Any]:
    onnx = need("onnx", purpose)
    from onnx import numpy_helper
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - protobuf raises several kinds on garbage
        return {}
    found = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if not t.data_location and keep(t)}
    for node in model.graph.node if constants else ():
        if node.op_type == "Constant" and len(node.output) == 1 and node.output[0] in (constants or ()):
            value = next((a.t for a in node.attribute if a.name == "value" and a.HasField("t")), None)
            if value is not None and not value.data_location:
                found[node.output[0]] = numpy_helper.to_array(value)
    return found


def _elem_type(onnx, code: int) -> str | None:
    """Numpy-style name of an ONNX element type; None for a code this onnx does not know."""
    try:
        return dtype_name(onnx.TensorProto.DataType.Name(code))
    except ValueError:
        return None


def _s(text: str | bytes) -> str:
    """A string field as text: protobuf hands over invalid UTF-8 as bytes, shown with U+FFFD."""
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else text


def _node(onnx, n, name: str, types: dict) -> Node:
    outputs = [_s(o) for o in n.output if o]
    attrs = {_s(a.name): _attr(onnx, a) for a in n.attribute}
    bodies = _bodies(n)
    if n.domain and n.domain != "ai.onnx":
        attrs["_domain"] = _s(n.domain)
    if bodies:
        attrs["_subgraph_outputs"] = [t for b in bodies for t in _produced_inside(b)]
        attrs["_subgraph_inputs"] = list(dict.fromkeys(t for b in bodies for t in _outer_refs(b)))
    return Node(name=name, type=_s(n.op_type), index=0, seq_id=0, inputs=[_s(i) for i in n.input if i], outputs=outputs,
                attrs=attrs, output_shapes=[types.get(o, (None, None))[0] for o in outputs],
                output_dtypes=[types.get(o, (None, None))[1] for o in outputs])


def _bodies(n) -> list:
    """The graphs held in a node's attributes (If branches, Loop and Scan bodies)."""
    return [b for a in n.attribute for b in ([a.g] if a.HasField("g") else []) + list(a.graphs)]


def _produced_inside(body) -> list[str]:
    """Tensors made inside a control-flow body (and its nested bodies): a runtime cannot fetch them."""
    found = []
    for n in body.node:
        found += [_s(o) for o in n.output if o]
        for b in _bodies(n):
            found += _produced_inside(b)
    return found


def _outer_refs(body) -> list[str]:
    """Tensors a body reads from the enclosing graph: hidden inputs that decide execution order."""
    local = {_s(v.name) for v in body.input} | {_s(t.name) for t in body.initializer}
    refs = []
    for n in body.node:
        refs += [_s(i) for i in n.input if i and _s(i) not in local]
        for b in _bodies(n):
            refs += [t for t in _outer_refs(b) if t not in local]
        local.update(_s(o) for o in n.output)
    refs += [_s(v.name) for v in body.output if _s(v.name) not in local]
    return refs


def _attr(onnx, a) -> Any:
    """Plain Python value of an attribute; tensors and graphs summarized, never copied."""
    A = onnx.AttributeProto
    if a.type == A.TENSOR:
        return _tensor_attr(onnx, a.t)
    if a.type == A.TENSORS:
        return [_tensor_attr(onnx, t) for t in a.tensors]
    if a.type == A.GRAPH:
        return f"<graph {_s(a.g.name)}: {len(a.g.node)} nodes>"
    if a.type == A.GRAPHS:
        return [f"<graph {_s(b.name)}: {len(b.node)} nodes>" for b in a.graphs]
    if a.type in (A.SPARSE_TENSOR, A.SPARSE_TENSORS, A.TYPE_PROTO, A.TYPE_PROTOS):
        return f"<{A.AttributeType.Name(a.type).lower()}>"
    value = onnx.helper.get_attribute_value(a)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
    return value


def _tensor_attr(onnx, t) -> Any:
    dtype = _elem_type(onnx, t.data_type) if t.data_type else None
    size = 1
    for d in t.dims:
        size *= d
    if size <= _SMALL_TENSOR and t.data_location != onnx.TensorProto.EXTERNAL:
        try:
            return onnx.numpy_helper.to_array(t).tolist()
        except Exception:  # an odd dtype: fall back to the summary  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
            pass
    return tensor_summary(dtype, list(t.dims))


def _tensor_types(onnx, model, notes: list[str]) -> dict[str, tuple[tuple | None, str | None]]:
    """tensor name -> (shape, dtype) from shape inference, or from what the file declares if it fails."""
    g = model.graph
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
        infos = [*inferred.input, *inferred.value_info, *inferred.output]
    except Exception as e:  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
        notes.append(f"shape inference failed ({type(e).__name__}: {e}); shapes only where the file declares them")
        infos = []
    infos += [*g.input, *g.value_info, *g.output]
    types: dict[str, tuple[tuple | None, str | None]] = {}
    for t in g.initializer:
        types[_s(t.name)] = (tuple(t.dims), _elem_type(onnx, t.data_type))
    for n in g.node:
        if n.op_type == "Constant" and n.output and n.attribute and n.attribute[0].type == onnx.AttributeProto.TENSOR:
            t = n.attribute[0].t
            types.setdefault(_s(n.output[0]), (tuple(t.dims), _elem_type(onnx, t.data_type)))
    for v in infos:
        if _s(v.name) not in types and v.type.HasField("tensor_type"):
            types[_s(v.name)] = _value_type(onnx, v.type.tensor_type)
    return types


def _value_type(onnx, tt) -> tuple[tuple | None, str | None]:
    dtype = _elem_type(onnx, tt.elem_type) if tt.elem_type else None
    if not tt.HasField("shape"):
        return None, dtype
    # exporters write -1 for "dynamic" although the spec says dim_param: both mean unknown
    return tuple(d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None for d in tt.shape.dim), dtype
