"""tpu-mlir's MLIR text files (`{m}_origin.mlir`, the top `{m}.mlir`, the tpu `{prefix}_tpu.mlir`) -> Graph.

Facts from the files model_transform and model_deploy write (tpu-mlir 1.30): one op per line in
`func.func` bodies, `%3 = "top.Conv"(%0, %1, %2) {attrs} : (operand types) -> result type loc(#loc4)`,
a result group `%5:2 = ...` used as `%5#0`; the loc table at the end (`#loc4 = loc("name")`, or
`fused[...]` for several results) names each op's result: the npz keys of its runs (`{onnx output}_{OpType}`
for ops that came from ONNX). `top.Weight` results are weights (their values live in a separate
npz), `top.None` is no value, `top.Input` ops are the network inputs, `return` names the outputs.

What was fused: model_transform's canonicalization folds ops into others (a BatchNormalization into
the Conv before it, which keeps the Conv's loc) and removes some (Identity, Reshape pairs). With the
run's `{m}_origin.mlir` beside the file (model_transform writes it), an origin op that is gone is
charged to the op its input came from, walking back through other gone ops: `node.fused` lists that
op's own name, then those it absorbed, in origin order; None when nothing was folded into it (or no
origin file is found). The tpu dialect's `do_relu = true` on an op also marks a Relu folded into it
(`attrs`).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from accuscope.engine.graphs.graph import Graph, Node, fill_input_shapes, read_text
from accuscope.engine.sources import kinds
from accuscope.engine.sources.mlirtext import LocTable, loc_use, tensor_type, tensor_types  # one reading of op lines
from accuscope.engine.sources.tensor import SourceError

KIND = kinds.MLIR
# each pattern runs at one start (match), or from where a word starts (_ATTR's lookbehind: a long
# word is not tried again from each of its letters), with no two quantifiers over the same characters
_OP = re.compile(r'^\s*(?:(%[\w.$-]+)(?::(\d+))?\s*=\s*)?"?((?:top|tpu)\.[A-Za-z0-9_]+)"?\s*(?:\(([^)]*)\))?')
_RETURN = re.compile(r'^\s*(?:return|func\.return)\s+([^:]+):')
_VALUE = re.compile(r'%[\w.$-]+(?:#\d+)?')
_ATTR = re.compile(r'(?<!\w)(\w++)\s*+=\s*+(true|false|-?\d++(?:\.\d++)?(?:e[+-]?\d++)?(?:\s*+:\s*+\w++)?|"[^"]*+")')
SKIPPED = frozenset({"top.None"})
INPUT_OPS = frozenset({"top.Input"})
WEIGHT_OPS = frozenset({"top.Weight"})
ORIGIN_SUFFIX = "_origin.mlir"


def sniff(path: str) -> bool:
    """A tpu-mlir .mlir text: top or tpu dialect ops in its first 64 KB."""
    if not os.path.isfile(path) or not path.lower().endswith(".mlir"):
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return False
    return '"top.' in head or '"tpu.' in head


def load_mlir(path: str | Path, origin: str | Path | None = None) -> Graph:
    """The ops of a top/tpu .mlir file in file (execution) order, named by their locs; with the
    run's origin .mlir (found beside it when not given), what each op absorbed (`fused`)."""
    p = Path(path)
    nodes, inputs, outputs, weights, notes = _parse(p)
    if not nodes and not inputs:
        raise SourceError(f"{p}: no top/tpu ops with loc names (expected an .mlir file model_transform or "
                          "model_deploy wrote)")
    origin_path = Path(origin) if origin else _origin_beside(p)
    if origin_path is not None and origin_path.resolve() != p.resolve():
        try:
            _mark_fused(nodes, _parse(origin_path)[0])
        except SourceError as exc:
            notes.append(f"{origin_path.name}: not read ({exc}); fusion not known")
    graph = Graph(p.stem, KIND, str(p), nodes, inputs, outputs, weights, notes)
    fill_input_shapes(graph.nodes, {})
    return graph


def _origin_beside(p: Path) -> Path | None:
    """`{m}_origin.mlir` in the same folder whose model name `{m}` starts this file's name."""
    if p.name.endswith(ORIGIN_SUFFIX):
        return None
    try:
        names = sorted(os.listdir(p.parent))
    except OSError:
        return None
    found = [n for n in names if n.endswith(ORIGIN_SUFFIX) and p.name.startswith(n[: -len(ORIGIN_SUFFIX)])]
    return p.parent / max(found, key=len) if found else None


