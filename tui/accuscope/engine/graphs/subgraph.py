"""Submodel selection: the ops between a start and an end node, and the tensors crossing its border.

The submodel is every op that is both reachable from the start and leads to the end (following
data edges; the outer-scope names an If/Loop/Scan body reads count as inputs of that node). Its
boundary is what an exported submodel needs and gives: the inputs entering it (tensors read
inside but produced outside, weights excepted) and the outputs leaving it (tensors produced
inside and read outside, or network outputs, or outputs of the end ops).

On an offline-model graph (atc JSON) the choice is made among device ops; `to_framework` maps
the chosen device ops to the framework ops fused into them (`_datadump_original_op_names`), and
selects between those in the framework graph, so an export is always a framework submodel.
Invalid choices raise `SelectionError` whose text is the reason, fit to show as it is.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from accuscope.engine.graphs.graph import Graph, Node, Shape
from accuscope.engine.graphs.optypes import INPUT_TYPES
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError, sanitize


class SelectionError(SourceError):
    """A start/end choice that gives no submodel; the message is the reason."""

    @property
    def reason(self) -> str:
        return str(self)


@dataclass
class BoundaryTensor:
    """One tensor crossing the border of a selection."""

    tensor: str
    producer: str | None  # node name; None for a network input
    index: int  # output index at the producer (0 for a network input)
    consumers: list[str]  # inputs: the ops inside reading it; outputs: the ops outside reading it
    shape: Shape | None = None
    dtype: str | None = None
    from_end: bool = False  # an output of one of the end ops
    is_network_output: bool = False

    def __str__(self) -> str:
        dims = "?" if self.shape is None else "x".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.tensor} {self.dtype or '?'}[{dims}]"


@dataclass
class Selection:
    """The ops from `start` to `end` (execution order) of `graph`, with their boundary.

    Ops outside the region that compute a value it reads from weights alone are taken in too
    (`folded`), so an exported submodel keeps weights as weights.
    For an offline-model graph, `framework` is the same region in the framework graph (set by
    `select(..., framework=...)` or `to_framework`), `unmapped` the device ops inside that stand
    for no framework op (TransData, Cast inserted by ATC).
    """

    graph: Graph
    start: list[str]
    end: list[str]
    ops: list[Node]
    inputs: list[BoundaryTensor]
    outputs: list[BoundaryTensor]
    weights: list[str] = field(default_factory=list)
    framework: Selection | None = None
    unmapped: list[str] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)  # ops taken in because they compute from weights only
    notes: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.ops]

    @property
    def kind(self) -> str:
        return self.graph.kind

    def __contains__(self, name: str) -> bool:
        return any(n.name == name for n in self.ops)

    def describe(self) -> list[str]:
        """Lines saying what was chosen, for the CLI and the TUI's confirmation."""
        lines = [f"{len(self.ops)} op{'s' if len(self.ops) != 1 else ''} from {', '.join(self.start)} "
                 f"to {', '.join(self.end)} ({self.graph.kind} graph {self.graph.name})"]
        lines += [f"  in   {b}  -> {', '.join(b.consumers)}" for b in self.inputs]
        lines += [f"  out  {b}" + (" (end)" if b.from_end else f"  -> {', '.join(b.consumers) or 'network output'}")
                  for b in self.outputs]
        if self.folded:
            lines.append(f"  computed from weights only, taken in: {', '.join(self.folded)}")
        if self.unmapped:
            lines.append(f"  device-only ops inside: {', '.join(self.unmapped)}")
        if self.framework is not None:
            fw = self.framework
            lines.append(f"framework ops ({len(fw.ops)}): {', '.join(fw.names[:8])}"
                         + (f" … {len(fw.ops) - 8} more" if len(fw.ops) > 8 else ""))
            lines += [f"  in   {b}" for b in fw.inputs]
            lines += [f"  out  {b}" for b in fw.outputs]
        lines += [f"  note: {n}" for n in self.notes + (self.framework.notes if self.framework else [])]
        return lines


# ------------------------------------------------------------------ edges


def needs(node: Node) -> list[str]:
    """Tensors a node reads: its inputs and the outer-scope names its bodies (If/Loop/Scan) use."""
    hidden = node.attrs.get("_subgraph_inputs") or []
    return list(dict.fromkeys([*node.inputs, *hidden]))


