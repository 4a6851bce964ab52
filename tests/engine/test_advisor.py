"""The advisor: MindStudio's rules, introduced-versus-inherited by re-running framework ops on the
NPU's inputs, NaN/inf origin and preprocessing diagnosis; on the demo's planted faults, on a real
pretrained model converted to int8 / float16 (checked against a bisection done here), and through
the `accuscope advise` command."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.compare import judgement
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.demo import workspace as demo
from accuscope.engine.demo.npusim import fuse, simulate
from accuscope.engine.diagnose import oprerun
from accuscope.engine.diagnose.advice import ADVICE_JSON, load_advice, saved_advice, saved_fingerprint
from accuscope.engine.diagnose.advisor import advise
from accuscope.engine.diagnose.preprocess import diagnose, resize
from accuscope.engine.progress import Progress
from accuscope.engine.runs.onnxmodel import node_names
from accuscope.engine.runs.ortdump import dump_onnx
from accuscope.engine.sides.registry import load_graph, open_golden
from accuscope.engine.sources.tensor import SourceError, sanitize
from accuscope.engine.tasks.task import load_task
from accuscope.engine.tasks.taskrun import run_task
from support.narrow import present
from support.tasks import table_task

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

QUANTIZED_OP = "/block1/conv1/Conv/block1/relu1/Relu"  # the demo's int4 conv, fused with its BN and ReLU
POW_OP = "/attn/norm/Pow"
TS = 1700000000000000
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accuscope", *map(str, args)], capture_output=True, text=True,
                          env=ENV, timeout=120)


@pytest.fixture(scope="session")
def demo_tasks(tmp_path_factory) -> list[Path]:
    return demo.build_workspace(tmp_path_factory.mktemp("advisor-demo") / "ws")


@pytest.fixture(scope="session")
def main_advice(demo_tasks):
    return advise(demo_tasks[0])


@pytest.fixture(scope="session")
def bgr_advice(demo_tasks):
    return advise(demo_tasks[1])


# ------------------------------------------------------------------ the demo's planted faults


def test_pow_overflow_is_the_float16_rule_and_the_nan_origin(main_advice, demo_tasks):
    table = load_task(demo_tasks[0]).table
    verdict = main_advice.verdict
    assert verdict.rule == "ms.fp16_overflow"  # first match wins: the later rules are not reported
    assert table is not None
    assert verdict.op == POW_OP and table.columns["io"][verdict.row] == "output"
    assert verdict.evidence["npu_nonfinite"] > 0 and verdict.evidence["golden_nonfinite"] == 0
    (origin,) = main_advice.by_rule("nonfinite_origin")
    assert origin.op == POW_OP and origin.row == verdict.row and "first appears" in origin.title
    assert origin.evidence["inputs_nonfinite"] == [0]
    # the third side (the net at float16) overflows there too: float16's own overflow, said on the op
    assert origin.evidence["branch"] == "precision" and "overflows here too" in origin.text
    state = judgement.evaluate(table, present(load_task(demo_tasks[0]).thresholds))
    assert state.expected[origin.row] and table.columns["exp_err"][origin.row] == float("inf")
    pow_origin = main_advice.origin_of(POW_OP)
    assert pow_origin.origin == "introduced" and pow_origin.broken == ["npu_nonfinite"]
    assert pow_origin.isolated["outputs"][0]["rerun_nonfinite"] == 0  # the framework op stays finite
    # the ops after Pow read its inf and only pass it on
    for op in ("/attn/norm/ReduceMean_1", "/attn/norm/Add", "/attn/norm/Sqrt", "/attn/norm/Div"):
        assert main_advice.origin_of(op).origin == "inherited", op


def test_quantized_conv_introduced_and_its_successors_inherited(main_advice, demo_tasks):
    assert main_advice.method == "rerun" and main_advice.framework_source == "task.json demo.framework_model"
    verdict, first = main_advice.findings[:2]  # the verdict on the model first, then the op that made it fail
    assert verdict.rule == "verdict" and verdict.severity == "error" and "the model fails" in verdict.title
    # Ranked by how far each op's own error reaches the outputs, not by position: checked independently,
    # the float16 emulation alone gives the output cos 0.949 (it fails), the int4 conv alone 0.9995
    # (it passes). So the overflowing Pow is the headline, the conv comes after it.
    assert first.rule == "introduced" and first.op == POW_OP and first.severity == "error"
    assert first.evidence["output_cos_alone"] < 0.99 and first.evidence["also"] == [QUANTIZED_OP]
    conv = main_advice.origin_of(QUANTIZED_OP)
    assert conv.origin == "introduced" and conv.evidence["chain"] == [
        "/block1/conv1/Conv", "/block1/bn1/BatchNormalization", "/block1/relu1/Relu"]
    assert conv.isolated_cos < 0.99 and conv.evidence["worst_input_cos"] > 0.9999
    assert conv.evidence["rerun_vs_golden_cos"] > 0.9999  # from the NPU's inputs the framework op is right
    ops = [o.op for o in main_advice.ops]
    assert ops[0] == QUANTIZED_OP  # the first failing op in execution order
    between = ops[1:ops.index(POW_OP)]
    assert len(between) >= 6
    for o in main_advice.ops:
        if o.op not in (QUANTIZED_OP, POW_OP):
            assert o.origin == "inherited" and o.method == "rerun" and o.isolated_cos > 0.9999, o.op
    assert [o.op for o in main_advice.introduced] == [QUANTIZED_OP, POW_OP]
    # columns for the table: on the op's output rows only
    table = load_task(demo_tasks[0]).table
    assert table is not None
    cols = main_advice.columns(len(table))
    (row,) = main_advice.origin_of(QUANTIZED_OP).rows
    assert cols["origin"][row] == "introduced" and cols["iso_cos"][row] < 0.99
    assert table.columns["io"][row] == "output" and cols["origin"][row - 1] == ""
    assert set(table.columns["npu_op"][cols["origin"] == "introduced"]) == {QUANTIZED_OP, POW_OP}


def test_bgr_input_diagnosed_as_channel_order(bgr_advice, demo_tasks):
    verdict, first = bgr_advice.findings[:2]
    assert verdict.rule == "verdict" and verdict.severity == "error"
    assert first.rule == "preprocess" and first.severity == "error"
    assert first.evidence["transform"].split("+")[0] == "channels"
    assert "RGB vs BGR" in first.title
    assert first.evidence["cos_before"] < 0.5 and first.evidence["cos_after"] > 0.999
    assert f"{first.evidence['cos_before']:.4f}" in first.text and "-> 1.0000" in first.text
    assert bgr_advice.verdict.rule == "ms.input_mismatch" and bgr_advice.verdict.row == first.row
    table = load_task(demo_tasks[1]).table
    assert table is not None
    assert table.columns["io"][first.row] == "input" and table.columns["type"][first.row] == "Conv2D"
    assert not bgr_advice.introduced and bgr_advice.ops
    assert all(o.origin == "inherited" for o in bgr_advice.ops)  # every op only passes the bad input on
    (note,) = bgr_advice.by_rule("no_op_introduced")
    assert "network input" in note.text


def test_advice_json_is_saved_atomically_and_reruns_come_from_the_cache(main_advice, demo_tasks, monkeypatch):
    folder = demo_tasks[0]
    loaded = load_advice(folder)
    assert loaded is not None
    assert [f.to_dict() for f in loaded.findings] == [f.to_dict() for f in main_advice.findings]
    assert [o.origin for o in loaded.ops] == [o.origin for o in main_advice.ops]
    task = load_task(folder)
    assert loaded.is_current(task.doc, task.thresholds)
    assert not loaded.is_current(task.doc.with_fields(saved="another time"))
    # staleness is read from the file's head: the ops after it (40 MB for 1M rows) are not parsed
    assert saved_fingerprint(folder) == loaded.task
    assert saved_advice(folder, task.doc, task.thresholds) is not None
    stale = task.doc.with_fields(saved="another time")
    text = (folder / ADVICE_JSON).read_text()
    try:
        (folder / ADVICE_JSON).write_text(text[:text.index('\n "findings"')] + "\n not JSON")
        assert saved_fingerprint(folder) == loaded.task  # the head alone still says which result
        assert saved_advice(folder, stale, task.thresholds) is None
        assert saved_advice(folder, task.doc, task.thresholds) is None  # current head, unreadable rest
    finally:
        (folder / ADVICE_JSON).write_text(text)
    assert not [p for p in folder.iterdir() if p.name.startswith(f".{ADVICE_JSON}")]  # no temporary left
    json.loads((folder / ADVICE_JSON).read_text())  # strict JSON (no NaN)

    def no_rerun(fw, job):
        raise AssertionError("re-ran although nothing changed")
    monkeypatch.setattr(oprerun, "run_job", no_rerun)
    again = advise(folder)
    assert again is not None
    assert [(o.op, o.origin, o.isolated_cos) for o in again.ops] == \
        [(o.op, o.origin, o.isolated_cos) for o in main_advice.ops]
    assert load_advice(folder.parent) is None


def test_without_a_framework_model_the_weaker_method_still_finds_both_faults(demo_tasks, tmp_path):
    """The task folder copied, its framework model (and the golden dump's copy of it) removed."""
    task = tmp_path / "task"
    shutil.copytree(demo_tasks[0], task)
    meta = json.loads((task / "task.json").read_text())
    del meta["demo"]
    meta.update(npu=str(task / "npu"), golden=str(task / "golden"), model=str(task / "model" / "tinynet.json"))
    (task / "task.json").write_text(json.dumps(meta))
    for p in (task / "golden" / "model.onnx", task / "golden" / "dump.json", task / "model" / "tinynet.onnx",
              task / ADVICE_JSON):
        p.unlink(missing_ok=True)  # advice.json is there only once another test advised on the demo
    a = advise(task)
    assert a is not None
    assert a.method == "input-output" and not a.framework_model
    assert a.by_rule("method") and "weaker" in a.by_rule("method")[0].title
    intro = a.by_rule("introduced")[0]
    assert intro.op == QUANTIZED_OP and "heuristic" in intro.title
    assert present(a.origin_of(QUANTIZED_OP)).origin == "introduced"
    assert present(a.origin_of(POW_OP)).origin == "introduced" and present(a.origin_of("/block1/conv2/Conv/block1/bn2/"
                                                                      "BatchNormalization")).origin == "inherited"
    assert a.verdict is not None
    assert a.verdict.rule == "ms.fp16_overflow" and a.by_rule("nonfinite_origin")[0].op == POW_OP
    # a given framework model that does not exist or is no model is unusable input
    with pytest.raises(SourceError, match="no such framework model"):
        advise(task, framework_model=tmp_path / "missing.onnx")
    (tmp_path / "broken.onnx").write_bytes(b"\x00garbage")
    with pytest.raises(SourceError, match="broken.onnx: not a readable ONNX model"):
        advise(task, framework_model=tmp_path / "broken.onnx")


def test_mindstudio_rule_reads_the_verdict_not_the_outputs_cosine(tmp_path):
    """An output at cos 0.995 whose red (0.3) breaks msit's 0.05: the verdict fails, and MindStudio's rule
    says the output fails with it, never "local deviations only; the network output passes" below it."""
    a = advise(table_task(tmp_path / "red", 0.995, 0.3))
    assert a is not None and a.primary is not None
    assert a.primary.rule == "verdict" and a.primary.severity == "error" and "the model fails" in a.primary.title
    assert a.verdict is not None
    assert a.verdict.rule == "ms.output_fails"
    assert not a.by_rule("ms.local_deviation")


def test_mindstudio_verdicts_on_a_table_alone(tmp_path):
    a = advise(table_task(tmp_path / "fails", 0.9, 0.4))
    assert a is not None and a.verdict is not None
    assert a.verdict.rule == "ms.output_fails" and a.verdict.op == "conv1" and a.verdict.row == 2
    assert a.method == "input-output" and any("does not name its dumps" in n for n in a.notes)
    assert present(a.origin_of("conv1")).origin == "introduced" and present(a.origin_of("relu")).origin == "inherited"
    a = advise(table_task(tmp_path / "local", 0.999, 0.01))
    assert a is not None and a.verdict is not None
    assert a.verdict.rule == "ms.local_deviation" and a.verdict.row == 2 and a.verdict.severity == "warning"
    a = advise(table_task(tmp_path / "unknown-output", 0.9, 0.4, is_output=False))
    # no output is known, so the verdict is unknown: MindStudio's rule says the deviations' effect is unknown,
    # never "the output fails" from a row it took for the output itself
    assert a is not None
    assert a.primary is not None
    assert a.primary.rule == "verdict" and a.primary.severity == "warning"
    assert a.verdict is not None
    assert a.verdict.rule == "ms.local_deviation" and "unknown" in a.verdict.title
    a = advise(table_task(tmp_path / "pass", 0.9999, 0.001, mid=(0.9999, 0.001)))
    assert a is not None and a.verdict is not None
    assert a.verdict.rule == "ms.all_pass" and a.verdict.row is None and not a.ops and a.findings[1:] == [a.verdict]
    assert a.primary is not None
    assert a.primary.rule == "verdict" and a.primary.severity == "info" and "the model passes" in a.primary.title
    # progress is reported; a cancelled run returns None and leaves the previous advice alone
    import threading
    stages: list[Progress] = []
    before = (tmp_path / "pass" / ADVICE_JSON).read_bytes()
    cancel = threading.Event()
    cancel.set()
    assert advise(tmp_path / "pass", progress=stages.append, cancel=cancel) is None
    assert stages and (tmp_path / "pass" / ADVICE_JSON).read_bytes() == before


# ------------------------------------------------------------------ preprocessing hypotheses


def test_preprocessing_hypotheses_are_told_apart():
    img = demo.demo_image()
    golden = demo.normalize(img)
    mean, std = demo.MEAN.reshape(1, 3, 1, 1), demo.STD.reshape(1, 3, 1, 1)
    chw = img.astype(np.float32).transpose(2, 0, 1)[None]
    cases = {
        "hwc_in_chw": np.ascontiguousarray(golden.transpose(0, 2, 3, 1)).reshape(golden.shape),
        "norm_missing": chw / 255,
        "norm_twice": (golden - mean) / std,
        "scale_255": golden * 255,
        "channels+norm_missing": chw[:, ::-1],
    }
    for expected, npu in cases.items():
        d = diagnose(npu.astype(np.float16), golden)
        assert d is not None and d.transform == expected and d.agrees, (expected, d)
        assert d.cos_after > 0.999
    d = diagnose(chw / 255, golden)
    assert d is not None
    assert d.details["mean"] == pytest.approx(demo.MEAN.tolist(), abs=0.01)
    assert d.details["std"] == pytest.approx(demo.STD.tolist(), abs=0.01)
    # different sizes: the NPU input resized with another interpolation than the golden one
    big = np.repeat(np.repeat(golden, 2, axis=2), 2, axis=3) + np.random.default_rng(0).normal(0, 0.01, (1, 3, 64, 64))
    d = diagnose(big, resize(big, (32, 32), "bilinear"))
    assert d is not None
    assert d.transform == "resize_bilinear" and d.agrees
    assert diagnose(golden, golden + 1e-4) is None  # they agree: nothing to diagnose
    noise = np.random.default_rng(1).standard_normal(golden.shape)
    assert diagnose(noise, golden) is None or not present(diagnose(noise, golden)).agrees


# ------------------------------------------------------------------ a real model, converted


def _run_all(model, x: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.ClearField("value_info")
    del m.graph.output[:]
    m.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, session.run(None, {"x": x})))


