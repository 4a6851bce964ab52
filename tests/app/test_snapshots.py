"""SVG snapshots of the real app on the demo task, at 80x24 and 160x50.

A snapshot that no longer matches fails with the screen text of both versions side by side; after
checking the new look, regenerate with ACCUSCOPE_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_snapshots.py
"""
from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

from accuscope.app import browser
from accuscope.app.app import QUIT_QUESTION, AccuscopeApp
from accuscope.app.dialogs import ConfirmDialog
from accuscope.app.taskscreen import CANCEL_QUESTION
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.demo.workspace import MAIN, build_workspace
from accuscope.engine.tasks.taskrun import run_task
from appkit import check_snapshot, task_screen, wait_for


@pytest.fixture(scope="module")
def task():
    """The demo task in a folder whose path has the same length every run (the browser and its
    dialogs show it: a longer path would wrap elsewhere); normalized() hides its random part."""
    root = Path(tempfile.mkdtemp(prefix="accuscope-snap-", dir="/tmp"))
    build_workspace(root)
    yield root / MAIN.name
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def train_task():
    """A task of the real msprobe training fixture (tests/fixtures/msprobe/train: cand against bench, step 0,
    rank 1: the planted attention scale), in a folder named as `task`'s."""
    root = Path(tempfile.mkdtemp(prefix="accuscope-snap-", dir="/tmp"))
    train = Path(__file__).parents[1] / "fixtures" / "msprobe" / "train"
    run_task(CompareSpec(str(train / "cand"), str(train / "bench"), step="0", rank="1"), root / "train")
    yield root / "train"
    shutil.rmtree(root, ignore_errors=True)


def svg_of(task: Path, size: tuple[int, int], keys: list[str]) -> str:
    async def go():
        app = AccuscopeApp(task.parent, open_path=task)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await wait_for(pilot, lambda: not task_screen(app).advising)  # the advisor's line is part of it
            for key in keys:
                if callable(key):  # a step that is not a key: push a screen as the app would
                    key(app)
                    await pilot.pause()
                else:
                    await pilot.press(key)
            # screens that compute in a worker (the operator detail) are shot once they have drawn it
            await wait_for(pilot, lambda: not getattr(app.screen, "computing", False))
            await pilot.pause()
            return app.export_screenshot(title="accuscope")
    return asyncio.run(go())


@pytest.mark.parametrize("name, size, keys", [
    ("task-80x24", (80, 24), ["exclamation_mark"]),
    ("task-160x50", (160, 50), ["exclamation_mark"]),
    ("filter-160x50", (160, 50), ["f", *"cos<0.99", "enter"]),
    ("help-80x24", (80, 24), ["question_mark"]),
    ("op-detail-80x24", (80, 24), ["exclamation_mark", "enter"]),
    ("op-detail-160x50", (160, 50), ["exclamation_mark", "enter"]),
    # the dialogs: their question and choices inside the box (the running comparison behind the
    # cancel and quit questions would not hold still: they are shown over the finished task)
    ("delete-80x24", (80, 24), ["q", "d"]),
    ("cancel-80x24", (80, 24), [lambda app: app.push_screen(ConfirmDialog(CANCEL_QUESTION))]),
    ("quit-80x24", (80, 24), [lambda app: app.push_screen(ConfirmDialog(QUIT_QUESTION))]),
])
def test_snapshot(task, name, size, keys, monkeypatch):
    monkeypatch.setattr(browser, "ago", lambda when, now=None: "1h ago")  # the browser's ages move
    check_snapshot(name, svg_of(task, size, keys))


GRADS = ["f", *'under(type, "attn.qkv")', "enter", "G"]  # one module's calls, its weight gradients last


@pytest.mark.parametrize("name, size, keys", [("train-grads-80x24", (80, 24), GRADS),
                                              ("train-grads-160x50", (160, 50), GRADS)])
def test_training_snapshot(train_task, name, size, keys, monkeypatch):
    """msprobe's parameters and parameters_grad rows in the op table under their module (attn.qkv)."""
    test_snapshot(train_task, name, size, keys, monkeypatch)


@pytest.fixture(scope="module")
def cross_task():
    """The real cross-framework msprobe fixture (tests/fixtures/msprobe/cross: MindSpore against PyTorch) with
    --match structure, in a folder named as `task`'s."""
    root = Path(tempfile.mkdtemp(prefix="accuscope-snap-", dir="/tmp"))
    cross = Path(__file__).parents[1] / "fixtures" / "msprobe" / "cross"
    run_task(CompareSpec(str(cross / "ms"), str(cross / "pt"), match="structure"), root / "cross")
    yield root / "cross"
    shutil.rmtree(root, ignore_errors=True)


PAIR = ["f", *'how == "name_variants"', "enter", "plus"]  # the first inferred pair accepted


