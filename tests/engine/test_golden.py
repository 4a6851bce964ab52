"""Golden dump readers: npy folders, npz, raw binaries and Polygraphy RunResults JSON."""
from __future__ import annotations

import io
import json
import os
import pathlib
import time

import numpy as np
import pytest

from accuscope.engine.sides.registry import open_golden
from accuscope.engine.sources.golden import GoldenDump
from accuscope.engine.sources.tensor import (
    SourceError,
    Tensor,
    TensorError,
    file_tensor,
    read_payload,
    recorded_tensor,
)
from support.polygraphy import polygraphy_json

DTYPES = [np.float16, np.float32, np.int8, np.bool_]


def sample(dtype, shape=(2, 3, 4), seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-128, 127, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)




def write_golden(kind: str, tmp_path: pathlib.Path, arr: np.ndarray) -> GoldenDump:
    """Write `arr` as tensor `conv1` in the given kind and open it."""
    if kind == "npy":
        np.save(tmp_path / "conv1.0.1700000000000.npy", arr)
        return open_golden(tmp_path)
    if kind == "npz":
        np.savez(tmp_path / "g.npz", conv1=arr)
        return open_golden(tmp_path / "g.npz")
    if kind == "npz-compressed":
        np.savez_compressed(tmp_path / "g.npz", conv1=arr)
        return open_golden(tmp_path / "g.npz")
    if kind == "bin":
        arr.astype(arr.dtype.newbyteorder("<")).tofile(tmp_path / "conv1.bin")
        return open_golden(tmp_path / "conv1.bin", shape=arr.shape, dtype=arr.dtype)
    return open_golden(polygraphy_json(tmp_path / "r.json", {"onnxrt-runner": [{"conv1": arr}]}))


# --- data equality -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind", ["npy", "npz", "npz-compressed", "bin", "polygraphy"])
def test_every_kind_returns_the_exact_data(tmp_path, kind, dtype):
    arr = sample(dtype)
    dump = write_golden(kind, tmp_path, arr)
    assert dump.kind == kind.split("-")[0] and not dump.problems
    t = dump.find("conv1")
    assert t is not None and t.dtype == arr.dtype and t.shape == arr.shape
    assert t.dtype_name == arr.dtype.name and t.format == "ND" and (t.io, t.index) == ("output", 0)
    out = t.load()
    assert out.dtype == arr.dtype and np.array_equal(out, arr)
    if t.payload is not None:  # chunked readers see the same bytes
        assert np.array_equal(read_payload(t.payload), arr)


def test_fortran_ordered_and_empty_npy_load(tmp_path):
    f = np.asfortranarray(sample(np.float32, (3, 5)))
    np.save(tmp_path / "f.0.1.npy", f)
    np.save(tmp_path / "e.0.1.npy", np.zeros((0, 4), np.float32))
    dump = open_golden(tmp_path)
    ft = dump.find("f")
    assert ft is not None
    assert ft.payload is None and np.array_equal(ft.load(), f)  # not one C-ordered run: no payload
    assert present(dump.find("e")).load().shape == (0, 4)


# --- npy folder naming ---------------------------------------------------------------------------

def test_npy_folder_picks_newest_by_default_and_oldest_on_request(tmp_path):
    for ts, value in [(1700000000002, 2.0), (1700000000001, 1.0), (1700000000003, 3.0)]:
        np.save(tmp_path / f"conv1.0.{ts}.npy", np.full(4, value, np.float32))
    newest = open_golden(tmp_path)
    assert len(newest.tensors) == 1
    assert present(newest.find("conv1")).timestamp == 1700000000003 and present(newest.find("conv1")).load()[0] == 3.0
    assert present(open_golden(tmp_path, pick="oldest").find("conv1")).load()[0] == 1.0
    assert [t.timestamp for t in newest.versions("conv1")] == [1700000000003, 1700000000002, 1700000000001]
    assert [t.load()[0] for t in newest.versions("conv1")] == [3.0, 2.0, 1.0]
    assert newest.versions("absent") == [] and newest.find("absent") is None


