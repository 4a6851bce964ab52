"""The introduced rule: which op to fix, the one whose own error, alone, takes the outputs furthest
(`reach`: the reference model run with only that error injected), whatever metric its row breaks.
When the outputs fail and no introduced op explains half their error, passing ops are re-run too
(those whose error grows the most, a bounded number) with ops that break only mean_rel or reproduce a
failing row: a small error of their own may grow downstream into the failure, and their reach says
whether it did (`grown`). Else no_op_introduced: the failing ops only inherit their error. Runs on a
task of one run only (several ranks hold the same op names: first_call's, rank by rank)."""
# lazy: engine.diagnose.modeldiff, engine.diagnose.reach
from __future__ import annotations

import math

import numpy as np

from accuscope.engine.compare import judgement
from accuscope.engine.compare.expected import EXCESS_LIMIT
from accuscope.engine.diagnose.advice import Finding, OpOrigin
from accuscope.engine.diagnose.rules.context import CLIFF_SHARE, Context, f4, finding, is_step_based, precision_word
from accuscope.engine.diagnose.rules.inputs import PREPROCESS
from accuscope.engine.diagnose.rules.mindstudio import INPUT_MISMATCH
from accuscope.engine.diagnose.rules.origins import effect, rerun_upstream
from accuscope.engine.diagnose.rules.rule import Rule
from accuscope.engine.sources import kinds

INTRODUCED = "introduced"
NO_OP_INTRODUCED = "no_op_introduced"
WEIGHTED_TYPES = {"Conv2D", "Conv3D", "Conv2DTranspose", "DepthwiseConv2D", "Conv", "ConvTranspose", "MatMul",
                  "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2", "Gemm", "FullyConnection",
                  "QuantizedConv", "ConvInteger", "MatMulInteger"}


def introduced(run: Context) -> list[Finding]:
    if not run.one_run:  # several ranks hold the same op names: which op introduced the error is first_call's
        return []
    origins, net_inputs, findings = run.origins, run.net_inputs, run.findings
    c = run.c
    intro = [o for o in origins if o.origin == "introduced"]
    for o in intro:
        if o.broken and set(o.broken) <= judgement.NOISY:
            o.why += ("; it breaks only mean_rel, the mean relative error, which is large where golden values are "
                      "near zero: not a sign of a wrong op")
    # re-run evidence ranks by the error each op made; the weak method's output-versus-input errors
    # mostly measure amplification, so among those execution order stays
    candidates = [o for o in intro if not (o.broken and set(o.broken) <= judgement.NOISY)]
    # (a dump tool's own single-layer figure, RKNN's, measures the same: the op alone on good inputs)
    measured = ("rerun", "reported")
    ranked = sorted(candidates, key=lambda o: (o.method not in measured, -effect(o, run) if o.method in measured
                                               else candidates.index(o)))
    # the other re-run ops (breaking only mean_rel, reproducing a failing row, passing upstream) whose
    # own error is the largest: small local errors that may grow into the output's failure
    others = _measure_reach(run, ranked, origins)
    listed = {id(o) for o in origins}
    run.grown = _grown(run, others)
    for o in run.grown:  # the measured effect on the outputs decides, not the row's thresholds
        ranked.append(o)
        if id(o) not in listed:
            origins.append(o)
    if run.reach:  # how far each one's own error reaches the outputs decides, its local size breaks ties
        ranked.sort(key=lambda o: (o.op not in run.reach, -run.reach.get(o.op, 0.0)))
    # with a third side, ops beyond the precision's own noise first, unless the outputs' error is the
    # precision's own: then the ops it breaks explain the outputs (those beyond it are hidden there, and the
    # verdict names them)
    if "excess" in run.table.present and judgement.verdict(run.table, run.thresholds, run.task.basis).cause != "precision":
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
        ev = {**o.evidence, "method": o.method, "introduced_ops": len(intro), "effect": effect(o, run),
              "also": [x.op for x in ranked[1:6]]}
        if o.op in run.reach:
            ev["output_cos_alone"] = 1.0 - run.reach[o.op]
        changes = model_changes(run, o)
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
                     f"{f4(1.0 - run.reach[o.op])}. ")
        if run.outcome == "fail":
            severity, title = "error", f"{o.op} introduced the error" + (" (input/output heuristic)" if weak else "")
            text += todo
        elif run.outcome == "pass" and is_step_based(run):
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
        return [finding(run, INTRODUCED, severity, r, title, text, ev)]
    failing_rows = np.flatnonzero(run.fail)
    if not origins or not len(failing_rows):
        return []
    known = [o for o in origins if o.origin != "unknown"]
    if not known:
        return []
    first = int(failing_rows[0])
    bad_input = any(f.rule in (INPUT_MISMATCH, PREPROCESS) for f in findings)
    if bad_input or (first in net_inputs):
        text = ("No operator introduced error: every failing op reproduces its NPU output from its NPU inputs, "
                "so the error enters with the network input. Fix the input first.")
    else:
        text = ("No operator introduced error beyond the thresholds; the deviations build up from small ones "
                f"({precision_word(run)} across many ops). Tighten the thresholds to find the largest "
                "contributors, or run the failing region in higher precision.")
    return [finding(run, NO_OP_INTRODUCED, "warning", first, "the failing ops only inherit their error", text,
                     {"failing_ops": len(origins), "inherited": sum(o.origin == "inherited" for o in origins),
                      "unknown": sum(o.origin == "unknown" for o in origins)})]


