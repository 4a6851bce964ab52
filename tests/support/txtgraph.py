"""A made-up model format's loader, written as ARCHITECTURE.md's recipe says (tests/cli/test_recipes.py copies it
into a copy of the package): a text file `*.tg`, one op a line, `name type input,input -> output`; its kind's name
from kinds.py (the recipe adds it in the package's copy), what its graphs are declared on its registry entry."""
from __future__ import annotations

from pathlib import Path

from accuscope.engine.graphs.graph import Graph, Node, read_text
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError


def load_txtgraph(p: Path) -> Graph:
    nodes: list[Node] = []
    for n, line in enumerate(read_text(p).splitlines(), 1):
        head, arrow, output = line.partition("->")
        words = head.split()
        if not arrow or len(words) not in (2, 3) or not output.strip():
            raise SourceError(f"{p}: line {n}: expected `name type input,input -> output`")
        inputs = words[2].split(",") if len(words) == 3 else []
        nodes.append(Node(words[0], words[1], len(nodes), len(nodes), inputs, [output.strip()]))
    produced = {t for node in nodes for t in node.outputs}
    inputs = list(dict.fromkeys(t for node in nodes for t in node.inputs if t not in produced))
    return Graph(p.stem, kinds.TXTGRAPH, str(p), nodes, inputs, nodes[-1].outputs if nodes else [])  # type: ignore[attr-defined]
