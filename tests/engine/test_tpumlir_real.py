"""tpu-mlir as it is: files tpu-mlir 1.30.2 wrote for the PP-OCR classifier (F16, bm1684x; made by
tests/fixtures/tpumlir/make_fixtures.py), and npz_tool compare's own verdicts on them (npz_tool.json).

model_transform folds every BatchNormalization into its Conv and keeps the Conv's loc name: against
the original model's run (model_runner on the ONNX, onnx_out.npz), npz_tool pairs by name and fails
37 tensors; accuscope re-pairs them to the golden tensor the fused Conv's output stands for, and
says so with both cosines.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.compare import judgement
from accuscope.engine.compare.comparison import execute, plan
from accuscope.engine.compare.judgement import NOISY
from accuscope.engine.compare.pair import DEVICE_ONLY
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.compare.summary import summarize
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.sides.registry import detect, load_graph
from accuscope.engine.sources import tpumlir
from support.narrow import present

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "tpumlir"
NPZ = ["cls_in_f32.npz", "cls_top_outputs.npz", "cls_ref_outputs.npz", "cls_bm1684x_f16_tpu_outputs.npz",
       "cls_bm1684x_f16_model_outputs.npz", "onnx_out.npz", "bmodel_out.npz"]
NPZ_TOOL = json.loads((HERE / "npz_tool.json").read_text())


def npz_tool(target: str, reference: str) -> dict:
    return next(c for c in NPZ_TOOL["compares"] if (c["target"], c["reference"]) == (target, reference))


def tolerance(cos: float, euclid: float) -> Thresholds:
    t = Thresholds()
    t.set_tolerance(cos, euclid)
    return t


def run(npu: str | Path, golden: str | Path, thresholds: Thresholds, **models):
    p = plan(CompareSpec(str(npu), str(golden), thresholds=thresholds, **models))
    table = execute(p, workers=1)
    assert table is not None
    return p, table, summarize(table, thresholds)


@pytest.mark.parametrize("name", NPZ)
def test_every_npz_the_tools_wrote_is_recognised_by_content_not_by_name(tmp_path, name):
    assert detect(str(HERE / name)).kind == tpumlir.KIND
    if name == "cls_in_f32.npz":
        return  # the input alone ({"x": ...}) is tpu-mlir's by its name only: its content is any npz's
    anonymous = tmp_path / "anything.npz"
    shutil.copy(HERE / name, anonymous)
    assert detect(str(anonymous)).kind == tpumlir.KIND, name


def test_plain_npz_of_onnx_names_stays_a_plain_npz(tmp_path):
    np.savez(tmp_path / "a.npz", **{"conv2d_53.tmp_0": np.zeros(3), "x": np.zeros(2)})  # type: ignore[arg-type]  # numpy's stub reads **arrays as allow_pickle
    assert detect(str(tmp_path / "a.npz")).kind == "npz"


def test_top_against_model_transforms_reference_passes_as_npz_tool_says():
    told = npz_tool("cls_top_outputs.npz", "cls_ref_outputs.npz")
    assert told["verdict"] == "PASSED" and told["compared"] == 91 and told["failed"] == 0
    p, table, summary = run(HERE / "cls_top_outputs.npz", HERE / "cls_ref_outputs.npz", tolerance(0.99, 0.99))
    assert summary.failing == 0
    assert "npz_tool compare --tolerance 0.99,0.99" in summary.judged and "NOT_SIMILAR 0" in summary.judged
    by_op = dict(zip(table.columns["npu_op"], table.columns["tpu_verdict"]))
    for name, verdict in told["tensors"].items():  # npz_tool's word on every tensor it compared
        assert by_op[name] in (verdict["verdict"], "CLOSE" if verdict["verdict"] == "EQUAL" else ""), name


def test_top_against_the_onnx_run_repairs_the_folded_batchnorms_with_evidence():
    told = npz_tool("cls_top_outputs.npz", "onnx_out.npz")
    failed = {name for name, v in told["tensors"].items() if not v["passed"]}
    assert told["verdict"] == "FAILED" and len(failed) == 37  # npz_tool pairs by name: two different tensors
    p, table, summary = run(HERE / "cls_top_outputs.npz", HERE / "onnx_out.npz", tolerance(0.99, 0.99))
    assert summary.failing == 0  # a fused name collision never reads as a failing op
    repaired = {r.npu.split(":")[0]: r for r in p.coverage.repaired}
    assert set(repaired) == failed
    first = repaired["conv2d_53.tmp_0_Conv"]
    assert first.now == "batch_norm_0.tmp_2_BatchNormalization:output:0"
    assert first.now_cos > 0.9999 and first.was_cos < 0.9 and first.rule == "fused: BatchNormalization folded into Conv"
    assert "cos 1.0000000" in first.text() and f"cos {first.was_cos:.7f}" in first.text()
    row = list(table.columns["npu_op"]).index("conv2d_53.tmp_0_Conv")
    assert table.columns["how"][row] == first.rule
    assert table.columns["golden_op"][row] == "batch_norm_0.tmp_2_BatchNormalization"
    assert "re-paired 37 in fused chains" in p.coverage.line(len(p.npu.ops))
    assert p.coverage.to_meta()["repaired"][0]["now_cos"] > 0.9999
    unused = dict(p.coverage.golden_unused)
    assert "re-paired" in unused["conv2d_53.tmp_0_Conv:output:0"]
    assert repaired["conv2d_56.tmp_0_Conv"].rule.endswith("Add folded into Conv")  # the bias, cos 0.997 by identity


def test_the_models_say_the_same_with_their_own_evidence():
    onnx = str(Path.home() / ".cache/accuscope-tests/rapidocr-models/ch_ppocr_mobile_v2.0_cls_infer.onnx")
    if not Path(onnx).exists():
        pytest.skip("the PP-OCR classifier is not cached")
    p, _, summary = run(HERE / "cls_top_outputs.npz", HERE / "onnx_out.npz", tolerance(0.99, 0.99),
                        npu_model=str(HERE / "cls.mlir"), golden_model=onnx)
    assert summary.failing == 0 and len(p.coverage.repaired) == 37
    assert all(r.source.startswith("golden model") for r in p.coverage.repaired)


def test_bmodel_outputs_are_recognised_and_paired_with_the_onnx_runs_output():
    p, table, summary = run(HERE / "bmodel_out.npz", HERE / "onnx_out.npz", tolerance(0.99, 0.90))
    assert list(table.columns["npu_op"]) == ["save_infer_model/scale_0.tmp_1_Softmax_f32"]
    assert list(table.columns["golden_op"]) == ["save_infer_model/scale_0.tmp_1_Identity"]
    assert p.coverage.outputs_paired == 1 and summary.failing == 0


def test_the_mlir_files_load_as_models():
    origin, top, tpu = (load_graph(HERE / n) for n in ("cls_origin.mlir", "cls.mlir", "cls_bm1684x_f16_tpu.mlir"))
    for g in (origin, top, tpu):
        assert g.kind == "mlir" and g.inputs == ["x"] and g.weights
    assert top.outputs == ["save_infer_model/scale_0.tmp_1_Softmax"]
    assert tpu.outputs == ["save_infer_model/scale_0.tmp_1_Softmax_f32"]
    conv = top.node("conv2d_53.tmp_0_Conv")
    assert conv is not None
    assert conv.type == "top.Conv" and conv.inputs[0] == "x" and conv.output_shapes == [(1, 8, 24, 8)]
    assert [n.name for n in top.nodes].index("conv2d_53.tmp_0_Conv") < [n.name for n in top.nodes].index("relu_0.tmp_0_Relu")
    relu = top.node("relu_0.tmp_0_Relu")  # a Conv with its Relu folded in: the Relu's loc, the Conv's type
    assert relu is not None
    assert relu.type == "top.Conv" and relu.fused == ["relu_0.tmp_0_Relu", "conv2d_54.tmp_0_Conv"]
    casts = [n for n in tpu.nodes if n.type == "tpu.Cast"]
    assert len(casts) == 40 and present(tpu.node("xconv2d_53.tmp_0_Conv_f16")).output_dtypes == ["float16"]
    assert detect(str(HERE / "cls.mlir")).is_model


def test_lowerings_casts_are_the_converters_own_and_the_tolerance_judges_as_npz_tool():
    told = npz_tool("cls_bm1684x_f16_tpu_outputs.npz", "cls_top_outputs.npz")
    assert told["verdict"] == "PASSED" and told["failed"] == 0
    p, table, summary = run(HERE / "cls_bm1684x_f16_tpu_outputs.npz", HERE / "cls_top_outputs.npz",
                            tolerance(0.99, 0.90))  # its time: benchmarks/bench_tpumlir.py
    casts = [pair for pair in p.pairs if pair.op.op_type == "tpu.Cast"]
    assert len(casts) == 40 and all(c.ground_truth == DEVICE_ONLY and "inserted by the conversion" in c.reason
                                    for c in casts)
    assert not [pair for pair in p.pairs if pair.golden is None and pair.ground_truth != DEVICE_ONLY]
    assert summary.failing == 0  # mean_rel > 1 on a SIMILAR row is not tpu-mlir's judging
    assert len(p.npu.tensors) == 150
    _, table, msit = run(HERE / "cls_bm1684x_f16_tpu_outputs.npz", HERE / "cls_top_outputs.npz", Thresholds())
    state = judgement.evaluate(table, Thresholds())  # msit's thresholds: mean_rel > 1 on rows whose red passes is noise
    assert not msit.judged and msit.failing == 0 and state.noisy.any()
    assert all(set(state.broken_keys(int(r))) <= NOISY for r in np.flatnonzero(state.noisy))
    p, _, summary = run(HERE / "cls_bm1684x_f16_tpu_outputs.npz", HERE / "cls_top_outputs.npz", tolerance(0.99, 0.90),
                        npu_model=str(HERE / "cls_bm1684x_f16_tpu.mlir"))
    assert summary.failing == 0 and p.coverage.outputs_paired >= 1
    assert not [pair for pair in p.pairs if pair.golden is None and pair.ground_truth != DEVICE_ONLY]


def test_a_bmodel_output_lowered_into_several_ops_pairs_with_the_onnx_ops_output(tmp_path):
    """tpu-mlir's INT8 bmodel of PP-OCR cls names its one output `..._Softmax__softmax_reshape_f32` (the
    Softmax lowered into a softmax and a reshape, stored as f32): the ONNX Softmax's result, the network's
    output. It paired with no ONNX tensor (the chain of cls at INT8 stopped at its bmodel). The same
    output's values (the F16 bmodel's) under the INT8 bmodel's name."""
    with np.load(HERE / "bmodel_out.npz") as z:
        (value,) = z.values()
    np.savez(tmp_path / "cls_bm1684x_int8_sym_model_outputs.npz",
             **{"save_infer_model/scale_0.tmp_1_Softmax__softmax_reshape_f32": value})
    p, table, summary = run(tmp_path / "cls_bm1684x_int8_sym_model_outputs.npz", HERE / "onnx_out.npz",
                            tolerance(0.99, 0.90))
    assert list(table.columns["golden_op"]) == ["save_infer_model/scale_0.tmp_1_Identity"]
    assert p.coverage.outputs_paired == 1 and summary.failing == 0
    # in a run of every op such a name is a step of a lowering (rec's top: `p2o.Slice.5_Slice_r_new`), not
    # the ONNX op's result: it keeps its own name
    np.savez(tmp_path / "top.npz", **{"x_Conv": value, "p2o.Slice.5_Slice_r_new": value})
    tensors, _ = tpumlir.read(str(tmp_path / "top.npz"))
    assert [t.tensor_name for t in tensors] == ["x", "p2o.Slice.5_Slice_r_new"]
