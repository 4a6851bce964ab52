"""sources/layout.in_layout_of: a channels-last tensor (a .tflite's NHWC) read in its counterpart's
channels-first order (ONNX's NCHW), or the other way, only where the two shapes say so."""
from __future__ import annotations

from functools import partial

import numpy as np

from accuscope.engine.sources.layout import in_layout_of
from accuscope.engine.sources.tensor import Tensor


def _tensor(data: np.ndarray) -> Tensor:
    return Tensor(op="op", io="output", index=0, dtype=data.dtype, shape=data.shape, source="x.npy",
                  reader=partial(np.array, data))


def test_channels_moved_where_the_shapes_say_so():
    nchw = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    nhwc = _tensor(nchw.transpose(0, 2, 3, 1))
    moved = in_layout_of(nhwc, nchw.shape)
    assert moved.shape == (2, 3, 4, 5) and moved.conversion.startswith("NHWC->NCHW")
    assert np.array_equal(moved.load(), nchw)
    back = in_layout_of(_tensor(nchw), (2, 4, 5, 3))
    assert back.conversion.startswith("NCHW->NHWC") and np.array_equal(back.load(), nchw.transpose(0, 2, 3, 1))


def test_anything_else_unchanged():
    same = _tensor(np.zeros((1, 4, 4, 4), np.float32))
    assert in_layout_of(same, (1, 4, 4, 4)) is same  # alike shapes: nothing says the layouts differ
    other = _tensor(np.zeros((1, 2, 3, 4), np.float32))
    assert in_layout_of(other, (1, 3, 2, 4)) is other  # a permutation that is no channel move
    assert in_layout_of(other, (24,)) is other
    flat = _tensor(np.zeros((6, 4), np.float32))
    assert in_layout_of(flat, (4, 6)) is flat
