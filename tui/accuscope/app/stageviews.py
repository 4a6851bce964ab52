"""A chain task's per-stage views (docs/chain.md): the op table's stage group, the chart's curve per stage,
an op at every stage in the row detail, the chain's line under the thresholds shown. Drawn from a
`ChainView` (engine/compare/chainview.py) that the task screen's chain worker builds.

The op table's stage group sits first right of the divider: `entered` (the stage where the row's error
entered) and `cos@LABEL` per stage (its cos against the reference; filter as `cos_LABEL`). At 80 columns
the name column, `entered` and three stages' cos fit on one line, so where the error appears reads
across a row without scrolling; the stage's other metrics are the stage's own task (`s`) or the row
detail (D).
"""
# lazy: engine.tasks.chainrun
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from rich.table import Table

from ..engine.compare.columns import CSV_OF
from ..engine.compare.results import text_array
from .chart import MetricChart, downsample, whole_ticks
from .formatting import shown

if TYPE_CHECKING:
    from ..engine.compare.chainview import ChainView
    from ..engine.tasks.task import Task

ENTERED = "entered"
MARKERS = ("•", "+", "x", "o", "*", "#", "@", "&")  # the chart's, one per stage: its legend reads without colour
COLORS = ("cyan", "magenta", "yellow", "blue", "green", "red", "white")  # plotext's and rich's names both


def stage_mark(k: int) -> tuple[str, str]:
    """The graph's mark of an op whose error entered at stage k (0-based, chain order): its number
    (1-9, then +) and colour."""
    return (str(k + 1) if k < 9 else "+"), COLORS[k % len(COLORS)]


def stage_legend(labels: list[str]) -> str:
    """The graph's legend of the stage marks: `entered at: 1 top · 2 tpu · 3 bmodel`."""
    return "entered at: " + " · ".join(f"{stage_mark(k)[0]} {label}" for k, label in enumerate(labels))


def graph_stages(entered: np.ndarray, labels: list[str], rows_of: Callable[[int], list[int]],
                 positions: int) -> dict[int, int]:
    """Per graph op (position) whose output rows' error entered at a stage: that stage (0-based, the
    earliest in chain order among its rows). `entered`: the op table's `entered` per row; `rows_of`:
    an op's output rows (graphview.OpResults.output_rows)."""
    index = {label: k for k, label in enumerate(labels)}
    out = {}
    for p in range(positions):
        ks = [index[str(entered[r])] for r in rows_of(p) if str(entered[r]) in index]
        if ks:
            out[p] = min(ks)
    return out


def stage_column(label: str) -> str:
    """The op table's column of a stage's cos against the reference."""
    return f"cos@{label}"


def stage_columns(view: ChainView) -> dict[str, np.ndarray]:
    """The op table's stage group, as text per row of the shown table: `entered`, then each stage's cos."""
    out = {ENTERED: text_array(view.entered())}
    for label, values in view.columns("cos").items():
        out[stage_column(label)] = text_array("" if np.isnan(v) else f"{v:.6f}" for v in values.tolist())
    return out


def prepared(task: Task) -> tuple[ChainView, dict[str, np.ndarray]] | None:
    """A chain task's views made in a worker (tasks/chainrun.chain_view): the view, the op table's stage
    group and the chart's cos curves (a million rows take seconds: not on the app's thread); None for
    a task that is not a chain."""
    from ..engine.tasks.chainrun import chain_view
    view = chain_view(task)
    if view is None:
        return None
    columns = stage_columns(view)
    view.curves("cos")
    return view, columns


def judged_chain(chain: dict, view: ChainView | None) -> dict:
    """task.json's `chain` with its verdict and line judged again under the thresholds shown (`view`'s)."""
    if view is None:
        return chain
    j = view.judgement
    verdicts = {s.label: s.verdict.outcome for s in j.stages}
    stages = [{**st, "verdict": verdicts.get(str(st.get("label")), st.get("verdict"))} if isinstance(st, dict) else st
              for st in chain.get("stages") or []]
    return {**chain, "verdict": j.outcome, "line": j.line(), "stages": stages}


