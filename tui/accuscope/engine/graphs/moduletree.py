"""The module hierarchy of a graph whose nodes are grouped by module (msprobe's construct.json, see
msprobegraph.py): a module node has attrs `module` (its path) and `span` (how many nodes after it it
holds, nested modules included). ModuleTree answers what a folding view needs: which nodes show
when some modules are folded, which modules hold a node, which module a row belongs to."""
from __future__ import annotations

from collections.abc import Iterable

from .graph import Node


class ModuleTree:
    """Modules of `nodes` by position; every question costs at most the nodes shown or the depth."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.span = [int(n.attrs.get("span", 0)) if "module" in n.attrs else 0 for n in nodes]
        self.parent = [-1] * len(nodes)  # the innermost module holding each node, -1 for none
        inside: list[int] = []  # modules holding the current node, innermost last
        for p in range(len(nodes)):
            while inside and inside[-1] + self.span[inside[-1]] < p:
                inside.pop()
            if inside:
                self.parent[p] = inside[-1]
            if self.span[p]:
                inside.append(p)

    @property
    def headers(self) -> list[int]:
        """Positions of the modules holding at least one node, in execution order."""
        return [p for p, s in enumerate(self.span) if s]

    def holders(self, position: int) -> list[int]:
        """The modules holding `position`, outermost first."""
        found = []
        p = self.parent[position]
        while p >= 0:
            found.append(p)
            p = self.parent[p]
        return found[::-1]

    def module_of(self, position: int) -> int | None:
        """The module a row stands for: itself when it holds nodes, else the innermost holding it."""
        if self.span[position]:
            return position
        parent = self.parent[position]
        return parent if parent >= 0 else None

    def shown(self, folded: Iterable[int]) -> list[int]:
        """Positions shown in order when the modules `folded` show as their header alone."""
        folded = set(folded)
        rows, p, n = [], 0, len(self.nodes)
        while p < n:
            rows.append(p)
            p += 1 + (self.span[p] if p in folded else 0)
        return rows

    def visible(self, position: int, folded: Iterable[int]) -> int:
        """The row standing for `position` when `folded` are folded: its outermost folded holder, else itself."""
        folded = set(folded)
        return next((h for h in self.holders(position) if h in folded), position)
