"""The app on the demo workspace, driven with Pilot: what a user sees change when they press keys."""
from __future__ import annotations

import csv
import json
import shutil
import threading

import numpy as np
from textual.geometry import Region
from textual.widgets import DataTable, Input

from accuscope.app.advicescreen import AdviceScreen
from accuscope.app.app import AccuscopeApp
from accuscope.app.browser import BrowserScreen
from accuscope.app.chart import MetricChart, downsample
from accuscope.app.dialogs import ConfirmDialog, HelpScreen
from accuscope.app.footer import Footer
from accuscope.app.graphscreen import GraphScreen
from accuscope.app.newtask import NewTaskScreen
from accuscope.app.optable import OperatorTable
from accuscope.app.taskscreen import TaskScreen
from accuscope.engine.demo.workspace import MAIN, TASKS
from accuscope.engine.tasks.task import Task, load_task
from appkit import drive, screen_text, start_from_form, task_screen, type_fast, wait_for
from support.narrow import present


def test_browser_lists_tasks_and_opens_one(ws):
    async def script(pilot):
        browser = pilot.app.screen
        assert isinstance(browser, BrowserScreen)
        names = {e.name for e in browser.entries}
        assert MAIN.name in names and len(names) == len(TASKS)
        row = [e.name for e in browser.entries].index(MAIN.name)
        browser.query_one(DataTable).move_cursor(row=row)
        await pilot.press("enter")
        await pilot.pause()
        screen = pilot.app.screen
        assert isinstance(screen, TaskScreen)
        table = screen.query_one(OperatorTable)
        assert len(table.view) == len(present(load_task(ws / MAIN.name).table))
        await pilot.press("q")
        assert pilot.app.screen is browser
    drive(AccuscopeApp(ws), script)


def test_first_failing_row_filter_and_back(ws):
    task = load_task(ws / MAIN.name)
    assert task.table is not None
    fail = task.table.columns["fail"]
    first = int(np.flatnonzero(fail)[0])

    async def script(pilot):
        screen = pilot.app.screen
        table = screen.query_one(OperatorTable)
        await pilot.press("!")
        assert table.cursor_row == first
        summary = str(screen.query_one("#summary").render())
        assert task.table is not None
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
        assert len(screen.query_one(OperatorTable).view) == len(present(load_task(ws / MAIN.name).table))
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
    seen = {}

    async def script(pilot):
        screen = pilot.app.screen
        before = int(screen.query_one(OperatorTable).table.columns["fail"].sum())
        await pilot.press("t")
        await pilot.pause()
        dialog = pilot.app.screen
        assert "cos < 0.99" in screen_text(pilot.app)  # the current thresholds are shown
        dialog.query_one("Input").value = "cos=0.5 kl=off"
        await pilot.press("enter")
        await pilot.pause()
        await wait_for(pilot, lambda: not screen.saving)  # saved by a worker
        after = seen["failing"] = int(screen.query_one(OperatorTable).table.columns["fail"].sum())
        assert after < before
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)
    doc = json.loads((ws / MAIN.name / "task.json").read_text())
    # the result is saved again: the CSV's IsPrecisionError and task.json's count are the table's
    with (ws / MAIN.name / doc["csv"]).open(newline="") as f:
        flags = [row["IsPrecisionError"] for row in csv.DictReader(f)]
    assert doc["failing"] == flags.count("YES") == seen["failing"]
    # only the named thresholds change: cos is 0.5, kl is off, red, rmse and mean_rel stay
    assert doc["thresholds"] == {"cos": {"fail_if": "<", "value": 0.5}, "red": {"fail_if": ">", "value": 0.05},
                                 "rmse": {"fail_if": ">", "value": 1.0}, "mean_rel": {"fail_if": ">", "value": 1.0}}
    assert present(load_task(ws / MAIN.name).thresholds).get("kl") is None


async def _edit_thresholds(pilot, text):
    await pilot.press("t")
    await pilot.pause()
    pilot.app.screen.query_one("Input").value = text
    await pilot.press("enter")
    await pilot.pause()


