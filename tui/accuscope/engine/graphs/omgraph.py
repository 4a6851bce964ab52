"""Ascend offline model, as JSON from `atc --mode=1` -> Graph (formats.md section 2).

The JSON is protobuf rendered by the toolkit and its details drift between versions, so the
reader is lenient: attributes may be missing or given as a list of key/value pairs or a dict,
int64 values may come as strings. Ops of every graph count (subgraphs run too); Const ops are
weights, as in ONNX, since they are never executed or dumped.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from accuscope.engine.graphs.graph import (
    Graph,
    Node,
    dtype_name,
    fill_input_shapes,
    read_text,
    tensor_summary,
    unique_names,
)
from accuscope.engine.graphs.optypes import INPUT_TYPES
from accuscope.engine.sources import kinds
from accuscope.engine.sources.ascend import DTYPE_NAMES
from accuscope.engine.sources.tensor import SourceError

CONST_TYPES = {"Const", "Constant"}
OUT_NODES = "attr_model_out_nodes_name"
MAX_OUTPUTS = 1 << 16  # an input naming output 10**12 of an op is damage: it adds no output slots


def load_om_json(path: str | Path) -> Graph:
    p = Path(path)
    try:
        doc = json.loads(read_text(p))
    except json.JSONDecodeError as e:
        raise SourceError(f"{p}: not valid JSON (line {e.lineno}: {e.msg})") from e
    except ValueError as e:  # an integer of thousands of digits
        raise SourceError(f"{p}: not usable JSON ({e})") from e
    except RecursionError:
        raise SourceError(f"{p}: not usable JSON (nested too deeply)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("graph"), list) or not doc["graph"]:
        raise SourceError(f"{p}: not an offline-model JSON (no \"graph\" list; expected the output of atc --mode=1)")
    return model_graph(doc, p)


def model_graph(doc: dict, p: Path) -> Graph:
    """A Graph from a GE `ModelDef` as plain data (graph[] -> op[] with name, type, input[], attr,
    input_desc/output_desc, id), from atc's JSON or a GE graph dump's text format; kind OM either
    way (the same device graph, fusion attributes included)."""
    graphs = [g for g in doc["graph"] if isinstance(g, dict)]
    # the first graph is the model itself (subgraph ""), the others its subgraphs
    ops = [("" if k == 0 else str(g.get("name") or f"graph_{k}"), _op(op))
           for k, g in enumerate(graphs) for op in _list(g.get("op")) if isinstance(op, dict)]

    weights = {f"{op['name'] or ''}:{j}" for _, op in ops if op["type"] in CONST_TYPES
               for j in range(max(1, len(op["output_desc"])))}
    ops = [(g, op) for g, op in ops if op["type"] not in CONST_TYPES]
    names = unique_names((op["name"] for _, op in ops),
                         (f"{op['type'] or 'op'}_{i}" for i, (_, op) in enumerate(ops)))
    used = _referenced_outputs(ops)
    nodes = [_node(op, name, i, g, used.get(op["name"], 0))
             for i, ((g, op), name) in enumerate(zip(ops, names))]
    fill_input_shapes(nodes, {})

    root_data = [n for n in nodes if n.type in INPUT_TYPES and not n.subgraph]
    inputs = [t for n in root_data or [n for n in nodes if n.type in INPUT_TYPES] for t in n.outputs]
    name = doc.get("name") or (graphs[0].get("name") if graphs else "") or p.stem
    graph = Graph(name=str(name), kind=kinds.OM, path=str(p), nodes=nodes, inputs=inputs, outputs=[], weights=weights)
    graph.outputs = _network_outputs(graph, attr_dict(doc.get("attr")).get(OUT_NODES), graph.notes)
    return graph


def _op(op: dict) -> dict:
    """The fields of an op the reader uses, each of the type it needs whatever the file holds."""
    name = op.get("name")
    return {
        "name": None if name is None or name == "" else str(name),
        "type": str(op.get("type") or ""),
        "id": op.get("id"),
        "attr": op.get("attr"),
        "input": [str(ref) for ref in _list(op.get("input"))],
        "input_desc": [d if isinstance(d, dict) else {} for d in _list(op.get("input_desc"))],
        "output_desc": [d if isinstance(d, dict) else {} for d in _list(op.get("output_desc"))],
    }


def _node(op: dict, name: str, index: int, subgraph: str, referenced: int) -> Node:
    attrs = attr_dict(op["attr"])
    in_desc, out_desc = op["input_desc"], op["output_desc"]
    inputs, input_shapes = [], []
    data_pos = 0
    for ref in op["input"]:
        producer, _, idx = ref.rpartition(":")
        if _int(idx) == -1:
            continue  # control edge: ordering only, no data
        desc = in_desc[data_pos] if data_pos < len(in_desc) else {}
        data_pos += 1
        if ref:
            inputs.append(ref if producer else f"{ref}:0")
            input_shapes.append(_shape(desc))
    outputs = [f"{name}:{j}" for j in range(max(len(out_desc), referenced))]
    out_attrs = [attr_dict(d.get("attr")) for d in out_desc]
    attrs["_output_layouts"] = [d.get("layout") or d.get("format") for d in out_desc]
    attrs["_origin_shapes"] = [_dims(a.get("origin_shape")) for a in out_attrs]
    fused = attrs.get("_datadump_original_op_names")
    return Node(
        name=name, type=op["type"], index=index, seq_id=_int(op["id"], index + 1),
        inputs=inputs, outputs=outputs, attrs=attrs,
        output_shapes=[_shape(d) for d in out_desc], output_dtypes=[_dtype(d.get("dtype")) for d in out_desc],
        input_shapes=input_shapes, fused=None if fused is None else [str(f) for f in _as_list(fused)],
        origins=[_origin(a) for a in out_attrs], subgraph=subgraph)


def _referenced_outputs(ops: list) -> dict[str, int]:
    """op name -> how many outputs others reference, for ops whose output_desc is missing or short."""
    used: dict[str, int] = {}
    for _, op in ops:
        for ref in op["input"]:
            producer, _, idx = ref.rpartition(":")
            if producer and 0 <= _int(idx, -1) < MAX_OUTPUTS:
                used[producer] = max(used.get(producer, 0), _int(idx) + 1)
    return used


def _network_outputs(graph: Graph, declared: Any, notes: list[str]) -> list[str]:
    """The model's declared outputs, else what NetOutput consumes, else tensors nobody consumes."""
    if declared:
        outputs = []
        for entry in _as_list(declared):
            resolved = _resolve(graph, str(entry))
            if not resolved:
                notes.append(f"declared network output {entry!r} is not in the graph")
            outputs += [t for t in resolved if t not in outputs]
        if outputs:
            return outputs
    net_outputs = [n for n in graph.nodes if n.type == "NetOutput"]
    root = [n for n in net_outputs if not n.subgraph] or net_outputs
    outputs = list(dict.fromkeys(t for n in root for t in n.inputs))
    if outputs:
        return outputs
    return [t for n in graph.nodes for t in n.outputs if not graph.consumers(t)]


