"""`accuscope run REF CAND --out TASK`: the model-to-model flow in one command.

Both models are run on the same inputs (an ONNX model by onnxruntime, or OpenVINO with `--runtime` /
`--reference-runtime openvino`; an OpenVINO IR .xml by OpenVINO; a .tflite by LiteRT), every node output
dumped into the task folder (`TASK/dumps/{generation}/golden` and `.../npu`), then compared as `compare`
does (pairing by tensor names, which survive the renaming of nodes by converters and quantizers, OpenVINO's
and TFLite's post-training quantizer included) and, with
`--advisor`, advised on with the reference model as the framework model.
"""
# lazy: commands.chainreport, engine.precision.convert, engine.runs.litertrun, engine.runs.onnxmodel, engine.runs.openvinorun, engine.sources.outputfile, engine.tasks.task
from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..engine.compare.inputs import build_spec, inputs
from ..engine.runs.ortdump import Writes
from ..engine.sides.registry import detect
from ..engine.sources import kinds
from ..engine.sources.tensor import SourceError
from ..engine.tasks.task import DUMPS_DIR, TASK_JSON
from .common import err, out, show
from .compare import add_comparison_options, advise_if_asked, compare_and_report
from .dump import LITERT, OPENVINO, RUNTIMES, add_input_options, dump_options, dump_with_progress, runtime_of

if TYPE_CHECKING:
    from ..engine.compare.spec import CompareSpec
    from ..engine.runs.ortdump import DumpReport
    from ..engine.tasks.chainrun import Stage

DUMPS = DUMPS_DIR


def register(p) -> None:
    p.description = ("Run REF and CAND (e.g. the fp16 or int8 conversion of REF, an ONNX model, an OpenVINO "
                     "IR or a .tflite) on the same inputs, dump every node output of both into the task folder, "
                     "and compare CAND against REF operator by operator. Exit codes as compare.")
    p.add_argument("reference", metavar="REF", help="the reference model (the golden side): ONNX, OpenVINO IR .xml or .tflite")
    p.add_argument("candidate", metavar="CAND", help="the model under test (the NPU side): ONNX, OpenVINO IR .xml or .tflite")
    p.add_argument("more", metavar="CAND", nargs="*",
                   help="more models under test: with CAND, a chain of stages in pipeline order (fp32 -> "
                        "ORT-optimised -> fp16 ...), each MODEL or LABEL=MODEL; the verdict names the stage and the "
                        "op where the error enters (with --baseline: the ops that regressed; docs/chain.md)")
    add_input_options(p)
    p.add_argument("--reference-runtime", choices=RUNTIMES, default=None,
                   help="what runs REF when it is ONNX (--runtime is CAND's): onnxruntime (default) or openvino")
    add_comparison_options(p)
    p.set_defaults(handler=run)


def run(args) -> int:
    from .chainreport import chain_of, compare_chain_and_report
    chain = chain_of([args.candidate, *(args.more or [])], args.baseline)
    if chain is not None:
        spec, generation = dump_chain(args, chain.stages, dump_with_progress)
        code = compare_chain_and_report(spec, chain, args, advise_if_asked, reference=args.reference)
        drop_older_dumps(Path(args.out), generation)
        return code
    dumped = dump_sides(args, dump_with_progress)
    for name, how in {**dumped.golden.casts, **dumped.npu.casts}.items():
        err.print(f"[yellow]note:[/] input {show(name)} {show(how)} (the model's input type)")
    for side, report in (("reference", dumped.golden), ("candidate", dumped.npu)):
        for name, (_, how) in report.fed.items():
            if ", " in how and not how.startswith("given as"):  # paired by place, or moved to its layout
                err.print(f"[yellow]note:[/] the {side}'s input {show(name)}: {show(how)}")
    shapes = ", ".join(f"{show(k)} {list(v)}" for k, v in dumped.golden.inputs.items())
    (err if args.json else out).print(f"dumped {len(dumped.golden.written):,} reference and "
                                      f"{len(dumped.npu.written):,} candidate tensors "
                                      f"({dumped.golden.seconds + dumped.npu.seconds:.1f} s; inputs: {shapes})")
    code = compare_and_report(dumped.spec, args)
    drop_older_dumps(Path(args.out), dumped.generation)
    return code


class Dumped(NamedTuple):
    spec: CompareSpec  # the candidate's dump against the reference's, as `args` asks to judge them
    generation: Path  # TASK/dumps/{generation}: this run's dumps
    golden: DumpReport
    npu: DumpReport


def dump_sides(args, dump) -> Dumped:
    """Both models of `args` (REF, CAND, the input and judging options of `run`) dumped into the task
    folder args.out by `dump(model, out_dir, label, **options)` (dump.dump_with_progress, or the MCP
    server's, reporting progress to its client); on any failure nothing of this run is left."""
    def more(generation: Path, options: dict) -> None:
        if args.expected == "auto":
            args.expected = _expected_side(args, generation, options, dump)
    generation, reports = _dump_models(args, dump, [("CAND", args.candidate, "npu", "running the candidate")], more)
    values = {i.name: getattr(args, i.name) for i in inputs("judging")}
    spec = build_spec({**values, "npu": str(generation / "npu"), "golden": str(generation / "golden")})
    return Dumped(spec, generation, reports["golden"], reports["npu"])


