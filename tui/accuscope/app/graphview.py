"""The graph widget: one op per line in execution order with git-log lanes, the op's badge (the
table's marks and its worst metric), type, name and output shape; and OpResults, which maps result
table rows to graph ops. Renders only the visible lines."""
from __future__ import annotations

import json
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip

from ..engine.compare import judgement
from ..engine.compare.columns import METRIC
from ..engine.compare.pair import golden_ops
from ..engine.compare.results import ResultTable
from ..engine.compare.thresholds import LOWER_IS_WORSE, Thresholds
from ..engine.graphs.graph import Graph, Node
from ..engine.graphs.lanes import LIMIT, NODE, Lanes
from ..engine.graphs.moduletree import ModuleTree
from ..engine.sources.tensor import sanitize
from . import formatting as fmt
from .cursorlist import CursorList
from .opcolumns import MARK_EXEMPT, MARK_FAIL, MARK_INVALID
from .stageviews import stage_mark

MEMBER_NODE = "◆"
MARK_START, MARK_END, MARK_MEMBER = "S", "E", "┃"
NUMBER = 7  # cells of the badge's number
BADGE = 14  # mark, blank, number, blank, 4-cell metric key
TYPE_CAP, SHAPE_CAP = 14, 18


# ------------------------------------------------------------------ results of the ops


@dataclass(frozen=True)
class Badge:
    """What the graph shows of an op's result rows."""

    mark: str  # ✗ failing, ? not compared, · exempt, " " compared and passing, "" no row
    text: str  # the worst value of the metric, "" when there is none
    state: str  # fail, invalid, exempt, pass, none
    key: str = ""  # the metric shown when it is not the table's main one (the threshold it breaks)

    def cell(self) -> str:
        if not self.mark:
            return ""
        return f"{self.mark} {fmt.pad(self.text, NUMBER, right=True)} {METRIC[self.key].badge if self.key in METRIC else self.key[:4]}"


NO_BADGE = Badge("", "", "none")


