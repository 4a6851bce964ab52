"""What the app tests share: the demo workspace, driving an app with Pilot, reading the screen."""
from __future__ import annotations

import asyncio
import difflib
import html
import os
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from textual import events

from accuscope.engine.demo.workspace import build_workspace

if TYPE_CHECKING:
    from accuscope.app.taskscreen import TaskScreen

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("ACCUSCOPE_UPDATE_SNAPSHOTS") == "1"  # regenerate them, after checking the new look


@pytest.fixture(scope="session")
def demo_ws(tmp_path_factory):
    """The demo workspace, built once per test session (read it; copy it to change it)."""
    root = tmp_path_factory.mktemp("demo-ws")
    build_workspace(root)
    return root


@pytest.fixture
def ws(demo_ws, tmp_path):
    """A private copy of the demo workspace, for tests that delete, re-run or edit tasks."""
    root = tmp_path / "ws"
    shutil.copytree(demo_ws, root)
    return root


def drive(app, script, size=(80, 24), notifications=False):
    """Run `await script(pilot)` against the app in a headless terminal of `size`; `notifications`: the
    notices are drawn (as toasts: Pilot leaves them out unless asked)."""
    async def go():
        async with app.run_test(size=size, notifications=notifications) as pilot:
            await pilot.pause()
            return await script(pilot)
    return asyncio.run(go())


async def type_fast(pilot, *keys):
    """`keys` as a terminal sends keys typed faster than the app answers them: all in its queue before it
    handles the first (Pilot.press waits for the app to settle after each); then the app settles."""
    for key in keys:
        event = events.Key(key, key if len(key) == 1 else {"enter": "\r"}.get(key))
        event.set_sender(pilot.app)
        pilot.app.post_message(event)
    await pilot.pause()


async def wait_for(pilot, condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.02)


def task_screen(app) -> TaskScreen:
    """The app's screen, the task screen a test expects there (a failure when it is another)."""
    from accuscope.app.taskscreen import TaskScreen
    screen = app.screen
    assert isinstance(screen, TaskScreen), screen
    return screen


def opened_task_screen(task: Path, size=(80, 24)) -> tuple[str, str]:
    """The text and the SVG screenshot of the app opened on the task folder `task` (its workspace the
    folder holding it), once its table is shown and the advisor has spoken: a platform's task as a user
    meets it. The browser's ages are pinned by the caller (monkeypatch browser.ago)."""
    from accuscope.app.app import AccuscopeApp

    async def go():
        app = AccuscopeApp(task.parent, open_path=task)
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda: _shown(app) and len(task_screen(app).table_widget.table) > 0)
            await wait_for(pilot, lambda: not task_screen(app).advising and task_screen(app).advice is not None)
            await pilot.pause()
            return screen_text(app), app.export_screenshot(title="accuscope")
    return asyncio.run(go())


def _shown(app) -> bool:
    from accuscope.app.taskscreen import TaskScreen
    return isinstance(app.screen, TaskScreen)


async def start_from_form(pilot):
    """ctrl+s on the new-task form: the task screen it opens, once the comparison has run and shown rows."""
    from accuscope.app.taskscreen import TaskScreen
    await pilot.press("ctrl+s")
    screen = pilot.app.screen
    assert isinstance(screen, TaskScreen)
    await wait_for(pilot, lambda: not screen.running and len(screen.table_widget.table) > 0)
    return screen


def screen_lines(svg: str) -> list[str]:
    """The characters of an SVG screenshot, line by line, each text run placed at its column."""
    rows: dict[float, list[tuple[int, str]]] = {}
    for x, y, text in re.findall(r'<text class="[^"]*" x="([^"]*)" y="([^"]*)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(float(y), []).append((round(float(x) / 12.2), html.unescape(text)))
    lines = []
    for _, parts in sorted(rows.items()):
        line = ""
        for column, text in sorted(parts):
            line = line.ljust(column) + text
        lines.append(line.replace("\xa0", " ").rstrip())
    return lines


def screen_text(app) -> str:
    """What a user reads on the app's screen now."""
    return "\n".join(screen_lines(app.export_screenshot()))


def normalized(svg: str) -> str:
    """Textual names the SVG's CSS classes after a hash that changes between runs; the operator
    detail says how long it took; the new-task form names its folder by the time."""
    svg = re.sub(r"terminal-\d+", "terminal", svg)
    svg = re.sub(r"accuscope-snap-[A-Za-z0-9_]{8}", "accuscope-snap-XXXXXXXX", svg)
    svg = re.sub(r"task-\d{8}-\d{6}", "task-YYYYMMDD-HHMMSS", svg)  # the new-task form's folder, named by the time
    return re.sub(r"·&#160;\d+\.\d\d&#160;s<", "·&#160;0.00&#160;s<", svg)


def check_snapshot(name: str, svg: str) -> None:
    """The screenshot matches tests/snapshots/{name}.svg; if not, fail with both screens' text side by side
    (ACCUSCOPE_UPDATE_SNAPSHOTS=1 writes it instead)."""
    svg = normalized(svg)
    path = SNAPSHOTS / f"{name}.svg"
    if UPDATE or not path.exists():
        path.write_text(svg, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"{path} did not exist; written now: check it and commit it")
    expected = path.read_text(encoding="utf-8")
    if svg != expected:
        diff = "\n".join(difflib.unified_diff(screen_lines(expected), screen_lines(svg), "snapshot", "now", lineterm=""))
        pytest.fail(f"{name} differs from {path.name} (same text: styles changed)" if not diff else
                    f"{name} differs from {path.name}:\n{diff}")
