"""Hostile `.pt` files (engine/sources/torchpickle.py) and damaged msprobe dump.json, from an
attacker's pass: each one is a problem on its one tensor (or its one entry), in bounded time and
memory; the rank's good rows are kept and the command exits 0, 1 or 2, never 3.

torch is not installed: every file is built here byte by byte (the pickle opcodes torch.save
writes, the zip with the zipfile module, patched where a zip lies). What could hang or blow up
runs in a child process under RLIMIT_AS, with a timeout that only guards the suite against a hang.
"""
from __future__ import annotations

import csv
import json
import os
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.compare.comparison import execute, plan
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sides.registry import detect, open_side
from accuscope.engine.sources import msprobe, torchpickle
from support.narrow import present

ENV = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
GOOD = 12  # good tensors per rank beside the hostile ones
BOMB = 256 << 20  # bytes of zeros a bomb inflates to (a few hundred KB deflated)

# ---------------------------------------------------------------- a .pt, byte by byte


def _int(v: int) -> bytes:
    if 0 <= v < 256:
        return b"K" + bytes([v])  # BININT1
    if -(1 << 31) <= v < (1 << 31):
        return b"J" + struct.pack("<i", v)  # BININT
    n = (v.bit_length() + 8) // 8
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)  # LONG1


def _str(s: str) -> bytes:
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b  # BINUNICODE


