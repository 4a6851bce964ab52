"""A large task opened by its first rows (`accuscope open`): counting until the whole table is read."""
from __future__ import annotations

import threading

from textual.widgets import DataTable

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
    release = held_back(monkeypatch)

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


def test_every_way_into_a_task_opens_it_by_its_first_rows(ws, monkeypatch):
    """The browser's enter and the re-open after a re-run open a task as `accuscope open` does
    (AccuscopeApp.open_task, TaskScreen.reload: load_head), its first rows at once and the rest in the
    screen's worker, never the whole table on the app's thread."""
    from accuscope.app.browser import BrowserScreen
    from accuscope.engine.tasks import task as taskmodule
    monkeypatch.setattr(taskmodule, "HEAD_ROWS", 5)  # this small task stands for one of a million rows
    whole = len(load_task(ws / MAIN.name).table)
    release = held_back(monkeypatch)

    async def script(pilot):
        browser = pilot.app.screen
        assert isinstance(browser, BrowserScreen)
        browser.query_one(DataTable).move_cursor(row=next(i for i, e in enumerate(browser.entries)
                                                            if e.path.name == MAIN.name))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TaskScreen))
        screen = pilot.app.screen
        assert screen.reading_rest and len(screen.opened.table) == 5 and screen.reading_total == whole
        release.set()
        await wait_for(pilot, lambda: not screen.reading_rest)
        assert len(screen.opened.table) == whole
        release.clear()
        await pilot.press("R")  # re-run; once done it is opened again, the same way
        await wait_for(pilot, lambda: not screen.running and screen.reading_rest, timeout=120)
        assert len(screen.opened.table) == 5
        release.set()
        await wait_for(pilot, lambda: not screen.reading_rest)
        await pilot.app.workers.wait_for_complete()
        assert len(screen.query_one(OperatorTable).view) == whole
    drive(AccuscopeApp(ws), script, size=(120, 30))


def held_back(monkeypatch) -> threading.Event:
    """The task screen's read of the rest of the table held back until the returned event is set."""
    release = threading.Event()

    def slow_load(folder, head=None):
        release.wait(30)
        return load_task(folder, head)
    monkeypatch.setattr(taskscreen, "load_task", slow_load)
    return release
