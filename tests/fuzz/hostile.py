"""Hostile inputs run through the real `accuscope` command: what an attacker sends, not what a disk damages.

tests/fuzz/corpus.py damages real files byte by byte and calls the reader API; this corpus builds
inputs crafted to hang, exhaust memory, escape a reader or run code, and runs each as a user would:
the `accuscope` console script in a fresh process (its working directory the case's own folder), with
a time limit. Each run gets:

  exit      the exit code: 0 ran, 1 findings, 2 unusable input; anything else is a failure
  traceback a Python traceback on stderr (the CLI's one funnel never prints one for input)
  hang      no exit within the time limit (60 s by default)
  rss       the peak resident memory of the process (os.wait4); over 600 MB for an input under
            10 MB is a failure
  check     what the case itself must hold afterwards: no marker written by planted code, a file
            outside --out untouched, the good rows of a rank kept, a name escaped on screen

Payload classes (CLASSES): DAG reprs, zip bombs, odd zips and stride tricks in `.pt` files of an
msprobe dump; deep JSON (task.json, construct.json, dump.json, Polygraphy, offline-model JSON) and
deep folders; huge integers in dump.json statistics; NUL and bidi characters in names; symlinks in
output folders; modules planted in the working directory; a FIFO and a character device given to every path
option (fifo, device); YAML mapping, layout and pairs.yaml files deep, huge, with anchors or tags (yaml); rank
folders and layouts numbering billions of ranks (rank-numbers); `.mlir` lines crafted against its parsers
(long words, fused locations, locs over locs, huge result groups and dimensions) and msprobe call
names of thousands of `.parameters` parts (issue 43: parsers whose cost grew faster than the input); messages
on `serve`'s websocket that its page never sends (websocket: the session must live on and answer a ping).

    python tests/fuzz/hostile.py [--classes pt,deep,...]   # prints the table (benchmarks/fuzz_corpus.py too)
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HANG_SECONDS = 60.0
RSS_LIMIT_MB = 600
BOMB = 448 << 20  # a zip bomb's inflated size: a reader that inflates it once (twice: numpy's copy) passes 600 MB
ADDRESS_LIMIT = 6 << 30  # RLIMIT_AS of each run: a regression fails as a MemoryError, not by taking the machine
BIDI = "\u202e"


# ---------------------------------------------------------------- .pt files written by hand (no torch)

def _unicode(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw  # BINUNICODE


def _int(v: int) -> bytes:
    return b"J" + struct.pack("<i", v)  # BININT


def _ints(values) -> bytes:
    return b"(" + b"".join(_int(v) for v in values) + b"t"  # MARK ... TUPLE


def tensor_pickle(numel: int, shape, stride, *, offset: int = 0, key: bytes | None = None,
                  storage: str = "FloatStorage") -> bytes:
    """A protocol-2 pickle of one tensor as torch.save writes it: _rebuild_tensor_v2(storage, ...)
    with the storage a persistent id ('storage', torch.FloatStorage, key, 'cpu', numel). `key`
    replaces the pickled key (any opcodes that leave one object)."""
    pid = b"(" + _unicode("storage") + f"ctorch\n{storage}\n".encode() + (key or _unicode("0")) \
        + _unicode("cpu") + _int(numel) + b"tQ"  # TUPLE, BINPERSID
    args = b"(" + pid + _int(offset) + _ints(shape) + _ints(stride) + b"\x89" \
        + b"ccollections\nOrderedDict\n)R" + b"t"
    return b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n" + args + b"R."


def dag_key(depth: int) -> bytes:
    """A tuple of two references to a tuple of two ... `depth` levels: 2**depth leaves, a few bytes."""
    out = bytearray(_unicode("a") + b"r" + struct.pack("<I", 0))  # LONG_BINPUT 0
    for i in range(depth):
        out += b"j" + struct.pack("<I", i) + b"\x86" + b"r" + struct.pack("<I", i + 1)  # LONG_BINGET, TUPLE2, PUT
    return bytes(out)


def write_pt(path: Path, pkl: bytes, storage: bytes | None, *, method: int = zipfile.ZIP_STORED,
             byteorder: bytes = b"little") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", pkl)
        zf.writestr("archive/byteorder", byteorder)
        if storage is not None:
            zf.writestr(zipfile.ZipInfo("archive/data/0"), storage, compress_type=method)
        zf.writestr("archive/version", b"3\n")
    return path


def write_pt_bomb(path: Path, member: str, size: int) -> Path:
    """A .pt whose `member` inflates to `size` zero bytes (deflated, written in chunks)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    numel = size // 4 if member == "data/0" else 4
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("archive/data.pkl", tensor_pickle(numel, (numel,), (1,)))
        if member != "byteorder":
            zf.writestr("archive/byteorder", b"little")
        if member != "data/0":
            zf.writestr("archive/data/0", bytes(16))
        with zf.open("archive/" + member, "w", force_zip64=True) as out:
            chunk = bytes(1 << 22)
            for _ in range(size // len(chunk)):
                out.write(chunk)
    return path


def _patch_member(path: Path, name: str, fn: Callable[[bytearray, int, bool], None]) -> None:
    """Apply fn(buffer, header offset, central?) to the local and central headers of one member."""
    buf = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        local = zf.getinfo(name).header_offset
    fn(buf, local, False)
    central = buf.rfind(b"PK\x01\x02", 0, len(buf))
    while central != -1:
        n = struct.unpack_from("<H", buf, central + 28)[0]
        if bytes(buf[central + 46:central + 46 + n]) == name.encode():
            fn(buf, central, True)
        central = buf.rfind(b"PK\x01\x02", 0, central)
    path.write_bytes(bytes(buf))


def _set_flag(bit: int):
    def fn(buf, at, central):
        off = at + (8 if central else 6)
        struct.pack_into("<H", buf, off, struct.unpack_from("<H", buf, off)[0] | bit)
    return fn


def _set_method(method: int):
    def fn(buf, at, central):
        struct.pack_into("<H", buf, at + (10 if central else 8), method)
    return fn


def _rename_last_byte(value: int):
    def fn(buf, at, central):
        n = struct.unpack_from("<H", buf, at + (28 if central else 26))[0]
        buf[at + (46 if central else 30) + n - 1] = value
    return fn


GOOD = tensor_pickle(6, (2, 3), (3, 1))
GOOD_DATA = struct.pack("<6f", 0.5, -1.0, 2.0, 0.25, 3.0, -0.75)


def odd_zips() -> dict[str, Callable[[Path], None]]:
    """Zip damage the zipfile module raises on (not BadZipFile): each label -> writer of that .pt."""
    def utf8_name(p):
        write_pt(p, GOOD, GOOD_DATA)

        def fn(buf, at, central):
            _rename_last_byte(0xFF)(buf, at, central)
            _set_flag(0x800)(buf, at, central)
        _patch_member(p, "archive/data/0", fn)

    def corrupt(method):
        def make(p):
            write_pt(p, GOOD, GOOD_DATA * 64, method=method)
            with zipfile.ZipFile(p) as zf:
                info = zf.getinfo("archive/data/0")
                start = info.header_offset + 30 + len(info.filename) + len(info.extra)
            buf = bytearray(p.read_bytes())
            for i in range(start + 2, start + info.compress_size - 1, 3):
                buf[i] ^= 0x5A
            p.write_bytes(bytes(buf))
        return make

    def method99(p):
        write_pt(p, GOOD, GOOD_DATA)
        _patch_member(p, "archive/data/0", _set_method(99))

    def encrypted(p):
        write_pt(p, GOOD, GOOD_DATA)
        _patch_member(p, "archive/data/0", _set_flag(0x1))

    return {"UTF-8 flag on a non-UTF-8 name": utf8_name, "corrupt deflate": corrupt(zipfile.ZIP_DEFLATED),
            "corrupt LZMA": corrupt(zipfile.ZIP_LZMA), "compression method 99": method99,
            "encryption flag": encrypted, "storage member missing": lambda p: write_pt(p, GOOD, None)}


# ---------------------------------------------------------------- msprobe rank folders

def _stat(data_name: str, shape=(2, 3)) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": list(shape), "Max": 3.0, "Min": -1.0,
            "Mean": 0.666, "Norm": 3.9, "requires_grad": False, "data_name": data_name}


