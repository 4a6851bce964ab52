"""The coverage rule: too little compared to conclude anything (task.json coverage, written by
compare), or what was left out on purpose."""
from __future__ import annotations

from accuscope.engine.diagnose.advice import COVERAGE, Finding
from accuscope.engine.diagnose.rules.context import Context, finding
from accuscope.engine.diagnose.rules.rule import Rule


def coverage(run: Context) -> list[Finding]:
    """What the comparison did not see (task.json coverage, written by compare), said beside the verdict:
    a coverage note never changes the verdict (judgement.verdict decides it, the exit code follows it)."""
    cov = run.task.doc.coverage
    warnings, notes = cov.get("warnings"), cov.get("notes")
    if not warnings or not isinstance(warnings, list):
        if notes and isinstance(notes, list):
            return [finding(run, COVERAGE, "info", None, f"coverage: {notes[0]}",
                             "; ".join(str(n) for n in notes) + ". The verdict covers what was compared.",
                             {"unreachable": len(cov.get("unreachable") or [])})]
        return []
    text = "; ".join(str(w) for w in warnings)
    how = ("Check that both sides come from the same model and run, give each side's model (--model, "
           "--npu-model, --golden-model) so names can be paired, or a --mapping file.")
    counts = {k: cov[k] for k in ("npu_paired", "npu_total", "golden_used", "golden_total", "outputs_paired",
                                  "outputs_total") if k in cov}
    if run.outcome == "pass":  # what passed was judged; what was not compared is said, not held against it
        return [finding(run, COVERAGE, "info", None, f"the verdict covers what was compared: {text}",
                         f"The verdict passes on every tensor it judged; {text} (not judged either way). " + how,
                         counts)]
    return [finding(run, COVERAGE, "warning", None, f"the comparison saw too little: {text}",
                     "The model is not judged on what was not compared. " + how, counts)]


RULE = Rule(COVERAGE, coverage, reads=("task", "outcome"))
