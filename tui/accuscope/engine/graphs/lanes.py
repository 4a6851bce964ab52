"""Git-log style lanes for a model graph drawn one op per row, in execution order.

A *lane* is a column holding an open edge: a tensor produced by an op on an earlier row and still
awaited by an op on a later row. Every row draws, left to right, one cell per column and a
connector cell after it (two characters per column):

    ●          stem          the op's own cell is ●; its first awaited output keeps its column
    ├─●        conv1         a tensor still awaited further down branches off (├) to a new column
    │ ●        conv2         a chain stays in one column
    ●─┘        Add           the last consumer merges the lane in (┘) and the column is free again
    ●─┐        Split         further awaited outputs open new columns (┐)
    │ │

A lane passing a row untouched is `│`, a horizontal line crossing it `┼`. The op sits in the column
of the leftmost input whose lane ends there (so chains are straight), else in the leftmost free
column; new lanes take the leftmost free column. Edges to an op on an earlier row (a cycle, an
unsorted graph) are not drawn.

`layout(graph)` makes one pass over the ops and their edges (O(edges + cells drawn)); rows are
stored as strings of at most `LIMIT` columns plus the count of lanes beyond, and `Lanes.draw(row,
cap)` cuts a row to `cap` columns with a `…N` marker (N lanes not shown) for very wide graphs.
No textual, no numpy: the graph screen renders only the rows on screen from these strings.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

from accuscope.engine.graphs.graph import Graph, Node

NODE = "●"
MORE = "…"
LIMIT = 64  # columns kept per row; lanes beyond are only counted
# (up, down, left, right) -> box character
BOX = {
    (True, True, False, False): "│", (False, False, True, True): "─",
    (True, True, True, True): "┼", (True, False, True, False): "┘", (True, False, False, True): "└",
    (False, True, True, False): "┐", (False, True, False, True): "┌", (True, True, False, True): "├",
    (True, True, True, False): "┤", (True, False, True, True): "┴", (False, True, True, True): "┬",
    (False, False, False, False): " ",
    (True, False, False, False): "╵", (False, True, False, False): "╷",
    (False, False, True, False): "─", (False, False, False, True): "─",
}


def reads(node: Node) -> list[str]:
    """Tensors a node reads, each once: its inputs and the outer-scope names its bodies use."""
    hidden = node.attrs.get("_subgraph_inputs") or []
    return list(dict.fromkeys([*node.inputs, *hidden]))


@dataclass
class Lanes:
    """Per-row drawings of a graph's edges; row i is graph.nodes[i]."""

    rows: list[str]  # two cells per column (glyph, connector), trailing blanks trimmed
    columns: list[int]  # the column of each row's op
    beyond: list[int]  # lanes open at columns >= LIMIT on each row (not in `rows`)
    open_after: list[int]  # lanes open below each row (edges passing the boundary to the next row)
    width: int = 0  # most columns any row uses
    edges: int = 0  # producer -> consumer edges drawn
    notes: list[str] = field(default_factory=list)
    _most_beyond: int | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.rows)

    def draw(self, row: int, cap: int = LIMIT) -> str:
        """Row `row` in at most `cap` columns: lanes beyond become `…N`; an op beyond the cap is
        drawn after the marker so it is always visible. Not padded."""
        text = self.rows[row]
        cap = max(1, min(cap, LIMIT))
        column = self.columns[row]
        if 2 * cap >= len(text) and not self.beyond[row] and column < cap:
            return text.rstrip()
        shown = text[:2 * cap]
        hidden = sum(1 for c in text[2 * cap::2] if c != " " and c != "─") + self.beyond[row]
        if cap <= column < LIMIT:
            hidden -= 1  # the op itself is drawn after the marker, not counted
        marker = f"{MORE}{hidden}" if hidden > 0 else ""
        if column >= cap:
            return (shown[:-1] + ("─" if shown[-1:] == "─" else " ") + marker + NODE).rstrip()
        return (shown.rstrip() + " " + marker).rstrip() if marker else shown.rstrip()

    def drawn_width(self, cap: int = LIMIT) -> int:
        """Cells `draw(row, cap)` may take on any row: the width to pad the lanes to."""
        cap = max(1, min(cap, LIMIT))
        width = 2 * min(self.width, cap)
        if self.width > cap or self.most_beyond:
            width += len(MORE) + len(str(max(self.width, self.most_beyond))) + 2
        return width

    @property
    def most_beyond(self) -> int:
        if self._most_beyond is None:
            self._most_beyond = max(self.beyond, default=0)
        return self._most_beyond


