"""Single-operator detail: where inside one tensor pair the error lives.

One chunked pass over the NPU tensor x and the golden tensor y (float64 arithmetic on reused
chunk buffers; memory stays at a few chunks whatever the tensor size) gives:

- the TopN elements by absolute and by relative error, with their coordinates in the logical
  layout, both values and both errors (a running top-N per chunk: only elements beating the
  current N-th value are looked at, no sort of the tensor);
- an `ErrorSketch` of each error's distribution: counts in fine log-spaced bins (8 per octave)
  plus exact counts of zero errors, of NaN/inf errors and of elements without an error, the exact
  max and min. "A% of the elements (B elements) have an error greater than C" is answered from it
  for any C instantly: exactly at the bin edges (and above the kept TopN values), as tight bounds
  in between; `exact_count` walks the data again for one exact number;
- summary statistics of both tensors (min, max, mean, std over finite values; NaN and inf counts);
- per-channel cosine similarity, max and mean absolute error for 4-D/5-D tensors (axis 1), so a
  single broken channel stands out.

Conventions (and how they relate to msaccucmp's `-op NAME -n TopN`):

- abs error = |x - y|; rel error = |x - y| / |y| where |y| > eps64, undefined elsewhere (golden
  is 0: the CSV and the UI show `-`). The eps64 rule is the one of MaxRelativeError in the result
  table, so the detail's max relative error matches that column.
- NaN/inf are never hidden (msaccucmp turns them into 0 and ranks them last): an element where a
  side holds NaN/inf and the other side does not hold the very same value (NaN vs NaN, +inf vs
  +inf) gets the error +inf in both rankings, so such elements come FIRST in both TopN lists
  (in index order among themselves) and count above every threshold C; `ErrorSketch.nonfinite`
  counts them. Elements holding the same NaN/inf on both sides agree: they have no error
  (`ErrorSketch.undefined`) and are left out of rankings and statistics, like the result
  table's "finite remainder".
- Ties rank by element index, lowest first. Percentages are of all elements of the tensor.
- Coordinates: `N C D H W` for 5-D tensors, `N C H W` for 2- to 4-D tensors (the shape padded
  with trailing 1s, as msaccucmp does), `ID` (the flat index) for 0-D, 1-D and tensors of more
  than 5 dimensions.
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from accuscope.engine.compare.metrics import CHUNK, EPS64, array_chunks
from accuscope.engine.compare.pairjob import pair_chunks
from accuscope.engine.progress import OnProgress, Progress
from accuscope.engine.sources.tensor import OUTPUT, SourceError, Tensor, TensorError

TOP_DEFAULT, TOP_MAX = 20, 10000
METRICS = ("abs", "rel")
WORDS = {"abs": "absolute", "rel": "relative"}
C_DEFAULT = 1e-3  # the error threshold C of the summary sentence and the charts (op screen, `op`, report)

# Fine bins of the sketch, straight from the float64 bit pattern: bin k >= 1 holds the errors in
# (E(k-1), E(k)] where E(k) is the double whose bits are k << SHIFT; bin 0 holds exact zeros.
# With SUB_BITS mantissa bits each octave has 2**SUB_BITS bins (ratio 2**(1/8) ~ 1.09 between
# edges). The bin of +inf is INF_BIN; indices above it are NaN, i.e. "no error".
SUB_BITS = 3
SHIFT = 52 - SUB_BITS
INF_BIN = 2047 << SUB_BITS
_ROUND = np.uint64((1 << SHIFT) - 1)
_ACC = 1 << (12 + SUB_BITS)  # every index a non-negative double (or a stray negative NaN) can give
_BLOCK = 8192  # dot products in blocks: OpenBLAS goes multi-threaded above 10000, a loss here

ChunkSource = Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]]


def bin_edges(k) -> np.ndarray:
    """E(k): the exact upper edge of fine bin k (an array for an array of bin indices)."""
    return (np.asarray(k, dtype=np.uint64) << np.uint64(SHIFT)).view(np.float64)


def bin_of(c: float) -> int:
    """The fine bin holding the value c >= 0: E(k-1) < c <= E(k)."""
    bits = int(np.float64(c).view(np.uint64))
    return (bits + (1 << SHIFT) - 1) >> SHIFT


# ------------------------------------------------------------------ results


@dataclass
class TopN:
    """The worst elements by one error, worst first (NaN/inf elements first)."""

    by: str  # "abs" or "rel": the ranking error
    index: np.ndarray  # int64 flat element indices
    coords: np.ndarray  # int64 (len, ndim of the layout): coordinates per `OpDetail.layout`
    npu: np.ndarray  # float64 values of the NPU tensor
    golden: np.ndarray  # float64 values of the golden tensor
    abs_err: np.ndarray  # |x - y|: inf or NaN where a side is NaN/inf (shown as "-")
    rel_err: np.ndarray  # |x - y| / |y|; NaN where |golden| <= eps64 (shown as "-")
    nonfinite: np.ndarray  # bool: a side holds NaN/inf the other does not (ranked first)

    def __len__(self) -> int:
        return len(self.index)

    def coord_text(self, i: int) -> str:
        return " ".join(str(int(v)) for v in self.coords[i])


@dataclass
class Histogram:
    """Counts of nonzero finite errors in log-spaced bins; zeros and NaN/inf errors apart."""

    edges: np.ndarray  # len(counts) + 1 increasing edges; bin i is (edges[i], edges[i+1]]
    counts: np.ndarray
    zeros: int
    nonfinite: int
    undefined: int


@dataclass
class ErrorSketch:
    """The distribution of one error over a tensor, compact enough to answer any threshold."""

    metric: str  # "abs" or "rel"
    total: int  # elements in the tensor (the base of every percentage)
    first: int  # fine bin index of counts[0]
    counts: np.ndarray  # int64 per fine bin first.. (bin 0 = exact zeros, INF_BIN = +inf errors)
    undefined: int  # elements without this error: same NaN/inf on both sides; rel: golden is 0
    min: float  # smallest error (NaN when no element has a finite error)
    max: float  # largest finite error (NaN when none)
    top: np.ndarray = field(default_factory=lambda: np.empty(0))  # kept largest errors, descending

    @property
    def word(self) -> str:
        return WORDS[self.metric]

    @property
    def article(self) -> str:
        return "an" if self.metric == "abs" else "a"

    def _bin(self, k: int) -> int:
        j = k - self.first
        return int(self.counts[j]) if 0 <= j < len(self.counts) else 0

    @property
    def zeros(self) -> int:
        """Elements whose error is exactly 0."""
        return self._bin(0)

    @property
    def nonfinite(self) -> int:
        """Elements whose error is +inf: NaN/inf on one side only (or different on the two)."""
        return self._bin(INF_BIN)

    @property
    def defined(self) -> int:
        return self.total - self.undefined

    def _above_bin(self, k: int) -> int:
        """Elements in fine bins above k, i.e. with an error > E(k)."""
        j = max(k + 1 - self.first, 0)
        return int(self.counts[j:].sum()) if j < len(self.counts) else 0

    def count_above(self, c: float) -> tuple[int, int]:
        """(low, high) bounds of the number of elements whose error is greater than c; low == high
        (exact) when c is a bin edge E(k), 0, above the smallest kept TopN error, or when the bin
        holding c is empty."""
        c = float(c)
        if math.isnan(c):
            raise ValueError("threshold is NaN")
        if c < 0:
            return self.defined, self.defined
        if c == math.inf:
            return 0, 0
        k = bin_of(c)
        low = self._above_bin(k)
        high = low if float(bin_edges(k)) == c else low + self._bin(k)
        if low != high and len(self.top):
            kept = int(np.count_nonzero(self.top > c))
            if kept < len(self.top) or len(self.top) >= self.defined:
                return kept, kept
        return low, high

    def estimate_above(self, c: float) -> float:
        """A point estimate within count_above's bounds (log interpolation inside the bin)."""
        low, high = self.count_above(c)
        if low == high:
            return float(low)
        k = bin_of(c)
        lo_edge, hi_edge = float(bin_edges(k - 1)), float(bin_edges(k))
        if lo_edge > 0:
            share = (math.log(hi_edge) - math.log(c)) / (math.log(hi_edge) - math.log(lo_edge))
        else:
            share = (hi_edge - c) / hi_edge
        return low + (high - low) * min(max(share, 0.0), 1.0)

    def fraction_above(self, c: float) -> float:
        return self.estimate_above(c) / self.total if self.total else math.nan

    def edges(self) -> np.ndarray:
        """The thresholds where count_above is exact and the curve is known: E(k) over the bins in use."""
        return bin_edges(np.arange(self.first, self.first + len(self.counts)))

    def curve(self) -> tuple[np.ndarray, np.ndarray]:
        """(thresholds, counts above): the exact cumulative curve at every bin edge in use, from
        0 (all nonzero errors) up to the largest finite edge (the NaN/inf elements only)."""
        ks = np.arange(self.first, self.first + len(self.counts))
        above = np.concatenate([np.cumsum(self.counts[::-1])[::-1][1:], [0]])
        keep = ks < INF_BIN
        return bin_edges(ks[keep]), above[keep].astype(np.int64)

    def histogram(self, max_bins: int = 40) -> Histogram:
        """Nonzero finite errors regrouped into at most max_bins log-spaced bins with exact edges."""
        ks = np.arange(self.first, self.first + len(self.counts))
        finite = (ks > 0) & (ks < INF_BIN)
        used = ks[finite][self.counts[finite] > 0]
        if not len(used):
            return Histogram(np.empty(0), np.empty(0, np.int64), self.zeros, self.nonfinite, self.undefined)
        lo, hi = int(used[0]), int(used[-1])
        width = max(1, math.ceil((hi - lo + 1) / max(1, max_bins)))
        groups = math.ceil((hi - lo + 1) / width)
        counts = np.zeros(groups, np.int64)
        for g in range(groups):
            for k in range(lo + g * width, min(lo + (g + 1) * width, hi + 1)):
                counts[g] += self._bin(k)
        edges = bin_edges(np.minimum(lo - 1 + width * np.arange(groups + 1), hi))
        return Histogram(edges, counts, self.zeros, self.nonfinite, self.undefined)

    def sentence(self, c: float, count: int | None = None) -> str:
        """"A% of tensor elements (B elements) have an absolute error greater than C"."""
        if count is None:
            low, high = self.count_above(c)
            count = low if low == high else None
        if count is None:
            b = self.estimate_above(c)
            amount, bound = f"about {b:,.0f}", "about "
        else:
            b, amount, bound = count, f"{count:,}", ""
        pct = 100.0 * b / self.total if self.total else 0.0
        return (f"{bound}{_pct(pct)}% of tensor elements ({amount} elements) have {self.article} {self.word} error "
                f"greater than {c:g}")


