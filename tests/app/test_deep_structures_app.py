"""Deep structures in the app (Pilot): a task folder whose task.json is nested 3,000 deep is listed as
broken and the browser starts (it exited 3 at start-up); a module chain 5,000 deep opens in the graph
pane, folds and unfolds (its walks recursed, its badges took minutes)."""
from __future__ import annotations

import json

from accuscope.app.app import AccuscopeApp
from accuscope.app.browser import BrowserScreen
from accuscope.app.graphscreen import GraphScreen
from accuscope.app.optable import OperatorTable
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.tasks.taskrun import run_task
from appkit import drive, screen_text, wait_for

TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
          "Norm": 1.0}


def test_the_browser_starts_and_lists_a_task_json_nested_3000_deep_as_broken(tmp_path):
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "task.json").write_text("[" * 3000 + "]" * 3000)

    async def script(pilot):
        browser = pilot.app.screen
        assert isinstance(browser, BrowserScreen)
        [entry] = browser.entries
        assert entry.name == "deep" and "task.json: unreadable: nested too deeply" in entry.problem
        await pilot.pause()
        text = screen_text(pilot.app)
        assert "deep" in text and "nested too deeply" in text and "1 tasks" in text
        await pilot.press("enter")  # opening it says why it cannot
        await pilot.pause()
        assert isinstance(pilot.app.screen, BrowserScreen)
    drive(AccuscopeApp(tmp_path), script, size=(160, 24))


def test_a_module_chain_5000_deep_opens_folds_and_unfolds_in_the_graph_pane(tmp_path):
    n = 5000
    folder = tmp_path / "dump" / "step0" / "rank0"
    folder.mkdir(parents=True)
    calls = [f"Module.m{k}.Linear.forward.0" for k in range(n)]
    construct = {c: calls[k - 1] if k else None for k, c in enumerate(calls)}
    construct["Functional.relu.0.forward"] = calls[-1]
    data = {"Functional.relu.0.forward": {"input_args": [TENSOR], "output": [TENSOR]}}
    data.update({c: {"input_args": [TENSOR], "output": [TENSOR]} for c in reversed(calls)})
    (folder / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L0", "framework": "pytorch",
                                                  "dump_data_dir": None, "data": data}))
    (folder / "construct.json").write_text(json.dumps(construct))
    dump = str(tmp_path / "dump")
    run_task(CompareSpec(dump, dump, stats_only=True), tmp_path / "ws" / "chain", workers=1)

    async def script(pilot):
        await wait_for(pilot, lambda: pilot.app.screen.query(OperatorTable))
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, GraphScreen) and pilot.app.screen.graph is not None)
        screen = pilot.app.screen
        assert len(screen.graph.nodes) == n + 1 and screen.view.row_count == n + 1
        assert screen.results.badge(0).text == f"0/{n + 1}"  # every call of the chain, itself included
        await pilot.press("minus")  # fold all: the outermost module alone
        assert screen.view.row_count == 1 and f"▸ m0 (+{n:,})" in screen_text(pilot.app)
        await pilot.press("plus")
        assert screen.view.row_count == n + 1
        screen.view.go_to(n)  # the innermost call, under 5,000 modules
        await pilot.pause()
        assert screen.node.name == "Functional.relu.0.forward"
    drive(AccuscopeApp(tmp_path / "ws", open_path=tmp_path / "ws" / "chain"), script, size=(140, 40))
