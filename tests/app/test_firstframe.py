"""A large task opened by its first rows (`accuscope open`): counting until the whole table is read."""
from __future__ import annotations

import threading

from accuscope.app import taskscreen
from accuscope.app.app import AccuscopeApp
from accuscope.app.optable import OperatorTable
from accuscope.app.taskscreen import TaskScreen
from accuscope.engine.demo.workspace import MAIN
from accuscope.engine.tasks.task import load_task
from appkit import drive, screen_text, wait_for


def test_first_rows_say_counting_until_the_whole_table_arrives(demo_ws, monkeypatch):
    whole = load_task(demo_ws / MAIN.name)
    head = load_task(demo_ws / MAIN.name, head=5)
    assert whole.table is not None
    assert head.table is not None
    assert head.partial and head.total == len(whole.table) and len(head.table) == 5
    release = threading.Event()

    def slow_load(folder, head=None):  # the rest of the table, held back until the test lets it go
        release.wait(30)
        return load_task(folder, head)
    monkeypatch.setattr(taskscreen, "load_task", slow_load)

    async def script(pilot):
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TaskScreen))
        await pilot.pause()
        text = screen_text(pilot.app)
        assert whole.table is not None
        assert "counting: reading" in text and f"/{len(whole.table)} " in text
        assert "✓" not in text and "rows fail" not in text  # no verdict from the first rows
        await pilot.press("]")  # sorting needs every row: it waits
        await pilot.pause()
        assert pilot.app.screen.query_one(OperatorTable).sort_key is None
        release.set()
        await wait_for(pilot, lambda: not pilot.app.screen.reading_rest)
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        text = screen_text(pilot.app)
        assert "counting" not in text and "reading the rest" not in text
        assert len(pilot.app.screen.query_one(OperatorTable).view) == len(whole.table)
    drive(AccuscopeApp(demo_ws, open_path=head), script, size=(80, 24))
