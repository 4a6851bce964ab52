"""Polygraphy RunResults JSON: files written by Polygraphy itself (CLI and Python API), read as a stream."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from accuscope.engine.sides.registry import detect, open_golden
from accuscope.engine.sources import polygraphy
from accuscope.engine.sources.tensor import SourceError, TensorError
from support.cli import accuscope

pg_config = pytest.importorskip("polygraphy.config")
from polygraphy.comparator import RunResults  # noqa: E402
from polygraphy.comparator.struct import IterationResult  # noqa: E402
from polygraphy.json import load_json  # noqa: E402

from support.narrow import present

POLYGRAPHY = os.path.join(os.path.dirname(sys.executable), "polygraphy")
RNG = np.random.default_rng(7)


def save(path, runs: dict[str, list[dict[str, np.ndarray]]]):
    """A RunResults file written by Polygraphy's own `RunResults.save`."""
    results = RunResults()
    for name, iterations in runs.items():
        results.append((name, [IterationResult(outs, runtime=0.01, runner_name=name) for outs in iterations]))
    results.save(str(path))
    return path


@pytest.fixture(scope="module")
def cls_run(cls_model, tmp_path_factory):
    """`polygraphy run cls.onnx --onnxrt --onnx-outputs mark all`: the inputs it fed and its outputs."""
    folder = tmp_path_factory.mktemp("cls-run")
    subprocess.run([POLYGRAPHY, "run", str(cls_model), "--onnxrt", "--onnx-outputs", "mark", "all",
                    "--input-shapes", "x:[1,3,48,192]", "--save-inputs", str(folder / "in.json"),
                    "--save-outputs", str(folder / "out.json")], check=True, capture_output=True, timeout=300)
    return folder / "out.json", load_json(str(folder / "in.json"))[0]


