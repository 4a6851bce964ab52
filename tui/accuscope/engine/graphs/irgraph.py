"""OpenVINO IR (`model.xml`, its weights in `model.bin` beside it) -> Graph, read as text: no OpenVINO
needed to show, inspect or pair it (running it does: runs/openvinorun.py).

The layout, as `ov.save_model` writes it (IR version 10 and 11):

    <net name=... version="11"><layers>
      <layer id="5" name="{friendly name}" type="Convolution" version="opset1">
        <data strides="1,1" .../>                      the op's attributes
        <input><port id="0" precision="FP32"><dim>1</dim>...</port>...</input>
        <output><port id="2" precision="FP32" names="conv2d_0.tmp_0,alias"><dim>...</port></output>
      </layer>...</layers>
    <edges><edge from-layer="4" from-port="2" to-layer="5" to-port="0"/>...</edges></net>

A port's `names` are the tensor names the converter kept (an IR converted from ONNX keeps the ONNX
value names on most outputs, `\\,` escaping a comma inside one): an output's tensor id is its first
name, else `{layer}:{k}` (k: its place among the layer's outputs, as openvino's `Output.get_index()`
counts). Const layers are weights, and so is every layer computed from weights alone (the converter's
decompression of fp16 or int8 weights: Const -> Convert -> Multiply): `constant_layers` says which, and
the dump (openvinorun) leaves them out by the same rule. Parameter layers are the inputs, Result layers
name the outputs. FakeQuantize (NNCF's int8) is the converter's own (graphs.optypes.CONVERTER_OWN).
The text is parsed by expat (linear in the file); a DOCTYPE (entities) is refused before parsing.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

import numpy as np

from accuscope.engine.graphs.graph import Graph, Node, read_text, stable_topo_order, unique_names
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError

CONST = "Const"
PARAMETER = "Parameter"
RESULT = "Result"
_DTYPES = {"FP32": "float32", "FP16": "float16", "BF16": "bfloat16", "FP64": "float64", "I8": "int8",
           "U8": "uint8", "I16": "int16", "U16": "uint16", "I32": "int32", "U32": "uint32", "I64": "int64",
           "U64": "uint64", "BOOL": "bool", "BOOLEAN": "bool", "U1": "bool"}


def sniff(head: bytes) -> bool:
    """The first bytes of a file: an IR's root element `<net` (after the XML declaration)."""
    text = head.lstrip()
    if text.startswith(b"<?xml"):
        end = text.find(b"?>")
        text = text[end + 2:].lstrip() if end >= 0 else b""
    return text.startswith(b"<net ") or text.startswith(b"<net>")


def port_names(text: str | None) -> list[str]:
    """A port's `names` attribute as its tensor names (`,` separates them, `\\,` is a comma in one)."""
    if not text:
        return []
    names, part, escaped = [], [], False
    for ch in text:
        if escaped:
            part.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            names.append("".join(part).strip())
            part = []
        else:
            part.append(ch)
    names.append("".join(part).strip())
    return [n for n in names if n]


def _int(text: str | None, what: str, p: Path) -> int:
    try:
        return int(text or "")
    except ValueError:
        raise SourceError(f"{p}: {what} {text!r} is not a number") from None


def _dims(port: ET.Element) -> tuple | None:
    dims = [d.text.strip() if d.text else "" for d in port.findall("dim")]
    return tuple(int(d) if d.lstrip("-").isdigit() and int(d) >= 0 else None for d in dims)


def constant_layers(types: dict[str, str], sources: dict[str, list[str]]) -> set[str]:
    """The layers computed from Const layers alone (weights and their decompression), given each
    layer's type and the layers its inputs come from, by id; in one pass per layer (a worklist, not a
    recursion)."""
    consumers: dict[str, list[str]] = {}
    waiting = {}
    for layer, srcs in sources.items():
        waiting[layer] = len(srcs)
        for s in srcs:
            consumers.setdefault(s, []).append(layer)
    ready = [layer for layer, t in types.items() if t == CONST]
    constant = set(ready)
    while ready:
        layer = ready.pop()
        for c in consumers.get(layer, ()):
            waiting[c] -= 1
            if waiting[c] == 0 and c not in constant and types.get(c) not in (PARAMETER, RESULT):
                constant.add(c)
                ready.append(c)
    return constant


class IR(NamedTuple):
    """An IR file read: its Graph, each Parameter layer's (input's) tensor id by the layer's name
    (what a dump of it names the input's file: runs/openvinorun), and each Const layer's `<data>`
    (element_type, shape, offset and size in the .bin) by its tensor id (constant_values reads them)."""

    graph: Graph
    parameters: dict[str, str]
    constants: dict[str, dict[str, str]] = {}


_NUMPY = {"f32": "float32", "f16": "float16", "f64": "float64", "i8": "int8", "u8": "uint8", "i16": "int16",
          "u16": "uint16", "i32": "int32", "u32": "uint32", "i64": "int64", "u64": "uint64"}


