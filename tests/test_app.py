"""The app on the demo workspace, driven with Pilot: what a user sees change when they press keys."""
from __future__ import annotations

import json

import numpy as np

from accuscope.app.advicescreen import AdviceScreen
from accuscope.app.app import AccuscopeApp
from accuscope.app.browser import BrowserScreen
from accuscope.app.chart import MetricChart, downsample
from accuscope.app.dialogs import ConfirmDialog, HelpScreen
from accuscope.app.graphscreen import GraphScreen
from accuscope.app.newtask import NewTaskScreen
from accuscope.app.optable import OperatorTable
from accuscope.app.taskscreen import TaskScreen
from accuscope.engine.demo import MAIN
from accuscope.engine.task import load_task
from accuscope.engine.taskrun import spec_from_meta

from appkit import drive, screen_text, wait_for


def test_browser_lists_tasks_and_opens_one(ws):
    async def script(pilot):
        browser = pilot.app.screen
        assert isinstance(browser, BrowserScreen)
        names = {e.name for e in browser.entries}
        assert MAIN.name in names and len(names) == 3
        row = [e.name for e in browser.entries].index(MAIN.name)
        browser.query_one("DataTable").move_cursor(row=row)
        await pilot.press("enter")
        await pilot.pause()
        screen = pilot.app.screen
        assert isinstance(screen, TaskScreen)
        table = screen.query_one(OperatorTable)
        assert len(table.view) == len(load_task(ws / MAIN.name).table)
        await pilot.press("q")
        assert pilot.app.screen is browser
    drive(AccuscopeApp(ws), script)


def test_first_failing_row_filter_and_back(ws):
    task = load_task(ws / MAIN.name)
    fail = task.table.columns["fail"]
    first = int(np.flatnonzero(fail)[0])

    async def script(pilot):
        screen = pilot.app.screen
        table = screen.query_one(OperatorTable)
        await pilot.press("!")
        assert table.cursor_row == first
        summary = str(screen.query_one("#summary").render())
        assert f"#{task.table.columns['index'][first]}" in summary and "rows fail" in summary
        await pilot.press("f")
        await pilot.press(*"cos < 0.99")
        await pilot.press("enter")
        shown = int((task.table.numbers("cos") < 0.99).sum())
        assert len(table.view) == shown < len(task.table)
        assert "filter" in str(screen.query_one("#status").render())
        await pilot.press("escape")  # clears the filter
        assert len(table.view) == len(task.table)
        await pilot.press("escape")  # back to the browser
        assert isinstance(pilot.app.screen, BrowserScreen)
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)


def test_bad_filter_keeps_the_prompt_and_says_why(ws):
    async def script(pilot):
        screen = pilot.app.screen
        await pilot.press("f", *"cos << 1", "enter")
        await pilot.pause()
        assert screen.prompt_mode == "filter"
        assert len(screen.query_one(OperatorTable).view) == len(load_task(ws / MAIN.name).table)
        assert any("filter" in (n.title or "") for n in pilot.app._notifications)
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)


def test_chart_follows_cursor_and_metric_key(ws):
    async def script(pilot):
        screen = pilot.app.screen
        chart = screen.query_one(MetricChart)
        table = screen.query_one(OperatorTable)
        assert chart.metric == "cos"
        await pilot.press("c")
        assert chart.metric == table.table.metric_keys[1]
        await pilot.press("!")
        assert chart._selected == table.cursor_row
        assert "by row index" in str(chart.border_title)
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)


def test_thresholds_edit_changes_failures_and_is_saved(ws):
    async def script(pilot):
        screen = pilot.app.screen
        before = int(screen.query_one(OperatorTable).table.columns["fail"].sum())
        await pilot.press("t")
        await pilot.pause()
        dialog = pilot.app.screen
        dialog.query_one("Input").value = "cos=0.5"
        await pilot.press("enter")
        await pilot.pause()
        after = int(screen.query_one(OperatorTable).table.columns["fail"].sum())
        assert after < before
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)
    doc = json.loads((ws / MAIN.name / "task.json").read_text())
    assert doc["thresholds"] == {"cos": {"fail_if": "<", "value": 0.5}}
    assert load_task(ws / MAIN.name).thresholds.get("red") is None


def test_delete_asks_first(ws):
    async def script(pilot):
        browser = pilot.app.screen
        await pilot.press("d")
        assert isinstance(pilot.app.screen, ConfirmDialog)
        await pilot.press("n")
        assert len(browser.entries) == 3
        await pilot.press("d", "y")
        await pilot.pause()
        assert len(browser.entries) == 2
    drive(AccuscopeApp(ws), script)
    assert len([p for p in ws.iterdir() if (p / "task.json").exists()]) == 2


