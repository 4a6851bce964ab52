"""LiteRT as a side of `dump` and `run`, through the real entry point, on .tflite models TensorFlow's own
converter wrote (tests/fixtures/litert/, make_fixtures.py): a Keras CNN as float32, as int8 (post-training
full-integer quantization, per-channel weights) and as float16. Each side's network output is held to
LiteRT's own interpreter (made as its users make it) bit for bit, every tensor to what LiteRT kept when
make_fixtures.py ran it, and the int8 tensors' dequantization to LiteRT's own DEQUANTIZE."""
from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.sources.names import read_mapping_csv
from support.cli import accuscope
from support.data import FIXTURES
from support.narrow import present

lite = pytest.importorskip("ai_edge_litert.interpreter",
                           reason="ai-edge-litert is not installed (pip install 'accuscope[litert]')")

HERE = FIXTURES / "litert"
FLOAT, INT8, FP16 = HERE / "cnn_float.tflite", HERE / "cnn_int8.tflite", HERE / "cnn_fp16.tflite"
AEQ = HERE / "cnn_aeq_int8.tflite"  # ai-edge-quantizer's static_wi8_ai8: its input int8 too
ONNX = HERE / "cnn_float.onnx"  # tf2onnx's conversion of cnn_float.tflite: the TFLite names, NCHW activations
INPUT = "serving_default_keras_tensor:0"
OUTPUT = "StatefulPartitionedCall_1:0"
TUI = str(Path(__file__).resolve().parents[2] / "tui")


@pytest.fixture(scope="module")
def recorded():
    with np.load(HERE / "litert_outputs.npz") as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def xfile(recorded, tmp_path_factory):
    path = tmp_path_factory.mktemp("litert") / "x.npy"
    np.save(path, recorded["x"])
    return path


def _rows(task: Path) -> list[dict]:
    r = accuscope("show", task, "--format", "csv", "--columns", "npu_op,type,tensor,golden_op,how,fail,reason")
    assert r.returncode == 0, r.stderr
    return list(csv.DictReader(io.StringIO(r.stdout)))


def _dump(task: Path, side: str) -> Path:
    return next((task / "dumps").iterdir()) / side


def _tensor(dump: Path, name: str) -> np.ndarray:
    """A tensor of a dump, found by its tensor name through the dump's own model (model.tflite)."""
    from accuscope.engine.sides.registry import open_side
    found = open_side(dump).find_tensor(name)
    assert found is not None, name
    return found.load()


