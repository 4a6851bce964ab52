"""msprobe data in the app (Pilot, text on screen): the demo's msprobe task's graph pane shows its
calls grouped by module (construct.json), the module of the planted fault failing; the op table
filters by module."""
from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from accuscope.app.app import AccuscopeApp
from accuscope.app.graphscreen import GraphScreen
from accuscope.app.graphview import GraphView
from accuscope.app.newtask import NewTaskScreen
from accuscope.app.optable import OperatorTable
from accuscope.app.taskscreen import TaskScreen
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.demo import msprobesim
from accuscope.engine.tasks import rankrun
from accuscope.engine.tasks.task import load_task
from accuscope.engine.tasks.taskrun import run_task
from appkit import drive, screen_text, start_from_form, wait_for

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
        form.query_one("#npu", Input).value = str(npu)
        form.query_one("#golden", Input).value = str(golden)
        form.query_one("#out", Input).value = str(ws / "all-ranks")
        form.query_one("#rank", Input).value = "7"
        form.query_one("#stats_only", Input).value = "maybe"
        await pilot.pause()
        assert "no rank 7 under the NPU dump (it has 0, 1, 2, 3)" in str(form.query_one("#why-rank").render())
        assert "answer yes or no" in str(form.query_one("#why-stats_only").render())
        await pilot.press("ctrl+s")
        assert pilot.app.screen is form  # refused: fields to fix
        form.query_one("#rank", Input).value = "rank2"
        form.query_one("#step", Input).value = "step1"
        await pilot.pause()
        assert "✓ 2 folders" in str(form.query_one("#why-rank").render())  # rank 2 of steps 0 and 1
        form.query_one("#rank", Input).value = ""  # every rank of every step
        form.query_one("#step", Input).value = ""
        form.query_one("#stats_only", Input).value = "yes"
        await pilot.pause()
        assert "✓ yes" in str(form.query_one("#why-stats_only").render())
        screen = await start_from_form(pilot)
        await pilot.pause()
        table = screen.table_widget.table
        assert sorted(set(table.columns["rank"].tolist())) == [0, 1, 2, 3]
        assert sorted(set(table.columns["step"].tolist())) == [0, 1]
        text = screen_text(pilot.app)
        assert " rank " in text and " step " in text
    drive(AccuscopeApp(ws), script, size=(140, 40))
    meta = load_task(ws / "all-ranks").doc.raw
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


async def open_graph(pilot) -> GraphScreen:
    await open_task(pilot)
    await pilot.press("g")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, GraphScreen) and pilot.app.screen.graph is not None)
    return pilot.app.screen


def position(screen: GraphScreen, name: str) -> int:
    assert screen.graph is not None
    return next(i for i, n in enumerate(screen.graph.nodes) if n.name == name or n.attrs.get("module") == name)


def status(pilot) -> str:
    return str(pilot.app.screen.query_one("#status").render())


def test_modules_fold_and_unfold_and_jumps_unfold_what_they_land_in(demo_ws):
    async def script(pilot):
        screen = await open_graph(pilot)
        screen.view.go_to(position(screen, "layers.1.attn"))
        await pilot.press("space")  # on a header: folds it, the cursor stays on it
        text = screen_text(pilot.app)
        assert "▸ layers.1.attn (+8)" in text and msprobesim.FAULT_CALL not in text
        assert "✗" in line_of(text, "▸ layers.1.attn") and "5/9" in line_of(text, "▸ layers.1.attn")
        assert screen.node is not None
        assert screen.node.attrs["module"] == "layers.1.attn" and "1 folded" in status(pilot)
        await pilot.press("j")  # the row after the folded module is the call after its calls
        assert screen.node.name == "Tensor.add.2.forward"
        await pilot.press("k", "space")  # unfolds it
        assert "▾ layers.1.attn " in screen_text(pilot.app) and "folded" not in status(pilot)
        screen.view.go_to(position(screen, "Functional.linear.7.forward"))
        await pilot.press("space")  # on a call: folds the module holding it, the cursor on its header
        assert screen.node.attrs.get("module") == "layers.1.attn"
        assert "▸ layers.1.attn (+8)" in screen_text(pilot.app)
        await pilot.press("minus")  # fold all: the top-level modules alone, the cursor on the one holding it
        text = screen_text(pilot.app)
        assert "▸ layers.0 (+17)" in text and "▸ layers.1 (+17)" in text and "layers.1.attn" not in text
        assert screen.node.attrs.get("module") == "layers.1"
        assert screen.graph is not None
        assert screen.view.row_count == sum(1 for n in screen.graph.nodes if n.attrs["depth"] == 0)
        await pilot.press("g", "exclamation_mark")  # the first failing call: the modules holding it unfold
        assert screen.node.name == msprobesim.FAULT_CALL
        text = screen_text(pilot.app)
        assert msprobesim.FAULT_CALL in text and "▾ layers.1 " in text and "▾ layers.1.attn " in text
        assert "▸ layers.0 (+17)" in text and "▸ layers.1.mlp (+3)" in text  # the others stay folded
        await pilot.press("plus")  # unfold all: the cursor stays on its op
        here = screen.node.name
        assert "folded" not in status(pilot) and screen.view.row_count == len(screen.graph.nodes)
        assert screen.node.name == here
        await pilot.press("minus", "slash", *"softmax.1", "enter")  # a search unfolds what it finds
        assert screen.node.name == "Functional.softmax.1.forward" and "Functional.softmax.1.forward" in \
            screen_text(pilot.app)
        await pilot.press("minus", "g")  # the mouse: a click on the cursor row, a module header, unfolds it
        await pilot.click(GraphView, offset=(40, 1 + screen.view.cursor - int(screen.view.scroll_y)))
        assert "▾ layers.0 " in screen_text(pilot.app) and "Functional.layer_norm.0.forward" in screen_text(pilot.app)
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / TASK), script)


