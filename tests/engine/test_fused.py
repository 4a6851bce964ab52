"""The kernel's fused pass (_kernel.pair): the AVX-512 loops and the portable ones, any number of
threads, equal to the numpy fallback; the counts over 0.1% / 0.5% exactly those of the division."""
from __future__ import annotations

import numpy as np
import pytest

import accuscope.engine.compare.metrics as M
from accuscope.engine.compare.metrics import compare_arrays
from support.kernel import needs_kernel


def numpy_metrics(monkeypatch, x, y):
    with monkeypatch.context() as m:
        m.setattr(M, "_kernel", None)
        return compare_arrays(x, y)


def same(fast, slow):
    assert fast.std == slow.std and fast.reasons == slow.reasons and fast.tpu_verdict == slow.tpu_verdict
    for key, value in slow.values.items():
        assert fast.values[key] == pytest.approx(value, rel=1e-12, abs=1e-15, nan_ok=True), key


@needs_kernel
@pytest.mark.parametrize("threads", [1, 2, 5])
@pytest.mark.parametrize("spread", [1e-4, 0.05, 3.0])
def test_fused_pass_equals_numpy(monkeypatch, loops, threads, spread):
    rng = np.random.default_rng(11)
    y = (rng.standard_normal(300_007) * 4).astype(np.float32)
    y[::89] = 0
    x = (y + rng.standard_normal(y.size) * spread).astype(np.float32)
    same(compare_arrays(x, y, threads=threads), numpy_metrics(monkeypatch, x, y))


@needs_kernel
def test_threads_do_not_change_a_digit(loops):
    rng = np.random.default_rng(12)
    y = rng.standard_normal(1_000_003).astype(np.float32)
    x = (y * 1.01 + 0.1).astype(np.float32)
    one = compare_arrays(x, y, threads=1)
    for threads in (2, 3, 8):
        assert compare_arrays(x, y, threads=threads).values == one.values


@needs_kernel
def test_counts_at_the_thresholds_are_those_of_the_division(monkeypatch, loops):
    """Quotients within an ulp of 1.001 / 0.995: the reciprocal estimate alone would flip some."""
    rng = np.random.default_rng(13)
    y = rng.uniform(0.5, 2, 200_000).astype(np.float32)
    x = np.empty_like(y)
    for k, t in enumerate((1.001, 0.999, 1.005, 0.995)):
        part = slice(k, None, 4)
        x[part] = (y[part].astype(np.float64) * t).astype(np.float32)
        for _ in range(2):  # nudge by a float32 ulp either way
            x[part] = np.where(rng.random(x[part].size) < 0.5, np.nextafter(x[part], np.float32(0)), x[part])
    r = np.abs(x.astype(np.float64) / y.astype(np.float64) - 1)
    got = compare_arrays(x, y)
    assert got.values["rel_0.1%"] == np.mean(r > 0.001) and got.values["rel_0.5%"] == np.mean(r > 0.005)
    same(got, numpy_metrics(monkeypatch, x, y))


@needs_kernel
def test_nan_goes_to_the_chunked_path():
    x = np.ones(100, np.float32)
    assert M._kernel is not None
    assert M._kernel.pair(np.r_[x[:-1], np.float32(np.nan)], x) is None
    assert M._kernel.pair(x, np.r_[x[:-1], np.float32(np.inf)]) is None
    assert M._kernel.pair(x, x) is not None
    with pytest.raises(TypeError):
        M._kernel.pair(np.ones(3), np.ones(3))


@needs_kernel
@pytest.mark.parametrize("where", [0, 70_000, 131_071, 140_000])  # first unit, a later one, a unit's end, the tail
def test_nan_or_inf_anywhere_is_seen(loops, where):
    """The AVX-512 walk flags NaN/inf by the sums (a float64 sum of float32 values does not overflow)."""
    x = np.full(140_007, np.float32(3e38))  # the largest finite values are not taken for inf
    x[1::2] = np.float32(-3.4e38)
    assert M._kernel is not None
    assert M._kernel.pair(x, x) is not None
    for bad in ([np.inf], [np.nan], [np.inf, -np.inf]):
        y = x.copy()
        y[where:where + len(bad)] = bad
        assert M._kernel.pair(x, y) is None and M._kernel.pair(y, x) is None


def varied_pairs(n):
    """(npu, golden) shaped like real ones (benchmarks/bench_metrics.py's kinds) and the degenerate ones."""
    rng = np.random.default_rng(14)
    g = rng.standard_normal(n).astype(np.float32)
    noise = rng.standard_normal(n).astype(np.float32)
    step = float(np.abs(g).max()) / 127
    int8 = (np.round(g / step) * step).astype(np.float32)
    nan = g.copy()
    nan[::1000] = np.nan
    nan[7::1000] = np.inf
    return {
        "fp16-like noise": (g + noise * np.float32(1e-3), g),
        "ReLU output": (np.maximum(g + noise * np.float32(1e-3), 0), np.maximum(g, 0)),
        "int8 quantized": (int8, g),
        "ReLU of int8": (np.maximum(int8, 0), np.maximum(g, 0)),
        "unrelated": (noise, g),
        "nearly equal": (g + noise * np.float32(1e-6), g),
        "zero golden": (g, np.zeros_like(g)),
        "both zero": (np.zeros_like(g), np.zeros_like(g)),
        "golden within eps64 of 0": (g, np.where(np.arange(n) % 3 == 0, np.float32(1e-20), g).astype(np.float32)),
        "NaN/inf at the same positions": (nan, (nan + np.float32(1e-3)).astype(np.float32)),
        "NaN/inf at different positions": (nan, g),
        "float16": (g.astype(np.float16), (g + noise * np.float32(2e-3)).astype(np.float16)),
    }