def test_input_files_and_output_indices_are_separate_tensors(tmp_path):
    np.save(tmp_path / "add.0.1700000000001.npy", np.ones(2, np.float32))
    np.save(tmp_path / "add.1.1700000000001.npy", np.full(2, 5, np.float32))
    np.save(tmp_path / "input_add.1.1700000000001.npy", np.full(2, 7, np.float32))
    dump = open_golden(tmp_path)
    assert sorted(t.name for t in dump.tensors) == ["add:input:1", "add:output:0", "add:output:1"]
    assert present(dump.find("add", "input", 1)).load()[0] == 7
    assert present(dump.find("add", index=1)).load()[0] == 5
    assert dump.find("add", "input", 0) is None


def test_mapping_csv_restores_long_names(tmp_path):
    long_op = "encoder_" + "layer_" * 50 + "matmul"
    np.save(tmp_path / "1.npy", np.arange(3, dtype=np.float32))
    np.save(tmp_path / "2.npy", np.arange(4, dtype=np.float32))
    (tmp_path / "mapping.csv").write_text(f"1.npy,{long_op}.0.1700000000001.npy\n"
                                          f"2,input_{long_op}.0.1700000000001.npy\n")
    dump = open_golden(tmp_path)
    out, inp = dump.find(long_op), dump.find(long_op, "input")
    assert out is not None
    assert out.source.endswith("1.npy") and out.timestamp == 1700000000001 and out.load().size == 3
    assert inp is not None
    assert inp.source.endswith("2.npy") and inp.load().size == 4


def test_op_names_with_slashes_are_found_through_sanitize(tmp_path):
    np.save(tmp_path / "conv1_relu.0.123.npy", np.ones(2, np.float32))
    dump = open_golden(tmp_path)
    assert present(dump.find("conv1/relu")).op == "conv1_relu"
    assert dump.find("conv1.relu") is dump.find("conv1_relu")
    assert dump.find_tensor("conv1_relu") is None  # npy folders carry no graph tensor names
    np.savez(tmp_path / "g.npz", **{"conv1/relu:0": np.ones(2, np.float32)})  # type: ignore[arg-type]  # numpy's stub reads **arrays as allow_pickle
    npz = open_golden(tmp_path / "g.npz")
    assert present(npz.find_tensor("conv1/relu:0")).tensor_name == "conv1/relu:0"
    assert npz.find("conv1/relu:0") is npz.find("conv1_relu:0") is npz.find_tensor("conv1/relu:0")


def test_non_npy_files_are_ignored_silently(tmp_path):
    np.save(tmp_path / "a.0.1.npy", np.ones(2, np.float32))
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "sub").mkdir()
    np.save(tmp_path / "sub" / "b.0.1.npy", np.ones(2, np.float32))
    dump = open_golden(tmp_path)
    assert [t.op for t in dump.tensors] == ["a"] and not dump.problems


# --- laziness ------------------------------------------------------------------------------------

def _forbidden(*args, **kwargs):
    raise AssertionError("array data read while opening")


def test_big_npy_opens_without_reading_data(tmp_path, monkeypatch):
    shape = (50, 1024, 1024)  # 200 MB of float32, written sparse
    path = tmp_path / "big.0.1700000000001.npy"
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": shape})
        offset = fh.tell()
        fh.truncate(offset + 4 * 50 * 1024 * 1024)
        fh.seek(offset + 4 * 7)
        fh.write(np.float32(42).tobytes())
    with monkeypatch.context() as m:
        m.setattr(np, "load", _forbidden)  # opening must not load any array
        start = time.perf_counter()
        t = open_golden(tmp_path).find("big")
        assert time.perf_counter() - start < 1.0
    assert t is not None and t.payload is not None
    assert t.payload.offset == offset and t.payload.nbytes == 200 * 1024 * 1024
    full = np.load(path, mmap_mode="r")
    assert full.offset == t.payload.offset
    assert t.load()[0, 0, 7] == 42 and read_payload(t.payload)[0, 0, 7] == 42


