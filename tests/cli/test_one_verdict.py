"""The verdict is one value, and `--fail-on-error` reads it alone: exit 1 exactly when the verdict is
not a pass ("fail" or "unknown"), whatever the coverage notes say; an input that could not be read
leaves its rows unjudged, so it can never give a pass.

On tpu-mlir's own files (tests/fixtures/tpumlir: written by tpu-mlir 1.30.2, with npz_tool's verdict on
each comparison in npz_tool.json) accuscope concludes what npz_tool concludes under the same
--tolerance: PASSED is a pass and exit 0, whatever the trailing output cast or the unused reference
tensors; and without --tolerance the network output is the output the cast stands for."""
from __future__ import annotations

import ast
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from accuscope.engine.tasks.task import load_task
from support.cli import accuscope

TPU = Path(__file__).resolve().parents[1] / "fixtures" / "tpumlir"
COMPARES = json.loads((TPU / "npz_tool.json").read_text())["compares"]


def judged(out: Path, *args) -> tuple[int, dict, str]:
    r = accuscope("compare", *args, "--out", out, "--fail-on-error", "--json")
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return r.returncode, json.loads(r.stdout), r.stderr


def tool_failed(case: dict) -> set[str]:
    tensors = case["tensors"] if isinstance(case["tensors"], dict) else ast.literal_eval(case["tensors"])
    return {name for name, v in tensors.items() if not v["passed"]}


@pytest.mark.parametrize("case", COMPARES, ids=[f"{c['target']}-vs-{c['reference']}" for c in COMPARES])
def test_npz_tool_verdict_is_accuscopes_and_the_exit_code_follows_it(case, tmp_path):
    """npz_tool's PASSED / FAILED is accuscope's verdict, but for the one departure on purpose: the top
    outputs against an ONNX run of every tensor fail in npz_tool on the 37 Convs whose BatchNormalization
    or bias Add tpu-mlir fused into them (it compares them by name with the ONNX tensor before the fused
    ops); accuscope re-pairs each to the fused chain's output, says so, and passes. Nothing else departs."""
    code, doc, said = judged(tmp_path / "t", "--npu", TPU / case["target"], "--golden", TPU / case["reference"],
                             "--tolerance", case["tolerance"])
    expected = {"PASSED": "pass", "FAILED": "fail"}[case["verdict"]]
    repaired = {r["npu"].split(":")[0] for r in doc["coverage"]["repaired"]}
    if expected == "fail" and tool_failed(case) <= repaired:
        expected = "pass"  # every tensor npz_tool fails is one accuscope re-paired: the departure explained
        assert len(repaired) == len(tool_failed(case)) == 37
    assert doc["judgement"]["outcome"] == expected, said
    assert doc["judgement"]["scope"] == "tensors"  # npz_tool judges every tensor it compares
    assert code == (0 if expected == "pass" else 1), said  # coverage notes (unused tensors) change nothing
    # every surface reading the task gives the same value
    assert load_task(tmp_path / "t").doc.verdict == expected
    shown = json.loads(accuscope("show", tmp_path / "t", "--format", "json").stdout)
    assert shown["judgement"]["outcome"] == expected
    advice = json.loads(accuscope("advise", tmp_path / "t", "--json").stdout)
    assert advice["judgement"]["outcome"] == expected
    assert advice["verdict"]["severity"] == {"pass": "info", "fail": "error"}[expected]


def test_the_output_cast_stands_for_the_output_it_casts(tmp_path):
    """tpu outputs against top outputs under msit's thresholds: the network output is the Softmax the
    trailing `_f32` cast casts (the cast has no counterpart in top), so the verdict is known and passes."""
    code, doc, said = judged(tmp_path / "t", "--npu", TPU / "cls_bm1684x_f16_tpu_outputs.npz",
                             "--golden", TPU / "cls_top_outputs.npz")
    assert doc["judgement"] == {"outcome": "pass", "scope": "outputs", "judged": 1, "failing": 0, "worst": None}
    assert doc["coverage"]["outputs_paired"] == doc["coverage"]["outputs_total"] == 1
    assert code == 0, said


def test_an_unreadable_tensor_never_gives_a_pass(tmp_path):
    """One intermediate tensor of the tpu side truncated: every tensor read still passes, but the run is
    "unknown" (never "pass"), exit 1 under --fail-on-error, and the message names the tensor."""
    damaged = tmp_path / "tpu_outputs.npz"
    shutil.copy(TPU / "cls_bm1684x_f16_tpu_outputs.npz", damaged)
    with np.load(damaged) as z:
        victim = z.files[20]
    with zipfile.ZipFile(TPU / "cls_bm1684x_f16_tpu_outputs.npz") as src, \
            zipfile.ZipFile(damaged, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, data[:len(data) // 2] if info.filename == victim + ".npy" else data)
    code, doc, said = judged(tmp_path / "t", "--npu", damaged, "--golden", TPU / "cls_top_outputs.npz",
                             "--tolerance", "0.99,0.90")
    v = doc["judgement"]
    assert v["outcome"] == "unknown" and v["failing"] == 0 and victim in v["why"], v
    assert code == 1
    assert doc["coverage"]["unread_count"] == 1
    assert load_task(tmp_path / "t").doc.verdict == "unknown"
    advice = json.loads(accuscope("advise", tmp_path / "t", "--json").stdout)
    assert advice["verdict"]["severity"] == "warning" and "could not be read" in advice["verdict"]["title"]
    # the same comparison without the damage passes: the damage alone made it unknown
    code, doc, _ = judged(tmp_path / "u", "--npu", TPU / "cls_bm1684x_f16_tpu_outputs.npz",
                          "--golden", TPU / "cls_top_outputs.npz", "--tolerance", "0.99,0.90")
    assert (code, doc["judgement"]["outcome"]) == (0, "pass")
