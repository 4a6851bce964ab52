"""`accuscope dump MODEL --out DIR`: an npy dump of every node output, by onnxruntime (an ONNX model),
OpenVINO (an IR .xml, or an ONNX model with `--runtime openvino`) or LiteRT (a .tflite)."""
# lazy: engine.sides.registry, engine.sources.npyfile
from __future__ import annotations

import argparse
from collections import Counter

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..engine.runs.litertrun import dump_litert
from ..engine.runs.openvinorun import PRECISIONS, dump_openvino
from ..engine.runs.ortdump import OPTIMIZATION, dump_onnx
from ..engine.sources import kinds
from ..engine.sources.tensor import SourceError
from ..exitcode import ExitCode
from .common import err, out, show

ONNXRUNTIME, OPENVINO, LITERT = "onnxruntime", "openvino", "litert"
RUNTIMES = (ONNXRUNTIME, OPENVINO, LITERT)
# what runs each model kind (the first unless --runtime names another), and what the kind is called
RUNS_ON = {kinds.ONNX: ((ONNXRUNTIME, OPENVINO), "an ONNX model"),
           kinds.OPENVINO_IR: ((OPENVINO,), "an OpenVINO IR"),
           kinds.TFLITE: ((LITERT,), "a .tflite model")}


def _assignment(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=VALUE")
    return name, value


def register(p) -> None:
    p.description = ("Run MODEL with onnxruntime (an ONNX model), OpenVINO's CPU plugin (an IR .xml, or ONNX "
                     "with --runtime openvino) or LiteRT (a .tflite; int8 tensors read on their own scale and "
                     "zero point), fetching every node output, and write an npy folder in "
                     "MindStudio naming ({node}.{output}.{timestamp}.npy) plus the model that ran (model.onnx, "
                     "model.xml, model.tflite) and dump.json. Works on fp32, fp16 and int8 models alike.")
    p.add_argument("model", help="an ONNX model, an OpenVINO IR .xml (its .bin beside it) or a .tflite")
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
    p.add_argument("--runtime", choices=RUNTIMES, default=None,
                   help="what runs an ONNX model: onnxruntime (default) or openvino (its CPU plugin; pip install "
                        "'accuscope[openvino]'); an OpenVINO IR .xml always runs on openvino, a .tflite on litert "
                        "(pip install 'accuscope[litert]')")
    p.add_argument("--ov-precision", choices=PRECISIONS, default="f32",
                   help="OpenVINO's inference precision (default f32; `default`: the CPU plugin's own, bf16 on "
                        "CPUs with AVX512-BF16 or AMX, as deployed)")


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
            "optimization": args.ort_optimization, "dims": dims or None, "ov_precision": args.ov_precision}


def runtime_of(model: str, runtime: str | None, flag: str = "--runtime") -> str:
    """What runs `model` (RUNS_ON: an IR runs on openvino, a .tflite on litert, an ONNX model on `runtime`,
    onnxruntime unless named); SourceError for a file none of them is, or a runtime that does not run it."""
    from ..engine.sides.registry import detect
    kind = detect(model).kind
    if kind not in RUNS_ON:
        raise SourceError(f"{model}: not a model that runs here (an ONNX model, an OpenVINO IR .xml or a .tflite)")
    runtimes, what = RUNS_ON[kind]
    if runtime is not None and runtime not in runtimes:
        raise SourceError(f"{model}: {what} runs on {' or '.join(runtimes)}, not {runtime} ({flag})")
    return runtime or runtimes[0]


def dump_with_progress(model: str, out_dir: str, label: str = "dumping", runtime: str | None = None,
                       ov_precision: str = "f32", include_constants: bool = False, **options):
    """Dump `model` on its runtime (dump_on_runtime), a bar on the terminal meanwhile."""
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err.console, transient=True) as bar:
        task = bar.add_task("dump", total=None)
        progress = lambda p: bar.update(task, completed=p.done, total=p.total)  # noqa: E731
        return dump_on_runtime(model, out_dir, progress, runtime, ov_precision, include_constants, **options)


def dump_on_runtime(model: str, out_dir: str, progress, runtime: str | None = None, ov_precision: str = "f32",
                    include_constants: bool = False, **options):
    """Dump `model` on its runtime (runtime_of: onnxruntime, OpenVINO for an IR or when asked, LiteRT for a
    .tflite), `progress` fed meanwhile; the options one runtime does not have are refused naming it."""
    runtime = runtime_of(model, runtime)
    if runtime == ONNXRUNTIME:
        return dump_onnx(model, out_dir, progress=progress, include_constants=include_constants, **options)
    name = {OPENVINO: "OpenVINO", LITERT: "LiteRT"}[runtime]
    if options.pop("optimization", "off") != "off":
        raise SourceError(f"{model}: --ort-optimization is onnxruntime's; {name} runs the model as it reads it")
    if include_constants:
        raise SourceError(f"{model}: --include-constants is onnxruntime's; {name}'s weights are not dumped")
    if runtime == OPENVINO:
        return dump_openvino(model, out_dir, progress=progress, precision=ov_precision, **options)
    if ov_precision != "f32":
        raise SourceError(f"{model}: --ov-precision is OpenVINO's; LiteRT runs a .tflite at the types it holds")
    return dump_litert(model, out_dir, progress=progress, **options)


def run(args) -> int:
    report = dump_with_progress(args.model, args.out, runtime=args.runtime, include_constants=args.include_constants,
                                **dump_options(args))
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
