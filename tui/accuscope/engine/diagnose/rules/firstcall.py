"""The first_call rule: msprobe dumps (the calls of a training/LLM step): the first call whose inputs
agree and outputs do not, per rank (diagnose.firstdiff); `near_zero` says when a failing row differs
only where the reference is near zero (the step verdict uses it too)."""
# lazy: engine.sources.torchpickle
from __future__ import annotations

import math
import os

import numpy as np

from accuscope.engine.compare import judgement
from accuscope.engine.diagnose import firstdiff
from accuscope.engine.diagnose.advice import Finding
from accuscope.engine.diagnose.rules.context import Context, finding, is_step_based
from accuscope.engine.diagnose.rules.rule import Rule

FIRST_CALL = "first_call"


def first_call(run: Context) -> list[Finding]:
    """msprobe dumps (calls of a training/LLM step): the first call whose inputs agree and outputs
    do not, per rank, and across ranks when the task holds several."""
    if not is_step_based(run):
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
    near = near_zero(run, first.row)
    if near:
        evidence["near_zero"] = near
        return [finding(run, FIRST_CALL, "warning", first.row, f"{first.call}{where} is the first call that "
                         "differs, on values near zero", f"Its inputs agree with the reference and its outputs differ "
                         f"only where the reference is near zero ({near}): rounding of values the reference holds at "
                         "~0 (a gradient that cancels, a lower precision that cannot hold 1e-9), not a wrong call. "
                         "Judge it by cos or max_abs, or raise mean_rel's threshold, to see whether a later call "
                         "diverges." + (text[text.index(" Diverging:"):] if " Diverging:" in text else ""),
                         evidence)]
    return [finding(run, FIRST_CALL, "error", first.row, f"{first.call}{where} is the first call that diverges",
                     text, evidence)]


NEAR_ZERO = 1e-6  # reference values this small, or this small against the tensor's largest, are near zero


RELATIVE = {"mean_rel", "max_rel"}  # metrics a near-zero reference value alone can break


NEAR_ZERO_BYTES = 64 << 20  # a reference tensor file up to this size is read to see its magnitudes


def near_zero(run: Context, row: int) -> str:
    """How a failing row's reference values are near zero, "" when they are not (or nothing says):
    all of them (max |golden| below NEAR_ZERO), or some, when the row breaks only relative metrics. From
    the golden tensor file (msprobe's .pt / .npy), else from msprobe's statistics columns."""
    c = run.c
    broken = set(judgement.broken_keys(run.table, run.thresholds, row))
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


RULE = Rule(FIRST_CALL, first_call, reads=("task", "table", "thresholds"))