def test_thresholds_are_saved_by_a_worker_while_the_table_answers(ws, monkeypatch):
    release, real = threading.Event(), Task.set_thresholds

    def held(task, thresholds):  # the real save, once the test has looked at the screen meanwhile
        release.wait(60)
        real(task, thresholds)
    monkeypatch.setattr(Task, "set_thresholds", held)

    async def script(pilot):
        screen = pilot.app.screen
        table = screen.query_one(OperatorTable)
        before = int(table.table.columns["fail"].sum())
        await _edit_thresholds(pilot, "cos=0.5 kl=off")
        assert "thresholds: saving…" in screen_text(pilot.app)
        assert int(table.table.columns["fail"].sum()) < before  # the rows are judged at once
        cursor = table.cursor
        await pilot.press("down", "down")
        assert table.cursor == cursor + 2  # the table answers while the save runs
        release.set()
        await wait_for(pilot, lambda: not screen.saving)
        await pilot.pause()
        assert "saving…" not in screen_text(pilot.app)
        assert any("thresholds saved in task.json" in n.message for n in pilot.app._notifications)
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script, size=(160, 50))
    assert json.loads((ws / MAIN.name / "task.json").read_text())["thresholds"]["cos"]["value"] == 0.5


def test_the_advice_follows_thresholds_edited_here_before_they_are_saved(ws, monkeypatch):
    """The advisor works on the opened task: thresholds edited in the app count although task.json
    still holds the old ones (here the save never writes them)."""
    from accuscope.engine.diagnose import advisor
    monkeypatch.setattr(Task, "set_thresholds", lambda task, thresholds: None)
    advised, real = [], advisor.current_advice

    def recording(task, progress=None):
        advised.append(task)
        return real(task, progress)
    monkeypatch.setattr(advisor, "current_advice", recording)

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.advice is not None)
        assert screen.advice.task["thresholds"]["cos"]["value"] == 0.99
        # the worker's own snapshot: the thresholds edited below never change under it
        assert advised and advised[0] is not screen.opened and advised[0].thresholds is not screen.thresholds
        await _edit_thresholds(pilot, "cos=0.5 kl=off")
        await wait_for(pilot, lambda: not screen.saving and not screen.advising and screen.advice is not None)
        await pilot.press("a")
        assert isinstance(pilot.app.screen, AdviceScreen)
        made_for = present(pilot.app.screen.advice).task["thresholds"]
        assert made_for["cos"]["value"] == 0.5 and "kl" not in made_for
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script, size=(160, 50))
    assert json.loads((ws / MAIN.name / "task.json").read_text())["thresholds"]["cos"]["value"] == 0.99


def test_the_save_worker_saves_a_snapshot_and_the_opened_task_takes_what_it_wrote(ws, monkeypatch):
    """The worker never changes the task the screen renders: it saves its own copy, and the opened
    task takes the new result file and task.json from its message."""
    saved, real = [], Task.set_thresholds

    def recording(task, thresholds):
        saved.append((task, task.table, thresholds))
        real(task, thresholds)
    monkeypatch.setattr(Task, "set_thresholds", recording)

    async def script(pilot):
        screen = pilot.app.screen
        opened, csv_before = screen.opened, screen.opened.csv
        await _edit_thresholds(pilot, "cos=0.5")
        await wait_for(pilot, lambda: not screen.saving)
        (task, table, thresholds), = saved
        assert task is not opened and table is not opened.table and thresholds is not opened.thresholds
        assert screen.opened is opened and opened.doc.thresholds["cos"]["value"] == 0.5
        assert opened.csv == task.csv != csv_before and opened.csv.is_file()
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script, size=(160, 50))


