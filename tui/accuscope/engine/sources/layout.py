"""Device storage layouts (NC1HWC0, FRACTAL_Z, FRACTAL_NZ) to and from logical layouts.

`to_logical` does one copy: it walks the C1 blocks and writes each cropped, transposed slab
straight into the output, so padded channels are never materialised a second time.
`to_storage` (used by the dump writer) pads with zeros, as the device does.

`in_layout_of`: a channels-last tensor (TFLite's NHWC) read in its counterpart's channels-first order
(ONNX's, PyTorch's NCHW), or the other way, where the two shapes say so.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from accuscope.engine.sources.tensor import Tensor, replaced

# Formats whose storage order already is a logical order: data are used as stored.
PLAIN_FORMATS = {
    "NCHW", "NHWC", "ND", "HWCN", "CHWN", "NDHWC", "NCDHW", "DHWCN", "DHWNC", "CN", "NC", "MD",
}
CONVERTED = {"NC1HWC0": "NCHW", "FRACTAL_Z": "NCHW", "FRACTAL_NZ": "ND"}


class LayoutError(ValueError):
    pass


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def logical_shape_guess(fmt: str, storage: tuple[int, ...]) -> tuple[int, ...]:
    """Uncropped logical shape when the dump carries no original_shape."""
    if fmt == "NC1HWC0" and len(storage) == 5:
        n, c1, h, w, c0 = storage
        return (n, c1 * c0, h, w)
    if fmt == "FRACTAL_NZ" and len(storage) >= 4:
        *batch, k1, m1, m0, k0 = storage
        return (*batch, m1 * m0, k1 * k0)
    return tuple(storage)


def check(fmt: str, storage: tuple[int, ...], logical: tuple[int, ...]) -> None:
    """Raise LayoutError unless `storage` in `fmt` can hold a tensor of `logical` shape."""
    ok = False
    if fmt in CONVERTED and storage and storage[-1] == 0:
        raise LayoutError(f"{fmt} storage shape {list(storage)} has a block size (C0) of 0")
    if fmt == "NC1HWC0" and len(storage) == 5 and len(logical) == 4:
        n, c1, h, w, c0 = storage
        ok = (n, h, w) == (logical[0], logical[2], logical[3]) and _ceil(logical[1], c0) == c1
    elif fmt == "FRACTAL_Z" and len(storage) == 4 and len(logical) == 4:
        c1hw, no, ni, c0 = storage
        n, c, h, w = logical
        ok = _ceil(c, c0) * h * w == c1hw and no * ni >= n
    elif fmt == "FRACTAL_NZ" and len(storage) >= 4 and len(logical) >= 2:
        *batch, k1, m1, m0, k0 = storage
        m, k = logical[-2:]
        ok = math.prod(batch) == math.prod(logical[:-2]) and _ceil(k, k0) == k1 and m1 * m0 >= m
    elif fmt not in CONVERTED:
        raise LayoutError(f"no conversion from {fmt}")
    if not ok:
        raise LayoutError(f"{fmt} storage shape {list(storage)} does not fit logical shape {list(logical)}")


def to_logical(data: np.ndarray, fmt: str, logical: tuple[int, ...]) -> np.ndarray:
    """Convert `data` (storage shape) in format `fmt` to a new C-contiguous array of `logical` shape."""
    check(fmt, tuple(data.shape), logical)
    out = np.empty(logical, dtype=data.dtype)
    if out.size == 0:
        return out
    if fmt == "NC1HWC0":
        c0 = data.shape[-1]
        for b, lo, hi in _blocks(data.shape[1], c0, logical[1]):
            out[:, lo:hi] = data[:, b, :, :, : hi - lo].transpose(0, 3, 1, 2)
    elif fmt == "FRACTAL_Z":
        c1hw, no, ni, c0 = data.shape
        n, c, h, w = logical
        five = data.reshape(c1hw // (h * w), h, w, no * ni, c0)
        for b, lo, hi in _blocks(five.shape[0], c0, c):
            out[:, lo:hi] = five[b, :, :, :n, : hi - lo].transpose(2, 3, 0, 1)
    else:  # FRACTAL_NZ
        *_, k1, m1, m0, k0 = data.shape
        m, k = logical[-2:]
        src = data.reshape(-1, k1, m1 * m0, k0)
        flat = out.reshape(-1, m, k)
        for b, lo, hi in _blocks(k1, k0, k):
            flat[:, :, lo:hi] = src[:, b, :m, : hi - lo]
    return out


def _blocks(count: int, width: int, limit: int):
    """(block, lo, hi) of each C1 block, the last one cropped to `limit`."""
    for b in range(count):
        lo = b * width
        hi = min(lo + width, limit)
        if hi > lo:
            yield b, lo, hi


def to_storage(data: np.ndarray, fmt: str, c0: int = 16) -> np.ndarray:
    """Pad and rearrange a logical array into device storage layout `fmt` (zeros in the padding)."""
    if fmt == "NC1HWC0":
        n, c, h, w = data.shape
        c1 = _ceil(c, c0)
        padded = np.zeros((n, c1 * c0, h, w), dtype=data.dtype)
        padded[:, :c] = data
        return np.ascontiguousarray(padded.reshape(n, c1, c0, h, w).transpose(0, 1, 3, 4, 2))
    if fmt == "FRACTAL_Z":
        n, c, h, w = data.shape
        c1, no = _ceil(c, c0), _ceil(n, 16)
        padded = np.zeros((no * 16, c1 * c0, h, w), dtype=data.dtype)
        padded[:n, :c] = data
        six = padded.reshape(no, 16, c1, c0, h, w).transpose(2, 4, 5, 0, 1, 3)
        return np.ascontiguousarray(six).reshape(c1 * h * w, no, 16, c0)
    if fmt == "FRACTAL_NZ":
        *batch, m, k = data.shape
        k1, m1 = _ceil(k, c0), _ceil(m, 16)
        padded = np.zeros((*batch, m1 * 16, k1 * c0), dtype=data.dtype)
        padded[..., :m, :k] = data
        nb = len(batch)
        shaped = padded.reshape(*batch, m1 * 16, k1, c0)
        order = (*range(nb), nb + 1, nb, nb + 2)
        return np.ascontiguousarray(shaped.transpose(order)).reshape(*batch, k1, m1, 16, c0)
    if fmt in PLAIN_FORMATS:
        return np.ascontiguousarray(data)
    raise LayoutError(f"no conversion to {fmt}")


# a 4-D tensor's channels moved last -> first, and first -> last: (transpose axes, what the conversion says)
_CHANNEL_MOVES = (((0, 3, 1, 2), "NHWC->NCHW"), ((0, 2, 3, 1), "NCHW->NHWC"))


def fits(shape: tuple[int, ...], dims) -> bool:
    """Whether `shape` fits declared `dims` (ints, or None/str where dynamic: any size)."""
    return len(shape) == len(dims) and all(not isinstance(d, int) or d == n for d, n in zip(dims, shape))


def channel_move(shape: tuple[int, ...], dims) -> tuple[tuple[int, ...], str] | None:
    """(transpose axes, "NHWC->NCHW" or "NCHW->NHWC") that read a 4-D `shape` in the layout of `dims`
    (`fits`), where `shape` does not fit `dims` as it is and its channels moved first or last does;
    else None."""
    if len(shape) != 4 or dims is None or len(dims) != 4 or fits(tuple(shape), dims):
        return None
    for axes, what in _CHANNEL_MOVES:
        if fits(tuple(shape[k] for k in axes), dims):
            return axes, what
    return None


def in_layout_of(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """`t` read in the layout of a counterpart shaped `shape`, where the shapes differ and `t`'s channels
    moved first (NHWC -> NCHW: a .tflite's activations against the ONNX or PyTorch model it came from) or
    last gives `shape`; any other tensor unchanged. Where the two shapes are alike (H = W = C) nothing says
    the layouts differ, and nothing is moved."""
    shape = tuple(shape)
    move = channel_move(tuple(t.shape), shape)
    if move is None or t.reader is None or t.conversion:
        return t
    axes, what = move
    return replaced(t, shape=shape, reader=partial(_moved, t.reader, axes), payload=None,
                    conversion=f"{what} (the counterpart's layout)")


def _moved(reader, axes: tuple[int, ...]) -> np.ndarray:
    return np.ascontiguousarray(reader().transpose(axes))
