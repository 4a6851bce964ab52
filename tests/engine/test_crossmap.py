"""Pairing across implementations (compare/crossmap.py) on msprobe's own dumps of a MindSpore and a PyTorch
step (tests/fixtures/msprobe/cross, written by make_cross.py with msprobe 26.2, MindSpore 2.10 CPU, torch
CPU), held to the pairs msprobe's own layer mapping makes of the same files (msprobe_pairs.json)."""
import json
import os

import pytest

from accuscope.engine.compare import apitable, crossmap
from accuscope.engine.compare.comparison import plan
from accuscope.engine.compare.crossmap import PARAMETER_NAMES
from accuscope.engine.compare.inputs import BY_NAME, build_spec, check
from accuscope.engine.compare.mapping import read_mapping_file
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.sources.yamltext import yaml_load
from accuscope.engine.tasks.taskdoc import TaskDoc, spec_fields

CROSS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "msprobe", "cross")
MS, PT, LAYERS = (os.path.join(CROSS, p) for p in ("ms", "pt", "layer_mapping.yaml"))


def paired(p):
    return {x.npu.tensor_name: x.golden.tensor_name for x in p.pairs if x.golden is not None}


def test_layer_mapping_pairs_what_msprobe_pairs():
    with open(os.path.join(CROSS, "msprobe_pairs.json")) as fh:
        theirs = json.load(fh)
    p = plan(CompareSpec(MS, PT, mapping=LAYERS))
    tensors = {x.npu.tensor_name for x in p.pairs}
    expected = {k: v for k, v in theirs.items() if k in tensors and v != "N/A"}
    assert len(expected) == 130
    assert paired(p) == expected
    assert {x.how for x in p.pairs if x.golden is not None} == {"layer_mapping"}
    # every non-N/A entry of msprobe's, the scalars it lists too (softmax's dim, a scale): those as values
    assert not {k for k, v in theirs.items() if v != "N/A"} - tensors
    assert {x.npu.tensor_name for x in p.pairs if x.npu.value is not None and x.golden is not None} == {
        "Tensor.__mul__.0.forward.input.1", "Mint.softmax.0.forward.input.1", "Tensor.__mul__.1.forward.input.1",
        "Mint.softmax.1.forward.input.1"}
    unpaired = [x for x in p.pairs if x.golden is None]
    assert all("layer mapping:" in x.reason for x in unpaired)  # after the call's outcome (leftovers.py)


def test_frameworks_differ_the_api_table_pairs_and_lists_what_it_cannot():
    p = plan(CompareSpec(MS, PT))
    hows = [x.how for x in p.pairs if x.golden is not None]
    assert hows.count("tensor") == 22  # 2 and 2 more: scalar arguments
    with open(os.path.join(CROSS, "msprobe_pairs.json")) as fh:
        theirs = json.load(fh)
    for x in p.pairs:  # every pair the table and the name variants make is one msprobe's layer mapping makes too
        if x.how in ("api_table", "name_variants") and x.npu.tensor_name.rpartition(".")[2] not in PARAMETER_NAMES:
            assert theirs[x.npu.tensor_name] == x.golden.tensor_name  # (msprobe renames no parameter: gamma -> weight)
    # without a mapping file, of the 130 pairs msprobe's own layer mapping makes: 73 by the API table and
    # identical names alone, 103 with the module names read through crossmap.LAYER_NAMES
    expected = {k: v for k, v in theirs.items() if v != "N/A"}
    assert len(expected) == 130
    ours = {x.npu.tensor_name: x.golden.tensor_name for x in p.pairs if x.golden is not None}
    assert sum(1 for k, v in expected.items() if ours.get(k) == v) >= 103
    assert all(theirs[k] in (v, "N/A") for k, v in ours.items())
    assert hows.count("name_variants") >= 60
    # what pairing says is a coverage note (shown with the result), never a problem of the input
    text = " ".join(p.coverage.notes)
    assert "mindspore against pytorch" in text and "Primitive.Shape (9)" in text
    assert not any("paired across implementations" in str(q) for q in p.problems)


def test_structure_is_opt_in_marked_and_confident():
    base = plan(CompareSpec(MS, PT))
    p = plan(CompareSpec(MS, PT, match="structure"))
    structural = [x for x in p.pairs if x.how == "structure"]
    assert len(paired(p)) >= len(paired(base))
    assert all(0.5 <= x.confidence <= 1 and "structural pair (confidence" in x.reason for x in structural)
    assert all(x.confidence == 1.0 for x in p.pairs if x.how != "structure")
    names = {x.npu.tensor_name: x.golden.tensor_name for x in p.pairs if x.how in ("structure", "name_variants")}
    assert names["Cell.layers.0.attention.qkv.Dense.forward.0.output.0"] == \
        "Module.layers.0.self_attention.query_key_value.Linear.forward.0.output.0"
    assert names["Cell.final_norm.LayerNorm.forward.0.parameters.gamma"] == \
        "Module.final_layernorm.LayerNorm.forward.0.parameters.weight"