def msprobe_rank(root: Path, calls: dict[str, Callable[[Path], None] | None], *, good: int = 3,
                 extra: dict | None = None) -> Path:
    """An msprobe tensor-mode rank folder: `good` healthy calls, then each of `calls` (its output .pt
    written by the function given, or the healthy one)."""
    rank = root / "step0" / "rank0"
    data = rank / "dump_tensor_data"
    data.mkdir(parents=True, exist_ok=True)
    entries = {}
    names = [f"Functional.relu.{i}.forward" for i in range(good)] + list(calls)
    for name in names:
        file = f"{name}.output.0.pt"
        make = calls.get(name)
        if make is None:
            write_pt(data / file, GOOD, GOOD_DATA)
        else:
            make(data / file)
        entries[name] = {"input_args": [], "input_kwargs": {}, "output": [_stat(file)]}
    doc = {"task": "tensor", "level": "L1", "framework": "pytorch", "dump_data_dir": "dump_tensor_data",
           "data": entries, **(extra or {})}
    (rank / "dump.json").write_text(json.dumps(doc))
    (rank / "stack.json").write_text("{}")
    (rank / "construct.json").write_text("{}")
    return rank


def deep_json(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


# ---------------------------------------------------------------- cases

@dataclass
class Run:
    argv: list[str]
    check: Callable[[subprocess.CompletedProcess | None], str] | None = None  # '' when it holds
    env: dict[str, str] = field(default_factory=dict)
    # drives the running command (`serve`), then ends it: '' when what it must hold held
    drive: Callable[[subprocess.Popen], str] | None = None


@dataclass
class Case:
    cls: str
    label: str
    build: Callable[[Path], Run]  # writes the input under the folder given (also the working directory)


def _rank_pair(d: Path, calls: dict) -> tuple[Path, Path]:
    """Two ranks holding the same calls (a hostile file on both sides: the comparison loads it)."""
    npu, golden = d / "npu", d / "golden"
    msprobe_rank(npu, calls)
    msprobe_rank(golden, calls)
    return npu, golden


def _kept_good_rows(d: Path, good: int = 3) -> Callable:
    def check(_proc) -> str:
        task = d / "task"
        csvs = sorted(task.glob("result_*.csv"))
        if not csvs:
            return "no result CSV written"
        text = csvs[0].read_text(errors="replace")
        missing = [i for i in range(good) if f"Functional.relu.{i}.forward" not in text]
        return f"good calls lost: {missing}" if missing else ""
    return check


def _pt_case(cls: str, label: str, make: Callable[[Path], object], command: str = "compare") -> Case:
    def build(d: Path) -> Run:
        npu, golden = _rank_pair(d, {"Functional.bad.0.forward": make})
        if command == "inspect":
            return Run(["inspect", str(npu)])
        return Run(["compare", "--npu", str(npu), "--golden", str(golden), "--out", str(d / "task")],
                   _kept_good_rows(d))
    return Case(cls, f"{label} ({command})", build)


def _planted(d: Path) -> Path:
    marker = d / "PLANTED-CODE-RAN"
    for mod in ("struct", "numpy", "socket"):
        (d / f"{mod}.py").write_text(f"open({str(marker)!r}, 'a').write('{mod}\\n')\n"
                                     f"raise ImportError('planted {mod}')\n")
    return marker


def _no_marker(marker: Path) -> Callable:
    return lambda _proc: f"planted module ran: {marker.read_text().split()}" if marker.exists() else ""


def _outside_untouched(target: Path, text: str) -> Callable:
    return lambda _proc: "" if target.read_text() == text else f"{target} was written through a symlink"


def _no_raw(char: str) -> Callable:
    def check(proc) -> str:
        if proc is None:
            return ""
        return f"raw {char!r} reached the terminal" if char in proc.stdout + proc.stderr else ""
    return check


def cases() -> list[Case]:
    out: list[Case] = []
    # .pt payloads
    out.append(_pt_case("pt-dag", "storage key a 40-level tuple DAG",
                        lambda p: write_pt(p, tensor_pickle(6, (2, 3), (3, 1), key=dag_key(40)), GOOD_DATA)))
    out.append(_pt_case("pt-dag", "storage key a 40-level tuple DAG", lambda p: write_pt(
        p, tensor_pickle(6, (2, 3), (3, 1), key=dag_key(40)), GOOD_DATA), "inspect"))
    out.append(_pt_case("pt-dag", "size a 40-level tuple DAG", lambda p: write_pt(
        p, GOOD.replace(_ints((2, 3)), dag_key(40), 1), GOOD_DATA)))
    for member in ("data/0", "byteorder"):
        out.append(_pt_case("zip-bomb", f"{BOMB >> 20} MiB of deflated zeros in {member}",
                            lambda p, m=member: write_pt_bomb(p, m, BOMB)))  # type: ignore[misc]  # m: this round's
    for label, make in odd_zips().items():
        out.append(_pt_case("odd-zip", label, make))
    out.append(_pt_case("stride", "stride-0 view of one element as 16384x16384",
                        lambda p: write_pt(p, tensor_pickle(1, (16384, 16384), (0, 0)), GOOD_DATA[:4])))
    out.append(_pt_case("stride", "2**31-element view of a 256 KB storage", lambda p: write_pt(
        p, tensor_pickle(1 << 16, (1 << 16, 1 << 15), (1, 0)), bytes(1 << 18))))

    # deep JSON and folders
    def deep_task(d: Path) -> Run:
        task = d / "task"
        task.mkdir()
        (task / "task.json").write_text('{"meta": ' + deep_json(3000) + "}")
        return Run(["show", str(task)])
    out.append(Case("deep", "task.json nested 3,000 deep (show)", deep_task))

    def deep_doc(name: str) -> Callable[[Path], Run]:
        def build(d: Path) -> Run:
            rank = msprobe_rank(d / "npu", {})
            if name == "dump.json":
                (rank / name).write_text('{"task": "tensor", "level": "L1", "framework": "pytorch", "data": '
                                         '{"Functional.x.0.forward": {"output": ' + deep_json(5000) + "}}}")
            else:
                (rank / name).write_text('{"Module.a": ' + deep_json(5000, "null") + "}")
            return Run(["inspect", str(rank)])
        return build
    for name in ("dump.json", "construct.json"):
        out.append(Case("deep", f"{name} nested 5,000 deep (inspect)", deep_doc(name)))

    def deep_chain(d: Path) -> Run:
        rank = msprobe_rank(d / "npu", {})
        chain = {f"Module.m{i}.Linear.forward.0": f"Module.m{i + 1}.Linear.forward.0" for i in range(5000)}
        chain["Functional.relu.0.forward"] = "Module.m0.Linear.forward.0"
        (rank / "construct.json").write_text(json.dumps(chain))
        return Run(["inspect", str(rank)])
    out.append(Case("deep", "module chain 5,000 deep in construct.json (inspect)", deep_chain))

    def deep_file(name: str, text: str) -> Callable[[Path], Run]:
        def build(d: Path) -> Run:
            (d / name).write_text(text)
            return Run(["inspect", str(d / name)])
        return build
    out.append(Case("deep", "Polygraphy JSON nested 100,000 deep", deep_file(
        "outputs.json", '{"lst": ' + deep_json(100000) + ', "polygraphy_class": "RunResults"}')))
    out.append(Case("deep", "offline-model JSON nested 100,000 deep", deep_file(
        "model.json", '{"graph": [{"op": ' + deep_json(100000) + "}]}")))

    def deep_folders(d: Path) -> Run:
        root = d / "dump"
        deep = root
        root.mkdir()
        for _ in range(1100):  # one level at a time: Path.mkdir(parents=True) recurses
            deep = deep / "d"
            os.mkdir(deep)
        (deep / "outtensor0.bin").write_bytes(b"\0" * 64)
        return Run(["inspect", str(root)])
    out.append(Case("deep", "folder tree 1,100 deep (inspect)", deep_folders))

    # huge integers in statistics
    def huge(digits: int) -> Callable[[Path], Run]:
        def build(d: Path) -> Run:
            npu, golden = _rank_pair(d, {})
            doc = json.loads((npu / "step0" / "rank0" / "dump.json").read_text())
            text = json.dumps(doc).replace('"Max": 3.0', '"Max": ' + "9" * digits, 1).replace(
                '"Min": -1.0', '"Min": -0', 1)
            (npu / "step0" / "rank0" / "dump.json").write_text(text)
            return Run(["compare", "--npu", str(npu), "--golden", str(golden), "--out", str(d / "task"),
                        "--stats-only"], _kept_good_rows(d))
        return build
    for digits in (400, 5000):
        out.append(Case("huge-int", f"a statistic written with {digits} digits (--stats-only)", huge(digits)))

    # names
    def named(name: str, command: str) -> Callable[[Path], Run]:
        def build(d: Path) -> Run:
            npu = d / "npu"
            rank = msprobe_rank(npu, {})
            doc = json.loads((rank / "dump.json").read_text())
            entry = doc["data"].pop("Functional.relu.0.forward")
            doc["data"][f"Functional.{name}.0.forward"] = entry
            (rank / "dump.json").write_text(json.dumps(doc))
            if command == "convert":
                return Run(["convert", str(rank), "--out", str(d / "out")])
            return Run(["inspect", str(rank)], _no_raw(BIDI))
        return build
    out.append(Case("names", "NUL in a call name (convert)", named("re\x00lu", "convert")))
    out.append(Case("names", "bidi override in a call name (inspect)", named(f"relu{BIDI}txt.exe", "inspect")))

    # symlinks in output folders
    def convert_symlink(d: Path) -> Run:
        rank = msprobe_rank(d / "npu", {})
        secret = d / "outside.txt"
        secret.write_text("keep me\n")
        out_dir = d / "out"
        out_dir.mkdir()
        for name in ("tensors.json", "mapping.csv"):
            (out_dir / name).symlink_to(secret)
        return Run(["convert", str(rank), "--out", str(out_dir)], _outside_untouched(secret, "keep me\n"))
    out.append(Case("symlink", "tensors.json and mapping.csv in --out link outside (convert)", convert_symlink))

    def export_symlink(d: Path) -> Run:
        from accuscope.engine.demo.workspace import build_workspace
        ws = d / "ws"
        build_workspace(ws)
        task = ws / "tinynet-onnx-fp16"
        elsewhere = d / "elsewhere"
        elsewhere.mkdir()
        shutil.rmtree(task / "exports", ignore_errors=True)
        (task / "exports").symlink_to(elsewhere, target_is_directory=True)
        with open(next(task.glob("result_*.csv")), newline="") as fh:
            ops = [row[2] for row in list(csv.reader(fh))[2:] if row[1] not in ("Data", "Cast")]
        return Run(["export", str(task), "--start", ops[1], "--end", ops[2]],
                   lambda _p: f"wrote {sorted(os.listdir(elsewhere))} through the link" if os.listdir(elsewhere) else "")
    out.append(Case("symlink", "TASK/exports is a symlink (export)", export_symlink))

    # modules planted in the working directory
    def planted(command: str) -> Callable[[Path], Run]:
        def build(d: Path) -> Run:
            from accuscope.engine.demo.ranktree import write_rank_tree
            write_rank_tree(d / "tree", ranks=2)
            marker = _planted(d)
            argv = ["compare", "--npu", str(d / "tree" / "npu"), "--golden", str(d / "tree" / "golden"),
                    "--out", str(d / "task")]
            argv += {"pool": ["--workers", "2"], "cluster": ["--cluster", "local:2"]}[command]
            return Run(argv, _no_marker(marker))
        return build
    out.append(Case("cwd-modules", "struct.py, numpy.py, socket.py in the CWD (compare --workers 2)", planted("pool")))
    out.append(Case("cwd-modules", "struct.py, numpy.py, socket.py in the CWD (compare --cluster local:2)",
                    planted("cluster")))
    out += path_cases() + mlir_cases() + long_name_cases() + websocket_cases()
    return out


# ---------------------------------------------------------------- user-named paths (issue 43, fourth pass)
# Every option of compare/run/inspect/convert/dump/precision/advise/export/overlay/sensitivity/show/report/op/demo that
# names a file or folder, given a FIFO (`fifo`) and a character device (`device`: a link to /dev/zero named as the
# option expects, so a regression writing an output replaces the link, never the device); the YAML a mapping, a
# --shards layout and a task's pairs.yaml hold (`yaml`: deep, huge, anchors and aliases, tags); rank folders and
# layouts with huge numbers (`rank-numbers`). Each ends with exit 2 and a message naming the path.

TP = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe" / "tp"
TPU = Path(__file__).resolve().parents[1] / "fixtures" / "tpumlir"


def _refused(path: Path | str, text: str = "", codes: tuple[int, ...] = (2,)) -> Callable:
    """The case's check: exit 2 (one of `codes`), `path` (and `text`) in what it says (rich wraps long lines:
    compared unwrapped)."""
    def check(proc) -> str:
        if proc is None:
            return ""
        said = "".join((proc.stderr + proc.stdout).split())
        if proc.returncode not in codes:
            return f"exit {proc.returncode}, not {codes}: {proc.stderr.strip()[-200:]!r}"
        if "".join(str(path).split()) not in said or "".join(text.split()) not in said:
            return f"the message does not name {path} ({text}): {proc.stderr.strip()[-200:]!r}"
        return "internal error" if "internalerror" in said else ""
    return check


def _npy_sides(d: Path) -> tuple[Path, Path]:
    import numpy as np
    for side in ("npu", "golden"):
        (d / side).mkdir(exist_ok=True)
        np.save(d / side / "conv1.0.1.npy", np.ones((2, 3), np.float32))
    return d / "npu", d / "golden"


def _small_task(d: Path) -> Path:
    """A finished task of relu -> sigmoid (an ONNX model, its onnxruntime golden dump, a simulated NPU dump),
    compared here with its model: what advise, export, overlay and op take."""
    from accuscope.engine.compare.spec import CompareSpec
    from accuscope.engine.tasks.taskrun import run_comparison
    from support.hostile import tiny_export_task
    tiny = tiny_export_task(d / "tiny")
    run_comparison(CompareSpec(str(tiny / "npu"), str(tiny / "golden"), model=str(tiny / "tiny.onnx")), d / "task",
                   workers=1)
    return d / "task"


def _onnx(d: Path) -> Path:
    from support.models import relu_sigmoid
    relu_sigmoid(d / "model.onnx")
    return d / "model.onnx"


def _hostile_path(d: Path, kind: str, name: str) -> Path:
    """`d/name` a FIFO (`fifo`), or a character device (`device`): /dev/zero's twin made here (root), else a link
    to /dev/zero (an output written through the link replaces the link, as it should, never the device)."""
    path = d / name
    if kind == "fifo":
        os.mkfifo(path)
        return path
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 5))
    except PermissionError:
        path.symlink_to("/dev/zero")
    return path


