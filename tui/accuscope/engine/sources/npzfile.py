"""The .npz archive as a Reader: one tensor a member, named by its key (`npyfile.read_npz`)."""
from __future__ import annotations

import os

from accuscope.engine.sources import kinds
from accuscope.engine.sources.npyfile import read_npz
from accuscope.engine.sources.tensor import Problem, Tensor

KIND = kinds.NPZ


def sniff(path: str) -> bool:
    return os.path.isfile(path) and path.lower().endswith(".npz")


def read(path: str, **_options) -> tuple[list[Tensor], list[Problem]]:
    return read_npz(path)


def describe(path: str, tensors: list[Tensor], **_options) -> list[str]:
    return []
