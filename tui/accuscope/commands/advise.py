"""`accuscope advise TASK_DIR`: which operator introduced the error, and what to do about it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..engine.diagnose.advice import Advice, evidence_text
from ..engine.diagnose.advisor import advise
from ..engine.diagnose.replay import BUDGET
from ..engine.tasks.task import load_task
from ..exitcode import ExitCode
from .answers import advice_json
from .common import out, show, with_status

MARKS = {"error": "[bold red]✗ error  [/]", "warning": "[yellow]! warning[/]", "info": "[cyan]i info   [/]"}


def register(p) -> None:
    p.description = ("Read a finished task and apply MindStudio's expert rules (float16 overflow, inconsistent "
                     "input, global verdict on the real network outputs) plus ours: which failing op introduced "
                     "its error (each failing op's framework op re-run on the NPU's own inputs with onnxruntime), "
                     "where NaN/inf first appear, and which preprocessing difference explains disagreeing inputs. "
                     "Writes TASK_DIR/advice.json. Exit 0: advice given; 2: unusable input.")
    p.add_argument("task", metavar="TASK_DIR", help="task folder written by `accuscope compare` (or the demo)")
    p.add_argument("--framework-model", metavar="FILE.onnx",
                   help="framework ONNX model to re-run ops from (default: task.json framework_model, the "
                        "task's ONNX model, or golden/model.onnx)")
    p.add_argument("--json", action="store_true", help="print the advice as JSON (the content of advice.json)")
    p.add_argument("--workers", type=int, help="threads re-running ops (default: all cores)")
    p.add_argument("--verify", type=int, nargs="?", const=BUDGET, default=0, metavar="N",
                   help=f"when the outputs fail and the candidate is a conversion accuscope can make again (fp16 by "
                        f"onnxconverter-common, int8 by onnxruntime's dynamic quantizer): convert the reference again "
                        f"with each of the N top-ranked ops (default {BUDGET}) kept in fp32, run it, and name the op whose "
                        f"exclusion helps the output most, with the measured gain (cached in TASK_DIR/replay.json)")
    p.set_defaults(handler=run)


def run(args) -> int:
    task = load_task(args.task)  # once: the advisor and --json's summary both read it
    advice = with_status("advising…", lambda progress: advise(
        task, args.framework_model, progress=progress, workers=args.workers, verify=max(0, args.verify)))
    if args.json:
        sys.stdout.write(json.dumps(advice_json(advice, task), indent=1, ensure_ascii=False) + "\n")
        return ExitCode.OK
    print_advice(advice)
    return ExitCode.OK


def print_advice(advice: Advice) -> None:
    """The findings, most important first, then one line on the per-op origins."""
    if advice.method == "rerun":
        how = (f"origins by re-running framework ops from {show(advice.framework_model)} "
               f"({show(advice.framework_source)})")
    elif advice.method == "reported":
        how = "origins by the dump tool's own single-layer figures (RKNN's error_analysis.txt)"
    else:
        how = "origins by the weaker input/output method"
    if advice.stage:  # a chain task: advised from the stage where its error enters (docs/chain.md)
        how = f"from the stage where the error enters, {show(advice.stage)} ({show(advice.advised)}/) · {how}"
    out.print(f"[bold]advice[/] for {show(str(advice.folder))} · {how}", soft_wrap=True)
    for f in advice.findings:
        where = f"row {f.row}" if f.row is not None else "—"
        out.print(f"{MARKS.get(f.severity, f.severity)} {where:>8}  [bold]{show(f.title)}[/]  "
                  f"[dim]({show(f.rule)})[/]", soft_wrap=True)
        out.print(f"    {show(f.text)}", soft_wrap=True)
        ev = evidence_text(f.evidence)
        if ev:
            out.print(f"    [dim]{show(ev)}[/]", soft_wrap=True)
    if advice.ops:
        counts = {k: sum(o.origin == k for o in advice.ops) for k in ("introduced", "inherited", "unknown")}
        out.print(f"failing ops {len(advice.ops)}: " + " · ".join(f"{k} {v}" for k, v in counts.items()))
    for note in advice.notes:
        out.print(f"  [dim]note: {show(note)}[/]", soft_wrap=True)
    if advice.written:
        out.print(f"wrote {show(str(Path(advice.folder) / 'advice.json'))} in {advice.seconds:.1f} s", soft_wrap=True)
    else:
        out.print(f"took {advice.seconds:.1f} s", soft_wrap=True)
