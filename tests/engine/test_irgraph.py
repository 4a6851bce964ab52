"""graphs/irgraph: an OpenVINO IR read as text (no OpenVINO), on the IR NNCF wrote (tests/fixtures/openvino)."""
from __future__ import annotations

import pytest

from accuscope.engine.graphs.irgraph import constant_layers, constant_values, load_ir, port_names, read_ir
from accuscope.engine.graphs.optypes import CONVERTER_OWN
from accuscope.engine.sides.registry import detect, load_graph
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError
from support.data import FIXTURES
from support.narrow import present

INT8 = FIXTURES / "openvino" / "cls_int8.xml"


def test_the_int8_ir_as_a_graph():
    assert detect(INT8).kind == kinds.OPENVINO_IR
    g = load_graph(INT8)
    assert g.converted and not g.runnable and not g.cuttable
    assert g.inputs == ["x"] and g.outputs == ["save_infer_model/scale_0.tmp_1"]
    types = {n.type for n in g.nodes}
    assert "FakeQuantize" in types and "FakeQuantize" in CONVERTER_OWN
    assert not types & {"Const", "Convert", "Parameter", "Result"}  # weights and their decompression are weights
    named = [t for n in g.nodes for t in n.outputs if not t.startswith(f"{n.name}:")]
    assert len(named) == 146  # the ONNX value names the IR kept (OpenVINO's own outputs are `{op}:{k}`)
    bn = g.node("BatchNormalization@0")
    assert bn is not None and bn.outputs == ["batch_norm_0.tmp_2"] and present(g.producer(bn.inputs[0]))[0].type == "Convolution"


def test_constant_values_are_openvinos_own(tmp_path):
    """The Const layers' values read from the .bin without OpenVINO, as OpenVINO reads them; a .bin cut short
    leaves out those whose bytes it lacks (no exception)."""
    ov = pytest.importorskip("openvino")
    import numpy as np
    ir = read_ir(INT8)
    values = constant_values(INT8, set(ir.constants))
    theirs = {op.get_friendly_name(): op.get_data() for op in ov.Core().read_model(str(INT8)).get_ordered_ops()
              if op.get_type_name() == "Constant"}
    assert len(values) == len(ir.constants) > 100
    for tensor, value in values.items():
        assert np.array_equal(value, theirs[tensor.rsplit(":", 1)[0]]), tensor
    (tmp_path / "cut.xml").write_bytes(INT8.read_bytes())
    (tmp_path / "cut.bin").write_bytes(INT8.with_suffix(".bin").read_bytes()[:1000])
    assert 0 < len(constant_values(tmp_path / "cut.xml", set(ir.constants))) < len(values)


def test_port_names_and_weights_rule():
    assert port_names("a,b\\,c, d") == ["a", "b,c", "d"]
    assert port_names(None) == []
    # Const -> Convert -> Multiply(Const) is weights; a Parameter and what it feeds are not
    types = {"1": "Const", "2": "Convert", "3": "Const", "4": "Multiply", "5": "Parameter", "6": "Convolution"}
    sources = {"2": ["1"], "4": ["2", "3"], "6": ["5", "4"]}
    assert constant_layers(types, sources) == {"1", "2", "3", "4"}


def test_damaged_or_hostile_ir_is_a_source_error(tmp_path):
    bomb = tmp_path / "bomb.xml"
    bomb.write_text('<?xml version="1.0"?><!DOCTYPE net [<!ENTITY a "aaaa">]><net name="x"><layers/></net>')
    with pytest.raises(SourceError, match="DOCTYPE"):
        load_ir(bomb)
    cut = tmp_path / "cut.xml"
    cut.write_text(INT8.read_text()[:5000])
    with pytest.raises(SourceError, match="cut.xml: not an OpenVINO IR"):
        load_ir(cut)
    edge = tmp_path / "edge.xml"
    edge.write_text('<net name="x"><layers><layer id="0" name="p" type="Parameter"><output><port id="0"/></output>'
                    '</layer></layers><edges><edge from-layer="9" from-port="0" to-layer="0" to-port="0"/></edges></net>')
    with pytest.raises(SourceError, match="edge names a layer"):
        load_ir(edge)
