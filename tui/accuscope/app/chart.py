"""The metric chart: one metric over the execution order, like MindStudio's scatter diagram."""
from __future__ import annotations

import math

import numpy as np
from textual_plotext import PlotextPlot

from ..engine.compare.columns import CSV_OF
from ..engine.compare.results import ResultTable
from ..engine.compare.thresholds import Thresholds


def downsample(x: np.ndarray, y: np.ndarray, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """At most 2 points per bucket (the min and the max), so a long network keeps its spikes."""
    if len(x) <= 2 * buckets:
        return x, y
    edges = np.linspace(0, len(x), buckets + 1).astype(int)
    keep = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi > lo:
            part = y[lo:hi]
            keep += sorted({lo + int(np.argmin(part)), lo + int(np.argmax(part))})
    keep = np.asarray(keep)
    return x[keep], y[keep]


class Chart(PlotextPlot):
    """A plotext chart drawn again from its data whenever the data or its size change:
    subclasses implement draw(plt), which returns the border title."""

    def on_resize(self) -> None:
        self.replot()

    def replot(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        self.border_title = self.draw(plt)
        self.refresh()

    def draw(self, plt) -> str:
        raise NotImplementedError


class MetricChart(Chart, can_focus=True):
    """Metric value per row in execution order; threshold line, failing points as `x`, the row
    under the table cursor marked by a vertical line. Only rows of the current view are drawn."""

    DEFAULT_CSS = """
    MetricChart { height: 9; border-top: solid $panel; border-title-align: left; }
    MetricChart:focus { border-top: solid $accent; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.metric = "cos"
        self._table: ResultTable | None = None
        self._rows = np.zeros(0, dtype=np.int64)
        self._thresholds = Thresholds()
        self._selected: int | None = None

    def show(self, table: ResultTable, rows: np.ndarray, thresholds: Thresholds,
             selected: int | None = None, metric: str | None = None) -> None:
        self._table, self._rows, self._thresholds = table, np.asarray(rows), thresholds
        self._selected = selected
        if metric:
            self.metric = metric
        self.replot()

    def select(self, row: int | None) -> None:
        if row != self._selected:
            self._selected = row
            self.replot()

    def draw(self, plt) -> str:
        table = self._table
        name = CSV_OF.get(self.metric, self.metric)
        if table is None or not len(self._rows):
            return f"{name}: no rows"
        values = table.numbers(self.metric)[self._rows]
        order = np.argsort(table.columns["index"][self._rows], kind="stable")
        rows, values = self._rows[order], values[order]
        finite = np.isfinite(values)
        x = table.columns["index"][rows].astype(float)
        fail = table.columns["fail"][rows]
        width = max(self.size.width - 10, 10)
        for mask, marker, color in ((finite & ~fail, "•", "green"), (finite & fail, "x", "red")):
            if mask.any():
                xs, ys = downsample(x[mask], values[mask], width)
                plt.scatter(xs.tolist(), ys.tolist(), marker=marker, color=color)
        limit = self._thresholds.get(self.metric)
        if limit is not None and finite.any():
            plt.hline(limit.value, "orange")
        if self._selected is not None and self._selected < len(table):
            plt.vline(float(table.columns["index"][self._selected]), "blue")
        if finite.any():
            lo, hi = float(values[finite].min()), float(values[finite].max())
            if limit is not None:
                lo, hi = min(lo, limit.value), max(hi, limit.value)
            if math.isclose(lo, hi):
                lo, hi = lo - 0.5, hi + 0.5
            plt.ylim(lo, hi)
        missing = int((~finite).sum())
        return (f"{name} by row index · • pass x fail"
                + (f" · ─ threshold {limit.op} {limit.value:g}" if limit is not None else "")
                + (f" · {missing} without a value" if missing else ""))


class GrowthChart(Chart):
    """How an error grows over the execution order (the advisor's drift finding): its series of
    (table row, error) points, drawn as a line with the points marked."""

    DEFAULT_CSS = """
    GrowthChart { height: 10; border-top: solid $panel; border-title-align: left; display: none; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series: list[list[float]] = []
        self.label = ""

    def show(self, series: list[list[float]], label: str) -> None:
        self.series, self.label = series, label
        self.display = bool(series)
        self.replot()

    def draw(self, plt) -> str:
        if not self.series:
            return ""
        x = [float(p[0]) for p in self.series]
        y = [float(p[1]) for p in self.series]
        plt.plot(x, y, marker="braille")
        plt.scatter(x, y, marker="•")
        plt.xlabel("row (execution order)")
        return f"{self.label} by row: how the error grows"