def _tuple(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"  # MARK ... TUPLE


def _put(k: int) -> bytes:
    return b"r" + struct.pack("<I", k)  # LONG_BINPUT


def _get(k: int) -> bytes:
    return b"j" + struct.pack("<I", k)  # LONG_BINGET


def dag(levels: int = 40) -> bytes:
    """A tuple of 2^levels leaves in a few hundred bytes: each level is (previous, previous) through
    the memo (LONG_BINGET, TUPLE2, LONG_BINPUT), so printing or hashing it walks them all."""
    out = b"N" + _put(0) + _get(0) + b"\x86" + _put(1)
    for k in range(1, levels):
        out += _get(k) + b"\x86" + _put(k + 1)
    return out


def storage_id(storage: str = "FloatStorage", key: str = "0", numel: int = 6) -> bytes:
    return _tuple(_str("storage"), b"ctorch\n" + storage.encode() + b"\n", _str(key), _str("cpu"), _int(numel))


def tensor_pickle(*, storage: str = "FloatStorage", key: str = "0", numel: int = 6, offset: int = 0,
                  size=(2, 3), stride=(3, 1), pid: bytes | None = None, size_op: bytes | None = None) -> bytes:
    """The pickle torch.save writes for one tensor: _rebuild_tensor_v2(storage, offset, size, stride,
    requires_grad, OrderedDict())."""
    pid = storage_id(storage, key, numel) if pid is None else pid
    args = (pid + b"Q", _int(offset), size_op or _tuple(*map(_int, size)), _tuple(*map(_int, stride)), b"\x89",
            b"ccollections\nOrderedDict\n)R")
    return b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n" + _tuple(*args) + b"R."


def write_pt(path: Path, pkl: bytes | int, storage: bytes | int = b"", *, key: str = "0", methods: dict | None = None,
             byteorder: bytes | int = b"little", members: dict | None = None) -> Path:
    """A torch.save zip: archive/data.pkl, byteorder, data/{key}; `methods` a member's compression
    (stored by default, as torch writes), `members` extra members (or None to leave one out); an int: that many zeros."""
    methods = methods or {}
    parts = {"data.pkl": pkl, "byteorder": byteorder, f"data/{key}": storage, "version": b"3\n"}
    parts.update(members or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in parts.items():
            if data is None:
                continue
            info = zipfile.ZipInfo("archive/" + name)
            info.compress_type = methods.get(name, zipfile.ZIP_STORED)
            if isinstance(data, int):  # that many zeros, streamed (a bomb)
                with zf.open(info, "w") as fh:
                    chunk = bytes(1 << 20)
                    for _ in range(data >> 20):
                        fh.write(chunk)
            else:
                zf.writestr(info, data)
    return path


def good_pt(path: Path, value: float) -> Path:
    return write_pt(path, tensor_pickle(), (np.arange(6, dtype=np.float32) + value).tobytes())


def _headers(path: Path, member: str) -> tuple[int, int]:
    """Offsets of a member's local and central directory headers in a zip."""
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        local, central = zf.getinfo(member).header_offset, zf.start_dir
    while raw[central + 46:central + 46 + len(member)] != member.encode():
        n, m, k = struct.unpack("<HHH", raw[central + 28:central + 34])
        central += 46 + n + m + k
    return local, central


def patch(path: Path, member: str, *, flag: int = 0, method: int | None = None, file_size: int | None = None,
          compress_size: int | None = None, name: bytes | None = None) -> None:
    """Make a zip lie about one member, in its local and its central header alike."""
    local, central = _headers(path, "archive/" + member)
    raw = bytearray(path.read_bytes())
    for at, fields in ((local, (6, 8, 18, 22, 30)), (central, (8, 10, 20, 24, 46))):
        flags, meth, csize, size, start = fields
        struct.pack_into("<H", raw, at + flags, struct.unpack_from("<H", raw, at + flags)[0] | flag)
        for value, where, fmt in ((method, meth, "<H"), (compress_size, csize, "<I"), (file_size, size, "<I")):
            if value is not None:
                struct.pack_into(fmt, raw, at + where, value)
        if name is not None:  # same length, other bytes
            assert len(name) == len("archive/" + member)
            raw[at + start:at + start + len(name)] = name
    path.write_bytes(bytes(raw))


# ---------------------------------------------------------------- an msprobe rank around them


def entry(data_name: str, **more) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": 5.0, "Min": 0.0, "Mean": 2.5,
            "Norm": 7.4, "requires_grad": False, "data_name": data_name, **more}


def rank(root: Path, hostile: dict[str, Callable[[Path], object]], value: float = 0.0) -> Path:
    """step0/rank0 of an msprobe tensor dump: GOOD good calls, then one call per hostile .pt (its
    writer given the path), each with one output tensor."""
    folder = root / "step0" / "rank0"
    data_dir = folder / "dump_tensor_data"
    data = {}
    for k in range(GOOD):
        call = f"Functional.relu.{k}.forward"
        good_pt(data_dir / f"{call}.output.0.pt", value + k)
        data[call] = {"input_args": [], "output": [entry(f"{call}.output.0.pt")]}
    for k, (label, make) in enumerate(hostile.items()):
        call = f"Functional.{label}.{k}.forward"
        make(data_dir / f"{call}.output.0.pt")
        data[call] = {"input_args": [], "output": [entry(f"{call}.output.0.pt")]}
    (folder / "dump.json").write_text(json.dumps({"task": "tensor", "level": "L1", "framework": "pytorch",
                                                  "dump_data_dir": "dump_tensor_data", "data": data}))
    return root


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          env=ENV, timeout=300)


CHILD = r"""
import json, resource, sys
from accuscope.engine.sources import torchpickle
page = resource.getpagesize()
vm = int(open("/proc/self/statm").read().split()[0]) * page
hard = resource.getrlimit(resource.RLIMIT_AS)[1]
soft = vm + int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    data = getattr(torchpickle, sys.argv[1])(sys.argv[2])
    out = {"ok": repr(getattr(data, "shape", None))}
except BaseException as exc:
    out = {"error": type(exc).__name__, "message": str(exc)[:2000]}
out["grew_mb"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps(out))
"""