def test_structure_lists_doubtful_pairs():
    class T:
        def __init__(self, op, io, index, shape, module):
            self.op, self.io, self.index, self.shape, self.op_type = op, io, index, shape, module
            self.tensor_name, self.dtype_name, self.source = f"{op}.{io}.{index}", "float32", "/x/dump.json"

    class Df:
        def __init__(self, op, tensors):
            self.op_name, self.tensors = op, tensors

    class S:
        def __init__(self, ops):
            self.ops, self.tensors = ops, [t for d in ops for t in d.tensors]

    npu = S([Df("Mint.foo.0.forward", [T("Mint.foo.0.forward", "output", 0, (2, 3), "m")])])
    golden = S([Df("Torch.bar.0.forward", [T("Torch.bar.0.forward", "output", 0, (2, 3), "m")])])
    found = crossmap.pair(npu, golden, structure=True)
    (match,) = found.by_tensor.values()
    assert match.how == "structure" and match.confidence == 0.5
    assert found.doubtful == [("Mint.foo.0.forward", "Torch.bar.0.forward", 0.5)]
    assert "doubtful" in " ".join(crossmap.describe(found))


def test_table():
    assert apitable.targets("Mint.matmul")[0] == "Torch.matmul"
    assert apitable.targets("MintFunctional.gelu")[0] == "Functional.gelu"
    assert apitable.targets("Functional.dense") == ("Functional.linear", "Torch.linear", "Tensor.linear")
    assert apitable.targets("Primitive.BatchMatMul")[0] == "Torch.bmm"
    assert apitable.targets("Functional.flash_attention_score") == ("NPU.npu_fusion_attention",)
    assert apitable.targets("Primitive.Shape") == ()
    assert crossmap.translate("Cell.fc1.Dense.forward.0") == ("Module.fc1.Linear.forward.0",)
    assert crossmap.translate("Primitive.matmul.MatMul.3.forward")[0] == "Torch.matmul.3.forward"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_file_kinds(tmp_path):
    layer = crossmap.load(LAYERS)
    assert layer.kind == "layer_mapping" and layer.layers["Attention"] == {"qkv": "query_key_value", "proj": "dense"}
    old = crossmap.load(write(tmp_path, "old.yaml", "Cell:\n  network: module\nLayer:\n  attention: self_attention\n"))
    assert old.kind == "layer_mapping" and "TopLayer" in old.layers
    api = crossmap.load(write(tmp_path, "api.yaml", "- ms_api: Functional.conv2d\n  pt_api: Torch.conv2d\n"
                                                   "  ms_args: [0, 1]\n  pt_args: [0, 1]\n  ms_outputs: [0]\n"
                                                   "  pt_outputs: [0]\n"))
    assert api.kind == "api_mapping" and api.apis[0]["ms_args"] == [0, 1]
    cell = crossmap.load(write(tmp_path, "cell.yaml", "fc2.Dense: fc2.Linear\nconv1.Conv2d: conv3.Conv2d\n"))
    assert cell.kind == "cell_mapping"
    data = crossmap.load(write(tmp_path, "data.yaml", "Functional.flash_attention_score.4.forward.input.0: "
                                                     "NPU.npu_fusion_attention.4.forward.input.0\n"))
    assert data.kind == "data_mapping"
    own = crossmap.load(write(tmp_path, "own.yaml", "conv1: Conv_0  # a comment\n'a:output:0': b\n"))
    assert own.kind == "accuscope" and own.names == {"conv1": "Conv_0", "a:output:0": "b"}
    assert read_mapping_file(own.path) == own.names
    with pytest.raises(SourceError, match="layer-mapping"):
        read_mapping_file(LAYERS)
    with pytest.raises(SourceError, match="differ in length"):
        crossmap.load(write(tmp_path, "bad.yaml", "- ms_api: A.b\n  pt_api: C.d\n  ms_args: [0, 1]\n  pt_args: [0]\n"))
    assert check(BY_NAME["mapping"], LAYERS)[0].endswith("msprobe layer-mapping rules")