def onnxruntime_all_outputs(model_path, feeds) -> dict[str, np.ndarray]:
    """Every node output of the model, computed by onnxruntime."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(model_path))
    names = [o for node in model.graph.node if node.op_type != "Constant" for o in node.output if o]
    del model.graph.output[:]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, session.run(names, feeds)))


# --- files written by `polygraphy run` -----------------------------------------------------------

def test_polygraphy_run_outputs_equal_onnxruntime_in_execution_order(cls_run, cls_model):
    path, feeds = cls_run
    assert os.path.getsize(path) > 1 << 16  # the class marker is beyond any 64 KiB prefix
    assert detect(str(path)).kind == "polygraphy" and polygraphy.is_run_results(path)
    ((runner, iterations),) = polygraphy.runners(path)
    assert runner.startswith("onnxrt-runner") and iterations == 1
    dump = open_golden(path)
    assert dump.kind == "polygraphy" and not dump.problems
    assert [t.tensor_name for t in dump.tensors] == list(RunResults.load(str(path))[0][1][0].keys())
    expected = onnxruntime_all_outputs(cls_model, feeds)
    compared = [t for t in dump.tensors if t.tensor_name in expected]
    assert len(compared) > 200
    for t in compared:
        got = t.load()
        assert t.op == t.tensor_name and got.shape == t.shape and got.dtype == t.dtype
        assert np.array_equal(got, expected[t.tensor_name]), t.tensor_name


def test_inspect_lists_runners_iterations_and_tensors(cls_run):
    path, _ = cls_run
    result = accuscope("inspect", path, "--limit", "0")
    assert result.returncode == 0, result.stderr
    assert "dump (polygraphy)" in result.stdout
    assert re.search(r"runners\s+onnxrt-runner-N0\S* \(1 iteration\)", result.stdout)
    assert "save_infer_model/scale_0.tmp_1" in result.stdout and "conv2d_53.tmp_0" in result.stdout


def test_per_iteration_folder_of_polygraphy_run(cls_model, tmp_path):
    """`--save-outputs DIR` (no extension): one RunResults file per iteration; iteration i is file i."""
    folder = tmp_path / "outs"
    subprocess.run([POLYGRAPHY, "run", str(cls_model), "--onnxrt", "--onnx-outputs", "mark", "all",
                    "--input-shapes", "x:[1,3,48,192]", "--iterations", "2", "--save-outputs", str(folder)],
                   check=True, capture_output=True, timeout=300)
    assert detect(str(folder)).kind == "polygraphy" and polygraphy.is_run_results(folder)
    ((runner, iterations),) = polygraphy.runners(folder)
    assert runner.startswith("onnxrt-runner") and iterations == 2
    second = folder / "0000000001.json"
    expected = RunResults.load(str(second))[0][1][0]
    dump = open_golden(folder, iteration=1)
    assert [t.tensor_name for t in dump.tensors] == list(expected.keys())
    assert all(t.source == str(second) and np.array_equal(t.load(), expected[t.tensor_name]) for t in dump.tensors)
    with pytest.raises(SourceError, match=r"outs: iteration 2 out of range: the folder holds 2 iteration file"):
        open_golden(folder, iteration=2)
    result = accuscope("inspect", folder)
    assert result.returncode == 0 and "(2 iterations)" in result.stdout, result.stdout + result.stderr


# --- files written by RunResults.save --------------------------------------------------------------

def sample(dtype, shape):
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-128, 127, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def test_runners_iterations_dtypes_and_layouts(tmp_path, monkeypatch):
    """Two runners, three iterations; fp16/int8/bool/int64, 0-d, empty and Fortran-ordered arrays; arrays
    above Polygraphy's swap threshold (LazyArray kept on disk while writing)."""
    monkeypatch.setattr(pg_config, "ARRAY_SWAP_THRESHOLD_MB", 0)
    swap = tmp_path / "swap"  # Polygraphy's swap files (under tempfile.gettempdir(), never deleted): kept here
    swap.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(swap))
    runs = {
        runner: [{"probs": sample(np.float16, (2, 5)), "quant": sample(np.int8, (3, 4)),
                  "mask": sample(np.bool_, (7,)), "ids": sample(np.int64, (2, 2)),
                  "scalar": np.array(it + 0.5, np.float32), "empty": np.empty((0, 3), np.float32),
                  "fortran": np.asfortranarray(sample(np.float32, (3, 300, 500)))}
                 for it in range(3)]
        for runner in ("onnxrt-runner-N0", "trt-runner-N0")}
    path = save(tmp_path / "r.json", runs)
    assert polygraphy.runners(path) == [("onnxrt-runner-N0", 3), ("trt-runner-N0", 3)]
    for runner, iterations in runs.items():
        for i, outputs in enumerate(iterations):
            dump = open_golden(path, runner=runner, iteration=i)
            assert [t.tensor_name for t in dump.tensors] == list(outputs)
            for name, arr in outputs.items():
                got = present(dump.find_tensor(name)).load()
                assert got.dtype == arr.dtype and got.shape == arr.shape and np.array_equal(got, arr), name


@pytest.mark.parametrize("reads", [None, 7], ids=["default reads", "7-byte reads"])
def test_names_with_escapes_and_unicode(tmp_path, monkeypatch, reads):
    """JSON escapes and UTF-8 in names; with 7-byte reads every token and escape crosses a read."""
    if reads:
        monkeypatch.setattr(polygraphy, "_STRUCTURE", reads)
        monkeypatch.setattr(polygraphy, "CHUNK", 8)
    names = ['a"quoted"\\name', "路径/卷积:0", "tab\there", "x" * 5000]
    arrays = {name: np.full((2,), i, np.float32) for i, name in enumerate(names)}
    path = save(tmp_path / "r.json", {"runner \"ü\"": [arrays]})
    assert polygraphy.runners(path) == [('runner "ü"', 1)]
    entries, problems = polygraphy.read(path)
    assert not problems and [t.tensor_name for t in entries] == names
    assert all(np.array_equal(t.load(), arrays[t.tensor_name]) for t in entries)


def test_iteration_without_outputs_and_runner_without_iterations(tmp_path):
    path = save(tmp_path / "r.json", {"a": [{}], "b": []})
    assert open_golden(path).tensors == []
    with pytest.raises(SourceError, match=r"r\.json: iteration 0 out of range: runner 'b' has 0 iteration"):
        open_golden(path, runner="b")


