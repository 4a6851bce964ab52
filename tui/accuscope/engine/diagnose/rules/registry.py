"""The advisor's rules, in the order advise() runs them, and the order their findings are shown in.

Why this order (rule.ordered checks it against each rule's declared reads and writes when this module
is imported): the verdict comes first, because every rule after it reads the `outcome` it writes
(a local finding is an error only when the outputs fail). MindStudio's expert rules and the input
diagnosis come before introduced, which reads their findings (a bad network input, not an op, is
the cause then). introduced measures each op's `reach` to the outputs and the ops whose small error
`grown` into the failure; drift reads both, so it comes after introduced, and, when it finds a
drift, tells the introduced-op finding that no single op explains the output. The rest read only
the facts gathered before any rule runs (context.FACTS); their place among the others changes
nothing but the order of findings before sorting (`sort_findings` decides what is shown first).

To add a rule: a module here with its name constant, its `check(run) -> list[Finding]` and
`RULE = Rule(NAME, check, reads=(...), writes=(...))`; its RULE in RULES after everything it reads;
its finding names in PRIORITY (ARCHITECTURE.md, Where to add).
"""
from __future__ import annotations

from accuscope.engine.diagnose.advice import Finding
from accuscope.engine.diagnose.rules import (
    coverage,
    drift,
    expected,
    firstcall,
    inputs,
    introduced,
    method,
    mindstudio,
    nonfinite,
    verdict,
)
from accuscope.engine.diagnose.rules.context import SEVERITIES, Context
from accuscope.engine.diagnose.rules.rule import ordered

RULES = ordered((
    verdict.RULE,  # writes `outcome`: first
    coverage.RULE,
    mindstudio.RULE,
    inputs.RULE,
    nonfinite.RULE,
    firstcall.RULE,
    introduced.RULE,  # reads the mindstudio and preprocess findings; writes `reach` and `grown`
    expected.RULE,
    drift.RULE,  # reads `reach`, `grown` and the introduced findings (and revises them)
    method.RULE,
))

# the order of findings on the same row and severity (the cause first)
PRIORITY = (verdict.VERDICT, coverage.COVERAGE, inputs.PREPROCESS, mindstudio.INPUT_MISMATCH, firstcall.FIRST_CALL,
            expected.BEYOND_EXPECTED, introduced.INTRODUCED, drift.DRIFT, nonfinite.NONFINITE_ORIGIN,
            mindstudio.FP16_OVERFLOW, introduced.NO_OP_INTRODUCED, mindstudio.OUTPUT_FAILS, mindstudio.LOCAL_DEVIATION,
            mindstudio.ALL_PASS, method.METHOD)


def sort_findings(run: Context, findings: list[Finding]) -> None:
    """In place: the verdict first, then by severity, accuscope's before MindStudio's, execution order
    (findings about no row last), PRIORITY."""
    findings.sort(key=lambda f: (f.rule != verdict.VERDICT, SEVERITIES.index(f.severity), f.rule.startswith("ms."),
                                 f.row if f.row is not None else run.n,
                                 PRIORITY.index(f.rule) if f.rule in PRIORITY else len(PRIORITY)))