def _npu_task(fp32_path: Path, converted, root: Path, thresholds: Thresholds) -> tuple[Path, dict]:
    """golden = the fp32 run; NPU = an Ascend-style float16 dump (npusim) of the converted model's
    values, filed under the fp32 model's node names; then compared into a task folder."""
    x = np.random.default_rng(11).standard_normal((1, 3, 48, 192)).astype(np.float32)
    fp32 = onnx.load(str(fp32_path))
    names = [o for n in fp32.graph.node if n.op_type != "Constant" for o in n.output]
    values = _run_all(converted, x, names)
    (root / "values").mkdir(parents=True)
    np.save(root / "values" / f"x.0.{TS}.npy", x)
    for node, name in zip(fp32.graph.node, node_names(fp32.graph.node)):
        for j, t in enumerate(node.output):
            if node.op_type != "Constant":
                np.save(root / "values" / f"{sanitize(name)}.{j}.{TS}.npy", values[t])
    dump_onnx(fp32_path, root / "golden", {"x": x}, timestamp=TS)
    sim = simulate(load_graph(fp32_path), open_golden(root / "values"), str(root / "npu"), model_name="cls")
    spec = CompareSpec(str(root / "npu"), str(root / "golden"), model=sim.model_json,
                              algorithms=["cos", "red", "rmse", "mean_rel"], thresholds=thresholds)
    run_task(spec, root / "task", workers=1)
    golden = _run_all(fp32, x, names)
    golden["x"] = x
    return root / "task", golden