def layout(graph: Graph | Iterable[Node]) -> Lanes:
    """Lanes for the ops of `graph` (or a list of nodes) in their list order."""
    nodes = graph.nodes if isinstance(graph, Graph) else list(graph)
    row_of_producer: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for t in node.outputs:
            row_of_producer.setdefault(t, i)
    # how many later ops still read each tensor (distinct ops, after its producer)
    waiting: dict[str, int] = {}
    edges = 0
    node_reads = []
    for i, node in enumerate(nodes):
        mine = [t for t in reads(node) if row_of_producer.get(t, i) < i]
        node_reads.append(mine)
        for t in mine:
            waiting[t] = waiting.get(t, 0) + 1
        edges += len(mine)

    lane_of: dict[str, int] = {}  # open tensor -> column
    occupied: list[bool] = []  # column -> holds a lane
    free: list[int] = []  # heap of free columns below len(occupied)
    beyond_count = 0  # open lanes at columns >= LIMIT
    rows: list[str] = []
    columns: list[int] = []
    beyond: list[int] = []
    open_after: list[int] = []
    width = 0

    def take() -> int:
        while free:
            c = heapq.heappop(free)
            if c < len(occupied) and not occupied[c]:
                return c
        occupied.append(False)
        return len(occupied) - 1

    for i, node in enumerate(nodes):
        ins: list[tuple[int, bool]] = []  # (column, lane ends here)
        for t in node_reads[i]:
            c = lane_of.get(t)
            if c is None:
                continue
            waiting[t] -= 1
            ins.append((c, waiting[t] == 0))
        closing = [c for c, ends in ins if ends]
        k = min(closing) if closing else take()
        outs = [t for t in node.outputs if waiting.get(t, 0) > 0 and row_of_producer.get(t) == i]
        beyond_before = beyond_count
        new_cols: list[int] = []
        # lanes: close the inputs that end here, then open the outputs
        for t in node_reads[i]:
            if t in lane_of and waiting[t] == 0:
                c = lane_of.pop(t)
                occupied[c] = False
                if c >= LIMIT:
                    beyond_count -= 1
        ended = [c for c in closing if c != k]
        if outs:
            lane_of[outs[0]] = k
            occupied[k] = True
            for t in outs[1:]:
                c = take()
                occupied[c] = True
                lane_of[t] = c
                new_cols.append(c)
        else:
            occupied[k] = False
        for c in [k, *new_cols]:
            if c >= LIMIT and occupied[c]:
                beyond_count += 1
        # lanes beyond LIMIT open above or below this row, the op's own column not counted
        beyond_row = beyond_before + sum(1 for c in new_cols if c >= LIMIT) - (k >= LIMIT and bool(closing))
        # draw: every column up to the last one holding a lane or touched by this row's lines
        touched = [c for c, _ in ins] + new_cols
        lo, hi = min(touched + [k]), max(touched + [k])
        ends_here = {c for c, ends in ins if ends}
        inputs = {c for c, _ in ins}
        opened = set(new_cols)
        while occupied and not occupied[-1] and len(occupied) - 1 > k:
            occupied.pop()
        ncols = max(len(occupied), hi + 1)
        cells = []
        for c in range(min(ncols, LIMIT)):
            if c == k:
                glyph = NODE
            else:
                if c in inputs:
                    up, down = True, c not in ends_here
                elif c in opened:
                    up, down = False, True
                else:
                    up = down = c < len(occupied) and occupied[c]
                glyph = BOX[(up, down, lo < c <= hi, lo <= c < hi)]
            cells.append(glyph)
            cells.append("─" if lo <= c < hi else " ")
        rows.append("".join(cells).rstrip())
        columns.append(k)
        beyond.append(beyond_row)
        open_after.append(len(lane_of))
        width = max(width, ncols)
        for c in ended:
            heapq.heappush(free, c)
        if not outs:
            heapq.heappush(free, k)
        while occupied and not occupied[-1]:
            occupied.pop()
    return Lanes(rows, columns, beyond, open_after, width, edges)

