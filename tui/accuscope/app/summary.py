"""The summary strip of the task screen (the advisor's place once it has findings)."""
# lazy: app.advicescreen, engine.diagnose.advice
from __future__ import annotations

from typing import TYPE_CHECKING

from ..engine.compare.results import ResultTable
from ..engine.compare.summary import summarize
from ..engine.compare.thresholds import Thresholds
from .formatting import shown

if TYPE_CHECKING:
    from ..engine.compare.judgement import Basis
    from ..engine.diagnose.advice import Advice


# the verdict's outcome as the summary line starts (a mark and a word: never colour alone)
VERDICT_WORDS = {"pass": "[$mark-pass]✓ pass[/]", "fail": "[$mark-fail]✗ fail[/]", "unknown": "[$mark-warn]? unknown[/]"}


def summary_lines(table: ResultTable, thresholds: Thresholds, running: bool = False,
                  advice: Advice | None = None, advising: bool = False, warnings: list[str] | None = None,
                  counting: int | None = None, basis: Basis | None = None, chain: dict | None = None) -> list[str]:
    """Two lines at most: the advisor's main finding when there is advice, else the first failing
    row; then counts, after the verdict (judgement.verdict under `basis`: the one compare, show, advise
    and the report give) once the comparison is done. `counting`: the table holds the first rows of this
    many while the rest is read: no count and no verdict yet (the first rows passing says nothing of the rest)."""
    if counting is not None:
        return [f"[dim]counting: reading {counting:,} rows…[/]"]
    s = summarize(table, thresholds, basis)
    if not s.rows:
        return ["[dim]comparing: rows appear as they are computed…[/]" if running else "[dim]no rows[/]"]
    lines = []
    if chain and not running and chain.get("verdict") in VERDICT_WORDS:  # a chain task: where the error enters first
        stage = ""
        for st in chain.get("stages") or []:
            if isinstance(st, dict) and st.get("task") == ".":
                stage = f" · this table: {shown(st.get('label', ''))} against the reference"
        lines.append(f"chain {VERDICT_WORDS[chain['verdict']]} {shown(str(chain.get('line', '')).partition(': ')[2])}"
                     f"{stage} · [dim]s: stages[/]")
    if warnings and not running:  # the comparison saw too little: say so before any verdict
        lines.append(f"[$mark-warn]! saw too little:[/] {shown(warnings[0])}")
    if advice is not None and advice.primary is not None:
        from ..engine.diagnose.advice import (  # loaded with the advice: not before the first frame
            CHAIN,
            COVERAGE,
            VERDICT,
        )
        from .advicescreen import finding_line
        chained = bool(lines) and lines[0].startswith("chain ")  # its stage and op said above: not again
        findings = [f for f in advice.findings if not (chained and f.rule == CHAIN)]
        cause = next((f for f in findings if f.rule not in (VERDICT, COVERAGE)), None)
        top = findings[:1] + ([cause] if findings and cause is not None and findings[0].rule == VERDICT else [])
        if top:
            lines.append(" · ".join(finding_line(f) for f in top) + (f" · [dim]a: {len(advice.findings)} findings[/]"
                                                                      if len(advice.findings) > len(top) else ""))
    said = "" if running or s.verdict is None else f"{VERDICT_WORDS[s.verdict.outcome]} · "
    if s.first_failing is None:
        lines.append(f"{said or '[$mark-pass]✓[/] '}{s.counts_text()}" + (" so far" if running else ""))
    else:
        lines.append(f"{said or '[$mark-fail]✗[/] '}[$mark-fail]{s.counts_text()}[/] · first: {shown(s.first_text)}")
    extra = ["[dim]advisor working…[/]"] if advising else []
    if s.nonfinite:
        extra.append(f"[$mark-fail]{s.nonfinite:,} rows with NaN/inf on the NPU side[/]")
    if s.not_compared > s.device_only:
        extra.append(f"[$mark-warn]{s.not_compared - s.device_only:,} rows not compared[/] (see reason; x hides)")
    if s.device_only:
        extra.append(f"[dim]{s.device_only:,} device-only ops: the conversion's own, not compared (x hides)[/]")
    if extra:
        lines.append(" · ".join(extra))
    return lines[:2]
