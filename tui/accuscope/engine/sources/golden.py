"""The source of every dump format but Ascend's (`GoldenDump`: tensors by op, io and index, one chosen
version of each), and the tensor folder's reading (`read_tensor_folder`: npy and .pt files side by side,
the npy folder's and the .pt folder's readers, npyfolder.py and ptfolder.py).

A reader reads only what it needs to list tensors (npy headers, file sizes); data are read
when `Tensor.load()` is called. A source that is unusable as a whole raises `SourceError`; a single
bad file or entry becomes a `Problem` (and a `Tensor` carrying that problem) while the rest loads.
Nothing is ever unpickled by Python's own rules: object arrays are refused from their header, before any
data is read; a .pt file's pickle goes through `torchpickle`'s restricted unpickler (nothing in it runs).
"""
# lazy: engine.sources.torchpickle
from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cached_property

from accuscope.engine.sources import kinds
from accuscope.engine.sources.inputfile import NotRegular, json_loads, not_regular, regular_size, walk
from accuscope.engine.sources.names import TENSOR_FILE_SUFFIXES, golden_name_parts, read_mapping_csv, tensor_file_stem
from accuscope.engine.sources.npyfile import nd_tensor, npy_file_tensor, read_npy_files
from accuscope.engine.sources.tensor import OUTPUT, Problem, SourceError, Tensor, sanitize, value_text

PT_SUFFIXES = tuple(s for s in TENSOR_FILE_SUFFIXES if s != ".npy")  # torch.save's files
_FILES = {kinds.NPY: ".npy", kinds.PT: ".pt"}  # what a tensor folder of each kind is known by
PICKS = ("newest", "oldest")  # which of several dumps of one tensor a GoldenDump keeps
_Key = tuple[str, str, int]


def _stamp(t: Tensor) -> int:
    return -1 if t.timestamp is None else t.timestamp


class GoldenDump:
    """The tensors of one golden source, one chosen version per (op, io, index)."""

    def __init__(self, path: str, kind: str, entries: Sequence[Tensor], problems: list[Problem],
                 pick: str = "newest"):
        self.path = path
        self.kind = kind
        self.problems = problems
        self._versions: dict[_Key, list[Tensor]] = {}
        versions = self._versions
        several = []
        for t in entries:
            key = (t.op, t.io, t.index)
            group = versions.get(key)
            if group is None:
                versions[key] = [t]
            else:
                group.append(t)
                several.append(group)
        for group in several:  # newest first; undated files count as oldest
            group.sort(key=_stamp, reverse=True)
        chosen = 0 if pick == "newest" else -1
        self._chosen = {key: group[chosen] for key, group in self._versions.items()}
        self.tensors: list[Tensor] = list(self._chosen.values())
        self._by_tensor_name = {t.tensor_name: t for t in self.tensors if t.tensor_name}

    @cached_property
    def _clean(self) -> dict[_Key, _Key]:
        """Dump writers sanitize op names in file names: ops are looked up through sanitize() on both
        sides (built at the first name not found as it is)."""
        clean: dict[_Key, _Key] = {}
        for op, io_, index in self._versions:
            clean.setdefault((sanitize(op), io_, index), (op, io_, index))
        return clean

    def _key(self, op: str, io_: str, index: int) -> _Key | None:
        key = (op, io_, index)
        return key if key in self._versions else self._clean.get((sanitize(op), io_, index))

    def versions(self, op: str, io: str = OUTPUT, index: int = 0) -> list[Tensor]:
        """Every dumped version of a tensor, newest first (empty when the op is not in the dump)."""
        key = self._key(op, io, index)
        return list(self._versions[key]) if key else []

    def find(self, op: str, io: str = OUTPUT, index: int = 0) -> Tensor | None:
        """The chosen version for an op name, raw (`conv1/relu`) or as in file names (`conv1_relu`)."""
        key = self._key(op, io, index)
        return self._chosen[key] if key else None

    def find_tensor(self, tensor_name: str) -> Tensor | None:
        """By graph tensor name (npz key, Polygraphy output name); npy folders carry none."""
        return self._by_tensor_name.get(tensor_name)

    def __repr__(self) -> str:
        return (f"GoldenDump({self.path!r}, kind={self.kind!r}, {len(self.tensors)} tensors, "
                f"{len(self.problems)} problems)")


# --- npy folder ----------------------------------------------------------------------------------

KEEP_BYTES = 16 << 20
"""Bytes of small files' data a folder keeps from the reads that listed it (each file of up to
npyfile.HEAD_READ bytes read whole with its header): loading them opens no file again."""


