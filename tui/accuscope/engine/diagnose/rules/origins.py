"""Introduced or inherited, per failing op: the origins fact every rule after it reads.

The framework op (the chain of fused framework ops for a fused device op) is re-run on the NPU
side's own inputs (`oprerun`); when that reproduces the NPU output, the error came with the inputs,
otherwise the op made it. Where the dump tool answered this itself, its answer is taken: RKNN's
error_analysis.txt "single" cos (the layer alone on golden inputs, the `rknn_single_cos` column) judged
by the cos threshold (`_reported_origin`). Without a framework model the op's output error is compared with its
inputs' errors instead (a weaker method: ops that amplify errors, like Softmax or a division by
small numbers, get blamed). Re-runs are cached in advice.json under a key made of the files they
depend on (`previous_reruns`). `effect`: how much error an op introduced by itself, as rules rank.
"""
# lazy: engine.diagnose.oprerun
from __future__ import annotations

import math
from pathlib import Path

from accuscope.engine.compare.judgement import values_broken
from accuscope.engine.compare.pair import DEVICE_ONLY, golden_ops
from accuscope.engine.diagnose.advice import OpOrigin, load_advice
from accuscope.engine.diagnose.rules.context import Context, f4
from accuscope.engine.sources.tensor import SourceError

WEAK_FACTOR = 3.0  # weak method: an output this many times worse than its worst input blames the op


def previous_reruns(folder: Path) -> dict[str, dict]:
    """Cached re-runs of the last advice, by op."""
    try:
        old = load_advice(folder)
    except SourceError:
        return {}
    if old is None:
        return {}
    return {o.op: o.isolated for o in old.ops if o.isolated and o.isolated.get("key")}


def find_origins(run: Context, fw, previous: dict[str, dict]) -> list[OpOrigin] | None:
    """Origins of every op with a failing output row, in execution order (None when cancelled)."""
    c = run.c
    failing = [op for op, rows in run.ops.items() if any(run.fail[r] and c["io"][r] == "output" for r in rows)]
    reported = {op: o for op in failing if (o := _reported_origin(run, op)) is not None}
    if reported:
        run.notes.append(f"{len(reported)} of {len(failing)} failing ops: introduced or inherited as the dump tool "
                         f"itself measured it (RKNN's single-layer cos, error_analysis.txt)")
    failing_left = [op for op in failing if op not in reported]
    run.previous = previous
    isolated: dict = {}
    problems: dict[str, str] = {}
    if fw is not None and failing_left:
        done = _rerun(run, fw, failing_left)
        if done is None:
            return None
        isolated, problems = done
    failed = {**problems, **{op: i.problem for op, i in isolated.items() if i.problem}}
    if fw is not None and failed:
        op = next(o for o in failing_left if o in failed)
        why = failed[op]
        run.notes.append(f"{len(failed)} of {len(failing)} failing ops could not be re-run (first: {op}: {why}); "
                         "their origin comes from the input/output method")
    out = []
    for op in failing:
        if op in reported:
            out.append(reported[op])
            continue
        iso = isolated.get(op)
        origin = _rerun_origin(run, op, iso) if iso is not None and not iso.problem else None
        if origin is None:
            why = (iso.problem if iso is not None else problems.get(op, ""))
            origin = _weak_origin(run, op, why)
        out.append(origin)
    return out


def _rerun(run: Context, fw, ops: list[str]) -> tuple[dict, dict[str, str]] | None:
    """Re-run these ops (oprerun; cached ones from the last advice): op -> Isolated, and op -> why
    it could not be re-run. None when cancelled."""
    from accuscope.engine.diagnose.oprerun import Isolated, make_job, run_jobs
    c = run.c
    isolated: dict[str, Isolated] = {}
    problems: dict[str, str] = {}
    assert run.plan is not None  # re-runs are asked for only with the dumps open
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
        truth = str(c["golden_op"][run.op_rows(op, "output")[0]])
        chain = golden_ops(truth)
        if not pairs or not chain:
            problems[op] = "no framework counterpart" if truth == DEVICE_ONLY else "no tensors of it in the dumps"
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


def rerun_upstream(run: Context, failing: list[str]) -> list[OpOrigin]:
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


def _upstream_ops(run: Context, failing: list[str]) -> list[str]:
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


def _rerun_origin(run: Context, op: str, iso) -> OpOrigin | None:
    usable = [o for o in iso.outputs if "problem" not in o]
    if not usable:
        return None
    broken: list[str] = []
    for o in usable:  # the verdict's own rules (judgement.values_broken: noise included), the re-run as golden
        values = {k: float(v) for k, v in o.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        for key in values_broken(run.thresholds, values, int(o.get("npu_nonfinite", 0)), int(o.get("rerun_nonfinite", 0))):
            if key not in broken:
                broken.append(key)
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
            why = (f"re-run on the same NPU inputs, the framework op gives another result (cos {f4(cos)}; "
                   f"breaks {', '.join(broken)})")
        origin = "introduced"
    else:
        why = f"re-run on the same NPU inputs, the framework op reproduces the NPU output (cos {f4(cos)})"
        origin = "inherited"
    return OpOrigin(op, run.op_rows(op, "output"), origin, "rerun", cos, broken, why, ev, iso.to_dict())


REPORTED_COS = "rknn_single_cos"  # the dump tool's own cos of the op alone on golden inputs (Context.method)


def _reported_origin(run: Context, op: str) -> OpOrigin | None:
    """The origin the dump tool itself measured (RKNN: the layer alone on golden inputs against golden),
    judged by the cos threshold as a re-run is; None where the table has no such figure for the op."""
    if REPORTED_COS not in run.table.present:
        return None
    outs = run.op_rows(op, "output")
    single = [float(run.c[REPORTED_COS][r]) for r in outs if not math.isnan(run.c[REPORTED_COS][r])]
    if not single:
        return None
    cos = min(single)
    broken = [k for k in values_broken(run.thresholds, {"cos": cos}, 0, 0) if k == "cos"]
    ev = {"isolated_cos": cos, "output_cos": _worst_cos(run, outs), "reported_by": "RKNN error_analysis.txt (single)"}
    if broken:
        return OpOrigin(op, outs, "introduced", "reported", cos, broken,
                        f"RKNN's own single-layer cos {f4(cos)} (the layer alone on golden inputs) breaks cos", ev)
    return OpOrigin(op, outs, "inherited", "reported", cos, [],
                    f"RKNN's own single-layer cos {f4(cos)} (the layer alone on golden inputs) meets cos: the error "
                    "came with its inputs", ev)


def _worst_cos(run: Context, rows: list[int]) -> float | None:
    v = [float(run.c["cos"][r]) for r in rows if not math.isnan(run.c["cos"][r])]
    return min(v) if v else None


def _weak_origin(run: Context, op: str, rerun_problem: str = "") -> OpOrigin:
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


def effect(o: OpOrigin, run: Context | None = None) -> float:
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
