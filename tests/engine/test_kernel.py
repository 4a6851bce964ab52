"""The compiled kernel (engine/compare/_kernel.c): built, and equal to the numpy fallback; the other
compiled part, the dump.json scanner, is built too (its equality: test_dumpscan)."""
from __future__ import annotations

import importlib
import os

import numpy as np
import pytest

import accuscope.engine.compare.metrics as M
from accuscope.engine.compare.metrics import compare_arrays

needs_kernel = pytest.mark.skipif(M._kernel is None, reason="no kernel: not built (see the first test) or ACCUSCOPE_KERNEL=numpy")


@pytest.mark.parametrize("module", ["accuscope.engine.compare._kernel",  # the metrics
                                    "accuscope.engine.sources._dumpscan"])  # msprobe's dump.json (test_dumpscan)
def test_the_compiled_parts_are_built(module):
    if os.environ.get("ACCUSCOPE_KERNEL") == "numpy":
        pytest.skip("ACCUSCOPE_KERNEL=numpy: the fallbacks alone are under test")
    try:
        importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(f"{module} did not build ({exc}): install a C compiler and the Python headers, then "
                    "reinstall, or set ACCUSCOPE_KERNEL=numpy")


@needs_kernel
@pytest.mark.parametrize("spread", [2.0, 200.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.dtype(">f4")])
def test_kernel_and_numpy_give_the_same_numbers(monkeypatch, dtype, spread):
    rng = np.random.default_rng(6)
    y = (rng.standard_normal(100_003) * 50).astype(dtype)
    y[::101] = 0
    x = (y + rng.standard_normal(y.size) * spread).astype(dtype)
    fast = compare_arrays(x, y)
    monkeypatch.setattr(M, "_kernel", None)
    slow = compare_arrays(x, y)
    assert fast.std == slow.std and fast.reasons == slow.reasons
    for key, value in slow.values.items():
        assert fast.values[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key


@needs_kernel
def test_kernel_takes_only_two_float32_or_two_float64_buffers_of_one_length():
    f4, f8 = np.ones(3, np.float32), np.ones(3)
    kernel = M._kernel
    assert kernel is not None
    with pytest.raises(TypeError, match="float32"):
        kernel.moments(f4, f8)
    with pytest.raises(TypeError):
        kernel.moments(np.ones(3, np.int32), np.ones(3, np.int32))
    with pytest.raises(ValueError, match="lengths"):
        kernel.kl(f8, np.ones(4), 0, 1e-7, 0, 1e-7, 1, 0.1)
    with pytest.raises(ValueError, match="contiguous"):
        kernel.moments(np.ones((3, 2))[:, 0], np.ones(3))  # not contiguous
