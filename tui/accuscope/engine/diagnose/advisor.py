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

The result is `advice.json` in the task folder (written atomically) and an `Advice` object for the
TUI: findings to show and jump to (table row, op), and per-op origins for a table column.
Re-run results are cached in advice.json under a key made of the files they depend on, so advising
again (new thresholds, reopening the task) re-runs nothing that did not change.
"""
from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np

from accuscope.engine.compare import judgement
from accuscope.engine.compare.columns import COMPUTED_FLOATS
from accuscope.engine.compare.expected import EXCESS_LIMIT
from accuscope.engine.compare.pairjob import tensor_chunks
from accuscope.engine.compare.thresholds import RECORDED_KEYS, recorded_text
from accuscope.engine.diagnose import firstdiff
from accuscope.engine.diagnose.advice import (
    ADVICE_JSON,
    Advice,
    Finding,
    OpOrigin,
    Progress,
    fingerprint,
    jsonable,
    load_advice,
    save_advice,
    saved_advice,
)
from accuscope.engine.graphs.optypes import INPUT_TYPES, walk_back
from accuscope.engine.sources.names import parse_tensor_name
from accuscope.engine.sources.tensor import SourceError, TensorError
from accuscope.engine.tasks.task import Task, load_task

SEVERITIES = ("error", "warning", "info")
FP16_MAX = 65504.0
SENTINEL = 1e8  # golden magnitudes from here on are fill values (attention masks), not overflow
WEAK_FACTOR = 3.0  # weak method: an output this many times worse than its worst input blames the op
WEIGHTED_TYPES = {"Conv2D", "Conv3D", "Conv2DTranspose", "DepthwiseConv2D", "Conv", "ConvTranspose", "MatMul",
                  "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2", "Gemm", "FullyConnection",
                  "QuantizedConv", "ConvInteger", "MatMulInteger"}
INVALID_TYPES = {"Div", "RealDiv", "Log", "Sqrt", "Rsqrt", "Reciprocal", "Pow"}
# order of findings on the same row and severity (the cause first)
_PRIORITY = ["verdict", "coverage", "preprocess", "ms.input_mismatch", "first_call", "beyond_expected", "introduced", "drift", "nonfinite_origin",
             "ms.fp16_overflow", "no_op_introduced", "ms.output_fails", "ms.local_deviation", "ms.all_pass", "method"]


# ------------------------------------------------------------------ the run


class _Run:
    """State of one advise() call."""

    def __init__(self, task: Task, progress, cancel, workers):
        self.task = task
        self.folder = task.folder
        self.table = task.table
        self.c = task.table.columns
        self.n = len(task.table)
        self.thresholds = task.thresholds
        self.progress = progress
        self.cancel = cancel
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.notes: list[str] = []
        self.timings: dict[str, float] = {}
        self.graph = None
        self.plan = None
        self.row_pair: list = [None] * self.n
        self.ops: dict[str, list[int]] = {}
        for i, op in enumerate(self.c["npu_op"].tolist()):
            self.ops.setdefault(op, []).append(i)
        self.state = self.thresholds.evaluate(self.table)  # the rows as the op table and the CSV see them
        self.fail, self.exempt, self.nonfinite = self.state.fail, self.state.exempt, self.state.nonfinite
        t = self.thresholds.get("cos")
        self.cos_min = t.value if t is not None and t.op == "<" else 0.99
        t = self.thresholds.get("red")
        self.red_max = t.value if t is not None and t.op == ">" else 0.05
        self.outcome = "unknown"  # the verdict on the network outputs: "pass", "fail" or "unknown"
        self.fw_path = None  # the framework (reference) model the re-runs use
        self.fw = None
        self.jobs: dict = {}  # op -> its re-run job (oprerun.RerunJob)
        self.reach: dict[str, float] = {}  # op -> 1 - cos of the outputs with only its own error in
        self.npu_values: dict | None = None  # framework tensor -> (NPU tensor, golden tensor), for re-runs
        self.previous: dict[str, dict] = {}  # the last advice's re-runs, by op

    def say(self, stage: str, done: int = 0, total: int = 0) -> None:
        if self.progress is not None:
            self.progress(Progress(stage, done, total))

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    # ---- sources ----------------------------------------------------------------------------
    def open_sources(self) -> None:
        try:
            self.graph = self.task.graph
        except SourceError as exc:
            self.notes.append(f"model graph unusable ({exc}); network inputs and outputs from the table only")
        if self.task.doc.foreign or not self.task.doc.names_dumps:
            self.notes.append("the task does not name its dumps: no re-run, overflow scan or input diagnosis, "
                              "only the table's numbers")
            return
        if not any(k in self.table.present for k in COMPUTED_FLOATS):
            self.notes.append("statistics or checksums only (no tensor data compared): no re-run, overflow scan "
                              "or input diagnosis")
            return
        if self.task.doc.multirank:
            self.notes.append("a task of several ranks: re-runs, the overflow scan and the input diagnosis open "
                              "one rank's dumps (compare it alone with --step and --rank)")
            return
        try:
            self.plan = self.task.plan
        except SourceError as exc:
            self.notes.append(f"dumps unusable ({exc}): no re-run, overflow scan or input diagnosis")
            return
        by_name = {p.npu.name: p for p in self.plan.pairs}
        self.row_pair = [by_name.get(t) for t in self.c["tensor"].tolist()]

    # ---- rows -------------------------------------------------------------------------------
    def op_rows(self, op: str, io: str) -> list[int]:
        return [r for r in self.ops.get(op, []) if self.c["io"][r] == io]

    def network_input_rows(self) -> list[int]:
        """Rows of network input ops (Data), and input rows whose tensor is a network input
        (traced back through layout-only ops); without a model graph, the first op's inputs."""
        c = self.c
        rows = {i for i in range(self.n) if c["type"][i] in INPUT_TYPES}
        if self.graph is not None:
            for i in range(self.n):
                if c["io"][i] != "input":
                    continue
                node = self.graph.node(c["npu_op"][i])
                named = parse_tensor_name(c["tensor"][i])
                if node is not None and named is not None and named.index < len(node.inputs) and \
                        _is_network_input(self.graph, node.inputs[named.index]):
                    rows.add(i)
        elif not rows:
            first = next((i for i in range(self.n) if not self.exempt[i]), None)
            if first is not None:
                rows.update(self.op_rows(c["npu_op"][first], "input"))
        return sorted(rows)

    def error_of(self, r: int) -> float:
        """A row's error for the weak method: relative Euclidean distance, else 1 - cos."""
        red = self.c["red"][r]
        if not math.isnan(red):
            return float(red)
        cos = self.c["cos"][r]
        return math.nan if math.isnan(cos) else float(1 - cos)

    def nf(self, r: int) -> bool:
        return bool(self.nonfinite[r])


def current_advice(task: Task, progress: Callable[[Progress], None] | None = None) -> Advice:
    """The task's saved advice when it was made for this result and these thresholds, else fresh
    advice (written to advice.json). SourceError when the task cannot be advised on."""
    return saved_advice(task.folder, task.doc, task.thresholds) or advise(task, progress=progress)


