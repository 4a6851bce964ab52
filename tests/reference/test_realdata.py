"""End to end on a real pretrained model: onnxruntime golden dump, an Ascend-style fp16 NC1HWC0
dump with fused ops and its offline-model JSON written by our writer, mapped back element by element."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from accuscope.engine.compare.mapping import map_tensors
from accuscope.engine.demo.npusim import simulate
from accuscope.engine.runs.ortdump import dump_onnx
from accuscope.engine.sides.registry import load_graph, open_golden
from accuscope.engine.sources.npudump import open_npu_dump


@pytest.fixture(scope="module")
def converted(cls_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    x = np.random.default_rng(7).standard_normal((1, 3, 48, 192)).astype(np.float32)
    dump_onnx(cls_model, root / "golden", {"x": x}, timestamp=1700000000000000)
    golden = open_golden(root / "golden")
    sim = simulate(load_graph(cls_model), golden, str(root / "npu"), model_name="cls")
    return golden, open_npu_dump(root / "npu" / "dump"), load_graph(sim.model_json), sim


def test_fused_device_ops_and_layouts_look_like_an_atc_conversion(converted):
    golden, npu, om, sim = converted
    fused = [n for n in om.nodes if n.fused and len(n.fused) > 1]
    assert len(fused) == 35 and {n.type for n in fused} == {"Conv2D"}  # every Conv+BatchNorm
    assert sum(len(n.fused) == 3 for n in fused) == 6  # ... followed by a Relu
    assert Counter(t.format for t in npu.tensors)["NC1HWC0"] > 100
    assert all(t.dtype == np.float16 for t in npu.tensors if t.format == "NC1HWC0")
    assert [f.op_type for f in npu.files[:1]] == ["TransData"]


def test_every_tensor_maps_through_fusion_attributes_and_matches_element_by_element(converted):
    golden, npu, om, _ = converted
    mapping = map_tensors(npu, golden, om)
    assert len(mapping.pairs) == len(npu.tensors)
    unmatched = Counter(p.reason.split(":")[0] for p in mapping.unmatched_npu)
    assert set(unmatched) <= {"device-only op"}, unmatched
    assert {p.how for p in mapping.matched} == {"fusion"}
    for p in mapping.matched:
        g = np.asarray(p.golden.load())
        n = p.npu.load()
        assert n.shape == g.shape, p.npu.name
        assert np.array_equal(n, g.astype(n.dtype)), p.npu.name
    first_conv = next(p for p in mapping.matched if p.op.op_type == "Conv2D" and p.npu.io == "input")
    assert first_conv.golden.op == "x" and first_conv.npu.conversion == "NC1HWC0->NCHW"
    assert any(p.ground_truth.count(",") == 2 for p in mapping.pairs)


def test_without_the_model_outputs_still_map_through_original_op(converted):
    golden, npu, _, _ = converted
    mapping = map_tensors(npu, golden)
    outputs = [p for p in mapping.pairs if p.npu.io == "output" and p.op.op_type != "TransData"]
    assert outputs and all(p.golden is not None and p.how == "original_op" for p in outputs)
    fused_inputs = [p for p in mapping.unmatched_npu if p.npu.io == "input"]
    assert fused_inputs and all("no golden tensor named" in p.reason for p in fused_inputs)