def in_child(call: str, path: Path, memory: int = 512 << 20) -> dict:
    """torchpickle.{call}(path) in a child under RLIMIT_AS (its memory at start + `memory`): what it
    raised, and how much its peak RSS grew."""
    try:
        r = subprocess.run([sys.executable, "-P", "-c", CHILD, call, str(path), str(memory)], capture_output=True,
                           text=True, env=ENV, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"torchpickle.{call} hung on {path.name}")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def assert_refused(found: dict, *words: str, grew_mb: float = 64) -> None:
    assert found.get("error") == "PtError", found
    for w in words:
        assert w in found["message"], found
    assert "MemoryError" not in found["message"] and found["grew_mb"] < grew_mb, found


# ---------------------------------------------------------------- a few hundred bytes that hang


@pytest.mark.parametrize("label, pkl", [
    ("persistent id", tensor_pickle(pid=dag())),  # the storage key of 2^40 Nones: str(pid)[:80]
    ("size", tensor_pickle(size_op=dag())),  # a size of 2^40 Nones: {size!r}
    ("dict key", b"\x80\x02}" + dag() + b"Ns."),  # a dict keyed by it: hashing walks 2^40 leaves
    ("deep", b"\x80\x02N" + b"\x85" * 100_000 + b"."),  # 100k nested 1-tuples
])
def test_a_pickle_sharing_or_nesting_its_tuples_is_refused_at_once(tmp_path, label, pkl):
    path = write_pt(tmp_path / "x.pt", pkl, bytes(24))
    assert path.stat().st_size < 1 << 20
    found = in_child("describe", path)
    assert_refused(found, "refused pickle", grew_mb=32)
    assert len(found["message"]) < 400


def test_messages_name_what_the_file_built_never_print_it(tmp_path):
    big = "k" * 100_000
    cases = {
        "refused persistent id: a tuple of 3 items": tensor_pickle(pid=_tuple(_str("storage"), _str(big), _int(1))),
        "refused global torch." + "k" * 10: b"\x80\x02ctorch\n" + big.encode() + b"\n.",
        "no zip member archive/data/kkk": tensor_pickle(key=big),
        "offset a str, size a tuple of 2 items": tensor_pickle(size=(2, 3)).replace(_int(0) + b"(K\x02",
                                                                                    _str(big) + b"(K\x02", 1),
    }
    for words, pkl in cases.items():
        with pytest.raises(torchpickle.PtError) as caught:
            torchpickle.load(str(write_pt(tmp_path / "m.pt", pkl, bytes(24))))
        assert words in str(caught.value) and len(str(caught.value)) < 400, str(caught.value)[:500]


# ---------------------------------------------------------------- zip bombs


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bombs")
    deflate = zipfile.ZIP_DEFLATED
    made = {
        # the storage: 256 MiB of deflated zeros behind a pickle of 6 floats
        "storage": write_pt(folder / "storage.pt", tensor_pickle(), BOMB, methods={"data/0": deflate}),
        "byteorder": write_pt(folder / "byteorder.pt", tensor_pickle(), bytes(24), byteorder=BOMB,
                              methods={"byteorder": deflate}),
        "data.pkl": write_pt(folder / "datapkl.pt", BOMB, bytes(24), methods={"data.pkl": deflate}),
    }
    # the same bombs with a directory that says a few bytes (a truthful size is refused before reading)
    for member, size in (("byteorder", 6), ("data.pkl", 100)):
        lying = folder / f"lying-{member}.pt"
        lying.write_bytes(made[member].read_bytes())
        patch(lying, member, file_size=size)
        made[f"lying {member}"] = lying
    assert all(p.stat().st_size < 2 << 20 for p in made.values())
    return made


@pytest.mark.parametrize("which, words", [
    ("storage", "compressed"), ("byteorder", "byteorder"), ("data.pkl", "data.pkl"),
    ("lying byteorder", "byteorder"), ("lying data.pkl", "zip"),
])
def test_a_zip_bomb_is_refused_without_inflating_it(bombs, which, words):
    assert_refused(in_child("load", bombs[which]), words)