def _replaced_link(path: Path) -> Callable:
    """An output named by a link to /dev/zero: the link replaced by a file, the device untouched."""
    def check(proc) -> str:
        if not stat.S_ISCHR(os.stat("/dev/zero").st_mode):
            return "/dev/zero is no longer a character device"
        if proc is not None and proc.returncode not in (0, 2):
            return f"exit {proc.returncode}"
        return "" if proc is None or proc.returncode == 2 or not path.is_symlink() else f"{path}: still the link"
    return check


def path_options() -> dict[str, tuple[str, Callable[[Path, Path], list[str]]]]:
    """Each path option: label -> (the hostile file's name, its suffix as the option expects; argv given the
    case's folder and the hostile path). The label says the command and the option."""
    def sides(d):
        return [str(p) for p in _npy_sides(d)]

    def compare(*extra):
        return lambda d, p: ["compare", "--npu", sides(d)[0], "--golden", sides(d)[1], "--out", str(d / "t"),
                             *[str(p) if a is None else a for a in extra]]

    def task(*argv):
        return lambda d, p: [argv[0], str(_small_task(d)), *[str(p) if a is None else a for a in argv[1:]]]

    def onnx(*argv):
        return lambda d, p: [*[str(_onnx(d)) if a == "MODEL" else str(p) if a is None else a for a in argv]]
    return {
        "compare --npu": ("dump.npy", lambda d, p: ["compare", "--npu", str(p), "--golden", sides(d)[1], "--out",
                                                    str(d / "t")]),
        "compare --golden": ("dump.npy", lambda d, p: ["compare", "--npu", sides(d)[0], "--golden", str(p), "--out",
                                                       str(d / "t")]),
        "compare SOURCE": ("both.json", lambda d, p: ["compare", str(p), "--out", str(d / "t")]),
        "compare --expected": ("expected.npy", compare("--expected", None)),
        "compare --model": ("model.onnx", compare("--model", None)),
        "compare --npu-model": ("npu.onnx", compare("--npu-model", None)),
        "compare --golden-model": ("golden.onnx", compare("--golden-model", None)),
        "compare --mapping (CSV)": ("mapping.csv", compare("--mapping", None)),
        "compare --mapping (YAML)": ("mapping.yaml", compare("--mapping", None)),
        "compare --shards": ("layout.yaml", lambda d, p: ["compare", "--npu", str(TP / "tp2_stats"), "--golden",
                                                          str(TP / "tp1_stats"), "--shards", str(p), "--out", str(d / "t")]),
        "compare --custom-algorithms": ("plugins", compare("--custom-algorithms", None)),
        "compare --custom-algorithms (a plugin file)": ("alg_x.py", lambda d, p: compare(
            "--custom-algorithms", str(p.parent.parent))(d, p)),
        "compare --npu-option mlir=": ("top.mlir", lambda d, p: [
            "compare", "--npu", str(TPU / "cls_bm1684x_f16_tpu_outputs.npz"), "--golden",
            str(TPU / "cls_top_outputs.npz"), "--npu-option", f"mlir={p}", "--out", str(d / "t")]),
        "compare --out": ("task", lambda d, p: ["compare", "--npu", sides(d)[0], "--golden", sides(d)[1], "--out",
                                                str(p)]),
        "inspect PATH": ("dump.npz", lambda d, p: ["inspect", str(p)]),
        "inspect --shards": ("layout.yaml", lambda d, p: ["inspect", str(TP / "tp2_stats"), "--shards", str(p)]),
        "inspect --option mlir=": ("top.mlir", lambda d, p: ["inspect", str(TPU / "cls_bm1684x_f16_tpu_outputs.npz"),
                                                            "--option", f"mlir={p}"]),
        "convert PATH": ("dump.npz", lambda d, p: ["convert", str(p), "--out", str(d / "out")]),
        "convert --out": ("out", lambda d, p: ["convert", sides(d)[1], "--out", str(p)]),
        "run REF": ("ref.onnx", onnx("run", None, "MODEL", "--out", "t")),
        "run CAND": ("cand.onnx", onnx("run", "MODEL", None, "--out", "t")),
        "run --mapping": ("mapping.csv", onnx("run", "MODEL", "MODEL", "--random-inputs", "--mapping", None, "--out", "t")),
        "run --out": ("task", onnx("run", "MODEL", "MODEL", "--random-inputs", "--out", None)),
        "dump MODEL": ("model.onnx", lambda d, p: ["dump", str(p), "--out", str(d / "out")]),
        "dump --input": ("x.npy", onnx("dump", "MODEL", "--input", "x=PATH", "--out", "out")),
        "dump --out": ("out", onnx("dump", "MODEL", "--random-inputs", "--out", None)),
        "precision MODEL": ("ref.onnx", lambda d, p: ["precision", str(p), "--to", "fp16", "--out", str(d / "out")]),
        "precision --calibration": ("samples", onnx("precision", "MODEL", "--to", "int8", "--random-inputs",
                                                    "--calibration", None, "--out", "out")),
        "precision --calibration (a sample)": ("x.npy", lambda d, p: onnx(
            "precision", "MODEL", "--to", "int8", "--random-inputs", "--calibration", str(p.parent), "--out",
            "out")(d, p)),
        "precision --out": ("out", onnx("precision", "MODEL", "--to", "fp16", "--random-inputs", "--out", None)),
        "advise TASK": ("task", lambda d, p: ["advise", str(p)]),
        "advise --framework-model": ("fw.onnx", task("advise", "--framework-model", None)),
        "export --framework-model": ("fw.onnx", task("export", "--start", "relu", "--end", "sigmoid",
                                                     "--framework-model", None)),
        "export --out": ("export", task("export", "--start", "relu", "--end", "sigmoid", "--out", None)),
        "overlay --framework-model": ("fw.onnx", task("overlay", "--out", "o.json", "--framework-model", None)),
        "overlay --out": ("overlay.json", task("overlay", "--out", None)),
        "pairs TASK": ("task", lambda d, p: ["pairs", str(p), "--out", str(d / "m")]),
        "pairs --out": ("mapping", task("pairs", "--out", None)),
        "sensitivity --framework-model": ("fw.onnx", task("sensitivity", "--framework-model", None)),
        "show TASK": ("task", lambda d, p: ["show", str(p)]),
        "show --out": ("rows.xlsx", task("show", "--format", "xlsx", "--out", None)),
        "report TASK": ("task", lambda d, p: ["report", str(p), "--out", str(d / "r.html")]),
        "report --out": ("report.html", task("report", "--out", None)),
        "op TASK": ("task", lambda d, p: ["op", str(p), "relu"]),
        "op --out": ("op", task("op", "relu", "--out", None)),
        "demo --workspace": ("ws", lambda d, p: ["demo", "--workspace", str(p), "--no-tui"]),
    }


