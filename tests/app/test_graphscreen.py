"""The graph screen on the demo workspace, driven with Pilot: it opens on the table's cursor op,
follows producers and consumers, selects a submodel (and refuses invalid ones with the reason),
exports it, and puts the table cursor on the op under the graph cursor when leaving.

Here the screen is pushed the way the task screen's `g` pushes it: `GraphScreen(task, row)` with a
callback moving the table cursor to the GraphResult's row (test_app presses `g` itself).
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from textual.widgets import Input

from accuscope.app.app import AccuscopeApp
from accuscope.app.dialogs import AskDialog, ChooseDialog, HelpScreen
from accuscope.app.graphscreen import GraphScreen
from accuscope.app.graphview import GraphView
from accuscope.app.optable import OperatorTable
from accuscope.engine.demo.workspace import MAIN
from accuscope.engine.tasks.task import Task, TaskFolder, load_task
from appkit import drive, screen_text, wait_for
from support.narrow import present

STEM = "/stem/conv/Conv/stem/relu/Relu"
CONV1 = "/block1/conv1/Conv/block1/relu1/Relu"  # the quantized conv, fused with bn1 and relu1
CONV2 = "/block1/conv2/Conv/block1/bn2/BatchNormalization"
ADD = "/block1/Add"  # the residual Add: reads conv2's output and the stem's
RELU2 = "/block1/relu2/Relu"


def row_of(table, op: str, io: str = "output") -> int:
    cols = table.columns
    return int(np.flatnonzero((cols["npu_op"] == op) & (cols["io"] == io))[0])


async def open_graph(pilot, op: str | None = None, io: str = "input") -> tuple[GraphScreen, OperatorTable, list]:
    """From the task screen with the table cursor on a row of `op`, as the task screen does."""
    app = pilot.app
    table = app.screen.query_one(OperatorTable)
    if op is not None:
        assert table.move_to(row_of(table.table, op, io))
    dismissed: list = []

    def back(result):
        dismissed.append(result.row)
        if result.row is not None:
            table.move_to(result.row)
    app.push_screen(GraphScreen(app.screen.shown_task(), table.cursor_row), back)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, GraphScreen)
    await wait_for(pilot, lambda: screen.graph is not None)
    await pilot.pause()
    return screen, table, dismissed


def at(screen: GraphScreen, name: str) -> int:
    assert screen.graph is not None
    return next(i for i, n in enumerate(screen.graph.nodes) if n.name == name)


async def go_to(pilot, screen: GraphScreen, name: str) -> None:
    screen.view.move_cursor(at(screen, name))
    await pilot.pause()


def line_of(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if f"{name} " in line or line.endswith(name))


def test_opens_on_the_table_cursor_op_and_leaving_moves_the_table(demo_ws):
    task = demo_ws / MAIN.name

    async def script(pilot):
        screen, table, dismissed = await open_graph(pilot, CONV2, io="input")
        assert screen.node is not None and screen.graph is not None
        assert screen.node.name == CONV2 and screen.graph.kind == "om"
        text = screen_text(pilot.app)
        assert "accuscope › tasks › tinynet-fp16-int4 › graph" in text
        # lanes, badge, type, name, shape: the residual merge is drawn, the failing conv marked
        assert re.search(r"├─●\s+✗ 0\.95617\s+Conv2D\s+\S*relu1/Relu\s+\[1,16,32,32\]", text)
        assert re.search(r"●─┘\s+✗ 0\.98637\s+Add\s+/block1/Add", text)
        assert re.search(r"·\s+TransData\s+trans_TransData_0", text)  # device-only: not compared, exempt
        assert "✗ 28 failing ops" in text and "4 lanes" in text
        assert screen.lanes is not None
        assert len(screen.lanes) == len(screen.graph.nodes) == 32

        await pilot.press("o")  # conv2 -> its only consumer, the Add
        assert screen.node.name == ADD
        await pilot.press("j")
        assert screen.node.name == RELU2
        await pilot.press("question_mark")
        help_text = screen_text(pilot.app)
        assert isinstance(pilot.app.screen, HelpScreen)
        for words in ("producer", "consumer", "start", "end", "export", "search", "back to the table"):
            assert words in help_text
        await pilot.press("escape")
        await pilot.press("q")
        assert pilot.app.screen is not screen
        assert dismissed == [row_of(table.table, RELU2)]  # its first output row
        assert table.cursor_row == row_of(table.table, RELU2)
    drive(AccuscopeApp(demo_ws, open_path=task), script)


def test_producer_and_consumer_navigation_with_a_chooser(demo_ws):
    async def script(pilot):
        screen, table, _ = await open_graph(pilot, CONV1, io="output")
        assert screen.node is not None
        assert screen.node.name == CONV1
        await pilot.press("i")  # one producer: jumps
        assert screen.node.name == STEM
        await pilot.press("o")  # the stem output feeds conv1 and, skipping it, the Add: a chooser
        dialog = pilot.app.screen
        assert isinstance(dialog, ChooseDialog)
        assert screen.graph is not None
        assert [screen.graph.nodes[p].name for _, p in dialog.choices] == [CONV1, ADD]
        assert "2 consumers" in screen_text(pilot.app)
        await pilot.press("down", "enter")
        assert pilot.app.screen is screen and screen.node.name == ADD
        await pilot.press("i")
        dialog = pilot.app.screen
        assert isinstance(dialog, ChooseDialog)
        assert [screen.graph.nodes[p].name for _, p in dialog.choices] == [CONV2, STEM]
        await pilot.press("escape")  # stays
        assert pilot.app.screen is screen and screen.node.name == ADD
        await go_to(pilot, screen, "image")
        await pilot.press("i")  # the network input: nothing above it
        assert screen.node.name == "image"
        assert any("no producer" in n.message for n in pilot.app._notifications)
        # search by name and type, n / N repeat
        await pilot.press("slash", *"matmulv2", "enter")
        assert screen.node.name == "/attn/q/MatMul"
        await pilot.press("n")
        assert screen.node.name == "/attn/k/MatMul"
        await pilot.press("N", "N")
        assert screen.node.name == "/head/fc/Gemm"  # wrapped backwards
        await pilot.press("!")  # next failing op after the cursor, wrapping to the first
        assert screen.node.name == CONV1
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / MAIN.name), script)


def test_selection_highlights_the_ops_between_and_refuses_invalid_pairs(demo_ws):
    async def script(pilot):
        screen, table, _ = await open_graph(pilot, CONV1, io="output")
        await wait_for(pilot, lambda: screen.framework is not None or screen.framework_problem)
        await pilot.press("s")
        assert screen.members == [CONV1]
        await go_to(pilot, screen, ADD)
        await pilot.press("e")
        assert screen.members == [CONV1, CONV2, ADD]
        sel = screen.selection
        assert sel is not None
        assert [b.tensor for b in sel.inputs] == [f"{STEM}:0"] and [b.tensor for b in sel.outputs] == [f"{ADD}:0"]
        assert sel.framework is not None and sel.framework.names[0] == "/block1/conv1/Conv"
        text = screen_text(pilot.app)
        assert re.search(r"^S ├─◆\s+✗", line_of(text, "relu1/Relu"), re.M)
        assert re.search(r"^┃ │ ◆", line_of(text, "BatchNormalization"), re.M)
        assert re.search(r"^E ◆─┘", line_of(text, ADD), re.M)
        assert "submodel 3 ops, 1 in, 1 out" in text
        await pilot.press("enter")  # the details panel (below the graph at 80x24) lists the boundary
        panel = screen.panel_markup()
        assert f"in   {STEM}:0" in panel and f"out  {ADD}:0" in panel and "(end)" in panel

        # the end before the start: refused with the reason, the selection is kept
        await go_to(pilot, screen, STEM)
        await pilot.press("e")
        assert screen.members == [CONV1, CONV2, ADD]
        messages = [n.message for n in pilot.app._notifications]
        assert any("not reachable from start" in m and "swap them" in m for m in messages)
        # separate branches
        await pilot.press("c")
        assert screen.members == [] and screen.selection is None
        await go_to(pilot, screen, "/attn/q/MatMul")
        await pilot.press("s")
        await go_to(pilot, screen, "/attn/k/MatMul")
        await pilot.press("e")
        assert screen.end is None and screen.members == ["/attn/q/MatMul"]
        assert any("separate branches" in n.message for n in pilot.app._notifications)
        # a device-only op has no framework op to export
        await go_to(pilot, screen, "trans_TransData_0")
        await pilot.press("s")
        await go_to(pilot, screen, ADD)
        await pilot.press("e")
        assert screen.selection is None and any("device-only" in n.message for n in pilot.app._notifications)
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / MAIN.name), script)


def test_wide_terminal_shows_the_panel_on_the_right(demo_ws):
    async def script(pilot):
        screen, _, _ = await open_graph(pilot, CONV1, io="output")
        assert screen.panel_shown
        text = screen_text(pilot.app)
        graph_line = line_of(text, "/block1/conv1/Conv/block1/relu1/Relu")
        assert "fused framework ops (3)" in text and "/block1/bn1/BatchNormalization" in text
        assert "│" in graph_line  # the panel's border on the same screen line as a graph row
        await pilot.press("enter")  # hides it
        assert not screen.panel_shown
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / MAIN.name), script, size=(160, 50))


def test_narrow_terminal_toggles_the_panel_below(demo_ws):
    async def script(pilot):
        screen, _, _ = await open_graph(pilot, CONV1, io="output")
        assert not screen.panel_shown
        assert "fused framework ops" not in screen_text(pilot.app)
        await pilot.press("enter")
        assert screen.panel_shown
        text = screen_text(pilot.app)
        assert "fused framework ops (3)" in text and "relu1/Relu" in text
        view = screen.query_one(GraphView)
        assert view.size.height >= 6 and view.region.y < screen.query_one("#panel").region.y
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / MAIN.name), script)


def test_a_task_without_a_model_says_so(demo_ws, tmp_path):
    task = load_task(demo_ws / MAIN.name)
    folder = tmp_path / "no-model"
    folder.mkdir()
    (folder / "task.json").write_text(json.dumps({"state": "done"}), encoding="utf-8")

    async def script(pilot):
        dismissed = []
        found = TaskFolder.at(folder)
        alone = Task(found.folder, found.doc, table=task.table, thresholds=task.thresholds)
        pilot.app.push_screen(GraphScreen(alone, 3), lambda result: dismissed.append(result.row))
        await pilot.pause()
        screen = pilot.app.screen
        await wait_for(pilot, lambda: bool(screen.problem))
        await pilot.pause()
        assert "names no model" in screen_text(pilot.app)
        for key in ("o", "s", "x", "slash"):
            await pilot.press(key)
        await pilot.press("escape")
        assert dismissed == [None]
    drive(AccuscopeApp(demo_ws), script)


def test_export_writes_the_folder_and_says_where_the_error_lives(demo_ws, tmp_path):
    pytest.importorskip("onnxruntime")
    out = tmp_path / "exported"

    async def script(pilot):
        screen, _, _ = await open_graph(pilot, CONV1, io="output")
        await pilot.press("x")  # nothing selected yet
        assert any("mark the start" in n.message for n in pilot.app._notifications)
        await pilot.press("s")
        await go_to(pilot, screen, ADD)
        await pilot.press("e", "x")
        dialog = pilot.app.screen
        assert isinstance(dialog, AskDialog)
        answer = dialog.query_one("#answer", Input)
        assert answer.value.startswith(str(demo_ws / MAIN.name / "exports"))
        answer.value = str(out)
        await pilot.press("enter")
        assert pilot.app.screen is screen
        await wait_for(pilot, lambda: not screen.exporting)
        await pilot.pause()
        assert (out / "manifest.json").is_file()
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["end"] == [ADD]
        assert screen.last_export["verdict"] == "inside"  # the quantized conv: the error lives inside
        assert "re-test: error stays" in str(screen.query_one("#status").render())  # not only in a toast
        assert screen.last_export["files"] > 5
        written = [n for n in pilot.app._notifications if n.title == "export written"]
        assert written and "error stays" in written[-1].message and written[-1].timeout <= 5
        toast = next(t for t in pilot.app.screen.query("Toast") if t._notification is written[-1])  # type: ignore[attr-defined]  # a Toast's notice (textual's private)
        assert toast.region.height <= 5 and toast.region.width <= 40  # a corner of the 80x24 screen, not half of it
        assert str(out) in screen.panel_markup()  # the details stay in the panel
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / MAIN.name), script, notifications=True)


def test_module_and_rank_keys_on_a_model_graph_say_why_they_do_nothing(demo_ws):
    async def script(pilot):
        screen, _, _ = await open_graph(pilot, CONV1, io="output")
        rows = screen.view.row_count
        await pilot.press("space")
        assert any(n.message.startswith("no modules here") for n in pilot.app._notifications)
        await pilot.press("minus", "f", "right_square_bracket")
        assert screen.node is not None
        assert screen.view.row_count == rows and screen.node.name == CONV1 and pilot.app.screen is screen
        assert any(n.message == "the task has one rank" for n in pilot.app._notifications)
        assert "rank" not in str(screen.query_one("#status").render())
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / MAIN.name), script, size=(160, 50))


def test_a_run_task_shows_its_candidates_graph(tmp_path):
    """`accuscope run` names no model in task.json: the graph is the one its candidate's dump carries
    (model.onnx beside the dump), where the pane said "the task names no model"."""
    from support.cli import accuscope
    from support.models import relu_sigmoid
    relu_sigmoid(tmp_path / "m.onnx")
    task = tmp_path / "ws" / "run"
    r = accuscope("run", tmp_path / "m.onnx", tmp_path / "m.onnx", "--random-inputs", "--out", task)
    assert r.returncode == 0, r.stderr
    names = {n.name for n in present(load_task(task).graph).nodes}

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: not screen.advising)
        await pilot.press("g")
        graph = pilot.app.screen
        assert isinstance(graph, GraphScreen)
        await wait_for(pilot, lambda: graph.problem or graph.query(GraphView))
        await pilot.pause()
        text = screen_text(pilot.app)
        assert not graph.problem and "names no model" not in text and any(n in text for n in names)
    drive(AccuscopeApp(tmp_path / "ws", open_path=task), script)
