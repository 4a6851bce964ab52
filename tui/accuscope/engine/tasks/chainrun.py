"""A chain of sides run into one task folder: today's pair comparisons, composed (compare/chain.py judges).

    TASK/                      the last stage against the reference: an ordinary task (every surface
                               opens it), its task.json's `chain` naming the stages and the chain's judgement
    TASK/stages/LABEL/         each other stage against the reference
    TASK/steps/LABEL/          a stage against the stage before it (the new release against the baseline)

Each comparison is `taskrun.run_task` with the chain's spec, the stage as the NPU side (a step: the
stage before as the golden side, read with the NPU side's options). A step is run only for a stage
that fails somewhere against the reference, and over the ops that fail there (`--ops`): an op that
agrees with the reference cannot be where the error enters, so a passing chain costs one comparison
per stage and a failing one little more (benchmarks/bench_chain.py). A step that cannot run (its ops
not found in the stage before, say) is a problem of the chain, not its end: the entry is then decided
on the errors against the reference alone.

Stages are given as `LABEL=PATH` or `PATH` (labelled by its file name); a tpu-mlir work folder given
alone is its stages (sources/tpumlir.work_stages: top, tpu, bmodel).
"""
# lazy: engine.compare.chainview, engine.sources.sniffs, engine.sources.tpumlir, engine.tasks.task
from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from accuscope.engine.compare.chain import ChainJudgement, StageTables, failing_ops, judge_chain
from accuscope.engine.compare.spec import CompareSpec
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import CHAIN_DIRS, check_task_folder
from accuscope.engine.tasks.taskdoc import mark_state
from accuscope.engine.tasks.taskrun import RunResult, run_task

if TYPE_CHECKING:
    from accuscope.engine.compare.chainview import ChainView
    from accuscope.engine.tasks.task import Task

STAGES_DIR, STEPS_DIR = CHAIN_DIRS
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
REFERENCE = "reference"  # no stage may take the reference's name


class Stage(NamedTuple):
    """One candidate of a chain: its label (a folder name: its sub-tasks are named by it) and its side."""

    label: str
    path: str


@dataclass
class ChainRun:
    """What run_chain did: each stage's comparison with the reference, the steps run (label -> result),
    the problems met on the way, and the judgement (None: cancelled)."""

    stages: list[Stage]
    against_reference: dict[str, RunResult] = field(default_factory=dict)
    steps: dict[str, RunResult] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    judgement: ChainJudgement | None = None
    baseline: str | None = None


def parse_stages(values: list[str]) -> list[Stage]:
    """The stages `--npu` names, in order: `LABEL=PATH` (where PATH exists and the whole text does not),
    or PATH, labelled by its file name without extension (numbered -2, -3 where a name comes again); a
    tpu-mlir work folder alone is expanded into its stages. SourceError for a label that is not a name, a
    label given twice, or a path not there."""
    from accuscope.engine.sources.sniffs import tpumlir_work_folder
    stages: list[Stage] = []
    given: set[str] = set()  # labels the user gave: one given twice is an error, a file name twice is numbered
    for text in values:
        label, path = "", text
        head, eq, tail = text.partition("=")
        if eq and _LABEL.fullmatch(head) and not os.path.exists(text):
            label, path = head, tail
        elif eq and not os.path.exists(text) and os.path.exists(tail):
            raise SourceError(f"--npu {text}: the label {head!r} is not a name (letters, digits, _ . + -)")
        if not os.path.exists(path):
            raise SourceError(f"--npu {path}: no such file or folder")
        expanded = []
        if not label and tpumlir_work_folder(path):
            from accuscope.engine.sources.tpumlir import work_stages  # a work folder's names only
            expanded = work_stages(path)
        if expanded:
            stages += [Stage(name, p) for name, p in expanded]
            continue
        if label:
            given.add(label)
        stages.append(Stage(label or _label_of(path), path))
    seen: set[str] = set()
    for k, s in enumerate(stages):
        if s.label in seen and s.label not in given:  # two files of one name (two releases' model.onnx)
            n = 2
            while f"{s.label}-{n}" in seen or f"{s.label}-{n}" in given:
                n += 1
            s = stages[k] = s._replace(label=f"{s.label}-{n}")
        if s.label in seen or s.label == REFERENCE:
            raise SourceError(f"--npu {s.path}: the label {s.label!r} names another stage"
                              + (" (the reference's)" if s.label == REFERENCE else "") + ": give each LABEL=PATH")
        seen.add(s.label)
    return stages


