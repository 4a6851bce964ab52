"""The advisor on a chain task (docs/chain.md): it reasons from the stage where the error enters, not from
the chain folder's own comparison (the last stage against the reference, whose failing rows carry the
error of every stage before it).

The chain is judged again under the task's thresholds (tasks.chainrun.chain_view: the stage and op of
entry). The advisor then runs on that stage's own step, its comparison with the stage before
(`steps/LABEL/`: where the error is introduced, not inherited; the first stage's step, and an entry
that no step shows alone, a drift, is its comparison with the reference): with the stage before as the
golden side, its ops are re-run from that stage's model on the entering stage's own inputs and their
reach measured on it (oprerun, reach), where those are runnable models (an ONNX chain of `accuscope
run`). What it says comes back in the chain folder's terms: its first finding (`CHAIN`) names the stage
and the op as the chain's verdict does, with what the re-run found about that op; the step's findings
and origins follow, their rows those of the chain folder's table (the same op by the reference's name:
chain.row_key; None where the last stage has no such op). A chain where no error enters is advised on
as ever, its first finding saying so and naming no stage.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from accuscope.engine.diagnose.advice import Advice, Finding, OpOrigin, fingerprint, save_advice
from accuscope.engine.diagnose.rules.introduced import INTRODUCED
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.chainrun import chain_view, inside
from accuscope.engine.tasks.task import ADVICE_JSON, Task, load_task

if TYPE_CHECKING:
    from accuscope.engine.compare.chain import Entry
    from accuscope.engine.compare.chainview import ChainView

CHAIN = "chain"  # the finding naming the stage and op where the error enters (or that none does)


def advise_chain(task: Task, advise: Callable[[Task, bool], Advice | None], write: bool = True) -> Advice | None:
    """The advice on a chain task (see the module's text); None for a task that is not a chain (the caller
    advises on it as ever) or when advising was cancelled. `advise(sub_task, write)`: advisor.advise on one
    comparison, as asked (its framework model: that of the comparison advised on, the stage before's model
    for a step). SourceError as it; a sub-task that cannot be read leaves the chain folder's own comparison
    advised on, with a note. advice.json is written into the advised sub-task and the chain folder (unless
    write=False)."""
    try:
        view = chain_view(task)
        if view is None:
            return None
        entry = view.judgement.entered
        stage = view.labels.index(entry.stage) if entry is not None else view.own
        advised = _advised(task, entry)
        sub = task if advised == "." else load_task(inside(task.folder, advised))
    except SourceError as exc:  # a sub-task gone or damaged: the chain folder's own comparison, as ever
        advice = advise(task, write)
        if advice is not None:
            advice.notes.append(f"the chain's stages could not be read ({exc}): advised on the chain folder's own "
                                "comparison (the last stage against the reference), not from the stage of entry")
        return advice
    sub.thresholds = task.thresholds  # the chain's, as judged (edited in the app, saved or not)
    advice = advise(sub, write and advised != ".")
    if advice is None:
        return None
    if advised != ".":
        advice = _in_chain_terms(advice, task, view, stage)
    first = _entry_finding(view, entry, advised, advice, stage)
    advice.findings.insert(0, first)
    advice.stage, advice.advised = (entry.stage, advised) if entry is not None else ("", advised)
    advice.written = False
    if write:
        try:
            save_advice(advice)
            advice.written = True
        except OSError as exc:
            advice.notes.append(f"could not write {ADVICE_JSON} into {task.folder}: {exc.strerror or exc}")
    return advice


def _advised(task: Task, entry: Entry | None) -> str:
    """The sub-task advised on, relative to the chain folder ("." for its own): the entering stage's step
    where its own step shows the error, else its comparison with the reference; "." where none enters."""
    if entry is None:
        return "."
    for st in (task.doc.chain or {}).get("stages") or []:
        if isinstance(st, dict) and st.get("label") == entry.stage:
            step, where = st.get("step"), st.get("task")
            if entry.own and isinstance(step, str) and step:
                return step
            return where if isinstance(where, str) and where else "."
    return "."


def _in_chain_terms(advice: Advice, task: Task, view: ChainView, stage: int) -> Advice:
    """The sub-task's advice with its rows those of the chain folder's table (view.own_row), kept in the chain
    folder (the same fingerprint as its own advice)."""
    sub_table = load_task(advice.folder).table if advice.folder != task.folder else task.table
    tensors = sub_table.columns["tensor"]

    def row(r: int | None) -> int | None:
        return view.own_row(stage, str(tensors[r])) if r is not None and 0 <= r < len(sub_table) else None

    findings = [replace(f, row=row(f.row)) for f in advice.findings]
    ops = []
    for o in advice.ops:
        rows = [m for m in (row(r) for r in o.rows) if m is not None]
        ops.append(replace(o, rows=rows))
    return replace(advice, folder=task.folder, findings=findings, ops=ops,
                   task={**fingerprint(task.doc, task.thresholds), "rows": len(task.table)})


def _entry_finding(view: ChainView, entry: Entry | None, advised: str, advice: Advice, stage: int) -> Finding:
    """The chain's verdict as the advice's first finding: the stage and op where the error enters, what the
    advisor on that stage's step found about the op; or that no error enters (no stage named)."""
    j = view.judgement
    if entry is None:
        severity = "info" if j.outcome == "pass" else "warning"
        return Finding(CHAIN, severity, f"the chain: {j.line()}",
                       "No stage's own step adds an error beyond its precision's noise, so no stage is named; the "
                       "advice below is on the chain folder's own comparison (the last stage against the reference).",
                       evidence={"stage": None, "verdict": j.outcome})
    what = "its step against " + (f"{entry.previous} ({advised}/)" if advised.startswith("steps") else
                                  f"the reference ({advised}/)")
    text = (f"The error is introduced at {entry.stage}, not inherited: the advice below is on {what}, "
            f"{entry.op} and the ops after it compared with what {entry.previous or 'the reference'} gave them.")
    origin = advice.origin_of(entry.op)
    evidence: dict = {"stage": entry.stage, "previous": entry.previous or None, "advised": advised,
                      "cos": entry.cos, "red": entry.red}
    said = next((f for f in advice.findings if f.op == entry.op and f.rule == INTRODUCED), None)
    if said is not None:
        text += f" {said.title}: {said.text}"
        evidence.update({k: v for k, v in said.evidence.items() if k in ("isolated_cos", "rerun_vs_golden_cos")})
    elif origin is not None:
        text += f" The advisor finds it {origin.origin} ({_method(origin)}){': ' + origin.why if origin.why else ''}."
    cause = advice.cause
    if cause is not None and cause.op and cause.op != entry.op:
        text += f" On that step the advisor names {cause.op} first: {cause.title}."
    return Finding(CHAIN, "error" if j.outcome == "fail" else "warning", f"the error {entry.line()}", text,
                   view.own_row(stage, entry.tensor), entry.op, entry.tensor, evidence)


def _method(o: OpOrigin) -> str:
    return {"rerun": "re-run on the stage's own inputs", "reported": "the dump tool's figures"}.get(
        o.method, "by its inputs' and output's errors")
