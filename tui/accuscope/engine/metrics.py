"""The ten MindStudio metrics (plus our extras) of one tensor pair, in one chunked pass.

Both tensors are walked together in chunks small enough to stay in the CPU cache; every chunk is
cast to float64 once into reused buffers and feeds all the sums at the same time, so the data are
read once whatever the number of metrics, and a tensor larger than memory still compares. The
KL divergence needs each side's min and max first, so it takes a second walk, which for tensors
of one chunk (most of them) reuses the buffers still in cache.

Degenerate cases are never hidden behind a plausible number (metrics.md section 2): NaN/inf are
counted per side; at identical positions on both sides the finite remainder is compared and the
reason says so; empty tensors, all-zero goldens and bool tensors get NaN and a reason.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np

from .columns import NUMERIC_METRICS

EPS64 = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)
CHUNK = 1 << 16
ALL = NUMERIC_METRICS + ["std"]
RELATIVE = ("acc_rel", "max_rel", "mean_rel", "rel_0.1%", "rel_0.5%")
BOOL_MEANINGFUL = ("cos", "red")

ChunkSource = Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]]


@dataclass
class PairMetrics:
    values: dict[str, float] = field(default_factory=dict)  # short key -> value, NaN if not computed
    std: str = "NaN"
    reasons: list[str] = field(default_factory=list)
    npu_nonfinite: int = 0
    golden_nonfinite: int = 0

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


def _nan_values() -> dict[str, float]:
    return {k: math.nan for k in NUMERIC_METRICS + ["rel_0.1%", "rel_0.5%"]}


def array_chunks(x: np.ndarray, y: np.ndarray, size: int | None = None) -> ChunkSource:
    """A chunk source over two arrays (memory maps included) of equal element count."""
    fx, fy = x.reshape(-1), y.reshape(-1)
    size = size or CHUNK

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for lo in range(0, fx.size, size):
            yield fx[lo:lo + size], fy[lo:lo + size]
    return chunks


def compare_arrays(x: np.ndarray, y: np.ndarray, kl: bool = True) -> PairMetrics:
    if x.size != y.size:
        m = PairMetrics(_nan_values())
        m.reasons.append(f"shape {list(x.shape)} of the NPU tensor does not match shape {list(y.shape)} of golden")
        return m
    return compare_chunks(array_chunks(x, y), x.size, x.dtype, y.dtype, kl=kl)


def compare_chunks(source: ChunkSource, n: int, x_dtype: np.dtype, y_dtype: np.dtype,
                   kl: bool = True) -> PairMetrics:
    """All metrics of a pair whose chunks `source()` yields (callable again for a second walk)."""
    result = PairMetrics(_nan_values())
    if n == 0:
        result.reasons.append("empty tensor")
        return result
    with np.errstate(all="ignore"):  # zeros and NaN/inf are handled explicitly
        acc = _Sums(min(n, CHUNK))
        for xc, yc in source():
            acc.add(xc, yc)
        if not acc.finite():
            acc, n, source = _finite_remainder(source, n, result)
            if acc is None:
                return result
        _fill(result, acc, n)
        if kl:
            _kl(result, acc, source)
    if np.dtype(x_dtype) == np.bool_ or np.dtype(y_dtype) == np.bool_:
        for key in result.values:
            if key not in BOOL_MEANINGFUL:
                result.values[key] = math.nan
        result.std = "NaN"
        result.reasons.append("bool tensor: only CosineSimilarity and RelativeEuclideanDistance apply")
    return result


class _Sums:
    """Running float64 sums over chunks, with scratch buffers reused for every chunk."""

    def __init__(self, size: int):
        self.x = np.empty(size)
        self.y = np.empty(size)
        self.d = np.empty(size)
        self.r = np.empty(size)
        self.mask = np.empty(size, dtype=bool)
        self.sxy = self.sxx = self.syy = self.sx = self.sy = self.sdd = self.sad = self.srel = 0.0
        self.mad = self.mrel = 0.0
        self.over1 = self.over5 = 0
        self.xmin = self.ymin = math.inf
        self.xmax = self.ymax = -math.inf
        self.k = self.chunks = 0  # last chunk's length (its data stay in x, y for the KL walk)

    def add(self, xc: np.ndarray, yc: np.ndarray) -> None:
        k = self.k = len(xc)
        self.chunks += 1
        x, y, d, r, m = self.x[:k], self.y[:k], self.d[:k], self.r[:k], self.mask[:k]
        np.copyto(x, xc, casting="unsafe")
        np.copyto(y, yc, casting="unsafe")
        self.sxy += np.dot(x, y)
        self.sxx += np.dot(x, x)
        self.syy += np.dot(y, y)
        self.sx += x.sum()
        self.sy += y.sum()
        self.xmin, self.xmax = min(self.xmin, x.min()), max(self.xmax, x.max())
        self.ymin, self.ymax = min(self.ymin, y.min()), max(self.ymax, y.max())
        np.subtract(x, y, out=d)
        self.sdd += np.dot(d, d)
        np.abs(d, out=d)
        self.sad += d.sum()
        self.mad = max(self.mad, d.max())
        np.abs(y, out=r)
        np.greater(r, EPS64, out=m)
        np.divide(x, y, out=r)  # r = |x/y - 1|, literally, where golden is not ~0 ...
        np.subtract(r, 1.0, out=r)
        np.abs(r, out=r)
        if not m.all():
            r[~m] = 0.0  # ... and 0 where it is (rare: no `where=`, which costs every chunk)
        self.srel += r.sum()
        self.mrel = max(self.mrel, r.max())
        self.over1 += np.count_nonzero(np.greater(r, 0.001, out=m))
        self.over5 += np.count_nonzero(np.greater(r, 0.005, out=m))

    def finite(self) -> bool:
        return math.isfinite(self.sxx + self.syy + self.sx + self.sy)


def _finite_remainder(source: ChunkSource, n: int, result: PairMetrics) -> tuple[_Sums | None, int, ChunkSource]:
    """Count NaN/inf per side; when they sit at the same positions with the same values on both
    sides, sum the finite remainder instead; otherwise no metric is trustworthy."""
    counts = {"npu": [0, 0], "golden": [0, 0]}  # [nan, inf]
    same = True
    chunks = []
    for xc, yc in source():
        fx, fy = np.isfinite(xc), np.isfinite(yc)
        for side, c, f in (("npu", xc, fx), ("golden", yc, fy)):
            bad = c[~f]
            nan = int(np.count_nonzero(np.isnan(bad))) if bad.dtype.kind in "fc" else 0
            counts[side][0] += nan
            counts[side][1] += bad.size - nan
        if same and not (np.array_equal(fx, fy) and np.array_equal(
                np.asarray(xc[~fx], dtype=np.float64), np.asarray(yc[~fy], dtype=np.float64), equal_nan=True)):
            same = False
        chunks.append(fx)
    result.npu_nonfinite, result.golden_nonfinite = sum(counts["npu"]), sum(counts["golden"])
    text = ", ".join(f"{side} has {nan} NaN and {inf} inf" for side, (nan, inf) in counts.items())
    if not same:
        result.reasons.append(f"NaN/inf: {text} at different positions; metrics not computed")
        return None, 0, source
    kept = n - result.npu_nonfinite
    result.reasons.append(f"{text} at the same positions; compared the {kept} finite elements")
    if kept == 0:
        return None, 0, source

    def finite_chunks():
        for (xc, yc), keep in zip(source(), chunks):
            yield xc[keep], yc[keep]
    acc = _Sums(min(kept, CHUNK))
    for xc, yc in finite_chunks():
        if len(xc):
            acc.add(xc, yc)
    return acc, kept, finite_chunks


def _fill(result: PairMetrics, a: _Sums, n: int) -> None:
    v = result.values
    nx, ny = math.sqrt(a.sxx), math.sqrt(a.syy)
    if n == 1:
        v["cos"] = 1.0
        result.reasons.append("this tensor is scalar")
    elif nx < EPS64 and ny < EPS64:
        v["cos"] = 1.0
    elif nx < EPS64 or ny < EPS64:
        result.reasons.append(f"all the data is zero in the {'NPU' if nx < EPS64 else 'golden'} tensor")
    else:
        v["cos"] = min(a.sxy / (nx * ny), 1.0)
    v["max_abs"] = a.mad
    v["mean_abs"] = a.sad / n
    v["rmse"] = math.sqrt(a.sdd / n)
    if ny <= EPS64 and nx > EPS64:
        result.reasons.append("golden is all zero: relative metrics are undefined")
    else:
        v["red"] = math.sqrt(a.sdd / a.syy) if ny > EPS64 else 0.0
        v["max_rel"] = a.mrel
        v["mean_rel"] = a.srel / n
        v["acc_rel"] = a.srel
        v["rel_0.1%"] = a.over1 / n
        v["rel_0.5%"] = a.over5 / n
    mx, my = a.sx / n, a.sy / n
    sx, sy = math.sqrt(max(a.sxx / n - mx * mx, 0.0)), math.sqrt(max(a.syy / n - my * my, 0.0))
    result.std = f"({_3(mx)};{_3(sx)}),({_3(my)};{_3(sy)})"


def _3(value: float) -> str:
    return "0.000" if abs(value) < 0.001 else f"{value:.3f}"


SERIES_BOUND = 0.02  # |u| below this: ln(1+u) by its series; 6 terms, relative error < 1e-8 of KL


def _kl(result: PairMetrics, a: _Sums, source: ChunkSource) -> None:
    """KL of the min-max scaled distributions: KL = T/Sx + ln(Sy/Sx) with Sx = sum(sx),
    T = sum(sx * ln(1 + u)), u = sx/sy - 1, so one more walk gives it without storing p.

    The logarithm costs more than everything else together. Where |u| < SERIES_BOUND (most
    elements of a pair that nearly agrees) sum(sx * ln(1+u)) is a short power series in u whose
    terms are dot products; the other elements take the logarithm. The truncation error, relative
    to KL itself (which is ~ mean(u^2)/2), stays below SERIES_BOUND**5 / 3."""
    # sx = max((x - xmin) / rx, eps) = ax / rx with ax = max(x - xmin, eps * rx): no division per
    # element; a side without range is taken unscaled (rx = 1). sx/sy = k * ax/ay, k = ry/rx.
    rx, ry = a.xmax - a.xmin, a.ymax - a.ymin
    sides = [(a.xmin, rx) if rx != 0 else (0.0, 1.0), (a.ymin, ry) if ry != 0 else (0.0, 1.0)]
    k = sides[1][1] / sides[0][1]
    sums = np.zeros(3)  # sum(ax), sum(ay), sum(ax * ln(sx/sy))

    def add(x: np.ndarray, y: np.ndarray) -> None:
        for v, (lo, rng) in zip((x, y), sides):
            if lo:
                np.subtract(v, lo, out=v)
            np.maximum(v, EPS32 * rng, out=v)
        u, w, big = a.d[: len(x)], a.r[: len(x)], a.mask[: len(x)]
        np.divide(x, y, out=u)
        if k != 1.0:
            np.multiply(u, k, out=u)
        np.subtract(u, 1.0, out=u)
        np.abs(u, out=w)
        np.greater_equal(w, SERIES_BOUND, out=big)
        t = 0.0
        if np.count_nonzero(big):
            t += np.dot(x[big], np.log1p(u[big]))
            u[big] = 0.0
        np.multiply(x, u, out=w)  # w = ax * u^(k-1) before term k (k >= 2)
        t += w.sum()
        for k_ in range(2, 7):
            t += (-1.0 if k_ % 2 == 0 else 1.0) / k_ * np.dot(w, u)
            if k_ < 6:
                np.multiply(w, u, out=w)
        sums[:] += (x.sum(), y.sum(), t)

    if a.chunks == 1:
        add(a.x[: a.k], a.y[: a.k])  # the only chunk is still in the buffers
    else:
        for xc, yc in source():
            if len(xc):
                x, y = a.x[: len(xc)], a.y[: len(yc)]
                np.copyto(x, xc, casting="unsafe")
                np.copyto(y, yc, casting="unsafe")
                add(x, y)
    sx, sy, t = sums
    if sx <= 0 or sy <= 0:
        result.reasons.append("KL: a side is all zero after scaling")
        return
    kl = t / sx + math.log(sy / sx / k)  # sum(sx) = sx / rx, sum(sy) = sy / ry
    result.values["kl"] = 0.0 if abs(kl) < EPS64 else kl
