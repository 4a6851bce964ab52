"""What every advisor rule reads: one `Context` per advise() call (the task, its table and row
state, the thresholds, the dumps' pairs, the framework model) and the facts advise() gathers before the
first rule runs (network input rows, the float16 overflow scan, each failing op's origin), plus the
facts rules hand to the rules after them (`outcome`, `reach`, `grown`: rule.Rule.writes). FACTS names
those gathered first; a rule declares which of them it reads (rule.Rule.reads).

The small text helpers every rule's findings use live here too (`finding`, `f4`, `pct`,
`precision_word`), and `is_step_based`: whether the task is a step of msprobe calls rather than a model.
"""
# lazy: engine.sides.registry
from __future__ import annotations

import math
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from accuscope.engine.compare import judgement
from accuscope.engine.compare.columns import COMPUTED_FLOATS
from accuscope.engine.compare.judgement import WHOLE_LIMITS
from accuscope.engine.diagnose.advice import Finding, OpOrigin, jsonable
from accuscope.engine.graphs.optypes import INPUT_TYPES, walk_back
from accuscope.engine.progress import OnProgress, Reporter
from accuscope.engine.sources.names import parse_tensor_name
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import Task

if TYPE_CHECKING:
    from accuscope.engine.compare.comparison import Plan
    from accuscope.engine.compare.results import ResultTable
    from accuscope.engine.compare.thresholds import Thresholds
    from accuscope.engine.diagnose.oprerun import FrameworkModel
    from accuscope.engine.graphs.graph import Graph

SEVERITIES = ("error", "warning", "info")
CLIFF_SHARE = 0.5  # one step of the error series adding this share of its maximum is a cliff, not a drift
# the facts known before the first rule runs (Context attributes a rule may read: rule.Rule.reads)
FACTS = frozenset({"task", "table", "state", "thresholds", "graph", "plan", "fw", "net_inputs", "overflow",
                   "origins", "one_run", "method"})


class Context:
    """What one advise() call knows, typed: the task and its rows, the facts gathered before the rules
    (FACTS) and those rules hand on (`outcome`, `reach`, `grown`)."""

    def __init__(self, task: Task, progress: OnProgress | None, cancel: threading.Event | None,
                 workers: int | None):
        table, thresholds = task.result
        self.task = task
        self.folder = task.folder
        self.table: ResultTable = table
        self.c = table.columns
        self.n = len(table)
        self.thresholds: Thresholds = thresholds
        self.progress = progress
        self.cancel = cancel
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.notes: list[str] = []
        self.timings: dict[str, float] = {}
        self.graph: Graph | None = None
        self.plan: Plan | None = None
        self.row_pair: list = [None] * self.n
        self.ops: dict[str, list[int]] = {}
        for i, op in enumerate(self.c["npu_op"].tolist()):
            self.ops.setdefault(op, []).append(i)
        self.state = judgement.evaluate(self.table, self.thresholds)  # the rows as the op table and the CSV see them
        self.fail, self.exempt, self.nonfinite = self.state.fail, self.state.exempt, self.state.nonfinite
        t = self.thresholds.get("cos")  # the user's limits, else the judgement's whole-tensor ones (msit's)
        self.cos_min = t.value if t is not None and t.op == "<" else WHOLE_LIMITS["cos"]
        t = self.thresholds.get("red")
        self.red_max = t.value if t is not None and t.op == ">" else WHOLE_LIMITS["red"]
        self.outcome = "unknown"  # the verdict on the network outputs: "pass", "fail" or "unknown"
        self.fw_path: Path | None = None  # the framework (reference) model the re-runs use
        self.fw_found: Path | None = None  # the framework model found or given, whether or not it was read
        self.fw: FrameworkModel | None = None
        self.jobs: dict = {}  # op -> its re-run job (oprerun.RerunJob)
        self.reach: dict[str, float] = {}  # op -> 1 - cos of the outputs with only its own error in
        self.npu_values: dict | None = None  # framework tensor -> (NPU tensor, golden tensor), for re-runs
        self.previous: dict[str, dict] = {}  # the last advice's re-runs, by op
        self.views: tuple | None = None  # the reference and candidate ONNX models' parameters (modeldiff), read once
        # the facts advise() gathers before the first rule runs
        self.net_inputs: list[int] = []  # network input rows (network_input_rows)
        self.overflow: tuple[int, dict] | None = None  # the first float16 overflow (mindstudio.overflow_scan)
        self.origins: list[OpOrigin] = []  # each failing op's origin, in execution order (origins.find_origins)
        self.one_run = True  # the table holds one run (not several ranks holding the same op names)
        # handed on by rules (rule.Rule.writes)
        self.grown: list[OpOrigin] = []  # passing ops whose small error grew into the output's (introduced)
        self.findings: tuple[Finding, ...] = ()  # the findings of the rules run so far (rule.run_rules sets it)

    @property
    def method(self) -> str:
        """How origins were judged: "rerun" (the framework ops re-run on the NPU inputs), "reported" (the dump
        tool's own single-layer figures: RKNN's error_analysis.txt, origins.REPORTED_COS) or "input-output"."""
        if self.fw is not None and self.plan is not None:
            return "rerun"
        return "reported" if "rknn_single_cos" in self.table.present else "input-output"

    def say(self, stage: str, done: int = 0, total: int = 0) -> None:
        Reporter(self.progress)(stage, done, total)

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


def finding(run: Context, rule: str, severity: str, row: int | None, title: str, text: str,
             evidence: dict | None = None) -> Finding:
    """A finding of `rule` (its name constant), about `row` (its op and tensor named; None: no row)."""
    op = tensor = ""
    if row is not None:
        op, tensor = str(run.c["npu_op"][row]), str(run.c["tensor"][row])
    return Finding(rule, severity, title, text, row, op, tensor, jsonable(evidence or {}))


def f4(v) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"


def pct(x: float) -> str:
    return f"{100 * x:.2g}%"


QUANTIZED_TYPES = {"ConvInteger", "MatMulInteger", "QLinearConv", "QLinearMatMul", "DynamicQuantizeLinear",
                   "QuantizeLinear", "DequantizeLinear", "AscendQuant", "AscendDequant"}


def precision_word(run: Context) -> str:
    """What kind of small errors add up here, from the NPU side's dtypes and op types."""
    types = set(run.c["type"].tolist())
    dtypes = {str(d).lower().replace("dt_", "") for d in run.c["npu_dtype"].tolist()}
    if types & QUANTIZED_TYPES or dtypes & {"int8", "uint8", "int4"}:
        return "quantization error"
    if dtypes & {"float16", "bfloat16"}:
        return f"{'bfloat16' if 'bfloat16' in dtypes else 'float16'} rounding"
    return "small per-op error"


def is_step_based(run: Context) -> bool:
    """The task's NPU side is a training step's calls (msprobe: `Capabilities.step_based`)."""
    from accuscope.engine.sides.registry import capabilities, detect
    kind = run.task.doc.sides.get("npu")
    if kind == "ranks":  # a rank tree an earlier accuscope compared: what its folders hold
        try:
            kind = detect(str(run.task.path("npu") or "")).kind
        except (SourceError, OSError):
            return False
    return capabilities(kind or "").step_based


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
