"""The JSON objects the front doors answer with: what `--json` prints (compare, run, advise, show,
sensitivity, precision) and what the MCP server's tools return (mcpserver.py), built here once so a
script and an agent read the same keys. Plain dicts of plain values; nothing here prints.
"""
# lazy: engine.compare.summary, engine.tasks.chainrun
from __future__ import annotations

import math

import numpy as np

from ..engine.sources.names import printable


def first_failing_json(table, summary) -> dict | None:
    """The first failing row as the JSON outputs give it (show, compare --json, advise --json)."""
    if summary.first_failing is None:
        return None
    first = table.row(summary.first_failing)
    return {"row": int(summary.first_failing), "op": printable(str(first["npu_op"])),
            "tensor": printable(str(first["tensor"])), "broken": summary.broken}


def judgement_json(table, summary) -> dict:
    """The verdict of the judgement (engine/compare/judgement.py) as every JSON output gives it: the
    same answer as advise's verdict, the task screen, the browser and the report."""
    v = summary.verdict
    worst = None if v.worst is None else printable(str(table.columns["tensor"][v.worst]))
    return {"outcome": v.outcome, "scope": v.scope, "judged": len(v.judged), "failing": len(v.failing),
            "worst": worst, **({"why": v.why} if v.why else {}), **({"cause": v.cause} if v.cause else {})}


def advice_part(advice) -> dict:
    """The advisor's verdict and findings in compare's answer (`--advisor`); empty without advice."""
    return {"verdict": None if advice is None or advice.primary is None else advice.primary.to_dict(),
            "findings": [] if advice is None else [f.to_dict() for f in advice.findings]}


def result_json(folder, plan, summary, table, advice) -> dict:
    """What `compare --json` prints: stable keys for scripts (documented in the README)."""
    return {"task": str(folder), "sides": {"npu": plan.npu.kind, "golden": plan.golden.kind},
            "rows": summary.rows, "failing": summary.failing, "not_compared": summary.not_compared,
            "device_only": summary.device_only,
            "first_failing": first_failing_json(table, summary), "judgement": judgement_json(table, summary),
            "coverage": plan.coverage.to_meta(), "pairing": plan.coverage.ladder or None,
            "problems": [str(p) for p in plan.problems],
            **advice_part(advice)}


def chain_json(run) -> dict:
    """What `compare --json` adds for a chain of stages (tasks/chainrun.ChainRun), beside the chain
    folder's own comparison's keys: `entered` ({stage, op, tensor, ...}, null when no error enters),
    `regressions` ([{op, tensor, baseline, now}] worst first), `improvements`, `stages` (each stage's
    judgement against the reference and its step's task) and `chain` (verdict, line, baseline, now)."""
    from ..engine.tasks.chainrun import sub_tasks
    j = run.judgement
    stages = []
    for s in run.stages:
        sj = next(x for x in j.stages if x.label == s.label)
        table = run.against_reference[s.label].table
        task, step = sub_tasks(run, s.label)
        stages.append({"label": printable(s.label), "path": printable(s.path), "task": printable(task),
                       "verdict": {"outcome": sj.verdict.outcome, "line": printable(sj.verdict.line(table.columns["tensor"]))},
                       "rows": len(table), "failing": sj.failing, "own": len(sj.own),
                       "step": None if step is None else
                       {"task": printable(step), "against": printable(sj.before), "rows": len(run.steps[s.label].table)}})
    entered = None if j.entered is None else {k: printable(v) if isinstance(v, str) else v
                                              for k, v in j.entered.to_dict().items()}
    changes = lambda cs: [{k: printable(v) if isinstance(v, str) else v for k, v in c.to_dict().items()} for c in cs]
    return {"entered": entered, "regressions": changes(j.regressions), "improvements": changes(j.improvements),
            "stages": stages, "chain": {"verdict": j.outcome, "line": printable(j.line()), "baseline": j.baseline,
                                        "now": j.now, "problems": [printable(p) for p in run.problems]}}


def ranks_json(folder, run, summary, advice) -> dict:
    """What `compare --json` prints for a multi-rank comparison (rankrun.RanksRun): each rank's state too."""
    done = [r for r in run.results.values() if r["state"] == "done"]
    return {"task": str(folder), "sides": next((r["sides"] for r in done if r.get("sides")), {}),
            "rows": run.rows, "failing": run.failing,
            "first_failing": first_failing_json(run.table, summary) if summary is not None else None,
            "judgement": judgement_json(run.table, summary) if summary is not None else None,
            "lost": run.lost, "resumed": run.resumed, "problems": run.problems, "ranks": run.results,
            "pairing": (run.coverage or {}).get("ladder"),
            **advice_part(advice)}


