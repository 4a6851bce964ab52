"""The preprocess rule: when the network inputs disagree, which preprocessing difference (channel
order, layout, scale, mean/std, resize) explains it (diagnose.preprocess)."""
# lazy: engine.diagnose.preprocess
from __future__ import annotations

import math

from accuscope.engine.diagnose.advice import Finding
from accuscope.engine.diagnose.rules.context import Context, f4, finding
from accuscope.engine.diagnose.rules.rule import Rule
from accuscope.engine.sources.tensor import TensorError

PREPROCESS = "preprocess"


def preprocess(run: Context) -> list[Finding]:
    net_inputs = run.net_inputs
    from accuscope.engine.diagnose.preprocess import diagnose
    c = run.c
    out: list[Finding] = []
    seen: set[str] = set()
    for r in net_inputs:
        cos, red = c["cos"][r], c["red"][r]
        sized = "does not match shape" in c["reason"][r]
        if not (sized or (not math.isnan(cos) and cos < run.cos_min) or (not math.isnan(red) and red > run.red_max)):
            continue
        pair = run.row_pair[r]
        if pair is None or pair.golden is None or pair.npu.value is not None:  # a value: no data to diagnose
            continue
        key = pair.golden.source
        if key in seen or len(seen) >= 4:
            continue
        seen.add(key)
        run.say("diagnosing the inputs", len(seen), 0)
        try:
            d = diagnose(pair.npu.load(), pair.golden.load(), run.cos_min, run.red_max)
        except (TensorError, OSError, ValueError, MemoryError) as exc:
            run.notes.append(f"{c['tensor'][r]}: input diagnosis failed: {exc}")
            continue
        ev = {"cos_before": cos, "red_before": red}
        if d is None:
            out.append(finding(run, PREPROCESS, "warning", r, "inputs disagree; no usual preprocessing "
                                "difference explains it",
                                "Channel order, layout, scale, mean/std and resize were tested. Check that both "
                                "sides read the same file, and look at where the input tensors differ with "
                                f"`accuscope op {run.folder} {c['tensor'][r]}`.", ev))
            continue
        ev.update(transform=d.transform, cos_before=d.cos_before if not math.isnan(d.cos_before) else cos,
                  cos_after=d.cos_after, red_before=d.red_before, red_after=d.red_after, **d.details)
        if d.agrees:
            out.append(finding(run, PREPROCESS, "error", r, f"input preprocessing: {d.title}",
                                f"Transforming the NPU input this way makes it match the golden input (cos "
                                f"{f4(ev['cos_before'])} -> {d.cos_after:.4f}). Fix: {d.advice}.", ev))
        else:
            out.append(finding(run, PREPROCESS, "warning", r, f"input preprocessing, partly: {d.title}",
                                f"This brings the inputs closer (cos {f4(ev['cos_before'])} -> {d.cos_after:.4f}) "
                                f"but not within the thresholds; something else differs too. Try: {d.advice}.", ev))
    return out


RULE = Rule(PREPROCESS, preprocess, reads=("net_inputs", "plan", "table", "thresholds"))
