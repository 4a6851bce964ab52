"""The operator detail screen on the demo workspace, driven with Pilot: what it shows is checked
against plain numpy on the very tensors it reads."""
from __future__ import annotations

import json
import shutil
import time

import numpy as np

from accuscope.app.app import AccuscopeApp
from accuscope.app.errorchart import sparkline, step_threshold, threshold_stops
from accuscope.app.opscreen import OpScreen, TopTable, tensor_refs
from accuscope.app.optable import OperatorTable
from accuscope.app.rowdetail import RowDetail
from accuscope.app.taskscreen import TaskScreen
from accuscope.engine.demo.workspace import MAIN, QUANTIZED_CONV
from accuscope.engine.diagnose import opdetail as od
from accuscope.engine.diagnose import oppair
from accuscope.engine.tasks.task import load_task
from appkit import drive, screen_text, wait_for
from support.errors import brute_errors, brute_top
from support.narrow import present

EPS64 = np.finfo(np.float64).eps
POW = "/attn/norm/Pow:output:0"


async def open_detail(pilot) -> OpScreen:
    await pilot.press("enter")
    screen = pilot.app.screen
    assert isinstance(screen, OpScreen)
    await wait_for(pilot, lambda: screen.detail is not None and not screen.computing and not screen.counting)
    await pilot.pause()
    return screen


def tensors(folder, tensor):
    pair = oppair.open_op(folder, tensor)
    return np.asarray(pair.npu.load()), np.asarray(pair.golden.load())


def test_quantized_conv_detail_matches_numpy_and_back_keeps_the_cursor(demo_ws):
    folder = demo_ws / MAIN.name
    table = load_task(folder).table
    assert table is not None
    first_fail = int(np.flatnonzero(table.columns["fail"])[0])
    tensor = table.columns["tensor"][first_fail]
    assert tensor.startswith(QUANTIZED_CONV) and tensor.endswith(":output:0")
    x, y = tensors(folder, tensor)
    e_abs, e_rel = brute_errors(x, y, "abs"), brute_errors(x, y, "rel")

    async def script(pilot):
        task_screen = pilot.app.screen
        optable = task_screen.query_one(OperatorTable)
        await pilot.press("!")
        assert optable.cursor_row == first_fail
        screen = await open_detail(pilot)
        assert [r.slot for r in screen.refs] == ["in:0", "out:0"] and screen.ref.name == tensor
        top = screen.query_one(TopTable)
        # TopN: 20 rows, worst first, the elements numpy finds, in the logical layout N C H W
        assert top.row_count == 20 and top.by == "abs"
        want = brute_top(e_abs, 20)
        assert top.top is not None
        assert top.top.index.tolist() == want.tolist()
        assert np.all(np.diff(top.top.abs_err) <= 0)
        np.testing.assert_array_equal(top.top.abs_err, e_abs[want])
        np.testing.assert_array_equal(top.top.npu, x.ravel()[want].astype(np.float64))
        np.testing.assert_array_equal(top.top.golden, y.ravel()[want].astype(np.float64))
        coords = [" ".join(map(str, np.unravel_index(i, x.shape))) for i in want]
        assert [top.cells(i)[1] for i in range(20)] == coords
        text = screen_text(pilot.app)  # 80x24: the key numbers are on screen
        assert "N C H W" in text and "abs err▼" in text
        for i in range(3):
            assert top.line_text(i).rstrip() in text
        assert f"{x.size:,} elements" in text and "in:0 ▸out:0" in text
        # the sentence for the default C (between sketch edges: counted exactly by a worker)
        c = screen.c["abs"]
        assert screen.shown_count == np.count_nonzero(e_abs > c)
        await pilot.press("2")
        for _ in range(3):  # + moves C to the next exact edge; the count is exact there
            await pilot.press("plus")
            assert screen.c["abs"] > c
            c = screen.c["abs"]
            count = int(np.count_nonzero(e_abs > c))
            assert screen.shown_count == count and not screen.counting
        await pilot.pause()
        text = screen_text(pilot.app)
        assert f"({count:,} elements) have an absolute error greater than" in " ".join(text.split())
        await pilot.press("minus")
        assert screen.c["abs"] < c and screen.shown_count == np.count_nonzero(e_abs > screen.c["abs"])
        # relative error: the other ranking, "-" where golden is 0
        await pilot.press("m")
        assert top.by == "rel" and top.top.index.tolist() == brute_top(e_rel, 20).tolist()
        assert np.all(np.diff(top.top.rel_err) <= 0)
        await wait_for(pilot, lambda: not screen.counting)
        assert screen.shown_count == np.count_nonzero(e_rel > screen.c["rel"])
        await pilot.press("plus")
        assert screen.shown_count == np.count_nonzero(e_rel > screen.c["rel"])
        await pilot.pause()
        assert "have a relative error greater than" in " ".join(screen_text(pilot.app).split())
        # channels: the worst channel by cosine, as numpy computes it, is listed first
        xm = np.moveaxis(x, 1, 0).reshape(x.shape[1], -1).astype(np.float64)
        ym = np.moveaxis(y, 1, 0).reshape(y.shape[1], -1).astype(np.float64)
        cos = (xm * ym).sum(1) / np.sqrt((xm * xm).sum(1) * (ym * ym).sum(1))
        worst = int(np.argmin(cos))
        assert screen.detail is not None and screen.detail.channels is not None
        np.testing.assert_allclose(screen.detail.channels.cos, cos, rtol=1e-9)
        await pilot.press("3")
        await pilot.pause()
        text = screen_text(pilot.app)
        line = next(ln for ln in text.splitlines() if "◀ worst" in ln)
        assert line.split()[0] == str(worst) and f"{cos[worst]:.6f}"[:7] in line
        # back to the table: same screen, same cursor row
        await pilot.press("escape")
        assert pilot.app.screen is task_screen and optable.cursor_row == first_fail
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / MAIN.name), script)


