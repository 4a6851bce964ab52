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
    # and so is the next op's input, the same value (it paired by name with the Conv's output before the ReLU:
    # cos 0.70, and DEPTHWISE_CONV_2D_0's ReLU6 likewise: 0.47)
    for tensor in ("DEPTHWISE_CONV_2D_0:input:0", "ADD_0:input:0", "CONV_2D_1:input:0"):
        assert rows[tensor]["how"].startswith("fused") and float(rows[tensor]["cos"]) > 0.99999, rows[tensor]
    assert not [row for row in rows.values() if row["cos"] and float(row["cos"]) < 0.99999]
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


KERAS_ONNX = HERE / "cnn_keras.onnx"  # tf2onnx from the Keras model itself (make_structure.py): no TFLite name
FAULT = HERE / "cnn_fault.tflite"  # the same model with a quarter of the 1x1 Conv2D's kernel x -3: CONV_2D_1


def _structure_run(tmp_path: Path, reference: Path, candidate: Path, *more) -> tuple[int, dict, dict]:
    """`run REF CAND --random-inputs --match structure --json` (the same seed: the same input on both sides,
    named differently by each converter): exit code, the JSON, and the rows by NPU tensor."""
    pytest.importorskip("onnxruntime")
    r = accuscope("run", reference, candidate, "--random-inputs", "--match", "structure", "--out", tmp_path / "t",
                  "--json", *more)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout), {row["tensor"]: row for row in _rows_with_cos(tmp_path / "t")}


def _rows_with_cos(task: Path) -> list[dict]:
    r = accuscope("show", task, "--format", "csv", "--columns", "tensor,golden_op,how,cos,fail,reason")
    assert r.returncode == 0, r.stderr
    return list(csv.DictReader(io.StringIO(r.stdout)))


def test_no_name_survives_and_structure_pairs_the_graphs(tmp_path):
    """tf2onnx's ONNX of the Keras model against the TFLite converter's .tflite of it: not one tensor name in
    common, so names pair nothing (exit 2, the message pointing at --match structure); the structural walk pairs
    8 of the 11 TFLite ops by their outputs (the 3 left compute the Flatten's shape), each with the ONNX op that
    computes it (the fused ReLU / ReLU6 with the ONNX Relu / Clip, the next op's input with it too), every pair
    at cos 1 (the layouts moved: the ONNX side is NCHW between its Transposes)."""
    pytest.importorskip("onnxruntime")
    r = accuscope("run", KERAS_ONNX, FLOAT, "--random-inputs", "--out", tmp_path / "names")
    assert r.returncode == 2 and "nothing was paired" in r.stderr and "--match structure" in r.stderr, r.stderr
    code, doc, rows = _structure_run(tmp_path, KERAS_ONNX, FLOAT)
    assert doc["judgement"]["outcome"] == "pass" and code == 0
    assert doc["coverage"]["outputs_paired"] == doc["coverage"]["outputs_total"] == 1
    pairing = doc["pairing"]
    assert pairing["rungs"] == {"structure": 19}
    assert pairing["structure"] == {"ops_paired": 8, "ops": 11, "op_pairs": 9, "fused": 2, "by_values": 0,
                                    "by_order": 0, "not_taken": []}
    assert pairing["sides"] == {"npu": {"fused N:1": 0, "absorbed 1:0": 2, "no counterpart": 0},
                                "golden": {"fused N:1": 2, "absorbed 1:0": 2, "no counterpart": 0}}
    expected = {
        "CONV_2D_0:output:0": "functional_1/conv2d_1/Relu",  # RELU fused: the ONNX Relu's output
        "DEPTHWISE_CONV_2D_0:input:0": "functional_1/conv2d_1/Relu",
        "DEPTHWISE_CONV_2D_0:output:0": "functional_1/depthwise_conv2d_1/Relu6",  # RELU6: the Clip's
        "CONV_2D_1:output:0": "functional_1/conv2d_1_2/convolution",
        "ADD_0:input:0": "functional_1/conv2d_1/Relu", "ADD_0:input:1": "functional_1/conv2d_1_2/convolution",
        "ADD_0:output:0": "functional_1/add_1/Add",
        "AVERAGE_POOL_2D_0:output:0": "functional_1/average_pooling2d_1/AvgPool",
        "RESHAPE_0:output:0": "functional_1/flatten_1/Reshape",  # after the ONNX Transpose back to NHWC
        "FULLY_CONNECTED_0:output:0": "functional_1/dense_1/MatMul", "SOFTMAX_0:output:0": "functional_1/softmax_1/Softmax",
    }
    for tensor, golden in expected.items():
        row = rows[tensor]
        assert (row["golden_op"], row["how"]) == (golden, "structure") and float(row["cos"]) > 0.99999, row
    assert {k for k, row in rows.items() if row["how"] == "structure"} >= set(expected)
    left = {k: row["reason"] for k, row in rows.items() if not row["how"]}
    assert left["PACK_0:output:0"].startswith("absorbed 1:0: PACK PACK_0 computes a shape")
    unused = dict(doc["coverage"]["golden_unused"])
    assert unused["functional_1/conv2d_1/convolution:output:0"].startswith("fused N:1")  # its Relu: CONV_2D_0
    assert unused["functional_1/conv2d_1/convolution__6:output:0"].startswith("absorbed 1:0")  # NHWC -> NCHW


