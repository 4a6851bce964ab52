"""Caffe network prototxt -> Graph, with a small protobuf text-format parser (no caffe dependency).

Caffe blobs are named by their `top`, and in-place layers (ReLU on a convolution's top) reuse
the name, which would make the graph cyclic and hide the convolution's own output. Each
re-production of a blob name therefore gets its own id `{top}@{layer}`; later bottoms of that
name refer to the newest version, as Caffe itself does at run time.
Layers that exist only in the TRAIN phase are skipped: accuscope compares inference.
"""
from __future__ import annotations

import codecs
import re
from pathlib import Path
from typing import Any

from accuscope.engine.graphs.graph import Graph, Node, fill_input_shapes, read_text, unique_names
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError

# V1 `layers { type: ENUM }` names whose CamelCase spelling is not the plain conversion.
_V1_TYPES = {"RELU": "ReLU", "LRN": "LRN", "TANH": "TanH", "BNLL": "BNLL", "MVN": "MVN", "ABSVAL": "AbsVal",
             "ARGMAX": "ArgMax", "IM2COL": "Im2col", "HDF5_DATA": "HDF5Data", "HDF5_OUTPUT": "HDF5Output",
             "SOFTMAX_LOSS": "SoftmaxWithLoss"}
_BOOLS = {"true": True, "True": True, "false": False, "False": False}
MAX_DEPTH = 100  # real networks nest 3 or 4 deep; the parser recurses once per level


class TextFormatError(ValueError):
    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line, self.message = line, message

    def __reduce__(self):  # pickled as it was made (a SourceError's cause crosses a process boundary)
        return (TextFormatError, (self.line, self.message))


class Msg(list):
    """A text-format message: (key, value) pairs in file order; repeated keys stay separate."""

    def all(self, key: str) -> list:
        return [v for k, v in self if k == key]

    def get(self, key: str, default: Any = None) -> Any:
        return next((v for k, v in self if k == key), default)

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dicts; a key given several times becomes a list."""
        out: dict[str, Any] = {}
        for k, v in self:
            v = v.to_dict() if isinstance(v, Msg) else v
            if k in out:
                out[k] = (out[k] if isinstance(out[k], list) else [out[k]]) + [v]
            else:
                out[k] = v
        return out


_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\f\v]+) | (?P<newline>\n) | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)[fF]?(?![\w.]))
  | (?P<word>-?[A-Za-z_][\w.]*|\[[\w.]+\])
  | (?P<punct>[{}<>\[\]:;,])
""", re.VERBOSE)


def _tokens(text: str) -> list[tuple[str, Any, int]]:
    out: list[tuple[str, Any, int]] = []
    line, pos = 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise TextFormatError(line, f"unexpected character {text[pos]!r}")
        kind, value = m.lastgroup, m.group()
        if kind == "newline":
            line += 1
        elif kind == "string":
            try:
                out.append(("string", _unescape(value[1:-1]), line))
            except ValueError as exc:
                raise TextFormatError(line, f"bad escape in string ({exc})") from None
        elif kind == "number":
            out.append(("number", _number(value), line))
        elif kind in ("word", "punct"):
            out.append((kind, value, line))
        pos = m.end()
    return out


def _unescape(s: str) -> str:
    return codecs.escape_decode(s.encode("utf-8"))[0].decode("utf-8", "replace")


def _number(s: str) -> int | float:
    if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", s):
        return int(s, 16)
    s = s.rstrip("fF")
    try:
        return int(s)
    except ValueError:
        return float(s)


def parse_text_format(text: str) -> Msg:
    """Parse protobuf text format into nested `Msg`s; TextFormatError carries the line number."""
    tokens = _tokens(text)
    tokens.append(("eof", None, max(1, len(text.splitlines()))))
    pos = 0

    def peek():
        return tokens[pos]

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def at(punct: str) -> bool:
        return peek()[0] == "punct" and peek()[1] in punct

    def fail(message: str):
        raise TextFormatError(peek()[2], f"{message}, found {_show(peek())}")

    depth = 0

    def message(closer: str | None) -> Msg:
        nonlocal depth
        depth += 1
        if depth > MAX_DEPTH:
            fail(f"messages nested more than {MAX_DEPTH} deep")
        msg = Msg()
        while True:
            kind, name, line = peek()
            if closer and at(closer):
                take()
                depth -= 1
                return msg
            if kind == "eof":
                if closer:
                    raise TextFormatError(line, f"missing {closer!r} at end of file")
                return msg
            if kind != "word":
                fail("expected a field name")
            take()
            msg.extend((name, v) for v in field_values())
            if at(";,"):
                take()

    def field_values() -> list:
        colon = at(":")
        if colon:
            take()
        if at("{<"):
            return [value()]
        if not colon:
            fail("expected ':' or '{'")
        if not at("["):
            return [value()]
        take()
        values = []
        while not at("]"):
            values.append(value())
            if at(","):
                take()
            elif not at("]"):
                fail("expected ',' or ']'")
        take()
        return values

    def value() -> Any:
        if at("{<"):
            return message("}" if take()[1] == "{" else ">")
        kind, v, _ = peek()
        if kind not in ("string", "number", "word"):
            fail("expected a value")
        take()
        while kind == "string" and peek()[0] == "string":  # adjacent strings concatenate
            v += take()[1]
        return _BOOLS.get(v, v) if kind == "word" else v

    return message(None)


def _show(tok) -> str:
    return "end of file" if tok[0] == "eof" else repr(tok[1])


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