def test_the_advice_follows_thresholds_whose_save_failed(ws):
    """The save fails (the task folder became a file): the notice names task.json, and the advisor
    judges the rows under the thresholds shown all the same, not under the ones it replaced."""
    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.advice is not None, 60)
        assert "output cos 0.9523 < 0.99" in screen_text(pilot.app)
        shutil.rmtree(ws / MAIN.name)
        (ws / MAIN.name).write_text("a file where the task folder was")
        await _edit_thresholds(pilot, "cos=0.5 kl=off")
        await wait_for(pilot, lambda: not screen.saving and not screen.advising, 60)
        await pilot.pause()
        assert any(f"saving thresholds in {ws / MAIN.name / 'task.json'}:" in n.message and n.severity == "error"
                   for n in pilot.app._notifications)
        text = screen_text(pilot.app)
        assert "output red 0.3289 > 0.05" in text and "< 0.99" not in text
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script, size=(160, 50))


def test_the_advisor_opened_while_the_thresholds_are_saved_waits_for_their_advice(ws, monkeypatch):
    """a pressed while the edited thresholds are being saved (and advised on after): the advisor screen
    says judging… until the advice for them comes, never showing the advice for the old thresholds."""
    release, real = threading.Event(), Task.set_thresholds

    def held(task, thresholds):
        release.wait(60)
        real(task, thresholds)
    monkeypatch.setattr(Task, "set_thresholds", held)

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.advice is not None, 60)
        await _edit_thresholds(pilot, "cos=0.5 kl=off")
        await pilot.press("a")
        assert isinstance(pilot.app.screen, AdviceScreen)
        text = screen_text(pilot.app)
        assert "judging…" in text and "the model fails" not in text
        release.set()
        await wait_for(pilot, lambda: not screen.saving and not screen.advising, 60)
        await pilot.pause()
        text = screen_text(pilot.app)
        assert "output red 0.3289 > 0.05" in text and "judging…" not in text and "< 0.99" not in text
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script, size=(160, 50))


def test_delete_asks_first(ws):
    async def script(pilot):
        browser = pilot.app.screen
        await pilot.press("d")
        assert isinstance(pilot.app.screen, ConfirmDialog)
        text = screen_text(pilot.app)
        assert "Delete the task folder" in text and "y yes" in text and "n no" in text  # not an empty box
        await pilot.press("n")
        assert len(browser.entries) == len(TASKS)
        await pilot.press("d", "y")
        await pilot.pause()
        assert len(browser.entries) == len(TASKS) - 1
    drive(AccuscopeApp(ws), script)
    assert len([p for p in ws.iterdir() if (p / "task.json").exists()]) == len(TASKS) - 1


def test_help_lists_the_screen_keys(ws):
    async def script(pilot):
        await pilot.press("?")
        help_screen = pilot.app.screen
        assert isinstance(help_screen, HelpScreen)
        text = screen_text(pilot.app)
        assert "filter" in text and "next failing" in text.lower() and "thresholds" in text
        seen = set(text.splitlines())
        for _ in range(40):  # j scrolls the help down to its end
            await pilot.press("j")
            seen |= set(screen_text(pilot.app).splitlines())
        everything = "\n".join(seen)
        assert "Filter expressions" in everything and "row details" in everything
        # the screen's own keys only: not the text-editing keys of the (hidden) filter prompt
        assert "delete" not in everything.lower() and "cursor" not in everything.lower()
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
    spec = task.doc.spec(task.thresholds)
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
        assert task.table is not None
        await wait_for(pilot, lambda: screen.running and 0 < len(screen._live or []) < len(task.table), 60)
        chart = screen.query_one(MetricChart)
        metric = chart.metric
        await pilot.press("c")  # handled while the comparison runs
        assert chart.metric != metric
        await wait_for(pilot, lambda: not screen.running, 120)
        assert len(table.table) == len(task.table) and "Slow" in table.table.custom
    drive(AccuscopeApp(ws, compare=(spec, folder)), script)
    after = load_task(folder)
    assert after.table is not None
    assert after.doc.state == "done" and after.csv != before and "Slow" in after.table.custom