def test_structure_the_other_way_the_onnx_conv_is_fused(tmp_path):
    """The .tflite as the reference: the ONNX Conv before each Relu is `fused N:1 (2:1 NPU:golden)`, its Relu's
    output pairs with the CONV_2D's, and the ONNX Transposes' outputs with the NHWC tensors they move."""
    code, doc, rows = _structure_run(tmp_path, FLOAT, KERAS_ONNX)
    assert code == 0 and doc["coverage"]["outputs_paired"] == 1
    assert rows["functional_1/conv2d_1/Relu:output:0"]["golden_op"] == "CONV_2D_0"
    assert rows["functional_1/conv2d_1/convolution:output:0"]["reason"].startswith("fused N:1 (2:1 NPU:golden)")
    assert rows["functional_1/average_pooling2d_1/AvgPool__18:output:0"]["golden_op"] == "AVERAGE_POOL_2D_0"
    assert doc["pairing"]["sides"]["npu"]["fused N:1"] == 2
    assert all(float(row["cos"]) > 0.99999 for row in rows.values() if row["cos"])


def test_structure_finds_a_fault_planted_in_the_tflite(tmp_path):
    """The fault planted in the 1x1 Conv2D's kernel before converting (cnn_fault.tflite): the op pairs by
    structure alone (one candidate, no value read to choose), and the first failing row is that op's output;
    every row before it agrees."""
    code, doc, rows = _structure_run(tmp_path, KERAS_ONNX, FAULT)
    assert doc["first_failing"]["tensor"] == "CONV_2D_1:output:0", doc["first_failing"]
    assert rows["CONV_2D_1:output:0"]["golden_op"] == "functional_1/conv2d_1_2/convolution"
    assert float(rows["CONV_2D_1:output:0"]["cos"]) < 0.99
    for tensor in ("CONV_2D_0:output:0", "DEPTHWISE_CONV_2D_0:output:0", "CONV_2D_1:input:0"):
        assert float(rows[tensor]["cos"]) > 0.99999, rows[tensor]
    assert doc["pairing"]["structure"]["ops_paired"] == 8


def test_structure_pairs_the_int8_tflite_through_its_quantize_and_dequantize(tmp_path):
    """The int8 .tflite against the Keras model's ONNX: its activations are int8 with a grid (not shapes), its
    QUANTIZE and DEQUANTIZE are walked through, and the closing DEQUANTIZE's output is the network output
    compared with the ONNX Softmax's (10 of the 13 ops paired by their outputs: the 3 others compute a shape)."""
    _, doc, rows = _structure_run(tmp_path, KERAS_ONNX, INT8)
    assert doc["pairing"]["structure"]["ops_paired"] == 10 and doc["pairing"]["structure"]["ops"] == 13
    assert doc["coverage"]["outputs_paired"] == doc["coverage"]["outputs_total"] == 1
    assert rows["DEQUANTIZE_0:output:0"]["golden_op"] == "functional_1/softmax_1/Softmax"
    assert rows["CONV_2D_1:output:0"]["golden_op"] == "functional_1/conv2d_1_2/convolution"
    assert float(rows["FULLY_CONNECTED_0:output:0"]["cos"]) > 0.99


def test_structure_needs_both_models(tmp_path):
    """A side without its model (a folder of npy files) has no graph to walk: exit 2, naming the side."""
    code, _, _ = _structure_run(tmp_path, KERAS_ONNX, FLOAT)
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in _dump(tmp_path / "t", "npu").glob("*.npy"):
        (bare / f.name).write_bytes(f.read_bytes())
    r = accuscope("compare", "--npu", bare, "--golden", _dump(tmp_path / "t", "golden"), "--match", "structure",
                  "--out", tmp_path / "c")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"or two sides that carry their models (ONNX, LiteRT, OpenVINO dumps); {bare} is a npy source without a " \
           "model" in r.stderr


ONNX2TF = HERE / "cls_onnx2tf_fp16.tflite"  # PP-OCR cls by onnx2tf 1.28.8 (make_onnx2tf.py): no ONNX name kept