def _path_case(kind: str, label: str, name: str, argv: Callable[[Path, Path], list[str]]) -> Case:
    def build(d: Path) -> Run:
        folder = d
        if name in ("alg_x.py", "x.npy") and ("plugin" in label or "sample" in label):
            folder = d / ("plugins/algorithm" if name == "alg_x.py" else "samples")
            folder.mkdir(parents=True)
        path = _hostile_path(folder, kind, name)
        args = [a.replace("PATH", str(path)) if a.endswith("=PATH") else a for a in argv(d, path)]
        if name == "alg_x.py":  # a plugin that cannot serve is a problem of the run, named, as any such plugin
            return Run(args, _refused(path, "not usable", codes=(0, 1)))
        if path.is_symlink() and label.endswith("--out"):
            return Run(args, _replaced_link(path))
        return Run(args, _refused(path))
    return Case(kind, f"{'a FIFO' if kind == 'fifo' else '/dev/zero'} as {label}", build)


def _deep_yaml(levels: int) -> str:
    return "".join(" " * i + f"k{i}:" + (" v" if i == levels - 1 else "") + "\n" for i in range(levels))


YAML_PAYLOADS = {  # label -> (the text, what the message says)
    "nested 1,200 deep (728 KB)": (_deep_yaml(1200), "nested more than 64 levels deep"),
    "a flow list nested 5,000 deep": ("a: " + "[" * 5000 + "b" + "]" * 5000 + "\n", "nested more than 64"),
    "anchors and aliases (a billion laughs)": ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a]\n"
                                               "c: [*b, *b, *b, *b, *b, *b, *b]\n", "an anchor"),
    "a Python tag": ("conv1: !!python/object/apply:os.system ['echo pwned']\n", "a tag"),
}


