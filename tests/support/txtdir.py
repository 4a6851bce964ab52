"""A made-up platform's dump, read by a reader written as ARCHITECTURE.md's recipe says (tests/cli/test_recipes.py
copies it into a copy of the package): a folder `dev/` (the device's run) beside `ref/` (the reference's), each a
`{op}.{k}.txt` file per op output, a line of its shape then its values; one folder holding both sides."""
from __future__ import annotations

import os
from functools import partial

import numpy as np

from accuscope.engine.sources.tensor import OUTPUT, Problem, SourceError, Tensor

SIDES = ("dev", "ref")


def sniff(path: str) -> bool:
    return os.path.isdir(path) and all(os.path.isdir(os.path.join(path, side)) for side in SIDES)


def read(path: str, side: str = SIDES[0], **_options) -> tuple[list[Tensor], list[Problem]]:
    """The tensors of one side (`side`: dev or ref; the registry declares which a comparison of the folder
    against itself takes), in the files' name order."""
    if side not in SIDES:
        raise SourceError(f"{path}: holds the runs {' and '.join(SIDES)}; choose one, not {side!r}")
    folder = os.path.join(path, side)
    tensors, problems = [], []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".txt"):
            continue
        op, _, index = name.removesuffix(".txt").rpartition(".")
        source = os.path.join(folder, name)
        try:
            with open(source, encoding="utf-8") as fh:
                shape = tuple(int(d) for d in fh.readline().split())
                data = np.array(fh.read().split(), dtype=np.float32).reshape(shape)
        except (OSError, ValueError) as exc:
            problems.append(Problem(source, f"not a shape line and its values ({exc})"))
            continue
        tensors.append(Tensor(op, OUTPUT, int(index), data.dtype, data.shape, source, op_type="Txt",
                              reader=partial(np.array, data)))
    return tensors, problems


def describe(path: str, tensors: list[Tensor], side: str = SIDES[0], **_options) -> list[str]:
    return [f"txtdir run {side}: {len(tensors)} tensors"]
