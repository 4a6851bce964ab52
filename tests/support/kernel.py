"""The compiled kernel's test switches: skip without it, and each test once per loop it has."""
from __future__ import annotations

import pytest

import accuscope.engine.compare.metrics as M

needs_kernel = pytest.mark.skipif(M._kernel is None, reason="no kernel: not built or ACCUSCOPE_KERNEL=numpy")


@pytest.fixture(params=["simd", "portable"])
def loops(request):
    """The kernel's AVX-512 loops, then its portable ones (skipped where the CPU has no AVX-512)."""
    kernel = M._kernel
    if kernel is None:  # the tests taking it are marked needs_kernel
        pytest.skip("no kernel: not built or ACCUSCOPE_KERNEL=numpy")
    was = kernel.simd()
    if request.param == "portable":
        kernel.simd(False)
    elif not was:
        pytest.skip("this CPU has no AVX-512")
    yield request.param
    kernel.simd(was)