def read_tensor_folder(folder: str, kind: str) -> tuple[list[Tensor], list[Problem]]:
    """A folder of tensor files, one tensor a file: `.npy` (numpy.save) and `.pt`/`.pth` (torch.save, read by
    `torchpickle` without torch, imported only when the folder holds one), side by side. MindStudio/msit
    naming `[input_]{op}.{index}.{timestamp}.npy` (the same for `.pt`); `mapping.csv` restores long names.

    Each npy file is opened once (`read_npy_files`: its header parsed there, not again to load; a small
    file's data read with it); a .pt file's zip directory and pickle are read once (`torchpickle.contents`,
    0.4-0.8 ms a file: 10-20x an npy file's, mostly the zipfile module and the pickle's checks); only entries the listing does not show to be regular files (links, a
    file system without entry types) are stat'ed first, so that a FIFO or a device is never opened."""
    try:
        with os.scandir(folder) as it:
            listed = sorted((e.name, e.path, e.is_file(follow_symlinks=False)) for e in it
                            if e.name.lower().endswith(TENSOR_FILE_SUFFIXES))
    except OSError as exc:
        raise SourceError(f"{folder}: cannot list: {exc.strerror or exc}") from None
    problems: list[Problem] = []
    files = []
    for fname, source, regular in listed:
        why = "" if regular else regular_size(source)[0]
        if why:
            problems.append(Problem(source, why))
        else:
            files.append((fname, source))
    if not files:
        if problems:
            raise SourceError(f"{folder}: no readable {_FILES[kind]} file: {problems[0]}")
        raise SourceError(f"{folder}: {_why_no_files(folder, kind)}")
    mapping = read_mapping_csv(folder, problems)
    net_inputs = _dumped_inputs(folder)
    named = []
    for fname, source in files:
        original = (mapping.get(fname) or mapping.get(tensor_file_stem(fname)) or fname) if mapping else fname
        op, io, index, ts = _name_parts(original, net_inputs)
        named.append((ts or 0, source, op, io, index, ts, original, source.lower().endswith(PT_SUFFIXES)))
    named.sort()  # execution order where dated, then by path (unique: no later field is compared)
    entries = []
    kept = 0
    reads = read_npy_files([n[1] for n in named if not n[7]])
    for _, source, op, io, index, ts, original, pt in named:
        if pt:
            entries.extend(_pt_file_tensors(source, original, net_inputs, problems, op=op, io=io, index=index,
                                            timestamp=ts))
            continue
        read = next(reads)  # (the npy files' reads, in this order)
        if type(read) is not tuple:  # an error: (meta, offset, data) else
            problems.append(Problem(source, str(read)))
            if not isinstance(read, NotRegular):  # (NotRegular: replaced by a FIFO or a folder since it was listed)
                entries.append(nd_tensor(op, source, problem=str(read), io=io, index=index, timestamp=ts))
            continue
        meta, offset, whole = read
        data = whole if kept < KEEP_BYTES else None
        if data is not None:
            kept += len(data)
        entries.append(npy_file_tensor(op, source, meta, offset, data, io=io, index=index, timestamp=ts))
    return entries, problems


def _name_parts(name: str, net_inputs: set[str]) -> tuple[str, str, int, int | None]:
    """A tensor file's (op, io, index, timestamp) from its name (`golden_name_parts`): a network input
    an `accuscope dump` folder's dump.json names `input_*` is that input's output, not an op's input."""
    parts = golden_name_parts(name)  # parse_golden_name's fields, without the record
    if net_inputs and parts[1] == "input" and f"input_{parts[0]}" in net_inputs:
        return f"input_{parts[0]}", "output", parts[2], parts[3]
    return parts


def _pt_file_tensors(source: str, name: str, net_inputs: set[str], problems: list[Problem], **fields) -> list[Tensor]:
    """The tensors of one torch.save file, named by `name` (its file name, or mapping.csv's): one tensor
    as its name says (`fields`); a dict, list or tuple as if each leaf were saved in its own file
    `{stem}.{key}.pt` (a state_dict's `fc.weight`, a tuple's `0`, `1`); a plain value (a number, a string,
    None) as a value compared equal or not; what cannot be read a tensor with the reason (so a row)."""
    from accuscope.engine.sources import torchpickle  # pickle, pickletools: imported for .pt files only
    try:
        found = torchpickle.contents(source)
    except (torchpickle.PtError, OSError) as exc:
        problems.append(Problem(source, str(exc)))
        return [nd_tensor(fields.pop("op"), source, problem=str(exc), **fields)]
    stem = tensor_file_stem(name)
    out = []
    for e in found:
        named = fields
        if e.key:
            op, io, index, ts = _name_parts(f"{stem}.{e.key}", net_inputs)
            named = dict(op=op, io=io, index=index, timestamp=ts if ts is not None else fields["timestamp"])
        if e.problem:
            message = f"{e.key}: {e.problem}" if e.key else e.problem
            problems.append(Problem(source, message))
            rest = dict(named)
            out.append(nd_tensor(rest.pop("op"), source, problem=message, **rest))
        elif e.tensor is not None:
            out.append(torchpickle.tensor(source, e.tensor, e.start, **named))
        else:
            kind = "None" if e.value is None else type(e.value).__name__  # as msprobe names a value's type
            out.append(Tensor(dtype=None, shape=(), source=source, dtype_name=kind, value=value_text(e.value), **named))
    return out


DUMP_JSON_LIMIT = 16 << 20  # bytes of an `accuscope dump` folder's dump.json read (it writes a few KB)


def _dumped_inputs(folder: str) -> set[str]:
    """The network inputs an `accuscope dump` folder's dump.json names (written as
    `{input}.0.{ts}.npy`: one named input_ids is not the input of an op `ids`)."""
    path = os.path.join(folder, "dump.json")
    try:
        if not_regular(path) or os.path.getsize(path) > DUMP_JSON_LIMIT:
            return set()
        with open(path, encoding="utf-8") as fh:
            doc = json_loads(fh.read())
    except (OSError, ValueError):
        return set()
    inputs = doc.get("inputs") if isinstance(doc, dict) else None
    return {str(k) for k in inputs} if isinstance(inputs, dict) else set()


def _why_no_files(folder: str, kind: str) -> str:
    """Explain a folder without the kind's files; point at subfolders that do hold them (they are not scanned)."""
    suffix = _FILES[kind]
    found: list[str] = []
    for root, _dirs, names in walk(folder):
        if root != folder and any(n.lower().endswith(suffix) for n in names):
            found.append(os.path.relpath(root, folder))
            if len(found) == 3:
                break
    if found:
        return (f"no {suffix} files directly in this folder (subfolders are not scanned); {suffix} files found in "
                f"{', '.join(found)}: open one of those")
    if not os.listdir(folder):
        return "empty folder"
    return f"no {suffix} files in this folder"
