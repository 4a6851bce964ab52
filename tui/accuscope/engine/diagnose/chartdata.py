"""What the charts draw, computed once for every place that draws them (the app's plotext charts,
the report's SVG): the metric over the execution order, an op's cumulative error curve, and the
advisor's growth series. Only numbers and titles here; drawing is the caller's."""
# lazy: engine.diagnose.opdetail
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from accuscope.engine.compare.columns import CSV_OF
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Threshold, Thresholds

if TYPE_CHECKING:  # the op detail's sketch (metrics, pair reading) only where an op's curve is drawn
    from accuscope.engine.diagnose.advice import Finding
    from accuscope.engine.diagnose.opdetail import ErrorSketch

# ------------------------------------------------------------------ the metric over the rows


def downsample(x: np.ndarray, y: np.ndarray, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """At most 2 points per bucket (the min and the max), so a long network keeps its spikes."""
    if len(x) <= 2 * buckets:
        return x, y
    edges = np.linspace(0, len(x), buckets + 1).astype(int)
    keep: list[int] = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi > lo:
            part = y[lo:hi]
            keep += sorted({lo + int(np.argmin(part)), lo + int(np.argmax(part))})
    at = np.asarray(keep)
    return x[at], y[at]


@dataclass
class MetricSeries:
    """One metric per row in execution order (x: the row's index column), split into passing and
    failing points, with the threshold line and the y range that shows both."""

    metric: str
    name: str  # the metric's CSV name, e.g. CosineSimilarity
    passing: tuple[np.ndarray, np.ndarray]  # (x, y), downsampled
    failing: tuple[np.ndarray, np.ndarray]
    limit: Threshold | None  # a horizontal line, drawn when some value is finite (ylim not None)
    ylim: tuple[float, float] | None  # None: no finite value
    missing: int  # rows without a value
    title: str


def metric_series(table: ResultTable | None, rows: np.ndarray, thresholds: Thresholds, metric: str,
                  buckets: int) -> MetricSeries:
    """The metric of `rows` of `table` (at most 2 points per bucket of each kind)."""
    name = CSV_OF.get(metric, metric)
    empty = (np.zeros(0), np.zeros(0))
    if table is None or not len(rows):
        return MetricSeries(metric, name, empty, empty, None, None, 0, f"{name}: no rows")
    rows = np.asarray(rows)
    values = table.numbers(metric)[rows]
    order = np.argsort(table.columns["index"][rows], kind="stable")
    rows, values = rows[order], values[order]
    finite = np.isfinite(values)
    x = table.columns["index"][rows].astype(float)
    fail = table.columns["fail"][rows]
    parts = []
    for mask in (finite & ~fail, finite & fail):
        parts.append(downsample(x[mask], values[mask], buckets) if mask.any() else empty)
    limit = thresholds.get(metric)
    ylim = None
    if finite.any():
        lo, hi = float(values[finite].min()), float(values[finite].max())
        if limit is not None:
            lo, hi = min(lo, limit.value), max(hi, limit.value)
        if math.isclose(lo, hi):
            lo, hi = lo - 0.5, hi + 0.5
        ylim = (lo, hi)
    missing = int((~finite).sum())
    title = (f"{name} by row index · • pass x fail"
             + (f" · ─ threshold {limit.op} {limit.value:g}" if limit is not None else "")
             + (f" · {missing} without a value" if missing else ""))
    return MetricSeries(metric, name, parts[0], parts[1], limit, ylim, missing, title)


# ------------------------------------------------------------------ an op's cumulative error curve


def threshold_stops(sketch: ErrorSketch) -> np.ndarray:
    """The thresholds C where the count above C changes and is known exactly: 0, then the upper
    edge of every non-empty fine bin of finite nonzero errors (increasing)."""
    from accuscope.engine.diagnose.opdetail import INF_BIN, bin_edges
    ks = np.arange(sketch.first, sketch.first + len(sketch.counts))
    used = (sketch.counts > 0) & (ks >= 1) & (ks < INF_BIN)
    return np.concatenate([[0.0], bin_edges(ks[used])])


def decade_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Ticks at the powers of ten between lo and hi (log10 values), thinned to at most 6."""
    first, last = math.ceil(lo - 1e-9), math.floor(hi + 1e-9)
    ticks: list[float] = list(range(first, last + 1))
    if not ticks:
        ticks = [round((lo + hi) / 2, 1)]
    stride = max(1, math.ceil(len(ticks) / 6))
    ticks = ticks[::stride]
    return [float(t) for t in ticks], [_power(t) for t in ticks]


def _power(t: float) -> str:
    if float(t).is_integer():
        t = int(t)
        return {0: "1", 1: "10", 2: "100", -1: "0.1", -2: "0.01"}.get(t, f"1e{t}")
    return f"{10 ** t:.2g}"


def log_range(sketch: ErrorSketch, c: float) -> tuple[float, float] | None:
    """(lo, hi) in log10 of the finite nonzero errors (and C when it is positive and finite)."""
    stops = threshold_stops(sketch)[1:]
    if not len(stops):
        return None
    # from the lower edge of the lowest bin in use
    return span_with_c(math.log10(float(stops[0]) / 2 ** 0.125), math.log10(float(stops[-1])), c)


def span_with_c(lo: float, hi: float, c: float) -> tuple[float, float]:
    """A log10 axis span widened to show C (when positive and finite) and at least half a decade."""
    if 0 < c < math.inf:
        lo, hi = min(lo, math.log10(c)), max(hi, math.log10(c))
    if hi - lo < 0.5:
        lo, hi = lo - 0.25, hi + 0.25
    return lo, hi


@dataclass
class CumulativeCurve:
    """The share of elements whose error is greater than C, against log10 C: the exact curve at
    the sketch's bin edges. `xs` is empty when there is nothing to draw (the title says why)."""

    xs: np.ndarray  # log10 C
    ys: np.ndarray  # % of elements above C
    xlim: tuple[float, float]
    ytop: float
    ticks: tuple[list[float], list[str]]
    c_at: float | None  # x of the C line (log10 C; the left edge for C = 0), None when not drawn
    title: str


def cumulative_curve(sk: ErrorSketch | None, c: float, points: int) -> CumulativeCurve:
    """The curve of `sk` with the threshold `c`, at most `points` points (the curve is monotone:
    a plain stride keeps its shape)."""
    nothing = np.zeros(0)
    if sk is None:
        return CumulativeCurve(nothing, nothing, (0, 1), 100.0, ([], []), None, "error distribution: not computed yet")
    extra = []
    if sk.zeros:
        extra.append(f"{sk.zeros:,} zero")
    if sk.nonfinite:
        extra.append(f"{sk.nonfinite:,} NaN/inf")
    notes = " · " + ", ".join(extra) if extra else ""
    span = log_range(sk, c)
    if span is None or not sk.total:
        return CumulativeCurve(nothing, nothing, (0, 1), 100.0, ([], []), None,
                               f"no nonzero finite {sk.word} error to draw{notes}")
    lo, hi = span
    edges, above = sk.curve()
    keep = edges > 0
    xs = np.log10(edges[keep])
    ys = 100.0 * above[keep] / sk.total
    inside = (xs >= lo - 1e-9) & (xs <= hi + 1e-9)
    # start the curve at the lower edge of the lowest bin: every nonzero error is above it
    xs = np.concatenate([[lo], xs[inside]])
    ys = np.concatenate([[100.0 * sk.count_above(0.0)[0] / sk.total], ys[inside]])
    if len(xs) > points:
        pick = np.unique(np.linspace(0, len(xs) - 1, points).astype(int))
        xs, ys = xs[pick], ys[pick]
    top = min(100.0, max(float(ys.max()), 1e-9) * 1.05)
    c_at = math.log10(c) if 0 < c < math.inf else lo if c == 0 else None
    return CumulativeCurve(xs, ys, (lo, hi), top, decade_ticks(lo, hi), c_at,
                           f"% of elements with {sk.word} error > C (log C) · │ C = {c:g}{notes}")


# ------------------------------------------------------------------ the advisor's growth series


def growth_series(finding: Finding | None) -> tuple[list[tuple[float, float]], str]:
    """The (table row, error) points of a drift finding and the error's name; no points for any
    other finding."""
    evidence = finding.evidence if finding is not None else {}
    growth = evidence.get("growth")
    if not isinstance(growth, list):
        return [], ""
    points = [(float(p[0]), float(p[1])) for p in growth if isinstance(p, list | tuple) and len(p) == 2]
    return points, "1 - cos" if evidence.get("metric") == "cos" else "rel. error"
