"""Widgets and text of the operator detail: the cumulative error curve with its threshold C, the
error histogram, statistics of both tensors and the per-channel overview.

The charts draw log10 of the error on the x axis (errors of one tensor span many decades) with
decade ticks written as numbers, and mark the threshold C with a vertical line and its value in
the border title, so the position is readable without colour. Zero errors cannot sit on a log
axis: they are counted in the titles instead, as are NaN/inf mismatches (error +inf).
"""
from __future__ import annotations

import math

import numpy as np
from rich.console import Group, JustifyMethod
from rich.table import Table
from rich.text import Text

from ..engine.diagnose.chartdata import cumulative_curve, decade_ticks, span_with_c, threshold_stops
from ..engine.diagnose.opdetail import ChannelStats, ErrorSketch, OpDetail, PairInfo
from . import formatting as fmt
from .chart import Chart
from .formatting import shown

SPARKS = "▁▂▃▄▅▆▇█"


def step_threshold(sketch: ErrorSketch, c: float, step: int) -> float:
    """The next exact stop above c (step > 0) or below it (step < 0); c itself at either end."""
    stops = threshold_stops(sketch)
    if step > 0:
        at = int(np.searchsorted(stops, c, side="right"))
        return float(stops[min(at + step - 1, len(stops) - 1)]) if at < len(stops) else c
    at = int(np.searchsorted(stops, c, side="left"))
    return float(stops[max(at + step, 0)]) if at > 0 else c


class SketchChart(Chart):
    """A chart of one error sketch with the threshold C marked."""

    DEFAULT_CSS = """
    SketchChart { height: 1fr; min-height: 6; border-top: solid $panel; border-title-align: left; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.sketch: ErrorSketch | None = None
        self.c = 0.0

    def show(self, sketch: ErrorSketch | None, c: float) -> None:
        self.sketch, self.c = sketch, c
        self.replot()


class CumulativeChart(SketchChart):
    """The share of elements whose error is greater than C, against C (log axis): the exact
    curve at the sketch's bin edges, C as a vertical line."""

    def draw(self, plt) -> str:
        curve = cumulative_curve(self.sketch, self.c, 4 * max(self.size.width - 8, 10))
        if not len(curve.xs):
            return curve.title
        plt.plot(curve.xs.tolist(), curve.ys.tolist(), marker="braille", color="blue")
        plt.xticks(*curve.ticks)
        plt.xlim(*curve.xlim)
        plt.ylim(0, curve.ytop)
        if curve.c_at is not None:
            plt.vline(curve.c_at, "orange")
        return curve.title


