"""Running a comparison into a task folder, the same way for the CLI and the TUI.

Unusable input changes nothing on disk: the comparison is planned and the folder checked (a file,
or a non-empty folder that is not a task, is refused) before the folder is created or touched.
Then the run holds the task's lock (a second run into the folder is refused), task.json says
"running" with the pid and host, and ends "done" (the new result committed atomically, see
task.save_task), "cancelled" or "failed" (with the error); a previous result stays intact in both,
and task.json keeps describing it: the inputs of a run that did not finish are kept under
`attempt`, never over the inputs of the result in the folder. A folder that cannot be written (full
disk, read-only, no permission, name too long) is a SourceError naming the path.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from accuscope import __version__
from accuscope.engine.compare import comparison as engine
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import (
    TASK_JSON,
    TaskLock,
    check_task_folder,
    create_task_folder,
    has_result,
    save_task,
    unwritable,
)
from accuscope.engine.tasks.taskdoc import mark_state, spec_fields


@dataclass
class RunResult:
    plan: engine.Plan | None = None
    table: ResultTable | None = None  # None: cancelled
    csv: Path | None = None
    timings: dict[str, float] = field(default_factory=dict)  # part -> seconds

    @property
    def slowest(self) -> tuple[str, float]:
        part = max(self.timings, key=self.timings.get)
        return part, self.timings[part]


def run_task(spec: engine.CompareSpec, folder: str | Path,
             progress: Callable[[engine.Progress, list], None] | None = None,
             cancel: threading.Event | None = None, workers: int | None = None,
             planned: Callable[[engine.Plan], None] | None = None,
             inline_bytes: int | None = None) -> RunResult:
    """Plan, compare and save into `folder`. SourceError for unusable input (nothing written), a
    folder that cannot hold the task, or a task another run holds; `planned(plan)` is called once
    the pairs are known. KeyboardInterrupt (Ctrl+C, SIGTERM) marks the task cancelled and propagates."""
    folder, result = Path(folder), RunResult()
    start = time.perf_counter()
    lock = TaskLock(folder)
    started = existing = False
    try:
        if check_task_folder(folder):
            lock.acquire()  # before planning: a second run is refused at once
            existing = (folder / TASK_JSON).exists()
        plan = result.plan = engine.plan(spec)
        create_task_folder(folder)
        lock.acquire()
        if planned:
            planned(plan)
        fields = spec_fields(spec, folder)
        mark_state(folder, "running", error="", tool=f"accuscope {__version__}",
                   started=datetime.now().isoformat(timespec="seconds"),
                   **({"attempt": fields} if has_result(folder) else fields))
        started = True
        t_plan = time.perf_counter()
        result.table = engine.execute(plan, progress, cancel, workers, inline_bytes)
        t_cmp = time.perf_counter()
        if result.table is None:
            mark_state(folder, "cancelled")
            return result
        meta = {**fields, "algorithms": plan.metrics + [p.name for p in plan.plugins],
                "tool": f"accuscope {__version__}", "created": datetime.now().isoformat(timespec="seconds"),
                "problems": [str(p) for p in plan.problems], "state": "done", "error": "",
                "sides": {"npu": plan.npu.kind, "golden": plan.golden.kind}, "coverage": plan.coverage.to_meta()}
        result.csv = save_task(folder, meta, result.table, spec.thresholds, {
            "with_op_sequence": bool(spec.op_range), "npu_is_npy": False,
            "golden_is_npy": plan.golden.kind == "npy"})
    except BaseException as exc:
        place = unwritable(exc, folder)
        try:
            if started:
                interrupted = isinstance(exc, KeyboardInterrupt)
                mark_state(folder, "cancelled" if interrupted else "failed",
                           error="" if interrupted else str(place or exc) or type(exc).__name__)
            elif existing and isinstance(exc, SourceError) and not has_result(folder):
                mark_state(folder, "failed", error=str(exc), **spec_fields(spec, folder))  # a task made ready by its caller
        except OSError:
            pass  # the folder cannot take even that: task.json says running, read as interrupted
        if place is not None:
            raise place from None
        raise
    finally:
        lock.release()
    result.timings = {"open and map": t_plan - start, "compare": t_cmp - t_plan,
                      "write": time.perf_counter() - t_cmp}
    return result
