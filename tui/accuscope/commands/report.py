"""`accuscope report TASK_DIR --out report.html|report.md`: the verdict, findings and charts to paste."""
from __future__ import annotations

from pathlib import Path

from ..engine.diagnose.advisor import current_advice
from ..engine.report.document import WORST, build_report, write_report
from ..engine.sources.tensor import SourceError
from ..engine.tasks.task import load_task
from ..exitcode import ExitCode
from .common import err, out, show, with_status


def register(p) -> None:
    p.description = ("Write one file to paste into an issue or mail: the verdict, what the "
                     "comparison covered, the advisor's findings, the metric chart and the worst "
                     "ops' cumulative error curves (the app's charts, as SVG). report.html is "
                     "self-contained (inline SVG, no network needed to read it); report.md gets "
                     "its charts as SVG files beside it (report-metric.svg, ...). Uses the task's "
                     "advice.json when it is current, else advises first (and writes it). Exit 0: "
                     "written; 2: unusable task or --out.")
    p.add_argument("task", metavar="TASK_DIR")
    p.add_argument("--out", required=True, type=Path, metavar="FILE.html|FILE.md")
    p.add_argument("--worst", type=int, default=WORST, metavar="N",
                   help=f"error curves of this many failing ops (default {WORST}; 0: none)")
    p.add_argument("--metric", default="cos", help="metric of the chart over the rows (default cos)")
    p.set_defaults(handler=run)


def run(args) -> int:
    if args.out.suffix.lower() not in (".html", ".htm", ".md"):
        raise SourceError(f"{args.out}: --out must end in .html or .md")
    if not args.out.parent.is_dir():
        raise SourceError(f"{args.out.parent}: no such folder for --out")
    task = load_task(args.task)
    table, _ = task.result
    if args.metric not in table.metric_keys:
        raise SourceError(f"--metric {args.metric}: not a metric of {args.task}; it has "
                          f"{', '.join(table.metric_keys) or 'none'}")
    advice = None
    if len(table):
        try:
            advice = with_status("advising…", lambda progress: current_advice(task, progress))
        except SourceError as exc:
            err.print(f"no findings in the report: {show(exc)}", soft_wrap=True)
    report = with_status("reading the worst ops…", lambda _: build_report(task, advice, max(args.worst, 0),
                                                                           args.metric))
    written = write_report(report, args.out)
    out.print(f"wrote {show(str(written[0]))}" + (f" and {len(written) - 1} SVG files beside it"
                                                   if len(written) > 1 else "")
              + f" · {show(report.verdict)}", soft_wrap=True)
    return ExitCode.OK
