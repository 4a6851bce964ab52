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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from accuscope.engine.graphs.graph import Graph, read_text
from accuscope.engine.graphs.omgraph import model_graph
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError, sanitize

KIND = kinds.GE_GRAPH
MAX_DEPTH = 64
# fields of ModelDef/GraphDef/OpDef/TensorDescriptor/ShapeDef that are repeated (kept as lists)
REPEATED = {"graph", "op", "input", "output", "attr", "input_desc", "output_desc", "dim", "subgraph_name",
            "input_name", "src_name", "src_index", "dst_name", "dst_index", "input_i", "output_i",
            "workspace", "workspace_bytes", "is_input_const"}
# one token per match, leading spaces absorbed: (comment, string, number, identifier, punctuation, other).
# Every position but trailing blanks (cut off each chunk) starts a token, so none is tried twice; a
# string that does not close on its line is one `other` token (tried from each of its quotes, it cost
# the rest of the line each time: a 1 MB line of `\"`, minutes)
_TOKEN = re.compile(r"""\s*(?:
    (\#[^\n]*)
  | ("(?:[^"\\\n]|\\.)*+"|'(?:[^'\\\n]|\\.)*+')
  | ([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fF]?|-(?:inf|nan|infinity)\b)
  | ([A-Za-z_][\w.]*)
  | ([{}<>:\[\],;])
  | ("(?:[^"\\\n]|\\.)*+|'(?:[^'\\\n]|\\.)*+|\S))""", re.VERBOSE)
_CHUNK = 1 << 20  # text tokenized this many characters at a time (cut at a line end: no token spans lines)
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))", re.DOTALL)
_SIMPLE = {"n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v"}
_CLOSE = {"{": "}", "<": ">"}
_BUILD = re.compile(r"ge_proto_(\d+)_.*Build\.txt")
# a line's own leading blanks (`^\s*` ran on over the blank lines after it, from each), a string on one line
_OP_NAME = re.compile(r'^[^\S\n]*name:\s*"((?:[^"\\\n]|\\.)*+)"', re.MULTILINE)


# parser states
_FIELD, _NAMED, _VALUE, _STRING, _LIST = range(5)


def _chunks(text: str):
    """(text, first line number) pieces of about `_CHUNK` characters, cut after a newline, without
    their trailing blanks (where `_TOKEN` finds no token)."""
    start, line = 0, 1
    while start < len(text):
        end = text.find("\n", start + _CHUNK)
        end = len(text) if end < 0 else end + 1
        yield text[start:end].rstrip(), line
        line += text.count("\n", start, end)
        start = end


def _fail(path: str, chunk: str, first_line: int, token_index: int, message: str):
    """SourceError naming the line of the `token_index`-th token of `chunk`."""
    offset = 0
    for k, m in enumerate(_TOKEN.finditer(chunk)):
        offset = m.end()
        if k == token_index:
            break
    line = first_line + chunk.count("\n", 0, offset)
    raise SourceError(f"{path}: line {line}: {message} (not protobuf text format)")


def parse_text_format(text: str, path: str = "<text>") -> dict[str, list]:
    """A protobuf text-format message as {field: [values]}; nested messages are such dicts.

    A state machine over the tokens (no recursion): field name, optional ':', then a scalar, a
    `[...]` list of scalars or a `{...}`/`<...>` message pushed on the stack.
    """
    root: dict[str, list] = {}
    stack: list[tuple[dict, str]] = [(root, "")]  # (message, the token closing it)
    message, closer = root, ""
    state, name = _FIELD, ""
    for chunk, first_line in _chunks(text):
        for k, (comment, string, number, ident, punct, bad) in enumerate(_TOKEN.findall(chunk)):
            if comment:
                continue
            if bad:
                _fail(path, chunk, first_line, k, "a string not closed on its line" if len(bad) > 1
                      else f"unexpected character {bad!r}")
            if state == _STRING:
                if string:  # adjacent strings concatenate
                    values = message[name]
                    values[-1] += _unquote(string)
                    continue
                state = _FIELD
            if state == _FIELD:
                if ident:
                    name, state = ident, _NAMED
                elif punct and punct == closer:
                    stack.pop()
                    message, closer = stack[-1]
                elif punct not in (",", ";"):
                    _fail(path, chunk, first_line, k, f"expected a field name, found {string or number or punct!r}")
                continue
            if state == _NAMED and punct == ":":
                state = _VALUE
                continue
            if punct in _CLOSE and state in (_NAMED, _VALUE):
                if len(stack) >= MAX_DEPTH:
                    _fail(path, chunk, first_line, k, f"messages nested deeper than {MAX_DEPTH}")
                child: dict[str, list] = {}
                message.setdefault(name, []).append(child)
                message, closer = child, _CLOSE[punct]
                stack.append((message, closer))
                state = _FIELD
            elif state == _NAMED:
                _fail(path, chunk, first_line, k, f"expected ':' or '{{' after {name!r}")
            elif state == _VALUE and punct == "[":
                message.setdefault(name, [])
                state = _LIST
            elif state == _LIST and punct in ("]", ","):
                state = _FIELD if punct == "]" else _LIST
            elif punct:
                _fail(path, chunk, first_line, k, f"expected a value for {name!r}, found {punct!r}")
            else:
                message.setdefault(name, []).append(_unquote(string) if string else _scalar(number, ident))
                if state == _VALUE:
                    state = _STRING if string else _FIELD
    if state not in (_FIELD, _STRING) or len(stack) > 1:
        missing = repr(closer) if len(stack) > 1 else "a value"
        raise SourceError(f"{path}: end of file inside a message (missing {missing}) (not protobuf text format)")
    return root


def _scalar(number: str, ident: str) -> Any:
    if number:
        text = number[:-1] if number[-1] in "fF" and (number[-2:-1].isdigit() or number[-2:-1] == ".") else number
        return int(text) if text.lstrip("+-").isdigit() else float(text)
    low = ident.lower()
    if low in ("true", "t"):
        return True
    if low in ("false", "f"):
        return False
    if low in ("inf", "infinity", "nan"):
        return float(low)
    return ident  # an enum value name, e.g. DT_FLOAT


def _unquote(token: str) -> str:
    """A quoted string's text: C escapes resolved; octal/hex escapes are bytes of UTF-8 text."""
    body = token[1:-1]
    if "\\" not in body:
        return body
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
    return b"".join(out).decode("utf-8", errors="replace")


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
    return bool(re.search(r"^[^\S\n]*graph\s*\{", head, re.MULTILINE) and re.search(r"^[^\S\n]*op\s*\{", head, re.MULTILINE))


def load_ge_graph(path: str | os.PathLike) -> Graph:
    """A GE graph dump file as a Graph (kind OM: the device graph, as from atc's JSON)."""
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
