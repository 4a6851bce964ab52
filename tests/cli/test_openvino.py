"""OpenVINO as a side of `dump` and `run`, through the real entry point, on IRs OpenVINO itself wrote:
PP-OCR cls quantized by NNCF (tests/fixtures/openvino/, make_fixtures.py) and its fp32 / fp16 IRs made here
by `ov.convert_model` + `ov.save_model`. The reference side is held to onnxruntime's own outputs and the
OpenVINO side's network output to OpenVINO's `compiled_model(inputs)`, bit for bit."""
from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from support.cli import accuscope
from support.data import FIXTURES

ov = pytest.importorskip("openvino", reason="openvino is not installed (pip install 'accuscope[openvino]')")

INT8 = FIXTURES / "openvino" / "cls_int8.xml"
OUTPUT = "save_infer_model/scale_0.tmp_1"
FOLDED = "fused: BatchNormalization folded into Conv by OpenVINO"


@pytest.fixture(scope="module")
def irs(cls_model, tmp_path_factory):
    """(folder, input file, input): the fp32 and fp16 IRs of cls (dynamic input shape, as converted)."""
    root = tmp_path_factory.mktemp("openvino")
    ov.save_model(ov.convert_model(str(cls_model)), str(root / "cls_fp32.xml"), compress_to_fp16=False)
    ov.save_model(ov.convert_model(str(cls_model)), str(root / "cls_fp16.xml"))
    x = np.random.default_rng(7).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)
    np.save(root / "x.npy", x)
    return root, root / "x.npy", x


def _rows(task: Path) -> list[dict]:
    r = accuscope("show", task, "--format", "csv", "--columns", "npu_op,type,tensor,golden_op,how,fail,reason")
    assert r.returncode == 0, r.stderr
    return list(csv.DictReader(io.StringIO(r.stdout)))


def _dump(task: Path, side: str) -> Path:
    return next((task / "dumps").iterdir()) / side


def _output(dump: Path) -> np.ndarray:
    """The network output of a dump, found by its tensor name through the dump's own model."""
    from accuscope.engine.sides.registry import open_side
    found = open_side(dump).find_tensor(OUTPUT)
    assert found is not None
    return found.load()