def test_npy_folder_opens_each_file_once_and_loads_small_ones_from_that_read(tmp_path, monkeypatch):
    """A file of up to HEAD_READ bytes is read whole with its header; a larger one is read again to load."""
    from accuscope.engine.sources import npyfile
    small, large = sample(np.float32, (4, 4)), sample(np.float32, (npyfile.HEAD_READ,))
    fortran = np.asfortranarray(sample(np.int8, (3, 5)))
    for name, arr in (("small", small), ("large", large), ("fortran", fortran)):
        np.save(tmp_path / f"{name}.0.1.npy", arr)
    opened: list[str] = []
    real_open = os.open

    def recorded(path, *a, **k):
        opened.append(path)
        return real_open(path, *a, **k)
    monkeypatch.setattr(os, "open", recorded)
    monkeypatch.setattr(npyfile, "_npyread", None)  # the listing's reads in Python, where os.open sees them
    dump = open_golden(tmp_path)
    assert sorted(pathlib.Path(p).name for p in opened) == ["fortran.0.1.npy", "large.0.1.npy", "small.0.1.npy"]
    opened.clear()
    for name, arr in (("small", small), ("fortran", fortran), ("large", large)):
        data = present(dump.find(name)).load()
        assert np.array_equal(data, arr) and data.shape == arr.shape and not data.flags.writeable
    assert present(dump.find("fortran")).load().flags.f_contiguous
    assert [pathlib.Path(p).name for p in opened] == ["large.0.1.npy"]  # the small ones not opened again


def test_npy_header_longer_than_one_read_is_read_to_its_end(tmp_path):
    from accuscope.engine.sources import npyfile
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + " " * (npyfile.HEAD_READ + 500)
    body = header.encode() + b"\n"
    body += b" " * (-(12 + len(body)) % 64)
    raw = b"\x93NUMPY\x02\x00" + len(body).to_bytes(4, "little") + body + arr.tobytes()
    (tmp_path / "long.0.1.npy").write_bytes(raw)
    (tmp_path / "cut.0.1.npy").write_bytes(raw[:npyfile.HEAD_READ + 100])
    dump = open_golden(tmp_path)
    assert np.array_equal(present(dump.find("long")).load(), arr)
    assert [pathlib.Path(p.path).name for p in dump.problems] == ["cut.0.1.npy"]
    assert "truncated" in dump.problems[0].message

# --- problems with single files ------------------------------------------------------------------

