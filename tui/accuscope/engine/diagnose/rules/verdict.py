"""The verdict rule: the model judged on its real outputs (or an msprobe step on every call compared),
and `in_light_of_verdict`: every other finding's severity read in its light. It runs first: the
`outcome` it writes is what the rules after it read."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from accuscope.engine.compare import judgement
from accuscope.engine.diagnose import firstdiff
from accuscope.engine.diagnose.advice import VERDICT, Finding
from accuscope.engine.diagnose.rules.context import Context, f4, finding, is_step_based
from accuscope.engine.diagnose.rules.firstcall import near_zero
from accuscope.engine.diagnose.rules.rule import Rule


def verdict(run: Context) -> list[Finding]:
    """The verdict on the model itself, judged on its real outputs: pass, fail (which output, which
    metric, how badly) or unknown (no output compared, and why); on an msprobe step, its calls. Sets
    `run.outcome`: everything else is read in its light."""
    return [_step_verdict(run) if is_step_based(run) else _model_verdict(run)]


def _model_verdict(run: Context) -> Finding:
    c = run.c
    v = judgement.verdict(run.table, run.thresholds, run.task.basis)
    if v.outcome == "unknown":
        title = ("verdict unknown: an input could not be read" if run.task.basis.unread and v.judged else
                 "verdict unknown: the network outputs were not compared")
        return finding(run, VERDICT, "warning", None, title,
                        f"The model cannot be judged: {v.why}. No row below is a verdict on the model.",
                        {"outputs": v.outputs})
    if v.scope == "tensors":
        return _tensors_verdict(run, v)
    measured = list(v.judged)
    ev = {"outputs": len(measured), "output_cos": [c["cos"][r] for r in measured],
          "output_red": [c["red"][r] for r in measured]}
    if v.outcome == "fail":
        run.outcome = "fail"
        r = v.worst
        assert r is not None  # a failing verdict names its worst output
        broken = judgement.broken_texts(run.table, run.thresholds, r) or ["fails"]
        return finding(run, VERDICT, "error", r, f"the model fails: output {broken[0]}",
                        f"{len(v.failing)} of {len(measured)} network output(s) break the thresholds (worst: "
                        f"{c['tensor'][r]} {', '.join(broken)}).{_cause_text(run, v, r, ev)} The findings below say which op "
                        "made the error, most harmful first.", ev)
    run.outcome = "pass"
    worst = min(measured, key=lambda i: c["cos"][i] if not math.isnan(c["cos"][i]) else 2.0)
    noisy = [r for r in measured if run.state.noisy[r]]
    noise = ("" if not noisy else f" {c['tensor'][noisy[0]]} breaks only {_broken_text(run, noisy[0])}: a relative "
             "error on values near zero (its relative euclidean distance passes), noise of the precision, not a "
             "failure.")
    return finding(run, VERDICT, "info", None, f"the model passes: {len(measured)} network output(s) meet the "
                    f"thresholds (worst cos {f4(c['cos'][worst])})",
                    "Deviations of single ops below are local: they do not reach the outputs beyond the thresholds."
                    + noise, ev)


def _tensors_verdict(run: Context, v) -> Finding:
    """Judged as the real tool's rule over every compared tensor (tpu-mlir's npz_tool --tolerance, or
    Polygraphy's comparator --atol/--rtol): the comparison passes only when no tensor it compares
    fails, as the tool's own PASSED / FAILED says."""
    judge = run.thresholds.judge_text()
    polygraphy = run.thresholds.polygraphy
    tool, failing = ("Polygraphy", "out of tolerance") if polygraphy else ("tpu-mlir's npz_tool", "NOT_SIMILAR")
    ev = {"compared": len(v.judged), "failing": len(v.failing), "judge": judge}
    if not polygraphy:
        ev["tolerance"] = run.thresholds.tolerance_text()
    if v.outcome == "pass":
        run.outcome = "pass"
        return finding(run, VERDICT, "info", None, f"passes as {judge} judges: all "
                        f"{len(v.judged):,} compared tensors are {'within tolerance' if polygraphy else 'similar'}",
                        f"{tool} passes a comparison when no tensor it compares is {failing}; none is. Deviations "
                        "of single ops below are local.", ev)
    run.outcome = "fail"
    r = v.worst
    assert r is not None  # a failing verdict names a row
    return finding(run, VERDICT, "error", r, f"fails as {judge} judges: "
                    f"{len(v.failing):,} of {len(v.judged):,} tensors {failing}",
                    f"{tool} fails a comparison when any tensor it compares is {failing}; the first "
                    f"is {run.c['tensor'][r]} ({_broken_text(run, r)}). The findings below say which op made the "
                    "error, most harmful first.", ev)