def _pct(p: float) -> str:
    if p == 0 or p == 100:
        return f"{p:.0f}"
    return f"{p:.4g}" if p >= 0.01 else f"{p:.2e}"


@dataclass(frozen=True)
class SideStats:
    """Statistics of one tensor over its finite values."""

    finite: int
    nan: int
    inf: int
    min: float
    max: float
    mean: float
    std: float


@dataclass
class ChannelStats:
    """Per-channel comparison along axis 1 of a 4-D/5-D logical tensor."""

    axis: int
    cos: np.ndarray  # cosine similarity per channel (NaN: one side all zero, or no finite element)
    max_abs: np.ndarray  # max |x - y| per channel (inf when the channel holds a NaN/inf mismatch)
    mean_abs: np.ndarray  # mean |x - y| over the channel's elements with a finite error
    nonfinite: np.ndarray  # int64: NaN/inf mismatches per channel

    def __len__(self) -> int:
        return len(self.cos)

    def worst(self, k: int = 5, by: str = "cos") -> np.ndarray:
        """Indices of the k worst channels: lowest cosine (NaN first) or largest max_abs."""
        if by == "cos":
            key = np.where(np.isnan(self.cos), -np.inf, self.cos)
            return np.argsort(key, kind="stable")[:k]
        return np.argsort(-self.max_abs, kind="stable")[:k]


