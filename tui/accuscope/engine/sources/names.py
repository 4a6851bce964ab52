"""File-name conventions of dump writers: Ascend dump files and golden npy files."""
from __future__ import annotations

import csv
import os
import re
from typing import NamedTuple

from accuscope.engine.sources.inputfile import not_regular, walk
from accuscope.engine.sources.tensor import Problem

_TIMESTAMP = re.compile(r"\d{10,}")
# Never sent to a terminal (or a report) from data: C0 and C1 control characters (ESC, BEL, CSI ...),
# DEL, and the bidirectional controls (LRM, RLM, ALM, the embeddings, overrides and isolates U+202A-E,
# U+2066-9), with which a name shows other text than it holds (`abc\u202edcba` is drawn abcabcd).
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_BIDI}]")
_CONTROL_BUT_NEWLINE = re.compile(f"[\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f{_BIDI}]")
_INT = re.compile(r"\d+")


def natural_key(text: str) -> list[tuple[int, int, str]]:
    """Sort key putting `rank10` after `rank9` and `step2` before `step10` (digits compared as numbers)."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p]


def printable(text: str, newlines: bool = False) -> str:
    """`text` safe to print or draw: control characters (escape sequences in an op name could clear
    the screen or set the window title) and bidirectional controls shown as `?`; with `newlines`,
    line breaks (\\n, \\r\\n) stay line breaks (messages of several lines). Identity is untouched:
    use only for display."""
    if newlines:
        text = text.replace("\r\n", "\n") if "\r" in text else text
        return _CONTROL_BUT_NEWLINE.sub("?", text) if _CONTROL_BUT_NEWLINE.search(text) else text
    return _CONTROL.sub("?", text) if _CONTROL.search(text) else text


# Markdown (GitHub, GitLab, issue trackers) renders raw HTML, code spans, links and images, and splits
# table rows at |: a name holding `<img src=x onerror=...>` or `|` must reach it as plain text.
_MARKDOWN = str.maketrans({"\\": "\\\\", "|": "\\|", "`": "\\`", "[": "\\[", "]": "\\]",
                           "&": "&amp;", "<": "&lt;", ">": "&gt;"})


def markdown_text(text: object) -> str:
    """`text` from data for Markdown (a table cell, a line): printable, with HTML (`& < >`), code spans
    (backticks), links and images (`[ ]`) and table columns (`|`) escaped, shown as the characters."""
    return printable(str(text)).translate(_MARKDOWN)


# the fields in the functional form: a field named `index` shadows tuple.index, which the class
# form's type check refuses as an override (python/mypy#4507)
class TensorName(NamedTuple("TensorName", [("op", str), ("io", str), ("index", int)])):  # io: "input" or "output"
    """`{op}:{io}:{index}`: one tensor of an op (the result's TensorIndex, `Tensor.name`)."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.op}:{self.io}:{self.index}"


_TENSOR_NAME = re.compile(r"(.+):(input|output):([0-9]+)", re.DOTALL)


def parse_tensor_name(text: str) -> TensorName | None:
    """`conv1:output:0` -> TensorName("conv1", "output", 0); None for any other text (an op name
    may hold colons itself: the last two fields are the kind and the index)."""
    m = _TENSOR_NAME.fullmatch(str(text))
    return TensorName(m.group(1), m.group(2), int(m.group(3))) if m else None


# a module parameter in msprobe's tensor names: `{call}.parameters.{p}` (a forward call's weights) and
# `{module}.parameters_grad[.{n}].{p}` (their gradients); list positions after it are none of its name.
# Matched once, at the last `.parameters` part: an earlier one's rest holds the later one's, so it fails
# where that fails (`.*\.parameters...` tried each of them against the rest: a 200 KB name took minutes)
_PARAMETER = re.compile(r"parameters(?:_grad(?:\.[0-9]+)?)?\.(?P<p>[^.]+(?:\.[^.0-9][^.]*)*)(?:\.[0-9]+)*", re.DOTALL)
_PARAMETER_PARTS = (".parameters.", ".parameters_grad.")


def parameter(tensor_name: str) -> str:
    """The parameter a tensor holds or is the gradient of (`weight`, `bias`), "" for any other tensor:
    `Module.fc.Linear.parameters_grad.0.weight` -> `weight`."""
    if not tensor_name:  # (most tensors carry no name of their own)
        return ""
    at = tensor_name.rfind(".parameters")
    while at >= 0:
        m = _PARAMETER.fullmatch(tensor_name, at + 1)
        if m:
            return m.group("p")
        if tensor_name.startswith(_PARAMETER_PARTS, at):  # the last part: an earlier one fails as well
            return ""
        at = tensor_name.rfind(".parameters", 0, at)  # `.parametersX`: no part of its own
    return ""


# The parsed names are NamedTuples, as TensorName: every command imports this module, and a frozen
# dataclass took 1-2 ms to create (6.5M instructions of a compare for these two, which an npy folder
# never builds: golden.py parses its names as plain tuples, golden_name_parts).
class DumpName(NamedTuple):
    """`{op_type}.{op_name}.{task_id}[.{stream_id}][.x.y.z].{timestamp}`"""

    op_type: str
    op_name: str
    task_id: int
    stream_id: int | None
    thread: tuple[int, ...]
    timestamp: int


def parse_dump_name(name: str) -> DumpName | None:
    """Parse an Ascend dump file name; None when it does not follow the convention."""
    if not name[-1:].isdecimal():  # the timestamp ends it (`\d` is Unicode's Nd, as isdecimal): no split
        return None
    parts = name.split(".")
    if len(parts) not in (4, 5, 7, 8) or not _TIMESTAMP.fullmatch(parts[-1]):
        return None
    middle = parts[2:-1]
    if not all(_INT.fullmatch(p) for p in middle) or not parts[0] or not parts[1]:
        return None
    nums = [int(p) for p in middle]
    stream = nums[1] if len(nums) in (2, 5) else None
    thread = tuple(nums[-3:]) if len(nums) >= 4 else ()
    return DumpName(parts[0], parts[1], nums[0], stream, thread, int(parts[-1]))


class GoldenName(NamedTuple("GoldenName", [("op_name", str), ("io", str), ("index", int),  # `index`: as TensorName
                                             ("timestamp", int | None)])):
    """`[input_]{op_name}.{index}.{timestamp}.npy` (MindStudio / msit golden dumps)."""

    __slots__ = ()


def parse_golden_name(name: str) -> GoldenName:
    """Parse a golden npy file name; names off the convention become output 0 of an op so named."""
    return GoldenName(*golden_name_parts(name))


TENSOR_FILE_SUFFIXES = (".npy", ".pt", ".pth")  # a tensor folder's files: numpy.save's and torch.save's


def golden_name_parts(name: str) -> tuple[str, str, int, int | None]:
    """`parse_golden_name`'s fields as a tuple (op, io, index, timestamp): what a folder of 20,000
    files parses without a record each. Digits are `\\d+`'s (str.isdecimal: Unicode's Nd). A `.pt`
    file's name (torch.save) parses as an `.npy` file's."""
    stem = tensor_file_stem(name)
    io = "output"
    parts = stem.rsplit(".", 2)
    if len(parts) == 3 and parts[1].isdecimal() and parts[2].isdecimal():
        op, index, ts = parts[0], int(parts[1]), int(parts[2])
    elif len(parts) >= 2 and parts[-1].isdecimal():
        op, index, ts = stem.rsplit(".", 1)[0], int(parts[-1]), None
    else:
        op, index, ts = stem, 0, None
    if op.startswith("input_"):
        io, op = "input", op[6:]
    return op, io, index, ts


_SUFFIX_WORDS = tuple(s[1:] for s in TENSOR_FILE_SUFFIXES)  # what follows a tensor file name's last dot


def tensor_file_stem(name: str) -> str:
    """A tensor file's name without its suffix (`.npy`, `.pt`, `.pth`); any other name as it is. By one split
    at the last dot, not an endswith a suffix (each call parses its arguments: 650 instructions a file fewer,
    one a file of the 40,000 of 20,000 small pairs)."""
    stem, dot, word = name.rpartition(".")
    return stem if dot and word in _SUFFIX_WORDS else name


def read_mapping_csv(directory: str, problems: list | None = None) -> dict[str, str]:
    """`mapping.csv` of a dump folder: numeric file name -> original (over-long) file name.

    A row the csv module rejects (a field over its size limit, a stray NUL) is skipped; an
    unreadable file gives no mapping. Either is recorded in `problems` (as `Problem`s) when given.
    """
    path = os.path.join(directory, "mapping.csv")
    if not os.path.lexists(path):
        return {}
    out: dict[str, str] = {}
    skipped: list[str] = []
    why = not_regular(path)
    try:
        if why:
            raise OSError(why)
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            reader = csv.reader(fh)
            while len(skipped) < 1000:
                try:
                    row = next(reader)
                except StopIteration:
                    break
                except csv.Error as exc:
                    skipped.append(f"line {reader.line_num}: {exc}")
                    continue
                if len(row) >= 2 and row[0].strip():
                    out[row[0].strip()] = row[1].strip()
    except OSError as exc:
        skipped.append(f"not read, file names used as they are ({exc.strerror or exc})")
    if skipped and problems is not None:
        more = f" (and {len(skipped) - 1} more rows)" if len(skipped) > 1 else ""
        problems.append(Problem(path, f"{skipped[0]}{more}"))
    return out


def find_runs(root: str) -> list[str]:
    """Folders under `root` holding Ascend dump files, preferred first (newest dump time, then path order):
    the registry's sniff of an Ascend dump, from the file names alone (sources.npudump, the reader, is
    imported with the first dump)."""
    runs = []
    for folder, dirs, files in walk(root):
        dirs.sort()
        mapping = read_mapping_csv(folder) if "mapping.csv" in files else {}
        # a dump name ends in its timestamp's digit: other names (a folder of npy files) are passed over here
        names = [mapping.get(n, n) for n in files] if mapping else files
        if any(parse_dump_name(n) for n in names if n[-1:].isdecimal()):
            runs.append(folder)

    def key(run: str):
        parts = os.path.relpath(run, root).split(os.sep)
        stamp = next((int(p) for p in parts if len(p) == 14 and p.isdecimal()), 0)  # the {time} folder
        return (-stamp, [k for p in parts for k in natural_key(p)])

    return sorted(runs, key=key)
