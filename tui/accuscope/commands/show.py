"""`accuscope show TASK_DIR --format json|csv|md`: a task's result where scripts and issue trackers want it."""
from __future__ import annotations

import csv
import json
import math
import sys

import numpy as np

from ..engine.compare.columns import BRIEF
from ..engine.compare.summary import summarize
from ..engine.sources.names import printable
from ..engine.sources.tensor import SourceError
from ..engine.tasks.task import coverage_warnings, load_task
from ..exitcode import ExitCode

DEFAULT_COLUMNS = ("index", "npu_op", "type", "tensor", "golden_op", *BRIEF, "fail", "reason")


def register(sub) -> None:
    p = sub.add_parser("show", help="print a task's rows as JSON, CSV or a Markdown table",
                       description="Print a task's result for scripts, CI jobs and issue trackers: JSON (one object "
                                   "with stable keys: task, state, rows, failing, first_failing, coverage, "
                                   "warnings, columns, data), CSV, or a Markdown table. Exit 0: shown; 1 with "
                                   "--fail-on-error when rows fail or the comparison saw too little; 2: unusable "
                                   "task or column.")
    p.add_argument("task", metavar="TASK_DIR")
    p.add_argument("--format", choices=("json", "csv", "md"), default="json")
    p.add_argument("--failing", action="store_true", help="only the rows that break a threshold")
    p.add_argument("--columns", help="comma-separated column keys (default: " + ",".join(DEFAULT_COLUMNS) + ")")
    p.add_argument("--fail-on-error", action="store_true", help="exit 1 when rows fail or coverage warns")
    p.set_defaults(handler=run)


def _cell(value):
    """A JSON-safe cell: NaN and inf become null, numpy scalars plain numbers, names printable."""
    if isinstance(value, (np.generic,)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return printable(value) if isinstance(value, str) else value


def run(args) -> int:
    task = load_task(args.task)
    table = task.table
    known = list(table.columns)
    columns = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else \
        [c for c in DEFAULT_COLUMNS if c in table.columns]
    unknown = [c for c in columns if c not in table.columns]
    if unknown:
        raise SourceError(f"--columns: no column {', '.join(unknown)} in {args.task}; columns: {', '.join(known)}")
    s = summarize(table, task.thresholds)
    rows = np.flatnonzero(task.thresholds.evaluate(table).fail) if args.failing else np.arange(len(table))
    data = [[_cell(table.columns[c][i]) for c in columns] for i in rows]
    warnings = coverage_warnings(task.meta)
    if args.format == "json":
        first = table.row(s.first_failing) if s.first_failing is not None else None
        doc = {"task": str(task.folder), "state": task.info.state, "rows": s.rows,
               "failing": s.failing, "not_compared": s.not_compared,
               "first_failing": None if first is None else {
                   "row": int(s.first_failing), "op": _cell(first["npu_op"]), "tensor": _cell(first["tensor"]),
                   "broken": s.broken},
               "coverage": task.meta.get("coverage"), "warnings": warnings, "columns": columns, "data": data}
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    elif args.format == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([["" if v is None else v for v in row] for row in data])
    else:
        def md(v) -> str:
            text = "" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v))
            return text.replace("|", "\\|")
        sys.stdout.write("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n")
        sys.stdout.writelines("| " + " | ".join(md(v) for v in row) + " |\n" for row in data)
    if args.fail_on_error and (s.failing or warnings):
        return ExitCode.FINDINGS
    return ExitCode.OK
