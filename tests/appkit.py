"""What the app tests share: the demo workspace, driving an app with Pilot, reading the screen."""
from __future__ import annotations

import asyncio
import html
import re
import shutil
import time

import pytest

from accuscope.engine.demo.workspace import build_workspace


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


def drive(app, script, size=(80, 24)):
    """Run `await script(pilot)` against the app in a headless terminal of `size`."""
    async def go():
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            return await script(pilot)
    return asyncio.run(go())


async def wait_for(pilot, condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.02)


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