def _bisect(fp32_path: Path, converted, golden: dict, failing: set[str], thresholds: Thresholds):
    """Independently of the advisor: for each device op (fused as the simulated device fuses),
    cut the converted model's version of it out with onnx.utils.Extractor, feed it the GOLDEN
    inputs and compare with the golden outputs. Returns {op: (cos, red)} of the failing ops and the
    name of the first one (in execution order) whose own error breaks the thresholds."""
    from onnx.utils import Extractor
    extractor = Extractor(converted)
    cos_min, red_max = present(thresholds.get("cos")).value, present(thresholds.get("red")).value
    local, first = {}, None
    for op in fuse(load_graph(fp32_path)):
        if op.name not in failing:
            continue
        sub = extractor.extract_model(op.inputs, op.outputs)
        session = ort.InferenceSession(sub.SerializeToString(), providers=["CPUExecutionProvider"])
        feeds = {i.name: golden[i.name].astype(np.float16 if i.type == "tensor(float16)" else golden[i.name].dtype)
                 for i in session.get_inputs()}  # a float16 model's op reads float16
        outs = session.run(op.outputs, feeds)
        worst = (1.0, 0.0)
        for t, got in zip(op.outputs, outs):
            a, b = got.astype(np.float64).ravel(), golden[t].astype(np.float64).ravel()
            cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
            red = float(np.linalg.norm(a - b) / np.linalg.norm(b))
            worst = (min(worst[0], cos), max(worst[1], red))
        local[op.name] = worst
        if first is None and (worst[0] < cos_min or worst[1] > red_max):
            first = op.name
    return local, first


