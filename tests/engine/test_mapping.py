"""Op mapping rules on small hand-made cases: fusion attributes, Cast/TransData tracing, weights,
device-only ops, original_op, identical names through an ONNX graph's tensor names."""
from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper

from accuscope.engine.compare.mapping import map_tensors
from accuscope.engine.sides.registry import load_graph, open_golden
from accuscope.engine.sources.ascend import DumpTensor, write_dump_file
from accuscope.engine.sources.npudump import open_npu_dump

A = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2)


def _om(path, ops):
    path.write_text(json.dumps({"name": "m", "graph": [{"name": "m", "op": ops}]}))
    return load_graph(path)


def _desc(origin=None):
    attrs = [] if origin is None else [{"key": "_datadump_origin_name", "value": {"s": origin[0]}},
                                       {"key": "_datadump_origin_output_index", "value": {"i": origin[1]}}]
    return {"dtype": "DT_FLOAT16", "layout": "NC1HWC0", "shape": {"dim": [2, 3, 2, 2]}, "attr": attrs}


def _fused(names):
    return [{"key": "_datadump_original_op_names", "value": {"list": {"s": names}}}]


def test_fusion_attributes_trace_inputs_through_layout_ops_and_flag_weights(tmp_path):
    om = _om(tmp_path / "m.json", [
        {"name": "data", "type": "Data", "id": 1, "output_desc": [_desc()]},
        {"name": "trans1", "type": "TransData", "id": 2, "input": ["data:0"], "attr": _fused([]),
         "output_desc": [_desc()]},
        {"name": "cast1", "type": "Cast", "id": 3, "input": ["trans1:0"], "attr": _fused(["cast_fw"]),
         "output_desc": [_desc(("cast_fw", 0))]},
        {"name": "w", "type": "Const", "id": 4, "output_desc": [_desc()]},
        {"name": "conv1relu1", "type": "Conv2D", "id": 5, "input": ["cast1:0", "w:0", "ctrl:-1"],
         "attr": _fused(["conv1", "relu1"]), "output_desc": [_desc(("relu1", 0))]},
    ])
    run = tmp_path / "npu"
    run.mkdir()
    write_dump_file(run / "TransData.trans1.1.1700000000000001", "trans1", [DumpTensor(A)], [DumpTensor(A)])
    write_dump_file(run / "Conv2D.conv1relu1.2.1700000000000002", "conv1relu1",
                    [DumpTensor(A), DumpTensor(A)], [DumpTensor(A, "NC1HWC0")])
    gold = tmp_path / "golden"
    gold.mkdir()
    np.save(gold / "data.0.1.npy", A)
    np.save(gold / "relu1.0.1.npy", A)
    np.save(gold / "conv1.0.1.npy", A)
    mapping = map_tensors(open_npu_dump(run), open_golden(gold), om)
    by = {p.npu.name: p for p in mapping.pairs}
    assert by["trans1:output:0"].golden is None and by["trans1:output:0"].ground_truth == "*"
    assert "device-only" in by["trans1:output:0"].reason
    conv_in = by["conv1relu1:input:0"]
    assert conv_in.golden.op == "data" and conv_in.how == "fusion"  # Cast and TransData skipped
    assert "weight" in by["conv1relu1:input:1"].reason
    out = by["conv1relu1:output:0"]
    assert out.golden.op == "relu1" and out.how == "fusion" and out.ground_truth == "conv1,relu1"
    assert [t.op for t in mapping.unmatched_golden] == ["conv1"]
    np.save(gold / "cast_fw.0.1.npy", A)  # the Cast exists in the framework: compare against it
    again = {p.npu.name: p for p in map_tensors(open_npu_dump(run), open_golden(gold), om).pairs}
    assert again["conv1relu1:input:0"].golden.op == "cast_fw"


def test_identical_names_map_npz_tensor_names_through_the_onnx_graph(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r_out"], name="block/relu"),
             helper.make_node("Sigmoid", ["r_out"], ["s_out"], name="block/sig")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(g), tmp_path / "m.onnx")
    x = np.ones((2, 3), np.float32)
    np.savez(tmp_path / "g.npz", r_out=x, s_out=x, x=x)
    run = tmp_path / "npu"
    run.mkdir()
    write_dump_file(run / "Sigmoid.block_sig.1.1700000000000001", "block/sig",
                    [DumpTensor(x.astype(np.float16))], [DumpTensor(x.astype(np.float16))])
    write_dump_file(run / "Mul.extra_op.2.1700000000000002", "extra_op", [], [DumpTensor(x)])
    mapping = map_tensors(open_npu_dump(run), open_golden(tmp_path / "g.npz"), load_graph(tmp_path / "m.onnx"))
    by = {p.npu.name: p for p in mapping.pairs}
    assert by["block/sig:output:0"].golden.tensor_name == "s_out"
    assert by["block/sig:input:0"].golden.tensor_name == "r_out"
    assert by["extra_op:output:0"].golden is None  # no fuzzy fallback onto a leftover tensor
    assert "no golden tensor named extra_op:output:0" in by["extra_op:output:0"].reason
    assert sorted(t.tensor_name for t in mapping.unmatched_golden) == ["x"]


def test_original_op_in_the_header_wins_over_names(tmp_path):
    run = tmp_path / "npu"
    run.mkdir()
    write_dump_file(run / "Add.dev_add.1.1700000000000001", "dev_add", [], [DumpTensor(A, original_op=("fw/add", 0))])
    gold = tmp_path / "golden"
    gold.mkdir()
    np.save(gold / "fw_add.0.5.npy", A)
    np.save(gold / "dev_add.0.5.npy", A * 0)
    pair = map_tensors(open_npu_dump(run), open_golden(gold)).pairs[0]
    assert pair.how == "original_op" and pair.golden.op == "fw_add" and pair.ground_truth == "fw/add"