def _own_output(model: Path, x: np.ndarray) -> np.ndarray:
    """The network output as OpenVINO computes it itself (f32, as the dump runs by default)."""
    compiled = ov.Core().compile_model(str(model), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled({0: x})[0]


def test_int8_ir_against_onnx_pairs_by_tensor_name(cls_model, irs, tmp_path):
    _, xfile, x = irs
    r = accuscope("run", cls_model, INT8, "--input", f"x={xfile}", "--out", tmp_path / "t", "--json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    rows = _rows(tmp_path / "t")
    by = Counter((row["how"], row["tensor"].split(":")[1]) for row in rows)
    # the ONNX value names the IR kept (146 of the 147 OpenVINO names; 10 on a convolution a BN folded into)
    assert by[("tensor", "output")] + by[(FOLDED, "output")] >= 140
    assert doc["coverage"]["outputs_paired"] == doc["coverage"]["outputs_total"] == 1
    fq = [row for row in rows if row["type"] == "FakeQuantize"]
    assert len(fq) == 160 and all(row["golden_op"] == "*" for row in fq)  # NNCF's own: never unpaired
    # the reference side is onnxruntime's run (optimization off, as `run` dumps), value for value
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(cls_model), options, providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    assert np.array_equal(_output(_dump(tmp_path / "t", "golden")), want)
    # the OpenVINO side's network output is OpenVINO's own, bit for bit
    assert np.array_equal(_output(_dump(tmp_path / "t", "npu")), _own_output(INT8, x))
    # the verdict is what the output row's metrics say, and the exit code says it too (--json: exit 0 or 1)
    out = next(row for row in rows if row["tensor"] == f"{OUTPUT}:output:0")
    assert doc["judgement"]["outcome"] == ("fail" if out["fail"] == "True" else "pass")


@pytest.mark.parametrize("ir", ["cls_fp32.xml", "cls_fp16.xml"])
def test_float_ir_against_onnx_passes(cls_model, irs, tmp_path, ir):
    root, xfile, x = irs
    r = accuscope("run", cls_model, root / ir, "--input", f"x={xfile}", "--out", tmp_path / "t", "--fail-on-error")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verdict ✓ pass" in r.stdout
    assert np.array_equal(_output(_dump(tmp_path / "t", "npu")), _own_output(root / ir, x))
    dumped = json.loads((_dump(tmp_path / "t", "npu") / "dump.json").read_text())
    assert dumped["runtime"] == "openvino" and dumped["precision"] == "f32"
    # the fp16 IR's weight decompression (Const -> Convert) is weights: no Convert was dumped
    assert not [row for row in _rows(tmp_path / "t") if row["type"] == "Convert"]


def test_batchnorm_folded_into_conv_is_paired_by_value(cls_model, irs, tmp_path):
    """ov.convert_model folds each Conv -> BatchNormalization into a convolution scaled by the BN and an Add
    named as the BN: the convolution's output is the reference Conv's output times the BN's scale, paired
    so (compare/folds.py), where by identity 46 of its rows failed at cos 0.79-0.996 (the fp32 IR is exact)."""
    root, xfile, _ = irs
    r = accuscope("run", cls_model, root / "cls_fp32.xml", "--input", f"x={xfile}", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "failing 0" in r.stdout
    rows = _rows(tmp_path / "t")
    folded = [row for row in rows if row["how"] == FOLDED]
    assert len(folded) == 2 * 35  # the convolution's output and the Add's input 0, for each of cls's 35 BNs
    assert {row["type"] for row in folded} == {"Convolution", "GroupConvolution", "Add"}
    assert all(row["golden_op"].startswith("Conv@") and row["fail"] == "False" for row in folded)


def test_batchnorm_folded_against_the_onnx_model_on_openvino(cls_model, irs, tmp_path):
    """`--reference-runtime openvino`: the reference is the ONNX model as OpenVINO reads it, its BNs kept as
    BatchNormInference (their parameters Const layers in the dump's model.bin): the same folds, by value."""
    root, xfile, _ = irs
    r = accuscope("run", cls_model, root / "cls_fp32.xml", "--reference-runtime", "openvino", "--input", f"x={xfile}",
                  "--out", tmp_path / "t")
    assert r.returncode == 0 and "failing 0" in r.stdout, r.stdout + r.stderr
    assert len([row for row in _rows(tmp_path / "t") if row["how"] == FOLDED]) == 2 * 35


def test_a_fault_in_a_folded_conv_fails_at_that_conv(cls_model, tmp_path):
    """A quarter of Conv@10's weights (a depthwise conv with a BN after it) scaled by -3 in the ONNX model, then
    converted: the first failing row is the IR's convolution paired with Conv@10 (by identity it was
    BatchNormalization@0's Add, the first of the folds)."""
    import onnx
    from onnx import numpy_helper

    from accuscope.engine.runs.onnxedit import constants_as_initializers
    m = constants_as_initializers(onnx.load(str(cls_model)))
    weight = next(n for n in m.graph.node if n.name == "Conv@10").input[1]
    init = next(t for t in m.graph.initializer if t.name == weight)
    w = numpy_helper.to_array(init).copy()
    w.reshape(-1)[:w.size // 4] *= -3
    init.CopyFrom(numpy_helper.from_array(w, weight))
    onnx.save(m, str(tmp_path / "bad.onnx"))
    ov.save_model(ov.convert_model(str(tmp_path / "bad.onnx")), str(tmp_path / "bad.xml"), compress_to_fp16=False)
    r = accuscope("run", cls_model, tmp_path / "bad.xml", "--random-inputs", "--out", tmp_path / "t")
    assert r.returncode == 0 and "verdict ✗ fail" in r.stdout, r.stdout + r.stderr
    first = next(row for row in _rows(tmp_path / "t") if row["fail"] == "True")
    assert (first["type"], first["golden_op"], first["how"]) == ("GroupConvolution", "Conv@10", FOLDED)


def test_onnx_on_openvino_as_the_reference_side(cls_model, irs, tmp_path):
    """`--reference-runtime openvino`: the ONNX file run by OpenVINO, the same model on onnxruntime the candidate."""
    _, xfile, _ = irs
    r = accuscope("run", cls_model, cls_model, "--reference-runtime", "openvino", "--input", f"x={xfile}",
                  "--out", tmp_path / "t", "--fail-on-error")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (_dump(tmp_path / "t", "golden") / "model.xml").is_file()


def test_dump_ir_writes_every_op_output(irs, tmp_path):
    _, xfile, _ = irs
    r = accuscope("dump", INT8, "--out", tmp_path / "d", "--input", f"x={xfile}")
    assert r.returncode == 0, r.stderr
    names = {p.name.split(".")[0] for p in (tmp_path / "d").glob("*.npy")}
    assert {"x", "x_fq_output_0", "BatchNormalization@0", "save_infer_model_scale_0_tmp_1"} <= names
    assert (tmp_path / "d" / "model.xml").is_file() and (tmp_path / "d" / "model.bin").is_file()
    assert not [p for p in (tmp_path / "d").glob("Convert*.npy")]  # int8 weights' decompression: weights


def test_an_ir_on_onnxruntime_or_onnx_options_are_refused(irs, tmp_path):
    _, xfile, _ = irs
    r = accuscope("dump", INT8, "--out", tmp_path / "d", "--input", f"x={xfile}", "--runtime", "onnxruntime")
    assert r.returncode == 2 and "runs on openvino" in r.stderr
    r = accuscope("dump", INT8, "--out", tmp_path / "d", "--input", f"x={xfile}", "--ort-optimization", "all")
    assert r.returncode == 2 and "--ort-optimization is onnxruntime's" in r.stderr


def test_without_openvino_exit_2_names_the_install(tmp_path):
    """openvino unimportable (a package of that name that raises ImportError first on the path)."""
    fake = tmp_path / "site" / "openvino"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('openvino hidden by the test')\n")
    r = accuscope("dump", INT8, "--out", tmp_path / "d", "--random-inputs",
                  PYTHONPATH=f"{tmp_path / 'site'}:{Path(__file__).resolve().parents[2] / 'tui'}")
    assert r.returncode == 2, r.stderr
    assert "pip install 'accuscope[openvino]'" in r.stderr and "Traceback" not in r.stderr
    r = accuscope("inspect", INT8, PYTHONPATH=f"{tmp_path / 'site'}:{Path(__file__).resolve().parents[2] / 'tui'}")
    assert r.returncode == 0 and "FakeQuantize" in r.stdout  # the IR's graph is read without OpenVINO


def test_a_damaged_ir_is_refused_in_openvinos_own_words(tmp_path):
    """A .bin shorter than the Const offsets say: OpenVINO's message, not the source line it was raised at; an
    input too large for random data: a clear refusal, not a MemoryError (tests/fuzz/corpus.py: the IR class)."""
    (tmp_path / "cut.xml").write_bytes(INT8.read_bytes())
    (tmp_path / "cut.bin").write_bytes(INT8.with_suffix(".bin").read_bytes()[:1000])
    r = accuscope("dump", tmp_path / "cut.xml", "--out", tmp_path / "d", "--random-inputs")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "cut.xml: OpenVINO cannot read the model: Incorrect weights in bin file!" in r.stderr, r.stderr
    assert "Exception from" not in r.stderr and "Traceback" not in r.stderr
    text = INT8.read_text().replace('shape="?,3,?,?"', 'shape="1099511627776,3,48,96"', 1)
    (tmp_path / "huge.xml").write_text(text)
    (tmp_path / "huge.bin").write_bytes(INT8.with_suffix(".bin").read_bytes())
    r = accuscope("dump", tmp_path / "huge.xml", "--out", tmp_path / "h", "--random-inputs")
    assert r.returncode == 2 and "is too large for random data" in r.stderr and "Traceback" not in r.stderr, r.stderr