def test_structure_pairs_pp_ocr_cls_against_its_onnx2tf_conversion(cls_model, tmp_path):
    """The ONNX source (PaddleOCR's cls model) against its .tflite by onnx2tf, each dumped on its own input (NCHW;
    the same values NHWC for the .tflite's input): 100 of the 113 TFLite ops pair, every row agrees, and nothing is
    left without a name. onnx2tf's HARD_SWISH pairs with the ONNX Div that ends Add, Clip, Mul, Div (found by
    its values), its BatchNormalizations are folded (CONV_2D_0 pairs with the ONNX BatchNormalization), and the 13
    convolutions holding a HardSigmoid's scale and shift are fused N:1, their RELU_0_TO_1 paired with HardSigmoid."""
    pytest.importorskip("onnxruntime")
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)
    np.save(tmp_path / "nchw.npy", x)
    np.save(tmp_path / "nhwc.npy", x.transpose(0, 2, 3, 1).copy())
    for model, out, xfile in ((cls_model, "golden", "nchw.npy"), (ONNX2TF, "npu", "nhwc.npy")):
        r = accuscope("dump", model, "--out", tmp_path / out, "--input", f"x={tmp_path / xfile}")
        assert r.returncode == 0, r.stderr
    r = accuscope("compare", "--npu", tmp_path / "npu", "--golden", tmp_path / "golden", "--match", "structure",
                  "--out", tmp_path / "t", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    walked = doc["pairing"]["structure"]
    assert (walked["ops_paired"], walked["ops"]) == (100, 113) and doc["failing"] == 0
    assert doc["pairing"]["leftovers"]["no counterpart"] == 0 and doc["pairing"]["sides"]["npu"]["fused N:1"] == 13
    assert doc["coverage"]["outputs_paired"] == 1
    rows = {row["tensor"]: row for row in _rows_with_cos(tmp_path / "t")}
    for tensor, golden in (("CONV_2D_0:output:0", "BatchNormalization@0"), ("HARD_SWISH_0:output:0", "Div@0"),
                           ("RELU_0_TO_1_0:output:0", "HardSigmoid@0"), ("SOFTMAX_0:output:0", "Softmax@0")):
        assert (rows[tensor]["golden_op"], rows[tensor]["how"]) == (golden, "structure"), rows[tensor]
        assert float(rows[tensor]["cos"]) > 0.9999, rows[tensor]
    assert rows["CONV_2D_4:output:0"]["reason"].startswith("fused N:1 (2:1 NPU:golden)")


def _run_cls_against_onnx2tf(cls_model, tmp_path: Path, task: str, *inputs: str) -> dict[str, dict]:
    """`accuscope run` of the ONNX cls model against its onnx2tf .tflite (NHWC input): its rows by tensor."""
    r = accuscope("run", cls_model, ONNX2TF, *inputs, "--match", "structure", "--out", tmp_path / task, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["failing"] == 0
    return {row["tensor"]: row for row in _rows_with_cos(tmp_path / task)}


def test_run_feeds_one_random_input_to_both_layouts(cls_model, tmp_path):
    """`run --random-inputs` draws the input once, in the reference's layout (NCHW, its dynamic H and W sized by
    the .tflite's fixed input), and feeds the .tflite the same values moved to NHWC: the first conv agrees and
    the verdict passes (each side drew its own tensor before, and every row differed); dump.json says so."""
    pytest.importorskip("onnxruntime")
    rows = _run_cls_against_onnx2tf(cls_model, tmp_path, "t", "--random-inputs")
    assert float(rows["CONV_2D_0:output:0"]["cos"]) > 0.999, rows["CONV_2D_0:output:0"]
    dumps = next((tmp_path / "t" / "dumps").iterdir())
    golden = json.loads((dumps / "golden" / "dump.json").read_text())["inputs"]["x"]
    npu = json.loads((dumps / "npu" / "dump.json").read_text())["inputs"]["x"]
    assert (golden["shape"], golden["origin"]) == ([1, 3, 48, 192], "random")
    assert (npu["shape"], npu["origin"]) == ([1, 48, 192, 3], "random, NCHW->NHWC")
    onnx_x, tflite_x = (np.load(next((dumps / d).glob("x.0.*.npy"))) for d in ("golden", "npu"))
    assert np.array_equal(tflite_x.transpose(0, 3, 1, 2), onnx_x)


def test_run_takes_one_input_file_in_either_layout(cls_model, tmp_path):
    """`run --input x=FILE` feeds the file to both sides whichever layout it is in (NCHW, the reference's, or NHWC,
    the .tflite's): the rows are the same both ways."""
    pytest.importorskip("onnxruntime")
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)
    np.save(tmp_path / "nchw.npy", x)
    np.save(tmp_path / "nhwc.npy", x.transpose(0, 2, 3, 1).copy())
    results = [_run_cls_against_onnx2tf(cls_model, tmp_path, f"t{k}", "--input", f"x={tmp_path / f}")
               for k, f in enumerate(("nchw.npy", "nhwc.npy"))]
    assert float(results[0]["CONV_2D_0:output:0"]["cos"]) > 0.999
    assert {k: v["cos"] for k, v in results[0].items()} == {k: v["cos"] for k, v in results[1].items()}


def test_run_refuses_an_input_no_layout_makes_fit(cls_model, tmp_path):
    """An input file whose shape is neither the reference's nor its other layout: exit 2 naming both shapes."""
    pytest.importorskip("onnxruntime")
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 40, 100), np.float32))
    r = accuscope("run", cls_model, ONNX2TF, "--input", f"x={tmp_path / 'x.npy'}", "--out", tmp_path / "t")
    assert r.returncode == 2, r.stderr
    assert "(1, 48, 192, 3)" in r.stderr and "(1, 3, 40, 100)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