def test_thresholds_edited_during_a_run_leave_the_run_alone_and_judge_its_result(ws, tmp_path):
    """An edit while the comparison runs is a new value: the running comparison keeps its own
    thresholds (never half-edited under it); its result, once landed, is judged and saved under the edit."""
    folder = ws / MAIN.name
    spec = slow_rerun(load_task(folder), tmp_path, 0.05)

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.running and screen._plan is not None, 60)
        await _edit_thresholds(pilot, "cos=0.5 kl=off")
        assert screen.running and screen.thresholds.get("cos").value == 0.5
        assert spec.thresholds.get("cos").value == 0.99 and spec.thresholds.get("kl") is not None  # the run's
        await wait_for(pilot, lambda: not screen.running and not screen.saving, 120)
        await wait_for(pilot, lambda: screen.opened is not None and screen.opened.doc.thresholds["cos"]["value"] == 0.5)
    drive(AccuscopeApp(ws, compare=(spec, folder)), script)
    doc = json.loads((folder / "task.json").read_text())
    assert doc["state"] == "done" and doc["thresholds"]["cos"]["value"] == 0.5 and "kl" not in doc["thresholds"]


def test_cancelled_run_keeps_the_previous_result(ws, tmp_path):
    folder = ws / MAIN.name
    task = load_task(folder)
    assert task.csv is not None
    old_csv = task.csv.read_bytes()
    spec = slow_rerun(task, tmp_path, 0.5)

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.running and screen._plan is not None)
        await pilot.press("escape")
        assert isinstance(pilot.app.screen, ConfirmDialog)
        text = screen_text(pilot.app)
        assert "Cancel the running comparison?" in text and "y yes" in text and "n no" in text
        await pilot.press("y")
        await wait_for(pilot, lambda: not screen.running, 60)
        assert task.table is not None
        assert len(screen.query_one(OperatorTable).table) == len(task.table)  # the old result, reloaded
    drive(AccuscopeApp(ws, compare=(spec, folder)), script)
    after = load_task(folder)
    assert after.doc.state == "cancelled"
    assert after.csv is not None
    assert after.csv.read_bytes() == old_csv and len(list(folder.glob("result_*.csv"))) == 1

    async def reopened(pilot):
        assert "cancelled" in str(pilot.app.screen.query_one("#status").render())  # its state stays shown
    drive(AccuscopeApp(ws, open_path=folder), reopened)


def moved_inputs(folder, tmp_path):
    """The task's input folders moved away: neither where task.json says nor beside it."""
    doc = json.loads((folder / "task.json").read_text())
    for side in ("npu", "golden"):
        shutil.move(folder / side, tmp_path / f"moved-{side}")
        doc[side] = str(tmp_path / "gone" / side)
    (folder / "task.json").write_text(json.dumps(doc))


def test_rerun_with_moved_inputs_says_why_and_the_app_goes_on(ws, tmp_path):
    folder = ws / MAIN.name
    moved_inputs(folder, tmp_path)

    async def script(pilot):
        screen = pilot.app.screen
        await pilot.press("R")
        await wait_for(pilot, lambda: "failed: " in str(screen.query_one("#status").render()))
        assert pilot.app.is_running and pilot.app.screen is screen
        assert any("no such file or folder" in n.message for n in pilot.app._notifications)
        await pilot.press("c")  # still usable
        await pilot.press("q")
        assert isinstance(pilot.app.screen, BrowserScreen)
    drive(AccuscopeApp(ws, open_path=folder), script)
    assert len(present(load_task(folder).table)) > 0  # the previous result is kept


