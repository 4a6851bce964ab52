"""`accuscope precision REF.onnx --to fp16|int8 --out DIR`: the smallest set of ops to keep in fp32
for a conversion to meet an accuracy target, found by trials (ranked, greedy, bisection, pruning),
and written out in the forms toolchains take."""
from __future__ import annotations

import argparse
import json
import math
import sys
import threading

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..engine.precision.convert import TARGETS
from ..engine.precision.evaluate import parse_target
from ..engine.precision.spec import PrecisionSpec
from ..engine.precision.trials import LOG
from ..engine.precision.workflow import Event, PrecisionResult, run_precision
from ..exitcode import ExitCode
from .answers import precision_json
from .common import err, out, show
from .dump import add_input_options, dump_options


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
        return value
    parse.__annotations__["return"] = kind  # what the MCP tool's parameter is typed as (mcptools)
    return parse


def register(p) -> None:
    p.description = ("Convert REF.onnx to fp16 (onnxconverter-common) or int8 (onnxruntime.quantization: dynamic, or "
                     "static with --calibration) and search the smallest set of ops to keep in fp32 for the network "
                     "outputs to meet --target against REF: the ops `accuscope sensitivity` ranks first, one at a "
                     "time; then a bisection over the ranked list and every other op; then pruning. Each trial is "
                     "logged in DIR/trials.jsonl as it finishes (the ops kept, the metric values, the seconds), and the log "
                     "ends in the list found; running again resumes. Writes DIR/result: the mixed-precision model, "
                     "the list in each toolchain's words (node_block_list.json, nodes_to_exclude.json, a tpu-mlir "
                     "qtable.txt, NNCF's ignored_scope.json, RKNN's rknn_hybrid.cfg, ATC's keep_dtype.cfg, AMCT's "
                     "amct_skip_layers.cfg, polygraphy.txt with --layer-precisions), precision.json (per node) and "
                     "task/ (the final model against REF, open it with `accuscope open`). Exit 0: target met; 1: not met; 2: unusable input.")
    p.add_argument("model", metavar="REF.onnx", help="the reference (fp32) ONNX model")
    p.add_argument("--to", required=True, choices=TARGETS, help="the conversion to search")
    p.add_argument("--out", required=True, metavar="DIR", help="the search folder (a search there resumes)")
    p.add_argument("--target", action="append", default=[], metavar="METRIC=VALUE",
                   help="what the network outputs must meet, on the worst output (default cos=0.99; repeatable: "
                        "all must hold; cos, euclid_sim, sqnr: at least; errors such as red, max_abs: at most)")
    p.add_argument("--calibration", metavar="DIR", help="int8: quantize statically, calibrating on the .npy "
                   "(single-input model) or .npz (by input name) samples of DIR")
    p.add_argument("--check", metavar="CMD", help="judge each candidate by running CMD instead: it gets the op list "
                   "(a file, one name a line) as its last argument and in $ACCUSCOPE_OPS_FILE, the converted model "
                   "in $ACCUSCOPE_MODEL; exit 0 means acceptable")
    p.add_argument("--max-trials", type=_positive(int), metavar="N", help="stop after N trials (in all, resumed ones too)")
    p.add_argument("--time", type=_positive(float), metavar="SECONDS", help="stop trying after SECONDS (this run)")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    add_input_options(p)
    p.set_defaults(handler=run)


def spec_of(args) -> PrecisionSpec:
    options = dump_options(args)
    targets = [parse_target(t) for t in args.target] or ([] if args.check else [parse_target("cos=0.99")])
    return PrecisionSpec(args.model, args.to, args.out, targets, options["inputs"], options["random_inputs"],
                         options["seed"], options["dims"], args.calibration, args.check, args.max_trials, args.time)


