"""Hostile .pt files for the readers of torch.save files (msprobe's, a loose tensor folder's): a pickle
that would run a command, in the zip torch.save writes."""
from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path


class RunsCode:
    """Pickled, it calls os.system(`touch marker`) when loaded by Python's own unpickler."""

    def __init__(self, marker: str | Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def write_pt(path: Path, payload: bytes) -> Path:
    """A torch.save zip holding the pickle `payload` (and a storage of 16 zero bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", payload)
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", b"\0" * 16)
    return path


def hostile_pt(path: Path, marker: Path) -> Path:
    """A .pt whose pickle runs `touch marker` where anything of it runs."""
    return write_pt(path, pickle.dumps(RunsCode(marker), protocol=2))
