"""An RKNN task in the app (Pilot, text on screen): the snapshot compared by the CLI opens, its layers in the
map's order, RKNN's own single-layer figures in their columns beside accuscope's cos and euc."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from accuscope.app import browser
from accuscope.app.app import AccuscopeApp
from accuscope.app.optable import OperatorTable
from appkit import check_snapshot, drive, opened_task_screen, screen_text, wait_for
from support.cli import accuscope

SNAP = Path(__file__).resolve().parents[1] / "fixtures" / "rknn" / "cls-int8" / "snapshot"


def test_an_rknn_task_opens_with_rknns_single_figures(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    r = accuscope("compare", SNAP, "--out", ws / "rknn")
    assert r.returncode == 0, r.stdout + r.stderr

    async def script(pilot):
        await wait_for(pilot, lambda: pilot.app.screen.query(OperatorTable))
        await pilot.pause()
        text = screen_text(pilot.app)
        header = next(line for line in text.splitlines() if "NPU op" in line)
        assert "sgl_cos" in header and "sgl_euc" in header and " euc" in header, header
        assert "x_int8" in text and "hardswish_0.tmp_0" in text
    drive(AccuscopeApp(ws, open_path=ws / "rknn"), script, size=(480, 30))


def test_an_rknn_task_at_80x24_snapshot(monkeypatch):
    """The RKNN task screen as a user over SSH meets it (80x24): the verdict, the summary and the first layers
    with RKNN's single-layer figures in view; an SVG snapshot holds the layout."""
    monkeypatch.setattr(browser, "ago", lambda when, now=None: "1h ago")  # the browser's ages move
    root = Path(tempfile.mkdtemp(prefix="accuscope-snap-", dir="/tmp"))  # a path of the same length every run
    try:
        r = accuscope("compare", SNAP, "--out", root / "rknn")
        assert r.returncode == 0, r.stdout + r.stderr

        text, svg = opened_task_screen(root / "rknn")
        assert "x_int8" in text, text
        check_snapshot("rknn-task-80x24", svg)
    finally:
        shutil.rmtree(root, ignore_errors=True)