class _Trap:
    """Unpickling this creates a marker file: proof that nothing was unpickled."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return pathlib.Path.touch, (pathlib.Path(self.marker),)


def test_corrupt_npy_is_one_problem_and_the_rest_loads(tmp_path):
    np.save(tmp_path / "good.0.1.npy", np.arange(5, dtype=np.int8))
    (tmp_path / "bad.0.1.npy").write_bytes(b"\x93NUMPY garbage")
    np.save(tmp_path / "cut.0.1.npy", np.arange(100, dtype=np.float32))
    data = (tmp_path / "cut.0.1.npy").read_bytes()
    (tmp_path / "cut.0.1.npy").write_bytes(data[:-8])
    dump = open_golden(tmp_path)
    assert sorted(pathlib.Path(p.path).name for p in dump.problems) == ["bad.0.1.npy", "cut.0.1.npy"]
    assert any("truncated" in p.message for p in dump.problems)
    assert np.array_equal(present(dump.find("good")).load(), np.arange(5, dtype=np.int8))
    with pytest.raises(TensorError, match="bad.0.1.npy"):
        present(dump.find("bad")).load()


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_pickled_object_arrays_are_never_unpickled(tmp_path, kind):
    marker = tmp_path / "unpickled"
    arr = np.array([_Trap(str(marker)), 1], dtype=object)
    folder = tmp_path / "d"
    folder.mkdir()
    if kind == "npy":
        np.save(folder / "obj.0.1.npy", arr, allow_pickle=True)
        np.save(folder / "ok.0.1.npy", np.ones(2, np.float32))
        dump = open_golden(folder)
    else:
        np.savez(folder / "g.npz", obj=arr, ok=np.ones(2, np.float32))
        dump = open_golden(folder / "g.npz")
    assert len(dump.problems) == 1 and "object" in dump.problems[0].message
    with pytest.raises(TensorError):
        present(dump.find("obj")).load()
    assert present(dump.find("ok")).load().sum() == 2
    assert not marker.exists()


# --- unusable sources ----------------------------------------------------------------------------

def _source_cases(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "readme.txt").write_text("x")
    (tmp_path / "nested" / "run1").mkdir(parents=True)
    np.save(tmp_path / "nested" / "run1" / "a.0.1.npy", np.ones(1))
    (tmp_path / "x.txt").write_text("x")
    np.ones(6, np.float32).tofile(tmp_path / "raw.bin")
    (tmp_path / "plain.json").write_text(json.dumps({"polygraphy_class": "TensorMetadata"}))
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "broken.npz").write_bytes(b"not a zip")
    np.savez(tmp_path / "none.npz")
    runs = polygraphy_json(tmp_path / "runs.json", {"onnxrt-runner": [{"y": np.ones(1)}], "trt-runner": []})
    return {
        "missing path": (tmp_path / "nope", {}, "no such file"),
        "empty folder": (tmp_path / "empty", {}, "empty folder"),
        "folder without npy": (tmp_path / "other", {}, "no .npy files"),
        "npy only in subfolders": (tmp_path / "nested", {}, "run1"),
        "unknown file type": (tmp_path / "x.txt", {}, "unknown golden file type"),
        "raw without shape/dtype": (tmp_path / "raw.bin", {"shape": (6,)}, "needs both shape and dtype"),
        "raw size mismatch": (tmp_path / "raw.bin", {"shape": (2, 2), "dtype": "float32"}, r"24 bytes.*16"),
        "json not RunResults": (tmp_path / "plain.json", {}, "not a Polygraphy RunResults"),
        "json unreadable": (tmp_path / "broken.json", {}, "not readable JSON"),
        "npz unreadable": (tmp_path / "broken.npz", {}, "not a readable npz"),
        "npz without arrays": (tmp_path / "none.npz", {}, "holds no arrays"),
        "runner absent": (runs, {"runner": "tf"}, "onnxrt-runner, trt-runner"),
        "iteration out of range": (runs, {"iteration": 1}, "iteration 1 out of range"),
        "runner without iterations": (runs, {"runner": "trt-runner"}, "0 iteration"),
    }


CASES = ["missing path", "empty folder", "folder without npy", "npy only in subfolders", "unknown file type",
         "raw without shape/dtype", "raw size mismatch", "json not RunResults", "json unreadable",
         "npz unreadable", "npz without arrays", "runner absent", "iteration out of range",
         "runner without iterations"]


@pytest.mark.parametrize("case", CASES)
def test_unusable_sources_raise_source_error_naming_the_path(tmp_path, case):
    path, kwargs, reason = _source_cases(tmp_path)[case]
    with pytest.raises(SourceError, match=reason) as info:
        open_golden(path, **kwargs)
    assert str(path) in str(info.value)


# ---------------------------------------------------------------- npy header parser, property-tested

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from accuscope.engine.sources.npyfile import npy_header  # noqa: E402
from fuzz.corpus import npy_bytes as npy_with_header  # noqa: E402
from support.narrow import present

_DESCRS = st.one_of(st.sampled_from(["<f4", ">f8", "|u1", "<i8", "|b1", "<c8", "<f2", "|O", "<U4", "|V0",
                                     "<M8[ns]", "<f4,<i4", "(2,)<f4", "", "f4'"]),
                    st.text(st.characters(max_codepoint=255), max_size=12))
_DIMS = st.lists(st.one_of(st.integers(0, 5), st.integers(-(2**65), 2**65)), max_size=6)


def _header_text(descr, fortran, dims, junk):
    shape = "(" + "".join(f"{d}, " for d in dims) + ")"
    return f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': {shape}, }}{junk}"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(descr=_DESCRS, fortran=st.booleans(), dims=_DIMS, junk=st.sampled_from(["", " ", "\x1c", "}", ",", "#"]),
       data_len=st.integers(0, 256))
def test_npy_header_parser_accepts_what_numpy_reads_and_nothing_it_cannot(descr, fortran, dims, junk, data_len):
    raw = npy_with_header(_header_text(descr, fortran, dims, junk), bytes(data_len))
    try:
        head = npy_header(io.BytesIO(raw), len(raw))
    except ValueError:
        return  # refused with a reason: the only way it may fail
    # accepted: a plain numeric array of sane size whose data the stream holds, as numpy reads it
    assert head.dtype.kind in "biufc" and head.dtype.itemsize > 0 and not head.dtype.hasobject
    assert all(0 <= d < 2**63 for d in head.shape) and head.offset + head.nbytes <= len(raw)
    arr = np.load(io.BytesIO(raw), allow_pickle=False)
    assert (arr.shape, arr.dtype, head.fortran) == (head.shape, head.dtype, fortran)


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=300))
def test_npy_header_parser_on_random_bytes_raises_only_value_error(raw):
    for stream in (raw, b"\x93NUMPY\x01\x00" + raw, b"\x93NUMPY\x02\x00" + raw):
        try:
            npy_header(io.BytesIO(stream), len(stream))
        except ValueError:
            pass


@pytest.mark.parametrize("build, args", [
    (file_tensor, dict(op="conv", io="input", index=2, dtype=np.dtype("float16"), shape=(2, 3), source="a.npy",
                       dtype_name="float16", payload=None, reader=None, timestamp=17)),
    (recorded_tensor, dict(op="Functional.linear.0.forward", io="output", index=0, shape=(2, 8), source="dump.json",
                           op_type="Linear", dtype_name="bfloat16", tensor_name="Functional.linear.0.forward.output.0",
                           stats=(1.0, -1.0, 0.0, 2.5), checksum="", problem="")),
], ids=["file_tensor", "recorded_tensor"])
def test_fast_tensors_are_the_tensor_the_constructor_makes(build, args):
    """tensor.file_tensor and recorded_tensor set their fields and leave the rest to the class's defaults:
    every field reads as `Tensor(...)` gives it (a field added without a plain default would break it
    here), and it is compared, replaced and pickled as any tensor."""
    import dataclasses
    import pickle
    fast, slow = build(**args), Tensor(**{"dtype": None, **args})
    for f in dataclasses.fields(Tensor):
        assert f.default_factory is dataclasses.MISSING
        assert getattr(fast, f.name) == getattr(slow, f.name), f.name
    assert repr(fast) == repr(slow) and repr(pickle.loads(pickle.dumps(fast))) == repr(slow)
    assert dataclasses.replace(fast, op="x").op == "x" and fast.name == f"{args['op']}:{args['io']}:{args['index']}"
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.op = "y"


def test_the_compiled_reader_of_a_folder_gives_what_read_npy_file_gives(tmp_path, monkeypatch):
    """npyfile.read_npy_files (the compiled reader: _npyread.c) and read_npy_file one file at a time: the
    same headers, bytes and errors, for every kind of entry a folder of npy files may hold."""
    import os

    from accuscope.engine.sources import npyfile
    if npyfile._npyread is None:
        pytest.skip("the compiled reader is not built")
    files = {}
    for name, data in (("small", np.arange(16, dtype=np.float32)), ("scalar", np.float16(3)),
                       ("empty", np.zeros(0, np.int8)), ("fortran", np.asfortranarray(np.ones((3, 4)))),
                       ("large", np.arange(5000, dtype=np.float64)), ("exact", np.zeros(4096 - 128, np.uint8))):
        np.save(tmp_path / f"{name}.npy", data)
        files[name] = str(tmp_path / f"{name}.npy")
    long_header = tmp_path / "long.npy"  # a header longer than one read (version 2: a 4-byte length)
    text = ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" + " " * 5000).encode("latin-1") + b"\n"
    long_header.write_bytes(b"\x93NUMPY\x02\x00" + len(text).to_bytes(4, "little") + text + b"\x00" * 8)
    files["long"] = str(long_header)
    for name, raw in (("zero", b""), ("junk", b"not an npy file"), ("cut", open(files["small"], "rb").read()[:140])):
        (tmp_path / f"{name}.npy").write_bytes(raw)
        files[name] = str(tmp_path / f"{name}.npy")
    os.mkfifo(tmp_path / "fifo.npy")
    (tmp_path / "folder.npy").mkdir()
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling.npy")
    files.update(fifo=str(tmp_path / "fifo.npy"), folder=str(tmp_path / "folder.npy"),
                 dangling=str(tmp_path / "dangling.npy"), missing=str(tmp_path / "missing.npy"))
    paths = list(files.values()) * 3
    monkeypatch.setattr(npyfile, "READ_BATCH", 7)  # batches that split the list
    compiled = list(npyfile.read_npy_files(paths))
    monkeypatch.setattr(npyfile, "_npyread", None)
    one_by_one = list(npyfile.read_npy_files(paths))
    assert len(compiled) == len(one_by_one) == len(paths)
    for path, a, b in zip(paths, compiled, one_by_one):
        if isinstance(b, Exception):
            assert type(a) is type(b) and str(a) == str(b), path
        else:
            assert a == b, path
    assert {type(r).__name__ for r in compiled} >= {"tuple", "NotRegular", "FileNotFoundError", "ValueError"}
