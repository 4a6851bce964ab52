"""The ten MindStudio metrics (plus our extras) of one tensor pair, in one chunked pass.

Both tensors are walked together in chunks small enough to stay in the CPU cache, and each chunk
feeds all the sums at the same time, so the data are read once whatever the number of metrics, and
a tensor larger than memory still compares. The KL divergence needs each side's min and max first,
so it takes a second walk, which for tensors of one chunk (most of them) reuses the chunk in cache.

A pair of whole arrays takes the fused pass instead (`_fused_kernel`): the ranges first, then every
sum, KL included, with each element cast once. On the compiled kernel (_kernel.c `pair`, for float32
and the dtypes float32 holds exactly) that is, with AVX-512, one loop for the moments and the ranges
and one for the KL; without AVX-512 a prepass for the ranges and one loop per chunk for the rest;
without the kernel `_fused_numpy` casts each chunk to float64 once and runs the moments and the KL
on it while it is in cache. NaN/inf and
streamed pairs (and float64 data on the kernel) take the chunks.

The per-chunk loops exist twice, with the same arithmetic: in the compiled kernel (_kernel.c: every
element read once, all sums in float64) and here in numpy (one pass per operation over float64
copies of the chunk, about 30 of them, the sums as BLAS products; 5-7x slower than the fused
kernel on float32, about as fast as those calls alone without any Python around them, 2-3x on
float16, which the kernel too casts in numpy), used when the kernel was not built.

Degenerate cases are never hidden behind a plausible number (metrics.md section 2): NaN/inf are
counted per side; at identical positions on both sides the finite remainder is compared and the
reason says so; empty tensors, all-zero goldens and bool tensors get NaN and a reason.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, cast

import numpy as np

from accuscope.engine.compare.columns import COMPUTED_FLOATS

EPS64 = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)
CHUNK = 1 << 16
NUMPY_CHUNK = 1 << 15  # the numpy fallback's fused pass: its five float64 rows (1.3 MB) stay in L2
BOOL_MEANINGFUL = ("cos", "red")
# the reasons a pair's cells may carry, spelled once for the per-pair and the group path (fused_columns)
EMPTY, SCALAR, GOLDEN_ZERO = "empty tensor", "this tensor is scalar", "golden is all zero: relative metrics are undefined"
ZERO_NPU, ZERO_GOLDEN = "all the data is zero in the NPU tensor", "all the data is zero in the golden tensor"
KL_ZERO = "KL: a side is all zero after scaling"
_BOOL = np.dtype(np.bool_)

Chunk = tuple[np.ndarray, np.ndarray]
ChunkSource = Callable[[], Iterable[Chunk]]


@dataclass
class PairMetrics:
    values: dict[str, float] = field(default_factory=dict)  # short key -> value, NaN if not computed
    std: str = "NaN"
    reasons: list[str] = field(default_factory=list)
    npu_nonfinite: int = 0
    golden_nonfinite: int = 0
    tpu_verdict: str = ""  # EQUAL or CLOSE when the pair is; SIMILAR or not is the tolerances' call

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


def _nan_values() -> dict[str, float]:
    return dict.fromkeys(COMPUTED_FLOATS, math.nan)


class ArrayChunks:
    """A chunk source over two whole arrays, which it keeps as `arrays` for the kernel's fused pass."""

    __slots__ = ("arrays", "size")

    def __init__(self, fx: np.ndarray, fy: np.ndarray, size: int):
        self.arrays = (fx, fy)
        self.size = size

    def __call__(self) -> Iterator[Chunk]:
        (fx, fy), size = self.arrays, self.size
        for lo in range(0, fx.size, size):
            yield fx[lo:lo + size], fy[lo:lo + size]


def array_chunks(x: np.ndarray, y: np.ndarray, size: int | None = None) -> ChunkSource:
    """A chunk source over two arrays (memory maps included) of equal element count."""
    fx, fy = _flat(x), _flat(y)
    return ArrayChunks(fx, fy, size or CHUNK)


def _flat(a: np.ndarray) -> np.ndarray:
    """`a` as a plain 1-D array (views slice faster than memmaps); a plain 1-D array as it is."""
    return a if type(a) is np.ndarray and a.ndim == 1 else np.asarray(a).reshape(-1)


def compare_arrays(x: np.ndarray, y: np.ndarray, kl: bool = True, threads: int = 1) -> PairMetrics:
    if x.size != y.size:
        m = PairMetrics(_nan_values())
        m.reasons.append(f"shape {list(x.shape)} of the NPU tensor does not match shape {list(y.shape)} of golden")
        return m
    return compare_chunks(array_chunks(x, y), x.size, x.dtype, y.dtype, kl=kl, threads=threads)


def compare_chunks(source: ChunkSource, n: int, x_dtype: np.dtype | None, y_dtype: np.dtype | None,
                   kl: bool = True, threads: int = 1) -> PairMetrics:
    """All metrics of a pair whose chunks `source()` yields (callable again for a second walk).
    A source over two whole arrays (array_chunks) on the kernel goes to its fused pass, split
    over `threads` threads (the caller decides: comparison.pair_threads)."""
    result = PairMetrics(_nan_values())
    if n == 0:
        result.reasons.append(EMPTY)
        return result
    arrays: Chunk | None = getattr(source, "arrays", None)
    if arrays is not None and _kernel is not None:  # the kernel's fused pass: no numpy arithmetic, no errstate
        fused = _fused_kernel(*arrays, kl, threads)
        if fused is not None:
            values, close, sums = fused
            _fill_values(result, values, close, (0, 0, 0), n)
            if kl:
                _kl_finish(result, *sums)
            return _bool_cells(result, x_dtype, y_dtype)
    acc: _Sums | None
    with np.errstate(all="ignore"):  # zeros and NaN/inf are handled explicitly
        fused_np = _fused_numpy(*arrays, kl) if arrays is not None and _kernel is None else None
        if fused_np is not None:
            acc, kl_sums = fused_np
            _fill(result, acc, n)
            if kl:
                _kl_finish(result, *kl_sums)
            return _bool_cells(result, x_dtype, y_dtype)
        acc = _Sums(min(n, CHUNK))
        for xc, yc in source():
            acc.add(xc, yc)
        if not acc.finite():
            acc, n, source = _finite_remainder(source, n, result)
            if acc is None:
                return result
        _fill(result, acc, n)
        if kl:
            _kl(result, acc, n, source)
    return _bool_cells(result, x_dtype, y_dtype)