def _label_of(path: str) -> str:
    name = os.path.basename(os.path.normpath(path))
    if not os.path.isdir(path):
        name = os.path.splitext(name)[0]  # model.onnx, outputs.npz: their names
    name = re.sub(r"[^A-Za-z0-9_.+-]", "_", name).lstrip("._+-") or "stage"
    return name[:64]


def is_chain(stages: list[Stage], baseline: str | None) -> bool:
    """Whether `--npu` named a chain (several stages, a baseline, or a work folder) rather than one side."""
    return len(stages) > 1 or baseline is not None


def baseline_label(stages: list[Stage], baseline: str | None) -> str | None:
    """The stage `--baseline` names, by label or path; SourceError when it names none, or the chain has no
    other stage to compare it with."""
    if baseline is None:
        return None
    for s in stages:
        if baseline == s.label or (os.path.exists(baseline) and os.path.exists(s.path)
                                   and os.path.samefile(baseline, s.path)):
            if len(stages) < 2:
                raise SourceError(f"--baseline {baseline}: give the new release beside it (another --npu)")
            return s.label
    raise SourceError(f"--baseline {baseline}: names none of the stages ({', '.join(s.label for s in stages)}); "
                      "give it as --npu too, or name its label")


def own_stage(stages: list[Stage], baseline: str | None) -> str:
    """The stage whose comparison with the reference is the chain folder's own result: the last, or with a
    baseline the new release (the last stage that is not the baseline)."""
    return stages[-1].label if stages[-1].label != baseline else stages[-2].label


def run_chain(spec: CompareSpec, stages: list[Stage], folder: str | Path, *, baseline: str | None = None,
              workers: int | None = None, cancel: threading.Event | None = None,
              compared: Callable[[str, str, RunResult], None] | None = None) -> ChainRun:
    """Every comparison of the chain (see the module's text) into `folder`, then its judgement, kept in
    task.json's `chain`. `spec`: the chain's (its `npu` the last stage); `compared(label, against,
    result)` after each comparison (`against`: "reference" or the stage before). Errors as
    taskrun.run_task (the first comparison's SourceError before anything is written)."""
    folder = Path(folder)
    fresh = not check_task_folder(folder)  # a folder of other things: refused before a sub-task is made in it
    run = ChainRun(stages, baseline=baseline)
    last = own_stage(stages, baseline)
    if baseline is not None:  # the new release's step is against its baseline, whatever stands between
        before = {s.label: baseline if s.label == last else "" for s in stages}
    else:
        before = {s.label: stages[k - 1].label if k else "" for k, s in enumerate(stages)}
    by_label = {s.label: s for s in stages}
    order = [s for s in stages if s.label != last] + [by_label[last]]
    for s in order:  # the others first: the chain folder's own result comes last, as the chain is judged
        where = folder if s.label == last else folder / STAGES_DIR / s.label
        try:
            result = run_task(replace(spec, npu=s.path), where, cancel=cancel, workers=workers)
        except SourceError as exc:
            if fresh:  # unusable input leaves nothing: the sub-tasks this run made go with it
                for sub in (STAGES_DIR, STEPS_DIR):
                    shutil.rmtree(folder / sub, ignore_errors=True)
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()
            raise SourceError(f"stage {s.label} against the reference: {exc}") from None
        if result.table is None:
            return run
        run.against_reference[s.label] = result
        if compared:
            compared(s.label, REFERENCE, result)
    tables = {}
    for s in stages:
        ended = run.against_reference[s.label].compared
        assert ended is not None  # a cancelled stage ended the chain above
        plan, table = ended
        tables[s.label] = StageTables(s.label, table, plan.coverage.basis, None, before[s.label])
    for s in stages:
        b = before[s.label]
        step_dir = folder / STEPS_DIR / s.label
        ops = _failing_ops(tables[s.label], spec) if b else []
        if not ops:
            shutil.rmtree(step_dir, ignore_errors=True)  # an earlier run's step, no longer run
            continue
        step_spec = replace(spec, npu=s.path, golden=by_label[b].path, golden_options=spec.npu_options,
                            golden_model=spec.npu_model, golden_runner=spec.npu_runner, mapping=None,
                            expected=None, ops=ops, op_range=None, golden_shape=None, golden_dtype=None)
        try:
            result = run_task(step_spec, step_dir, cancel=cancel, workers=workers)
        except SourceError as exc:
            run.problems.append(f"{s.label} against {b}: {exc}")
            continue
        if result.table is None:
            return run
        run.steps[s.label] = result
        tables[s.label] = replace(tables[s.label], step=result.table)
        if compared:
            compared(s.label, b, result)
    _drop_stale(folder, set(by_label))
    run.judgement = judge_chain([tables[s.label] for s in stages], spec.thresholds, baseline)
    mark_state(folder, "done", chain=chain_meta(run))
    return run


