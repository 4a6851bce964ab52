"""Caffe network prototxt -> Graph, its text format read by textformat.py (no caffe dependency).

Caffe blobs are named by their `top`, and in-place layers (ReLU on a convolution's top) reuse
the name, which would make the graph cyclic and hide the convolution's own output. Each
re-production of a blob name therefore gets its own id `{top}@{layer}`; later bottoms of that
name refer to the newest version, as Caffe itself does at run time.
Layers that exist only in the TRAIN phase are skipped: accuscope compares inference.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from accuscope.engine.graphs.graph import Graph, Node, fill_input_shapes, read_text, unique_names
from accuscope.engine.graphs.textformat import Msg, TextFormatError, parse
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError

# V1 `layers { type: ENUM }` names whose CamelCase spelling is not the plain conversion.
_V1_TYPES = {"RELU": "ReLU", "LRN": "LRN", "TANH": "TanH", "BNLL": "BNLL", "MVN": "MVN", "ABSVAL": "AbsVal",
             "ARGMAX": "ArgMax", "IM2COL": "Im2col", "HDF5_DATA": "HDF5Data", "HDF5_OUTPUT": "HDF5Output",
             "SOFTMAX_LOSS": "SoftmaxWithLoss"}
MAX_DEPTH = 100  # real networks nest 3 or 4 deep


def parse_text_format(text: str) -> Msg:
    """A prototxt's message, its fields in file order (textformat.parse); TextFormatError names the line."""
    return parse(text, MAX_DEPTH)


def load_prototxt(path: str | Path) -> Graph:
    p = Path(path)
    try:
        net = parse_text_format(read_text(p))
    except TextFormatError as e:
        raise SourceError(f"{p}: not a parseable prototxt: {e}") from e
    layers = [(v, k == "layers") for k, v in net
              if k in ("layer", "layers") and isinstance(v, Msg) and not train_only(v)]
    if not layers and not net.all("input"):
        raise SourceError(f"{p}: not a Caffe network (no layer and no input)")

    inputs = [str(t) for t in net.all("input")]
    known = dict(zip(inputs, _declared_input_shapes(net)))
    current = {t: t for t in inputs}  # blob name -> id of its newest version
    types = [_type(layer, legacy) for layer, legacy in layers]
    names = unique_names((_str(layer.get("name")) for layer, _ in layers),
                         (f"{t}_{i}" for i, t in enumerate(types)))
    nodes = []
    for i, ((layer, _), name, layer_type) in enumerate(zip(layers, names, types)):
        bottoms = [current.get(str(b), str(b)) for b in layer.all("bottom")]
        tops = []
        for top in map(str, layer.all("top")):
            tops.append(f"{top}@{name}" if top in current else top)
            current[top] = tops[-1]
        attrs = Msg((k, v) for k, v in layer if k not in ("name", "type", "bottom", "top")).to_dict()
        node = Node(name=name, type=layer_type, index=i, seq_id=i + 1, inputs=bottoms, outputs=tops, attrs=attrs,
                    output_dtypes=["float32"] * len(tops))
        if _is_input_layer(node.type):
            inputs += tops
            param = layer.get("input_param")
            for j, shape in enumerate((param if isinstance(param, Msg) else Msg()).all("shape")[:len(tops)]):
                node.output_shapes[j] = _dims(shape)
        nodes.append(node)
    fill_input_shapes(nodes, known)
    graph = Graph(name=_str(net.get("name")) or p.stem, kind=kinds.CAFFE, path=str(p), nodes=nodes, inputs=inputs,
                  outputs=[], weights=set())
    graph.outputs = [t for n in nodes for t in n.outputs if not graph.consumers(t) and t not in inputs]
    return graph


def _declared_input_shapes(net: Msg) -> list[tuple | None]:
    """Shapes of top-level `input:` blobs from `input_shape { dim }` blocks or flat `input_dim` lists."""
    shapes = [_dims(s) for s in net.all("input_shape")]
    if shapes:
        return shapes
    dims = [d if isinstance(d, int) else None for d in net.all("input_dim")]
    return [tuple(dims[i:i + 4]) for i in range(0, len(dims), 4)]


def _dims(shape: Any) -> tuple | None:
    return tuple(d if isinstance(d, int) else None for d in shape.all("dim")) if isinstance(shape, Msg) else None


def _type(layer: Msg, legacy: bool) -> str:
    """Layer type; V1 `layers` spell it as an enum (INNER_PRODUCT), mapped to today's name (InnerProduct)."""
    t = _str(layer.get("type"))
    if legacy and t.isupper():
        return _V1_TYPES.get(t) or "".join(w.capitalize() for w in t.split("_"))
    return t or "Layer"


def _is_input_layer(layer_type: str) -> bool:
    return layer_type == "Input" or layer_type.endswith("Data")


def train_only(layer: Msg) -> bool:
    """A layer the TRAIN phase alone runs (included for TRAIN only, or excluded from TEST): not in the net."""
    def phases(key: str) -> set[str]:
        return {str(rule.get("phase")) for rule in layer.all(key) if isinstance(rule, Msg)}
    included = phases("include")
    return ("TRAIN" in included and "TEST" not in included) or "TEST" in phases("exclude")


def _str(value: Any) -> str:
    return "" if value is None else str(value)
