"""`accuscope export TASK_DIR --start OP --end OP [--out DIR] [--retest]`: a region as a runnable submodel."""
from __future__ import annotations

import math

from ..engine.export import folder as engine
from ..engine.export.layout import INSIDE, NO_ERROR, UNKNOWN, UPSTREAM
from ..exitcode import ExitCode
from .common import err, out, show

VERDICT_WORDS = {INSIDE: "INSIDE", UPSTREAM: "UPSTREAM", NO_ERROR: "NO ERROR", UNKNOWN: "UNKNOWN"}


def register(p) -> None:
    p.description = ("Export every op reachable from --start that leads to --end as a runnable "
                     "framework submodel (ONNX; a .prototxt for Caffe models) with its boundary "
                     "inputs and outputs from both sides (.npy and .bin), the golden and NPU dumps "
                     "of the ops inside and a manifest.json. On an offline-model (atc JSON) task, "
                     "names are device ops (a framework op name stands for the device op it was "
                     "fused into) and the framework ONNX model comes from task.json or "
                     "--framework-model. --retest runs the submodel on the NPU side's inputs and "
                     "says whether the error lives inside the region or came from upstream. "
                     "Exit 0: exported; 2: unusable input or an invalid selection (with the reason).")
    p.add_argument("task", metavar="TASK_DIR", help="task folder (task.json names the dumps and the model)")
    p.add_argument("--start", required=True, action="append", metavar="OP",
                   help="first op of the region (repeatable for several starts)")
    p.add_argument("--end", required=True, action="append", metavar="OP",
                   help="last op of the region (repeatable for several ends)")
    p.add_argument("--out", metavar="DIR", help="export folder (default: TASK_DIR/exports/START--END); a previous "
                                                "export there is replaced, any other folder refused")
    p.add_argument("--retest", action="store_true",
                   help="run the submodel on the NPU side's inputs and compare with the NPU side's outputs")
    p.add_argument("--dtype", choices=engine.DTYPES, default="float32",
                   help="dtype of the float boundary data files (default float32)")
    p.add_argument("--framework-model", metavar="FILE",
                   help="the framework ONNX model of an offline-model task (default: task.json framework_model)")
    p.add_argument("--dry-run", action="store_true", help="only list the selection and its boundary")
    p.set_defaults(handler=run)


def run(args) -> int:
    selection = engine.select_in_task(args.task, args.start, args.end, args.framework_model)
    for line in selection.describe():
        out.print(show(line), soft_wrap=True)
    if args.dry_run:
        return ExitCode.OK

    def progress(p) -> None:
        err.print(f"[{p.done}/{p.total}] {show(p.what)}", highlight=False)

    result = engine.export(args.task, selection, args.out, dtype=args.dtype, retest=args.retest,
                           progress=progress if err.is_terminal else None, framework_model=args.framework_model)
    assert result is not None  # None only when cancelled, and no cancel event is passed
    m = result.manifest
    missing = [f"{e['name']} ({side})" for e in m["boundary"]["inputs"] for side in ("golden", "npu")
               if not e.get(side)]
    out.print(f"exported {len(m['ops'])} framework ops to {show(str(result.out_dir))}: {show(m['model'])} "
              f"(checker {show(m['checker'])}), {len(m['boundary']['inputs'])} inputs, "
              f"{len(m['boundary']['outputs'])} outputs, {len(m['dumps']['golden'])} golden and "
              f"{len(m['dumps']['npu'])} NPU dump files", soft_wrap=True)
    if missing:
        out.print(f"  missing input data: {show(', '.join(missing))}", soft_wrap=True)
    for note in result.notes:
        out.print(f"  note: {show(note)}", soft_wrap=True)
    r = result.retest
    if r is not None:
        out.print(f"re-test: [bold]{VERDICT_WORDS.get(r.verdict, r.verdict)}[/] - {show(r.message)}", soft_wrap=True)
        for o in r.outputs:
            out.print(f"  {show(o.tensor)}: NPU vs golden cos {_num(o.parent_cos)}"
                      f"{' FAIL' if o.parent_broken else ''} · NPU vs re-run cos {_num(o.retest_cos)}"
                      f"{' FAIL' if o.retest_broken else ''} · re-run on golden vs golden cos {_num(o.golden_cos)}"
                      + (f" ({show(o.reason)})" if o.reason else ""), soft_wrap=True)
        if r.task_dir is not None:
            out.print(f"  re-test task: {show(str(r.task_dir))}", soft_wrap=True)
    out.print(f"took {result.seconds:.1f} s")
    return ExitCode.OK


def _num(x: float) -> str:
    return "NaN" if x is None or math.isnan(x) else f"{x:.6f}"