def test_data_api_and_cell_mapping_files(tmp_path):
    data = write(tmp_path, "data.yaml", "Mint.softmax.0.forward.output.0: Torch.softmax.1.forward.output.0\n"
                                       "Mint.softmax.1.forward.output.0: Torch.softmax.0.forward.output.0\n")
    p = plan(CompareSpec(MS, PT, mapping=data))
    hit = {x.npu.tensor_name: (x.golden.tensor_name, x.how) for x in p.pairs if x.how == "data_mapping"}
    assert hit == {"Mint.softmax.0.forward.output.0": ("Torch.softmax.1.forward.output.0", "data_mapping"),
                   "Mint.softmax.1.forward.output.0": ("Torch.softmax.0.forward.output.0", "data_mapping")}
    api = write(tmp_path, "api.yaml", "- ms_api: Mint.matmul\n  pt_api: Torch.matmul\n  ms_args: [1]\n"
                                     "  pt_args: [1]\n  ms_outputs: [0]\n  pt_outputs: [0]\n")
    p = plan(CompareSpec(MS, PT, mapping=api))
    by = {x.npu.tensor_name: x for x in p.pairs}
    assert by["Mint.matmul.0.forward.input.1"].how == "api_mapping"
    assert by["Mint.matmul.0.forward.input.0"].golden is None and "abandons" in by["Mint.matmul.0.forward.input.0"].reason
    cell = write(tmp_path, "cell.yaml", "layers.0.attention.qkv.Dense: layers.0.self_attention.query_key_value.Linear\n")
    p = plan(CompareSpec(MS, PT, mapping=cell))
    found = by_how(p, "cell_mapping")  # the renamed cell, and every Cell whose path and class PyTorch shares
    assert {"Cell.layers.0.attention.qkv.Dense.forward.0.input.0", "Cell.layers.0.attention.qkv.Dense.forward.0.output.0",
            "Cell.layers.0.attention.qkv.Dense.forward.0.parameters.weight",
            "Cell.layers.0.mlp.Mlp.forward.0.output.0"} <= found
    assert "Cell.layers.1.attention.qkv.Dense.forward.0.output.0" not in found


def by_how(p, how):
    return {x.npu.tensor_name for x in p.pairs if x.how == how}


def test_inputs():
    spec = build_spec({"npu": MS, "golden": PT, "out": "/tmp/x", "match": BY_NAME["match"].parse("structure")})
    assert spec.match == "structure"
    assert BY_NAME["match"].parse("") is None
    with pytest.raises(ValueError):
        BY_NAME["match"].parse("fuzzy")
    assert TaskDoc(spec_fields(spec)).spec().match == "structure"


def test_yaml_subset():
    doc = yaml_load("a:\n  b: 'c: d'  # note\n  e: [1, x]\nlist:\n- k: 1\n  j: 2\n- 3\n")
    assert doc == {"a": {"b": "c: d", "e": [1, "x"]}, "list": [{"k": 1, "j": 2}, 3]}
    with pytest.raises(SourceError, match="expected `key: value`"):
        yaml_load("a: 1\njust text\n", "f.yaml")


def test_structural_pairs_decided_are_read_by_the_next_run(tmp_path):
    """An accepted structural pair becomes a mapping-file pair (slot for slot, as the structure paired
    it), a rejected call stays unpaired; the decisions file is accuscope's own mapping file."""
    first = plan(CompareSpec(MS, PT, match="structure"))
    structural = {x.npu.tensor_name: x.golden.tensor_name for x in first.pairs if x.how in ("structure", "name_variants")}
    qkv, proj = "Cell.layers.0.attention.qkv.Dense.forward.0", "Cell.layers.0.attention.proj.Dense.forward.0"
    path = crossmap.decide(tmp_path, None, qkv, "Module.layers.0.self_attention.query_key_value.Linear.forward.0")
    assert crossmap.decide(tmp_path, path, proj, None) == path
    assert crossmap.load(path).kind == "accuscope" and read_mapping_file(path)[proj] == ""
    again = plan(CompareSpec(MS, PT, match="structure", mapping=path))
    by = {x.npu.tensor_name: x for x in again.pairs}
    accepted = [x for x in again.pairs if x.op.op_name == qkv]
    assert len(accepted) == 4 and all(x.how == "mapping" and x.confidence == 1.0 for x in accepted)
    assert {x.npu.tensor_name: x.golden.tensor_name for x in accepted} == \
        {k: v for k, v in structural.items() if k.startswith(qkv)}
    rejected = [x for x in again.pairs if x.op.op_name == proj]
    assert rejected and all(x.golden is None and "rejected in" in x.reason for x in rejected)
    assert by["Cell.layers.1.attention.qkv.Dense.forward.0.output.0"].how == "name_variants"  # the rest as before
    with pytest.raises(SourceError, match="does not rewrite msprobe's files"):
        crossmap.decide(tmp_path, LAYERS, qkv, None)
