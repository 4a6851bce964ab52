"""The new-task form's format-option fields: what the side's format takes shown under the field,
a wrong option named, and the options reaching the comparison it starts (task.json)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from textual.widgets import Input

from accuscope.app.app import AccuscopeApp
from accuscope.app.newtask import NewTaskScreen
from appkit import drive, start_from_form


def _atb(root: Path, scale_round1: float) -> Path:
    rng = np.random.default_rng(0)
    for rnd in ("0", "1"):
        for k in range(1, 4):
            a = rng.standard_normal((4, 8)).astype("<f4") * (scale_round1 if rnd == "1" else 1)
            path = root / "0_4242" / rnd / "0_Model" / f"{k}_ConvOperation" / "after" / "outtensor0.bin"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"$Version=1.0\nformat=2\ndtype=0\ndims=4,8\n$End=1\n" + a.tobytes())
    return root


def test_option_fields_follow_the_sides_format_and_reach_the_task(tmp_path):
    npu, gold = _atb(tmp_path / "npu", 1.5), _atb(tmp_path / "gold", 1.0)

    async def script(pilot):
        await pilot.press("n")
        form = pilot.app.screen
        assert isinstance(form, NewTaskScreen)
        form.query_one("#npu", Input).value = str(npu)
        await pilot.pause()
        assert "atb takes: round=NAME" in str(form.query_one("#why-npu_options").render())
        form.query_one("#npu_options", Input).value = "turn=1"
        await pilot.pause()
        assert "no option 'turn'" in str(form.query_one("#why-npu_options").render())
        form.query_one("#npu_options", Input).value = "round=0_4242/1"
        form.query_one("#golden", Input).value = str(gold)
        form.query_one("#golden_options", Input).value = "round=0_4242/1"
        form.query_one("#out", Input).value = str(tmp_path / "task")
        await pilot.pause()
        assert "✓ atb: round=0_4242/1" in str(form.query_one("#why-npu_options").render())
        await start_from_form(pilot)
    drive(AccuscopeApp(tmp_path), script, size=(120, 60))
    meta = json.loads((tmp_path / "task" / "task.json").read_text())
    assert meta["npu_options"] == {"round": "0_4242/1"} and meta["golden_options"] == {"round": "0_4242/1"}
