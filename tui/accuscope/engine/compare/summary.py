"""What a task's result says at a glance: counts and the first failing op in execution order.

The advisor (metrics.md section 5) explains causes; this is the plain account it builds on.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accuscope.engine.compare import judgement
from accuscope.engine.compare.columns import TPU_VERDICTS
from accuscope.engine.compare.judgement import Basis, Verdict, verdict
from accuscope.engine.compare.results import ResultTable
from accuscope.engine.compare.thresholds import Thresholds


@dataclass
class Summary:
    rows: int
    failing: int
    not_compared: int  # rows with a reason and no metric value
    nonfinite: int  # rows whose NPU tensor holds NaN/inf
    first_failing: int | None  # table row, the earliest in execution order
    broken: list[str]  # thresholds that row breaks, e.g. "cos 0.912 < 0.99"; none turned off
    first_text: str = ""  # "#12 Conv2D: cos 0.912 < 0.99, kl 0.02 > 0.005 · conv1", "" without one
    judged: str = ""  # how rows were judged when not by msit's thresholds (tpu-mlir's --tolerance)
    verdict: Verdict | None = None  # on the network outputs, or a step's calls (judgement.verdict)
    device_only: int = 0  # of not_compared: ops the conversion inserted, with no counterpart by construction

    def counts_text(self) -> str:
        """`3/120 rows fail` or `none of 120 rows breaks a threshold`."""
        if self.first_failing is None:
            return f"none of {self.rows:,} rows breaks a threshold"
        return f"{self.failing:,}/{self.rows:,} rows fail"


def summarize(table: ResultTable, thresholds: Thresholds, basis: Basis | None = None) -> Summary:
    """The account of `table` under `thresholds` (not its `fail` column, which may be from others);
    `basis`: what the verdict rests on besides them (a step's calls, inputs not read: judgement.Basis)."""
    n = len(table)
    state = judgement.evaluate(table, thresholds)
    failing = np.flatnonzero(state.fail)
    first = state.first_failing
    broken = judgement.broken_texts(table, thresholds, first) if first is not None else []
    not_compared = int(state.not_compared.sum()) if table.metric_keys else 0
    device_only = int(state.device_only.sum()) if table.metric_keys else 0
    nonfinite = int((table.columns["npu_nonfinite"] > 0).sum())
    text = ""
    if first is not None:  # the metrics before the op's name: a narrow screen cuts the end
        c = table.columns
        kind = c["type"][first] or c["npu_op"][first]  # an msprobe API call belongs to no module: its name
        text = f"#{c['index'][first]} {kind}: {', '.join(broken)} · {c['npu_op'][first]}"
    v = verdict(table, thresholds, basis)
    judged = " · ".join(filter(None, [judged_text(state, thresholds), expected_text(table, state, v),
                                      floor_text(state)]))
    return Summary(n, len(failing), not_compared, nonfinite, first, broken, text, judged, v, device_only)


def expected_text(table: ResultTable, state, v: Verdict) -> str:
    """`against the precision's own noise (--expected): 40 of 52 failing rows within twice their
    expected error; the outputs' error is the precision's own` with a third side, else ""."""
    if "excess" not in table.present:
        return ""
    known = int((~np.isnan(table.numbers("excess")) & state.fail).sum())
    text = (f"against the precision's own noise (--expected): {int(state.expected.sum()):,} of {int(state.fail.sum()):,} "
            f"failing rows within twice their expected error ({known:,} with one)")
    if v.cause == "precision":
        text += "; the outputs' error is the precision's own: keep ops in higher precision"
    elif v.cause == "implementation":
        text += "; the outputs err beyond what the precision itself gives: the implementation"
    return text


def floor_text(state) -> str:
    """`3 rows break thresholds only at the noise floor of their computation (...): noise, not failures`, else ""."""
    n = int(state.floor.sum()) if state.floor is not None else 0
    if not n:
        return ""
    return (f"{n:,} row{'s' * (n != 1)} break thresholds only at the noise floor of their computation (reference "
            "values zero in exact arithmetic, the error rounding at the scale of the operands): noise, not failures")


def judged_text(state, thresholds: Thresholds) -> str:
    """`judged as tpu-mlir's npz_tool compare --tolerance 0.99,0.99: EQUAL 3 · CLOSE 80 · SIMILAR 8 ·
    NOT_SIMILAR 0` when the thresholds are tpu-mlir's (its ladder decides), else ""."""
    if not thresholds.ladder or state.tpu_verdict is None:
        return ""
    words, counts = np.unique(state.tpu_verdict[state.tpu_verdict != ""], return_counts=True)
    found = dict(zip(words.tolist(), counts.tolist()))
    ladder = " · ".join(f"{w} {found.get(w, 0):,}" for w in TPU_VERDICTS)
    extra = [str(t) for t in thresholds.items if t.key not in ("cos", "euclid_sim")]
    return (f"judged as tpu-mlir's npz_tool compare --tolerance {thresholds.tolerance_text()} (fails: NOT_SIMILAR"
            + (f"; also {', '.join(extra)}" if extra else "") + f"): {ladder}")
