"""A comparison that saw too little is never shown as a pass: the browser marks it and the task
screen says so above any verdict (task.json's coverage, written by compare)."""
from __future__ import annotations

import json

from accuscope.app.app import AccuscopeApp
from accuscope.app.browser import BrowserScreen
from accuscope.app.taskscreen import TaskScreen
from accuscope.engine.demo.workspace import ONNX_FP16
from appkit import drive, screen_text, wait_for

WARNING = "only 3 of 81 NPU tensors have a golden counterpart"


def test_too_little_compared_is_marked_in_the_browser_and_the_summary(ws):
    task = ws / ONNX_FP16.name
    meta = json.loads((task / "task.json").read_text())
    meta["coverage"]["warnings"] = [WARNING]
    (task / "task.json").write_text(json.dumps(meta))

    async def script(pilot):
        browser = pilot.app.screen
        assert isinstance(browser, BrowserScreen)
        await pilot.pause()
        line = next(line for line in screen_text(pilot.app).splitlines() if ONNX_FP16.name in line)
        assert " ! " in line and "✓" not in line  # not the pass mark
        row = [e.name for e in browser.entries].index(ONNX_FP16.name)
        browser.query_one("DataTable").move_cursor(row=row)
        await pilot.press("enter")
        screen = pilot.app.screen
        assert isinstance(screen, TaskScreen)
        await wait_for(pilot, lambda: len(screen.table_widget.table) > 0)
        await pilot.pause()
        text = " ".join(screen_text(pilot.app).split())
        assert "! saw too little: only 3 of 81 NPU tensors" in text
    drive(AccuscopeApp(ws), script, size=(160, 40))