@pytest.mark.parametrize("conversion", ["int8", "fp16"])
def test_real_model_introduced_op_agrees_with_a_bisection(conversion, cls_model, tmp_path):
    """PP-OCR's direction classifier, int8-quantized (dynamic, a few convs) or converted to float16:
    every failing op the bisection finds locally fine is "inherited", the first op the advisor says
    introduced error is the first op whose own error breaks the thresholds, and its headline is the
    op whose own error is largest."""
    fp32 = onnx.load(str(cls_model))
    if conversion == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic
        quantize_dynamic(str(cls_model), str(tmp_path / "int8.onnx"), weight_type=QuantType.QInt8,
                         nodes_to_quantize=["Conv@1", "Conv@2", "Conv@6", "Conv@7", "Conv@8", "Conv@18", "Conv@21"])
        converted = onnx.load(str(tmp_path / "int8.onnx"))
        red_max = 0.02  # int8 per-tensor: the thresholds a user tightens to for a quantized deployment
    else:
        from onnxconverter_common import float16
        converted = float16.convert_float_to_float16(fp32, keep_io_types=True)
        red_max = 0.01
    thresholds = Thresholds()
    thresholds.set("red", red_max)
    task, golden = _npu_task(cls_model, converted, tmp_path, thresholds)

    a = advise(task, framework_model=cls_model)
    assert a is not None
    assert a.method == "rerun" and a.framework_source == "given"
    table = load_task(task).table
    assert table is not None
    c = table.columns
    failing = {op for op, io, bad in zip(c["npu_op"], c["io"], c["fail"]) if bad and io == "output"}
    assert {o.op for o in a.ops} == failing and failing
    assert all(o.method == "rerun" for o in a.ops)

    local, first_broken = _bisect(cls_model, converted, golden, failing, thresholds)
    if conversion == "fp16":  # float16 alone: the error builds up, no op breaks the thresholds by itself
        assert first_broken is None and local
        assert not a.introduced and all(o.origin == "inherited" for o in a.ops)
        assert "build up" in a.by_rule("no_op_introduced")[0].text
        assert a.verdict is not None
        assert a.verdict.rule == "ms.all_pass" and "break other thresholds" in a.verdict.text
        return
    intro = a.introduced
    assert intro and intro[0].op == first_broken, (intro[0].op, first_broken, local[first_broken])
    red_max = present(thresholds.get("red")).value
    broken = {op: v for op, v in local.items() if v[0] < 0.99 or v[1] > red_max}
    # the headline is the op that made the most error by itself, by the same independent measure
    # (ops whose own errors are within 10% of each other rank either way: golden inputs here, NPU ones there)
    head = a.by_rule("introduced")[0].op
    worst = min(broken, key=lambda op: broken[op][0])
    assert head in broken and 1 - broken[head][0] >= 0.9 * (1 - broken[worst][0]), (head, broken)
    for op, (cos, red) in local.items():
        if op not in broken:  # failing, but locally within the thresholds: it only inherits
            assert present(a.origin_of(op)).origin == "inherited", (op, cos, red)
    iso = a.origin_of(first_broken)
    assert iso is not None and iso.isolated_cos is not None
    assert iso.broken and (iso.isolated_cos < 0.99 or "red" in iso.broken)
    if conversion == "int8":
        # the error builds up before the culprit: failing rows that are not its fault come first
        first_fail = int(np.argmax(c["fail"]))
        assert c["npu_op"][first_fail] != first_broken and len(local) > 20