@needs_kernel
@pytest.mark.parametrize("kind", list(varied_pairs(10)))
def test_numpy_fallback_equals_the_kernel_on_varied_pairs(monkeypatch, kind):
    """Several of the fallback's chunks (and a short last one): its floor skipped or not, its series
    cut per element, its far elements, its zero goldens, against the kernel's fused pass."""
    x, y = varied_pairs(3 * M.NUMPY_CHUNK + 1001)[kind]
    same(compare_arrays(x, y), numpy_metrics(monkeypatch, x, y))


@needs_kernel
def test_numpy_fallback_where_zero_pairs_or_zero_goldens_come_and_go(monkeypatch):
    """The fallback drops the pairs (0, 0) from chunks where they are many and stops looking after a
    chunk with few; it zeroes r by index where a chunk has few goldens within eps64 of 0: pairs whose
    chunks change kind midway, against the kernel."""
    relu_x, relu_y = varied_pairs(3 * M.NUMPY_CHUNK)["ReLU output"]
    x, y = varied_pairs(2 * M.NUMPY_CHUNK + 777)["fp16-like noise"]
    y = y.copy()
    y[::50] = np.float32(1e-20)  # a few tiny goldens per chunk: r is 0 there
    y[7::97] = 0
    for a, b in (((relu_x, x), (relu_y, y)), ((x, relu_x), (y, relu_y))):
        xs, ys = np.concatenate(a), np.concatenate(b)
        same(compare_arrays(xs, ys), numpy_metrics(monkeypatch, xs, ys))


def edge_pairs(n):
    """(npu, golden) at the edges of the data: float32 denormals, integer and half-precision dtypes,
    bfloat16 values (as the dumps hold them: float32 with the low 16 bits cleared), inf and NaN."""
    rng = np.random.default_rng(15)
    g = rng.standard_normal(n).astype(np.float32)
    noise = rng.standard_normal(n).astype(np.float32)
    tiny = (g * np.float32(1e-39)).astype(np.float32)  # below float32's smallest normal
    bf16 = (g.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    inf = g.copy()
    inf[::5] = np.inf
    return {
        "denormal golden": (g, tiny),
        "denormals on both sides": (tiny, (tiny * np.float32(1.01)).astype(np.float32)),
        "int8": (np.clip(np.round(g * 30), -128, 127).astype(np.int8),
                 np.clip(np.round(g * 30 + noise), -128, 127).astype(np.int8)),
        "int32": ((g * 1e5).astype(np.int32), (g * 1e5 + noise * 10).astype(np.int32)),
        "float16": ((g + noise * np.float32(1e-2)).astype(np.float16), g.astype(np.float16)),
        "float16 ReLU outputs, some -0": (np.maximum(g + noise * np.float32(1e-2), 0).astype(np.float16),
                                          np.where(np.arange(n) % 7 == 0, np.float16(-0.0), np.maximum(g, 0)).astype(np.float16)),
        "bfloat16 values": (((bf16 * np.float32(1.004)).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32), bf16),
        "inf at the same positions": (inf, np.where(np.isinf(inf), inf, inf + noise * np.float32(1e-3))),
        "NaN on one side": (np.where(np.arange(n) == n // 2, np.float32(np.nan), g).astype(np.float32), g),
    }


@needs_kernel
@pytest.mark.parametrize("n", [1, 2, 7, M.NUMPY_CHUNK - 1, M.NUMPY_CHUNK, 2 * M.NUMPY_CHUNK + 1])
@pytest.mark.parametrize("kind", list(edge_pairs(10)))
def test_numpy_fallback_equals_the_kernel_on_edge_data(monkeypatch, kind, n):
    """Lengths of one element to a chunk and one more, not a multiple of the chunk, on the edges of the data."""
    x, y = edge_pairs(n)[kind]
    with np.errstate(all="ignore"):
        same(compare_arrays(x, y), numpy_metrics(monkeypatch, x, y))


@needs_kernel
def test_empty_tensors_on_both(monkeypatch):
    x = np.zeros(0, np.float32)
    fast, slow = compare_arrays(x, x), numpy_metrics(monkeypatch, x, x)
    assert fast.reasons == slow.reasons == ["empty tensor"]


@needs_kernel
@pytest.mark.parametrize("n", [5, 3 * M.CHUNK + 1001])
@pytest.mark.parametrize("kind", ["fp16-like noise", "ReLU output", "unrelated", "denormal golden", "denormals on both sides",
                                  "int8", "float16", "inf at the same positions"])
def test_numpy_fallback_on_a_streamed_pair_equals_the_kernel(monkeypatch, kind, n):
    """A pair read chunk by chunk (as pairjob streams those over MAPPED_BYTES; NaN/inf pairs take the same
    walks): the chunked moments and the KL walk, its floors and sums per chunk from the moments'. The
    chunk's range is a Python float there too (a float32 one made the KL's scale in float32: 5e-9 off,
    inf on denormals)."""
    x, y = {**varied_pairs(n), **edge_pairs(n)}[kind]
    with np.errstate(all="ignore"):
        fast = compare_arrays(x, y)
        with monkeypatch.context() as m:
            m.setattr(M, "_kernel", None)
            slow = M.compare_chunks(lambda: ((x[lo:lo + M.CHUNK], y[lo:lo + M.CHUNK]) for lo in range(0, n, M.CHUNK)),
                                    n, x.dtype, y.dtype)
    same(fast, slow)
