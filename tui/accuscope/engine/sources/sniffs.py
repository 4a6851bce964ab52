"""How the dump dialects sniffed before an npy folder are told on disk, without their readers.

sides.registry asks each format in FORMATS' order whether it claims a path, and msprobe, MindSpore
and ATB dumps (and Ascend's) come before an npy folder (a MindSpore kernel dump is npy files too): every path is
sniffed by them. Their sniffs live here, with the layout facts they read (folder and file names, a
header's first bytes; and ATB's folder names the registry's option takes), so that a path of another kind imports none of their readers (their records,
parsers and columns: 18M instructions of a one-pair compare of two npy folders, callgrind;
benchmarks/bench_startup.py). The Ascend dump's sniff reads file names (sources/names.py, find_runs).

Each reader describes its layout in its docstring, names its sniff (`sniff`, as sources.reader's
protocol asks) and takes from here the facts it shares with it.
"""
from __future__ import annotations

import os
import re

from accuscope.engine.sources.inputfile import folder_names, listing, walk
from accuscope.engine.sources.names import find_runs, natural_key, parse_dump_name, read_mapping_csv
from accuscope.engine.sources.tensor import INPUT, OUTPUT

# ------------------------------------------------------------------ Ascend (sources/npudump.py)

def ascend(path: str) -> bool:
    """An Ascend dump file (named OpType.op_name.task_id.timestamp), or a folder with run folders of them
    at any depth (names.find_runs)."""
    if os.path.isfile(path):
        return parse_dump_name(os.path.basename(path)) is not None
    return os.path.isdir(path) and bool(find_runs(path))


# ------------------------------------------------------------------ msprobe (sources/msprobe.py)

MSPROBE_JSON, MSPROBE_DATA = "dump.json", "dump_tensor_data"  # a rank folder's call record and tensor files
MSPROBE_SNIFF_BYTES = 4096
MSPROBE_STEP = re.compile(r"step(\d+)")
MSPROBE_RANK = re.compile(r"(rank|proc)(\d*)")


def msprobe(path: str) -> bool:
    return os.path.isdir(path) and bool(msprobe_folders(path))


def msprobe_folders(root: str) -> list[tuple[str, str, str]]:
    """Every `step*/rank*` (or `proc*`) folder under `root` as (step, rank, path), steps and ranks
    in numeric order; `root` may be the dump path, one step folder or one rank folder (then its
    step and rank come from the folder names, "" where they say nothing)."""
    root = os.fspath(root)
    if _is_msprobe_rank(root):
        name, parent = os.path.basename(os.path.normpath(root)), os.path.basename(os.path.dirname(os.path.normpath(root)))
        return [(parent if MSPROBE_STEP.fullmatch(parent) else "", name if MSPROBE_RANK.fullmatch(name) else "", root)]
    steps = [os.path.join(root, s) for s in _subdirs(root, MSPROBE_STEP)] or [root]
    found = []
    for step in steps:
        label = os.path.basename(step) if step != root or MSPROBE_STEP.fullmatch(os.path.basename(root)) else ""
        for rank in _subdirs(step, MSPROBE_RANK):
            folder = os.path.join(step, rank)
            if _is_msprobe_rank(folder):
                found.append((label, rank, folder))
    return found


def is_msprobe_tensor_folder(path: str) -> bool:
    """A rank's dump_tensor_data/ given alone: its rank folder is the dump, not it (sides.registry says so
    rather than read its files as loose tensors, whose names would lose each tensor's call and slot)."""
    return os.path.basename(os.path.normpath(path)) == MSPROBE_DATA


def _is_msprobe_rank(path: str) -> bool:
    """A folder msprobe wrote for one step and rank: its dump_tensor_data/ (whatever dump.json
    holds: a run that crashed right after opening it leaves it empty or cut short, and `read` says
    so), or its dump.json."""
    if os.path.isdir(os.path.join(path, MSPROBE_DATA)):
        return True
    doc = os.path.join(path, MSPROBE_JSON)
    if not os.path.isfile(doc):
        return False
    try:
        with open(doc, "rb") as fh:
            head = fh.read(MSPROBE_SNIFF_BYTES)
    except OSError:
        return False
    return b'"task"' in head and (b'"dump_data_dir"' in head or b'"level"' in head)