@dataclass(frozen=True)
class PairInfo:
    """What the two tensors are (for file names, headers and titles)."""

    npu_op: str = ""
    io: str = OUTPUT
    index: int = 0
    golden_op: str = ""  # ground truth op name(s), "," joined
    op_type: str = ""
    npu_file: str = ""
    golden_file: str = ""
    npu_dtype: str = ""
    golden_dtype: str = ""

    @property
    def tensor(self) -> str:
        return f"{self.npu_op}:{self.io}:{self.index}"


@dataclass
class OpDetail:
    n: int
    shape: tuple[int, ...]  # logical shape the coordinates refer to
    layout: str  # "N C H W", "N C D H W" or "ID"
    top_abs: TopN
    top_rel: TopN
    abs: ErrorSketch
    rel: ErrorSketch
    npu_stats: SideStats
    golden_stats: SideStats
    channels: ChannelStats | None
    cosine: float  # over the elements finite on both sides
    mean_abs: float  # over the elements with a finite absolute error
    rmse: float
    elapsed: float = 0.0
    info: PairInfo = field(default_factory=PairInfo)

    def top(self, by: str = "abs") -> TopN:
        return self.top_abs if by == "abs" else self.top_rel

    def sketch(self, by: str = "abs") -> ErrorSketch:
        return self.abs if by == "abs" else self.rel


