"""msprobe data in the app (Pilot, text on screen): the demo's msprobe task's graph pane shows its
calls grouped by module (construct.json), the module of the planted fault failing; the op table
filters by module."""
from __future__ import annotations

from pathlib import Path

from accuscope.app.app import AccuscopeApp
from accuscope.app.graphscreen import GraphScreen
from accuscope.app.newtask import NewTaskScreen
from accuscope.app.optable import OperatorTable
from accuscope.app.taskscreen import TaskScreen
from accuscope.engine.compare.comparison import CompareSpec
from accuscope.engine.demo import msprobesim
from accuscope.engine.tasks.task import load_task
from accuscope.engine.tasks.taskrun import run_task
from appkit import drive, screen_text, wait_for

TASK = "llm-msprobe-4ranks"
FAULTY = "Cell.layers.1.attn.Attention.forward.0"  # the module holding msprobesim.FAULT_CALL


async def open_task(pilot) -> OperatorTable:
    await wait_for(pilot, lambda: pilot.app.screen.query(OperatorTable))
    return pilot.app.screen.query_one(OperatorTable)


def line_of(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if name in line)


def test_the_graph_pane_groups_calls_by_module_and_shows_the_faulty_module_failing(demo_ws):
    async def script(pilot):
        await open_task(pilot)
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, GraphScreen) and pilot.app.screen.graph is not None)
        screen = pilot.app.screen
        assert screen.graph.kind == "msprobe"
        screen.view.move_cursor(next(i for i, n in enumerate(screen.graph.nodes) if n.name == FAULTY))
        await pilot.pause()
        text = screen_text(pilot.app)
        faulty = line_of(text, "▾ layers.1.attn ")
        assert "✗" in faulty and "Attention" in faulty  # a failing module header
        assert "module layers.1.attn: 5 of 9 calls failing" in text  # the panel on it
        fails, total = faulty.split("✗")[1].split()[0].split("/")
        assert 0 < int(fails) <= int(total) == 9  # its eight calls and itself
        call = line_of(text, msprobesim.FAULT_CALL)
        assert "✗" in call and "matmul" in call
        assert faulty.index("▾") < call.index(msprobesim.FAULT_CALL)  # its calls indented under it
        await pilot.press("g")  # the first rows: the first block, whose modules pass
        text = screen_text(pilot.app)
        first = line_of(text, "▾ layers.0.attn ")
        assert "✗" not in first and "0/9" in first
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / TASK), script, size=(140, 40))


def test_the_op_table_filters_by_module(demo_ws):
    async def script(pilot):
        table = await open_task(pilot)
        await pilot.press("f", *'type == "layers.1.attn"', "enter")
        ops = set(table.table.columns["npu_op"][table.view].tolist())
        assert msprobesim.FAULT_CALL in ops and "Functional.linear.6.forward" in ops
        assert all(not op.startswith(("Functional.layer_norm", "Cell.layers.0")) for op in ops)
        assert msprobesim.FAULT_CALL in screen_text(pilot.app)
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / TASK), script, size=(140, 40))


def test_the_row_detail_shows_the_calls_python_stack(tmp_path):
    fix = Path(__file__).parents[1] / "fixtures" / "msprobe"
    run_task(CompareSpec(str(fix / "cand_md5"), str(fix / "bench_md5"), rank="1"), tmp_path / "ws" / "mul")

    async def script(pilot):
        table = await open_task(pilot)
        assert table.move_to(int(next(i for i, op in enumerate(table.table.columns["npu_op"].tolist())
                                      if op == "Tensor.__mul__.0.forward")))
        await pilot.press("D")
        await wait_for(pilot, lambda: "call stack" in screen_text(pilot.app))
        text = screen_text(pilot.app)
        assert "fixtures/msprobe/make_fixtures.py, line 40, in forward" in text and "self.scale" in text
    drive(AccuscopeApp(tmp_path / "ws", open_path=tmp_path / "ws" / "mul"), script, size=(140, 40))


def test_the_new_task_form_checks_step_rank_and_runs_a_rank_tree_rank_by_rank(demo_ws, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    npu, golden = demo_ws / TASK / "npu", demo_ws / TASK / "golden"

    async def script(pilot):
        await pilot.press("n")
        form = pilot.app.screen
        assert isinstance(form, NewTaskScreen)
        form.query_one("#npu").value = str(npu)
        form.query_one("#golden").value = str(golden)
        form.query_one("#out").value = str(ws / "all-ranks")
        form.query_one("#rank").value = "7"
        form.query_one("#stats_only").value = "maybe"
        await pilot.pause()
        assert "no rank 7 under the NPU dump (it has 0, 1, 2, 3)" in str(form.query_one("#why-rank").render())
        assert "answer yes or no" in str(form.query_one("#why-stats_only").render())
        await pilot.press("ctrl+s")
        assert pilot.app.screen is form  # refused: fields to fix
        form.query_one("#rank").value = "rank2"
        form.query_one("#step").value = "step1"
        await pilot.pause()
        assert "✓ 2 folders" in str(form.query_one("#why-rank").render())  # rank 2 of steps 0 and 1
        form.query_one("#rank").value = ""  # every rank of every step
        form.query_one("#step").value = ""
        form.query_one("#stats_only").value = "yes"
        await pilot.pause()
        assert "✓ yes" in str(form.query_one("#why-stats_only").render())
        await pilot.press("ctrl+s")
        screen = pilot.app.screen
        assert isinstance(screen, TaskScreen)
        await wait_for(pilot, lambda: not screen.running and len(screen.table_widget.table) > 0)
        await pilot.pause()
        table = screen.table_widget.table
        assert sorted(set(table.columns["rank"].tolist())) == [0, 1, 2, 3]
        assert sorted(set(table.columns["step"].tolist())) == [0, 1]
        text = screen_text(pilot.app)
        assert " rank " in text and " step " in text
    drive(AccuscopeApp(ws), script, size=(140, 40))
    meta = load_task(ws / "all-ranks").meta
    assert meta["state"] == "done" and len(meta["ranks"]) == 8 and meta["stats_only"] is True


def test_the_demo_rows_stack_names_the_line_of_the_demo_model_that_made_the_call(demo_ws):
    async def script(pilot):
        table = await open_task(pilot)
        assert table.move_to(table.table.columns["npu_op"].tolist().index(msprobesim.FAULT_CALL))
        await pilot.press("D")
        await wait_for(pilot, lambda: "call stack" in screen_text(pilot.app))
        text = screen_text(pilot.app)
        assert "msprobesim.py, line" in text and "in attention" in text and 'd.call("Mint.matmul"' in text
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / TASK), script, size=(160, 50))
