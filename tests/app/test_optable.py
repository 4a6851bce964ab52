"""The operator table widget in a tiny host app: keys, view state, rendering, live loading."""
from __future__ import annotations

import asyncio
import html
import math
import re

import numpy as np
import pytest

from accuscope.app import formatting as fmt
from accuscope.app.optable import OperatorTable
from accuscope.engine.compare.results import FilterError, ResultTable
from accuscope.engine.compare.thresholds import Thresholds
from support.optable import EXEMPT_BAD, INVALID, Host, _rows, _table, lines, nan, run

FAILING = [7, 13, 27]  # rows breaking a default threshold, in execution order


def line_of(widget: OperatorTable, row: int) -> str:
    """The rendered text of table row `row` (scrolled into view first)."""
    widget.move_to(row)
    y = widget.cursor_position - int(widget.scroll_y) + 1
    return widget.render_line(y).text


# ---- rendering ------------------------------------------------------------------------------------
def test_first_frame_shows_header_marks_and_numbers():
    async def test(pilot, w, app):
        text = lines(w)
        assert re.match(r"\s+# NPU op\s+│\s*seq type\s+io\s+cos\s+red\s+kl", text[0])
        assert len(w.view) == 40 and w.cursor_row == 0 and app.messages == [("highlighted", 0)]
        assert w.columns[:7] == ["index", "npu_op", "op_seq", "type", "slot", "cos", "red"]
        assert w.columns[-3:] == ["shape", "dtype", "reason"]
        assert "3e-06" in line_of(w, 3)  # small numbers stay readable
        assert line_of(w, 7).startswith("✗") and "0.5" in line_of(w, 7)
        assert line_of(w, 13).startswith("✗") and line_of(w, 27).startswith("✗")
        assert line_of(w, EXEMPT_BAD).startswith("·")  # TransData: exempt, dim
        invalid = line_of(w, INVALID)
        assert invalid.startswith("?") and "nan" in invalid
        assert line_of(w, 1).startswith(" ")
        assert " in:0 " in line_of(w, 0) and " out:0 " in line_of(w, 1)
        assert w.status == "rows 40/40 · ✗ 3 failing"
    run(test, size=(100, 24))


def test_wide_terminal_shows_every_column_and_reason():
    async def test(pilot, w, app):
        header = lines(w)[0]
        for label in ("cos", "red", "kl", "max_abs", "mean_abs", "rmse", "max_rel", "mean_rel", "acc_rel",
                      "shape", "dtype", "reason"):
            assert label in header
        assert w.virtual_size.width <= w.scrollable_content_region.width  # no horizontal scrolling
        row = line_of(w, INVALID)
        assert "npu tensor file is truncated" in row and "[1,8,4]" in row and "fp16/fp32" in row
        assert "inf" in line_of(w, 2)
        assert "net/block0/relu_1" in line_of(w, 1)
    run(test, size=(200, 30))


def test_80_columns_truncates_name_and_keeps_sticky_columns_while_scrolling():
    long = [dict(r, npu_op="model/encoder/layer_11/attention/self/query/" + r["npu_op"]) for r in _rows()]
    table = ResultTable.from_rows(long)

    async def test(pilot, w, app):
        first = lines(w)
        assert len(first[0]) <= 80
        row1 = line_of(w, 1)
        assert "…" in row1 and row1.split("│")[0].rstrip().endswith("net/block0/relu_1")
        assert " cos " in first[0] + " " and "reason" not in first[0]
        for _ in range(30):
            await pilot.press("l")
        assert w.column_key == "reason"
        header = lines(w)[0]
        assert header.lstrip().startswith("# NPU op") and "reason" in header and "cos" not in header
        assert "npu tensor file is truncated"[:10] in line_of(w, INVALID)
        assert line_of(w, 7).startswith("✗")  # the mark is sticky too
        for _ in range(30):
            await pilot.press("h")
        assert w.column_key == "index" and int(w.scroll_x) == 0
    run(test, size=(80, 24), table=table)


