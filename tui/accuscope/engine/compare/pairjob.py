"""One pair's comparison as a unit of work: a `Job` (row, tensors, metrics, kernel threads), the
pair's data in chunks (memory-mapped or streamed, `pair_chunks`), how many threads a pair of its
size takes (`pair_threads`), and `run_job`: the row's metric cells, any failure a reason on the row.
comparison.execute runs many; repair.recheck re-runs the re-paired ones."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from accuscope.engine.compare import faults
from accuscope.engine.compare.columns import COMPUTED_FLOATS, METRIC
from accuscope.engine.compare.metrics import (
    CHUNK,
    GROUP_DTYPES,
    PairMetrics,
    array_chunks,
    compare_chunks,
    fused_columns,
    kernel_pairs,
)
from accuscope.engine.compare.statistics import shape_mismatch
from accuscope.engine.sources.npyfile import held_data
from accuscope.engine.sources.tensor import Tensor, TensorError


@dataclass(frozen=True, init=False)
class Job:
    row: int
    npu: Tensor
    golden: Tensor
    metrics: tuple[str, ...]
    threads: int = 1  # threads inside the kernel for this pair (pair_threads)

    def __init__(self, row: int, npu: Tensor, golden: Tensor, metrics: tuple[str, ...], threads: int = 1):
        """The frozen dataclass's __init__ as Pair's: one update of the instance's dict (one Job a row)."""
        self.__dict__.update(row=row, npu=npu, golden=golden, metrics=metrics, threads=threads)


THREAD_ELEMENTS = 1 << 19  # a split pair gets one kernel thread per this many elements, up to the workers
SPLIT_ELEMENTS = 1 << 22  # pairs of fewer elements run whole, one per thread, `workers` at a time