def _parse(p: Path) -> tuple[list[Node], list[str], list[str], set[str], list[str]]:
    text = read_text(p)
    table = LocTable(str(p))
    lines = text.splitlines()
    for line in lines:
        table.read(line)
    names_of: dict[str, str] = {}  # SSA value -> tensor (loc) name
    nodes: list[Node] = []
    inputs: list[str] = []
    outputs: list[str] = []
    weights: set[str] = set()
    notes: list[str] = []
    for number, line in enumerate(lines, 1):
        r = _RETURN.match(line)
        if r:
            outputs += [names_of[v] for v in _VALUE.findall(r.group(1)) if v in names_of]
            continue
        m = _OP.match(line)
        if not m or not m.group(1):
            continue
        value, op_type, operands = m.group(1), m.group(3), m.group(4) or ""
        if op_type in SKIPPED:
            continue
        after = line[line.rfind("->") + 2:] if "->" in line else ""
        count = _result_count(p, number, after, len(text), m.group(2))
        use = loc_use(line)
        locs = table.names(use) if use else None
        if not locs:
            locs = [f"{value[1:]}" if count == 1 else f"{value[1:]}#{k}" for k in range(count)]
            notes.append(f"line {number}: {op_type} has no loc name; named {locs[0]}")
        results = [value] if count == 1 else [f"{value}#{k}" for k in range(count)]
        for k, v in enumerate(results):
            names_of[v] = locs[k] if k < len(locs) else f"{locs[0]}#{k}"
        outs = [names_of[v] for v in results]
        if op_type in WEIGHT_OPS:
            weights.update(outs)
            continue
        if op_type in INPUT_OPS:
            inputs += outs
        shapes, dtypes = [], []
        for t in tensor_types(after):
            try:
                dtype, shape = tensor_type(t)
            except ValueError as exc:
                raise SourceError(f"{p}: line {number}: {exc}") from None
            shapes.append(shape)
            dtypes.append(dtype or None)
        attrs = {k: v.strip('"') for k, v in _ATTR.findall(_attr_text(line))}
        ins = [names_of[v] for v in _VALUE.findall(operands) if v in names_of]
        nodes.append(Node(outs[0], op_type, len(nodes), len(nodes) + 1, ins, outs, attrs,
                          output_shapes=shapes[: len(outs)], output_dtypes=dtypes[: len(outs)]))
    return nodes, inputs, outputs, weights, notes


def _result_count(p: Path, number: int, after: str, size: int, digits: str | None) -> int:
    """How many results `%5:2 = ...` declares (1 without `:N`), no more than the line's result types
    after `->` can name (one per comma and one; an op with regions has them on a later line: no more
    than the file has characters); SourceError above that."""
    if digits is None:
        return 1
    most = after.count(",") + 1 if after else size
    if len(digits) > len(str(most)) or not 1 <= int(digits) <= most:
        shown = digits if len(digits) <= 24 else f"{digits[:12]}... ({len(digits)} digits)"
        where = f"its result types after `->` name at most {most}" if after else f"the file has {size} characters"
        raise SourceError(f"{p}: line {number}: a group of {shown} results, but {where}")
    return int(digits)


_BRACE = re.compile(r"[{}]")


def _attr_text(line: str) -> str:
    """The `{...}` attribute dictionary of an op line (braces balanced), '' without one."""
    start = line.find("{", line.find(")"))
    if start < 0:
        return ""
    depth = 0
    for m in _BRACE.finditer(line, start):
        depth += 1 if m.group() == "{" else -1
        if depth == 0:
            return line[start + 1:m.start()]
    return ""


def _mark_fused(nodes: list[Node], origin: list[Node]) -> None:
    """Charge every origin op missing from `nodes` to the kept op that absorbed it: a kept consumer
    that now reads the gone op's input (a Conv folded into the Relu after it, which keeps the Relu's
    loc), else the kept producer of its input (a BatchNormalization folded into the Conv before it)."""
    kept = {n.name: n for n in nodes}
    producer = {t: n for n in origin for t in n.outputs}
    consumers: dict[str, list[Node]] = {}
    for n in origin:
        for t in n.inputs:
            consumers.setdefault(t, []).append(n)
    absorbed: dict[str, list[str]] = {}
    for n in origin:
        if n.name in kept or n.type in INPUT_OPS or not n.inputs:
            continue
        owner = _absorbing_consumer(n, kept, consumers) or _absorbing_producer(n, kept, producer)
        if owner is not None:
            absorbed.setdefault(owner, []).append(n.name)
    for name, gone in absorbed.items():
        kept[name].fused = [name] + gone


def _absorbing_consumer(gone: Node, kept: dict[str, Node], consumers: dict[str, list[Node]]) -> str | None:
    """The kept op downstream of `gone` (through other gone ops) that reads `gone`'s first input itself."""
    frontier = [gone]
    seen: set[str] = set()
    while frontier:
        n = frontier.pop()
        if n.name in seen or len(seen) > 8:
            continue
        seen.add(n.name)
        for c in (c for t in n.outputs for c in consumers.get(t, ())):
            if c.name in kept:
                if gone.inputs[0] in kept[c.name].inputs:
                    return c.name
            else:
                frontier.append(c)
    return None


def _absorbing_producer(gone: Node, kept: dict[str, Node], producer: dict[str, Node]) -> str | None:
    """The kept op upstream of `gone` (first inputs, through other gone ops)."""
    current, seen = gone, set()
    while current.inputs and current.name not in seen:
        seen.add(current.name)
        up = producer.get(current.inputs[0])
        if up is None:
            return None
        if up.name in kept:
            return up.name if up.type not in INPUT_OPS else None
        current = up
    return None