def _subdirs(path: str, pattern: re.Pattern) -> list[str]:
    try:
        names = [n for n in listing(path)[0] if pattern.fullmatch(n)]
    except OSError:
        return []
    return sorted(names, key=lambda n: (int(re.sub(r"\D", "", n) or -1), n))


# ------------------------------------------------------------------ MindSpore (sources/mindspore.py)

MINDSPORE_RANK = re.compile(r"rank_?(\d+)")
MINDSPORE_STEP = re.compile(r"step_?(\d+)")
_INT = re.compile(r"\d+")


def mindspore(path: str) -> bool:
    """A kernel-dump npy file, or a folder with a `rank_N` / `step_N` level or kernel npy files."""
    if os.path.isfile(path):
        return kernel_name_fields(os.path.basename(path)) is not None
    if not os.path.isdir(path):
        return False
    try:
        names = folder_names(path)
    except OSError:
        return False
    if any(MINDSPORE_RANK.fullmatch(n) or MINDSPORE_STEP.fullmatch(n) for n in names if n.startswith(("rank", "step"))):
        return True
    mapping = read_mapping_csv(path) if "mapping.csv" in names else {}
    return any(kernel_name_fields(mapping.get(n, n)) for n in names[:4096])


def kernel_name_fields(name: str) -> tuple[str, str, int, int, int, str, int, str, str] | None:
    """`{OpType}.{op}.{task}.{stream}.{timestamp}.{input|output}.{idx}.{format}.{dtype}.npy` as
    (op_type, op_name, task_id, stream_id, timestamp, io, index, format, dtype) (mindspore.KernelName's
    fields); None otherwise."""
    if not name.endswith(".npy") or name.count(".") < 9:  # fewer than 9 parts: rejected before the split
        return None
    parts = name[:-4].split(".")
    if len(parts) < 9:
        return None
    op_type, op_parts, (task, stream, ts, io, idx, fmt, dtype) = parts[0], parts[1:-7], parts[-7:]
    if (io not in (INPUT, OUTPUT) or not all(_INT.fullmatch(p) for p in (task, stream, ts, idx))
            or not op_type or not fmt or not dtype):
        return None
    return op_type, ".".join(op_parts), int(task), int(stream), int(ts), io, int(idx), fmt, dtype


# ------------------------------------------------------------------ ATB (sources/atb.py)

ATB_HEADER_LIMIT = 8192  # a tensor file's header is read from its first bytes only
ATB_END = b"$End=1\n"
ATB_TENSOR_FILE = re.compile(r"(in|out)tensor(\d+)\.bin")
ATB_SNIFF_FOLDERS = 2000  # folders a folder sniff looks through before saying no (inputfile.walk bounds the depth)
ATB_WHEN = ("after", "before")  # the folders of each level of the layer tree (the registry's `when` option)


def atb(path: str) -> bool:
    """An ATB tensor .bin (header starting with `$Version`), or a folder holding one."""
    try:
        if os.path.isdir(path):
            for seen, (root, dirs, files) in enumerate(walk(path)):
                dirs.sort(key=natural_key)
                hit = min((f for f in files if f.endswith(".bin") and ATB_TENSOR_FILE.fullmatch(f)), default=None)
                if hit or seen >= ATB_SNIFF_FOLDERS:
                    return hit is not None and atb(os.path.join(root, hit))
            return False
        if not path.endswith(".bin"):
            return False
        with open(path, "rb") as fh:
            head = fh.read(ATB_HEADER_LIMIT)
    except OSError:
        return False
    return head.startswith(b"$Version=") and ATB_END in head


# ------------------------------------------------------------------ tpu-mlir work folders (sources/tpumlir.py)

TPUMLIR_TOP = "_top_outputs.npz"  # model_transform's `{m}_top_outputs.npz`: a work folder holds one


def tpumlir_work_folder(path: str) -> bool:
    """Whether `path` is a model_transform/model_deploy work folder (it holds a `{m}_top_outputs.npz`):
    a chain's stages (tpumlir.work_stages), asked of every folder --npu names."""
    try:
        return os.path.isdir(path) and any(n.endswith(TPUMLIR_TOP) for n in listing(path)[1])
    except OSError:
        return False