def stage_table(view: ChainView, row: int) -> Table:
    """The shown table's row's op at every stage: against the reference, and its step against the stage
    before (the first stage's: the reference), the stage where its error entered marked."""
    t = Table(box=None, padding=(0, 1, 0, 0), title_justify="left",
              title="[b]at every stage[/] (step: against the stage before)")
    for head, right in (("stage", False), ("cos", True), ("red", True), ("", False), ("step vs", False),
                        ("cos", True), ("red", True), ("", False)):
        t.add_column(head, justify="right" if right else "left", no_wrap=True)
    for at in view.at(row):
        if not at.found:
            t.add_row(shown(at.label), "[dim]no such op[/]", "", "", "", "", "", "")
            continue
        mark = "[red]✗[/]" if at.failing else "[green]✓[/]"
        t.add_row(shown(at.label), _cos(at.cos), _num(at.red), mark, shown(at.before) if at.before else "reference",
                  _cos(at.step_cos), _num(at.step_red), "[b]◀ entered[/]" if at.entered else "")
    return t


def stage_line(view: ChainView, row: int) -> str:
    """The shown table's row's op at every stage on one line (the operator detail's): each stage's cos
    against the reference, ✗ where it fails, the stage where its error entered marked (rich markup)."""
    parts = []
    for at in view.at(row):
        cos = _cos(at.cos) if at.found else "[dim]none[/]"
        parts.append(f"{shown(at.label)} {cos}{' [red]✗[/]' if at.failing else ''}"
                     f"{' [b]◀ entered[/]' if at.entered else ''}")
    return "cos by stage: " + " · ".join(parts)


def _cos(x: float) -> str:
    return "" if x != x else f"{x:.6f}"


def _num(x: float) -> str:
    return "" if x != x else f"{x:.3g}"


class ChainChart(MetricChart):
    """The task screen's chart; on a chain task (`chain` set) it draws the chart's metric against the
    reference along the chain's ops, one curve per stage (chainview.Curves), the threshold line, and the
    op under the table cursor as a vertical line; the legend in its title. Filtered, the op table's
    rows' ops only, at every stage (unfiltered, also the ops other stages have and the shown one lacks)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.chain: ChainView | None = None

    def show_chain(self, view: ChainView | None) -> None:
        self.chain = view
        self.replot()

    def draw(self, plt) -> str:
        view = self.chain
        if view is None or self.metric not in view.table.columns:
            return super().draw(plt)
        curves = view.curves(self.metric)  # the cos curves made by the worker (prepared), the others here
        xs = np.arange(len(curves.keys), dtype=float)
        table = self._table
        filtered = table is not None and len(table) == len(view.table) and len(self._rows) < len(table)
        shown_x = curves.visible(self._rows) if filtered else np.ones(len(xs), dtype=bool)
        buckets = max(self.size.width - 10, 10)
        legend = []
        lo, hi = np.inf, -np.inf
        for k, (label, ys) in enumerate(curves.series.items()):
            finite = np.isfinite(ys) & shown_x
            marker, color = MARKERS[k % len(MARKERS)], COLORS[k % len(COLORS)]
            legend.append(f"{marker} {shown(label)}")
            if not finite.any():
                continue
            x, y = downsample(xs[finite], ys[finite], buckets)
            lo, hi = min(lo, float(y.min())), max(hi, float(y.max()))
            plt.scatter(x.tolist(), y.tolist(), color=color, marker=marker)
        limit = self._thresholds.get(self.metric)
        if limit is not None and np.isfinite(lo):
            lo, hi = min(lo, limit.value), max(hi, limit.value)
            plt.hline(limit.value, "orange")
        whole_ticks(plt, 0, len(xs) - 1)  # whole ops on the x axis
        if np.isfinite(lo):
            plt.ylim(*((lo - 0.5, hi + 0.5) if np.isclose(lo, hi) else (lo, hi)))
        if table is not None and self._selected is not None and self._selected < len(table) \
                and len(table) == len(view.table):
            at = curves.position.get(view.key(self._selected))
            if at is not None:
                plt.vline(float(at), "blue")
        name = CSV_OF.get(self.metric, self.metric)
        return f"{name} vs the reference: {'  '.join(legend)}"