def test_runner_and_iteration_errors_name_what_exists(tmp_path):
    path = save(tmp_path / "r.json", {"onnxrt-runner-N0": [{"y": np.ones(2)}] * 2, "trt-runner-N0": []})
    with pytest.raises(SourceError, match=r"r\.json: runner 'tf' not present; runners: onnxrt-runner-N0, "
                                          r"trt-runner-N0$"):
        polygraphy.read(path, side="tf")
    with pytest.raises(SourceError, match=r"r\.json: iteration 5 out of range: runner 'onnxrt-runner-N0' "
                                          r"has 2 iteration"):
        polygraphy.read(path, iteration=5)


@pytest.mark.parametrize("fast", [True, False], ids=["pybase64", "binascii"])
def test_both_base64_decoders_give_the_same_array_and_refuse_corruption(tmp_path, monkeypatch, fast):
    if fast and polygraphy._simd_b64decode is None:
        pytest.skip("pybase64 not installed")
    if not fast:
        monkeypatch.setattr(polygraphy, "_simd_b64decode", None)
    monkeypatch.setattr(polygraphy, "CHUNK", 4096)  # many chunks, the data start inside a quad
    arr = sample(np.float32, (3, 10000))
    path = save(tmp_path / "r.json", {"r": [{"good": arr, "bad": arr}]})
    text = path.read_bytes()
    bad = text.index(b'"array"', text.index(b'"bad"'))
    at = bad + 100_000  # past the header: found by load(), not at open
    # A quote inside the array: opening never reads the array text (it seeks past it, its length known
    # from the npy header), so only this array's load() finds the damage.
    path.write_bytes(text[:at] + b'"' + text[at + 1:])
    dump = open_golden(path)
    assert not dump.problems
    assert np.array_equal(present(dump.find_tensor("good")).load(), arr)
    with pytest.raises(TensorError, match=r"r\.json: bad:output:0: corrupt base64 in bytes"):
        present(dump.find_tensor("bad")).load()


# --- broken files --------------------------------------------------------------------------------

def test_truncated_file_says_where(tmp_path):
    path = save(tmp_path / "r.json", {"r": [{"a": np.ones(10, np.float32), "b": np.ones(5000, np.float32)}]})
    text = path.read_bytes()
    cut = text.index(b'"array"', text.index(b'"b"')) + 3000
    path.write_bytes(text[:cut])
    assert polygraphy.is_run_results(path)  # the head tells the layout even without the marker
    with pytest.raises(SourceError, match=rf"r\.json: not readable JSON: truncated, the file ends at byte "
                                          rf"{cut:,} inside a string \(\.lst\[0\]\[1\]\[0\]\.outputs\.b\."
                                          rf"values\.array\)") as info:
        open_golden(path)
    assert "\n" not in str(info.value)


def test_a_bad_array_is_a_problem_and_the_rest_loads(tmp_path):
    ok = sample(np.float32, (4,))
    path = save(tmp_path / "r.json", {"r": [{"ok": ok, "header": ok, "short": ok}]})
    doc = json.loads(path.read_text())
    outputs = doc["lst"][0][1][0]["outputs"]
    outputs["header"]["values"]["array"] = "k05VTVBZAQB2AHsnZGVzY3InOiAnfE8nLCA="  # cut header
    full = outputs["short"]["values"]["array"]
    outputs["short"]["values"]["array"] = full[:len(full) - 8]  # npy data shorter than the header says
    outputs["torch"] = {"values": {"tensor": "UEsDBA==", "polygraphy_class": "Tensor"},
                        "polygraphy_class": "LazyArray"}
    path.write_text(json.dumps(doc))
    dump = open_golden(path)
    assert np.array_equal(present(dump.find_tensor("ok")).load(), ok)
    messages = {p.message.split(":")[0]: p.message for p in dump.problems}
    assert set(messages) == {"header", "short", "torch"}
    assert "truncated" in messages["short"] and "PyTorch" in messages["torch"]
    for name in ("header", "short", "torch"):
        assert present(dump.find_tensor(name)).problem


