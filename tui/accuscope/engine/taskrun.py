"""Running a comparison into a task folder, the same way for the CLI and the TUI.

The folder's task.json says "running" while it runs, then "done" (with the new result written
atomically), "cancelled" or "failed" (with the error): a previous result stays intact in both.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Callable

from .. import __version__
from . import compare as engine
from .results import ResultTable
from .task import mark_state, save_task, task_path
from .thresholds import Thresholds


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


def spec_meta(spec: engine.CompareSpec) -> dict:
    """What task.json records about the comparison, enough to re-run it."""
    return {"npu": spec.npu, "golden": spec.golden, "model": spec.model, "algorithms": spec.algorithms,
            "range": spec.op_range, "ops": spec.ops, "custom_algorithms": spec.custom_dir,
            "pick": spec.pick, "run": spec.run,
            "golden_shape": list(spec.golden_shape) if spec.golden_shape else None,
            "golden_dtype": str(spec.golden_dtype) if spec.golden_dtype else None,
            "npu_model": spec.npu_model, "golden_model": spec.golden_model, "mapping": spec.mapping,
            "npu_runner": spec.npu_runner, "golden_runner": spec.golden_runner, "iteration": spec.iteration}


def spec_from_meta(meta: dict, thresholds=None, folder: str | Path | None = None, **changes) -> engine.CompareSpec:
    """The inverse of spec_meta, for re-running a task (or part of it: `changes` replace fields,
    e.g. ops=[name]); with `folder`, paths relative to the task folder resolve there."""
    def path(key: str) -> str | None:
        value = meta.get(key)
        resolved = task_path(folder, value) if folder is not None else value
        return str(resolved) if resolved else None
    spec = engine.CompareSpec(path("npu"), path("golden"), path("model"), meta.get("algorithms"),
                              meta.get("range"), meta.get("ops"), path("custom_algorithms"),
                              thresholds if thresholds is not None else Thresholds(),
                              meta.get("pick") or "newest", meta.get("run"),
                              tuple(meta["golden_shape"]) if meta.get("golden_shape") else None,
                              meta.get("golden_dtype"), npu_model=path("npu_model"),
                              golden_model=path("golden_model"), mapping=path("mapping"),
                              npu_runner=meta.get("npu_runner"), golden_runner=meta.get("golden_runner"),
                              iteration=meta.get("iteration") or 0)
    return replace(spec, **changes)


def run_task(spec: engine.CompareSpec, folder: str | Path,
             progress: Callable[[engine.Progress, list], None] | None = None,
             cancel: threading.Event | None = None, workers: int | None = None,
             planned: Callable[[engine.Plan], None] | None = None,
             inline_bytes: int | None = None) -> RunResult:
    """Plan, compare and save into `folder`. SourceError (unusable input) propagates after the
    task is marked failed; `planned(plan)` is called once the pairs are known."""
    result = RunResult()
    start = time.perf_counter()
    mark_state(folder, "running", **spec_meta(spec), tool=f"accuscope {__version__}")
    try:
        plan = result.plan = engine.plan(spec)
        if planned:
            planned(plan)
        t_plan = time.perf_counter()
        result.table = engine.execute(plan, progress, cancel, workers, inline_bytes)
        t_cmp = time.perf_counter()
        if result.table is None:
            mark_state(folder, "cancelled")
            return result
        meta = {**spec_meta(spec), "algorithms": plan.metrics + [p.name for p in plan.plugins],
                "tool": f"accuscope {__version__}", "created": datetime.now().isoformat(timespec="seconds"),
                "problems": [str(p) for p in plan.problems], "state": "done", "error": "",
                "sides": {"npu": plan.npu.kind, "golden": plan.golden.kind}, "coverage": plan.coverage.to_meta()}
        result.csv = save_task(folder, meta, result.table, spec.thresholds, {
            "with_op_sequence": bool(spec.op_range), "npu_is_npy": False,
            "golden_is_npy": plan.golden.kind == "npy"})
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        mark_state(folder, "cancelled" if interrupted else "failed",
                   error="" if interrupted else str(exc) or type(exc).__name__)
        raise
    result.timings = {"open and map": t_plan - start, "compare": t_cmp - t_plan,
                      "write": time.perf_counter() - t_cmp}
    return result
