"""Write the tensors of a dump in logical layout, one file per tensor, named so users can tell
op, input/output and index apart (the names msaccucmp's convert mode and MindStudio use)."""
from __future__ import annotations

import csv
import errno
import json
import os
from dataclasses import dataclass, field

import numpy as np

from accuscope.engine.progress import OnProgress, Progress
from accuscope.engine.sources.golden import GoldenDump
from accuscope.engine.sources.npudump import NpuDump
from accuscope.engine.sources.outputfile import atomic_file
from accuscope.engine.sources.tensor import INPUT, Problem, SourceError, Tensor, TensorError, sanitize

FORMATS = ("npy", "bin")


_FULL = {errno.ENOSPC, errno.EDQUOT}  # the place is full: converting more cannot succeed
MAX_NAME = 200  # bytes of a file name stem; file systems allow 255 per name


@dataclass
class ConvertReport:
    out_dir: str
    written: list[str] = field(default_factory=list)
    failed: list[Problem] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # file written -> the name it would have had


def tensor_file_names(source: NpuDump | GoldenDump) -> list[tuple[Tensor, str, str]]:
    """(tensor, file stem, intended name) triples, every stem different.

    Stems are `{dump file name}.{input|output}.{i}` for NPU dumps, `[input_]{op}.{index}.{timestamp}`
    for golden dumps. Op names that clean to the same file name (`a/b`, `a.b`) or are too long for
    a file name get `_1`, `_2` ... after the op part; the intended name (for golden dumps the raw
    op name, as `mapping.csv` records it for the golden reader) says what the file holds.
    """
    parts = []  # (tensor, head, tail, intended): the suffix goes between head and tail
    if isinstance(source, NpuDump):
        for df in source.files:
            for t in df.tensors:
                stem = f"{os.path.basename(df.path)}.{t.io}.{t.index}"
                parts.append((t, stem, "", stem))
    else:
        for t in source.tensors:
            prefix = "input_" if t.io == INPUT else ""
            tail = f".{t.index}.{t.timestamp or 0}"
            parts.append((t, f"{prefix}{sanitize(t.op)}", tail, f"{prefix}{t.op}{tail}"))
    taken = {head + tail for _, head, tail, _ in parts}
    used: set[str] = set()
    out = []
    for t, head, tail, intended in parts:
        stem = head + tail
        if stem in used or len(stem.encode()) > MAX_NAME:
            head = head.encode()[:MAX_NAME - len(tail.encode()) - 8].decode("utf-8", "ignore")
            k = 1
            while f"{head}_{k}{tail}" in taken:
                k += 1
            stem = f"{head}_{k}{tail}"
            taken.add(stem)
        used.add(stem)
        out.append((t, stem, intended))
    return out


def convert(source: NpuDump | GoldenDump, out_dir: str, to: str = "npy",
            progress: OnProgress | None = None) -> ConvertReport:
    """Write every loadable tensor (`progress`: tensors done); a tensor that cannot be decoded or
    written becomes a Problem, not an abort. Renamed files are listed in `mapping.csv` (written name, intended name)."""
    if to not in FORMATS:
        raise ValueError(f"unknown output format {to!r}; choose from {', '.join(FORMATS)}")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise SourceError(f"{out_dir}: cannot create the output folder ({exc.strerror or exc})") from None
    report = ConvertReport(out_dir)
    items = tensor_file_names(source)
    known = set(source.problems)
    manifest = {}
    for done, (t, stem, intended) in enumerate(items, 1):
        if t.value is not None:  # a non-tensor argument (msprobe's dim=1): no tensor file to write
            continue
        name = f"{stem}.{to}"
        if "\x00" in intended:  # no file system takes the name, nor mapping.csv
            report.failed.append(Problem(t.source, f"{t.name}: the name holds a NUL character; no file can be named "
                                                   "after it: not written"))
            continue
        try:
            data = t.load()
            _write_tensor(os.path.join(out_dir, name), data, to)
        except TensorError as exc:
            if Problem(t.source, exc.reason) not in known:  # else already among the source's problems
                report.failed.append(Problem(t.source, f"{t.name}: {exc.reason}"))
            continue
        except OSError as exc:
            if exc.errno in _FULL:  # every tensor after would fail the same way
                raise SourceError(f"{out_dir}: {exc.strerror or exc}: {len(report.written):,} of {len(items):,} "
                                  f"tensors written, the rest not") from None
            report.failed.append(Problem(os.path.join(out_dir, name), f"{t.name}: not written ({exc.strerror or exc})"))
            continue
        report.written.append(name)
        if stem != intended:
            report.renamed[name] = f"{intended}.{to}"
        manifest[name] = {"op": t.op, "op_type": t.op_type, "io": t.io, "index": t.index,
                          "dtype": str(data.dtype), "shape": list(data.shape), "format": t.format,
                          "conversion": t.conversion, "source": t.source}
        del data
        if progress:
            progress(Progress(done, len(items), t.name))
    try:
        if to == "bin":
            with atomic_file(os.path.join(out_dir, "tensors.json"), "w", encoding="utf-8") as fh:
                json.dump(manifest, fh, indent=1)
        if report.renamed:
            with atomic_file(os.path.join(out_dir, "mapping.csv"), "w", newline="", encoding="utf-8") as fh:
                csv.writer(fh).writerows(report.renamed.items())
    except OSError as exc:
        raise SourceError(f"{out_dir}: {exc.strerror or exc}: the tensors are written, "
                          f"{'tensors.json' if to == 'bin' else 'mapping.csv'} is not") from None
    return report


def _write_tensor(path: str, data: np.ndarray, to: str) -> None:
    """One tensor's file, through a fresh file renamed over `path` (never through a link there)."""
    with atomic_file(path, "wb", suffix=".part") as fh:
        try:
            if to == "npy":
                np.save(fh, np.asarray(data), allow_pickle=False)
            else:
                np.ascontiguousarray(data).tofile(fh)
        except OSError as exc:
            if exc.errno is None:  # numpy's short write ("N requested and M written") names no cause:
                fh.flush()         # one more byte does (ENOSPC, EDQUOT, EFBIG ... with its errno)
                os.write(fh.fileno(), b"\0")
            raise