def test_screenshot_80x24_has_marks_numbers_and_header(tmp_path):
    async def main():
        app = Host()
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await pilot.press("!", "l", "l", "l")  # to row 7, column cursor to max_abs
            await pilot.pause()
            svg = app.export_screenshot()
        (tmp_path / "optable_80x24.svg").write_text(svg)
        text = html.unescape(svg).replace("\xa0", " ")
        for expected in ("NPU op", "max_abs", "3e-06", "✗", "·", "net/block0/matmul_3", "nan"):
            assert expected in text, expected
    asyncio.run(main())


def test_no_color_keeps_marks_and_reverses_the_cursor(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")

    async def test(pilot, w, app):
        assert app.no_color
        assert w.get_component_rich_style("optable--cursor").reverse
        assert w.get_component_rich_style("optable--fail-cell").underline
        assert line_of(w, 7).startswith("✗") and line_of(w, INVALID).startswith("?")
    run(test)


# ---- keys -----------------------------------------------------------------------------------------
def test_sort_keys_act_on_the_column_cursor():
    table = _table()
    cos = table.columns["cos"]

    async def test(pilot, w, app):
        assert w.column_key == "cos"
        await pilot.press("]")
        expected = table.sort_order("cos", descending=True)
        assert w.view.tolist() == expected.tolist()
        assert cos[w.view[0]] == np.nanmax(cos) and w.view[-1] == INVALID  # NaN last
        assert w.cursor_row == 0 and w.view[w.cursor_position] == 0  # the cursor stays on its row
        assert w.status.endswith("sort cos↓")
        assert "cos↓" in lines(w)[0]
        await pilot.press("[")
        assert w.view[:2].tolist() == [EXEMPT_BAD, 7] and w.view[-1] == INVALID
        await pilot.press("l", "]")  # red, descending
        assert w.column_key == "red" and w.view[0] == 27 and "sort red↓" in w.status
        for _ in range(10):
            await pilot.press("h")
        assert w.column_key == "index"
        await pilot.press("[")  # index ascending: execution order again
        assert w.sort_key is None and w.view.tolist() == list(range(40)) and "sort" not in w.status
        await pilot.press("]")
        assert w.view.tolist() == list(range(39, -1, -1)) and "sort #↓" in w.status
    run(test)


def test_next_failing_in_execution_order_wraps_even_when_sorted():
    async def test(pilot, w, app):
        await pilot.press("!")
        assert w.cursor_row == FAILING[0]
        await pilot.press("!")
        assert w.cursor_row == FAILING[1]
        await pilot.press("!", "!")
        assert w.cursor_row == FAILING[0]  # wrapped
        w.sort("cos")  # 4, 7, ... by cos: execution order still decides
        w.move_to(0)
        await pilot.press("!")
        assert w.cursor_row == 7
        await pilot.press("!")
        assert w.cursor_row == 13
        assert ("highlighted", 13) in app.messages
    run(test)


def test_no_failing_row_leaves_the_cursor():
    async def test(pilot, w, app):
        await pilot.press("j", "j", "!")
        assert w.cursor_row == 2 and not w.next_failing()
    run(test, thresholds=Thresholds.from_dict({}))


def test_i_cycles_outputs_inputs_both():
    table = _table()
    inputs = int((table.columns["io"] == "input").sum())

    async def test(pilot, w, app):
        await pilot.press("i")
        assert w.io_mode == "outputs" and len(w.view) == 40 - inputs and "outputs only" in w.status
        assert all(table.columns["io"][w.view] == "output")
        await pilot.press("i")
        assert w.io_mode == "inputs" and len(w.view) == inputs == 10
        await pilot.press("i")
        assert w.io_mode == "both" and len(w.view) == 40
    run(test)


def test_x_hides_rows_that_could_not_be_compared():
    async def test(pilot, w, app):
        await pilot.press("x")
        assert INVALID not in w.view and len(w.view) == 39 and "1 not compared hidden" in w.status
        await pilot.press("x")
        assert INVALID in w.view and "hidden" not in w.status
    run(test)


def test_a_device_only_op_is_exempt_and_x_hides_it_with_the_rows_not_compared():
    """An op the conversion inserted (golden `*`) has nothing to compare: `·` (dim), not the `?` of a row
    worth a look; the summary counts it apart; x hides both kinds."""
    from accuscope.app.summary import summary_lines
    from accuscope.engine.compare.summary import summarize

    rows = _rows()
    rows[30].update({k: nan for k in ("cos", "red", "kl", "max_abs", "mean_abs", "rmse", "max_rel", "mean_rel",
                                      "acc_rel")}, golden_op="*", reason="inserted by the conversion: quantize")
    table = ResultTable.from_rows(rows)
    s = summarize(table, Thresholds())
    assert (s.not_compared, s.device_only) == (2, 1)
    text = " ".join(summary_lines(table, Thresholds()))
    assert "1 rows not compared" in text and "1 device-only ops" in text

    async def test(pilot, w, app):
        assert line_of(w, 30).startswith("·") and line_of(w, INVALID).startswith("?")
        await pilot.press("x")
        assert not {INVALID, 30} & set(w.view.tolist()) and "2 not compared hidden" in w.status
    run(test, table=table)


def test_search_and_n_N_wrap():
    async def test(pilot, w, app):
        assert w.search("relu")  # rows 1, 6, 11, ...
        assert w.cursor_row == 1
        await pilot.press("n")
        assert w.cursor_row == 6
        await pilot.press("N", "N")
        assert w.cursor_row == 36  # wrapped backwards
        await pilot.press("n")
        assert w.cursor_row == 1
        assert w.search("BLOCK9/", backwards=False) and w.cursor_row == 36
        assert w.search("block9/", include_current=True) and w.cursor_row == 36
        assert not w.search("no such op") and w.cursor_row == 36
    run(test)


def test_filter_count_error_and_clear():
    async def test(pilot, w, app):
        assert w.set_filter("cos < 0.99") == 2  # row 7 and the exempt TransData; NaN never matches
        assert w.view.tolist() == [EXEMPT_BAD, 7] and "filter cos < 0.99" in w.status
        assert w.cursor_row == EXEMPT_BAD
        with pytest.raises(FilterError, match="did you mean cos"):
            w.set_filter("coss < 0.99")
        assert w.filter == "cos < 0.99" and len(w.view) == 2  # the previous filter stays
        assert w.set_filter('type == "Relu" and fail') == 0
        assert "no row matches the filter" in lines(w)[1] and w.cursor_row is None
        await pilot.press("j", "!", "enter", "]")  # keys on an empty view do nothing
        assert w.clear_filter() == 40 and w.status.startswith("rows 40/40")
    run(test)


def test_filter_keeps_the_cursor_row_when_it_stays():
    async def test(pilot, w, app):
        w.move_to(13)
        assert w.set_filter("fail") == 3 and w.cursor_row == 13
        assert w.set_filter("not fail") == 37 and w.cursor_row == 14  # nearest later row
    run(test)


def test_movement_keys_and_enter():
    async def test(pilot, w, app):
        await pilot.press("G")
        assert w.cursor_row == 39
        assert w.scroll_y == w.max_scroll_y
        await pilot.press("home")
        assert w.cursor_row == 0 and w.scroll_y == 0
        await pilot.press("j", "j", "down", "k")
        assert w.cursor_row == 2
        await pilot.press("ctrl+d")
        assert w.cursor_row == 2 + (w.scrollable_content_region.height - 1) // 2
        await pilot.press("pagedown")
        assert 0 <= w.cursor_position - int(w.scroll_y) < w.scrollable_content_region.height - 1
        await pilot.press("end", "enter")
        assert app.messages[-1] == ("selected", 39)
        assert ("highlighted", 2) in app.messages
    run(test, size=(100, 16))


def test_click_moves_then_selects_and_header_click_sorts():
    async def test(pilot, w, app):
        await pilot.click(OperatorTable, offset=(5, 4))  # line 4 = third row
        assert w.cursor_row == 3
        await pilot.click(OperatorTable, offset=(5, 4))
        assert app.messages[-1] == ("selected", 3)
        cos = next(c for c in w._columns if c.key == "cos")
        x = w._sticky_width + cos.offset + 2
        await pilot.click(OperatorTable, offset=(x, 0))
        assert w.sort_key == ("cos", False)
        await pilot.click(OperatorTable, offset=(x, 0))
        assert w.sort_key == ("cos", True)
    run(test, size=(120, 20))


# ---- loading while a comparison runs --------------------------------------------------------------
def test_rows_appended_during_a_run_keep_the_cursor_on_the_same_op():
    rows = _rows()
    live = ResultTable.empty()
    live.append_rows(rows[:20])

    async def test(pilot, w, app):
        assert len(w.view) == 20 and w.failing_shown == 2
        w.move_to(12)
        await pilot.pause()
        offset = w.cursor_position - int(w.scroll_y)
        seen = len(app.messages)
        live.append_rows(rows[20:])
        w.load(live)
        assert len(w.view) == 40 and w.cursor_row == 12 and w.failing_shown == 3
        assert w.cursor_position - int(w.scroll_y) == offset
        await pilot.pause()
        assert len(app.messages) == seen  # same row: no new Highlighted
        w.sort("max_rel")  # all equal: ties keep execution order
        w.sort("cos", descending=True)
        w.move_to(10)
        position = w.cursor_position
        more = [dict(r, npu_op=f"late{i}", tensor=f"late{i}:output:0", cos=1.0) for i, r in enumerate(rows[:5])]
        live.append_rows(more)
        w.load(live)
        assert w.cursor_row == 10 and w.cursor_position == position + 5  # five better rows came first
        assert w.status.startswith("rows 45/45") and "sort cos↓" in w.status
    run(test, table=live)


def test_a_new_table_object_keeps_the_cursor_by_tensor_name():
    async def test(pilot, w, app):
        w.move_to(25)
        reloaded = ResultTable.from_rows(_rows()[5:])  # same ops, other row numbers
        w.load(reloaded, Thresholds())
        assert w.cursor_row == 20 and w.table is reloaded
        assert reloaded.columns["tensor"][20] == _rows()[25]["tensor"]
        await pilot.pause()
        assert app.messages[-1] == ("highlighted", 20)  # same op, new row number: the chart follows
    run(test)


def test_empty_table_then_first_rows():
    live = ResultTable.empty()

    async def test(pilot, w, app):
        assert w.cursor_row is None and "no rows yet" in lines(w)[1]
        await pilot.press("j", "G", "!", "n", "x", "x", "enter")
        assert w.status.startswith("rows 0/0")
        live.append_rows(_rows()[:3])
        w.load(live)
        await pilot.pause()
        assert w.cursor_row == 0 and ("highlighted", 0) in app.messages
    run(test, table=live)


def test_thresholds_reload_changes_marks():
    async def test(pilot, w, app):
        assert line_of(w, 13).startswith("✗")
        w.load(w.table, Thresholds.from_dict({"cos": {"fail_if": "<", "value": 0.9}}))
        assert not line_of(w, 13).startswith("✗") and line_of(w, 7).startswith("✗")
        assert w.failing_shown == 1
    run(test)


# ---- formatting -----------------------------------------------------------------------------------
def test_number_formatting():
    assert fmt.number(3e-6) == "3e-06"
    assert fmt.number(0.999876543) == "0.999877"
    assert fmt.number(1.23456789e-7) == "1.235e-07"
    assert fmt.number(12345.678) == "12345.7"
    assert fmt.number(-1.5e7) == "-1.5e+07"
    assert fmt.number(nan) == "nan" and fmt.number(math.inf) == "inf" and fmt.number(-math.inf) == "-inf"
    assert fmt.number(0.0) == "0"
    assert fmt.number(0.98999996) == "0.99"
    assert fmt.number(0.98999996, toward=-1) == "0.989999"  # a failing cos never shows as 0.99
    assert float(fmt.number(0.0050000001, toward=1)) > 0.005
    assert all(len(fmt.number(v)) <= 9 for v in (1e-300, -1.23456789e-123, 123456789.0, 1 / 3))


def test_text_cells():
    assert fmt.fit("model/encoder/layer_11/attention/MatMul", 20, keep="end") == "…11/attention/MatMul"
    assert fmt.fit("a long reason text", 8) == "a long …"
    assert fmt.fit("short", 8) == "short"
    assert fmt.pad("ab", 5, right=True) == "   ab" and fmt.pad("名字", 5) == "名字 "
    assert fmt.slot("conv1:output:0", "output") == "out:0" and fmt.slot("x:input:12", "input") == "in:12"
    assert fmt.dtypes("DT_FLOAT16", "float32") == "fp16/fp32" and fmt.dtypes("float32", "DT_FLOAT") == "fp32"
    assert fmt.count(18204) == "18,204"