def _bool_cells(result: PairMetrics, x_dtype: np.dtype | None, y_dtype: np.dtype | None) -> PairMetrics:
    if _BOOL in (x_dtype, y_dtype):
        for key in result.values:
            if key not in BOOL_MEANINGFUL:
                result.values[key] = math.nan
        result.std = "NaN"
        result.reasons.append("bool tensor: only CosineSimilarity and RelativeEuclideanDistance apply")
    return result


class Kernel(Protocol):
    """What the compiled kernel offers (_kernel.c; its stub _kernel.pyi is checked against this)."""

    def moments(self, x: np.ndarray, y: np.ndarray, /) -> tuple[float, ...]: ...

    def kl(self, x: np.ndarray, y: np.ndarray, xlo: float, xfloor: float, ylo: float, yfloor: float, c: float,
           bound: float, /) -> tuple[float, float, float]: ...

    def pair(self, x: np.ndarray, y: np.ndarray, kl: bool = ..., threads: int = ..., /) -> tuple[float, ...] | None: ...

    def pairs(self, x: np.ndarray, y: np.ndarray, bounds: np.ndarray, out: np.ndarray, kl: bool = ...,
              /) -> list[int]: ...

    def simd(self, flag: bool = ..., /) -> bool: ...


_kernel: Kernel | None
try:
    from . import _kernel  # the fused C loops; absent when installed without a C compiler
except ImportError:
    _kernel = None
if os.environ.get("ACCUSCOPE_KERNEL") == "numpy":  # force the fallback (benchmarks, tests)
    _kernel = None


def compiled_kernel() -> bool:
    """Whether the metrics run on the compiled kernel (else on the numpy fallback)."""
    return _kernel is not None


class Fields(NamedTuple):
    """What one chunk contributes (the C kernel returns the same tuple), by name: read where the
    metrics are made of them."""

    sxy: float
    sxx: float
    syy: float
    sx: float
    sy: float
    sdd: float
    sad: float
    mad: float
    srel: float
    mrel: float
    over1: float
    over5: float
    xmin: float
    xmax: float
    ymin: float
    ymax: float


# Each field summed, max-ed or min-ed over the chunks.
FIELDS = list(Fields._fields)
_SUMMED = [i for i, f in enumerate(FIELDS) if f.startswith(("s", "over"))]
_MAXED = [FIELDS.index(f) for f in ("mad", "mrel", "xmax", "ymax")]
_MINED = [FIELDS.index(f) for f in ("xmin", "ymin")]
_MAD = FIELDS.index("mad")
_INDEX = {f: i for i, f in enumerate(FIELDS)}
CLOSE_RTOL, CLOSE_ATOL = 1e-3, 1e-8  # tpu-mlir's CLOSE: allclose at rtol 10^-k for some k >= 3


