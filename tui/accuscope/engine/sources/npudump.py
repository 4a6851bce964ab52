"""An NPU dump folder: the `{time}/{device}/{model}/{model_id}/{data_index}` tree of dump files.

The user may point at any level of the tree, or at one file. Every run folder (a folder holding
dump files) is found; the newest dump time with the lowest data index is chosen unless the user
names one. Within a run, an op dumped several times (loops) keeps its newest file by default.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from accuscope.engine.sources import kinds, sniffs
from accuscope.engine.sources.ascend import read_dump_file
from accuscope.engine.sources.inputfile import not_regular
from accuscope.engine.sources.names import find_runs, parse_dump_name, read_mapping_csv
from accuscope.engine.sources.oprecord import OpRecord
from accuscope.engine.sources.tensor import Problem, SourceError, Tensor, sanitize

KIND = kinds.ASCEND
# the sniff reads file names: sources/sniffs.py (the registry sniffs without this module)
sniff = sniffs.ascend

OPDEBUG_PREFIX = "Opdebug.Node_OpDebug."


@dataclass
class NpuDump:
    path: str
    run_dir: str
    runs: list[str] = field(default_factory=list)
    files: list[OpRecord] = field(default_factory=list)
    versions: dict[str, list[OpRecord]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    skipped_opdebug: int = 0
    _by_name: dict[str, OpRecord] | None = field(default=None, repr=False)

    @property
    def tensors(self) -> list[Tensor]:
        return [t for f in self.files for t in f.tensors]

    def find_op(self, name: str) -> OpRecord | None:
        """The chosen file of an op, by header name or by its file-name (sanitized) form."""
        if self._by_name is None:
            self._by_name = {_key(f): f for f in self.files}
            for f in self.files:
                self._by_name.setdefault(sanitize(f.op_name), f)
        return self._by_name.get(sanitize(name))


def read(path: str, *, pick: str | int = "newest", run: str | None = None, **_options) -> tuple[list[Tensor], list[Problem]]:
    """The Reader's read: the chosen run's tensors, op record by op record (the registry opens an Ascend
    side as its NpuDump: `open_npu_dump`)."""
    dump = open_npu_dump(path, pick=pick, run=run)
    return dump.tensors, dump.problems


def describe(path: str, tensors: list[Tensor], **_options) -> list[str]:
    return []


def open_npu_dump(path: str | os.PathLike, *, pick: str | int = "newest", run: str | None = None) -> NpuDump:
    """Open a dump file, a run folder, or any folder above runs.

    pick: "newest" (default), "oldest", or an int k choosing the k-th dump (0-based, oldest
    first) of every op dumped several times. run: a run folder (absolute, or relative to path).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file or folder")
    if os.path.isfile(path):
        df = read_dump_file(path)
        if df.problem and df.name is None:
            raise SourceError(f"{path}: not an Ascend dump file ({df.problem})")
        dump = NpuDump(path, os.path.dirname(path), [os.path.dirname(path)])
        _add(dump, [df])
        return dump
    runs = find_runs(path)
    if not runs:
        raise SourceError(f"{path}: no Ascend dump files found (names like OpType.op_name.task_id.timestamp)")
    if run is not None:
        wanted = os.path.normpath(os.path.join(path, run))
        if wanted not in runs:
            raise SourceError(f"{path}: run folder {run!r} not found; runs: " + ", ".join(
                os.path.relpath(r, path) for r in runs))
        chosen = wanted
    else:
        chosen = runs[0]
    dump = NpuDump(path, chosen, runs)
    _add(dump, _read_run(dump, chosen), pick)
    return dump


def _read_run(dump: NpuDump, folder: str) -> list[OpRecord]:
    mapping = read_mapping_csv(folder, dump.problems)
    out = []
    for name in sorted(os.listdir(folder)):
        full = os.path.join(folder, name)
        real = mapping.get(name, name)
        if parse_dump_name(real) is None or os.path.isdir(full):
            continue
        why = not_regular(full)
        if why:
            dump.problems.append(Problem(full, why))
            continue
        if real.startswith(OPDEBUG_PREFIX):
            dump.skipped_opdebug += 1
            continue
        out.append(read_dump_file(full, original_name=real))
    return out


def _add(dump: NpuDump, files: list[OpRecord], pick: str | int = "newest") -> None:
    """Group files by op, choose one version per op, order the chosen ones by execution."""
    for df in files:
        if df.problem:
            dump.problems.append(Problem(df.path, df.problem))
        dump.versions.setdefault(_key(df), []).append(df)
    for versions in dump.versions.values():
        versions.sort(key=_order, reverse=True)
    chosen = [_choose(v, pick) for v in dump.versions.values()]
    dump.files = sorted(chosen, key=_order)


def _key(df: OpRecord) -> str:
    """An op's identity in a run: its file-name op name (what the toolkit names files by)."""
    return df.name.op_name if df.name else sanitize(df.op_name)


def _order(df: OpRecord):
    return (df.timestamp, df.name.task_id if df.name else 0, df.path)


def _choose(newest_first: list[OpRecord], pick: str | int) -> OpRecord:
    if pick == "newest":
        return newest_first[0]
    if pick == "oldest":
        return newest_first[-1]
    oldest_first = newest_first[::-1]
    return oldest_first[min(int(pick), len(oldest_first) - 1)]
