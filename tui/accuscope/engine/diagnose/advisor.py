"""The advisor: from a table of red rows to the operator that introduced the error, and why.

After the first bad operator every op downstream inherits its error, so a list of failing rows
does not say where to look. The advisor reads a finished task and answers that:

- MindStudio's expert rules (metrics.md section 5), first match wins: float16 overflow, network
  input inconsistent, then the global verdict (everything passes / the network output fails /
  only local deviations), judged on the model's real outputs (the `is_output` rows, from
  `attr_model_out_nodes_name` or the ONNX graph outputs), not on the last row.
- Introduced or inherited, per failing op: the framework op (the chain of fused framework ops for
  a fused device op) is re-run on the NPU side's own inputs (`oprerun`); when that reproduces the
  NPU output, the error came with the inputs, otherwise the op made it. Without a framework model
  the op's output error is compared with its inputs' errors instead (a weaker method: ops that
  amplify errors, like Softmax or a division by small numbers, get blamed).
- Which one to fix: the op whose own error, alone, takes the outputs furthest (`reach`: the reference
  model run with only that error injected), whatever metric its row breaks. When the outputs fail
  and no introduced op explains half their error, passing ops are re-run too (those whose error grows
  the most, a bounded number) with ops that break only mean_rel or reproduce a failing row: a small
  error of their own may grow downstream into the failure, and their reach says whether it did.
- NaN/inf origin: the first op whose output holds NaN/inf while its inputs do not.
- Preprocessing diagnosis when the network inputs disagree (`preprocess`).

The rules are objects, one module each, in `diagnose/rules/` (registry.RULES: their order, and
why); this module gathers the facts they read into a `Context`, runs them, and assembles the advice.
The result is `advice.json` in the task folder (written atomically) and an `Advice` object for the
TUI: findings to show and jump to (table row, op), and per-op origins for a table column.
Re-run results are cached in advice.json under a key made of the files they depend on, so advising
again (new thresholds, reopening the task) re-runs nothing that did not change.
"""
# lazy: engine.diagnose.chainadvice, engine.diagnose.oprerun
from __future__ import annotations

import os
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from accuscope.engine.diagnose import firstdiff
from accuscope.engine.diagnose.advice import (
    ADVICE_JSON,
    Advice,
    OpOrigin,
    fingerprint,
    save_advice,
    saved_advice,
)
from accuscope.engine.diagnose.rules import registry
from accuscope.engine.diagnose.rules.context import Context
from accuscope.engine.diagnose.rules.introduced import model_changes
from accuscope.engine.diagnose.rules.mindstudio import overflow_scan
from accuscope.engine.diagnose.rules.origins import effect, find_origins, previous_reruns
from accuscope.engine.diagnose.rules.rule import run_rules
from accuscope.engine.diagnose.rules.verdict import in_light_of_verdict
from accuscope.engine.diagnose.rules.verify import verified
from accuscope.engine.progress import OnProgress
from accuscope.engine.sources.inputfile import user_path
from accuscope.engine.sources.tensor import SourceError, TensorError
from accuscope.engine.tasks.task import Task, load_task

if TYPE_CHECKING:
    from accuscope.engine.sides.side import Side


def current_advice(task: Task, progress: OnProgress | None = None) -> Advice:
    """The task's saved advice when it was made for this result and these thresholds, else fresh
    advice (written to advice.json). SourceError when the task cannot be advised on."""
    advice = saved_advice(task.folder, task.doc, task.thresholds) or advise(task, progress=progress)
    if advice is None:  # advise returns None only when cancelled, and nothing cancels it here
        raise SourceError(f"{task.folder}: advising was cancelled")
    return advice