def test_help_lists_the_screen_keys(ws):
    async def script(pilot):
        await pilot.press("?")
        help_screen = pilot.app.screen
        assert isinstance(help_screen, HelpScreen)
        text = screen_text(pilot.app)
        assert "filter" in text and "next failing" in text.lower() and "thresholds" in text
        await pilot.press("escape")
        assert isinstance(pilot.app.screen, TaskScreen)
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)


def slow_rerun(task, tmp_path, seconds):
    """The task's comparison again, with a plugin that sleeps `seconds` per pair (a long run)."""
    (tmp_path / "slow" / "algorithm").mkdir(parents=True)
    (tmp_path / "slow" / "algorithm" / "alg_Slow.py").write_text(
        "import time\n"
        "def compare(my_output_dump_data, ground_truth_dump_data, args):\n"
        f"    time.sleep({seconds})\n"
        "    return '1', ''\n")
    spec = spec_from_meta(task.meta, task.thresholds)
    spec.custom_dir = str(tmp_path / "slow")
    spec.algorithms = None
    return spec


def test_rerun_in_the_app_rows_arrive_and_keys_work_meanwhile(ws, tmp_path):
    """Re-running a task: rows appear while it runs, keys are handled meanwhile, the new result is saved."""
    folder = ws / MAIN.name
    task = load_task(folder)
    spec = slow_rerun(task, tmp_path, 0.05)
    before = task.csv

    async def script(pilot):
        screen = pilot.app.screen
        table = screen.query_one(OperatorTable)
        await wait_for(pilot, lambda: screen.running and 0 < len(screen._live or []) < len(task.table), 60)
        chart = screen.query_one(MetricChart)
        metric = chart.metric
        await pilot.press("c")  # handled while the comparison runs
        assert chart.metric != metric
        await wait_for(pilot, lambda: not screen.running, 120)
        assert len(table.table) == len(task.table) and "Slow" in table.table.custom
    drive(AccuscopeApp(ws, compare=(spec, folder)), script)
    after = load_task(folder)
    assert after.meta["state"] == "done" and after.csv != before and "Slow" in after.table.custom


def test_cancelled_run_keeps_the_previous_result(ws, tmp_path):
    folder = ws / MAIN.name
    task = load_task(folder)
    old_csv = task.csv.read_bytes()
    spec = slow_rerun(task, tmp_path, 0.5)

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.running and screen._plan is not None)
        await pilot.press("escape")
        assert isinstance(pilot.app.screen, ConfirmDialog)
        await pilot.press("y")
        await wait_for(pilot, lambda: not screen.running, 60)
        assert len(screen.query_one(OperatorTable).table) == len(task.table)  # the old result, reloaded
    drive(AccuscopeApp(ws, compare=(spec, folder)), script)
    after = load_task(folder)
    assert after.meta["state"] == "cancelled"
    assert after.csv.read_bytes() == old_csv and len(list(folder.glob("result_*.csv"))) == 1


def test_quit_during_a_run_asks(ws, tmp_path):
    folder = ws / MAIN.name
    task = load_task(folder)
    spec = slow_rerun(task, tmp_path, 0.5)

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.running)
        await pilot.press("ctrl+q")
        assert isinstance(pilot.app.screen, ConfirmDialog)
        await pilot.press("n")
        assert pilot.app.is_running and screen.running
        await pilot.press("ctrl+q", "y")
        await wait_for(pilot, lambda: screen.cancel.is_set())
    drive(AccuscopeApp(ws, compare=(spec, folder)), script)


def test_downsample_keeps_extremes():
    x = np.arange(10_000, dtype=float)
    y = np.ones(10_000)
    y[1234], y[8765] = 0.2, 1.7
    xs, ys = downsample(x, y, 50)
    assert len(xs) <= 100 and 0.2 in ys and 1.7 in ys and 1234 in xs


def test_advisor_strip_and_screen_jump_to_the_op_that_introduced_the_error(ws):
    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.advice is not None)
        strip = str(screen.query_one("#summary").render())
        assert strip.startswith("✗ the model fails") and "introduced the error" in strip  # verdict, then the op
        await pilot.press("a")
        assert isinstance(pilot.app.screen, AdviceScreen)
        first = pilot.app.screen.advice.cause
        assert first.rule == "introduced" and "/block1/conv1/Conv" in first.op
        await pilot.press("down")
        await pilot.press("enter")
        assert pilot.app.screen is screen
        table = screen.query_one(OperatorTable)
        assert table.cursor_row == first.row
        assert table.table.columns["origin"][first.row] == "introduced"
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)
    assert (ws / MAIN.name / "advice.json").exists()