def test_the_status_counts_failing_calls_not_the_module_headers_over_them(demo_ws):
    async def script(pilot):
        screen = await open_graph(pilot)
        table = screen.table
        failing = set(table.columns["npu_op"][table.columns["fail"]].tolist())
        assert screen.graph is not None
        headers = {n.name for n in screen.graph.nodes if n.attrs.get("span")}
        assert failing & headers  # module calls whose own output rows fail too (their last call's output)
        assert f"✗ {len(failing - headers)} failing ops" in status(pilot)
        for _ in range(len(failing)):  # ! goes through the calls, never a module header
            await pilot.press("exclamation_mark")
            assert screen.node is not None
            assert screen.node.name in failing - headers
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / TASK), script)


def test_f_on_a_module_shows_the_table_filtered_to_it_and_everything_under_it(demo_ws):
    async def script(pilot):
        screen = await open_graph(pilot)
        screen.view.go_to(position(screen, "layers.1"))
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TaskScreen))
        table = pilot.app.screen.query_one(OperatorTable)
        assert table.filter == 'under(type, "layers.1")'
        types = set(table.table.columns["type"][table.view].tolist())
        assert types == {"layers.1", "layers.1.attn", "layers.1.mlp"}
        assert msprobesim.FAULT_CALL in set(table.table.columns["npu_op"][table.view].tolist())
        assert 'filter under(type, "layers.1")' in screen_text(pilot.app)
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / TASK), script, size=(140, 40))


@pytest.fixture(scope="module")
def ranks_ws(demo_ws, tmp_path_factory):
    """A task of every step and rank of the demo's msprobe dumps (2 steps x 4 ranks; rank 2 faulty)."""
    ws = tmp_path_factory.mktemp("ranks-ws")
    dumps = demo_ws / TASK
    rankrun.run_ranks(CompareSpec(str(dumps / "npu"), str(dumps / "golden")), ws / "all-ranks", workers=1)
    return ws