class _Sums:
    """Running float64 sums over chunks, with scratch buffers reused for every chunk."""

    def __init__(self, size: int):
        # rows: x, y, |x - y|, r, w; x to r summed by one matrix-vector product (_moments), the
        # KL walk's q, ay, num, s, s^2 in the same rows (kl_chunk)
        self.rows = np.empty((5, size))
        self.x, self.y, self.d, self.r, self.w = self.rows
        self.mask = np.empty(size, dtype=bool)
        self.small = np.empty(size, dtype=bool)
        self.g32 = np.empty(size, dtype=np.float32)  # |golden| where golden's chunk is float32
        self.full = False  # kl_chunk: the series' terms of s^7 and s^9 taken over whole chunks
        self.m: tuple = ()  # the last chunk's moments
        self.v = [0.0] * len(FIELDS)
        for i in _MAXED:
            self.v[i] = -math.inf if FIELDS[i].endswith("max") else 0.0
        for i in _MINED:
            self.v[i] = math.inf
        self.chunks = 0
        self.close = True  # every element so far within tpu-mlir's allclose (see add)
        self.nonfinite = (0, 0, 0)  # NaN, +inf, -inf at the same positions on both sides (left out)
        self.last: Chunk | None = None  # the only chunk, kept for the KL walk
        self.at: dict[int, _Views] = {}  # a chunk length's views of the rows (_views)
        self.dense: np.ndarray | None = None  # _far's two rows, made where first needed
        self.trace: list[tuple[float, float, float, float]] = []  # numpy: each chunk's xmin, ymin, sx, sy

    @classmethod
    def of(cls, values: list[float], close: bool) -> _Sums:
        """The sums of a whole pair as the kernel's fused pass returns them (no chunk buffers)."""
        acc = cls.__new__(cls)
        acc.v, acc.close, acc.chunks, acc.nonfinite, acc.last = values, close, 0, (0, 0, 0), None
        return acc

    @property
    def f(self) -> Fields:
        return Fields._make(self.v)

    def operands(self, xc: np.ndarray, yc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The chunk as the loops take it: the kernel reads two float32 (or float64) chunks in
        place, numpy two float64 ones; anything else is cast into the float64 buffers."""
        if (xc.dtype == yc.dtype and xc.dtype.isnative and xc.flags.c_contiguous and yc.flags.c_contiguous
                and (xc.dtype == np.float64 or (_kernel is not None and xc.dtype == np.float32))):
            return xc, yc
        v = self.at.get(len(xc)) or self._views(len(xc))
        x, y = v.x, v.y
        x[...] = xc  # a cast as copyto(casting="unsafe") makes it, at a third of the call's cost
        y[...] = yc
        return x, y

    def _views(self, k: int) -> _Views:
        """The views for chunks of k elements, kept for a full chunk's length and the last other
        one (lengths vary where pairs (0, 0) are dropped)."""
        size = len(self.x)
        for other in [key for key in self.at if key != size]:
            del self.at[other]
        v = self.at[k] = _Views(self, k)
        return v

    def add(self, xc: np.ndarray, yc: np.ndarray, ranges: bool = True) -> None:
        """One chunk's sums; without `ranges` its min and max are left out (the caller has them)."""
        x, y = self.last = self.operands(xc, yc)
        self.chunks += 1
        if _kernel is not None:
            m, absd = _kernel.moments(x, y), None
        else:
            m, absd = self._moments(x, y, xc, yc, ranges), self.d[:len(x)]
            if ranges:  # for the KL walk (_kl): the chunk's minima and plain sums
                self.trace.append((m[12], m[14], m[3], m[4]))
        self.m = m
        v = self.v
        for i in _SUMMED:
            v[i] += m[i]
        for i in _MAXED:
            v[i] = max(v[i], m[i])
        for i in _MINED:
            v[i] = min(v[i], m[i])
        if self.close and m[_MAD] > CLOSE_ATOL:
            self.close = self._allclose(x, y, absd)

    def _allclose(self, x: np.ndarray, y: np.ndarray, absd: np.ndarray | None) -> bool:
        """np.allclose(x, y, rtol=1e-3, atol=1e-8) in float64: |x - y| <= atol + rtol |y| everywhere
        (`absd`: |x - y| when the chunk's moments left it in a buffer). tpu-mlir tries rtol 1e-5,
        1e-4, 1e-3 and calls a pair CLOSE when any holds; 1e-3 holds whenever a smaller one does,
        so one check decides. It runs only while the pair is still close and this chunk's max
        |x - y| exceeds atol: a pair that is not close pays one chunk."""
        k = len(x)
        d, r = self.d[:k], self.r[:k]
        if absd is None:
            np.subtract(x, y, out=d, dtype=np.float64)
            np.abs(d, out=d)
        np.abs(y, out=r, dtype=np.float64)
        np.multiply(r, CLOSE_RTOL, out=r)
        np.add(r, CLOSE_ATOL, out=r)
        return bool(np.all(np.less_equal(d, r, out=self.mask[:k])))

    def _moments(self, x: np.ndarray, y: np.ndarray, xc: np.ndarray, yc: np.ndarray, ranges: bool = True) -> tuple:
        """The kernel's `moments` in numpy over two float64 chunks (x, y: the chunks `xc`, `yc` in
        float64): one pass per operation, each feeding what it can: BLAS dot products for the
        sums of products, one matrix-vector product with ones for the four plain sums (x, y,
        |x - y|, r: rows of self.rows), |x - y| for three sums; the zero-golden mask only where
        golden has a value within eps64 of 0, the counts over 0.1% / 0.5% only where the largest r
        is over them. Leaves |x - y| in self.d for _allclose. (Each call's views are made once per
        chunk length (_Views) and its numbers come back as Python floats: at 32k elements a chunk,
        the calls' own cost is a fifth of the walk.)"""
        k = len(x)
        v = self.at.get(k) or self._views(k)
        d, r, m, dr = v.d, v.r, v.mask, v.dr
        if ranges:  # in float32 where the chunk is (half the bytes; exact)
            xmin, xmax = (float(_min(xc)), float(_max(xc))) if xc.dtype == _F32 else (float(_min(x)), float(_max(x)))
            ymin, ymax = (float(_min(yc)), float(_max(yc))) if yc.dtype == _F32 else (float(_min(y)), float(_max(y)))
        else:
            xmin = xmax = ymin = ymax = math.nan  # not read: the caller has the whole pair's
        _subtract(x, y, d)
        sdd = float(d.dot(d))
        _divide(x, y, r)  # r = |x/y - 1|, literally (|x-y|/|y| flips counts at 0.1%)
        _subtract(r, 1.0, r)
        _absolute(dr, dr)  # |x - y| and r: one call for both rows
        # where golden is ~0 (|y| <= eps64: exact in float32 too), r is 0, not |x/y - 1|
        g = _absolute(yc, v.g32) if yc.dtype == _F32 else _absolute(y, v.w)
        if _min(g) <= EPS64:
            small = _less_equal(g, EPS64, m)
            if 16 * _count(small) < k:  # a few (what a ReLU's pairs (0, 0) leave): by index
                r[small.nonzero()[0]] = 0.0
            else:  # many: zeroed without branching on each (a masked copy costs 20x)
                _multiply(r, np.logical_not(small, out=m), r)  # r * 0 is 0, or NaN where x/y
                np.fmax(r, 0.0, out=r)  # was inf or NaN, which fmax turns into 0
        mad, mrel = _max(dr, 1).tolist()
        # none over a threshold that the largest r is not over (a NaN r: counted as it is)
        over1 = _count(_greater(r, 0.001, m)) if not mrel <= 0.001 else 0
        over5 = _count(_greater(r, 0.005, m)) if over1 and not mrel <= 0.005 else 0
        if x.base is self.rows and y.base is self.rows:  # x, y, |d|, r: consecutive rows
            sx, sy, sad, srel = v.xydr.dot(v.ones).tolist()
            sxx, sxy = v.xy.dot(x).tolist()
        else:
            (sad, srel), sx, sy = dr.dot(v.ones).tolist(), float(x.dot(v.ones)), float(y.dot(v.ones))
            sxx, sxy = float(x.dot(x)), float(x.dot(y))
        return (sxy, sxx, float(y.dot(y)), sx, sy, sdd, sad, mad, srel, mrel, over1, over5, xmin, xmax, ymin, ymax)

    def kl_chunk(self, x: np.ndarray, y: np.ndarray, params: tuple, floors: tuple[bool, bool] = (True, True),
                 plain: tuple[float, float] | None = None) -> tuple[float, float, float]:
        """The kernel's `kl` in numpy (see _kl) over two float64 chunks (which may be this object's
        rows x and y: they are overwritten). `floors`: whether a side's chunk may hold values the
        eps floor lifts (False when its smallest value clears it: the maximum is skipped); `plain`:
        the chunk's sums of x and y (its moments'), which give those of the shifted values where
        no floor applies. The series of atanh(s) - s is summed term by term as dot products, each
        element only as far as its own |s| makes a term count: the first term left out is below
        1e-17 of the element's (q + ay) s^2 (the kernel's series, to s^9, otherwise); the terms of
        s^7 and s^9 over the elements that need them while those are few."""
        xlo, xfloor, ylo, yfloor, c, bound = params
        k = len(x)
        v = self.at.get(k) or self._views(k)
        q, ay, num, s, w = v.x, v.y, v.d, v.r, v.w
        _shifted(x, xlo, xfloor if floors[0] else None, q)
        _shifted(y, ylo, yfloor if floors[1] else None, ay)
        if plain is None or floors[0] or floors[1]:
            sx, sy = v.xy.dot(v.ones).tolist()
        else:  # sum(x - xlo) as sum(x) - k xlo: the same to the rounding of the sums
            sx, sy = plain[0] - k * xlo, plain[1] - k * ylo
        _multiply(q, c, q)
        np.matmul(_DIFF_SUM, v.xy, out=v.dr)  # q - ay, q + ay in one
        _divide(num, s, s)  # s = (q - ay) / (q + ay)
        _square(s, w)
        top2 = float(_max(w))  # the largest s^2
        f = 0.0
        if top2 >= bound * bound:  # elements beyond the series take the logarithm, and leave it
            f += self._far(v, q, ay, num, s, w, bound)  # (their num and s^2 zeroed)
            top2 = min(top2, bound * bound)
        f += float(num.dot(s))  # (q + ay) s^2
        if top2 < _SERIES_NEED[0]:
            return sx, sy, f
        p = _multiply(q, s, q)  # + 2q (atanh(s) - s) = sum_j 2/(2j+3) q s (s^2)^(j+1)
        if top2 < _SERIES_NEED[1]:
            return sx, sy, f + _SERIES[0] * float(p.dot(w))
        ww = v.ww  # s^4 (over s, no longer needed), s^2: both terms by one product
        _square(w, s)
        t1, t0 = ww.dot(p).tolist()
        f += _SERIES[0] * t0 + _SERIES[1] * t1
        if top2 < _SERIES_NEED[2]:
            return sx, sy, f
        if not self.full:  # the terms of s^7, s^9: over the elements that need them when those are
            many = _greater_equal(w, _SERIES_NEED[2], v.mask)  # few (once many in a
            self.full = 16 * _count(many) >= k  # chunk: over every chunk from then on)
            if not self.full:
                at = many.nonzero()[0]
                pf = p[at] * s[at]  # q s^5
                wf = w[at]
                f += _SERIES[2] * float(pf.dot(wf))
                if top2 >= _SERIES_NEED[3]:
                    f += _SERIES[3] * float(pf.dot(_square(wf, wf)))
                return sx, sy, f
        _multiply(p, s, p)  # q s^5
        t3, t2 = ww.dot(p).tolist()
        f += _SERIES[2] * t2 + (_SERIES[3] * t3 if top2 >= _SERIES_NEED[3] else 0.0)
        return sx, sy, f

    def _far(self, v: _Views, q: np.ndarray, ay: np.ndarray, num: np.ndarray, s: np.ndarray, w: np.ndarray,
             bound: float) -> float:
        """kl_chunk's elements with |s| >= bound: the sum of their terms q ln(q/ay) - q + ay, and
        their num and w (s^2) zeroed, which takes them out of every term of the series (s itself
        is read only in products with those). A few by index (gathers and stores at a few places
        cost little); many (an unrelated pair: about half, at random places, where gathers and
        stores cost 2-3 ns an element) over the whole chunk, picked by a float mask."""
        k = len(q)
        far = _greater_equal(w, bound * bound, v.mask)  # every |s| >= bound, and a few at rounding's edge
        if 8 * _count(far) < k:
            at = far.nonzero()[0]
            at = at[np.abs(s[at]) >= bound]
            if not len(at):
                return 0.0
            qf, af = q[at], ay[at]
            t = qf / af
            np.log(t, t)
            _multiply(t, qf, t)
            _subtract(t, qf, t)
            np.add(t, af, t)
            num[at] = 0.0
            w[at] = 0.0
            return float(_sum(t))
        if self.dense is None or len(self.dense[0]) < k:
            self.dense = np.empty((2, len(self.x)))
        t, mask = self.dense[0, :k], self.dense[1, :k]
        mask[...] = _greater_equal(_absolute(s, t), bound, v.mask)  # 1.0 where far
        _divide(q, ay, t)
        np.log(t, t)
        _multiply(t, q, t)
        _subtract(t, q, t)
        np.add(t, ay, t)
        total = float(t.dot(mask))
        _subtract(1.0, mask, mask)  # 1.0 where near
        _multiply(num, mask, num)
        _multiply(w, mask, w)
        return total

    def finite(self) -> bool:
        f = self.f
        return math.isfinite(f.sxx + f.syy + f.sx + f.sy)


_sum, _min, _max = np.add.reduce, np.minimum.reduce, np.maximum.reduce
# the ufuncs the chunk loops call, out given by position (a call costs about a microsecond here,
# a third less than with out=)
_subtract, _divide, _multiply, _square, _absolute = np.subtract, np.divide, np.multiply, np.square, np.absolute
_greater, _greater_equal, _less_equal, _count = np.greater, np.greater_equal, np.less_equal, np.count_nonzero


class _Views:
    """A _Sums' rows cut to one chunk length k, made once per length: x, y, d (|x - y|), r, w,
    the row pairs (x, y), (d, r), (r, w) and the four x to r, k ones, the boolean mask and the
    float32 scratch."""

    __slots__ = ("x", "y", "d", "r", "w", "xy", "dr", "ww", "xydr", "ones", "mask", "g32")

    def __init__(self, acc: _Sums, k: int):
        rows = acc.rows[:, :k]
        self.x, self.y, self.d, self.r, self.w = rows
        self.xy, self.dr, self.ww, self.xydr = rows[:2], rows[2:4], rows[3:5], rows[:4]
        self.ones, self.mask, self.g32 = _ones(k), acc.mask[:k], acc.g32[:k]
_SERIES = (2 / 3, 2 / 5, 2 / 7, 2 / 9)  # atanh(s) - s = s^3/3 + s^5/5 + ..., to s^9 as in the kernel
# the s^2 from which term j counts: 2 |s|^(2j+1) / (2j+3) >= 1e-17 (of the element's (q + ay) s^2)
_SERIES_NEED = tuple((1e-17 * (2 * j + 3) / 2) ** (2 / (2 * j + 1)) for j in range(len(_SERIES)))
_DIFF_SUM = np.array([[1.0, -1.0], [1.0, 1.0]])  # (q - ay, q + ay) as one BLAS product: exact as the ufuncs
_ones_cache: dict[np.dtype, np.ndarray] = {}


def _shifted(v: np.ndarray, lo: float, floor: float | None, out: np.ndarray) -> None:
    """out = max(v - lo, floor) (no floor: v - lo); a shift by 0 (a ReLU output's) is no pass."""
    if lo != 0:
        np.subtract(v, lo, out=out)
        v = out
    if floor is not None:
        np.maximum(v, floor, out=out)
    elif v is not out:
        np.copyto(out, v)


def _ones(k: int, dtype: np.dtype = np.dtype(np.float64)) -> np.ndarray:
    """k ones (sums as BLAS products), from one read-only array per dtype grown on demand."""
    ones = _ones_cache.get(dtype)
    if ones is None or len(ones) < k:
        ones = np.ones(max(k, CHUNK), dtype)
        ones.flags.writeable = False
        _ones_cache[dtype] = ones
    return ones[:k]


def _finite_remainder(source: ChunkSource, n: int, result: PairMetrics) -> tuple[_Sums | None, int, ChunkSource]:
    """Count NaN/inf per side; when they sit at the same positions with the same values on both
    sides, sum the finite remainder instead; otherwise no metric is trustworthy."""
    counts = {"npu": [0, 0], "golden": [0, 0]}  # [nan, inf]
    posinf = 0
    same = True
    chunks = []
    for xc, yc in source():
        fx, fy = np.isfinite(xc), np.isfinite(yc)
        for side, c, f in (("npu", xc, fx), ("golden", yc, fy)):
            bad = c[~f]
            nan = int(np.count_nonzero(np.isnan(bad))) if bad.dtype.kind in "fc" else 0
            counts[side][0] += nan
            counts[side][1] += bad.size - nan
        posinf += int(np.count_nonzero(np.isposinf(xc))) if xc.dtype.kind == "f" else 0
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
    nan, inf = counts["npu"]
    acc.nonfinite = (nan, posinf, inf - posinf)
    return acc, kept, finite_chunks


def _fill(result: PairMetrics, acc: _Sums, n: int) -> None:
    _fill_values(result, acc.v, acc.close, acc.nonfinite, n)


def _fill_values(result: PairMetrics, sums: list[float] | tuple, close: bool, nonfinite: tuple[int, int, int],
                 n: int) -> None:
    """The cells from a pair's sums (FIELDS, in order: read by name through one unpacking; a small
    pair's whole comparison is a few microseconds, so this is most of it)."""
    sxy, sxx, syy, sx, sy, sdd, sad, mad, srel, mrel, over1, over5 = sums[:12]
    v = result.values
    nx, ny = math.sqrt(sxx), math.sqrt(syy)
    if n == 1:
        v["cos"] = 1.0
        result.reasons.append(SCALAR)
    elif nx < EPS64 and ny < EPS64:
        v["cos"] = 1.0
    elif nx < EPS64 or ny < EPS64:
        result.reasons.append(ZERO_NPU if nx < EPS64 else ZERO_GOLDEN)
    else:
        v["cos"] = min(sxy / (nx * ny), 1.0)
    v["max_abs"] = mad
    v["mean_abs"] = sad / n
    v["rmse"] = math.sqrt(sdd / n)
    v["euc"] = math.sqrt(sdd)
    if ny <= EPS64 and nx > EPS64:
        result.reasons.append(GOLDEN_ZERO)
    else:
        v["red"] = math.sqrt(sdd / syy) if ny > EPS64 else 0.0
        v["max_rel"] = mrel
        v["mean_rel"] = srel / n
        v["acc_rel"] = srel
        v["rel_0.1%"] = over1 / n
        v["rel_0.5%"] = over5 / n
    _tpu(result, sxy, sxx, syy, sx, sy, sdd, mad, close, nonfinite, n)
    mx, my = sx / n, sy / n
    ox, oy = math.sqrt(max(sxx / n - mx * mx, 0.0)), math.sqrt(max(syy / n - my * my, 0.0))
    result.std = f"({_3(mx)};{_3(ox)}),({_3(my)};{_3(oy)})"


def _tpu(result: PairMetrics, sxy: float, sxx: float, syy: float, sx: float, sy: float, sdd: float, mad: float,
         close: bool, nonfinite: tuple[int, int, int], n: int) -> None:
    """tpu-mlir's euclidean similarity, SQNR and the tolerance-free steps of its ladder, from the
    sums. Non-finite values at the same positions on both sides count as tpu-mlir replaces them
    (NaN -> 0, +-inf -> +-10000): they add to n, and 1e8 / +-1e4 to the sums of squares and
    products / of values, nothing to the differences."""
    nan, pos, neg = nonfinite
    if pos or neg or nan:
        big = 1e8 * (pos + neg)
        n, sxx, syy, sxy = n + nan + pos + neg, sxx + big, syy + big, sxy + big
        sx, sy = sx + 1e4 * (pos - neg), sy + 1e4 * (pos - neg)
    ed, sr = math.sqrt(sdd), 0.5 * math.sqrt(max(sxx + 2 * sxy + syy, 0.0)) + 1e-7
    result.values["euclid_sim"] = 0.0 if math.isinf(ed) or math.isinf(sr) else 1.0 - ed / sr
    # sums of squares about the mean; below the rounding of the sums they are 0 (constant sides)
    signal = syy - sy * sy / n
    noise = sdd - (sy - sx) ** 2 / n
    if signal <= VAR_FLOOR * syy or noise <= VAR_FLOOR * sdd:
        result.values["sqnr"] = math.inf
    else:
        result.values["sqnr"] = 10 * math.log10(signal / noise)
    if mad == 0 and nan == 0:  # NaN != NaN for tpu-mlir's array_equal, but allclose(equal_nan)
        result.tpu_verdict = "EQUAL"
    elif close:
        result.tpu_verdict = "CLOSE"


VAR_FLOOR = 64 * EPS64


def _3(value: float) -> str:
    return "0.000" if -0.001 < value < 0.001 else f"{value:.3f}"


KL_BOUND = 0.1  # |s| below this: the series of _kl


def _kl(result: PairMetrics, a: _Sums, n: int, source: ChunkSource) -> None:
    """KL of the min-max scaled distributions in one more walk, without storing them.

    The scaled values are ax = max(x - xmin, eps32 * rx) and ay likewise (a side without range is
    taken as it is), px = ax/Sx, py = ay/Sy. Writing KL = sum(px ln(px/py)) as it stands, or as
    sum(px ln(ax/ay)) + ln(Sy/Sx), cancels two numbers of the order of the error down to one of
    its square: for sides that nearly agree, half the digits are lost. Instead each element adds
    py f(px/py) with f(r) = r ln r - r + 1 >= 0, which sums to KL exactly when Sx, Sy are the
    true sums. The walk uses Sx', Sy' estimated from the first walk's sums (exact but for the
    few elements the eps floor lifts), and a closing term (delta below) corrects for the
    difference without cancellation.

    Per element, with q = ax Sy'/Sx' and s = (q - ay)/(q + ay), the term is
    Sy' py f = (q + ay) s^2 + 2q (atanh(s) - s); where |s| < KL_BOUND (sides within ~20% of each
    other: almost every element of any pair worth a look) atanh(s) - s is its series
    s^3/3 + ... + s^9/9 (truncated, below s^9/11 < 1e-10 of the term), else the term is computed
    with the logarithm."""
    f = a.f
    params, sx0, sy0 = _kl_params(f.xmin, f.xmax, f.ymin, f.ymax, f.sx, f.sy, n)
    sums = [0.0, 0.0, 0.0]  # Sx, Sy, Sy' * sum(py' f(px'/py'))
    last = a.last
    chunks = [last] if a.chunks == 1 and last is not None else (a.operands(xc, yc) for xc, yc in source() if len(xc))
    xlo, xfloor, ylo, yfloor = params[:4]
    trace = a.trace if _kernel is None and len(a.trace) == a.chunks else None
    for i, (x, y) in enumerate(chunks):
        if _kernel is not None:
            part = _kernel.kl(x, y, *params)
        elif trace is not None:  # the floor's pass only where the chunk's minimum needs it, the sums from the moments'
            cxmin, cymin, csx, csy = trace[i]
            part = a.kl_chunk(x, y, params, (cxmin - xlo < xfloor, cymin - ylo < yfloor), (csx, csy))
        else:
            part = a.kl_chunk(x, y, params)
        sums = [s + p for s, p in zip(sums, part)]
    sx, sy, fsum = sums
    _kl_finish(result, sx, sy, fsum, sx0, sy0)


def _kl_params(xmin: float, xmax: float, ymin: float, ymax: float, sx: float, sy: float,
               n: int) -> tuple[tuple, float, float]:
    """The KL walk's scaling from each side's range and sum (of the values, or an estimate of
    it): (xlo, xfloor, ylo, yfloor, c, bound) and Sx', Sy'."""
    rx, ry = xmax - xmin, ymax - ymin
    (xlo, rx), (ylo, ry) = (xmin, rx) if rx != 0 else (0.0, 1.0), (ymin, ry) if ry != 0 else (0.0, 1.0)
    xfloor, yfloor = EPS32 * rx, EPS32 * ry
    sx0, sy0 = max(sx - n * xlo, n * xfloor), max(sy - n * ylo, n * yfloor)
    return (xlo, xfloor, ylo, yfloor, sy0 / sx0, KL_BOUND), sx0, sy0


def _kl_finish(result: PairMetrics, sx: float, sy: float, f: float, sx0: float, sy0: float) -> None:
    """KL from the walk's sums: Sx, Sy (of the scaled values), F, and the Sx', Sy' that set c."""
    if not (sx > 0 and sy > 0):
        result.reasons.append(KL_ZERO)
        return
    # KL = F/A + ln(B/A) + 1 - B/A with A = Sx/Sx', B = Sy/Sy', F = sum(py' f(px'/py'))
    a_, delta = sx / sx0, (sy / sy0) / (sx / sx0) - 1.0
    kl = f / sy0 / a_ + (math.log1p(delta) - delta)
    result.values["kl"] = 0.0 if abs(kl) < EPS64 else kl


def fused_columns(sums: np.ndarray, n: np.ndarray, kl: bool) -> dict[str, list]:
    """What _fill_values and _kl_finish make of the kernel's fused sums, for many pairs at once
    (`sums`: one row per pair as _kernel.pairs writes them, finite data only; `n`: each pair's
    element count): every PairMetrics value as a column of Python values, keyed as metric_cells
    keys them (std, tpu_verdict and the non-finite counts included), and `reason`, the reasons
    joined as run_job joins them. The same arithmetic, operation by operation, in float64 arrays
    (+, -, *, / and sqrt round as Python's floats do, min and max pick alike); the logarithms and
    the one power through math, element by element, as _fill_values takes them (numpy's own
    log10 and log1p may differ in the last bit). tests/engine/test_smallpairs.py holds it to the
    per-pair path."""
    (sxy, sxx, syy, sx, sy, sdd, sad, mad, srel, mrel, over1, over5, xmin, xmax, ymin, ymax, notclose,
     sax, say, f, sx0, sy0) = sums[:, :22].T
    nf = n.astype(np.float64)
    with np.errstate(all="ignore"):  # the branches _fill_values takes are chosen below, per row
        nx, ny = np.sqrt(sxx), np.sqrt(syy)
        xz, yz, scalar = nx < EPS64, ny < EPS64, n == 1
        cos = np.where(scalar | (xz & yz), 1.0, np.where(xz | yz, math.nan, np.minimum(sxy / (nx * ny), 1.0)))
        gzero = (ny <= EPS64) & (nx > EPS64)
        red = np.where(ny > EPS64, np.sqrt(sdd / syy), 0.0)
        relative = {"red": red, "max_rel": mrel, "mean_rel": srel / nf, "acc_rel": srel,
                    "rel_0.1%": over1 / nf, "rel_0.5%": over5 / nf}
        ed, sr = np.sqrt(sdd), 0.5 * np.sqrt(np.maximum(sxx + 2 * sxy + syy, 0.0)) + 1e-7
        euclid = np.where(np.isinf(ed) | np.isinf(sr), 0.0, 1.0 - ed / sr)
        signal = syy - sy * sy / nf
        noise = sdd - np.array([d ** 2 for d in (sy - sx).tolist()]) / nf
        floored = (signal <= VAR_FLOOR * syy) | (noise <= VAR_FLOOR * sdd)
        sqnr = [math.inf if off else 10 * math.log10(v) for off, v in zip(floored.tolist(), (signal / noise).tolist())]
        mx, my = sx / nf, sy / nf
        ox, oy = np.sqrt(np.maximum(sxx / nf - mx * mx, 0.0)), np.sqrt(np.maximum(syy / nf - my * my, 0.0))
        columns: dict[str, list] = {"cos": cos.tolist(), "max_abs": mad.tolist(), "mean_abs": (sad / nf).tolist(),
                                    "rmse": np.sqrt(sdd / nf).tolist(), "euc": np.sqrt(sdd).tolist()}
        for key, values in relative.items():
            columns[key] = np.where(gzero, math.nan, values).tolist()
        columns["euclid_sim"], columns["sqnr"] = euclid.tolist(), sqnr
        kl_bad = ~((sax > 0) & (say > 0)) if kl else np.zeros(len(nf), dtype=bool)
        if kl:
            delta = (say / sy0) / (sax / sx0) - 1.0
            logs = np.array([math.nan if bad else math.log1p(d) for bad, d in zip(kl_bad.tolist(), delta.tolist())])
            value = f / sy0 / (sax / sx0) + (logs - delta)
            columns["kl"] = np.where(np.abs(value) < EPS64, 0.0, value).tolist()
        else:
            columns["kl"] = [math.nan] * len(nf)
    # std as _3 writes each value: one format of the whole column ("%.3f" is f"{v:.3f}"), values that
    # _3 writes "0.000" set to +0.0 first (which "%.3f" writes so, unlike -0.0)
    four = np.column_stack((mx, ox, my, oy))
    four[(four > -0.001) & (four < 0.001)] = 0.0
    columns["std"] = ("(%.3f;%.3f),(%.3f;%.3f)\n" * len(four) % tuple(four.ravel().tolist())).split("\n")[:-1]
    columns["tpu_verdict"] = np.where(mad == 0, "EQUAL", np.where(notclose == 0, "CLOSE", "")).tolist()
    columns["npu_nonfinite"] = columns["golden_nonfinite"] = [0] * len(nf)
    reasons = [""] * len(nf)
    for i in np.flatnonzero(scalar | (xz ^ yz) | gzero | kl_bad).tolist():
        why = [SCALAR if scalar[i] else (ZERO_NPU if xz[i] else ZERO_GOLDEN) if xz[i] != yz[i] else "",
               GOLDEN_ZERO if gzero[i] else "", KL_ZERO if kl_bad[i] else ""]
        reasons[i] = "; ".join(filter(None, why))
    columns["reason"] = reasons
    return columns


# dtypes whose every value float32 holds exactly: the kernel's fused pass takes them as float32
_EXACT_F32 = frozenset(np.dtype(t) for t in (np.float32, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.bool_))
# and float64: the numpy fused pass (_fused_numpy)
_EXACT_F64 = _EXACT_F32 | {np.dtype(t) for t in (np.float64, np.int32, np.uint32)}


def _fused_kernel(x: np.ndarray, y: np.ndarray, kl: bool, threads: int) -> tuple[tuple, bool, tuple] | None:
    """The kernel's fused pass over a pair of whole arrays (_kernel.c `pair`): every sum from one
    computing walk, split over `threads` threads; (sums in FIELDS order, close, KL sums). None when
    it does not apply (dtypes float32 does not hold exactly, NaN/inf in the data: the chunked path
    handles those)."""
    if _kernel is None:
        return None
    if x.dtype != _F32 or not x.flags.c_contiguous:  # (a float32 pair, the common case, checks nothing else)
        if x.dtype.newbyteorder("=") not in _EXACT_F32:
            return None
        x = np.ascontiguousarray(x, dtype=np.float32)
    if y.dtype != _F32 or not y.flags.c_contiguous:
        if y.dtype.newbyteorder("=") not in _EXACT_F32:
            return None
        y = np.ascontiguousarray(y, dtype=np.float32)
    out = _kernel.pair(x, y, kl, threads if threads > 1 else 1)
    if out is None:
        return None
    return out, out[16] == 0, out[17:22] if kl else ()


_F32, _F16, _F64 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)  # native byte order
# the dtypes of the pairs a group takes (pairjob.run_small): those _fused_kernel casts to float32, but bool
GROUP_DTYPES = frozenset(t for d in _EXACT_F32 if d != _BOOL for t in (d.newbyteorder("<"), d.newbyteorder(">")))


