"""GE graph dumps (`DUMP_GE_GRAPH=1|2|3`, `DUMP_GRAPH_LEVEL`): `ge_proto_{seq}_{stage}.txt` -> Graph.

Each file is the protobuf TEXT format of GE's `ModelDef` (ge_ir.proto): `graph { name op { name
type input: "producer:idx" attr { key value { s|i|f|b|list } } input_desc { dtype shape { dim }
layout attr } output_desc {...} id } }`, the same message atc renders as JSON for an offline
model; so the graph is built by `omgraph.model_graph`, fusion attributes
(`_datadump_origin_name`, `_datadump_origin_output_index`, `_datadump_original_op_names`)
included. GE writes one file per compile stage (`..._PreRunBegin.txt`, ..., `..._Build.txt`); the
`Build` stage is the graph that runs, and a training job compiles several graphs, so
`pick_build_graph` chooses the Build file whose op names cover most of a dump's files.
Facts from the CANN docs ("Dumping graphs", DUMP_GE_GRAPH) and GE's public ge_ir.proto.

The text-format parser is written here (protobuf's own needs the .proto compiled in): an
iterative tokenizer and stack, nesting bounded by `MAX_DEPTH`, nothing executed.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable

from .graph import Graph, read_text
from .omgraph import model_graph
from .tensor import SourceError, sanitize

KIND = "ge-graph"
MAX_DEPTH = 64
# fields of ModelDef/GraphDef/OpDef/TensorDescriptor/ShapeDef that are repeated (kept as lists)
REPEATED = {"graph", "op", "input", "output", "attr", "input_desc", "output_desc", "dim", "subgraph_name",
            "input_name", "src_name", "src_index", "dst_name", "dst_index", "input_i", "output_i",
            "workspace", "workspace_bytes", "is_input_const"}
_TOKEN = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fF]?|-(?:inf|nan|infinity)\b)
  | (?P<id>[A-Za-z_][\w.]*)
  | (?P<punct>[{}<>:\[\],;])
  | (?P<bad>.)
""", re.VERBOSE | re.DOTALL)
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))", re.DOTALL)
_SIMPLE = {"n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v"}
_CLOSE = {"{": "}", "<": ">"}
_BUILD = re.compile(r"ge_proto_(\d+)_.*Build\.txt")
_OP_NAME = re.compile(r'^\s*name:\s*"((?:[^"\\]|\\.)*)"', re.MULTILINE)


class _Tokens:
    """(kind, text, offset) of each token, spaces and comments skipped, one token of look-ahead."""

    def __init__(self, text: str, path: str):
        self.text, self.path = text, path
        self._it = _TOKEN.finditer(text)
        self._peeked: tuple[str, str, int] | None = None

    def peek(self) -> tuple[str, str, int]:
        if self._peeked is None:
            self._peeked = self._next()
        return self._peeked

    def take(self) -> tuple[str, str, int]:
        tok = self.peek()
        self._peeked = None
        return tok

    def _next(self) -> tuple[str, str, int]:
        for m in self._it:
            kind = m.lastgroup
            if kind == "space":
                continue
            if kind == "bad":
                self.fail(m.start(), f"unexpected character {m.group()!r}")
            return kind, m.group(), m.start()
        return "end", "", len(self.text)

    def fail(self, offset: int, message: str):
        line = self.text.count("\n", 0, offset) + 1
        raise SourceError(f"{self.path}: line {line}: {message} (not protobuf text format)")


