"""The graph screen: the task's model graph in execution order, one op per row, git-log style.

Opened from the task screen with the opened task and the table's cursor row, that row's op under
the graph cursor; leaving (q / esc) dismisses with a `GraphResult`: the result-table row of the op
under the graph cursor (its first output row, None when the op has no row) so the table follows,
and after `f` the filter the table takes.

    S ├─◆      ✗ 0.95617      Conv2D      …nv1/Conv/block1/relu1/Relu [1,16,32,32]
    ┃ │ ◆      ✗ 0.96889      Conv2D      …ck1/bn2/BatchNormalization [1,16,32,32]
    E ◆─┘      ✗ 0.98637      Add         /block1/Add                 [1,16,32,32]
      ●        ✗ 0.00687 kl   Conv2D      …n/conv/Conv/down/relu/Relu [1,32,16,16]

Left to right: the selection mark (S start, E end, ┃ inside the selected submodel, whose ops are
also drawn ◆ and tinted), the lanes (`engine.lanes`: a column per tensor produced above and read
below), the op's badge (the mark of its output rows as the table shows it: ✗ failing, ? not
compared, · exempt; with the worst cos, or for a failing op whose cos passes the worst value of the
first threshold it breaks, named), type, name and first output shape. `GraphView` is a Line-API
ScrollView: it formats only the rows on screen, so a graph of thousands of ops costs what one of
twenty does.

A detail panel (right of the graph from 120 columns on, below it when toggled with enter on a
narrower terminal) shows the op's attributes, inputs and outputs with shapes, producers and
consumers, the framework ops fused into an offline-model device op, the selection's boundary and
the last export. `s` / `e` choose a submodel (engine.subgraph), `x` exports and re-tests it
(engine.export) in a thread worker.

The panel's text is graphpanel.py's; the export flow (its question, worker, progress and result) is
graphexport.py's `SubmodelExport`, this screen's base; the graph itself is drawn by graphview.py.

On a training dump's module hierarchy (msprobe) `space` folds a module (▸, with how many calls it
hides), `-` / `+` fold / unfold all, jumps unfold what they land in, `f` leaves with the op table
filtered to the module under the cursor (`under(type, ...)`). A task of several steps and ranks
shows one (step, rank) at a time, `[` / `]` the previous / next: its modules and only its rows.
"""
# lazy: app.stageviews
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Static

from ..engine.compare.rankrows import StepRank, step_rank_of, step_rank_rows, step_ranks
from ..engine.compare.results import ResultTable
from ..engine.compare.thresholds import Thresholds
from ..engine.graphs.graph import Graph, Node
from ..engine.graphs.lanes import Lanes, layout, reads
from ..engine.graphs.subgraph import Selection, SelectionError, select
from ..engine.sources.tensor import SourceError
from ..engine.tasks.task import Task
from .dialogs import ChooseDialog, ConfirmDialog
from .footer import Footer
from .formatting import shown
from .graphexport import VERDICT_WORDS, SubmodelExport
from .graphpanel import node_lines, selection_lines
from .graphview import NO_BADGE, GraphView, OpResults
from .messages import FrameworkLoaded, GraphLoaded, LoadedGraph, deliver, error_text
from .opcolumns import MARK_FAIL
from .tasksnapshot import keep_found, snapshot

if TYPE_CHECKING:
    import numpy as np

WIDE = 120  # from this width on the detail panel sits right of the graph
NO_MODULES = "no modules here: folding and f are for a module hierarchy (an msprobe dump's construct.json)"


@dataclass(frozen=True)
class GraphResult:
    """What the graph screen leaves with: the table row to put the table cursor on (None: none),
    and the filter the table takes ("" : it keeps its own; set by `f` on a module)."""

    row: int | None
    table_filter: str = ""