def test_new_task_form_refuses_a_folder_without_golden_data(ws, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()

    async def script(pilot):
        await pilot.press("n")
        form = pilot.app.screen
        form.query_one("#npu", Input).value = load_task(ws / MAIN.name).doc.npu
        form.query_one("#golden", Input).value = str(empty)  # a folder, but no golden dump: no green tick
        await pilot.pause()
        assert "empty folder" in str(form.query_one("#why-golden").render())
        form.query_one("#out", Input).value = str(ws / MAIN.name / "task.json")  # a file
        await pilot.pause()
        assert "a file, not a folder" in str(form.query_one("#why-out").render())
        await pilot.press("ctrl+s")
        assert pilot.app.screen is form and pilot.app.is_running  # refused, the reasons beside the fields
    drive(AccuscopeApp(ws), script)


def test_a_task_that_failed_shows_its_error_not_an_empty_table(ws, tmp_path):
    task = load_task(ws / MAIN.name)
    spec = task.doc.spec(task.thresholds)
    spec.npu = str(tmp_path / "moved" / "npu")

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: not screen.running)
        await pilot.pause()
        assert pilot.app.is_running
        text = screen_text(pilot.app)
        assert "failed: " in text and "no rows yet" not in text
    drive(AccuscopeApp(ws, compare=(spec, tmp_path / "new")), script)


def test_filters_that_used_to_crash_the_app_work_or_say_why(ws):
    async def script(pilot):
        screen = pilot.app.screen
        table = screen.query_one(OperatorTable)
        prompt = screen.query_one("#prompt")
        await pilot.press("f")
        prompt.value = "cos < 0.99 and True"
        await pilot.press("enter")
        assert len(table.view) == int((table.table.numbers("cos") < 0.99).sum())
        await pilot.press("f")
        prompt.value = "not " * 5000 + "True"
        await pilot.press("enter")
        await pilot.pause()
        assert pilot.app.is_running and screen.prompt_mode == "filter"  # kept open to fix it
        assert any("nests too deeply" in n.message for n in pilot.app._notifications)
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)


def plugin_task(ws, tmp_path):
    """The main task as if compared with a plugin folder whose plugin leaves a file behind when run."""
    plugins = tmp_path / "plugins"
    (plugins / "algorithm").mkdir(parents=True)
    ran = tmp_path / "plugin-ran"
    (plugins / "algorithm" / "alg_Touch.py").write_text(
        "import pathlib\n"
        "def compare(my_output_dump_data, ground_truth_dump_data, args):\n"
        f"    pathlib.Path({str(ran)!r}).touch()\n"
        "    return '1', ''\n")
    folder = ws / MAIN.name
    doc = json.loads((folder / "task.json").read_text())
    doc["custom_dir"], doc["algorithms"] = str(plugins), None  # all algorithms, the plugin too
    (folder / "task.json").write_text(json.dumps(doc))
    return folder, plugins, ran


def test_rerun_runs_a_task_json_plugin_folder_only_once_confirmed(ws, tmp_path):
    folder, plugins, ran = plugin_task(ws, tmp_path)

    async def script(pilot):
        screen = task_screen(pilot.app)
        await pilot.press("R")
        await pilot.pause()
        assert isinstance(pilot.app.screen, ConfirmDialog)
        text = screen_text(pilot.app)
        assert "alg_*.py" in text and "/plugins" in text and "Trust" in text and "y run them" in text
        await pilot.press("escape")  # cancels the re-run altogether
        assert task_screen(pilot.app) is screen and not screen.running and not ran.exists()
        await pilot.press("R", "y")  # confirmed: they run, and are not asked about again in this run
        await wait_for(pilot, lambda: not screen.running, 120)
        assert ran.exists() and "Touch" in screen.query_one(OperatorTable).table.custom
        ran.unlink()
        await pilot.press("R")
        assert pilot.app.screen is screen  # no question this time
        await wait_for(pilot, lambda: ran.exists() and not screen.running, 120)
        ran.unlink()
    drive(AccuscopeApp(ws, open_path=folder), script)

    async def next_run(pilot):  # a new run of the app asks again; declined, the re-run goes without
        screen = pilot.app.screen
        await pilot.press("R")
        assert isinstance(pilot.app.screen, ConfirmDialog)
        await pilot.press("n")
        await wait_for(pilot, lambda: any("done" in n.message for n in pilot.app._notifications), 120)
        assert "Touch" not in screen.query_one(OperatorTable).table.custom
    drive(AccuscopeApp(ws, open_path=folder), script)
    drive(AccuscopeApp(ws, open_path=folder), next_run)
    assert not ran.exists()


