"""A task's result as one file to paste or attach: verdict, coverage, the advisor's findings and the
charts (as the app draws them) in HTML with inline SVG, or Markdown with the SVGs beside it. The
HTML needs nothing else to be read: no network, no scripts, no fonts from elsewhere."""
from __future__ import annotations

import html
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from accuscope import __version__
from accuscope.engine.compare import judgement
from accuscope.engine.compare.coverage import Coverage
from accuscope.engine.compare.summary import summarize
from accuscope.engine.diagnose.advice import Advice, Finding, evidence_text
from accuscope.engine.diagnose.chartdata import cumulative_curve, growth_series, metric_series
from accuscope.engine.diagnose.opdetail import C_DEFAULT
from accuscope.engine.diagnose.oppair import open_op
from accuscope.engine.report.svg import curve_svg, growth_svg, metric_svg
from accuscope.engine.sources.names import markdown_text, printable
from accuscope.engine.sources.outputfile import write_text
from accuscope.engine.sources.tensor import SourceError
from accuscope.engine.tasks.task import Task

CHART_POINTS = 700  # per series: about one per pixel of the chart's width
WORST = 3


@dataclass
class Chart:
    name: str  # file name stem of the Markdown variant's SVG: metric, growth, op1, ...
    caption: str
    svg: str


@dataclass
class Report:
    task: str
    folder: str
    created: str
    verdict: str  # one line: the advisor's first finding, else the rows' account
    severity: str  # "error", "warning", "info" or "ok"
    account: str  # `60/68 rows fail · first: #5 Conv2D: ...`
    coverage: str
    warnings: list[str]
    findings: list[Finding]
    charts: list[Chart]
    notes: list[str] = field(default_factory=list)
    chain: str = ""  # a chain task's stages and where the error enters (tasks/chainrun.py), "" for a pair


def chain_text(chain: dict | None) -> str:
    """`a chain of top -> tpu -> bmodel (this report: bmodel against the reference): fail: enters at tpu: ...`
    from task.json's `chain`; "" for a task that is not one."""
    stages = [st for st in (chain or {}).get("stages") or [] if isinstance(st, dict)]
    if not stages or chain is None:
        return ""
    own = next((str(st.get("label", "")) for st in stages if st.get("task") == "."), "")
    return (f"a chain of {' -> '.join(str(st.get('label', '')) for st in stages)}"
            + (f" (this report: {own} against the reference)" if own else "") + f": {chain.get('line', '')}")


def worst_rows(task: Task, advice: Advice | None, k: int) -> list[int]:
    """Up to k failing output rows of distinct ops: the ops the advisor says introduced the error
    (execution order), then the lowest cosine."""
    table, thresholds = task.result
    c = table.columns
    fail = judgement.evaluate(table, thresholds).fail & (c["io"] == "output")
    picked: list[int] = []
    ops = set()
    introduced = [r for o in (advice.introduced if advice else []) for r in o.rows[:1]]
    cos = table.numbers("cos") if "cos" in table.metric_keys else np.full(len(table), math.nan)
    by_cos = [int(r) for r in np.flatnonzero(fail)[np.argsort(np.nan_to_num(cos[fail], nan=2.0), kind="stable")]]
    for r in introduced + by_cos:
        if len(picked) >= k:
            break
        if 0 <= r < len(table) and fail[r] and c["npu_op"][r] not in ops:
            picked.append(r)
            ops.add(c["npu_op"][r])
    return picked