def advise(task_folder: str | os.PathLike | Task, framework_model: str | os.PathLike | None = None,
           progress: OnProgress | None = None, cancel: threading.Event | None = None,
           workers: int | None = None, write: bool = True, verify: int = 0, chain: bool = True) -> Advice | None:
    """Advise on a finished task (a folder, or a Task already opened: its plan is reused); writes
    `advice.json` into the task folder (unless write=False).

    `framework_model`: the framework ONNX model to re-run ops from (default: found through
    task.json, see Task.framework_model). SourceError for an unusable task folder or a given
    framework model that cannot be read. Returns None when `cancel` was set (nothing written).
    `verify`: how many top-ranked ops to verify by converting the model again without each
    (diagnose.replay), when the outputs fail; 0: the ranking stays estimated.
    A chain task (docs/chain.md) is advised from the stage where its error enters (diagnose.chainadvice);
    `chain=False`: on its own comparison alone, as any task.
    """
    start = time.perf_counter()
    task = task_folder if isinstance(task_folder, Task) else load_task(task_folder)
    if chain and task.doc.chain:
        from accuscope.engine.diagnose.chainadvice import advise_chain
        chained = advise_chain(task, lambda sub, written: advise(
            sub, framework_model, progress, cancel, workers, written, verify, chain=False), write)
        if chained is not None or (cancel is not None and cancel.is_set()):
            return chained
    if not len(task.result[0]):
        raise SourceError(f"{task.folder}: the task has no result rows to advise on")
    run = Context(task, progress, cancel, workers)
    run.say("opening the dumps")
    t0 = time.perf_counter()
    fw, fw_path, fw_source = None, None, ""
    if framework_model is not None:
        fw_path, fw_source = Path(user_path(framework_model, "framework model file")), "given"
    elif task.framework_model[0] is not None and task.framework_model[0].suffix.lower() == ".onnx":
        fw_path, fw_source = task.framework_model  # ops are re-run with onnxruntime
    failing_outputs = bool((run.fail & (run.c["io"] == "output")).any())
    if fw_path is not None and (failing_outputs or fw_source == "given"):
        from accuscope.engine.diagnose.oprerun import FrameworkModel
        try:
            fw = FrameworkModel(fw_path)
        except SourceError as exc:
            if fw_source == "given":
                raise
            run.notes.append(f"framework model {fw_path} ({fw_source}) unusable: {exc}")
    run.fw_path = fw_path if fw is not None else None
    run.fw = fw
    run.fw_found = fw_path
    run.timings["framework model"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    run.open_sources()
    if fw is not None and run.plan is not None and fw.has_if():  # the ops inside, as the golden dump ran them
        golden = run.plan.golden
        fw.expand(lambda names: _golden_arrays(golden, names))
        if fw.expansion is not None and fw.expansion.taken:
            run.notes.append(f"the framework model's If nodes were expanded as the golden dump took them "
                             f"({len(fw.expansion.taken)} branches)")
    run.timings["open"] = time.perf_counter() - t0
    if run.cancelled:
        return None

    # the facts every rule may read (rules.context.FACTS), gathered before the first one runs
    run.net_inputs = run.network_input_rows()
    t0 = time.perf_counter()
    run.overflow = overflow_scan(run)
    run.timings["overflow scan"] = time.perf_counter() - t0
    if run.cancelled:
        return None
    t0 = time.perf_counter()
    origins = find_origins(run, fw if run.plan is not None else None, previous_reruns(task.folder))
    run.timings["origins"] = time.perf_counter() - t0
    if run.cancelled or origins is None:
        return None
    run.origins = origins
    t0 = time.perf_counter()
    # several ranks hold the same op names: which op introduced the error is first_call's, rank by rank
    run.one_run = len(firstdiff.groups(run.table)) == 1
    # the rules in their stated order (rules.registry), then every finding read in the light of the verdict
    findings = in_light_of_verdict(run, run_rules(run, registry.RULES))
    run.timings["rules"] = time.perf_counter() - t0
    findings = verified(run, findings, origins, verify)
    registry.sort_findings(run, findings)
    advice = Advice(task.folder, findings, origins, run.method, str(fw_path) if fw is not None else "",
                    fw_source if fw is not None else "", run.notes,
                    {**fingerprint(task.doc, task.thresholds), "rows": run.n},
                    datetime.now().isoformat(timespec="seconds"), time.perf_counter() - start, run.timings)
    if write:
        try:
            save_advice(advice)
            advice.written = True
        except OSError as exc:
            advice.notes.append(f"could not write {ADVICE_JSON} into {task.folder}: {exc.strerror or exc}")
    return advice


def _golden_arrays(golden: Side, names: list[str]) -> dict[str, np.ndarray]:
    """The golden dump's values of these framework tensors (those it holds)."""
    out = {}
    for name in names:
        t = golden.find_tensor(name)
        if t is not None and not t.problem:
            try:
                out[name] = np.asarray(t.load())
            except (TensorError, OSError, ValueError):
                continue
    return out


class OpMeasure:
    """The advisor's measures of one advised op, for readers of an Advice (the sensitivity ranking):
    `effect` (the op's own error, as the advisor ranks by) and `changes` (what the conversion changed
    in it, when both ONNX models are at hand; opens the task's dumps on first use)."""

    def __init__(self, task: Task, framework_model: str | os.PathLike | None):
        self._run = Context(task, None, None, 1)
        self._run.fw_path = Path(framework_model) if framework_model else None
        self._opened = False

    @property
    def notes(self) -> list[str]:
        return self._run.notes

    def effect(self, o: OpOrigin) -> float:
        return effect(o, self._run)

    def changes(self, o: OpOrigin) -> list:
        if self._run.fw_path is None:
            return []
        if not self._opened:
            self._opened = True
            self._run.open_sources()
        return model_changes(self._run, o)
