"""A comparison that saw too little says so beside its verdict: the browser marks each task by the verdict
task.json records (a coverage note never changes it: judgement.verdict decides, on what was judged), and
the task screen says what was not seen above the verdict (task.json's coverage, written by compare)."""
from __future__ import annotations

import json

from textual.widgets import DataTable

from accuscope.app.app import AccuscopeApp
from accuscope.app.browser import BrowserScreen
from accuscope.app.taskscreen import TaskScreen
from accuscope.engine.demo.workspace import ONNX_FP16
from appkit import drive, screen_text, wait_for
from support.narrow import present

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
        assert " ✓ " in line  # the recorded verdict: the outputs it judged pass
        row = [e.name for e in browser.entries].index(ONNX_FP16.name)
        browser.query_one(DataTable).move_cursor(row=row)
        await pilot.press("enter")
        screen = pilot.app.screen
        assert isinstance(screen, TaskScreen)
        await wait_for(pilot, lambda: len(screen.table_widget.table) > 0)
        await pilot.pause()
        text = " ".join(screen_text(pilot.app).split())
        assert "! saw too little: only 3 of 81 NPU tensors" in text
    drive(AccuscopeApp(ws), script, size=(160, 40))


def test_the_advisor_screen_charts_a_gradual_drift(tmp_path):
    """A result whose error grows a little at each of 30 ops: the advisor says drift, and its
    screen draws the growth."""
    from accuscope.app.advicescreen import AdviceScreen
    from accuscope.app.chart import GrowthChart
    from accuscope.engine.compare.results import ResultTable
    from accuscope.engine.compare.thresholds import Thresholds
    from accuscope.engine.tasks.task import save_task
    rows = []
    for k in range(30):
        red = 0.002 * (k + 1)  # 0.2% more at each op, 6% at the output
        for io in ("input", "output"):
            rows.append({"type": "Conv2D", "npu_op": f"conv{k}", "golden_op": f"conv{k}", "tensor": f"conv{k}:{io}:0",
                         "io": io, "cos": 1 - red * red, "red": red - (0.002 if io == "input" else 0),
                         "npu_dtype": "float16", "npu_nonfinite": 0, "golden_nonfinite": 0,
                         "is_output": io == "output" and k == 29})
    folder = tmp_path / "ws" / "drift"
    save_task(folder, {"model": None}, ResultTable.from_rows(rows), Thresholds())

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: getattr(screen, "advice", None) is not None)
        await pilot.press("a")
        advice = pilot.app.screen
        assert isinstance(advice, AdviceScreen)
        k = next(i for i, f in enumerate(present(advice.advice).findings) if f.rule == "drift")
        for _ in range(k):
            await pilot.press("down")
        await pilot.pause()
        chart = advice.query_one(GrowthChart)
        assert chart.display and "rel. error by row: how the error grows" in str(chart.border_title)
        assert "gradual drift from conv" in " ".join(screen_text(pilot.app).split())
    drive(AccuscopeApp(tmp_path / "ws", open_path=folder), script, size=(100, 40))