def dump_chain(args, stages: list[Stage], dump) -> tuple[CompareSpec, Path]:
    """REF and every stage's model dumped as dump_sides does (`TASK/dumps/{generation}/golden` and
    `.../stages/LABEL`); the stages rewritten in place to name their dumps. The chain's spec (its NPU
    side the last stage's dump) and the generation's folder."""
    if args.expected:
        raise SourceError("--expected: one candidate's third side; a chain's stages are each other's reference")
    generation, _ = _dump_models(args, dump, [(f"CAND {s.label}", s.path, f"stages/{s.label}",
                                               f"running {s.label}") for s in stages])
    for k, s in enumerate(stages):
        stages[k] = s._replace(path=str(generation / "stages" / s.label))
    values = {i.name: getattr(args, i.name) for i in inputs("judging")}
    return build_spec({**values, "npu": stages[-1].path, "golden": str(generation / "golden")}), generation


def _dump_models(args, dump, candidates: list[tuple[str, str, str, str]],
                 more: Callable[[Path, dict], None] | None = None) -> tuple[Path, dict[str, DumpReport]]:
    """REF and the `candidates` ((flag, model, folder under the generation, what the bar says) each)
    dumped into a new generation of args.out (`more(generation, options)` then, inside the same cleanup);
    on any failure nothing of this run is left. The generation and the reports by folder ("golden" too)."""
    runtimes = {}
    models = [("REF", args.reference, args.reference_runtime, "--reference-runtime")] + \
        [(flag, path, args.runtime, "--runtime") for flag, path, _, _ in candidates]
    for flag, path, runtime, option in models:
        try:
            runtimes[flag] = runtime_of(path, runtime, option)
        except SourceError as exc:
            raise SourceError(f"{flag} {exc}") from None
    folder = Path(args.out)
    if os.path.lexists(folder) and not folder.is_dir():  # a file, a FIFO, a device: no task folder
        raise SourceError(f"--out {folder}: is {'a file' if folder.is_file() else 'no folder'}, not a task folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / TASK_JSON).exists():
        raise SourceError(f"--out {folder}: exists, holds files and is not a task folder; choose another")
    options = dump_options(args)
    generation = folder.resolve() / DUMPS / datetime.now().strftime("%Y%m%d%H%M%S%f")
    created = not folder.exists()
    files = Writes()  # each model's files are written while the next one runs
    reports = {}
    like = _input_dims(candidates[0][1], runtimes[candidates[0][0]]) if args.random_inputs else None
    try:
        reports["golden"] = dump(args.reference, str(generation / "golden"), "running the reference",
                                 runtime=runtimes["REF"], files=files, like=like, **options)
        # every candidate fed what the reference was, in its own layout (ortdump's counterpart)
        options = {**options, "inputs": None, "random_inputs": False, "counterpart": reports["golden"].fed}
        for flag, path, where, label in candidates:
            try:
                reports[where] = dump(path, str(generation / where), label, runtime=runtimes[flag], files=files,
                                      **options)
            except SourceError as exc:
                raise SourceError(f"{flag} {exc}") from None
        files.finish()
        if more is not None:
            more(generation, options)
    except BaseException:
        files.abandon()
        shutil.rmtree(generation, ignore_errors=True)
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return generation, reports


def _input_dims(model: str, runtime: str) -> list[tuple[str, list | None]] | None:
    """The (name, dims) of `model`'s inputs, read before it runs on `runtime`, which size the reference's
    dynamic random inputs (onnxmodel.feeds_for's `like`); None where they cannot be read."""
    from ..engine.runs import litertrun, onnxmodel, openvinorun
    try:
        if runtime == LITERT:
            return litertrun.input_dims(model)
        return openvinorun.input_dims(model) if runtime == OPENVINO else onnxmodel.input_dims(model)
    except SourceError:
        return None  # the candidate's own run says what is wrong with it


def _expected_side(args, generation: Path, options: dict, dump) -> str:
    """The third side made here (convert.as_candidate: the reference converted to fp16 as the candidate
    was, or an int8 candidate's own quantization simulated in float), run on the same inputs and dumped
    (TASK/dumps/{generation}/expected)."""
    import onnx

    from ..engine.precision.convert import as_candidate
    if detect(args.reference).kind != kinds.ONNX or detect(args.candidate).kind != kinds.ONNX:
        raise SourceError("--expected auto: made for two ONNX models (the reference converted as the candidate "
                          "was); for an OpenVINO IR give the reference run at the candidate's precision as a dump")
    from ..engine.sources.outputfile import atomic_path
    model, to = as_candidate(args.reference, args.candidate)
    generation.mkdir(parents=True, exist_ok=True)
    path = generation / f"expected-{to}.onnx"
    with atomic_path(path) as tmp:
        onnx.save(model, str(tmp))
    what = "the candidate's int8 simulated in float" if to.startswith("int8") else f"the reference at {to}"
    dump(str(path), str(generation / "expected"), f"running {what}", **options)
    path.unlink()
    return str(generation / "expected")


def drop_older_dumps(folder: Path, keep: Path) -> None:
    """Dumps of earlier runs into this task, once task.json names the new ones (a failed or
    cancelled run keeps the old result and so its dumps: then both stay)."""
    from ..engine.tasks.task import TaskFolder
    try:
        named = TaskFolder.at(folder).doc.golden or ""
    except SourceError:
        return
    if not named.startswith(str(keep)):
        return
    for old in keep.parent.iterdir():
        if old.name != keep.name and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
