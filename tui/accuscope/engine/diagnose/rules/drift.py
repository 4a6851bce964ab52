"""The drift rule: no single op explains a failing output, the error grows a little at each of many
ops. When it finds one, the introduced-op finding is told so (`demote`: its op introduced the most
error, but no single op explains the output)."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from accuscope.engine.compare import judgement
from accuscope.engine.diagnose.advice import Finding
from accuscope.engine.diagnose.rules.context import CLIFF_SHARE, Context, f4, finding, pct, precision_word
from accuscope.engine.diagnose.rules.introduced import INTRODUCED
from accuscope.engine.diagnose.rules.origins import effect
from accuscope.engine.diagnose.rules.rule import Rule

DRIFT = "drift"
DRIFT_START = 0.1  # a drift starts where the error first reaches this share of the output's


DOMINANT = 2.0  # an op whose own error is this many times the next one's is the cause by itself


MANY = 4  # this many ops with errors within DOMINANT of the largest make a drift


def drift(run: Context) -> list[Finding]:
    """When no single op explains a failing output but the error grows a little at each of many
    ops: say so, where it starts, and how it grows (the series is in the evidence, for a chart).
    Measured with the metric the output breaks: 1 - cos first (bounded where relative errors
    explode, at a Sigmoid's outputs near zero), else the relative euclidean distance."""
    if run.outcome != "fail" or not run.one_run:
        return []
    origins = run.origins
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
    effects = sorted((effect(o, run) for o in origins if o.origin == "introduced" and o.method == "rerun"
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
        return f"cos down to {f4(1.0 - v)}" if key == "cos" else f"{words} up to {pct(v)}"
    growth = ", ".join(f"{told(level[k])} by {c['npu_op'][rows[k]]} (#{rows[k]})" for k in picks)
    growth += f", {words} {f4(c['cos'][out]) if key == 'cos' else pct(final)} at the output"
    step = max(1, len(rows) // 60)
    series = [[rows[k], float(err[k])] for k in range(0, len(rows), step)]
    return [finding(run, DRIFT, "error", rows[start], f"gradual drift from {c['npu_op'][rows[start]]}",
                     f"No single op explains the output's error: it grows a little at each of many ops ({growth}; "
                     f"the largest single step adds {steps[biggest]:.2g}). This is accumulated "
                     f"{precision_word(run)} across a region: keep that region in higher precision (or calibrate "
                     "it) rather than one op.",
                     {"metric": key, "growth": series, "largest_step": float(steps[biggest]),
                      "start_row": rows[start], "output_error": final})]


def demote(run: Context, findings: list[Finding]) -> list[Finding]:
    """The many small introductions are the drift, not one culprit."""
    return [replace(f, severity="warning", title=f"{f.op} introduced the most error, but no single op "
                    "explains the output") if f.rule == INTRODUCED else f for f in findings]


RULE = Rule(DRIFT, drift, reads=("one_run", "outcome", "origins", "grown", "reach", "state", "thresholds", "table",
                                 INTRODUCED), revise=demote)