def _failing_ops(stage: StageTables, spec: CompareSpec) -> list[str]:
    """The ops of the stage's failing rows against the reference (those the user's --ops keeps)."""
    ops = failing_ops(stage.table, spec.thresholds)
    return [o for o in ops if o in set(spec.ops)] if spec.ops else ops


def _drop_stale(folder: Path, labels: set[str]) -> None:
    """Sub-tasks of stages the chain no longer has (an earlier run's), so that the folder says one chain."""
    for sub in (STAGES_DIR, STEPS_DIR):
        base = folder / sub
        if not base.is_dir() or base.is_symlink():
            continue
        for old in base.iterdir():
            if old.name not in labels and old.is_dir() and not old.is_symlink() and (old / "task.json").exists():
                shutil.rmtree(old, ignore_errors=True)


def sub_tasks(run: ChainRun, label: str) -> tuple[str, str | None]:
    """The stage's comparisons as folders relative to the chain task: against the reference ("." for the
    chain folder's own), and its step against the stage before (None where no step ran)."""
    own = own_stage(run.stages, run.baseline)
    return ("." if label == own else f"{STAGES_DIR}/{label}", f"{STEPS_DIR}/{label}" if label in run.steps else None)


def chain_meta(run: ChainRun) -> dict:
    """task.json's `chain`: the stages in order (label, path, their sub-tasks relative to the chain
    task, each one's verdict), the baseline, and the judgement (verdict, line, entered, regressions)."""
    j = run.judgement
    assert j is not None
    by_label = {s.label: s for s in j.stages}
    stages = []
    for s in run.stages:
        task, step = sub_tasks(run, s.label)
        sj = by_label[s.label]
        stages.append({"label": s.label, "path": os.path.abspath(s.path), "task": task, "step": step,
                       "before": sj.before or None, "verdict": sj.verdict.outcome, "failing": sj.failing,
                       "own": len(sj.own)})
    return {"stages": stages, "baseline": j.baseline, "now": j.now, "verdict": j.outcome, "line": j.line(),
            "entered": j.entered.to_dict() if j.entered is not None else None,
            "regressions": [c.to_dict() for c in j.regressions[:100]],
            "improvements": [c.to_dict() for c in j.improvements[:100]], "problems": run.problems}


def chain_view(task: Task) -> ChainView | None:
    """A chain task's stages op by op (compare/chainview.py), judged again under the task's thresholds (as
    edited, saved or not) from its sub-tasks; None for a task that is not a chain. SourceError when a
    sub-task cannot be read."""
    from accuscope.engine.compare.chainview import ChainView
    from accuscope.engine.tasks.task import load_task
    chain = task.doc.chain or {}
    stages = [st for st in chain.get("stages") or [] if isinstance(st, dict) and isinstance(st.get("label"), str)]
    if not stages:
        return None
    tables, own = [], None
    for k, st in enumerate(stages):
        where, step = st.get("task"), st.get("step")
        sub = task if where == "." else load_task(inside(task.folder, where))
        step_table = load_task(inside(task.folder, step)).result[0] if step else None
        tables.append(StageTables(st["label"], sub.result[0], sub.basis, step_table, str(st.get("before") or "")))
        own = k if where == "." else own
    if own is None:
        return None
    baseline = chain.get("baseline") if isinstance(chain.get("baseline"), str) else None
    thresholds = task.result[1]
    return ChainView(tables, judge_chain(tables, thresholds, baseline), own, thresholds)


def entered_column(task: Task) -> list[str] | None:
    """Per row of a chain task's own table (the folder's result): the stage where that row's error entered
    ("" where none), judged under the task's thresholds (chain_view); None for a task that is not a chain."""
    view = chain_view(task)
    return view.entered() if view is not None else None


def inside(folder: Path, rel: object) -> Path:
    """A sub-task's folder as task.json names it, held inside the chain task (a path elsewhere: SourceError)."""
    if not isinstance(rel, str) or Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise SourceError(f"{folder}: task.json's chain names {rel!r}, not a sub-task of the folder")
    return folder / rel