def parse_text_format(text: str, path: str = "<text>") -> dict[str, list]:
    """A protobuf text-format message as {field: [values]}; nested messages are such dicts."""
    tokens = _Tokens(text, path)
    root: dict[str, list] = {}
    stack: list[tuple[dict, str]] = [(root, "")]  # (message, the token closing it)
    while True:
        kind, value, offset = tokens.take()
        message, closer = stack[-1]
        if kind == "end":
            if len(stack) > 1:
                tokens.fail(offset, f"end of file inside a message (missing {closer!r})")
            return root
        if kind == "punct" and value == closer and closer:
            stack.pop()
            continue
        if kind == "punct" and value in ",;":
            continue
        if kind != "id":
            tokens.fail(offset, f"expected a field name, found {value!r}")
        name = value
        colon = tokens.peek()[1] == ":"
        if colon:
            tokens.take()
        kind, value, offset = tokens.peek()
        if value in _CLOSE:
            tokens.take()
            if len(stack) >= MAX_DEPTH:
                tokens.fail(offset, f"messages nested deeper than {MAX_DEPTH}")
            child: dict[str, list] = {}
            message.setdefault(name, []).append(child)
            stack.append((child, _CLOSE[value]))
        elif not colon:
            tokens.fail(offset, f"expected ':' or '{{' after {name!r}, found {value!r}")
        elif value == "[":
            tokens.take()
            values = message.setdefault(name, [])
            while tokens.peek()[1] != "]":
                if tokens.peek()[0] == "end":
                    tokens.fail(offset, f"end of file inside the list of {name!r}")
                if tokens.peek()[1] == ",":
                    tokens.take()
                    continue
                values.append(_scalar(tokens))
            tokens.take()
        else:
            message.setdefault(name, []).append(_scalar(tokens))


def _scalar(tokens: _Tokens) -> Any:
    kind, value, offset = tokens.take()
    if kind == "str":
        parts = [_unquote(value)]
        while tokens.peek()[0] == "str":  # adjacent strings concatenate
            parts.append(_unquote(tokens.take()[1]))
        return b"".join(parts).decode("utf-8", errors="replace")
    if kind == "num":
        text = value[:-1] if value[-1] in "fF" and (value[-2:-1].isdigit() or value[-2:-1] == ".") else value
        try:
            return int(text) if re.fullmatch(r"[-+]?\d+", text) else float(text)
        except ValueError:
            tokens.fail(offset, f"bad number {value!r}")
    if kind == "id":
        low = value.lower()
        if low in ("true", "t"):
            return True
        if low in ("false", "f"):
            return False
        if low in ("inf", "infinity", "nan"):
            return float(low)
        return value  # an enum value name, e.g. DT_FLOAT
    tokens.fail(offset, f"expected a value, found {value!r}")


def _unquote(token: str) -> bytes:
    body = token[1:-1]
    if "\\" not in body:
        return body.encode("utf-8")
    out, last = [], 0
    for m in _ESCAPE.finditer(body):
        out.append(body[last:m.start()].encode("utf-8"))
        last = m.end()
        octal, hex2, u4, u8, simple = m.groups()
        if octal:
            out.append(bytes([int(octal, 8) & 0xFF]))
        elif hex2:
            out.append(bytes([int(hex2, 16)]))
        elif u4 or u8:
            code = int(u4 or u8, 16)
            out.append(chr(code).encode("utf-8", errors="replace") if code <= 0x10FFFF else b"?")
        else:
            out.append(_SIMPLE.get(simple, simple.encode("utf-8")))
    out.append(body[last:].encode("utf-8"))
    return b"".join(out)


def _plain(message: dict[str, list], in_list: bool = False) -> dict[str, Any]:
    """Parsed text format -> the shape atc's JSON has: singular fields unwrapped, repeated ones
    (and every field of an AttrDef `list`) kept as lists. Depth is bounded by the parser."""
    out: dict[str, Any] = {}
    for name, values in message.items():
        values = [_plain(v, name == "list") if isinstance(v, dict) else v for v in values]
        out[name] = values if in_list or name in REPEATED else values[-1]
    return out


def sniff(path: str) -> bool:
    """A GE graph dump: `ge_proto_*.txt`, or text whose first KiBs open `graph {` and `op {`."""
    base = os.path.basename(path)
    if not os.path.isfile(path):
        return False
    if base.startswith("ge_proto_") and base.endswith(".txt"):
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16).decode("utf-8", errors="replace")
    except OSError:
        return False
    return bool(re.search(r"^\s*graph\s*\{", head, re.MULTILINE) and re.search(r"^\s*op\s*\{", head, re.MULTILINE))


def load_ge_graph(path: str | os.PathLike) -> Graph:
    """A GE graph dump file as a Graph (kind "om": the device graph, as from atc's JSON)."""
    p = Path(path)
    doc = _plain(parse_text_format(read_text(p), str(p)))
    if not isinstance(doc.get("graph"), list) or not doc["graph"]:
        raise SourceError(f"{p}: no graph {{ ... }} in this file (expected a GE ge_proto_*.txt graph dump)")
    graph = model_graph(doc, p)
    graph.notes.append(f"GE graph dump {p.name}")
    return graph


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
