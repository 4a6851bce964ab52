"""A PyTorch side (a folder of forward-hook tensors named by module, `layer1.0.conv1.0.4.pt`) read through the
model's own `torch.onnx.export` (`--golden-model model.onnx`), through the real entry point, on the small CNN of
tests/fixtures/torchexport (make_fixtures.py: hooks, export and onnx2tf's .tflite of that export, all of one
seeded model): the modules pair by name with an onnxruntime dump of the export, and by `--match structure` with
the .tflite, whose names onnx2tf did not keep; a fault planted in one Conv of the .tflite's source is found at it."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from support.cli import accuscope
from support.data import FIXTURES

HERE = FIXTURES / "torchexport"
HOOKS, EXPORT = HERE / "hooks", HERE / "model.onnx"
FOLDED = ["conv", "layer1.0.conv1", "layer1.0.conv2"]  # each followed by a BatchNorm the export folds into it


def _dump(model: Path, out: Path, layout: str) -> Path:
    r = accuscope("dump", model, "--out", out, "--input", f"x={HERE / f'x_{layout}.npy'}")
    assert r.returncode == 0, r.stderr
    return out


def _rows(task: Path) -> dict[str, dict]:
    r = accuscope("show", task, "--format", "csv", "--columns", "tensor,golden_op,how,fail,cos,reason")
    assert r.returncode == 0, r.stderr
    return {row["tensor"]: row for row in csv.DictReader(io.StringIO(r.stdout))}


def _structure(candidate: Path, tmp_path: Path) -> tuple[dict, dict[str, dict]]:
    r = accuscope("compare", "--npu", candidate, "--golden", HOOKS, "--golden-model", EXPORT, "--match", "structure",
                  "--out", tmp_path / "t", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), _rows(tmp_path / "t")


@pytest.fixture(scope="module")
def tflite_dumps(tmp_path_factory):
    pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")
    work = tmp_path_factory.mktemp("torchexport")
    return {name: _dump(HERE / f"{name}.tflite", work / name, "nhwc") for name in ("model", "fault")}


def test_hooks_pair_with_the_tflite_of_their_export_by_structure(tflite_dumps, tmp_path):
    """6 of the 14 hooked modules pair with the .tflite's tensors: each by the ONNX node its module path names,
    then walked to onnx2tf's op; every row agrees. The rest are named: the three Convs whose BatchNorm the export
    folded (their own output is no tensor of the export), the block and its Sequential (their last ReLU's output),
    the two BatchNorms before a ReLU (the .tflite's CONV_2D holds that ReLU) and the Flatten (a RESHAPE)."""
    doc, rows = _structure(tflite_dumps["model"], tmp_path)
    assert doc["failing"] == 0 and doc["coverage"]["outputs_paired"] == 1
    for tensor, module in (("CONV_2D_0:output:0", "relu"), ("CONV_2D_1:output:0", "layer1.0.relu1"),
                           ("CONV_2D_2:output:0", "layer1.0.bn2"), ("ADD_0:output:0", "layer1.0.relu2"),
                           ("MEAN_0:output:0", "pool"), ("FULLY_CONNECTED_0:output:0", "fc")):
        assert (rows[tensor]["golden_op"], rows[tensor]["how"]) == (module, "structure"), rows[tensor]
        assert float(rows[tensor]["cos"]) > 0.99999, rows[tensor]
    walked = doc["pairing"]["structure"]
    assert walked["golden_modules"] == {"paired": 6, "modules": 14, "folded": FOLDED, "same": ["layer1", "layer1.0"]}
    assert (walked["ops_paired"], walked["ops"]) == (6, 6)
    assert doc["pairing"]["sides"]["golden"] == {"fused N:1": 5, "absorbed 1:0": 3, "no counterpart": 0}
    unused = dict(doc["coverage"]["golden_unused"])
    assert unused["layer1.0.conv2:output:0"] == "fused N:1: the export folds the next module into it"
    assert unused["layer1.0:output:0"] == "absorbed 1:0: a module whose output is a submodule's"
    assert "modules: paired 6 of the reference's 14 hooked modules through its export's module paths" \
           in " ".join(doc["coverage"]["notes"])


def test_a_fault_planted_in_the_tflite_source_is_found_at_its_op(tflite_dumps, tmp_path):
    """fault.tflite: onnx2tf's conversion of the export with layer1.0.conv2's kernel edited. The first failing
    row is that Conv's CONV_2D_2, paired with the module holding its output (its BatchNorm, folded into it);
    every row before it agrees."""
    doc, rows = _structure(tflite_dumps["fault"], tmp_path)
    assert doc["first_failing"]["tensor"] == "CONV_2D_2:output:0", doc["first_failing"]
    assert rows["CONV_2D_2:output:0"]["golden_op"] == "layer1.0.bn2" and float(rows["CONV_2D_2:output:0"]["cos"]) < 0.9
    for tensor in ("x:output:0", "CONV_2D_0:output:0", "CONV_2D_1:output:0"):
        assert rows[tensor]["fail"] == "False" and float(rows[tensor]["cos"]) > 0.99999, rows[tensor]


def test_hooks_pair_by_name_with_a_dump_of_their_export(tmp_path):
    """Where the names survive (onnxruntime's dump of the export itself), the module paths pair by tensor name,
    no --match needed: 10 of the 15 hook tensors (the input and 9 modules); without the export, only the input."""
    pytest.importorskip("onnxruntime")
    ort = _dump(EXPORT, tmp_path / "ort", "nchw")
    r = accuscope("compare", "--npu", ort, "--golden", HOOKS, "--golden-model", EXPORT, "--out", tmp_path / "t",
                  "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["coverage"]["golden_used"], doc["coverage"]["golden_total"], doc["failing"]) == (10, 15, 0)
    rows = _rows(tmp_path / "t")
    assert rows["/layer1/layer1.0/conv2/Conv:output:0"]["golden_op"] == "layer1.0.bn2"
    assert rows["/fc/Gemm:output:0"]["golden_op"] == "fc"
    r = accuscope("compare", "--npu", ort, "--golden", HOOKS, "--out", tmp_path / "bare", "--json")
    assert json.loads(r.stdout)["coverage"]["golden_used"] == 1


def test_hooks_as_the_candidate_pair_the_same_modules(tflite_dumps, tmp_path):
    """The hooks on the NPU side (--npu-model), the .tflite as the reference: the same 6 modules pair, and the
    Convs the export folded are fused N:1 on the candidate's side."""
    r = accuscope("compare", "--npu", HOOKS, "--npu-model", EXPORT, "--golden", tflite_dumps["model"], "--match",
                  "structure", "--out", tmp_path / "t", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    walked = doc["pairing"]["structure"]
    assert walked["npu_modules"] == {"paired": 6, "modules": 14, "folded": FOLDED, "same": ["layer1", "layer1.0"]}
    assert (walked["ops_paired"], walked["ops"], doc["failing"]) == (6, 10, 0)
    rows = _rows(tmp_path / "t")
    assert (rows["relu:output:0"]["golden_op"], rows["fc:output:0"]["golden_op"]) == ("CONV_2D_0", "FULLY_CONNECTED_0")
    assert rows["conv:output:0"]["reason"].startswith("fused N:1 (2:1 NPU:golden): the export folds module bn")


def test_run_pairs_inputs_by_place_where_their_names_differ(tmp_path):
    """`run` of the export (its input renamed `image` in a copy) against onnx2tf's .tflite (input `x`, NHWC):
    the names differ, so the inputs pair by their place, and the one random input drawn for the reference feeds
    the .tflite moved to NHWC; the note and the candidate's dump.json say so, and every row agrees."""
    pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(EXPORT))
    model.graph.input[0].name = "image"
    for node in model.graph.node:
        node.input[:] = ["image" if name == "x" else name for name in node.input]
    onnx.save(model, str(tmp_path / "renamed.onnx"))
    r = accuscope("run", tmp_path / "renamed.onnx", HERE / "model.tflite", "--random-inputs", "--match", "structure",
                  "--out", tmp_path / "t", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["failing"] == 0
    assert "the candidate's input x: random, the reference's 'image', NCHW->NHWC" in " ".join(r.stderr.split())
    dumps = next((tmp_path / "t" / "dumps").iterdir())
    fed = json.loads((dumps / "npu" / "dump.json").read_text())["inputs"]
    assert fed == {"x": {"shape": [1, 16, 16, 3], "dtype": "float32",
                         "origin": "random, the reference's 'image', NCHW->NHWC"}}
    assert all(float(row["cos"]) > 0.9999 for row in _rows(tmp_path / "t").values() if row["cos"])


def test_openvinos_gemm_split_pairs_with_tflites_fully_connected_at_its_bias(tmp_path):
    """OpenVINO runs the export's Gemm as a MatMul (`Gemm/WithoutBiases`) and an Add of the bias; TFLite's
    FULLY_CONNECTED does both. The walk pairs it with the Add, whose values it holds, and names the MatMul
    fused: every row agrees and the model passes (it failed at cos 0.89 against the MatMul), while the fault
    planted in the .tflite's conv is still found at it."""
    pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")
    pytest.importorskip("openvino", reason="openvino is not installed")
    found = {}
    for name in ("model", "fault"):
        r = accuscope("run", EXPORT, HERE / f"{name}.tflite", "--reference-runtime", "openvino", "--random-inputs",
                      "--match", "structure", "--out", tmp_path / name, "--json")
        assert r.returncode == 0, r.stderr
        found[name] = json.loads(r.stdout)
    assert found["model"]["judgement"]["outcome"] == "pass", found["model"]["judgement"]
    assert float(_rows(tmp_path / "model")["FULLY_CONNECTED_0:output:0"]["cos"]) > 0.9999
    assert found["model"]["pairing"]["leftovers"]["no counterpart"] == 0  # the MatMul and the conv's are fused
    assert found["model"]["pairing"]["structure"]["fused"] == 8
    assert found["fault"]["first_failing"]["tensor"] == "CONV_2D_2:output:0"
