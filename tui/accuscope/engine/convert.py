"""Write the tensors of a dump in logical layout, one file per tensor, named so users can tell
op, input/output and index apart (the names msaccucmp's convert mode and MindStudio use)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from .golden import GoldenDump
from .npudump import NpuDump
from .tensor import INPUT, Problem, Tensor, TensorError, sanitize

FORMATS = ("npy", "bin")


@dataclass
class ConvertReport:
    out_dir: str
    written: list[str] = field(default_factory=list)
    failed: list[Problem] = field(default_factory=list)


def tensor_file_names(source: NpuDump | GoldenDump) -> Iterable[tuple[Tensor, str]]:
    """(tensor, file stem) pairs: `{dump file name}.{input|output}.{i}` for NPU dumps,
    `[input_]{op}.{index}.{timestamp}` for golden dumps."""
    if isinstance(source, NpuDump):
        for df in source.files:
            for t in df.tensors:
                yield t, f"{os.path.basename(df.path)}.{t.io}.{t.index}"
    else:
        for t in source.tensors:
            prefix = "input_" if t.io == INPUT else ""
            yield t, f"{prefix}{sanitize(t.op)}.{t.index}.{t.timestamp or 0}"


def convert(source: NpuDump | GoldenDump, out_dir: str, to: str = "npy",
            progress: Callable[[int, int], None] | None = None) -> ConvertReport:
    """Write every loadable tensor; a tensor that cannot be decoded becomes a Problem, not an abort."""
    if to not in FORMATS:
        raise ValueError(f"unknown output format {to!r}; choose from {', '.join(FORMATS)}")
    os.makedirs(out_dir, exist_ok=True)
    report = ConvertReport(out_dir)
    items = list(tensor_file_names(source))
    manifest = {}
    for done, (t, stem) in enumerate(items, 1):
        try:
            data = t.load()
        except TensorError as exc:
            report.failed.append(Problem(t.source, f"{t.name}: {exc.reason}"))
            continue
        name = f"{stem}.{to}"
        _write_atomic(os.path.join(out_dir, name), data, to)
        report.written.append(name)
        manifest[name] = {"op": t.op, "op_type": t.op_type, "io": t.io, "index": t.index,
                          "dtype": str(data.dtype), "shape": list(data.shape), "format": t.format,
                          "conversion": t.conversion, "source": t.source}
        del data
        if progress:
            progress(done, len(items))
    if to == "bin":
        with open(os.path.join(out_dir, "tensors.json"), "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=1)
    return report


def _write_atomic(path: str, data: np.ndarray, to: str) -> None:
    tmp = path + ".part"
    with open(tmp, "wb") as fh:
        if to == "npy":
            np.save(fh, np.asarray(data), allow_pickle=False)
        else:
            np.ascontiguousarray(data).tofile(fh)
    os.replace(tmp, path)
