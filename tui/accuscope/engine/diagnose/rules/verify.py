"""The closing pass after every rule: the headline verified by replaying the conversion
(diagnose.replay) when asked and the outputs fail; else, where it could be replayed, the headline
says its ranking is estimated."""
# lazy: engine.diagnose.replay
from __future__ import annotations

import time
from dataclasses import replace

from accuscope.engine.diagnose.advice import Finding, OpOrigin
from accuscope.engine.diagnose.rules.context import Context
from accuscope.engine.diagnose.rules.drift import DRIFT
from accuscope.engine.diagnose.rules.introduced import INTRODUCED


def verified(run: Context, findings: list[Finding], origins: list[OpOrigin], budget: int) -> list[Finding]:
    """The findings told by replaying the conversion (diagnose.replay) when asked and the outputs
    fail; else, where it could be replayed, the headline says its ranking is estimated."""
    from accuscope.engine.diagnose import replay
    if run.outcome != "fail" or not any(f.rule in (INTRODUCED, DRIFT) for f in findings) or run.cancelled:
        return findings
    if budget <= 0:
        if replay.replayable(run.task) in ("fp16", "int8"):
            return [replace(f, text=f"{f.text} Ranking estimated: `accuscope advise --verify` converts the model "
                            "again without each top op and measures the output.", evidence={**f.evidence, "ranking":
                                                                                             "estimated"})
                    if f.rule == INTRODUCED else f for f in findings]
        return findings
    t0 = time.perf_counter()
    c = run.c
    ops = replay.ranked_ops(findings, origins, lambda r: str(c["golden_op"][r]))
    run.say("verifying: converting again without each top op", 0, min(budget, len(ops)))
    v = replay.verify(run.task, ops, budget, run.cancel, lambda p: run.say("verifying: converting again "
                                                                           "without each top op", p.done, p.total))
    run.timings["verify"] = time.perf_counter() - t0
    if not v.replayed:
        run.notes.append(f"headline not verified: {v.reason}")
    return replay.revise(findings, v, lambda op: run.ops[op][-1] if run.ops.get(op) else None)
