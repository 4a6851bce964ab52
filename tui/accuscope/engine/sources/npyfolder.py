"""The npy folder as a Reader: MindStudio/msit-named `.npy` files (`accuscope dump`, msaccucmp convert),
torch.save files beside them read too (`golden.read_tensor_folder`, shared with the .pt folder)."""
from __future__ import annotations

import os

from accuscope.engine.sources import kinds
from accuscope.engine.sources.golden import read_tensor_folder
from accuscope.engine.sources.inputfile import folder_names, not_regular
from accuscope.engine.sources.tensor import Problem, Tensor

KIND = kinds.NPY


def sniff(path: str) -> bool:
    """A folder with a regular .npy file directly inside."""
    if not os.path.isdir(path):
        return False
    return any(n.lower().endswith(".npy") and not not_regular(os.path.join(path, n)) for n in folder_names(path))


def read(path: str, **_options) -> tuple[list[Tensor], list[Problem]]:
    return read_tensor_folder(path, KIND)


def describe(path: str, tensors: list[Tensor], **_options) -> list[str]:
    return []
