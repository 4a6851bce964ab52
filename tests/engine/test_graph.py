"""Model graphs from ONNX, Ascend offline-model JSON and Caffe prototxt, as a user would see them."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from accuscope.engine.graphs.caffegraph import parse_text_format
from accuscope.engine.graphs.graph import Graph
from accuscope.engine.sides.registry import detect, load_graph
from accuscope.engine.sources.tensor import SourceError
from support.bounded import ends
from support.narrow import present

# ---------------------------------------------------------------- real PP-OCR models

@pytest.fixture(scope="module", params=["cls_model", "det_model"])
def real(request) -> tuple[onnx.ModelProto, Graph]:
    path = request.getfixturevalue(request.param)
    return onnx.load(str(path)), load_graph(path)


def test_real_model_ops_are_the_non_constant_nodes(real):
    model, graph = real
    constants = [n for n in model.graph.node if n.op_type == "Constant"]
    assert graph.kind == "onnx"
    assert len(graph.nodes) == len(model.graph.node) - len(constants)
    assert {o for n in constants for o in n.output} <= graph.weights
    assert [n.index for n in graph.nodes] == list(range(len(graph.nodes)))
    assert [n.seq_id for n in graph.nodes] == list(range(1, len(graph.nodes) + 1))
    assert Counter(n.type for n in graph.nodes) == Counter(n.op_type for n in model.graph.node) - Counter(Constant=999)


def test_real_model_names_are_unique_and_present(real):
    _, graph = real
    names = [n.name for n in graph.nodes]
    assert all(names) and len(set(names)) == len(names)
    assert all(graph.node(n) is node for n, node in zip(names, graph.nodes))


def test_real_model_edges_match_the_onnx_file(real):
    model, graph = real
    ops = [n for n in model.graph.node if n.op_type != "Constant"]
    for onnx_node, node in zip(ops, graph.nodes):  # PP-OCR files are in topological order
        assert node.inputs == [i for i in onnx_node.input if i]
        assert node.outputs == list(onnx_node.output)
        for j, t in enumerate(node.outputs):
            assert graph.producer(t) == (node, j)
        for i, t in enumerate(node.inputs):
            assert (node, i) in graph.consumers(t)
            if t in graph.weights or t in graph.inputs:
                assert graph.producer(t) is None
            else:
                assert graph.producer(t)[0].index < node.index
    assert graph.inputs == ["x"]
    assert graph.outputs == [o.name for o in model.graph.output]
    assert [graph.producer(t)[0] for t in graph.outputs] == graph.output_nodes


def test_real_model_convolutions_have_inferred_shapes(real):
    _, graph = real
    convs = [n for n in graph.nodes if n.type == "Conv"]
    assert convs
    for conv in convs:
        shape = conv.output_shapes[0]
        assert shape is not None and len(shape) == 4 and isinstance(shape[1], int)  # channels known, H/W may be dynamic
        assert conv.output_dtypes == ["float32"]
        assert conv.input_shapes[1] is not None and len(conv.input_shapes[1]) == 4  # the weight


def test_det_model_dynamic_dims_are_none(det_model):
    graph = load_graph(det_model)
    first = graph.consumers("x")[0][0]
    assert first.input_shapes[0] == (None, 3, None, None)
    assert first.output_shapes[0] == (None, 16, None, None)
    assert first.attrs["strides"] == [2, 2] and first.attrs["group"] == 1
    assert graph.output_nodes[0].type == "Sigmoid"


def test_cls_model_unnamed_constants_do_not_become_nodes(cls_model):
    graph = load_graph(cls_model)
    assert graph.node("Constant_0") is None
    assert graph.node("Add@9") is not None
    assert "batch_norm_14.tmp_2" in {t for n in graph.nodes for t in n.outputs}


# ---------------------------------------------------------------- hand-built ONNX

def _tiny_onnx(tmp_path, **save_kwargs):
    """x -> Relu -> If(cond) -> Clip(no min) -> y, written out of order, with a weight listed in graph.input."""
    f = TensorProto.FLOAT
    then_g = helper.make_graph([helper.make_node("Neg", ["r"], ["then_out"], name="neg_in_then")], "then",
                               [], [helper.make_tensor_value_info("then_out", f, [1, 4])])
    else_g = helper.make_graph([helper.make_node("Abs", ["r"], ["else_mid"]),
                                helper.make_node("Identity", ["else_mid"], ["else_out"])], "else",
                               [], [helper.make_tensor_value_info("else_out", f, [1, 4])])
    w = numpy_helper.from_array(np.full((1, 4), 0.5, np.float32), "w")
    nodes = [
        helper.make_node("Clip", ["branch", "", "maxv"], ["y"]),                     # consumes If output: out of order
        helper.make_node("If", ["cond"], ["branch"], then_branch=then_g, else_branch=else_g, name="choose"),
        helper.make_node("Constant", [], ["maxv"], value=numpy_helper.from_array(np.float32(6.0))),
        helper.make_node("Add", ["x", "w"], ["a"], name="Relu_4"),                    # collides with a fallback name
        helper.make_node("Relu", ["a"], ["r"]),
    ]
    graph = helper.make_graph(nodes, "tiny",
                              [helper.make_tensor_value_info("x", f, ["batch", 4]),
                               helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                               helper.make_tensor_value_info("w", f, [1, 4])],
                              [helper.make_tensor_value_info("y", f, [1, 4])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "tiny.onnx"
    onnx.save_model(model, str(path), **save_kwargs)
    return path


def test_tiny_onnx_order_names_weights_and_if_bodies(tmp_path):
    graph = load_graph(_tiny_onnx(tmp_path))
    assert [n.type for n in graph.nodes] == ["Add", "Relu", "If", "Clip"]
    assert [n.name for n in graph.nodes] == ["Relu_4", "Relu_4_1", "choose", "Clip_0"]
    assert any("topological" in note for note in graph.notes)
    assert graph.inputs == ["x", "cond"]  # "w" is an initializer, not a network input
    assert graph.weights == {"w", "maxv"}
    assert present(graph.node("Relu_4")).input_shapes == [(None, 4), (1, 4)]

    choose = graph.node("choose")
    assert choose is not None
    assert sorted(choose.attrs["_subgraph_outputs"]) == ["else_mid", "else_out", "then_out"]
    assert choose.attrs["_subgraph_inputs"] == ["r"]  # read from the outer graph: If must run after Relu
    assert graph.producer("then_out") is None  # bodies are noted, not expanded
    assert len(graph.nodes) == 4
    assert choose.attrs["then_branch"].startswith("<graph then")

    clip = graph.node("Clip_0")
    assert clip is not None
    assert clip.inputs == ["branch", "maxv"]  # the omitted optional min is dropped
    assert graph.producer("branch") == (choose, 0)
    assert graph.consumers("a") == [(graph.node("Relu_4_1"), 0)]
    assert [n.name for n in graph.output_nodes] == ["Clip_0"]


def test_onnx_with_missing_external_data_still_opens(tmp_path):
    path = _tiny_onnx(tmp_path, save_as_external_data=True, all_tensors_to_one_file=True,
                      location="tiny.data", size_threshold=0)
    (tmp_path / "tiny.data").unlink()
    graph = load_graph(path)
    assert graph.weights == {"w", "maxv"} and len(graph.nodes) == 4


def test_onnx_shape_inference_failure_falls_back_to_declared_shapes(tmp_path, monkeypatch):
    def broken(model, *a, **k):
        raise onnx.shape_inference.InferenceError("boom")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", broken)
    graph = load_graph(_tiny_onnx(tmp_path))
    assert any("shape inference failed" in n for n in graph.notes)
    assert present(graph.node("Clip_0")).output_shapes == [(1, 4)]  # from graph.output
    assert present(graph.node("Relu_4_1")).output_shapes == [None]  # nothing declared


# ---------------------------------------------------------------- Ascend offline model JSON

def _attr(key, value):
    return {"key": key, "value": value}


def _desc(dims, dtype="DT_FLOAT16", layout="NC1HWC0", attrs=()):
    return {"dtype": dtype, "layout": layout, "shape": {"dim": dims}, "attr": list(attrs)}


OM_MODEL = {
    "name": "resnet_om",
    "attr": [_attr("attr_model_out_nodes_name", {"list": {"s": ["fc1:0"]}})],
    "graph": [
        {"name": "main", "op": [
            {"name": "data", "type": "Data", "id": 1,
             "output_desc": [_desc([1, 3, 224, 224], "DT_FLOAT", "NCHW")]},
            {"name": "trans_TransData_1", "type": "TransData", "id": 2, "input": ["data:0"],
             "input_desc": [_desc([1, 3, 224, 224], "DT_FLOAT", "NCHW")],
             "output_desc": [_desc([1, 1, 224, 224, 16])],
             "attr": [_attr("_datadump_original_op_names", {"list": {}})]},
            {"name": "weights_const", "type": "Const", "id": 3, "output_desc": [_desc([64, 3, 7, 7])]},
            {"name": "conv1bn1relu1", "type": "Conv2D", "id": 4,
             "input": ["trans_TransData_1:0", "weights_const:0", "trans_TransData_1:-1"],
             "input_desc": [_desc([1, 1, 224, 224, 16]), _desc([64, 3, 7, 7], layout="FRACTAL_Z")],
             "attr": [_attr("_datadump_original_op_names", {"list": {"s": ["conv1", "bn1", "relu1"]}}),
                      _attr("_L1_fusion_sub_graph_no", {"s": "x"}), _attr("groups", {"i": "1"})],
             "output_desc": [_desc([1, 4, 112, 112, 16], attrs=[
                 _attr("_datadump_origin_name", {"s": "relu1"}),
                 _attr("_datadump_origin_output_index", {"i": 0}),
                 _attr("_datadump_origin_format", {"s": "NCHW"}),
                 _attr("origin_shape", {"list": {"i": [1, 64, 112, 112]}})])]},
            {"name": "fc1", "type": "MatMulV2", "id": 5, "input": ["conv1bn1relu1:0"],
             "input_desc": [_desc([1, 4, 112, 112, 16])], "output_desc": [_desc([1, 1000], layout="ND")]},
            {"name": "out", "type": "NetOutput", "id": 6, "input": ["fc1:0"]},
        ]},
        {"name": "branch_sub", "op": [
            {"name": "sub_data", "type": "Data", "output_desc": [_desc([1, 1000], layout="ND")]},
            {"name": "sub_relu", "type": "Relu", "input": ["sub_data:0"], "output_desc": [_desc([-1, 1000])]},
        ]},
    ],
}


def _write_om(tmp_path, model, name="model.json"):
    path = tmp_path / name
    path.write_text(json.dumps(model))
    return path


def test_om_json_ops_edges_and_sequence(tmp_path):
    graph = load_graph(_write_om(tmp_path, OM_MODEL))
    assert graph.kind == "om" and graph.name == "resnet_om"
    assert [n.name for n in graph.nodes] == ["data", "trans_TransData_1", "conv1bn1relu1", "fc1", "out",
                                             "sub_data", "sub_relu"]
    assert [n.seq_id for n in graph.nodes] == [1, 2, 4, 5, 6, 6, 7]  # "id", else position + 1
    assert [n.subgraph for n in graph.nodes][-3:] == ["", "branch_sub", "branch_sub"]
    conv = graph.node("conv1bn1relu1")
    assert conv is not None
    assert conv.inputs == ["trans_TransData_1:0", "weights_const:0"]  # control edge dropped
    assert graph.weights == {"weights_const:0"}
    assert graph.producer("conv1bn1relu1:0") == (conv, 0)
    assert graph.consumers("trans_TransData_1:0") == [(conv, 0)]
    assert graph.inputs == ["data:0"]  # the subgraph's Data is a parameter, not a network input
    assert graph.outputs == ["fc1:0"]
    assert [n.name for n in graph.output_nodes] == ["fc1"]


def test_om_json_fusion_origins_and_descs(tmp_path):
    graph = load_graph(_write_om(tmp_path, OM_MODEL))
    conv = graph.node("conv1bn1relu1")
    assert conv is not None
    assert conv.fused == ["conv1", "bn1", "relu1"]
    assert conv.origins == [("relu1", 0)]
    assert conv.attrs["_origin_shapes"] == [(1, 64, 112, 112)]
    assert conv.attrs["_output_layouts"] == ["NC1HWC0"]
    assert conv.attrs["groups"] == 1 and conv.attrs["_L1_fusion_sub_graph_no"] == "x"
    assert conv.output_shapes == [(1, 4, 112, 112, 16)] and conv.output_dtypes == ["float16"]
    assert conv.input_shapes == [(1, 1, 224, 224, 16), (64, 3, 7, 7)]
    assert present(graph.node("trans_TransData_1")).fused == []  # device-only op
    assert present(graph.node("fc1")).fused is None and present(graph.node("fc1")).origins == [None]  # kept its name
    assert present(graph.node("data")).output_dtypes == ["float32"]
    assert present(graph.node("sub_relu")).output_shapes == [(None, 1000)]


def test_om_json_output_fallbacks(tmp_path):
    model = json.loads(json.dumps(OM_MODEL))
    del model["attr"]
    assert load_graph(_write_om(tmp_path, model)).outputs == ["fc1:0"]  # what NetOutput consumes
    model["graph"][0]["op"] = [op for op in model["graph"][0]["op"] if op["type"] != "NetOutput"]
    assert load_graph(_write_om(tmp_path, model)).outputs == ["fc1:0", "sub_relu:0"]  # consumed by nobody
    model["attr"] = [_attr("attr_model_out_nodes_name", {"list": {"s": ["relu1", "nowhere:0"]}})]
    graph = load_graph(_write_om(tmp_path, model))
    assert graph.outputs == ["conv1bn1relu1:0"]  # a fused-away name found through the origins
    assert any("nowhere" in n for n in graph.notes)


# ---------------------------------------------------------------- Caffe prototxt

PROTOTXT = """\
name: "TinyNet"   # a comment after a value
input: "data"
input_shape { dim: 1 dim: 3 dim: 32 dim: 32 }
# whole-line comment
layer {
  name: "conv1"
  type: "Convolution"
  bottom: "data"
  top: "conv1"
  param { lr_mult: 1 } param { lr_mult: 2 }
  convolution_param { num_output: 8 kernel_size: 3 stride: 1 weight_filler { type: "xavier" } }
}
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layers { name: "pool1" type: POOLING bottom: "conv1" top: "pool1" pooling_param { pool: MAX kernel_size: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool1" top: "fc" inner_product_param { num_output: 10 } }
layer { name: "drop" type: "Dropout" bottom: "fc" top: "fc" include { phase: TRAIN } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
"""


def test_caffe_layers_in_place_and_params(tmp_path):
    path = tmp_path / "net.prototxt"
    path.write_text(PROTOTXT)
    graph = load_graph(path)
    assert graph.kind == "caffe" and graph.name == "TinyNet" and graph.weights == set()
    assert [(n.name, n.type) for n in graph.nodes] == [
        ("conv1", "Convolution"), ("relu1", "ReLU"), ("pool1", "Pooling"), ("fc", "InnerProduct"), ("prob", "Softmax")]
    conv, relu, pool = graph.nodes[:3]
    assert relu.inputs == ["conv1"] and relu.outputs == ["conv1@relu1"]  # in place, yet a DAG
    assert pool.inputs == ["conv1@relu1"]  # the newest version of the blob
    assert graph.consumers("conv1") == [(relu, 0)]
    assert graph.inputs == ["data"] and graph.outputs == ["prob"]
    assert conv.input_shapes == [(1, 3, 32, 32)]
    assert conv.attrs["convolution_param"] == {"num_output": 8, "kernel_size": 3, "stride": 1,
                                               "weight_filler": {"type": "xavier"}}
    assert conv.attrs["param"] == [{"lr_mult": 1}, {"lr_mult": 2}]
    assert pool.attrs["pooling_param"]["pool"] == "MAX"
    assert [n.seq_id for n in graph.nodes] == [1, 2, 3, 4, 5]


def test_caffe_input_layer_and_input_dim(tmp_path):
    path = tmp_path / "net.prototxt"
    path.write_text('input: "a" input_dim: 1 input_dim: 2 input_dim: 3 input_dim: 4\n'
                    'layer { name: "in" type: "Input" top: "b" input_param { shape { dim: [1, 8] } } }\n'
                    'layer { name: "cat" type: "Concat" bottom: "a" bottom: "b" top: "c" }\n')
    graph = load_graph(path)
    assert graph.inputs == ["a", "b"]
    assert present(graph.node("cat")).input_shapes == [(1, 2, 3, 4), (1, 8)]
    assert graph.outputs == ["c"]


def test_text_format_parser_details():
    msg = parse_text_format('a: "x\\"y" "z"; b: [1, 2.5, -3] c < d: true e: 1e3 > f: -inf g: 0x10 h: 1.5f')
    assert msg.to_dict() == {"a": 'x"yz', "b": [1, 2.5, -3], "c": {"d": True, "e": 1000.0}, "f": float("-inf"),
                             "g": 16, "h": 1.5}


def test_one_text_format_parser_reads_a_prototxt_and_a_ge_graph_alike():
    """caffegraph and gegraph read protobuf's text format by one parser (graphs/textformat.py): the same values
    (hex, `f` suffixes, inf, t/f, escapes, messages inside a list), the same refusals naming the line."""
    from accuscope.engine.graphs import gegraph
    text = 'a: 0x1F b: -inf c: t d: "\\303\\251" e: [{x: 1}, <x: 2>] f { g: 3.f }'
    assert parse_text_format(text).to_dict() == {"a": 31, "b": float("-inf"), "c": True, "d": "\u00e9",
                                                 "e": [{"x": 1}, {"x": 2}], "f": {"g": 3.0}}
    assert gegraph.parse_text_format(text) == {"a": [31], "b": [float("-inf")], "c": [True], "d": ["\u00e9"],
                                               "e": [{"x": [1]}, {"x": [2]}], "f": [{"g": [3.0]}]}
    for bad, said in (('a {\n b: "\\x" }', "line 2: bad escape in string"), ("a {\n b: 1 c", "line 2: end of file"),
                      ("a: 1\nb: @", "line 2: unexpected character '@'")):
        with pytest.raises(ValueError, match=said):
            parse_text_format(bad)
        with pytest.raises(SourceError, match=f"f.txt: {said}"):
            gegraph.parse_text_format(bad, "f.txt")


# ---------------------------------------------------------------- errors and dispatch

def test_missing_file(tmp_path):
    for name in ("none.onnx", "none.json", "none.prototxt", "none"):
        with pytest.raises(SourceError, match="no such file") as e:
            load_graph(tmp_path / name)
        assert name in str(e.value)


def test_garbage_onnx(tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\xff\xfe this is not protobuf \x00\x01" * 10)
    with pytest.raises(SourceError, match="bad.onnx: not an ONNX model"):
        load_graph(path)
    path.write_bytes(b"")
    with pytest.raises(SourceError, match="not an ONNX model"):
        load_graph(path)


def test_json_that_is_not_a_model(tmp_path):
    with pytest.raises(SourceError, match="other.json: not an offline-model JSON"):
        load_graph(_write_om(tmp_path, {"results": [1, 2]}, "other.json"))
    (tmp_path / "broken.json").write_text('{"graph": [\n  {"name": }\n]}')
    with pytest.raises(SourceError, match="broken.json: not valid JSON \\(line 2"):
        load_graph(tmp_path / "broken.json")


def test_a_long_number_that_is_no_number_is_refused_once(tmp_path):
    """`\\d+\\.?\\d*` split 200,000 digits each possible way before the letter refused them (minutes, issue 43)."""
    path = tmp_path / "net.prototxt"
    path.write_text('name: "n"\nx: ' + "1" * 200_000 + "a\n")
    with pytest.raises(SourceError, match=r"net\.prototxt: .*line 2: a number of 200,000 digits"):
        ends(load_graph, path)
    assert parse_text_format("a: 12 b: 1.5e3 c: 0x1F d: .5 e: 3.f f: -2.") == [
        ("a", 12), ("b", 1500.0), ("c", 31), ("d", 0.5), ("e", 3.0), ("f", -2.0)]


def test_prototxt_parse_error_names_the_line(tmp_path):
    path = tmp_path / "bad.prototxt"
    path.write_text('name: "n"\nlayer {\n  name: "a"\n  top: "b" }\n}\n')
    with pytest.raises(SourceError, match=r"bad\.prototxt: .*line 5"):
        load_graph(path)
    path.write_text('layer {\n  name: "a"\n')
    with pytest.raises(SourceError, match=r"line 2: end of file inside a message \(missing '}'\)"):
        load_graph(path)
    path.write_text('net: "train.prototxt"\nbase_lr: 0.01\n')  # a solver, not a net
    with pytest.raises(SourceError, match="not a Caffe network"):
        load_graph(path)


def test_directory_and_binary_om(tmp_path):
    with pytest.raises(SourceError, match="is a directory"):
        load_graph(tmp_path)
    (tmp_path / "m.om").write_bytes(b"IMOD")
    with pytest.raises(SourceError, match="atc --mode=1"):
        load_graph(tmp_path / "m.om")


def test_format_guessed_from_content(tmp_path):
    """A model's kind is the registry's one answer for its path (`detect`, as inspect and compare ask):
    a file whose name says nothing is known by its content; a name a format claims keeps its format."""
    (tmp_path / "model_json").write_text(json.dumps(OM_MODEL))
    (tmp_path / "deploy.txt").write_text(PROTOTXT)
    (tmp_path / "model.bin").write_bytes(_tiny_onnx(tmp_path).read_bytes())
    assert load_graph(tmp_path / "model_json").kind == detect(tmp_path / "model_json").kind == "om"
    assert load_graph(tmp_path / "deploy.txt").kind == detect(tmp_path / "deploy.txt").kind == "caffe"
    (tmp_path / "padded.txt").write_text("\n" * 3000 + " \t" + PROTOTXT)  # a `layer {` line after blank ones
    (tmp_path / "blank.txt").write_text("\n" * 4096)
    assert detect(tmp_path / "padded.txt").kind == "caffe"
    with pytest.raises(SourceError, match="a file of unknown kind"):
        detect(tmp_path / "blank.txt")
    with pytest.raises(SourceError, match=r"model\.bin: is dumped tensors \(raw \.bin"):  # as `compare` reads it
        load_graph(tmp_path / "model.bin")
