"""Regenerate the README's screenshots: the real app on a freshly built demo workspace.

    python screenshots/generate.py
"""
from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from pathlib import Path

from accuscope.app.app import AccuscopeApp
from accuscope.engine.demo.workspace import MAIN, build_workspace

HERE = Path(__file__).parent


async def shoot(app: AccuscopeApp, name: str, size: tuple[int, int], keys: list[str]) -> None:
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        while getattr(app.screen, "advising", False):
            await pilot.pause(0.05)
        for key in keys:
            await pilot.press(key)
            await pilot.pause(0.05)
        await pilot.pause(1.0)  # workers of the screen just opened (op detail, graph)
        (HERE / f"{name}.svg").write_text(app.export_screenshot(title=f"accuscope: {name}"))
        print(HERE / f"{name}.svg")


def report(task: Path) -> None:
    """`accuscope report`'s HTML as Chromium renders it (the top of the page: verdict, findings, charts)."""
    from accuscope.engine.diagnose.advisor import current_advice
    from accuscope.engine.report.document import build_report, write_report
    from accuscope.engine.tasks.task import load_task
    browser = shutil.which("chromium")
    if browser is None:
        print("report.png: no chromium (apt-get install chromium), kept as it is")
        return
    page = task.parent / "report.html"
    opened = load_task(task)
    write_report(build_report(opened, current_advice(opened)), page)
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={HERE / 'report.png'}", "--window-size=820,1360", page.as_uri()],
                   check=True, capture_output=True)
    print(HERE / "report.png")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "demo"
        build_workspace(ws)
        task = ws / MAIN.name
        report(task)
        await shoot(AccuscopeApp(ws), "browser", (100, 20), [])
        await shoot(AccuscopeApp(ws, open_path=task), "task", (160, 50), ["!"])
        await shoot(AccuscopeApp(ws, open_path=task), "task-80x24", (80, 24), ["!"])
        await shoot(AccuscopeApp(ws, open_path=task), "filter", (160, 50),
                    ["f", *'cos < 0.99 and type == "Conv2D"', "enter"])
        await shoot(AccuscopeApp(ws, open_path=task), "help", (120, 40), ["question_mark"])
        await shoot(AccuscopeApp(ws, open_path=task), "advisor", (120, 30), ["a"])
        await shoot(AccuscopeApp(ws, open_path=task), "op-detail", (160, 50), ["exclamation_mark", "enter"])
        await shoot(AccuscopeApp(ws, open_path=task), "graph", (160, 50),
                    ["exclamation_mark", "g", "s", "o", "o", "e"])


if __name__ == "__main__":
    asyncio.run(main())
