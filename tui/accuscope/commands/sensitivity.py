"""`accuscope sensitivity TASK_DIR`: the ops ranked by the error each one made by itself, and the
framework op names to keep out of a conversion (no new runs of the model)."""
from __future__ import annotations

import argparse
import json
import math
import sys

from rich.table import Table

from ..engine.diagnose.sensitivity import Ranking, sensitivity
from ..exitcode import ExitCode
from .common import Name, out, show, with_status


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of ops (1, 2, ...)")
    return int(text)


def register(p) -> None:
    p.description = ("Rank a finished task's failing ops by the error each one introduced by itself (the advisor's "
                     "re-run of its framework op on the NPU side's own inputs: 1 - isolated cos, isolated rel. "
                     "error), with what it breaks, whether it introduced or inherited its error, the conversion's "
                     "change that explains it (when both ONNX models are at hand) and the network outputs' error. "
                     "Prints the framework op names of the ops that introduced error as onnxconverter-common's "
                     "node_block_list and onnxruntime.quantization's nodes_to_exclude. Reuses TASK_DIR/advice.json "
                     "when current, else advises first. Exit 0: ranked; 2: unusable input.")
    p.add_argument("task", metavar="TASK_DIR", help="task folder written by `accuscope compare` or `accuscope run`")
    p.add_argument("--framework-model", metavar="FILE.onnx",
                   help="framework ONNX model to re-run ops from (default: as `accuscope advise` finds it)")
    p.add_argument("--top", type=_count, metavar="N", help="only the N first ranked ops (and their names in the lists)")
    p.add_argument("--json", action="store_true", help="print the ranking and the lists as JSON")
    p.add_argument("--workers", type=int, help="threads re-running ops when advising (default: all cores)")
    p.set_defaults(handler=run)


def run(args) -> int:
    ranking = with_status("ranking…", lambda progress: sensitivity(
        args.task, args.framework_model, progress=progress, workers=args.workers))
    recipe = ranking.recipe(args.top)
    if args.json:
        sys.stdout.write(json.dumps(ranking.to_dict(args.top, recipe), indent=1, ensure_ascii=False) + "\n")
        return ExitCode.OK
    print_ranking(ranking, args.top, recipe)
    return ExitCode.OK


def _num(v: float | None, digits: int = 4) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}g}"


def print_ranking(r: Ranking, top: int | None = None, recipe: dict | None = None) -> None:
    how = (f"own error by re-running framework ops from {show(r.framework_model)}" if r.method == "rerun"
           else "own error by the dump tool's single-layer figures (RKNN's error_analysis.txt)"
           if r.method == "reported" else "own error by the weaker input/output method")
    out.print(f"[bold]sensitivity[/] of {show(str(r.folder))} · {how}", soft_wrap=True)
    worst = ", ".join(f"cos {_num(c)} rel. error {_num(e)}" for c, e in zip(r.output_cos, r.output_red))
    out.print(f"network outputs: {show(r.verdict)}" + (f" ({worst})" if worst else ""), soft_wrap=True)
    ops = r.top(top)
    if not ops:
        out.print("no failing op to rank: every op meets the thresholds")
    else:
        table = Table(show_edge=False, pad_edge=False, caption="ranked by out.cos, the network output's cos "
                      "with only the op's own error (where the advisor measured it), then by its own error: 1-cos "
                      "and rel.err of its output against its framework op (← where named otherwise) re-run on the "
                      "same inputs" if r.method == "rerun" else None, caption_justify="left")
        for col in ("#", "op", "out.cos", "1-cos", "rel.err", "breaks", "origin", "cause"):
            table.add_column(col, justify="right" if col in ("#", "out.cos", "1-cos", "rel.err") else "left",
                             no_wrap=col in ("out.cos", "1-cos", "rel.err", "origin", "cause"))
        for i, o in enumerate(ops, 1):
            cos = None if o.isolated_cos is None else 1 - o.isolated_cos
            chain = "" if o.chain == [o.op] else "← " + (", ".join(o.chain) or "—")
            table.add_row(str(i), Name(o.op, chain), _num(o.output_cos_alone), _num(cos, 3), _num(o.isolated_red, 3),
                          show(o.broken_text),
                          show(o.origin), show(o.cause or "—"))
        out.print(table)
        for i, o in enumerate(ops, 1):
            if o.changes:
                out.print(f"  #{i} {show(o.op)} ({show(o.type)}), {show(o.cause)}: {show('; '.join(o.changes))}",
                          soft_wrap=True)
        if any(o.minor for o in ops):
            out.print("  [dim]ops that break only mean_rel come last: the mean relative error is large where golden "
                      "values are near zero, not a sign of a wrong op[/]", soft_wrap=True)
    names = r.block_list(top)
    out.print("node_block_list (onnxconverter-common float16): " + json.dumps(names), soft_wrap=True, markup=False)
    out.print("nodes_to_exclude (onnxruntime.quantization):    " + json.dumps(names), soft_wrap=True, markup=False)
    if recipe is not None:
        print_recipe(recipe)
    for note in r.notes:
        out.print(f"  [dim]note: {show(note)}[/]", soft_wrap=True)



def print_recipe(recipe: dict) -> None:
    """Whether the lists act on the user's model as they are, else the prepared model they name, and the
    command giving each converter its list."""
    for to, converter in (("fp16", "onnxconverter-common"), ("int8", "onnxruntime.quantization")):
        why = recipe["obstacles"][to]
        if why:
            out.print(f"[yellow]{converter}: the list alone does not act on your model[/]: {show('; '.join(why))}; "
                      f"it names the nodes of {show(str(recipe['prepared']))} (Constant weights as initializers, "
                      "every node named)", soft_wrap=True)
        out.print(f"  {to}: " + recipe["commands"][to], soft_wrap=True, markup=False)