def pair_threads(n: int, workers: int) -> int:
    """How a comparison uses the cores, decided here only, by size: a pair of at least
    SPLIT_ELEMENTS (16 MB of float32 a side) is split over min(workers, n / THREAD_ELEMENTS)
    threads inside the kernel (its fused pass cuts the data in 64k-element units that threads
    take in turn, the GIL released, the units' sums added in order: the same digits on any
    number of threads); smaller pairs run whole, one per thread, `workers` of them at a time
    (runners.run_threads). Whole pairs side by side keep every core busy with no barrier: a split pair
    waits twice for its slowest thread, starts threads twice, and leaves the other cores idle
    while Python opens the next pair and makes the row (2 idle cores of a Xeon, 120 pairs of 1M
    elements: 192-199 ms whole, two at a time, against 206-214 ms split, 337-397 on one worker;
    medians of 9 processes). On 64 cores a 1M-element pair takes 1 thread, 64 such pairs at a
    time, and one of 8M 16; what is left serial is Python's per-pair bookkeeping under the GIL."""
    if n < SPLIT_ELEMENTS:
        return 1
    return max(1, min(workers, n // THREAD_ELEMENTS))


def tensor_chunks(t: Tensor, size: int) -> Iterator[np.ndarray]:
    """The tensor's elements in order, `size` at a time: plain file reads into one reused buffer
    when the stored bytes already are the logical data (RSS stays at one chunk), else slices of
    the loaded (converted) array."""
    p = t.payload
    if p is not None and not t.conversion and p.dtype == t.dtype and p.nbytes:
        buf = np.empty(min(size, p.nbytes // p.dtype.itemsize), dtype=p.dtype)
        with open(p.path, "rb", buffering=0) as fh:
            fh.seek(p.offset)
            remaining = p.nbytes // p.dtype.itemsize
            while remaining:
                k = min(len(buf), remaining)
                view = buf[:k]
                if fh.readinto(view.data.cast("B")) != view.nbytes:
                    raise TensorError(t.source, t.name, "file ends before the tensor's last byte")
                yield view
                remaining -= k
        return
    flat = t.load().reshape(-1)
    for lo in range(0, flat.size, size):
        yield flat[lo:lo + size]


MAPPED_BYTES = 64 << 20  # pairs up to this size are walked memory-mapped, larger ones streamed


def pair_chunks(npu: Tensor, golden: Tensor, size: int = CHUNK) -> Callable[[], Iterable]:
    """A chunk source (metrics.ChunkSource) over a tensor pair; TensorError when their shapes do not
    allow it (statistics.shape_mismatch).

    The metrics walk the pair twice (the KL walk needs each side's range first). A pair of up to
    MAPPED_BYTES is memory-mapped, so the second walk reads pages already mapped instead of
    reading the files again; larger pairs are streamed through one chunk buffer per side, which
    keeps the RSS of a many-GB pair at a few MB."""
    n = npu.size
    if n != golden.size or npu.conversion or golden.conversion:  # (a merged tensor's shape is checked whole)
        reason = shape_mismatch(npu, golden)
        if reason:
            raise TensorError(npu.source, npu.name, reason)
    if n * ((npu.dtype.itemsize if npu.dtype else 0) + (golden.dtype.itemsize if golden.dtype else 0)) <= MAPPED_BYTES:
        return array_chunks(npu.load(), golden.load(), size)
    return lambda: zip(tensor_chunks(npu, size), tensor_chunks(golden, size))


def run_job(job: Job) -> tuple[int, dict]:
    """Compare one pair; any failure becomes a reason on the row, never an exception."""
    x, y = job.npu, job.golden
    faults.point("pair", x.name)
    try:
        m = compare_chunks(pair_chunks(x, y), x.size, x.dtype, y.dtype, kl="kl" in job.metrics, threads=job.threads)
    except (TensorError, OSError, ValueError, MemoryError) as exc:
        return job.row, {"reason": getattr(exc, "reason", None) or str(exc)}
    out = metric_cells(m, job.metrics)
    out["reason"] = "; ".join(m.reasons)
    return job.row, out


GROUP_ELEMENTS = 1 << 16  # a group's elements at most (runners.in_groups); a pair larger than this runs alone,
# through run_job's chunked reads: joined into a group it would be loaded whole (a mapped file faults a page at a time)


def run_small(jobs: list[Job]) -> list[tuple[int, dict]]:
    """Compare a group of small pairs (each on one thread), in the jobs' order: the cells run_job
    gives, made for the pairs the kernel's fused pass takes whole (float32 and the dtypes it holds
    exactly, no bool, equal sizes, no layout conversion, finite data) in one kernel call for them
    all (_kernel.pairs, over both sides' elements joined) and their cells as columns
    (metrics.fused_columns); the rest by run_job. A network of thousands of tiny tensors: a few
    microseconds a pair instead of tens (run_job's work per pair in Python: the chunk source, the
    kernel call, PairMetrics and its cells one by one)."""
    metrics = jobs[0].metrics if jobs else ()
    kl, armed = "kl" in metrics, faults.armed()
    taken: list[Job] = []
    sizes: list[int] = []
    xs: list = []
    ys: list = []
    for job in jobs:
        x, y = job.npu, job.golden
        if (job.metrics != metrics or job.threads != 1 or x.conversion or y.conversion or x.dtype not in GROUP_DTYPES
                or y.dtype not in GROUP_DTYPES):
            continue
        n = x.size
        if n == 0 or n > GROUP_ELEMENTS or (x.shape != y.shape and n != y.size):  # empty, alone, or sizes that
            continue  # differ: run_job (it says why)
        if armed:
            faults.point("pair", x.name)
        try:
            a, b = _float32_data(x), _float32_data(y)
        except (TensorError, OSError, ValueError, MemoryError):
            continue  # run_job says why
        taken.append(job)
        sizes.append(n)
        xs.append(a)
        ys.append(b)
    found: dict[int, dict] = {}
    if taken:
        bounds = np.zeros(len(taken) + 1, dtype=np.int64)
        np.cumsum(sizes, out=bounds[1:])
        sums = np.empty((len(taken), 24))
        bad = kernel_pairs(np.frombuffer(b"".join(xs), np.float32), np.frombuffer(b"".join(ys), np.float32),
                           bounds, sums, kl)
        counts = np.array(sizes, dtype=np.int64)
        if bad:  # NaN/inf: the per-pair path counts them
            keep = np.ones(len(taken), dtype=bool)
            keep[bad] = False
            taken = [j for j, k in zip(taken, keep.tolist()) if k]
            sums, counts = sums[keep], counts[keep]
        columns = fused_columns(sums, counts, kl)
        values_of, attributes = _cell_keys(metrics)
        keys = (*values_of, *attributes, "reason")
        if all(k in columns for k in keys):  # else a metric _fill_values alone makes (a recipe's): run_job's cells
            for job, values in zip(taken, zip(*[columns[k] for k in keys])):
                found[job.row] = dict(zip(keys, values))
    return [(job.row, found[job.row]) if job.row in found else run_job(job) for job in jobs]


_F32 = np.dtype(np.float32)


def _float32_data(t: Tensor):
    """A tensor's elements in C order as float32 bytes (a buffer): a tiny npy file's bytes as its listing read
    them, else its data cast."""
    held = held_data(t) if t.dtype == _F32 else None
    return held if held is not None else np.ascontiguousarray(t.load().reshape(-1), dtype=np.float32)


def metric_cells(m: PairMetrics, metrics: tuple[str, ...]) -> dict:
    """The row's metric cells: msaccucmp's as selected (--algorithms), the extras always (those
    computed from tensor data; recorded statistics are compared elsewhere)."""
    values_of, attributes = _cell_keys(metrics)
    values = m.values
    cells = {k: values[k] for k in values_of}
    for k in attributes:
        cells[k] = getattr(m, k)
    return cells


@lru_cache(maxsize=32)
def _cell_keys(metrics: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The cells' keys: (those in PairMetrics.values, those that are its attributes)."""
    keys = [k for k, r in METRIC.items() if (k in metrics or r.origin != "msaccucmp") and not r.recorded
            and not r.apart]
    return tuple(k for k in keys if k in COMPUTED_FLOATS), tuple(k for k in keys if k not in COMPUTED_FLOATS)
