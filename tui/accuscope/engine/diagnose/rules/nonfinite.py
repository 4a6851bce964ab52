"""The nonfinite_origin rule: the first op whose output holds NaN/inf while its inputs do not."""
from __future__ import annotations

import math

import numpy as np

from accuscope.engine.compare.expected import EXCESS_LIMIT
from accuscope.engine.diagnose.advice import Finding
from accuscope.engine.diagnose.rules.context import Context, finding
from accuscope.engine.diagnose.rules.rule import Rule

NONFINITE_ORIGIN = "nonfinite_origin"
INVALID_TYPES = {"Div", "RealDiv", "Log", "Sqrt", "Rsqrt", "Reciprocal", "Pow"}


def _overflow_branch(run: Context, r: int, ev: dict) -> str:
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


def nonfinite_origin(run: Context) -> list[Finding]:
    origins = run.origins
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
        return [finding(run, NONFINITE_ORIGIN, "error", r, f"NaN/inf first appears in {op}",
                         f"Its inputs are finite, its output holds {ev['npu_nonfinite']} NaN/inf (golden: "
                         f"{ev['golden_nonfinite']}): {cause} inside this op. " + _overflow_branch(run, r, ev)
                         + "Keep it in float32 or scale its inputs down; the NaN/inf after it are inherited.", ev)]
    r = int(rows[0])
    return [finding(run, NONFINITE_ORIGIN, "error", r, f"NaN/inf already in the inputs of {c['npu_op'][r]}",
                     "No compared op turns finite inputs into NaN/inf: they come from the network input or from "
                     "ops outside the compared range. Check the input data, or compare the whole network.",
                     {"npu_nonfinite": int(c["npu_nonfinite"][r])})]


RULE = Rule(NONFINITE_ORIGIN, nonfinite_origin, reads=("table", "state", "origins"))
