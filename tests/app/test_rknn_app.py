"""An RKNN task in the app (Pilot, text on screen): the snapshot compared by the CLI opens, its layers in the
map's order, RKNN's own single-layer figures in their columns beside accuscope's cos and euc."""
from __future__ import annotations

from pathlib import Path

from accuscope.app.app import AccuscopeApp
from accuscope.app.optable import OperatorTable
from appkit import drive, screen_text, wait_for
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