def test_a_zip_bomb_in_a_dump_is_a_problem_on_its_tensor_and_compare_keeps_the_rest(tmp_path, bombs):
    def copy(name):
        return lambda path: path.write_bytes(bombs[name].read_bytes())
    cand = rank(tmp_path / "cand", {"storagebomb": copy("storage"), "byteorderbomb": copy("lying byteorder")})
    bench = rank(tmp_path / "bench", {"storagebomb": lambda p: good_pt(p, 0), "byteorderbomb": lambda p: good_pt(p, 0)})
    side = open_side(str(cand))
    assert len(side.tensors) == GOOD + 2
    bad = {t.op: t.problem for t in side.tensors if t.problem}
    assert set(bad) == {"Functional.storagebomb.0.forward", "Functional.byteorderbomb.1.forward"}, bad
    assert "compressed" in bad["Functional.storagebomb.0.forward"]
    assert {os.path.basename(p.path) for p in side.problems} == {
        "Functional.storagebomb.0.forward.output.0.pt", "Functional.byteorderbomb.1.forward.output.0.pt"}
    p = plan(CompareSpec(str(cand), str(bench)))
    table = execute(p, workers=1)
    assert table is not None
    assert len(table) == GOOD + 2
    reasons = dict(zip(table.columns["tensor"].tolist(), table.columns["reason"].tolist()))
    assert "compressed" in reasons["Functional.storagebomb.0.forward:output:0"]
    assert sum(1 for r in reasons.values() if not r) == GOOD


# ---------------------------------------------------------------- zips the zipfile module fails on


def _utf8_flag_bad_name(path: Path) -> None:
    write_pt(path, tensor_pickle(), bytes(24), members={"xx": b"x"})
    patch(path, "xx", flag=0x800, name=b"archive/\xff\xfe")


def _corrupt(path: Path, method: int) -> None:
    write_pt(path, tensor_pickle() + b"\0" * 4000, bytes(24), methods={"data.pkl": method})
    local, _ = _headers(path, "archive/data.pkl")
    raw = bytearray(path.read_bytes())
    start = local + 30 + len("archive/data.pkl")
    raw[start + 4:start + 40] = b"\xff" * 36
    path.write_bytes(bytes(raw))


def _method(path: Path, method: int) -> None:
    write_pt(path, tensor_pickle(), bytes(24))
    patch(path, "data.pkl", method=method)


def _encrypted(path: Path) -> None:
    write_pt(path, tensor_pickle(), bytes(24))
    patch(path, "data.pkl", flag=0x1)



def _past_end(path: Path) -> None:
    write_pt(path, tensor_pickle(numel=1 << 28), bytes(24))
    patch(path, "data/0", file_size=1 << 30, compress_size=1 << 30)


ODD = {
    "utf8name": (_utf8_flag_bad_name, "cannot read the zip"),
    "deflate": (lambda p: _corrupt(p, zipfile.ZIP_DEFLATED), "damaged zip"),
    "lzma": (lambda p: _corrupt(p, zipfile.ZIP_LZMA), "method 14"),
    "method99": (lambda p: _method(p, 99), "method 99"),
    "encrypted": (_encrypted, "encrypted"),
    "nostorage": (lambda p: write_pt(p, tensor_pickle(key="7"), bytes(24)), "no zip member archive/data/7"),
    "shortstorage": (lambda p: write_pt(p, tensor_pickle(), bytes(8)), "holds 8 bytes"),
    "pastend": (lambda p: _past_end(p), "past the end of the file"),
}


@pytest.mark.parametrize("label", list(ODD))
def test_a_zip_the_zipfile_module_fails_on_is_the_readers_error(tmp_path, label):
    make, words = ODD[label]
    path = tmp_path / "odd.pt"
    make(path)
    with pytest.raises(torchpickle.PtError, match=words):
        torchpickle.load(str(path))