def test_new_task_form_checks_fields_and_runs(ws):
    meta = load_task(ws / MAIN.name).meta

    async def script(pilot):
        await pilot.press("n")
        form = pilot.app.screen
        assert isinstance(form, NewTaskScreen)
        form.query_one("#npu").value = str(ws / "nowhere")
        await pilot.pause()
        assert "no such file" in str(form.query_one("#why-npu").render())
        form.query_one("#npu").value = meta["model"]  # a model is not dumped tensors
        await pilot.pause()
        assert "not dumped tensors" in str(form.query_one("#why-npu").render())
        (ws / "not-a-dump").mkdir(exist_ok=True)
        (ws / "not-a-dump" / "notes.txt").write_text("x")
        form.query_one("#npu").value = str(ws / "not-a-dump")  # a folder of the wrong kind: no green tick
        await pilot.pause()
        assert "not a dump" in str(form.query_one("#why-npu").render())
        form.query_one("#npu").value = meta["golden"]  # any dump may stand on either side
        await pilot.pause()
        assert "✓ npy" in str(form.query_one("#why-npu").render())
        form.query_one("#golden").value = meta["golden"]
        form.query_one("#model").value = meta["model"]
        form.query_one("#name").value = str(ws / "fresh")
        form.query_one("#range").value = "1,-1"
        await pilot.pause()
        assert "three integers" in str(form.query_one("#why-range").render())
        await pilot.press("ctrl+s")
        assert pilot.app.screen is form  # refused: fields to fix
        form.query_one("#npu").value = meta["npu"]
        form.query_one("#range").value = ""
        await pilot.pause()
        assert "✓" in str(form.query_one("#why-npu").render())
        await pilot.press("ctrl+s")
        screen = pilot.app.screen
        assert isinstance(screen, TaskScreen)
        await wait_for(pilot, lambda: not screen.running and len(screen.table_widget.table) > 0)
    drive(AccuscopeApp(ws), script)
    assert load_task(ws / "fresh").meta["state"] == "done"


def test_graph_follows_the_table_and_back(ws):
    async def script(pilot):
        screen = pilot.app.screen
        table = screen.query_one(OperatorTable)
        await pilot.press("exclamation_mark")
        row = table.cursor_row
        await pilot.press("g")
        graph = pilot.app.screen
        assert isinstance(graph, GraphScreen)
        await wait_for(pilot, lambda: graph.graph is not None)
        await pilot.press("o")  # to the consumer of the failing conv
        await pilot.pause()
        await pilot.press("q")
        assert pilot.app.screen is screen
        assert table.cursor_row != row
        assert table.table.columns["npu_op"][table.cursor_row] != table.table.columns["npu_op"][row]
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script, size=(160, 50))


def test_new_task_form_asks_a_raw_bin_golden_for_shape_and_dtype(ws, tmp_path):
    from accuscope.engine.ascend import DumpTensor, write_dump_file
    y = np.linspace(-1, 1, 128, dtype=np.float32).reshape(1, 8, 4, 4)
    (tmp_path / "npu").mkdir()
    write_dump_file(tmp_path / "npu" / "Conv2D.conv1.3.1700000000000000", "conv1",
                    outputs=[DumpTensor(y.astype(np.float16))])
    y.tofile(tmp_path / "conv1.bin")

    async def script(pilot):
        await pilot.press("n")
        form = pilot.app.screen
        form.query_one("#npu").value = str(tmp_path / "npu")
        form.query_one("#golden").value = str(tmp_path / "conv1.bin")
        form.query_one("#name").value = str(ws / "bin")
        await pilot.pause()
        assert "needs its shape and dtype" in str(form.query_one("#why-shape").render())
        form.query_one("#shape").value = "1,8,4,4"
        form.query_one("#dtype").value = "float32"
        await pilot.pause()
        await pilot.press("ctrl+s")
        screen = pilot.app.screen
        assert isinstance(screen, TaskScreen)
        await wait_for(pilot, lambda: not screen.running and len(screen.table_widget.table) > 0)
    drive(AccuscopeApp(ws), script)
    task = load_task(ws / "bin")
    assert task.meta["golden_shape"] == [1, 8, 4, 4] and task.table.numbers("cos")[-1] > 0.9999