def advice_json(advice, task) -> dict:
    """What `advise --json` prints: advice.json's content, plus the keys compare --json has for the same
    things (verdict, rows, failing, first_failing, coverage), so a script reads either the same way.
    `task`: the opened task the advice is on (not read again)."""
    from ..engine.compare.summary import summarize
    table, thresholds = task.result
    s = summarize(table, thresholds, task.basis)
    return {**advice.to_dict(), "verdict": None if advice.primary is None else advice.primary.to_dict(),
            "judgement": judgement_json(table, s),
            "rows": s.rows, "failing": s.failing, "first_failing": first_failing_json(table, s),
            "coverage": task.doc.coverage or None}


def cell(value):
    """A JSON-safe cell: NaN and inf become null, numpy scalars plain numbers, names printable."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return printable(value) if isinstance(value, str) else value


def show_json(task, summary, columns: list[str], rows) -> tuple[dict, str]:
    """What `show --format json` prints for the table rows `rows` (indices) and `columns`, and why the
    calls' stacks could not be read ("" when they could or there are none)."""
    table = task.table
    doc = {"task": str(task.folder), "state": task.doc.state, "rows": summary.rows,
           "failing": summary.failing, "not_compared": summary.not_compared,
           "device_only": summary.device_only, "first_failing": first_failing_json(table, summary),
           "judgement": judgement_json(table, summary),
           "coverage": task.doc.coverage or None, "warnings": task.doc.coverage_warnings, "columns": columns,
           "data": [[cell(table.columns[c][i]) for c in columns] for i in rows]}
    stacks, why = task.call_stacks()
    calls = dict.fromkeys(str(op) for op in table.columns["npu_op"][rows]) if stacks else {}
    if any(call in stacks for call in calls):
        doc["stack"] = {printable(call): [printable(line) for line in stacks[call]] for call in calls if call in stacks}
    return doc, why


def op_json(detail, info, by: str, above: float, count: int, files) -> dict:
    """`op`'s answer: the pair, the top elements by `by` error, the share above `above`, both sides'
    statistics, the worst channels and the files written (the MCP tool `op`)."""
    top = detail.top(by)
    sketch = detail.sketch(by)
    ch = detail.channels
    stats = lambda s: {k: cell(getattr(s, k)) for k in ("min", "max", "mean", "std", "nan", "inf")}
    return {"tensor": printable(info.tensor), "npu_op": printable(info.npu_op), "type": printable(info.op_type),
            "golden_op": printable(info.golden_op), "shape": [int(d) for d in detail.shape], "elements": int(detail.n),
            "dtypes": {"npu": str(info.npu_dtype), "golden": str(info.golden_dtype)}, "layout": detail.layout,
            "cosine": cell(detail.cosine), "max_abs": cell(detail.abs.max), "mean_abs": cell(detail.mean_abs),
            "max_rel": cell(detail.rel.max), "by": by,
            "top": [{"index": int(top.index[i]), "coords": top.coord_text(i), "npu": cell(top.npu[i]),
                     "golden": cell(top.golden[i]), "abs_err": cell(top.abs_err[i]), "rel_err": cell(top.rel_err[i]),
                     "nonfinite": bool(top.nonfinite[i])} for i in range(len(top))],
            "above": {"threshold": above, "count": int(count), "summary": sketch.sentence(above, count)},
            "nonfinite_one_side": int(sketch.nonfinite),
            "stats": {"npu": stats(detail.npu_stats), "golden": stats(detail.golden_stats)},
            "worst_channels": [] if ch is None or len(ch) < 2 else
            [{"channel": int(c), "cos": cell(ch.cos[c]), "max_abs": cell(ch.max_abs[c])} for c in ch.worst(3)],
            "files": [str(f) for f in files]}


def precision_json(r) -> dict:
    """What `precision --json` prints (workflow.PrecisionResult): the ops kept, the trials, the files."""
    o = r.outcome
    return {"met": o.met, "keep": o.keep, "reason": o.reason, "targets": [str(t) for t in r.targets],
            "trials": len(o.trials), "ran": o.ran, "resumed": r.resumed, "seconds": round(r.seconds, 3),
            "ranked": r.ranked, "candidates": len(r.candidates),
            "files": {k: str(v) for k, v in r.files.items()}, "task": str(r.task) if r.task else None,
            "as_is": {"values": r.as_is, "passed": r.as_is_passed, "obstacles": r.obstacles},
            "command": r.command, "notes": r.notes}
