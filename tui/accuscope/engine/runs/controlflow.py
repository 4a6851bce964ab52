"""Control flow made plain: the branch each `If` takes, inlined into the main graph.

onnxruntime returns only main-graph values, so the ops inside an `If` branch are never dumped,
paired, re-run or ranked (silero VAD computes everything inside one `If`, nested three deep). When
the condition of an `If` can be evaluated for the inputs at hand (`values`: a run fetching the
condition tensors, or a dump holding them), the branch it takes replaces it:

- the branch's nodes go where the `If` was, its initializers into the main graph;
- the branch's outputs become the `If`'s output names: the node producing one inside the branch
  writes it directly (an `Identity` named `{if}/output_{k}` passes an outer-scope or repeated one);
- names are kept: a name clashing with one of the main graph gets `__{if}` appended, an unnamed
  node becomes `{if}/{op_type}_{position in the branch}`, so a reference and a candidate converted
  from it inline alike and pair by name; outer-scope references need nothing, they name main-graph
  values already, and names inside nested bodies are renamed with the clash;
- an `If` inside the branch is top-level now: it is decided in the next round (one run each).

`Loop` and `Scan` are left as they are: their bodies run many times, with no one value per
tensor to dump; `expand_ifs` says so in `kept`, as it does for an `If` whose condition is unknown.
Used by `ortdump.dump_onnx` (which saves the expanded model as the dump's model.onnx, the model
the graph loader, the pairing and the advisor's re-runs then read) and by `oprerun.FrameworkModel`
for a reference model that still holds its `If`s (decided from the golden dump's values).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from accuscope.engine.runs.onnxmodel import node_names

MAX_ROUNDS = 64  # nesting depth of If inside If expanded at most (one evaluation each)
CONTROL_FLOW = {"If", "Loop", "Scan"}


@dataclass
class Expansion:
    """What `expand_ifs` did: the branch each expanded If took, and why others stay."""

    taken: dict[str, str] = field(default_factory=dict)  # If node name -> "then_branch" | "else_branch"
    kept: dict[str, str] = field(default_factory=dict)  # control-flow node name -> why it stays

    def to_dict(self) -> dict:
        return {"expanded": dict(self.taken), "kept": dict(self.kept)}


def _bodies(node) -> list:
    return [b for a in node.attribute for b in ([a.g] if a.HasField("g") else []) + list(a.graphs)]


def has_control_flow(graph) -> bool:
    return any(_bodies(n) for n in graph.node)


def _is_if(node) -> bool:
    return node.op_type == "If" and node.domain in ("", "ai.onnx")


def _defined(graph) -> set[str]:
    """Names the main graph defines: inputs, initializers, node outputs."""
    names = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    names |= {t.values.name for t in graph.sparse_initializer}
    names |= {o for n in graph.node for o in n.output if o}
    return names


def _graphs_below(body) -> list:
    """The body and every graph nested in it, as a loop (no recursion on data)."""
    found, stack = [], [body]
    while stack:
        g = stack.pop()
        found.append(g)
        for n in g.node:
            stack.extend(_bodies(n))
    return found


def _rename_all(body, mapping: dict[str, str]) -> None:
    """Rename values everywhere in the body and its nested graphs (outer-scope reads included)."""
    if not mapping:
        return
    for g in _graphs_below(body):
        for n in g.node:
            for seq in (n.input, n.output):
                for i, t in enumerate(seq):
                    if t in mapping:
                        seq[i] = mapping[t]
        for v in list(g.output) + list(g.input) + list(g.value_info):
            if v.name in mapping:
                v.name = mapping[v.name]
        for t in g.initializer:
            if t.name in mapping:
                t.name = mapping[t.name]


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def inline_branch(graph, node, branch: str, name: str) -> None:
    """Replace the If `node` of `graph` (the main graph) by its `branch` ("then_branch" or
    "else_branch"), in place; `name` is the If's node name as accuscope names it."""
    import onnx
    body = onnx.GraphProto()
    body.CopyFrom(next(a.g for a in node.attribute if a.name == branch))
    outer = _defined(graph) - {o for o in node.output if o}
    local = {t.name for t in body.initializer} | {o for n in body.node for o in n.output if o}
    clash: dict[str, str] = {}
    taken = outer | local
    for t in sorted(local & outer):
        clash[t] = _fresh(f"{t}__{name}", taken)
        taken.add(clash[t])
    _rename_all(body, clash)
    produced = {o: n for n in body.node for o in n.output if o}
    passes: list = []
    renames: dict[str, str] = {}
    for k, (out, want) in enumerate(zip(body.output, node.output)):
        if not want:
            continue
        if out.name in produced and out.name not in renames and out.name not in {v.name for v in graph.output}:
            renames[out.name] = want
        else:  # an outer value, a branch value given twice: passed on by an Identity
            passes.append(onnx.helper.make_node("Identity", [renames.get(out.name, out.name)], [want],
                                                name=f"{name}/output_{k}"))
    _rename_all(body, renames)
    for i, n in enumerate(body.node):
        if not n.name:
            n.name = f"{name}/{n.op_type}_{i}"
    graph.initializer.extend(body.initializer)
    graph.sparse_initializer.extend(body.sparse_initializer)
    at = list(graph.node).index(node)
    new = list(body.node) + passes
    kept = list(graph.node)
    del graph.node[:]
    graph.node.extend(kept[:at] + new + kept[at + 1:])