def constant_values(path: str | Path, tensors: set[str]) -> dict[str, np.ndarray]:
    """The values of the Const layers whose tensor ids are in `tensors`, read from the .bin beside the IR
    (those whose element type numpy holds and whose bytes the .bin has); the rest left out."""
    ir = read_ir(path)
    found: dict[str, np.ndarray] = {}
    wanted = {t: ir.constants[t] for t in tensors if t in ir.constants}
    binary = Path(path).with_suffix(".bin")
    if not wanted or not binary.is_file():
        return found
    length = binary.stat().st_size
    with open(binary, "rb") as fh:
        for tensor, data in wanted.items():
            kind = _NUMPY.get((data.get("element_type") or "").lower())
            try:
                shape = tuple(int(d) for d in (data.get("shape") or "").replace(" ", "").split(",") if d)
                offset, size = int(data.get("offset") or -1), int(data.get("size") or -1)
            except ValueError:
                continue
            if kind is None or offset < 0 or size < 0 or offset + size > length \
                    or math.prod(shape) * np.dtype(kind).itemsize != size:
                continue
            fh.seek(offset)
            found[tensor] = np.frombuffer(fh.read(size), dtype=kind).reshape(shape)
    return found


def load_ir(path: str | Path) -> Graph:
    return read_ir(path).graph


def read_ir(path: str | Path) -> IR:
    p = Path(path)
    text = read_text(p)
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise SourceError(f"{p}: an OpenVINO IR holds no DOCTYPE or entities; this file does (refused)")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise SourceError(f"{p}: not an OpenVINO IR (XML error: {exc})") from None
    if root.tag != "net" or root.find("layers") is None:
        raise SourceError(f"{p}: not an OpenVINO IR (its root is <{root.tag}>, not <net> with <layers>)")
    layers = root.findall("layers/layer")
    by_id: dict[str, ET.Element] = {}
    for layer in layers:
        lid = layer.get("id")
        if lid is None or lid in by_id:
            raise SourceError(f"{p}: layer {layer.get('name')!r} has {'no' if lid is None else 'a repeated'} id")
        by_id[lid] = layer
    # (layer, port) -> (layer, port) of the producer, from the edges
    source: dict[tuple[str, str], tuple[str, str]] = {}
    for edge in root.findall("edges/edge"):
        fl, fp, tl, tp = (edge.get(k) for k in ("from-layer", "from-port", "to-layer", "to-port"))
        if fl not in by_id or tl not in by_id or fp is None or tp is None:
            raise SourceError(f"{p}: an edge names a layer or port that is not there ({fl}:{fp} -> {tl}:{tp})")
        source[(tl, tp)] = (fl, fp)
    types = {lid: layer.get("type") or "" for lid, layer in by_id.items()}
    in_ports = {lid: [port.get("id") or "" for port in layer.findall("input/port")] for lid, layer in by_id.items()}
    constant = constant_layers(types, {lid: [source[(lid, port)][0] for port in ports if (lid, port) in source]
                                       for lid, ports in in_ports.items()})

    names = unique_names((layer.get("name") for layer in layers), (f"{types[lid]}_{lid}" for lid in by_id))
    name_of = dict(zip(by_id, names))
    tensor: dict[tuple[str, str], str] = {}  # (layer, output port) -> tensor id
    out_ports: dict[str, list[ET.Element]] = {}
    for lid, layer in by_id.items():
        out_ports[lid] = layer.findall("output/port")
        for k, port in enumerate(out_ports[lid]):
            given = port_names(port.get("names"))
            tensor[(lid, port.get("id") or "")] = given[0] if given else f"{name_of[lid]}:{k}"

    nodes: list[Node] = []
    inputs: list[str] = []
    outputs: list[str] = []
    weights: set[str] = set()
    parameters: dict[str, str] = {}
    constants: dict[str, dict[str, str]] = {}
    for lid, layer in by_id.items():
        kind = types[lid]
        ins = [tensor.get(source.get((lid, port), ("", "")), "") for port in in_ports[lid]]
        outs = [tensor[(lid, port.get("id") or "")] for port in out_ports[lid]]
        if lid in constant:
            weights.update(outs)
            data = layer.find("data")
            if kind == CONST and data is not None and outs:
                constants[outs[0]] = dict(data.attrib)
        elif kind == PARAMETER:
            inputs.extend(outs)
            parameters.update((name_of[lid], t) for t in outs[:1])
        elif kind == RESULT:
            outputs.extend(t for t in ins if t)
        else:
            data = layer.find("data")
            nodes.append(Node(
                name=name_of[lid], type=kind, index=len(nodes), seq_id=len(nodes), inputs=ins, outputs=outs,
                attrs=dict(data.attrib) if data is not None else {},
                output_shapes=[_dims(port) for port in out_ports[lid]],
                output_dtypes=[_DTYPES.get((port.get("precision") or "").upper()) for port in out_ports[lid]],
                input_shapes=[_dims(port) for port in layer.findall("input/port")]))
    nodes, _ = stable_topo_order(nodes, {*inputs, *weights})
    for k, node in enumerate(nodes):
        node.index = node.seq_id = k
    if not nodes and not inputs:
        raise SourceError(f"{p}: not an OpenVINO IR (no layers)")
    notes = [] if (p.with_suffix(".bin")).is_file() else [f"{p.with_suffix('.bin').name} (the weights) is not beside it"]
    return IR(Graph(name=root.get("name") or p.stem, kind=kinds.OPENVINO_IR, path=str(p), nodes=nodes,
                    inputs=inputs, outputs=outputs, weights=weights, notes=notes), parameters, constants)