def kernel_pairs(x: np.ndarray, y: np.ndarray, bounds: np.ndarray, out: np.ndarray, kl: bool) -> list[int]:
    """_fused_kernel for many small float32 pairs in one kernel call (_kernel.pairs: pair k is
    x[bounds[k]:bounds[k + 1]] against y's, its sums into out[k]); the positions of the pairs it
    leaves to the chunked path (NaN/inf). Only on the compiled kernel."""
    if _kernel is None:
        raise RuntimeError("kernel_pairs needs the compiled kernel")
    return _kernel.pairs(x, y, bounds, out, kl)


def _fused_numpy(x: np.ndarray, y: np.ndarray, kl: bool) -> tuple[_Sums, tuple] | None:
    """The kernel's `pair` in numpy: a prepass on the data as they are (each side's min per chunk
    and max, exact in any dtype, and an estimate of its sum) gives the KL walk its scaling, so that
    each chunk is cast to float64 once and feeds the moments and the KL in one visit, while in
    cache (chunks of NUMPY_CHUNK: all five rows of float64 stay in L2). The estimate only sets c,
    whose error _kl_finish's closing term cancels, as in the kernel; a chunk whose smallest value
    clears the eps floor skips the floor's pass."""
    if x.dtype.newbyteorder("=") not in _EXACT_F64 or y.dtype.newbyteorder("=") not in _EXACT_F64:
        return None
    n = x.size
    size = min(n, NUMPY_CHUNK)
    (xmins, xmax, sx), (ymins, ymax, sy) = _prepass(x, size), _prepass(y, size)
    ranges = [float(xmins.min()), float(ymins.min()), xmax, ymax]
    if not all(math.isfinite(v) for v in ranges):
        return None  # NaN or inf somewhere: the chunked path counts them
    xmin, ymin = ranges[:2]
    params, sx0, sy0 = _kl_params(xmin, xmax, ymin, ymax, sx, sy, n)
    xlo, xfloor, ylo, yfloor = params[:4]
    acc, sax, say, fsum = _Sums(size), 0.0, 0.0, 0.0
    pairs = _ZeroPairs(x.dtype, y.dtype, size) if xmin <= 0 <= xmax and ymin <= 0 <= ymax else None
    # per chunk: whether a side may hold values the eps floor lifts
    xfloors = (xmins.astype(np.float64) - xlo < xfloor).tolist()
    yfloors = (ymins.astype(np.float64) - ylo < yfloor).tolist()
    for i, lo in enumerate(range(0, n, size)):
        xc, yc = x[lo:lo + size], y[lo:lo + size]
        if pairs is not None and not pairs.off:
            xc, yc = pairs.drop(xc, yc)
            if len(xc) == 0:
                continue
        acc.add(xc, yc, ranges=False)
        if kl:
            m = acc.m
            a, b, f = acc.kl_chunk(*cast(Chunk, acc.last), params, (xfloors[i], yfloors[i]), (m[3], m[4]))
            sax, say, fsum = sax + a, say + b, fsum + f
    sums = [sax, say, fsum]
    if pairs is not None and pairs.zeros and kl:  # each pair (0, 0) adds the same to the KL's sums
        ax, ay = max(0.0 - xlo, xfloor), max(0.0 - ylo, yfloor)
        sums = [s + pairs.zeros * p for s, p in zip(sums, (ax, ay, _kl_term(ax, ay, *params[4:])))]
    for name, value in zip(("xmin", "ymin", "xmax", "ymax"), ranges):
        acc.v[_INDEX[name]] = value
    return acc, (*sums, sx0, sy0) if kl else ()


