"""MindStudio's expert rules (metrics.md section 5), first match wins: float16 overflow, network input
inconsistent, then the global verdict (everything passes / the network output fails / only local
deviations). `overflow_scan` is the float16 overflow fact advise() gathers before the rules run (a
scan of the NPU tensors). The five rule names are advice.MS_RULES (the app and the report read them)."""
from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from accuscope.engine.compare import judgement
from accuscope.engine.compare.pairjob import tensor_chunks
from accuscope.engine.diagnose.advice import MS_RULES, Finding
from accuscope.engine.diagnose.rules.context import Context, finding, is_step_based
from accuscope.engine.diagnose.rules.rule import Rule
from accuscope.engine.sources.tensor import TensorError

FP16_OVERFLOW, INPUT_MISMATCH, ALL_PASS, OUTPUT_FAILS, LOCAL_DEVIATION = MS_RULES
FP16_MAX = 65504.0
SENTINEL = 1e8  # golden magnitudes from here on are fill values (attention masks), not overflow


def overflow_scan(run: Context) -> tuple[int, dict] | None:
    """The first row whose float16 NPU tensor overflowed: NaN/inf beyond golden's, or values at
    the float16 limit (|x| >= 65504) where golden is an ordinary number (not a mask fill value)."""
    c = run.c
    fp16 = np.isin(c["npu_dtype"], ["float16", "DT_FLOAT16"]) & ~c["is_npu_only"]
    nf = np.flatnonzero(fp16 & run.nonfinite)
    first_nf = int(nf[0]) if len(nf) else run.n
    hit: tuple[int, dict] | None = None
    if len(nf):
        r = first_nf
        hit = (r, {"npu_nonfinite": int(c["npu_nonfinite"][r]),
                   "golden_nonfinite": max(int(c["golden_nonfinite"][r]), 0)})
    if run.plan is None:
        return hit
    inputs = set(run.net_inputs)
    rows = [r for r in range(first_nf) if fp16[r] and (c["io"][r] == "output" or r in inputs)
            and run.row_pair[r] is not None and run.row_pair[r].golden is not None]
    if not rows:
        return hit
    found = _first_hit(rows, lambda r: _saturated(run.row_pair[r]), run, "checking float16 overflow")
    if found is not None:
        r, count = found
        return r, {"saturated": count, "npu_nonfinite": max(int(c["npu_nonfinite"][r]), 0),
                   "golden_nonfinite": max(int(c["golden_nonfinite"][r]), 0)}
    return hit


def _saturated(pair) -> int:
    """Elements at the float16 limit on the NPU side where golden is finite and below SENTINEL."""
    x, y = pair.npu, pair.golden
    if x.problem or y.problem or x.size != y.size or x.size == 0:
        return 0
    count = 0
    try:
        with np.errstate(invalid="ignore"):
            for xc, yc in zip(tensor_chunks(x, 1 << 16), tensor_chunks(y, 1 << 16)):
                big = np.abs(xc) >= FP16_MAX
                if big.any():
                    ay = np.abs(np.asarray(yc, dtype=np.float64))
                    count += int(np.count_nonzero(big & np.isfinite(xc) & (ay < SENTINEL)))
    except (TensorError, OSError, ValueError):
        return 0
    return count


def _first_hit(rows: list[int], count: Callable[[int], int], run: Context, stage: str) -> tuple[int, int] | None:
    """The first row (in order) whose count is positive, evaluated in threads batch by batch."""
    batch = 4 * run.workers
    with ThreadPoolExecutor(run.workers, thread_name_prefix="accuscope-advisor") as pool:
        for lo in range(0, len(rows), batch):
            if run.cancelled:
                return None
            part = rows[lo:lo + batch]
            for r, k in zip(part, pool.map(count, part)):
                if k > 0:
                    return r, k
            run.say(stage, min(lo + batch, len(rows)), len(rows))
    return None


