"""The PyTorch tensor folder as a Reader: torch.save files (.pt, .pth), one tensor (or a dict, list or tuple
of them) a file, named as npy files are, read without torch (`golden.read_tensor_folder`)."""
from __future__ import annotations

import os

from accuscope.engine.sources import kinds, sniffs
from accuscope.engine.sources.golden import PT_SUFFIXES, read_tensor_folder
from accuscope.engine.sources.inputfile import folder_names, not_regular
from accuscope.engine.sources.tensor import Problem, Tensor

KIND = kinds.PT


def sniff(path: str) -> bool:
    """A folder of torch.save files directly inside; not msprobe's dump_tensor_data (its rank folder is
    the dump: the registry's `_looks_like` says so)."""
    if not os.path.isdir(path) or sniffs.is_msprobe_tensor_folder(path):
        return False
    return any(n.lower().endswith(PT_SUFFIXES) and not not_regular(os.path.join(path, n)) for n in folder_names(path))


def read(path: str, **_options) -> tuple[list[Tensor], list[Problem]]:
    return read_tensor_folder(path, KIND)


def describe(path: str, tensors: list[Tensor], **_options) -> list[str]:
    return []
