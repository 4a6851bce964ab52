"""Submodel selection, export and re-test (issue 8): on the demo task (offline-model JSON, fused
device ops, planted faults) and on a real pretrained model (PP-OCR cls, weights in Constant nodes)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.demo import workspace as demo
from accuscope.engine.demo.npusim import simulate
from accuscope.engine.export.folder import export, select_in_task, task_graphs
from accuscope.engine.export.layout import INSIDE, NO_ERROR, UPSTREAM, read_manifest
from accuscope.engine.export.retest import retest
from accuscope.engine.graphs.subgraph import SelectionError, select
from accuscope.engine.runs.ortdump import dump_onnx
from accuscope.engine.sides.registry import load_graph, open_golden
from accuscope.engine.sources.ascend import DumpTensor, write_dump_file
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import load_task
from support.cli import accuscope
from support.narrow import present

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

QUANTIZED = demo.QUANTIZED_CONV  # /block1/conv1/Conv: fused on the device with bn1 and relu1
TS = 1700000000000000


@pytest.fixture(scope="session")
def demo_task(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("export-demo") / "ws"
    return demo.build_workspace(root)[0]


@pytest.fixture(scope="module")
def cls_task(cls_model, tmp_path_factory) -> Path:
    """PP-OCR cls: onnxruntime golden dump, a simulated fp16 Ascend dump, the OM JSON as the task's
    model and the framework model named in task.json."""
    root = tmp_path_factory.mktemp("export-cls")
    x = np.random.default_rng(3).standard_normal((1, 3, 48, 192)).astype(np.float32)
    dump_onnx(cls_model, root / "golden", {"x": x}, timestamp=TS)
    sim = simulate(load_graph(cls_model), open_golden(root / "golden"), str(root / "npu"), model_name="cls")
    _task_json(root, npu=str(root / "npu"), golden=str(root / "golden"), model=sim.model_json,
               framework_model=str(cls_model))
    return root


def _task_json(folder: Path, **meta) -> None:
    (folder / "task.json").write_text(json.dumps({"state": "done", **meta}), encoding="utf-8")


def _without_framework_model(meta: dict, folder: Path) -> dict:
    """task.json naming no framework model, with a golden copy that does not name one either (a
    dump written by `accuscope dump` keeps the model next to it, where it would be found)."""
    meta = {k: v for k, v in meta.items() if k not in ("framework_model", "demo")}
    golden = folder / "golden-bare"
    shutil.copytree(meta["golden"], golden, ignore=shutil.ignore_patterns("model.onnx", "dump.json"))
    return {**meta, "golden": str(golden)}


def _run(model: Path, feeds: dict) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as the golden dump ran
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _side(export_dir: Path, entries: list[dict], side: str) -> dict[str, np.ndarray]:
    return {e["name"]: np.load(export_dir / e[side]["npy"]) for e in entries}


def _reproduces_golden(result, golden_dir: Path, rtol=1e-5, atol=1e-5) -> None:
    """The exported model run on the golden boundary inputs gives the golden outputs of the parent dump."""
    m, out = result.manifest, result.out_dir
    onnx.checker.check_model(onnx.load(str(out / m["model"])), full_check=True)
    feeds = _side(out, m["boundary"]["inputs"], "golden")
    got = _run(out / m["model"], {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in feeds.items()})
    golden = open_golden(golden_dir)
    assert len(got) == len(m["boundary"]["outputs"])
    for value, entry in zip(got, m["boundary"]["outputs"]):
        expected = np.asarray(present(golden.find(entry["producer"], "output", entry["index"])).load())
        np.testing.assert_allclose(value, expected, rtol=rtol, atol=atol)


# ------------------------------------------------------------------ selection


def test_selection_with_residual_edge_and_branch_input(demo_task):
    om, fw = task_graphs(demo_task)
    assert fw is not None
    assert om.kind == "om" and fw.kind == "onnx"

    residual = select(fw, QUANTIZED, "/block1/Add")  # the stem's output feeds conv1 and, skipping it, the Add
    assert residual.names == ["/block1/conv1/Conv", "/block1/bn1/BatchNormalization", "/block1/relu1/Relu",
                              "/block1/conv2/Conv", "/block1/bn2/BatchNormalization", "/block1/Add"]
    [entering] = residual.inputs
    assert entering.tensor == "/stem/relu/Relu_output_0" and entering.producer == "/stem/relu/Relu"
    assert entering.consumers == [QUANTIZED, "/block1/Add"]
    assert [(b.tensor, b.from_end) for b in residual.outputs] == [("/block1/Add_output_0", True)]
    assert "block1.conv1.weight" in residual.weights and entering.shape == (1, 16, 32, 32)

    # device ops of the offline model: conv2 (fused with bn2) .. relu2; the Add's second input is a branch
    sel = select(om, "/block1/conv2/Conv", "/block1/relu2/Relu", framework=fw)
    assert sel.names == ["/block1/conv2/Conv/block1/bn2/BatchNormalization", "/block1/Add", "/block1/relu2/Relu"]
    assert sel.framework is not None
    assert sel.framework.names == ["/block1/conv2/Conv", "/block1/bn2/BatchNormalization", "/block1/Add",
                                   "/block1/relu2/Relu"]
    assert [(b.tensor, b.consumers) for b in sel.framework.inputs] == [
        ("/block1/relu1/Relu_output_0", ["/block1/conv2/Conv"]), ("/stem/relu/Relu_output_0", ["/block1/Add"])]
    text = "\n".join(sel.describe())
    assert "/stem/relu/Relu_output_0" in text and "(end)" in text

    # a region starting at the network's first op: its input is the network input, typed too
    [image] = select(fw, "/stem/conv/Conv", "/stem/conv/Conv").inputs
    assert image.producer is None and str(image) == "image float32[1x3x32x32]"


@pytest.mark.parametrize("start, end, reason", [
    ("/block1/Add", QUANTIZED, "not reachable from start /block1/Add.*swap them"),
    ("/attn/q/MatMul", "/attn/k/MatMul", "not reachable.*separate branches"),
    ("trans_TransData_0", "/block1/Add", "device-only op \\(TransData"),
    ("image", "/block1/Add", "network input"),
    ("/blok1/Add", "/block1/Add", "no op named '/blok1/Add'.*did you mean /block1/Add"),
])
def test_invalid_selections_are_refused_with_the_reason(demo_task, start, end, reason):
    with pytest.raises(SelectionError, match=reason):
        select_in_task(demo_task, start, end)


def test_offline_model_task_without_framework_model_says_what_is_missing(demo_task, tmp_path):
    _task_json(tmp_path, **_without_framework_model(json.loads((demo_task / "task.json").read_text()), tmp_path))
    with pytest.raises(SourceError, match="--framework-model"):
        select_in_task(tmp_path, QUANTIZED, QUANTIZED)
    sel = select_in_task(tmp_path, QUANTIZED, QUANTIZED, framework_model=demo_task / "model" / "tinynet.onnx")
    assert sel.framework is not None
    assert sel.framework.names == [QUANTIZED, "/block1/bn1/BatchNormalization", "/block1/relu1/Relu"]


# ------------------------------------------------------------------ export


def test_export_of_a_residual_region_reproduces_golden_and_holds_both_sides(demo_task, tmp_path):
    sel = select_in_task(demo_task, QUANTIZED, "/block1/Add")  # device ops; the framework region follows
    result = export(demo_task, sel, tmp_path / "exp")
    assert result is not None
    out, m = result.out_dir, result.manifest
    assert m == read_manifest(out) and m["checker"] == "passed" and m["parent_task"] == str(demo_task)
    assert m["start"] == ["/block1/conv1/Conv/block1/relu1/Relu"] and m["end"] == ["/block1/Add"]
    assert [o["name"] for o in m["ops"]] == result.selection.names and len(m["device_ops"]) == 3
    assert m["framework_model"].endswith("tinynet.onnx") and m["tool_version"]
    _reproduces_golden(result, demo_task / "golden", rtol=1e-6, atol=1e-6)

    [entry] = m["boundary"]["inputs"]
    assert entry["shape"] == [1, 16, 32, 32] and entry["dtype"] == "float32"
    golden, npu = (np.load(out / entry[s]["npy"]) for s in ("golden", "npu"))
    assert golden.shape == npu.shape == (1, 16, 32, 32) and npu.dtype == np.float32  # NC1HWC0 -> NCHW
    assert entry["npu"]["conversion"].startswith("NC1HWC0") and entry["npu"]["tensor"].endswith(":input:0")
    np.testing.assert_allclose(npu, golden, rtol=2e-3, atol=2e-3)  # the stem is fine on the NPU (fp16)
    raw = np.fromfile(out / entry["npu"]["bin"], dtype="<f4")
    np.testing.assert_array_equal(raw, npu.reshape(-1))
    # dumps of every op inside (and of the input's producer), both sides
    assert sorted(Path(p).name.split(".")[0] for p in m["dumps"]["golden"]) == sorted(
        ["_stem_relu_Relu", "_block1_conv1_Conv", "_block1_bn1_BatchNormalization", "_block1_relu1_Relu",
         "_block1_conv2_Conv", "_block1_bn2_BatchNormalization", "_block1_Add"])
    assert len(m["dumps"]["npu"]) == 3 and all((out / p).is_file() for p in m["dumps"]["npu"])
    assert (out / m["mapping_model"]).is_file()


def test_export_float16_files_and_replacing_a_previous_export_only(demo_task, tmp_path):
    sel = select_in_task(demo_task, "/attn/norm/ReduceMean", "/attn/norm/Div")
    first = export(demo_task, sel, tmp_path / "exp", dtype="float16")
    assert first is not None
    entry = first.manifest["boundary"]["inputs"][0]
    assert np.load(first.out_dir / entry["golden"]["npy"]).dtype == np.float16
    assert (first.out_dir / entry["golden"]["bin"]).stat().st_size == 2 * np.prod(entry["golden"]["shape"])
    model = onnx.load(str(first.model))
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT  # the model is unchanged
    assert present(export(demo_task, sel, tmp_path / "exp")).manifest["dtype"] == "float32"  # replaced
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(SourceError, match="not an accuscope export"):
        export(demo_task, sel, foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"
    assert not list(tmp_path.glob(".*partial*"))


def test_real_model_regions_with_constant_weights_reproduce_golden(cls_task, tmp_path):
    # squeeze-excitation block: the pooled branch rejoins the block input at Mul@1 (a branch input);
    # the biases are Reshape@k of Constant weights, ops computing from weights only: taken in
    sel = select_in_task(cls_task, "GlobalAveragePool@0", "Mul@1")
    fw = sel.framework
    assert fw is not None
    assert {"Reshape@0", "Reshape@1"} <= set(fw.folded) and [b.tensor for b in fw.inputs] == ["relu_1.tmp_0"]
    assert fw.inputs[0].consumers == ["GlobalAveragePool@0", "Mul@1"]
    se = export(cls_task, sel, tmp_path / "se")
    assert se is not None
    sub = onnx.load(str(se.model))
    constants = [n for n in sub.graph.node if n.op_type == "Constant"]
    assert constants and not sub.graph.initializer  # the weights stay in Constant nodes, as in the model
    assert [i.name for i in sub.graph.input] == ["relu_1.tmp_0"]
    assert sub.graph.value_info  # shapes filled in by shape inference
    _reproduces_golden(se, cls_task / "golden")

    # inverted residual: conv4 expand/depthwise/linear and the residual Add, from the network input too
    for start, end in (("Conv@9", "Add@3"), ("Conv@0", "Div@0")):
        result = export(cls_task, select_in_task(cls_task, start, end), tmp_path / start)
        _reproduces_golden(result, cls_task / "golden")
    assert result is not None
    x = onnx.load(str(result.model)).graph.input[0]
    assert x.name == "x" and [d.dim_value for d in x.type.tensor_type.shape.dim] == [1, 3, 48, 192]


def test_values_read_inside_if_bodies_are_inputs_of_the_if(tmp_path):
    """`r` is read only inside the If branches: selecting from its producer to after the If is valid,
    and an export starting at the If takes `r` (and a weight used in a branch) as its own."""
    h, T = onnx.helper, onnx.TensorProto
    w = onnx.numpy_helper.from_array(np.array([2.0, -1.0, 0.5, 3.0], np.float32), "w")
    then_g = h.make_graph([h.make_node("Mul", ["r", "w"], ["t"], name="then_mul")], "then", [],
                          [h.make_tensor_value_info("t", T.FLOAT, [1, 4])])
    else_g = h.make_graph([h.make_node("Neg", ["r"], ["e"], name="else_neg")], "else", [],
                          [h.make_tensor_value_info("e", T.FLOAT, [1, 4])])
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["c"], name="greater"),
             h.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
             h.make_node("Sigmoid", ["y"], ["out"], name="sigmoid")]
    graph = h.make_graph(nodes, "cond", [h.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                         [h.make_tensor_value_info("out", T.FLOAT, [1, 4])],
                         [w, onnx.numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "cond.onnx"
    onnx.save(model, str(path))
    dump_onnx(path, tmp_path / "golden", {"x": np.array([[1.0, -2.0, 3.0, 0.5]], np.float32)}, timestamp=TS)
    sim = simulate(load_graph(path), open_golden(tmp_path / "golden"), str(tmp_path / "npu"), model_name="cond")
    _task_json(tmp_path, npu=str(tmp_path / "npu"), golden=str(tmp_path / "golden"), model=str(path))

    fw = load_graph(path)
    assert select(fw, "relu", "sigmoid").names == ["relu", "branch", "sigmoid"]  # through the hidden edge
    sel = select(fw, "branch", "sigmoid")
    assert [b.tensor for b in sel.inputs] == ["c", "r"] and sel.weights == ["w"]
    result = export(tmp_path, sel, tmp_path / "exp")
    assert result is not None
    assert result.manifest["checker"] == "passed" and sim.model_json
    _reproduces_golden(result, tmp_path / "golden")


CAFFE = """name: "Tiny"
input: "data"
input_shape { dim: 1 dim: 2 dim: 3 dim: 3 }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 2 kernel_size: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }  # in place
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" pooling_param { pool: MAX kernel_size: 3 } }
layer { name: "prob" type: "Softmax" bottom: "pool1" top: "prob" }
"""


def test_caffe_export_writes_the_chosen_layers_after_an_input_layer(tmp_path):
    (tmp_path / "net.prototxt").write_text(CAFFE)
    rng = np.random.default_rng(0)
    conv = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    relu, pool = np.maximum(conv, 0), np.maximum(conv, 0).max(axis=(2, 3), keepdims=True)
    (tmp_path / "golden").mkdir()
    for name, value in (("conv1", conv), ("relu1", relu), ("pool1", pool)):
        np.save(tmp_path / "golden" / f"{name}.0.{TS}.npy", value)
    run = tmp_path / "npu" / "20240101000000" / "0" / "tiny" / "1" / "0"
    run.mkdir(parents=True)
    write_dump_file(run / f"Relu.relu1.2.{TS + 2}", "relu1", [DumpTensor(conv.astype(np.float16))],
                    [DumpTensor(relu.astype(np.float16), original_op=("relu1", 0))])
    write_dump_file(run / f"Pooling.pool1.3.{TS + 3}", "pool1", [DumpTensor(relu.astype(np.float16))],
                    [DumpTensor(pool.astype(np.float16), original_op=("pool1", 0))])
    _task_json(tmp_path, npu=str(tmp_path / "npu"), golden=str(tmp_path / "golden"),
               model=str(tmp_path / "net.prototxt"))

    sel = select_in_task(tmp_path, "relu1", "pool1")
    assert [b.tensor for b in sel.inputs] == ["conv1"] and [b.tensor for b in sel.outputs] == ["pool1"]
    result = export(tmp_path, sel, tmp_path / "exp", retest=True)
    assert result is not None
    text = result.model.read_text()
    assert result.model.name == "model.prototxt" and 'type: "Input"' in text and "pool: MAX" in text
    sub = load_graph(result.model)
    assert [(n.name, n.type) for n in sub.nodes] == [("accuscope_input", "Input"), ("relu1", "ReLU"),
                                                     ("pool1", "Pooling")]
    assert sub.nodes[0].output_shapes == [(1, 2, 3, 3)]
    entry = result.manifest["boundary"]["inputs"][0]
    np.testing.assert_allclose(np.load(result.out_dir / entry["npu"]["npy"]), conv, atol=1e-3)
    assert result.retest is None and any("re-test skipped" in n for n in result.notes)


# ------------------------------------------------------------------ re-test


def test_retest_finds_the_quantized_conv_error_inside_and_later_errors_upstream(demo_task, tmp_path):
    quantized = export(demo_task, select_in_task(demo_task, QUANTIZED, QUANTIZED), tmp_path / "q", retest=True)
    assert quantized is not None
    r = quantized.retest
    assert r is not None
    assert r.verdict == INSIDE, r.message
    [out] = r.outputs
    assert out.tensor == "/block1/relu1/Relu_output_0" and out.npu_tensor.endswith(":output:0")
    assert out.parent_cos < 0.99 and out.retest_cos < 0.99 and out.golden_cos > 0.999999
    assert "cos" in out.retest_broken
    assert r.task_dir is not None
    task = load_task(r.task_dir)
    assert task.doc.retest is not None
    assert task.doc.parent == str(demo_task) and task.doc.retest["verdict"] == INSIDE
    assert task.table is not None
    assert task.table.columns["fail"].any()

    # after it: conv2 .. relu2 with the residual Add inherit the error; given the NPU's own inputs the
    # framework ops compute what the NPU computed
    later = present(export(demo_task, select_in_task(demo_task, "/block1/conv2/Conv", "/block1/relu2/Relu"),
                   tmp_path / "later", retest=True)).retest
    assert later is not None
    assert later.verdict == UPSTREAM, later.message
    assert later.outputs[0].parent_cos < 0.99 < 0.9999 < later.outputs[0].retest_cos
    assert later.task_dir is not None
    assert load_task(later.task_dir).doc.parent == str(demo_task)

    # the same region chosen among the framework ops (as the graph of the ONNX model shows them)
    fw = task_graphs(demo_task)[1]
    assert fw is not None
    again = export(demo_task, select(fw, QUANTIZED, "/block1/relu1/Relu"), tmp_path / "fw", retest=True)
    assert again is not None
    assert again.device_selection is None and again.manifest["mapping_model"] == "model/tinynet.json"
    assert again.retest is not None and again.retest.task_dir is not None
    assert again.retest.verdict == INSIDE and len(present(load_task(again.retest.task_dir).table)) == 2
    # the float16 overflow of the LayerNorm's Pow is made right there
    assert retest_of(demo_task, "/attn/norm/Pow", tmp_path / "pow").verdict == INSIDE
    # and a region upstream of every fault has none
    assert retest_of(demo_task, "/stem/conv/Conv", tmp_path / "stem").verdict == NO_ERROR


def retest_of(task: Path, op: str, out: Path):
    export(task, select_in_task(task, op, op), out)
    return retest(out)


# ------------------------------------------------------------------ the command


def test_cli_export_exit_codes(demo_task, cls_task, tmp_path):
    r = accuscope("export", demo_task, "--start", QUANTIZED, "--end", QUANTIZED, "--out", tmp_path / "q",
                  "--retest")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "re-test: INSIDE" in r.stdout and "NPU vs re-run cos 0.9" in r.stdout
    assert (tmp_path / "q" / "manifest.json").is_file() and (tmp_path / "q" / "retest" / "task.json").is_file()

    r = accuscope("export", demo_task, "--start", "/block1/Add", "--end", QUANTIZED, "--out", tmp_path / "bad")
    assert r.returncode == 2 and "not reachable from start /block1/Add" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "bad").exists()

    # an offline-model task naming no framework model: refused, then given on the command line
    meta = json.loads((cls_task / "task.json").read_text())
    framework = meta["framework_model"]
    bare = tmp_path / "bare"
    bare.mkdir()
    _task_json(bare, **_without_framework_model(meta, tmp_path))
    r = accuscope("export", bare, "--start", "Conv@9", "--end", "Add@3")
    assert r.returncode == 2 and "--framework-model" in r.stderr
    r = accuscope("export", bare, "--start", "Conv@9", "--end", "Add@3", "--framework-model", framework,
                  "--dtype", "float16")
    assert r.returncode == 0, r.stdout + r.stderr
    [manifest] = (bare / "exports").glob("*/manifest.json")  # the default --out: TASK/exports/START--END
    assert json.loads(manifest.read_text())["dtype"] == "float16" and manifest.parent.name == "Conv@9Relu@5--Add@3"

    r = accuscope("export", tmp_path / "nowhere", "--start", "a", "--end", "b")
    assert r.returncode == 2 and "not a task folder" in r.stderr
    shutil.rmtree(tmp_path / "q")