def test_odd_zips_in_a_rank_are_problems_on_their_tensors_and_every_good_row_stays(tmp_path):
    root = rank(tmp_path / "cand", {label: make for label, (make, _) in ODD.items()})
    side = open_side(str(root))
    assert len(side.tensors) == GOOD + len(ODD)
    assert sum(1 for t in side.tensors if not t.problem) == GOOD
    for k, (label, (_, words)) in enumerate(ODD.items()):
        t = side.find(f"Functional.{label}.{k}.forward", "output", 0)
        assert t is not None
        assert words in t.problem, (label, t.problem)
        assert any(p.path == t.source and words in p.message for p in side.problems)
    assert all(t.load().shape == (2, 3) for t in side.tensors if not t.problem)


# ---------------------------------------------------------------- views larger than their storage


def test_a_stride_0_view_of_a_tiny_storage_is_refused_naming_shape_and_storage(tmp_path):
    path = write_pt(tmp_path / "s.pt", tensor_pickle(numel=1, size=(8192, 8192), stride=(0, 0)), bytes(4))
    assert path.stat().st_size < 1024
    found = in_child("load", path)
    assert_refused(found, "[8192, 8192]", "storage of 1 elements", grew_mb=32)
    path = write_pt(tmp_path / "t.pt", tensor_pickle(numel=1, size=(1 << 16, 1 << 15), stride=(0, 0)), bytes(4))
    assert_refused(in_child("describe", path), "[65536, 32768]", grew_mb=32)


def test_views_torch_saves_read_as_torch_reads_them(tmp_path):
    base = np.arange(12, dtype=np.float32)
    cases = {  # (size, stride, offset, numel) -> what torch would give
        "expand": ((1000, 3), (0, 1), 0, 3, np.broadcast_to(base[:3], (1000, 3))),
        "transpose": ((4, 3), (1, 4), 0, 12, base.reshape(3, 4).T),
        "slice": ((2, 2), (4, 1), 5, 12, base.reshape(3, 4)[1:3, 1:3]),
        "mask": ((64, 512, 512), (0, 512, 1), 0, 512 * 512, None),  # 64 MiB from a 1 MiB storage
    }
    for label, (size, stride, offset, numel, want) in cases.items():
        storage = np.arange(numel, dtype=np.float32)
        path = write_pt(tmp_path / f"{label}.pt", tensor_pickle(numel=numel, size=size, stride=stride, offset=offset),
                        storage.tobytes())
        got = torchpickle.load(str(path))
        assert got.shape == size, label
        if want is not None:
            np.testing.assert_array_equal(got, want)
        else:
            assert (got[17] == storage.reshape(512, 512)).all()
    path = write_pt(tmp_path / "big.pt", tensor_pickle(numel=512 * 512, size=(65, 512, 512), stride=(0, 512, 1)),
                    bytes(4 * 512 * 512))
    with pytest.raises(torchpickle.PtError, match=r"view of shape \[65, 512, 512\].*storage of 262144 elements"):
        torchpickle.describe(str(path))


# ---------------------------------------------------------------- through the real entry point


def test_inspect_and_compare_of_a_hostile_rank_exit_politely_with_every_good_row(tmp_path, bombs):
    hostile: dict[str, Callable[[Path], object]] = {label: make for label, (make, _) in ODD.items()}
    hostile["strideview"] = lambda p: write_pt(p, tensor_pickle(numel=1, size=(8192, 8192), stride=(0, 0)), bytes(4))
    hostile["dagkey"] = lambda p: write_pt(p, tensor_pickle(pid=dag()), bytes(24))
    hostile["storagebomb"] = lambda p: p.write_bytes(bombs["storage"].read_bytes())
    cand = rank(tmp_path / "cand", hostile, value=0.5)
    bench = rank(tmp_path / "bench", {label: lambda p: good_pt(p, 0) for label in hostile})
    r = accuscope("inspect", cand)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert f"tensors {GOOD + len(hostile)}" in r.stdout and f"{len(hostile)} problems" in r.stdout, r.stdout
    for k, label in enumerate(hostile):
        assert f"Functional.{label}.{k}.forward.output.0.pt:" in r.stdout, label
    r = accuscope("compare", "--npu", cand, "--golden", bench, "--out", tmp_path / "task")
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert f"rows {GOOD + len(hostile)}" in r.stdout, r.stdout
    with open(next((tmp_path / "task").glob("result_*.csv")), newline="") as fh:
        rows = {row["TensorIndex"]: row for row in csv.DictReader(fh)}
    assert len(rows) == GOOD + len(hostile)
    for k in range(GOOD):  # every good row compared
        assert float(rows[f"Functional.relu.{k}.forward:output:0"]["CosineSimilarity"]) > 0.99
    for k, label in enumerate(hostile):  # every hostile one a row with its reason
        assert rows[f"Functional.{label}.{k}.forward:output:0"]["CompareFailReason"], label
    assert "memo get" in rows["Functional.dagkey.9.forward:output:0"]["CompareFailReason"]
    r = accuscope("convert", cand, "--out", tmp_path / "conv")
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert len(list((tmp_path / "conv").glob("*.npy"))) == GOOD