class GraphScreen(SubmodelExport, Screen[GraphResult]):
    """The model graph of an opened task (its table, thresholds, graph and framework model); dismisses
    with a GraphResult."""

    BINDINGS = [
        Binding("slash", "search", "search", id="graph.search"),
        Binding("n", "search_next(False)", "next match", show=False, id="graph.search_next"),
        Binding("N", "search_next(True)", "previous match", show=False, id="graph.search_previous"),
        Binding("i", "follow('in')", "producer", id="graph.follow_in"),
        Binding("o", "follow('out')", "consumer", id="graph.follow_out"),
        Binding("s", "mark('start')", "start", id="graph.mark_start"),
        Binding("e", "mark('end')", "end", id="graph.mark_end"),
        Binding("x", "export", "export", id="graph.export"),
        Binding("enter", "toggle_panel", "details", id="graph.toggle_panel"),
        Binding("c", "clear_selection", "clear selection", show=False, id="graph.clear_selection"),
        Binding("exclamation_mark", "next_failing", "next failing op", show=False, id="graph.next_failing"),
        Binding("z", "zoom", "maximize pane", show=False, id="graph.zoom"),
        Binding("escape,q", "back", "back to the table", show=False, id="graph.back"),
        Binding("space", "fold", "fold module", show=False, id="graph.fold"),
        Binding("minus", "fold_all(True)", "fold all modules", show=False, id="graph.fold_all"),
        Binding("plus", "fold_all(False)", "unfold all modules", show=False, id="graph.unfold_all"),
        Binding("f", "filter_module", "filter the table to the module", show=False, id="graph.filter_module"),
        Binding("left_square_bracket", "rank(-1)", "previous rank", show=False, id="graph.rank_previous"),
        Binding("right_square_bracket", "rank(1)", "next rank", show=False, id="graph.rank_next"),
    ]
    DEFAULT_CSS = """
    GraphScreen #body { layout: vertical; height: 1fr; }
    GraphScreen.-wide #body { layout: horizontal; }
    GraphScreen GraphView { height: 1fr; width: 1fr; min-height: 5; }
    GraphScreen #panel { display: none; height: 45%; width: 1fr; border-top: solid $primary; padding: 0 1;
                         background: $surface; }
    GraphScreen.-wide #panel { display: block; height: 1fr; width: 64; max-width: 45%; border-top: none;
                               border-left: solid $primary; }
    GraphScreen.-toggled #panel { display: block; }
    GraphScreen.-wide.-toggled #panel { display: none; }
    GraphScreen #prompt { display: none; border: none; height: 1; padding: 0 1; }
    GraphScreen #prompt.shown { display: block; }
    GraphScreen #status { height: 1; background: $panel; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    HELP = (
        "One op per row in execution order. The lanes left of each op are git-log style: a column per tensor "
        "produced above and read below; ● is the op, ├ / ┤ a tensor read here and further down, ┘ / └ its "
        "last reader (a merge), ┐ / ┌ another output of the op (a branch), ┼ a crossing, …N lanes not shown.\n"
        "The badge is the op's result as the table shows it: ✗ failing, ? not compared, · exempt (layout op, "
        "input, device-only), with the worst value of its output rows (cos: the lowest); no badge: the op has "
        "no row in the result. Rows map to ops by the table's NPU op name (on a framework graph of a task with "
        "fused device ops, by the golden op names: a fused op's output rows belong to its last framework op).\n"
        "Submodel: s marks the start op, e the end op; every op reachable from the start that leads to the end "
        "is marked ┃ / ◆ (S and E the ends). The details panel lists the inputs entering and the outputs "
        "leaving it. x exports it with its data and re-tests it: if the error is gone when the framework ops "
        "run on the NPU's own inputs, it came from upstream; if it stays, it lives inside.\n"
        "msprobe modules: ▾ header (failing/total calls), folded ▸ (+N calls); a task of several ranks: one at a time.\n"
        "Leaving (q / esc) puts the table cursor on the op under the graph cursor."
    )

    def __init__(self, task: Task, row: int | None = None, stages: tuple[np.ndarray, list[str]] | None = None) -> None:
        """`task`: the opened task with the table the task screen shows (and its thresholds); `row`:
        the table row whose op the graph cursor starts on; `stages`: a chain task's stage of entry per
        row (the op table's `entered`) and its stages' labels: ops are marked by the stage their error
        entered at (stageviews.graph_stages)."""
        super().__init__()
        self.opened_task, self.row, self.stages = task, row, stages
        self.folder = task.folder
        self.table: ResultTable = task.table
        self.thresholds: Thresholds = task.thresholds
        self.graph: Graph | None = None
        self.lanes: Lanes | None = None
        self.results: OpResults | None = None
        self.framework: Graph | None = None
        self.framework_problem = ""
        self.problem = ""
        self.start: int | None = None
        self.end: int | None = None
        self.selection: Selection | None = None
        self.search_text = ""
        self._positions: dict[int, int] = {}
        self.ranks = step_ranks(self.table)  # (step, rank) of a multi-rank task, one shown at a time
        self.rank_at = self._rank_of_row(row)
        self._follow = ""  # the op the cursor stays on when another rank's graph arrives
        self._rank_shown = self.rank_at
        self.rank_loading = False

    # ---- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("", id="crumbs")
        with Container(id="body"):
            yield GraphView(id="graph")
            with VerticalScroll(id="panel"):
                yield Static("", id="detail")
        yield Input(id="prompt")
        yield Static("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"graph {self.folder.name}"
        self._name_graph(None)
        self._set_wide()
        self.view.focus()
        self.load_rank(self.rank_at)
        self.set_interval(0.25, self._show_progress)

    def on_resize(self) -> None:
        self._set_wide()

    def _set_wide(self) -> None:
        self.set_class(self.app.size.width >= WIDE, "-wide")

    @property
    def view(self) -> GraphView:
        return self.query_one(GraphView)

    @property
    def panel_shown(self) -> bool:
        return self.has_class("-wide") != self.has_class("-toggled")

    @property
    def node(self) -> Node | None:
        return self.view.node

    @property
    def cursor_node(self) -> Node:
        """The op under the cursor where a graph with ops is shown (a module tree has some);
        LookupError where none is."""
        node = self.view.node
        if node is None:
            raise LookupError("no op under the cursor: no graph with ops is shown")
        return node

    @property
    def cursor(self) -> int:
        """The op under the cursor (an index into graph.nodes)."""
        return self.view.position

    # ---- loading ------------------------------------------------------------------------------
    def load_rank(self, at: int) -> None:
        """Read the graph of the (step, rank) `ranks[at]` (of the task without ranks) in a worker, on a
        snapshot of the opened task (its graphs read once per opened task: keep_found)."""
        self.load_worker(snapshot(self.opened_task), self.ranks[at] if self.ranks else None, at)

    @work(thread=True, exclusive=True, group="graph", exit_on_error=False)
    def load_worker(self, task: Task, rank: StepRank | None, at: int) -> None:
        """The graph of `rank` with `at`, read on `task`, the screen's snapshot of the opened task."""
        deliver(self, GraphLoaded, lambda: LoadedGraph(*load_graph_of(task, rank), at, task))

    @work(thread=True, exclusive=True, group="framework", exit_on_error=False)
    def framework_worker(self, task: Task) -> None:
        def load() -> Graph:
            graph = task.framework_graph
            if graph is None:
                raise SourceError("the task names no framework model (task.json \"framework_model\"): a "
                                  "selection of device ops cannot be mapped to framework ops for export")
            return graph
        deliver(self, FrameworkLoaded, load)

    @on(GraphLoaded)
    def graph_loaded(self, message: GraphLoaded) -> None:
        if message.result is not None:
            loaded = message.result
            keep_found(self.opened_task, loaded.task)
            if loaded.at == self.rank_at:  # else another rank's is on its way
                self._graph_ready(loaded.graph, loaded.lanes, loaded.results)
            return
        if self.graph is not None:  # another rank's graph could not be read: the one shown stays
            self.rank_at, self.rank_loading = self._rank_shown, False
            self._say(error_text(message.error), title="rank", severity="error", timeout=10)
            self.update_status()
            return
        self.problem = error_text(message.error)
        self.view.message = self.problem
        self.update_panel()
        self.update_status()

    @on(FrameworkLoaded)
    def framework_loaded(self, message: FrameworkLoaded) -> None:
        if message.error is None:
            self.framework = message.result
            if self.start is not None and self.end is not None:
                self._reselect()
        else:
            self.framework_problem = error_text(message.error)
        self.update_panel()

    def _graph_ready(self, graph: Graph, lanes: Lanes, results: OpResults) -> None:
        again = self.graph is not None  # another rank's graph
        folded = {self.graph.nodes[p].name for p in self.view.folded} if self.graph is not None else set()
        if graph is not self.graph:
            self.start = self.end = self.selection = None
            self.view.set_selection(None, None, set())
        self.graph, self.lanes, self.results = graph, lanes, results
        self._rank_shown, self.rank_loading = self.rank_at, False
        self._name_graph(graph)
        self._positions = {id(n): i for i, n in enumerate(graph.nodes)}
        if again:
            start = next((i for i, n in enumerate(graph.nodes) if n.name == self._follow), None)
        else:
            start = results.node_of_row(self.row)
        if self.stages is not None and len(self.stages[0]) == len(self.table):
            from .stageviews import graph_stages
            self.view.entered = graph_stages(*self.stages, results.output_rows, len(graph.nodes))
        self.view.show(graph, lanes, results, start if start is not None else 0, folded)
        if self.row is not None and start is None and not again:
            name = self.table.columns["npu_op"][self.row] if 0 <= self.row < len(self.table) else ""
            self._say(f"{name or 'the table row'} is not an op of the model graph", severity="warning", timeout=5)
        for note in graph.notes if not again else ():
            self._say(note, severity="warning", timeout=8)
        if graph.is_device and not again:
            self.framework_worker(snapshot(self.opened_task))
        self.update_panel()
        self.update_status()

    def _name_graph(self, graph: Graph | None) -> None:
        """The path line: the task and its graph, and what the graph is a view of (Graph.label: a --shards
        task's merged run, `merged TP=2 x PP=2`)."""
        label = graph.label if graph is not None else ""
        self.query_one("#crumbs", Static).update(f"accuscope › tasks › {shown(self.folder.name)} › [b]graph[/]"
                                                 + (f" · {shown(label)}" if label else ""))

    # ---- ranks ----------------------------------------------------------------------------------
    def _rank_of_row(self, row: int | None) -> int:
        """Which of `ranks` a table row is of (the first without one)."""
        if not self.ranks or row is None or not 0 <= row < len(self.table):
            return 0
        here = step_rank_of(self.table, row)
        return self.ranks.index(here) if here in self.ranks else 0

    @property
    def rank_text(self) -> str:
        """The (step, rank) shown of a multi-rank task, "" otherwise."""
        if not self.ranks:
            return ""
        step, rank = self.ranks[self.rank_at]
        where = (f"step {step} " if step is not None else "") + f"rank {rank}"
        return f"{where} ({self.rank_at + 1}/{len(self.ranks)})"

    def action_rank(self, step: int) -> None:
        if len(self.ranks) < 2:
            self._say("the task has one rank", timeout=3)
            return
        if self.graph is None:
            return
        self._follow = self.node.name if self.node is not None else ""
        self.rank_at = (self.rank_at + step) % len(self.ranks)
        self.rank_loading = True
        self.update_status()
        self.load_rank(self.rank_at)

    # ---- panel and status -----------------------------------------------------------------------
    def on_graph_view_highlighted(self, event: GraphView.Highlighted) -> None:
        self.update_panel()
        self.update_status()

    def update_status(self) -> None:
        status = self.query_one("#status", Static)
        if self.graph is None:
            status.update(shown(self.problem or "loading the model…"))
            return
        parts = [f"op {self.cursor + 1:,}/{len(self.graph.nodes):,}"]
        if self.rank_text:
            parts.insert(0, self.rank_text + (" loading…" if self.rank_loading else ""))
        if self.view.folded:
            parts.append(f"{len(self.view.folded)} folded")
        if self.results is not None and self.results.failing_count():
            parts.append(f"{MARK_FAIL} {self.results.failing_count():,} failing ops")
        if self.lanes is not None:
            parts.append(f"{self.lanes.width} lane{'s' if self.lanes.width != 1 else ''}")
        if self.view.entered and self.stages is not None:
            from .stageviews import stage_legend
            parts.insert(0, stage_legend(self.stages[1]))
        if self.selection is not None:
            parts.append(f"submodel {len(self.selection.ops)} ops, {len(self.selection.inputs)} in, "
                         f"{len(self.selection.outputs)} out")
        elif self.start is not None:
            parts.append("start " + self.graph.nodes[self.start].name)
        elif self.end is not None:
            parts.append("end " + self.graph.nodes[self.end].name)
        if self._progress:
            parts.append(self._progress)
        elif self.last_export is not None and self.last_export["verdict"] is not None:  # stays after the toast
            verdict = self.last_export["verdict"]
            parts.insert(1, f"re-test: {VERDICT_WORDS.get(verdict, verdict)}")
        status.update(shown(" · ".join(parts)))

    def action_toggle_panel(self) -> None:
        self.toggle_class("-toggled")
        self.update_panel()

    def update_panel(self) -> None:
        if not self.panel_shown:
            return
        self.query_one("#detail", Static).update(Text.from_markup(self.panel_markup()))

    def panel_markup(self) -> str:
        """The details of the op under the cursor, the selection and the last export (rich markup)."""
        if self.graph is None:
            return shown(self.problem or "loading the model…")
        lines: list[str] = []
        node = self.node
        if node is not None:
            lines += node_lines(self.graph, self.results, self.table, node, self.cursor)
        lines += selection_lines(self.graph, self.start, self.end, self.selection, self.framework_problem)
        if self.last_export:
            lines += ["", "[b]last export[/]"] + [shown(s) for s in self.last_export["lines"]]
        return "\n".join(lines)

    # ---- search -------------------------------------------------------------------------------
    def action_search(self) -> None:
        if self.graph is None:
            return
        prompt = self.query_one("#prompt", Input)
        prompt.placeholder = "search op name or type (n/N: next/previous)"
        prompt.value = self.search_text
        prompt.add_class("shown")
        prompt.focus()

    def _close_prompt(self) -> None:
        self.query_one("#prompt", Input).remove_class("shown")
        self.view.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "prompt":
            return
        event.stop()
        text = event.value.strip()
        self._close_prompt()
        if text:
            self.search_text = text
            if not self.search(text):
                self._say(f"no op name or type contains {text!r}", severity="warning", timeout=4)

    def search(self, text: str, backwards: bool = False, include_current: bool = False) -> bool:
        """Cursor to the next op whose name or type contains `text` (case-insensitive), wrapping."""
        if self.graph is None or not text:
            return False
        needle = text.lower()
        nodes = self.graph.nodes
        n = len(nodes)
        step = -1 if backwards else 1
        first = self.cursor if include_current else self.cursor + step
        for k in range(n):
            i = (first + step * k) % n
            if needle in nodes[i].name.lower() or needle in nodes[i].type.lower():
                self.view.go_to(i, center=True)
                return True
        return False

    def action_search_next(self, backwards: bool) -> None:
        if not self.search_text:
            self._say("nothing to repeat: search with / first", timeout=3)
        elif not self.search(self.search_text, backwards):
            self._say(f"no match for {self.search_text!r}", timeout=3)

    def action_next_failing(self) -> None:
        if self.results is None:
            return
        failing = self.results.failing()
        if not failing:
            self._say("no failing op", timeout=3)
            return
        after = [i for i in failing if i > self.cursor]
        self.view.go_to(after[0] if after else failing[0], center=True)

    # ---- modules ----------------------------------------------------------------------------------
    def action_fold(self) -> None:
        if self.graph is None:
            return
        if self.view.modules is None:
            self._say(NO_MODULES, timeout=4)
        elif not self.view.toggle_fold():
            self._say(f"{self.cursor_node.name} is in no module", timeout=3)

    def action_fold_all(self, fold: bool) -> None:
        if self.graph is None:
            return
        if self.view.modules is None:
            self._say(NO_MODULES, timeout=4)
            return
        self.view.fold_all(fold)

    def action_filter_module(self) -> None:
        """Back to the table, filtered to the module under the cursor (and to the rank shown)."""
        tree = self.view.modules
        if self.graph is None or tree is None:
            self._say(NO_MODULES, timeout=4)
            return
        module = tree.module_of(self.cursor)
        if module is None:
            self._say(f"{self.cursor_node.name} is in no module: put the cursor on a module or a call inside one",
                      timeout=4)
            return
        parts = [f"under(type, {json.dumps(self.graph.nodes[module].attrs['module'], ensure_ascii=False)})"]
        if self.ranks:
            step, rank = self.ranks[self.rank_at]
            parts += ([f"step == {step}"] if step is not None else []) + [f"rank == {rank}"]
        self.dismiss(GraphResult(self.result_row(), " and ".join(parts)))

    # ---- producers and consumers -----------------------------------------------------------------
    def neighbours(self, direction: str) -> list[tuple[Node, str]]:
        """(op, tensor) producing the cursor op's inputs ("in") or reading its outputs ("out")."""
        node, graph = self.node, self.graph
        if node is None or graph is None:
            return []
        found: dict[int, tuple[Node, str]] = {}
        if direction == "in":
            for t in reads(node):
                hit = graph.producer(t)
                if hit is not None and hit[0] is not node:
                    found.setdefault(id(hit[0]), (hit[0], t))
        else:
            for t in node.outputs:
                for c, _ in graph.consumers(t):
                    if c is not node:
                        found.setdefault(id(c), (c, t))
            for other in graph.nodes:  # bodies reading an output of this op
                hidden = other.attrs.get("_subgraph_inputs") or ()
                for t in hidden:
                    if t in node.outputs and id(other) not in found:
                        found[id(other)] = (other, t)
        return list(found.values())

    def action_follow(self, direction: str) -> None:
        node = self.node
        if self.graph is None or node is None:  # node None: a graph without ops
            return
        hits = self.neighbours(direction)
        word = "producer" if direction == "in" else "consumer"
        if not hits:
            self._say(f"{node.name} has no {word} op" + (" (its inputs are network inputs or weights)"
                                                                 if direction == "in" else " (its outputs leave "
                                                                 "the network or are unused)"), timeout=4)
            return
        if len(hits) == 1:
            self.view.go_to(self._positions[id(hits[0][0])], center=True)
            return
        choices = []
        for op, t in hits:
            position = self._positions[id(op)]
            badge = self.results.badge(position) if self.results is not None else NO_BADGE
            producer = op if direction == "in" else node
            via = f"  (via output {producer.outputs.index(t)})" if len(producer.outputs) > 1 and t in \
                producer.outputs else ""
            choices.append((f"{badge.mark or ' '} {op.type}  {op.name}{via}", position))

        def chosen(position: int | None) -> None:
            if position is not None:
                self.view.go_to(position, center=True)
        title = f"{len(hits)} {word}s of {node.name}: enter jumps, esc stays"
        self.app.push_screen(ChooseDialog(shown(title), choices), chosen)

    # ---- selection --------------------------------------------------------------------------------
    def action_mark(self, which: str) -> None:
        if self.graph is None or self.node is None:
            return
        here = self.cursor
        start, end = (here, self.end) if which == "start" else (self.start, here)
        selection = None
        if start is not None and end is not None:
            try:
                selection = self._select(start, end)
            except (SelectionError, SourceError) as exc:
                self._say(str(exc), title=f"{which} refused", severity="error", timeout=12)
                return
        self.start, self.end, self.selection = start, end, selection
        self._show_selection()
        if selection is not None:
            self._say(f"submodel: {len(selection.ops)} ops, {len(selection.inputs)} inputs entering, "
                        f"{len(selection.outputs)} outputs leaving; x exports it", timeout=5)

    def _select(self, start: int, end: int) -> Selection:
        graph = self.graph
        assert graph is not None  # the ops marked are those of the graph shown
        framework = self.framework if graph.is_device else None
        return select(graph, graph.nodes[start].name, graph.nodes[end].name, framework=framework)

    def _reselect(self) -> None:
        if self.start is None or self.end is None:
            return
        try:
            self.selection = self._select(self.start, self.end)
        except (SelectionError, SourceError) as exc:
            self.framework_problem = f"framework ops: {exc}"
        self._show_selection()

    def _show_selection(self) -> None:
        if self.selection is not None:
            members = {self._positions[id(n)] for n in self.selection.ops}
        else:
            members = {p for p in (self.start, self.end) if p is not None}
        self.view.set_selection(self.start, self.end, members)
        self.update_panel()
        self.update_status()

    def action_clear_selection(self) -> None:
        self.start = self.end = self.selection = None
        self._show_selection()

    @property
    def members(self) -> list[str]:
        """Names of the ops highlighted as the submodel, in execution order."""
        return [self.graph.nodes[i].name for i in sorted(self.view.members)] if self.graph is not None else []

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif self.focused is not None:
            self.maximize(self.focused)

    # ---- leaving ------------------------------------------------------------------------------
    def result_row(self) -> int | None:
        """The table row of the op under the graph cursor (its first output row), None without one."""
        if self.results is None or self.graph is None or not self.graph.nodes:
            return None
        return self.results.first_output_row(self.cursor)

    def action_back(self) -> None:
        prompt = self.query_one("#prompt", Input)
        if prompt.has_class("shown"):
            self._close_prompt()
            return
        if self.exporting:
            def answer(yes: bool | None) -> None:
                if yes:
                    self.cancel.set()
                    self.dismiss(GraphResult(self.result_row()))
            self.app.push_screen(ConfirmDialog("An export is running. Cancel it and leave?"), answer)
            return
        self.dismiss(GraphResult(self.result_row()))


def load_graph_of(task: Task, rank: StepRank | None) -> tuple[Graph, Lanes, OpResults]:
    """The graph the screen draws for `task` with its lanes and badges: the task's model graph, else its
    framework model's, else the NPU dump's module hierarchy (msprobe): of a multi-rank task, of `rank`
    (step, rank), with only its rows. Read where a worker calls it, on its snapshot of the task."""
    if task.model_file is not None:
        graph = task.graph
    elif task.framework_model[0] is not None:
        graph = task.framework_graph
    elif rank is not None:
        graph = task.modules_at(*rank)
    else:
        graph = task.modules
    if graph is None:
        raise SourceError("the task names no model (task.json \"model\"): the graph needs the ONNX model or the "
                          "offline-model JSON (atc --mode=1 --om=model.om --json=model.json); give it with "
                          "--model when comparing")
    lanes = layout(graph)
    results = OpResults(task.table, task.thresholds, graph.nodes,
                        step_rank_rows(task.table, rank) if rank is not None else None)
    for position in range(len(graph.nodes)):  # every badge, off the UI thread
        results.badge(position)
    results.failing()
    return graph, lanes, results
