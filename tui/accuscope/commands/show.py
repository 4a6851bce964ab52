"""`accuscope show TASK_DIR --format json|csv|md|xlsx`: a task's result where scripts, issue trackers and
spreadsheets want it."""
from __future__ import annotations

import csv
import json
import sys

import numpy as np

from ..engine.compare import judgement
from ..engine.compare.columns import BRIEF, BRIEF_RECORDED, METRIC, REPORTED, REPORTED_BESIDE
from ..engine.compare.summary import summarize
from ..engine.export.excel import write_xlsx
from ..engine.sources.names import markdown_text, printable
from ..engine.sources.tensor import SourceError
from ..engine.tasks.csvio import formula_cells, write_rows
from ..engine.tasks.task import load_task, unwritable
from .answers import cell, show_json
from .common import err, out, show, verdict_exit

IDENTITY = ("index", "npu_op", "type", "tensor", "golden_op")
DEFAULT_COLUMNS = (*IDENTITY, *BRIEF, "fail", "reason")
# a comparison of recorded statistics (msprobe statistics / md5 dumps, --stats-only) has no cos ...
STATS_COLUMNS = (*IDENTITY, *BRIEF_RECORDED, "fail", "reason")


def register(p) -> None:
    p.description = ("Print a task's result for scripts, CI jobs and issue trackers: JSON (one object "
                     "with stable keys: task, state, rows, failing, first_failing, coverage, "
                     "warnings, columns, data; stack: each NPU call's Python stack when the dump has msprobe's stack.json), CSV, a Markdown table, or an .xlsx workbook in "
                     "msprobe's compare layout (--out FILE.xlsx; failing rows red; a new sheet "
                     "every 1,048,575 rows; needs pip install 'accuscope[xlsx]'). Exit 0: shown; 1 "
                     "with --fail-on-error when the task's verdict is not a pass; 2: "
                     "unusable task or column, or openpyxl missing for xlsx.")
    p.add_argument("task", metavar="TASK_DIR")
    p.add_argument("--format", choices=("json", "csv", "md", "xlsx"), default="json")
    p.add_argument("--out", metavar="FILE.xlsx", help="the workbook to write (--format xlsx)")
    p.add_argument("--failing", action="store_true", help="only the rows that break a threshold")
    p.add_argument("--columns", help="comma-separated column keys (default: " + ",".join(DEFAULT_COLUMNS) + ")")
    p.add_argument("--fail-on-error", action="store_true", help="exit 1 when rows fail or coverage warns")
    p.set_defaults(handler=run)


def run(args) -> int:
    if (args.format == "xlsx") != bool(args.out):
        raise SourceError("--format xlsx writes a workbook: give --out FILE.xlsx" if args.out is None else
                          "--out is for --format xlsx; json, csv and md go to stdout (redirect them)")
    if args.format == "xlsx" and args.columns:
        raise SourceError("--columns: the xlsx workbook has msprobe's columns; use --format csv to choose them")
    task = load_task(args.task)
    table, thresholds = task.result
    columns = columns_of(task, args.columns)
    s = summarize(table, thresholds, task.basis)
    rows = np.flatnonzero(judgement.evaluate(table, thresholds).fail) if args.failing else np.arange(len(table))
    if args.format == "xlsx":
        try:
            sheets = write_xlsx(table, thresholds, args.out, rows)
        except OSError as e:
            raise unwritable(e, args.out) or SourceError(f"{args.out}: cannot write: {e.strerror or e}") from None
        out.print(f"wrote {show(args.out)}: {len(rows):,} rows ({s.failing:,} failing) on "
                  f"{len(sheets)} sheet{'s' if len(sheets) > 1 else ''}", soft_wrap=True)
        return verdict_exit(s, args.fail_on_error)
    if args.format == "json":
        doc, why = show_json(task, s, columns, rows)
        if why:
            err.print(f"accuscope: warning: {printable(why)}", markup=False, soft_wrap=True)
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    else:
        data = [[cell(table.columns[c][i]) for c in columns] for i in rows]
        if args.format == "csv":  # text a spreadsheet would run as a formula neutralised, as in the result CSV
            lines = [columns] + [["" if v is None else v for v in row] for row in data]  # a plugin's column names too
            unsafe = {r: cells for r, row in enumerate(lines) if (cells := formula_cells(row))}
            write_rows(sys.stdout, csv.writer(sys.stdout, lineterminator="\n"), lines, unsafe)
        else:
            def md(v) -> str:
                return "" if v is None else (f"{v:.6g}" if isinstance(v, float) else markdown_text(v))
            sys.stdout.write("| " + " | ".join(map(md, columns)) + " |\n|" + "---|" * len(columns) + "\n")
            sys.stdout.writelines("| " + " | ".join(md(v) for v in row) + " |\n" for row in data)
    return verdict_exit(s, args.fail_on_error)


def _with_reported(table) -> tuple[str, ...]:
    """The default columns, with a dump tool's own figures (RKNN's single cos/euc) and what it measures
    beside them (its euc) before `fail` where the table has them."""
    reported = [k for k in REPORTED if k in table.present]
    beside = [b for k in reported for b in REPORTED_BESIDE.get(METRIC[k].origin, []) if b not in DEFAULT_COLUMNS]
    return (*DEFAULT_COLUMNS[:-2], *dict.fromkeys(beside), *reported, *DEFAULT_COLUMNS[-2:]) if reported \
        else DEFAULT_COLUMNS


def columns_of(task, text: str | None) -> list[str]:
    """The column keys `--columns` names (comma-separated), else the default ones the table has."""
    table = task.table
    columns = [c.strip() for c in text.split(",") if c.strip()] if text else \
        [c for c in (STATS_COLUMNS if _statistics_only(table) else _with_reported(table)) if c in table.columns]
    unknown = [c for c in columns if c not in table.columns]
    if unknown:
        raise SourceError(f"--columns: no column {', '.join(unknown)} in {task.folder}; "
                          f"columns: {', '.join(table.columns)}")
    return columns


def _statistics_only(table) -> bool:
    """Rows compared by their recorded statistics only: no metric of the data is present."""
    return bool(table.present & {"stat_mag", "npu_md5"}) and not (table.present & {"cos", "max_abs"})
