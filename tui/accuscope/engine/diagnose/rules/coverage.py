"""The coverage rule: too little compared to conclude anything (task.json coverage, written by
compare), or what was left out on purpose."""
from __future__ import annotations

from accuscope.engine.diagnose.advice import COVERAGE, Finding
from accuscope.engine.diagnose.rules.context import Context, finding
from accuscope.engine.diagnose.rules.rule import Rule


def coverage(run: Context) -> list[Finding]:
    """Too little compared to conclude anything (task.json coverage, written by compare)."""
    cov = run.task.doc.coverage
    warnings, notes = cov.get("warnings"), cov.get("notes")
    if not warnings or not isinstance(warnings, list):
        if notes and isinstance(notes, list):
            return [finding(run, COVERAGE, "info", None, f"not compared: {notes[0]}",
                             "These tensors are missing on purpose (the run that dumped them cannot reach them); "
                             "the verdict covers the rest.", {"unreachable": len(cov.get("unreachable") or [])})]
        return []
    text = "; ".join(str(w) for w in warnings)
    return [finding(run, COVERAGE, "warning", None, f"the comparison saw too little: {text}",
                     "Whatever the rows say, the model is not judged on what was not compared: a pass here is no "
                     "pass. Check that both sides come from the same model and run, give each side's model "
                     "(--model, --npu-model, --golden-model) so names can be paired, or a --mapping file.",
                     {k: cov[k] for k in ("npu_paired", "npu_total", "golden_used", "golden_total",
                                         "outputs_paired", "outputs_total") if k in cov})]


RULE = Rule(COVERAGE, coverage, reads=("task",))
