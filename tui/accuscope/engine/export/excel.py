"""A task's rows as an .xlsx workbook in msprobe's compare-result layout, failing rows highlighted.

msprobe's columns where accuscope has the value (NPU Name, Bench Name, dtypes, shape, Cosine,
MaxAbsErr, MaxRelativeErr, the one-thousandth / five-thousandths ratios, Accuracy Reached or Not,
Err_message), then ours (row index, op, type, io, and every other metric under its msaccucmp
name). msprobe's ratios count the elements whose relative error is *within* 0.1% / 0.5% (1 is
best): accuscope's rel_0.1% / rel_0.5% count those beyond, so the sheet holds 1 minus them.
Excel has no NaN or inf: such cells hold the text nan / inf / -inf, as msprobe's do. Failing rows
(Accuracy Reached or Not = No) are red through one conditional-format rule per sheet (msprobe fills
each cell; styling millions of cells one by one would take openpyxl minutes). A sheet holds
at most 1,048,576 rows with its header; more rows continue on sheets `result 2`, `result 3` ...
Text is stored as text, never as a formula (a name starting with = stays a name). Needs openpyxl (the
`xlsx` extra); written in openpyxl's streaming mode.
"""
from __future__ import annotations

import math
import os

import numpy as np

from accuscope.engine.compare import judgement
from accuscope.engine.compare.columns import CSV_OF, METRIC_TABLE
from accuscope.engine.compare.fields import FIELD
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds
from accuscope.engine.graphs.onnxgraph import need
from accuscope.engine.sources.names import printable
from accuscope.engine.sources.outputfile import atomic_file

EXCEL_ROWS = 1_048_576  # rows of a worksheet, its header included
HIGHLIGHT = "FFFF0000"  # red, as msprobe marks a row that misses its accuracy
SHEET = "result"

# (msprobe's header, our column key); ratios are turned round (see the module doc)
MSPROBE = [(f.msprobe, f.key) for f in (FIELD["tensor"], FIELD["golden_op"], FIELD["npu_dtype"], FIELD["golden_dtype"],
                                         FIELD["shape"])] + [(m.msprobe, m.key) for m in METRIC_TABLE if m.msprobe]
OURS = [("Index", "index"), ("NPU Op", "npu_op"), ("OpType", "type"), ("IO", "io")]
WITHIN = {"rel_0.1%", "rel_0.5%"}


def layout(table: ResultTable, thresholds: Thresholds, rows: np.ndarray) -> tuple[list[str], list[list]]:
    """(header, one list of cell values per column) for `rows` of the table."""
    present = set(table.metric_keys) | {"index", "tensor", "golden_op", "npu_dtype", "golden_dtype", "shape",
                                        "npu_op", "type", "io"}
    header, columns = [], []

    def add(name: str, values) -> None:
        header.append(name)
        columns.append(values)

    for name, key in MSPROBE:
        if key in present:
            values = table.columns[key][rows]
            add(name, _cells(1.0 - values if key in WITHIN else values))
    fail = table.columns["fail"][rows]
    add("Accuracy Reached or Not", np.where(fail, "No", "Yes").tolist())
    add("Err_message", _messages(table, thresholds, rows))
    for name, key in OURS:
        add(name, _cells(table.columns[key][rows]))
    shown = {key for _, key in MSPROBE + OURS}
    for key in table.metric_keys:
        if key not in shown:
            add(CSV_OF.get(key, key), _cells(table.columns[key][rows]))
    return header, columns


def _cells(values: np.ndarray) -> list:
    """Cell values: numbers as numbers, NaN/inf as their text, names printable."""
    out = values.tolist()
    if values.dtype.kind == "f":
        return [v if math.isfinite(v) else str(v) for v in out]
    if values.dtype.kind == "O":
        return [printable(v) if isinstance(v, str) else v for v in out]
    return out


def _messages(table: ResultTable, thresholds: Thresholds, rows: np.ndarray) -> list[str]:
    """The reason a row was not compared, and the thresholds it breaks (`cos 0.912 < 0.99`)."""
    parts: list[list[str]] = [[r] if r else [] for r in table.columns["reason"][rows].tolist()]
    for i in np.flatnonzero(judgement.evaluate(table, thresholds).fail[rows]):
        parts[i] += judgement.broken_texts(table, thresholds, int(rows[i]))
    return [printable("; ".join(p)) for p in parts]


def write_xlsx(table: ResultTable, thresholds: Thresholds, path: str | os.PathLike, rows: np.ndarray | None = None,
               sheet_rows: int = EXCEL_ROWS) -> list[str]:
    """Write `rows` (default: all) to `path`; returns the sheet names. `sheet_rows` (header included)
    is Excel's limit unless a test asks for less."""
    need("openpyxl", "writing .xlsx", "xlsx")
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.cell.cell import ERROR_CODES
    from openpyxl.formatting.rule import FormulaRule
    from openpyxl.styles import Font, PatternFill
    from openpyxl.utils import get_column_letter

    rows = np.arange(len(table)) if rows is None else np.asarray(rows)
    header, columns = layout(table, thresholds, rows)
    verdict = get_column_letter(header.index("Accuracy Reached or Not") + 1)
    last = get_column_letter(len(header))
    fill = PatternFill("solid", start_color=HIGHLIGHT, end_color=HIGHLIGHT)
    per_sheet = max(1, sheet_rows - 1)
    # openpyxl stores a str starting with = as a formula (and #N/A ... as an error): an op named
    # `=cmd|'/c calc'!A1` would be live code. Those cells go in as cells typed text (data_type "s").
    unsafe: dict[int, list[int]] = {}
    for c, col in enumerate(columns):
        for r in [r for r, v in enumerate(col) if type(v) is str and (v[:1] == "=" or v in ERROR_CODES)]:
            unsafe.setdefault(r, []).append(c)

    def text_cell(ws, text: str):
        cell = WriteOnlyCell(ws, value=text)
        cell.data_type = "s"
        return cell

    names = []
    with atomic_file(path, "wb") as fh:  # before the sheets: a place that cannot take the file fails at once
        book = Workbook(write_only=True)
        for start in range(0, max(len(rows), 1), per_sheet):
            name = SHEET if start == 0 else f"{SHEET} {start // per_sheet + 1}"
            names.append(name)
            ws = book.create_sheet(name)
            ws.freeze_panes = "A2"
            heads = [WriteOnlyCell(ws, value=text) for text in header]
            for cell in heads:
                cell.font = Font(bold=True)
            ws.append(heads)
            end = min(start + per_sheet, len(rows))
            for r, values in enumerate(zip(*(col[start:end] for col in columns)), start):
                cells = list(values)
                for c in unsafe.get(r, ()):
                    cells[c] = text_cell(ws, cells[c])
                ws.append(cells)
            # the failing rows' highlight: one rule on the sheet, not a style on each of millions of cells
            ws.conditional_formatting.add(f"A2:{last}{max(end - start + 1, 2)}",
                                          FormulaRule(formula=[f'${verdict}2="No"'], fill=fill))
        book.save(fh)
    return names