class _ZeroPairs:
    """Drops the pairs (0, 0) from chunks where they are many (a ReLU output against its golden:
    about half of them): they add nothing to the moments and one same term each to the KL
    (_fused_numpy adds that `zeros` times). After a chunk with few of them the pair is no longer
    looked at (`off`)."""

    def __init__(self, x_dtype: np.dtype, y_dtype: np.dtype, size: int):
        self.keep, self.ynz = np.empty(size, dtype=bool), np.empty(size, dtype=bool)
        self.x, self.y = np.empty(size, dtype=x_dtype), np.empty(size, dtype=y_dtype)
        self.zeros, self.off = 0, False
        # float16, whose comparisons numpy makes one element at a time: != 0 on its bits, sign cleared
        self.bits = np.empty(size, dtype=np.uint16) if _F16 in (x_dtype, y_dtype) else None

    def drop(self, xc: np.ndarray, yc: np.ndarray) -> Chunk:
        k = len(xc)
        keep, ynz = self.keep[:k], self.ynz[:k]
        self._nonzero(xc, keep)
        np.logical_or(keep, self._nonzero(yc, ynz), keep)
        kept = _count(keep)
        if 4 * (k - kept) < k:  # under a quarter: finding and gathering the rest costs more
            self.off = True
            return xc, yc
        self.zeros += k - kept
        at = keep.nonzero()[0]
        return xc.take(at, out=self.x[:kept], mode="clip"), yc.take(at, out=self.y[:kept], mode="clip")

    def _nonzero(self, c: np.ndarray, out: np.ndarray) -> np.ndarray:
        if c.dtype != _F16 or self.bits is None:
            return np.not_equal(c, 0, out)
        bits = np.bitwise_and(c.view(np.uint16), 0x7FFF, self.bits[:len(c)])
        return np.not_equal(bits, 0, out)


