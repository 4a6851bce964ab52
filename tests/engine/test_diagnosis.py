"""The advisor on real cases built from PP-OCR models (from the rapidocr-onnxruntime wheel), each with
its expected verdict established independently of the advisor:

- a single-op cliff: one BatchNormalization whose variance (and scale, so the fp32 model is
  unchanged) lies beyond the float16 range; onnxconverter-common clamps it. Independently: the same
  conversion with that one node on the block list gives the output back.
- gradual drift: int8 dynamic quantization of every convolution. Independently: no convolution
  quantized alone makes even half of the full model's output error.
- a passing model with noisy local deviations: the plain float16 conversion.
- a model whose optimizer fused tensors away: onnxruntime's own optimized model as the candidate.
"""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort

from accuscope.engine.diagnose.advisor import advise
from accuscope.engine.runs.onnxedit import constants_as_initializers
from support.cli import accuscope
from support.models import cos, output


def test_single_op_cliff_is_named_with_its_cause(cls_cliff, tmp_path):
    from onnxconverter_common import float16
    root, ref, cand, bn, x = cls_cliff
    # independently of the advisor: keeping that one node in fp32 gives the output back
    golden = output(str(ref), x)
    assert cos(output(str(cand), x), golden) < 0.95
    kept = float16.convert_float_to_float16(onnx.load(str(ref)), keep_io_types=True, node_block_list=[bn])
    assert cos(output(kept, x), golden) > 0.9999

    r = accuscope("run", ref, cand, "--input", f"x={root / 'x.npy'}", "--out", tmp_path / "t", "--advisor")
    assert r.returncode == 0, r.stdout + r.stderr
    a = advise(tmp_path / "t", write=False)
    assert a is not None
    verdict, cause = a.findings[:2]
    assert verdict.rule == "verdict" and verdict.severity == "error" and "the model fails" in verdict.title
    assert cause.rule == "introduced" and cause.op == bn and cause.severity == "error"
    assert cause.evidence["cause"] == "fp16_range" and "float16" in cause.text and "block list" in cause.text
    assert not a.by_rule("drift")
    # the first line of the CLI is the verdict, the op comes next
    lines = [line for line in r.stdout.splitlines() if line[:1] in "✗!i"]
    assert "the model fails" in lines[0] and f"{bn} introduced the error" in lines[1]