class ErrorHistogram(SketchChart):
    """Counts of nonzero finite errors in log-spaced bins (exact edges); zeros and NaN/inf
    mismatches are counted in the title."""

    def draw(self, plt) -> str:
        sk, c = self.sketch, self.c
        if sk is None:
            return "histogram: not computed yet"
        bins = max(8, min(40, (self.size.width - 8) // 3))
        h = sk.histogram(max_bins=bins)
        parts = [f"zero {h.zeros:,}", f"NaN/inf {h.nonfinite:,}"]
        if h.undefined:
            parts.append(f"no error {h.undefined:,}")
        title = f"histogram of {sk.word} error (log x) · " + " · ".join(parts)
        if not len(h.counts):
            return title
        edges = np.log10(np.maximum(h.edges, np.finfo(float).tiny))
        lo, hi = span_with_c(float(edges[0]), float(edges[-1]), c)
        centers = (edges[:-1] + edges[1:]) / 2
        keep = h.counts > 0
        width = float(np.min(np.diff(edges))) * 0.8 if len(edges) > 1 else 0.1
        plt.bar(centers[keep].tolist(), h.counts[keep].tolist(), width=width, color="blue")
        ticks, labels = decade_ticks(lo, hi)
        plt.xticks(ticks, labels)
        plt.xlim(lo, hi)
        if 0 < c < math.inf:
            plt.vline(math.log10(c), "orange")
        return title


# ------------------------------------------------------------------ text blocks


def _num(v: float, width: int = 10) -> str:
    return fmt.number(float(v), width)


def stats_table(d: OpDetail, info: PairInfo) -> Table:
    """min / max / mean / std over finite values and NaN / inf counts of both tensors."""
    t = Table(box=None, padding=(0, 1, 0, 0), show_edge=False, title_justify="left",
              title="[b]statistics[/] (over finite values)")
    for name in ("tensor", "dtype", "min", "max", "mean", "std", "NaN", "inf"):
        t.add_column(name, justify="left" if name in ("tensor", "dtype") else "right", no_wrap=True)
    for side, s, dtype in (("NPU", d.npu_stats, info.npu_dtype), ("golden", d.golden_stats, info.golden_dtype)):
        nan = f"{s.nan:,}" if not s.nan else f"[b]{s.nan:,}[/]"
        inf = f"{s.inf:,}" if not s.inf else f"[b]{s.inf:,}[/]"
        t.add_row(side, shown(fmt.dtype(dtype) or dtype), _num(s.min), _num(s.max), _num(s.mean), _num(s.std),
                  nan, inf)
    return t


def error_lines(d: OpDetail) -> str:
    """Whole-tensor error numbers and the special counts behind the percentages."""
    parts = [f"cosine {fmt.number(d.cosine, 10, -1)}", f"max abs {_num(d.abs.max)}",
             f"mean abs {_num(d.mean_abs)}", f"rmse {_num(d.rmse)}", f"max rel {_num(d.rel.max)}"]
    notes = [f"{d.abs.zeros:,} exact zero errors"]
    if d.abs.nonfinite:
        notes.append(f"[b]{d.abs.nonfinite:,} NaN/inf on one side only[/] (ranked first)")
    if d.abs.undefined:
        notes.append(f"{d.abs.undefined:,} same NaN/inf on both sides (no error)")
    rel_none = d.rel.undefined - d.abs.undefined
    if rel_none:
        notes.append(f"{rel_none:,} without a relative error (golden 0)")
    return " · ".join(parts) + "\n" + " · ".join(notes)


def sparkline(values: np.ndarray, width: int) -> str:
    """One character per value (or per bucket of values, the bucket's max when they do not fit):
    heights from 0 to the largest finite value; `?` NaN, `!` infinite."""
    v = np.asarray(values, dtype=float)
    if not len(v) or width <= 0:
        return ""
    if len(v) > width:
        edges = np.linspace(0, len(v), width + 1).astype(int)
        v = np.array([_bucket(v[a:b]) for a, b in zip(edges[:-1], edges[1:]) if b > a])
    finite = v[np.isfinite(v)]
    top = float(finite.max()) if len(finite) else 0.0
    out = []
    for x in v:
        if math.isnan(x):
            out.append("?")
        elif math.isinf(x):
            out.append("!")
        elif top <= 0:
            out.append(SPARKS[0])
        else:
            out.append(SPARKS[min(len(SPARKS) - 1, int(round(x / top * (len(SPARKS) - 1))))])
    return "".join(out)


def _bucket(v: np.ndarray) -> float:
    if np.isnan(v).any():
        return math.nan
    return float(v.max())


def channel_block(ch: ChannelStats | None, shape: tuple[int, ...], width: int = 76, k: int = 5) -> Group | str:
    """The worst channels by cosine with bars, then one sparkline of 1 - cosine and one of max abs
    over all channels, a `^` under the worst."""
    if ch is None or len(ch) < 2:
        dims = "[" + ",".join(map(str, shape)) + "]"
        return (f"[b]per channel[/]: no channel axis (shape {dims}); per-channel statistics need a "
                f"4-D or 5-D tensor with more than one channel")
    worst = [int(i) for i in ch.worst(min(k, len(ch)))]
    with np.errstate(all="ignore"):
        loss = 1.0 - ch.cos
    finite = loss[np.isfinite(loss)]
    peak = float(finite.max()) if len(finite) and finite.max() > 0 else 1.0
    head = Text.from_markup(f"[b]per channel[/] (axis {ch.axis}, {len(ch)} channels) · worst by cosine:")
    t = Table(box=None, padding=(0, 1, 0, 0), show_edge=False)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("ch", "right"), ("cosine", "right"), ("max abs", "right"), ("mean abs", "right"), ("NaN/inf", "right"),
        ("1 - cos", "left"))
    for name, justify in columns:
        t.add_column(name, justify=justify, no_wrap=True)
    bar_width = 12
    for rank, c in enumerate(worst):
        lo = loss[c]
        if math.isnan(lo):
            bar = "? no cosine"
        else:
            bar = "█" * max(1 if lo > 0 else 0, int(round(lo / peak * bar_width)))
        mark = " ◀ worst" if rank == 0 else ""
        t.add_row(str(c), fmt.number(float(ch.cos[c]), 9, -1), _num(ch.max_abs[c], 9), _num(ch.mean_abs[c], 9),
                  f"{int(ch.nonfinite[c]):,}", bar + mark)
    spark_width = max(8, width - 10)
    first = worst[0]
    cols = min(len(ch), spark_width)
    pos = first if len(ch) <= spark_width else int(first * cols / len(ch))
    tail = Text(no_wrap=True, overflow="ellipsis")
    tail.append(f"{'1 - cos':>8} {sparkline(loss, spark_width)}\n")
    tail.append(f"{'max abs':>8} {sparkline(ch.max_abs, spark_width)}\n")
    tail.append(" " * (9 + pos) + f"^ ch {first}")
    if len(ch) > spark_width:
        tail.append(f" (a column per {len(ch) / cols:.1f} channels)")
    return Group(head, t, tail)
