"""A task `accuscope run` made of two .tflite models (tests/fixtures/litert: the float CNN and its int8
version, TensorFlow's converter's) opens in the app: the op table's rows by TFLite op, typed by the dump's own
model (model.tflite, read without LiteRT), the verdict `accuscope run` gave."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from accuscope.app import browser
from accuscope.app.app import AccuscopeApp
from accuscope.app.optable import OperatorTable
from appkit import check_snapshot, drive, opened_task_screen, screen_text, wait_for
from support.cli import accuscope
from support.data import FIXTURES

pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed (pip install 'accuscope[litert]')")


def test_a_tflite_task_opens(tmp_path):
    litert = FIXTURES / "litert"
    task = tmp_path / "ws" / "cnn-int8"
    r = accuscope("run", litert / "cnn_float.tflite", litert / "cnn_int8.tflite", "--random-inputs", "--out", task)
    assert r.returncode in (0, 1), r.stderr
    failed = "verdict ✗ fail" in r.stdout

    async def script(pilot):
        await wait_for(pilot, lambda: pilot.app.screen.query(OperatorTable))
        await wait_for(pilot, lambda: not pilot.app.screen.advising)  # the advisor's line, under load too
        table = pilot.app.screen.query_one(OperatorTable)
        assert {"CONV_2D_0", "DEPTHWISE_CONV_2D_0", "DEQUANTIZE_0"} <= set(table.table.columns["npu_op"].tolist())
        types = dict(zip(table.table.columns["npu_op"].tolist(), table.table.columns["type"].tolist()))
        assert types["CONV_2D_0"] == "CONV_2D" and types["QUANTIZE_0"] == "QUANTIZE"
        text = screen_text(pilot.app)
        assert "CONV_2D_0" in text and "QUANTIZE_0" in text
        assert ("✗ the model fails" in text) == failed  # the verdict `accuscope run` gave
    drive(AccuscopeApp(tmp_path / "ws", open_path=task), script, size=(140, 40))


def test_a_tflite_task_at_80x24_snapshot(monkeypatch):
    """The LiteRT task screen at 80x24 (float CNN against its int8 version, seeded random inputs): an SVG
    snapshot holds the layout. Its smallest digits are this CPU's kernels' rounding, as OpenVINO's are."""
    monkeypatch.setattr(browser, "ago", lambda when, now=None: "1h ago")  # the browser's ages move
    litert = FIXTURES / "litert"
    root = Path(tempfile.mkdtemp(prefix="accuscope-snap-", dir="/tmp"))  # a path of the same length every run
    try:
        r = accuscope("run", litert / "cnn_float.tflite", litert / "cnn_int8.tflite", "--random-inputs",
                      "--out", root / "cnn-int8")
        assert r.returncode in (0, 1), r.stderr

        text, svg = opened_task_screen(root / "cnn-int8")
        assert "CONV_2D_0" in text, text
        check_snapshot("litert-task-80x24", svg)
    finally:
        shutil.rmtree(root, ignore_errors=True)
