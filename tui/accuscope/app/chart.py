"""The metric chart: one metric over the execution order, like MindStudio's scatter diagram."""
from __future__ import annotations

import numpy as np
from textual_plotext import PlotextPlot

from ..engine.compare.results import ResultTable
from ..engine.compare.thresholds import Thresholds
from ..engine.diagnose.chartdata import downsample, metric_series

__all__ = ["Chart", "GrowthChart", "MetricChart", "downsample"]


class Chart(PlotextPlot):
    """A plotext chart drawn again from its data whenever the data or its size change:
    subclasses implement draw(plt), which returns the border title."""

    DEFAULT_CSS = """
    Chart { border-title-color: $text-muted; }  /* the title says what is drawn: readable, not border-dim */
    """

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
        series = metric_series(self._table, self._rows, self._thresholds, self.metric, max(self.size.width - 10, 10))
        for (xs, ys), marker, color in ((series.passing, "•", "green"), (series.failing, "x", "red")):
            if len(xs):
                plt.scatter(xs.tolist(), ys.tolist(), marker=marker, color=color)
        if series.ylim is not None and series.limit is not None:
            plt.hline(series.limit.value, "orange")
        table = self._table
        if table is not None and len(self._rows) and self._selected is not None and self._selected < len(table):
            plt.vline(float(table.columns["index"][self._selected]), "blue")
        if series.ylim is not None:
            plt.ylim(*series.ylim)
        return series.title


class GrowthChart(Chart):
    """How an error grows over the execution order (the advisor's drift finding): its series of
    (table row, error) points, drawn as a line with the points marked."""

    DEFAULT_CSS = """
    GrowthChart { height: 10; border-top: solid $panel; border-title-align: left; display: none; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series: list[tuple[float, float]] = []
        self.label = ""

    def show(self, series: list[tuple[float, float]], label: str) -> None:
        self.series, self.label = series, label
        self.display = bool(series)
        self.replot()

    def draw(self, plt) -> str:
        if not self.series:
            return ""
        x = [p[0] for p in self.series]
        y = [p[1] for p in self.series]
        plt.plot(x, y, marker="braille")
        plt.scatter(x, y, marker="•")
        plt.xlabel("row (execution order)")
        return f"{self.label} by row: how the error grows"
