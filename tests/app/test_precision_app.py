"""The precision screen, started with `p` from the advisor on an `accuscope run` task of the fp16
cliff (PP-OCR cls with one BatchNormalization beyond float16): the trials, the chart, the op set
and the verdict on screen; enter opens the final model's task."""
from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

from accuscope.app import precisionscreen
from accuscope.app.app import AccuscopeApp
from accuscope.app.precisionscreen import PrecisionScreen
from accuscope.app.taskscreen import TaskScreen
from appkit import check_snapshot, drive, screen_text, wait_for
from support.cli import accuscope


def test_advisor_p_runs_the_search_on_screen_and_opens_the_result_task(cls_cliff, tmp_path, monkeypatch):  # noqa: F811
    root, ref, cand, bn, _ = cls_cliff
    started, proceed = threading.Event(), threading.Event()
    real = precisionscreen.run_precision

    def gated(*args):  # the first search waits until `c` is pressed: a cancel that cannot lose the race
        if not started.is_set():
            started.set()
            proceed.wait(60)
        return real(*args)
    monkeypatch.setattr(precisionscreen, "run_precision", gated)
    task = tmp_path / "t"
    r = accuscope("run", ref, cand, "--input", f"x={root / 'x.npy'}", "--out", task)
    assert r.returncode == 0, r.stdout + r.stderr

    async def script(pilot):
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.advice is not None)
        await pilot.press("a", "p")
        await wait_for(pilot, started.is_set)
        await pilot.press("c")  # cancelled before the first trial: it stops before its next trial
        proceed.set()
        prec = pilot.app.screen
        assert isinstance(prec, PrecisionScreen) and prec.spec.to == "fp16"
        await wait_for(pilot, lambda: prec.result is not None or prec.error)
        await pilot.pause()
        assert prec.result is not None
        assert not prec.result.outcome.met and "target not met: cancelled" in screen_text(pilot.app)
        await pilot.press("escape", "p")  # started again: resumes from the trial log
        prec = pilot.app.screen
        assert isinstance(prec, PrecisionScreen) and not prec.result
        await wait_for(pilot, lambda: prec.result is not None or prec.error)
        await pilot.pause()
        assert not prec.error and prec.result is not None and prec.result.outcome.keep == [bn]
        text = screen_text(pilot.app)
        assert "target met keeping 1 op(s) in fp32" in text and bn in text
        assert "greedy" in text and "full" in text and "current op set" not in text  # the result names the set
        assert "cos of the network outputs by trial" in text and "target 0.99" in text
        # the recipe: the command that reproduces the result, and the prepared model the lists name
        r = prec.result
        assert "reproduce: sh command.txt there" in text and r.files["command"].read_text().strip() == r.command
        if r.obstacles:
            assert "the lists alone do not act on your model" in text and r.files["prepared"].name in text
        else:
            assert "the lists work on your model as it is" in text
        await pilot.press("enter")
        opened = pilot.app.screen
        assert isinstance(opened, TaskScreen) and opened.folder == task / "precision-fp16" / "result" / "task"
    drive(AccuscopeApp(tmp_path, open_path=task), script, size=(140, 45))
    assert (task / "precision-fp16" / "trials.jsonl").exists()


def test_precision_screen_snapshot(cls_cliff):  # noqa: F811
    """The finished search at 80x24 and 160x50: the trials, the chart, the op set, the reproduce command
    and the prepared model, in a folder whose path has the same length every run."""
    root, ref, cand, _bn, _ = cls_cliff
    here = Path(tempfile.mkdtemp(prefix="accuscope-snap-", dir="/tmp"))
    try:
        for f in (ref, cand, root / "x.npy"):
            shutil.copy(f, here / f.name)
        r = accuscope("run", here / ref.name, here / cand.name, "--input", f"x={here / 'x.npy'}", "--out", here / "t")
        assert r.returncode == 0, r.stdout + r.stderr
        for size in ((80, 24), (160, 50)):
            shutil.rmtree(here / "t" / "precision-fp16", ignore_errors=True)  # each size searches afresh
            async def script(pilot):
                await wait_for(pilot, lambda: pilot.app.screen.advice is not None)
                await pilot.press("a", "p")
                prec = pilot.app.screen
                await wait_for(pilot, lambda: prec.result is not None or prec.error, timeout=180)
                prec.result.seconds = 1.0  # how long the search took varies: the status says 1.0 s
                prec._status()
                await pilot.pause()
                return pilot.app.export_screenshot(title="accuscope")
            svg = drive(AccuscopeApp(here, open_path=here / "t"), script, size=size)
            check_snapshot(f"precision-{size[0]}x{size[1]}", svg)
    finally:
        shutil.rmtree(here, ignore_errors=True)