class _Edges:
    """Producer and consumers of every tensor, hidden body inputs included (Graph's own lookups
    index only the listed inputs)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.producer: dict[str, tuple[Node, int]] = {}
        self.consumers: dict[str, list[Node]] = {}
        for node in graph.nodes:
            for j, t in enumerate(node.outputs):
                self.producer.setdefault(t, (node, j))
        for node in graph.nodes:
            for t in needs(node):
                self.consumers.setdefault(t, []).append(node)

    def downstream(self, starts: Iterable[Node]) -> set[int]:
        seen: set[int] = set()
        stack = list(starts)
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack += [c for t in node.outputs for c in self.consumers.get(t, ())]
        return seen

    def upstream(self, ends: Iterable[Node]) -> set[int]:
        seen: set[int] = set()
        stack = list(ends)
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack += [self.producer[t][0] for t in needs(node) if t in self.producer]
        return seen


# ------------------------------------------------------------------ choosing


def find_op(graph: Graph, name: str) -> Node:
    """The node of that name (raw or as dump file names write it), else SelectionError with a hint.

    On an offline-model graph a framework op name stands for the device op it was fused into."""
    name = str(name).strip()
    if not name:
        raise SelectionError("no op named: give a start and an end op")
    node = graph.node(name)
    if node is not None:
        return node
    wanted = sanitize(name)
    for n in graph.nodes:
        if sanitize(n.name) == wanted:
            return n
    if graph.is_device:
        holders = [n for n in graph.nodes if n.fused and (name in n.fused or wanted in map(sanitize, n.fused))]
        if holders:
            return holders[0]
    close = difflib.get_close_matches(name, [n.name for n in graph.nodes], n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise SelectionError(f"no op named {name!r} in {graph.kind} graph {graph.name}{hint}")


def _names(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def select(graph: Graph, start: str | Sequence[str], end: str | Sequence[str],
           framework: Graph | None = None) -> Selection:
    """Every op reachable from a start op that leads to an end op, with the boundary.

    `start`/`end` are op names (or lists of them). For an offline-model graph give `framework`
    (the framework ONNX/Caffe graph) to also get `selection.framework`. Raises SelectionError
    with the reason for a choice that gives no submodel."""
    starts = [find_op(graph, s) for s in _names(start)]
    ends = [find_op(graph, e) for e in _names(end)]
    if not starts or not ends:
        raise SelectionError("give at least one start op and one end op")
    for node in starts + ends:
        if _is_input(node, graph.kind):
            raise SelectionError(f"{node.name} is a network input ({node.type}), not an operator: choose the "
                                 "first op that reads it")
    sel = _between(graph, starts, ends)
    if graph.is_device:
        sel.unmapped = [n.name for n in sel.ops if n.fused == []]
        if framework is not None:
            sel.framework = to_framework(sel, framework)
    return sel


def _between(graph: Graph, starts: list[Node], ends: list[Node]) -> Selection:
    edges = _Edges(graph)
    down = edges.downstream(starts)
    for e in ends:
        if id(e) not in down:
            raise SelectionError(_unreachable(edges, starts, e))
    up = edges.upstream(ends)
    for s in starts:
        if id(s) not in up:
            raise SelectionError(f"start {s.name} (#{s.seq_id}) leads to no end op: no path from it to "
                                 f"{', '.join(e.name for e in ends)}")
    inside = down & up
    folded = _constant_ancestors(graph, edges, inside)
    inside |= {id(n) for n in folded}
    ops = [n for n in graph.nodes if id(n) in inside]
    sel = Selection(graph, [s.name for s in starts], [e.name for e in ends], ops, [], [])
    sel.folded = [n.name for n in folded]
    _boundary(sel, edges, ends)
    return sel


def _constant_ancestors(graph: Graph, edges: _Edges, inside: set[int]) -> list[Node]:
    """Ops outside the region computing a value it reads from weights alone (a Reshape of a bias,
    a Cast of a constant): taken in, so that weights stay weights rather than becoming inputs."""
    constant: set[int] = set()
    inputs = set(graph.inputs)
    for node in graph.nodes:
        reads = needs(node)
        if not reads:  # a generator (or, in an offline model, an op whose constant inputs were dropped)
            if not _is_input(node, graph.kind) and not inputs.intersection(node.outputs):
                constant.add(id(node))
        elif all(t in graph.weights or (t in edges.producer and id(edges.producer[t][0]) in constant)
                         for t in reads):
            constant.add(id(node))
    found: dict[int, Node] = {}
    stack = [n for n in graph.nodes if id(n) in inside]
    while stack:
        node = stack.pop()
        for t in needs(node):
            hit = edges.producer.get(t)
            if hit and id(hit[0]) in constant and id(hit[0]) not in inside and id(hit[0]) not in found:
                found[id(hit[0])] = hit[0]
                stack.append(hit[0])
    return [n for n in graph.nodes if id(n) in found]


def _is_input(node: Node, kind: str) -> bool:
    """A network-input op: Data/RefData, and Caffe's Input and *Data layers."""
    return node.type in INPUT_TYPES or (kind == kinds.CAFFE and (node.type == "Input" or node.type.endswith("Data")))


def _unreachable(edges: _Edges, starts: list[Node], end: Node) -> str:
    names = ", ".join(s.name for s in starts)
    text = f"end {end.name} (#{end.seq_id}) is not reachable from start {names}: no data path leads from " \
           f"{'it' if len(starts) == 1 else 'them'} to the end"
    if any(id(s) in edges.downstream([end]) for s in starts):
        text += " (the end runs before the start: swap them?)"
    elif len(starts) == 1:
        text += f" (they lie on separate branches; {end.name} runs at #{end.seq_id}, {names} at #{starts[0].seq_id})"
    return text