class OpResults:
    """The result table seen per graph op: rows of each node (table `npu_op` == node name) and badges;
    with `keep` (a mask over the table's rows, e.g. one rank's) only those rows."""

    def __init__(self, table: ResultTable, thresholds: Thresholds, nodes: list[Node], keep: np.ndarray | None = None):
        self.table, self.thresholds = table, thresholds
        cols = table.columns
        n = len(table)
        state = self.state = judgement.evaluate(table, thresholds)
        self.fail, self.exempt, self.invalid, self.nonfinite = state.fail, state.exempt, \
            state.not_compared & ~state.device_only, state.nonfinite  # a device-only op: exempt, nothing wrong
        keys = table.metric_keys
        self.metric = "cos" if "cos" in keys else (keys[0] if keys else "")
        self.values = table.numbers(self.metric) if self.metric else np.full(n, math.nan)
        self.io = cols["io"].tolist()
        order = np.argsort(cols["index"], kind="stable") if n else np.zeros(0, dtype=np.int64)
        if keep is not None:
            order = order[keep[order]]
        rows_of: dict[str, list[int]] = {}
        ops = cols["npu_op"].tolist()
        for r in order.tolist():
            rows_of.setdefault(ops[r], []).append(r)
        by_sanitized: dict[str, list[int]] | None = None
        by_golden: dict[str, list[int]] | None = None
        self.rows: list[list[int]] = []
        self.direct: list[bool] = []  # rows matched by the NPU op name (else by the golden op name)
        for node in nodes:
            rows = rows_of.get(node.name)
            if rows is None:
                if by_sanitized is None:
                    by_sanitized = {}
                    for name, found in rows_of.items():
                        by_sanitized.setdefault(sanitize(name), found)
                rows = by_sanitized.get(sanitize(node.name))
            direct = rows is not None
            if rows is None:  # a framework graph for fused device ops: the golden op names say
                if by_golden is None:
                    by_golden = self._by_golden(order.tolist(), cols["golden_op"].tolist())
                rows = by_golden.get(node.name, [])
            self.rows.append(rows)
            self.direct.append(direct)
        self._position = {node.name: i for i, node in enumerate(nodes)}
        self._sanitized_position: dict[str, int] | None = None
        self._nodes = nodes
        self._badges: list[Badge | None] = [None] * len(nodes)
        self._own: list[Badge | None] = [None] * len(nodes)
        self._sums: tuple[np.ndarray, np.ndarray] | None = None  # own badges counted / failing up to a position
        self._failing: list[int] | None = None

    def _by_golden(self, order: list[int], golden: list[str]) -> dict[str, list[int]]:
        """Framework op -> rows: a fused device op's input rows belong to its first framework op,
        its output rows to its last (the fused op computes the last one's output)."""
        found: dict[str, list[int]] = {}
        for r in order:
            names = golden_ops(golden[r])
            if names:
                found.setdefault(names[0] if self.io[r] == "input" else names[-1], []).append(r)
        return found

    def node_of_row(self, row: int | None) -> int | None:
        """Position in the graph of the op a table row belongs to."""
        if row is None or not 0 <= row < len(self.table):
            return None
        name = str(self.table.columns["npu_op"][row])
        hit = self._position.get(name)
        if hit is None:
            if self._sanitized_position is None:
                self._sanitized_position = {}
                for n, i in self._position.items():
                    self._sanitized_position.setdefault(sanitize(n), i)
            hit = self._sanitized_position.get(sanitize(name))
        if hit is None:
            names = golden_ops(self.table.columns["golden_op"][row])
            if names:
                hit = self._position.get(names[0] if self.io[row] == "input" else names[-1])
        return hit

    def first_output_row(self, position: int) -> int | None:
        """The op's first output row in execution order, else its first row; None without rows."""
        rows = self.rows[position]
        for r in rows:
            if self.io[r] != "input":
                return r
        return rows[0] if rows else None

    def output_rows(self, position: int) -> list[int]:
        """The rows the badge is made of: the op's output rows; its input rows when it has no output
        row (unless matched by golden op name: those input rows are a fused op's, not this op's)."""
        rows = self.rows[position]
        outputs = [r for r in rows if self.io[r] != "input"]
        return outputs or (rows if self.direct[position] else [])

    def badge(self, position: int) -> Badge:
        """The op's badge; a module's (a group of calls: attrs `module` and `span`, see
        msprobegraph.load_msprobe) counts its calls failing of those with rows, itself included."""
        cached = self._badges[position]
        if cached is not None:
            return cached
        node = self._nodes[position]
        if "module" not in node.attrs:
            return self.own_badge(position)
        counted, failing = self._counts()
        end = min(len(self._nodes), position + 1 + int(node.attrs.get("span", 0)))
        count, fail = int(counted[end] - counted[position]), int(failing[end] - failing[position])
        badge = NO_BADGE if not count else Badge(MARK_FAIL if fail else " ", f"{fail}/{count}",
                                                  "fail" if fail else "pass", "")
        self._badges[position] = badge
        return badge

    def _counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Own badges with a state, and failing ones, before each position (one pass over the ops: a
        module's count is a difference, not a walk over its calls, so nested modules cost no more)."""
        if self._sums is None:
            states = [self.own_badge(p).state for p in range(len(self._nodes))]
            zero = np.zeros(1, dtype=np.int64)
            self._sums = (np.concatenate([zero, np.cumsum([s != "none" for s in states], dtype=np.int64)]),
                          np.concatenate([zero, np.cumsum([s == "fail" for s in states], dtype=np.int64)]))
        return self._sums

    def own_badge(self, position: int) -> Badge:
        """The op's own rows' badge (a module's too, without its calls)."""
        cached = self._own[position]
        if cached is not None:
            return cached
        rows = self.output_rows(position)
        if not rows:
            badge = NO_BADGE
        else:
            fail = any(self.fail[r] for r in rows)
            compared = [r for r in rows if not self.invalid[r] and not self.exempt[r]]
            if fail:
                mark, state = MARK_FAIL, "fail"
            elif compared:
                mark, state = " ", "pass"
            elif any(self.invalid[r] for r in rows):
                mark, state = MARK_INVALID, "invalid"
            else:
                mark, state = MARK_EXEMPT, "exempt"
            badge = self._worst(rows, mark, state)
        self._own[position] = badge
        if "module" not in self._nodes[position].attrs:
            self._badges[position] = badge
        return badge

    def _worst(self, rows: list[int], mark: str, state: str) -> Badge:
        """The worst value of the main metric; for a failing op, of the first threshold it breaks."""
        key, values, toward = self.metric, self.values[rows], 0
        if state == "fail":
            for t in self.thresholds.items:  # the first threshold the judgement says a row of the op breaks
                if t.key not in self.table.columns or t.key not in self.state.broken:
                    continue
                if self.state.broken[t.key][rows].any():
                    key, values, toward = t.key, self.table.numbers(t.key)[rows], (-1 if t.op == "<" else 1)
                    break
            else:
                if any(self.nonfinite[r] for r in rows):
                    return Badge(mark, "nan/inf", state)
        finite = values[~np.isnan(values)]
        if not len(finite):
            return Badge(mark, "nan" if state == "fail" else "", state)
        lower = key in LOWER_IS_WORSE
        worst = float(finite.min() if lower else finite.max())
        return Badge(mark, fmt.number(worst, NUMBER, toward), state, "" if key == self.metric else key)

    def failing(self) -> list[int]:
        """Positions of the ops whose own rows fail, in execution order; a module holding calls is
        not one (its output is its last call's: the calls inside say where the error is)."""
        if self._failing is None:
            self._failing = [i for i, node in enumerate(self._nodes)
                             if not node.attrs.get("span") and self.own_badge(i).state == "fail"]
        return self._failing

    def failing_count(self) -> int:
        return len(self.failing())


def shape_text(shape) -> str:
    if shape is None:
        return "?"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def value_text(value, width: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str) if isinstance(value, (list, dict)) \
        else str(value)
    return fmt.fit(text.replace("\n", " "), width)


# ------------------------------------------------------------------ the graph widget


class GraphView(CursorList):
    """One op per line with lanes, badge, type, name and shape; renders only the visible lines."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "graphview--header", "graphview--cursor", "graphview--lanes", "graphview--fail", "graphview--invalid",
        "graphview--exempt", "graphview--pass", "graphview--member", "graphview--endpoint", "graphview--empty",
    }
    DEFAULT_CSS = """
    GraphView {
        height: 1fr;
        background: $surface;
        color: $foreground;
        & > .graphview--header { text-style: bold; background: $panel; }
        & > .graphview--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus > .graphview--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        & > .graphview--lanes { color: $foreground-muted; }
        & > .graphview--fail { color: $error-lighten-2; }
        &:nocolor > .graphview--fail { color: $foreground; text-style: bold; }
        & > .graphview--invalid { color: $text-warning; }
        & > .graphview--exempt { color: $text-muted; }
        & > .graphview--pass { color: $text-success; }
        & > .graphview--member { background: $secondary-muted; }
        & > .graphview--endpoint { text-style: bold; color: $text-secondary; }
        & > .graphview--empty { color: $text-muted; text-style: italic; }
        &:nocolor > .graphview--cursor { text-style: reverse bold; }
        &:nocolor > .graphview--fail { text-style: bold; }
        &:nocolor > .graphview--member { text-style: underline; }
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("g", "first", "First row", show=False, id="graphview.first")]

    message: reactive[str] = reactive("loading the model…")
    """What the view says when it shows no op."""

    class Highlighted(Message):
        """The cursor moved to the op at `position` (an index into graph.nodes; the cursor itself is a
        row among those shown, which differ when modules are folded)."""

        def __init__(self, view: GraphView, position: int) -> None:
            super().__init__()
            self.view = view
            self.position = position

        @property
        def control(self) -> GraphView:
            return self.view

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.graph: Graph | None = None
        self.lanes: Lanes | None = None
        self.results: OpResults | None = None
        self.modules: ModuleTree | None = None
        self.folded: set[int] = set()  # positions of the folded modules
        self.rows: list[int] = []  # the positions shown, one per row
        self._row_of: dict[int, int] = {}
        self.members: set[int] = set()
        self.start: int | None = None
        self.end: int | None = None
        self._shapes: list[str] = []
        self.entered: dict[int, int] = {}  # a chain task's: position -> the stage (0-based) its error entered at
        self._type_width = 4
        self._shape_width = 5

    # ---- API -----------------------------------------------------------------------------------
    def show(self, graph: Graph, lanes: Lanes, results: OpResults, position: int = 0,
             folded: Collection[str] = frozenset()) -> None:
        """Show `graph` with the cursor on the op at `position`; the modules named in `folded` (their
        node names) folded."""
        self.graph, self.lanes, self.results = graph, lanes, results
        self._shapes = [shape_text(n.output_shapes[0]) if n.outputs else "" for n in graph.nodes]
        self._type_width = max(4, min(TYPE_CAP, max((len(n.type) for n in graph.nodes), default=4)))
        self._shape_width = max(5, min(SHAPE_CAP, max(map(len, self._shapes), default=5)))
        self.message = "the model has no operators" if not graph.nodes else ""
        self.modules = ModuleTree(graph.nodes) if any("module" in n.attrs for n in graph.nodes) else None
        self.folded = {p for p in self.modules.headers if graph.nodes[p].name in folded} if self.modules else set()
        self._layout(position, center=True)

    def _layout(self, position: int, center: bool = False) -> None:
        """Rows from the folds, the cursor on the row standing for `position`, in view."""
        tree = self.modules
        self.rows = tree.shown(self.folded) if tree is not None else list(range(len(self.nodes)))
        self._row_of = {p: r for r, p in enumerate(self.rows)} if tree is not None else {}
        if tree is not None and self.rows:
            position = tree.visible(max(0, min(position, len(self.nodes) - 1)), self.folded)
        self.set_reactive(GraphView.cursor, self.validate_cursor(self.row_of(position)))
        self._set_virtual_size()
        self.scroll_to_cursor(center=center)
        self.refresh()
        self.post_message(self.Highlighted(self, self.position))

    def row_of(self, position: int) -> int:
        """The row showing the op at `position` (it must be shown)."""
        return self._row_of[position] if self.modules is not None else position

    @property
    def row_count(self) -> int:
        return len(self.rows) if self.graph is not None else 0

    @property
    def position(self) -> int:
        """The op under the cursor: its index in graph.nodes (0 without ops)."""
        return self.rows[self.cursor] if self.row_count else 0

    @property
    def nodes(self) -> list[Node]:
        """The shown graph's ops (none before `show`)."""
        return self.graph.nodes if self.graph is not None else []

    @property
    def node(self) -> Node | None:
        return self.nodes[self.position] if self.row_count else None

    def watch_cursor(self, old: int, new: int) -> None:
        super().watch_cursor(old, new)
        self.post_message(self.Highlighted(self, self.position))

    def go_to(self, position: int, center: bool = False) -> None:
        """Cursor to the op at `position`, unfolding the modules that hide it."""
        if not self.row_count:
            return
        hiding = [h for h in self.modules.holders(position) if h in self.folded] if self.modules is not None else []
        if hiding:
            self.folded -= set(hiding)
            self._layout(position, center)
        else:
            self.move_cursor(self.row_of(position), center)

    # ---- folding modules ---------------------------------------------------------------------------
    def toggle_fold(self) -> str:
        """Fold or unfold the module under the cursor (on a call: fold the module holding it, the
        cursor on its header); what was done, "" when the cursor is on no module."""
        module = self.modules.module_of(self.position) if self.modules is not None and self.row_count else None
        if module is None:
            return ""
        if module in self.folded:
            self.folded.discard(module)
            done = "unfolded"
        else:
            self.folded.add(module)
            done = "folded"
        self._layout(module)
        return done

    def action_select(self) -> None:
        """A click on the cursor row: a module header folds or unfolds."""
        if self.modules is not None and self.row_count and self.modules.span[self.position]:
            self.toggle_fold()

    def fold_all(self, fold: bool) -> None:
        """Fold every module (the cursor on the top-level row holding its op), or unfold every one."""
        if self.modules is None or not self.row_count:
            return
        here = self.position
        self.folded = set(self.modules.headers) if fold else set()
        self._layout(here, center=True)

    def set_selection(self, start: int | None, end: int | None, members: set[int]) -> None:
        self.start, self.end, self.members = start, end, members
        self.refresh()

    def _set_virtual_size(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width or 80, self.row_count + 1)

    def on_resize(self, event: events.Resize) -> None:
        self._set_virtual_size()
        super().on_resize(event)

    # ---- rendering --------------------------------------------------------------------------------
    def columns(self, width: int) -> tuple[int, int, int, int, int]:
        """(lane cap, lanes width, type width, name width, shape width) for a line of `width` cells."""
        cap = max(2, min(LIMIT, int(width * 0.3) // 2))
        lanes_width = self.lanes.drawn_width(cap) if self.lanes is not None else 2
        shape_width = self._shape_width
        fixed = 2 + lanes_width + 1 + BADGE + 1 + self._type_width + 1
        name_width = width - fixed - 1 - shape_width
        if name_width < 16:
            shape_width = 0
            name_width = width - fixed
        return cap, lanes_width, self._type_width, max(4, name_width), shape_width

    def _name_cell(self, position: int, width: int) -> str:
        """The op's name; in a module hierarchy (msprobe) indented by its depth, a module as ▾ and its
        path, folded as ▸ with how many calls it hides."""
        node = self.nodes[position]
        depth = node.attrs.get("depth", 0) if node.subgraph or "module" in node.attrs else 0
        module = node.attrs.get("module")
        folded = position in self.folded
        lead = "  " * min(depth, 8) + (("▸ " if folded else "▾ ") if module else "")
        hidden = node.attrs.get("span", 0)
        tail = f" (+{hidden:,})" if folded else ""
        name = fmt.fit(module or node.name, max(4, width - len(lead) - len(tail)), keep="end")
        return fmt.pad(lead + name + tail, width)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        styles = self.component_styles
        base = styles["base"]
        if self.graph is None or not self.row_count:
            if y == 1:
                return Strip([Segment(fmt.fit(" " + self.message, width), base + styles["empty"])]
                             ).adjust_cell_length(width, base)
            return Strip.blank(width, base)
        cap, lanes_width, type_width, name_width, shape_width = self.columns(width)
        if y == 0:
            metric = self.results.metric if self.results is not None else ""
            heading = fmt.pad(fmt.pad(metric, 2 + NUMBER, right=True), BADGE)
            text = ("  " + fmt.pad("edges" if lanes_width >= 5 else "", lanes_width) + " " + heading + " "
                    + fmt.pad("type", type_width) + " " + fmt.pad("op", name_width)
                    + (" " + fmt.pad("out shape", shape_width) if shape_width else ""))
            header = base + styles["header"]
            return Strip([Segment(text, header)]).adjust_cell_length(width, header)
        row = int(self.scroll_y) + y - 1
        if not 0 <= row < self.row_count:
            return Strip.blank(width, base)
        position = self.rows[row]
        node = self.graph.nodes[position]
        badge = self.results.badge(position) if self.results is not None else NO_BADGE
        member = position in self.members
        row_style = base + styles["member"] if member else base
        cursor = row == self.cursor
        if cursor:
            row_style += styles["cursor"]
        state_style = row_style + styles[badge.state] if badge.state != "none" else row_style
        if cursor:
            state_style += styles["cursor"]
        mark = (MARK_START if position == self.start else MARK_END if position == self.end
                else MARK_MEMBER if member else " ")
        segments = [Segment(mark, row_style + styles["endpoint"] if mark != " " else row_style),
                    Segment(" ", row_style)]
        drawn = self.lanes.draw(position, cap) if self.lanes is not None else NODE
        at = drawn.rfind(NODE)
        lane_style = row_style + styles["lanes"] + (styles["cursor"] if cursor else Style())
        glyph, glyph_style = MEMBER_NODE if member else NODE, state_style
        if position in self.entered:  # its stage's number and colour (stageviews.stage_mark)
            glyph, colour = stage_mark(self.entered[position])
            glyph_style = state_style + Style(color=colour, bold=True)
        if at >= 0:
            segments += [Segment(drawn[:at], lane_style), Segment(glyph, glyph_style),
                         Segment(fmt.pad(drawn[at + 1:], max(0, lanes_width - at - 1)), lane_style)]
        else:
            segments.append(Segment(fmt.pad(drawn, lanes_width), lane_style))
        badge_text = badge.cell()
        segments += [Segment(" ", row_style), Segment(fmt.pad(badge_text, BADGE), state_style),
                     Segment(" " + fmt.pad(node.type, type_width) + " " + self._name_cell(position, name_width), row_style)]
        if shape_width:
            segments.append(Segment(" " + fmt.pad(self._shapes[position], shape_width), row_style))
        return Strip(segments).adjust_cell_length(width, row_style)