def _cause_text(run: Context, v, r: int, ev: dict) -> str:
    """With a third side (--expected): which branch of the three-sided procedure the failing outputs
    take, said on the verdict (the cause also in its evidence)."""
    if not v.cause:
        return ""
    c = run.c
    ev.update(cause=v.cause, expected_error=c["exp_err"][r], excess=c["excess"][r])
    if v.cause == "precision":
        return (f" The precision itself: the reference at the candidate's precision (--expected) gives this error "
                f"too ({f4(c['exp_err'][r])}; this output's is {c['excess'][r]:.3g} times it), so keep the "
                "ops named below in higher precision" + ("; an op errs beyond the precision's own too, hidden by it "
                f"at the outputs: {c['npu_op'][run.state.first_beyond]} (below)." if run.state.first_beyond is not None
                                                       else "; no kernel adds error of its own."))
    return (f" Beyond the precision's own noise: {c['excess'][r]:.3g} times the error the reference at the "
            "candidate's precision (--expected) gives, so the implementation (or the conversion's settings) "
            "adds it.")


def _step_verdict(run: Context) -> Finding:
    """msprobe dumps hold the calls of a training or inference step, not a model whose outputs decide:
    a call that diverges need not reach the step's last call (a gradient, a rank's shard), so the step
    is judged on every tensor compared, and passes only when none fails."""
    v = judgement.verdict(run.table, run.thresholds, run.task.basis)  # the same answer every surface gives
    compared = len(v.judged)
    skipped = run.n - compared
    if v.outcome == "unknown":
        return finding(run, VERDICT, "warning", None, "verdict unknown: no tensor was compared",
                        "No row holds a statistic, a checksum or a metric (the reasons column says why for each); "
                        "no row below is a verdict on the step.", {"rows": run.n})
    failing = np.array(v.failing, dtype=np.int64)
    not_seen = f" {skipped:,} rows were not compared (their reasons say why)." if skipped else ""
    ev = {"compared": compared, "failing": int(failing.size), "not_compared": skipped}
    if not failing.size:
        run.outcome = "pass"
        return finding(run, VERDICT, "info", None, f"the step matches: all {compared:,} compared tensors meet "
                        "the thresholds", "Every call's compared tensors agree with the reference." + not_seen, ev)
    run.outcome = "fail"
    found = firstdiff.by_rank(run.table)
    row = found[0].row if found else int(failing[0])
    groups = firstdiff.groups(run.table)
    bad_groups = sum(1 for _, rows in groups if run.fail[rows].any()) if groups[0][0] else 0
    spread = f" on {bad_groups} of {len(groups)} ranks" if bad_groups and len(groups) > 1 else ""
    near = near_zero(run, row)
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
    return finding(run, VERDICT, "error", row, f"the step diverges: {failing.size:,} of {compared:,} compared "
                    f"tensors fail{spread}", "An msprobe dump holds the calls of a step, so the step is judged on "
                    f"every call, not on its last one. {start}{not_seen}", ev)


def in_light_of_verdict(run: Context, findings: list[Finding]) -> list[Finding]:
    """An error-level finding about an op exists only when the outputs fail: when they pass, local
    findings are information (their effect stated); when the outputs are unknown, warnings."""
    if run.outcome == "fail":
        return findings
    level = "info" if run.outcome == "pass" else "warning"
    if is_step_based(run):
        note = (" The step matches: this stays local." if run.outcome == "pass" else
                " Its effect on the step is unknown (no tensor was compared).")
    else:
        note = (" The network outputs pass: this stays local." if run.outcome == "pass" else
                " Its effect on the network outputs is unknown (they were not compared).")
    out = []
    for f in findings:
        if f.rule != VERDICT and f.severity == "error":
            f = replace(f, severity=level, text=f.text + note)
        out.append(f)
    return out


def _broken_text(run: Context, r: int) -> str:
    return ", ".join(judgement.broken_texts(run.table, run.thresholds, r)) or "fails"


RULE = Rule(VERDICT, verdict, reads=("task", "table", "state", "thresholds"), writes=("outcome",))