def advise(task_folder: str | os.PathLike | Task, framework_model: str | os.PathLike | None = None,
           progress: Callable[[Progress], None] | None = None, cancel: threading.Event | None = None,
           workers: int | None = None, write: bool = True, verify: int = 0) -> Advice | None:
    """Advise on a finished task (a folder, or a Task already opened: its plan is reused); writes
    `advice.json` into the task folder (unless write=False).

    `framework_model`: the framework ONNX model to re-run ops from (default: found through
    task.json, see Task.framework_model). SourceError for an unusable task folder or a given
    framework model that cannot be read. Returns None when `cancel` was set (nothing written).
    `verify`: how many top-ranked ops to verify by converting the model again without each
    (diagnose.replay), when the outputs fail; 0: the ranking stays estimated.
    """
    start = time.perf_counter()
    task = task_folder if isinstance(task_folder, Task) else load_task(task_folder)
    if not len(task.table):
        raise SourceError(f"{task.folder}: the task has no result rows to advise on")
    run = _Run(task, progress, cancel, workers)
    run.say("opening the dumps")
    t0 = time.perf_counter()
    fw, fw_path, fw_source = None, None, ""
    if framework_model is not None:
        fw_path, fw_source = Path(framework_model), "given"
        if not fw_path.is_file():
            raise SourceError(f"{fw_path}: no such framework model file")
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
    run.timings["framework model"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    run.open_sources()
    if fw is not None and run.plan is not None and fw.has_if():  # the ops inside, as the golden dump ran them
        fw.expand(lambda names: _golden_arrays(run, names))
        if fw.expansion.taken:
            run.notes.append(f"the framework model's If nodes were expanded as the golden dump took them "
                             f"({len(fw.expansion.taken)} branches)")
    run.timings["open"] = time.perf_counter() - t0
    if run.cancelled:
        return None

    net_inputs = run.network_input_rows()
    t0 = time.perf_counter()
    overflow = _overflow(run, net_inputs)
    run.timings["overflow scan"] = time.perf_counter() - t0
    if run.cancelled:
        return None
    t0 = time.perf_counter()
    previous = _previous(task.folder)
    origins = _origins(run, fw if run.plan is not None else None, previous)
    run.timings["origins"] = time.perf_counter() - t0
    if run.cancelled or origins is None:
        return None
    t0 = time.perf_counter()
    verdict = _verdict(run)
    findings = [verdict] + _coverage(run) + _mindstudio(run, overflow, net_inputs)
    findings += _preprocess(run, net_inputs)
    findings += _nonfinite_origin(run, origins)
    findings += _first_call(run)
    # several ranks hold the same op names: which op introduced the error is first_call's, rank by rank
    one_run = len(firstdiff.groups(run.table)) == 1
    findings += _introduced(run, origins, net_inputs, findings) if one_run else []
    findings += _beyond_expected(run)
    drift = _drift(run, origins) if one_run else []
    if drift:  # the many small introductions are the drift, not one culprit
        findings = [replace(f, severity="warning", title=f"{f.op} introduced the most error, but no single op "
                            "explains the output") if f.rule == "introduced" else f for f in findings]
    findings += drift
    findings = _in_light_of_verdict(run, findings)
    run.timings["rules"] = time.perf_counter() - t0
    findings = _verified(run, findings, origins, verify)
    method = "rerun" if fw is not None and run.plan is not None else "input-output"
    if method == "input-output" and origins:
        findings.append(_weak_note(fw_path, fw is not None))
    findings.sort(key=lambda f: (f.rule != "verdict", SEVERITIES.index(f.severity), f.rule.startswith("ms."),
                                 f.row if f.row is not None else run.n,
                                 _PRIORITY.index(f.rule) if f.rule in _PRIORITY else len(_PRIORITY)))
    advice = Advice(task.folder, findings, origins, method, str(fw_path) if fw is not None else "",
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


def _verified(run: _Run, findings: list[Finding], origins: list[OpOrigin], budget: int) -> list[Finding]:
    """The findings told by replaying the conversion (diagnose.replay) when asked and the outputs
    fail; else, where it could be replayed, the headline says its ranking is estimated."""
    from accuscope.engine.diagnose import replay
    if run.outcome != "fail" or not any(f.rule in ("introduced", "drift") for f in findings) or run.cancelled:
        return findings
    if budget <= 0:
        if replay.replayable(run.task) in ("fp16", "int8"):
            return [replace(f, text=f"{f.text} Ranking estimated: `accuscope advise --verify` converts the model "
                            "again without each top op and measures the output.", evidence={**f.evidence, "ranking":
                                                                                             "estimated"})
                    if f.rule == "introduced" else f for f in findings]
        return findings
    t0 = time.perf_counter()
    c = run.c
    ops = replay.ranked_ops(findings, origins, lambda r: str(c["golden_op"][r]))
    run.say("verifying: converting again without each top op", 0, min(budget, len(ops)))
    v = replay.verify(run.task, ops, budget, run.cancel, lambda i, n: run.say("verifying: converting again "
                                                                              "without each top op", i, n))
    run.timings["verify"] = time.perf_counter() - t0
    if not v.replayed:
        run.notes.append(f"headline not verified: {v.reason}")
    return replay.revise(findings, v, lambda op: (run.ops.get(op) or [None])[-1])


def _golden_arrays(run: _Run, names: list[str]) -> dict[str, np.ndarray]:
    """The golden dump's values of these framework tensors (those it holds)."""
    out = {}
    for name in names:
        t = run.plan.golden.find_tensor(name)
        if t is not None and not t.problem:
            try:
                out[name] = np.asarray(t.load())
            except (TensorError, OSError, ValueError):
                continue
    return out


def _previous(folder: Path) -> dict[str, dict]:
    """Cached re-runs of the last advice, by op."""
    try:
        old = load_advice(folder)
    except SourceError:
        return {}
    if old is None:
        return {}
    return {o.op: o.isolated for o in old.ops if o.isolated and o.isolated.get("key")}


# ------------------------------------------------------------------ rule 1: float16 overflow


def _overflow(run: _Run, net_inputs: list[int]) -> tuple[int, dict] | None:
    """The first row whose float16 NPU tensor overflowed: NaN/inf beyond golden's, or values at
    the float16 limit (|x| >= 65504) where golden is an ordinary number (not a mask fill value)."""
    c = run.c
    fp16 = np.isin(c["npu_dtype"], ["float16", "DT_FLOAT16"]) & ~c["is_npu_only"]
    nf = np.flatnonzero(fp16 & run.nonfinite)
    first_nf = int(nf[0]) if len(nf) else run.n
    hit: tuple[int, dict] | None = None
    if len(nf):
        r = first_nf
        hit = (r, {"npu_nonfinite": int(c["npu_nonfinite"][r]),
                   "golden_nonfinite": max(int(c["golden_nonfinite"][r]), 0)})
    if run.plan is None:
        return hit
    inputs = set(net_inputs)
    rows = [r for r in range(first_nf) if fp16[r] and (c["io"][r] == "output" or r in inputs)
            and run.row_pair[r] is not None and run.row_pair[r].golden is not None]
    if not rows:
        return hit
    found = _first_hit(rows, lambda r: _saturated(run.row_pair[r]), run, "checking float16 overflow")
    if found is not None:
        r, count = found
        return r, {"saturated": count, "npu_nonfinite": max(int(c["npu_nonfinite"][r]), 0),
                   "golden_nonfinite": max(int(c["golden_nonfinite"][r]), 0)}
    return hit


def _saturated(pair) -> int:
    """Elements at the float16 limit on the NPU side where golden is finite and below SENTINEL."""
    x, y = pair.npu, pair.golden
    if x.problem or y.problem or x.size != y.size or x.size == 0:
        return 0
    count = 0
    try:
        with np.errstate(invalid="ignore"):
            for xc, yc in zip(tensor_chunks(x, 1 << 16), tensor_chunks(y, 1 << 16)):
                big = np.abs(xc) >= FP16_MAX
                if big.any():
                    ay = np.abs(np.asarray(yc, dtype=np.float64))
                    count += int(np.count_nonzero(big & np.isfinite(xc) & (ay < SENTINEL)))
    except (TensorError, OSError, ValueError):
        return 0
    return count


def _first_hit(rows: list[int], count: Callable[[int], int], run: _Run, stage: str) -> tuple[int, int] | None:
    """The first row (in order) whose count is positive, evaluated in threads batch by batch."""
    batch = 4 * run.workers
    with ThreadPoolExecutor(run.workers, thread_name_prefix="accuscope-advisor") as pool:
        for lo in range(0, len(rows), batch):
            if run.cancelled:
                return None
            part = rows[lo:lo + batch]
            for r, k in zip(part, pool.map(count, part)):
                if k > 0:
                    return r, k
            run.say(stage, min(lo + batch, len(rows)), len(rows))
    return None


# ------------------------------------------------------------------ rules 2 and 3 (MindStudio)


def _verdict(run: _Run) -> Finding:
    """The verdict on the model itself, judged on its real outputs: pass, fail (which output, which
    metric, how badly) or unknown (no output compared, and why). Everything else is read in its light."""
    if _is_msprobe(run):
        return _step_verdict(run)
    c = run.c
    v = judgement.verdict(run.table, run.thresholds)
    if v.outcome == "unknown":
        return _finding(run, "verdict", "warning", None, "verdict unknown: the network outputs were not compared",
                        f"The model cannot be judged: {v.why}. No row below is a verdict on the model.",
                        {"outputs": v.outputs})
    measured = list(v.judged)
    ev = {"outputs": len(measured), "output_cos": [c["cos"][r] for r in measured],
          "output_red": [c["red"][r] for r in measured]}
    if v.outcome == "fail":
        run.outcome = "fail"
        r = v.worst
        broken = _broken_text(run, r)
        return _finding(run, "verdict", "error", r, f"the model fails: output {broken.split(', ')[0]}",
                        f"{len(v.failing)} of {len(measured)} network output(s) break the thresholds (worst: "
                        f"{c['tensor'][r]} {broken}).{_cause_text(run, v, r, ev)} The findings below say which op "
                        "made the error, most harmful first.", ev)
    run.outcome = "pass"
    worst = min(measured, key=lambda i: c["cos"][i] if not math.isnan(c["cos"][i]) else 2.0)
    noisy = [r for r in measured if run.state.noisy[r]]
    noise = ("" if not noisy else f" {c['tensor'][noisy[0]]} breaks only {_broken_text(run, noisy[0])}: a relative "
             "error on values near zero (its relative euclidean distance passes), noise of the precision, not a "
             "failure.")
    return _finding(run, "verdict", "info", None, f"the model passes: {len(measured)} network output(s) meet the "
                    f"thresholds (worst cos {_f4(c['cos'][worst])})",
                    "Deviations of single ops below are local: they do not reach the outputs beyond the thresholds."
                    + noise, ev)


def _cause_text(run: _Run, v, r: int, ev: dict) -> str:
    """With a third side (--expected): which branch of the three-sided procedure the failing outputs
    take, said on the verdict (the cause also in its evidence)."""
    if not v.cause:
        return ""
    c = run.c
    ev.update(cause=v.cause, expected_error=c["exp_err"][r], excess=c["excess"][r])
    if v.cause == "precision":
        return (f" The precision itself: the reference at the candidate's precision (--expected) gives this error "
                f"too ({_f4(c['exp_err'][r])}; this output's is {c['excess'][r]:.3g} times it), so keep the "
                "ops named below in higher precision" + ("; an op errs beyond the precision's own too, hidden by it "
                f"at the outputs: {c['npu_op'][run.state.first_beyond]} (below)." if run.state.first_beyond is not None
                                                       else "; no kernel adds error of its own."))
    return (f" Beyond the precision's own noise: {c['excess'][r]:.3g} times the error the reference at the "
            "candidate's precision (--expected) gives, so the implementation (or the conversion's settings) "
            "adds it.")


def _step_verdict(run: _Run) -> Finding:
    """msprobe dumps hold the calls of a training or inference step, not a model whose outputs decide:
    a call that diverges need not reach the step's last call (a gradient, a rank's shard), so the step
    is judged on every tensor compared, and passes only when none fails."""
    v = judgement.verdict(run.table, run.thresholds, step=True)  # the same answer every surface gives
    compared = len(v.judged)
    skipped = run.n - compared
    if v.outcome == "unknown":
        return _finding(run, "verdict", "warning", None, "verdict unknown: no tensor was compared",
                        "No row holds a statistic, a checksum or a metric (the reasons column says why for each); "
                        "no row below is a verdict on the step.", {"rows": run.n})
    failing = np.array(v.failing, dtype=np.int64)
    not_seen = f" {skipped:,} rows were not compared (their reasons say why)." if skipped else ""
    ev = {"compared": compared, "failing": int(failing.size), "not_compared": skipped}
    if not failing.size:
        run.outcome = "pass"
        return _finding(run, "verdict", "info", None, f"the step matches: all {compared:,} compared tensors meet "
                        "the thresholds", "Every call's compared tensors agree with the reference." + not_seen, ev)
    run.outcome = "fail"
    found = firstdiff.by_rank(run.table)
    row = found[0].row if found else int(failing[0])
    groups = firstdiff.groups(run.table)
    bad_groups = sum(1 for _, rows in groups if run.fail[rows].any()) if groups[0][0] else 0
    spread = f" on {bad_groups} of {len(groups)} ranks" if bad_groups and len(groups) > 1 else ""
    near = _near_zero(run, row)
    if found:
        start = (f"It starts at {found[0].call}{' on ' + found[0].where if found[0].where else ''} (the first_call "
                 "finding below)." + (f" There it differs only on values near zero ({near})." if near else ""))
    elif near:
        start = (f"No call has agreeing inputs and failing outputs; the first failing tensor, {run.c['tensor'][row]}, "
                 f"differs on values near zero ({near}): a relative error there is rounding of a value the reference "
                 "holds at ~0, not a sign of what the step was fed.")
    else:
        start = ("No call has agreeing inputs and failing outputs: the first call compared already differs "
                 f"({run.c['tensor'][row]}); check what the step was fed (inputs, weights, random seeds).")
    return _finding(run, "verdict", "error", row, f"the step diverges: {failing.size:,} of {compared:,} compared "
                    f"tensors fail{spread}", "An msprobe dump holds the calls of a step, so the step is judged on "
                    f"every call, not on its last one. {start}{not_seen}", ev)


def _in_light_of_verdict(run: _Run, findings: list[Finding]) -> list[Finding]:
    """An error-level finding about an op exists only when the outputs fail: when they pass, local
    findings are information (their effect stated); when the outputs are unknown, warnings."""
    if run.outcome == "fail":
        return findings
    level = "info" if run.outcome == "pass" else "warning"
    if _is_msprobe(run):
        note = (" The step matches: this stays local." if run.outcome == "pass" else
                " Its effect on the step is unknown (no tensor was compared).")
    else:
        note = (" The network outputs pass: this stays local." if run.outcome == "pass" else
                " Its effect on the network outputs is unknown (they were not compared).")
    out = []
    for f in findings:
        if f.rule != "verdict" and f.severity == "error":
            f = replace(f, severity=level, text=f.text + note)
        out.append(f)
    return out


def _broken_text(run: _Run, r: int) -> str:
    parts = []
    for key in run.thresholds.broken(run.table, r):
        t = run.thresholds.get(key)
        if key in RECORDED_KEYS and t is None:
            parts.append(recorded_text(run.table, key, r))
        elif t is None:
            parts.append(f"holds {int(run.c['npu_nonfinite'][r])} NaN/inf")
        else:
            parts.append(f"{key} {_distinct(run.table.numbers(key)[r], t.value)} {t.op} {t.value:.10g}")
    return ", ".join(parts) or "fails"


DRIFT_START = 0.1  # a drift starts where the error first reaches this share of the output's
CLIFF_SHARE = 0.5  # one step of the error series adding this share of its maximum is a cliff, not a drift
DOMINANT = 2.0  # an op whose own error is this many times the next one's is the cause by itself
MANY = 4  # this many ops with errors within DOMINANT of the largest make a drift


def _drift(run: _Run, origins: list[OpOrigin]) -> list[Finding]:
    """When no single op explains a failing output but the error grows a little at each of many
    ops: say so, where it starts, and how it grows (the series is in the evidence, for a chart).
    Measured with the metric the output breaks: 1 - cos first (bounded where relative errors
    explode, at a Sigmoid's outputs near zero), else the relative euclidean distance."""
    if run.outcome != "fail":
        return []
    c = run.c
    out = next((int(r) for r in np.flatnonzero(c["is_output"] & ~run.exempt)), None)
    if out is None:
        return []
    if not math.isnan(c["cos"][out]) and c["cos"][out] < run.cos_min:
        key, values, words = "cos", 1.0 - c["cos"], "cos"
    elif not math.isnan(c["red"][out]) and c["red"][out] > run.red_max:
        key, values, words = "red", np.minimum(c["red"], 10.0), "rel. error"
    else:
        return []
    rows = [int(r) for r in np.flatnonzero((c["io"] == "output") & ~run.exempt) if not math.isnan(values[r])]
    if len(rows) < 8 or out not in rows:
        return []
    err = np.array([float(values[r]) for r in rows])
    final = float(values[out])
    level = np.maximum.accumulate(err)
    steps = np.diff(np.concatenate([[0.0], level]))
    biggest = int(np.argmax(steps))
    if run.reach:  # measured: does one op's own error, alone, make at least half of the output's?
        out_bad = 1.0 - float(c["cos"][out]) if not math.isnan(c["cos"][out]) else 1.0
        if max(run.reach.values()) >= CLIFF_SHARE * out_bad:
            return []
    effects = sorted((_effect(o, run) for o in origins if o.origin == "introduced" and o.method == "rerun"
                      and not (o.broken and set(o.broken) <= judgement.NOISY)), reverse=True)
    if not run.reach and effects and (len(effects) == 1 or effects[0] >= DOMINANT * effects[1]):
        return []  # one op made far more error by itself than any other: a cliff, said as introduced
    if not run.reach and effects and sum(e >= effects[0] / DOMINANT for e in effects) < MANY:
        return []  # a few comparable culprits: the introduced-op finding names them
    if not effects and steps[biggest] >= CLIFF_SHARE * level[-1]:
        return []  # without re-runs: one step of the series made most of it
    start = int(np.argmax(level > DRIFT_START * level[-1]))
    picks = sorted({start, start + (len(rows) - start) // 2, len(rows) - 1})[:-1]

    def told(v: float) -> str:
        return f"cos down to {_f4(1.0 - v)}" if key == "cos" else f"{words} up to {_pct(v)}"
    growth = ", ".join(f"{told(level[k])} by {c['npu_op'][rows[k]]} (#{rows[k]})" for k in picks)
    growth += f", {words} {_f4(c['cos'][out]) if key == 'cos' else _pct(final)} at the output"
    step = max(1, len(rows) // 60)
    series = [[rows[k], float(err[k])] for k in range(0, len(rows), step)]
    return [_finding(run, "drift", "error", rows[start], f"gradual drift from {c['npu_op'][rows[start]]}",
                     f"No single op explains the output's error: it grows a little at each of many ops ({growth}; "
                     f"the largest single step adds {steps[biggest]:.2g}). This is accumulated "
                     f"{_precision_word(run)} across a region: keep that region in higher precision (or calibrate "
                     "it) rather than one op.",
                     {"metric": key, "growth": series, "largest_step": float(steps[biggest]),
                      "start_row": rows[start], "output_error": final})]


QUANTIZED_TYPES = {"ConvInteger", "MatMulInteger", "QLinearConv", "QLinearMatMul", "DynamicQuantizeLinear",
                   "QuantizeLinear", "DequantizeLinear", "AscendQuant", "AscendDequant"}


def _precision_word(run: _Run) -> str:
    """What kind of small errors add up here, from the NPU side's dtypes and op types."""
    types = set(run.c["type"].tolist())
    dtypes = {str(d).lower().replace("dt_", "") for d in run.c["npu_dtype"].tolist()}
    if types & QUANTIZED_TYPES or dtypes & {"int8", "uint8", "int4"}:
        return "quantization error"
    if dtypes & {"float16", "bfloat16"}:
        return f"{'bfloat16' if 'bfloat16' in dtypes else 'float16'} rounding"
    return "small per-op error"


def _distinct(v: float, threshold: float) -> str:
    """v with enough digits not to read as the threshold it breaks (cos 0.99999994 < 0.9999999)."""
    for digits in (4, 6, 8, 10, 12):
        text = f"{v:.{digits}g}"
        if float(text) != threshold and (float(text) < threshold) == (v < threshold):
            return text
    return repr(float(v))


def _pct(x: float) -> str:
    return f"{100 * x:.2g}%"


def _coverage(run: _Run) -> list[Finding]:
    """Too little compared to conclude anything (task.json coverage, written by compare)."""
    cov = run.task.doc.coverage
    warnings, notes = cov.get("warnings"), cov.get("notes")
    if not warnings or not isinstance(warnings, list):
        if notes and isinstance(notes, list):
            return [_finding(run, "coverage", "info", None, f"not compared: {notes[0]}",
                             "These tensors are missing on purpose (the run that dumped them cannot reach them); "
                             "the verdict covers the rest.", {"unreachable": len(cov.get("unreachable") or [])})]
        return []
    text = "; ".join(str(w) for w in warnings)
    return [_finding(run, "coverage", "warning", None, f"the comparison saw too little: {text}",
                     "Whatever the rows say, the model is not judged on what was not compared: a pass here is no "
                     "pass. Check that both sides come from the same model and run, give each side's model "
                     "(--model, --npu-model, --golden-model) so names can be paired, or a --mapping file.",
                     {k: cov[k] for k in ("npu_paired", "npu_total", "golden_used", "golden_total",
                                         "outputs_paired", "outputs_total") if k in cov})]


def _mindstudio(run: _Run, overflow, net_inputs: list[int]) -> list[Finding]:
    c = run.c
    thr = run.cos_min
    if overflow is not None:
        r, ev = overflow
        sat = ev.get("saturated", 0)
        what = (f"{sat} values at the float16 limit (|x| >= 65504)" if sat else
                f"{ev['npu_nonfinite']} NaN/inf values (golden: {ev['golden_nonfinite']})")
        return [_finding(run, "ms.fp16_overflow", "error", r, f"float16 overflow at {c['npu_op'][r]}",
                         f"Its float16 {c['io'][r]} holds {what}. Everything computed from it is unreliable: keep "
                         f"this op in float32 (mixed precision) or scale its inputs down, then compare again.",
                         {**ev, "cos": c["cos"][r]})]
    bad_inputs = [r for r in net_inputs if not math.isnan(c["cos"][r]) and c["cos"][r] < thr]
    if bad_inputs:
        r = bad_inputs[0]
        return [_finding(run, "ms.input_mismatch", "error", r, f"network input differs ({c['tensor'][r]})",
                         f"The two sides were not fed the same data (cos {c['cos'][r]:.4f} < {thr:g}), so no op can "
                         "be judged yet. Feed both the same input file, or fix the preprocessing (see the "
                         "preprocessing finding).", {"cos": c["cos"][r], "red": c["red"][r],
                                                     "inputs_below": len(bad_inputs)})]
    if _is_msprobe(run):  # a step has no network output: the step verdict judges every call
        return []
    with np.errstate(invalid="ignore"):
        has_cos = ~np.isnan(c["cos"])
        below = (has_cos & (c["cos"] < thr)) | (run.nonfinite & ~run.exempt)
    if not below.any():
        if not has_cos.any():  # statistics or checksums only: nothing to say about cosines
            return []
        others = int(run.fail.sum())
        extra = (f" ({others} rows break other thresholds: the origin column says which ops made their error.)"
                 if others else "")
        return [_finding(run, "ms.all_pass", "info", None, f"no tensor has a cosine below {thr:g}",
                         "By cosine every tensor meets the requirement. If the application's result is still "
                         "wrong, look at the post-processing of the model outputs (decoding, thresholds, label "
                         f"order).{extra}", {"rows_with_cos": int(has_cos.sum()), "rows_failing": others})]
    first = int(np.argmax(below))
    outputs = np.flatnonzero(c["is_output"])
    note = ""
    if not len(outputs):
        with_cos = np.flatnonzero(has_cos)
        outputs = with_cos[-1:]
        note = " (no output op is known: the last compared row stands for the output)"
    failing_out = [int(o) for o in outputs if below[o]]
    ev = {"cos": c["cos"][first], "rows_below": int(below.sum()), "output_rows": [int(o) for o in outputs],
          "output_cos": [c["cos"][o] for o in outputs]}
    if failing_out:
        o = failing_out[0]
        return [_finding(run, "ms.output_fails", "error", first,
                         f"the network output fails; the first deviation is at {c['npu_op'][first]}",
                         f"The output {c['tensor'][o]} has cos {c['cos'][o]:.4f}{note}. Start at the first row below "
                         f"{thr:g}: quantization is the usual cause, so calibrate that op or keep it in higher "
                         "precision; the origin column tells which failing ops made their error.", ev)]
    return [_finding(run, "ms.local_deviation", "warning", first,
                     f"local deviations only; the network output passes{note}",
                     f"Some tensors are below {thr:g} (first: {c['tensor'][first]}) but the output meets the "
                     "thresholds. This is typical of the device compiler's internal optimizations; act only if the "
                     "application's result is wrong.", ev)]


def _is_msprobe(run: _Run) -> bool:
    kind = run.task.doc.sides.get("npu")
    if kind == "ranks":  # a rank tree an earlier accuscope compared: what its folders hold
        from accuscope.engine.sides.registry import detect
        try:
            kind = detect(run.task.doc.npu or "").kind
        except (SourceError, OSError):
            return False
    return kind == "msprobe"


def _first_call(run: _Run) -> list[Finding]:
    """msprobe dumps (calls of a training/LLM step): the first call whose inputs agree and outputs
    do not, per rank, and across ranks when the task holds several."""
    if not _is_msprobe(run):
        return []
    found = firstdiff.by_rank(run.table)
    if not found:
        return []
    first = found[0]
    where = f" on {first.where}" if first.where else ""
    api = first.call.split(".")[1] if first.call.count(".") >= 2 else first.call
    text = (f"Its inputs agree with the reference and its outputs do not: the difference starts here{where} "
            f"(call {first.position + 1} of the step); every later call inherits it. Next: dump this call's "
            f"tensors only (msprobe config `list: [{api}]`, task tensor) and compare them, or read its code "
            "path on the NPU side.")
    if first.where:
        diverging = {d.rank for d in found}
        clean = [firstdiff.where(label) for label, _ in firstdiff.groups(run.table) if label not in diverging]
        text += (f" Diverging: {', '.join(f'{d.where} at {d.call}' for d in found)}"
                 + (f"; agreeing everywhere: {', '.join(clean)}" if clean else "") + ".")
    evidence = {"call": first.call, "position": first.position, "rank": first.rank,
                "ranks": [{"rank": d.rank, "call": d.call, "row": d.row} for d in found]}
    near = _near_zero(run, first.row)
    if near:
        evidence["near_zero"] = near
        return [_finding(run, "first_call", "warning", first.row, f"{first.call}{where} is the first call that "
                         "differs, on values near zero", f"Its inputs agree with the reference and its outputs differ "
                         f"only where the reference is near zero ({near}): rounding of values the reference holds at "
                         "~0 (a gradient that cancels, a lower precision that cannot hold 1e-9), not a wrong call. "
                         "Judge it by cos or max_abs, or raise mean_rel's threshold, to see whether a later call "
                         "diverges." + (text[text.index(" Diverging:"):] if " Diverging:" in text else ""),
                         evidence)]
    return [_finding(run, "first_call", "error", first.row, f"{first.call}{where} is the first call that diverges",
                     text, evidence)]


NEAR_ZERO = 1e-6  # reference values this small, or this small against the tensor's largest, are near zero
RELATIVE = {"mean_rel", "max_rel"}  # metrics a near-zero reference value alone can break
NEAR_ZERO_BYTES = 64 << 20  # a reference tensor file up to this size is read to see its magnitudes


def _near_zero(run: _Run, row: int) -> str:
    """How a failing row's reference values are near zero, "" when they are not (or nothing says):
    all of them (max |golden| below NEAR_ZERO), or some, when the row breaks only relative metrics. From
    the golden tensor file (msprobe's .pt / .npy), else from msprobe's statistics columns."""
    c = run.c
    broken = set(run.thresholds.broken(run.table, row))
    source = str(c["golden_file"][row]) if "golden_file" in c else ""
    values = _golden_values(source)
    if values is not None and values.size:
        top = float(np.abs(values).max())
        if top < NEAR_ZERO:
            return f"max |golden| {top:.3g}"
        tiny = int((np.abs(values) <= max(NEAR_ZERO * top, 1e-30)).sum())
        if tiny and broken and broken <= RELATIVE:
            return (f"{tiny:,} of {values.size:,} golden values are at most {NEAR_ZERO:g} x its max |golden| "
                    f"{top:.3g}, and it breaks only {', '.join(sorted(broken))}")
        return ""
    if "max_diff" in c and "max_relerr" in c and "min_diff" in c and "min_relerr" in c:
        with np.errstate(invalid="ignore", divide="ignore"):
            tops = [abs(float(c[d][row])) * 100 / float(c[r][row]) for d, r in (("max_diff", "max_relerr"),
                                                                                 ("min_diff", "min_relerr"))
                    if math.isfinite(float(c[r][row])) and float(c[r][row]) > 0]
        if len(tops) == 2 and max(tops) < NEAR_ZERO:
            return f"max |golden| {max(tops):.3g}"
    if broken and broken <= RELATIVE and values is None and source.endswith((".pt", ".npy")):
        return f"it breaks only {', '.join(sorted(broken))}, large where golden values are near zero"
    return ""


def _golden_values(source: str) -> np.ndarray | None:
    """A reference tensor file's values (msprobe's .pt through torchpickle, .npy without pickles), None
    when it is not one or cannot be read."""
    if not source.endswith((".pt", ".npy")) or not os.path.isfile(source) or \
            os.path.getsize(source) > NEAR_ZERO_BYTES:
        return None
    try:
        if source.endswith(".npy"):
            return np.asarray(np.load(source, allow_pickle=False), dtype=np.float64)
        from accuscope.engine.sources import torchpickle
        return np.asarray(torchpickle.load(source), dtype=np.float64)
    except Exception:  # noqa: BLE001 - a damaged or non-numeric file says nothing about magnitudes
        return None


def _finding(run: _Run, rule: str, severity: str, row: int | None, title: str, text: str,
             evidence: dict | None = None) -> Finding:
    op = tensor = ""
    if row is not None:
        op, tensor = str(run.c["npu_op"][row]), str(run.c["tensor"][row])
    return Finding(rule, severity, title, text, row, op, tensor, jsonable(evidence or {}))


# ------------------------------------------------------------------ preprocessing


def _preprocess(run: _Run, net_inputs: list[int]) -> list[Finding]:
    from accuscope.engine.diagnose.preprocess import diagnose
    c = run.c
    out: list[Finding] = []
    seen: set[str] = set()
    for r in net_inputs:
        cos, red = c["cos"][r], c["red"][r]
        sized = "does not match shape" in c["reason"][r]
        if not (sized or (not math.isnan(cos) and cos < run.cos_min) or (not math.isnan(red) and red > run.red_max)):
            continue
        pair = run.row_pair[r]
        if pair is None or pair.golden is None or pair.npu.value is not None:  # a value: no data to diagnose
            continue
        key = pair.golden.source
        if key in seen or len(seen) >= 4:
            continue
        seen.add(key)
        run.say("diagnosing the inputs", len(seen), 0)
        try:
            d = diagnose(pair.npu.load(), pair.golden.load(), run.cos_min, run.red_max)
        except (TensorError, OSError, ValueError, MemoryError) as exc:
            run.notes.append(f"{c['tensor'][r]}: input diagnosis failed: {exc}")
            continue
        ev = {"cos_before": cos, "red_before": red}
        if d is None:
            out.append(_finding(run, "preprocess", "warning", r, "inputs disagree; no usual preprocessing "
                                "difference explains it",
                                "Channel order, layout, scale, mean/std and resize were tested. Check that both "
                                "sides read the same file, and look at where the input tensors differ with "
                                f"`accuscope op {run.folder} {c['tensor'][r]}`.", ev))
            continue
        ev.update(transform=d.transform, cos_before=d.cos_before if not math.isnan(d.cos_before) else cos,
                  cos_after=d.cos_after, red_before=d.red_before, red_after=d.red_after, **d.details)
        if d.agrees:
            out.append(_finding(run, "preprocess", "error", r, f"input preprocessing: {d.title}",
                                f"Transforming the NPU input this way makes it match the golden input (cos "
                                f"{_f4(ev['cos_before'])} -> {d.cos_after:.4f}). Fix: {d.advice}.", ev))
        else:
            out.append(_finding(run, "preprocess", "warning", r, f"input preprocessing, partly: {d.title}",
                                f"This brings the inputs closer (cos {_f4(ev['cos_before'])} -> {d.cos_after:.4f}) "
                                f"but not within the thresholds; something else differs too. Try: {d.advice}.", ev))
    return out


def _f4(v) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"


# ------------------------------------------------------------------ introduced or inherited


def _origins(run: _Run, fw, previous: dict[str, dict]) -> list[OpOrigin] | None:
    """Origins of every op with a failing output row, in execution order (None when cancelled)."""
    c = run.c
    failing = [op for op, rows in run.ops.items() if any(run.fail[r] and c["io"][r] == "output" for r in rows)]
    run.previous = previous
    isolated, problems = {}, {}
    if fw is not None:
        done = _rerun(run, fw, failing)
        if done is None:
            return None
        isolated, problems = done
    failed = {**problems, **{op: i.problem for op, i in isolated.items() if i.problem}}
    if fw is not None and failed:
        op = next(o for o in failing if o in failed)
        why = failed[op]
        run.notes.append(f"{len(failed)} of {len(failing)} failing ops could not be re-run (first: {op}: {why}); "
                         "their origin comes from the input/output method")
    out = []
    for op in failing:
        iso = isolated.get(op)
        origin = _rerun_origin(run, op, iso) if iso is not None and not iso.problem else None
        if origin is None:
            why = (iso.problem if iso is not None else problems.get(op, ""))
            origin = _weak_origin(run, op, why)
        out.append(origin)
    return out


def _rerun(run: _Run, fw, ops: list[str]) -> tuple[dict, dict[str, str]] | None:
    """Re-run these ops (oprerun; cached ones from the last advice): op -> Isolated, and op -> why
    it could not be re-run. None when cancelled."""
    from accuscope.engine.diagnose.oprerun import Isolated, make_job, run_jobs
    c = run.c
    isolated: dict[str, Isolated] = {}
    problems: dict[str, str] = {}
    if run.npu_values is None:  # framework tensor -> the NPU side's value of it (an op output paired with it)
        run.npu_values = {}
        for p in run.plan.pairs:
            if p.golden is not None and p.npu.io == "output" and not p.npu.problem and not p.golden.problem:
                t = fw.tensor_of(p.golden)
                if t is not None:
                    run.npu_values.setdefault(t, (p.npu, p.golden))
    jobs = []
    for op in ops:
        rows = run.ops[op]
        pairs = [run.row_pair[r] for r in rows if run.row_pair[r] is not None]
        chain = [g for g in str(c["golden_op"][run.op_rows(op, "output")[0]]).split(",") if g]
        if not pairs or not chain or chain == ["*"]:
            problems[op] = "no framework counterpart" if chain == ["*"] else "no tensors of it in the dumps"
            continue
        try:
            job = make_job(fw, op, chain, pairs, run.plan.golden, run.npu_values)
        except SourceError as exc:
            problems[op] = str(exc)
            continue
        run.jobs[op] = job
        cached = run.previous.get(op)
        if cached and cached.get("key") == job.key and not cached.get("problem"):
            isolated[op] = Isolated.from_dict(cached)
            continue
        jobs.append(job)
    total, done = len(jobs), 0
    run.say("re-running ops", 0, total)
    for result in run_jobs(fw, jobs, run.workers, run.cancel):
        isolated[result.op] = result
        done += 1
        run.say("re-running ops", done, total)
    if run.cancelled:
        return None
    return isolated, problems


def _rerun_upstream(run: _Run, failing: list[str]) -> list[OpOrigin]:
    """The passing ops re-run (UPSTREAM_BUDGET of them, `_upstream_ops`), as origins marked
    row_passes: candidates for the culprit whose small error grew downstream."""
    done = _rerun(run, run.fw, _upstream_ops(run, failing))
    if done is None:
        return []
    found = []
    for op, iso in done[0].items():
        origin = _rerun_origin(run, op, iso) if not iso.problem else None
        if origin is not None:
            origin.evidence["row_passes"] = True
            found.append(origin)
    return found


UPSTREAM_BUDGET = 48  # passing ops re-run when the outputs fail: those whose error grows the most


def _upstream_ops(run: _Run, failing: list[str]) -> list[str]:
    """Passing ops worth a re-run when the outputs fail: a small error of their own (their row
    passes every threshold) may grow downstream into the failure. Those whose output error exceeds
    their worst input's by the most come first, UPSTREAM_BUDGET of them."""
    c = run.c
    skip = set(failing)
    scored = []
    for op, rows in run.ops.items():
        if op in skip:
            continue
        outs = [r for r in rows if c["io"][r] == "output" and not run.exempt[r] and not run.nf(r)]
        e_out = max((e for e in (run.error_of(r) for r in outs) if not math.isnan(e)), default=0.0)
        if not e_out > 0:
            continue
        e_in = max((e for e in (run.error_of(r) for r in rows if c["io"][r] == "input") if not math.isnan(e)),
                   default=0.0)
        if e_out > e_in:
            scored.append((e_out - e_in, rows[0], op))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [op for *_, op in scored[:UPSTREAM_BUDGET]]


def _rerun_origin(run: _Run, op: str, iso) -> OpOrigin | None:
    usable = [o for o in iso.outputs if "problem" not in o]
    if not usable:
        return None
    broken: list[str] = []
    for o in usable:
        for t in run.thresholds.items:
            v = o.get(t.key)
            if isinstance(v, (int, float)) and t.broken(np.array([float(v)]))[0] and t.key not in broken:
                broken.append(t.key)
        if o.get("npu_nonfinite", 0) > o.get("rerun_nonfinite", 0) and "npu_nonfinite" not in broken:
            broken.append("npu_nonfinite")
    coses = [o["cos"] for o in usable if isinstance(o.get("cos"), (int, float))]
    cos = min(coses) if coses else None
    gcos = [o["golden_cos"] for o in usable if isinstance(o.get("golden_cos"), (int, float))]
    ins = run.op_rows(op, "input")
    in_cos = [float(run.c["cos"][r]) for r in ins if not math.isnan(run.c["cos"][r])]
    ev = {"isolated_cos": cos, "rerun_vs_golden_cos": min(gcos) if gcos else None,
          "worst_input_cos": min(in_cos) if in_cos else None,
          "output_cos": _worst_cos(run, run.op_rows(op, "output")), "chain": iso.chain}
    if iso.fed_golden:
        ev["fed_from_golden"] = iso.fed_golden
    nf = [(o.get("npu_nonfinite", 0), o.get("rerun_nonfinite", 0)) for o in usable]
    if broken:
        if "npu_nonfinite" in broken:
            k = next(a for a, b in nf if a > b)
            why = (f"re-run on the same NPU inputs, the framework op stays finite, the NPU output holds {k} NaN/inf")
        else:
            why = (f"re-run on the same NPU inputs, the framework op gives another result (cos {_f4(cos)}; "
                   f"breaks {', '.join(broken)})")
        origin = "introduced"
    else:
        why = f"re-run on the same NPU inputs, the framework op reproduces the NPU output (cos {_f4(cos)})"
        origin = "inherited"
    return OpOrigin(op, run.op_rows(op, "output"), origin, "rerun", cos, broken, why, ev, iso.to_dict())


def _worst_cos(run: _Run, rows: list[int]) -> float | None:
    v = [float(run.c["cos"][r]) for r in rows if not math.isnan(run.c["cos"][r])]
    return min(v) if v else None


def _weak_origin(run: _Run, op: str, rerun_problem: str = "") -> OpOrigin:
    """Input-versus-output error: an output much worse than the worst input blames the op."""
    outs, ins = run.op_rows(op, "output"), run.op_rows(op, "input")
    ev: dict = {"output_cos": _worst_cos(run, outs), "worst_input_cos": _worst_cos(run, ins)}
    if rerun_problem:
        ev["rerun_problem"] = rerun_problem
    prefix = f"not re-run ({rerun_problem}); " if rerun_problem else ""
    out_nf, in_nf = any(run.nf(r) for r in outs), any(run.nf(r) for r in ins)
    if out_nf and not in_nf:
        return OpOrigin(op, outs, "introduced", "input-output", None, ["npu_nonfinite"],
                        prefix + "its output holds NaN/inf, its inputs do not", ev)
    if in_nf:
        return OpOrigin(op, outs, "inherited", "input-output", None, [], prefix + "an input already holds NaN/inf", ev)
    e_out = max((e for e in (run.error_of(r) for r in outs) if not math.isnan(e)), default=math.nan)
    e_in = max((e for e in (run.error_of(r) for r in ins) if not math.isnan(e)), default=math.nan)
    ev.update(output_error=e_out, worst_input_error=e_in)
    if math.isnan(e_out) or math.isnan(e_in):
        return OpOrigin(op, outs, "unknown", "", None, [],
                        prefix + ("no compared input to weigh its output against" if math.isnan(e_in)
                                  else "its output has no error measure"), ev)
    if e_out > WEAK_FACTOR * e_in and e_out - e_in > run.red_max:
        return OpOrigin(op, outs, "introduced", "input-output", None, [],
                        prefix + f"output error {e_out:.3g} against {e_in:.3g} at its worst input", ev)
    return OpOrigin(op, outs, "inherited", "input-output", None, [],
                    prefix + f"output error {e_out:.3g}, close to its worst input's {e_in:.3g}", ev)




def _effect(o: OpOrigin, run: _Run | None = None) -> float:
    """How much error an op introduced by itself: the larger of 1 - cos and the relative euclidean
    distance of its output against the framework op re-run on its own inputs; for NaN/inf it did not inherit, the
    share of elements that became NaN/inf; with the weak method, its output's error beyond its worst
    input's."""
    if "npu_nonfinite" in o.broken:
        if run is None or not o.rows:
            return 1.0
        r = o.rows[0]
        size = _size(str(run.c["shape"][r]))
        return min(1.0, float(run.c["npu_nonfinite"][r]) / size) if size else 1.0
    if o.isolated_cos is not None and not math.isnan(o.isolated_cos):
        reds = [x.get("red") for x in (o.isolated or {}).get("outputs", []) if isinstance(x.get("red"), (int, float))]
        return max([1.0 - o.isolated_cos] + [float(r) for r in reds if not math.isnan(r)])
    e_out, e_in = o.evidence.get("output_error"), o.evidence.get("worst_input_error")
    if isinstance(e_out, (int, float)) and isinstance(e_in, (int, float)):
        return max(float(e_out) - float(e_in), 0.0)
    return 0.0


def _size(shape: str) -> int:
    try:
        return math.prod(int(d) for d in shape.strip("[]()").split(",") if d.strip())
    except ValueError:
        return 0


def _introduced(run: _Run, origins: list[OpOrigin], net_inputs: list[int], findings: list[Finding]) -> list[Finding]:
    c = run.c
    intro = [o for o in origins if o.origin == "introduced"]
    for o in intro:
        if o.broken and set(o.broken) <= judgement.NOISY:
            o.why += ("; it breaks only mean_rel, the mean relative error, which is large where golden values are "
                      "near zero: not a sign of a wrong op")
    # re-run evidence ranks by the error each op made; the weak method's output-versus-input errors
    # mostly measure amplification, so among those execution order stays
    candidates = [o for o in intro if not (o.broken and set(o.broken) <= judgement.NOISY)]
    ranked = sorted(candidates, key=lambda o: (o.method != "rerun", -_effect(o, run) if o.method == "rerun"
                                               else candidates.index(o)))
    # the other re-run ops (breaking only mean_rel, reproducing a failing row, passing upstream) whose
    # own error is the largest: small local errors that may grow into the output's failure
    others = _measure_reach(run, ranked, origins)
    listed = {id(o) for o in origins}
    for o in _grown(run, others):  # the measured effect on the outputs decides, not the row's thresholds
        ranked.append(o)
        if id(o) not in listed:
            origins.append(o)
    if run.reach:  # how far each one's own error reaches the outputs decides, its local size breaks ties
        ranked.sort(key=lambda o: (o.op not in run.reach, -run.reach.get(o.op, 0.0)))
    # with a third side, ops beyond the precision's own noise first, unless the outputs' error is the
    # precision's own: then the ops it breaks explain the outputs (those beyond it are hidden there, and the
    # verdict names them)
    if "excess" in run.table.present and judgement.verdict(run.table, run.thresholds, run.task.step).cause != "precision":
        ranked.sort(key=lambda o: _branch(run, o)[0] == "precision")
    if ranked:
        o = ranked[0]
        r = o.rows[0]
        typ = str(c["type"][r])
        if "npu_nonfinite" in o.broken:
            todo = "It overflows where the framework does not: keep it in float32 or scale its inputs down."
        elif typ in WEIGHTED_TYPES:
            todo = ("Check how its weights are quantized (per-channel scales, calibration data) or run it in "
                    "higher precision, then compare again.")
        else:
            todo = "Run it in higher precision or check its device implementation, then compare again."
        weak = o.method == "input-output"
        ev = {**o.evidence, "method": o.method, "introduced_ops": len(intro), "effect": _effect(o, run),
              "also": [x.op for x in ranked[1:6]]}
        if o.op in run.reach:
            ev["output_cos_alone"] = 1.0 - run.reach[o.op]
        changes = _model_changes(run, o)
        if changes:
            from accuscope.engine.diagnose.modeldiff import ADVICE
            todo = f"Why: {'; '.join(d.text for d in changes)}. So {ADVICE[changes[0].cause]}, then compare again."
            ev["changes"] = [d.text for d in changes]
            ev["cause"] = changes[0].cause
        text = f"{o.why[:1].upper()}{o.why[1:]}. "
        branch, excess = _branch(run, o)
        if branch:
            ev.update(branch=branch, excess=excess)
            todo = ("The precision itself: the reference at the candidate's precision (--expected) shows this op's "
                    f"error too ({excess:.3g} times it here), so the op does not suit the precision: keep it in higher "
                    "precision (for a quantized model, run the sensitivity analysis), then compare again."
                    if branch == "precision" else
                    f"The implementation: {excess:.3g} times the error the reference at the candidate's precision "
                    f"(--expected) gives. {todo}")
        if o.op in run.reach:
            text += (f"With only this op's own error, the reference model's output reaches cos "
                     f"{_f4(1.0 - run.reach[o.op])}. ")
        if run.outcome == "fail":
            severity, title = "error", f"{o.op} introduced the error" + (" (input/output heuristic)" if weak else "")
            text += todo
        elif run.outcome == "pass" and _is_msprobe(run):
            severity, title = "info", f"{o.op} deviates locally; the step matches"
            text += "No compared tensor of the step breaks the thresholds."
        elif run.outcome == "pass":
            severity, title = "info", f"{o.op} deviates locally; the network output passes"
            text += "Its error does not reach the network outputs beyond the thresholds: act only if the application's " \
                    "result is wrong."
        else:
            severity, title = "warning", f"{o.op} introduced an error (its effect on the outputs is unknown)"
            text += todo
        if len(ranked) > 1:
            text += (f" {len(ranked) - 1} other op(s) introduced less error: "
                     + ", ".join(f"{x.op} ({_effect_text(x, run)})" for x in ranked[1:4]) + ".")
        return [_finding(run, "introduced", severity, r, title, text, ev)]
    failing_rows = np.flatnonzero(run.fail)
    if not origins or not len(failing_rows):
        return []
    known = [o for o in origins if o.origin != "unknown"]
    if not known:
        return []
    first = int(failing_rows[0])
    bad_input = any(f.rule in ("ms.input_mismatch", "preprocess") for f in findings)
    if bad_input or (first in net_inputs):
        text = ("No operator introduced error: every failing op reproduces its NPU output from its NPU inputs, "
                "so the error enters with the network input. Fix the input first.")
    else:
        text = ("No operator introduced error beyond the thresholds; the deviations build up from small ones "
                f"({_precision_word(run)} across many ops). Tighten the thresholds to find the largest "
                "contributors, or run the failing region in higher precision.")
    return [_finding(run, "no_op_introduced", "warning", first, "the failing ops only inherit their error", text,
                     {"failing_ops": len(origins), "inherited": sum(o.origin == "inherited" for o in origins),
                      "unknown": sum(o.origin == "unknown" for o in origins)})]


def _beyond_expected(run: _Run) -> list[Finding]:
    """With a third side: the first row whose error leaves the precision's own (judgement's
    first_beyond): every earlier row is within twice what the reference at the candidate's precision
    gives, so the implementation starts adding error at this op."""
    r = run.state.first_beyond
    if r is None:
        return []
    c = run.c
    v = judgement.verdict(run.table, run.thresholds, run.task.step)
    own = max(1.0 - c["cos"][r] if not math.isnan(c["cos"][r]) else 0.0, c["red"][r] if not math.isnan(c["red"][r]) else 0.0)
    severity = {"implementation": "error", "precision": "warning"}.get(v.cause, "info")
    after = {"implementation": " The outputs err beyond the precision's own too: start here.",
             "precision": " The outputs' error is the precision's own and hides this one: it shows once the ops the "
                          "precision breaks are kept in higher precision.",
             }.get(v.cause, " The outputs pass.")
    return [_finding(run, "beyond_expected", severity, r, f"{c['npu_op'][r]}: error {c['excess'][r]:.3g} times the "
                     "precision's own", f"Every earlier row stays within twice the error the reference at the candidate's "
                     f"precision (--expected) gives; here the candidate's error ({_f4(own)}, max(1 - cos, red)) is "
                     f"{c['excess'][r]:.3g} times it ({_f4(c['exp_err'][r])}). So the implementation adds error at this "
                     "op (a kernel, a fused pattern, the conversion's settings), not the precision: check it first."
                     + after, {"excess": c["excess"][r], "expected_error": c["exp_err"][r], "error": own,
                               "passes": not bool(run.fail[r])})]


def _branch(run: _Run, o: OpOrigin) -> tuple[str, float]:
    """("precision" | "implementation", excess) of an op's output rows with a third side (the
    largest excess among them decides); ("", NaN) without one or where it is unknown."""
    if "excess" not in run.table.present:
        return "", math.nan
    values = [float(run.c["excess"][r]) for r in o.rows if r < run.n and not math.isnan(run.c["excess"][r])]
    if not values:
        return "", math.nan
    worst = max(values)
    return ("precision" if worst <= EXCESS_LIMIT else "implementation"), worst


REACH_TOP = 5  # introduced ops whose reach to the outputs is measured (one run of the reference model each)
REACH_OTHERS = 6  # and other re-run ops, those with the largest own error


def _measure_reach(run: _Run, ranked: list[OpOrigin], origins: list[OpOrigin]) -> list[OpOrigin]:
    """The output effect of the largest local errors, each alone (diagnose.reach), when the
    outputs fail and the reference model and golden network data are at hand: of the introduced
    ops first; when none of them explains CLIFF_SHARE of the output's error, of the small errors
    that may have grown into it too: the other re-run ops (breaking only mean_rel, reproducing a
    failing row) and passing ops re-run now, REACH_OTHERS of them with the largest own error. Returns
    those others."""
    if run.outcome != "fail" or run.fw is None or run.plan is None:
        return []
    first = [o for o in ranked if o.method == "rerun" and o.op in run.jobs][:REACH_TOP]
    _reach_of(run, first)
    if run.reach and max(run.reach.values()) >= CLIFF_SHARE * _output_error(run):
        return []  # an op that broke a threshold explains the output: the small errors are not the cause
    taken = {id(o) for o in ranked}
    pool = [o for o in origins if o.method == "rerun" and id(o) not in taken]
    if not run.cancelled:
        pool += _rerun_upstream(run, [o.op for o in origins])
    others = sorted((o for o in pool if _effect(o, run) > 0), key=lambda o: -_effect(o, run))[:REACH_OTHERS]
    _reach_of(run, [o for o in others if o.op in run.jobs])
    return others


def _reach_of(run: _Run, chosen: list[OpOrigin]) -> None:
    from accuscope.engine.diagnose.reach import output_effects
    if not chosen:
        return
    try:
        found = output_effects(run.fw, [run.jobs[o.op] for o in chosen], run.plan.golden, lambda: run.cancelled)
    except Exception as exc:  # noqa: BLE001 - onnx/onnxruntime raise their own exception types
        run.notes.append(f"could not measure how far the ops' errors reach the outputs: {str(exc)[:200]}")
        return
    for o in chosen:
        effect = found.get(o.op)
        if isinstance(effect, float):
            run.reach[o.op] = effect
            o.evidence["output_cos_alone"] = 1.0 - effect  # kept in advice.json (the sensitivity ranking)
        elif effect is not None:
            run.notes.append(f"could not measure how far {o.op}'s error reaches the outputs: {effect[:200]}")


def _output_error(run: _Run) -> float:
    """1 - cos of the worst judged network output (0 when none has a cos)."""
    v = judgement.verdict(run.table, run.thresholds)
    coses = [float(run.c["cos"][r]) for r in v.judged if not math.isnan(run.c["cos"][r])]
    return 1.0 - min(coses) if coses else 0.0


def _grown(run: _Run, others: list[OpOrigin]) -> list[OpOrigin]:
    """Of the ops whose own error broke no threshold that counts (a passing row, a re-run within the
    thresholds, only mean_rel broken), those whose error alone makes at least CLIFF_SHARE of the
    output's: they introduced the error, which grew downstream. Relabelled so, worst first."""
    out_bad = _output_error(run)
    found = [o for o in others if o.op in run.reach and out_bad > 0 and run.reach[o.op] >= CLIFF_SHARE * out_bad]
    for o in found:
        alone = 1.0 - run.reach[o.op]
        where = ("its row passes every threshold" if o.evidence.get("row_passes") else
                 "it breaks only mean_rel" if o.broken and set(o.broken) <= judgement.NOISY else
                 "its re-run stays within the thresholds")
        o.origin = "introduced"
        o.why = (f"re-run on the same NPU inputs, the framework op gives a slightly different result (cos "
                 f"{_f4(o.isolated_cos)}; {where}), an error that grows downstream (alone, the output's cos "
                 f"{_f4(alone)})")
        o.evidence["grows_downstream"] = True
    return sorted(found, key=lambda o: -run.reach[o.op])


def _model_changes(run: _Run, o: OpOrigin) -> list:
    """What the conversion changed in the op, when both models are ONNX files at hand: the
    reference (the re-runs' framework model) and the candidate (the NPU side's own model)."""
    side = run.plan.npu if run.plan is not None else None
    cand = side.graph if side is not None else None
    if run.fw_path is None or cand is None or cand.kind != "onnx":
        return []
    from accuscope.engine.diagnose.modeldiff import ModelView, differences
    pair = run.row_pair[o.rows[0]] if o.rows else None
    try:
        if not hasattr(run, "_views"):
            run._views = (ModelView(str(run.fw_path)), ModelView(cand.path))
        ref, new = run._views
        found = differences(ref, new, o.op, pair.npu.tensor_name if pair is not None else "")
    except Exception as exc:  # noqa: BLE001 - an explanation we cannot give is a note, not a failure
        run.notes.append(f"could not compare the two models' parameters of {o.op}: {exc}")
        return []
    order = ["fp16_range", "quantized", "attribute", "replaced", "dtype"]
    return sorted(found, key=lambda d: order.index(d.cause))


class OpMeasure:
    """The advisor's measures of one advised op, for readers of an Advice (the sensitivity ranking):
    `effect` (the op's own error, as the advisor ranks by) and `changes` (what the conversion changed
    in it, when both ONNX models are at hand; opens the task's dumps on first use)."""

    def __init__(self, task: Task, framework_model: str | os.PathLike | None):
        self._run = _Run(task, None, None, 1)
        self._run.fw_path = Path(framework_model) if framework_model else None
        self._opened = False

    @property
    def notes(self) -> list[str]:
        return self._run.notes

    def effect(self, o: OpOrigin) -> float:
        return _effect(o, self._run)

    def changes(self, o: OpOrigin) -> list:
        if self._run.fw_path is None:
            return []
        if not self._opened:
            self._opened = True
            self._run.open_sources()
        return _model_changes(self._run, o)


def _effect_text(o: OpOrigin, run: _Run) -> str:
    if "npu_nonfinite" in o.broken:
        return f"{100 * _effect(o, run):.2g}% of its output NaN/inf"
    return f"isolated cos {_f4(o.isolated_cos)}" if o.isolated_cos is not None else f"+{_effect(o, run):.3g} rel. error"


def _overflow_branch(run: _Run, r: int, ev: dict) -> str:
    """With a third side (--expected, expected.excess_cells): whether the reference at the candidate's
    precision overflows at row r too (the precision's own overflow) or not (the implementation's); the
    branch joins `ev`. "" without one."""
    if "excess" not in run.table.present or math.isnan(excess := float(run.c["excess"][r])):
        return ""
    ev["branch"] = "precision" if excess <= EXCESS_LIMIT else "implementation"
    if ev["branch"] == "precision":
        return ("The precision itself: the reference at the candidate's precision (--expected) overflows here too "
                f"({excess:.2f} times its NaN/inf count), so the op does not suit it. ")
    return ("The implementation: the reference at the candidate's precision (--expected) does not overflow here, so "
            "the device's kernel (or its fused pattern) does: check it first. ")


def _nonfinite_origin(run: _Run, origins: list[OpOrigin]) -> list[Finding]:
    c = run.c
    rows = np.flatnonzero(run.nonfinite & ~c["is_npu_only"])
    if not len(rows):
        return []
    by_op = {o.op: o for o in origins}
    for op, op_rows in run.ops.items():
        outs = [r for r in op_rows if c["io"][r] == "output" and run.nf(r)]
        if not outs:
            continue
        ins = [r for r in op_rows if c["io"][r] == "input"]
        if any(run.nf(r) for r in ins):
            continue
        r = outs[0]
        typ = str(c["type"][r])
        cause = ("a division by zero or the log/sqrt of a non-positive number, or an overflow"
                 if typ in INVALID_TYPES and typ != "Pow" else "an overflow (|x| > 65504 in float16)")
        ev = {"npu_nonfinite": int(c["npu_nonfinite"][r]), "golden_nonfinite": max(int(c["golden_nonfinite"][r]), 0),
              "inputs_nonfinite": [max(int(c["npu_nonfinite"][i]), 0) for i in ins]}
        o = by_op.get(op)
        if o is not None and o.isolated:
            ev["rerun_nonfinite"] = [x.get("rerun_nonfinite") for x in o.isolated.get("outputs", [])]
        return [_finding(run, "nonfinite_origin", "error", r, f"NaN/inf first appears in {op}",
                         f"Its inputs are finite, its output holds {ev['npu_nonfinite']} NaN/inf (golden: "
                         f"{ev['golden_nonfinite']}): {cause} inside this op. " + _overflow_branch(run, r, ev)
                         + "Keep it in float32 or scale its inputs down; the NaN/inf after it are inherited.", ev)]
    r = int(rows[0])
    return [_finding(run, "nonfinite_origin", "error", r, f"NaN/inf already in the inputs of {c['npu_op'][r]}",
                     "No compared op turns finite inputs into NaN/inf: they come from the network input or from "
                     "ops outside the compared range. Check the input data, or compare the whole network.",
                     {"npu_nonfinite": int(c["npu_nonfinite"][r])})]


def _weak_note(fw_path, fw_loaded: bool) -> Finding:
    why = ("the dumps could not be opened" if fw_loaded else
           "the framework model could not be read" if fw_path else "no framework ONNX model was found")
    return Finding("method", "info", "origins judged by the weaker input/output method",
                   f"Ops were not re-run ({why}): an op is blamed when its output error is much larger than its "
                   "inputs', which misjudges ops that amplify errors (Softmax, normalization, division by small "
                   "values). Give the framework model with --framework-model FILE.onnx (or framework_model in "
                   "task.json) for a re-run of each failing op on the NPU's inputs.",
                   evidence={"framework_model": str(fw_path) if fw_path else None})


# ------------------------------------------------------------------ graph helpers


def _is_network_input(graph, tensor: str) -> bool:
    """Whether `tensor` is a network input, through inserted ops (those standing for no framework op)."""
    for t, found in walk_back(graph, tensor):
        if t in graph.inputs:
            return True
        if found is not None and found[0].type in INPUT_TYPES:
            return True
        if found is None or found[0].fused not in (None, []):
            return False
    return False
