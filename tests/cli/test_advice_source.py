"""Advice that fits the source: a training step dumped by msprobe (PyTorch, tests/fixtures/msprobe) is
never told to give an ONNX framework model; its next step is msprobe's own pre-check (run_ut)."""
from __future__ import annotations

import json
from pathlib import Path

from support.cli import accuscope

MSPROBE = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe"


def test_an_msprobe_step_gets_msprobes_next_step_not_an_onnx_hint(tmp_path):
    r = accuscope("compare", "--npu", MSPROBE / "cand", "--golden", MSPROBE / "bench", "--out", tmp_path / "t")
    assert r.returncode == 0, r.stdout + r.stderr
    advice = json.loads(accuscope("advise", tmp_path / "t", "--json").stdout)
    texts = " ".join(f["title"] + " " + f["text"] for f in advice["findings"])
    assert ".onnx" not in texts and "ONNX" not in texts
    method = next(f for f in advice["findings"] if f["rule"] == "method")
    assert "msprobe -f pytorch run_ut -api_info" in method["text"]