def build_report(task: Task, advice: Advice | None, worst: int = WORST, metric: str = "cos") -> Report:
    """The report of a loaded task with its advice (None: without findings). Opens the dumps of
    the `worst` ops for their error curves; an op whose dumps cannot be read gets a note instead."""
    table, thresholds = task.result
    s = summarize(table, thresholds, task.basis)
    account = s.counts_text() + (f" · first: {s.first_text}" if s.first_text else "") + \
        (f" · {s.judged}" if s.judged else "")  # tpu-mlir's ladder, the precision's own noise
    primary = advice.primary if advice is not None else None
    if primary is not None:
        verdict, severity = primary.title, primary.severity
    else:
        outcome = s.verdict.outcome if s.verdict is not None else "unknown"
        verdict, severity = (s.verdict.line(table.columns["tensor"]) if s.verdict is not None else account,
                             {"fail": "error", "unknown": "warning"}.get(outcome, "ok"))
    cov = task.doc.coverage if "coverage" in task.doc else None
    coverage = Coverage.from_meta(cov).line(len(set(table.columns["npu_op"]))) if cov is not None else \
        "not recorded (a result read from a CSV)"
    notes = [str(n) for n in cov.get("notes", [])] if cov is not None else []
    charts = [Chart("metric", "the metric over the execution order, as in the app's chart",
                    metric_svg(metric_series(table, np.arange(len(table)), thresholds,
                                             metric if metric in table.metric_keys else table.metric_keys[0],
                                             CHART_POINTS // 2)))] if len(table) and table.metric_keys else []
    for f in advice.findings if advice else []:
        points, label = growth_series(f)
        if len(points) > 1:
            charts.append(Chart("growth", f"how the error grows ({f.title})", growth_svg(points, label)))
            break
    for n, r in enumerate(worst_rows(task, advice, worst), 1):
        op, tensor = str(table.columns["npu_op"][r]), str(table.columns["tensor"][r])
        try:
            detail = open_op(task, tensor).detail()  # the opened task: its rows and plan, not read again
        except SourceError as exc:
            notes.append(f"no error curve for {op}: {exc}")
            continue
        if detail is None:
            continue
        curve = cumulative_curve(detail.sketch("abs"), C_DEFAULT, CHART_POINTS)
        charts.append(Chart(f"op{n}", f"#{table.columns['index'][r]} {op}: {detail.sketch('abs').sentence(C_DEFAULT)}",
                            curve_svg(curve, f"#{table.columns['index'][r]} {op}")))
    if advice is not None:
        notes += advice.notes
    return Report(task=task.folder.name, folder=str(task.folder), created=time.strftime("%Y-%m-%d %H:%M:%S"),
                  verdict=verdict, severity=severity, account=account, coverage=coverage,
                  warnings=task.doc.coverage_warnings, findings=list(advice.findings) if advice else [],
                  charts=charts, notes=notes, chain=chain_text(task.doc.chain))


# ------------------------------------------------------------------ HTML

MARKS = {"error": "✗", "warning": "!", "info": "i", "ok": "✓"}
CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; max-width: 800px;
       margin: 24px auto; padding: 0 16px; }
h1 { font-size: 20px; margin-bottom: 4px; } h2 { font-size: 16px; margin: 22px 0 6px; }
.meta, .evidence, figcaption { color: #666; font-size: 12px; } code { font-size: 12px; }
.verdict { padding: 10px 14px; border-left: 5px solid; background: #f6f6f6; font-weight: 600; }
.error { border-color: #d62728; } .warning { border-color: #ff8c00; } .info, .ok { border-color: #2e9e44; }
.finding { margin: 10px 0; } .finding .title { font-weight: 600; }
figure { margin: 14px 0; } svg { max-width: 100%; height: auto; border: 1px solid #ddd; }
"""


def _t(value) -> str:
    return html.escape(printable(str(value)))


def _finding_html(f: Finding) -> str:
    where = f" · row {f.row}" if f.row is not None else ""
    op = f" · <code>{_t(f.op)}</code>" if f.op else ""
    ev = evidence_text(f.evidence)
    return (f'<div class="finding {_t(f.severity)}"><div class="title">{MARKS.get(f.severity, "")} {_t(f.title)}</div>'
            f"<div>{_t(f.text)}</div><div class=\"evidence\">{_t(f.rule)} ({_t(f.source)}){where}{op}"
            + (f" · {_t(ev)}" if ev else "") + "</div></div>")


def render_html(r: Report) -> str:
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>accuscope report: {_t(r.task)}"
             f"</title><style>{CSS}</style></head><body>",
             f"<h1>accuscope report: {_t(r.task)}</h1>",
             f'<div class="meta">{_t(r.folder)} · {_t(r.created)} · accuscope {_t(__version__)}</div>',
             "<h2>Verdict</h2>", f'<div class="verdict {_t(r.severity)}">{MARKS.get(r.severity, "")} {_t(r.verdict)}</div>',
             f"<p>{_t(r.account)}</p>", *([f'<p class="chain">{_t(r.chain)}</p>'] if r.chain else []),
             "<h2>Coverage</h2>", f"<p>{_t(r.coverage)}</p>"]
    parts += [f'<p class="warning">⚠ {_t(w)}: the verdict covers only what was paired</p>' for w in r.warnings]
    if r.findings:
        parts.append("<h2>Findings</h2>")
        parts += [_finding_html(f) for f in r.findings]
    if r.charts:
        parts.append("<h2>Charts</h2>")
        parts += [f"<figure>{c.svg}<figcaption>{_t(c.caption)}</figcaption></figure>" for c in r.charts]
    if r.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_t(n)}</li>" for n in r.notes) + "</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


# ------------------------------------------------------------------ Markdown


def _md(value) -> str:
    return markdown_text(value)


def render_markdown(r: Report, files: dict[str, str]) -> str:
    """The same text; each chart an image link to its SVG file (`files`: chart name -> file name)."""
    lines = [f"# accuscope report: {_md(r.task)}", "",
             f"<code>{_t(r.folder)}</code> · {_md(r.created)} · accuscope {__version__}",  # no `code span`
             "", "## Verdict", "", f"**{MARKS.get(r.severity, '')} {_md(r.verdict)}**", "", _md(r.account), "",
             *([_md(r.chain), ""] if r.chain else []),
             "## Coverage", "", _md(r.coverage), ""]
    lines += [f"- ⚠ {_md(w)}: the verdict covers only what was paired" for w in r.warnings]
    if r.findings:
        lines += ["", "## Findings", ""]
        for f in r.findings:
            where = f" · row {f.row}" if f.row is not None else ""
            ev = evidence_text(f.evidence)
            lines += [f"- **{MARKS.get(f.severity, '')} {_md(f.title)}** ({_md(f.rule)}{where})", f"  {_md(f.text)}"]
            if ev:
                lines.append(f"  <sub>{_md(ev)}</sub>")
    if r.charts:
        lines += ["", "## Charts", ""]
        for c in r.charts:
            lines += [f"![{_md(c.caption)}]({files[c.name]})", "", f"*{_md(c.caption)}*", ""]
    if r.notes:
        lines += ["", "## Notes", ""] + [f"- {_md(n)}" for n in r.notes]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_report(r: Report, out: str | os.PathLike) -> list[Path]:
    """`out` ending in .html: one self-contained file; .md: the Markdown and its SVGs beside it
    (`STEM-metric.svg`, ...). Returns the files written; SourceError for another suffix."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".html", ".htm", ".md"):
        raise SourceError(f"{out}: the report is .html or .md, not {out.suffix or 'a name without a suffix'}")
    written = []
    files = {}
    if suffix == ".md":
        for c in r.charts:
            path = out.with_name(f"{out.stem}-{c.name}.svg")
            _write(path, '<?xml version="1.0" encoding="utf-8"?>\n' + c.svg + "\n")
            files[c.name] = path.name
            written.append(path)
    _write(out, render_html(r) if suffix != ".md" else render_markdown(r, files))
    return [out, *written]


def _write(path: Path, content: str) -> None:
    write_text(path, content)