def _branch(run: Context, o: OpOrigin) -> tuple[str, float]:
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


def _measure_reach(run: Context, ranked: list[OpOrigin], origins: list[OpOrigin]) -> list[OpOrigin]:
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
        pool += rerun_upstream(run, [o.op for o in origins])
    others = sorted((o for o in pool if effect(o, run) > 0), key=lambda o: -effect(o, run))[:REACH_OTHERS]
    _reach_of(run, [o for o in others if o.op in run.jobs])
    return others


def _reach_of(run: Context, chosen: list[OpOrigin]) -> None:
    from accuscope.engine.diagnose.reach import output_effects
    if not chosen:
        return
    assert run.fw is not None and run.plan is not None  # _measure_reach asks only with both
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


def _output_error(run: Context) -> float:
    """1 - cos of the worst judged network output (0 when none has a cos)."""
    v = judgement.verdict(run.table, run.thresholds, run.task.basis)
    coses = [float(run.c["cos"][r]) for r in v.judged if not math.isnan(run.c["cos"][r])]
    return 1.0 - min(coses) if coses else 0.0


def _grown(run: Context, others: list[OpOrigin]) -> list[OpOrigin]:
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
                 f"{f4(o.isolated_cos)}; {where}), an error that grows downstream (alone, the output's cos "
                 f"{f4(alone)})")
        o.evidence["grows_downstream"] = True
    return sorted(found, key=lambda o: -run.reach[o.op])


def model_changes(run: Context, o: OpOrigin) -> list:
    """What the conversion changed in the op, when both models are ONNX files at hand: the
    reference (the re-runs' framework model) and the candidate (the NPU side's own model)."""
    side = run.plan.npu if run.plan is not None else None
    cand = side.graph if side is not None else None
    if run.fw_path is None or cand is None or cand.kind != kinds.ONNX:
        return []
    from accuscope.engine.diagnose.modeldiff import ModelView, differences
    pair = run.row_pair[o.rows[0]] if o.rows else None
    try:
        if run.views is None:
            run.views = (ModelView(str(run.fw_path)), ModelView(cand.path))
        ref, new = run.views
        found = differences(ref, new, o.op, pair.npu.tensor_name if pair is not None else "")
    except Exception as exc:  # noqa: BLE001 - an explanation we cannot give is a note, not a failure
        run.notes.append(f"could not compare the two models' parameters of {o.op}: {exc}")
        return []
    order = ["fp16_range", "quantized", "attribute", "replaced", "dtype"]
    return sorted(found, key=lambda d: order.index(d.cause))


def _effect_text(o: OpOrigin, run: Context) -> str:
    if "npu_nonfinite" in o.broken:
        return f"{100 * effect(o, run):.2g}% of its output NaN/inf"
    return f"isolated cos {f4(o.isolated_cos)}" if o.isolated_cos is not None else f"+{effect(o, run):.3g} rel. error"


RULE = Rule(INTRODUCED, introduced, reads=("one_run", "origins", "net_inputs", "outcome", "fw", "plan", "state",
                                         "thresholds", "table", "task", INPUT_MISMATCH, PREPROCESS),
            writes=("reach", "grown"), makes=(INTRODUCED, NO_OP_INTRODUCED))