def test_object_arrays_are_refused_without_unpickling(tmp_path):
    import base64
    import io
    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    path = save(tmp_path / "r.json", {"r": [{"obj": np.ones(1)}]})
    text = path.read_text()
    start = text.index('"array": "') + len('"array": "')
    end = text.index('"', start)
    path.write_text(text[:start] + base64.b64encode(buf.getvalue()).decode() + text[end:])
    (t,) = open_golden(path).tensors
    assert "refusing to unpickle" in t.problem


# --- older versions' encodings ---------------------------------------------------------------------

def legacy(text: str) -> str:
    """Polygraphy's JSON as versions before the `polygraphy_class` marker wrote it."""
    return re.sub(r'"polygraphy_class": "(\w+)"', r'"__polygraphy_encoded_\1": "polygraphy_serialized_json_type"',
                  text.replace('"LazyArray"', '"LazyNumpyArray"'))


def test_legacy_markers_bare_latin1_and_npz_arrays(tmp_path):
    import base64
    import io
    a, b, c = sample(np.float32, (2, 3)), sample(np.int8, (4,)), sample(np.float16, (5,))
    path = save(tmp_path / "r.json", {"old-runner": [{"a": a, "b": b, "c": c}]})
    doc = json.loads(legacy(path.read_text()))
    outputs = doc["lst"][0][1][0]["outputs"]
    outputs["a"] = outputs["a"]["values"]  # an ndarray not wrapped in a LazyArray
    npy = io.BytesIO()
    np.save(npy, b)
    outputs["b"]["values"]["array"] = npy.getvalue().decode("latin-1")  # npy bytes as latin-1 text
    npz = io.BytesIO()
    np.savez(npz, c)
    outputs["c"]["values"]["array"] = base64.b64encode(npz.getvalue()).decode()  # an npz archive
    path.write_text(json.dumps(doc, indent=4))
    assert polygraphy.is_run_results(path)
    assert polygraphy.runners(path) == [("old-runner", 1)]
    dump = open_golden(path)
    assert not dump.problems
    for name, arr in (("a", a), ("b", b), ("c", c)):
        t = dump.find_tensor(name)
        assert t is not None
        assert (t.dtype, t.shape) == (arr.dtype, arr.shape) and np.array_equal(t.load(), arr), name


# --- detection and memory ------------------------------------------------------------------------

def test_detection_reads_head_and_tail(tmp_path):
    big = save(tmp_path / "big.json", {"r": [{"x": np.zeros(100_000, np.float32)}]})
    assert big.stat().st_size > 1 << 16 and detect(str(big)).kind == "polygraphy"
    marker_first = tmp_path / "first.json"
    marker_first.write_text(json.dumps({"polygraphy_class": "RunResults", "lst": []}))
    assert polygraphy.is_run_results(marker_first)
    for name, text in (("om.json", json.dumps({"graph": [{"op": [{"name": "RunResults"}] * 5000}]})),
                       ("meta.json", json.dumps({"polygraphy_class": "TensorMetadata"})),
                       ("empty.json", "")):
        (tmp_path / name).write_text(text)
        assert not polygraphy.is_run_results(tmp_path / name), name


MEMORY_PROBE = """
import sys
import tempfile
from accuscope.engine.sources import polygraphy

def status(field):  # VmHWM: this process's own peak (ru_maxrss would carry the parent's over fork + exec)
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(field + ":"))

base = status("VmRSS")
entries, _ = polygraphy.read(sys.argv[1])
total = sum(int(t.load().size) for t in entries)
print(total, status("VmHWM") - base)
"""


def test_streaming_keeps_memory_near_the_largest_tensor(tmp_path):
    """A ~180 MB file of 16 MB tensors is read with far less memory than its size (subprocess, peak RSS)."""
    path = save(tmp_path / "big.json", {"r": [{f"t{i}": np.full((4, 1 << 20), i, np.float32)
                                               for i in range(8)}]})
    size, largest = path.stat().st_size, 16 << 20
    probe = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(path)], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    total, grown = map(int, probe.stdout.split())
    assert total == 8 * 4 << 20
    assert grown < 2 * largest + 3 * polygraphy.CHUNK < size / 2, (grown, size)