# ---------------------------------------------------------------- msprobe: a cut-short or damaged dump.json


@pytest.mark.parametrize("text", [b"", b"{", b'{"task": "', b"\0" * 10])
def test_a_dump_json_cut_short_at_once_is_still_an_msprobe_rank(tmp_path, text):
    root = rank(tmp_path / "cand", {})
    (root / "step0" / "rank0" / "dump.json").write_bytes(text)
    assert detect(str(root)).kind == "msprobe"
    side = open_side(str(root))
    assert len(side.tensors) == GOOD and not any(t.problem for t in side.tensors)
    assert any(p.path.endswith("dump.json") and "cut short" in p.message for p in side.problems), side.problems
    r = accuscope("inspect", root)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert f"tensors {GOOD}" in r.stdout and "cut short" in r.stdout


def test_a_damaged_dump_json_entry_is_a_problem_naming_it(tmp_path):
    root = rank(tmp_path / "cand", {})
    doc = root / "step0" / "rank0" / "dump.json"
    data = json.loads(doc.read_text())
    del data["data"]["Functional.relu.3.forward"]["output"][0]["shape"]  # damaged: a tensor without its shape
    del data["data"]["Functional.relu.5.forward"]["output"][0]["dtype"]
    data["data"]["Functional.relu.7.forward"]["output"][0] = {"type": "torch.Tensor", "Max": 1.0}
    # not damaged: a keyword argument named dtype (a mapping without "type"), a record of a dtype
    data["data"]["Functional.relu.8.forward"]["input_kwargs"] = {
        "dtype": {"type": "torch.dtype", "value": "torch.float32"}, "size": {"type": "torch.Size", "value": [2]}}
    doc.write_text(json.dumps(data))
    side = open_side(str(root))
    named = {p.message.split(":")[0] for p in side.problems if p.path == str(doc)}
    assert named == {"Functional.relu.3.forward.output.0", "Functional.relu.5.forward.output.0",
                     "Functional.relu.7.forward.output.0"}, side.problems
    # the two with a data file read it; the third is a row with a reason; the two non-tensor keyword arguments
    # are rows of their own, compared as values
    assert len(side.tensors) == GOOD + 2
    assert {t.value for t in side.tensors if t.value is not None} == {"\"torch.float32\"", "[2]"}  # as dump.json spells them
    assert present(side.find("Functional.relu.3.forward", "output", 0)).load().shape == (2, 3)
    assert present(side.find("Functional.relu.7.forward", "output", 0)).problem
    # statistics mode: the compiled scanner leaves the damaged text to Python, which names it
    raw = doc.read_bytes()
    if msprobe._dumpscan is not None:
        assert msprobe._dumpscan.scan(raw) is None
        data["data"] = {k: v for k, v in data["data"].items() if k not in (
            "Functional.relu.3.forward", "Functional.relu.5.forward", "Functional.relu.7.forward")}
        assert len(msprobe._dumpscan.scan(json.dumps(data).encode())[4]) == GOOD - 3 + 2  # + the two values
    stats = tmp_path / "stats" / "step0" / "rank0"
    stats.mkdir(parents=True)
    (stats / "dump.json").write_bytes(raw.replace(b'"tensor"', b'"statistics"', 1))
    assert msprobe.recorded(str(stats), stats_only=True) is None
    _, problems = msprobe.read(str(stats))
    assert len([p for p in problems if "Functional.relu." in p.message]) == 3



