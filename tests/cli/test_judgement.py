"""One judgement, every surface: which rows fail, the first failing row and the verdict on the outputs
(engine/compare/judgement.py) are the same answer in `compare --json`, `show --format json`, `advise
--json`, the task browser's listing, the report, the overlay and the app's summary line.

On a real model from a wheel (PP-OCR's direction classifier, quantized to int8 by onnxruntime: same
class, output cos 1.0, its smallest probability's relative error above 1) the verdict passes, no
surface says the model fails, and the output row that breaks only mean_rel is noise, not a failure."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest

from accuscope.engine.compare import judgement
from accuscope.engine.compare.judgement import NOISY, verdict
from accuscope.engine.compare.summary import summarize
from accuscope.engine.demo import workspace as demo
from accuscope.engine.diagnose.advisor import advise
from accuscope.engine.export.overlay import task_overlay
from accuscope.engine.report.document import build_report
from accuscope.engine.runs.onnxedit import constants_as_initializers
from accuscope.engine.tasks.task import load_task
from accuscope.engine.tasks.tasklist import list_tasks


def accuscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "accuscope", *map(str, args)], capture_output=True, text=True)


def text_image(text: str) -> np.ndarray:
    """A line of text drawn with Pillow's built-in font, upside down (the classifier says so with
    p = 0.9997), normalised as PP-OCR's classifier takes it: its other class's probability is 3e-4."""
    from PIL import Image, ImageDraw, ImageFont
    img = Image.new("L", (192, 48), 255)
    ImageDraw.Draw(img).text((4, 14), text * 2, fill=0, font=ImageFont.load_default())
    x = np.asarray(img, dtype=np.float32)[::-1, ::-1] / 255.0
    return ((x - 0.5) / 0.5)[None, None].repeat(3, 1).astype(np.float32)


@pytest.fixture(scope="module")
def cls_int8(cls_model, tmp_path_factory):
    """`accuscope run` of the classifier against its onnxruntime dynamic int8 quantization."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    d = tmp_path_factory.mktemp("cls8")
    ref, cand = d / "cls.onnx", d / "cls8.onnx"
    onnx.save(constants_as_initializers(onnx.load(str(cls_model))), str(ref))
    quantize_dynamic(str(ref), str(cand), weight_type=QuantType.QInt8)
    np.save(d / "x.npy", text_image("accuracy 42"))
    r = accuscope("run", ref, cand, "--input", f"x={d / 'x.npy'}", "--out", d / "task", "--json")
    assert r.returncode in (0, 1), r.stderr
    return d / "task", json.loads(r.stdout)


def surfaces(folder, compare_json: dict | None = None) -> dict[str, tuple]:
    """(failing rows, first failing row's tensor, verdict outcome) as each surface gives them."""
    task = load_task(folder)
    found = {}
    if compare_json is not None:
        first = (compare_json["first_failing"] or {}).get("tensor")
        found["compare --json"] = (compare_json["failing"], first, compare_json["judgement"]["outcome"])
    shown = json.loads(accuscope("show", folder, "--format", "json").stdout)
    found["show --format json"] = (shown["failing"], (shown["first_failing"] or {}).get("tensor"),
                                   shown["judgement"]["outcome"])
    told = accuscope("advise", folder, "--json")
    advice = json.loads(told.stdout)
    severity = advice["verdict"]["severity"] if advice["verdict"] else None
    assert severity is not None
    outcome = {"error": "fail", "info": "pass", "warning": "unknown"}.get(severity)
    found["advise --json"] = (advice["failing"], (advice["first_failing"] or {}).get("tensor"), outcome)
    assert advice["judgement"]["outcome"] == outcome
    listed = next(s for s in list_tasks(folder.parent) if s.name == folder.name)
    assert task.table is not None
    c = task.table.columns
    assert task.thresholds is not None
    first_op = c["npu_op"][judgement.evaluate(task.table, task.thresholds).first_failing] if listed.failing else ""
    assert listed.first_failing_op == first_op
    s = summarize(task.table, task.thresholds, task.basis)
    assert s.verdict is not None
    found["task browser / summary line"] = (listed.failing, c["tensor"][s.first_failing] if s.first_failing is not None
                                           else None, s.verdict.outcome)
    report = build_report(task, advise(task, write=False), worst=1)
    found["report"] = (s.failing, None if not s.first_text else c["tensor"][s.first_failing],
                       {"error": "fail", "info": "pass", "ok": "pass", "warning": "unknown"}[report.severity])
    return found