def test_ctrl_c_says_how_to_quit(ws):
    async def script(pilot):
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert pilot.app.is_running
        assert any("ctrl+q quits" in n.message for n in pilot.app._notifications)
    drive(AccuscopeApp(ws), script)


def test_80x24_browser_keeps_its_counts_beside_a_long_task_name(ws):
    long_name = "a-task-whose-name-goes-on-and-on-" * 4
    (ws / MAIN.name).rename(ws / long_name)

    async def script(pilot):
        await pilot.pause()
        text = screen_text(pilot.app)
        task = load_task(ws / long_name)
        line = next(line for line in text.splitlines() if "a-task-whose" in line)
        assert len(line) <= 80 and f" {task.doc.rows} " in line and f" {task.doc.failing} " in line
        assert "…" in line and task.doc.first_failing_op[-8:] in line  # cut names, whole counts
        footer = text.splitlines()[-1]
        assert footer.rstrip().endswith("palette") and "? help" in footer  # keys are not cut mid-word
    drive(AccuscopeApp(ws), script)


def test_the_chart_takes_the_focus_and_z_maximizes_it(ws):
    async def script(pilot):
        screen = pilot.app.screen
        await pilot.press("tab")
        assert isinstance(screen.focused, MetricChart)
        await pilot.press("z")
        assert screen.maximized is screen.focused
        await pilot.pause()  # 80x24: the chart takes every row above the footer (not 8 rows amid hatching)
        assert screen.focused.region == Region(0, 0, 80, 23) and screen.query_one(Footer).region.y == 23
        await pilot.press("z")
        assert screen.maximized is None
        palette = [c.title for c in pilot.app.get_system_commands(screen)]
        assert palette.count("Maximize") == 1 and not any(t.startswith("Maximize ") for t in palette)
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)


def test_names_from_data_never_send_control_characters(ws):
    folder = ws / MAIN.name
    task = load_task(folder)
    assert task.table is not None
    task.table.columns["npu_op"][:] = "\x1b]0;pwned\x07\x1b[2J" + task.table.columns["npu_op"]
    first = int(np.flatnonzero(task.table.columns["fail"])[0])

    async def script(pilot):
        screen = TaskScreen(task=task)
        await pilot.app.push_screen(screen)
        await pilot.press("!")
        await pilot.pause()
        assert screen.query_one(OperatorTable).cursor_row == first
        strips = [strip for strip in pilot.app.screen._compositor.render_update(full=True).strips]
        drawn = "".join(segment.text for strip in strips for segment in strip)
        assert "?]0;pwned??[2J" in drawn and "\x1b" not in drawn and "\x07" not in drawn
    drive(AccuscopeApp(ws), script)


def test_quit_during_a_run_asks(ws, tmp_path):
    folder = ws / MAIN.name
    task = load_task(folder)
    spec = slow_rerun(task, tmp_path, 0.5)

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.running)
        await pilot.press("ctrl+q")
        assert isinstance(pilot.app.screen, ConfirmDialog)
        text = screen_text(pilot.app)
        assert "Cancel it and quit?" in text and "y yes" in text and "n no" in text
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
        first = present(pilot.app.screen.advice).cause
        assert first is not None
        assert first.rule == "introduced" and first.op == "/attn/norm/Pow"  # reaches the output (test_advisor)
        await pilot.press("down")
        await pilot.press("enter")
        assert pilot.app.screen is screen
        table = screen.query_one(OperatorTable)
        assert table.cursor_row == first.row
        assert table.extra["origin"][first.row] == "introduced"  # the app's column, beside the table
        assert "origin" not in table.table.columns and "origin" not in table.table.custom
        assert table.set_filter('origin == "introduced"') and all(  # filters see the app's columns
            table.extra["origin"][r] == "introduced" for r in table.view)
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)
    assert (ws / MAIN.name / "advice.json").exists()