# ---------------------------------------------------------------- what a loose .pt may hold besides one tensor


def _body(pkl: bytes) -> bytes:
    """A pickle without its PROTO and STOP: to build others around it."""
    assert pkl.startswith(b"\x80\x02") and pkl.endswith(b".")
    return pkl[2:-1]


def test_a_state_dict_reads_and_build_applies_to_nothing_else(tmp_path):
    storage = np.arange(6, dtype=np.float32).tobytes()
    odict = b"ccollections\nOrderedDict\n)R"
    state = b"}" + _str("_metadata") + odict + b"s"  # {"_metadata": OrderedDict()}: dropped
    ok = b"\x80\x02" + odict + b"(" + _str("w") + _body(tensor_pickle()) + b"u" + state + b"b."
    found = torchpickle.contents(str(write_pt(tmp_path / "sd.pt", ok, storage)))
    assert [(e.key, e.tensor.shape if e.tensor else None) for e in found] == [("w", (2, 3))]
    cases = {  # BUILD would set attributes: on a tensor (its shape), on a storage type all files share
        "on a tensor": _body(tensor_pickle()) + b"}" + _str("shape") + _tuple(_int(9)) + b"sb.",
        "on a storage type": b"ctorch\nFloatStorage\n}" + _str("name") + _str("BFloat16Storage") + b"sb.",
        "on a list": b"]" + state + b"b.",
    }
    for label, pkl in cases.items():
        with pytest.raises(torchpickle.PtError, match="BUILD at byte [0-9]+ on something other than an OrderedDict"):
            torchpickle.contents(str(write_pt(tmp_path / "b.pt", b"\x80\x02" + pkl, storage)))
        assert torchpickle.STORAGES["FloatStorage"][1] == "float32", label
    assert torchpickle.load(str(write_pt(tmp_path / "t.pt", tensor_pickle(), storage))).dtype == np.float32


def test_a_tensor_may_be_shared_a_container_may_not(tmp_path):
    storage = np.arange(6, dtype=np.float32).tobytes()
    shared = b"\x80\x02" + _body(tensor_pickle()) + _put(90) + _get(90) + b"\x86."  # (t, t)
    found = torchpickle.contents(str(write_pt(tmp_path / "s.pt", shared, storage)))
    assert [e.key for e in found] == ["0", "1"] and found[0].tensor == found[1].tensor
    listed = b"\x80\x02]" + _put(90) + _get(90) + b"\x86."  # ([], []) through the memo: a container shared
    with pytest.raises(torchpickle.PtError, match="memo get of a tuple, list, dict or object"):
        torchpickle.contents(str(write_pt(tmp_path / "l.pt", listed, storage)))
    odict = b"\x80\x02ccollections\nOrderedDict\n)R" + _put(90) + _get(90) + b"\x86."
    with pytest.raises(torchpickle.PtError, match="memo get"):
        torchpickle.contents(str(write_pt(tmp_path / "o.pt", odict, storage)))


def test_leaves_past_the_limit_are_refused(tmp_path, monkeypatch):
    storage = np.arange(6, dtype=np.float32).tobytes()
    many = b"\x80\x02" + _body(tensor_pickle()) + _put(90) + b"(" + _get(90) * 9 + b"l."  # [t] * 10
    monkeypatch.setattr(torchpickle, "ENTRY_LIMIT", 8)
    with pytest.raises(torchpickle.PtError, match="more than 8 tensors and values"):
        torchpickle.contents(str(write_pt(tmp_path / "m.pt", many, storage)))
