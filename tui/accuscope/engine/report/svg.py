"""Charts as standalone SVG text (no fonts, scripts or styles from elsewhere): the metric over the
rows, an op's cumulative error curve and the advisor's growth series, from chartdata's numbers."""
from __future__ import annotations

import math
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from accuscope.engine.diagnose.chartdata import CumulativeCurve, MetricSeries
from accuscope.engine.sources.names import printable

# the app's colours (plotext's green, red, orange, blue), readable on white
PASS, FAIL, LIMIT, CURVE, GRID, INK = "#2e9e44", "#d62728", "#ff8c00", "#1f5fbf", "#e3e3e3", "#333333"
WIDTH, HEIGHT = 760, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 30, 40
FONT = 'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="11"'


def text(value) -> str:
    """Data made safe for XML: no control characters (not allowed in XML 1.0), markup escaped."""
    return escape(printable(str(value)))


def _nice(v: float) -> str:
    return f"{v:.4g}"


class Plot:
    """A chart of WIDTH x HEIGHT pixels over data limits xlim x ylim: add marks, then svg()."""

    def __init__(self, title: str, xlim: tuple[float, float], ylim: tuple[float, float], xlabel: str = ""):
        self.title, self.xlabel = title, xlabel
        (x0, x1), (y0, y1) = xlim, ylim
        self.xlim = (x0, x1) if x1 > x0 else (x0 - 0.5, x0 + 0.5)
        self.ylim = (y0, y1) if y1 > y0 else (y0 - 0.5, y0 + 0.5)
        self.marks: list[str] = []
        self.xticks: tuple[list[float], list[str]] | None = None

    def sx(self, x: float) -> float:
        lo, hi = self.xlim
        return LEFT + (x - lo) / (hi - lo) * (WIDTH - LEFT - RIGHT)

    def sy(self, y: float) -> float:
        lo, hi = self.ylim
        return HEIGHT - BOTTOM - (y - lo) / (hi - lo) * (HEIGHT - TOP - BOTTOM)

    def _xy(self, xs, ys) -> list[tuple[float, float]]:
        return [(self.sx(float(x)), self.sy(float(y))) for x, y in zip(xs, ys) if math.isfinite(x) and math.isfinite(y)]

    def points(self, xs, ys, color: str, marker: str = "dot") -> None:
        for x, y in self._xy(xs, ys):
            if marker == "cross":
                self.marks.append(f'<path d="M{x - 3:.1f},{y - 3:.1f}l6,6m0,-6l-6,6" stroke="{color}" '
                                  f'stroke-width="1.5"/>')
            else:
                self.marks.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"/>')

    def line(self, xs, ys, color: str) -> None:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in self._xy(xs, ys))
        if path:
            self.marks.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.5"/>')

    def hline(self, y: float, color: str) -> None:
        self.marks.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{self.sy(y):.1f}" y2="{self.sy(y):.1f}" '
                          f'stroke="{color}" stroke-dasharray="5,3"/>')

    def vline(self, x: float, color: str) -> None:
        self.marks.append(f'<line x1="{self.sx(x):.1f}" x2="{self.sx(x):.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" '
                          f'stroke="{color}" stroke-dasharray="5,3"/>')

    def svg(self) -> str:
        (x0, x1), (y0, y1) = self.xlim, self.ylim
        xt = self.xticks or (np.linspace(x0, x1, 5).tolist(), [_nice(v) for v in np.linspace(x0, x1, 5)])
        yt = np.linspace(y0, y1, 5).tolist()
        grid, labels = [], []
        for v in yt:
            y = self.sy(v)
            grid.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
            labels.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{text(_nice(v))}</text>')
        for v, label in zip(*xt):
            x = self.sx(v)
            grid.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="{GRID}"/>')
            labels.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 15}" text-anchor="middle">{text(label)}</text>')
        if self.xlabel:
            labels.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 6}" text-anchor="middle">'
                          f'{text(self.xlabel)}</text>')
        frame = (f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{HEIGHT - TOP - BOTTOM}" '
                 f'fill="none" stroke="{INK}"/>')
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
                f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label={quoteattr(printable(self.title))}>'
                f'<title>{text(self.title)}</title>'
                f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/><g {FONT} fill="{INK}">'
                f'<text x="{LEFT}" y="{TOP - 10}" font-weight="bold">{text(self.title)}</text>'
                + "".join(grid) + "".join(labels) + frame
                + "".join(self.marks) + "</g></svg>")


def metric_svg(series: MetricSeries) -> str:
    """The metric chart: passing rows as dots, failing as crosses, the threshold dashed."""
    xs = np.concatenate([series.passing[0], series.failing[0]])
    xlim = (float(xs.min()), float(xs.max())) if len(xs) else (0.0, 1.0)
    plot = Plot(series.title, xlim, series.ylim or (0.0, 1.0), "row (execution order)")
    plot.points(*series.passing, PASS)
    plot.points(*series.failing, FAIL, "cross")
    if series.ylim is not None and series.limit is not None:
        plot.hline(series.limit.value, LIMIT)
    return plot.svg()


def curve_svg(curve: CumulativeCurve, heading: str) -> str:
    """An op's cumulative error curve, C dashed: `heading` (the op) on top, the curve's title under the x axis."""
    plot = Plot(heading, curve.xlim, (0.0, curve.ytop), curve.title)
    if len(curve.xs):
        plot.xticks = curve.ticks
        plot.line(curve.xs, curve.ys, CURVE)
        if curve.c_at is not None:
            plot.vline(curve.c_at, LIMIT)
    return plot.svg()


def growth_svg(points: list[tuple[float, float]], label: str) -> str:
    """The advisor's drift series: the error by row, as a line with its points marked."""
    xs = np.array([p[0] for p in points], float)
    ys = np.array([p[1] for p in points], float)
    top = float(np.nanmax(ys)) if len(ys) else 1.0
    plot = Plot(f"{label} by row: how the error grows", (float(xs.min()), float(xs.max())) if len(xs) else (0, 1),
                (0.0, top * 1.05 if top > 0 else 1.0), "row (execution order)")
    plot.line(xs, ys, CURVE)
    plot.points(xs, ys, CURVE)
    return plot.svg()