def test_the_advisor_jumps_to_the_finding_the_keys_typed_fast_moved_to(ws):
    """`↓↓⏎` typed faster than the app answers: enter takes the finding the arrows moved to (a priority
    enter ran before them and jumped to the first finding); on the ranked ops (s), the op the arrows
    moved to."""
    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.advice is not None)
        await pilot.press("a")
        advice = pilot.app.screen
        rows = [f.row for f in advice.advice.findings]
        target = next(i for i, r in enumerate(rows) if r is not None and r != rows[0])
        await type_fast(pilot, *["down"] * target, "enter")
        await pilot.pause()
        assert pilot.app.screen is screen
        assert screen.query_one(OperatorTable).cursor_row == rows[target]
        await pilot.press("a", "s")
        advice = pilot.app.screen
        await wait_for(pilot, lambda: advice.ranking is not None)
        ops = [op.row for op in advice.ranking.ops]
        await type_fast(pilot, "down", "down", "enter")
        await pilot.pause()
        assert pilot.app.screen is screen and screen.query_one(OperatorTable).cursor_row == ops[2]
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)


def test_new_task_form_checks_fields_and_runs(ws):
    meta = load_task(ws / MAIN.name).doc.raw

    async def script(pilot):
        await pilot.press("n")
        form = pilot.app.screen
        assert isinstance(form, NewTaskScreen)
        form.query_one("#npu", Input).value = str(ws / "nowhere")
        await pilot.pause()
        assert "no such file" in str(form.query_one("#why-npu").render())
        form.query_one("#npu", Input).value = meta["model"]  # a model is not dumped tensors
        await pilot.pause()
        assert "not dumped tensors" in str(form.query_one("#why-npu").render())
        (ws / "not-a-dump").mkdir(exist_ok=True)
        (ws / "not-a-dump" / "notes.txt").write_text("x")
        form.query_one("#npu", Input).value = str(ws / "not-a-dump")  # a folder of the wrong kind: no green tick
        await pilot.pause()
        assert "not a dump" in str(form.query_one("#why-npu").render())
        form.query_one("#npu", Input).value = meta["golden"]  # any dump may stand on either side
        await pilot.pause()
        assert "✓ npy" in str(form.query_one("#why-npu").render())
        form.query_one("#golden", Input).value = meta["golden"]
        form.query_one("#model", Input).value = meta["model"]
        form.query_one("#out", Input).value = str(ws / "fresh")
        form.query_one("#op_range", Input).value = "1,-1"
        await pilot.pause()
        assert "three integers" in str(form.query_one("#why-op_range").render())
        await pilot.press("ctrl+s")
        assert pilot.app.screen is form  # refused: fields to fix
        form.query_one("#npu", Input).value = meta["npu"]
        form.query_one("#op_range", Input).value = ""
        await pilot.pause()
        assert "✓" in str(form.query_one("#why-npu").render())
        await start_from_form(pilot)
    drive(AccuscopeApp(ws), script)
    assert load_task(ws / "fresh").doc.state == "done"


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
    from accuscope.engine.sources.ascend import DumpTensor, write_dump_file
    y = np.linspace(-1, 1, 128, dtype=np.float32).reshape(1, 8, 4, 4)
    (tmp_path / "npu").mkdir()
    write_dump_file(tmp_path / "npu" / "Conv2D.conv1.3.1700000000000000", "conv1",
                    outputs=[DumpTensor(y.astype(np.float16))])
    y.tofile(tmp_path / "conv1.bin")

    async def script(pilot):
        await pilot.press("n")
        form = pilot.app.screen
        form.query_one("#npu", Input).value = str(tmp_path / "npu")
        form.query_one("#golden", Input).value = str(tmp_path / "conv1.bin")
        form.query_one("#out", Input).value = str(ws / "bin")
        await pilot.pause()
        assert "needs its shape and dtype" in str(form.query_one("#why-golden_shape").render())
        form.query_one("#golden_shape", Input).value = "1,8,4,4"
        form.query_one("#golden_dtype", Input).value = "float32"
        await pilot.pause()
        await start_from_form(pilot)
    drive(AccuscopeApp(ws), script)
    task = load_task(ws / "bin")
    assert task.table is not None
    assert task.doc.raw["golden_shape"] == [1, 8, 4, 4] and task.table.numbers("cos")[-1] > 0.9999


