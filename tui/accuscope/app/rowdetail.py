"""Everything one result row says: metrics against their thresholds, files, mapping, reason."""
from __future__ import annotations

import math

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..engine.compare.columns import CSV_OF
from ..engine.compare.results import ResultTable
from ..engine.compare.thresholds import Thresholds
from .formatting import number, shown

FIELDS = [("index", "Index"), ("op_seq", "OpSequence"), ("type", "OpType"), ("npu_op", "NPU op"),
          ("golden_op", "golden op"), ("tensor", "tensor"), ("shape", "shape"), ("npu_dtype", "NPU dtype"),
          ("golden_dtype", "golden dtype"), ("npu_nonfinite", "NaN/inf NPU"), ("golden_nonfinite", "NaN/inf golden"), ("conversion", "layout conversion"), ("how", "mapped by"),
          ("npu_file", "NPU file"), ("golden_file", "golden file")]


class RowDetail(ModalScreen[None]):
    TITLE = "row"
    DEFAULT_CSS = """
    RowDetail { align: center middle; }
    RowDetail > VerticalScroll { width: 95%; max-width: 140; height: 90%; border: thick $accent;
                                 background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,enter", "dismiss", "close", id="rowdetail.dismiss")]

    def __init__(self, table: ResultTable, row: int, thresholds: Thresholds) -> None:
        super().__init__()
        self.table, self.row, self.thresholds = table, row, thresholds

    def compose(self) -> ComposeResult:
        r = self.table.row(self.row)
        broken = set(self.thresholds.broken(self.table, self.row))
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
        with VerticalScroll():
            status = "[red]✗ breaks " + ", ".join(sorted(broken)) + "[/]" if broken else (
                "[green]✓ within all thresholds[/]" if not r.get("reason") else "")
            yield Static(f"[b]{shown(r['npu_op'])}[/] {shown(r['tensor'])}  {status}")
            yield Static(info)
            yield Static(metrics)
            if r.get("reason"):
                yield Static(f"[b]reason[/] {shown(r['reason'])}")
            yield Static("[dim]esc closes[/]")