def _resolve(graph: Graph, entry: str) -> list[str]:
    """"op" or "op:idx" -> tensor ids; names fused away are looked up among the output origins."""
    name, sep, idx = entry.rpartition(":")
    if not (sep and idx.lstrip("-").isdigit()):
        name, idx = entry, ""
    node = graph.node(name)
    if node:
        return node.outputs if idx == "" else [t for t in node.outputs[int(idx):int(idx) + 1]]
    wanted = int(idx or 0)
    return [t for n in graph.nodes for t, o in zip(n.outputs, n.origins) if o and o[0] == name and o[1] == wanted][:1]


def attr_dict(attrs: Any) -> dict[str, Any]:
    """Attributes as {key: plain value}, from a list of {"key", "value"} pairs or a dict."""
    items: Iterable[tuple[Any, Any]]
    if isinstance(attrs, dict):
        items = attrs.items()
    elif isinstance(attrs, list):
        items = ((a.get("key"), a.get("value")) for a in attrs if isinstance(a, dict))
    else:
        return {}
    return {str(k): attr_value(v) for k, v in items if k is not None}


def attr_value(value: Any) -> Any:
    """An AttrDef value ({"s"}, {"i"}, {"f"}, {"b"}, {"list": {...}}, {"t"}, {"g"}) as a plain value."""
    if not isinstance(value, dict):
        return value
    for key, convert in (("s", str), ("i", _int), ("f", _float), ("b", bool)):
        if key in value:
            return convert(value[key])
    if "list" in value:
        lst = value["list"] if isinstance(value["list"], dict) else {}
        for key, convert in (("s", str), ("i", _int), ("f", _float), ("b", bool)):
            if key in lst:
                return [convert(v) for v in _as_list(lst[key])]
        return []
    if "t" in value:
        desc = value["t"].get("desc") if isinstance(value["t"], dict) else None
        desc = desc if isinstance(desc, dict) else {}
        return tensor_summary(_dtype(desc.get("dtype")), _shape(desc))
    if "g" in value:
        return f"<graph {value['g'].get('name', '') if isinstance(value['g'], dict) else ''}>"
    return value


def _origin(attrs: dict) -> tuple[str, int] | None:
    name = attrs.get("_datadump_origin_name")
    if not name:
        return None
    return str(name), _int(attrs.get("_datadump_origin_output_index"), 0)


def _shape(desc: dict) -> tuple | None:
    """shape.dim as a tuple; -1 (dynamic) dims are None, -2 (unknown rank) gives None."""
    shape = desc.get("shape") if isinstance(desc, dict) else None
    if not isinstance(shape, dict):
        return None
    return _dims(shape.get("dim") or [])


def _dims(dims: Any) -> tuple | None:
    if dims is None:
        return None
    values = [_int(d, -1) for d in _as_list(dims)]
    if any(d == -2 for d in values):
        return None
    return tuple(d if d >= 0 else None for d in values)


def _dtype(value: Any) -> str | None:
    if isinstance(value, int) or (isinstance(value, str) and value.isdecimal()):
        code = _int(value, -1)
        return dtype_name(DTYPE_NAMES[code]) if 0 <= code < len(DTYPE_NAMES) else None
    return dtype_name(value) if isinstance(value, str) else None


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _list(value: Any) -> list:
    """A repeated field: a list as given, anything else (missing, a number, a string) empty."""
    return value if isinstance(value, list) else []


def _int(value: Any, default: int = 0) -> int:
    """int64 fields may be numbers or strings in the JSON; infinities and junk give `default`."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")