# ------------------------------------------------------------------ the command


def test_cli_advise_prints_findings_and_json_and_exits_2_on_unusable_input(demo_tasks, tmp_path, main_advice):
    r = accuscope("advise", demo_tasks[0])
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{POW_OP} introduced the error" in r.stdout and "✗ error" in r.stdout
    assert f"float16 overflow at {POW_OP}" in r.stdout and "advice.json" in r.stdout
    r = accuscope("advise", demo_tasks[1], "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [f["rule"] for f in doc["findings"][:2]] == ["verdict", "preprocess"] and doc["method"] == "rerun"
    r = accuscope("advise", tmp_path / "nothing")
    assert r.returncode == 2 and "not a task folder" in r.stderr
    r = accuscope("advise", demo_tasks[1], "--framework-model", tmp_path / "missing.onnx")
    assert r.returncode == 2 and "no such framework model" in r.stderr


def test_advise_json_summarises_the_task_the_advisor_opened(demo_tasks, tmp_path):
    """`advise --json`'s summary keys come from the task the command opened for the advisor, not a second
    read of the folder: its result files deleted after opening, the answer is whole."""
    from accuscope.commands.answers import advice_json
    folder = tmp_path / "task"
    shutil.copytree(demo_tasks[0], folder)
    task = load_task(folder)
    advice = advise(task, write=False)
    for f in folder.glob("result*"):
        f.unlink()
    doc = advice_json(advice, task)
    assert doc["rows"] == len(task.table) and doc["failing"] == int(task.table.columns["fail"].sum()) > 0


def test_cli_compare_with_advisor(demo_tasks, tmp_path):
    src = demo_tasks[1]
    r = accuscope("compare", "--npu", src / "npu", "--golden", src / "golden", "--model",
                  src / "model" / "tinycnn.json", "--out", tmp_path / "t", "--workers", "1", "--advisor")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "first failing" in r.stdout and "input preprocessing: channel order reversed" in r.stdout
    assert (tmp_path / "t" / ADVICE_JSON).is_file()
    # the framework model came from the golden dump's copy of it
    assert present(load_advice(tmp_path / "t")).framework_source == "the golden dump's model copy"