def _yaml_case(role: str, label: str, text: str | None, said: str) -> Case:
    """One YAML payload as a mapping file, a --shards layout or a task's pairs.yaml (`text` None: a file past
    the role's size limit, sparse)."""
    def build(d: Path) -> Run:
        path = d / ("layout.yaml" if role == "layout" else "pairs.yaml")
        if text is None:
            with open(path, "wb") as fh:
                fh.truncate((1 << 26 if role != "layout" else 1 << 20) + 1)
        else:
            path.write_text(text)
        if role == "layout":
            return Run(["inspect", str(TP / "tp2_stats"), "--shards", str(path)], _refused(path, said))
        if role == "pairs.yaml":  # a task's own decisions (the app's), given back as its mapping file
            task = _small_task(d)
            os.replace(path, task / "pairs.yaml")
            path = task / "pairs.yaml"
        npu, golden = _npy_sides(d)
        return Run(["compare", "--npu", str(npu), "--golden", str(golden), "--mapping", str(path), "--out",
                    str(d / "t")], _refused(path, said))
    return Case("yaml", f"{role}: {label}", build)


def _big_mapping_over_ranks(d: Path) -> Run:
    """A mapping of 400,000 short lines (6.6 MB, some 20x that while parsed) over two ranks on two processes: read
    once by the run and handed to the workers, not parsed again by each."""
    from accuscope.engine.demo.ranktree import write_rank_tree
    npu, golden = write_rank_tree(d / "tree", ranks=2, tensors=2, size=8)
    path = d / "big.yaml"
    with open(path, "w") as fh:
        fh.writelines(f"a{i}: b{i}\n" for i in range(400_000))
    return Run(["compare", "--npu", str(npu), "--golden", str(golden), "--mapping", str(path), "--workers", "2",
                "--out", str(d / "t")])


