"""Everything one result row says: metrics against their thresholds, files, mapping, reason, and
the call's Python stack when the NPU dump records it (msprobe's stack.json, read in a worker)."""
# lazy: app.stageviews
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from rich.table import Table
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..engine.compare import judgement
from ..engine.compare.columns import CSV_OF
from ..engine.compare.fields import FIELD
from ..engine.compare.results import ResultTable
from ..engine.compare.thresholds import Thresholds
from ..engine.tasks.task import Task
from .formatting import number, shown
from .messages import Stack, StackLoaded, deliver
from .tasksnapshot import keep_found, snapshot

if TYPE_CHECKING:
    from ..engine.compare.chainview import ChainView

# the row's identity as the detail lists it (labels: fields.py's records), the NaN/inf counts among them
FIELDS = [*((k, FIELD[k].title) for k in ("index", "op_seq", "type", "npu_op", "golden_op", "tensor", "shape",
                                          "npu_dtype", "golden_dtype")),
          ("npu_nonfinite", "NaN/inf NPU"), ("golden_nonfinite", "NaN/inf golden"),
          *((k, FIELD[k].title) for k in ("conversion", "how", "npu_file", "golden_file"))]


class RowDetail(ModalScreen[None]):
    TITLE = "row"
    DEFAULT_CSS = """
    RowDetail { align: center middle; }
    RowDetail > VerticalScroll { width: 95%; max-width: 140; height: 90%; border: thick $accent;
                                 background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,enter", "dismiss", "close", id="rowdetail.dismiss")]

    def __init__(self, task: Task, row: int, extra: dict[str, np.ndarray] | None = None,
                 chain: ChainView | None = None) -> None:
        """`task`: the opened task with the table the task screen shows (and its thresholds); `row`:
        the table row shown; `extra`: the app's columns the op table shows beside the table (the
        advisor's origin and iso_cos), listed after its plugin columns; `chain`: a chain task's stages,
        the row's op shown at every stage (stageviews.stage_table)."""
        super().__init__()
        self.opened_task, self.row, self.extra, self.chain = task, row, extra or {}, chain
        self.table: ResultTable = task.table
        self.thresholds: Thresholds = task.thresholds
        self._reading = snapshot(task)  # what stack_worker reads on (its stacks kept by the task: keep_found)

    def on_mount(self) -> None:
        self.stack_worker(self._reading, self.table.row(self.row))

    @work(thread=True, exclusive=True, group="stack", exit_on_error=False)
    def stack_worker(self, task: Task, r: dict) -> None:
        """The call stack of row `r` read on `task`, the screen's snapshot of the opened task."""
        def read() -> Stack:
            where = {k: r[k] for k in ("step", "rank") if k in r and r[k] not in (None, "", -1)}
            stacks, why = task.call_stacks(**where)
            return Stack(stacks.get(str(r["npu_op"]), []), why)
        deliver(self, StackLoaded, read)

    @on(StackLoaded)
    def stack_loaded(self, message: StackLoaded) -> None:
        keep_found(self.opened_task, self._reading)
        stack = message.result or Stack([], str(message.error))
        lines = stack.lines
        text = "\n".join(f"  {shown(line.replace(chr(10), ' ').strip())}" for line in lines)
        shown_why = f"[dim]{shown(stack.why)}[/]" if stack.why else ""
        self.query_one("#stack", Static).update(f"[b]call stack[/] (stack.json, innermost first)\n{text}" if lines
                                                else shown_why)

    def compose(self) -> ComposeResult:
        r = self.table.row(self.row)
        broken = set(judgement.broken_keys(self.table, self.thresholds, self.row))
        info = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
        info.add_column(style="bold")
        info.add_column(overflow="fold")
        for key, label in FIELDS:
            value = r.get(key)
            if value not in (None, "", -1):
                info.add_row(label, shown(str(value)))
        metrics = Table(box=None, padding=(0, 2, 0, 0))
        for head in ("metric", "value", "threshold", ""):
            metrics.add_column(head, justify="right" if head == "value" else "left")
        for key in self.table.metric_keys:
            t = self.thresholds.get(key)
            value = float(r[key])
            mark = "[red]✗ fails[/]" if key in broken else "" if math.isnan(value) or t is None else "[green]✓[/]"
            metrics.add_row(CSV_OF.get(key, key), number(value, width=14),
                            f"{t.op} {t.value:g}" if t else "", mark)
        for name in self.table.custom:
            metrics.add_row(name, shown(str(r.get(name, ""))), "", "")
        for name, values in self.extra.items():
            metrics.add_row(name, shown(str(values[self.row])), "", "")
        with VerticalScroll():
            status = "[red]✗ breaks " + ", ".join(sorted(broken)) + "[/]" if broken else (
                "[green]✓ within all thresholds[/]" if not r.get("reason") else "")
            yield Static(f"[b]{shown(r['npu_op'])}[/] {shown(r['tensor'])}  {status}")
            if self.chain is not None and len(self.chain.table) == len(self.table):  # a chain's: first
                from .stageviews import stage_table
                yield Static(stage_table(self.chain, self.row))
            yield Static(info)
            yield Static(metrics)
            if r.get("reason"):
                yield Static(f"[b]reason[/] {shown(r['reason'])}")
            yield Static("", id="stack")
            yield Static("[dim]esc closes[/]")