def _constant_value(graph, tensor: str) -> np.ndarray | None:
    from onnx import numpy_helper
    for t in graph.initializer:
        if t.name == tensor:
            return numpy_helper.to_array(t)
    for n in graph.node:
        if n.op_type == "Constant" and tensor in n.output and n.attribute and n.attribute[0].name == "value":
            return numpy_helper.to_array(n.attribute[0].t)
    return None


def expand_ifs(model, values: Callable[[list[str]], dict[str, np.ndarray]]) -> Expansion:
    """Inline, in place, the branch every decidable If of the main graph takes (nested ones too,
    round by round). `values(tensors)` gives the condition tensors' values it can (a run of the
    model as it stands, a dump): one call per round, with the conditions of the Ifs at top level."""
    graph = model.graph
    done = Expansion()
    undecided: set[str] = set()
    for _ in range(MAX_ROUNDS):
        named = list(zip(graph.node, node_names(graph.node)))
        ifs = [(n, name) for n, name in named if _is_if(n) and name not in undecided and n.input and n.input[0]]
        if not ifs:
            break
        conds = {n.input[0] for n, _ in ifs}
        known = {t: v for t in conds if (v := _constant_value(graph, t)) is not None}
        wanted = sorted(conds - set(known))
        try:
            got = values(wanted) if wanted else {}
        except Exception:  # noqa: BLE001 - onnx/onnxruntime raise their own exception types: the Ifs stay
            got = {}
        known.update(got or {})
        progress = False
        for n, name in ifs:
            v = known.get(n.input[0])
            arr = None if v is None else np.asarray(v)
            if arr is None or arr.size != 1:
                undecided.add(name)
                done.kept[name] = ("its condition could not be evaluated for these inputs" if arr is None
                                   else f"its condition has {arr.size} values, not one")
                continue
            branch = "then_branch" if bool(arr.reshape(-1)[0]) else "else_branch"
            inline_branch(graph, n, branch, name)
            done.taken[name] = branch
            progress = True
        if not progress:
            break
    for n, name in zip(graph.node, node_names(graph.node)):
        if _bodies(n) and name not in done.kept:
            done.kept[name] = (f"a {n.op_type} body runs many times: not expanded" if n.op_type in ("Loop", "Scan")
                               else f"a {n.op_type} node holding graphs: not expanded")
    return done