def test_pow_row_shows_the_fp16_overflow_and_tensors_switch(demo_ws):
    folder = demo_ws / MAIN.name
    table = load_task(folder).table
    assert table is not None
    row = int(np.flatnonzero(table.columns["tensor"] == POW)[0])
    x, y = tensors(folder, POW)
    infs = int(np.isinf(x).sum())
    assert infs > 0 and not np.isinf(y).any()

    async def script(pilot):
        optable = pilot.app.screen.query_one(OperatorTable)
        optable.move_to(row)
        screen = await open_detail(pilot)
        assert screen.detail is not None
        assert screen.detail.npu_stats.inf == infs and screen.detail.golden_stats.inf == 0
        top = screen.query_one(TopTable)
        assert top.top is not None
        assert top.top.nonfinite.all() and top.cells(0)[2] == "inf" and top.cells(0)[6] == "NaN/inf"
        await pilot.press("3")
        await pilot.pause()
        text = screen_text(pilot.app)
        npu_line = next(ln for ln in text.splitlines() if ln.split()[:1] == ["NPU"])
        assert npu_line.split()[-2:] == ["0", str(infs)]  # NaN, inf columns
        assert f"{infs} NaN/inf on one side only" in text and "no channel axis" in text
        # every inf counts above any C: at the largest edge only they are left
        await pilot.press("2")
        for key in ("greater_than_sign", "plus"):  # x10 steps, then edge by edge: up to the last edge
            for _ in range(40):
                before = screen.c["abs"]
                await pilot.press(key)
                if screen.c["abs"] == before:
                    break
        assert screen.c["abs"] == threshold_stops(screen.detail.abs)[-1]
        assert screen.shown_count == infs == np.count_nonzero(brute_errors(x, y, "abs") > screen.c["abs"])
        # [ goes to the op's input: another tensor, computed again
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: screen.detail is not None and not screen.computing)
        assert screen.ref.slot == "in:0" and present(screen.detail).npu_stats.inf == 0
        await pilot.press("left_square_bracket")  # the first one: stays
        assert screen.ref.slot == "in:0" and not screen.computing
        await pilot.press("q")
        assert isinstance(pilot.app.screen, TaskScreen) and optable.cursor_row == row
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / MAIN.name), script)


def test_top_n_prompt_threshold_prompt_and_wide_layout(demo_ws):
    folder = demo_ws / MAIN.name
    table = load_task(folder).table
    assert table is not None
    row = int(np.flatnonzero(table.columns["fail"])[0])
    x, y = tensors(folder, table.columns["tensor"][row])
    e = brute_errors(x, y, "abs")

    async def script(pilot):
        await pilot.press("!")
        screen = await open_detail(pilot)
        assert screen.wide and screen.query_one("#pane-dist").display  # all panes side by side
        await pilot.press("N")
        await pilot.press("ctrl+a", "ctrl+k", *"10000", "enter")
        started = time.perf_counter()
        await wait_for(pilot, lambda: screen.top_n == 10000 and screen.detail is not None and not screen.computing)
        took = time.perf_counter() - started
        top = screen.query_one(TopTable)
        valid = int(np.count_nonzero(~np.isnan(e)))
        assert top.row_count == min(10000, valid)
        assert top.top is not None
        assert top.top.index.tolist() == brute_top(e, 10000).tolist()
        zero_golden = np.abs(top.top.golden) <= EPS64  # relu zeros on the golden side: no relative error
        assert zero_golden.any()
        assert all((top.cells(i)[5] == "-") == zero_golden[i] for i in range(top.row_count))
        await pilot.press("end")
        await pilot.pause()
        assert top.cursor == top.row_count - 1
        assert top.line_text(top.cursor).rstrip() in screen_text(pilot.app)
        assert took < 5, took
        await pilot.press("equals_sign")
        await pilot.press("ctrl+a", "ctrl+k", *"0.0137", "enter")
        await wait_for(pilot, lambda: not screen.counting)
        assert screen.c["abs"] == 0.0137 and screen.shown_count == np.count_nonzero(e > 0.0137)
        await pilot.press("escape")
        assert isinstance(pilot.app.screen, TaskScreen)
        await pilot.press("D")  # the row's own details stay one key away
        assert isinstance(pilot.app.screen, RowDetail)
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / MAIN.name), script, size=(160, 50))


