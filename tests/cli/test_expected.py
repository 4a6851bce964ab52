"""The precision's own noise as a third side (`--expected`, engine/compare/expected.py), through the real
entry point, on files the real tools wrote.

- PP-OCRv4 det (rapidocr-onnxruntime's wheel) converted to fp16 by onnxconverter-common and run by
  `accuscope run --expected auto` (the reference converted again, as the candidate was, and dumped):
  the output fails, and every failing row is within its expected error: the precision itself, the
  BatchNormalization named; nothing errs beyond it.
- The same fp16 model with a "kernel bug" planted in one Conv (one output channel's weights x1.3): the
  first row beyond the precision's own noise is that Conv, though its row passes every threshold;
  without the bug (the case above) there is no such row: fixing it removes the finding.
- PP-OCR cls quantized statically by onnxruntime (QOperator and QDQ formats; the calibration is not at
  hand): `--expected auto` simulates the candidate's own quantization in float with its own scales; every
  failing row is int8's own. A QLinear op's int8 output is compared with its golden tensor, read on its
  own grid (its output scale and zero point). A "runtime" whose requantization of one QLinearConv is off by 1.3x (the
  simulation with that one fault) run against it: the first row beyond int8's own noise is downstream
  of that conv and nothing upstream is.
- PP-OCR cls quantized dynamically with settings other than onnxruntime's defaults (per channel, reduced
  range): `--expected auto` simulates the candidate's own DynamicQuantizeLinear chains (ConvInteger as a
  float Conv on the centred integers), so every failing row is int8's own; re-quantizing the reference
  with default settings would not have reproduced the candidate. onnxruntime's fused integer MatMuls
  (DynamicQuantizeMatMul, MatMulIntegerToFloat, written by its graph optimizer) are simulated bit-exactly.
- msprobe 26.2's own dumps (tests/fixtures/msprobe/train): the faulty fp32 run against fp32 with the
  bf16 autocast run as the third side: the planted call is where the error leaves bf16's own, the
  step's cause the implementation; rank 0, without the fault, has none."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from accuscope.engine.compare import judgement
from accuscope.engine.precision.convert import convert, prepare
from accuscope.engine.tasks.task import load_task
from support.data import text_image_nchw
from support.narrow import present

TRAIN = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe" / "train"
BUGGY_CONV = "p2o.Conv.20"


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "accuscope", *map(str, args)], capture_output=True, text=True)



@pytest.fixture(scope="module")
def det16(det_model, tmp_path_factory):
    """(folder, json of `run --expected auto` for the clean fp16 model, the same with the planted bug)."""
    d = tmp_path_factory.mktemp("expected")
    reference = prepare(det_model)
    onnx.save(reference, str(d / "det.onnx"))
    fp16 = convert(reference, "fp16", [])
    onnx.save(fp16, str(d / "det16.onnx"))
    weights = {i.name: i for i in fp16.graph.initializer}
    w = weights[next(n for n in fp16.graph.node if n.name == BUGGY_CONV).input[1]]
    a = numpy_helper.to_array(w).copy()
    a[0] *= 1.3
    w.CopyFrom(numpy_helper.from_array(a, w.name))
    onnx.save(fp16, str(d / "bug16.onnx"))
    np.save(d / "x.npy", text_image_nchw())
    found = {}
    for name in ("det16", "bug16"):
        r = accuscope("run", d / "det.onnx", d / f"{name}.onnx", "--input", f"x={d / 'x.npy'}", "--out", d / name,
                      "--expected", "auto", "--json")
        assert r.returncode in (0, 1), r.stderr
        found[name] = json.loads(r.stdout)
    return d, found


def test_fp16_itself_explains_every_failing_row_and_the_batchnorm_is_named(det16):
    d, found = det16
    clean = found["det16"]
    assert clean["judgement"]["outcome"] == "fail" and clean["judgement"]["cause"] == "precision"
    task = load_task(d / "det16")
    assert task.spec().expected and Path(present(task.spec().expected)).name == "expected"  # task.json keeps the third side
    assert task.table is not None and task.thresholds is not None
    state = judgement.evaluate(task.table, task.thresholds)
    assert state.fail.any() and (state.expected == state.fail).all() and state.first_beyond is None
    c = task.table.columns
    assert np.nanmax(np.abs(c["excess"][state.fail] - 1.0)) < 0.01  # the candidate is the fp16 conversion itself
    advice = json.loads(accuscope("advise", d / "det16", "--json").stdout)
    assert "The precision itself" in advice["verdict"]["text"] and advice["verdict"]["evidence"]["cause"] == "precision"
    head = next(f for f in advice["findings"] if f["rule"] == "introduced")
    assert head["op"].startswith("p2o.BatchNormalization") and head["evidence"]["branch"] == "precision"
    assert not any(f["rule"] == "beyond_expected" for f in advice["findings"])


def test_a_kernel_bug_is_where_the_error_leaves_the_precisions_own(det16):
    d, found = det16
    task = load_task(d / "bug16")
    assert task.table is not None and task.thresholds is not None
    state = judgement.evaluate(task.table, task.thresholds)
    c = task.table.columns
    r = state.first_beyond
    assert r is not None and c["npu_op"][r] == BUGGY_CONV and c["io"][r] == "output"
    assert not state.fail[r] and c["excess"][r] > 5  # it passes the thresholds: only the third side sees it
    advice = json.loads(accuscope("advise", d / "bug16", "--json").stdout)
    beyond = next(f for f in advice["findings"] if f["rule"] == "beyond_expected")
    assert beyond["op"] == BUGGY_CONV and beyond["evidence"]["passes"]
    assert BUGGY_CONV in advice["verdict"]["text"]  # the verdict says the precision hides it
    shown = json.loads(accuscope("show", d / "bug16", "--format", "json").stdout)
    assert shown["judgement"]["cause"] == "precision" == found["bug16"]["judgement"]["cause"]  # the outputs: fp16's own


def test_msprobe_bf16_as_the_third_side_of_a_faulty_fp32_step(tmp_path):
    r = accuscope("compare", "--npu", TRAIN / "cand", "--golden", TRAIN / "bench", "--expected", TRAIN / "bf16",
                  "--step", "0", "--rank", "1", "--out", tmp_path / "r1", "--json")
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["judgement"]["cause"] == "implementation"
    advice = json.loads(accuscope("advise", tmp_path / "r1", "--json").stdout)
    beyond = next(f for f in advice["findings"] if f["rule"] == "beyond_expected")
    first_call = next(f for f in advice["findings"] if f["rule"] == "first_call")
    assert beyond["op"] == first_call["op"] == "Tensor.__mul__.0.forward"  # the planted attention scale
    r = accuscope("compare", "--npu", TRAIN / "cand", "--golden", TRAIN / "bench", "--expected", TRAIN / "bf16",
                  "--step", "0", "--rank", "0", "--out", tmp_path / "r0", "--json")
    assert r.returncode == 0, r.stderr
    assert "cause" not in json.loads(r.stdout)["judgement"]  # rank 0 holds no fault: nothing fails
    assert judgement.evaluate(present(load_task(tmp_path / "r0").table), present(load_task(tmp_path / "r0").thresholds)).first_beyond is None


def test_unusable_third_sides_exit_2_naming_them(det16, tmp_path):
    d, _ = det16
    golden = next((d / "det16" / "dumps").iterdir()) / "golden"
    r = accuscope("compare", "--npu", golden, "--golden", golden, "--expected", TRAIN / "bf16", "--out", tmp_path / "t")
    assert r.returncode == 2 and "--expected" in r.stderr and "choose one with --step and --rank" in r.stderr
    r = accuscope("compare", "--npu", golden, "--golden", golden, "--expected", TRAIN / "bf16" / "step0" / "rank0",
                  "--out", tmp_path / "t")
    assert r.returncode == 2 and "--expected" in r.stderr and "pairs with the golden side" in r.stderr
    r = accuscope("run", d / "det.onnx", d / "det.onnx", "--input", f"x={d / 'x.npy'}", "--out", tmp_path / "u",
                  "--expected", "auto")
    assert r.returncode == 2 and "--expected auto" in r.stderr and "det.onnx" in r.stderr


@pytest.fixture(scope="module")
def cls8(cls_model, tmp_path_factory):
    """(folder with ref.onnx, x.npy and the static int8 conversions qop.onnx and qdq.onnx)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    d = tmp_path_factory.mktemp("static8")
    onnx.save(prepare(cls_model), str(d / "ref.onnx"))
    x = np.random.default_rng(1).standard_normal((1, 3, 48, 192)).astype(np.float32)
    np.save(d / "x.npy", x)
    for name, form in (("qop", QuantFormat.QOperator), ("qdq", QuantFormat.QDQ)):
        reader = type("Reader", (), {"samples": iter([{"x": x}]), "get_next": lambda self: next(self.samples, None)})()
        quantize_static(str(d / "ref.onnx"), str(d / f"{name}.onnx"), reader, quant_format=form,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return d


@pytest.mark.parametrize("form", ["qop", "qdq"])
def test_a_static_int8_candidate_is_simulated_with_its_own_scales(cls8, form):
    r = accuscope("run", cls8 / "ref.onnx", cls8 / f"{form}.onnx", "--input", f"x={cls8 / 'x.npy'}",
                  "--out", cls8 / f"t-{form}", "--expected", "auto", "--json")
    assert r.returncode in (0, 1), r.stderr
    task = load_task(cls8 / f"t-{form}")
    assert task.table is not None and task.thresholds is not None
    state = judgement.evaluate(task.table, task.thresholds)
    c = task.table.columns
    assert state.fail.any() and (state.expected == state.fail).all() and state.first_beyond is None
    assert np.nanmax(np.abs(c["excess"][state.fail] - 1.0)) < 0.01  # onnxruntime's int8 kernels are the simulation
    assert json.loads(r.stdout)["judgement"].get("cause", "precision") == "precision"
    if form == "qop":  # each QLinear op's int8 output pairs with its golden tensor, read on its own grid
        dequantized = np.array([str(x).startswith("dequantized") for x in c["conversion"]])
        assert (c["type"][dequantized] == "QLinearConv").sum() == 53 and np.nanmedian(c["cos"][dequantized]) > 0.99
        # the QLinear ops became float ops between DequantizeLinear and QuantizeLinear
        sim = onnx.load(str(next((cls8 / f"t-{form}" / "dumps").iterdir()) / "expected" / "model.onnx"))
        assert not any(n.op_type.startswith("QLinear") for n in sim.graph.node)
        assert sum(n.op_type == "Conv" for n in sim.graph.node) == 53


def test_a_requantization_fault_is_where_the_error_leaves_int8s_own(cls8):
    from onnx import helper

    from accuscope.engine.precision.simulate import simulate
    healthy = cls8 / "t-healthy"
    r = accuscope("run", cls8 / "ref.onnx", cls8 / "qop.onnx", "--input", f"x={cls8 / 'x.npy'}", "--out", healthy,
                  "--expected", "auto")
    assert r.returncode in (0, 1), r.stderr
    expected = next((healthy / "dumps").iterdir()) / "expected"
    m = simulate(onnx.load(str(cls8 / "qop.onnx")))  # a runtime whose one QLinearConv requantizes 1.3x off
    conv = [n for n in m.graph.node if n.op_type == "Conv"][20]
    k, out = list(m.graph.node).index(conv), conv.output[0]
    conv.output[0] = out + "_fault"
    m.graph.initializer.append(numpy_helper.from_array(np.array(1.3, np.float32), "fault_scale"))
    m.graph.node.insert(k + 1, helper.make_node("Mul", [out + "_fault", "fault_scale"], [out], name=conv.name + "_fault"))
    onnx.save(m, str(cls8 / "faulty.onnx"))
    r = accuscope("run", cls8 / "ref.onnx", cls8 / "faulty.onnx", "--input", f"x={cls8 / 'x.npy'}",
                  "--out", cls8 / "t-faulty", "--expected", expected)
    assert r.returncode in (0, 1), r.stderr
    task = load_task(cls8 / "t-faulty")
    assert task.table is not None and task.thresholds is not None
    state = judgement.evaluate(task.table, task.thresholds)
    c = task.table.columns
    downstream, frontier = set[str](), {out}  # the tensors the faulty conv reaches
    for node in m.graph.node:
        if frontier & set(node.input) or downstream & set(node.input):
            downstream.update(node.output)
    downstream.add(out)
    first = state.first_beyond
    assert first is not None and c["excess"][first] > 2
    reached = {n.name for n in m.graph.node if set(n.output) & downstream}
    beyond = np.flatnonzero(c["excess"] > 2)
    assert c["npu_op"][first] in reached and all(c["npu_op"][b] in reached for b in beyond)


def test_a_dynamic_int8_candidate_is_simulated_with_its_own_settings(cls_model, tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    onnx.save(prepare(cls_model), str(tmp_path / "ref.onnx"))
    np.save(tmp_path / "x.npy", np.random.default_rng(1).standard_normal((1, 3, 48, 192)).astype(np.float32))
    quantize_dynamic(str(tmp_path / "ref.onnx"), str(tmp_path / "q.onnx"), weight_type=QuantType.QInt8,
                     per_channel=True, reduce_range=True)
    r = accuscope("run", tmp_path / "ref.onnx", tmp_path / "q.onnx", "--input", f"x={tmp_path / 'x.npy'}",
                  "--out", tmp_path / "t", "--expected", "auto", "--json")
    assert r.returncode in (0, 1), r.stderr
    task = load_task(tmp_path / "t")
    assert task.table is not None and task.thresholds is not None
    state = judgement.evaluate(task.table, task.thresholds)
    c = task.table.columns
    assert state.fail.any() and (state.expected == state.fail).all() and state.first_beyond is None
    assert np.nanmax(np.abs(c["excess"][state.fail] - 1.0)) < 0.01
    sim = onnx.load(str(next((tmp_path / "t" / "dumps").iterdir()) / "expected" / "model.onnx"))
    types = [n.op_type for n in sim.graph.node]
    candidate = [n.op_type for n in onnx.load(str(tmp_path / "q.onnx")).graph.node]
    assert "ConvInteger" not in types and types.count("Conv") == candidate.count("ConvInteger") == 53
    assert types.count("DynamicQuantizeLinear") == candidate.count("DynamicQuantizeLinear")  # the precision, kept
    # the reference re-quantized with the defaults is another int8 model: not the candidate's own noise
    x = {"x": np.load(tmp_path / "x.npy")}
    out = {name: _run(model, x) for name, model in (("q", onnx.load(str(tmp_path / "q.onnx"))), ("sim", sim),
                                                    ("default", convert(prepare(cls_model), "int8", [])))}
    assert np.array_equal(out["q"], out["sim"]) and not np.allclose(out["q"], out["default"], atol=1e-3)


def _run(model, feeds) -> np.ndarray:
    import onnxruntime as ort
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def test_onnxruntimes_fused_integer_matmuls_are_simulated_bit_exactly(tmp_path):
    import onnxruntime as ort
    from onnx import TensorProto, helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from accuscope.engine.precision.simulate import simulate
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w0", (16, 16)), ("w1", (16, 16)), ("w2", (16, 16)), ("b0", (16,)))]
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["m0"], name="mm0"), helper.make_node("Add", ["m0", "b0"], ["h"], name="add0"),
             helper.make_node("MatMul", ["h", "w1"], ["m1"], name="mm1"), helper.make_node("MatMul", ["h", "w2"], ["m2"], name="mm2"),
             helper.make_node("Add", ["m1", "m2"], ["y"], name="sum")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "r.onnx"))
    quantize_dynamic(str(tmp_path / "r.onnx"), str(tmp_path / "q.onnx"), weight_type=QuantType.QInt8)
    so = ort.SessionOptions()  # onnxruntime's optimizer fuses the DynamicQuantizeLinear chains
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "fused.onnx")
    ort.InferenceSession(str(tmp_path / "q.onnx"), so, providers=["CPUExecutionProvider"])
    fused = onnx.load(str(tmp_path / "fused.onnx"))
    assert {"DynamicQuantizeMatMul", "MatMulIntegerToFloat"} <= {n.op_type for n in fused.graph.node}
    sim = simulate(fused)
    assert not {"DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulInteger"} & {n.op_type for n in sim.graph.node}
    x = {"x": rng.standard_normal((4, 16)).astype(np.float32)}
    assert np.array_equal(_run(fused, x), _run(sim, x))
