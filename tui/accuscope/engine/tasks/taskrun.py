"""Running a comparison into a task folder, the same way for the CLI and the TUI.

`run_comparison` is the entry point: it picks the path (`ranked`): two rank trees (or --cluster) go
rank by rank through tasks/rankrun.py (each rank statistics-as-columns where compare/statcolumns.py
applies), anything else is one comparison (`run_task`). Both write through tasks/taskwriter.py.

Unusable input changes nothing on disk: the comparison is planned and the folder checked (a file,
or a non-empty folder that is not a task, is refused) before the folder is created or touched.
Then the run holds the task's lock (a second run into the folder is refused), task.json says
"running" with the pid and host, and ends "done" (the new result committed atomically, see
tasks/taskwriter.py), "cancelled" or "failed" (with the error); a previous result stays intact in both,
and task.json keeps describing it: the inputs of a run that did not finish are kept under
`attempt`, never over the inputs of the result in the folder. A folder that cannot be written (full
disk, read-only, no permission, name too long) is a SourceError naming the path.
"""
# lazy: engine.compare.statcolumns, engine.sources.ranks, engine.sources.sniffs, engine.tasks.rankrun
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Union

from accuscope import __version__
from accuscope.engine.compare import comparison as engine
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.progress import OnProgress
from accuscope.engine.sources import kinds
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import (
    TASK_JSON,
    TaskLock,
    check_task_folder,
    create_task_folder,
    has_result,
    unwritable,
)
from accuscope.engine.tasks.taskdoc import mark_state, spec_fields
from accuscope.engine.tasks.taskwriter import write_result

if TYPE_CHECKING:
    from accuscope.engine.compare.multirank import RankResult
    from accuscope.engine.tasks.rankrun import RanksRun


@dataclass
class RunResult:
    plan: engine.Plan | None = None
    table: ResultTable | None = None  # None: cancelled
    csv: Path | None = None
    timings: dict[str, float] = field(default_factory=dict)  # part -> seconds

    @property
    def slowest(self) -> tuple[str, float]:
        part = max(self.timings, key=lambda k: self.timings[k])
        return part, self.timings[part]

    @property
    def compared(self) -> tuple[engine.Plan, ResultTable] | None:
        """(plan, table) of a comparison that ran to its end; None when it was cancelled."""
        if self.table is None:
            return None
        assert self.plan is not None  # run_comparison plans before it computes the table
        return self.plan, self.table


Outcome = Union[RunResult, "RanksRun"]  # what run_comparison returns: one comparison's, or the ranks'


def ranked(spec: CompareSpec, cluster: str | None = None, one_source: bool = False) -> bool:
    """The comparison runs rank by rank (rankrun): on a cluster, or two rank trees (`one_source`: both
    sides are one file, never ranks): every rank, or the ranks --step/--rank pick when only their
    dump.json are compared (statistics: the ranks' columnar path, 10x the general one; a tensor
    comparison of one picked rank stays a task of its own, dumps re-runnable), or several when --step
    or --rank alone picks several.
    Asked on every run, so it imports no more than the trees' search (sources.ranks): the ranks'
    pool (compare.multirank, its RankResult) comes with the first rank tree."""
    if cluster:
        return True
    if one_source or spec.shards:  # shards: the ranks are merged into one run (compare/shards.py)
        return False
    from accuscope.engine.sources.ranks import numbers, pair_ranks, pick
    leaves = pair_ranks(spec.npu, spec.golden)[0]
    if not leaves:
        return False
    if not spec.rank and not spec.step:
        return True
    try:
        picked = pick(leaves, numbers(spec.rank), numbers(spec.step))
    except SourceError:
        return False  # a pick the ranks' numbers cannot say (proc folders by name): the general path
    from accuscope.engine.compare import statcolumns
    from accuscope.engine.sources.sniffs import MSPROBE_DATA
    tensor_files = any(os.path.isdir(os.path.join(side, leaf.rel, MSPROBE_DATA))
                       for leaf in picked for side in (spec.npu, spec.golden))
    if len(picked) > 1:  # --step alone (or --rank alone) picks several ranks: compared rank by rank
        return True
    return bool(picked) and statcolumns.applies(spec) and (spec.stats_only or not tensor_files)


def run_comparison(spec: CompareSpec, folder: str | Path, *, workers: int | None = None,
                   cancel: threading.Event | None = None, cluster: str | None = None,
                   one_source: bool = False,
                   progress: OnProgress | None = None,
                   planned: Callable[[engine.Plan], None] | None = None,
                   rows: engine.OnRows | None = None,
                   ranks_planned: Callable[[RanksRun], None] | None = None,
                   rank_done: Callable[[RankResult], None] | None = None,
                   inline_bytes: int | None = None, by_rank: bool | None = None) -> Outcome:
    """Run the comparison `spec` into the task `folder` on the path it calls for (`ranked`): a
    RanksRun (`ranks_planned` once the ranks are known, `rank_done` as each lands, `progress`
    counting ranks) or a RunResult (`planned`, `rows`, `progress` counting pairs; see run_task).
    Errors as run_task and rankrun.run_ranks. `by_rank`: what `ranked` said, when the caller has asked
    it already (it lists both sides' folders)."""
    if ranked(spec, cluster, one_source) if by_rank is None else by_rank:
        from accuscope.engine.tasks.rankrun import run_ranks  # the ranks' pool and cluster: rank trees only
        return run_ranks(spec, folder, cluster, workers, None, None, progress, cancel, ranks_planned,
                         rank_done=rank_done)
    return run_task(spec, folder, progress, cancel, workers, planned, inline_bytes, rows=rows)


def run_task(spec: CompareSpec, folder: str | Path,
             progress: OnProgress | None = None,
             cancel: threading.Event | None = None, workers: int | None = None,
             planned: Callable[[engine.Plan], None] | None = None,
             inline_bytes: int | None = None, *, rows: engine.OnRows | None = None) -> RunResult:
    """Plan, compare and save into `folder`. SourceError for unusable input (nothing written), a
    folder that cannot hold the task, or a task another run holds; `planned(plan)` is called once
    the pairs are known, then `rows` and `progress` as comparison.execute calls them.
    KeyboardInterrupt (Ctrl+C, SIGTERM) marks the task cancelled and propagates."""
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
        result.table = engine.execute(plan, progress, cancel, workers, inline_bytes, rows=rows)
        t_cmp = time.perf_counter()
        if result.table is None:
            mark_state(folder, "cancelled")
            return result
        meta = {**fields, "algorithms": plan.metrics + [p.name for p in plan.plugins],
                "tool": f"accuscope {__version__}", "created": datetime.now().isoformat(timespec="seconds"),
                "problems": [str(p) for p in plan.problems], "state": "done", "error": "",
                **plan.sides_fields(), "coverage": plan.coverage.to_meta()}
        result.csv = write_result(folder, meta, result.table, spec.thresholds, {
            "with_op_sequence": bool(spec.op_range), "npu_is_npy": False,
            "golden_is_npy": plan.golden.kind in (kinds.NPY, kinds.PT)}).csv
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