def _own_output(model: Path, x: np.ndarray) -> np.ndarray:
    """The network output as LiteRT computes it, on an interpreter made as its users make it."""
    it = lite.Interpreter(model_path=str(model))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def test_int8_against_float_pairs_by_tensor_name(recorded, xfile, tmp_path):
    from accuscope.engine.graphs.tflitegraph import read_tflite
    r = accuscope("run", FLOAT, INT8, "--input", f"{INPUT}={xfile}", "--out", tmp_path / "t", "--json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert doc["coverage"]["outputs_paired"] == doc["coverage"]["outputs_total"] == 1
    rows = _rows(tmp_path / "t")
    by = Counter(row["how"] for row in rows if ":output:" in row["tensor"])
    assert by["tensor"] >= 10  # every op output the quantizer kept the name of: paired by that name
    quantize = next(row for row in rows if row["tensor"] == "QUANTIZE_0:output:0")
    assert quantize["golden_op"] == "*"  # the input put on the int8 grid: the conversion's own, never unpaired
    assert not [row for row in rows if row["reason"].startswith("no golden tensor")]
    x = recorded["x"]
    npu, golden = _dump(tmp_path / "t", "npu"), _dump(tmp_path / "t", "golden")
    # each side's network output is LiteRT's own, bit for bit, and what make_fixtures.py recorded
    for dump, model, side in ((golden, FLOAT, "float"), (npu, INT8, "int8")):
        dumped = _tensor(dump, OUTPUT)
        assert np.array_equal(dumped, _own_output(model, x))
        np.testing.assert_allclose(dumped, recorded[f"{side}:output"], rtol=1e-5, atol=1e-6)
    # every int8 activation read on its own grid: the values LiteRT kept, (q - zero point) * scale
    meta = json.loads((npu / "dump.json").read_text())
    assert meta["runtime"] == "litert" and meta["instrumented_output_difference"] == 0.0
    grids = {t.name: t.quantization for t in read_tflite(INT8).tensors}
    quantized = meta["quantized"]
    assert len(quantized) >= 9 and {q["dtype"] for q in quantized.values()} == {"int8"}
    for name, q in quantized.items():
        assert q["scale"] == list(present(grids[name]).scale) and q["zero_point"] == list(present(grids[name]).zero_point)
        kept = recorded[f"int8/{name}"]
        assert kept.dtype == np.int8
        assert np.array_equal(_tensor(npu, name), present(grids[name]).dequantize(kept))
    # ... the same grid LiteRT's own DEQUANTIZE reads the softmax on: its output, bit for bit
    softmax = next(name for name in quantized if name.startswith(OUTPUT))  # the int8 softmax, `{OUTPUT}1`
    assert np.array_equal(_tensor(npu, softmax), _own_output(INT8, x))
    # the verdict is what the network output row's metrics say (the untrained CNN's near-uniform softmax,
    # int8 in steps of 1/256: its KL divergence 0.0056 breaks the 0.005 threshold)
    out = next(row for row in rows if row["tensor"] == "DEQUANTIZE_0:output:0")
    assert out["golden_op"] == "SOFTMAX_0"
    assert doc["judgement"]["outcome"] == ("fail" if out["fail"] == "True" else "pass") == "fail"


def test_ai_edge_quantizer_int8_input_takes_the_float_input(recorded, xfile, tmp_path):
    """The float input is put on the int8 input's grid as LiteRT's QUANTIZE puts it (the TFLiteConverter
    model's QUANTIZE output, which LiteRT kept, is the same integers), the candidate's output is then LiteRT's
    own on those integers, and the input row compares the values the model read with the float ones."""
    from accuscope.engine.graphs.tflitegraph import read_tflite
    x = recorded["x"]
    converter_grid = next(t.quantization for t in read_tflite(INT8).tensors if t.name == "tfl.quantize")
    assert converter_grid is not None
    assert np.array_equal(converter_grid.quantize(x, np.dtype(np.int8)), recorded["int8/tfl.quantize"])
    r = accuscope("run", FLOAT, AEQ, "--input", f"{INPUT}={xfile}", "--out", tmp_path / "t", "--json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert doc["coverage"]["outputs_paired"] == doc["coverage"]["outputs_total"] == 1
    npu = _dump(tmp_path / "t", "npu")
    grids = {t.name: t.quantization for t in read_tflite(AEQ).tensors}
    grid, out = grids[INPUT], grids[OUTPUT]  # its output is int8 too: read on its grid
    assert grid is not None
    q = grid.quantize(x, np.dtype(np.int8))
    assert json.loads((npu / "dump.json").read_text())["quantized"][INPUT]["input"] == "real values put on its grid"
    assert np.array_equal(_tensor(npu, INPUT), grid.dequantize(q))
    assert out is not None
    assert np.array_equal(_tensor(npu, OUTPUT), out.dequantize(_own_output(AEQ, q)))
    rows = {row["tensor"]: row for row in _rows(tmp_path / "t")}
    assert rows[f"{INPUT}:output:0"]["fail"] == "False"  # the input on an int8 grid: near the float input
    # integers given are taken as on the grid already: the same run
    np.save(tmp_path / "q.npy", q)
    r = accuscope("dump", AEQ, "--input", f"{INPUT}={tmp_path / 'q.npy'}", "--out", tmp_path / "d")
    assert r.returncode == 0, r.stderr
    assert np.array_equal(_tensor(tmp_path / "d", OUTPUT), out.dequantize(_own_output(AEQ, q)))
    assert json.loads((tmp_path / "d" / "dump.json").read_text())["quantized"][INPUT]["input"] == "given on its grid"


def test_against_the_onnx_model_names_survive_and_layouts_are_reconciled(xfile, tmp_path):
    """The ONNX model (onnxruntime) against the .tflite (LiteRT): tf2onnx kept the tensor names, so they pair by
    name; its activations are NCHW where TFLite's are NHWC, and each 4-D pair is compared in the ONNX order
    (compared flat, CONV_2D_1's output had cos 0.097)."""
    pytest.importorskip("onnxruntime")
    r = accuscope("run", ONNX, FLOAT, "--input", f"{INPUT}={xfile}", "--out", tmp_path / "t", "--json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert doc["coverage"]["outputs_paired"] == doc["coverage"]["outputs_total"] == 1
    assert doc["judgement"]["outcome"] == "pass"
    r = accuscope("show", tmp_path / "t", "--format", "csv", "--columns", "tensor,golden_op,how,cos")
    rows = {row["tensor"]: row for row in csv.DictReader(io.StringIO(r.stdout))}
    for tensor in ("CONV_2D_1:output:0", "ADD_0:output:0", "AVERAGE_POOL_2D_0:output:0"):  # 4-D, by name
        assert rows[tensor]["how"] == "tensor" and float(rows[tensor]["cos"]) > 0.99999, rows[tensor]
    # tf2onnx split CONV_2D's fused ReLU out again: the pairing re-pairs its output to the ReLU's
    assert rows["CONV_2D_0:output:0"]["how"].startswith("fused") and float(rows["CONV_2D_0:output:0"]["cos"]) > 0.99999
    assert float(rows["SOFTMAX_0:output:0"]["cos"]) > 0.99999


def test_fp16_against_float_passes(recorded, xfile, tmp_path):
    r = accuscope("run", FLOAT, FP16, "--input", f"{INPUT}={xfile}", "--out", tmp_path / "t", "--fail-on-error")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verdict ✓ pass" in r.stdout
    npu = _dump(tmp_path / "t", "npu")
    assert np.array_equal(_tensor(npu, OUTPUT), _own_output(FP16, recorded["x"]))
    # the fp16 weights' DEQUANTIZE ops compute weights: none of them was dumped or compared
    assert not [row for row in _rows(tmp_path / "t") if row["type"] == "DEQUANTIZE"]
    assert json.loads((npu / "dump.json").read_text())["quantized"] == {}


def test_per_axis_weights_read_on_their_grid(recorded):
    """The int8 model's weights are quantized per output channel (conv: axis 0, depthwise: axis 3): read on
    their grid, each is the float model's weight within half a step of its own channel's scale."""
    from accuscope.engine.graphs.tflitegraph import read_tflite
    grids = {t.name: t.quantization for t in read_tflite(INT8).tensors}
    axes = {}
    for name in ("functional_1/conv2d_1/convolution", "functional_1/depthwise_conv2d_1/depthwise"):
        grid = grids[name]
        assert grid is not None and grid.axis is not None and len(grid.scale) == 8
        axes[name] = grid.axis
        q, want = recorded[f"int8/{name}"], recorded[f"float/{name}"]
        got = grid.dequantize(q)
        step = np.asarray(grid.scale).reshape([8 if k == grid.axis else 1 for k in range(q.ndim)])
        assert np.all(np.abs(got - want) <= step / 2 * (1 + 1e-5))
        assert np.abs(got - want).max() > 0  # really quantized
    assert axes == {"functional_1/conv2d_1/convolution": 0, "functional_1/depthwise_conv2d_1/depthwise": 3}


def test_dump_and_inspect_a_tflite(xfile, tmp_path):
    r = accuscope("dump", INT8, "--out", tmp_path / "d", "--input", f"{INPUT}={xfile}")
    assert r.returncode == 0, r.stderr
    assert "wrote 14 tensors" in r.stdout
    names = {p.name.rsplit(".", 2)[0] for p in (tmp_path / "d").glob("*.npy")}
    assert {"serving_default_keras_tensor_0.0", "QUANTIZE_0.0", "CONV_2D_1.0", "SOFTMAX_0.0", "DEQUANTIZE_0.0"} <= names
    (restored,) = read_mapping_csv(str(tmp_path / "d")).values()  # the input's name: `:` is no file name's on Windows
    assert restored.startswith(f"{INPUT}.0.")
    assert (tmp_path / "d" / "model.tflite").read_bytes() == INT8.read_bytes()
    r = accuscope("inspect", INT8)
    assert r.returncode == 0, r.stderr
    assert "TFLITE model" in r.stdout and "QUANTIZE" in r.stdout
    assert "9 quantized activations (int8)" in r.stdout and "per-axis" in r.stdout
    r = accuscope("inspect", tmp_path / "d")  # the dump says what ran it and which tensors were on a grid
    assert r.returncode == 0 and "DEQUANTIZE_0" in r.stdout
    assert "ran on   litert 2.3" in r.stdout and "quantized 9 tensors (int8 9)" in r.stdout


def test_refusals_exit_2(xfile, tmp_path):
    r = accuscope("dump", INT8, "--out", tmp_path / "d", "--input", f"{INPUT}={xfile}", "--runtime", "onnxruntime")
    assert r.returncode == 2 and "a .tflite model runs on litert, not onnxruntime" in r.stderr
    r = accuscope("dump", INT8, "--out", tmp_path / "d", "--input", f"{INPUT}={xfile}", "--ov-precision", "bf16")
    assert r.returncode == 2 and "--ov-precision is OpenVINO's" in r.stderr
    r = accuscope("dump", INT8, "--out", tmp_path / "d", "--include-constants", "--random-inputs")
    assert r.returncode == 2 and "LiteRT's weights are not dumped" in r.stderr
    broken = tmp_path / "broken.tflite"
    broken.write_bytes(INT8.read_bytes()[:600])
    for command in (("inspect", broken), ("dump", broken, "--out", tmp_path / "b", "--random-inputs")):
        r = accuscope(*command)
        assert r.returncode == 2, r.stderr
        assert f"{broken}: not a TFLite model (truncated or corrupt" in r.stderr and "Traceback" not in r.stderr


def test_without_litert_exit_2_names_the_install(tmp_path):
    """ai_edge_litert unimportable (a package of that name that raises ImportError first on the path)."""
    fake = tmp_path / "site" / "ai_edge_litert"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('ai_edge_litert hidden by the test')\n")
    path = f"{tmp_path / 'site'}:{TUI}"
    r = accuscope("dump", INT8, "--out", tmp_path / "d", "--random-inputs", PYTHONPATH=path)
    assert r.returncode == 2, r.stderr
    assert "pip install 'accuscope[litert]'" in r.stderr and "Traceback" not in r.stderr
    r = accuscope("inspect", INT8, PYTHONPATH=path)
    assert r.returncode == 0 and "DEQUANTIZE" in r.stdout  # the model's graph is read without LiteRT
