"""`accuscope show --format xlsx`: msprobe's compare layout, failing rows highlighted, split at the
row limit; read back with openpyxl."""
from __future__ import annotations

import os

import numpy as np
import openpyxl

from accuscope.engine.demo.workspace import MAIN
from accuscope.engine.export.excel import EXCEL_ROWS, write_xlsx
from accuscope.engine.tasks.task import load_task
from support.cli import accuscope


def sheets(path) -> dict[str, list[tuple]]:
    book = openpyxl.load_workbook(path)
    return {ws.title: list(ws.iter_rows(values_only=True)) for ws in book.worksheets}


def highlight_rule(ws) -> tuple[str, str, str]:
    """(range, formula, fill colour) of the sheet's one conditional-format rule."""
    (cf,) = list(ws.conditional_formatting)
    (rule,) = cf.rules
    return str(cf.sqref), rule.formula[0], rule.dxf.fill.fgColor.rgb


def test_msprobe_columns_failing_rows_red_and_nan_as_text(demo_ws, tmp_path):
    task = demo_ws / MAIN.name
    r = accuscope("show", task, "--format", "xlsx", "--out", tmp_path / "r.xlsx")
    assert r.returncode == 0, r.stderr
    assert "68 rows (60 failing) on 1 sheet" in r.stdout
    rows = sheets(tmp_path / "r.xlsx")["result"]
    head = rows[0]
    assert head[:12] == ("NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Cosine", "MaxAbsErr",
                         "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio",
                         "Accuracy Reached or Not", "Err_message")
    table = load_task(task).table
    assert table is not None
    c = table.columns
    assert len(rows) - 1 == len(table)
    col = {name: [row[i] for row in rows[1:]] for i, name in enumerate(head)}
    assert col["Accuracy Reached or Not"] == ["No" if f else "Yes" for f in c["fail"]]
    assert col["NPU Name"] == list(c["tensor"]) and col["Index"] == list(c["index"])
    conv = list(c["npu_op"]).index("/block1/conv1/Conv/block1/relu1/Relu") + 1  # its output row
    assert col["Cosine"][conv] == c["cos"][conv] and col["Err_message"][conv].startswith("cos 0.9562 < 0.99")
    # msprobe's ratios: elements within 0.1% relative error (ours: beyond)
    assert col["One Thousandth Err Ratio"][conv] == 1 - c["rel_0.1%"][conv]
    pow_out = int(np.flatnonzero((c["npu_op"] == "/attn/norm/Pow") & (c["io"] == "output"))[0])
    assert col["Cosine"][pow_out] == "nan" and "NaN/inf" in col["Err_message"][pow_out]
    ws = openpyxl.load_workbook(tmp_path / "r.xlsx")["result"]
    verdict = openpyxl.utils.get_column_letter(head.index("Accuracy Reached or Not") + 1)
    last = openpyxl.utils.get_column_letter(len(head))  # every column of the row is painted
    assert highlight_rule(ws) == (f"A2:{last}{len(rows)}", f'${verdict}2="No"', "FFFF0000")
    assert ws.freeze_panes == "A2" and ws["A1"].font.b


def test_rows_past_the_limit_continue_on_new_sheets(demo_ws, tmp_path):
    """Excel's limit injected small (68 rows, 30 a sheet with the header): 29 + 29 + 10 rows, in order."""
    task = load_task(demo_ws / MAIN.name)
    assert task.table is not None and task.thresholds is not None
    names = write_xlsx(task.table, task.thresholds, tmp_path / "r.xlsx", sheet_rows=30)
    assert names == ["result", "result 2", "result 3"]
    book = sheets(tmp_path / "r.xlsx")
    assert list(book) == names and [len(rows) for rows in book.values()] == [30, 30, 11]
    assert len({rows[0] for rows in book.values()}) == 1  # the same header on each
    index = book["result"][0].index("Index")
    assert [row[index] for rows in book.values() for row in rows[1:]] == list(task.table.columns["index"])
    ws = openpyxl.load_workbook(tmp_path / "r.xlsx")["result 3"]
    last = openpyxl.utils.get_column_letter(len(book["result 3"][0]))  # its third side too: exp_err and excess
    assert highlight_rule(ws)[0] == f"A2:{last}11"
    assert EXCEL_ROWS == 1_048_576  # Excel's own: 2**20 rows, the header among them


def test_failing_only_and_missing_openpyxl_and_bad_options(demo_ws, tmp_path):
    task = demo_ws / MAIN.name
    r = accuscope("show", task, "--format", "xlsx", "--failing", "--out", tmp_path / "f.xlsx")
    assert r.returncode == 0, r.stderr
    rows = sheets(tmp_path / "f.xlsx")["result"]
    assert len(rows) == 61 and {row[10] for row in rows[1:]} == {"No"}
    blocked = tmp_path / "blocked" / "openpyxl"  # an environment without openpyxl: importing it fails
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('No module named openpyxl')\n")
    r = accuscope("show", task, "--format", "xlsx", "--out", tmp_path / "x.xlsx",
                  PYTHONPATH=f"{blocked.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    assert r.returncode == 2 and "pip install 'accuscope[xlsx]'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x.xlsx").exists()
    r = accuscope("show", task, "--format", "xlsx")
    assert r.returncode == 2 and "give --out FILE.xlsx" in r.stderr
    r = accuscope("show", task, "--format", "xlsx", "--out", tmp_path / "no" / "such" / "dir.xlsx")
    assert r.returncode == 2 and "dir.xlsx" in r.stderr and "Traceback" not in r.stderr
