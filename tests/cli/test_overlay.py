"""`accuscope overlay`: Model Explorer node data, read back with the ai-edge-model-explorer package's own
node-data classes, keyed by the framework ONNX model's node ids (Model Explorer's ONNX adapter's)."""
from __future__ import annotations

import json

import dacite
import numpy as np
import onnx
import pytest
from model_explorer import node_data_builder as ndb
from onnx import TensorProto, helper

from accuscope.engine.compare import judgement
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.demo.workspace import MAIN, ONNX_FP16
from accuscope.engine.export.overlay import explorer_ids, task_overlay
from accuscope.engine.tasks.task import load_task
from accuscope.engine.tasks.taskrun import run_task
from support.cli import accuscope
from support.data import cls_with_planted_fault


def load_node_data(path) -> ndb.ModelNodeData:
    """The file as Model Explorer's node-data classes (strict: an unknown key or a wrong type fails)."""
    doc = json.loads(path.read_text())
    data = ndb.ModelNodeData(graphsData={g: dacite.from_dict(ndb.GraphNodeData, d, config=dacite.Config(strict=True))
                                         for g, d in doc.items()})
    back = json.loads(data.to_json_string())  # the classes' own writer: ours plus their defaults
    assert all({k: back[g][k] for k in d} == d for g, d in doc.items())
    return data


def colour(graph: ndb.GraphNodeData, node: str) -> str:
    """The background Model Explorer gives a node: its own, else the first threshold at or above its value."""
    r = graph.results[node]
    return r.bgColor or next((t.bgColor for t in graph.thresholds if r.value <= t.value), "")


def compared_framework_ops(task_dir, failing: bool = False) -> set[str]:
    """Framework op names of every compared output row (golden_op lists a fused op's members); with
    `failing`, of the rows the task's judgement fails."""
    task = load_task(task_dir)
    table = task.table
    assert table is not None
    c = table.columns
    rows = (c["io"] == "output") & ~judgement.exempt(table) & (np.isfinite(c["cos"]) | (c["npu_nonfinite"] > 0))
    if failing:
        assert task.thresholds is not None
        rows &= judgement.evaluate(table, task.thresholds).fail
    return {g for chain in c["golden_op"][rows] for g in str(chain).split(",") if g and g != "*"}


def test_ascend_task_colours_the_onnx_ops_each_fused_device_op_came_from(demo_ws, tmp_path):
    task = demo_ws / MAIN.name
    r = accuscope("overlay", task, "--out", tmp_path / "nd.json")
    assert r.returncode == 0, r.stderr
    model = onnx.load(str(task / "model" / "tinynet.onnx"))
    failing = compared_framework_ops(task, failing=True)  # the nodes of the ops the task fails, as every surface counts
    assert "model-explorer" in r.stdout and f"({len(failing)} failing)" in r.stdout and len(failing) > 20
    data = load_node_data(tmp_path / "nd.json")
    graph = data.graphsData[model.graph.name]
    assert set(graph.results) == compared_framework_ops(task) <= {n.name for n in model.graph.node}
    red, green = graph.thresholds[0].bgColor, graph.thresholds[1].bgColor
    # the int4 conv's fused device op (Conv+BatchNorm+ReLU) fails: all three framework ops are red
    for op in ("/block1/conv1/Conv", "/block1/bn1/BatchNormalization", "/block1/relu1/Relu"):
        assert graph.results[op].value == pytest.approx(0.9562, abs=1e-4) and colour(graph, op) == red
    assert colour(graph, "/attn/norm/Pow") == red and graph.results["/attn/norm/Pow"].value < -1e300  # fp16 inf
    assert colour(graph, "/stem/conv/Conv") == green and graph.results["/stem/conv/Conv"].value > 0.9999