def _boundary(sel: Selection, edges: _Edges, ends: list[Node]) -> None:
    graph = sel.graph
    inside = {id(n) for n in sel.ops}
    end_ids = {id(n) for n in ends}
    network_outputs = set(graph.outputs)
    shapes: dict[str, Shape | None] = {}
    dtypes: dict[str, str | None] = {}
    for n in graph.nodes:
        for t, s, d in zip(n.outputs, n.output_shapes, n.output_dtypes):
            shapes.setdefault(t, s)
            dtypes.setdefault(t, d)
        for t, s, d in zip(n.inputs, n.input_shapes, n.input_dtypes):
            if shapes.get(t) is None and s is not None:
                shapes[t] = s
            if dtypes.get(t) is None and d is not None:
                dtypes[t] = d
    entering: dict[str, BoundaryTensor] = {}
    weights: list[str] = []
    for node in sel.ops:
        for t in needs(node):
            hit = edges.producer.get(t)
            if hit is not None and id(hit[0]) in inside:
                continue
            if t in graph.weights:
                if t not in weights:
                    weights.append(t)
                continue
            if t not in entering:
                entering[t] = BoundaryTensor(t, hit[0].name if hit else None, hit[1] if hit else 0, [],
                                             shapes.get(t), dtypes.get(t))
            if node.name not in entering[t].consumers:
                entering[t].consumers.append(node.name)
    leaving = []
    folded = set(sel.folded)
    for node in sel.ops:
        if node.name in folded:
            continue
        for j, t in enumerate(node.outputs):
            outside = [c.name for c in edges.consumers.get(t, ()) if id(c) not in inside]
            is_end = id(node) in end_ids
            if outside or t in network_outputs or is_end:
                leaving.append(BoundaryTensor(t, node.name, j, list(dict.fromkeys(outside)), shapes.get(t),
                                              dtypes.get(t), is_end, t in network_outputs))
    sel.inputs, sel.outputs, sel.weights = list(entering.values()), leaving, weights


# ------------------------------------------------------------------ device ops -> framework ops


def framework_names(node: Node) -> list[str]:
    """The framework ops a device op stands for: its fused ops, or itself when it kept its name."""
    if node.fused is None:
        return [node.name]
    return list(node.fused)


def to_framework(sel: Selection, framework: Graph) -> Selection:
    """The region of the framework graph the device ops of `sel` stand for: every framework op
    reachable from a member of a start device op that leads to a member of an end device op."""
    if not sel.graph.is_device:
        return sel
    om = sel.graph

    def members(names: list[str], role: str) -> list[Node]:
        found: list[Node] = []
        for name in names:
            node = om.node(name)
            fw = framework_names(node) if node is not None else [name]
            if node is not None and node.fused == []:
                raise SelectionError(f"{role} {name} is a device-only op ({node.type}, inserted by the "
                                     "converter): no framework op to export; choose a neighbour")
            hits = [h for f in fw if (h := framework.node(f) or _by_sanitized(framework, f)) is not None]
            if not hits:
                raise SelectionError(f"{role} {name} stands for framework op(s) {', '.join(fw)}, none of which is "
                                     f"in the framework model {framework.path}")
            found += [h for h in hits if h not in found]
        return found

    starts, ends = members(sel.start, "start"), members(sel.end, "end")
    edges = _Edges(framework)
    # members of a fused start op that read nothing from another member are the real entries,
    # the last members of the end ops the real exits; the others are inside anyway
    down = edges.downstream(starts)
    ends = [e for e in ends if id(e) in down] or ends
    fw = _between(framework, _entries(edges, starts), _exits(edges, ends))
    fw.notes += _unlisted(sel, fw)
    return fw


def _entries(edges: _Edges, nodes: list[Node]) -> list[Node]:
    ids = {id(n) for n in nodes}
    return [n for n in nodes if not any(edges.producer.get(t, (None,))[0] is not None
                                        and id(edges.producer[t][0]) in ids for t in needs(n))] or nodes


def _exits(edges: _Edges, nodes: list[Node]) -> list[Node]:
    ids = {id(n) for n in nodes}
    return [n for n in nodes if not any(id(c) in ids for t in n.outputs for c in edges.consumers.get(t, ()))] or nodes


def _by_sanitized(graph: Graph, name: str) -> Node | None:
    wanted = sanitize(name)
    return next((n for n in graph.nodes if sanitize(n.name) == wanted), None)


def _unlisted(sel: Selection, fw: Selection) -> list[str]:
    """Say when the framework region and the fused ops of the chosen device ops differ."""
    listed = {f for n in sel.ops for f in framework_names(n) if n.fused != []}
    chosen = set(fw.names)
    notes = []
    extra = [n for n in fw.names if n not in listed and n not in fw.folded]
    missing = sorted(f for f in listed if f not in chosen)
    if extra:
        notes.append(f"framework ops with no device op of their own (folded or removed by the converter): "
                     f"{', '.join(extra[:10])}" + (" …" if len(extra) > 10 else ""))
    if missing:
        notes.append(f"fused framework ops outside the framework region or not in the framework model: "
                     f"{', '.join(missing[:10])}" + (" …" if len(missing) > 10 else ""))
    return notes