@pytest.mark.parametrize("name, size, keys", [("pair-accepted-80x24", (80, 24), PAIR),
                                              ("pair-accepted-160x50", (160, 50), PAIR)])
def test_pair_decision_snapshot(cross_task, name, size, keys, monkeypatch):
    """A structural pair accepted with +: the status line counts the decisions the re-run (R) will read."""
    doc = (cross_task / "task.json").read_bytes()
    try:
        test_snapshot(cross_task, name, size, keys, monkeypatch)
    finally:  # the next snapshot starts from the task as run
        (cross_task / "pairs.yaml").unlink(missing_ok=True)
        (cross_task / "task.json").write_bytes(doc)


PICK = ["f", *'tensor == "Primitive.layer_norm.LayerNorm.0.forward:input:1"', "enter", "p", *"layer_norm"]


@pytest.mark.parametrize("name, size, keys", [("pair-picker-80x24", (80, 24), PICK),
                                              ("pair-picker-160x50", (160, 50), PICK)])
def test_pair_picker_snapshot(cross_task, name, size, keys, monkeypatch):
    """p on an unpaired tensor: the golden side's tensors, its call's first, filtered by what was typed."""
    test_snapshot(cross_task, name, size, keys, monkeypatch)


def svg_of_app(make_app, size: tuple[int, int], keys: list, settled=lambda app: True) -> str:
    """A screenshot of the app `make_app()` makes after `keys`, pressed once its first screen has settled
    (a task's advisor line), taken once `settled(app)` holds (a screen whose worker draws it)."""
    async def go():
        app = make_app()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await wait_for(pilot, lambda: not getattr(app.screen, "advising", False))  # a task's advisor line
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
            await wait_for(pilot, lambda: settled(app))
            await pilot.pause()
            return app.export_screenshot(title="accuscope")
    return asyncio.run(go())


# every screen and dialog at 80x24 and wide, in the states a user meets: the task list (with tasks, and
# empty), the new-task form and the open-path question, the advisor's findings, the
# graph pane, the chart maximised, the thresholds editor, and a task whose run failed
SCREENS = [
    ("browser", lambda task: AccuscopeApp(task.parent), [], lambda app: True),
    ("new-task", lambda task: AccuscopeApp(task.parent), ["n"], lambda app: True),
    ("open-path", lambda task: AccuscopeApp(task.parent), ["o"], lambda app: True),
    ("advisor", lambda task: AccuscopeApp(task.parent, open_path=task), ["a"], lambda app: True),
    ("graph", lambda task: AccuscopeApp(task.parent, open_path=task), ["g"],
     lambda app: not getattr(app.screen, "loading", False)),
    ("chart-zoomed", lambda task: AccuscopeApp(task.parent, open_path=task), ["tab", "z"], lambda app: True),
    ("thresholds", lambda task: AccuscopeApp(task.parent, open_path=task), ["t"], lambda app: True),
]


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
@pytest.mark.parametrize("name, make, keys, settled", SCREENS, ids=[s[0] for s in SCREENS])
def test_screen_snapshot(task, name, make, keys, settled, size, monkeypatch):
    monkeypatch.setattr(browser, "ago", lambda when, now=None: "1h ago")

    check_snapshot(f"{name}-{size[0]}x{size[1]}", svg_of_app(lambda: make(task), size, keys, settled))


@pytest.fixture(scope="module")
def empty_workspace():
    root = Path(tempfile.mkdtemp(prefix="accuscope-snap-", dir="/tmp"))
    (root / "empty").mkdir()
    yield root / "empty"
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
def test_empty_workspace_snapshot(empty_workspace, size):
    """A workspace with no task yet: the list says how to make one."""
    check_snapshot(f"browser-empty-{size[0]}x{size[1]}", svg_of_app(lambda: AccuscopeApp(empty_workspace), size, []))


@pytest.fixture(scope="module")
def failed_task(task):
    """A task whose comparison failed (task.json state failed, its error), beside the demo task."""
    folder = task.parent / "failed-run"
    folder.mkdir(exist_ok=True)
    (folder / "task.json").write_text(
        '{"version": 3, "state": "failed", "npu": "/data/npu_dump", "golden": "/data/golden_npy", '
        '"error": "/data/npu_dump: no such file or directory", "created": "2026-12-06T10:00:00"}')
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
def test_failed_task_snapshot(failed_task, size, monkeypatch):
    """The task list with a failed run beside a finished one, the failed one under the cursor: its error said."""
    monkeypatch.setattr(browser, "ago", lambda when, now=None: "1h ago")
    check_snapshot(f"browser-failed-{size[0]}x{size[1]}",
                   svg_of_app(lambda: AccuscopeApp(failed_task.parent), size, ["end"]))