def test_gradual_drift_is_said_where_no_op_explains_the_output(cls_model, tmp_path):
    """int8 dynamic quantization of every Conv/MatMul of the classifier, judged with the tighter
    relative error a quantized deployment is held to (red 1%)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    ref, cand = tmp_path / "cls.onnx", tmp_path / "cls8.onnx"
    onnx.save(constants_as_initializers(onnx.load(str(cls_model))), str(ref))
    quantize_dynamic(str(ref), str(cand), weight_type=QuantType.QInt8)
    x = np.random.default_rng(1).standard_normal((1, 3, 48, 192)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    golden = output(str(ref), x)
    full = np.linalg.norm(output(str(cand), x) - golden) / np.linalg.norm(golden)
    assert full > 0.01
    # independently of the advisor: no op quantized alone makes even half of that error
    for op in (n.name for n in onnx.load(str(ref)).graph.node if n.op_type in ("Conv", "MatMul")):
        quantize_dynamic(str(ref), str(tmp_path / "one.onnx"), weight_type=QuantType.QInt8, nodes_to_quantize=[op])
        one = output(str(tmp_path / "one.onnx"), x)
        assert np.linalg.norm(one - golden) / np.linalg.norm(golden) < full / 2, op

    r = accuscope("run", ref, cand, "--input", f"x={tmp_path / 'x.npy'}", "--out", tmp_path / "t",
                  "--threshold", "red=0.01")
    assert r.returncode == 0, r.stdout + r.stderr
    a = advise(tmp_path / "t", write=False)
    assert a is not None and a.primary is not None
    assert a.primary.rule == "verdict" and a.primary.severity == "error"
    drift = a.by_rule("drift")[0]
    assert drift.severity == "error" and "gradual drift from" in drift.title and "quantization" in drift.text
    assert drift.evidence["metric"] == "red" and len(drift.evidence["growth"]) > 10  # the series for a chart
    assert not [f for f in a.findings if f.rule == "introduced" and f.severity == "error"]


def test_the_op_that_made_most_error_is_named_through_the_quantizer_chain(det_model, tmp_path):
    """PP-OCRv4 det, every Conv int8: the quantizer replaced each Conv by a chain of nodes, yet the
    re-run (fed the candidate's own value of the Conv's input) names the Conv that made the most
    error, and a large share of the output's error comes from that Conv alone (checked
    independently)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    ref, cand = tmp_path / "det.onnx", tmp_path / "det8.onnx"
    onnx.save(constants_as_initializers(onnx.load(str(det_model))), str(ref))
    quantize_dynamic(str(ref), str(cand), weight_type=QuantType.QInt8)
    x = np.random.default_rng(4).standard_normal((1, 3, 96, 96)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = accuscope("run", ref, cand, "--input", f"x={tmp_path / 'x.npy'}", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    a = advise(tmp_path / "t", write=False)
    assert a is not None
    cause = a.by_rule("introduced")[0]  # beside the drift the other quantized convs add
    assert cause.severity in ("error", "warning") and cause.evidence["cause"] == "quantized"
    assert "quantized chain ConvInteger" in cause.text and "int8" in cause.text
    golden = output(str(ref), x)
    full = 1 - cos(output(str(cand), x), golden)
    conv = next(n.name for n in onnx.load(str(ref)).graph.node if n.op_type == "Conv" and cause.tensor.startswith(
        tuple(n.output)))
    quantize_dynamic(str(ref), str(tmp_path / "one.onnx"), weight_type=QuantType.QInt8, nodes_to_quantize=[conv])
    assert 1 - cos(output(str(tmp_path / "one.onnx"), x), golden) > full / 4  # a large share from that op alone


def test_passing_model_with_local_deviations_is_a_pass(cls_model, tmp_path):
    from onnxconverter_common import float16
    onnx.save(float16.convert_float_to_float16(onnx.load(str(cls_model)), keep_io_types=True),
              str(tmp_path / "fp16.onnx"))
    np.save(tmp_path / "x.npy", np.random.default_rng(6).standard_normal((1, 3, 48, 192)).astype(np.float32))
    r = accuscope("run", cls_model, tmp_path / "fp16.onnx", "--input", f"x={tmp_path / 'x.npy'}", "--out",
                  tmp_path / "t", "--threshold", "red=0.001", "--advisor", "--fail-on-error")
    assert r.returncode == 0, r.stdout  # rows break the tightened red threshold, the output does not: the verdict
    # passes, and --fail-on-error follows the verdict alone
    a = advise(tmp_path / "t", write=False)
    assert a is not None and a.primary is not None
    assert a.primary.rule == "verdict" and "the model passes" in a.primary.title  # ...but the output does not
    assert all(f.severity != "error" for f in a.findings)
    local = [f for f in a.findings if f.rule == "introduced"]
    assert not local or "deviates locally" in local[0].title


def test_tensors_fused_away_by_an_optimizer_are_named_with_the_reason(det_model, tmp_path):
    ref = tmp_path / "det.onnx"
    onnx.save(constants_as_initializers(onnx.load(str(det_model))), str(ref))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(tmp_path / "fused.onnx")
    ort.InferenceSession(str(ref), options, providers=["CPUExecutionProvider"])
    fused = {o for n in onnx.load(str(ref)).graph.node for o in n.output} - \
        {o for n in onnx.load(str(tmp_path / "fused.onnx")).graph.node for o in n.output}
    assert fused  # the optimizer removed tensors
    np.save(tmp_path / "x.npy", np.random.default_rng(4).standard_normal((1, 3, 96, 96)).astype(np.float32))
    r = accuscope("run", ref, tmp_path / "fused.onnx", "--input", f"x={tmp_path / 'x.npy'}", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fused away" in r.stdout
    cov = json.loads((tmp_path / "t" / "task.json").read_text())["coverage"]
    unused = {name.split(":")[0]: why for name, why in cov["golden_unused"]}
    assert unused and all("fused away" in why for why in unused.values())
    assert cov["golden_used"] == cov["golden_total"] - len(unused) and cov["outputs_paired"] == 1
