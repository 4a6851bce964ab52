"""GE's graph dumps as CANN wrote them (tests/fixtures/ge, from hicann/oam-tools): the ge_proto_*.txt
ModelDef and the ge_onnx_*.pbtxt ONNX text of the same graph read as one Graph; the ResNet-50 Build
graph's original op names."""
from __future__ import annotations

import lzma
import re

import pytest

from accuscope.engine.graphs import gegraph
from accuscope.engine.sides.registry import detect, load_graph
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError
from support.cli import accuscope
from support.data import FIXTURES

GE = FIXTURES / "ge"
PAIRS = [("ge_proto_00000000_Build.txt", "ge_onnx_00000000_graph_1_Build.pbtxt"),
         ("ge_proto_00000001_Build.txt", "ge_onnx_00000001_graph_11_Build.pbtxt")]
NODE_FIELDS = ("name", "type", "index", "seq_id", "subgraph", "inputs", "outputs", "input_shapes", "output_shapes",
               "output_dtypes", "origins")


@pytest.mark.parametrize(("proto", "onnx"), PAIRS, ids=["graph_1", "graph_11"])
def test_both_forms_of_one_graph_are_one_graph(proto, onnx):
    a, b = load_graph(GE / proto), load_graph(GE / onnx)
    assert detect(GE / onnx).kind == kinds.GE_GRAPH
    assert re.search(r'op_type: "ge:\w+"', (GE / onnx).read_text())  # the types the file names, read without `ge:`
    assert (b.name, b.kind) == (a.name, a.kind) and b.nodes
    assert [[getattr(n, f) for f in NODE_FIELDS] for n in b.nodes] == [[getattr(n, f) for f in NODE_FIELDS]
                                                                         for n in a.nodes]
    assert (b.inputs, b.outputs, b.weights) == (a.inputs, a.outputs, a.weights)
    assert sum(len(n.inputs) for n in a.nodes) > 0
    for x, y in zip(a.nodes, b.nodes):
        common = set(x.attrs) & set(y.attrs) - {"_origin_shapes"}
        assert len(common) >= 3 and {k: y.attrs[k] for k in common} == {k: x.attrs[k] for k in common}, x.name
        # an origin shape the ModelDef leaves unset the ONNX form writes as () (GE writes every descriptor's)
        assert [s for s in y.attrs["_origin_shapes"] if s] == [s for s in x.attrs["_origin_shapes"] if s]
    # dumped at DUMP_GE_GRAPH=2: GE wrote no string attributes into the ONNX form, so an op's empty
    # _datadump_original_op_names (NetOutput's) is there unknown; the graph says why
    assert [n.fused or [] for n in b.nodes] == [n.fused or [] for n in a.nodes]
    assert any(n.fused == [] for n in a.nodes) and all(n.fused is None for n in b.nodes)
    assert any("only at DUMP_GE_GRAPH=1" in note for note in b.notes)


def test_onnx_form_carries_original_op_names_as_ge_writes_them_at_dump_level_1(tmp_path):
    """At DUMP_GE_GRAPH=1 GE adds the string attributes: an op's list as STRINGS, a descriptor's
    origin name as `output_desc_attr__datadump_origin_name:k` (metadef ge_ir_utils.cc)."""
    text = (GE / "ge_onnx_00000000_graph_1_Build.pbtxt").read_text()
    anchor = '    name: "Variable/Assign"\n    op_type: "ge:Assign"\n'
    assert anchor in text
    added = ('    attribute {\n      name: "_datadump_original_op_names"\n      strings: "Variable/Assign"\n'
             '      strings: "Variable/read"\n      type: STRINGS\n    }\n'
             '    attribute {\n      name: "output_desc_attr__datadump_origin_name:0"\n      s: "Variable/Assign"\n'
             '      type: STRING\n    }\n')
    path = tmp_path / "ge_onnx_00000000_graph_1_Build.pbtxt"
    path.write_text(text.replace(anchor, anchor + added))
    g = load_graph(path)
    node = g.node("Variable/Assign")
    assert node is not None
    assert node.fused == ["Variable/Assign", "Variable/read"] and node.origins == [("Variable/Assign", 0)]
    assert not any("DUMP_GE_GRAPH=1" in note for note in g.notes)


def test_resnet50_build_graph_names_its_original_ops(tmp_path):
    path = tmp_path / "ge_proto_00000062_Build.txt"
    path.write_bytes(lzma.decompress((GE / "ge_proto_00000062_Build.txt.xz").read_bytes()))
    ops = gegraph._plain(gegraph.parse_text_format(path.read_text()))["graph"][0]["op"]
    named = [op for op in ops if any(a["key"] == "_datadump_original_op_names" for a in op.get("attr", []))]
    assert (len(named), len(ops)) == (165, 170)
    g = load_graph(path)
    assert g.kind == kinds.OM and len(g.nodes) == 62 and len(g.weights) == 108  # 108 Const ops are weights
    assert sum(n.fused is not None for n in g.nodes) == 57 and sum(bool(n.fused) for n in g.nodes) == 53
    assert sum(len(n.fused or []) > 1 for n in g.nodes) > 0  # fused ops (a conv with its batch norm and relu)


def test_inspect_reads_the_onnx_form_as_a_ge_graph_whatever_its_name(tmp_path):
    done = accuscope("inspect", GE / "ge_onnx_00000000_graph_1_Build.pbtxt")
    assert done.returncode == 0, done.stderr
    assert "OM model" in done.stdout and "Variable/Assign" in done.stdout and "Assign" in done.stdout
    assert "Caffe" not in done.stdout + done.stderr
    renamed = tmp_path / "graph.pbtxt"  # known by producer_name "GE", ahead of the Caffe sniff that takes .pbtxt
    renamed.write_bytes((GE / "ge_onnx_00000000_graph_1_Build.pbtxt").read_bytes())
    assert gegraph.sniff(str(renamed)) and detect(renamed).kind == kinds.GE_GRAPH
    caffe = tmp_path / "net.pbtxt"
    caffe.write_text('name: "LeNet"\nproducer: "GE"\nlayer { name: "data" type: "Input" top: "data" }\n')
    assert detect(caffe).kind == kinds.CAFFE


def test_a_damaged_onnx_form_is_refused_naming_the_file(tmp_path):
    text = (GE / "ge_onnx_00000001_graph_11_Build.pbtxt").read_text()
    cut = tmp_path / "ge_onnx_00000001_graph_11_Build.pbtxt"
    cut.write_text(text[:len(text) // 2] + "\n")
    done = accuscope("inspect", cut)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert re.search(rf"{re.escape(str(cut))}: line \d+: end of file inside a message", done.stderr)
    bad = tmp_path / "graph.pbtxt"
    bad.write_text(text.replace('op_type: "ge:Unique"', "op_type: @", 1))
    done = accuscope("inspect", bad)
    assert done.returncode == 2 and re.search(rf"{re.escape(str(bad))}: line \d+: unexpected character '@'", done.stderr)
    with pytest.raises(SourceError, match=r"no graph \{ \.\.\. \} in this file"):
        (tmp_path / "ge_onnx_1_empty.pbtxt").write_text('ir_version: 6\nproducer_name: "GE"\n')
        load_graph(tmp_path / "ge_onnx_1_empty.pbtxt")