def test_esc_while_computing_cancels_and_goes_back(demo_ws, monkeypatch):
    started, release = [], []

    def slow_detail(self, top=od.TOP_DEFAULT, progress=None, cancel=None):
        started.append(cancel)
        while not cancel.is_set():
            time.sleep(0.01)
        release.append(True)
        return None
    monkeypatch.setattr(oppair.OpPair, "detail", slow_detail)

    async def script(pilot):
        task_screen = pilot.app.screen
        optable = task_screen.query_one(OperatorTable)
        await pilot.press("!")
        row = optable.cursor_row
        await pilot.press("enter")
        screen = pilot.app.screen
        await wait_for(pilot, lambda: started)
        assert screen.computing and "esc cancels" in screen_text(pilot.app)
        await pilot.press("escape")
        assert pilot.app.screen is task_screen and optable.cursor_row == row
        await wait_for(pilot, lambda: release)  # the engine saw the cancel and stopped
    drive(AccuscopeApp(demo_ws, open_path=demo_ws / MAIN.name), script)


def test_a_task_whose_dumps_are_gone_says_why(demo_ws, tmp_path):
    folder = tmp_path / "ws" / MAIN.name
    shutil.copytree(demo_ws / MAIN.name, folder)
    shutil.rmtree(folder / "npu")  # task.json's relative path would find the copy otherwise
    meta = json.loads((folder / "task.json").read_text())
    meta["npu"] = str(tmp_path / "gone")
    (folder / "task.json").write_text(json.dumps(meta))

    async def script(pilot):
        await pilot.press("!")
        await pilot.press("enter")
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.error)
        await pilot.pause()
        text = screen_text(pilot.app)
        words = " ".join(text.split())
        assert "cannot show" in words and "no such file or folder" in words and not screen.computing, text
        assert str(tmp_path / "gone") in screen.error
        await pilot.press("escape")
        assert isinstance(pilot.app.screen, TaskScreen)
    drive(AccuscopeApp(tmp_path / "ws", open_path=folder), script)


def test_threshold_stops_are_exact_and_helpers(demo_ws):
    folder = demo_ws / MAIN.name
    table = load_task(folder).table
    assert table is not None
    row = int(np.flatnonzero(table.columns["fail"])[0])
    refs = tensor_refs(table, row)
    assert [r.row for r in refs] == [row - 1, row] and refs[1].name == table.columns["tensor"][row]
    pair = oppair.open_op(folder, refs[1].name)
    d = pair.detail()
    x, y = np.asarray(pair.npu.load()), np.asarray(pair.golden.load())
    e = brute_errors(x, y, "abs")
    assert d is not None
    stops = threshold_stops(d.abs)
    assert stops[0] == 0 and np.all(np.diff(stops) > 0)
    for c in stops:
        low, high = d.abs.count_above(c)
        assert low == high == np.count_nonzero(e > c)
    assert step_threshold(d.abs, 1e-3, 1) == stops[stops > 1e-3][0]
    assert step_threshold(d.abs, 1e-3, -1) == stops[stops < 1e-3][-1]
    assert step_threshold(d.abs, stops[-1], 1) == stops[-1] and step_threshold(d.abs, 0.0, -1) == 0.0
    assert sparkline(np.array([0.0, 1.0, np.nan, np.inf]), 10) == "▁█?!"
    assert len(sparkline(np.arange(100.0), 10)) == 10


def test_coordinates_have_as_many_axes_as_the_tensor(demo_ws):
    folder = demo_ws / MAIN.name
    table = load_task(folder).table
    assert table is not None
    shapes = table.columns["shape"].tolist()
    rows = {rank: shapes.index(s) for s in shapes for rank in [s.count(",") + 1]}  # a row per rank
    assert {2, 3, 4} <= set(rows)

    async def script(pilot):
        optable = pilot.app.screen.query_one(OperatorTable)
        for rank, header in [(2, "N C"), (3, "N C H"), (4, "N C H W")]:
            optable.move_to(rows[rank])
            screen = await open_detail(pilot)
            top = screen.query_one(TopTable)
            assert table is not None
            x, _ = tensors(folder, table.columns["tensor"][rows[rank]])
            assert top.line_text(None).split()[1:rank + 2] == header.split() + ["NPU"]  # the header line
            assert top.top is not None
            assert top.cells(0)[1] == " ".join(map(str, np.unravel_index(int(top.top.index[0]), x.shape)))
            await pilot.press("escape")
            await pilot.pause()
    drive(AccuscopeApp(demo_ws, open_path=folder), script)
