"""Fuzz corpus for accuscope's readers: real input files of every class, mutated deterministically.

Seeds are real files: the Ascend dump fixtures (tests/fixtures/ascend-dump), the dumps, golden
npy folders, OM JSON, ONNX models and result CSVs of `accuscope demo`'s workspace, npz and raw
bin files made from that golden data, a Caffe LeNet prototxt, msit-style mapping.csv files, an
msprobe rank (dump.json and the .pt files torch.save wrote), and one file of each platform dialect
in its tool's layout (Polygraphy RunResults JSON, tpu-mlir npz, ATB .bin round, MindSpore kernel
npy step, GE graph text; GE's ONNX text form as CANN wrote it, tests/fixtures/ge), an OpenVINO IR as NNCF
wrote it (tests/fixtures/openvino: the .xml and its .bin, each damaged in turn, opened as a graph and run
on OpenVINO as `accuscope dump` runs it) and task.json files of the demo's tasks.
Each seed gets structural mutations (the damage seen in the field: tokenizer-hostile npy headers,
impossible dimensions, C0 of 0, encrypted npz members, wrong JSON types, deep nesting, FIFOs,
symlink loops, over-long CSV fields ...) and seeded random byte flips, truncations and extensions.

A case is run by the reader API a user's command goes through, in a child process limited by
RLIMIT_AS, and gets one outcome:
  clean     opened, every tensor loads
  problems  opened; broken files or tensors carry a problem with a reason, the rest loads
  refused   SourceError: one line naming the file and the problem
  on-load   damage only reading the data can find (an npz member's CRC): TensorError on load
  late      a tensor without a problem failed to load (damage its header shows was missed at open)
  lost      a good file beside the broken one did not come back intact
  escape    an exception other than SourceError left the reader API (a traceback for the user)
  crash     the process died (signal, abort); hang: no answer within the time limit

    python tests/fuzz/corpus.py [--per-seed N] [--seed S] [--classes a,b]   # prints the figures
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tui"))

import numpy as np  # noqa: E402

from accuscope.engine.sources import ascend  # noqa: E402
from accuscope.engine.sources.tensor import SourceError, TensorError  # noqa: E402

CLASSES = ("ascend", "npy", "npz", "bin", "omjson", "onnx", "prototxt", "mapping", "resultcsv",
           "msprobe", "pt", "ptfolder", "polygraphy", "tpumlir", "atb", "mindspore", "gegraph", "taskjson", "openvino")
# the dialects opened through the registry, as `inspect` and `compare` do (the rest: their own reader)
REGISTRY_CLASSES = ("msprobe", "pt", "ptfolder", "polygraphy", "tpumlir", "atb", "mindspore", "gegraph")
MEMORY_LIMIT = 1 << 30  # RLIMIT_AS of the child: a reader that allocates what a header claims dies here
CASE_TIMEOUT = 30.0
GOOD_SIBLINGS = 3


def fixtures_dir() -> Path:
    return REPO / "tests" / "fixtures" / "ascend-dump"


# ---------------------------------------------------------------- seeds

def build_seeds(work: Path) -> dict[str, list[Path]]:
    """Real files of every input class under `work/seeds` (built once, reused when present)."""
    root = work / "seeds"
    done = root / ".done"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        from accuscope.engine.demo.workspace import build_workspace
        build_workspace(root / "demo")
        golden = next(g for g in sorted((root / "demo").glob("*/golden")) if any(g.glob("*.npy")))
        arrays = {p.stem.split(".")[0]: np.load(p) for p in sorted(golden.glob("*.npy"))[:6]}
        np.savez(root / "golden.npz", **arrays)
        np.savez_compressed(root / "golden_deflated.npz", **arrays)
        first = next(iter(arrays.values()))
        np.ascontiguousarray(first, dtype="<f4").tofile(root / "golden.bin")
        (root / "golden.bin.json").write_text(json.dumps({"shape": list(first.shape), "dtype": "float32"}))
        shutil.copy(HERE / "seeds" / "lenet.prototxt", root / "lenet.prototxt")
        long = "/".join(["encoder", "layer_11", "attention", "self", "query"] * 12)
        (root / "mapping.csv").write_text(f"1.npy,{long.replace('/', '_')}.0.1717236000000001.npy\n"
                                          f"2.npy,input_{long.replace('/', '_')}.1.1717236000000002.npy\n")
        _dialect_seeds(root, list(arrays.items()))
        done.write_text("")
    demo = root / "demo"
    fx = fixtures_dir()
    dumps = sorted(p for p in fx.iterdir() if ascend.parse_dump_name(p.name))
    dumps += sorted(p for p in demo.glob("*/npu/dump/**/*") if p.is_file())[:12]
    good_dumps = [p for p in dumps if not ascend.read_dump_file(p).problem]
    npys = sorted(fx.glob("expected.*.npy")) + sorted(demo.glob("*/golden/*.npy"))[:12]
    return {
        "ascend": dumps, "good_ascend": good_dumps, "npy": npys,
        "npz": [root / "golden.npz", root / "golden_deflated.npz"], "bin": [root / "golden.bin"],
        "omjson": sorted(demo.glob("*/model/*.json")), "onnx": sorted(demo.glob("*/model/*.onnx")),
        "prototxt": [root / "lenet.prototxt"], "mapping": [root / "mapping.csv"], "resultcsv": sorted(demo.glob("*/result_*.csv")),
        "msprobe": [MSPROBE_RANK / "dump.json"], "pt": sorted((MSPROBE_RANK / "dump_tensor_data").glob("*.pt"))[:1],
        "ptfolder": [PT_FOLDER / "head.pt", PT_FOLDER / "weights.pt"],
        "polygraphy": [root / "polygraphy.json"], "tpumlir": [root / "cls_top_outputs.npz"],
        "atb": sorted((root / "atb").rglob("*.bin"))[:1], "mindspore": sorted((root / "mindspore").glob("*.npy"))[:1],
        "gegraph": [root / "ge_proto_00001_Build.txt", GE_ONNX], "taskjson": sorted(demo.glob("*/task.json"))[:2],
        "openvino": [OPENVINO_IR, OPENVINO_IR.with_suffix(".bin")],
    }


MSPROBE_RANK = REPO / "tests" / "fixtures" / "msprobe" / "cand" / "step0" / "rank0"  # written by torch.save
GE_ONNX = REPO / "tests" / "fixtures" / "ge" / "ge_onnx_00000000_graph_1_Build.pbtxt"  # written by CANN (its README)
OPENVINO_IR = REPO / "tests" / "fixtures" / "openvino" / "cls_int8.xml"  # written by OpenVINO + NNCF (make_fixtures.py)
PT_FOLDER = REPO / "tests" / "fixtures" / "ptfolder" / "ref"  # loose torch.save files (make_fixtures.py there)
PT_FOLDER_OPS = {"conv1.output.0.pt": ["conv1.output"], "head.pt": ["head"], "input_image.pt": ["image"],
                 "layer1.0.conv.pt": ["layer1.0.conv"], "layer1.0.relu.pt": ["layer1.0.relu"],
                 "meta.pt": ["meta.step", "meta.lr"], "weights.pt": ["weights.weight", "weights.bias"]}


def _dialect_seeds(root: Path, arrays: list[tuple[str, np.ndarray]]) -> None:
    """One small, valid file (or folder) of each platform dialect, in the layout its tool writes."""
    import base64
    import io

    def npy(a):
        buf = io.BytesIO()
        np.save(buf, a, allow_pickle=False)
        return buf.getvalue()
    lst = [["onnxrt-runner", [{"outputs": {k: {"array": base64.b64encode(npy(a)).decode(), "polygraphy_class": "ndarray"}
                                            for k, a in arrays}, "runtime": 0.01, "runner_name": "onnxrt-runner",
                               "polygraphy_class": "IterationResult"}]]]
    (root / "polygraphy.json").write_text(json.dumps({"lst": lst, "polygraphy_class": "RunResults"}))
    np.savez(root / "cls_top_outputs.npz", **{f"t{k}_Conv": a for k, (_, a) in enumerate(arrays)})  # type: ignore[arg-type]  # numpy's stub reads **arrays as allow_pickle
    rnd = root / "atb" / "0_4242" / "0"
    for k, (_, a) in enumerate(arrays[:3]):
        layer = rnd / f"{k}_Linear{k}"
        layer.mkdir(parents=True)
        head = f"$Version=1.0\nformat=2\ndtype=0\ndims={','.join(map(str, a.shape))}\n$End=1\n"
        (layer / "outtensor0.bin").write_bytes(head.encode() + np.ascontiguousarray(a, "<f4").tobytes())
    ms = root / "mindspore"
    ms.mkdir()
    for k, (_, a) in enumerate(arrays[:3]):
        np.save(ms / f"Conv2D.Default--network-conv{k}.{k + 1}.2.{1700000000000000 + k}.output.0.DefaultFormat.float32.npy",
                np.ascontiguousarray(a, "<f4"))
    ops = "".join(f'  op {{ name: "conv{k}" type: "Conv2D" input: "{"x:0" if k == 0 else f"conv{k - 1}:0"}" id: {k + 2} }}\n'
                  for k in range(3))
    (root / "ge_proto_00001_Build.txt").write_text(
        'name: "ge_default_1"\ngraph {\n  name: "ge_default_1"\n  op { name: "x" type: "Data" id: 1 }\n' + ops
        + '  op { name: "out" type: "NetOutput" input: "conv2:0" }\n}\n')


# ---------------------------------------------------------------- byte mutations

def byte_mutations(data: bytes, rng: random.Random, n: int) -> Iterator[tuple[str, bytes]]:
    """n random damages: flips, truncations, extensions, chunk deletion and duplication."""
    for _ in range(n):
        kind = rng.choice(("flip", "flip", "truncate", "extend", "delete", "duplicate", "zero-run"))
        b = bytearray(data)
        if kind == "flip":
            for _ in range(rng.randint(1, 8)):
                if b:
                    b[rng.randrange(len(b))] = rng.randrange(256)
        elif kind == "truncate":
            del b[rng.randrange(len(b) + 1):]
        elif kind == "extend":
            b += rng.randbytes(rng.choice((1, 7, 64, 4096)))
        elif kind == "delete" and b:
            i = rng.randrange(len(b))
            del b[i:i + rng.randint(1, 64)]
        elif kind == "duplicate" and b:
            i = rng.randrange(len(b))
            b[i:i] = b[i:i + rng.randint(1, 256)]
        elif b:
            i = rng.randrange(len(b))
            b[i:i + rng.randint(1, 32)] = bytes(min(32, len(b) - i))
        yield kind, bytes(b)


# ---------------------------------------------------------------- npy

def npy_bytes(header: str, data: bytes = b"", version: int = 1) -> bytes:
    head = header.encode("latin-1")
    pre = 12 if version > 1 else 10
    pad = -(pre + len(head) + 1) % 64
    head += b" " * pad + b"\n"
    size = struct.pack("<I" if version > 1 else "<H", len(head))
    return b"\x93NUMPY" + bytes((version, 0)) + size + head + data


NPY_HEADERS = {
    "tokenizer-rejected header": "{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3), }",
    "descr [] shape (-1,)": "{'descr': [], 'fortran_order': False, 'shape': (-1,), }",
    "dimension 2**63": f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({2**63},), }}",
    "dimension 2**64 beside 0": f"{{'descr': '<f4', 'fortran_order': False, 'shape': (0, {2**64}), }}",
    "negative dimension": "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }",
    "two negative dimensions": "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, -3), }",
    "product overflows int64": f"{{'descr': '<f8', 'fortran_order': False, 'shape': ({2**40}, {2**40}), }}",
    "header claims 3 GiB": f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({3 << 28},), }}",
    "object dtype": "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }",
    "unicode dtype": "{'descr': '<U8', 'fortran_order': False, 'shape': (2,), }",
    "void dtype": "{'descr': '|V0', 'fortran_order': False, 'shape': (4,), }",
    "datetime dtype": "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (2,), }",
    "structured dtype": "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (2,), }",
    "comma dtype string": "{'descr': '<f4,<i4', 'fortran_order': False, 'shape': (2,), }",
    "subarray dtype": "{'descr': [('a', '<f4', (2, 2))], 'fortran_order': False, 'shape': (1,), }",
    "shape is an int": "{'descr': '<f4', 'fortran_order': False, 'shape': 5, }",
    "float dimension": "{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,), }",
    "missing key": "{'descr': '<f4', 'shape': (2,), }",
    "extra key": "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1, }",
    "code in header": "__import__('os').system('echo pwned')",
    "deep parentheses": "{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 3000 + ")" * 3000 + ", }",
    "deep brackets": "{'descr': " + "[" * 3000 + "]" * 3000 + ", 'fortran_order': False, 'shape': (2,), }",
    "fortran_order is a string": "{'descr': '<f4', 'fortran_order': 'no', 'shape': (2,), }",
    "65 dimensions": "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 65 + "), }",
    "huge integer literal": "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "9" * 5000 + ",), }",
    "empty dict": "{}",
}


def npy_structural() -> Iterator[tuple[str, bytes]]:
    data = np.arange(6, dtype="<f4").tobytes()
    for label, header in NPY_HEADERS.items():
        yield label, npy_bytes(header, data)
    good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    yield "version 9", npy_bytes(good, data, 9)
    yield "version 2 header over the limit", npy_bytes(good + " " * 70000, data, 2)
    yield "data truncated", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }", data)
    yield "fortran order", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data)
    yield "header length beyond the file", b"\x93NUMPY\x01\x00\xff\xff{"
    yield "magic only", b"\x93NUMPY"
    yield "empty file", b""


FS_SPECIALS = ("symlink loop", "dangling symlink", "fifo", "directory")


def make_special(path: Path, kind: str) -> None:
    if kind == "symlink loop":
        os.symlink(path.name, path)
    elif kind == "dangling symlink":
        os.symlink(path.name + ".gone", path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


# ---------------------------------------------------------------- Ascend dumps

def _split(path: Path):
    msg, offset, _ = ascend.read_header(str(path))
    raw = path.read_bytes()[offset:]
    items = list(msg.input) + list(msg.output)
    payloads, at = [], 0
    for item in items:
        payloads.append(raw[at:at + item.size])
        at += item.size
    return msg, payloads


def _dump(msg, payloads) -> bytes:
    header = msg.SerializeToString()
    return struct.pack("<Q", len(header)) + header + b"".join(payloads)


def ascend_structural(seed: Path) -> Iterator[tuple[str, bytes]]:
    msg0, pay0 = _split(seed)
    n_in = len(msg0.input)

    def variant(label, fn):
        msg = type(msg0)()
        msg.CopyFrom(msg0)
        payloads = list(pay0)
        items = list(msg.input) + list(msg.output)
        fn(msg, items, payloads)
        return label, _dump(msg, payloads)

    def shaped(fmt, storage, original, size=None):
        def fn(msg, items, payloads):
            item = items[-1]
            item.format = ascend.FORMAT_NAMES.index(fmt) if isinstance(fmt, str) else fmt
            del item.shape.dim[:]
            item.shape.dim.extend(storage)
            del item.original_shape.dim[:]
            item.original_shape.dim.extend(original)
            n = int(np.prod(storage, dtype=object)) * ascend.STORAGE_DTYPES[item.data_type].itemsize \
                if size is None else size
            n = n if n < 1 << 20 else 0
            item.size = n
            payloads[-1] = bytes(n)
        return fn

    yield variant("NC1HWC0 with C0 = 0", shaped("NC1HWC0", (1, 1, 2, 2, 0), (1, 3, 2, 2)))
    yield variant("FRACTAL_Z with H x W = 0", shaped("FRACTAL_Z", (0, 1, 16, 16), (16, 3, 0, 0)))
    yield variant("FRACTAL_NZ with k0 = 0", shaped("FRACTAL_NZ", (1, 1, 1, 16, 0), (1, 16, 0)))
    yield variant("NC1HWC0 without original_shape, C0 = 0", shaped("NC1HWC0", (1, 1, 2, 2, 0), ()))
    yield variant("dimension 2**63 beside 0", shaped("ND", (0, 2**63), (0, 2**63), 0))
    yield variant("dimension 2**64-1 beside 0", shaped("ND", (2**64 - 1, 0), (), 0))
    yield variant("original shape of 2**62 elements", shaped("ND", (4,), (2**31, 2**31)))
    yield variant("original shape of rank 1000", shaped("ND", (1,), (1,) * 1000))
    yield variant("storage shape of rank 5000", shaped("ND", (1,) * 5000, ()))
    yield variant("NC1HWC0 original wider than storage", shaped("NC1HWC0", (1, 1, 2, 2, 16), (1, 4000, 2, 2)))

    def retype(code):
        def fn(msg, items, payloads):
            items[-1].data_type = code
        return fn
    for code in (0, 13, 27, 99, -1, 2**31 - 1):
        yield variant(f"dtype code {code}", retype(code))

    def reformat(code):
        def fn(msg, items, payloads):
            items[-1].format = code
        return fn
    for code in (-1, 999, 2**31 - 1):
        yield variant(f"format code {code}", reformat(code))

    def resize(delta):
        def fn(msg, items, payloads):
            items[-1].size = max(0, items[-1].size + delta)
        return fn
    yield variant("size one byte more", resize(1))
    yield variant("size 2**63", lambda m, i, p: setattr(i[-1], "size", 2**63))
    yield variant("op name with escape sequences", lambda m, i, p: setattr(m, "op_name", "\x1b[2J\x1b]0;pwned\x07op"))
    yield variant("inline payload", lambda m, i, p: setattr(i[0], "data", b"\x00" * 8))

    def many_inputs(msg, items, payloads):
        for _ in range(3000):
            msg.input.add(data_type=1, format=2, size=0)
        payloads[n_in:n_in] = [b""] * 3000
    yield variant("3000 empty inputs", many_inputs)
    yield variant("output without original_op name", lambda m, i, p: i[-1].original_op.Clear())
    header = msg0.SerializeToString()
    yield "header length 0", struct.pack("<Q", 0) + b"".join(pay0)
    yield "header length 2**64-1", struct.pack("<Q", 2**64 - 1) + header
    yield "header claims 3 GiB", struct.pack("<Q", 3 << 30) + header  # file made sparse to fit
    yield "empty file", b""
    yield "seven bytes", b"\x07" * 7


# ---------------------------------------------------------------- npz

def npz_structural(seed: Path) -> Iterator[tuple[str, bytes]]:
    data = seed.read_bytes()
    with zipfile.ZipFile(seed) as zf:
        infos = zf.infolist()
    first = infos[0]

    def patch_both(offset_in_local: int, offset_in_central: int, value: bytes):
        b = bytearray(data)
        b[first.header_offset + offset_in_local:first.header_offset + offset_in_local + len(value)] = value
        cd = data.rfind(b"PK\x01\x02", 0, data.rfind(b"PK\x05\x06"))
        cd = data.find(b"PK\x01\x02")
        b[cd + offset_in_central:cd + offset_in_central + len(value)] = value
        return bytes(b)

    flags = struct.pack("<H", first.flag_bits | 1)
    yield "member encrypted", patch_both(6, 8, flags)
    yield "unknown compression method", patch_both(8, 10, struct.pack("<H", 99))
    yield "bzip2 method on deflate data", patch_both(8, 10, struct.pack("<H", 12))
    yield "lzma method on stored data", patch_both(8, 10, struct.pack("<H", 14))
    yield "member size claims 3 GiB", patch_both(22, 24, struct.pack("<I", 3 << 30))
    name_at = first.header_offset + 30
    b = bytearray(data)
    b[name_at + 1:name_at + 3] = b"\xff\xfe"
    yield "non-UTF-8 member name", bytes(b)
    start = first.header_offset + 30 + len(first.filename.encode()) + len(first.extra)
    b = bytearray(data)
    for k in range(start + 16, min(start + 200, first.header_offset + 30 + first.compress_size), 7):
        b[k] ^= 0x5A
    yield "corrupt member stream", bytes(b)
    yield "truncated before the central directory", data[:data.find(b"PK\x01\x02")]
    for label, npy in list(npy_structural())[:6]:
        out = tempfile.SpooledTemporaryFile()
        with zipfile.ZipFile(out, "w") as zf:
            zf.writestr("good.npy", _good_npy())
            zf.writestr("bad.npy", npy)
        out.seek(0)
        yield f"member: {label}", out.read()
    out = tempfile.SpooledTemporaryFile()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("notes.txt", "hello")
    out.seek(0)
    yield "no npy member", out.read()


def _good_npy() -> bytes:
    return npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                     np.arange(6, dtype="<f4").tobytes())


# ---------------------------------------------------------------- JSON models

HOSTILE_VALUES = [5, "x", [], {}, None, True, -1, 1e308, "Infinity", [[[[1]]]], {"a": {"b": 1}}, 2**70]


def json_structural(seed: Path, rng: random.Random, n: int) -> Iterator[tuple[str, bytes]]:
    doc = json.loads(seed.read_text())
    paths: list[tuple] = []

    def walk(node, path, depth):
        if depth > 12 or len(paths) > 4000:
            return
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append(path + (k,))
                walk(v, path + (k,), depth + 1)
        elif isinstance(node, list):
            for i, v in enumerate(node[:6]):
                paths.append(path + (i,))
                walk(v, path + (i,), depth + 1)
    walk(doc, (), 0)
    for _ in range(n):
        path = rng.choice(paths)
        value = rng.choice(HOSTILE_VALUES + ["INF"])
        copy = json.loads(json.dumps(doc))
        node = copy
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = float("inf") if value == "INF" else value
        yield f"{'/'.join(map(str, path))[-60:]} = {value!r}"[:90], json.dumps(copy).encode()
    yield "nested 100000 deep", b"[" * 100000 + b"]" * 100000
    yield "graph nested 5000 deep", b'{"graph": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    yield "integer of 5000 digits", b'{"graph": [{"op": [{"name": "a", "id": ' + b"9" * 5000 + b"}]}]}"
    yield "id Infinity", b'{"graph": [{"op": [{"name": "a", "type": "Relu", "id": Infinity}]}]}'
    yield "input references output 10**12", b'{"graph": [{"op": [{"name": "a"}, {"name": "b", "input": ["a:1000000000000"]}]}]}'
    yield "op is a string", b'{"graph": [{"op": ["Relu"]}]}'
    yield "graph is a dict", b'{"graph": {"op": []}}'
    yield "not UTF-8", b'{"graph": [{"name": "\xff\xfe"}]}'


# ---------------------------------------------------------------- ONNX, prototxt, CSV

def onnx_structural(seed: Path) -> Iterator[tuple[str, bytes]]:
    import onnx
    model = onnx.load(str(seed))
    name = model.graph.node[0].name.encode()
    raw = model.SerializeToString()
    if name:
        yield "non-UTF-8 node name", raw.replace(name, b"\xff" + name[1:-1] + b"\xfe", 1)
    for label, edit in (
        ("initializer of unknown data type", lambda m: setattr(m.graph.initializer[0], "data_type", 999)),
        ("input of unknown element type", lambda m: setattr(m.graph.input[0].type.tensor_type, "elem_type", 999)),
        ("Constant without output", lambda m: m.graph.node.insert(0, onnx.helper.make_node("Constant", [], []))),
        ("attribute of undefined type", lambda m: m.graph.node[0].attribute.add(name="x", type=0)),
        ("node with empty names", lambda m: m.graph.node.add(op_type="", name="")),
        ("dimension -7", lambda m: m.graph.input[0].type.tensor_type.shape.dim[0].__setattr__("dim_value", -7)),
    ):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        try:
            edit(m)
        except (IndexError, AttributeError):
            continue
        yield label, m.SerializeToString()


def pt_structural() -> Iterator[tuple[str, bytes]]:
    """torch.save zips around hostile pickles: code, objects, nesting, sharing, BUILD where torch writes none."""
    import io
    import pickle

    def zipped(pkl: bytes) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as zf:
            zf.writestr("archive/data.pkl", pkl)
            zf.writestr("archive/byteorder", "little")
            zf.writestr("archive/data/0", bytes(24))
        return out.getvalue()

    tensor = (b"ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000"
              b"X\x03\x00\x00\x00cpuK\x06tQK\x00K\x02K\x03\x86K\x03K\x01\x86\x89ccollections\nOrderedDict\n)RtR")
    yield "os.system", zipped(b"\x80\x02cposix\nsystem\nX\x04\x00\x00\x00true\x85R.")
    yield "an object (NEWOBJ)", zipped(pickle.dumps(Case("x", "y"), protocol=2))
    yield "lists 100000 deep", zipped(b"\x80\x02" + b"]" * 100_000 + b"a" * 99_999 + b".")
    yield "BUILD on a tensor", zipped(b"\x80\x02" + tensor + b"}X\x05\x00\x00\x00shapeK\tsb.")
    yield "a tensor 100000 times", zipped(b"\x80\x02" + tensor + b"q\x00(" + b"h\x00" * 100_000 + b"l.")
    yield "a dict of a tensor and values", zipped(b"\x80\x02}(X\x01\x00\x00\x00a" + tensor
                                                  + b"K\x01NX\x01\x00\x00\x00b]u.")


def prototxt_structural() -> Iterator[tuple[str, bytes]]:
    yield "nested 20000 deep", b"layer " + b"{ a " * 20000 + b"}" * 20000
    yield "nested 150 deep", b"layer " + b"{ a " * 150 + b"}" * 150
    yield "bad escape", b'layer { name: "\\x" type: "ReLU" }'
    yield "unterminated string", b'layer { name: "abc }'
    yield "input_param is a number", b'layer { name: "d" type: "Input" top: "d" input_param: 5 }'
    yield "number of 5000 digits", b'input: "x" input_dim: ' + b"9" * 5000
    yield "not UTF-8", b'layer { name: "\xff\xfe" }'
    yield "NUL bytes", b"layer { name: \x00 }"


def csv_structural(seed: Path) -> Iterator[tuple[str, bytes]]:
    data = seed.read_bytes()
    lines = data.splitlines(keepends=True)
    yield "field of 200000 characters", lines[0] + b'"' + b"x" * 200000 + b'"' + b"," * 5 + b"\n" + b"".join(lines[1:])
    yield "NUL in a row", b"".join(lines[:2]) + b"a,\x00,b\n" + b"".join(lines[2:])
    yield "unterminated quote", b"".join(lines[:2]) + b'"abc\n' + b"".join(lines[2:])
    yield "GB18030 bytes", data.replace(b"NaN", "\u4e2d".encode("gb18030"), 3)
    yield "header only", lines[0]
    yield "header twice", lines[0] + data
    yield "rows of one field", lines[0] + b"1\n" * 50
    yield "UTF-16", data.decode("utf-8", "replace").encode("utf-16")


def ge_onnx_structural(seed: Path) -> Iterator[tuple[str, bytes]]:
    """GE's ONNX text form damaged where its reader turns it back into GE's ModelDef."""
    data = seed.read_bytes()
    head = b'ir_version: 6\nproducer_name: "GE"\n'
    yield "cut inside a node", data[:len(data) // 2]
    yield "no graph", head
    yield "graph is a number", head + b"graph: 5\n"
    yield "subgraph node with g a number", head + b'graph { node { name: "s" op_type: "subgraph" attribute { name: "graph" g: 5 type: GRAPH } } }'
    yield "subgraphs nested 5000 deep", head + b"graph { " + b'node { op_type: "subgraph" attribute { g { ' * 5000
    yield "descriptor index of 30 digits", data.replace(b'"output_desc_dtype:0"', b'"output_desc_dtype:' + b"9" * 30 + b'"', 1)
    yield "descriptor shape a string", data.replace(b"type: INTS", b"type: STRING", 3)
    yield "attribute type 99", data.replace(b"type: INT\n", b"type: 99\n", 5)
    yield "input a number", data.replace(b'input: "Variable:0"', b"input: 12", 1)
    yield "node a number", head + b"graph { node: 7 }"
    yield "not UTF-8", data.replace(b"Variable", b"\xff\xfe", 1)


def ir_structural(seed: Path) -> Iterator[tuple[str, bytes]]:
    """An OpenVINO IR damaged where OpenVINO reads it: the weights file shorter than the Const offsets say,
    impossible shapes and offsets in the .xml, unknown types, edges and ids that do not add up."""
    data = seed.read_bytes()
    if seed.suffix == ".bin":
        yield "empty .bin", b""
        yield ".bin cut to 1000 bytes (shorter than the Const offsets say)", data[:1000]
        yield ".bin one byte short", data[:-1]
        return
    shape = b'shape="?,3,?,?"'  # the Parameter's (the input's); its output port's dims say the same
    assert shape in data, seed

    def input_shape(new: bytes, dims: bytes) -> bytes:
        param = data.index(shape)
        port = data.index(b"<dim>-1</dim>", param)
        return (data[:param] + b'shape="' + new + b'"' + data[param + len(shape):port] + dims
                + data[port + len(b"<dim>-1</dim>"):])
    yield "input dimension 2**40", input_shape(b"1099511627776,3,48,96", b"<dim>1099511627776</dim>")
    yield "input of 2**62 elements", input_shape(b"1,3,2147483648,2147483648", b"<dim>1</dim>")
    yield "input dimension 2**64", input_shape(b"18446744073709551616,3,?,?", b"<dim>18446744073709551616</dim>")
    yield "input dimension -7", input_shape(b"-7,3,?,?", b"<dim>-7</dim>")
    yield "input dimension not a number", input_shape(b"x,3,?,?", b"<dim>x</dim>")
    yield "Const offset past the .bin", data.replace(b'offset="0"', b'offset="999999999999"', 1)
    yield "Const size 2**62", data.replace(b'size="', b'size="46116860184273879', 1)
    yield "Const negative offset", data.replace(b'offset="0"', b'offset="-8"', 1)
    yield "Const shape of 2**60 elements", data.replace(b'shape="', b'shape="1152921504606846976, ', 1)
    yield "Const element type unknown", data.replace(b'element_type="f32"', b'element_type="q99"', 1)
    yield "layer type unknown", data.replace(b'type="Convolution"', b'type="NoSuchOp"', 1)
    yield "op version unknown", data.replace(b'version="opset1"', b'version="opset999"', 3)
    yield "IR version 99", data.replace(b'version="11"', b'version="99"', 1)
    yield "edge to a layer that is not there", data.replace(b'to-layer="', b'to-layer="9999', 1)
    yield "edge from a port that is not there", data.replace(b'from-port="', b'from-port="77', 1)
    yield "edges in a cycle", data.replace(b"</edges>", b'<edge from-layer="5" from-port="2" to-layer="2" '
                                                          b'to-port="0"/></edges>', 1)
    yield "repeated layer id", data.replace(b'<layer id="2"', b'<layer id="1"', 1)
    yield "no edges", data[:data.index(b"<edges>")] + data[data.index(b"</edges>") + len(b"</edges>"):]
    yield "entity bomb", b'<?xml version="1.0"?><!DOCTYPE net [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>' \
        + data[data.index(b"<net"):]
    yield "nested 100000 deep", b"<net><layers>" + b"<x>" * 100_000 + b"</x>" * 100_000 + b"</layers></net>"
    yield "port names not UTF-8", data.replace(b'names="x"', b'names="\xff\xfe"', 1)
    yield "cut inside a layer", data[:len(data) // 2]


# ---------------------------------------------------------------- cases

class Case:
    """One input to hand a reader: where it lives in a scratch folder and how to open it."""

    def __init__(self, cls: str, label: str, data: bytes | None = None, special: str = "", seed: Path | None = None):
        self.cls, self.label, self.data, self.special, self.seed = cls, label, data, special, seed


def cases(seeds: dict[str, list[Path]], per_seed: int = 20, seed: int = 0,
          classes: tuple[str, ...] = CLASSES) -> list[Case]:
    """The corpus, deterministic for (seeds, per_seed, seed)."""
    rng = random.Random(seed)
    out: list[Case] = []

    def add(cls, items, src=None):
        out.extend(Case(cls, label, data, seed=src) for label, data in items)

    for cls in classes:
        for src in seeds[cls]:
            data = src.read_bytes()
            add(cls, ((f"{src.name}: {k}", d) for k, d in byte_mutations(data, rng, per_seed)), src)
            if cls == "ascend" and not ascend.read_dump_file(src).problem:
                add(cls, ((f"{src.name}: {k}", d) for k, d in ascend_structural(src)), src)
            elif cls == "npz":
                add(cls, ((f"{src.name}: {k}", d) for k, d in npz_structural(src)), src)
            elif cls == "omjson":
                add(cls, ((f"{src.name}: {k}", d) for k, d in json_structural(src, rng, per_seed * 4)), src)
            elif cls == "onnx":
                add(cls, ((f"{src.name}: {k}", d) for k, d in onnx_structural(src)), src)
            elif cls == "resultcsv":
                add(cls, ((f"{src.name}: {k}", d) for k, d in csv_structural(src)), src)
            elif cls in ("msprobe", "polygraphy", "taskjson"):
                add(cls, ((f"{src.name}: {k}", d) for k, d in json_structural(src, rng, per_seed * 2)), src)
            elif cls == "tpumlir":
                add(cls, ((f"{src.name}: {k}", d) for k, d in npz_structural(src)), src)
            elif cls == "mindspore":
                add(cls, npy_structural(), src)
            elif cls == "gegraph" and src.suffix == ".pbtxt":
                add(cls, ((f"{src.name}: {k}", d) for k, d in ge_onnx_structural(src)), src)
            elif cls == "openvino":
                add(cls, ((f"{src.name}: {k}", d) for k, d in ir_structural(src)), src)
        if cls == "npy":
            add(cls, npy_structural())
        elif cls == "prototxt":
            add(cls, prototxt_structural())
        elif cls == "mapping":
            add(cls, [("field of 200000 characters", b"1.npy," + b"x" * 200000 + b"\n2.npy,b.0.1.npy\n"),
                      ("NUL bytes", b"1.npy,a\x00b.0.1.npy\n"), ("not UTF-8", b"1.npy,\xff\xfe.0.1.npy\n"),
                      ("two files mapped to one name", b"1.npy,same.0.1.npy\n2.npy,same.0.1.npy\n"),
                      ("escape sequence in a name", b"1.npy,\x1b[2Jop.0.1.npy\n"),
                      ("unterminated quote", b'1.npy,"abc\n2.npy,b.0.1.npy\n')])
        elif cls == "ptfolder":
            add(cls, pt_structural())
        if cls in ("npy", "mapping", "ascend", "npz", "omjson", "resultcsv", "msprobe", "polygraphy", "tpumlir",
                   "taskjson", "ptfolder"):
            out.extend(Case(cls, f"special: {kind}", special=kind) for kind in FS_SPECIALS)
    return out


# ---------------------------------------------------------------- running one case

def _materialize(case: Case, seeds: dict[str, list[Path]], d: Path) -> tuple[Path, dict, list[str]]:
    """Write the case into folder d: (path to open, open options, names of good siblings to find)."""
    from accuscope.engine.sources.names import parse_golden_name
    if case.cls in ("npy", "mapping"):
        folder = d / "golden"
        folder.mkdir()
        good = []
        for k, src in enumerate(seeds["npy"][:GOOD_SIBLINGS]):
            name = f"good{k}.0.{k + 1}.npy"
            shutil.copy(src, folder / name)
            good.append(parse_golden_name(name).op_name)
        if case.cls == "npy":
            target = folder / "broken.0.9.npy"
        else:
            shutil.copy(seeds["npy"][0], folder / "1.npy")
            shutil.copy(seeds["npy"][1], folder / "2.npy")
            target = folder / "mapping.csv"
        if case.special:
            make_special(target, case.special)
        else:
            assert case.data is not None
            target.write_bytes(case.data)
        return folder, {}, good
    if case.cls == "ascend":
        folder = d / "run"
        folder.mkdir()
        good = []
        for src in seeds["good_ascend"][:GOOD_SIBLINGS]:
            shutil.copy(src, folder / src.name)
            good.append(_op_name(src.name))
        target = folder / (case.seed.name if case.seed else "Relu.broken.1.1700000000000001")
        if case.seed is not None and case.seed.name in {p.name for p in seeds["good_ascend"][:GOOD_SIBLINGS]}:
            good.remove(_op_name(case.seed.name))
        if case.special:
            target.unlink(missing_ok=True)
            make_special(target, case.special)
        else:
            assert case.data is not None
            target.write_bytes(case.data)
            if "3 GiB" in case.label:
                with open(target, "r+b") as fh:
                    fh.truncate((3 << 30) + 8)  # sparse: the claim fits in the file
        return folder, {}, good
    if case.cls in ("msprobe", "pt"):
        rank = d / "step0" / "rank0"
        shutil.copytree(MSPROBE_RANK, rank)
        good = []
        if case.cls == "msprobe":
            target = rank / "dump.json"
        else:
            assert case.seed is not None
            target = rank / "dump_tensor_data" / case.seed.name
            good = sorted(
                p.name[:-len(".pt")].rsplit(".", 3)[0] for p in (rank / "dump_tensor_data").glob("*.pt")
                if p.name != case.seed.name and p.name.rsplit(".", 3)[0] != case.seed.name.rsplit(".", 3)[0])
        _write(target, case)
        return rank, {}, good
    if case.cls == "ptfolder":
        folder = d / "pt"
        shutil.copytree(PT_FOLDER, folder)
        name = case.seed.name if case.seed else "head.pt"
        _write(folder / name, case)
        return folder, {}, [op for f, ops in PT_FOLDER_OPS.items() if f != name for op in ops]
    if case.cls in ("atb", "mindspore"):
        assert case.seed is not None
        src_root = case.seed.parents[2] if case.cls == "atb" else case.seed.parent
        folder = d / case.cls
        shutil.copytree(src_root, folder)
        target = folder / case.seed.relative_to(src_root)
        _write(target, case)
        return folder, {}, []
    if case.cls == "openvino":  # the IR's .xml and .bin side by side, the seed's damaged
        for src in seeds["openvino"]:
            shutil.copy(src, d / src.name)
        assert case.seed is not None
        _write(d / case.seed.name, case)
        return d / seeds["openvino"][0].name, {}, []
    if case.cls == "taskjson":
        task = d / "task"
        task.mkdir()
        _write(task / "task.json", case)
        return task, {}, []
    named = {"tpumlir": "cls_top_outputs.npz", "gegraph": "ge_proto_00001_Build.txt", "polygraphy": "outputs.json"}
    if case.cls in named:
        target = d / (case.seed.name if case.cls == "gegraph" and case.seed else named[case.cls])
        _write(target, case)
        return target, {}, []
    suffix = {"npz": ".npz", "bin": ".bin", "omjson": ".json", "onnx": ".onnx", "prototxt": ".prototxt",
              "resultcsv": ".csv"}[case.cls]
    target = d / f"input{suffix}"
    if case.special:
        make_special(target, case.special)
    else:
        assert case.data is not None
        target.write_bytes(case.data)
    options = {}
    if case.cls == "bin":
        options = json.loads((seeds["bin"][0].parent / "golden.bin.json").read_text())
    return target, options, []



def _op_name(file_name: str) -> str:
    """The op an Ascend dump file's name names (a seed's: always one)."""
    parsed = ascend.parse_dump_name(file_name)
    assert parsed is not None, file_name
    return parsed.op_name


def _write(target: Path, case: Case) -> None:
    target.unlink(missing_ok=True)
    if case.special:
        make_special(target, case.special)
    else:
        assert case.data is not None
        target.write_bytes(case.data)


def run_case(case: Case, seeds: dict[str, list[Path]], d: Path) -> tuple[str, str]:
    """(outcome, detail) of one case, run in this process."""
    from accuscope.engine.sides.registry import load_graph, open_golden, open_source
    from accuscope.engine.sources.convert import convert
    from accuscope.engine.sources.npudump import open_npu_dump
    from accuscope.engine.tasks.csvio import read_result_csv
    from accuscope.engine.tasks.task import load_task
    path, options, good = _materialize(case, seeds, d)
    try:
        if case.cls == "taskjson":
            task = load_task(path)
            task.spec()
            return "clean", ""
        if case.cls in ("omjson", "onnx", "prototxt"):
            load_graph(path)
            return "clean", ""
        if case.cls == "openvino":  # as `inspect` reads it, then as `accuscope dump` runs it
            load_graph(path)
            from accuscope.engine.runs.openvinorun import dump_openvino
            dump_openvino(path, d / "dump", random_inputs=True)
            return "clean", ""
        if case.cls == "resultcsv":
            _, warnings = read_result_csv(path)
            return ("problems" if warnings else "clean"), ""
        source: Any  # a reader of any kind: an Ascend dump, a golden dump, or a model graph
        if case.cls == "ascend":
            source = open_npu_dump(path)
            found = {g for g in good if (f := source.find_op(g)) and not f.problem
                     and not any(t.problem for t in f.tensors)}
        else:
            source = open_source(path) if case.cls in REGISTRY_CLASSES else open_golden(path, **options)
            if not hasattr(source, "tensors"):  # a model graph (GE text; a damaged RunResults read as OM JSON)
                return "clean", ""
            found = {t.op for t in source.tensors if not t.problem}
            found |= {v.op for t in source.tensors for v in source.versions(t.op, t.io, t.index)
                      if not v.problem}
        lost = [g for g in good if g not in found]
        late = []
        for t in source.tensors:
            if t.problem or t.value is not None:  # a non-tensor value (msprobe's dim=1) has no data
                continue
            try:
                t.load()
            except TensorError as exc:
                late.append(f"{t.name}: {exc.reason}")
        if case.cls in ("npy", "ascend"):
            convert(source, str(d / "converted"))
        if lost:
            return "lost", f"good files lost: {lost}"
        if late:
            # compressed data are checked (CRC, stream) only when read: that is found on load, politely
            data_only = all(any(w in r for w in DATA_CHECKS) for r in late)
            return ("on-load" if data_only else "late"), late[0]
        broken = source.problems or any(t.problem for t in source.tensors)
        return ("problems" if broken else "clean"), ""
    except SourceError as exc:
        return "refused", str(exc)[:200]
    except Exception as exc:  # the finding this corpus exists for
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return "escape", f"{type(exc).__name__}: {str(exc)[:120]} at {Path(tb.filename).name}:{tb.lineno}"


# ---------------------------------------------------------------- child process and driver

def _child(args) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (args.memory, args.memory))
    seeds = build_seeds(Path(args.work))
    corpus = cases(seeds, args.per_seed, args.seed, tuple(args.classes.split(",")))
    for i in range(args.start, len(corpus)):
        print(f"start {i}", flush=True)
        with tempfile.TemporaryDirectory(dir=args.work) as d:
            outcome, detail = run_case(corpus[i], seeds, Path(d))
        print("result " + json.dumps([i, outcome, detail]), flush=True)
    print("done", flush=True)


def run_corpus(work: Path, per_seed: int = 20, seed: int = 0, classes: tuple[str, ...] = CLASSES,
               memory: int = MEMORY_LIMIT, timeout: float = CASE_TIMEOUT,
               log: Callable[[str], None] | None = None) -> list[tuple[Case, str, str]]:
    """Run every case in child processes (restarted after a crash or hang); (case, outcome, detail)."""
    work.mkdir(parents=True, exist_ok=True)
    seeds = build_seeds(work)
    corpus = cases(seeds, per_seed, seed, classes)
    results: dict[int, tuple[str, str]] = {}
    start = 0
    while start < len(corpus):
        cmd = [sys.executable, __file__, "--child", "--work", str(work), "--per-seed", str(per_seed),
               "--seed", str(seed), "--classes", ",".join(classes), "--start", str(start), "--memory", str(memory)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stderr is not None
        current, finished = start, False
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            if not ready:
                proc.kill()
                results[current] = ("hang", f"no answer in {timeout:.0f} s")
                break
            line = proc.stdout.readline()
            if not line:
                proc.wait()
                err = proc.stderr.read().strip().splitlines()
                results[current] = ("crash", f"exit {proc.returncode}: {err[-1] if err else ''}"[:200])
                break
            if line.startswith("start "):
                current = int(line.split()[1])
            elif line.startswith("result "):
                i, outcome, detail = json.loads(line[7:])
                results[i] = (outcome, detail)
                if log and outcome not in ("clean", "problems", "refused", "on-load"):
                    log(f"{corpus[i].cls} | {corpus[i].label} | {outcome} | {detail}")
            elif line.strip() == "done":
                finished = True
                proc.wait()
                break
        proc.stdout.close()
        proc.stderr.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        start = len(corpus) if finished else current + 1
    return [(corpus[i], *results.get(i, ("crash", "not run"))) for i in range(len(corpus))]


def summary(results: list[tuple[Case, str, str]]) -> dict[str, Counter]:
    table: dict[str, Counter] = defaultdict(Counter)
    for case, outcome, _ in results:
        table[case.cls][outcome] += 1
    return table


DATA_CHECKS = ("Bad CRC-32", "while decompressing", "Invalid data stream", "Compressed file ended",
               "corrupt base64")  # Polygraphy arrays are decoded when read
OUTCOMES = ("clean", "problems", "refused", "on-load", "late", "lost", "escape", "crash", "hang")
FAILURES = ("lost", "escape", "crash", "hang")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--per-seed", type=int, default=20, help="random byte mutations per seed file")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--classes", default=",".join(CLASSES))
    p.add_argument("--work", default="")
    p.add_argument("--memory", type=int, default=MEMORY_LIMIT)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args)
        return 0
    work = Path(args.work or tempfile.mkdtemp(prefix="accuscope-fuzz-"))
    t0 = time.perf_counter()
    results = run_corpus(work, args.per_seed, args.seed, tuple(args.classes.split(",")), args.memory,
                         log=lambda line: print("  " + line))
    elapsed = time.perf_counter() - t0
    table = summary(results)
    print(f"\n{'class':<10} {'cases':>6} " + " ".join(f"{o:>8}" for o in OUTCOMES))
    for cls in sorted(table):
        row = table[cls]
        print(f"{cls:<10} {sum(row.values()):>6} " + " ".join(f"{row[o]:>8}" for o in OUTCOMES))
    total: Counter[str] = Counter()
    for row in table.values():
        total.update(row)
    print(f"{'all':<10} {sum(total.values()):>6} " + " ".join(f"{total[o]:>8}" for o in OUTCOMES))
    print(f"\n{len(results)} cases in {elapsed:.1f} s ({os.cpu_count()} cores, RLIMIT_AS {args.memory >> 20} MiB "
          f"per child); failures (lost/escape/crash/hang): {sum(total[o] for o in FAILURES)}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if any(total[o] for o in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
