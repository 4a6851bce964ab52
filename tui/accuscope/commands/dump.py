"""`accuscope dump MODEL.onnx --out DIR`: a golden npy dump of every node output, via onnxruntime."""
from __future__ import annotations

import argparse
from collections import Counter

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..engine.runs.ortdump import OPTIMIZATION, dump_onnx
from ..engine.sources.tensor import SourceError
from ..exitcode import ExitCode
from .common import err, out, show


def _assignment(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=VALUE")
    return name, value


def register(p) -> None:
    p.description = ("Run MODEL with onnxruntime, fetching every node output, and write a golden "
                     "npy folder in MindStudio naming ({node}.{output}.{timestamp}.npy) plus "
                     "model.onnx and dump.json. Works on fp32, fp16 and int8 models alike.")
    p.add_argument("model")
    p.add_argument("--out", required=True, help="output folder (must not hold npy files yet)")
    add_input_options(p)
    p.add_argument("--include-constants", action="store_true", help="also dump Constant node outputs (weights)")
    p.set_defaults(handler=run)


def add_input_options(p) -> None:
    """How a model is fed and run: the options of `dump` and `run`."""
    p.add_argument("--input", action="append", type=_assignment, default=[], metavar="NAME=FILE.npy",
                   help="a network input from an .npy file (repeatable)")
    p.add_argument("--random-inputs", action="store_true", help="generate inputs not given with --input")
    p.add_argument("--seed", type=int, default=0, help="seed of --random-inputs (default 0)")
    p.add_argument("--dim", action="append", type=_assignment, default=[], metavar="NAME=SIZE",
                   help="size of a dynamic dimension for random inputs (repeatable)")
    p.add_argument("--ort-optimization", choices=list(OPTIMIZATION), default="off",
                   help="onnxruntime graph optimization (default off, so node names survive)")


def dump_options(args) -> dict:
    """dump_onnx's keyword arguments from add_input_options' flags (input files read here)."""
    from ..engine.sources.npyfile import user_npy
    inputs = {name: user_npy(path, f"--input {name}= file") for name, path in args.input}
    dims = {}
    for name, value in args.dim:
        if not value.isdigit():
            raise SourceError(f"--dim {name}={value}: the size must be a positive integer")
        dims[name] = int(value)
    return {"inputs": inputs, "random_inputs": args.random_inputs, "seed": args.seed,
            "optimization": args.ort_optimization, "dims": dims or None}


def dump_with_progress(model: str, out_dir: str, label: str = "dumping", **options):
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err.console, transient=True) as bar:
        task = bar.add_task("dump", total=None)
        return dump_onnx(model, out_dir, progress=lambda p: bar.update(task, completed=p.done, total=p.total),
                         **options)


def run(args) -> int:
    report = dump_with_progress(args.model, args.out, include_constants=args.include_constants, **dump_options(args))
    for name, how in report.casts.items():
        err.print(f"[yellow]note:[/] input {show(name)} {show(how)} (the model's input type)")
    shapes = ", ".join(f"{show(k)} {list(v)}" for k, v in report.inputs.items())
    out.print(f"wrote {len(report.written):,} tensors to {show(report.out_dir)} in {report.seconds:.1f} s"
              f" (inputs: {shapes})")
    if report.skipped:
        reasons = Counter(r.split(":")[0] for _, r in report.skipped)
        out.print(f"skipped {len(report.skipped):,}: " + "; ".join(f"{show(r)} ({n})" for r, n in reasons.items()))
        out.print("  the full list is in dump.json")
    return ExitCode.OK