def _rank_numbers_cases() -> list[Case]:
    def layout(d: Path) -> Run:
        path = d / "layout.yaml"
        path.write_text("tp: 1000000000\npp: 1000000000\n")
        return Run(["compare", "--npu", str(TP / "tp2_stats"), "--golden", str(TP / "tp1_stats"), "--shards",
                    str(path), "--out", str(d / "t")], _refused(path, "of them are not there"))

    def folder(command: str) -> Callable[[Path], Run]:
        def build(d: Path) -> Run:
            run = d / "run"
            shutil.copytree(TP / "tp2_stats", run)
            shutil.copytree(run / "step0" / "rank1", run / "step0" / "rank99999999999")
            argv = (["inspect", str(run)] if command == "inspect" else
                    ["compare", "--npu", str(run), "--golden", str(TP / "tp1_stats"), "--out", str(d / "t")])
            return Run([*argv, "--shards", "names"], _refused(run / "step0" / "rank2", "of them are not there"))
        return build
    return [Case("rank-numbers", "layout tp: 1000000000, pp: 1000000000 (compare --shards)", layout),
            Case("rank-numbers", "a folder rank99999999999 beside rank0, rank1 (inspect --shards names)", folder("inspect")),
            Case("rank-numbers", "a folder rank99999999999 beside rank0, rank1 (compare --shards names)", folder("compare"))]


def path_cases() -> list[Case]:
    out = [_path_case(kind, label, name, argv) for kind in ("fifo", "device")
           for label, (name, argv) in path_options().items()]
    for role in ("mapping", "layout", "pairs.yaml"):
        for label, (text, said) in YAML_PAYLOADS.items():
            out.append(_yaml_case(role, label, text, said))
        out.append(_yaml_case(role, "huge: one byte past its size limit (sparse)", None, "bytes, more than a"))
    out.append(Case("yaml", "mapping: 400,000 lines (6.6 MB) over 2 ranks (compare --workers 2)", _big_mapping_over_ranks))
    return out + _rank_numbers_cases()

MLIR_OP = '  %1 = "top.Relu"(%0) {A} : (tensor<1x8xf32>) -> tensor<1x8xf32> loc(#loc1)\n'
MLIR_LOCS = '#loc0 = loc("x")\n#loc1 = loc("y_Relu")\n'


def write_mlir(path: Path, body: str, locs: str = MLIR_LOCS) -> Path:
    """A top .mlir: the input op, `body`, the loc table `locs`."""
    path.write_text('module {\n  %0 = "top.Input"(%arg0) : (tensor<1x8xf32>) -> tensor<1x8xf32> loc(#loc0)\n'
                    + body + "}\n" + locs)
    return path


def _not_shown(text: str) -> Callable:
    return lambda proc: "" if proc is None or text not in proc.stdout + proc.stderr else f"{text[:20]}... shown in full"


