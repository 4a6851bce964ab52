"""GE graph dumps (`DUMP_GE_GRAPH=1|2|3`, `DUMP_GRAPH_LEVEL`): `ge_proto_{seq}_{stage}.txt` and
`ge_onnx_{seq}_graph_{id}_{stage}.pbtxt` -> Graph.

Each file is the protobuf TEXT format of GE's `ModelDef` (ge_ir.proto): `graph { name op { name
type input: "producer:idx" attr { key value { s|i|f|b|list } } input_desc { dtype shape { dim }
layout attr } output_desc {...} id } }`, the same message atc renders as JSON for an offline
model; so the graph is built by `omgraph.model_graph`, fusion attributes
(`_datadump_origin_name`, `_datadump_origin_output_index`, `_datadump_original_op_names`)
included. GE writes one file per compile stage (`..._PreRunBegin.txt`, ..., `..._Build.txt`); the
`Build` stage is the graph that runs, and a training job compiles several graphs, so
`pick_build_graph` chooses the Build file whose op names cover most of a dump's files.
Facts from the CANN docs ("Dumping graphs", DUMP_GE_GRAPH) and GE's public ge_ir.proto.

GE writes each graph a second time as ONNX text (`ge_onnx_*.pbtxt`, an onnx `ModelProto` with
`producer_name: "GE"`, for Netron; metadef's graph/utils/ge_ir_utils.cc `OnnxUtils`): each op a
`node` of `op_type: "ge:{type}"` with the same `input` refs (`""` unconnected, `name:-1` control), its
attributes as ONNX `attribute`s (bools as INT 0/1), its OpDef members (`id`, `src_name`, ...) and its
tensor descriptors flattened into attributes named `{input|output}_desc_{field}:{k}` (the
descriptor's own attributes `..._desc_attr_{key}:{k}`), and each subgraph a node of op_type
`subgraph` holding it in its `graph` attribute. `_onnx_model_def` turns that back into the ModelDef,
so both forms give the same Graph (tests/engine/test_ge_onnx.py on a pair CANN wrote). One loss: GE
writes string attributes into the ONNX form only at DUMP_GE_GRAPH=1, so at 2 and 3 it holds no
`_datadump_original_op_names` (a graph note says so); the ge_proto form of the same graph has them.

The text format is read by textformat.py (the Caffe prototxt's too), nesting bounded by `MAX_DEPTH`.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from accuscope.engine.graphs.graph import Graph, read_text
from accuscope.engine.graphs.omgraph import model_graph
from accuscope.engine.graphs.textformat import TextFormatError, parse
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError, sanitize

KIND = kinds.GE_GRAPH
MAX_DEPTH = 64
# fields of ModelDef/GraphDef/OpDef/TensorDescriptor/ShapeDef that are repeated (kept as lists)
REPEATED = {"graph", "op", "input", "output", "attr", "input_desc", "output_desc", "dim", "subgraph_name",
            "input_name", "src_name", "src_index", "dst_name", "dst_index", "input_i", "output_i",
            "workspace", "workspace_bytes", "is_input_const"}
_BUILD = re.compile(r"ge_proto_(\d+)_.*Build\.txt")
# a line's own leading blanks (`^\s*` ran on over the blank lines after it, from each), a string on one line
_OP_NAME = re.compile(r'^[^\S\n]*name:\s*"((?:[^"\\\n]|\\.)*+)"', re.MULTILINE)
_ONNX_MARK = re.compile(r'^[^\S\n]*producer_name[^\S\n]*:[^\S\n]*"GE"', re.MULTILINE)  # GE's ONNX text form
_ONNX_HEAD = 4096  # characters of a file the mark is looked for in (GE writes it on line 2)


def parse_text_format(text: str, path: str = "<text>") -> dict[str, list]:
    """A protobuf text-format message as {field: [values]}; nested messages are such dicts (textformat.parse,
    nesting bounded by MAX_DEPTH); SourceError naming the file and the line where it is not text format."""
    try:
        return parse(text, MAX_DEPTH, grouped=True)
    except TextFormatError as exc:
        raise SourceError(f"{path}: {exc} (not protobuf text format)") from None


def _plain(message: dict[str, list], in_list: bool = False) -> dict[str, Any]:
    """Parsed text format -> the shape atc's JSON has: singular fields unwrapped, repeated ones
    (and every field of an AttrDef `list`) kept as lists. Depth is bounded by the parser."""
    out: dict[str, Any] = {}
    for name, values in message.items():
        values = [_plain(v, name == "list") if isinstance(v, dict) else v for v in values]
        out[name] = values if in_list or name in REPEATED else values[-1]
    return out


def sniff(path: str) -> bool:
    """A GE graph dump: `ge_proto_*.txt` or `ge_onnx_*.pbtxt`, or text whose first KiBs open `graph {`
    and `op {`, or say `producer_name: "GE"` (the ONNX form)."""
    base = os.path.basename(path)
    if not os.path.isfile(path):
        return False
    if (base.startswith("ge_proto_") and base.endswith(".txt")) or (base.startswith("ge_onnx_") and base.endswith(".pbtxt")):
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16).decode("utf-8", errors="replace")
    except OSError:
        return False
    return bool(re.search(r"^[^\S\n]*graph\s*\{", head, re.MULTILINE) and re.search(r"^[^\S\n]*op\s*\{", head, re.MULTILINE)
                or _ONNX_MARK.search(head[:_ONNX_HEAD]))


def load_ge_graph(path: str | os.PathLike) -> Graph:
    """A GE graph dump file, in either form, as a Graph (kind OM: the device graph, as from atc's JSON)."""
    p = Path(path)
    parsed = parse_text_format(read_text(p), str(p))
    onnx_form = _is_onnx_form(parsed)
    doc = _onnx_model_def(parsed) if onnx_form else _plain(parsed)
    if not isinstance(doc.get("graph"), list) or not doc["graph"]:
        raise SourceError(f"{p}: no graph {{ ... }} in this file (expected a GE ge_proto_*.txt or ge_onnx_*.pbtxt "
                          "graph dump)")
    graph = model_graph(doc, p)
    graph.notes.append(f"GE graph dump {p.name}" + (" (GE's ONNX text form)" if onnx_form else ""))
    if onnx_form and all(n.fused is None for n in graph.nodes):
        graph.notes.append("no op names its original framework ops: GE writes string attributes "
                           "(_datadump_original_op_names) into ge_onnx_*.pbtxt only at DUMP_GE_GRAPH=1; the "
                           "ge_proto_*.txt form of the same graph has them")
    return graph


# --- GE's ONNX text form -------------------------------------------------------------------------------------

# ONNX AttributeType numbers, for a file that writes them as numbers rather than names
_ATTR_TYPES = {1: "FLOAT", 2: "INT", 3: "STRING", 4: "TENSOR", 5: "GRAPH", 6: "FLOATS", 7: "INTS", 8: "STRINGS"}
# attribute -> AttrDef value: a scalar ONNX type's field, or a list type's field and the ListValue field it fills
_SCALARS = {"INT": ("i", "i", 0), "FLOAT": ("f", "f", 0.0), "STRING": ("s", "s", "")}
_LISTS = {"INTS": ("ints", "i"), "FLOATS": ("floats", "f"), "STRINGS": ("strings", "s")}
_DESC_ATTR = re.compile(r"(input|output)_desc_(.+):(\d+)")
# OpDef members GE writes as attributes (ge_ir_utils.cc AddCommonAttrIntoProto, AddAttrProtoForOpInDesc/OutDesc):
# not attributes in the ModelDef
_OP_MEMBERS = {"id", "stream_id", "input_name", "src_name", "src_index", "dst_name", "dst_index", "input_i", "output_i",
               "workspace", "workspace_bytes", "input_desc_nums", "output_desc_nums"}
# descriptor fields GE writes as `{in|out}put_desc_{field}:k` that are TensorDescriptor attributes in the ModelDef
_DESC_ATTRS = {"origin_shape": "origin_shape", "origin_dtype": "origin_data_type", "origin_layout": "origin_format"}


def _is_onnx_form(parsed: dict[str, list]) -> bool:
    """An onnx ModelProto (`ir_version`, `producer_name`, a graph of `node`s) rather than GE's ModelDef."""
    return ("ir_version" in parsed or "producer_name" in parsed
            or any(isinstance(g, dict) and "node" in g for g in parsed.get("graph", ())))


def _last(message: dict[str, list], field: str, default: Any = None) -> Any:
    values = message.get(field)
    return values[-1] if values else default


def _onnx_model_def(parsed: dict[str, list]) -> dict[str, Any]:
    """GE's ONNX text form (parsed) as the ModelDef `model_graph` reads: the model's graph first, then
    each subgraph its `subgraph` nodes hold (breadth first, no recursion: nesting is the parser's bound)."""
    queue = [g for g in parsed.get("graph", ())[-1:] if isinstance(g, dict)]
    graphs = []
    while queue:
        graph = queue.pop(0)
        ops = []
        for node in graph.get("node", ()):
            if not isinstance(node, dict):
                continue
            if _last(node, "op_type") == "subgraph":
                queue += [g for a in node.get("attribute", ()) if isinstance(a, dict)
                          for g in a.get("g", ()) if isinstance(g, dict)]
            else:
                ops.append(_onnx_op(node))
        graphs.append({"name": str(_last(graph, "name", "")), "op": ops})
    return {"graph": graphs}


def _onnx_op(node: dict[str, list]) -> dict[str, Any]:
    """One `node` as a ModelDef OpDef: `ge:` dropped from its type, its descriptors gathered from their
    attributes (in index order, by the index each attribute names). An `id` of 0 is no id, as in the
    ModelDef (proto3 writes no zero there)."""
    attrs, members = [], {}
    descs: dict[str, dict[int, dict[str, Any]]] = {"input": {}, "output": {}}
    for a in node.get("attribute", ()):
        if not isinstance(a, dict):
            continue
        name, value = str(_last(a, "name", "")), _onnx_attr_value(a)
        described = _DESC_ATTR.fullmatch(name)
        if described:
            side, field, k = described.groups()
            desc = descs[side].setdefault(int(k), {})
            if field.startswith("attr_") or field in _DESC_ATTRS:
                key = field[5:] if field.startswith("attr_") else _DESC_ATTRS[field]
                desc.setdefault("attr", []).append({"key": key, "value": value})
            elif field == "shape":
                desc["shape"] = {"dim": value.get("list", {}).get("i", [])}
            else:
                desc[field] = next(iter(value.values()), None)
        elif name in _OP_MEMBERS:
            members[name] = next(iter(value.values()), None)
        elif not name.startswith(("input_desc_", "output_desc_")):  # not a descriptor's list of lists (`...:k_j`)
            attrs.append({"key": name, "value": value})
    op_type = str(_last(node, "op_type", ""))
    return {"name": _last(node, "name"), "type": op_type[3:] if op_type.startswith("ge:") else op_type,
            "id": members.get("id") or None, "input": [str(ref) for ref in node.get("input", ())], "attr": attrs,
            "input_desc": [descs["input"][k] for k in sorted(descs["input"])],
            "output_desc": [descs["output"][k] for k in sorted(descs["output"])]}


def _onnx_attr_value(a: dict[str, list]) -> dict[str, Any]:
    """An ONNX AttributeProto as a ModelDef AttrDef value ({"i"}, {"s"}, {"list": {"i": [...]}}, ...);
    proto3 leaves a zero, an empty string and an empty list out of the text, so they are restored."""
    kind = _last(a, "type", "")
    kind = _ATTR_TYPES.get(kind, "") if isinstance(kind, int) else str(kind)
    if not kind:  # no type written: the field that is there says it
        kind = next((k for k, (field, _, _) in _SCALARS.items() if field in a), "")
        kind = kind or next((k for k, (field, _) in _LISTS.items() if field in a), "")
    if kind in _SCALARS:
        field, key, zero = _SCALARS[kind]
        return {key: _last(a, field, zero)}
    if kind in _LISTS:
        field, key = _LISTS[kind]
        return {"list": {key: list(a.get(field, ()))}}
    if kind == "GRAPH":
        graph = _last(a, "g")
        return {"g": {"name": _last(graph, "name", "") if isinstance(graph, dict) else ""}}
    return {"s": f"<{kind.lower() or 'unknown'} attribute>"}


def build_graphs(folder: str) -> list[str]:
    """The `ge_proto_*_Build.txt` files of a folder, in sequence-number order."""
    try:
        names = os.listdir(folder)
    except OSError as exc:
        raise SourceError(f"{folder}: cannot list ({exc.strerror or exc})") from exc
    found = [(int(m.group(1)), n) for n in names if (m := _BUILD.fullmatch(n))]
    return [os.path.join(folder, n) for _, n in sorted(found)]


def op_names(path: str) -> set[str]:
    """Every `name: "..."` of a graph dump (ops, graphs), read by a line scan: cheap, no parse."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return {m.group(1) for m in _OP_NAME.finditer(fh.read())}


def pick_build_graph(folder: str, dump_op_names: Iterable[str]) -> tuple[str, str]:
    """(path, why): the Build-stage graph dump whose op names cover most of `dump_op_names` (names as
    in dump files: sanitized forms match too); ties go to the later graph."""
    wanted = {sanitize(n) for n in dump_op_names}
    files = build_graphs(folder)
    if not files:
        raise SourceError(f"{folder}: no ge_proto_*_Build.txt graph dumps (run with DUMP_GE_GRAPH=2 or 3)")
    scored = []
    for path in files:
        try:
            covered = len(wanted & {sanitize(n) for n in op_names(path)})
        except OSError:
            covered = -1
        scored.append((covered, path))
    covered = max(c for c, _ in scored)
    best = [path for c, path in scored if c == covered][-1]
    share = f"{covered} of {len(wanted)} dumped ops" if wanted else "no dumped ops given"
    others = len(files) - 1
    why = f"{os.path.basename(best)} covers {share}" + (f"; {others} other Build graph(s) cover fewer or as many"
                                                        if others else "")
    return best, why