def assert_one_answer(found: dict[str, tuple]) -> tuple:
    answers = set(found.values())
    assert len(answers) == 1, "\n".join(f"{k}: {v}" for k, v in found.items())
    return answers.pop()


def test_cls_int8_passes_on_every_surface_and_its_noisy_output_is_not_a_failure(cls_int8):
    folder, ran = cls_int8
    task = load_task(folder)
    assert task.table is not None and task.thresholds is not None
    state = judgement.evaluate(task.table, task.thresholds)
    c = task.table.columns
    out = [int(r) for r in np.flatnonzero(c["is_output"] & ~c["is_npu_only"])]
    assert out and all(c["cos"][r] > 0.9999 for r in out)
    noisy_out = [r for r in out if state.noisy[r]]
    # the output's relative error (mean_rel, msaccucmp's number, kept in the CSV) breaks msit's threshold ...
    assert noisy_out and all(c["mean_rel"][r] > 1 and set(state.broken_keys(r)) <= NOISY for r in noisy_out)
    assert not any(state.fail[r] for r in out)  # ... and it is noise: the tensor agrees (red passes)
    failing, first, outcome = assert_one_answer(surfaces(folder, ran))
    assert outcome == "pass"
    advice = advise(folder, write=False)
    assert advice is not None
    assert not [f for f in advice.findings if f.severity == "error"], [f.title for f in advice.findings]
    assert advice.primary is not None
    assert "near zero" in advice.primary.text
    # no failing row breaks only noise-prone metrics while its tensor agrees
    assert not any(state.fail & state.noisy)


@pytest.mark.parametrize("name", [demo.MAIN.name, demo.ONNX_FP16.name, demo.BGR.name, demo.MSPROBE.name])
def test_demo_tasks_get_one_answer_everywhere(demo_ws, name):
    folder = demo_ws / name
    failing, first, outcome = assert_one_answer(surfaces(folder))
    task = load_task(folder)
    assert task.table is not None and task.thresholds is not None
    assert outcome == verdict(task.table, task.thresholds, task.basis).outcome
    assert failing == int(judgement.evaluate(task.table, task.thresholds).fail.sum()) and (first is None) == (failing == 0)
    if name == demo.MAIN.name:
        overlay, _ = task_overlay(folder)
        assert overlay.failing > 0  # the nodes of failing ops, counted from the same judgement


@pytest.mark.parametrize("dated", [True, False])
def test_a_folder_of_files_named_without_timestamps_has_no_guessed_output(tmp_path, dated):
    """npy (or .pt) files named `{op}.npy` stand in name order, not execution order: the last name is no
    network output, so a passing last file never makes a pass while an op before it fails. With the dump's
    timestamps the order is the run's, and its last op is the output."""
    rng = np.random.default_rng(0)
    for side in ("npu", "golden"):
        (tmp_path / side).mkdir()
    for k, (name, noise) in enumerate((("conv_broken", 1.0), ("zz_head", 0.0))):
        y = rng.standard_normal(64).astype(np.float32)
        stem = f"{name}.0.{1700000000000000 + k}" if dated else name
        np.save(tmp_path / "golden" / f"{stem}.npy", y)
        np.save(tmp_path / "npu" / f"{stem}.npy", y + np.float32(noise) * rng.standard_normal(64).astype(np.float32))
    r = accuscope("compare", "--npu", tmp_path / "npu", "--golden", tmp_path / "golden", "--out", tmp_path / "t", "--json")
    doc = json.loads(r.stdout)
    assert doc["failing"] == 1 and doc["first_failing"]["op"] == "conv_broken"
    assert doc["judgement"]["outcome"] == ("pass" if dated else "unknown")
    assert "first failing: conv_broken:output:0 cos" in " ".join(r.stderr.split())  # no "()" for a type npy lacks
