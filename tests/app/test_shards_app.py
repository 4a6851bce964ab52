"""The graph pane of a task compared with --shards (msprobe's TP=2 x PP=2 statistics fixture, tests/fixtures/
msprobe/tp, against its TP=1 run): one module tree of the merged run, both pipeline stages, its calls named
as the rows are, each module with its rows' verdicts (a tight StatMagnitude limit fails the head's rows,
which only the second stage's ranks ran)."""
from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

from accuscope.app.app import AccuscopeApp
from accuscope.app.graphscreen import GraphScreen
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.tasks.taskrun import run_task
from appkit import check_snapshot, screen_text, wait_for

TP = Path(__file__).parents[1] / "fixtures" / "msprobe" / "tp"
HEAD = "Module.head.Linear.forward.0"


@pytest.fixture(scope="module")
def shards_task():
    """In a folder named as the snapshot tests' tasks are (normalized() hides its random part)."""
    root = Path(tempfile.mkdtemp(prefix="accuscope-snap-", dir="/tmp"))
    limits = Thresholds()
    limits.edit("stat_mag=5.5e-7")
    run_task(CompareSpec(str(TP / "tp2pp2_stats"), str(TP / "tp1_stats"), shards="names", thresholds=limits),
             root / "tp")
    yield root / "tp"
    shutil.rmtree(root, ignore_errors=True)


def graph_on_head(task: Path, size: tuple[int, int]) -> tuple[GraphScreen, str, str]:
    """The graph pane (g) with its cursor on the head module: the screen, its text and its SVG."""
    async def go():
        app = AccuscopeApp(task.parent, open_path=task)
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda: not getattr(app.screen, "advising", True))
            await pilot.press("g")
            await wait_for(pilot, lambda: isinstance(app.screen, GraphScreen) and app.screen.graph is not None)
            screen = app.screen
            assert isinstance(screen, GraphScreen) and screen.graph is not None
            screen.view.move_cursor(next(i for i, n in enumerate(screen.graph.nodes) if n.name == HEAD))
            await pilot.pause()
            await pilot.pause()
            return screen, screen_text(app), app.export_screenshot(title="accuscope")
    return asyncio.run(go())


def test_the_graph_pane_shows_the_merged_runs_one_module_tree_with_verdicts(shards_task):
    screen, text, _ = graph_on_head(shards_task, (160, 50))
    graph = screen.graph
    assert graph is not None
    assert "(merged TP=2 x PP=2)" in graph.name
    assert text.splitlines()[0].strip() == "accuscope › tasks › tp › graph · merged TP=2 x PP=2"  # the pane says it
    names = [n.name for n in graph.nodes]
    assert "Module.layers.1.ParallelMLP.forward.0" in names and HEAD in names  # the second stage's, not rank0's alone
    assert "Functional.linear.4.forward" in names  # its API counters renumbered, as the rows are
    assert f"op {names.index(HEAD) + 1}/{len(names)}" in text
    head = next(line for line in text.splitlines() if "▾ head" in line)
    assert "✗" in head and "2/2" in head.split("✗")[1]  # the module call and its linear fail
    assert "✗" not in next(line for line in text.splitlines() if "▾ layers.1 " in line)
    assert "✗" in next(line for line in text.splitlines() if "Functional.linear.4.forward" in line)


@pytest.mark.parametrize("name, size", [("shards-graph-80x24", (80, 24)), ("shards-graph-160x50", (160, 50))])
def test_shards_graph_snapshot(shards_task, name, size):
    check_snapshot(name, graph_on_head(shards_task, size)[2])
