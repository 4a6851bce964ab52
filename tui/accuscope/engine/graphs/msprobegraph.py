"""msprobe's construct.json as a Graph for the graph pane (`load_msprobe`): every call of dump.json,
each module call heading the calls it ran (the module hierarchy moduletree.py folds)."""
from __future__ import annotations

import os

from accuscope.engine.graphs.graph import Graph, Node
from accuscope.engine.sources import msprobe
from accuscope.engine.sources.msprobe import KIND, OPTIMIZER, grads_module, module_path
from accuscope.engine.sources.tensor import INPUT, OUTPUT, Problem


def load_msprobe(path: str, step: str | int | None = None, rank: str | int | None = None) -> Graph:
    """construct.json as a Graph for the graph pane: every call of dump.json, each module call
    placed before the calls it ran (msprobe writes a module when its forward ends, after them), so
    a module is a header followed by its contents. A module node has attrs `module` (its path),
    `depth` (how many modules hold it) and `span` (the nodes after it that it holds); a call's
    `subgraph` names its module call; a module construct.json names without a call of its own
    still heads its calls. `path` holding several step/rank folders: the first one matching
    (their modules are the same)."""
    folder = msprobe.first_folder(path, step, rank)
    problems: list[Problem] = []
    parents = msprobe.construct_parents(folder, problems)
    return module_graph(os.path.basename(os.path.normpath(path)), folder, msprobe.call_tensors(folder), parents,
                        problems)


def module_graph(name: str, folder: str, calls: dict[str, list[tuple[str, str, tuple[int, ...]]]],
                 parents: dict[str, str], problems: list[Problem]) -> Graph:
    """The graph pane's Graph of one run's calls (call -> its tensors' (name, io, shape), in execution order)
    and construct.json's `parents` (call -> the module call it ran inside), as `load_msprobe` describes it;
    a run merged from several ranks (compare/shards.py) gives its merged calls and parents, renamed alike."""
    _grads_parents(calls, parents)
    order: list[str] = []
    placed: set[str] = set()

    def place(call: str) -> None:
        """The call after its parent modules: the chain up to a placed one, outermost first (a loop:
        construct.json may chain thousands deep; a cycle in it is not followed)."""
        chain, seen = [], set()
        while call not in placed and call not in seen:
            chain.append(call)
            seen.add(call)
            call = parents.get(call, "")
            if not call:
                break
        placed.update(chain)
        order.extend(reversed(chain))

    for call in calls:
        if not grads_module(call) or call not in parents:
            place(call)
    grads = [c for c in calls if grads_module(c) and c in parents and c not in placed]
    if grads:  # gradients after the last call their module holds (msprobe writes them mid-module)
        last = _last_inside(order, parents)
        after: dict[int, list[str]] = {}
        for call in grads:
            after.setdefault(last.get(parents[call], len(order) - 1), []).append(call)
        order = [c for k, call in enumerate(order) for c in (call, *after.get(k, ()))] + after.get(-1, [])
        placed.update(grads)
    depth: dict[str, int] = {}
    nodes: list[Node] = []
    for call in order:
        parent = parents.get(call, "")
        depth[call] = depth.get(parent, -1) + 1 if parent in depth else 0
        module = module_path(call) or (OPTIMIZER if call == OPTIMIZER else "")
        parts = call.split(".")
        kind = call if len(parts) < 3 else parts[-3] if module and parts[-2] in ("forward", "backward") else \
            parts[-2] if module else parts[1]
        mine = calls.get(call, [])
        node = Node(call, kind, len(nodes), len(nodes) + 1, [name for name, io, _ in mine if io == INPUT],
                    [name for name, io, _ in mine if io == OUTPUT], subgraph=parent,
                    output_shapes=[shape for _, io, shape in mine if io == OUTPUT],
                    attrs={"depth": depth[call], **({"module": module} if module else {})})
        nodes.append(node)
    inside: list[Node] = []  # the module nodes holding the current one
    for node in nodes:  # a module holds the nodes from its own to the one that takes it off the stack
        while inside and inside[-1].name != node.subgraph and depth[inside[-1].name] >= node.attrs["depth"]:
            _close(inside.pop(), node.index)
        if "module" in node.attrs:
            inside.append(node)
    for holder in inside:
        _close(holder, len(nodes))
    return Graph(name, KIND, folder, nodes, [], [], notes=[str(p) for p in problems])


def _last_inside(order: list[str], parents: dict[str, str]) -> dict[str, int]:
    """module call -> the position in `order` of the last call it holds (or itself)."""
    last: dict[str, int] = {}
    for k, call in enumerate(order):
        seen, c = set(), call
        while c and c not in seen:  # construct.json's chain up (a cycle is not followed)
            last[c] = k
            seen.add(c)
            c = parents.get(c, "")
    return last


def _grads_parents(calls, parents: dict[str, str]) -> None:
    """construct.json names no parent for a parameters_grad call: place it in its module's backward call of
    the same counter (else the module's first call), so the graph pane shows the gradients under their module."""
    first: dict[str, str] = {}
    for call in calls:
        path = module_path(call)
        if path:
            first.setdefault(path, call)
    for call in calls:
        module = grads_module(call)
        if not module or call in parents:
            continue
        head, _, counter = call.rpartition(".parameters_grad")
        backward = f"{head}.backward{counter}"
        parents[call] = backward if backward in calls else first.get(module, "")
        if not parents[call]:
            del parents[call]


def _close(module: Node, end: int) -> None:
    """A module node's span: the nodes after it up to `end` (the first one it does not hold)."""
    if end - module.index > 1:
        module.attrs["span"] = end - module.index - 1
