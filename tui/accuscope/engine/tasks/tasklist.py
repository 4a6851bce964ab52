"""The task browser's list: every task folder and foreign result CSV under a root, newest first, one
`TaskSummary` each (`list_tasks`).

Listing never raises for a broken folder: it becomes an entry with a problem text. Apart from
task.py, which every comparison imports to write its task and never lists (TaskSummary's dataclass
was 4.5M instructions of a one-pair compare's start-up, callgrind).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from accuscope.engine.sources.inputfile import walk
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import (
    CSV_NAME,
    EXPORTS_DIR,
    RESULT_NPZ,
    RETEST_DIR,
    read_task_doc,
    result_csv,
    stale_parts,
)
from accuscope.engine.tasks.taskdoc import TASK_JSON

_MAX_DEPTH = 4  # how deep list_tasks looks under the root (msit: out/{time}/{shape}/result.csv)


@dataclass
class TaskSummary:
    """One line of the task browser."""

    path: Path  # the task folder, or the CSV file for kind "csv"
    kind: str  # "task" or "csv"
    name: str  # path relative to the listed root
    when: float  # seconds since the epoch: creation time, else modification time
    state: str = ""  # one of taskdoc.STATES ("interrupted" derived: recorded running, its process gone)
    rows: int | None = None
    failing: int | None = None
    first_failing_op: str = ""
    npu: str = ""
    golden: str = ""
    error: str = ""  # why the comparison failed (state "failed")
    problem: str = ""  # why the entry cannot be opened as it is; "" when fine
    stale: list[str] = field(default_factory=list)  # see stale_parts
    ranks: int | None = None  # a multi-rank task: how many ranks it holds
    ranks_lost: int = 0  # ... of which not compared (lost worker, unusable input)
    coverage_warnings: list[str] = field(default_factory=list)  # the comparison saw too little (TaskDoc)
    verdict: str = ""  # judgement.verdict's outcome as task.json records it ("" from an older accuscope)


def list_tasks(root: str | os.PathLike) -> list[TaskSummary]:
    """Task folders and foreign result CSVs under root (a few levels deep), newest first."""
    root = Path(root)
    if not root.is_dir():
        raise SourceError(f"{root}: no such folder")
    out: list[TaskSummary] = []
    for folder, dirs, files in _walk(root):
        if TASK_JSON in files:
            out.append(_summarize_task(root, folder))
            out += [_summarize_task(root, t.parent)  # the re-tests of its exports (named by their path)
                    for t in sorted(folder.glob(f"{EXPORTS_DIR}/*/{RETEST_DIR}/{TASK_JSON}"))]
            dirs.clear()  # its CSVs and exports belong to it
            continue
        out += [s for name in files if name.lower().endswith(".csv")
                for s in [_summarize_csv(root, folder / name)] if s is not None]
    return sorted(out, key=lambda s: s.when, reverse=True)


def _walk(root: Path):
    for folder, dirs, files in walk(root, _MAX_DEPTH):
        folder = Path(folder)
        depth = len(folder.relative_to(root).parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if depth < _MAX_DEPTH else []
        yield folder, dirs, files


def _summarize_task(root: Path, folder: Path) -> TaskSummary:
    name = str(folder.relative_to(root)) if folder != root else folder.name
    summary = TaskSummary(folder, "task", name, _mtime(folder / TASK_JSON))
    try:
        doc = read_task_doc(folder)
    except SourceError as e:
        summary.problem = str(e).replace(f"{folder / TASK_JSON}: ", f"{TASK_JSON}: ")
        return summary
    summary.when = _parse_time(doc.created, summary.when)
    summary.state = doc.state
    summary.stale = stale_parts(folder, doc)
    summary.rows, summary.failing = doc.rows, doc.failing
    summary.first_failing_op = doc.first_failing_op
    summary.npu, summary.golden = (str(doc.path(side, folder) or "") for side in ("npu", "golden"))
    summary.error = doc.error
    summary.coverage_warnings = doc.coverage_warnings
    summary.verdict = doc.verdict
    if doc.multirank and "ranks" in doc:
        states = [r.get("state") for r in doc.ranks.values() if isinstance(r, dict)]
        summary.ranks, summary.ranks_lost = len(states), sum(1 for s in states if s != "done")
    has_result = ((folder / RESULT_NPZ).exists() or result_csv(folder, doc.csv) is not None
                  or doc.columnar)
    if not has_result and summary.state in ("done", ""):
        summary.problem = f"no result file ({RESULT_NPZ} or result_*.csv)"
    return summary


def _summarize_csv(root: Path, path: Path) -> TaskSummary | None:
    """A CSV whose first line is a result header; None for any other CSV (and for what is not a regular
    file: a named pipe would block the listing for ever)."""
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as f:
            first = f.readline(65536).decode("utf-8", "replace")
    except OSError:
        return None
    if "NPUDump" not in first or "TensorIndex" not in first:
        return None
    match = CSV_NAME.match(path.name)
    when = _mtime(path)
    if match:
        when = _parse_time(match.group(1), when)
    return TaskSummary(path, "csv", str(path.relative_to(root)), when)


def _parse_time(text, default: float) -> float:
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y%m%d%H%M%S"):
        try:
            return datetime.strptime(str(text)[:19], fmt).timestamp()
        except ValueError:
            continue
    return default


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return time.time()

