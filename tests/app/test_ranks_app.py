"""A multi-rank task in the app: the browser counts its ranks, the table pages over its column files
and filters by rank (Pilot, text on screen)."""
from __future__ import annotations

from accuscope.app.app import AccuscopeApp
from accuscope.app.browser import BrowserScreen
from accuscope.app.optable import OperatorTable
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.tasks import rankrun, storage
from accuscope.engine.tasks.columnstore import PagedText
from appkit import drive, screen_text, wait_for


def test_the_app_pages_a_columnar_task_shows_ranks_and_filters_by_rank(tree,  # noqa: F811
        tmp_path, monkeypatch):
    npu, golden = tree
    ws = tmp_path / "ws"
    monkeypatch.setattr(storage, "COLUMNAR_ROWS", 20)  # this small task stands for one of many million rows
    rankrun.run_ranks(CompareSpec(str(npu), str(golden)), ws / "llm", workers=1)

    async def script(pilot):
        browser = pilot.app.screen
        assert isinstance(browser, BrowserScreen)
        assert "llm [8 ranks]" in screen_text(pilot.app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: pilot.app.screen.query(OperatorTable))
        table = pilot.app.screen.query_one(OperatorTable)
        assert isinstance(table.table.columns["npu_op"], PagedText)  # rows are read from the column files
        assert " rank " in screen_text(pilot.app) and "Functional.linear.0.forward.output" in screen_text(pilot.app)
        await pilot.press("f", *"rank == 3", "enter")
        assert len(table.view) == 12
        assert set(table.table.columns["rank"][table.view].tolist()) == {3}
        await pilot.press("escape", "f", *"npu_op == 'Functional.linear.5.forward.output' and step == 1", "enter")
        assert len(table.view) == 4
        await pilot.press("escape", "slash", *"linear.4.", "enter")
        assert table.table.columns["npu_op"][table.cursor_row] == "Functional.linear.4.forward.output"
    drive(AccuscopeApp(ws), script, size=(120, 30))