def mlir_cases() -> list[Case]:
    """.mlir files read as a model (inspect) and as the loc table of a tpu-mlir npz (--option mlir=)."""
    bomb = MLIR_LOCS.replace('"y_Relu"', "fused[" + ", ".join(["#loc2"] * 100) + "]") + "".join(
        f"#loc{d} = loc(fused[" + ", ".join([f"#loc{d + 1}"] * 100) + "])\n" for d in (2, 3, 4)) + '#loc5 = loc("z")\n'
    inputs = {
        "one 200 KB word in an op's {...}": (MLIR_OP.replace("A", "w" * 200_000), MLIR_LOCS),
        "a 3 MB line of repeated loc(fused[": (MLIR_OP.replace("loc(#loc1)", "loc(fused[" * 300_000 + "x)"), MLIR_LOCS),
        "1 MB of `\\\"` in a fused loc": (MLIR_OP, MLIR_LOCS.replace('"y_Relu"', 'fused["' + '\\"' * 500_000 + "]")),
        "1 MB of `tensor<` after ->": (MLIR_OP.replace("-> tensor<1x8xf32>", "-> " + "tensor<" * 140_000), MLIR_LOCS),
        "fused locs over fused locs (100**4 names)": (MLIR_OP, bomb),
        "a result group %1:999999999": (MLIR_OP.replace("%1 =", "%1:999999999 ="), MLIR_LOCS),
        "a 400-digit dimension": (MLIR_OP.replace("-> tensor<1x8xf32>", "-> tensor<" + "9" * 400 + "x8xf32>"), MLIR_LOCS),
    }
    out = []
    for label, (body, locs) in inputs.items():
        def model(d: Path, body=body, locs=locs) -> Run:
            return Run(["inspect", str(write_mlir(d / "m.mlir", body, locs))], _not_shown("9" * 40))

        def npz(d: Path, body=body, locs=locs) -> Run:
            import numpy as np
            np.savez(d / "m_top_outputs.npz", x_Input=np.ones(8, np.float32), y_Relu=np.ones(8, np.float32))
            return Run(["inspect", str(d / "m_top_outputs.npz"), "--option",
                        f"mlir={write_mlir(d / 'm.mlir', body, locs)}"], _not_shown("9" * 40))
        out += [Case("mlir", f"{label} (inspect)", model), Case("mlir", f"{label} (npz --option mlir=)", npz)]
    return out


def long_name_cases() -> list[Case]:
    """msprobe calls whose names hold thousands of `.parameters` parts (each was tried against the rest)."""
    def build(d: Path) -> Run:
        long = "Module." + "parameters." * 18_000 + "Linear.forward.0"  # 200 KB
        for side in ("npu", "golden"):
            rank = msprobe_rank(d / side, {})
            doc = json.loads((rank / "dump.json").read_text())
            doc["data"][long] = doc["data"].pop("Functional.relu.2.forward")
            (rank / "dump.json").write_text(json.dumps(doc))
        return Run(["compare", "--npu", str(d / "npu"), "--golden", str(d / "golden"), "--out", str(d / "task"),
                    "--stats-only"], _kept_good_rows(d, 2))
    return [Case("long-names", "a 200 KB call name of `.parameters.` parts, both sides (compare --stats-only)", build)]


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _session(address: str, token: str, frames: list[str | bytes]) -> str:
    """Open the app's websocket (retrying while serve starts listening), wait for the app's first bytes,
    send `frames`, then a ping: '' when its pong comes back, else how the session ended."""
    import aiohttp
    url = f"ws://{address}/ws/{token}?width=80&height=24"
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            try:
                ws = await session.ws_connect(url)
                break
            except aiohttp.ClientConnectorError:
                await asyncio.sleep(0.1)
        else:
            return "serve never listened"
        async with ws:
            async def until(wanted) -> str:
                while True:
                    frame = await ws.receive()
                    if frame.type not in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
                        return f"the session ended ({frame.type.name} {frame.data!r})"
                    if wanted(frame):
                        return ""
            if said := await until(lambda f: f.type == aiohttp.WSMsgType.BINARY):
                return said
            for frame in frames:
                await (ws.send_bytes(frame) if isinstance(frame, bytes) else ws.send_str(frame))
            await ws.send_str('["ping", "alive"]')
            return await until(lambda f: f.type == aiohttp.WSMsgType.TEXT and f.data == '["pong", "alive"]')


def _conversation(frames: list[str | bytes]) -> Callable[[subprocess.Popen], str]:
    def drive(proc: subprocess.Popen) -> str:
        try:
            first = proc.stdout.readline() if proc.stdout else ""
            found = re.search(r"http://([^/ ]+)/\?token=([\w-]+)", first)
            if not found:
                return f"serve printed no address: {first!r}"
            return asyncio.run(asyncio.wait_for(_session(found[1], found[2], frames), HANG_SECONDS))
        except (TimeoutError, OSError) as exc:
            return f"no answer to a ping after the frames ({exc!r})"
        finally:
            proc.send_signal(signal.SIGINT)
    return drive


def websocket_cases() -> list[Case]:
    """Messages on `serve`'s websocket (opened with its secret) that the page's script never sends; after each
    set, a ping must still be answered (textual-serve's own loop ended the session with a traceback)."""
    sets: dict[str, list[str | bytes]] = {
        "not JSON (truncated, empty, words)": ["{", "", '["stdin", "a', "hello"],
        "JSON of other shapes ([], 42, {}, null, [1, 2])": ["[]", "42", '{"a": 1}', "null", "[1, 2]"],
        "known types, payloads of another shape": ['["resize"]', '["resize", 5]', '["resize", {}]',
                                                   '["stdin", {"x": 1}]', '["stdin"]', '["ping", {"a": [1]}]',
                                                   '["nope", 1]'],
        "nesting past the parser's depth (100,000 brackets)": ["[" * 100_000 + "]" * 100_000],
        "binary frames": [b"\x00\xff", bytes(range(256)) * 64],
        "sizes: 30000x30000, -5x0, words, 1e308, 200 resizes": [
            json.dumps(["resize", {"width": w, "height": h}])
            for w, h in [(30000, 30000), (-5, 0), ("x", None), (1e308, 1e308), *[(40 + i, 10 + i % 50) for i in range(200)]]],
        "keys: 20 KB of escape sequences, control bytes, a lone surrogate": [
            json.dumps(["stdin", ("\x1b[" + "9" * 30 + ";" * 10 + "\x1b]" + "\x00\x07\x7f") * 400]),
            '["stdin", "\\ud800"]'],
    }

    def case(frames: list[str | bytes]) -> Callable[[Path], Run]:
        def build(d: Path) -> Run:
            (d / "ws").mkdir()
            return Run(["serve", "--port", str(_free_port()), "--workspace", str(d / "ws")], drive=_conversation(frames))
        return build
    return [Case("websocket", label, case(frames)) for label, frames in sets.items()]