def test_path_fields_keep_their_text_unselected_and_complete_with_tab(ws):
    async def script(pilot):
        await pilot.press("o")
        answer = pilot.app.screen.query_one("#answer")
        assert answer.value == f"{ws}/" and answer.selection.is_empty  # typing appends, never replaces
        await pilot.press(*"tiny", "tab")
        assert answer.value == f"{ws}/tiny"  # several tasks start so: they are listed
        assert all(t.name in screen_text(pilot.app).replace("\n", " ") for t in TASKS if t.name.startswith("tiny"))
        await pilot.press(*"net-f", "tab")
        assert answer.value == f"{ws}/{MAIN.name}/" and answer.cursor_position == len(answer.value)
        await pilot.press("backspace", "enter")
        assert isinstance(pilot.app.screen, TaskScreen)
    drive(AccuscopeApp(ws), script)


def test_a_path_typed_from_the_root_or_home_after_the_workspace_is_the_path_opened(ws, monkeypatch):
    monkeypatch.setenv("HOME", str(ws.parent))
    for typed, name in ((str(ws / TASKS[1].name), TASKS[1].name), (f"~/{ws.name}/{TASKS[2].name}", TASKS[2].name)):
        async def script(pilot, typed=typed):
            await pilot.press("o")
            answer = pilot.app.screen.query_one("#answer")
            await pilot.press(*typed)  # typed after the prefilled workspace: it starts the path again
            assert answer.value == typed and answer.cursor_position == len(typed)
            await pilot.press("enter")
            await pilot.pause()
            return pilot.app.screen
        screen = drive(AccuscopeApp(ws), script)
        assert isinstance(screen, TaskScreen) and screen.folder == ws / name


def test_browser_home_end_and_G_go_to_the_first_and_last_task(ws):
    async def script(pilot):
        table = pilot.app.screen.query_one("DataTable")
        last = len(pilot.app.screen.entries) - 1
        moves = []
        for key in ("end", "home", "G", "k", "home"):
            await pilot.press(key)
            moves.append(table.cursor_row)
        assert moves == [last, 0, last, last - 1, 0]
    drive(AccuscopeApp(ws), script)


def test_keys_typed_fast_all_move_the_cursor_before_enter_opens_the_row(ws):
    async def script(pilot):
        browser = pilot.app.screen
        await type_fast(pilot, "j", "j", "j", "k")
        assert browser.query_one("DataTable").cursor_row == 2
        await type_fast(pilot, "k", "k", "j", "enter")  # enter takes the row the keys before it moved to
        await pilot.pause()
        screen = pilot.app.screen
        assert isinstance(screen, TaskScreen) and screen.folder == browser.entries[1].path
        assert screen.table_widget.cursor == 0  # no key typed in the browser moved the task's table
        await type_fast(pilot, *"j" * 12)
        assert screen.table_widget.cursor == 12
    drive(AccuscopeApp(ws), script)


def test_the_advisor_works_on_the_opened_task_not_a_copy_read_again(ws, monkeypatch):
    """After a threshold edit the advisor advises on the task the screen shows (its thresholds as edited,
    its table as loaded): no second load of the task from disk."""
    import accuscope.engine.diagnose.advisor as advisor
    loads = []
    real = advisor.load_task

    def counted(folder, *args, **kwargs):
        loads.append(folder)
        return real(folder, *args, **kwargs)

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.advice is not None)
        monkeypatch.setattr(advisor, "load_task", counted)
        await _edit_thresholds(pilot, "cos=0.5")
        await wait_for(pilot, lambda: not screen.saving and not screen.advising)
        assert screen.advice.task["thresholds"]["cos"]["value"] == 0.5  # made for the edited thresholds
    drive(AccuscopeApp(ws, open_path=ws / MAIN.name), script)
    assert not loads
