"""Raw .bin/.bmrt/.dat files as a Reader: bare little-endian values, one tensor a file, its shape and dtype
given by the user (`--shape`, `--dtype`): the file carries neither."""
from __future__ import annotations

import math
import os
from functools import partial

import numpy as np

from accuscope.engine.sources import kinds
from accuscope.engine.sources.npyfile import nd_tensor
from accuscope.engine.sources.tensor import Payload, Problem, SourceError, Tensor, read_payload

KIND = kinds.BIN
SUFFIXES = (".bin", ".bmrt", ".dat")


def sniff(path: str) -> bool:
    return os.path.isfile(path) and path.lower().endswith(SUFFIXES)


def read(path: str, shape=None, dtype=None, **_options) -> tuple[list[Tensor], list[Problem]]:
    """Bare little-endian values; the file carries no shape or dtype, so the caller must give both."""
    if shape is None or dtype is None:
        raise SourceError(f"{path}: a raw binary file needs both shape and dtype")
    try:
        dt = np.dtype(dtype).newbyteorder("<")
        dims = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    except (TypeError, ValueError) as exc:
        raise SourceError(f"{path}: bad shape {shape!r} or dtype {dtype!r}: {exc}") from exc
    if dt.hasobject or any(n < 0 for n in dims):
        raise SourceError(f"{path}: unusable shape {dims} or dtype {dt}")
    nbytes = math.prod(dims) * dt.itemsize
    size = os.path.getsize(path)
    if size != nbytes:
        raise SourceError(f"{path}: file holds {size} bytes but shape {dims} of {dt.name} needs {nbytes}")
    payload = Payload(path, 0, nbytes, dt, dims)
    op = os.path.splitext(os.path.basename(path))[0]
    return [nd_tensor(op, path, dtype=dt, shape=dims, payload=payload, reader=partial(read_payload, payload))], []


def describe(path: str, tensors: list[Tensor], **_options) -> list[str]:
    return []