def test_an_error_metric_fails_high_and_one_without_a_threshold_gets_a_gradient(demo_ws, tmp_path):
    task = demo_ws / ONNX_FP16.name
    r = accuscope("overlay", task, "--out", tmp_path / "red.json", "--metric", "RelativeEuclideanDistance")
    assert r.returncode == 0, r.stderr
    graph = next(iter(load_node_data(tmp_path / "red.json").graphsData.values()))
    assert [t.value for t in graph.thresholds] == [0.05, pytest.approx(1.797e308, rel=1e-3)]
    assert colour(graph, "/attn/norm/Pow") == graph.thresholds[1].bgColor  # inf: red
    assert colour(graph, "/stem/conv/Conv") == graph.thresholds[0].bgColor
    result, _ = task_overlay(task, "max_abs")
    (tmp_path / "abs.json").write_text(json.dumps(result.doc))
    graph = next(iter(load_node_data(tmp_path / "abs.json").graphsData.values()))
    assert not graph.thresholds and [g.stop for g in graph.gradient] == [0, 1]


def test_real_model_through_an_ascend_dump(cls_model, tmp_path):
    """PP-OCR cls (566 nodes, its 308 Constants unnamed) through an Ascend-style dump with one op broken."""
    noise = np.random.default_rng(1)
    sim = cls_with_planted_fault(cls_model, tmp_path, "Relu@4", lambda a: a + noise.standard_normal(a.shape).astype(
        np.float32) * a.std())
    run_task(CompareSpec(str(tmp_path / "npu" / "dump"), str(tmp_path / "golden"), model=sim.model_json), tmp_path / "t",
             workers=1)
    r = accuscope("overlay", tmp_path / "t", "--out", tmp_path / "nd.json")  # golden/model.onnx: dump_onnx's copy
    assert r.returncode == 0, r.stderr
    graph = load_node_data(tmp_path / "nd.json").graphsData["paddle-onnx"]
    proto = onnx.load(str(cls_model)).graph
    ids = [n.name or f"<node_{i}>" for i, n in enumerate(proto.node)]
    assert set(graph.results) <= set(ids)
    _, by_name = explorer_ids(cls_model)
    assert set(graph.results) == {by_name[g] for g in compared_framework_ops(tmp_path / "t")}
    failing = {k for k in graph.results if colour(graph, k) == graph.thresholds[0].bgColor}
    assert {"Conv@7", "Relu@4"} <= failing  # the fused device op Conv@7Relu@4


def test_explorer_ids_count_positions_over_every_node(tmp_path):
    nodes = [helper.make_node("Constant", [], ["k"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0])),
             helper.make_node("Mul", ["x", "k"], ["y"]), helper.make_node("Relu", ["y"], ["z"], name="act")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1])])
    onnx.save(helper.make_model(graph), tmp_path / "m.onnx")
    graph_id, ids = explorer_ids(tmp_path / "m.onnx")
    assert graph_id == "g" and ids["Mul_1"] == ids["y"] == "<node_1>" and ids["act"] == "act"


def test_a_task_without_a_framework_model_is_exit_2_naming_what_is_missing(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.ones((2, 3), np.float32))
    run_task(CompareSpec(str(tmp_path / "a.npz"), str(tmp_path / "a.npz")), tmp_path / "t", workers=1)
    r = accuscope("overlay", tmp_path / "t", "--out", tmp_path / "nd.json")
    assert r.returncode == 2 and "no framework ONNX model" in r.stderr and "--framework-model" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "nd.json").exists()
    r = accuscope("overlay", tmp_path / "t", "--out", tmp_path / "nd.json", "--framework-model", tmp_path / "no.onnx")
    assert r.returncode == 2 and "no.onnx: no such framework model file" in r.stderr


def test_an_unknown_metric_is_named_as_overlay_asks_for_it(demo_ws, tmp_path):
    r = accuscope("overlay", demo_ws / MAIN.name, "--out", tmp_path / "nd.json", "--metric", "coss")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--metric: unknown metric 'coss' to colour the graph by; did you mean cos?" in r.stderr
    assert "threshold" not in r.stderr and not (tmp_path / "nd.json").exists()
