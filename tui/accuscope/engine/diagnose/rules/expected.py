"""The beyond_expected rule: with a third side (--expected), the first row whose error leaves the
precision's own (judgement's first_beyond)."""
from __future__ import annotations

import math

from accuscope.engine.compare import judgement
from accuscope.engine.diagnose.advice import Finding
from accuscope.engine.diagnose.rules.context import Context, f4, finding
from accuscope.engine.diagnose.rules.rule import Rule

BEYOND_EXPECTED = "beyond_expected"


def beyond_expected(run: Context) -> list[Finding]:
    """With a third side: the first row whose error leaves the precision's own (judgement's
    first_beyond): every earlier row is within twice what the reference at the candidate's precision
    gives, so the implementation starts adding error at this op."""
    r = run.state.first_beyond
    if r is None:
        return []
    c = run.c
    v = judgement.verdict(run.table, run.thresholds, run.task.basis)
    own = max(1.0 - c["cos"][r] if not math.isnan(c["cos"][r]) else 0.0, c["red"][r] if not math.isnan(c["red"][r]) else 0.0)
    severity = {"implementation": "error", "precision": "warning"}.get(v.cause, "info")
    after = {"implementation": " The outputs err beyond the precision's own too: start here.",
             "precision": " The outputs' error is the precision's own and hides this one: it shows once the ops the "
                          "precision breaks are kept in higher precision.",
             }.get(v.cause, " The outputs pass.")
    return [finding(run, BEYOND_EXPECTED, severity, r, f"{c['npu_op'][r]}: error {c['excess'][r]:.3g} times the "
                     "precision's own", f"Every earlier row stays within twice the error the reference at the candidate's "
                     f"precision (--expected) gives; here the candidate's error ({f4(own)}, max(1 - cos, red)) is "
                     f"{c['excess'][r]:.3g} times it ({f4(c['exp_err'][r])}). So the implementation adds error at this "
                     "op (a kernel, a fused pattern, the conversion's settings), not the precision: check it first."
                     + after, {"excess": c["excess"][r], "expected_error": c["exp_err"][r], "error": own,
                               "passes": not bool(run.fail[r])})]


RULE = Rule(BEYOND_EXPECTED, beyond_expected, reads=("state", "table", "thresholds", "task"))