def _kl_term(ax: float, ay: float, c: float, bound: float) -> float:
    """One element's term of the KL walk (kl_chunk's arithmetic, in Python floats) from its
    floored, shifted values ax, ay."""
    q = c * ax
    num, den = q - ay, q + ay
    s = num / den
    if abs(s) >= bound:
        return q * math.log(q / ay) - q + ay
    w = s * s
    return num * s + q * s * w * (_SERIES[0] + w * (_SERIES[1] + w * (_SERIES[2] + w * _SERIES[3])))


def _prepass(v: np.ndarray, size: int) -> tuple[np.ndarray, float, float]:
    """v's min in each chunk of `size`, its max and an estimate of its sum, read block by block
    (each block read from memory once, its three reductions from cache). The sum is to float32's
    precision at least: in float32 BLAS dot products with ones over blocks added in float64 where v
    is float32 (as exact as numpy's pairwise sum here, 3x faster), in float64 ones where it is
    float64, exactly in int64 for integers and bool, in float64 otherwise (float16 sums overflow).
    float16, whose reductions numpy makes one element at a time (25-30 ns an element, 3 ns the
    cast), is cast to float64 block by block first."""
    n, step = v.size, size * _PREPASS_CHUNKS
    mins, top, total = [], -math.inf, 0.0
    f32 = v.dtype == _F32 and v.flags.c_contiguous
    wide = np.empty(min(n, step)) if v.dtype.kind == "f" and v.dtype.itemsize == 2 else None
    for lo in range(0, n, step):
        block = v[lo:lo + step]
        if wide is not None:
            block = wide[:len(block)]
            block[...] = v[lo:lo + step]
        mins.append(np.minimum.reduceat(block, np.arange(0, len(block), size)))
        top = max(top, float(_max(block)))
        if f32 or block.dtype == _F64:
            part = float(np.dot(block, _ones(len(block), block.dtype)))
        else:  # integers and bool: exact in int64, 2x faster than in float64
            part = float(np.add.reduce(block, dtype=np.int64)) if block.dtype.kind in "biu" else math.inf
        total += part if math.isfinite(part) else float(np.add.reduce(block, dtype=np.float64))
    return np.concatenate(mins), top, total


_PREPASS_CHUNKS = 4  # chunks per block of the prepass: 512 KB of float32 a side