def mindstudio(run: Context) -> list[Finding]:
    overflow, net_inputs = run.overflow, run.net_inputs
    c = run.c
    thr = run.cos_min
    if overflow is not None:
        r, ev = overflow
        sat = ev.get("saturated", 0)
        what = (f"{sat} values at the float16 limit (|x| >= 65504)" if sat else
                f"{ev['npu_nonfinite']} NaN/inf values (golden: {ev['golden_nonfinite']})")
        return [finding(run, FP16_OVERFLOW, "error", r, f"float16 overflow at {c['npu_op'][r]}",
                         f"Its float16 {c['io'][r]} holds {what}. Everything computed from it is unreliable: keep "
                         f"this op in float32 (mixed precision) or scale its inputs down, then compare again.",
                         {**ev, "cos": c["cos"][r]})]
    bad_inputs = [r for r in net_inputs if not math.isnan(c["cos"][r]) and c["cos"][r] < thr]
    if bad_inputs:
        r = bad_inputs[0]
        return [finding(run, INPUT_MISMATCH, "error", r, f"network input differs ({c['tensor'][r]})",
                         f"The two sides were not fed the same data (cos {c['cos'][r]:.4f} < {thr:g}), so no op can "
                         "be judged yet. Feed both the same input file, or fix the preprocessing (see the "
                         "preprocessing finding).", {"cos": c["cos"][r], "red": c["red"][r],
                                                     "inputs_below": len(bad_inputs)})]
    if is_step_based(run):  # a step has no network output: the step verdict judges every call
        return []
    with np.errstate(invalid="ignore"):
        has_cos = ~np.isnan(c["cos"])
        below = (has_cos & (c["cos"] < thr)) | (run.nonfinite & ~run.exempt)
    if not below.any():
        if not has_cos.any():  # statistics or checksums only: nothing to say about cosines
            return []
        others = int(run.fail.sum())
        extra = (f" ({others} rows break other thresholds: the origin column says which ops made their error.)"
                 if others else "")
        return [finding(run, ALL_PASS, "info", None, f"no tensor has a cosine below {thr:g}",
                         "By cosine every tensor meets the requirement. If the application's result is still "
                         "wrong, look at the post-processing of the model outputs (decoding, thresholds, label "
                         f"order).{extra}", {"rows_with_cos": int(has_cos.sum()), "rows_failing": others})]
    first = int(np.argmax(below))
    # whether the outputs fail is the verdict's to say (run.outcome, written by the verdict rule under every
    # threshold the user gave), never this rule's reading of the output's cosine alone
    v = judgement.verdict(run.table, run.thresholds, run.task.basis)
    ev = {"cos": c["cos"][first], "rows_below": int(below.sum()), "output_rows": list(v.judged),
          "output_cos": [c["cos"][o] for o in v.judged]}
    if run.outcome == "fail":
        o = v.worst if v.worst is not None else first
        return [finding(run, OUTPUT_FAILS, "error", first,
                         f"the network output fails; the first deviation is at {c['npu_op'][first]}",
                         f"The verdict fails on {c['tensor'][o]} (cos {c['cos'][o]:.4f}). Start at the first row "
                         f"below {thr:g}: quantization is the usual cause, so calibrate that op or keep it in higher "
                         "precision; the origin column tells which failing ops made their error.", ev)]
    if run.outcome == "pass":
        return [finding(run, LOCAL_DEVIATION, "warning", first, "local deviations only; the network output passes",
                         f"Some tensors are below {thr:g} (first: {c['tensor'][first]}) but the verdict passes on "
                         "the outputs. This is typical of the device compiler's internal optimizations; act only if "
                         "the application's result is wrong.", ev)]
    return [finding(run, LOCAL_DEVIATION, "warning", first, f"tensors below cos {thr:g}; their effect is unknown",
                     f"Some tensors are below {thr:g} (first: {c['tensor'][first]}); whether they reach the network "
                     f"output is unknown ({v.why}).", ev)]


RULE = Rule("mindstudio", mindstudio, reads=("overflow", "net_inputs", "table", "state", "thresholds", "task", "outcome"),
            makes=MS_RULES)  # first match wins: one finding of the five