def layout_of(shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    """(coordinate header, shape the flat index is unravelled into)."""
    if len(shape) == 5:
        return "N C D H W", tuple(shape)
    if 2 <= len(shape) <= 4:
        return "N C H W", tuple(shape) + (1,) * (4 - len(shape))
    return "ID", (math.prod(shape),)


# ------------------------------------------------------------------ the pass


class _Top:
    """Running top-n of a key over chunks: ties keep the lowest index (chunks come in order)."""

    def __init__(self, n: int):
        self.n = n
        self.keys = np.empty(0)
        self.idx = np.empty(0, np.int64)
        self.x = np.empty(0)
        self.y = np.empty(0)
        self.bar = -np.inf  # a new element must beat this (strictly) once n are kept

    def add(self, keys: np.ndarray, base: int, x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> None:
        if len(self.keys) < self.n:
            np.greater_equal(keys, 0.0, out=mask)  # every element with an error (NaN = none)
        else:
            np.greater(keys, self.bar, out=mask)
        cand = np.flatnonzero(mask)
        if not len(cand):
            return
        k = np.concatenate([self.keys, keys[cand]])
        i = np.concatenate([self.idx, cand + base])
        xs = np.concatenate([self.x, x[cand]])
        ys = np.concatenate([self.y, y[cand]])
        if len(k) > self.n:
            keep = _top_positions(k, i, self.n)
            k, i, xs, ys = k[keep], i[keep], xs[keep], ys[keep]
        self.keys, self.idx, self.x, self.y = k, i, xs, ys
        if len(k) >= self.n:
            self.bar = float(k.min())

    def ordered(self):
        order = np.lexsort((self.idx, -self.keys))
        return self.keys[order], self.idx[order], self.x[order], self.y[order]


def _top_positions(keys: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
    """Positions of the n largest keys, ties broken by the lowest idx (no full sort)."""
    kth = len(keys) - n
    v = keys[np.argpartition(keys, kth)[kth]]
    above = np.flatnonzero(keys > v)
    ties = np.flatnonzero(keys == v)
    need = n - len(above)
    if need < len(ties):
        ties = ties[np.argsort(idx[ties], kind="stable")[:need]]
    return np.concatenate([above, ties])


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    m = len(a) // _BLOCK * _BLOCK
    s = 0.0
    if m:
        s = float(np.matmul(a[:m].reshape(-1, 1, _BLOCK), b[:m].reshape(-1, _BLOCK, 1)).sum())
    if m < len(a):
        s += float(np.dot(a[m:], b[m:]))
    return s


class _Side:
    def __init__(self):
        self.finite = self.nan = self.inf = 0
        self.s = self.ss = 0.0
        self.min, self.max = math.inf, -math.inf

    def add(self, v: np.ndarray, ss: float, raw: np.ndarray | None = None) -> None:
        self.finite += len(v)
        self.s += float(v.sum())
        self.ss += ss
        r = raw if raw is not None and raw.dtype in (np.float32, np.float64) else v
        self.min = min(self.min, float(r.min()))
        self.max = max(self.max, float(r.max()))

    def add_mixed(self, v: np.ndarray, ok: np.ndarray) -> None:
        nan = int(np.count_nonzero(np.isnan(v)))
        self.nan += nan
        self.inf += len(v) - int(np.count_nonzero(ok)) - nan
        f = v[ok]
        if len(f):
            self.add(f, _dot(f, f))

    def result(self) -> SideStats:
        n = self.finite
        if not n:
            return SideStats(0, self.nan, self.inf, math.nan, math.nan, math.nan, math.nan)
        mean = self.s / n
        return SideStats(n, self.nan, self.inf, self.min, self.max, mean, math.sqrt(max(self.ss / n - mean * mean, 0.0)))


class _Channels:
    """Per-channel sums; elements come in flat order, channel of element i = (i // inner) % C."""

    def __init__(self, shape: tuple[int, ...]):
        self.c = shape[1]
        self.inner = max(1, math.prod(shape[2:]))
        self.sxy, self.sxx, self.syy, self.sad = (np.zeros(self.c) for _ in range(4))
        self.cnt = np.zeros(self.c, np.int64)
        self.mad = np.zeros(self.c)
        self.bad = np.zeros(self.c, np.int64)
        self._tmp: np.ndarray | None = None  # a scratch buffer, grown as chunks need

    def add(self, lo: int, x: np.ndarray, y: np.ndarray, ad: np.ndarray, buf: np.ndarray,
            mixed: bool) -> tuple[float, float, float, float, int]:
        """Add a chunk starting at flat index lo (x, y zeroed where not comparable; ad inf/NaN
        there when `mixed`). Returns the chunk's totals (sxy, sxx, syy, sum |x-y|, elements with
        a finite |x-y|), so the global sums need no pass of their own."""
        k, inner, c = len(x), self.inner, self.c
        first, last = lo // inner, (lo + k - 1) // inner
        segs = np.arange(first, last + 1)
        starts = np.maximum(segs * inner - lo, 0)
        ch = segs % c
        if mixed:
            ok = np.isfinite(ad)
            dsrc = buf
            np.copyto(dsrc, ad)
            dsrc[~ok] = 0.0
            cnt = np.add.reduceat(ok.astype(np.int64), starts)
            peak: np.ufunc = np.fmax
        else:
            dsrc = ad
            cnt = np.diff(np.append(starts, k))
            peak = np.maximum
        if last - first < 16:  # few long segments: BLAS dots on each piece, no temporaries
            sums = np.zeros((4, len(segs)))
            peaks = np.empty(len(segs))
            bounds = np.append(starts, k)
            for j in range(len(segs)):
                a, b = int(bounds[j]), int(bounds[j + 1])
                xs, ys = x[a:b], y[a:b]
                sums[:, j] = (_dot(xs, ys), _dot(xs, xs), _dot(ys, ys), float(dsrc[a:b].sum()))
                peaks[j] = peak.reduce(ad[a:b])
        else:
            sums = np.empty((4, len(segs)))
            for i, (u, v) in enumerate(((x, y), (x, x), (y, y))):
                tmp = self._scratch(k)
                np.multiply(u, v, out=tmp)
                sums[i] = np.add.reduceat(tmp, starts)
            sums[3] = np.add.reduceat(dsrc, starts)
            peaks = peak.reduceat(ad, starts)
        for acc, row in zip((self.sxy, self.sxx, self.syy, self.sad), sums):
            acc += np.bincount(ch, weights=row, minlength=c)
        self.cnt += np.bincount(ch, weights=cnt, minlength=c).astype(np.int64)
        np.fmax.at(self.mad, ch, peaks)
        t = sums.sum(axis=1)
        return float(t[0]), float(t[1]), float(t[2]), float(t[3]), int(cnt.sum())

    def _scratch(self, k: int) -> np.ndarray:
        if self._tmp is None or len(self._tmp) < k:
            self._tmp = np.empty(k)
        return self._tmp[:k]

    def count_bad(self, positions: np.ndarray) -> None:
        if len(positions):
            self.bad += np.bincount((positions // self.inner) % self.c, minlength=self.c)

    def result(self) -> ChannelStats:
        nx, ny = np.sqrt(self.sxx), np.sqrt(self.syy)
        with np.errstate(all="ignore"):
            cos = np.minimum(self.sxy / (nx * ny), 1.0)
            mean_abs = self.sad / self.cnt
        cos[(nx < EPS64) & (ny < EPS64)] = 1.0
        cos[(nx < EPS64) != (ny < EPS64)] = np.nan
        cos[self.cnt == 0] = np.nan
        mad = np.where(self.bad > 0, np.inf, self.mad)
        mad[(self.cnt == 0) & (self.bad == 0)] = np.nan
        return ChannelStats(1, cos, mad, mean_abs, self.bad.copy())


class _Pass:
    """Accumulators of one detail pass; `add` takes the chunks in flat order."""

    def __init__(self, n: int, shape: tuple[int, ...], top: int):
        self.n = n
        self.shape = shape
        self.size = 0
        self.hist = {m: np.zeros(_ACC, np.int64) for m in METRICS}
        self.tops = {m: _Top(top) for m in METRICS}
        self.mins = {m: math.inf for m in METRICS}
        self.maxs = {m: -math.inf for m in METRICS}
        self.minbin = {m: INF_BIN for m in METRICS}
        self.maxbin = {m: -1 for m in METRICS}
        self.sides = (_Side(), _Side())
        self.sxy = self.sxx = self.syy = self.sad = 0.0
        self.ok = 0  # elements with a finite absolute error
        self.channels = _Channels(shape) if len(shape) in (4, 5) and shape[1] > 1 else None
        self.done = 0

    def _buffers(self, k: int) -> None:
        if k > self.size:
            self.size = k
            self.x, self.y, self.ad, self.ay, self.rel, self.buf = (np.empty(k) for _ in range(6))
            self.u = np.empty(k, np.uint64)
            self.mask = np.empty(k, bool)

    def add(self, xc: np.ndarray, yc: np.ndarray) -> None:
        k = len(xc)
        if not k:
            return
        self._buffers(k)
        lo = self.done
        x, y, ad, ay, rel, buf, u, mask = (a[:k] for a in (self.x, self.y, self.ad, self.ay, self.rel, self.buf,
                                                         self.u, self.mask))
        np.copyto(x, xc, casting="unsafe")
        np.copyto(y, yc, casting="unsafe")
        np.subtract(x, y, out=ad)
        np.abs(ad, out=ad)
        np.abs(y, out=ay)
        np.divide(ad, ay, out=rel)
        tiny = not float(ay.min()) > EPS64  # NaN (a NaN golden) also looks closer
        if tiny:
            np.less_equal(ay, EPS64, out=mask)
            rel[mask] = np.nan  # golden ~0: no relative error
        mx = float(ad.max())
        mixed = not math.isfinite(mx)
        if mixed:
            fx, fy = np.isfinite(x), np.isfinite(y)
            both = fx & fy
            bad = ~both
            same = bad & ((x == y) | (np.isnan(x) & np.isnan(y)))
            mismatch = bad & ~same
            ad[mismatch] = np.inf
            rel[mismatch] = np.inf
            ad[same] = np.nan
            rel[same] = np.nan
            if self.channels is not None:
                self.channels.count_bad(np.flatnonzero(mismatch) + lo)
        for m, v in (("abs", ad), ("rel", rel)):
            np.add(v.view(np.uint64), _ROUND, out=u)
            np.right_shift(u, SHIFT, out=u)
            counts = np.bincount(u.view(np.int64))
            self.hist[m][:len(counts)] += counts
            self.tops[m].add(v, lo, x, y, mask)
            self._extremes(m, v, counts, mixed or (m == "rel" and tiny), mx if m == "abs" else None)
        sx, sy = self.sides
        if mixed:
            sx.add_mixed(x, fx)
            sy.add_mixed(y, fy)
            x[bad] = 0.0
            y[bad] = 0.0
        if self.channels is not None:
            sxy, sxx, syy, sad, ok = self.channels.add(lo, x, y, ad, buf, mixed)
        else:
            sxy, sxx, syy = _dot(x, y), _dot(x, x), _dot(y, y)
            if mixed:
                f = ad[np.isfinite(ad)]
                sad, ok = float(f.sum()), len(f)
            else:
                sad, ok = float(ad.sum()), k
        if not mixed:
            sx.add(x, sxx, xc)
            sy.add(y, syy, yc)
        self.sad += sad
        self.ok += ok
        self.sxy += sxy
        self.sxx += sxx
        self.syy += syy
        self.done += k

    def _extremes(self, m: str, v: np.ndarray, counts: np.ndarray, special: bool, mx: float | None) -> None:
        """Exact min and max of the finite errors; a chunk whose bins cannot hold a new extreme
        is skipped (most chunks, so most of the passes are saved)."""
        if self.mins[m] == 0.0 and not special and len(counts) - 1 < self.maxbin[m]:
            return
        if special:
            f = v[np.isfinite(v)]
            if len(f):
                self.maxs[m] = max(self.maxs[m], float(f.max()))
                self.mins[m] = min(self.mins[m], float(f.min()))
            return
        if len(counts) - 1 >= self.maxbin[m]:
            self.maxs[m] = max(self.maxs[m], mx if mx is not None else float(v.max()))
            self.maxbin[m] = bin_of(self.maxs[m])
        if self.mins[m] > 0.0:
            low = int(np.argmax(counts > 0))
            if low <= self.minbin[m]:
                self.mins[m] = min(self.mins[m], float(v.min()) if low else 0.0)
                self.minbin[m] = bin_of(self.mins[m])

    def result(self) -> OpDetail:
        layout, grid = layout_of(self.shape)
        tops, sketches = {}, {}
        for m in METRICS:
            keys, idx, xs, ys = self.tops[m].ordered()
            with np.errstate(all="ignore"):
                ad = np.abs(xs - ys)
                ay = np.abs(ys)
                rel = np.where(ay > EPS64, ad / np.where(ay > EPS64, ay, 1.0), np.nan)
            coords = np.stack(np.unravel_index(idx, grid), axis=1) if len(idx) else np.empty((0, len(grid)), np.int64)
            nonfinite = ~(np.isfinite(xs) & np.isfinite(ys))
            tops[m] = TopN(m, idx, coords.astype(np.int64), xs, ys, ad, rel, nonfinite)
            h = self.hist[m]
            counts = h[:INF_BIN + 1]
            used = np.flatnonzero(counts)
            first, last = (int(used[0]), int(used[-1])) if len(used) else (0, -1)
            sketches[m] = ErrorSketch(m, self.n, first, counts[first:last + 1].copy(), int(h[INF_BIN + 1:].sum()),
                                      self.mins[m] if self.mins[m] != math.inf else math.nan,
                                      self.maxs[m] if self.maxs[m] != -math.inf else math.nan, keys.copy())
        nx, ny = math.sqrt(self.sxx), math.sqrt(self.syy)
        if nx < EPS64 and ny < EPS64:
            cos = 1.0 if self.n else math.nan
        elif nx < EPS64 or ny < EPS64:
            cos = math.nan
        else:
            cos = min(self.sxy / (nx * ny), 1.0)
        sdd = self.sxx + self.syy - 2 * self.sxy
        ok = self.ok
        return OpDetail(self.n, tuple(self.shape), layout, tops["abs"], tops["rel"], sketches["abs"], sketches["rel"],
                        self.sides[0].result(), self.sides[1].result(),
                        self.channels.result() if self.channels is not None else None, cos,
                        self.sad / ok if ok else math.nan, math.sqrt(max(sdd, 0.0) / ok) if ok else math.nan)


# ------------------------------------------------------------------ entry points


def detail_chunks(source: ChunkSource, n: int, shape: tuple[int, ...] | None = None, *, top: int = TOP_DEFAULT,
                  progress: OnProgress | None = None,
                  cancel: threading.Event | None = None) -> OpDetail | None:
    """The detail of a pair whose chunks `source()` yields in flat order (n elements in all).
    `progress` (elements done of n) is called now and then; returns None when `cancel` gets set."""
    if not 1 <= top <= TOP_MAX:
        raise ValueError(f"TopN must be within 1..{TOP_MAX}, not {top}")
    shape = tuple(shape) if shape is not None else (n,)
    if math.prod(shape) != n:
        raise ValueError(f"shape {list(shape)} does not hold {n} elements")
    started = time.perf_counter()
    acc = _Pass(n, shape, top)
    last = started
    with np.errstate(all="ignore"):
        for xc, yc in source():
            if len(xc) != len(yc):
                raise ValueError("chunks of the two tensors differ in length")
            acc.add(xc, yc)
            if cancel is not None and cancel.is_set():
                return None
            if progress is not None and time.perf_counter() - last > 0.1:
                last = time.perf_counter()
                progress(Progress(acc.done, n))
    if acc.done != n:
        raise ValueError(f"the tensors gave {acc.done} elements, expected {n}")
    if progress is not None:
        progress(Progress(n, n))
    result = acc.result()
    result.elapsed = time.perf_counter() - started
    return result


def array_source(x: np.ndarray, y: np.ndarray, chunk: int = CHUNK) -> ChunkSource:
    if np.size(x) != np.size(y):
        raise ValueError(f"shape {list(np.shape(x))} does not match shape {list(np.shape(y))}")
    return array_chunks(np.asarray(x), np.asarray(y), chunk)


def tensor_source(npu: Tensor, golden: Tensor, chunk: int = CHUNK) -> ChunkSource:
    try:
        return pair_chunks(npu, golden, chunk)
    except TensorError as exc:
        raise SourceError(exc.reason) from None


def detail_arrays(npu: np.ndarray, golden: np.ndarray, *, top: int = TOP_DEFAULT, chunk: int = CHUNK,
                  **kw) -> OpDetail | None:
    """The detail of two arrays (memory maps welcome) of equal element count; coordinates
    follow the NPU array's shape."""
    return detail_chunks(array_source(npu, golden, chunk), int(np.size(npu)), np.shape(npu), top=top, **kw)


def detail_tensors(npu: Tensor, golden: Tensor, *, top: int = TOP_DEFAULT, chunk: int = CHUNK,
                   info: PairInfo | None = None, **kw) -> OpDetail | None:
    """The detail of two tensor handles, read chunk by chunk (plain file reads when the stored
    bytes are the logical data). Coordinates follow the NPU tensor's logical shape, or the golden
    one's when only that one has a channel axis."""
    shape = npu.shape
    if len(shape) not in (4, 5) and len(golden.shape) in (4, 5) and golden.size == npu.size:
        shape = golden.shape
    result = detail_chunks(tensor_source(npu, golden, chunk), npu.size, shape, top=top, **kw)
    if result is not None:
        result.info = info or PairInfo(npu.op, npu.io, npu.index, golden.op, npu.op_type, npu.source, golden.source,
                                       npu.dtype_name or str(npu.dtype), golden.dtype_name or str(golden.dtype))
    return result


def exact_count(source: ChunkSource, c: float, by: str = "abs") -> int:
    """The exact number of elements whose error is greater than c: one more walk over the data
    (same conventions as the detail: NaN/inf mismatches count, undefined errors do not)."""
    total = 0
    with np.errstate(all="ignore"):
        for xc, yc in source():
            x = np.asarray(xc, dtype=np.float64)
            y = np.asarray(yc, dtype=np.float64)
            e = np.abs(x - y)
            if by == "rel":
                ay = np.abs(y)
                e = np.where(ay > EPS64, e / np.where(ay > EPS64, ay, 1.0), np.nan)
            bad = ~(np.isfinite(x) & np.isfinite(y))
            if bad.any():
                same = bad & ((x == y) | (np.isnan(x) & np.isnan(y)))
                e[bad & ~same] = np.inf
                e[same] = np.nan
            total += int(np.count_nonzero(e > c))
    return total