def run(args) -> int:
    spec = spec_of(args)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err.console, transient=True) as bar:
        task = bar.add_task("ranking the ops", total=args.max_trials)

        def on_event(e: Event) -> None:
            if e.stage == "trial" and e.trial:
                t = e.trial
                bar.update(task, completed=t.n, description=f"trial {t.n} {t.phase} · {len(t.keep)} op(s) in fp32 · "
                           f"{_values(t.values)} {'✓' if t.passed else '✗'}")
            else:
                bar.update(task, description=f"{e.stage}: {show(e.detail)}" if e.detail else e.stage)

        result = run_precision(spec, on_event, threading.Event())
    if args.json:
        sys.stdout.write(json.dumps(precision_json(result), indent=1, ensure_ascii=False) + "\n")
    else:
        print_result(result)
    return ExitCode.OK if result.outcome.met else ExitCode.FINDINGS


def _values(values: dict[str, float]) -> str:
    return " ".join(f"{k} {'—' if math.isnan(v) else f'{v:.6g}'}" for k, v in values.items()) or "checked"


def print_result(r: PrecisionResult) -> None:
    o = r.outcome
    targets = ", ".join(str(t) for t in r.targets) or "the --check command"
    if r.full is not None:
        out.print(f"full conversion: {_values(r.full.values)} ({'meets' if r.full.passed else 'fails'} {targets})"
                  + (f" — {show(r.full.error)}" if r.full.error else ""))
    if r.ranked:
        out.print(f"ranked first by sensitivity: {show(', '.join(r.ranked[:5]))}"
                  + (f" (+{len(r.ranked) - 5})" if len(r.ranked) > 5 else ""), soft_wrap=True)
    for t in o.trials:
        mark = "[green]✓[/]" if t.passed else "[red]✗[/]"
        what = show(", ".join(t.keep[:4]) + (f" … (+{len(t.keep) - 4})" if len(t.keep) > 4 else "")) or "none"
        out.print(f"  {t.n:>3} {t.phase:<6} {len(t.keep):>4} in fp32 · {_values(t.values)}"
                  + (f" · check exit {t.check}" if t.check is not None else "")
                  + f" {mark} {what}" + (f" [dim]({show(t.error)})[/]" if t.error else ""), soft_wrap=True)
    resumed = f", {r.resumed} from the log" if r.resumed else ""
    out.print(f"{len(o.trials)} trials ({o.ran} run now{resumed}) of {len(r.candidates)} candidate ops, {r.seconds:.1f} s")
    if o.met:
        out.print(f"[green]target met[/] keeping {len(o.keep)} op(s) in fp32: {show(', '.join(o.keep)) or 'none'}",
                  soft_wrap=True)
    else:
        out.print(f"[red]target not met[/]: {show(o.reason)}", soft_wrap=True)
    if o.reason and o.met:
        out.print(f"  [yellow]stopped early[/]: {show(o.reason)}; the set is the smallest passing one tried", soft_wrap=True)
    for key, path in r.files.items():
        out.print(f"  {key:<17} {show(str(path))}", soft_wrap=True)
    out.print(f"  {'trials':<17} {show(str(r.folder / LOG))}  (one JSON line a trial, then the list found)",
              soft_wrap=True)
    if r.task:
        out.print(f"  {'task':<17} {show(str(r.task))}  (accuscope open {show(str(r.task))})", soft_wrap=True)
    if r.files:
        print_recipe(r)
    for note in r.notes:
        out.print(f"  [dim]note: {show(note)}[/]", soft_wrap=True)


def print_recipe(r: PrecisionResult) -> None:
    """Whether the list works on the user's model as it is, and the command that reproduces the result."""
    measured = f": {_values(r.as_is)}" if r.as_is is not None else ""
    if not r.obstacles:
        out.print(f"the lists work on your model as it is{measured}", soft_wrap=True)
    else:
        verdict = "" if r.as_is_passed is None else (" (meets the target)" if r.as_is_passed else " (misses the target)")
        out.print(f"[yellow]the lists alone do not act on your model as measured[/]{show(measured)}{verdict}: "
                  f"{show('; '.join(r.obstacles))}", soft_wrap=True)
        out.print(f"  they name the nodes of {show(str(r.files['prepared']))} (your model with Constant weights as "
                  f"initializers, every node named): give the list with that model, as this command does", soft_wrap=True)
    out.print("reproduce: " + r.command, soft_wrap=True, markup=False)