CLASSES = ("pt-dag", "zip-bomb", "odd-zip", "stride", "deep", "huge-int", "names", "symlink", "cwd-modules",
           "fifo", "device", "yaml", "rank-numbers", "mlir", "long-names", "websocket")


# ---------------------------------------------------------------- running

def accuscope_command() -> list[str]:
    script = Path(sys.executable).parent / "accuscope"
    return [str(script)] if script.exists() else [sys.executable, "-P", "-m", "accuscope"]


@dataclass
class Outcome:
    case: Case
    exit: int | None  # None: hung (no exit within `seconds`)
    traceback: bool
    rss_mb: float
    input_mb: float
    detail: str

    @property
    def failures(self) -> list[str]:
        found = []
        if self.exit is None:
            found.append(f"hang (> {HANG_SECONDS:.0f} s)")
        elif self.exit not in (0, 1, 2):
            found.append(f"exit {self.exit}")
        if self.traceback:
            found.append("traceback")
        if self.input_mb < 10 and self.rss_mb > RSS_LIMIT_MB:
            found.append(f"peak RSS {self.rss_mb:.0f} MB")
        if self.detail:
            found.append(self.detail)
        return found


def _size_mb(folder: Path) -> float:
    out = subprocess.run(["du", "-sb", str(folder)], capture_output=True, text=True, check=False).stdout
    return int(out.split()[0]) / 1e6 if out else 0.0


def run_case(case: Case, work: Path, timeout: float = HANG_SECONDS) -> Outcome:
    d = Path(tempfile.mkdtemp(dir=work, prefix=case.cls + "-"))
    # a killed run's worker-pool folders (pymp-*) go here, removed after it; short: a forkserver's socket
    # path under it must stay within AF_UNIX's 108 bytes
    scratch = tempfile.mkdtemp(prefix="accuscope-case-")
    try:
        run = case.build(d)
        size = _size_mb(d)
        env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "TMPDIR": scratch, **run.env}
        env.pop("PYTHONSAFEPATH", None)
        proc = subprocess.Popen([*accuscope_command(), *run.argv], cwd=d, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True, preexec_fn=_limit_memory)
        driven = run.drive(proc) if run.drive else ""
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Outcome(case, None, False, 0.0, size, "")
        finally:
            with _suppress():
                os.killpg(proc.pid, signal.SIGKILL)  # helpers it left behind
        rss = _peak_rss_mb(proc)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        detail = driven or (run.check(done) if run.check else "")
        return Outcome(case, proc.returncode, "Traceback (most recent call last)" in stderr, rss, size, detail)
    finally:
        subprocess.run(["rm", "-rf", str(d), scratch], check=False)  # shutil.rmtree recurses: 1,100 levels break it


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], OSError)


def _peak_rss_mb(proc: subprocess.Popen) -> float:
    return getattr(proc, "_accuscope_rss", 0.0)


def _wait4_popen():
    """Popen whose wait records the child's peak RSS (os.wait4's rusage) as `_accuscope_rss`."""
    original = subprocess.Popen._try_wait  # type: ignore[attr-defined]  # Popen's private wait, wrapped

    def _try_wait(self, wait_flags):
        try:
            pid, status, usage = os.wait4(self.pid, wait_flags)
        except ChildProcessError:
            return original(self, wait_flags)
        if pid:
            self._accuscope_rss = usage.ru_maxrss / 1024
        return pid, status
    subprocess.Popen._try_wait = _try_wait  # type: ignore[attr-defined]  # (its original above)


_wait4_popen()


def run_hostile(work: Path, classes: tuple[str, ...] = CLASSES, log: Callable[[str], None] | None = None,
                timeout: float = HANG_SECONDS) -> list[Outcome]:
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for case in cases():
        if case.cls not in classes:
            continue
        t0 = time.perf_counter()
        outcome = run_case(case, work, timeout)
        results.append(outcome)
        if log:
            state = "; ".join(outcome.failures) or "ok"
            log(f"{case.cls:<12} {case.label[:70]:<70} exit {outcome.exit} rss {outcome.rss_mb:5.0f} MB "
                f"{time.perf_counter() - t0:5.1f} s  {state}")
    return results


def table(results: list[Outcome]) -> str:
    rows = [f"{'class':<12} {'inputs':>6} {'tracebacks':>10} {'exit>2':>7} {'hangs':>6} {'peak RSS MB':>11} "
            f"{'other':>6}"]
    for cls in CLASSES:
        mine = [r for r in results if r.case.cls == cls]
        if not mine:
            continue
        rows.append(f"{cls:<12} {len(mine):>6} {sum(r.traceback for r in mine):>10} "
                    f"{sum(r.exit is not None and r.exit not in (0, 1, 2) for r in mine):>7} "
                    f"{sum(r.exit is None for r in mine):>6} {max(r.rss_mb for r in mine):>11.0f} "
                    f"{sum(bool(r.detail) for r in mine):>6}")
    return "\n".join(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--classes", default=",".join(CLASSES))
    p.add_argument("--timeout", type=float, default=HANG_SECONDS)
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="accuscope-hostile-"))
    try:
        results = run_hostile(work, tuple(args.classes.split(",")), log=print, timeout=args.timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(table(results))
    bad = [r for r in results if r.failures]
    print(f"\nhostile: {len(results)} inputs, {sum(r.traceback for r in results)} tracebacks, "
          f"{sum(r.exit is not None and r.exit not in (0, 1, 2) for r in results)} exits outside 0/1/2, "
          f"{sum(r.exit is None for r in results)} hangs, peak RSS {max((r.rss_mb for r in results), default=0):.0f} MB, "
          f"{len(bad)} failing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
