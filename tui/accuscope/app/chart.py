"""The metric chart: one metric over the execution order, like MindStudio's scatter diagram."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np
from rich.text import Text
from textual.color import Color
from textual.reactive import reactive
from textual.widget import Widget

from ..engine.compare.results import ResultTable
from ..engine.compare.thresholds import Thresholds
from ..engine.diagnose.chartdata import downsample, metric_series

if TYPE_CHECKING:
    from textual_plotext.plot import Plot

__all__ = ["Chart", "GrowthChart", "MetricChart", "downsample"]


class Chart(Widget):
    """A plotext chart drawn again from its data whenever the data or its size change:
    subclasses implement draw(plt), which returns the border title.

    textual-plotext's PlotextPlot, with plotext imported at the first draw and that first draw made
    after the screen's first frame (plotext's import is 40-100 ms of the app's start); once it is
    imported charts draw at once."""

    DEFAULT_CSS = """
    Chart { width: 1fr; height: 1fr; }
    Chart { border-title-color: $text-muted; }  /* the title says what is drawn: readable, not border-dim */
    """

    theme: reactive[str] = reactive("auto")  # PlotextPlot's: "auto" follows the app's theme

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None,
                 disabled: bool = False) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self._plot: Plot | None = None
        self._waiting = False  # a draw waits for the first frame

    @property
    def plt(self):
        """The plotext plotting object (PlotextPlot.plt)."""
        if self._plot is None:
            from textual_plotext.plot import Plot
            self._plot = Plot()
        return self._plot

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda theme: self._register_theme(theme.name))
        if _plotext_loaded():
            self._register_theme(self.app.theme)

    def on_resize(self) -> None:
        self.replot()

    def replot(self) -> None:
        if self._plot is None and not _plotext_loaded():  # the first frame goes out first
            if not self._waiting:
                self._waiting = True
                self.call_after_refresh(self._first_draw)
            return
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        self.border_title = self.draw(plt)
        self.refresh()

    def _first_draw(self) -> None:
        self._waiting = False
        _ = self.plt  # imports plotext
        self._register_theme(self.app.theme)
        self.replot()

    def draw(self, plt) -> str:
        raise NotImplementedError

    def render(self):
        """PlotextPlot.render; nothing before the first draw."""
        if self._plot is None:
            return ""
        self._plot.plotsize(self.size.width, self.size.height)
        self._plot._set_size(self.size.width, self.size.height)  # as PlotextPlot does (textual-plotext#5)
        self._plot.theme(self._plotext_theme(self.app.theme))
        return Text.from_ansi(self._plot.build())

    def _register_theme(self, app_theme_name: str) -> None:
        """PlotextPlot._register_theme: the app's theme as a plotext theme (for theme "auto")."""
        if self.theme != "auto" or not _plotext_loaded():
            return
        from plotext._dict import themes
        from textual_plotext.plot import _rgbify_theme, _sequence
        name = self._plotext_theme(app_theme_name)
        variables = self.app.theme_variables
        if name not in themes:
            themes[name] = _rgbify_theme(Color.parse(variables.get("surface")).rgb,
                                         Color.parse(variables.get("surface")).rgb,
                                         Color.parse(variables.get("foreground")).rgb, "default", [*_sequence])
        self.refresh()

    def _plotext_theme(self, app_theme_name: str) -> str:
        return f"textual-auto-{app_theme_name}" if self.theme == "auto" else self.theme


def whole_ticks(plt, lo: float, hi: float) -> None:
    """Five ticks from `lo` to `hi` on the x axis, at whole numbers (rows and ops are counted, never
    halved: plotext's own ticks on a 14-row table read 3.2, 6.5, 9.8)."""
    if hi > lo:
        ticks = sorted(set(np.linspace(lo, hi, 5).round().astype(int).tolist()))
        plt.xticks(ticks, [str(t) for t in ticks])


def _plotext_loaded() -> bool:
    return "textual_plotext.plot" in sys.modules


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
        drawn = [x for x, _ in (series.passing, series.failing) if len(x)]
        if drawn:
            whole_ticks(plt, min(float(x.min()) for x in drawn), max(float(x.max()) for x in drawn))
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