def test_a_multi_rank_tasks_graph_shows_one_step_and_rank_at_a_time(ranks_ws):
    async def script(pilot):
        screen = await open_graph(pilot)
        assert "step 0 rank 0 (1/8)" in status(pilot) and "failing" not in status(pilot)
        assert "0/18" in line_of(screen_text(pilot.app), "▾ layers.1 ")
        screen.view.go_to(position(screen, "layers.1.attn"))
        await pilot.press("space", "right_square_bracket", "right_square_bracket")
        await wait_for(pilot, lambda: not screen.rank_loading)
        assert "step 0 rank 2 (3/8)" in status(pilot)
        table = screen.table
        mine = table.columns["fail"] & (table.columns["rank"] == 2) & (table.columns["step"] == 0)
        assert screen.graph is not None
        calls = set(table.columns["npu_op"][mine].tolist()) - {n.name for n in screen.graph.nodes if n.attrs.get("span")}
        assert f"✗ {len(calls)} failing ops" in status(pilot)
        text = screen_text(pilot.app)
        assert "▸ layers.1.attn (+8)" in text and "✗" in line_of(text, "▸ layers.1.attn")  # the fold stays
        assert screen.node is not None
        assert screen.node.attrs.get("module") == "layers.1.attn"  # so does the cursor
        assert screen.results is not None
        assert all(table.columns["rank"][r] == 2 for p in range(len(screen.graph.nodes)) for r in screen.results.rows[p])
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: not screen.rank_loading)
        assert "step 0 rank 1 (2/8)" in status(pilot)
        assert "✗" not in line_of(screen_text(pilot.app), "▸ layers.1.attn")
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: not screen.rank_loading)
        await pilot.press("f")  # the table follows: the module, of this step and rank
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TaskScreen))
        widget = pilot.app.screen.query_one(OperatorTable)
        assert widget.filter == 'under(type, "layers.1.attn") and step == 0 and rank == 2'
        rows = widget.view
        assert len(rows) and set(widget.table.columns["rank"][rows].tolist()) == {2}
        assert set(widget.table.columns["step"][rows].tolist()) == {0}
        assert widget.table.columns["npu_op"][widget.cursor_row] == FAULTY  # the module's own row
        await pilot.press("escape", "G", "g")  # the graph opens on the table cursor row's rank
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, GraphScreen) and pilot.app.screen.graph is not None)
        assert "step 1 rank 3 (8/8)" in status(pilot)
        graph = pilot.app.screen
        await pilot.press("right_square_bracket")  # past the last: the first
        await wait_for(pilot, lambda: not graph.rank_loading)
        assert "step 0 rank 0 (1/8)" in status(pilot)
        call = graph.node.name
        await pilot.press("q")  # the table cursor goes to the call's row of the rank shown
        cols = widget.table.columns
        row = widget.cursor_row
        assert (cols["npu_op"][row], cols["step"][row], cols["rank"][row]) == (call, 0, 0)
    drive(AccuscopeApp(ranks_ws, open_path=ranks_ws / "all-ranks"), script)


def test_each_step_and_ranks_module_tree_is_read_once_per_opened_task(ranks_ws, monkeypatch):
    """The graph's module trees are the opened task's (Task.modules_at, read on a worker's snapshot and
    kept by the task: tasksnapshot.keep_found), not a cache of one graph screen: the graph opened again
    reads none of them again."""
    from accuscope.engine.sides import registry
    read, real = [], registry.modules_loader

    def counting(*args, **kwargs):
        read.append(args[2:])
        return real(*args, **kwargs)
    monkeypatch.setattr(registry, "modules_loader", counting)

    async def script(pilot):
        screen = await open_graph(pilot)
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: not screen.rank_loading)
        assert "step 0 rank 1 (2/8)" in status(pilot)
        first = list(read)
        assert len(first) == 2
        await pilot.press("q", "g")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, GraphScreen) and pilot.app.screen.graph is not None)
        screen = pilot.app.screen
        assert "step 0 rank 1 (2/8)" in status(pilot)  # the table cursor's row's rank
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: not screen.rank_loading)
        assert "step 0 rank 0 (1/8)" in status(pilot)
        assert read == first
    drive(AccuscopeApp(ranks_ws, open_path=ranks_ws / "all-ranks"), script)


def test_weight_gradients_sit_in_the_op_table_under_their_module(tmp_path):
    """The real training fixture (msprobe 26.2, 2 SGD steps): filtered to one module, its forward call's
    parameters and its parameters_grad call's weight gradients are rows of that module, failing where the
    planted attention scale reaches them; the argument that differs is the first failing row, both values
    shown."""
    train = Path(__file__).parents[1] / "fixtures" / "msprobe" / "train"
    run_task(CompareSpec(str(train / "cand"), str(train / "bench"), step="0", rank="1"), tmp_path / "ws" / "train")

    async def script(pilot):
        table = await open_task(pilot)
        text = screen_text(pilot.app)
        assert "first: #30 attn: float value 0.5 against 0.35" in text  # (the verdict word first: cut at 80)
        await pilot.press("f", *'under(type, "attn.qkv")', "enter", "G")
        c = table.table.columns
        ops = c["npu_op"][table.view].tolist()
        assert set(c["type"][table.view].tolist()) == {"attn.qkv"}
        assert ops.count("Module.attn.qkv.Linear.parameters_grad.0") == 2  # weight and bias
        assert ops.count("Module.attn.qkv.Linear.forward.0") == 4  # input, weight, bias, output
        text = screen_text(pilot.app)
        grads = [line for line in text.splitlines() if "inear.parameters_grad.0" in line]
        assert len(grads) == 2 and all("attn.qkv" in g and "✗" in g for g in grads)
        assert [g.split("attn.qkv")[1].split()[0] for g in grads] == ["bias", "weight"]  # by the parameter's name
        forward = [r for r in table.view.tolist() if c["npu_op"][r] == "Module.attn.qkv.Linear.forward.0"]
        assert c["param"][forward].tolist() == ["", "weight", "bias", ""]  # the call's own weights named too
    drive(AccuscopeApp(tmp_path / "ws", open_path=tmp_path / "ws" / "train"), script)
